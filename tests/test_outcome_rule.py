"""The outcome rule end to end (SPEC §5.7): a swarm stopped mid-run by each way of stopping it,
then ``retry``, runs every task's last command exactly once. A task whose worker had finished
before the kill reached it keeps its own outcome and is not run again; only work the kill
really ended runs again. The interleavings themselves are harness scenarios
(tests/test_scenarios.py, table ``outcome-rule``)."""

from __future__ import annotations

import collections
import functools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
from swarmtest import (
    GATE,
    SAVER,
    Running,
    alive,
    backend_args,
    full,
    kill_run_processes,
    killed_outright,
    run_processes,
    run_to_its_end,
    wait_until,
)

TASKS = 300
HELD = 20  # the last tasks wait at the gate: the run cannot end before the stop reaches it


def _ledger_counts(ledger: Path) -> collections.Counter[str]:
    return collections.Counter(ledger.read_text().split()) if ledger.exists() else collections.Counter()


def _runs_to_its_end(swarm, file: str, backend: str, request) -> None:
    """``run FILE`` on ``backend`` ends with exit 0 and leaves no process of it behind."""
    res = run_to_its_end(swarm, file, backend, request)
    assert res.code == 0, res


def _leaves_a_child(swarm, *, grace: str, how: str = "") -> Path:
    """``r.toml``: task ``t`` (one retry, ``grace`` to end a generation) whose first attempt
    fails leaving a child (started ``how``) that ignores HUP, INT and TERM; its second
    writes ``beside-the-child`` to the ledger it returns if that child still runs."""
    ledger, child = swarm.cwd / "ledger", swarm.cwd / "child"
    swarm.write("r.toml", f'[swarm]\nkill_grace = "{grace}"\n[[task]]\nname = "t"\nretries = 1\n'
                          f'cmd = "echo start $ZELLIJ_SWARM_ATTEMPT >> {ledger}; '
                          'if [ $ZELLIJ_SWARM_ATTEMPT = 1 ]; then '
                          f'{how}sh -c \'trap \\"\\" HUP INT TERM; echo $$ > {child}; exec sleep 60\' & '
                          f'until [ -s {child} ]; do sleep 0.01; done; exit 1; fi; '
                          # a zombie (killed, not yet reaped by its new parent) runs nothing
                          f's=$(sed -n \'s/^State:[[:space:]]*\\\\(.\\\\).*/\\\\1/p\' /proc/$(cat {child})/status); '
                          f'[ -n \\"$s\\" ] && [ $s != Z ] && echo beside-the-child >> {ledger}; true"\n')
    return ledger


def _swarm_file(swarm, ledger: Path, tasks: int, *, failing: int | None = None) -> Path:
    lines = []
    for i in range(tasks):
        tail = "; exit 3" if i == failing else ""
        held = f"{GATE}; " if i >= tasks - HELD else ""
        lines.append(f"{held}echo start; sleep 0.0{i % 10}; echo t{i} >> {ledger}{tail}")
    return swarm.write("tasks.txt", "\n".join(lines) + "\n")


@pytest.mark.parametrize("how, backend", [("SIGTERM", "headless"), full("SIGINT", "headless"), ("cancel", "headless"),
                                          ("halt-now", "headless"), ("cancel", "tmux"), full("SIGTERM", "tmux")])
