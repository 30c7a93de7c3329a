"""Focus, stacking and placement (contract §3.10, §2.7, §2.18) and what `dump-layout` (§2.13)
and `list-panes` (§2.15) show of them: a pane run ``--stacked`` lands on the *focused* pane."""
from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.timeout(90)

STACKED_VERSIONS = ["0.43.1", "0.44.3", "0.45.0"]
# the board on the left (focus=true, like the swarm layout), two workers stacked on the right
SWARM = """layout {
    tab name="swarm" focus=true {
        pane split_direction="vertical" {
            pane name="board" command="/bin/sleep" focus=true size="40%" {
                args "60";
            }
            pane stacked=true {
                pane name="w1" command="/bin/sleep" {
                    args "60";
                }
                pane name="w2" command="/bin/sleep" {
                    args "60";
                }
            }
        }
    }
}
"""


def make(fake, version, layout=SWARM, name="s", attach=None):
    """A session from ``layout``; before 0.44 a client is attached (else `run` places nothing)."""
    path = fake.root / f"{name}.kdl"
    path.write_text(layout)
    fake.create(name, "--layout", str(path), version=version)
    fake.wait_for(lambda: fake.panes(name, version) and all(
        p["pid"] for p in fake.panes(name, version) if p["kind"] == "terminal"),
        what="layout panes to start")
    if attach if attach is not None else version < "0.44":
        r = fake.run("__fake-attach", name, version=version)
        assert r.rc == 0, r
    return name


def named(fake, version, session="s"):
    return {p["name"]: p for p in fake.panes(session, version)}


def tab(fake, version, session="s", index=0):
    return fake.session(session, version)["tabs"][index]


def run(fake, version, *flags, name="w3", env_pane=None, session="s"):
    extra = {"ZELLIJ_PANE_ID": env_pane} if env_pane is not None else {}
    r = fake.run("-s", session, "run", *flags, "--name", name, "--", "/bin/sleep", "60",
                 version=version, **extra)
    assert r.rc == 0 and r.err == "", r
    return r


def backend_flags(version):
    """What zellij_swarm's backend passes for a backfill pane at each version."""
    flags = ["--stacked"]
    if version >= "0.44.1":
        flags += ["--tab-id", "0"]
    if version >= "0.45":
        flags.append("--no-focus")
    return flags


@pytest.mark.parametrize("version", STACKED_VERSIONS)
def test_stacked_run_collapses_the_focused_board(fake, version):
    """§3.10: `--stacked` (with `--tab-id`, and `--no-focus` where they exist) stacks onto the
    tab's focused pane — the layout's focus=true board — not onto the workers' stack."""
    make(fake, version)
    run(fake, version, *backend_flags(version))
    panes = named(fake, version)
    assert panes["board"]["stacked"] and panes["w3"]["stacked"]
    board, w3, w1 = panes["board"]["geometry"], panes["w3"]["geometry"], panes["w1"]["geometry"]
    # the board's 40 % column now holds a stack of two: board and w3 share x and width
    assert (board["x"], board["cols"]) == (w3["x"], w3["cols"]) == (0, 20)
    assert w1["x"] == 20
    expanded = "board" if version >= "0.45" else "w3"  # --no-focus leaves the board expanded
    collapsed = "w3" if expanded == "board" else "board"
    assert panes[collapsed]["geometry"]["rows"] == 1
    assert panes[expanded]["geometry"]["rows"] == 49
    assert panes[expanded]["expanded"] and not panes[collapsed]["expanded"]
    # focus: --no-focus keeps it on the board; before 0.45 the new pane takes it
    assert tab(fake, version)["focused_pane"] == panes["board" if version >= "0.45" else "w3"][
        "pane_id"]
    dump = fake.run("-s", "s", "action", "dump-layout", version=version).out
    lines = [ln.strip() for ln in dump.splitlines()]
    i = next(i for i, ln in enumerate(lines) if ln.startswith('pane name="board"'))
    assert lines[i - 1] == 'pane stacked=true size="40%" {', dump
    assert any(ln.startswith('pane name="w3"') for ln in lines[i:i + 8]), dump
    if version >= "0.44":
        lp = json.loads(fake.run("-s", "s", "action", "list-panes", "--json",
                                 version=version).out)
        rows = {p["title"]: p for p in lp}
        assert rows[collapsed]["pane_rows"] == 1
        assert rows["board"]["pane_columns"] == rows["w3"]["pane_columns"] == 20


