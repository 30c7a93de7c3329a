"""The run's snapshot: the shape of ``state.json``, ``summary.json`` and ``status --json``
(SPEC §7.1), built from the supervisor's state (``RunView``: what it reads, and nothing
else). A terminal task's row is frozen when it ends; only running rows and slots are
computed live.

``build`` costs the same with 100 tasks or 100,000: the rows that do not change by
themselves — a terminal task's, frozen when it ended, and a waiting task's — go to the run's
rows file as they change (``records.snapshot_file``), and the snapshot holds the running
rows and names how much of that file it covers. Its counts and metrics are kept as tasks
move and attempts end (``Followed``, which every task record reports to once the first
snapshot after its creation has seen it), so a snapshot does O(running tasks + what changed
since the last one) work, never a pass over every task. ``full`` is the same snapshot built
from scratch, every row in it: what ``snapshot_file.load`` reads back.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from zellij_swarm.config.settings import Resolved
from zellij_swarm.engine import metrics
from zellij_swarm.engine.live import LiveGen
from zellij_swarm.engine.policy import RunStop
from zellij_swarm.engine.slots import Slots
from zellij_swarm.records import generation_files, snapshot_file
from zellij_swarm.records.rows import TaskRow, WarningRow
from zellij_swarm.records.rows_index import NewestLines
from zellij_swarm.records.rundir import RunPaths
from zellij_swarm.records.snapshot_file import RowsFile
from zellij_swarm.records.states import RunState, SlotState, TaskStatus
from zellij_swarm.records.task import Attempt, TaskRecord, packed_spec_fields, task_id
from zellij_swarm.records.task_table import TaskTable

if TYPE_CHECKING:
    from zellij_swarm.engine.view_watch import ViewWatch


class RunView(Protocol):
    """What a snapshot is made of (the supervisor is one), read-only."""

    @property
    def run_id(self) -> str: ...
    @property
    def name(self) -> str | None: ...
    @property
    def backend_name(self) -> str: ...
    @property
    def jobs(self) -> int: ...
    @property
    def settings(self) -> Resolved: ...
    @property
    def started_at(self) -> float: ...
    @property
    def ended_at(self) -> float | None: ...
    @property
    def detached(self) -> bool: ...
    @property
    def stop(self) -> RunStop: ...
    @property
    def tasks(self) -> TaskTable: ...
    @property
    def live(self) -> Mapping[int, LiveGen]: ...
    @property
    def slots(self) -> Slots: ...
    @property
    def stats(self) -> metrics.DispatchStats: ...
    @property
    def warnings(self) -> list[WarningRow]: ...
    @property
    def views(self) -> ViewWatch | None: ...
    @property
    def wallclock(self) -> Callable[[], float]: ...
    @property
    def paths(self) -> RunPaths: ...
    @property
    def usage(self) -> dict[str, Any] | None: ...  # the run's own CPU and memory, as the snapshot's "usage"
    @property
    def multiplexer(self) -> dict[str, Any] | None: ...  # where its panes are (Backend.place), for ``attach``
    @property
    def dispatching(self) -> dict[str, Any]: ...  # its groups and what is paused (Supervisor.dispatching)


def state_name(run: RunView) -> RunState:
    if run.ended_at is None or run.detached:
        return RunState.INTERRUPTED if run.detached else RunState.RUNNING
    if run.stop.cancelled_by_user:
        return RunState.CANCELLED
    return RunState.FINISHED


def counts(tasks: Mapping[str, TaskRecord]) -> dict[str, int]:
    """Tasks by status, counted over every task (``counts_of`` keeps them as they move)."""
    out = {str(s): 0 for s in TaskStatus}
    for t in tasks.values():
        out[str(t.status)] += 1
    return out


class Followed:
    """The part of a run's snapshots kept as the run goes (the ``Journal`` of its task
    records): counts by status, metrics (``metrics.Accumulator``), the rows file, and the
    tasks whose row is not in it as it stands — running, or changed since (``_loose``).

    A task is followed from the first snapshot after it was added (``discover``: ids are
    ``t<order>``, added in order, so the new ones are the next numbers): what it did before
    is taken in then — its status counted, its attempts added, its row written (a terminal
    task's frozen row is handed over and no longer kept by the record). From then on its
    record reports each move and each ended attempt. A terminal row is written when the task
    ends; a waiting task's at the next snapshot (a task may go back to waiting: a retry). A
    task found ended, or that reaches its final status while followed, is also listed in
    ``settled``: its record is no longer needed whole (``take_settled``)."""

    def __init__(self, rows: RowsFile) -> None:
        self.rows = rows
        self.counts = {str(s): 0 for s in TaskStatus}
        self.metrics = metrics.Accumulator()
        self._seen = 0
        self._loose: dict[str, TaskRecord] = {}
        self.settled: list[TaskRecord] = []

    def moved(self, task: TaskRecord, old: TaskStatus) -> None:
        self.counts[old] -= 1
        self.counts[task.status] += 1
        if task.status.terminal:
            self._loose.pop(task.id, None)
            self.rows.add(snapshot_file.encode(task.row(now=None)))
            self.settled.append(task)
        else:
            self._loose[task.id] = task

    def ended(self, task: TaskRecord, attempt: Attempt) -> None:
        self.metrics.add(attempt)

    def discover(self, tasks: TaskTable) -> None:
        """Start following the tasks added since the last call: they are numbered in the
        order they are added (``Supervisor.add_tasks``, a resumed run's too), so the next
        unseen one is the next number — and the table may have let go of followed ones that
        ended (``take_settled``). A task still packed in the table is pending as it was
        added: its row is written from its spec, and its record, once made, reports here.

        The first call of a resumed run's supervisor finds the rows of the tasks it restored
        in the file already, as the supervisor before it wrote them: a row that is its task's
        newest line there as it is now is not written again (``_write``): a resumed run of
        100,000 tasks wrote all of them again in its first snapshot, 40 MB and their index
        entries each time it was resumed. (Each row is still made, to be compared: that
        snapshot takes the time it took.) The index says which line is a task's newest; a
        file changed in place after it was indexed, so that a later line now names another
        task, reads otherwise than its index — and is no longer set right by a resume, which
        wrote every row again before."""
        earlier = self.rows.earlier_rows() if self._seen == 0 else None
        try:
            while (task := tasks.look(self._seen + 1)) is not None:
                if isinstance(task, TaskRecord):
                    self._follow(task, earlier)
                else:
                    self.counts[TaskStatus.PENDING] += 1
                    self._write(self._seen + 1, snapshot_file.pending_line(
                        task["name"], task_id(self._seen + 1), packed_spec_fields(task)), earlier)
                self._seen += 1
        finally:
            if earlier is not None:
                earlier.close()
        tasks.follow_from(self, self._seen)

    def _follow(self, task: TaskRecord, earlier: NewestLines | None) -> None:
        task.journal = self
        self.counts[task.status] += 1
        for attempt in task.history:
            self.metrics.add(attempt)
        if task.status.terminal:
            self._write(task.order, snapshot_file.encode(task.frozen_row()), earlier)
            self.settled.append(task)
        elif task.status == TaskStatus.RUNNING:
            self._loose[task.id] = task
        else:
            self._write_waiting(task, earlier)

    def _write(self, order: int, line: bytes, earlier: NewestLines | None) -> None:
        """Add the row ``line`` of task ``t<order>`` to the rows file — unless ``earlier``
        holds it as that task's newest line, which readers take already."""
        if earlier is None or not earlier.holds(order, line[:-1]):
            self.rows.add(line)

    def settle(self) -> list[TaskRecord]:
        """Write the rows of the waiting tasks that changed; the running tasks, in plan order."""
        running = []
        for tid, task in list(self._loose.items()):
            if task.status == TaskStatus.RUNNING:
                running.append(task)
                continue
            del self._loose[tid]
            self._write_waiting(task)
        running.sort(key=lambda t: t.order)
        return running

    def _write_waiting(self, task: TaskRecord, earlier: NewestLines | None = None) -> None:
        if task.attempts == 0 and not task.history and not task.warnings and task.status == TaskStatus.PENDING and all(
                v is None for v in (task.slot, task.generation, task.pid, task.pane_id, task.started_at,
                                    task.ended_at, task.exit_code, task.signal, task.reason)):
            line = snapshot_file.pending_line(task.name, task.id, task.optional_fields)  # as it was added
        else:
            line = snapshot_file.encode(task.row(now=None))
        self._write(task.order, line, earlier)


_FOLLOWED: weakref.WeakKeyDictionary[RunView, Followed] = weakref.WeakKeyDictionary()


def followed(run: RunView) -> Followed | None:
    """The incremental part of ``run``'s snapshots, kept for as long as ``run`` lives (None
    for a run view that cannot be a weak key: its snapshots are then built in full)."""
    try:
        found = _FOLLOWED.get(run)
        if found is None:
            found = _FOLLOWED[run] = Followed(RowsFile.of(run.paths.dir))
    except TypeError:
        return None
    return found


def counts_of(run: RunView) -> dict[str, int]:
    """``counts`` of the run's tasks now, without a pass over them."""
    kept = followed(run)
    if kept is None:
        return counts(run.tasks)
    kept.discover(run.tasks)
    return dict(kept.counts)


def take_settled(run: RunView) -> list[TaskRecord]:
    """The tasks found ended or that reached their final status since the last call: their
    rows are in the rows file and their counts and attempts taken in, so nothing the
    snapshot builds reads their records again."""
    kept = followed(run)
    if kept is None or not kept.settled:
        return []
    out, kept.settled = kept.settled, []
    return out


def build(run: RunView) -> dict[str, Any]:
    """The snapshot to write now: the rows file brought up to date first, then its live
    part naming how much of that file it covers."""
    kept = followed(run)
    if kept is None:
        return full(run)
    now = _now(run)
    kept.discover(run.tasks)
    running = kept.settle()
    committed = kept.rows.commit()
    # rows a failed write kept queued come first: a running row is newer than any of them
    tasks = kept.rows.uncommitted() + [t.row(now=now) for t in running]
    figures = kept.metrics.figures(run.stats, jobs=run.jobs, started_at=run.started_at, ended_at=run.ended_at or now)
    return _snapshot(run, now, counts=dict(kept.counts), tasks=tasks, metrics=figures,
                     rows=snapshot_file.reference(committed))


def full(run: RunView) -> dict[str, Any]:
    """The snapshot with every row in it, built from scratch (O(every task)): what
    ``build``'s snapshot and its rows file read back as."""
    now = _now(run)
    figures = metrics.compute(_attempts(run), run.stats, jobs=run.jobs, started_at=run.started_at,
                              ended_at=run.ended_at or now)
    return _snapshot(run, now, counts=counts(run.tasks), tasks=[t.row(now=now) for t in run.tasks.values()],
                     metrics=figures, rows=None)


def _now(run: RunView) -> float:
    now = run.wallclock()
    for lg in run.live.values():
        if lg.task.started_at is None:
            lg.task.started_at = generation_files.started_at(lg.gen)
    return now


def _attempts(run: RunView) -> Iterator[Attempt]:
    return (a for t in run.tasks.values() for a in t.history)


def _snapshot(run: RunView, now: float, *, counts: dict[str, int], tasks: list[TaskRow],
              metrics: dict[str, Any], rows: dict[str, Any] | None) -> dict[str, Any]:
    snap = {
        "run_id": run.run_id,
        "name": run.name,
        "state": state_name(run),
        "backend": run.backend_name,
        "jobs": run.jobs,
        "started_at": run.started_at,
        "ended_at": run.ended_at,
        "updated_at": now,
        "settings": run.settings.as_record(),
        "counts": counts,
        "tasks": tasks,
        "slots": [_slot_row(run, s) for s in range(1, run.jobs + 1)],
        "metrics": metrics,
        "warnings": list(run.warnings),
        "views": run.views.rows() if run.views is not None else [],
        "usage": run.usage,
    }
    if rows is not None:
        snap["rows"] = rows
    if (place := run.multiplexer) is not None:
        snap["multiplexer"] = place
    snap.update(run.dispatching)
    return snap


def _slot_row(run: RunView, slot: int) -> dict[str, Any]:
    lg = run.live.get(slot)
    state = run.slots.state(slot)
    if run.ended_at is not None and state == SlotState.IDLE:
        state = SlotState.CLOSED
    return {
        "slot": slot, "state": str(state),
        "task": lg.task.name if lg else None, "task_id": lg.task.id if lg else None,
        "generation": lg.gen.gen if lg else None, "attempt": lg.task.attempts if lg else None,
        "started_at": lg.task.started_at if lg else None, "pane_id": lg.task.pane_id if lg else None,
    }
