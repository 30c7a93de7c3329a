"""Noticing that a process which is not our child ended: a pidfd, which a selector sees
readable once it has; or, where the kernel gives none — a kernel before Linux 5.3 (ENOSYS), a
seccomp filter that refuses ``pidfd_open`` (EPERM) — a look at ``/proc`` now and then,
by the one who follows it. The look knows a process by its pid *and* its
start time, so a pid the kernel has given to another process meanwhile reads as ended, and a
zombie (ended, its parent has not collected it yet) has ended too.
"""

from __future__ import annotations

import os
import select
import time


class PidfdUnavailable(OSError):
    """This kernel (or its seccomp filter) gives no pidfd; follow the process through /proc."""


def open_pidfd(pid: int) -> int | None:
    """A pidfd on ``pid``, or None when there is no such process. ``PidfdUnavailable`` when
    the kernel gives none: any failure but ESRCH says nothing about the process."""
    try:
        return os.pidfd_open(pid)
    except ProcessLookupError:
        return None
    except OSError as e:
        raise PidfdUnavailable(e.errno, e.strerror) from None


def start_ticks(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (None if there is none)."""
    stat = _stat(pid)
    return int(stat[19]) if stat is not None else None


POLL = 0.05  # seconds between two looks at /proc (``wait_end`` without a pidfd)


def wait_end(pid: int, timeout: float) -> bool:
    """Wait at most ``timeout`` seconds for process ``pid`` (no child of ours) to end — by its
    pidfd, or where the kernel gives none by a look at /proc every ``POLL`` seconds: whether
    it did."""
    start = start_ticks(pid)
    try:
        fd = open_pidfd(pid)
    except PidfdUnavailable:
        deadline = time.monotonic() + timeout
        while not ended(pid, start):
            if time.monotonic() > deadline:
                return False
            time.sleep(POLL)
        return True
    if fd is None:
        return True
    try:
        return bool(select.select([fd], [], [], timeout)[0]) or ended(pid, start)
    finally:
        os.close(fd)


def ticks_now() -> int | None:
    """This moment in ``start_ticks``'s clock (clock ticks since boot), to tell which
    processes started after it; None when /proc does not say."""
    try:
        with open("/proc/uptime", "rb") as f:
            return int(float(f.read().split()[0]) * os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


def ended(pid: int, start: int | None) -> bool:
    """Process ``pid`` (started at ``start`` ticks, when known) has ended: no such process, a
    zombie, or another process under its pid."""
    stat = _stat(pid)
    return stat is None or stat[0] in (b"Z", b"X") or (start is not None and int(stat[19]) != start)


def stopped(pid: int) -> bool:
    """Process ``pid`` is stopped (SIGSTOP, SIGTSTP: state ``T``): until it is continued it
    can neither answer nor end by itself."""
    stat = _stat(pid)
    return stat is not None and stat[0] == b"T"


def _stat(pid: int) -> list[bytes] | None:
    """The fields of ``/proc/PID/stat`` after the command name (state first), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        int(fields[19])
    except (OSError, ValueError, IndexError):
        return None
    return fields
