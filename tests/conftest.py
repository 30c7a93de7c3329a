"""Fixtures for the zellij-swarm tests; the helpers they use live in swarmtest.py."""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
import reaper
from realzellij import RealZellij, versions
from slurmtest import cluster  # noqa: F401  (the real-cluster fixture of every test_slurm*.py)
from swarmtest import Swarm, kill_run_processes, scrub, wait_until
from tmuxtest import Tmux, private_tmux
from zellijtest import FakeZellij

from zellij_swarm.records.rundir import RunPaths
from zellij_swarm.worker import wrapper

_REAPER = pytest.StashKey[subprocess.Popen]()


def pytest_configure(config: pytest.Config) -> None:
    """Mark what this process's tests start, and watch for this process dying without a
    teardown (tests/reaper.py)."""
    os.environ[reaper.MARK] = mark = secrets.token_hex(8)
    config.stash[_REAPER] = subprocess.Popen(
        [sys.executable, reaper.__file__, str(os.getpid()), mark], start_new_session=True,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={k: v for k, v in os.environ.items() if k != reaper.MARK})


def pytest_unconfigure(config: pytest.Config) -> None:
    """This process tore its tests down: what it leaves running, it meant to."""
    watcher = config.stash.get(_REAPER, None)
    if watcher is not None:
        watcher.kill()
        watcher.wait()


@pytest.fixture(autouse=True)
def _scrubbed_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Never touch a developer's real Zellij or tmux session (SPEC §10)."""
    scrub(monkeypatch)


@pytest.fixture
def swarm(tmp_path: Path) -> Swarm:
    return Swarm(tmp_path)


@pytest.fixture
def run(tmp_path: Path) -> RunPaths:
    """A run directory holding the run's one headless wrapper (``worker.sh``), as a
    supervisor writes it: for tests that start generations through it by hand."""
    paths = RunPaths(tmp_path / "runs" / "20260511T101500-abcd")
    paths.dir.mkdir(parents=True)
    paths.worker_script.write_text(wrapper.run_script("r"))
    return paths


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    """A private tmux server for one test."""
    with private_tmux() as t:
        yield t


@pytest.fixture
def fz() -> Iterator[FakeZellij]:
    """The fake zellij first on PATH with a private socket dir; every process of it ends with the test."""
    f = FakeZellij()
    try:
        yield f
    finally:
        f.cleanup()


def _real_zellij(which: str) -> Iterator[RealZellij]:
    z = RealZellij(versions()[which])
    try:
        yield z
    finally:
        z.cleanup()


@pytest.fixture
def rz() -> Iterator[RealZellij]:
    """The real Zellij of CI's version (scripts/zellij-versions), private to one test."""
    yield from _real_zellij("ci")


@pytest.fixture
def rz_pre044() -> Iterator[RealZellij]:
    """The real Zellij before 0.44 (built on demand by scripts/zellij-matrix), private to one test."""
    yield from _real_zellij("pre044")


@pytest.fixture
def interrupted_run(swarm: Swarm) -> Iterator[Path]:
    """A run whose supervisor was killed (-9) while its first task ran and its second waited,
    after a snapshot that shows it running (a run killed before its first is a case of its
    own: readers say so)."""
    swarm.write("s.toml", '[swarm]\njobs = 1\n[[task]]\nname = "a"\ncmd = "while [ ! -e go ]; do sleep 0.05; done"\n'
                          '[[task]]\nname = "b"\ncmd = "echo fine"\n')
    proc = swarm.popen("run", "s.toml", "--output", "quiet", "--backend", "headless")
    run = swarm.started()
    try:
        wait_until(lambda: (run / "slots/slot-1/gen-1/claim").exists(), what="the worker started")
        # and a snapshot that says so: killed before its first, the run's record is damaged
        # (``status``: missing, though the event log says tasks started), not just interrupted
        swarm.wait_counts(run, running=1)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        (swarm.cwd / "go").touch()
        yield run
    finally:
        (swarm.cwd / "go").touch()
        if proc.poll() is None:
            proc.kill()
        kill_run_processes(run.name)


_VERSION = re.compile(r"0\.\d+\.\d+")
_FAKE_ZELLIJ_SUITES = frozenset({"test_zellij_transcripts.py", "test_zellij_matrix.py", "test_zellij_semantics.py",
                                 "test_zellij_faults.py", "test_zellij_backend.py", "test_zellij_layout.py"})


def _tier(item: pytest.Item) -> str | None:
    """The tier a test runs in besides the fast one (scripts/test): ``real_zellij`` (it uses
    the real Zellij), ``slurm`` (the real local cluster), ``fake`` (the fake Zellij: its own
    tests, the Zellij backend's suites against it, every other test's Zellij cases, and the
    replays of the real one's transcripts), ``tmux`` (a real tmux server: the tmux backend's
    tests and every other test's tmux cases)."""
    path = Path(str(item.fspath))
    fixtures = getattr(item, "fixturenames", ())
    if "rz" in fixtures or "rz_pre044" in fixtures or "real-zellij" in item.name:
        return "real_zellij"
    if path.name.startswith("test_slurm"):
        return "slurm"
    if path.parent.name == "fake_zellij" or path.name in _FAKE_ZELLIJ_SUITES or _on_the_fake(item, fixtures):
        return "fake"
    if "tmux" in fixtures or _a_case_of(item, lambda v: v.startswith("tmux")):
        return "tmux"
    return None


def _a_case_of(item: pytest.Item, backend: Callable[[str], bool]) -> bool:
    """The test is the case of a test parametrised over backends that ``backend`` names."""
    callspec = getattr(item, "callspec", None)
    values = callspec.params.values() if callspec is not None else ()
    return any(isinstance(v, str) and backend(v) for v in values)


def _on_the_fake(item: pytest.Item, fixtures: Sequence[str]) -> bool:
    """The test drives the fake Zellij: it takes the ``fz`` fixture, or is the Zellij case
    (a ``zellij…`` backend, a Zellij version) of a test parametrised over backends."""
    return "fz" in fixtures or _a_case_of(item, lambda v: v.startswith("zellij") or _VERSION.fullmatch(v) is not None)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each test gets the marker of its tier (``_tier``; none: the fast tier). Tests marked
    ``full`` (more versions, signals, sources of a case CI already runs) run only with
    ZSW_FULL_MATRIX=1, so that CI stays within its time on 2 cores."""
    for item in items:
        if (tier := _tier(item)) is not None:
            item.add_marker(getattr(pytest.mark, tier))
    if os.environ.get("ZSW_FULL_MATRIX"):
        return
    skip = pytest.mark.skip(reason="a neighbour of a case CI runs: ZSW_FULL_MATRIX=1 (scripts/test-full) runs it")
    for item in items:
        if "full" in item.keywords:
            item.add_marker(skip)
