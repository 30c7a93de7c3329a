"""The run lock: a supervisor holds an ``flock`` on ``<run>/lock`` while it is alive.

The lock file also holds the owner's pid, so ``resume`` and ``cancel`` can name it. The
kernel drops the lock when the process dies, however it dies, so a stale pid in the file
never blocks anyone.
"""

from __future__ import annotations

import fcntl
import os

from . import exc
from .rundir import RunPaths


class RunLock:
    def __init__(self, run: RunPaths) -> None:
        self._run = run
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self._run.lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            pid = holder(self._run)
            raise exc.RunBusy(f"run {self._run.run_id} is being supervised by pid {pid}") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def holder(run: RunPaths) -> int | None:
    """The pid of the live supervisor of ``run``, or None when nobody holds the lock."""
    try:
        fd = os.open(run.lock, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            return int(text) if text.isdigit() else -1
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
