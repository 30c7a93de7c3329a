"""`retry RUN [TASK…] [--failed]`: an ended run's failures run again in the same run record,
with new attempts and their history kept (issue 15 part 1)."""

from __future__ import annotations

import json
import re
import signal

import pytest
from swarmtest import full, kill_run_processes, validate, wait_until

# flaky fails until the file `fixed` exists; each attempt of every task appends to the ledger
SWARM = """
[swarm]
jobs = 2
retries = 1
[[task]]
name = "ok"
cmd = 'echo "ok $ZELLIJ_SWARM_ATTEMPT" >> ledger'
[[task]]
name = "flaky"
cmd = 'echo "flaky $ZELLIJ_SWARM_ATTEMPT" >> ledger; [ -e fixed ] || exit 3; while [ ! -e go ]; do sleep 0.05; done'
[[task]]
name = "after-flaky"
cmd = 'echo "after-flaky $ZELLIJ_SWARM_ATTEMPT" >> ledger'
after = ["flaky"]
[[task]]
name = "slow"
cmd = 'echo "slow $ZELLIJ_SWARM_ATTEMPT" >> ledger; sleep 30'
timeout = "1s"
"""


def status(swarm, run) -> dict:
    return json.loads(swarm("status", "--json", run.name).stdout)


def ledger(swarm) -> list[str]:
    path = swarm.cwd / "ledger"
    return path.read_text().splitlines() if path.exists() else []


def first_run(swarm):
    swarm.write("s.toml", SWARM)
    res = swarm("run", "s.toml", "--backend", "headless", "--output", "quiet")
    assert res.code == 1, res.stderr
    run = swarm.latest()
    rows = {t["name"]: t["status"] for t in status(swarm, run)["tasks"]}
    assert rows == {"ok": "succeeded", "flaky": "failed", "after-flaky": "skipped", "slow": "timed_out"}
    return run


@pytest.mark.parametrize("crash,backend", [full(False, "headless"), (True, "headless"), full(False, "tmux")])
def test_retry_runs_the_failures_and_their_skipped_dependents_again(swarm, request, crash, backend):
    env = None
    if backend == "tmux":  # the retry runs where it is told to, in live panes
        from tmuxtest import outside_env

        env = outside_env(request.getfixturevalue("tmux"))
    run = first_run(swarm)
    (swarm.cwd / "fixed").touch()
    (swarm.cwd / "s.toml").write_text(SWARM.replace("sleep 30", "true"))  # the record, not the file, is run
    proc = swarm.popen("retry", run.name, "--output", "quiet", "--timeout", "1h", "--backend", backend,
                       "--ui", "live", env=env)
    try:
        wait_until(lambda: "flaky 3" in ledger(swarm), what="flaky's new attempt")
        if crash:  # every generation once across a kill -9 and a resume
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
            assert status(swarm, run)["state"] == "interrupted"
            proc = swarm.popen("resume", run.name, "--output", "quiet")
        (swarm.cwd / "go").touch()
        code = proc.wait(timeout=60)
    finally:
        (swarm.cwd / "go").touch()
        if proc.poll() is None:
            proc.kill()
        kill_run_processes(run.name)
    snap = status(swarm, run)
    validate(snap, "status")
    rows = {t["name"]: t for t in snap["tasks"]}
    # slow was retried under the recorded settings... and its own timeout key (1s) wins over --timeout
    assert rows["slow"]["status"] == "timed_out" and code == 1
    assert {n: rows[n]["status"] for n in ("ok", "flaky", "after-flaky")} == {
        "ok": "succeeded", "flaky": "succeeded", "after-flaky": "succeeded"}
    assert rows["flaky"]["attempts"] == 3 and [a["attempt"] for a in rows["flaky"]["history"]] == [1, 2, 3]
    assert rows["ok"]["attempts"] == 1, "a task that succeeded is not run again"
    assert sorted(ledger(swarm)) == sorted(["ok 1", "flaky 1", "flaky 2", "slow 1", "slow 2",
                                            "flaky 3", "after-flaky 1", "slow 3", "slow 4"])
    events = [json.loads(x)["event"] for x in (run / "events.jsonl").read_text().splitlines()]
    assert events.count("run_retried") == 1 and events[-1] == "run_finished"


def test_retry_of_named_tasks_and_refusals(swarm):
    run = first_run(swarm)
    res = swarm("retry", run.name, "ok", "--output", "quiet")
    assert res.code == 1  # the run still has failures: they were not retried
    rows = {t["name"]: t for t in status(swarm, run)["tasks"]}
    assert rows["ok"]["attempts"] == 2 and rows["ok"]["status"] == "succeeded"
    assert rows["flaky"]["attempts"] == 2, "not named, not run"
    assert swarm("retry", run.name, "nope").code == 2
    assert swarm("retry", run.name, "ok", "--failed").code == 2


