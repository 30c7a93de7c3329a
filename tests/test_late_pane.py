"""A pane that comes up after its generation ran headless instead (SPEC §5.1, issue 21 §3.1):
the first batch's panes appear after both the readiness timeout and the launch heartbeat's
deadline, their tasks run headless, and then the late panes' wrappers start. Each must find
the claim taken and run nothing: a generation runs at most once, whatever arrives late."""

from __future__ import annotations

from harness import Harness, Message, Mux, Pane, Work, task


def test_a_late_pane_runs_nothing_after_its_generation_ran_headless():
    works = {"a": (Work(after=1),), "b": (Work(after=20),)}
    late = Mux(panes={"a": (Pane(delay=8, outlives_abandon=True),), "b": (Pane(),)})
    with Harness(works=works, mux=late, heartbeat_timeout=1.0) as h:
        r = h.run([task("a"), task("b")])
        ran = [w for w in h.world.wrappers if w.name == "a" and w.ran]
    assert (r.tasks["a"].status, r.tasks["a"].attempts) == ("succeeded", 1)
    assert len(ran) == 1 and ran[0].pane_id is None, "only the headless fallback ran task a"
    assert r.warnings() == ["heartbeat_missing"]


def test_a_pane_cancelled_before_its_wrapper_claimed_it_runs_on_retry():
    """The cancel takes the generation's claim before its pane's wrapper came (nothing ran):
    the task is ``cancelled``, that generation an attempt of its own — and ``retry`` runs it.
    The retry's resume once skipped such a generation (claimed by the supervisor: "unstarted")
    and so counted one attempt less than the run's record; it then took the task for one that
    had ended again since the retry began, and left it cancelled (the tmux soak's cancel phase,
    5 rounds in 40)."""
    works = {"a": (Work(after=1),), "b": (Work(after=1),)}
    slow = Mux(panes={"a": (Pane(delay=5, outlives_abandon=True),), "b": (Pane(),)})
    with Harness(works=works, mux=slow, heartbeat_timeout=30.0) as h:
        first = h.run([task("a"), task("b")], messages=(Message(0.5, "cancel", ("a",)),))
        assert (first.tasks["a"].status, first.tasks["a"].reason) == ("cancelled", "cancelled_by_user")
        assert not [w for w in h.world.wrappers if w.name == "a" and w.ran]
        again = h.retry()
        ran = [w for w in h.world.wrappers if w.name == "a" and w.ran]
    assert again.tasks["a"].status == "succeeded" and len(ran) == 1
    assert again.tasks["b"].status == "succeeded"


def test_a_retry_keeps_the_logged_end_of_a_pane_generation_withdrawn_before_it_started():
    """Zellij live, ``--halt now`` or a cancel (an adversary, 9 runs in 10): a pane generation
    withdrawn before its wrapper came keeps its directory and the supervisor's claim (a pane's
    generation is never folded), its end in the log: cancelled, never started. ``retry`` read
    its files instead and recorded its end anew — an ``exit.json`` with the claim's time as its
    start and the retry's as its end: seconds of work invented, ``proof`` failing on them. The
    log's record is the generation's."""
    works = {"a": (Work(after=1),), "b": (Work(after=1),)}
    slow = Mux(panes={"a": (Pane(delay=5, outlives_abandon=True),), "b": (Pane(),)})
    with Harness(works=works, mux=slow, heartbeat_timeout=30.0) as h:
        first = h.run([task("a"), task("b")], messages=(Message(0.5, "cancel", ("a",)),))
        [withdrawn] = first.tasks["a"].history
        assert (withdrawn.status, withdrawn.started_at) == ("cancelled", None)
        gen = h.world.run.gen(withdrawn.slot, withdrawn.generation)
        h.world.advance(3)  # the retry comes later: its moment is no end of anything
        again = h.retry()
        assert not gen.exit_record.exists(), gen.exit_record.read_text()
    a = again.tasks["a"]
    assert [(x.status, x.started_at, x.ended_at) for x in a.history[:1]] == [
        ("cancelled", None, withdrawn.ended_at)], a.history
    assert a.status == "succeeded" and len(a.history) == 2
