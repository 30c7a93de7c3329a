"""Test helpers: a scrubbed environment, a ``Swarm`` runner for the real CLI, schema checks,
and a check that no process of a run is left behind (SPEC §10 test hygiene). The fixtures
that use them are in conftest.py."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import fakeprocs
import jsonschema
import pytest
from zygote import ForkServer

from zellij_swarm.records import rundir, snapshot_file

if TYPE_CHECKING:
    import psutil

SCHEMAS = Path(__file__).resolve().parent.parent / "zellij_swarm" / "schemas"
_SCRUB_PREFIXES = ("ZELLIJ", "TMUX", "ZELLIJ_SWARM_")


# A worker that holds its run open until the test is ready: the shell waits for the file ``gate``
# in the run's cwd, which ``Swarm.open_gate`` creates. A gate, never a sleep the run might outlast.
GATE = "until [ -e gate ]; do sleep 0.02; done"
# An agent that saves its work on SIGTERM (half a second), then exits 0: ``saver.py`` of a
# test's directory, run there; it writes its pid to ``saver.pid`` and its steps to ``ledger``.
SAVER = """\
import os, signal, sys, time
def saved(signum, frame):
    with open("ledger", "a") as f: f.write("save-begin\\n")
    time.sleep(0.5)
    with open("ledger", "a") as f: f.write("save-end\\n")
    sys.exit(0)
signal.signal(signal.SIGTERM, saved)
with open("saver.pid.new", "w") as f: f.write(str(os.getpid()))
os.rename("saver.pid.new", "saver.pid")
with open("ledger", "a") as f: f.write("start\\n")
while True: time.sleep(60)
"""


def in_private_mount(tmp_path: Path, mount_opts: str, script: str,
                     env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``script`` (in ``tmp_path``, with ``env``, else ``clean_env``) with a tmpfs mounted at
    tmp_path/state in a private mount namespace: a state directory that can fill or be read-only."""
    state = tmp_path / "state"
    state.mkdir()
    full = f"mount -t tmpfs -o {mount_opts},mode=700 tmpfs {state} && {script}"
    return subprocess.run(["unshare", "-m", "sh", "-c", full], cwd=tmp_path, capture_output=True, text=True,
                          env=env if env is not None else clean_env(), timeout=120)


