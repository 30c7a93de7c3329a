"""A task's persisted record: the row of SPEC §7.1, its attempts, and its frozen final form.

A task's final fields are written onto its record when it finishes, and its row is frozen
then (SPEC §9): a terminal row never reads anything live from the slot it ran in. Once a
``Journal`` follows the record (the run's snapshot, ``engine.snapshot``), the frozen row is
handed to it the moment the task finishes and not kept here: a run of 100,000 tasks holds
100,000 records, not 100,000 rows as well.
"""

from __future__ import annotations

import re
import shlex
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from zellij_swarm.config.swarmfile import TaskSpec
from zellij_swarm.records.generation_files import ExitRecord
from zellij_swarm.records.rows import AttemptRow, OptionalFields, TaskRow, WarningRow
from zellij_swarm.records.states import TaskStatus, transition

# The names given to tasks that have none (a line of a lines file, ``add RUN -- CMD``; an
# unnamed addition while the input is still read from stdin, ``added-N``): such a task's row
# also carries its command, which is what a person recognises it by.
GENERATED_NAME = re.compile(r"(?:task|added)-[1-9][0-9]*")
_INPUT_NAME = re.compile(r"task-([1-9][0-9]*)")


def input_number(name: str) -> int | None:
    """N of ``task-N``: the name a run's input gives its N-th task (None: another name)."""
    m = _INPUT_NAME.fullmatch(name)
    return int(m.group(1)) if m else None
LOST_RERUNS = 3  # executor_lost re-runs a task gets without using an attempt (last_end_is_free)


class TaskWorktree(Protocol):
    """What a task's record and its dispatch need of the git worktree it runs in
    (``worker.worktree.Worktree``, a layer above: records never run git themselves)."""

    def workdir(self, cwd: str) -> str: ...

    def row(self, *, final: bool) -> dict[str, Any]: ...


def command_text(spec: TaskSpec) -> str:
    return _command_text(spec.cmd, spec.argv)


def _command_text(cmd: str | None, argv: Sequence[str] | None) -> str:
    return cmd if cmd is not None else shlex.join(argv or ())


def spec_fields(spec: TaskSpec) -> OptionalFields:
    """The optional fields of a task's row its spec alone decides (``TaskRecord.optional_fields``):
    the command of a task whose name was generated, the group of one that has one."""
    return _row_fields(spec.name, spec.cmd, spec.argv, spec.group)


def packed_spec_fields(packed: Mapping[str, Any]) -> OptionalFields:
    """``spec_fields`` of a spec held packed, from its ``TaskSpec.packed_fields`` (a field
    ``pack`` left out is a bare spec's: None)."""
    return _row_fields(packed["name"], packed.get("cmd"), packed.get("argv"), packed.get("group"))


def _row_fields(name: str, cmd: str | None, argv: Sequence[str] | None, group: str | None) -> OptionalFields:
    out: OptionalFields = {}
    if GENERATED_NAME.fullmatch(name):
        out["command"] = _command_text(cmd, argv)
    if group is not None:
        out["group"] = group
    return out


@dataclass(slots=True)
class Attempt:
    """One generation of a task, as recorded when it ended."""

    attempt: int
    slot: int
    generation: int
    status: TaskStatus
    exit_code: int | None
    signal: str | None
    reason: str | None
    started_at: float | None
    ended_at: float | None
    pid: int | None
    pane_id: str | None
    backfill: bool = False  # started in a slot the moment its previous worker ended
    # a Slurm step's: where it ran (``node``, ``job``: its "job.step" id) and ``queued_s``
    slurm: dict[str, Any] | None = None

    def to_json(self) -> AttemptRow:
        out: AttemptRow = {
            "attempt": self.attempt, "slot": self.slot, "generation": self.generation, "status": str(self.status),
            "exit_code": self.exit_code, "signal": self.signal, "reason": self.reason,
            "started_at": self.started_at, "ended_at": self.ended_at, "pid": self.pid, "pane_id": self.pane_id,
        }
        if self.slurm:
            out["slurm"] = self.slurm
        return out


class Journal(Protocol):
    """What follows a task record's changes (``engine.snapshot``): told of every status
    change after it happened, and of every attempt once it is in the history."""

    def moved(self, task: TaskRecord, old: TaskStatus) -> None: ...
    def ended(self, task: TaskRecord, attempt: Attempt) -> None: ...


