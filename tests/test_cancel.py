"""cancel, Ctrl-C and SIGTERM end every worker's whole tree and record `cancelled`."""

from __future__ import annotations

import contextlib
import json
import os
import signal

import pytest
from swarmtest import alive, backend_args, full, kill_run_processes, run_processes, validate, wait_until
from tmuxtest import outside_env

# Four long workers: a plain sleep, a grandchild, one that ignores SIGTERM, and a
# grandchild that starts its own session (escaping the process group).
STUBBORN = """
[swarm]
jobs = 4
[[task]]
name = "sleeper"
cmd = "sleep 60"
[[task]]
name = "grandchild"
cmd = "sh -c 'sleep 60; echo late'"
[[task]]
name = "ignores-term"
cmd = "trap '' TERM; sleep 60"
[[task]]
name = "own-session"
argv = ["setsid", "sh", "-c", "sleep 60"]
[[task]]
name = "queued"
cmd = "echo should-not-run"
"""


def _start(swarm):
    swarm.write("s.toml", STUBBORN)
    proc = swarm.popen("run", "s.toml", "--output", "quiet")
    run_dir = swarm.started()
    run_id = run_dir.name
    # every worker's wrapper has claimed its generation and started its command
    wait_until(lambda: all((run_dir / f"slots/slot-{n}/gen-1/heartbeat.jsonl").exists() for n in range(1, 5)),
               what="four workers started")
    wait_until(lambda: len(run_processes(run_id)) >= 4, what="worker processes visible")
    return proc, run_id


def _check_cancelled(swarm, proc, run_id, code):
    try:
        assert proc.wait(timeout=30) == code, proc.stderr.read()
        assert "Traceback" not in proc.stderr.read()
        summary = swarm.summary()
        assert summary["state"] == "cancelled"
        rows = {t["name"]: t for t in summary["tasks"]}
        assert {n: r["status"] for n, r in rows.items()} == {
            "sleeper": "cancelled", "grandchild": "cancelled", "ignores-term": "cancelled",
            "own-session": "cancelled", "queued": "cancelled"}
        assert all(r["reason"] == "cancelled_by_user" for r in rows.values())
        assert rows["queued"]["attempts"] == 0
        assert run_processes(run_id) == []
    finally:
        kill_run_processes(run_id)


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_cancels_everything(swarm, sig, code):
    proc, run_id = _start(swarm)
    proc.send_signal(sig)
    _check_cancelled(swarm, proc, run_id, code)


def test_cancel_command_cancels_the_whole_run(swarm):
    proc, run_id = _start(swarm)
    res = swarm("cancel", run_id)
    assert res.code == 0, res.stderr
    _check_cancelled(swarm, proc, run_id, 130)
    again = swarm("cancel", run_id)
    assert again.code == 2 and again.stderr.startswith("zellij-swarm: error: run ") and "finished" not in again.stdout


def test_cancel_one_task_lets_the_rest_finish(swarm):
    swarm.write("c.toml", """
[swarm]
jobs = 2
[[task]]
name = "long"
cmd = "sleep 60"
[[task]]
name = "waits"
cmd = "echo waited"
after = ["long"]
[[task]]
name = "short"
cmd = "echo short"
""")
    proc = swarm.popen("run", "c.toml", "--output", "quiet")
    run_dir = swarm.started()
    wait_until(lambda: (run_dir / "slots/slot-1/gen-1/heartbeat.jsonl").exists(), what="long started")
    try:
        assert swarm("cancel", run_dir.name, "long").code == 0
        assert proc.wait(timeout=30) == 1
        rows = swarm.tasks()
        assert (rows["long"]["status"], rows["long"]["reason"]) == ("cancelled", "cancelled_by_user")
        assert (rows["waits"]["status"], rows["waits"]["reason"]) == ("skipped", "dependency_failed")
        assert rows["short"]["status"] == "succeeded"
        events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
        for e in events:
            validate(e, "event")
        consumed = [e for e in events if e["event"] == "inbox_consumed"]
        assert len(consumed) == 1 and (run_dir / "inbox/consumed" / consumed[0]["id"]).exists()
        assert run_processes(run_dir.name) == []
    finally:
        kill_run_processes(run_dir.name)


