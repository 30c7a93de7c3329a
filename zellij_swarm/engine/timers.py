"""Cancellable timers on the supervisor's loop: one heap, read by the loop for how long it
may wait and run when due (``run_due``)."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable


class Timer:
    """A scheduled call; ``cancel`` drops it and the closure it holds at once."""

    __slots__ = ("due", "fn")

    def __init__(self, due: float, fn: Callable[[], None]) -> None:
        self.due = due
        self.fn: Callable[[], None] | None = fn

    def cancel(self) -> None:
        self.fn = None


class Timers:
    """The supervisor's single timer heap. A cancelled timer stays in the heap as an empty
    shell until it is due or the shells outnumber the live timers, when the heap is rebuilt:
    memory follows the timers that can still fire (100,000 ended tasks with a one-hour
    timeout leave nothing behind)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._heap: list[tuple[float, int, Timer]] = []
        self._seq = itertools.count()
        self._cancelled = 0

    def after(self, delay: float, fn: Callable[[], None]) -> Timer:
        timer = Timer(self._clock() + delay, fn)
        heapq.heappush(self._heap, (timer.due, next(self._seq), timer))
        return timer

    def cancel(self, timer: Timer) -> None:
        if timer.fn is None:
            return
        timer.cancel()
        self._cancelled += 1
        if self._cancelled > 64 and self._cancelled * 2 > len(self._heap):
            self._heap = [entry for entry in self._heap if entry[2].fn is not None]
            heapq.heapify(self._heap)
            self._cancelled = 0

    def __len__(self) -> int:
        """Timers that can still fire."""
        return sum(1 for entry in self._heap if entry[2].fn is not None)

    def due_in(self) -> float | None:
        self._drop_cancelled()
        return max(0.0, self._heap[0][0] - self._clock()) if self._heap else None

    def run_due(self) -> None:
        now = self._clock()
        while self._heap and self._heap[0][0] <= now:
            timer = heapq.heappop(self._heap)[2]
            fn, timer.fn = timer.fn, None
            if fn is None:
                self._cancelled -= 1
            else:
                fn()

    def _drop_cancelled(self) -> None:
        while self._heap and self._heap[0][2].fn is None:
            heapq.heappop(self._heap)
            self._cancelled -= 1
