"""Headless: each wrapper is a background process in its own session, stdin /dev/null.

``posix_spawn`` (vfork underneath) keeps the per-task launch cost low; the session makes the
worker immune to the terminal's Ctrl-C and lets it outlive a crashed supervisor, to be
adopted by ``resume``. Pane backends use one of these for workers that run headless
(compact mode, slots past the visible cap, fallbacks).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping

from ..wrapper import PaneMode
from .base import LaunchFailed, LaunchRequest, LaunchResult, RunContext, Spawned

_STDIO = [
    (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
    (os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0),
    (os.POSIX_SPAWN_OPEN, 2, "/dev/null", os.O_WRONLY, 0),
]
# Python ignores SIGPIPE (and a caller may ignore more); a worker must start with every
# signal at its default, or `yes | head` would print "Broken pipe" instead of ending quietly.
_DEFAULT_SIGNALS = frozenset(signal.valid_signals()) - {signal.SIGKILL, signal.SIGSTOP}


def worker_env(env: Mapping[str, str]) -> dict[str, str]:
    """Headless workers: the caller's environment without pane ids (SPEC §5.2)."""
    out = {k: v for k, v in env.items() if k not in ("TMUX_PANE", "ZELLIJ_PANE_ID")}
    out.setdefault("PYTHONUNBUFFERED", "1")
    return out


class HeadlessBackend:
    name = "headless"

    def __init__(self, env: Mapping[str, str]) -> None:
        self._env = worker_env(env)

    def open(self, ctx: RunContext) -> None:
        pass

    def pane_mode(self, slot: int) -> PaneMode | None:
        return None

    def launch(self, batch: list[LaunchRequest]) -> list[LaunchResult]:
        return [self.spawn(req) for req in batch]

    def spawn(self, req: LaunchRequest) -> LaunchResult:
        argv = ["/bin/sh", str(req.gen.wrapper)] + (["claimed"] if req.claimed else [])
        try:
            pid = os.posix_spawn("/bin/sh", argv, self._env, file_actions=_STDIO, setsid=True,
                                 setsigdef=_DEFAULT_SIGNALS, setsigmask=())
        except OSError as e:
            return LaunchFailed("spawn_failed", f"cannot start /bin/sh: {e.strerror}")
        return Spawned(pid)

    def ended(self, req: LaunchRequest, pane_id: str | None, status: str, label: str) -> None:
        pass

    def abandon(self, pane_id: str | None, req: LaunchRequest) -> None:
        pass

    def session_alive(self) -> bool:
        return True

    def close(self, *, cancelled: bool) -> None:
        pass
