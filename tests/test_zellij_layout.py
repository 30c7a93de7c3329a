"""Layouts: every shipped and generated layout is KDL v1 (ckdl), keeps the contract's §4.3
rules, and loads into the fake; hostile task names cannot break a layout or a title; the
capabilities table of contract §0."""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import ckdl
import pytest
from click.testing import CliRunner
from swarmtest import clean_env, wait_until
from zellijtest import FAKE_DIR

from zellij_swarm.backends import zellij_layout as layout
from zellij_swarm.backends.zellij_cli import capabilities
from zellij_swarm.cli import cli

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
@pytest.mark.parametrize("jobs", [1, 2, 7, 16])
def test_generated_layouts_keep_the_rules(style, jobs):
    text = layout.generate(jobs, "compact", style, run="20260101-000000-abcdef", state_dir="/tmp/a $b/~c")
    commands = check_rules(text)
    assert len(commands) == 1 + jobs


def test_hostile_names_cannot_break_a_layout():
    board = layout.PaneSpec("board", ["/bin/sh", "-c", 'exec "$@"', "x"])
    slots = [layout.PaneSpec(f"slot {i} · {n} · running", ["/bin/sh", f"/tmp/{n}/wrapper"])
             for i, n in enumerate(NASTY)]
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
        name = f"g{v.replace('.', '')}"
        fz.zellij("--layout", str(path), "attach", "--create-background", name, version=v)
        assert name in fz.zellij("list-sessions", "--no-formatting", "--short", version=v).stdout.split()


def test_capabilities():
    old, mid, new = capabilities("zellij 0.41.2"), capabilities("0.44.0"), capabilities("zellij 0.45.0\n")
    assert not old["pane_ids"] and not old["stacked"] and old["new_session_with_layout"] and old["tested"]
    assert mid["pane_ids"] and mid["pane_id_target"] and not mid["tab_id"] and not mid["no_focus"]
    assert new["tab_id"] and new["no_focus"] and new["version"] == "0.45.0"
    assert capabilities("0.39.9")["tested"] is False and capabilities("0.46.0")["tested"] is False
    assert capabilities("garbage")["version"] is None and not capabilities("garbage")["pane_ids"]


# ----- issue 11, item 9: what `layout` prints, its help, and the paths its panes run -------------

VERSIONS = ("0.40.1", "0.41.2", "0.43.1", "0.44.3", "0.45.0")
# 0.41.2 is a neighbour of the versions around it (scripts/test-full runs it)
IN_CI = [v if v != "0.41.2" else pytest.param(v, marks=pytest.mark.full) for v in VERSIONS]