def test_a_retry_says_how_long_it_took_and_how_long_since_the_run_began(swarm):
    """Its last line said "finished in 3.6s" of a retry that took 0.1 s: the run's time since
    it first began, gaps included, read as the retry's."""
    run = first_run(swarm)
    res = swarm("retry", run.name, "--output", "group")
    took = re.search(r"finished in ([0-9.]+)s \(([0-9.]+)s since the run began\)", res.stderr)
    assert took is not None, res.stderr
    assert float(took[1]) <= float(took[2])


@pytest.mark.parametrize("flags, said", [
    (("--worktree",), "started with no task in a worktree, so it has no base commit for one"),
    (("--executor", "slurm"), "--executor slurm: cannot reach the Slurm cluster"),
])
def test_a_retry_with_settings_its_tasks_cannot_run_with_is_refused_and_spends_nothing(swarm, flags, said):
    """Refused before anything runs (exit 2), as ``run`` refuses them, the run's records as
    they were: each task's new attempt failed (``worktree_failed``, ``executor_failed``) and was
    spent, and ``logs`` showed that empty attempt instead of the task's own output."""
    run = first_run(swarm)
    before = {t["name"]: (t["status"], t["attempts"]) for t in status(swarm, run)["tasks"]}
    events = (run / "events.jsonl").read_bytes()
    res = swarm("retry", run.name, *flags)  # (no cluster: none is configured here)
    assert res.code == 2 and res.stderr.count("\n") == 1 and said in res.stderr, res
    assert {t["name"]: (t["status"], t["attempts"]) for t in status(swarm, run)["tasks"]} == before
    assert (run / "events.jsonl").read_bytes() == events


def test_retry_of_a_running_run_says_use_restart(swarm):
    swarm.write("w.txt", "while [ ! -e go ]; do sleep 0.05; done\n")
    proc = swarm.popen("run", "w.txt", "--backend", "headless", "--output", "quiet")
    run = swarm.started()
    try:
        wait_until(lambda: (run / "state.json").exists(), what="running")
        res = swarm("retry", run.name)
        assert res.code == 2 and "restart" in res.stderr, res.stderr
    finally:
        (swarm.cwd / "go").touch()
        proc.wait(timeout=60)
        kill_run_processes(run.name)


def test_retry_of_an_interrupted_run_with_nothing_failed_points_to_resume():
    """It said "every task succeeded; nothing to retry" of a run killed with tasks running
    and pending, none of which had succeeded."""
    from zellij_swarm import exc
    from zellij_swarm.commands.run import retry_selection

    snap = {"tasks": [{"name": "a", "id": "t1", "status": "running"}, {"name": "b", "id": "t2", "status": "pending"},
                      {"name": "c", "id": "t3", "status": "succeeded"}]}
    with pytest.raises(exc.UsageError, match=r"^run r1: no task failed; 2 have not ended \(the run was interrupted\): "
                                             r"`zellij-swarm resume r1` goes on with them$"):
        retry_selection(snap, [], [], "r1")


def test_a_retry_in_tmux_opens_its_panes_in_the_session_the_run_left(swarm, tmux):
    """The run's tmux session stays at its end (the default); its retry's ``new-session`` found
    the name taken, said ``pane_call_failed`` and ran the retried tasks headless."""
    from tmuxtest import outside_env

    env = outside_env(tmux)
    swarm.write("t.txt", "echo ok\n[ -e fixed ] || exit 3\n")
    assert swarm("run", "t.txt", "--backend", "tmux", "--ui", "live", "--output", "quiet", env=env).code == 1
    run = swarm.latest()
    session = f"swarm-{run.name}"
    (swarm.cwd / "fixed").touch()
    try:
        res = swarm("retry", run.name, "--backend", "tmux", "--ui", "live", env=env)
    finally:
        kill_run_processes(run.name)
    assert res.code == 0 and "pane_call_failed" not in res.stderr and "headless" not in res.stderr, res.stderr
    assert tmux("list-sessions", "-F", "#{session_name}").split() == [session]
    # the run's window held its board and task-2's failed pane: the one stale, the other closed
    # by task-2's success (README); the retry's window is the one left
    assert len(tmux("list-windows", "-t", f"={session}:", "-F", "#{window_id}").split()) == 1
    retried = {t["name"]: t for t in status(swarm, run)["tasks"]}["task-2"]
    assert (retried["status"], retried["attempts"]) == ("succeeded", 2)
    assert [a["pane_id"] is not None for a in retried["history"]] == [True, True]
