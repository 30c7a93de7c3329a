"""Pure selection logic (SPEC §6): which tasks are ready, and which slots are free.

No processes, files or clocks here — the supervisor owns those and asks these two
structures what to do next, so the rules are unit-testable on their own.

- ``SlotPool``: a free slot is the smallest free number, so panes keep stable positions.
- ``ReadyQueue``: a task is ready when it is pending and every ``after`` dependency
  succeeded; ready tasks run by priority (higher first), then input order. A dependency
  that ends any other way makes its dependents — transitively — skipped.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Iterable


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
    """Tracks dependencies and hands out ready task ids in priority order."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, str]] = []
        self._priority: dict[str, tuple[int, int]] = {}
        self._waiting_on: dict[str, set[str]] = {}
        self._dependents: dict[str, list[str]] = defaultdict(list)
        self._succeeded: set[str] = set()
        self._ended: set[str] = set()

    def add(self, task: str, *, after: Iterable[str], priority: int, order: int) -> list[str]:
        """Register a task; returns tasks that must be skipped right away (a dependency
        already ended without succeeding: this one, and nothing else yet depends on it)."""
        self._priority[task] = (-priority, order)
        deps = set(after) - self._succeeded
        if deps & (self._ended - self._succeeded):
            self._ended.add(task)
            return [task]
        if not deps:
            self._push(task)
            return []
        self._waiting_on[task] = deps
        for dep in deps:
            self._dependents[dep].append(task)
        return []

    def _push(self, task: str) -> None:
        p, order = self._priority[task]
        heapq.heappush(self._heap, (p, order, task))

    def settled(self, task: str, succeeded: bool) -> None:
        """A task already ended before this queue existed (resume): dependents added later
        see it, with no skipping cascade now."""
        self._ended.add(task)
        if succeeded:
            self._succeeded.add(task)

    def handed_out(self, task: str, *, priority: int, order: int) -> None:
        """A task already running when this queue was made (resume): not ready, but known
        with its rank, so a retry of it goes back where it belongs."""
        self._priority[task] = (-priority, order)

    def pop(self) -> str | None:
        """The next ready task, or None."""
        return heapq.heappop(self._heap)[2] if self._heap else None

    def requeue(self, task: str) -> None:
        """A task that needs another generation goes back with its original rank."""
        self._push(task)

    def discard(self, task: str) -> None:
        """Take a task out of the queue (cancelled before it ran); its dependents are
        handled by the ``finished`` call that follows."""
        self._waiting_on.pop(task, None)
        kept = [entry for entry in self._heap if entry[2] != task]
        if len(kept) != len(self._heap):
            heapq.heapify(kept)
            self._heap = kept

    def __contains__(self, task: object) -> bool:
        return task in self._priority

    def __len__(self) -> int:
        return len(self._heap)

    def finished(self, task: str, succeeded: bool) -> tuple[list[str], list[str]]:
        """Record a task's final outcome. Returns (newly ready, newly skipped)."""
        self._ended.add(task)
        ready: list[str] = []
        skipped: list[str] = []
        if succeeded:
            self._succeeded.add(task)
            for dep in self._dependents.pop(task, []):
                waiting = self._waiting_on.get(dep)
                if waiting is None:
                    continue
                waiting.discard(task)
                if not waiting:
                    del self._waiting_on[dep]
                    self._push(dep)
                    ready.append(dep)
            return ready, skipped
        stack = [task]
        while stack:
            for dep in self._dependents.pop(stack.pop(), []):
                if dep in self._waiting_on:
                    del self._waiting_on[dep]
                    self._ended.add(dep)
                    skipped.append(dep)
                    stack.append(dep)
        return ready, skipped

    def drain(self) -> list[str]:
        """Every task not yet handed out (ready or waiting), removed from the queue."""
        left = [t for _, _, t in sorted(self._heap)] + sorted(self._waiting_on, key=self._priority.__getitem__)
        self._heap.clear()
        self._waiting_on.clear()
        return left
