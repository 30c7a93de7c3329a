"""A live run keeps of a task that reached its final status only what it still asks of it
(``records.task.EndedTasks``): its name, id and status, and its headless wrappers' sessions.
Every question about such a task is answered as it was when the whole record was kept — a
cancel or restart of it (by name or id), a name it took, a dependency on it — and the
snapshot, the summary and the sweep at the end are those of every task."""

from __future__ import annotations

import pytest
from harness import Harness, Message, Mux, Work, task
from test_scenarios import works

from zellij_swarm.records.states import TaskStatus
from zellij_swarm.records.task import EndedTasks, TaskRecord, wrapper_ends


@pytest.mark.parametrize("mux", [None, Mux("zellij"), Mux("tmux")], ids=["headless", "zellij", "tmux"])
def test_the_run_lets_go_of_ended_records_and_still_answers_about_them(mux: Mux | None) -> None:
    with Harness(works=works(a=Work(after=1), b=Work(after=1, code=3), c=Work(after=30), d=Work(after=1),
                             e=Work(after=1)), jobs=3, mux=mux) as h:
        r = h.run([task("a"), task("b"), task("c")], messages=(
            Message(5, "cancel", ("a",)),
            Message(5, "cancel", ("t2",)),  # by id
            Message(5, "restart", ("b",)),
            Message(6, "add", ({"name": "a", "cmd": "fake a"},)),  # a name an ended task took
            Message(6, "add", ({"name": "d", "cmd": "fake d", "after": ["a"]},)),  # after one that succeeded
            Message(6, "add", ({"name": "e", "cmd": "fake e", "after": ["b"]},)),  # after one that failed
            Message(12, "cancel", ("c",)),
        ))
    assert r.let_go[:2] in (["a", "b"], ["b", "a"])  # let go of before the messages came
    assert r.replies[0] == {"ok": False, "cancelled": [], "already_ended": ["a"],
                            "error": "nothing to cancel: a already ended"}
    assert r.replies[1] == {"ok": False, "cancelled": [], "already_ended": ["b"],
                            "error": "nothing to cancel: b already ended"}
    assert r.replies[2]["ok"] is False and r.replies[2]["not_running"] == ["b (failed)"]
    assert r.replies[3]["ok"] is False and "duplicate task name 'a'" in r.replies[3]["error"]
    assert r.replies[4] == {"ok": True, "added": ["d"]} and r.replies[5] == {"ok": True, "added": ["e"]}
    assert {n: (str(t.status), t.reason) for n, t in r.tasks.items()} == {
        "a": ("succeeded", None), "b": ("failed", None), "c": ("cancelled", "cancelled_by_user"),
        "d": ("succeeded", None), "e": ("skipped", "dependency_failed")}
    assert r.summary is not None
    assert r.summary["counts"] == {"pending": 0, "running": 0, "succeeded": 2, "failed": 1, "timed_out": 0,
                                   "cancelled": 1, "skipped": 1, "lost": 0, "unknown": 0}
    rows = {row["name"]: row for row in r.summary["tasks"]}
    assert sorted(rows) == ["a", "b", "c", "d", "e"]
    assert (rows["b"]["exit_code"], len(rows["b"]["history"])) == (3, 1)  # its row whole, as it ended
    assert rows["a"]["history"][0]["slot"] == r.tasks["a"].history[0].slot
    assert r.summary["metrics"]["first_batch_launch_span_ms"] is not None  # its members' records let go


def test_ended_tasks_keep_names_ids_statuses_and_the_wrappers_sessions() -> None:
    from zellij_swarm.config.swarmfile import TaskSpec
    from zellij_swarm.records.task import Attempt

    ended = EndedTasks()
    records = []
    for n, (status, pid, pane) in enumerate(((TaskStatus.SUCCEEDED, 101, None), (TaskStatus.FAILED, 102, "%3"),
                                             (TaskStatus.SKIPPED, None, None)), 1):
        rec = TaskRecord(spec=TaskSpec(name=f"task {n}", cmd="true"), id=f"t{n}", order=n, timeout=None, retries=0,
                         idle_timeout=None, status=status)
        if pid is not None:
            rec.history = (Attempt(1, n, 1, status, 0, None, None, 1.0, 2.0, pid, pane),)
        records.append(rec)
        ended.add(rec)
    assert len(ended) == 3 and list(ended.names()) == ["task 1", "task 2", "task 3"]
    assert ended.with_id("t2") == ended.named("task 2") and ended.named("task 2").status == TaskStatus.FAILED
    assert ended.with_id("t4") is None and ended.named("task 4") is None and ended.named("t2") is None
    for not_an_id in ("t", "t0", "t02", "t\u0662", "t-1", "T2", "t2 ", ""):  # "t" and digits, as ids are written
        assert ended.with_id(not_an_id) is None, not_an_id
    assert ended.with_id("t3").id == "t3" and ended.with_id("t3").name == "task 3"
    # a pane's attempt names no session of ours; a task that never ran, none at all
    assert list(ended.wrapper_ends()) == list(wrapper_ends(records)) == [(101, 2.0)]


