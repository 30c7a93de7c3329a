"""Slow calls off the event loop: a ``CallRunner`` makes them on its own thread, one at a
time and in the order they were submitted, and hands each result back to the loop.

The supervisor's loop must never wait on a multiplexer (a ``zellij`` call may take its full
10 s timeout) or on a ``/proc`` scan: a headless worker's exit would wait with it. So those
calls are submitted here; the loop watches ``fileno()`` in its selector and ``drain()`` runs
each call's ``then`` on the loop thread, with either the call's value or the exception it
raised (a failed call is data, never an exception thrown into the loop). Everything a
``then`` touches is therefore only ever touched by the loop thread.

``to_loop`` is the other direction: code running on the runner's thread (a backend that
schedules a timer or records a warning) asks for something to run on the loop.
"""

from __future__ import annotations

import functools
import os
import queue
import select
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Done(Generic[T]):
    """What a call came to: its value, or the exception it raised."""

    value: T | None = None
    error: BaseException | None = None


class _Stop:
    """The job that ends the runner's thread once every job before it is done."""


class CallRunner:
    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], Callable[[Done[Any]], None] | None] | _Stop] = (
            queue.SimpleQueue())
        self._results: deque[Callable[[], None]] = deque()
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._pending = 0  # submitted and not yet handed back (read and written on the loop only)
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    def fileno(self) -> int:
        return self._wake_r

    @property
    def busy(self) -> bool:
        """A call is running or waiting, or its result is not yet handed back."""
        return self._pending > 0

    def submit(self, call: Callable[[], T], then: Callable[[Done[T]], None] | None = None) -> None:
        """Make ``call`` on the runner's thread; ``then`` gets what it came to, on the loop."""
        self._pending += 1
        self._jobs.put((call, then))

    def to_loop(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the loop thread at its next ``drain`` (callable from any thread)."""
        self._results.append(fn)
        self._wake()

    def drain(self) -> None:
        """On the loop: run what came back. Reads the wake-up pipe empty first, so a result
        that arrives meanwhile wakes the selector again."""
        try:
            while os.read(self._wake_r, 4096):
                pass
        except BlockingIOError:
            pass
        while self._results:
            self._results.popleft()()

    def wait_idle(self, timeout: float) -> bool:
        """Block until every submitted call is handed back (the run is ending, or its backend
        opens), at most ``timeout`` seconds; True when nothing is left."""
        deadline = time.monotonic() + timeout
        while self.busy and (left := deadline - time.monotonic()) > 0:
            select.select([self._wake_r], [], [], min(left, 0.05))
            self.drain()
        return not self.busy

    def close(self) -> None:
        """Stop the thread after the calls already submitted (it is a daemon: a call stuck
        past its own timeout cannot keep the process alive)."""
        self._jobs.put(_Stop())
        self._thread.join(timeout=0.5)
        os.close(self._wake_r)
        os.close(self._wake_w)

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if isinstance(job, _Stop):
                return
            call, then = job
            try:
                done: Done[Any] = Done(value=call())
            except Exception as e:  # handed to the loop as data; the loop decides
                done = Done(error=e)
            self._results.append(functools.partial(self._hand_back, then, done))
            self._wake()

    def _hand_back(self, then: Callable[[Done[Any]], None] | None, done: Done[Any]) -> None:
        self._pending -= 1
        if then is not None:
            then(done)
        elif done.error is not None:
            raise done.error  # a fire-and-forget call must not fail silently: a bug, not data

    def _wake(self) -> None:
        try:
            os.write(self._wake_w, b"\0")
        except (BlockingIOError, OSError):
            pass  # the pipe is full (a wake-up is pending anyway) or the runner is closed