@dataclass(slots=True)
class TaskRecord:
    spec: TaskSpec
    id: str
    order: int
    timeout: float | None
    retries: int
    idle_timeout: float | None
    status: TaskStatus = TaskStatus.PENDING
    attempts: int = 0
    restarts: int = 0  # generations ended by `restart`: they do not use an attempt
    granted: int = 0  # attempts made before a `retry` of the run: it gives the task its retries anew
    slot: int | None = None
    generation: int | None = None
    pid: int | None = None
    pane_id: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    exit_code: int | None = None
    signal: str | None = None
    reason: str | None = None
    # Tuples, not lists: most tasks have no warning and one attempt, and a run holds a record
    # for every task (an empty tuple is shared; an empty list is 56 bytes of each record's own).
    warnings: tuple[WarningRow, ...] = ()
    # While it runs: waiting for input on its terminal; None when that cannot be known.
    waiting_input: bool | None = False
    # Why the kernel will not say whether it waits (no ptrace access): then only its screen does.
    waiting_evidence: str | None = None
    history: tuple[Attempt, ...] = ()
    worktree: TaskWorktree | None = None  # the git worktree it runs in (``worker.worktree``), once it has one
    # Under the Slurm executor: its step as Slurm last showed it — {"job", "state", "reason"} while
    # it runs (a queued step is PENDING, with why), {"node"} once its wrapper said where it ran
    slurm: dict[str, Any] | None = None
    # The frozen row of a terminal task no journal follows yet (the journal takes it over).
    _frozen: TaskRow | None = field(default=None, repr=False)
    journal: Journal | None = field(default=None, repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.spec.name

    def move(self, status: TaskStatus) -> None:
        old = self.status
        self.status = transition(f"task {self.name!r}", old, status)
        if self.journal is not None:
            self.journal.moved(self, old)

    @property
    def attempts_left(self) -> bool:
        return self.attempts < self.granted + self.retries + 1 + self.restarts

    @property
    def last_end_is_free(self) -> bool:
        """The last generation's end re-runs the task without using an attempt: its
        multiplexer was lost (SPEC §6: it re-runs headless), or Slurm lost its step (SPEC §11:
        its node), up to ``LOST_RERUNS`` times a task — a node that keeps failing then uses
        attempts like any fault."""
        reason = self.history[-1].reason if self.history else None
        return reason == "multiplexer_lost" or (
            reason == "executor_lost" and sum(a.reason == "executor_lost" for a in self.history) <= LOST_RERUNS)

    def start_generation(self, slot: int, gen: int) -> None:
        self.move(TaskStatus.RUNNING)
        self.attempts += 1
        self.slot, self.generation = slot, gen
        self.pid = self.pane_id = self.started_at = self.ended_at = self.exit_code = self.signal = self.reason = None

    def withdraw_generation(self) -> None:
        """The generation just reserved never started (its backend could not start): the
        task is as if it had never been given a slot."""
        self.attempts -= 1
        self.slot = self.generation = None

    def end_generation(self, status: TaskStatus, rec: ExitRecord | None, reason: str | None,
                       *, backfill: bool, ended_at: float, slurm: dict[str, Any] | None = None) -> Attempt:
        """Record a generation's end; the task's status becomes ``status`` (or pending for a
        retry). ``slurm``: where its Slurm step ran (``Attempt.slurm``)."""
        assert self.slot is not None and self.generation is not None
        attempt = Attempt(
            self.attempts, self.slot, self.generation, status,
            rec.code if rec else None, rec.signal if rec else None, reason,
            rec.started_at if rec else self.started_at, (rec.ended_at if rec and rec.ended_at else ended_at),
            (rec.pid if rec and rec.pid else self.pid), self.pane_id, backfill, slurm or None,
        )
        self.history = (*self.history, attempt)
        self.waiting_input = False
        self.exit_code, self.signal, self.reason = attempt.exit_code, attempt.signal, reason
        self.started_at, self.ended_at, self.pid = attempt.started_at, attempt.ended_at, attempt.pid
        if self.journal is not None:
            self.journal.ended(self, attempt)
        return attempt

    def warn(self, warning: WarningRow) -> None:
        self.warnings = (*self.warnings, warning)

    def finish(self, status: TaskStatus, reason: str | None = None) -> None:
        """Move to a terminal status and freeze the row."""
        old = self.status
        self.status = transition(f"task {self.name!r}", old, status)
        if reason is not None:
            self.reason = reason
        self._settled(old)

    def restore(self, status: TaskStatus, reason: str | None = None) -> None:
        """Put a task rebuilt from a run's records (``resume``) in ``status``; a terminal one
        is frozen as ``finish`` would. The transition table describes a live run, not a
        rebuild, so it is not consulted here — and nowhere else is it bypassed."""
        old, self.status = self.status, status
        if status.terminal:
            self.reason = reason
        self._settled(old)

    def _settled(self, old: TaskStatus) -> None:
        """After a status change that did not go through ``move``: freeze the row of a
        terminal task (for its journal, or kept here until one follows the task)."""
        self._frozen = None
        if self.journal is not None:
            self.journal.moved(self, old)
        elif self.status.terminal:
            self._frozen = self.row(now=None)

    def frozen_row(self) -> TaskRow:
        """A terminal task's row as it was frozen (taken by the journal that starts following
        it, so the record no longer keeps it)."""
        row, self._frozen = self._frozen, None
        return row if row is not None else self.row(now=None)

    def row(self, *, now: float | None) -> TaskRow:
        if self._frozen is not None:
            return self._frozen
        duration = None
        if self.started_at is not None:
            end = self.ended_at if self.ended_at is not None else now
            duration = round(end - self.started_at, 3) if end is not None else None
        row: TaskRow = {
            "name": self.name, "id": self.id, "status": str(self.status), "exit_code": self.exit_code,
            "signal": self.signal, "attempts": self.attempts, "slot": self.slot, "generation": self.generation,
            "pid": self.pid, "pane_id": self.pane_id, "started_at": self.started_at, "ended_at": self.ended_at,
            "duration_s": duration, "reason": self.reason, "waiting_input": self.waiting_input,
            "warnings": list(self.warnings),
            "history": [a.to_json() for a in self.history],
            **self.optional_fields,
        }
        return row

    @property
    def optional_fields(self) -> OptionalFields:
        """What a row carries only when there is something to say: the command of a task whose
        name was generated, the group of a task that has one, the worktree of a task that runs
        in one (with its changed-files count once the task has ended), its Slurm step, why its
        waiting for input cannot be seen (``waiting_evidence``)."""
        out = spec_fields(self.spec)
        if self.worktree is not None:
            out["worktree"] = self.worktree.row(final=self.status.terminal)
        if self.slurm:
            out["slurm"] = dict(self.slurm)
        if self.waiting_evidence is not None:
            out["waiting_evidence"] = self.waiting_evidence
        return out


def task_id(order: int) -> str:
    """A task's id: ``t`` and its order in the run (1, 2, …), as every task is given one."""
    return f"t{order}"


def task_order(name_or_id: str) -> int | None:
    """The order an id names (``task_id``'s inverse), None for anything not written so."""
    number = name_or_id[1:]
    if name_or_id[:1] != "t" or not (number.isascii() and number.isdigit()) or number[0] == "0":
        return None
    return int(number)


@dataclass(frozen=True, slots=True)
class EndedTask:
    """What a live run keeps of a task that reached its final status (``EndedTasks``)."""

    name: str
    order: int
    status: TaskStatus

    @property
    def id(self) -> str:
        return task_id(self.order)


class EndedTasks:
    """The tasks of a live run that reached their final status once their rows were in the
    run's rows file (``engine.snapshot.take_settled``): all the run still asks of them — that
    their names are taken (an ``add``, a follow-up), their ids (a dependency on one), their
    status (a ``cancel`` or ``restart`` of one), and the sessions their headless wrappers led
    (the sweep at the end) — in some 100 bytes a task, where its whole record (spec,
    attempts, times) took 1.2 KB. A run of 100,000 tasks holds the records of the tasks not
    ended, not of every task. Ids are ``t<order>`` (``Supervisor.add_tasks``): one mapping,
    name to order, and each order's status (a byte) serve both lookups; an ``EndedTask`` is
    made for the asker."""

    _STATUSES = tuple(TaskStatus)
    _NONE = 255  # the status byte of an order no ended task has

    def __init__(self) -> None:
        self._orders: dict[str, int] = {}
        self._names: list[str | None] = []  # by order
        self._status = bytearray()  # by order: the index of its status in _STATUSES, or _NONE
        # the headless attempts' wrapper pids and end times, side by side (16 bytes an attempt)
        self._wrapper_pids = array("q")
        self._wrapper_ends = array("d")

    def add(self, task: TaskRecord) -> None:
        assert task.status.terminal and task.id == task_id(task.order), (task.status, task.id, task.order)
        self._orders[task.name] = task.order
        if len(self._status) <= task.order:
            grow = task.order + 1 - len(self._status)
            self._status.extend(bytes([self._NONE]) * grow)
            self._names.extend([None] * grow)
        self._status[task.order] = self._STATUSES.index(task.status)
        self._names[task.order] = task.name
        for pid, ended_at in wrapper_ends((task,)):
            self._wrapper_pids.append(pid)
            self._wrapper_ends.append(ended_at)

    def named(self, name: str) -> EndedTask | None:
        order = self._orders.get(name)
        return None if order is None else self._at(order)

    def with_id(self, name_or_id: str) -> EndedTask | None:
        """By id (``task_id``)."""
        order = task_order(name_or_id)
        return None if order is None else self._at(order)

    def _at(self, order: int) -> EndedTask | None:
        if order >= len(self._status) or (status := self._status[order]) == self._NONE:
            return None
        name = self._names[order]
        assert name is not None
        return EndedTask(name, order, self._STATUSES[status])

    def names(self) -> Iterator[str]:
        return iter(self._orders)

    def __len__(self) -> int:
        return len(self._orders)

    def wrapper_ends(self) -> Iterator[tuple[int, float]]:
        """(pid, ended_at) of every headless attempt of these tasks."""
        return zip(self._wrapper_pids, self._wrapper_ends, strict=True)


def wrapper_ends(tasks: Iterable[TaskRecord]) -> Iterator[tuple[int, float]]:
    """(pid, ended_at) of every headless attempt of ``tasks`` (whole records) whose end was
    seen — an exit code, the wrapper's or the launcher's — as ``EndedTasks.wrapper_ends`` gives
    them. One gone unseen has as its end the moment it was noticed, maybe long after its pid
    went to somebody else: no bound on what its session held (``engine.stopping``)."""
    return ((a.pid, a.ended_at) for t in tasks for a in t.history
            if a.pid is not None and a.ended_at is not None and a.pane_id is None and a.exit_code is not None)
