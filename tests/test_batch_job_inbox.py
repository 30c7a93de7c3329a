"""A supervisor that runs in a Slurm batch job (``submit``), in virtual time
(tests/harness.py)."""

from __future__ import annotations

from harness import Harness, Message, Work, task

from zellij_swarm.engine.follow import POLL_INTERVAL


def test_a_supervisor_in_a_batch_job_polls_its_inbox():
    """``submit``'s supervisor: its inbox is written from the login node, which inotify on
    the job's node does not see — it is polled, with no warning, and a cancel still arrives."""
    with Harness(works={"a": (Work(after=30.0),)}) as h:
        r = h.run([task("a")], messages=(Message(1.0, "cancel"),), slurm_job="77")
        watched = h.world.watcher._watched if h.world.watcher is not None else set()
    assert r.exit_code == 130 and r.tasks["a"].status == "cancelled", r.labels
    assert h.world.run is not None and h.world.run.inbox not in watched
    assert "watch_failed" not in r.warnings()
    assert r.at("task_cancelled a") <= 1.0 + POLL_INTERVAL + 1.0  # the ladder's grace at most