@pytest.mark.parametrize("version,flags", [
    ("0.43.1", []),  # before 0.44 --stacked alone stacks under $ZELLIJ_PANE_ID (route.rs)
    ("0.44.3", ["--near-current-pane"]),
    ("0.45.0", ["--near-current-pane"]),
    ("0.45.0", ["--no-focus"]),
])
def test_stacked_near_the_callers_pane_joins_its_stack(fake, version, flags):
    make(fake, version)
    w1 = named(fake, version)["w1"]
    run(fake, version, "--stacked", *flags, env_pane=str(w1["id"]))
    panes = named(fake, version)
    assert not panes["board"]["stacked"]
    assert panes["board"]["geometry"] == {"x": 0, "y": 0, "rows": 50, "cols": 20}
    assert panes["w3"]["stacked"] and panes["w3"]["geometry"]["x"] == 20
    # no focus change: the board keeps it, the stack keeps its expanded pane
    assert tab(fake, version)["focused_pane"] == panes["board"]["pane_id"]
    assert panes["w1"]["expanded"] and panes["w3"]["geometry"]["rows"] == 1
    dump = fake.run("-s", "s", "action", "dump-layout", version=version).out
    stack = dump[dump.index("stacked=true"):]
    assert stack.index('name="w1"') < stack.index('name="w3"') < stack.index('name="w2"')


@pytest.mark.parametrize("version", ["0.44.3", "0.45.0"])
def test_near_current_pane_without_a_caller_pane_uses_the_focused_pane(fake, version):
    """`--near-current-pane` needs `$ZELLIJ_PANE_ID` (§1); without it the focused pane counts."""
    make(fake, version)
    run(fake, version, "--stacked", "--near-current-pane")
    assert named(fake, version)["board"]["stacked"]


@pytest.mark.parametrize("version", ["0.44.3", "0.45.0"])
def test_focus_pane_id_moves_the_stacking_point_only_with_a_client(fake, version):
    """§2.18: focus actions act for the attached client; detached they have no effect."""
    make(fake, version)
    w2 = named(fake, version)["w2"]
    r = fake.run("-s", "s", "action", "focus-pane-id", w2["pane_id"], version=version)
    assert (r.rc, r.out, r.err) == (0, "", "")
    assert tab(fake, version)["focused_pane"] == named(fake, version)["board"]["pane_id"]
    fake.run("__fake-attach", "s", version=version)
    r = fake.run("-s", "s", "action", "focus-pane-id", w2["pane_id"], version=version)
    assert r.rc == 0
    panes = named(fake, version)
    assert tab(fake, version)["focused_pane"] == w2["pane_id"]
    assert panes["w2"]["expanded"] and panes["w1"]["geometry"]["rows"] == 1
    run(fake, version, "--stacked")
    panes = named(fake, version)
    assert not panes["board"]["stacked"] and panes["w3"]["stacked"]
    assert panes["w3"]["geometry"]["x"] == 20
    assert tab(fake, version)["focused_pane"] == panes["w3"]["pane_id"]
    lp = json.loads(fake.run("-s", "s", "action", "list-panes", "--json", version=version).out)
    assert [p["title"] for p in lp if p["is_focused"]] == ["w3"]


def test_focus_pane_id_is_gated(fake):
    make(fake, "0.44.0")
    r = fake.run("-s", "s", "action", "focus-pane-id", "terminal_1", version="0.44.0")
    assert r.rc == 2 and r.err.startswith("error:")


@pytest.mark.parametrize("version", STACKED_VERSIONS)
def test_focus_next_pane_cycles_and_expands_stack_members(fake, version):
    make(fake, version, attach=True)
    fake.run("-s", "s", "action", "focus-next-pane", version=version)
    panes = named(fake, version)
    assert tab(fake, version)["focused_pane"] == panes["w1"]["pane_id"]
    fake.run("-s", "s", "action", "focus-next-pane", version=version)
    panes = named(fake, version)
    assert tab(fake, version)["focused_pane"] == panes["w2"]["pane_id"]
    assert panes["w2"]["expanded"] and panes["w2"]["geometry"]["rows"] == 49
    assert panes["w1"]["geometry"]["rows"] == 1
    # then a plain --stacked run goes to the w1/w2 stack, the board stays whole
    run(fake, version, "--stacked")
    panes = named(fake, version)
    assert not panes["board"]["stacked"] and panes["w3"]["geometry"]["x"] == 20


