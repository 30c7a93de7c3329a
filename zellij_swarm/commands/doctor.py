"""``zellij-swarm doctor``: what ``auto`` would pick and why, the multiplexers found and
what they can do, and the settings this environment resolves to."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from typing import Any

from zellij_swarm import exc
from zellij_swarm.backends import detect_zellij, run_command
from zellij_swarm.backends.select import choose
from zellij_swarm.config import settings


def _tmux_version(env: Mapping[str, str]) -> str | None:
    if not shutil.which("tmux", path=env.get("PATH")):
        return None
    try:
        return run_command(["tmux", "-V"], timeout=5, env=env).stdout.strip() or None
    except exc.BackendError:
        return None


def report(env: Mapping[str, str]) -> dict[str, Any]:
    info: dict[str, Any] = {
        "zellij": detect_zellij(env),
        "tmux": {"version": _tmux_version(env), "inside_session": bool(env.get("TMUX"))},
        "settings": {},
    }
    try:
        resolved = settings.resolve({}, env)
        info["settings"] = resolved.as_record()
        choice = choose(resolved.backend, env)
    except exc.SettingError as e:
        info["error"] = str(e)
        choice = choose("auto", env)
    info["backend"] = {"name": choice.name, "why": choice.why}
    return info
