"""The first things the Zellij backend asks of a real Zellij (once scripts/zellij-smoke): that
``doctor``'s detection reads its version and capabilities, and that every layout style
``zellij-swarm layout`` generates loads in a real session with its board and slot panes."""

from __future__ import annotations

import json

import pytest
from realzellij import SESSION_TIMEOUT, RealZellij
from swarmtest import wait_until

from zellij_swarm.backends import zellij_cli, zellij_layout


def test_detection_reads_the_real_version_and_capabilities(rz: RealZellij) -> None:
    found = zellij_cli.detect(rz.env())
    assert found["error"] is None, found
    assert found["binary"] == str(rz.binary)
    assert found["version"] == rz.version
    assert found["tested"] is True
    caps = found["capabilities"]
    assert caps["list_panes"] and caps["pane_id_target"] and caps["no_focus"], caps
    assert found["inside_session"] is False


@pytest.mark.parametrize("style", zellij_layout.STYLES)
def test_each_layout_style_loads_in_a_real_session(rz: RealZellij, style: str) -> None:
    text = zellij_layout.generate(3, "compact", style, program=["/bin/sh", "-c", "sleep 600", "renderer"])
    path = rz.root / f"{style}.kdl"
    path.write_text(text)
    rz.zellij("--layout", str(path), "attach", "--create-background", style)

    def titles() -> list[str]:
        p = rz.zellij("--session", style, "action", "list-panes", "--json", check=False)
        return sorted(pane["title"] for pane in json.loads(p.stdout or "[]") if not pane["is_plugin"]) \
            if p.returncode == 0 else []

    shown = wait_until(lambda: t if len(t := titles()) == 4 else None, timeout=SESSION_TIMEOUT,
                       what=f"the {style} layout's panes")
    assert len([t for t in shown if t.startswith("slot ")]) == 3, shown
    assert len([t for t in shown if "board" in t]) == 1, shown