def test_focus_actions_in_a_detached_session_change_nothing(fake):
    make(fake, "0.45.0")
    before = tab(fake, "0.45.0")["focused_pane"]
    for args in (["focus-next-pane"], ["focus-previous-pane"], ["move-focus", "right"]):
        r = fake.run("-s", "s", "action", *args, version="0.45.0")
        assert (r.rc, r.out, r.err) == (0, "", "")
    assert tab(fake, "0.45.0")["focused_pane"] == before


@pytest.mark.parametrize("version", ["0.44.3", "0.45.0"])
def test_new_pane_takes_focus_unless_no_focus(fake, version):
    make(fake, version, attach=True)  # a client's focus: without one it stays (0.45.0, verified)
    run(fake, version, name="plain")
    assert tab(fake, version)["focused_pane"] == named(fake, version)["plain"]["pane_id"]
    if version >= "0.45":
        run(fake, version, "--no-focus", name="quiet")
        assert tab(fake, version)["focused_pane"] == \
            named(fake, version)["plain"]["pane_id"]
        r = fake.run("-s", "s", "action", "new-pane", "--no-focus", "--name", "np", "--",
                     "/bin/sleep", "60", version=version)
        assert r.rc == 0
        assert tab(fake, version)["focused_pane"] == \
            named(fake, version)["plain"]["pane_id"]
    # the next --stacked run lands on the focused pane: "plain"
    run(fake, version, "--stacked", name="onplain")
    panes = named(fake, version)
    assert panes["plain"]["stacked"] and panes["onplain"]["stacked"]
    assert not panes["board"]["stacked"]


@pytest.mark.parametrize("version", ["0.44.3", "0.45.0"])
def test_without_a_client_a_new_pane_leaves_the_focus_where_it_was(fake, version):
    """0.45.0 (verified, never attached and after its client detached): a ``run`` with no
    client goes to the first tab and does not take its focus, split or not."""
    make(fake, version)
    focused = tab(fake, version)["focused_pane"]
    run(fake, version, name="plain")
    assert fake.run("-s", "s", "run", "--direction", "down", "--name", "below", "--", "/bin/sleep", "60",
                    version=version).rc == 0
    assert tab(fake, version)["focused_pane"] == focused


@pytest.mark.parametrize("version", ["0.44.3", "0.45.0"])
def test_tab_id_targets_that_tabs_focused_pane(fake, version):
    make(fake, version)
    layout = fake.root / "t2.kdl"
    layout.write_text('layout {\n    tab name="two" {\n        pane name="a" command="/bin/sleep" '
                      '{\n            args "60";\n        }\n        pane name="b" focus=true '
                      'command="/bin/sleep" {\n            args "60";\n        }\n    }\n}\n')
    r = fake.run("-s", "s", "action", "new-tab", "--layout", str(layout), version=version)
    assert (r.rc, r.out) == (0, "1\n"), r
    run(fake, version, "--stacked", "--tab-id", "1", name="x")
    panes = named(fake, version)
    assert panes["x"]["tab_id"] == 1 and panes["b"]["stacked"] and panes["x"]["stacked"]
    assert not panes["a"]["stacked"] and not panes["board"]["stacked"]
    r = fake.run("-s", "s", "run", "--stacked", "--tab-id", "7", "--", "/bin/true",
                 version=version)
    assert r.rc == 2 and "7" in r.err


@pytest.mark.parametrize("version", STACKED_VERSIONS)
def test_closing_a_focused_stack_member_focuses_its_neighbour(fake, version):
    make(fake, version, attach=True)
    fake.run("-s", "s", "action", "focus-next-pane", version=version)  # w1
    r = fake.run("-s", "s", "action", "close-pane", version=version)
    assert r.rc == 0
    panes = named(fake, version)
    assert "w1" not in panes
    # the stack of one dissolves: w2 is a plain pane in the right column, focused
    assert tab(fake, version)["focused_pane"] == panes["w2"]["pane_id"]
    assert not panes["w2"]["stacked"]
    assert panes["w2"]["geometry"] == {"x": 20, "y": 0, "rows": 50, "cols": 30}


