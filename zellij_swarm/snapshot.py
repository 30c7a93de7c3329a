"""The run's snapshot: the shape of ``state.json``, ``summary.json`` and ``status --json``
(SPEC §7.1). Terminal task rows are the frozen ones their records keep; only running rows and
slots are computed live. Part of ``Supervisor`` (a mixin only to keep the modules small)."""

from __future__ import annotations

from typing import Any

from . import metrics, sidecars
from .states import SlotState


class SnapshotMixin:
    def state_name(self) -> str:
        if self.ended_at is None:
            return "interrupted" if self.detached else "running"
        if self.detached:
            return "interrupted"
        if self.stop_signal is not None or self.cancelled:
            return "cancelled"
        return "finished"

    def snapshot(self) -> dict[str, Any]:
        now = self.wallclock()
        for lg in self.live.values():
            if lg.task.started_at is None:
                lg.task.started_at = sidecars.started_at(lg.gen)
        attempts = [a for t in self.tasks.values() for a in t.history]
        return {
            "run_id": self.run_id,
            "name": self.plan.name,
            "state": self.state_name(),
            "backend": self.backend.name,
            "jobs": self.jobs,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "updated_at": now,
            "settings": self.settings.as_record(),
            "counts": self.counts(),
            "tasks": [t.row(now=now) for t in self.tasks.values()],
            "slots": [self._slot_row(s) for s in range(1, self.jobs + 1)],
            "metrics": metrics.compute(attempts, self.stats, jobs=self.jobs, started_at=self.started_at,
                                       ended_at=self.ended_at or now),
            "warnings": list(self.warnings),
            "views": self.views.rows() if self.views is not None else [],
        }

    def _slot_row(self, slot: int) -> dict[str, Any]:
        lg = self.live.get(slot)
        state = self.slot_state[slot]
        if self.ended_at is not None and state == SlotState.IDLE:
            state = SlotState.CLOSED
        return {
            "slot": slot, "state": str(state),
            "task": lg.task.name if lg else None, "task_id": lg.task.id if lg else None,
            "generation": lg.gen.gen if lg else None, "attempt": lg.task.attempts if lg else None,
            "started_at": lg.task.started_at if lg else None, "pane_id": lg.task.pane_id if lg else None,
        }
