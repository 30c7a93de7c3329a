"""The idle watchdog (SPEC §6): one shared timer for every running worker.

A worker is idle when neither its output log nor its heartbeat file has changed for longer
than its ``idle_timeout`` (a worker may append to ``$ZELLIJ_SWARM_HEARTBEAT`` to show it is
alive without printing). The timer runs only while at least one watched worker is running:
it starts when the first registers and stops when none is left. Each tick costs two
``stat`` calls per watched worker.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from zellij_swarm.records.generation_files import GenPaths

MIN_TICK, MAX_TICK = 0.05, 1.0


@dataclass
class _Watched:
    gen: GenPaths
    limit: float
    since: float  # registration time: a worker that never writes is silent from its start
    on_idle: Callable[[float], None]  # called with the silence length, once


class IdleWatchdog:
    def __init__(self, schedule: Callable[[float, Callable[[], None]], object], wallclock: Callable[[], float]) -> None:
        self._schedule = schedule
        self._now = wallclock
        self._watched: dict[GenPaths, _Watched] = {}
        self._armed = False

    def register(self, gen: GenPaths, limit: float, on_idle: Callable[[float], None], *,
                 since: float | None = None) -> None:
        """Watch ``gen``; silence counts from its last output or heartbeat, or from ``since``
        (its start, for a worker adopted by ``resume``: the silence before counts too)."""
        self._watched[gen] = _Watched(gen, limit, self._now() if since is None else since, on_idle)
        self._arm()

    def unregister(self, gen: GenPaths) -> None:
        self._watched.pop(gen, None)

    def silence(self, w: _Watched) -> float:
        latest = w.since
        for path in (w.gen.output, w.gen.stderr, w.gen.heartbeat):
            try:
                latest = max(latest, os.stat(path).st_mtime)
            except FileNotFoundError:
                continue
        return self._now() - latest

    def _arm(self) -> None:
        if self._armed or not self._watched:
            return
        self._armed = True
        tick = min(w.limit for w in self._watched.values()) / 4
        self._schedule(max(MIN_TICK, min(MAX_TICK, tick)), self._tick)

    def _tick(self) -> None:
        self._armed = False
        for w in list(self._watched.values()):
            quiet = self.silence(w)
            if quiet > w.limit:
                del self._watched[w.gen]
                w.on_idle(quiet)
        self._arm()
