"""A minimal inotify watcher, for event loops that wait on file descriptors.

The supervisor needs an fd it can hand to its selector, for directories that exist before
the events it waits for (the control inbox, generation directories), with no debounce: its
scheduler's hot path reacts to each ``exit`` the moment it lands. Anything with
``fileno``/``add``/``remove``/``read``/``close`` can be injected instead (tests use
``PollingWatcher``-like doubles). ``follow`` is the same watcher for a loop without a
selector of its own (the renderers): batches of any change, and a tick.
"""

from __future__ import annotations

import ctypes
import functools
import os
import select
import struct
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

IN_MODIFY = 0x002
IN_ATTRIB = 0x004
IN_CLOSE_WRITE = 0x008
IN_MOVED_FROM = 0x040
IN_MOVED_TO = 0x080
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_Q_OVERFLOW = 0x4000
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000
_EVENT = struct.Struct("iIII")
WAKE_CHECK = 0.05  # seconds between looks at ``follow``'s ``wake``, a flag no selector can wait on

# A file that is complete: created (O_EXCL claims), closed after writing, or renamed into place.
COMPLETED = IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE
# Anything a view shows may have changed: also a write still going on, an mtime, a removal.
ANY_CHANGE = COMPLETED | IN_MODIFY | IN_ATTRIB | IN_MOVED_FROM | IN_DELETE


@dataclass(frozen=True)
class Change:
    dir: Path
    name: str


class Watcher(Protocol):
    def fileno(self) -> int: ...
    def add(self, directory: Path) -> None: ...
    def remove(self, directory: Path) -> None: ...
    def read(self) -> list[Change]: ...
    def close(self) -> None: ...


@functools.cache
def _libc() -> ctypes.CDLL:
    # The process's own symbols (dlopen of NULL), libc's among them: no ldconfig run to find
    # libc (ctypes.util.find_library), nor ctypes.util's imports (tempfile, …) in every run
    libc = ctypes.CDLL(None, use_errno=True)
    libc.inotify_init1.argtypes = [ctypes.c_int]
    libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    libc.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
    return libc


class Inotify:
    """Watches directories for the events of ``mask`` on the files in them (by default, files
    created, closed after writing, or renamed into them)."""

    def __init__(self, *, mask: int = COMPLETED) -> None:
        self._libc = _libc()
        self._mask = mask
        self._dirs: dict[int, Path] = {}
        self._wds: dict[Path, int] = {}
        # Without an inotify instance (EMFILE: 128 per user by default, and every renderer
        # takes one; ENOSYS, EPERM: a kernel or a seccomp filter without inotify) every
        # ``add`` fails with that cause, as one the system's watches cannot hold (ENOSPC)
        # does, and each user polls what it wanted watched; the fd then never wakes.
        self._unavailable: OSError | None = None
        fd: int = self._libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            err = ctypes.get_errno()
            self._unavailable = OSError(err, f"no inotify instance: {os.strerror(err)}")
            fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._fd = fd

    def fileno(self) -> int:
        return self._fd

    def add(self, directory: Path) -> None:
        if self._unavailable is not None:
            raise OSError(self._unavailable.errno, self._unavailable.strerror, str(directory))
        wd: int = self._libc.inotify_add_watch(self._fd, os.fsencode(directory), self._mask)
        if wd < 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), str(directory))
        # A directory renamed keeps its watch: the same inode under a new name (a generation's
        # directory kept as its slot's shell) gets the same descriptor, now this name's only.
        if (before := self._dirs.get(wd)) is not None:
            self._wds.pop(before, None)
        self._dirs[wd] = directory
        self._wds[directory] = wd

    def remove(self, directory: Path) -> None:
        wd = self._wds.pop(directory, None)
        if wd is not None:
            self._dirs.pop(wd, None)
            self._libc.inotify_rm_watch(self._fd, wd)

    def read(self) -> list[Change]:
        out: list[Change] = []
        while True:
            try:
                buf = os.read(self._fd, 65536)
            except BlockingIOError:
                return out
            out += changes(buf, self._dirs)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class Wake:
    """What ends a watcher: ``threading.Event``'s interface, safe to set from a signal handler.
    A handler runs in the main thread, maybe while that thread holds the event's lock (inside
    ``clear`` or ``wait``). ``threading.Event``'s lock is not re-entrant, so its ``set`` would
    then wait for itself forever: a board renderer hung so on SIGHUP and outlived its run.
    This one's lock is re-entrant."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.RLock())
        self._flag = False

    def is_set(self) -> bool:
        return self._flag

    def set(self) -> None:
        with self._cond:
            self._flag = True
            self._cond.notify_all()

    def clear(self) -> None:
        with self._cond:
            self._flag = False

    def wait(self, timeout: float | None = None) -> bool:
        with self._cond:
            if not self._flag:
                self._cond.wait(timeout)
            return self._flag


def follow(paths: Iterable[Path], wake: Wake, *, tick: float = 1.0) -> Iterator[list[Change]]:
    """Watches ``paths`` (not recursively) for any change; yields each batch of changes, or an
    empty list after ``tick`` seconds without one, until ``wake`` is set.

    The first (empty) yield comes once the watches are in place, so a reader that looks then
    misses nothing that changed before them. Each yield carries every change queued by then:
    the reader's own pace is the only debounce.
    """
    notify = Inotify(mask=ANY_CHANGE)
    try:
        for path in paths:
            notify.add(path)
        yield []
        next_tick = time.monotonic() + tick
        while not wake.is_set():
            select.select([notify], [], [], max(0.0, min(WAKE_CHECK, next_tick - time.monotonic())))
            batch = notify.read()
            if batch or time.monotonic() >= next_tick:
                yield batch
                next_tick = time.monotonic() + tick
    finally:
        notify.close()


def changes(buf: bytes, dirs: dict[int, Path]) -> list[Change]:
    """The changes in a buffer of inotify events (``dirs``: watch descriptor -> directory).
    When the kernel's event queue overflowed, events were dropped: every watched directory
    is reported changed (name ``""``), so its reader looks at all of them again."""
    out: list[Change] = []
    pos = 0
    while pos < len(buf):
        wd, mask, _cookie, size = _EVENT.unpack_from(buf, pos)
        pos += _EVENT.size
        name = buf[pos:pos + size].rstrip(b"\0").decode(errors="surrogateescape")
        pos += size
        if mask & IN_Q_OVERFLOW:
            out += [Change(d, "") for d in dirs.values()]
        elif wd in dirs:
            out.append(Change(dirs[wd], name))
    return out
