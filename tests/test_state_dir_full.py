"""A full state directory (SPEC §5.8) in virtual time: an outcome is what the launcher saw
when the wrapper could not write it, ``unknown`` when nobody saw it, a generation that could
not even be claimed never counts, and no new task starts until there is room. The state dir's
fullness is patched in (``rundir``), so these scenarios run one at a time, never concurrently.
The same end to end on a real filled filesystem: tests/test_faults.py."""

from __future__ import annotations

import errno
import os

import pytest
from harness import Harness, Launch, Message, Mux, Work, task

from zellij_swarm import exc
from zellij_swarm.commands import run as run_command
from zellij_swarm.engine import room
from zellij_swarm.records import generation_files, rundir


@pytest.fixture
def full(monkeypatch: pytest.MonkeyPatch) -> dict[str, bool]:
    """The state directory is full while ``state["full"]``; a test frees it by setting False."""
    return patch_full(monkeypatch)


def patch_full(monkeypatch: pytest.MonkeyPatch) -> dict[str, bool]:
    """``rundir`` says the state directory is full while the returned ``state["full"]``."""
    state = {"full": True}
    monkeypatch.setattr(rundir, "unwritable", lambda path: state["full"])
    monkeypatch.setattr(rundir, "has_room", lambda path: not state["full"])
    return state


def test_a_headless_exit_the_wrapper_could_not_record_is_the_launchers(full):
    with Harness(works={"a": (Work(after=1, unrecorded=True),), "b": (Work(after=1, code=3, unrecorded=True),)}) as h:
        h.world.at(3, lambda: full.update(full=False))
        r = h.run([task("a"), task("b"), task("c")])
    assert (r.tasks["a"].status, r.tasks["a"].exit_code) == ("succeeded", 0)
    assert (r.tasks["b"].status, r.tasks["b"].exit_code) == ("failed", 3)
    assert r.tasks["c"].status == "succeeded" and r.at("worker_launch_invoked c") >= 3.0  # waited for room
    r.assert_order("dispatch_held", "dispatch_resumed", "worker_launch_invoked c")
    assert r.warnings() == ["state_dir_error"] and r.exit_code == 1


@pytest.mark.parametrize("cancel_at", [1.2, 0.5])
def test_a_headless_exit_the_wrapper_could_not_record_is_the_launchers_when_its_pidfd_fires_first(full, cancel_at):
    """A whole-run stop follows every headless wrapper by a pidfd as well (the launcher may be
    stuck). A wrapper that could not write its sidecar ends — just before the stop (1.2), or
    after a TERM it ignored (0.5: uncaught, its exit its own) — and its pidfd fires before
    its launcher, alive and answering, reports the wait status it reaped. Its end is that
    status, not ``unknown`` or the kill's: the launcher holds it (SPEC §5.8). An adversary:
    SIGTERM to a headless run on a full state dir, a task that had written its ledger line
    recorded ``unknown (state_dir_error)`` (and ``wrapper_lost`` with room)."""
    work = Work(after=1, term="ignores", unrecorded=True)
    with Harness(works={"a": (work,)}, launches=(Launch(reports_ends_after=0.5),)) as h:
        h.world.at(6, lambda: full.update(full=False))
        r = h.run([task("a")], messages=(Message(at=cancel_at, kind="cancel"),))
    a = r.tasks["a"]
    assert (a.status, a.exit_code, a.reason) == ("succeeded", 0, None)
    assert r.at("worker_completed a") >= 1.5  # the launcher's word, not the pidfd's


def test_a_pane_worker_whose_end_nobody_saw_is_unknown_and_not_retried(full):
    with Harness(works={"a": (Work(after=1, vanishes=True),)}, mux=Mux()) as h:
        h.world.at(2, lambda: full.update(full=False))
        r = h.run([task("a", retries=2)])
    a = r.tasks["a"]
    assert (a.status, a.reason, a.attempts) == ("unknown", "state_dir_error", 1)
    assert r.exit_code == 1 and r.summary is not None
    assert r.summary["counts"]["unknown"] == 1
    with pytest.raises(exc.UsageError, match="1 task\\(s\\) of unknown outcome and no other to retry"):
        run_command.retry_selection(r.summary, [task("a")], [], "run")


def test_a_pane_wrapper_that_could_write_nothing_but_its_claim_is_collected_while_the_disk_stays_full(
        full, monkeypatch):
    """A pane's wrapper claimed its generation, then could write no start and no exit (the
    disk full), and ended. At its heartbeat deadline the supervisor's own claim — a draft
    first — found no room either, and the look was made again every second without ever
    asking whether the claimant still lived: the run never ended while the disk stayed full
    (an adversary: tmux, 3 in 3, once for 12 minutes). The claim is the wrapper's, so its end
    is looked for, and nobody saw how it ran: ``unknown``."""
    install = generation_files._install_supervisor_claim

    def no_room(gen, how):
        if full["full"]:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return install(gen, how)

    monkeypatch.setattr(generation_files, "_install_supervisor_claim", no_room)
    monkeypatch.setattr(room, "FULL_GIVE_UP", 1e6)  # the disk stays full: the run does not give up
    with Harness(works={"a": (Work(after=1, silent_when_full=True),)}, mux=Mux()) as h:
        h.world.at(30, lambda: full.update(full=False))
        r = h.run([task("a", retries=2)])
    a = r.tasks["a"]
    assert (a.status, a.reason, a.attempts) == ("unknown", "state_dir_error", 1)
    assert r.at("worker_failed a") < 30  # not once there was room again


def test_retry_leaves_unknown_tasks_unless_asked(full):
    snap = {"tasks": [{"name": "a", "id": "t1", "status": "unknown", "attempts": 1},
                      {"name": "b", "id": "t2", "status": "failed", "attempts": 1}]}
    assert set(run_command.retry_selection(snap, [task("a"), task("b")], [], "r")) == {"t2"}
    assert set(run_command.retry_selection(snap, [task("a"), task("b")], [], "r", unknown=True)) == {"t1", "t2"}
    assert set(run_command.retry_selection(snap, [task("a"), task("b")], ["a"], "r")) == {"t1"}


def test_a_generation_that_could_not_be_claimed_never_ran_and_runs_once_there_is_room(full):
    with Harness(works={"a": (Work(claim_fails_when_full=True),)}) as h:
        h.world.at(4, lambda: full.update(full=False))
        r = h.run([task("a")])
    a = r.tasks["a"]
    assert (a.status, a.attempts, [str(x.status) for x in a.history]) == ("succeeded", 1, ["succeeded"])
    r.assert_order("dispatch_held", "task_requeued a", "dispatch_resumed", "worker_completed a")
    assert r.exit_code == 0


def test_a_state_dir_that_never_has_room_again_ends_the_run_interrupted(full, monkeypatch):
    monkeypatch.setattr(room, "FULL_GIVE_UP", 5.0)
    with Harness(works={"a": (Work(after=1, unrecorded=True),)}, jobs=1) as h:
        r = h.run([task("a"), task("b")])
    assert r.exit_code == 1 and r.summary is None  # interrupted: `resume` goes on
    assert r.tasks["a"].status == "succeeded" and r.tasks["b"].status == "pending"
    assert any("has had no room" in line for line in r.problems)
