"""Headless: each wrapper is a background process in its own session, stdin /dev/null.

``posix_spawn`` (vfork underneath) keeps the per-task launch cost low; the session makes the
worker immune to the terminal's Ctrl-C and lets it outlive a crashed supervisor, to be
adopted by ``resume``.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping

from .base import LaunchFailed, LaunchRequest, LaunchResult, Spawned

_STDIO = [
    (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
    (os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0),
    (os.POSIX_SPAWN_OPEN, 2, "/dev/null", os.O_WRONLY, 0),
]
# Python ignores SIGPIPE (and a caller may ignore more); a worker must start with every
# signal at its default, or `yes | head` would print "Broken pipe" instead of ending quietly.
_DEFAULT_SIGNALS = frozenset(signal.valid_signals()) - {signal.SIGKILL, signal.SIGSTOP}


class HeadlessBackend:
    name = "headless"

    def __init__(self, env: Mapping[str, str]) -> None:
        self._env = dict(env)

    def launch(self, batch: list[LaunchRequest]) -> list[LaunchResult]:
        return [self._spawn(req) for req in batch]

    def _spawn(self, req: LaunchRequest) -> LaunchResult:
        argv = ["/bin/sh", str(req.gen.wrapper)] + (["claimed"] if req.claimed else [])
        try:
            pid = os.posix_spawn("/bin/sh", argv, self._env, file_actions=_STDIO, setsid=True,
                                 setsigdef=_DEFAULT_SIGNALS, setsigmask=())
        except OSError as e:
            return LaunchFailed("spawn_failed", f"cannot start /bin/sh: {e.strerror}")
        return Spawned(pid)

    def close(self) -> None:
        pass