def test_a_stopped_swarm_then_retry_runs_each_task_to_its_end_once(swarm, how, backend, request):
    """In live tmux panes too: there the pane's wrapper runs below the pane leader, and a
    signal reaching it is not one reaching the worker."""
    ledger = swarm.cwd / "ledger"
    # panes open one by one (some 50 ms each): fewer tasks there, still 60 ended before the stop
    # and 60 to run after it
    count = TASKS if backend == "headless" else TASKS // 2
    tasks = _swarm_file(swarm, ledger, count, failing=120 if how == "halt-now" else None)
    extra = ["--halt", "now"] if how == "halt-now" else []
    args, env = backend_args(backend, request)
    proc = swarm.popen("run", str(tasks), "-j", "8", *(args or ("--backend", "headless")), "--output", "quiet",
                       *extra, env=env)
    try:
        # a loaded machine (two cores, dozens of processes of other runs) took over 30 s to end 60
        wait_until(lambda: sum(_ledger_counts(ledger).values()) >= 60, timeout=90, what="60 tasks at their end")
        if how in ("SIGTERM", "SIGINT"):
            proc.send_signal(getattr(signal, how))
        elif how == "cancel":
            run_id = swarm.latest().name
            assert swarm("cancel", run_id, env=env).code == 0
        proc.wait(timeout=60)
        run_id = swarm.latest().name
        first = swarm.tasks()
        # a task whose last command wrote its line and whose worker then ended on its own is not unfinished
        for name, t in first.items():
            if t["status"] in ("cancelled", "failed", "lost", "timed_out") and t.get("exit_code") == 0:
                raise AssertionError(f"{name} ran to exit 0 and is recorded {t['status']} ({t.get('reason')})")
        # (after a halt, the retry must not halt again at the same failure, to run all the rest)
        swarm.open_gate()
        retried = swarm("retry", run_id, "--output", "quiet", *(["--halt", "never"] if extra else []), env=env,
                        timeout=300)
        assert retried.code in (0, 1), retried.stderr
        counts = _ledger_counts(ledger)
        if how == "halt-now":
            assert counts.pop("t120") == 2  # it failed: retry runs it again, as it should
        twice = sorted(k for k, n in counts.items() if n > 1)
        assert not twice, f"ran to their end twice: {twice}"
        assert set(counts) == {f"t{i}" for i in range(count)} - ({"t120"} if how == "halt-now" else set())
        assert retried.code == (1 if how == "halt-now" else 0), retried.stderr
    finally:
        proc.kill()
        kill_run_processes(swarm.latest().name)


def test_a_pane_worker_that_removes_its_directory_ran_once_and_is_unknown(swarm, request):
    """In a live tmux pane nobody sees the wrapper's status: with its directory gone its end
    was ``lost (no_exit_record)``, and ``--retries 2`` ran it three times."""
    from tmuxtest import outside_env

    env = outside_env(request.getfixturevalue("tmux"))
    ledger = swarm.cwd / "ledger"
    swarm.write("tasks.txt", f'echo ran >> {ledger}; rm -rf "$(dirname "$ZELLIJ_SWARM_HEARTBEAT")"; exit 0\n')
    try:
        res = swarm("run", "tasks.txt", "-j", "1", "--backend", "tmux", "--ui", "live", "--retries", "2",
                    "--output", "quiet", env=env)
    finally:
        kill_run_processes(swarm.latest().name)
    assert res.code == 1
    assert ledger.read_text() == "ran\n"
    [row] = swarm.tasks().values()
    assert (row["status"], row["reason"], row["attempts"]) == ("unknown", "records_removed", 1)


@pytest.mark.parametrize("backend", ["headless", "tmux", "zellij-0.45.0"])
def test_a_worker_that_removes_its_directory_and_runs_on_is_ended_by_its_timeout(swarm, backend, request):
    """A worker that removed its generation's directory and ran on was never timed out: its
    start (its claim's time) was gone, read as "not started yet", and the run waited for it
    to end by itself. Its limit counts from when the supervisor saw it start; it ran once."""
    ledger = swarm.cwd / "ledger"
    swarm.write("tasks.txt", f'echo ran >> {ledger}; rm -rf "$(dirname "$ZELLIJ_SWARM_HEARTBEAT")"; exec sleep 60\n')
    args, env = backend_args(backend, request)
    try:
        res = swarm("run", "tasks.txt", *args, "--timeout", "1s", "--output", "quiet", env=env, timeout=40)
        assert run_processes(swarm.latest().name) == []
    finally:
        kill_run_processes(swarm.latest().name)
    assert res.code == 1 and "internal error" not in res.stderr, res
    assert ledger.read_text() == "ran\n"
    [row] = swarm.tasks().values()
    assert (row["status"], row["reason"], row["attempts"]) == ("timed_out", "timeout", 1), row
    assert [w["code"] for w in row["warnings"]] == ["records_removed"], row["warnings"]


@pytest.mark.parametrize("backend", ["headless", "tmux", "zellij-0.45.0", full("zellij-0.43.1"), "real-zellij",
                                     full("real-zellij-pre044")])
