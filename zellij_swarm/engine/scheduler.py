"""Pure selection logic (SPEC §6): which tasks are ready, and which slots are free.

No processes, files or clocks here — the supervisor owns those and asks these two
structures what to do next, so the rules are unit-testable on their own.

- ``SlotPool``: a free slot is the smallest free number, so panes keep stable positions.
- ``ReadyQueue``: a task is ready when it is pending and every ``after`` dependency
  succeeded; ready tasks run by priority (higher first), then input order, as far as their
  group's ``jobs`` and a pause allow. A dependency that ends any other way makes its
  dependents — transitively — skipped.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Iterable, Mapping


class SlotPool:
    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
        self._free = list(range(1, jobs + 1))  # already a valid heap
        self._closed = False

    def take(self) -> int | None:
        if self._closed or not self._free:
            return None
        return heapq.heappop(self._free)

    def take_slot(self, slot: int) -> None:
        """Mark a particular slot busy (a worker adopted on resume)."""
        self._free.remove(slot)
        heapq.heapify(self._free)

    def give_back(self, slot: int) -> None:
        heapq.heappush(self._free, slot)

    def close(self) -> None:
        """No slot is handed out any more (halt, cancel, shutdown)."""
        self._closed = True

    @property
    def free_count(self) -> int:
        return 0 if self._closed else len(self._free)


class ReadyQueue:
    """Tracks dependencies and hands out ready task ids in priority order.

    **Groups.** A task may belong to a group whose ``jobs`` bounds how many of its tasks are
    out at once (handed out and not yet back: requeued for a retry, or finished); the default
    group (``None``) is bounded by the slots alone. Each group has its own heap: a group that
    is full, or paused, never holds back the ready tasks of the others. ``pause`` without a
    group stops every hand-out (the tasks out go on).
    """

    def __init__(self, limits: Mapping[str, int] | None = None) -> None:
        self._limits = dict(limits or {})
        self._heaps: dict[str | None, list[tuple[int, int, str]]] = defaultdict(list)
        self._group: dict[str, str | None] = {}
        self._out: dict[str | None, int] = defaultdict(int)  # handed out and not back, by group
        self._handed: set[str] = set()
        self._paused: set[str | None] = set()
        self._all_paused = False
        self._through_pause: set[str] = set()  # restarted: handed out at once, paused or not
        # A task's rank is (-priority, order). Kept apart, not as one tuple a task (64 bytes
        # each, 6 MB in a 100,000-task run): the order is the int the run's task table already
        # holds, and most tasks have priority 0, which is not stored. Dropped once the task
        # has finished (``_forget_rank``).
        self._order: dict[str, int] = {}
        self._priority: dict[str, int] = {}
        self._waiting_on: dict[str, set[str]] = {}
        self._dependents: dict[str, list[str]] = defaultdict(list)
        self._ended: dict[str, bool] = {}  # task -> it succeeded; one dict is half two sets' size

    def add(self, task: str, *, after: Iterable[str], priority: int, order: int,
            group: str | None = None) -> list[str]:
        """Register a task; returns tasks that must be skipped right away: when a dependency
        already ended without succeeding, this one — and the tasks already waiting on it (a
        dependency may name a task given later in the same addition, queued after it)."""
        deps = {dep for dep in after if not self._ended.get(dep)}
        if any(dep in self._ended for dep in deps):  # ended, not succeeded: O(deps), never O(ended)
            self._ended[task] = False
            return [task, *self._skip_waiting_on(task)]
        self._rank_as(task, priority, order)
        if group is not None:  # most tasks have none: ``_group.get`` says None for them
            self._group[task] = group
        if not deps:
            self._push(task)
            return []
        self._waiting_on[task] = deps
        for dep in deps:
            self._dependents[dep].append(task)
        return []

    def _rank_as(self, task: str, priority: int, order: int) -> None:
        self._order[task] = order
        if priority:
            self._priority[task] = -priority

    def _forget_rank(self, task: str) -> None:
        """A task that reached its final status never goes back in the queue: what ranked it
        goes (in a run of 100,000 tasks, 100,000 entries and their ids)."""
        self._order.pop(task, None)
        self._priority.pop(task, None)
        self._group.pop(task, None)

    def _rank(self, task: str) -> tuple[int, int]:
        return self._priority.get(task, 0), self._order[task]

    def _push(self, task: str) -> None:
        heapq.heappush(self._heaps[self._group.get(task)], (*self._rank(task), task))

    def settled(self, task: str, succeeded: bool) -> None:
        """A task already ended before this queue existed (resume): dependents added later
        see it, with no skipping cascade now."""
        self._ended[task] = succeeded

    def handed_out(self, task: str, *, priority: int, order: int, group: str | None = None) -> None:
        """A task already running when this queue was made (resume): not ready, but out (it
        counts against its group) with its rank, so a retry of it goes back where it belongs."""
        self._rank_as(task, priority, order)
        self._group[task] = group
        self._take_out(task)

    def _take_out(self, task: str) -> None:
        self._handed.add(task)
        self._out[self._group.get(task)] += 1

    def _back(self, task: str) -> None:
        if task in self._handed:
            self._handed.remove(task)
            self._out[self._group.get(task)] -= 1

    def _open_groups(self) -> list[str | None]:
        """Groups that may hand out a task now: ready tasks, room in the group, and not paused
        — or, paused, a restarted task first in line (``run_through_pause``)."""
        return [g for g, heap in self._heaps.items()
                if heap and (g is None or self._out[g] < self._limits.get(g, 1 << 30))
                and (heap[0][2] in self._through_pause or not (self._all_paused or g in self._paused))]

    def pop(self) -> str | None:
        """The next task that may run now (by priority, then input order, across the groups
        that may hand one out), or None."""
        groups = self._open_groups()
        if not groups:
            return None
        best = min(groups, key=lambda g: self._heaps[g][0])
        task = heapq.heappop(self._heaps[best])[2]
        self._through_pause.discard(task)
        self._take_out(task)
        return task

    def has_ready(self) -> bool:
        """Whether ``pop`` would hand out a task now."""
        return bool(self._open_groups())

    def requeue(self, task: str, *, first: bool = False) -> None:
        """A task that needs another generation goes back with its original rank, or ahead
        of every other of its group (``first``: restarted, it runs again at once)."""
        self._back(task)
        if first:
            heapq.heappush(self._heaps[self._group.get(task)], (-(1 << 62), self._order[task], task))
        else:
            self._push(task)

    def run_through_pause(self, task: str) -> None:
        """``restart`` is an explicit request: the task's next hand-out does not wait for an
        ``unpause`` (as pueue restarts a task in a paused group). It is requeued first in line
        (``requeue(first=True)``), so it is what its group hands out next."""
        self._through_pause.add(task)

    def discard(self, task: str) -> None:
        """Take a task out of the queue (cancelled before it ran); its dependents are
        handled by the ``finished`` call that follows."""
        self._waiting_on.pop(task, None)
        self._through_pause.discard(task)
        heap = self._heaps[self._group.get(task)]
        kept = [entry for entry in heap if entry[2] != task]
        if len(kept) != len(heap):
            heapq.heapify(kept)
            self._heaps[self._group.get(task)] = kept

    def pause(self, group: str | None = None) -> None:
        """Hand out nothing more (of ``group``, or at all) but restarted tasks; what is out goes on."""
        if group is None:
            self._all_paused = True
        else:
            self._paused.add(group)

    def unpause(self, group: str | None = None) -> None:
        if group is None:
            self._all_paused = False
            self._paused.clear()
        else:
            self._paused.discard(group)

    @property
    def paused(self) -> tuple[bool, list[str]]:
        """(the whole run is paused, the groups paused one by one)."""
        return self._all_paused, sorted(g for g in self._paused if g is not None)

    def out_in(self, group: str) -> int:
        """Tasks of ``group`` out now."""
        return self._out[group]

    def __contains__(self, task: object) -> bool:
        return task in self._order

    def __len__(self) -> int:
        return sum(len(heap) for heap in self._heaps.values())

    def finished(self, task: str, succeeded: bool) -> tuple[list[str], list[str]]:
        """Record a task's final outcome. Returns (newly ready, newly skipped)."""
        self._back(task)
        self._forget_rank(task)
        self._ended[task] = succeeded
        ready: list[str] = []
        if succeeded:
            for dep in self._dependents.pop(task, []):
                waiting = self._waiting_on.get(dep)
                if waiting is None:
                    continue
                waiting.discard(task)
                if not waiting:
                    del self._waiting_on[dep]
                    self._push(dep)
                    ready.append(dep)
            return ready, []
        return ready, self._skip_waiting_on(task)

    def _skip_waiting_on(self, task: str) -> list[str]:
        """``task`` ended without succeeding: every task waiting on it, directly or not, is
        skipped (returned, in the order found)."""
        skipped: list[str] = []
        stack = [task]
        while stack:
            for dep in self._dependents.pop(stack.pop(), []):
                if dep in self._waiting_on:
                    del self._waiting_on[dep]
                    self._forget_rank(dep)
                    self._ended[dep] = False
                    skipped.append(dep)
                    stack.append(dep)
        return skipped

    def drain(self) -> list[str]:
        """Every task not yet handed out (ready or waiting), removed from the queue."""
        left = [t for _, _, t in sorted(e for heap in self._heaps.values() for e in heap)]
        left += sorted(self._waiting_on, key=self._rank)
        self._heaps.clear()
        self._waiting_on.clear()
        return left
