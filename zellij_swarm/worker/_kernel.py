"""What the worker's scripts ask of the kernel — ``/proc`` reads, and to be a subreaper: the
launcher, the pane leader and the pty relay run as scripts (``python -I -S``, stdlib only, no
package), and the package reads ``/proc`` the same way.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # not ``typing``'s: the launcher keeps to built-in modules (``_launcher``)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable


def stat_fields(pid: int | str) -> list[bytes] | None:
    """``/proc/PID/stat`` after "pid (name)": [0] state, [1] parent, [2] process group, [3]
    session, … [6] flags, … [19] start time — a zombie keeps them. None: gone, or not ours to
    read. (The name may hold ") ": the last one ends it.)"""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def children() -> list[int]:
    """This process's children, zombies too: its thread's list where the kernel keeps one
    (one thread: the scripts'), else a look through /proc."""
    me = os.getpid()
    try:
        with open(f"/proc/{me}/task/{me}/children", "rb") as f:
            return [int(pid) for pid in f.read().split()]
    except OSError:
        pass
    return [int(name) for name in os.listdir("/proc")
            if name.isdigit() and (fields := stat_fields(name)) is not None and int(fields[1]) == me]


def first_started(pids: Iterable[int], keep: Callable[[list[bytes]], bool] = lambda _fields: True,
                  ) -> tuple[int, int] | None:
    """Of ``pids`` (those whose stat fields ``keep`` takes), the one that started first, as
    (start time, pid): the worker a killed wrapper left, among what it forked since."""
    found = []
    for pid in pids:
        fields = stat_fields(pid)
        if fields is not None and keep(fields):
            found.append((int(fields[19]), pid))
    return min(found, default=None)


PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h


def become_subreaper() -> None:
    """Orphans among this process's descendants are re-parented to it, not to init (Linux 3.4
    on; elsewhere, or where it is refused, they go to init as before). ``ctypes`` is loaded
    only here, for the one ``prctl`` Python has no call for."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):  # no C library to be had, or no prctl in it
        pass


def shell_code(status: int) -> int:
    """A wait status as a shell says it: the exit code, or 128 + N for a death by signal N."""
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code
