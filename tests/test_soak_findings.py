"""Defects scripts/soak found, each as the smallest real run that shows it (issue 22's soak
phases: a cancel race, a state directory filled mid-run)."""

from __future__ import annotations

import errno
import json
import os
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest
from harness import Harness, Mux, Pane, Work, task
from swarmtest import GATE, in_private_mount, kill_run_processes, needs_unshare, wait_until
from test_state_dir_full import patch_full
from tmuxtest import outside_env

from zellij_swarm.records import generation_files, log, rundir


@pytest.fixture
def full(monkeypatch: pytest.MonkeyPatch) -> dict[str, bool]:
    """The state directory is full while ``state["full"]``: rundir says so, and the two writes
    a pane generation needs from the supervisor fail as on a full disk — its wrapper script
    and the supervisor's claim. (Patched in: run these scenarios one at a time.)"""
    state = patch_full(monkeypatch)

    def enospc_while_full(real: Callable[..., Any]) -> Callable[..., Any]:
        def write(*args: Any, **kwargs: Any) -> Any:
            if state["full"]:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return real(*args, **kwargs)
        return write

    monkeypatch.setattr(rundir, "write_new", enospc_while_full(rundir.write_new))
    monkeypatch.setattr(generation_files, "take_claim", enospc_while_full(generation_files.take_claim))
    return state


def test_a_pane_generation_whose_wrapper_cannot_be_written_waits_for_room(full):
    """SPEC §5.8: a generation that could not be made is withdrawn and its task waits, first
    in line, for room — in a pane as headless. A pane's went to the pane-fault path instead,
    which takes the generation's claim to run it headless: on a full disk that write fails
    too, and the OSError ends the supervisor (an internal error, the run left interrupted)."""
    with Harness(works={"a": (Work(after=1),)}, mux=Mux()) as h:
        h.world.at(3, lambda: full.update(full=False))
        r = h.run([task("a")])
    a = r.tasks["a"]
    assert (a.status, a.attempts, [str(x.status) for x in a.history]) == ("succeeded", 1, ["succeeded"])
    r.assert_order("dispatch_held", "task_requeued a", "dispatch_resumed", "worker_completed a")
    assert r.exit_code == 0


def test_a_pane_that_never_reported_while_the_state_dir_is_full_is_taken_back_once_there_is_room(full):
    """A pane whose wrapper never reported (it could not write its claim on the full disk)
    reaches its launch-heartbeat deadline while the disk is still full: the supervisor's own
    claim cannot be written either. That must hold the run until there is room — not raise
    OSError out of the event loop, as it did (found by the soak's disk-full phase on tmux)."""
    full["full"] = False
    with Harness(works={"a": (Work(after=1),)}, mux=Mux(panes={"a": (Pane(starts=False),)})) as h:
        h.world.at(0.5, lambda: full.update(full=True))
        h.world.at(3, lambda: full.update(full=False))
        r = h.run([task("a")])
    a = r.tasks["a"]
    assert (a.status, a.attempts) == ("succeeded", 1)
    assert "state_dir_error" in r.warnings() and r.exit_code == 0
    assert r.at("worker_completed a") >= 3.0, "nothing ran while the state dir was full"


class _LogFileOnAFullDisk:
    """The event log's file as a full disk makes it: every flush is refused with ENOSPC
    while ``state["full"]`` (its lines stay in the buffer, as a refused write leaves them)."""

    def __init__(self, real: Any, state: dict[str, bool]) -> None:
        self._real, self._state = real, state

    def write(self, text: str) -> int:
        return int(self._real.write(text))

    def flush(self) -> None:
        if self._state["full"]:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self._real.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def _refuse_the_event_log(monkeypatch: pytest.MonkeyPatch, full: dict[str, bool]) -> None:
    opened = log.EventLog.__init__

    def on_full_disk(self: log.EventLog, *args: Any, **kwargs: Any) -> None:
        opened(self, *args, **kwargs)
        self._file = _LogFileOnAFullDisk(self._file, full)  # type: ignore[assignment]

    monkeypatch.setattr(log.EventLog, "__init__", on_full_disk)


