"""Which backend a run uses (SPEC §2): ``auto`` picks from where the supervisor runs."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass

from zellij_swarm.config.settings import truthy


@dataclass(frozen=True)
class Choice:
    name: str  # zellij | tmux | headless
    why: str


def choose(requested: str, env: Mapping[str, str]) -> Choice:
    if requested != "auto":
        return Choice(requested, f"--backend {requested} was asked for")
    in_zellij = bool(env.get("ZELLIJ")) or bool(env.get("ZELLIJ_SESSION_NAME"))
    in_tmux = bool(env.get("TMUX"))
    if in_zellij and shutil.which("zellij", path=env.get("PATH")):
        return Choice("zellij", "inside a Zellij session (ZELLIJ is set) with a zellij binary on PATH")
    if in_tmux:
        return Choice("tmux", "inside a tmux session (TMUX is set)")
    if truthy(env.get("CI")):
        return Choice("headless", "CI=true outside a multiplexer session")
    if in_zellij:
        return Choice("headless", "inside Zellij but no zellij binary on PATH")
    return Choice("headless", "not inside Zellij or tmux")
