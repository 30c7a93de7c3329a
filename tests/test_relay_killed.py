"""``kill -9`` of the pty relay a Zellij pane runs its worker through (issue 22.5): the worker,
on a terminal of its own, ignores the hang-up its terminal's end sends it. Its session must be
ended before the wrapper records the exit — before the slot runs anything else — or the run
has more processes than slots. Real relay, wrapper and worker processes in the fake Zellij's
panes; every process of the run ends with the test."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

import psutil
import pytest
from swarmtest import Running, backend_args, full, run_processes, wait_until


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


# A worker that ignores the hang-up (its pid in ``pidfile``), then a task for its slot
STUBBORN_THEN_NEXT = ('[swarm]\njobs = 1\n'
                      '[[task]]\nname = "stubborn"\ncmd = "trap \'\' HUP; echo $$ > pidfile; sleep 1000"\n'
                      '[[task]]\nname = "next"\ncmd = "true"\n')


def _worker(swarm) -> psutil.Process:
    """The stubborn worker, once it runs."""
    pidfile = swarm.cwd / "pidfile"
    wait_until(lambda: pidfile.exists() and pidfile.read_text().strip(), what="the worker runs")
    return psutil.Process(int(pidfile.read_text()))


def _stubborn_killed_and_next_ran(swarm) -> None:
    """The stubborn worker recorded as killed (137), the next task run, nothing left behind."""
    rows = swarm.tasks()
    assert (rows["stubborn"]["status"], rows["stubborn"]["exit_code"]) == ("failed", 137)
    assert rows["next"]["status"] == "succeeded"
    assert [w for w in swarm.summary()["warnings"] if w["code"] == "process_left_behind"] == []


@pytest.mark.parametrize("backend", ["zellij-0.45.0"])
def test_a_killed_relay_leaves_no_worker_that_ignores_the_hangup(swarm, backend, request):
    swarm.write("s.toml", STUBBORN_THEN_NEXT)
    args, env = backend_args(backend, request)
    with Running(swarm, "s.toml", "--output", "quiet", *args, env=env) as r:
        assert r.run is not None
        worker = _worker(swarm)
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
    _stubborn_killed_and_next_ran(swarm)
    assert not os.path.lexists(r.run / "slots/slot-1/gen-1/worker-session")


def test_a_relay_killed_as_it_drains_an_ended_worker_s_terminal_leaves_the_worker_s_end(tmp_path):
    """The relay drains its worker's terminal after the worker exits, then exits with the
    worker's status. ``kill -9`` of it in that drain: the wrapper recorded the relay's death,
    137, as the worker's — finished work ``failed``, and retried (an adversary: 10 of 24
    tasks, real Zellij). The relay marks the worker's end with its code as it sees it, and
    ``--end``, which the wrapper runs when the relay died first, says it: the wrapper's status
    is that code. (The drain lasts a moment once the worker is gone: the relay's parts are
    held to this here, where an end-to-end kill would be a race.)"""
    import subprocess

    from zellij_swarm.backends.zellij import RELAY_END
    from zellij_swarm.records import generation_files
    from zellij_swarm.worker.wrapper import PTY_RELAY

    ended = tmp_path / generation_files.WORKER_ENDED
    res = subprocess.run([*PTY_RELAY, "--ended", str(ended), str(tmp_path / "log"), "/bin/sh", "-c", "exit 3"],
                         stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    assert res.returncode == 3 and ended.read_text() == "3\n", res

    record = tmp_path / generation_files.RELAY_RECORD

    def after_a_killed_relay(mark: str | None, form: str) -> str:
        """The wrapper's status after ``RELAY_END``, its relay killed (137) with its record left
        in ``form`` (a link, as a relay writes it; a file, as one before links did)."""
        _write_record(record, "0 0", form)  # (a session of nothing)
        ended.unlink(missing_ok=True)
        if mark is not None:
            ended.write_text(mark)
        script = f'_zsw_d={tmp_path}; _zsw_rc=137; {RELAY_END}; echo "$_zsw_rc"'
        return subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, timeout=30).stdout

    for form in ("link", "file"):
        assert after_a_killed_relay("0\n", form) == "0\n"  # ended before its relay was killed: its own end
        assert after_a_killed_relay("3\n", form) == "3\n"
        assert after_a_killed_relay(None, form) == "137\n"  # killed before its worker ended: ended with it
        assert after_a_killed_relay("", form) == "137\n"  # (a mark made on a full disk holds no code)
        assert not os.path.lexists(record)


def _write_record(record: Path, text: str, form: str = "link") -> None:
    """A relay's record of its worker's session (``_ptyrelay.write_record``): a link whose
    target is ``text``, or a file holding it."""
    if form == "link":
        os.symlink(text, record)
    else:
        record.write_text(text + "\n")


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
    assert not os.path.lexists(record) and os.path.exists(tmp_path / "log")


def test_a_zombie_worker_s_code_is_not_taken_for_its_end(tmp_path):
    """The relay's death hangs up its worker's terminal: a worker that exits 0 on SIGHUP in
    the moment before ``--end`` looks was cut short by it, and a process whose main thread
    exited shows Z while its other threads run. A zombie's code, read from the kernel, was
    taken for the worker's own end: both were ``succeeded`` (an adversary, 4 in 4 each). Only
    the relay's mark, made once it has reaped its worker, says the worker ended first."""
    import subprocess

    from zellij_swarm.records import generation_files
    from zellij_swarm.worker.wrapper import PTY_RELAY

    record, ended = tmp_path / generation_files.RELAY_RECORD, tmp_path / generation_files.WORKER_ENDED
    worker = subprocess.Popen(["/bin/sh", "-c", "exit 0"], start_new_session=True)
    try:
        os.waitid(os.P_PID, worker.pid, os.WEXITED | os.WNOWAIT)  # a zombie, its session its own
        _write_record(record, f"{worker.pid} {worker.pid}")
        res = subprocess.run([*PTY_RELAY, "--end", str(record), str(ended)], capture_output=True, timeout=30)
        assert (res.returncode, res.stdout) == (0, b""), res
    finally:
        worker.wait()


