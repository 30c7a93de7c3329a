"""Layouts: every shipped and generated layout is KDL v1 (ckdl), keeps the contract's §4.3
rules, and loads into the fake; hostile task names cannot break a layout or a title; the
capabilities table of contract §0."""

from __future__ import annotations

from pathlib import Path

import ckdl
import pytest

from test_zellij_backend import fz  # noqa: F401  (fixture)
from zellij_swarm import layout
from zellij_swarm.backends._zellij import capabilities

REPO = Path(__file__).resolve().parent.parent
PANE_PROPS = {"name", "focus", "size", "split_direction", "borderless", "command", "close_on_exit", "start_suspended",
              "stacked", "expanded"}
NASTY = ['quo"te', "dollar $HOME and ${X}", "~tilde", "new\nline", "br{ace}s;", "back\\slash", "-dash"]


def check_rules(text: str) -> list[ckdl.Node]:
    """Contract §4.3 as far as a generator can break it; returns the command panes."""
    doc = ckdl.parse(text, version=1)
    assert [n.name for n in doc.nodes] == ["layout"]
    tabs = doc.nodes[0].children
    assert tabs and all(t.name == "tab" for t in tabs)  # explicit tabs: no startup popup
    assert sum(1 for t in tabs if t.properties.get("focus") is True) <= 1
    commands: list[ckdl.Node] = []

    def pane(node: ckdl.Node, in_stack: bool) -> None:
        assert node.name == "pane", node.name
        assert set(node.properties) <= PANE_PROPS, node.properties
        kids = [c for c in node.children if c.name == "pane"]
        others = [c for c in node.children if c.name != "pane"]
        size = node.properties.get("size")
        assert size is None or (isinstance(size, int) and size > 0) or (
            isinstance(size, str) and size.endswith("%") and 1 <= int(size[:-1]) <= 100)
        if kids:
            assert not others and not {"command", "cwd", "borderless"} & set(node.properties)
            if node.properties.get("stacked"):
                assert node.properties.get("split_direction") != "vertical"
                assert all(not [g for g in k.children if g.name == "pane"] for k in kids)
            for k in kids:
                pane(k, bool(node.properties.get("stacked")))
            return
        assert "cwd" not in node.properties  # the wrapper changes directory itself
        if "command" in node.properties:
            cmd = node.properties["command"]
            assert "$" not in cmd and "~" not in cmd
            for o in others:
                assert o.name == "args" and o.args and all(isinstance(a, str) for a in o.args)
            commands.append(node)
        else:
            assert not {"close_on_exit", "start_suspended"} & set(node.properties)
            assert all(o.name == "plugin" for o in others)

    for t in tabs:
        for n in t.children:
            pane(n, False)
    return commands


def test_shipped_layouts_are_generated():
    shipped = layout.shipped()
    assert sorted(p.name for p in (REPO / "layouts").glob("*.kdl")) == sorted(shipped)
    for name, text in shipped.items():
        assert (REPO / "layouts" / name).read_text() == text, f"layouts/{name} is stale"
        check_rules(text)


@pytest.mark.parametrize("style", layout.STYLES)
@pytest.mark.parametrize("ui", layout.UIS)
@pytest.mark.parametrize("jobs", [1, 2, 7, 16])
def test_generated_layouts_keep_the_rules(style, ui, jobs):
    text = layout.generate(jobs, ui, style, run="20260101-000000-abcdef", state_dir="/tmp/a $b/~c")
    commands = check_rules(text)
    assert len(commands) == 1 + (jobs if ui == "compact" else 0)


def test_hostile_names_cannot_break_a_layout():
    board = layout.PaneSpec("board", ["/bin/sh", "-c", 'exec "$@"', "x"])
    slots = [layout.PaneSpec(f"slot {i} · {n} · running", ["/bin/sh", f"/tmp/{n}/wrapper"]) for i, n in enumerate(NASTY)]
    text = layout.document(board, slots, tab_name="swarm:" + NASTY[3])
    panes = check_rules(text)
    names = [p.properties["name"] for p in panes][1:]
    assert names == [layout.title(f"slot {i} · {n} · running") for i, n in enumerate(NASTY)]
    assert all("\n" not in n for n in names)
    assert [p.children[0].args for p in panes][1:] == [[f"/tmp/{n}/wrapper"] for n in NASTY]
    with pytest.raises(ValueError):
        layout.document(None, [layout.PaneSpec("x", ["$HOME/bin/x"])], tab_name="t")


@pytest.mark.parametrize("style", layout.STYLES)
def test_layouts_load_into_the_fake(fz, tmp_path, style):
    slots = [layout.PaneSpec(f"slot {i} · {n}", ["/bin/sh", "-c", "sleep 30"]) for i, n in enumerate(NASTY)]
    board = layout.PaneSpec("board", ["/bin/sh", "-c", "sleep 30"], focus=True)
    path = tmp_path / "l.kdl"
    path.write_text(layout.document(board, slots, tab_name="swarm:t", style=style))
    fz.zellij("--layout", str(path), "attach", "--create-background", f"l{style}", version="0.45.0")
    titles = sorted(p["title"] for t in fz.session("0.45.0", f"l{style}")["tabs"] for p in t["panes"]
                    if p["kind"] == "terminal")
    assert titles == sorted(["board"] + [layout.title(s.name) for s in slots])


def test_generated_layout_loads_into_the_fake_at_old_versions(fz, tmp_path):
    path = tmp_path / "g.kdl"
    path.write_text(layout.generate(3, "compact", "swarm", program=["/bin/sh", "-c", "sleep 30", "x"]))
    for v in ("0.41.2", "0.43.1"):
        fz.zellij("--layout", str(path), "attach", "--create-background", f"g{v.replace('.', '')}", version=v)


def test_capabilities():
    old, mid, new = capabilities("zellij 0.41.2"), capabilities("0.44.0"), capabilities("zellij 0.45.0\n")
    assert not old["pane_ids"] and not old["stacked"] and old["new_session_with_layout"] and old["tested"]
    assert mid["pane_ids"] and mid["pane_id_target"] and not mid["tab_id"] and not mid["no_focus"]
    assert new["tab_id"] and new["no_focus"] and new["version"] == "0.45.0"
    assert capabilities("0.39.9")["tested"] is False and capabilities("0.46.0")["tested"] is False
    assert capabilities("garbage")["version"] is None and not capabilities("garbage")["pane_ids"]
