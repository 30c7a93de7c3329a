"""`restart RUN TASK`: the running generation ends through the one stopping path and a new
attempt starts at once, not counting against the task's retries (issue 15 part 2)."""

from __future__ import annotations

import json
import signal

import pytest
from swarmtest import backend_args, full, kill_run_processes, wait_until

# Each attempt appends its number to a ledger, then waits for the gate named after it.
SWARM = """
[swarm]
jobs = 2
[[task]]
name = "agent"
cmd = 'echo "$ZELLIJ_SWARM_ATTEMPT" >> ledger; while [ ! -e "go-$ZELLIJ_SWARM_ATTEMPT" ]; do sleep 0.05; done'
[[task]]
name = "other"
cmd = "while [ ! -e go-other ]; do sleep 0.05; done"
"""


def row(swarm, run, name: str) -> dict:
    try:
        tasks = json.loads(swarm("status", "--json", run.name).stdout)["tasks"]
    except (ValueError, KeyError):
        return {}
    return next((t for t in tasks if t["name"] == name), {})


def ledger(swarm) -> list[str]:
    path = swarm.cwd / "ledger"
    return path.read_text().split() if path.exists() else []


@pytest.mark.parametrize("crash,backend", [full(False, "headless"), (True, "headless"), full(False, "tmux"),
                                           (False, "zellij-0.45.0")])
def test_restart_ends_the_generation_and_runs_a_new_attempt_at_once(swarm, request, crash, backend):
    # in panes (tmux, Zellij): the restarted one closes, the new attempt gets a pane of its own
    args, env = backend_args(backend, request)
    swarm.write("s.toml", SWARM)
    proc = swarm.popen("run", "s.toml", *(args or ("--backend", backend)), "--output", "quiet", env=env)
    run = swarm.started()
    try:
        wait_until(lambda: ledger(swarm) == ["1"] and row(swarm, run, "other").get("status") == "running",
                   what="both running")
        res = swarm("restart", run.name, "agent")
        assert res.code == 0 and "restarted in run" in res.stderr, res.stderr
        wait_until(lambda: ledger(swarm) == ["1", "2"], what="the second attempt")
        if crash:  # every generation once across a kill -9 and a resume
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
            proc = swarm.popen("resume", run.name, "--output", "quiet")
            wait_until(lambda: json.loads(swarm("status", "--json", run.name).stdout)["state"] == "running",
                       what="resumed")
        for gate in ("go-2", "go-other"):
            (swarm.cwd / gate).touch()
        assert proc.wait(timeout=60) == 0
    finally:
        for gate in ("go-1", "go-2", "go-3", "go-other"):
            (swarm.cwd / gate).touch()
        if proc.poll() is None:
            proc.kill()
        kill_run_processes(run.name)
    agent = row(swarm, run, "agent")
    assert ledger(swarm) == ["1", "2"], "each attempt ran once"
    assert agent["status"] == "succeeded" and agent["attempts"] == 2  # retries = 0: the restart used none
    first = agent["history"][0]
    assert (first["status"], first["reason"]) == ("cancelled", "restarted")
    assert row(swarm, run, "other")["status"] == "succeeded"  # never touched


def test_restart_of_a_task_not_running_or_a_run_not_running_is_refused(swarm):
    swarm.write("s.toml", SWARM)
    proc = swarm.popen("run", "s.toml", "--backend", "headless", "--output", "quiet", "-j", "1")
    run = swarm.started()
    try:
        wait_until(lambda: row(swarm, run, "agent").get("status") == "running", what="agent running")
        res = swarm("restart", run.name, "other")  # -j 1: still pending
        assert res.code == 1 and "not running, so not restarted: other (pending)" in res.stderr, res.stderr
        assert swarm("restart", run.name, "nope").code == 2
    finally:
        for gate in ("go-1", "go-other"):
            (swarm.cwd / gate).touch()
        proc.wait(timeout=60)
        kill_run_processes(run.name)
    res = swarm("restart", run.name, "agent")
    assert res.code == 2 and "is finished: nothing to restart" in res.stderr, res.stderr
