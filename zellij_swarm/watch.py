"""A minimal inotify watcher for the supervisor's event loop.

The supervisor needs an fd it can hand to its selector, for directories that exist before
the events it waits for (the control inbox, generation directories), with no debounce:
``watchfiles`` batches changes for tens of milliseconds, which is right for renderers and
wrong for the scheduler's hot path. Anything with ``fileno``/``add``/``read`` can be
injected instead (tests use ``PollingWatcher``-like doubles).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

IN_CLOSE_WRITE = 0x008
IN_MOVED_TO = 0x080
IN_CREATE = 0x100
IN_Q_OVERFLOW = 0x4000
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000
_EVENT = struct.Struct("iIII")


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


class Inotify:
    """Watches directories for files created, closed after writing, or renamed into them."""

    MASK = IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE

    def __init__(self) -> None:
        self._libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fd = self._libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"inotify_init1: {os.strerror(err)}")
        self._fd = fd
        self._dirs: dict[int, Path] = {}
        self._wds: dict[Path, int] = {}

    def fileno(self) -> int:
        return self._fd

    def add(self, directory: Path) -> None:
        wd = self._libc.inotify_add_watch(self._fd, os.fsencode(directory), self.MASK)
        if wd < 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), str(directory))
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