def test_a_task_whose_wrapper_its_worker_killed_ends_as_its_worker_does_and_runs_once(swarm, backend, request):
    """Its wrapper killed, the worker runs on (it ignores TERM and HUP): the generation ended
    without a record and was retried — at first at once in another free slot while the
    first run was still going, both writing their work; then once the tree was gone, the
    first run's work done and run again all the same. The worker's parent now — the launcher
    headless, the pane's leader in a pane — reaps the worker its wrapper left: its own end
    is the task's, and nothing runs again. (In Zellij the worker's parent is the pane's pty
    relay, whose death takes the worker's terminal with it: its parent's parent is killed.)"""
    ledger = swarm.cwd / "ledger"
    wrapper = "$PPID" if "zellij" not in backend else "$(cut -d' ' -f4 /proc/$PPID/stat)"
    swarm.write("r.toml", '[swarm]\njobs = 2\nkill_grace = "20s"\n[[task]]\nname = "t"\nretries = 1\n'
                          f'cmd = "trap \'\' HUP TERM; echo start $ZELLIJ_SWARM_ATTEMPT >> {ledger}; '
                          f'[ $ZELLIJ_SWARM_ATTEMPT = 1 ] && kill -9 {wrapper}; sleep 1; '
                          f'echo done $ZELLIJ_SWARM_ATTEMPT >> {ledger}"\n')
    _runs_to_its_end(swarm, "r.toml", backend, request)
    [row] = swarm.tasks().values()
    assert ledger.read_text().split("\n")[:-1] == ["start 1", "done 1"]
    assert (row["status"], row["attempts"]) == ("succeeded", 1), row


@pytest.mark.parametrize("backend, how", [("headless", ""), ("tmux", ""), full("zellij-0.45.0", ""),
                                          # a group, or a session, of its own: not the wrapper's
                                          ("headless", "timeout 60 "), full("headless", "setsid "),
                                          full("tmux", "timeout 60 ")])
def test_a_failed_run_that_left_a_child_is_ended_whole_before_its_retry(swarm, backend, how, request):
    """Its shell failed and recorded it, but a child it started ignores HUP, INT and TERM and
    runs on: the retry started beside it, two runs of the task at once (the end-of-run sweep
    ended the child). What is left of a generation whose task runs again is now ended first
    — TERM, then KILL after the grace — and the retry waits until it is gone."""
    ledger = _leaves_a_child(swarm, grace="0.5s", how=how)
    _runs_to_its_end(swarm, "r.toml", backend, request)
    assert ledger.read_text().split("\n")[:-1] == ["start 1", "start 2"]  # the child ended before the retry
    [row] = swarm.tasks().values()
    assert [a["status"] for a in row["history"]] == ["failed", "succeeded"], row


@pytest.mark.parametrize("backend", ["headless", full("tmux")])
def test_a_resumed_run_ends_what_a_failed_run_left_before_its_retry(swarm, backend, request):
    """The supervisor killed while it was ending what a failed attempt left (a child that
    ignores HUP, INT and TERM): ``resume`` requeued the retry at once, beside that child. It
    now ends it first."""
    import json
    import time

    ledger = _leaves_a_child(swarm, grace="3s")
    args, env = backend_args(backend, request)
    proc = swarm.popen("run", "r.toml", *args, "--output", "quiet", env=env)
    run = swarm.started()
    try:
        def failed() -> bool:
            events = (run / "events.jsonl").read_text() if (run / "events.jsonl").exists() else ""
            return any(json.loads(line).get("event") == "worker_failed" for line in events.splitlines()
                       if line.startswith("{") and line.endswith("}"))

        wait_until(failed, what="the first attempt's failure", interval=0.01)
        proc.send_signal(signal.SIGKILL)  # within the grace: the child lives on
        proc.wait(timeout=10)
        began = time.monotonic()
        res = swarm("resume", run.name, "--output", "quiet", env=env, timeout=60)
        assert res.code == 0, res
        assert time.monotonic() - began < 30
        assert run_processes(run.name) == []
    finally:
        proc.kill()
        kill_run_processes(run.name)
    assert ledger.read_text().split("\n")[:-1] == ["start 1", "start 2"], ledger.read_text()


