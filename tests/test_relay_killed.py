"""``kill -9`` of the pty relay a Zellij pane runs its worker through (issue 22.5): the worker,
on a terminal of its own, ignores the hang-up its terminal's end sends it. Its session must be
ended before the wrapper records the exit — before the slot runs anything else — or the run
has more processes than slots. Real relay, wrapper and worker processes in the fake Zellij's
panes; every process of the run ends with the test."""

from __future__ import annotations

import contextlib
import os
import time

import psutil
import pytest
from swarmtest import GATE, Running, backend_args, run_processes, wait_until


def _relay(run_id: str) -> psutil.Process:
    """The relay of the run's one worker pane."""
    def find() -> psutil.Process | None:
        for p in psutil.process_iter():
            with contextlib.suppress(psutil.Error):
                if any(a.endswith("_ptyrelay.py") for a in p.cmdline()) and \
                        p.environ().get("ZELLIJ_SWARM_RUN_ID") == run_id:
                    return p
        return None
    return wait_until(find, what="the pty relay")


@pytest.mark.parametrize("backend", ["zellij-0.45.0"])
def test_a_killed_relay_leaves_no_worker_that_ignores_the_hangup(swarm, backend, request):
    swarm.write("s.toml", '[swarm]\njobs = 1\n'
                          '[[task]]\nname = "stubborn"\ncmd = "trap \'\' HUP; echo $$ > pidfile; sleep 1000"\n'
                          '[[task]]\nname = "next"\ncmd = "true"\n')
    args, env = backend_args(backend, request)
    with Running(swarm, "s.toml", "--output", "quiet", *args, env=env) as r:
        assert r.run is not None
        pidfile = swarm.cwd / "pidfile"
        wait_until(lambda: pidfile.exists() and pidfile.read_text().strip(), what="the worker runs")
        worker = psutil.Process(int(pidfile.read_text()))
        sleeper = wait_until(lambda: worker.children(), what="the worker's sleep")[0]
        relay = _relay(r.run.name)
        exit_record = r.run / "slots/slot-1/gen-1/exit"
        relay.kill()
        deadline = time.monotonic() + 30
        while not exit_record.exists():  # the moment the exit is recorded, nothing of it runs
            assert time.monotonic() < deadline, "the wrapper recorded no exit"
            time.sleep(0.005)
        assert [p.pid for p in (worker, sleeper) if _running(p)] == []
        assert r.proc.wait(timeout=60) == 1
        assert run_processes(r.run.name) == []
    rows = swarm.tasks()
    assert (rows["stubborn"]["status"], rows["stubborn"]["exit_code"]) == ("failed", 137)
    assert rows["next"]["status"] == "succeeded"
    assert [w for w in swarm.summary()["warnings"] if w["code"] == "process_left_behind"] == []
    assert not (r.run / "slots/slot-1/gen-1/worker-session").exists()


@pytest.mark.parametrize("backend", ["zellij-0.45.0"])
def test_a_relay_killed_as_it_drains_an_ended_worker_s_terminal_keeps_the_worker_s_end(swarm, backend, request):
    """The relay drains its worker's terminal after the worker exits, then exits with the
    worker's status. ``kill -9`` of it in that drain: the wrapper recorded the relay's death,
    137, as the worker's — finished work ``failed``, and retried (an adversary: 10 of 24
    tasks, real Zellij). The relay marks the worker's end with its code as it sees it: that
    code stands, and nothing runs twice. (A process the worker left holding its terminal
    keeps the drain going while it writes.)"""
    ledger = swarm.cwd / "ledger"
    writer = "(trap '' HUP; while :; do echo tick || exit; sleep 0.01; done) &"
    swarm.write("s.toml", f'[swarm]\njobs = 1\n[[task]]\nname = "a"\nretries = 1\n'
                          f'cmd = "{writer} {GATE}; echo done >> {ledger}; exit 0"\n')
    args, env = backend_args(backend, request)
    with Running(swarm, "s.toml", "--output", "quiet", *args, env=env) as r:
        assert r.run is not None
        relay = _relay(r.run.name)
        ended = r.run / "slots/slot-1/gen-1/worker-ended"
        swarm.open_gate()
        wait_until(lambda: ended.exists() and ended.read_text().endswith("\n"), interval=0.002,
                   what="the worker's end marked")
        relay.kill()
        assert r.proc.wait(timeout=60) == 0
        assert run_processes(r.run.name) == []
    row = swarm.tasks()["a"]
    assert (row["status"], row["exit_code"], row["attempts"]) == ("succeeded", 0, 1), row
    assert ledger.read_text() == "done\n"


def _running(p: psutil.Process) -> bool:
    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_relay_that_ends_normally_leaves_no_session_record(tmp_path):
    """The record exists only while the relay runs its worker."""
    import subprocess

    from zellij_swarm.worker.wrapper import PTY_RELAY

    record = tmp_path / "worker-session"
    res = subprocess.run([*PTY_RELAY, "--record", str(record), str(tmp_path / "log"), "/bin/sh", "-c", "exit 4"],
                         stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    assert res.returncode == 4, res.stderr
    assert not record.exists() and os.path.exists(tmp_path / "log")
