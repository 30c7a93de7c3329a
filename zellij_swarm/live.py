"""Runtime handles of a run in progress: never persisted, rebuilt from the records on resume.

``LiveGen`` is one generation in flight and how the supervisor follows it: a headless
wrapper is started and reaped by the supervisor's launcher, which reports both; a pane's
wrapper is not (its launch heartbeat and exit sidecar arrive as file events on the
generation's directory, and its pid — learned from the heartbeat — gets a ``pidfd`` only to
notice it vanishing).
``Timers`` is the supervisor's single timer heap.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from .backends.base import LaunchRequest
from .generation_files import GenPaths
from .model import TaskRecord
from .wrapper import PaneMode


@dataclass
class LiveGen:
    task: TaskRecord
    gen: GenPaths
    request: LaunchRequest
    backfill: bool
    pane: PaneMode | None = None  # how its wrapper is written when it runs in a pane
    pid: int | None = None
    pidfd: int | None = None
    child: bool = False  # the launcher started it (headless) and reports its end
    pane_id: str | None = None
    heartbeat_seen: bool = False
    watching_dir: bool = False
    timeout_armed: bool = False
    kill_reason: str | None = None
    ending: bool = False  # its process tree is being ended (SIGTERM sent)
    tree_killed: bool = False  # ... and past SIGKILL
    deadlines: list[Timer] = field(default_factory=list)  # its timeout and heartbeat timers
    idle_message: str | None = None  # why the watchdog ended it
    opening: bool = False  # the backend's thread is deciding or opening its pane
    files_followed: bool = False  # its directory is watched or polled
    collected: bool = False  # its exit was read; its outcome may still wait on the multiplexer
    done: bool = False  # its end is recorded

    @property
    def in_pane(self) -> bool:
        """Running (or about to run) in a pane, as opposed to headless or fallen back."""
        return self.request.pane and not self.request.claimed


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