@pytest.mark.parametrize("backend", ["headless", full("tmux")])
def test_a_cancelled_task_that_ignores_it_and_fails_on_its_own_is_not_run_again(swarm, backend, request):
    """A worker that ignores the cancel's TERM and then fails on its own keeps its failure
    (the outcome rule) — and is never retried: it was asked to cancel. The answer says so.
    The worker goes on to its end once the log says the TERM was sent."""
    flags, env = backend_args(backend, request)
    swarm.write("t.toml", '[[task]]\nname = "stubborn"\n'
                          'cmd = "trap \'\' TERM; echo start >> ledger; until [ -e go ]; do sleep 0.02; done; '
                          'echo end >> ledger; exit 3"\n')
    proc = swarm.popen("run", "t.toml", "--retries", "2", "--kill-grace", "30s", "--output", "quiet", *flags, env=env)
    ledger = swarm.cwd / "ledger"
    run_dir = swarm.started()
    cancel = None
    try:
        wait_until(lambda: ledger.exists() and ledger.read_text() == "start\n", what="the worker started")
        cancel = swarm.popen("cancel", run_dir.name, "stubborn", env=env)
        wait_until(lambda: '"event":"kill_sent"' in (run_dir / "events.jsonl").read_text().replace(" ", ""),
                   what="the cancel's TERM sent")
        (swarm.cwd / "go").touch()
        _, err = cancel.communicate(timeout=60)
        assert cancel.returncode == 1 and "stubborn (failed on its own, not of the cancel's signal; not run again)" \
            in err, err
        assert proc.wait(timeout=30) == 1
        assert ledger.read_text() == "start\nend\n", "run once"
        row = swarm.tasks()["stubborn"]
        assert (row["status"], row["exit_code"], row["attempts"]) == ("failed", 3, 1)
    finally:
        for p in (proc, cancel):
            if p is not None:
                p.kill()
                p.communicate()
        kill_run_processes(run_dir.name)


def test_a_cancel_a_stopped_supervisor_never_took_says_so_and_does_nothing(swarm):
    """A supervisor stopped (``kill -STOP``, Ctrl-Z) holds its run but reads no message: the
    cancel it never took is withdrawn — nothing done, and not later either, once the
    supervisor goes on — and the answer says the supervisor is stopped and how to let it go
    on, not that the run ended."""
    from zellij_swarm.commands import control
    from zellij_swarm.exc import SwarmError
    from zellij_swarm.records.rundir import RunPaths

    swarm.write("t.toml", '[[task]]\nname = "w"\ncmd = "until [ -e go ]; do sleep 0.02; done; echo done"\n')
    proc = swarm.popen("run", "t.toml", "--output", "quiet")
    run_dir = swarm.started()
    try:
        wait_until(lambda: (run_dir / "slots/slot-1/gen-1/heartbeat.jsonl").exists(), what="the worker started")
        proc.send_signal(signal.SIGSTOP)
        with pytest.raises(SwarmError) as said:
            control.ask(RunPaths(run_dir), "cancel", timeout=0.5, tasks=["w"])
        assert (f"its supervisor (pid {proc.pid}) did not take the cancel within 0.5s — it is stopped: "
                f"`kill -CONT {proc.pid}` lets it go on; nothing was done") in str(said.value), said.value
        proc.send_signal(signal.SIGCONT)
        (swarm.cwd / "go").touch()
        assert proc.wait(timeout=30) == 0, proc.stderr.read()
        assert swarm.tasks()["w"]["status"] == "succeeded"
    finally:
        proc.send_signal(signal.SIGCONT)
        proc.kill()
        proc.communicate()
        kill_run_processes(run_dir.name)


def test_a_cancel_of_tasks_some_of_which_had_ended_names_those_it_did_not_cancel(swarm):
    """The answer to a cancel says what happened (SPEC §5.7): of the tasks named, the one
    cancelled and the one that had already ended, which stays as it ended — not only the
    first, which would leave the asker believing the second was cancelled too."""
    swarm.write("t.toml", '[[task]]\nname = "quick"\ncmd = "true"\n'
                          '[[task]]\nname = "long"\ncmd = "sleep 60"\n[swarm]\njobs = 2\n')
    proc = swarm.popen("run", "t.toml", "--output", "quiet")
    run_dir = swarm.started()
    try:
        wait_until(lambda: '"task":"quick"' in (run_dir / "events.jsonl").read_text().replace(" ", "")
                   and '"event":"worker_completed"' in (run_dir / "events.jsonl").read_text().replace(" ", ""),
                   what="quick ended")
        wait_until(lambda: (run_dir / "slots/slot-2/gen-1/heartbeat.jsonl").exists()
                   or (run_dir / "slots/slot-1/gen-2/heartbeat.jsonl").exists(), what="long started")
        res = swarm("cancel", run_dir.name, "quick", "long")
        assert res.code == 0, res.stderr
        assert "cancelled in run" in res.stderr and "long" in res.stderr, res.stderr
        assert "quick" in res.stderr and "already ended" in res.stderr, res.stderr
        assert proc.wait(timeout=30) == 1
        rows = swarm.tasks()
        assert (rows["quick"]["status"], rows["long"]["status"]) == ("succeeded", "cancelled")
    finally:
        proc.kill()
        proc.communicate()
        kill_run_processes(run_dir.name)


