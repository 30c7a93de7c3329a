"""A live run holds a task that waits in its queue packed (``records.task_table``): its
record is made when something first needs it — its dispatch, a lookup (a cancel by name or
id, a dependency that failed), a pass over every record — and every question about it is
answered as if the record had been there all along: its pending row, its name taken, its
dependents."""

from __future__ import annotations

from dataclasses import replace

import pytest
from harness import Harness, Message, Mux, Work, task
from test_scenarios import works

from zellij_swarm.config.swarmfile import TaskSpec
from zellij_swarm.records.states import TaskStatus
from zellij_swarm.records.task import TaskRecord, task_id
from zellij_swarm.records.task_table import TaskTable

SPECS = [
    TaskSpec(name="task-1", cmd="true", source="cmds.txt", line=1),
    TaskSpec(name="build \"x\"\n", argv=("make", "-j", "", "ünï"), cwd="/tmp/a b", env={"A": "1", "B": ""},
             timeout=0.0, retries=0, idle_timeout=2.5, after=("task-1",), priority=-3, tags=("x", "y"), group="g",
             worktree=False, waiting_pattern="> $", slurm={"gpus": 1}),
    TaskSpec(name="c", cmd="", worktree=True, priority=7),
    TaskSpec(name="d", argv=()),
]


@pytest.mark.parametrize("spec", SPECS, ids=["line", "everything", "flags", "empty-argv"])
def test_a_packed_spec_unpacks_as_it_was_but_its_origin(spec: TaskSpec) -> None:
    got = TaskSpec.unpack(spec.pack())
    assert got == replace(spec, source="", line=0)
    assert got.to_record() == spec.to_record() and (got.source, got.line) == ("", 0)
    assert isinstance(got.argv, tuple | type(None)) and isinstance(got.after, tuple) and isinstance(got.tags, tuple)


def test_a_line_of_a_lines_file_packs_in_its_name_and_command() -> None:
    assert SPECS[0].pack() == b'{"name":"task-1","cmd":"true"}'


def _record(order: int, spec: TaskSpec) -> TaskRecord:
    return TaskRecord(spec=spec, id=task_id(order), order=order, timeout=None, retries=0, idle_timeout=None)


def test_the_table_makes_a_record_once_and_only_when_asked_for_one() -> None:
    made: list[str] = []

    def make(order: int, spec: TaskSpec) -> TaskRecord:
        made.append(spec.name)
        return _record(order, spec)

    table = TaskTable(make)
    assert table.add(SPECS[0], packed=True) == 1 and made == []
    assert table.add(SPECS[2], packed=False) == 2 and made == ["c"]
    kept = table.record(2)
    assert table.add(SPECS[3], packed=True) == 3
    # none of these makes a record
    assert len(table) == 3 and list(table.names()) == ["task-1", "c", "d"] and table.order_named("d") == 3
    assert "t1" in table and "t3" in table and "t4" not in table and "task-1" not in table and "t01" not in table
    assert list(table.records()) == [kept] and table.unended() == 3
    assert [(tid, spec.name) for tid, spec in table.specs()] == [("t1", "task-1"), ("t2", "c"), ("t3", "d")]
    assert table.look(3) == {"name": "d", "argv": []} and table.look(2) is kept and table.look(4) is None
    assert made == ["c"]
    # these do, once
    first = table["t1"]
    assert table.named("task-1") is first and table.get("t1") is first and table.record(1) is first
    assert made == ["c", "task-1"] and first.spec.cmd == "true"
    with pytest.raises(KeyError):
        table["t9"]
    assert table.get("nope") is None and table.named("nope") is None
    first.status = TaskStatus.SUCCEEDED
    assert table.unended() == 2
    assert table.remove(first) and not table.remove(first)
    assert "t1" not in table and table.named("task-1") is None and len(table) == 2
    assert list(table) == ["t2", "t3"] and [t.name for t in table.values()] == ["c", "d"]
    assert made == ["c", "task-1", "d"]
    assert table.add(TaskSpec(name="e"), packed=True) == 4  # after the one let go of, not in its place


def test_a_record_made_after_the_journal_took_its_task_in_reports_to_it() -> None:
    class Journal:
        def __init__(self) -> None:
            self.moves: list[str] = []

        def moved(self, task: TaskRecord, old: TaskStatus) -> None:
            self.moves.append(f"{task.name}:{old}->{task.status}")

        def ended(self, task: TaskRecord, attempt: object) -> None:
            pass

    table = TaskTable(_record)
    for n in range(1, 4):
        table.add(TaskSpec(name=f"n{n}", cmd="true"), packed=True)
    journal = Journal()
    table.follow_from(journal, 2)  # it has seen tasks 1 and 2, not 3
    table["t2"].move(TaskStatus.RUNNING)
    table["t3"].move(TaskStatus.RUNNING)  # not seen: its journal is set when it is taken in
    assert journal.moves == ["n2:pending->running"] and table["t3"].journal is None


