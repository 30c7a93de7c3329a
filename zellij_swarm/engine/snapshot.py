"""The run's snapshot: the shape of ``state.json``, ``summary.json`` and ``status --json``
(SPEC §7.1), built from the supervisor's state (``RunView``: what it reads, and nothing
else). Terminal task rows are the frozen ones their records keep; only running rows and
slots are computed live."""

from __future__ import annotations

import signal
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from zellij_swarm.config.settings import Resolved
from zellij_swarm.engine import metrics
from zellij_swarm.engine.live import LiveGen
from zellij_swarm.engine.slots import Slots
from zellij_swarm.records import generation_files
from zellij_swarm.records.states import SlotState, TaskStatus
from zellij_swarm.records.task import TaskRecord

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
    def cancelled(self) -> bool: ...
    @property
    def stop_signal(self) -> signal.Signals | None: ...
    @property
    def tasks(self) -> Mapping[str, TaskRecord]: ...
    @property
    def live(self) -> Mapping[int, LiveGen]: ...
    @property
    def slots(self) -> Slots: ...
    @property
    def stats(self) -> metrics.DispatchStats: ...
    @property
    def warnings(self) -> list[dict[str, Any]]: ...
    @property
    def views(self) -> ViewWatch | None: ...
    @property
    def wallclock(self) -> Callable[[], float]: ...


def state_name(run: RunView) -> str:
    if run.ended_at is None or run.detached:
        return "interrupted" if run.detached else "running"
    if run.stop_signal is not None or run.cancelled:
        return "cancelled"
    return "finished"


def counts(tasks: Mapping[str, TaskRecord]) -> dict[str, int]:
    out = {str(s): 0 for s in TaskStatus}
    for t in tasks.values():
        out[str(t.status)] += 1
    return out


def build(run: RunView) -> dict[str, Any]:
    now = run.wallclock()
    for lg in run.live.values():
        if lg.task.started_at is None:
            lg.task.started_at = generation_files.started_at(lg.gen)
    attempts = [a for t in run.tasks.values() for a in t.history]
    return {
        "run_id": run.run_id,
        "name": run.name,
        "state": state_name(run),
        "backend": run.backend_name,
        "jobs": run.jobs,
        "started_at": run.started_at,
        "ended_at": run.ended_at,
        "updated_at": now,
        "settings": run.settings.as_record(),
        "counts": counts(run.tasks),
        "tasks": [t.row(now=now) for t in run.tasks.values()],
        "slots": [_slot_row(run, s) for s in range(1, run.jobs + 1)],
        "metrics": metrics.compute(attempts, run.stats, jobs=run.jobs, started_at=run.started_at,
                                   ended_at=run.ended_at or now),
        "warnings": list(run.warnings),
        "views": run.views.rows() if run.views is not None else [],
    }


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
