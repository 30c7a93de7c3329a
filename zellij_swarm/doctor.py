"""``zellij-swarm doctor``: what ``auto`` would pick and why, the multiplexers found, and
the settings this environment resolves to."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Mapping
from typing import Any

from . import exc, settings
from .backends.select import choose

TESTED_ZELLIJ = ((0, 40), (0, 45))


def _version(argv: list[str], env: Mapping[str, str]) -> str | None:
    if not shutil.which(argv[0], path=env.get("PATH")):
        return None
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=5, env=dict(env), stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (out.stdout or out.stderr).strip() or None


def report(env: Mapping[str, str]) -> dict[str, Any]:
    zellij = _version(["zellij", "--version"], env)
    tmux = _version(["tmux", "-V"], env)
    zellij_note = None
    if zellij and (m := re.search(r"(\d+)\.(\d+)\.(\d+)", zellij)):
        major_minor = (int(m.group(1)), int(m.group(2)))
        if not TESTED_ZELLIJ[0] <= major_minor <= TESTED_ZELLIJ[1]:
            zellij_note = "untested version: zellij-swarm is tested with 0.40–0.45"
    info: dict[str, Any] = {
        "zellij": {"version": zellij, "note": zellij_note, "inside_session": bool(env.get("ZELLIJ"))},
        "tmux": {"version": tmux, "note": None, "inside_session": bool(env.get("TMUX"))},
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