@pytest.mark.parametrize("version", ["0.40.1", "0.41.2", "0.44.3", "0.45.0"])
def test_direction_splits_the_focused_pane(fake, version):
    make(fake, version, attach=True)
    r = fake.run("-s", "s", "run", "--direction", "down", "--name", "below", "--",
                 "/bin/sleep", "60", version=version)
    assert r.rc == 0
    panes = named(fake, version)
    assert panes["board"]["geometry"] == {"x": 0, "y": 0, "rows": 25, "cols": 20}
    assert panes["below"]["geometry"] == {"x": 0, "y": 25, "rows": 25, "cols": 20}
    assert tab(fake, version)["focused_pane"] == panes["below"]["pane_id"]


@pytest.mark.parametrize("version", ["0.40.1", "0.41.2"])
def test_stacked_flag_does_not_exist_before_0_43(fake, version):
    make(fake, version)
    r = fake.run("-s", "s", "run", "--stacked", "--", "/bin/true", version=version)
    assert r.rc == 2 and r.err.startswith("error:")
    assert "w3" not in named(fake, version)


@pytest.mark.parametrize("version,flag", [
    ("0.43.1", "--near-current-pane"), ("0.43.1", "--tab-id"), ("0.44.0", "--tab-id"),
    ("0.43.1", "--no-focus"), ("0.44.3", "--no-focus"),
])
@pytest.mark.parametrize("cmd", [["run"], ["action", "new-pane"]])
def test_placement_flags_are_gated(fake, version, flag, cmd):
    args = [flag, "0"] if flag == "--tab-id" else [flag]
    r = fake.run(*cmd, *args, "--", "/bin/true", version=version)
    assert r.rc == 2 and r.err.startswith("error:"), r


DEFAULT_BARS = """layout {
    tab name="bars" {
        pane size=1 borderless=true {
            plugin location="zellij:tab-bar";
        }
        pane name="main" command="/bin/sleep" {
            args "60";
        }
        pane size=2 borderless=true {
            plugin location="zellij:status-bar";
        }
    }
}
"""


@pytest.mark.parametrize("version", ["0.40.1", "0.41.2", "0.43.1", "0.44.3", "0.45.0"])
def test_dump_layout_is_shaped_like_zellijs(fake, version):
    """§2.13: a global `cwd`, the active tab `focus=true`, the focused pane `focus=true`, new
    panes inside the tiled area (never after the status bar), command panes suspended."""
    work = fake.root / "work"
    (work / "sub").mkdir(parents=True)
    layout = DEFAULT_BARS.replace('pane name="main"', f'pane name="main" cwd="{work}"')
    make(fake, version, layout=layout, attach=True)
    r = fake.run("-s", "s", "run", "--name", "new", "--cwd", str(work / "sub"), "--",
                 "/bin/sleep", "60", version=version)
    assert r.rc == 0
    dump = fake.run("-s", "s", "action", "dump-layout", version=version)
    assert dump.rc == 0 and dump.err == ""
    lines = [ln.strip() for ln in dump.out.splitlines()]
    assert lines[0] == "layout {"
    assert lines[1] == f'cwd "{work}"', dump.out
    assert lines[2] == 'tab name="bars" focus=true {'
    order = [ln for ln in lines if ln.startswith("pane") or ln.startswith("plugin")]
    assert order[0:2] == ["pane size=1 borderless=true {",
                          'plugin location="zellij:tab-bar"']
    assert order[-2:] == ["pane size=2 borderless=true {",
                          'plugin location="zellij:status-bar"']
    main = next(ln for ln in lines if ln.startswith('pane name="main"'))
    new = next(ln for ln in lines if ln.startswith('pane name="new"'))
    assert 'cwd="sub"' in new and "cwd=" not in main
    assert "focus=true" in new and "focus=true" not in main  # run gave the new pane focus
    assert lines.count("start_suspended true") == 2
    # the dump is a layout again (resurrection uses the same serializer)
    again = fake.root / "again.kdl"
    again.write_text(dump.out)
    r = fake.run("--layout", str(again), "attach", "--create-background", "t", version=version)
    assert r.rc == 0, r
    panes = fake.panes("t", version)
    assert [p["name"] for p in panes if p["kind"] == "terminal"] == ["main", "new"]
    assert next(p for p in panes if p["name"] == "new")["cwd"] == str(work / "sub")


