"""Where a Slurm step's attempt ran (issue 23 §9), in-process: an attempt's record carries its
node, job and time queued into ``status --json``'s history, and the HTML report's bar for it
names the node and the job in its hover text; a local attempt has none of it."""

from __future__ import annotations

from zellij_swarm.commands.report import attempt_bars, bar_title
from zellij_swarm.records.states import TaskStatus
from zellij_swarm.records.task import Attempt


def _attempt(slurm: dict[str, object] | None) -> Attempt:
    return Attempt(1, 2, 3, TaskStatus.LOST, 143, "SIGTERM", "executor_lost", 10.0, 12.5, 99, None, slurm=slurm)


def test_an_attempts_record_says_where_its_step_ran_and_a_local_one_nothing() -> None:
    where = {"node": "n2", "job": "41", "queued_s": 0.2}
    assert _attempt(where).to_json()["slurm"] == where
    assert "slurm" not in _attempt(None).to_json()


def test_every_bar_of_a_slurm_attempt_names_its_node_job_and_time_queued() -> None:
    row = {"name": "build", "status": "running", "slot": 2, "attempts": 2, "generation": 4, "started_at": 13.0,
           "slurm": {"job": "42", "state": "RUNNING", "reason": None, "node": "n1"},
           "history": [_attempt({"node": "n2", "job": "41", "queued_s": 0.2}).to_json()]}
    ended, running = attempt_bars([row], now=20.0)
    assert bar_title(ended) == ("build · attempt 1 · lost, SIGTERM (exit 143), reason executor_lost · 2.500 s · "
                                "slot 2 · node n2 · job 41 · queued 0.2 s")  # its queue time, not charged
    assert bar_title(running).endswith("· slot 2 · node n1 · job 42")
    local = attempt_bars([{**row, "slurm": None, "history": [_attempt(None).to_json()]}], now=20.0)
    assert all("node" not in bar_title(b) for b in local)
