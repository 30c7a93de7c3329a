"""Layouts (§4): KDL v1 via ckdl, the §4.3 rules, new-tab output."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.timeout(60)

GRID = """layout {
    cwd "/tmp"
    pane_template name="worker" {
        command "/bin/sh"
        close_on_exit false
    }
    default_tab_template {
        pane size=1 borderless=true {
            plugin location="zellij:tab-bar";
        }
        children
        pane size=1 borderless=true {
            plugin location="zellij:status-bar";
        }
    }
    tab name="pool" focus=true {
        pane split_direction="vertical" {
            pane name="main" size="40%" focus=true command="/bin/sleep" {
                args "30";
            }
            pane stacked=true {
                worker name="w1" {
                    args "-c" "echo w1; exit 3";
                }
                worker name="w2" start_suspended=true {
                    args "-c" "echo w2";
                }
                pane name="w3" command="/bin/sh" close_on_exit=true expanded=true {
                    args "-c" "exit 0";
                }
            }
        }
        floating_panes {
            pane name="float" command="/bin/sleep" x=1 y=2 width=20 height=10 {
                args "30";
            }
        }
    }
    tab name="second" {
        pane;
    }
}
"""


def write(fake, text, name="l.kdl"):
    p = fake.root / name
    p.write_text(text)
    return str(p)


def test_layout_session(fake, version):
    path = write(fake, GRID)
    fake.create("g", "--layout", path, version=version)

    def settled():
        st = fake.session("g", version)
        names = {p["name"]: p for t in st["tabs"] for p in t["panes"]}
        if names.get("w1", {}).get("exited") and "w3" not in names:
            return st
    st = fake.wait_for(settled, what="layout panes to settle")
    tabs = st["tabs"]
    assert [t["name"] for t in tabs] == ["pool", "second"]
    panes = {p["name"] or p["pane_id"]: p for p in tabs[0]["panes"]}
    assert panes["w1"]["exit_status"] == 3 and panes["w1"]["held"]
    assert panes["w2"]["state"] == "suspended"
    assert panes["w1"]["stacked"] and panes["w2"]["stacked"]
    assert panes["float"]["floating"]
    assert panes["main"]["cwd"] == "/tmp"
    plugins = [p for p in tabs[0]["panes"] if p["kind"] == "plugin"]
    assert [p["plugin_url"] for p in plugins] == ["zellij:tab-bar", "zellij:status-bar"]
    assert not any(p["selectable"] for p in plugins)
    if version >= "0.44":
        r = fake.run("-s", "g", "action", "list-panes", "--json", version=version)
        assert "zellij:tab-bar" not in r.out
        r = fake.run("-s", "g", "action", "list-panes", "--json", "--all", version=version)
        assert "zellij:tab-bar" in r.out


def test_new_tab_prints_ids(fake, version):
    fake.create("t", version=version)
    path = write(fake, 'layout {\n    tab name="a" {\n        pane;\n    }\n'
                       '    tab name="b" {\n        pane;\n    }\n}\n')
    r = fake.run("-s", "t", "action", "new-tab", "--layout", path, version=version)
    assert r.rc == 0 and r.err == ""
    assert r.out == ("1\n2\n" if version >= "0.44" else "")
    r = fake.run("-s", "t", "action", "new-tab", "--name", "named", version=version)
    assert r.out == ("3\n" if version >= "0.44" else "")
    r = fake.run("-s", "t", "action", "query-tab-names", version=version)
    assert r.out == "Tab #1\na\nb\nnamed\n"
    if version >= "0.44":
        r = fake.run("-s", "t", "action", "list-tabs", version=version)
        assert r.out == "TAB_ID  POSITION  NAME\n0  0  Tab #1\n1  1  a\n2  2  b\n3  3  named\n"
        r = fake.run("-s", "t", "action", "current-tab-info", version=version)
        assert (r.rc, r.err) == (2, "No active tab found for current client\n")
    r = fake.run("-s", "t", "action", "new-tab", "--layout", "/nonexistent.kdl",
                 version=version)
    assert r.rc == 2 and r.err.startswith("Failed to load layout:")


def test_close_tab_last_tab_ends_session(fake):
    fake.create("c")
    fake.run("__fake-attach", "c")
    r = fake.run("-s", "c", "action", "close-tab")
    assert (r.rc, r.out, r.err) == (0, "", "")
    fake.wait_for(lambda: "EXITED" in fake.run("ls", "-n").out)


def test_close_tab_and_rename_tab_with_no_client(fake, version):
    """With no client attached, 0.45.0 closes no tab (exit 0: its session lives on) and plain
    ``rename-tab`` refuses (verified on the real binary); 0.44 acts on the first tab (as read
    from its source); 0.43 does nothing."""
    fake.create("d", version=version)
    fake.run("-s", "d", "action", "new-tab", version=version)
    r = fake.run("-s", "d", "action", "rename-tab", "R", version=version)
    if version >= "0.45":
        assert (r.rc, r.err) == (2, "Cannot rename the focused tab: no client is attached to this session. Target a "
                                    "tab explicitly with --tab-id.\n")
    else:
        assert (r.rc, r.err) == (0, "")
    r = fake.run("-s", "d", "action", "close-tab", version=version)
    assert (r.rc, r.out, r.err) == (0, "", "")
    names = fake.run("-s", "d", "action", "query-tab-names", version=version).out.split("\n")
    assert names == (["Tab #2", ""] if "0.44" <= version < "0.45" else ["Tab #1", "Tab #2", ""]), names


BAD = [
    ('layout {\n    pane split_direction=vertical;\n}\n', "Failed to parse KDL"),
    ('layout {\n    pane focus=#true;\n}\n', "Failed to parse KDL"),
    ('layout {\n    pane bogus="x";\n}\n', "Unknown pane property"),
    ('layout {\n    pane {\n        args "a";\n    }\n}\n', "args can only be specified"),
    ('layout {\n    pane close_on_exit=true;\n}\n', "close_on_exit can only be specified"),
    ('layout {\n    pane command="/bin/true" {\n        pane;\n    }\n}\n',
     "Cannot have both properties"),
    ('layout {\n    pane stacked=true split_direction="vertical" {\n        pane;\n    }\n}\n',
     "Stacked panes cannot be vertical"),
    ('layout {\n    pane stacked=true {\n        pane {\n            pane;\n        }\n'
     '    }\n}\n', "Stacked panes cannot have children"),
    ('layout {\n    pane size="150%";\n}\n', "size should be"),
    ('layout {\n    pane size=0;\n}\n', "size should be"),
    ('layout {\n    tab {\n        pane;\n    }\n    pane;\n}\n',
     "Cannot have both tabs and panes"),
    ('layout {\n    tab focus=true;\n    tab focus=true;\n}\n', "Only one tab can be focused"),
    ('layout {\n    pane command="/bin/true" {\n        args;\n    }\n}\n', "args"),
    ('pane;\nlayout {\n    pane;\n}\n', 'This node should be inside the main "layout" node'),
    ('layout {\n    pane command="$UNDEFINED_VAR_XYZ";\n}\n', "UNDEFINED_VAR_XYZ"),
]


@pytest.mark.parametrize("text,msg", BAD)
def test_layout_errors(fake, text, msg):
    path = write(fake, text)
    r = fake.run("--layout", path, "attach", "--create-background", "bad")
    assert r.rc == 1 and r.out == "", r
    assert msg in r.err, r.err
    assert fake.run("ls").rc == 1  # nothing was created


def test_layout_errors_new_tab_exit_2_and_layout_string(fake):
    fake.create("n")
    path = write(fake, BAD[2][0])
    r = fake.run("-s", "n", "action", "new-tab", "--layout", path)
    assert r.rc == 2 and "Unknown pane property" in r.err
    r = fake.run("-s", "n", "action", "new-tab", "--layout-string",
                 'layout {\n    tab name="ls" {\n        pane;\n    }\n}\n')
    assert (r.rc, r.out) == (0, "1\n")


def test_layout_vars_and_relative_cwd(fake):
    (fake.root / "rel").mkdir()
    path = write(fake, 'layout {\n    tab {\n        pane name="p" cwd="rel" command="$MYCMD" {\n'
                       '            args "$NOT_EXPANDED";\n        }\n    }\n}\n')
    fake.create("v", "--new-session-with-layout", path, MYCMD="/bin/echo")
    p = fake.wait_for(lambda: next((p for p in fake.panes("v") if p["name"] == "p"), None))
    assert p["command"] == ["/bin/echo", "$NOT_EXPANDED"]
    assert p["cwd"] == str(fake.root / "rel")


def test_startup_popup_without_tab_nodes(fake):
    path = write(fake, 'layout {\n    pane;\n}\n')
    fake.create("p", "--layout", path)
    urls = [p["plugin_url"] for p in fake.panes("p")]
    assert urls == [None, "zellij:about"]
