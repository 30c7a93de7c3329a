"""Run metrics (SPEC §6), from the wrappers' own timestamps wherever they exist.

A generation's start is its claim's modification time and its end the exit sidecar's, both
written by the wrapper; the scheduler's clock only marks reservations and the run's ends.

This module owns what a run's metrics are: ``compute`` says it over every attempt at once,
and ``Accumulator`` keeps the same figures as attempts arrive, for the snapshot a run writes
several times a second (its cost must not grow with the number of tasks that have ended).

The dispatcher's own counts (``DispatchStats``) are the only part not kept in the wrappers'
files; each of them is also in the event log
(``slot_reserved``, ``batch_dispatch_started``, ``backfill``), so ``DispatchStats.replay``
rebuilds them from it. ``resume`` does, so that a resumed run's metrics are the whole run's,
not its last supervisor's; and ``first_batch`` is the one reading of "the first batch", used
by that replay and by ``proof`` alike.
"""

from __future__ import annotations

import math
from bisect import insort
from collections import defaultdict
from collections.abc import Iterable, Iterator
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
    ``batch_dispatch_started``, so ``replay`` reads the counts back from those events. The
    first batch is what ``first_batch`` reads in the log — every reservation before the first
    ``batch_dispatch_started`` — taken as the dispatcher writes them (``reserved``): the pane
    and the headless generations of its first pass alike, though the panes' start comes later
    (their batch event too). Counting only the members of the first start, a run with more
    slots than panes measured a span of its headless members alone, and ``proof``, which reads
    the log, found the figures apart by the time the panes took to open."""

    batch_count: int = 0
    largest_batch: int = 0
    first_batch_reserved_at: float | None = None
    first_batch: list[tuple[int, int]] = field(default_factory=list)  # (slot, generation)
    first_batch_open: bool = True  # its reservations are still being written: no batch event yet
    backfill_count: int = 0
    # Refill as the supervisor saw it, on its monotonic clock: from taking a worker's end to
    # the next worker of that slot reported running (ms). File times (``refill_latency_ms``)
    # are a kernel tick coarse; these are exact, but only this supervisor's (not replayed).
    seen_refill: RoundedQuantiles = field(default_factory=lambda: RoundedQuantiles(2))

    def reserved(self, at: float, member: tuple[int, int]) -> None:
        """A ``slot_reserved`` event written at ``at`` for ``member`` (slot, generation)."""
        if self.first_batch_open:
            self.first_batch.append(member)
            if self.first_batch_reserved_at is None or at < self.first_batch_reserved_at:
                self.first_batch_reserved_at = at

    def batch(self, size: int) -> None:
        """``size`` generations started together (a batch event written when it counts: the
        first one always is, which ends the first batch)."""
        self.first_batch_open = False
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
        stats = cls()

        def counted() -> Iterator[dict[str, Any]]:  # one pass: ``events`` may be a lazy reader
            for ev in events:
                if not isinstance(ev, dict):
                    continue
                name = ev.get("event")
                if name == "batch_dispatch_started":
                    stats.batch_count += 1
                    size = ev.get("size")
                    if isinstance(size, int) and not isinstance(size, bool):
                        stats.largest_batch = max(stats.largest_batch, size)
                elif name == "backfill":
                    stats.backfill_count += 1
                yield ev

        stream = counted()
        stats.first_batch_reserved_at, stats.first_batch = first_batch(stream)
        for _ in stream:  # the rest, counted
            pass
        # reservations without a batch event end at the resume that follows (``first_batch``);
        # with none, the resuming supervisor's first reservations are the first batch
        stats.first_batch_open = not stats.first_batch and stats.batch_count == 0
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
    """The run's metrics over ``attempts`` (every attempt of every task). ``Accumulator``
    gives the same figures incrementally; the tests hold the two to agree."""
    timed = [_Timed(a, a.started_at, a.ended_at) for a in attempts
             if a.started_at is not None and a.ended_at is not None]
    wall = max(0.0, ended_at - started_at)
    # fsum: the exact sum, correctly rounded, whatever the order the attempts come in
    active = math.fsum(max(0.0, t.end - t.start) for t in timed)
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
    p50, p95 = percentile(refill, 50), percentile(refill, 95)
    return _figures(wall=wall, active=active, jobs=jobs, stats=stats,
                    first_start=max(first_starts) if first_starts else None,
                    refill=(round(p50, 1) if p50 is not None else None, round(p95, 1) if p95 is not None else None,
                            len(refill)))


def _figures(*, wall: float, active: float, jobs: int, stats: DispatchStats, first_start: float | None,
             refill: tuple[float | None, float | None, int]) -> dict[str, Any]:
    span = None
    if stats.first_batch_reserved_at is not None and first_start is not None:
        span = round(max(0.0, first_start - stats.first_batch_reserved_at) * 1000, 1)
    p50, p95, count = refill
    return {
        "wall_time_ms": round(wall * 1000, 1),
        "active_slot_time_ms": round(active * 1000, 1),
        "utilization": round(active / (wall * jobs), 4) if wall > 0 else None,
        "batch_dispatch_count": stats.batch_count,
        "largest_batch_size": stats.largest_batch,
        "first_batch_launch_span_ms": span,
        "refill_latency_ms": {"p50": p50, "p95": p95, "count": count},
        "refill_seen_ms": {"p50": stats.seen_refill.percentile(50), "p95": stats.seen_refill.percentile(95),
                           "count": stats.seen_refill.count},
        "backfill_count": stats.backfill_count,
    }


class RoundedQuantiles:
    """Nearest-rank percentiles (``percentile``) of a growing set of values, each seen
    rounded to ``digits`` decimals, as they are shown. Rounding never reorders values, so the
    rounded k-th smallest is the k-th smallest of the rounded values: the answer is exact,
    and only one counter per distinct shown value is kept (a few hundred in a run, however
    many values), with their sorted list — O(1) to add a value seen before, and one pass over
    the distinct values for a percentile."""

    __slots__ = ("_counts", "_keys", "count", "digits", "max")

    def __init__(self, digits: int) -> None:
        self.digits = digits
        self._counts: dict[float, int] = {}
        self._keys: list[float] = []
        self.count = 0
        self.max: float | None = None

    def add(self, value: float) -> None:
        key = round(value, self.digits)
        seen = self._counts.get(key)
        if seen is None:
            insort(self._keys, key)
            self._counts[key] = 1
        else:
            self._counts[key] = seen + 1
        self.count += 1
        if self.max is None or key > self.max:
            self.max = key

    def percentile(self, q: float) -> float | None:
        if not self.count:
            return None
        rank = max(1, -(-self.count * q // 100))
        below = 0
        for key in self._keys:
            below += self._counts[key]
            if below >= rank:
                return key
        return self._keys[-1]


class _Unpaired:
    """A timed attempt whose neighbours in its slot (the generations just before and after
    it) have not both been seen yet: a refill latency is measured between neighbours."""

    __slots__ = ("backfill", "end", "has_next", "has_prev", "start")

    def __init__(self, start: float, end: float, backfill: bool, has_prev: bool) -> None:
        self.start, self.end, self.backfill = start, end, backfill
        self.has_prev, self.has_next = has_prev, False


def _exact_add(partials: list[float], x: float) -> None:
    """Add ``x`` to the exact sum held as non-overlapping partials (Shewchuk; the sum
    ``math.fsum`` computes, kept as it grows)."""
    i = 0
    for y in partials:
        if abs(x) < abs(y):
            x, y = y, x
        hi = x + y
        lo = y - (hi - x)
        if lo:
            partials[i] = lo
            i += 1
        x = hi
    partials[i:] = [x]


class Accumulator:
    """``compute``'s figures, kept as attempts arrive (``add``, in any order, each attempt
    once): the snapshot's metrics cost the same with ten attempts or a million.

    What it keeps is bounded by the slots, not the attempts: the exact sum of active time
    (a few partials), the refill latencies as ``RoundedQuantiles``, and per slot the
    attempts still missing a neighbour — a slot's generations end in order, so that is its
    latest one, plus any generation whose neighbour never ran (withdrawn, never timed). A
    generation is one attempt (its directory is written once), so (slot, generation) pairs
    are unique. For the first batch's latest start it keeps each slot's earliest attempt: a
    member of the first batch is the first generation reserved on its slot, so no attempt of
    that slot has a lower one (a withdrawn member has no attempt at all) — the attempts
    themselves are not kept, and a finished task's record need not be (``records.task.EndedTasks``)."""

    def __init__(self) -> None:
        self._active: list[float] = []
        self._unpaired: dict[int, dict[int, _Unpaired]] = {}
        self.refill = RoundedQuantiles(1)
        self._earliest: dict[int, tuple[int, float]] = {}  # slot -> (generation, start) of its earliest attempt

    def add(self, a: Attempt) -> None:
        start, end = a.started_at, a.ended_at
        if start is None or end is None:
            return
        _exact_add(self._active, max(0.0, end - start))
        earliest = self._earliest.get(a.slot)
        if earliest is None or a.generation < earliest[0]:
            self._earliest[a.slot] = (a.generation, start)
        gens = self._unpaired.setdefault(a.slot, {})
        me = _Unpaired(start, end, a.backfill, has_prev=a.generation <= 1)
        prev = gens.get(a.generation - 1)
        if prev is not None:
            if a.backfill:
                self.refill.add(max(0.0, start - prev.end) * 1000)
            prev.has_next = me.has_prev = True
            if prev.has_prev:
                del gens[a.generation - 1]
        nxt = gens.get(a.generation + 1)
        if nxt is not None:
            if nxt.backfill:
                self.refill.add(max(0.0, nxt.start - end) * 1000)
            nxt.has_prev = me.has_next = True
            if nxt.has_next:
                del gens[a.generation + 1]
        if not (me.has_prev and me.has_next):
            gens[a.generation] = me

    def figures(self, stats: DispatchStats, *, jobs: int, started_at: float, ended_at: float) -> dict[str, Any]:
        """What ``compute`` gives over every attempt added so far."""
        first = set(stats.first_batch)
        first_start = max((start for slot, (gen, start) in self._earliest.items() if (slot, gen) in first),
                          default=None)
        return _figures(wall=max(0.0, ended_at - started_at), active=math.fsum(self._active), jobs=jobs,
                        stats=stats, first_start=first_start,
                        refill=(self.refill.percentile(50), self.refill.percentile(95), self.refill.count))
