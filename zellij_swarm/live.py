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
from dataclasses import dataclass

from .backends.base import LaunchRequest
from .model import TaskRecord
from .rundir import GenPaths
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
    idle_message: str | None = None  # why the watchdog ended it
    done: bool = False

    @property
    def in_pane(self) -> bool:
        """Running (or about to run) in a pane, as opposed to headless or fallen back."""
        return self.request.pane and not self.request.claimed


class Timers:
    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()

    def after(self, delay: float, fn: Callable[[], None]) -> None:
        heapq.heappush(self._heap, (self._clock() + delay, next(self._seq), fn))

    def due_in(self) -> float | None:
        return max(0.0, self._heap[0][0] - self._clock()) if self._heap else None

    def run_due(self) -> None:
        now = self._clock()
        while self._heap and self._heap[0][0] <= now:
            heapq.heappop(self._heap)[2]()