@pytest.mark.parametrize("mux", [None, Mux("zellij"), Mux("tmux")], ids=["headless", "zellij", "tmux"])
def test_queued_tasks_get_their_records_when_first_needed_and_are_answered_for_before(mux: Mux | None) -> None:
    with Harness(works=works(a=Work(after=5), b=Work(after=1, code=3), c=Work(after=1), d=Work(after=1),
                             e=Work(after=1)), jobs=1, mux=mux) as h:
        r = h.run([task("a"), task("b"), task("c", after=["b"]), task("d"), task("e")], messages=(
            Message(1, "cancel", ("d",)),  # queued, by name
            Message(1, "cancel", ("t5",)),  # queued, by id
            Message(1, "add", ({"name": "c", "cmd": "fake c"},)),  # a name a queued task holds
            Message(1, "add", ({"name": "f", "cmd": "fake f", "after": ["c"]},)),  # after a queued one
        ))
    assert r.replies[0]["cancelled"] == ["d"] and r.replies[1]["cancelled"] == ["e"]
    assert r.replies[2]["ok"] is False and "duplicate task name 'c'" in r.replies[2]["error"]
    assert r.replies[3] == {"ok": True, "added": ["f"]}
    assert {n: (str(t.status), t.reason) for n, t in r.tasks.items()} == {
        "a": ("succeeded", None), "b": ("failed", None), "c": ("skipped", "dependency_failed"),
        "d": ("cancelled", "cancelled_by_user"), "e": ("cancelled", "cancelled_by_user"),
        "f": ("skipped", "dependency_failed")}
    # a at its dispatch; d and e at their cancels; b at its dispatch; c and f as they were skipped
    assert r.made == ["a", "d", "e", "b", "c", "f"]
    assert r.summary is not None and r.summary["counts"]["skipped"] == 2
    rows = {row["name"]: row for row in r.summary["tasks"]}
    assert sorted(rows) == ["a", "b", "c", "d", "e", "f"] and rows["c"]["reason"] == "dependency_failed"


def test_a_task_may_depend_on_one_given_after_it() -> None:
    """Dependencies name tasks anywhere in the input, as its check allows: a task queued
    before the one it waits for still waits for it, and is skipped when it fails."""
    with Harness(works=works(a=Work(after=1), b=Work(after=1, code=2), c=Work(after=1), d=Work(after=1)),
                 jobs=2) as h:
        r = h.run([task("a", after=["c"]), task("b", after=["d"]), task("c"), task("d")])
    assert {n: str(t.status) for n, t in r.tasks.items()} == {
        "a": "succeeded", "b": "failed", "c": "succeeded", "d": "succeeded"}
    starts = {e["task"]: e["ts"] for e in r.events if e["event"] == "slot_reserved"}
    ends = {e["task"]: e["ts"] for e in r.events if e["event"] in ("worker_completed", "worker_failed")}
    assert starts["a"] >= ends["c"] and starts["b"] >= ends["d"]


def test_a_task_skipped_as_it_is_added_skips_those_already_waiting_on_it() -> None:
    """An addition whose task depends on one given after it (``y`` after ``x``) queues ``y``
    first; ``x``, after a task that already failed, is skipped as it is queued — and so is
    ``y``, which waited on it (left waiting, the run ended with it pending, never run)."""
    from harness import Message

    adds = ({"name": "x", "cmd": "fake x", "after": ["f", "z"]}, {"name": "y", "cmd": "fake y", "after": ["x"]},
            {"name": "z", "cmd": "fake z"})
    with Harness(works=works(f=Work(after=1, code=1), long=Work(after=5), z=Work(after=1)), jobs=2) as h:
        r = h.run([task("f"), task("long")], messages=(Message(2, "add", adds),))
    assert r.replies == [{"ok": True, "added": ["x", "y", "z"]}]
    assert {n: (str(t.status), t.reason) for n, t in r.tasks.items()} == {
        "f": ("failed", None), "long": ("succeeded", None), "z": ("succeeded", None),
        "x": ("skipped", "dependency_failed"), "y": ("skipped", "dependency_failed")}


@pytest.mark.parametrize("spec", SPECS, ids=["line", "everything", "flags", "empty-argv"])
def test_a_record_read_back_packs_as_its_spec_does(spec: TaskSpec) -> None:
    """A resumed run packs the tasks of its records that never ran without making their specs
    (``pack_record``): the same bytes as the spec made of the record packs into, also for a
    record that spells a bare field another way (null, an empty list or table, 0)."""
    from zellij_swarm.config.swarmfile import pack_record

    record = spec.to_record()
    assert pack_record(record) == TaskSpec.from_record(record).pack()
    spelled = {**record, **{k: v for k, v in (("env", None), ("after", None), ("tags", None), ("priority", None),
                                               ("slurm", {}), ("argv", record["argv"]))
                            if not record.get(k)}, "unknown": 1}
    assert pack_record(spelled) == TaskSpec.from_record(spelled).pack()
    with pytest.raises(ValueError, match="its record's priority is not a whole number"):
        pack_record({**record, "priority": "7"})


def test_a_resumed_run_makes_the_records_of_the_tasks_it_needs_and_the_others_at_their_dispatch() -> None:
    """A resumed run of 100,000 tasks made the record of every task as it began: 50,000 that
    never ran among them. Now those that ran, or that a warning, cancel or retry names, are
    made as it begins; the others stay packed until their dispatch, as in the run it resumes."""
    with Harness(works=works(a=Work(after=1), b=Work(after=5), c=Work(after=1), d=Work(after=1), e=Work(after=1)),
                 jobs=2) as h:
        first = h.run([task("a"), task("b"), task("c"), task("d", after=["c"]), task("e")],
                      messages=(Message(0.5, "cancel", ("e",)),), crash_at=1.5)
        assert first.exit_code is None and first.made == ["a", "b", "e", "c"]
        r = h.resume(after=1)
    assert {n: (str(t.status), t.attempts) for n, t in r.tasks.items()} == {
        "a": ("succeeded", 1), "b": ("succeeded", 1), "c": ("succeeded", 1), "d": ("succeeded", 1),
        "e": ("cancelled", 0)}
    # a, b and c ran (b runs on, adopted), e was cancelled: made as the resume began; d at its dispatch
    assert r.made == ["a", "b", "c", "e", "d"]