# (the real Zellij in the full matrix: CI's, loaded, once left the swarm's tab unmade for 10 s
# under the closing calls, and ran the tasks headless as it should — not what this is about)
@pytest.mark.parametrize("backend", ["tmux", "zellij-0.45.0", full("zellij-0.44.3"), full("real-zellij")])
def test_panes_closed_as_they_open_ran_nothing_and_are_cancelled_never_lost(swarm, backend, request):
    """Panes closed by hand the moment they open: a pane's leader, or the stage it starts, can
    die of the hang-up before it has armed itself against it, leaving a claim and no start:
    ``lost (no_exit_record)``, as if a worker had vanished (and ``--retries`` would count it as
    a failure). Nothing ran: ``cancelled (pane_closed)``, as a pane closed at the start gate is.
    Closed before its first shell could claim anything, a pane's generation was run headless at
    its heartbeat deadline, in full (CI, tmux, once): cancelled the same."""
    ledger = swarm.cwd / "ledger"
    swarm.write("tasks.txt", f"echo ran >> {ledger}; exec sleep 60\n" * 6)
    args, env = backend_args(backend, request)
    # (a deadline for the launch heartbeat that a pane closed before it claimed anything meets,
    # and one that a loaded real Zellij's panes meet, CI found: run headless, they ran in full)
    proc = swarm.popen("run", "tasks.txt", "-j", "6", *args, "--heartbeat-timeout", "5s", "--output", "quiet", env=env)
    try:
        close = _closing_worker_panes(backend, request, swarm.started())
        while proc.poll() is None:  # every worker's pane, closed as soon as its multiplexer lists it
            close()
        code = proc.wait(timeout=120)
    finally:
        proc.kill()
        kill_run_processes(swarm.latest().name)
    rows = swarm.tasks()
    assert code == 1, ({n: (r["status"], r["reason"]) for n, r in rows.items()}, swarm.summary()["warnings"])
    assert {(r["status"], r["reason"]) for r in rows.values()} == {("cancelled", "pane_closed")}, rows
    assert len(rows) == 6 and all(r["attempts"] == 1 for r in rows.values())


def _closing_worker_panes(backend: str, request: pytest.FixtureRequest, run: Path) -> Callable[[], None]:
    """What closes, by hand, every worker pane of ``run`` its multiplexer lists now."""
    if backend == "tmux":
        tmux = request.getfixturevalue("tmux")

        def close_tmux() -> None:
            for pane, info in tmux.panes().items():
                if info["title"].startswith("slot "):
                    tmux("kill-pane", "-t", pane, check=False)
        return close_tmux
    if backend == "real-zellij":
        rz = request.getfixturevalue("rz")
        # (a call to a session that is ending can hang: given up on, asked again)
        zellij = functools.partial(rz.zellij, "--session", f"swarm-{run.name}", check=False, timeout=3)
    else:
        fz = request.getfixturevalue("fz")
        zellij = functools.partial(fz.zellij, "--session", f"swarm-{run.name}", check=False,
                                   version=backend.split("-", 1)[1])

    def close_zellij() -> None:
        time.sleep(0.05)  # (a poll's interval: a client a moment, the server still has a core for the swarm)
        try:
            listed = zellij("action", "list-panes", "--json")
            panes = json.loads(listed.stdout) if listed.returncode == 0 else []
            for pane in panes:
                if not pane.get("is_plugin") and str(pane.get("title", "")).startswith("slot "):
                    zellij("action", "close-pane", "--pane-id", f"terminal_{pane['id']}")
        except (ValueError, subprocess.TimeoutExpired):  # (a busy server may answer with nothing)
            pass
    return close_zellij


@pytest.mark.parametrize("removes", ["its directory", "its claim"])
def test_a_worker_that_removes_its_records_ran_once_and_ends_as_it_exited(swarm, removes):
    """A worker that removes its generation's directory (``rm -rf``, ``git clean``) or its
    claim: the missing claim read as "the state directory was full, nothing ran", and the task
    was run again every second, for ever. Its outcome is the exit status its wrapper ended with."""
    ledger = swarm.cwd / "ledger"
    target = '"$(dirname "$ZELLIJ_SWARM_HEARTBEAT")"' if removes == "its directory" else \
        '"$(dirname "$ZELLIJ_SWARM_HEARTBEAT")/claim"'
    swarm.write("tasks.txt", "".join(f"echo t{code} >> {ledger}; rm -rf {target}; exit {code}\n" for code in (5, 0)))
    res = swarm("run", "tasks.txt", "-j", "1", "--output", "quiet")
    assert res.code == 1
    assert _ledger_counts(ledger) == {"t5": 1, "t0": 1}
    rows = swarm.tasks()
    assert [(r["status"], r["exit_code"], r["attempts"]) for r in rows.values()] == [("failed", 5, 1),
                                                                                   ("succeeded", 0, 1)]
    # without its directory the exit it wrote is gone too: said; without its claim only, it is not
    warned = ["records_removed"] * 2 if removes == "its directory" else []
    assert [w["code"] for w in swarm.summary()["warnings"]] == warned
    events = (swarm.runs()[0] / "events.jsonl").read_text()
    assert '"task_requeued"' not in events and '"dispatch_held"' not in events


