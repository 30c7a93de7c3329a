"""Signals as loop events: SIGINT, SIGTERM and SIGHUP arrive through the wake-up fd of
``signal.set_wakeup_fd``, which the loop watches in its selector like any other source, so a
signal is handled between two steps of the loop, never in the middle of one."""

from __future__ import annotations

import os
import signal
import threading

EXIT_CODES = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}


class SignalWakeup:
    """While open, the signals of ``EXIT_CODES`` only wake the loop (``fileno``) and are
    read with ``received``. Signals can only be caught on the main thread: elsewhere it
    watches nothing (``fileno`` is None).

    ``close`` comes once the run's end is recorded (or it detached): a stop that arrives then
    would change nothing, so these signals are ignored until the process exits, with the
    exit code the records hold. (Put back to their defaults, a SIGTERM or Ctrl-C in those
    last tens of milliseconds ended with 143 or 130 a run recorded as finished with 0.) Only
    ``run`` catches signals; the Python API leaves its host's handlers alone."""

    def __init__(self) -> None:
        self._fds: tuple[int, int] | None = None
        if threading.current_thread() is not threading.main_thread():
            return
        r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._fds = (r, w)
        self._old_fd = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        for s in EXIT_CODES:
            signal.signal(s, lambda *_: None)

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
        for s in EXIT_CODES:
            signal.signal(s, signal.SIG_IGN)
        signal.set_wakeup_fd(self._old_fd)
        for fd in self._fds:
            os.close(fd)
        self._fds = None