def needs_unshare(tmp_path: Path) -> None:
    """Skip unless this machine gives a private mount namespace (``in_private_mount``)."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare is not installed")
    probe = subprocess.run(["unshare", "-m", "sh", "-c", f"mount -t tmpfs tmpfs {tmp_path}"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"no private mount namespace here: {probe.stderr.decode().strip()}")


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_SCRUB_PREFIXES) and k != "CI"}
    env.update(extra)
    return env


def scrub(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith(_SCRUB_PREFIXES) or key == "CI":
            monkeypatch.delenv(key)


def schema(name: str) -> dict[str, Any]:
    return json.loads((SCHEMAS / f"{name}.schema.json").read_text())


def validate(obj: Any, name: str) -> None:
    jsonschema.validate(obj, schema(name))


def wait_until(predicate: Callable[[], Any], timeout: float = 30.0, interval: float = 0.02, what: str = "",
               seen: Callable[[], object] | None = None) -> Any:
    """Poll ``predicate`` until it returns something truthy, or fail after ``timeout``. The
    deadline is for a loaded CI machine (2 cores, two test workers, dozens of processes):
    a run's first worker once took over 10 s to start there. It costs nothing when the
    awaited thing happens: the wait ends then. ``seen``, called once the wait has failed,
    says what there was instead: a rare failure is then explained by its own output. A file
    the predicate reads that is not there yet (``FileNotFoundError``) is a thing not happened
    yet — a record written later than usual on a busy machine failed tests so — and named in
    the failure if the wait ends so."""
    deadline = time.monotonic() + timeout
    missing: FileNotFoundError | None = None
    while True:
        try:
            value, missing = predicate(), None
        except FileNotFoundError as e:
            value, missing = None, e
        if value:
            return value
        if time.monotonic() > deadline:
            instead = f"; instead: {seen()!r}" if seen is not None else f"; last: {missing}" if missing else ""
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}{instead}")
        time.sleep(interval)


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str


FORK_SERVER = ForkServer(clean_env)  # the commands' runs, forked from an interpreter that has imported them


class Swarm:
    """Runs ``zellij-swarm`` as a user would, in a private working directory."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.state_dir = cwd / ".zellij-swarm"

    def cmd(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "zellij_swarm", *args]

    def __call__(self, *args: str, input: str | None = None, env: dict[str, str] | None = None,
                 timeout: float = 120) -> Result:
        env = env or clean_env()
        forked = FORK_SERVER.run(args, self.cwd, env, input, timeout)
        if forked is not None:
            return Result(*forked)
        p = subprocess.run(self.cmd(*args), cwd=self.cwd, input=input, capture_output=True, text=True,
                           env=env, timeout=timeout, errors="replace")
        return Result(p.returncode, p.stdout, p.stderr)

    def popen(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
        return subprocess.Popen(self.cmd(*args), cwd=self.cwd, env=env or clean_env(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)

    def open_gate(self) -> None:
        """Let the workers waiting at ``GATE`` go on."""
        (self.cwd / "gate").touch()

    def write(self, name: str, text: str) -> Path:
        path = self.cwd / name
        path.write_text(text)
        return path

    def runs(self) -> list[Path]:
        """The run directories: not the probe file ``run`` creates and removes in ``runs/``
        to check it can (``rundir.check_can_create``), which a look at the wrong moment saw."""
        root = self.state_dir / "runs"
        return sorted(p for p in root.iterdir() if not p.name.startswith(".")) if root.exists() else []

    def started(self, timeout: float = 30.0) -> Path:
        """The first run, once the commands see it (``rundir.all_runs``): its directory is
        made before its ``run.json`` is written, and until then ``status`` says there is no run."""
        return wait_until(lambda: next((r for r in self.runs() if rundir.has_record(r / "run.json")), None),
                          timeout=timeout, what="a run with its run.json")

    def wait_counts(self, run: Path, **counts: int) -> None:
        """Until ``status --json`` of ``run`` counts its tasks so (``running=2``): a snapshot
        the supervisor has written with them."""
        def shown() -> bool:
            doc = json.loads(self("status", "--json", run.name).stdout)
            return all(doc["counts"].get(status) == n for status, n in counts.items())

        wait_until(shown, what=f"a snapshot with {counts}")

    def latest(self) -> Path:
        runs = self.runs()
        assert runs, "no run directory was created"
        return max(runs, key=lambda p: json.loads((p / "run.json").read_text())["started_at"])

    def summary(self, run: Path | None = None) -> dict[str, Any]:
        """The run's summary, whole: every task row (``snapshot_file.load`` merges the rows
        file it names), as ``status --json`` shows it."""
        data = snapshot_file.load((run or self.latest()) / "summary.json")
        validate(data, "status")
        return data

    def tasks(self, run: Path | None = None) -> dict[str, dict[str, Any]]:
        return {t["name"]: t for t in self.summary(run)["tasks"]}


def run_processes(run_id: str) -> list[int]:
    from zellij_swarm.worker import procs

    return [p.pid for p in procs.marked(procs.run_markers(run_id)) if fakeprocs.alive(p)]


def launcher_of(supervisor_pid: int, *, not_pid: int | None = None) -> psutil.Process | None:
    """The supervisor's launcher (``worker._launcher``), its child, but for ``not_pid``."""
    import psutil

    try:
        kids = psutil.Process(supervisor_pid).children()
    except psutil.NoSuchProcess:
        return None
    for p in kids:
        try:
            if p.pid != not_pid and any(a.endswith("_launcher.py") for a in p.cmdline()):
                return p
        except psutil.NoSuchProcess:
            continue
    return None


def alive(pid: int) -> bool:
    """Process ``pid`` runs (a zombie — ended, not yet reaped — does not)."""
    import psutil

    try:
        return fakeprocs.alive(psutil.Process(pid))
    except psutil.NoSuchProcess:
        return False


def kill_run_processes(run_id: str) -> None:
    """Every process of the run ends: those its markers name, and the shells that run a file
    of its directory — a wrapper that runs its worker's shell loop itself (``eval``) has the
    markers only in what it exports, and outlived a failed test's cleanup, looping at its
    gate. (A shell, with that file as an argument of its own: a tmux server's command line is
    the client's that started it, a pane's command in one of its arguments.)"""
    import psutil

    from zellij_swarm.worker import procs

    in_its_dir = f"/runs/{run_id}/"

    def found() -> list[psutil.Process]:
        marked = procs.marked(procs.run_markers(run_id))
        seen = {m.pid for m in marked} | {os.getpid()}
        named = []
        for p in psutil.process_iter():
            try:
                argv = p.cmdline()
                if p.pid not in seen and argv \
                        and argv[0].endswith("sh") and any(in_its_dir in a and " " not in a for a in argv[1:]):
                    named.append(p)
            except psutil.Error:
                continue
        return [*marked, *named]

    # again until none is found: a wrapper looked at before it forked its worker forks it
    # meanwhile (a worker left so waited at its gate for an hour)
    for _ in range(5):
        if not (left := found()):
            return
        procs.end_all(left, 1.0)


def full(*values: Any) -> Any:
    """A parameter set that CI skips: a neighbour of one it runs (``full`` marker, conftest)."""
    return pytest.param(*values, marks=pytest.mark.full)


class Running:
    """``zellij-swarm run ARGS`` in the background, as a context (``r.proc``, ``r.run``). On the
    way out its gates (``go``, ``go2``) open, it has ``settle`` seconds to end (0: none, it is
    killed), and every process of it ends whatever the test's outcome."""

    def __init__(self, swarm: Swarm, *args: str, env: dict[str, str] | None = None, settle: float = 60.0) -> None:
        self.swarm, self.args, self.env, self.settle = swarm, args, env, settle

    def __enter__(self) -> Running:
        self.proc = self.swarm.popen("run", *self.args, env=self.env)
        self.run: Path | None = None
        try:
            self.run = wait_until(lambda: self.swarm.runs() and self.swarm.runs()[0], what="run dir")
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *_: object) -> None:
        for gate in ("go", "go2"):
            (self.swarm.cwd / gate).touch()
        try:
            self.proc.wait(timeout=self.settle)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        if self.run is not None:
            kill_run_processes(self.run.name)

    def killed(self) -> None:
        """``kill -9`` of its supervisor."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)


def killed_outright(process: Any) -> None:
    """``kill -9`` of ``process`` (a ``psutil.Process``), returning once it has exited (a
    zombie, or reaped): its children are its reaper's by then. A wrapper killed as its worker
    ends may yet reap that worker — the signal is acted on when it next runs, which on a busy
    machine can be after the worker's end — and die with the end unwritten: a kill the test
    meant to come first would then not have (a fast-tier run under load, 2 in 55)."""
    process.kill()
    wait_until(lambda: not fakeprocs.alive(process), what=f"pid {process.pid} gone")


def running_worker(run: Path, name: str, timeout: float = 60.0) -> int:
    """Once the worker ``name`` runs under the first generation that wrote its launch
    heartbeat: that heartbeat's pid (the wrapper's; a pane's leader)."""

    def launched() -> int | None:
        for beat in run.glob("slots/slot-*/gen-*/heartbeat.jsonl"):
            for line in beat.read_text().splitlines():
                if '"started"' in line:
                    return int(json.loads(line)["pid"])
        return None

    pid: int = wait_until(launched, timeout=timeout, what="the launch heartbeat")
    wait_until(lambda: child_named(pid, name), timeout=timeout, what=f"the worker {name} runs")
    return pid


def child_named(pid: int, name: str) -> Any:
    """A descendant of ``pid`` whose name is ``name`` (a ``psutil.Process``), else None. A
    short-lived one gone as it is looked at (a gate loop's ``sleep 0.02``) is passed over: it
    failed a test now and then."""
    import psutil

    for child in psutil.Process(pid).children(recursive=True):
        try:
            if child.name() == name:
                return child
        except (psutil.Error, OSError):
            continue
    return None


def run_to_its_end(swarm: Swarm, file: str, backend: str, request: pytest.FixtureRequest) -> Any:
    """``run FILE --output quiet`` on ``backend`` (``backend_args``), to its end: its result,
    once no process of the run is left (any that is, is killed and fails the test)."""
    args, env = backend_args(backend, request)
    try:
        res = swarm("run", file, *args, "--output", "quiet", env=env, timeout=60)
        assert run_processes(swarm.latest().name) == []
    finally:
        kill_run_processes(swarm.latest().name)
    return res


def backend_args(backend: str, request: pytest.FixtureRequest) -> tuple[tuple[str, ...], dict[str, str] | None]:
    """Flags and environment for a run on ``backend``: headless, tmux (live), zellij-<version>
    (live, against the fake zellij) or real-zellij[-pre044] (live, the real binary); the multiplexer's
    fixture is taken from ``request``."""
    from tmuxtest import outside_env
    from zellijtest import FAST

    if backend == "headless":
        return (), None
    if backend == "tmux":
        return ("--backend", "tmux", "--ui", "live"), outside_env(request.getfixturevalue("tmux"))
    if backend == "real-zellij":  # the real binary of CI's version (tests/realzellij.py)
        return ("--backend", "zellij", "--ui", "live"), request.getfixturevalue("rz").env(**FAST)
    if backend == "real-zellij-pre044":  # the real binary before 0.44
        return ("--backend", "zellij", "--ui", "live"), request.getfixturevalue("rz_pre044").env(**FAST)
    version = backend.split("-", 1)[1]
    return ("--backend", "zellij", "--ui", "live"), request.getfixturevalue("fz").env(version, **FAST)


def printing_swarm(swarm: Swarm, count: int) -> None:
    """``s.toml``: ``count`` tasks ``t1``… at once, task N printing N × 300 lines and then
    ``END-N`` (the end that a copy read too early misses)."""
    tasks = "".join(f'[[task]]\nname = "t{i}"\ncmd = "seq 1 {300 * i}; echo END-{i}"\n' for i in range(1, count + 1))
    swarm.write("s.toml", f"[swarm]\njobs = {count}\n" + tasks)


def assert_whole_outputs(swarm: Swarm, run: Path, stdout: str, count: int, joblog: str = "jobs.tsv") -> None:
    """After ``printing_swarm``: every task's whole output was copied to ``stdout`` and is in
    its log, and the joblog's ``Receive`` of each is its log's size."""
    assert sorted(line.split("END-")[1] for line in stdout.splitlines() if "END-" in line) == \
        [str(i) for i in range(1, count + 1)], stdout[-2000:]
    received = {r[-1].split("END-")[1]: int(r[5]) for r in
                (line.split("\t") for line in (swarm.cwd / joblog).read_text().splitlines()[1:])}
    for name, row in swarm.tasks().items():
        log = run / f"slots/slot-{row['slot']}/gen-{row['generation']}/output.log"
        assert b"END-" + name[1:].encode() in log.read_bytes()
        assert received[name[1:]] == log.stat().st_size, name