def test_dump_layout_of_a_swarm_after_backfill(fake):
    make(fake, "0.45.0")
    run(fake, "0.45.0", *backend_flags("0.45.0"))
    dump = fake.run("-s", "s", "action", "dump-layout", version="0.45.0").out
    body = [ln.strip() for ln in dump.splitlines()]
    assert body[2:5] == ['tab name="swarm" focus=true {', 'pane split_direction="vertical" {',
                         'pane stacked=true size="40%" {'], dump
    assert body[5].startswith('pane name="board" command="/bin/sleep" focus=true expanded=true')
    # the dump is a layout again: same stacks, same geometry, same focus
    again = fake.root / "again.kdl"
    again.write_text(dump)
    fake.create("t", "--layout", str(again), version="0.45.0")
    geom = {n: p["geometry"] for n, p in named(fake, "0.45.0").items()}
    assert {n: p["geometry"] for n, p in named(fake, "0.45.0", "t").items()} == geom
    assert tab(fake, "0.45.0", "t")["focused_pane"] == named(fake, "0.45.0", "t")["board"][
        "pane_id"]


@pytest.mark.parametrize("version", ["0.43.1", "0.45.0"])
def test_resurrection_keeps_the_tree(fake, version):
    make(fake, version)
    run(fake, version, *backend_flags(version))
    geom = {n: p["geometry"] for n, p in named(fake, version).items()}
    r = fake.run("kill-session", "s", version=version)
    assert r.rc == 0
    fake.wait_for(lambda: "EXITED" in fake.run("ls", "-n", version=version).out, what="EXITED")
    fake.create("s", version=version)
    fake.wait_for(lambda: len(named(fake, version)) == 4, what="resurrected panes")
    assert {n: p["geometry"] for n, p in named(fake, version).items()} == geom


@pytest.mark.parametrize("version", ["0.44.3", "0.45.0"])
def test_stack_panes_action_stacks_onto_the_first(fake, version):
    make(fake, version)
    panes = named(fake, version)
    r = fake.run("-s", "s", "action", "stack-panes", "--", panes["w2"]["pane_id"],
                 panes["board"]["pane_id"], version=version)
    assert r.rc == 0
    panes = named(fake, version)
    # the board left its column (the stack now spans the tab) and sits in w2's stack
    assert panes["board"]["stacked"] and panes["board"]["geometry"]["cols"] == 50
    assert panes["board"]["geometry"]["x"] == panes["w1"]["geometry"]["x"] == 0


@pytest.mark.parametrize("version", ["0.44.3", "0.45.0"])
def test_closing_the_pane_stacked_on_the_board_gives_its_column_back(fake, version):
    make(fake, version)
    w3 = run(fake, version, *backend_flags(version)).out.strip()
    assert named(fake, version)["board"]["stacked"]
    r = fake.run("-s", "s", "action", "close-pane", "--pane-id", w3, version=version)
    assert (r.rc, r.out, r.err) == (0, "", "")
    board = named(fake, version)["board"]
    assert not board["stacked"]
    assert board["geometry"] == {"x": 0, "y": 0, "rows": 50, "cols": 20}
    assert tab(fake, version)["focused_pane"] == board["pane_id"]


def test_stacked_run_in_a_detached_session_before_0_44_places_nothing(fake):
    make(fake, "0.43.1", attach=False)
    r = run(fake, "0.43.1", "--stacked")
    assert r.out == ""
    session = fake.session("s", "0.43.1")
    assert [p["name"] for p in session["orphan_panes"]] == ["w3"]
    assert not named(fake, "0.43.1")["board"]["stacked"]


@pytest.mark.parametrize("version", ["0.44.3", "0.45.0"])
def test_tab_id_wins_over_the_callers_pane(fake, version):
    """route.rs checks `--tab-id` first: with it, `$ZELLIJ_PANE_ID` does not pick the anchor."""
    make(fake, version)
    w1 = named(fake, version)["w1"]
    near = "--no-focus" if version >= "0.45" else "--near-current-pane"
    run(fake, version, "--stacked", "--tab-id", "0", near, env_pane=str(w1["id"]))
    assert named(fake, version)["board"]["stacked"]
