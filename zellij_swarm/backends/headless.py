"""Headless: each wrapper is a background process in its own session, stdin /dev/null.

The supervisor's launcher (``launcher``) starts them, off the event loop's thread; the
session makes the worker immune to the terminal's Ctrl-C and lets it outlive a crashed
supervisor, to be adopted by ``resume``. The supervisor starts every headless worker that
way, whatever its backend (compact mode, slots past the visible cap, a fallback): this
backend only says that it shows no panes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from zellij_swarm.backends.base import LaunchFailed, LaunchRequest, PaneExited, PaneResult, RunContext
from zellij_swarm.worker.wrapper import PaneMode


def worker_env(env: Mapping[str, str]) -> dict[str, str]:
    """Headless workers: the caller's environment without pane ids (SPEC §5.2)."""
    out = {k: v for k, v in env.items() if k not in ("TMUX_PANE", "ZELLIJ_PANE_ID")}
    out.setdefault("PYTHONUNBUFFERED", "1")
    return out


class HeadlessBackend:
    name = "headless"
    output_copied_after_end = False

    def open(self, ctx: RunContext) -> None:
        pass

    def shows(self, slot: int) -> bool:
        return False

    def pane_mode(self, slot: int) -> PaneMode | None:
        return None

    def launch(self, batch: list[LaunchRequest]) -> list[PaneResult]:
        return [LaunchFailed("spawn_failed", "the headless backend has no panes") for _ in batch]

    def launch_seen(self) -> None:
        pass

    def ended(self, req: LaunchRequest, pane_id: str | None, status: str, label: str) -> None:
        pass

    def waiting(self, req: LaunchRequest, pane_id: str | None, waiting: bool) -> None:
        pass

    def abandon(self, pane_id: str | None, req: LaunchRequest) -> None:
        pass

    def session_alive(self) -> bool:
        return True

    def pane_listed(self, pane_id: str | None) -> bool | None:
        return None

    def pane_exited(self, pane_id: str | None) -> PaneExited | None:
        return None

    def attach_command(self) -> tuple[list[str], dict[str, str]] | None:
        return None

    def close(self, *, cancelled: bool, failed: bool = True) -> None:
        pass

    def place(self) -> dict[str, Any] | None:
        return None

    def leftover_hint(self) -> str | None:
        return None