def test_cancel_or_restart_of_a_task_of_an_ended_run_says_the_run_ended(swarm):
    """A task named once its run has ended is that run's task, not a missing run."""
    swarm.write("a.toml", '[[task]]\nname = "w"\ncmd = "true"\n')
    assert swarm("run", "a.toml", "--output", "quiet").code == 0
    run = swarm.latest().name
    for command in ("cancel", "restart"):
        res = swarm(command, "w")
        assert res.code == 2 and res.stderr.count("\n") == 1, res.stderr
        assert f"'w' is a task of run {run}, which is finished, and none is running: name the RUN to {command}" \
            in res.stderr


def test_cancel_unknown_task_or_run_is_exit_2(swarm):
    swarm.write("a.txt", "true\n")
    swarm("run", "a.txt")
    res = swarm("cancel", "nope-run")
    assert res.code == 2 and res.stderr.count("\n") == 1 and "no run 'nope-run'" in res.stderr


def test_an_empty_word_names_no_run_and_cancels_nothing(swarm):
    """``cancel "$TASK"`` with TASK empty: "" was a prefix of every run id, so of the only
    running one, and the whole run was cancelled (a reading command showed the latest run)."""
    proc, run_id = _start(swarm)
    try:
        res = swarm("cancel", "")
        assert res.code == 2 and res.stderr.count("\n") == 1, res.stderr
        assert "run " + run_id + " has no task ''" in res.stderr, res.stderr
        for command in ("status", "proof", "diff", "logs"):
            res = swarm(command, "")
            assert res.code == 2 and res.stderr.count("\n") == 1, (command, res.stderr)
            assert "no run ''" in res.stderr or "no task ''" in res.stderr, (command, res.stderr)
        assert proc.poll() is None and json.loads(swarm("status", run_id, "--json").stdout)["state"] == "running"
        assert swarm("cancel", run_id).code == 0
        _check_cancelled(swarm, proc, run_id, 130)
    finally:
        kill_run_processes(run_id)


def test_an_ambiguous_run_prefix_is_called_ambiguous_by_the_commands_that_act(swarm):
    """``cancel``, ``restart``, ``retry`` and ``collect`` took a prefix that matches two runs
    for a task or for no run ("no run '2026…'", "run … has no task '2026…'"), where the
    commands that read say it is ambiguous. They say so too, naming the runs."""
    swarm.write("a.toml", '[[task]]\nname = "w"\ncmd = "exit 1"\n')
    assert swarm("run", "a.toml", "--output", "quiet").code == 1
    assert swarm("run", "a.toml", "--output", "quiet").code == 1
    first, second = sorted(p.name for p in (swarm.cwd / ".zellij-swarm" / "runs").iterdir())
    prefix = first[:next(i for i, (a, b) in enumerate(zip(first, second, strict=True)) if a != b)]
    for args in (["cancel", prefix], ["restart", prefix, "w"], ["retry", prefix], ["retry", prefix, "w"],
                 ["collect", prefix, "w"], ["pause", prefix]):
        res = swarm(*args)
        assert res.code == 2 and res.stderr.count("\n") == 1, (args, res.stderr)
        assert f"run id prefix {prefix!r} is ambiguous: " in res.stderr and first in res.stderr \
            and second in res.stderr, (args, res.stderr)


def test_halt_soon_stops_dispatching_after_first_failure(swarm):
    swarm.write("h.toml", """
[swarm]
jobs = 1
halt = "soon"
[[task]]
name = "bad"
cmd = "exit 2"
[[task]]
name = "never"
cmd = "true"
""")
    res = swarm("run", "h.toml")
    assert res.code == 1
    rows = swarm.tasks()
    assert rows["bad"]["status"] == "failed"
    assert (rows["never"]["status"], rows["never"]["reason"]) == ("cancelled", "halted")