def _refuse_the_snapshot(monkeypatch: pytest.MonkeyPatch, full: dict[str, bool]) -> None:
    real = log.write_atomic

    def write_atomic(*args: Any, **kwargs: Any) -> None:
        if full["full"]:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(*args, **kwargs)

    monkeypatch.setattr(log, "write_atomic", write_atomic)


@pytest.mark.parametrize("refuse", [_refuse_the_event_log, _refuse_the_snapshot], ids=["event_log", "snapshot"])
def test_a_record_refused_on_a_full_disk_holds_dispatch_once_and_is_written_again_once_there_is_room(
        full, monkeypatch, refuse):
    """The disk-full soak, headless. When the full disk refused a write of the run's own
    records, the error was kept for the rest of the run, and every loop turn declared the
    state directory full again: after the room came back, dispatch was held and resumed
    once a second (up to 35 times; a 4 s round took 36 s). When it was the event log, it
    was also replaced with /dev/null for good: no event after the fill reached
    events.jsonl — every later exit record, run_finished — and it ended in a torn line.
    SPEC §5.8: held once, until there is room; §7: the event log holds every exit record."""
    refuse(monkeypatch, full)
    full["full"] = False
    names = [f"t{i}" for i in range(6)]
    with Harness(works={n: (Work(after=1),) for n in names}, jobs=1) as h:
        h.world.at(1.5, lambda: full.update(full=True))
        h.world.at(3, lambda: full.update(full=False))
        r = h.run([task(n) for n in names])
    assert r.exit_code == 0 and {str(t.status) for t in r.tasks.values()} == {"succeeded"}
    assert sum("is full or cannot be written: no new task starts" in p for p in r.problems) == 1, r.problems
    assert sum("has room again: new tasks start" in p for p in r.problems) == 1, r.problems
    assert sorted(e["task"] for e in r.events if e["event"] == "worker_completed") == names, r.labels
    assert r.labels[-1] == "run_finished"


def test_a_pane_generation_dispatched_into_a_full_state_dir_waits_for_room_instead_of_crashing_the_run(tmp_path, tmux):
    """The disk-full soak with --backend tmux (SPEC §5.8): a live pane's generation whose
    wrapper cannot be written while the state directory is full must be withdrawn and wait
    for room, as a headless one is. It went to the pane-fault path instead, whose supervisor
    claim could not be written either: `internal error: OSError: [Errno 28] No space left on
    device`, the run left interrupted with its panes running."""
    needs_unshare(tmp_path)
    tasks = 40
    ledger = tmp_path / "ledger"
    (tmp_path / "t.txt").write_text("".join(f"sleep 0.1; echo t{i} >> {ledger}\n" for i in range(tasks)))
    env = f"TMUX_TMPDIR={tmux.tmpdir} ZELLIJ_SWARM_PANE_HOLD_MS=300 ZELLIJ_SWARM_HEARTBEAT_TIMEOUT_MS=5000"
    zsw = f"{env} {sys.executable} -m zellij_swarm"
    held = "no new task starts until it has room again"
    script = (f"{zsw} run -j 4 --backend tmux --ui live --state-dir state t.txt --json --output quiet > summary.json "
              "2> err & run=$!; "
              f'until [ "$(cat ledger 2>/dev/null | wc -l)" -ge 8 ] || ! kill -0 $run; do sleep 0.02; done; '
              "head -c 16M /dev/zero > state/filler 2>/dev/null; "
              f"until grep -q '{held}' err || ! kill -0 $run; do sleep 0.02; done; "  # it noticed, or ended
              "sleep 1; rm state/filler; wait $run; code=$?; cat err >&2; exit $code")
    res = in_private_mount(tmp_path, "size=8m", script)
    assert "internal error" not in res.stderr and "Traceback" not in res.stderr, res.stderr
    assert res.returncode in (0, 1), res.stderr
    assert "is full or cannot be written" in res.stderr and "has room again" in res.stderr, res.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    outcomes = Counter((t["status"], t["reason"]) for t in summary["tasks"])
    # a pane worker whose end nobody could record is unknown; every other task succeeded
    assert set(outcomes) <= {("succeeded", None), ("unknown", "state_dir_error")}, outcomes
    assert (res.returncode == 1) == (("unknown", "state_dir_error") in outcomes)
    assert sorted(ledger.read_text().split()) == sorted(f"t{i}" for i in range(tasks)), "each ran once"