def test_a_worker_that_removes_the_run_s_records_leaves_the_next_task_lost_not_failed(swarm):
    """``git clean -fdx`` in a repository holding the state directory takes the run's
    directory — its wrapper script with it. The next task's wrapper then never began (``sh``
    cannot open the script: status 2): it was recorded ``failed (exit 2)``, as if it had run."""
    ledger = swarm.cwd / "ledger"
    run_dir = '"$(dirname "$(dirname "$(dirname "$(dirname "$ZELLIJ_SWARM_HEARTBEAT")")")")"'
    # ``; exit 0``: the supervisor writes into the run directory while ``rm`` removes it, and
    # ``rm`` then fails (exit 1) on a directory no longer empty — the task is the first
    # worker's own outcome either way, and the test's is the second task's
    swarm.write("tasks.txt", f"echo first >> {ledger}; rm -rf {run_dir}; exit 0\necho second >> {ledger}\n")
    res = swarm("run", "tasks.txt", "-j", "1")
    assert res.code == 1
    assert ledger.read_text() == "first\n"
    assert "task-1: succeeded" in res.stderr and "task-2: lost (no_exit_record)" in res.stderr, res.stderr
    assert "before it claimed its generation" in res.stderr


@pytest.mark.parametrize("backend", ["headless", "tmux", "zellij-0.45.0", "real-zellij"])
@pytest.mark.parametrize("at", ["claim", "heartbeat.jsonl"])
def test_a_swarm_stopped_as_its_workers_start_cancels_each_of_them(swarm, backend, at, request):
    """SIGTERM the moment the first generation has claimed (or written its launch heartbeat):
    each worker is somewhere between its wrapper's start and its own exec — in a pane, its
    pty relay may not have started it yet. Whatever the moment, every task was ended by the
    user's signal: ``cancelled``, never the worker's own ``failed`` (a Zellij pane's was,
    exit 143, when the relay had not yet started its worker)."""
    swarm.write("s.txt", "sleep 30\nsleep 30\nsleep 30\n")
    args, env = backend_args(backend, request)
    proc = swarm.popen("run", "s.txt", "-j", "3", *args, "--output", "quiet", env=env)
    run = swarm.started()
    try:
        wait_until(lambda: list(run.glob(f"slots/slot-*/gen-1/{at}")), what=at, interval=0.002)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=90) == 143
        rows = swarm.tasks()
        assert {(t["status"], t["reason"]) for t in rows.values()} == {("cancelled", "cancelled_by_user")}, rows
        assert run_processes(run.name) == []
    finally:
        proc.kill()
        kill_run_processes(run.name)


@pytest.mark.parametrize("backend", ["headless", "tmux", "zellij-0.45.0", "real-zellij"])
def test_a_time_limit_that_ends_before_the_worker_has_started_times_it_out(swarm, backend, request):
    """A ``timeout`` shorter than a pane takes to start its worker: the limit's SIGTERM
    reaches the wrapper or, in a Zellij pane, the pty relay before the worker exists. Each
    task ran out of its time: ``timed_out``, never the worker's own ``failed`` (a Zellij
    pane's was, exit 143, in seven runs of sixteen, before the relay stood for its worker)."""
    swarm.write("t.toml", "".join(f'[[task]]\nname = "t{i}"\ncmd = "sleep 30"\ntimeout = "0.01s"\n' for i in range(3)))
    res = run_to_its_end(swarm, "t.toml", backend, request)
    assert res.code == 1, res
    rows = swarm.tasks()
    assert {(t["status"], t["reason"]) for t in rows.values()} == {("timed_out", "timeout")}, rows