def test_a_killed_relay_s_end_reaches_what_its_worker_started_in_a_session_of_its_own(tmp_path):
    """``--end`` killed only the processes of the worker's session: a worker that ran its work
    in a session of its own (``setsid -w``, ignoring the hang-up) and waited for it had that
    work run on after its exit was recorded, while its slot ran the next task — more
    processes than slots until the end-of-run sweep (an adversary, real Zellij 0.45, 2 in 2).
    What a process of the session started is the worker's too, whatever session it is in."""
    import subprocess

    from zellij_swarm.records import generation_files
    from zellij_swarm.worker.wrapper import PTY_RELAY

    pidfile = tmp_path / "pid"
    worker = subprocess.Popen(["/bin/sh", "-c", f"trap '' HUP; setsid -w sh -c 'trap \"\" HUP; echo $$ > {pidfile}; "
                                                "exec sleep 1000'"], start_new_session=True)
    escaped = None
    try:
        wait_until(lambda: pidfile.exists() and pidfile.read_text().strip(), what="the work in its own session")
        escaped = psutil.Process(int(pidfile.read_text()))
        assert os.getsid(escaped.pid) != worker.pid
        record = tmp_path / generation_files.RELAY_RECORD
        _write_record(record, f"{worker.pid} {worker.pid}")
        res = subprocess.run([*PTY_RELAY, "--end", str(record)], capture_output=True, timeout=30)
        assert res.returncode == 0, res
        assert worker.wait(timeout=10) == -9
        assert not _running(escaped), "what the worker started in a session of its own runs on"
    finally:
        with contextlib.suppress(Exception):
            worker.kill()
        if escaped is not None:
            with contextlib.suppress(psutil.Error):
                escaped.kill()


# (the fake's case failed once in CI under load, no exit recorded within 30 s: a neighbour, run by the full matrix)
@pytest.mark.parametrize("backend", [full("zellij-0.45.0"), "real-zellij"])
def test_a_relay_killed_with_its_wrapper_leaves_no_worker_that_ignores_the_hangup(swarm, backend, request):
    """The relay and the wrapper's second stage killed together (``kill -9`` of the pane's
    process group, where the worker, in a session of its own, is not): the pane leader, the
    orphans' subreaper, followed the first of them, the dead relay, and wrote its 137 as the
    worker's end while the worker ran on — the slot's next task started beside it (an
    adversary, real Zellij 0.45 and the fake, 2 in 2). A relay that died before it had its
    worker's status has its worker's session ended first, as the wrapper's ``--end`` does."""
    swarm.write("s.toml", STUBBORN_THEN_NEXT)
    args, env = backend_args(backend, request)
    with Running(swarm, "s.toml", "--output", "quiet", *args, env=env) as r:
        assert r.run is not None
        worker = _worker(swarm)
        relay = _relay(r.run.name)
        second_stage = relay.parent()
        exit_record = r.run / "slots/slot-1/gen-1/exit"
        second_stage.kill()
        relay.kill()
        # the moment the exit is recorded, nothing of it runs (failed once in CI, real Zellij:
        # what the generation held and which of its processes lived then says why)
        wait_until(exit_record.exists, interval=0.005, what="the exit recorded",
                   seen=lambda: (sorted(os.listdir(exit_record.parent)), _running(worker),
                                 run_processes(r.run.name)))
        assert not _running(worker)
        assert r.proc.wait(timeout=60) == 1
        assert run_processes(r.run.name) == []
    _stubborn_killed_and_next_ran(swarm)


def test_the_pane_leader_names_the_relay_s_files_as_the_records_do():
    from zellij_swarm.records import generation_files
    from zellij_swarm.worker import _paneleader

    assert (_paneleader.RELAY_RECORD, _paneleader.WORKER_ENDED) == (generation_files.RELAY_RECORD,
                                                                     generation_files.WORKER_ENDED)
