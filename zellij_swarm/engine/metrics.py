"""Run metrics (SPEC §6), from the wrappers' own timestamps wherever they exist.

A generation's start is its claim's modification time and its end the exit sidecar's, both
written by the wrapper; the scheduler's clock only marks reservations and the run's ends.

This module owns what a run's metrics are. The dispatcher's own counts (``DispatchStats``)
are the only part not kept in the wrappers' files; each of them is also in the event log
(``slot_reserved``, ``batch_dispatch_started``, ``backfill``), so ``DispatchStats.replay``
rebuilds them from it. ``resume`` does, so that a resumed run's metrics are the whole run's,
not its last supervisor's; and ``first_batch`` is the one reading of "the first batch", used
by that replay and by ``proof`` alike.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from zellij_swarm.records.task import Attempt

# The events ``first_batch`` reads; a reader of the raw log may skip every other line unparsed.
FIRST_BATCH_EVENTS = ("slot_reserved", "batch_dispatch_started", "run_resumed")


def first_batch(events: Iterable[object]) -> tuple[float | None, list[tuple[int, int]]]:
    """The first batch of a run's event log: its reservation time and its (slot, generation)
    members — the ``slot_reserved`` events up to the first ``batch_dispatch_started``. Reads
    no further than that, so ``events`` may be a lazy reader of a long log.

    A supervisor killed between reserving its first batch and writing that batch's event
    leaves reservations without one; the ``run_resumed`` of the next supervisor (or the end of
    the log) then ends the first batch. A ``run_resumed`` before any reservation ends nothing:
    the first batch is then the resumed supervisor's."""
    reserved_at: float | None = None
    members: list[tuple[int, int]] = []
    for ev in events:
        if not isinstance(ev, dict):
            continue
        name = ev.get("event")
        if name == "batch_dispatch_started" or (name == "run_resumed" and members):
            break
        if name != "slot_reserved":
            continue
        ts, slot, gen = ev.get("ts"), ev.get("slot"), ev.get("gen")
        if isinstance(ts, int | float) and (reserved_at is None or ts < reserved_at):
            reserved_at = float(ts)
        if isinstance(slot, int) and isinstance(gen, int):
            members.append((slot, gen))
    return reserved_at, members


@dataclass
class DispatchStats:
    """What the dispatcher itself counts. A batch is counted when it has more than one member,
    or when it is the run's first; it is exactly when the dispatcher writes
    ``batch_dispatch_started``, so ``replay`` reads the counts back from those events."""

    batch_count: int = 0
    largest_batch: int = 0
    first_batch_reserved_at: float | None = None
    first_batch: list[tuple[int, int]] = field(default_factory=list)  # (slot, generation)
    backfill_count: int = 0

    def batch(self, size: int, reserved_at: float, members: list[tuple[int, int]]) -> None:
        if self.first_batch_reserved_at is None:
            self.first_batch_reserved_at = reserved_at
            self.first_batch = members
        if size > 1 or self.batch_count == 0:
            self.batch_count += 1
        self.largest_batch = max(self.largest_batch, size)

    @classmethod
    def replay(cls, events: Iterable[object]) -> DispatchStats:
        """The counts of the supervisors that wrote ``events`` (a run's whole log, in order):
        ``batch_dispatch_count`` the ``batch_dispatch_started`` events, ``largest_batch_size``
        their largest ``size``, ``backfill_count`` the ``backfill`` events, the first batch as
        ``first_batch`` reads it. A dispatch of one slot after the first writes no batch event,
        but never changes the largest size either."""
        records = [e for e in events if isinstance(e, dict)]
        stats = cls()
        stats.first_batch_reserved_at, stats.first_batch = first_batch(records)
        for ev in records:
            name = ev.get("event")
            if name == "batch_dispatch_started":
                stats.batch_count += 1
                size = ev.get("size")
                if isinstance(size, int) and not isinstance(size, bool):
                    stats.largest_batch = max(stats.largest_batch, size)
            elif name == "backfill":
                stats.backfill_count += 1
        return stats


@dataclass(frozen=True)
class _Timed:
    """An attempt whose start and end are both known."""

    attempt: Attempt
    start: float
    end: float


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]


def compute(attempts: Iterable[Attempt], stats: DispatchStats, *, jobs: int, started_at: float,
            ended_at: float) -> dict[str, Any]:
    timed = [_Timed(a, a.started_at, a.ended_at) for a in attempts
             if a.started_at is not None and a.ended_at is not None]
    wall = max(0.0, ended_at - started_at)
    active = sum(max(0.0, t.end - t.start) for t in timed)
    by_slot: dict[int, list[_Timed]] = defaultdict(list)
    for t in timed:
        by_slot[t.attempt.slot].append(t)
    refill = []
    for gens in by_slot.values():
        gens.sort(key=lambda t: t.attempt.generation)
        for prev, nxt in pairwise(gens):
            if nxt.attempt.backfill and nxt.attempt.generation == prev.attempt.generation + 1:
                refill.append(max(0.0, nxt.start - prev.end) * 1000)
    first = set(stats.first_batch)
    first_starts = [t.start for t in timed if (t.attempt.slot, t.attempt.generation) in first]
    span = None
    if stats.first_batch_reserved_at is not None and first_starts:
        span = round(max(0.0, max(first_starts) - stats.first_batch_reserved_at) * 1000, 1)
    p50, p95 = percentile(refill, 50), percentile(refill, 95)
    return {
        "wall_time_ms": round(wall * 1000, 1),
        "active_slot_time_ms": round(active * 1000, 1),
        "utilization": round(active / (wall * jobs), 4) if wall > 0 else None,
        "batch_dispatch_count": stats.batch_count,
        "largest_batch_size": stats.largest_batch,
        "first_batch_launch_span_ms": span,
        "refill_latency_ms": {"p50": round(p50, 1) if p50 is not None else None,
                              "p95": round(p95, 1) if p95 is not None else None, "count": len(refill)},
        "backfill_count": stats.backfill_count,
    }
