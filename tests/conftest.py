"""Fixtures for the zellij-swarm tests; the helpers they use live in swarmtest.py."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from swarmtest import Swarm, kill_run_processes, scrub, wait_until
from tmuxtest import Tmux, private_tmux
from zellijtest import FakeZellij


@pytest.fixture(autouse=True)
def _scrubbed_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Never touch a developer's real Zellij or tmux session (SPEC §10)."""
    scrub(monkeypatch)


@pytest.fixture
def swarm(tmp_path: Path) -> Swarm:
    return Swarm(tmp_path)


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


@pytest.fixture
def interrupted_run(swarm: Swarm) -> Iterator[Path]:
    """A run whose supervisor was killed (-9) while its first task ran and its second waited."""
    swarm.write("s.toml", '[swarm]\njobs = 1\n[[task]]\nname = "a"\ncmd = "while [ ! -e go ]; do sleep 0.05; done"\n'
                          '[[task]]\nname = "b"\ncmd = "echo fine"\n')
    proc = swarm.popen("run", "s.toml", "--output", "quiet", "--backend", "headless")
    run = wait_until(lambda: swarm.runs() and swarm.runs()[0], what="run dir")
    try:
        wait_until(lambda: (run / "slots/slot-1/gen-1/claim").exists(), what="the worker started")
        wait_until(lambda: (run / "run.json").exists(), what="run.json")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        (swarm.cwd / "go").touch()
        yield run
    finally:
        (swarm.cwd / "go").touch()
        if proc.poll() is None:
            proc.kill()
        kill_run_processes(run.name)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``full`` (more versions, signals, sources of a case CI already runs) run
    only with ZSW_FULL_MATRIX=1, so that CI stays within its time on 2 cores."""
    if os.environ.get("ZSW_FULL_MATRIX"):
        return
    skip = pytest.mark.skip(reason="a neighbour of a case CI runs: ZSW_FULL_MATRIX=1 (scripts/test-full) runs it")
    for item in items:
        if "full" in item.keywords:
            item.add_marker(skip)