@pytest.mark.parametrize("how, backend", [("cancel", "headless"), ("timeout", "headless"), ("cancel", "tmux")])
def test_a_worker_that_exited_0_before_the_kill_reached_only_its_leftover_child_succeeded(swarm, how, backend, request):
    """The worker's own process (a shell with no trap) wrote its line and exited 0; its
    wrapper had not recorded that yet when a cancel or a time limit came, whose SIGTERM
    reached only the child the worker left in the background — one with a handler for it.
    The rule took that handler for the worker's: the exit 0 the wrapper then recorded, later
    than the signal, was the kill's (``cancelled``, ``timed_out``), and ``retry`` (or the
    task's own retry) ran finished work again (an adversary: 3 runs in 4 with a timeout).
    The wrapper is held stopped here from just before the worker's exit until the child has
    heard the signal, which fixes that order."""
    ledger, child = swarm.cwd / "ledger", swarm.cwd / "child"
    limit = 'timeout = "5s"\n' if how == "timeout" else ""  # (what comes before its end takes ms)
    swarm.write("s.toml", f'[swarm]\njobs = 1\nkill_grace = "30s"\n[[task]]\nname = "a"\n{limit}'
                          f'cmd = "sh -c \'trap \\"kill $!; exit 0\\" TERM; echo $$ > {child}; sleep 60 & wait\' & '
                          f'until [ -s {child} ]; do sleep 0.01; done; {GATE}; echo end >> {ledger}"\n')
    args, env = backend_args(backend, request)
    with Running(swarm, "s.toml", "--output", "quiet", *args, env=env) as r:
        assert r.run is not None
        leftover = int(wait_until(lambda: child.exists() and child.read_text().strip(), what="the worker's child"))
        wrapper = psutil.Process(psutil.Process(leftover).ppid()).ppid()  # the parent of the worker's own process
        os.kill(wrapper, signal.SIGSTOP)  # it cannot record the worker's end before the kill
        try:
            swarm.open_gate()
            wait_until(lambda: ledger.exists(), what="the worker's last line")
            # (``cancel`` waits for the run's answer, which waits for the wrapper)
            cancel = swarm.popen("cancel", r.run.name, env=env) if how == "cancel" else None
            # (``alive``: a zombie, or reaped between two looks at it, has ended)
            wait_until(lambda: not alive(leftover), timeout=60, what="the leftover child's end, by the kill's SIGTERM")
        finally:
            os.kill(wrapper, signal.SIGCONT)
        r.proc.wait(timeout=60)
        assert cancel is None or cancel.wait(timeout=60) == 0
    row = swarm.tasks()["a"]
    assert (row["status"], row["exit_code"]) == ("succeeded", 0), row
    assert ledger.read_text() == "end\n"


# an init as tini and dumb-init are: the signals blocked, taken by sigwait and passed on to its child
_INIT = """\
import os, signal, sys
sigs = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD}
signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
child = os.fork()
if child == 0:
    signal.pthread_sigmask(signal.SIG_UNBLOCK, sigs)
    os.execvp(sys.argv[1], sys.argv[1:])
while True:
    info = signal.sigwaitinfo(sigs)
    if info.si_signo == signal.SIGCHLD:
        pid, st = os.waitpid(child, os.WNOHANG)
        if pid:
            sys.exit(os.waitstatus_to_exitcode(st) if os.WIFEXITED(st) else 128 + os.WTERMSIG(st))
        continue
    os.kill(child, info.si_signo)
"""


@pytest.mark.parametrize("shape, backend", [("under an init", "headless"), ("under an init", "tmux"),
                                            ("its wrapper killed", "headless"), ("its wrapper killed", "tmux")])
def test_an_agent_that_saves_on_a_cancel_and_exits_0_was_cancelled(swarm, shape, backend, request):
    """The neighbours of the rule above: the signal reached the worker's work, which saved and
    exited 0 — cut short, ``cancelled``, and never ``succeeded`` (a dependent would run on
    unfinished work). Its top process an init that blocks the signal and passes it on
    (``tini``, ``dumb-init``); or its wrapper killed from outside first, its worker adopted,
    no process left to tell its top by (an adversary: both ``succeeded``, 10 in 10 and 6 in 6,
    with a rule that looked only for a handler of the top's own)."""
    py = sys.executable
    swarm.write("saver.py", SAVER)
    swarm.write("init.py", _INIT)
    argv = f'["{py}", "init.py", "{py}", "saver.py"]' if shape == "under an init" else f'["{py}", "saver.py"]'
    swarm.write("s.toml", f'[swarm]\nkill_grace = "10s"\n[[task]]\nname = "a"\nargv = {argv}\n'
                          '[[task]]\nname = "b"\nafter = ["a"]\ncmd = "echo b >> ledger"\n')
    ledger = swarm.cwd / "ledger"
    args, env = backend_args(backend, request)
    with Running(swarm, "s.toml", "--output", "quiet", *args, env=env) as r:
        assert r.run is not None
        pid = swarm.cwd / "saver.pid"
        saver = int(wait_until(lambda: pid.exists() and pid.read_text(), what="the saver"))
        if shape == "its wrapper killed":
            killed_outright(psutil.Process(saver).parent())
        assert swarm("cancel", r.run.name, "a", env=env).code == 0
        r.proc.wait(timeout=60)
    row = swarm.tasks()["a"]
    assert row["status"] == "cancelled", row
    # (an init's child hears the signal twice, from the ladder and from the init passing it on)
    assert "save-end" in ledger.read_text().split() and "b" not in ledger.read_text().split()