def _pane_wrapper(gen: Path) -> tuple[psutil.Process, psutil.Process] | None:
    """The shell that records the exit of the pane generation in ``gen`` — its own
    wrapper.sh at its second stage, under the pane leader — and its worker (the command that
    appends to the ledger), once that runs: a child met before it (a subshell on its way to
    its exec) may be gone by the time it is looked at."""
    for p in psutil.process_iter(["cmdline"]):
        if (p.info["cmdline"] or [])[1:3] == [str(gen / "wrapper.sh"), "restored"]:
            try:
                workers = [c for c in p.children() if "ledger" in " ".join(c.cmdline())]
            except psutil.NoSuchProcess:
                continue
            if workers:
                return p, workers[0]
    return None


def _exited(worker: psutil.Process) -> bool:
    """The worker has exited: a zombie, its stopped wrapper not reaping it — or, once in a CI
    run under load, gone, reaped (the wrapper continued by something outside the test); the
    run's outcome is checked all the same, only the held window was not."""
    try:
        return worker.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _termed(p: psutil.Process) -> bool:
    """SIGTERM is pending at ``p`` (stopped, it cannot act on it yet)."""
    with open(f"/proc/{p.pid}/status") as f:
        pending = [int(v, 16) for k, v in (line.split(":\t", 1) for line in f) if k in ("SigPnd", "ShdPnd")]
    return any(mask & (1 << (signal.SIGTERM - 1)) for mask in pending)


LADDER_ROUND = 5.0  # seconds: far more than one round of the kill ladder takes (a /proc scan and the signals)


def test_a_pane_worker_that_ended_before_a_cancel_keeps_its_success_while_its_wrapper_writes_its_exit(swarm, tmux):
    """The cancel-race soak with --backend tmux (SPEC §5.7, issue 22.1): a pane worker that
    exited 0 just before a halt was recorded `cancelled`, exit 0, and `retry` ran it again
    (its ledger line twice). Between its worker's exit and its exit sidecar a pane's wrapper
    — the second-stage shell under the pane leader — still runs; the ladder's SIGTERM
    reaches it and was counted as reaching the worker (the pid the supervisor follows is
    the pane leader's, so the wrapper looked like one of the worker's processes): the kill
    was `sent` before the sidecar's time. Here that moment is held open: the wrapper is
    stopped from before its worker's exit until the cancel's first round of signals is
    done (the SIGTERM pending at it; or, had the ladder spared it as it spares a headless
    wrapper, a round's time after the kill reason is written)."""
    swarm.write("t.toml", f"[[task]]\nname = \"t\"\ncmd = '{GATE}; echo t >> ledger'\n")
    proc = swarm.popen("run", "t.toml", "--output", "quiet", "--backend", "tmux", "--ui", "live",
                       "--kill-grace", "60s", env=outside_env(tmux))
    run = swarm.started()
    gen = run / "slots/slot-1/gen-1"
    wrapper = None
    try:
        wrapper, worker = wait_until(lambda: _pane_wrapper(gen), what="its wrapper and its worker")
        wrapper.suspend()
        swarm.open_gate()
        wait_until(lambda: _exited(worker), what="the worker's exit")
        assert swarm("cancel", run.name, env=outside_env(tmux)).code == 0
        wait_until(lambda: (gen / "kill").exists(), what="the kill reason")
        termed_by = time.monotonic() + LADDER_ROUND
        while not _termed(wrapper) and time.monotonic() < termed_by:
            time.sleep(0.02)
        wrapper.resume()
        proc.wait(60)
        t = swarm.tasks(run)["t"]
        assert (t["status"], t["exit_code"], t["signal"]) == ("succeeded", 0, None), t
        assert (swarm.cwd / "ledger").read_text() == "t\n"
    finally:
        if wrapper is not None and wrapper.is_running():
            wrapper.resume()
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        kill_run_processes(run.name)