def layout_command(*args: str) -> str:
    res = CliRunner().invoke(cli, ["layout", *args], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.stdout


def style_help() -> str:
    return next(p for p in cli.commands["layout"].params if p.name == "style").help or ""


def shape(text: str) -> dict[str, object]:
    """What a layout holds: its command panes by name with their renderer argv (after the
    program), whether one is a compact bar, and the panes directly in its tab."""
    panes = check_rules(text)
    tab = ckdl.parse(text, version=1).nodes[0].children[0]
    bars = [n for n in tab.children if [c for c in n.children if c.name == "plugin"]]
    return {"names": [p.properties["name"] for p in panes], "panes": panes, "top": tab.children,
            "compact_bar": [c.properties["location"] for n in bars for c in n.children] == ["zellij:compact-bar"]}


def renderer_args(pane: ckdl.Node) -> list[str]:
    args = [pane.properties["command"], *pane.children[0].args]
    i = args.index("zellij_swarm")
    return args[i + 1:]


@pytest.mark.parametrize("style", layout.STYLES)
@pytest.mark.parametrize("ui", layout.UIS)
@pytest.mark.parametrize("jobs", [1, 5])
def test_every_ui_and_style_shows_the_board_and_a_slot_view_per_slot(tmp_path, monkeypatch, ui, style, jobs):
    """`--ui live --style grid` printed the board alone; every combination now holds the board
    and one slot view per slot (-j), placed as the style says."""
    monkeypatch.chdir(tmp_path)
    text = layout_command("-j", str(jobs), "--ui", ui, "--style", style, "--state-dir", "st")
    other = {"live": "compact", "compact": "live"}[ui]
    assert text == layout_command("-j", str(jobs), "--ui", other, "--style", style, "--state-dir", "st")
    got = shape(text)
    assert got["names"] == ["board"] + [f"slot {n}" for n in range(1, jobs + 1)]
    st = ["--state-dir", str(tmp_path / "st")]
    assert [renderer_args(p) for p in got["panes"]] == [["board", *st]] + [
        ["slot-view", str(n), *st] for n in range(1, jobs + 1)]
    top = got["top"]
    if style == "swarm":
        assert len(top) == 1 and top[0].properties == {"split_direction": "vertical"}
        board, stack = top[0].children
        assert board.properties["name"] == "board" and board.properties["size"] == "40%"
        assert stack.properties == {"stacked": True} and len(stack.children) == jobs
    elif style == "compact":
        assert [n.properties.get("name") for n in top[:1]] == ["board"] and got["compact_bar"]
        assert top[1].properties == {"stacked": True} and len(top[1].children) == jobs
    else:
        columns = top[0].children if len(top) == 1 and top[0].properties.get("split_direction") == "vertical" else top
        assert len(columns) == math.ceil(math.sqrt(jobs + 1))


@pytest.mark.parametrize("style", layout.STYLES)
def test_style_help_says_what_the_layout_holds(tmp_path, monkeypatch, style):
    """`compact: slots only` while the compact layout has the board on top: the help of each
    style names the board, the slot views and the compact bar exactly when its layout has them."""
    monkeypatch.chdir(tmp_path)
    helptext = " ".join(style_help().split())
    m = re.search(rf"\b{style}: ([^;]+)", helptext)
    assert m, helptext
    said = m.group(1)
    got = shape(layout_command("-j", "3", "--style", style))
    assert ("board" in said) == ("board" in got["names"]), said
    assert ("slot" in said) == any(n.startswith("slot ") for n in got["names"]), said
    assert ("compact bar" in said) == got["compact_bar"], said
    shown = " ".join(CliRunner().invoke(cli, ["layout", "--help"]).output.split())
    assert said in shown


def test_generated_layout_runs_this_python_by_absolute_path(tmp_path, monkeypatch):
    """Contract §6.9: a pane's command is looked up in the Zellij server's PATH and its
    relative paths against the server's cwd; `layout` names this interpreter and the state
    directory by absolute path, so it works in a session started without the venv."""
    monkeypatch.delenv("ZELLIJ_SWARM_STATE_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    for args, state in ((["-j", "2"], tmp_path / ".zellij-swarm"), (["--state-dir", "rel/st"], tmp_path / "rel/st")):
        panes = shape(layout_command(*args))["panes"]
        for p in panes:
            argv = [p.properties["command"], *p.children[0].args]
            assert argv[:3] == [sys.executable, "-m", "zellij_swarm"] and Path(argv[0]).is_absolute()
            assert argv[-2:] == ["--state-dir", str(state)]
    monkeypatch.setenv("ZELLIJ_SWARM_STATE_DIR", "env/st")
    panes = shape(layout_command())["panes"]
    assert all([*p.children[0].args][-1] == str(tmp_path / "env/st") for p in panes)


def test_an_interpreter_path_zellij_would_expand_runs_through_sh():
    """A `$` or `~` in the interpreter's path would be expanded by Zellij (contract §4.3):
    the path then goes in `args` of /bin/sh, which Zellij passes verbatim."""
    text = layout.generate(2, style="grid", program=["/opt/$py~/bin/python", "-m", "zellij_swarm"])
    for p in check_rules(text):
        assert p.properties["command"] == "/bin/sh"
        assert p.children[0].args[:5] == ["-c", 'exec "$@"', "zellij-swarm", "/opt/$py~/bin/python", "-m"]


def test_shipped_layouts_say_they_need_zellij_swarm_on_the_server_path():
    """The shipped files run a bare `zellij-swarm` (they cannot know where it is installed):
    each says so at the top, and how to print one with absolute paths instead."""
    jobs = {"swarm": 4, "grid": 6, "compact": 4}
    assert sorted(p.stem for p in (REPO / "layouts").glob("*.kdl")) == sorted(jobs)
    for path in sorted((REPO / "layouts").glob("*.kdl")):
        head = path.read_text().split("layout {")[0]
        note = " ".join(ln.removeprefix("//").strip() for ln in head.splitlines())
        assert head and all(ln.startswith("//") for ln in head.splitlines()), path.name
        assert "PATH" in note and "Zellij server" in note, path.name
        assert f"zellij-swarm layout -j {jobs[path.stem]} --style {path.stem}" in note, path.name
        commands = {p.properties["command"] for p in check_rules(path.read_text())}
        assert commands == {"zellij-swarm"}
    readme = " ".join((REPO / "README.md").read_text().split())
    assert "`zellij-swarm` on the PATH of the Zellij server" in readme


@pytest.mark.parametrize("version", IN_CI)
def test_every_style_loads_at_every_version(fz, tmp_path, version):
    """Each style (the same for both UIs, checked above) makes a session at 0.40–0.45 with the
    board and every slot view (a cheap command stands in for the renderers)."""
    for style in layout.STYLES:
        path = tmp_path / f"{style}.kdl"
        path.write_text(layout.generate(3, style=style, program=["/bin/true"]))
        name = f"{style}{version.replace('.', '')}"
        fz.zellij("--layout", str(path), "attach", "--create-background", name, version=version)
        titles = [p["title"] for t in fz.session(version, name)["tabs"] for p in t["panes"] if p["kind"] == "terminal"]
        assert sorted(titles) == ["board", "slot 1", "slot 2", "slot 3"], (style, version)


@pytest.mark.parametrize("version", IN_CI)
def test_generated_layout_runs_in_a_server_without_zellij_swarm_on_path(fz, tmp_path, version):
    """The panes of `zellij-swarm layout` start (and show a finished run, then end with 0) in a
    Zellij server whose PATH has no zellij-swarm; the bare command would be `Command not found`."""
    assert shutil.which("zellij-swarm", path="/usr/bin:/bin") is None
    state = tmp_path / "st"
    subprocess.run([sys.executable, "-m", "zellij_swarm", "run", "-", "--backend", "headless", "--state-dir",
                    str(state), "-j", "1", "--output", "quiet"], input="true\n", text=True, env=clean_env(),
                   cwd=tmp_path, check=True, timeout=60, capture_output=True)
    ui, style = [(u, s) for u in layout.UIS for s in layout.STYLES][VERSIONS.index(version)]
    path = tmp_path / "gen.kdl"
    path.write_text(layout_command("-j", "2", "--ui", ui, "--style", style, "--state-dir", str(state)))
    env = fz.env(version, PATH=os.pathsep.join([str(FAKE_DIR), "/usr/bin", "/bin"]))
    subprocess.run(["zellij", "--layout", str(path), "attach", "--create-background", "gen"], env=env, cwd=fz.root,
                   check=True, timeout=20, capture_output=True, stdin=subprocess.DEVNULL)

    def panes() -> list[dict]:
        return [p for t in fz.session(version, "gen")["tabs"] for p in t["panes"] if p["kind"] == "terminal"]

    wait_until(lambda: len(panes()) == 3 and all(p["exited"] for p in panes()), timeout=30, interval=0.2,
               what="the renderers end")
    assert {p["title"]: p["exit_status"] for p in panes()} == {"board": 0, "slot 1": 0, "slot 2": 0}, panes()