def test_halt_now_cancels_running_tasks(swarm):
    swarm.write("h.toml", """
[swarm]
jobs = 2
halt = "now"
[[task]]
name = "long"
cmd = "sleep 60"
[[task]]
name = "bad"
cmd = "sleep 0.3; exit 2"
""")
    res = swarm("run", "h.toml")
    assert res.code == 1
    rows = swarm.tasks()
    assert (rows["long"]["status"], rows["long"]["reason"]) == ("cancelled", "halted")
    assert rows["bad"]["status"] == "failed"
    assert run_processes(swarm.latest().name) == []


@pytest.mark.parametrize("backend", ["headless", "tmux-compact"])
@pytest.mark.parametrize("extra", [(), ("--timeout", "1")], ids=["ended", "timed-out"])
@pytest.mark.parametrize("leave, ladder_finds", [
    # a double fork into a session of its own with no marker: only the launcher, its subreaper, knows it
    ("(setsid env -i sh -c 'echo $$ >\"$0\"; exec sleep 60' {pidfile} &)", False),
    # no marker, still in the wrapper's process group and session
    full("(env -i sh -c 'echo $$ >\"$0\"; exec sleep 60' {pidfile} &)", True),
    # marked, in a session of its own
    full("(setsid sh -c 'echo $$ >\"$0\"; exec sleep 60' {pidfile} &)", True),
], ids=["setsid-env-i", "env-i", "setsid"])
def test_a_daemon_left_behind_with_nothing_of_the_run_on_it_is_ended_with_the_run(swarm, tmp_path, request, backend,
                                                                                    leave, ladder_finds, extra):
    """A daemon that cleared its environment and left the worker's session and process tree
    carries nothing that names the run; the launcher adopted it (its subreaper), and the
    end-of-run sweep ends it, with a ``process_left_behind`` warning — after the worker's own
    end or a timeout alike. One the timeout's ladder can find (its group, its marker) ends
    with the worker's tree, unwarned. Compact mode runs its workers through the launcher too."""
    flags, env = ((), None) if backend == "headless" else \
        (("--backend", "tmux", "--ui", "compact"), outside_env(request.getfixturevalue("tmux")))
    pidfile = tmp_path / "daemon.pid"
    # the worker goes on once its daemon runs (has written its pid), not while it is still being made
    swarm.write("d.txt", leave.format(pidfile=pidfile) + f"; until [ -s {pidfile} ]; do sleep 0.01; done"
                + ("; sleep 30" if extra else "") + "\n")
    res = swarm("run", "d.txt", "--output", "quiet", *flags, *extra, env=env)
    run_id = swarm.latest().name
    daemon = int(pidfile.read_text())
    try:
        assert res.code == (1 if extra else 0), res
        warned = not (extra and ladder_finds)
        assert [w["code"] for w in swarm.summary()["warnings"]] == (["process_left_behind"] if warned else [])
        wait_until(lambda: not alive(daemon), timeout=10, what="the daemon to have been ended")
    finally:
        kill_run_processes(run_id)
        with contextlib.suppress(ProcessLookupError):
            os.kill(daemon, signal.SIGKILL)


def test_daemon_left_behind_is_reported_and_ended(swarm):
    swarm.write("d.txt", "setsid sh -c 'sleep 60' >/dev/null 2>&1 &\n")
    res = swarm("run", "d.txt", "--output", "quiet")
    run_id = swarm.latest().name
    try:
        assert res.code == 0
        summary = swarm.summary()
        assert [w["code"] for w in summary["warnings"]] == ["process_left_behind"]
        assert run_processes(run_id) == []
    finally:
        kill_run_processes(run_id)


def test_a_stop_after_the_runs_end_is_recorded_changes_no_exit_code():
    """Once the supervisor's loop let its signals go (``SignalWakeup.close``: the run's end is
    recorded, its records are being closed), a SIGTERM, Ctrl-C or hang-up changes nothing
    until ``run`` returns: the process ends with the code the records hold. Put back to their defaults, they ended a run
    recorded as finished with 0 by 143 or 130 ("aborted"), in the last ~55 ms of ``run``."""
    import subprocess
    import sys
    from pathlib import Path

    script = ("import os, signal\n"
              "from zellij_swarm.engine.signals import SignalWakeup\n"
              "wakeup = SignalWakeup()\n"
              "wakeup.close()\n"
              "for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):\n"
              "    os.kill(os.getpid(), sig)\n"
              "print('recorded exit', flush=True)\n"
              "wakeup.restore()  # as run returns its code: they are the process's own again\n"
              "assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL\n"
              "raise SystemExit(3)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(Path(__file__).parents[1]), "PATH": "/usr/bin:/bin"})
    assert (done.returncode, done.stdout) == (3, "recorded exit\n"), done
