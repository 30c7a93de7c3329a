"""Run metrics (SPEC §6), from the wrappers' own timestamps wherever they exist.

A generation's start is its claim's modification time and its end the exit sidecar's, both
written by the wrapper; the scheduler's clock only marks reservations and the run's ends.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .model import Attempt


@dataclass
class DispatchStats:
    """What the dispatcher itself counts."""

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


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]


def compute(attempts: Iterable[Attempt], stats: DispatchStats, *, jobs: int, started_at: float,
            ended_at: float) -> dict[str, Any]:
    attempts = [a for a in attempts if a.started_at is not None and a.ended_at is not None]
    wall = max(0.0, ended_at - started_at)
    active = sum(max(0.0, a.ended_at - a.started_at) for a in attempts)  # type: ignore[operator]
    by_slot: dict[int, list[Attempt]] = defaultdict(list)
    for a in attempts:
        by_slot[a.slot].append(a)
    refill = []
    for gens in by_slot.values():
        gens.sort(key=lambda a: a.generation)
        for prev, nxt in zip(gens, gens[1:]):
            if nxt.backfill and nxt.generation == prev.generation + 1:
                refill.append(max(0.0, nxt.started_at - prev.ended_at) * 1000)  # type: ignore[operator]
    first = {(s, g) for s, g in stats.first_batch}
    first_starts = [a.started_at for a in attempts if (a.slot, a.generation) in first]
    span = None
    if stats.first_batch_reserved_at is not None and first_starts:
        span = round(max(0.0, max(first_starts) - stats.first_batch_reserved_at) * 1000, 1)  # type: ignore[type-var]
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
