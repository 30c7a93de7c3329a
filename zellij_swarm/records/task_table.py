"""The tasks of a live run that it has not let go of, by id and by name — each one's record
made when something first needs it.

A task waiting in the ready queue needs nothing of its record: the queue has its rank, group
and dependencies, the snapshot its pending row. So a task added to be queued is held packed
(``TaskSpec.pack``: some 70 bytes for a line of a lines file, where its record and spec took
some 550) with its name, and its record is made the first time something asks for it — its
dispatch, a lookup (a ``cancel``, a dependency that failed), a pass over every record. A run
of 100,000 queued tasks holds 100,000 packed specs, and the records of those it has started.

Ids are ``t<order>`` (``records.task.task_id``), orders 1, 2, … in the order tasks are added,
with no gap: a task the run let go of (``EndedTasks`` keeps what is asked of it) leaves the
table but keeps its order. A record made from a packed spec has a spec with no origin
(``source``, ``line``), as one rebuilt by ``resume`` from the run's records: an origin names
the input in the messages given before a run starts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from zellij_swarm.config.swarmfile import TaskSpec
from zellij_swarm.records.task import Journal, TaskRecord, task_id, task_order


class TaskTable(Mapping[str, TaskRecord]):
    """Task records by id (``t<order>``), made from their packed specs as they are asked for.

    As a ``Mapping``, every way of reading a record — ``[id]``, ``get``, ``values``, ``items``
    — makes it; ``in``, ``len``, ``names``, ``order_named``, ``records`` and ``look`` make none.
    ``make`` builds a task's record from its order and spec (its limits resolved from the
    run's settings)."""

    def __init__(self, make: Callable[[int, TaskSpec], TaskRecord]) -> None:
        self._make = make
        self._made: dict[int, TaskRecord] = {}
        self._packed: list[bytes | None] = []  # by order - 1; None once made, or never packed
        self._names: dict[str, int] = {}  # every task here, made or not -> its order
        # the journal records made from now on report to, and the orders it has seen
        # (``follow_from``): a task it has taken in as pending is its from then on
        self._journal: Journal | None = None
        self._journal_seen = 0

    def add(self, spec: TaskSpec, *, packed: bool) -> int:
        """Add a task, packed or with its record made now; its order (the next one: ended
        tasks the table let go of keep theirs)."""
        assert spec.name not in self._names, spec.name
        order = len(self._packed) + 1
        self._names[spec.name] = order
        self._packed.append(spec.pack() if packed else None)
        if not packed:
            self._made[order] = self._make(order, spec)
        return order

    def add_packed(self, name: str, packed: bytes) -> int:
        """Add a task held as ``packed`` (``TaskSpec.pack``, or ``pack_record`` of a resumed
        run's records) named ``name``; its order."""
        assert name not in self._names, name
        self._packed.append(packed)
        order = self._names[name] = len(self._packed)
        return order

    def remove(self, task: TaskRecord) -> bool:
        """Let go of ``task``'s record (it ended); False when the table holds another, or none."""
        if self._made.get(task.order) is not task:
            return False
        del self._made[task.order]
        del self._names[task.name]
        return True

    def record(self, order: int) -> TaskRecord | None:
        """The record of task ``order``, made now if it is still packed; None for a task the
        table does not hold."""
        if (rec := self._made.get(order)) is not None:
            return rec
        if (packed := self._packed_at(order)) is None:
            return None
        rec = self._made[order] = self._make(order, TaskSpec.unpack(packed))
        self._packed[order - 1] = None
        if order <= self._journal_seen:
            rec.journal = self._journal
        return rec

    def look(self, order: int) -> TaskRecord | dict[str, Any] | None:
        """Task ``order`` as it is held: its record, or — not made yet, so pending and
        untouched since it was added — what its packed spec holds (``TaskSpec.packed_fields``),
        decoded for the asker and not kept."""
        if (rec := self._made.get(order)) is not None:
            return rec
        packed = self._packed_at(order)
        return None if packed is None else TaskSpec.packed_fields(packed)

    def _packed_at(self, order: int) -> bytes | None:
        return self._packed[order - 1] if 0 < order <= len(self._packed) else None

    def follow_from(self, journal: Journal, seen: int) -> None:
        """``journal`` has taken in tasks 1…``seen``: the records made of them from now on
        report to it (it set the journal of those already made)."""
        self._journal, self._journal_seen = journal, seen

    def named(self, name: str) -> TaskRecord | None:
        order = self._names.get(name)
        return None if order is None else self.record(order)

    def order_named(self, name: str) -> int | None:
        return self._names.get(name)

    def names(self) -> Iterator[str]:
        return iter(self._names)

    def records(self) -> Iterator[TaskRecord]:
        """The records made so far (not in order): the tasks still packed never ran."""
        return iter(self._made.values())

    def specs(self, start: int = 1) -> Iterator[tuple[str, TaskSpec]]:
        """Every task here from order ``start`` on as (id, spec), in order, making no record."""
        for order in range(max(start, 1), len(self._packed) + 1):
            if (rec := self._made.get(order)) is not None:
                yield rec.id, rec.spec
            elif (packed := self._packed_at(order)) is not None:
                yield task_id(order), TaskSpec.unpack(packed)

    def unended(self) -> int:
        """How many tasks here have not reached a final status (a packed one is pending)."""
        return len(self._names) - sum(t.status.terminal for t in self._made.values())

    def __getitem__(self, key: str) -> TaskRecord:
        order = task_order(key)
        rec = None if order is None else self.record(order)
        if rec is None:
            raise KeyError(key)
        return rec

    def __contains__(self, key: object) -> bool:
        order = task_order(key) if isinstance(key, str) else None
        return order is not None and (order in self._made or self._packed_at(order) is not None)

    def __iter__(self) -> Iterator[str]:
        """The ids here, in order."""
        return (task_id(order) for order in range(1, len(self._packed) + 1)
                if order in self._made or self._packed_at(order) is not None)

    def __len__(self) -> int:
        return len(self._names)
