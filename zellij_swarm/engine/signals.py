"""Signals as loop events: SIGINT, SIGTERM and SIGHUP arrive through the wake-up fd of
``signal.set_wakeup_fd``, which the loop watches in its selector like any other source, so a
signal is handled between two steps of the loop, never in the middle of one."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

_Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None
EXIT_CODES = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}


class SignalWakeup:
    """While open, the signals of ``EXIT_CODES`` only wake the loop (``fileno``) and are
    read with ``received``. Signals can only be caught on the main thread: elsewhere it
    watches nothing (``fileno`` is None).

    ``close`` comes once the run's end is recorded (or it detached): a stop that arrives then
    would change nothing, so these signals do nothing until ``restore`` puts the previous
    handlers back, as ``run`` returns its code. (Put back at ``close``, a SIGTERM or Ctrl-C
    in the tens of milliseconds the records take to close ended with 143 or 130 a run
    recorded as finished with 0.) They are handled, never ignored: a process started
    meanwhile gets them at their defaults. Only ``run`` catches signals; the Python API
    leaves its host's handlers alone."""

    def __init__(self) -> None:
        self._fds: tuple[int, int] | None = None
        self._old: dict[signal.Signals, _Handler] = {}
        if threading.current_thread() is not threading.main_thread():
            return
        r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._fds = (r, w)
        self._old_fd = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        self._old = {s: signal.signal(s, lambda *_: None) for s in EXIT_CODES}

    def fileno(self) -> int | None:
        return self._fds[0] if self._fds else None

    def received(self) -> list[signal.Signals]:
        if self._fds is None:
            return []
        try:
            data = os.read(self._fds[0], 64)
        except BlockingIOError:
            return []
        return [signal.Signals(num) for num in data]

    def close(self) -> None:
        if self._fds is None:
            return
        signal.set_wakeup_fd(self._old_fd)
        for fd in self._fds:
            os.close(fd)
        self._fds = None

    def restore(self) -> None:
        """Put the previous handlers back (after ``close``); again does nothing."""
        old, self._old = self._old, {}
        for s, handler in old.items():
            signal.signal(s, handler)
