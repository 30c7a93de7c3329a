"""The run lock: a supervisor holds a write lock on ``<run>/lock`` while it is alive.

The lock file also holds the owner's pid, so ``resume`` and ``cancel`` can name it. The
kernel drops the lock when the process dies, however it dies, so a stale pid in the file
never blocks anyone.

Only supervisors take the lock. Readers (``status``, ``ls``, ``add``, a resuming
supervisor's own check) ask the kernel who holds it with ``F_OFD_GETLK``, which takes
nothing: a reader that took even a shared lock for a moment would make a supervisor's
non-blocking ``acquire`` fail in that moment (it did: ``resume`` failed while ``status``
ran). Open-file-description locks (Linux ≥ 3.15) are used rather than ``flock`` because
only they can be queried; like ``flock`` they belong to the open file, not the process.
"""

from __future__ import annotations

import fcntl
import os
import struct

from zellij_swarm import exc
from zellij_swarm.records.rundir import RunPaths

# struct flock {short l_type; short l_whence; off_t l_start; off_t l_len; pid_t l_pid;},
# padded to its C size; l_start = l_len = 0 covers the whole file.
_FLOCK = "hhqqi4x"


def _whole_file(lock_type: int) -> bytes:
    return struct.pack(_FLOCK, lock_type, os.SEEK_SET, 0, 0, 0)


class RunLock:
    def __init__(self, run: RunPaths) -> None:
        self._run = run
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self._run.lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.fcntl(fd, fcntl.F_OFD_SETLK, _whole_file(fcntl.F_WRLCK))
        except OSError:  # EAGAIN or EACCES: another supervisor holds it
            os.close(fd)
            pid = holder(self._run)
            who = f"pid {pid}" if pid is not None and pid > 0 else "another process"
            raise exc.RunBusy(f"run {self._run.run_id} is being supervised by {who}") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def holder(run: RunPaths) -> int | None:
    """The pid of the live supervisor of ``run`` (-1 while it is still writing its pid), or
    None when nobody holds the lock. Takes no lock itself."""
    try:
        fd = os.open(run.lock, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        answer = fcntl.fcntl(fd, fcntl.F_OFD_GETLK, _whole_file(fcntl.F_RDLCK))
        if struct.unpack(_FLOCK, answer)[0] == fcntl.F_UNLCK:
            return None
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        return int(text) if text.isdigit() else -1
    finally:
        os.close(fd)
