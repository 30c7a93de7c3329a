"""Task and slot states, their groups, and the one place each may change.

The status names are the stable JSON vocabulary of SPEC §7.1. ``transition`` is the only
function that moves a task or a slot; an illegal move is a programming error and raises.
The groups are sets of the enums; being ``StrEnum`` members, they also hold the plain
strings read back from JSON (``"failed" in FAILED_STATUSES``).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Final, TypeVar


class TaskStatus(enum.StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"
    LOST = "lost"
    # It ran, and how it ended cannot be known: its wrapper could not record its exit (a full
    # state directory) and nothing else saw it. Never re-run by itself: it may have finished.
    UNKNOWN = "unknown"

    @property
    def terminal(self) -> bool:
        return self not in (TaskStatus.PENDING, TaskStatus.RUNNING)

    @property
    def retryable(self) -> bool:
        """Outcomes that earn a new generation while attempts remain (SPEC §6)."""
        return self in FAILED_STATUSES


def own_end(code: int | None, signal: str | None) -> TaskStatus:
    """What a worker's own end says when nothing else is known of it (SPEC §5.7): exit 0 with no
    signal succeeded; any other code, a death by signal or no code at all failed. The
    supervisor's outcome weighs more evidence (a kill it sent, a pane that closed, Slurm's
    verdict) before it falls back to this; the renderers use it for an end not yet recorded."""
    return TaskStatus.SUCCEEDED if code == 0 and signal is None else TaskStatus.FAILED


def all_succeeded(counts: Mapping[str, int]) -> bool:
    """Every task of a run (its counts by status) succeeded: what exit 0 means."""
    return counts.get(TaskStatus.SUCCEEDED, 0) == sum(counts.values())


class SlotState(enum.StrEnum):
    IDLE = "idle"
    RESERVED = "reserved"
    RUNNING = "running"
    STOPPING = "stopping"  # its generation has ended; what is left of its process tree is being ended
    CLOSED = "closed"


class RunState(enum.StrEnum):
    """A run's state, as ``state.json``, ``summary.json`` and ``ls`` say it (SPEC §7.1)."""

    RUNNING = "running"
    FINISHED = "finished"  # every task reached an end of its own (it may have failed)
    CANCELLED = "cancelled"  # stopped by ``cancel``, a signal or ``--halt``
    INTERRUPTED = "interrupted"  # its supervisor is gone before the end (``resume`` goes on)

    @property
    def ended(self) -> bool:
        """Nothing more will run unless someone retries it."""
        return self in (RunState.FINISHED, RunState.CANCELLED)


TERMINAL_STATUSES: Final = frozenset(s for s in TaskStatus if s.terminal)
# Ended without succeeding, for whatever reason: what a run's "not succeeded" counts.
UNSUCCESSFUL_STATUSES: Final = TERMINAL_STATUSES - {TaskStatus.SUCCEEDED}
# The worker ran and failed — its exit, a time limit, or it vanished — as opposed to being
# cancelled or skipped: what "failed" counts, and what is retried (SPEC §6).
FAILED_STATUSES: Final = frozenset({TaskStatus.FAILED, TaskStatus.TIMED_OUT, TaskStatus.LOST})
# The status a generation's end stands for, by its reason, wherever the reason came from (a
# kill's, the wrapper's record, Slurm's job state). A reason not here leaves it to the worker's
# exit code (or, for a kill, makes it cancelled).
REASON_STATUS: Final[dict[str, TaskStatus]] = {
    "timeout": TaskStatus.TIMED_OUT, "idle_timeout": TaskStatus.TIMED_OUT,
    "no_exit_record": TaskStatus.LOST, "multiplexer_lost": TaskStatus.LOST, "executor_lost": TaskStatus.LOST,
    "cwd_missing": TaskStatus.FAILED, "state_dir_error": TaskStatus.UNKNOWN, "executor_failed": TaskStatus.FAILED,
    "out_of_memory": TaskStatus.FAILED, "spawn_failed": TaskStatus.FAILED,
    "executor_cancelled": TaskStatus.CANCELLED,
    "pane_closed": TaskStatus.CANCELLED,  # its pane closed before its worker began: nothing ran
    "exit_garbled": TaskStatus.UNKNOWN,  # it ended; how, nothing says
    "records_removed": TaskStatus.UNKNOWN,  # it ran, and its records went while it did (no status seen)
    "wrapper_lost": TaskStatus.UNKNOWN,  # its wrapper was killed; its worker ran on to an end nobody saw
    # a pane's Slurm step that ended by a signal while the controller that then forgot its job
    # was down: Slurm's kill of an orphan or the worker's own end, nothing says which
    "job_forgotten": TaskStatus.UNKNOWN,
    # a Slurm step whose node failed (Slurm lost its slurmd) while its worker ran, with no word
    # that anything ended it: the worker may run on there, and finish
    "node_failed": TaskStatus.UNKNOWN,
}
# A slot reserved for a generation or running it: what ``status`` lists without ``--all``.
ACTIVE_SLOT_STATES: Final = frozenset({SlotState.RESERVED, SlotState.RUNNING})

TASK_TRANSITIONS: Final[dict[TaskStatus, frozenset[TaskStatus]]] = {
    TaskStatus.PENDING: frozenset({TaskStatus.RUNNING, TaskStatus.SKIPPED, TaskStatus.CANCELLED}),
    # RUNNING -> PENDING is a retry: the task waits for a slot to run its next generation.
    TaskStatus.RUNNING: TERMINAL_STATUSES - {TaskStatus.SKIPPED} | {TaskStatus.PENDING},
    **{s: frozenset() for s in TERMINAL_STATUSES},
}

SLOT_TRANSITIONS: Final[dict[SlotState, frozenset[SlotState]]] = {
    SlotState.IDLE: frozenset({SlotState.RESERVED, SlotState.CLOSED}),
    SlotState.RESERVED: frozenset({SlotState.RUNNING, SlotState.IDLE, SlotState.STOPPING}),
    SlotState.RUNNING: frozenset({SlotState.IDLE, SlotState.STOPPING}),
    SlotState.STOPPING: frozenset({SlotState.IDLE}),
    SlotState.CLOSED: frozenset(),
}


class InvalidTransition(RuntimeError):
    def __init__(self, what: str, src: str, dst: str) -> None:
        super().__init__(f"{what}: illegal transition {src} -> {dst}")


_S = TypeVar("_S", TaskStatus, SlotState)


def transition(what: str, src: _S, dst: _S) -> _S:
    """Return ``dst`` if ``src -> dst`` is allowed, else raise ``InvalidTransition``."""
    table = TASK_TRANSITIONS if isinstance(src, TaskStatus) else SLOT_TRANSITIONS
    if dst not in table[src]:
        raise InvalidTransition(what, src, dst)
    return dst