def test_a_resumed_run_lets_go_of_the_tasks_it_finds_ended() -> None:
    with Harness(works=works(a=Work(after=1), b=Work(after=1, code=3), c=Work(after=10), d=Work(after=1)),
                 jobs=3) as h:
        h.run([task("a"), task("b"), task("c")], crash_at=5)
        r = h.resume(messages=(
            Message(1, "cancel", ("a",)),
            Message(1, "add", ({"name": "d", "cmd": "fake d", "after": ["a"]},)),
            Message(1, "add", ({"name": "b", "cmd": "fake b"},)),
        ))
    assert {"a", "b"} <= set(r.let_go)
    assert r.replies[0]["already_ended"] == ["a"] and r.replies[1] == {"ok": True, "added": ["d"]}
    assert "duplicate task name 'b'" in r.replies[2]["error"]
    assert {n: str(t.status) for n, t in r.tasks.items()} == {"a": "succeeded", "b": "failed", "c": "succeeded",
                                                             "d": "succeeded"}
    assert r.summary is not None and sorted(row["name"] for row in r.summary["tasks"]) == ["a", "b", "c", "d"]



def test_a_name_is_looked_up_before_an_id_whether_its_task_ended_or_not() -> None:
    """A task named ``t3`` that ended, and the run's third task (id ``t3``) still running: a
    cancel of ``t3`` means the one so named, as it did while every record was kept whole."""
    with Harness(works=works(t3=Work(after=1), b=Work(after=1), c=Work(after=10)), jobs=3) as h:
        r = h.run([task("t3"), task("b"), task("c")], messages=(Message(5, "cancel", ("t3",)),))
    assert "t3" in r.let_go and r.tasks["c"].id == "t3"
    assert r.replies[0]["already_ended"] == ["t3"]
    assert str(r.tasks["c"].status) == "succeeded"


@pytest.mark.parametrize("mux", [Mux("zellij"), Mux("tmux")], ids=["zellij", "tmux"])
def test_a_supervisor_gone_mid_run_leaves_its_session_as_it_is(mux: Mux) -> None:
    """A supervisor that goes without reaching the run's end — an internal error, or
    detached — leaves its workers running in their panes for ``resume`` (its crash message
    says so): the backend is not closed. With ``--close-session`` (or ``CI`` set) closing
    it killed the session and every worker in it, which ``resume`` then ran again."""
    with Harness(works=works(a=Work(after=10), b=Work(after=10)), jobs=2, mux=mux) as h:
        r = h.run([task("a"), task("b")], crash_at=2)
    assert r.exit_code is None
    assert [call for call in r.mux_calls if call[0] == "close"] == []
    with Harness(works=works(a=Work(after=1), b=Work(after=1)), jobs=2, mux=mux) as h:  # the run's end closes it
        r = h.run([task("a"), task("b")])
    assert r.exit_code == 0 and [call for call in r.mux_calls if call[0] == "close"] == [("close", False)]


def test_the_warnings_said_before_a_resume_stay_in_the_runs_record() -> None:
    """A supervisor killed after a warning (here an ended task's idle warning; a refused Slurm
    step's is another): the resumed run's summary lists it still, for the run and on its
    task's row, as ``status`` showed them before the resume — said once, not again."""
    with Harness(works={"a": (Work(after=10, output_every=0.5),), "b": (Work(after=4),)},
                 idle_timeout=2, idle_policy="warn") as h:
        first = h.run([task("a"), task("b")], crash_at=5)
        assert first.warnings() == ["idle_timeout"] and first.tasks["b"].status == TaskStatus.SUCCEEDED
        resumed = h.resume(after=1)
    assert resumed.exit_code == 0 and resumed.summary is not None
    assert resumed.warnings() == ["idle_timeout"]  # the whole log: said once, before the resume
    assert [(w["code"], w["task"]) for w in resumed.summary["warnings"]] == [("idle_timeout", "b")]
    rows = {row["name"]: row for row in resumed.summary["tasks"]}
    assert [w["code"] for w in rows["b"]["warnings"]] == ["idle_timeout"] and rows["a"]["warnings"] == []


def test_an_idle_timeouts_kill_keeps_its_warning_on_its_tasks_row_across_a_resume() -> None:
    """Under ``idle_policy`` kill an idle timeout's warning goes on its task's row only (its
    ``timed_out`` says the rest), logged as the ``idle_timeout`` event, not a warning: a resume
    (or a retry) said it again from that event, or the row lost it."""
    with Harness(works={"a": (Work(after=10, output_every=0.5),), "b": (Work(after=30),)},
                 idle_timeout=2, idle_policy="kill") as h:
        first = h.run([task("a"), task("b")], crash_at=5)
        assert first.tasks["b"].status == TaskStatus.TIMED_OUT
        said = [w["message"] for w in first.tasks["b"].warnings]
        assert len(said) == 1 and said[0].startswith("no output and no heartbeat for "), said
        resumed = h.resume(after=1)
    assert resumed.summary is not None and resumed.summary["warnings"] == []  # the run never listed it
    rows = {row["name"]: row for row in resumed.summary["tasks"]}
    assert [w["message"] for w in rows["b"]["warnings"]] == said and rows["a"]["warnings"] == []
