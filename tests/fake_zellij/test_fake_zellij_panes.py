"""Pane lifecycle (contract §3) and the pane actions of §2.7–§2.15."""
from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.timeout(60)

PANE_KEYS = [
    "id", "is_plugin", "is_focused", "is_fullscreen", "is_floating", "is_suppressed", "title",
    "exited", "exit_status", "is_held", "pane_x", "pane_content_x", "pane_y", "pane_content_y",
    "pane_rows", "pane_content_rows", "pane_columns", "pane_content_columns",
    "cursor_coordinates_in_pane", "terminal_command", "plugin_url", "is_selectable",
    "index_in_pane_group", "default_fg", "default_bg", "tab_id", "tab_position", "tab_name",
]
LAYOUT = """layout {
    tab name="main" {
        pane name="idle" command="/bin/sleep" {
            args "60";
        }
    }
}
"""


def make(fake, name="s", version=None, layout=LAYOUT, **kw):
    path = fake.root / f"{name}.kdl"
    path.write_text(layout)
    fake.create(name, "--layout", str(path), version=version, **kw)
    fake.wait_for(lambda: any(p["pid"] for p in fake.panes(name, version)),
                  what="layout pane to start")
    return name


def list_panes(fake, s, version=None):
    r = fake.run("-s", s, "action", "list-panes", "--json", version=version)
    assert r.rc == 0, r
    return json.loads(r.out)


def by_label(panes, label):
    kind, num = label.split("_")
    return next((p for p in panes if p["id"] == int(num) and p["is_plugin"] == (kind == "plugin")),
                None)


def test_run_prints_pane_id_per_version(fake, version):
    make(fake, version=version)
    r = fake.run("-s", "s", "run", "--name", "w", "--", "/bin/sleep", "30", version=version)
    if version >= "0.44":
        assert (r.rc, r.out, r.err) == (0, "terminal_1\n", "")
        names = [p["name"] for p in fake.panes("s", version)]
        assert names == ["idle", "w"]
    else:
        # no attached client: exit 0, nothing printed, no pane placed (§2.7)
        assert (r.rc, r.out, r.err) == (0, "", "")
        assert [p["name"] for p in fake.panes("s", version)] == ["idle"]
        r = fake.run("__fake-attach", "s", version=version)
        assert r.rc == 0 and r.out.strip().isdigit()
        r = fake.run("-s", "s", "run", "--name", "w", "--", "/bin/sleep", "30", version=version)
        assert (r.rc, r.out, r.err) == (0, "", "")
        assert [p["name"] for p in fake.panes("s", version)] == ["idle", "w"]
    r = fake.run("-s", "s", "action", "new-pane", "--name", "np", "--", "/bin/sleep", "30",
                 version=version)
    assert r.rc == 0 and r.err == ""
    assert r.out == ("terminal_2\n" if version >= "0.44" else "")


def test_pane_environment_is_the_servers(fake):
    out = fake.root / "env.json"
    make(fake, FOO="from-server", BAR="server-only")
    r = fake.run("-s", "s", "run", "--name", "envdump", "--", sys_python(), "-c",
                 f"import os,json; open({str(out)!r},'w').write(json.dumps(dict(os.environ)))",
                 FOO="from-caller", BAZ="caller-only", ZELLIJ_PANE_ID="77")
    assert r.out == "terminal_1\n"
    env = json.loads(fake.wait_file(out))
    assert env["ZELLIJ"] == "0"
    assert env["ZELLIJ_SESSION_NAME"] == "s"
    assert env["ZELLIJ_PANE_ID"] == "1"
    assert env["FOO"] == "from-server" and env["BAR"] == "server-only"
    assert "BAZ" not in env


def sys_python():
    import sys
    return sys.executable


def test_held_exit_status_signal_and_close_on_exit(fake):
    make(fake)
    assert fake.run("-s", "s", "run", "--", "/bin/sh", "-c", "echo bye; exit 3").out \
        == "terminal_1\n"
    assert fake.run("-s", "s", "run", "--", "/bin/sh", "-c", "kill -TERM $$").out \
        == "terminal_2\n"
    assert fake.run("-s", "s", "run", "--close-on-exit", "--", "/bin/sh", "-c", "exit 0").out \
        == "terminal_3\n"

    def settled():
        panes = list_panes(fake, "s")
        p1, p2 = by_label(panes, "terminal_1"), by_label(panes, "terminal_2")
        if p1 and p1["exited"] and p2 and p2["exited"] and not by_label(panes, "terminal_3"):
            return panes
    panes = fake.wait_for(settled, what="panes to settle")
    p1, p2 = by_label(panes, "terminal_1"), by_label(panes, "terminal_2")
    assert (p1["exited"], p1["exit_status"], p1["is_held"]) == (True, 3, True)
    assert p1["title"] == "/bin/sh -c echo bye; exit 3"
    assert p1["terminal_command"] == "/bin/sh -c echo bye; exit 3"
    assert (p2["exited"], p2["exit_status"], p2["is_held"]) == (True, None, True)
    r = fake.run("-s", "s", "action", "dump-screen", "--pane-id", "terminal_1")
    assert r.out.startswith("bye\n")
    # re-run a held pane: same id, new process
    fake.run("-s", "s", "action", "write-chars", "--pane-id", "terminal_1", "\n")
    fake.wait_for(lambda: fake.run("-s", "s", "action", "dump-screen", "--pane-id",
                                   "1").out.count("bye") == 2, what="re-run output")


def test_list_panes_json_shape(fake):
    make(fake)
    fake.run("-s", "s", "run", "--name", "w", "--", "/bin/sleep", "30")
    r = fake.run("-s", "s", "action", "list-panes", "--json")
    assert r.rc == 0 and r.err == ""
    assert r.out.startswith("[\n  {\n    \"id\": 0,\n    \"is_plugin\": false,\n")
    assert r.out.endswith("\n  }\n]\n")
    panes = json.loads(r.out)
    for p in panes:
        keys = list(p)
        assert keys[:len(PANE_KEYS)] == PANE_KEYS
        assert keys[len(PANE_KEYS):] in ([], ["pane_command", "pane_cwd"], ["pane_command"])
    w = by_label(panes, "terminal_1")
    assert w["title"] == "w" and w["terminal_command"] == "/bin/sleep 30"
    assert w["tab_id"] == 0 and w["tab_position"] == 0 and w["tab_name"] == "main"
    assert w["pane_command"] == "/bin/sleep 30"
    assert w["index_in_pane_group"] == {}
    # table form: columns joined by two spaces
    r = fake.run("-s", "s", "action", "list-panes")
    assert r.out == "PANE_ID  TYPE  TITLE\nterminal_0  terminal  idle\nterminal_1  terminal  w\n"


def test_empty_list_panes_is_empty_array(fake):
    make(fake)
    fake.run("-s", "s", "action", "close-pane", "--pane-id", "terminal_0")
    r = fake.run("-s", "s", "action", "list-panes", "--json")
    assert (r.rc, r.out) == (0, "[]\n")


def test_close_pane_sends_sighup_only(fake):
    make(fake)
    marker = fake.root / "sig"
    ready = fake.root / "ready"
    script = (
        "import signal,sys,time\n"
        f"def h(n,f):\n open({str(marker)!r},'w').write(signal.Signals(n).name); sys.exit(0)\n"
        "for s in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT): signal.signal(s, h)\n"
        f"open({str(ready)!r},'w').write('1')\n"
        "while True: time.sleep(0.05)\n")
    r = fake.run("-s", "s", "run", "--name", "trap", "--", sys_python(), "-c", script)
    label = r.out.strip()
    fake.wait_file(ready)
    pid = fake.pane("s", label)["pid"]
    r = fake.run("-s", "s", "action", "close-pane", "--pane-id", label)
    assert (r.rc, r.out, r.err) == (0, "", "")
    assert fake.pane("s", label) is None  # gone at once
    assert fake.wait_file(marker) == "SIGHUP"
    import psutil
    fake.wait_for(lambda: not psutil.pid_exists(pid) or
                  psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, what="worker exit")
    # an unknown id: close-pane succeeds silently, rename-pane says so (tests/zellij-transcripts/0.45.0)
    r = fake.run("-s", "s", "action", "close-pane", "--pane-id", "terminal_99")
    assert (r.rc, r.out, r.err) == (0, "", "")
    r = fake.run("-s", "s", "action", "rename-pane", "--pane-id", "99", "x")
    assert (r.rc, r.out, r.err) == (2, "", "Pane with id Terminal(99) not found\n")


def test_command_not_found(fake):
    make(fake)
    r = fake.run("-s", "s", "run", "--", "no-such-command-xyz", "a")
    assert (r.rc, r.out, r.err) == (0, "terminal_1\n", "")
    p = by_label(list_panes(fake, "s"), "terminal_1")
    assert (p["exited"], p["exit_status"], p["is_held"]) == (True, 2, True)
    r = fake.run("-s", "s", "action", "dump-screen", "--pane-id", "terminal_1")
    assert r.out == ("Command not found: no-such-command-xyz\nIf you were including arguments as "
                     "part of the command, try including them as 'args' instead.\n\n")
    r = fake.run("-s", "s", "run", "--close-on-exit", "--", "no-such-command-xyz")
    assert r.out == "terminal_2\n"
    assert by_label(list_panes(fake, "s"), "terminal_2") is None


def test_command_lookup_uses_server_path_and_cwd(fake, tmp_path):
    bindir = fake.root / "srvbin"
    bindir.mkdir()
    tool = bindir / "srvtool"
    tool.write_text("#!/bin/sh\npwd > \"$OUT\"\n")
    tool.chmod(0o755)
    make(fake, PATH=f"{bindir}:{fake.env['PATH']}", OUT=str(fake.root / "pwd.txt"))
    sub = fake.root / "work"
    sub.mkdir()
    r = fake.run("-s", "s", "run", "--cwd", "work", "--", "srvtool")
    assert r.out == "terminal_1\n"
    assert fake.wait_file(fake.root / "pwd.txt").strip() == str(sub)
    # the caller's PATH is irrelevant: a tool only on the caller's PATH is not found
    other = fake.root / "callerbin"
    other.mkdir()
    (other / "callertool").write_text("#!/bin/sh\nexit 0\n")
    (other / "callertool").chmod(0o755)
    env = fake.environ()
    env["PATH"] = f"{other}:{env['PATH']}"
    r = fake.run("-s", "s", "run", "--", "callertool", env=env)
    p = fake.wait_for(lambda: (lambda q: q if q and q["exited"] else None)(
        fake.pane("s", r.out.strip())))
    assert p["exit_status"] == 2


def test_rename_write_and_dump(fake):
    make(fake)
    label = fake.run("-s", "s", "run", "--name", "cat", "--", "/bin/cat").out.strip()
    fake.wait_for(lambda: fake.pane("s", label)["pid"])
    r = fake.run("-s", "s", "action", "rename-pane", "--pane-id", label, "renamed pane")
    assert (r.rc, r.out, r.err) == (0, "", "")
    assert by_label(list_panes(fake, "s"), label)["title"] == "renamed pane"
    r = fake.run("-s", "s", "action", "write-chars", "--pane-id", label, "--", "-hello-\n")
    assert (r.rc, r.out, r.err) == (0, "", "")
    fake.wait_for(lambda: fake.run("-s", "s", "action", "dump-screen", "--pane-id", label)
                  .out.count("-hello-") == 2, what="echo + cat output")
    out = fake.root / "dump.txt"
    r = fake.run("-s", "s", "action", "dump-screen", "--pane-id", label, "--path", str(out),
                 "--full")
    assert (r.rc, r.out) == (0, "")
    assert out.read_text().startswith("-hello-\n-hello-")
    # detached session, no --pane-id: one empty line
    r = fake.run("-s", "s", "action", "dump-screen")
    assert (r.rc, r.out) == (0, "\n")
    r = fake.run("-s", "s", "action", "dump-screen", "--pane-id", "terminal_42")
    assert (r.rc, r.out) == (0, "\n")
    # write: decimal bytes; Ctrl-C (3) stops cat
    fake.run("-s", "s", "action", "write", "--pane-id", label, "3")
    fake.wait_for(lambda: fake.pane("s", label)["exited"], what="cat to exit")
    assert fake.pane("s", label)["exit_status"] is None  # killed by SIGINT


def test_dump_screen_old_generation(fake):
    v = "0.43.1"
    make(fake, version=v)
    out = fake.root / "old.txt"
    r = fake.run("-s", "s", "action", "dump-screen", version=v)
    assert r.rc == 2 and r.err.startswith("error:")
    r = fake.run("-s", "s", "action", "dump-screen", str(out), version=v)
    assert (r.rc, r.out, r.err) == (0, "", "") and not out.exists()  # no client: no-op
    fake.run("__fake-attach", "s", version=v)
    r = fake.run("-s", "s", "action", "dump-screen", str(out), "--full", version=v)
    assert r.rc == 0 and out.exists()


def test_malformed_pane_id(fake):
    make(fake)
    r = fake.run("-s", "s", "action", "close-pane", "--pane-id", "pane_3")
    assert r.rc == 2 and r.out == ""
    assert r.err == ("Malformed pane id: pane_3, expecting either a bare integer (eg. 1), a "
                     "terminal pane id (eg. terminal_1) or a plugin pane id (eg. plugin_1)\n")


def test_blocking_run(fake):
    make(fake)
    r = fake.run("-s", "s", "run", "--blocking", "--close-on-exit", "--", "/bin/sh", "-c",
                 "exit 42")
    assert (r.rc, r.out, r.err) == (42, "", "")
    r = fake.run("-s", "s", "run", "--block-until-exit", "--", "/bin/sh", "-c", "exit 7")
    assert (r.rc, r.out) == (7, "")
    r = fake.run("-s", "s", "run", "--block-until-exit-success", "--", "/bin/true")
    assert (r.rc, r.out) == (0, "")


@pytest.mark.parametrize("version", ["0.43.1", "0.44.3"])
def test_pane_id_allocation(fake, version):
    make(fake, version=version)
    fake.run("__fake-attach", "s", version=version)
    for _ in range(2):
        fake.run("-s", "s", "run", "--", "/bin/sleep", "30", version=version)
    labels = [p["pane_id"] for p in fake.panes("s", version)]
    assert labels == ["terminal_0", "terminal_1", "terminal_2"]
    # close the highest one (focused: the last created) and add another
    fake.run("-s", "s", "action", "close-pane", version=version)
    fake.run("-s", "s", "run", "--", "/bin/sleep", "30", version=version)
    labels = [p["pane_id"] for p in fake.panes("s", version)]
    expected = "terminal_2" if version < "0.44" else "terminal_3"
    assert labels == ["terminal_0", "terminal_1", expected]


def test_last_pane_detached_ge_044_keeps_session(fake):
    make(fake, version="0.44.3")
    fake.run("-s", "s", "action", "close-pane", "--pane-id", "0", version="0.44.3")
    st = fake.session("s", version="0.44.3")
    assert [t["panes"] for t in st["tabs"]] == [[]]
    assert fake.run("ls", "-n", version="0.44.3").out.endswith("ago] \n")
    # a client attaching renders -> the empty tab is closed -> the session ends
    fake.run("__fake-attach", "s", version="0.44.3")
    fake.wait_for(lambda: "EXITED" in fake.run("ls", "-n", version="0.44.3").out)


def test_last_pane_lt_044_ends_session(fake):
    v = "0.41.2"
    # not ``make``: its wait for the pane to run can miss a pane that ends 0.2 s later on a busy machine
    path = fake.root / "s.kdl"
    path.write_text(LAYOUT.replace('"60"', '"0.2"').replace('command=', 'close_on_exit=true command='))
    fake.create("s", "--layout", str(path), version=v)
    fake.wait_for(lambda: "EXITED" in fake.run("ls", "-n", version=v).out, what="session end")
    assert fake.run("-s", "s", "action", "list-clients", version=v).err == \
        "There is no active session!\n"


def test_close_on_exit_last_pane_with_client_ends_session_ge_044(fake):
    make(fake)
    fake.run("__fake-attach", "s")
    fake.run("-s", "s", "run", "--close-on-exit", "--", "/bin/true")
    fake.run("-s", "s", "action", "close-pane", "--pane-id", "0")
    fake.wait_for(lambda: "EXITED" in fake.run("ls", "-n").out, what="session end")


def test_list_clients(fake):
    make(fake)
    r = fake.run("-s", "s", "action", "list-clients")
    assert (r.rc, r.out) == (0, "CLIENT_ID ZELLIJ_PANE_ID RUNNING_COMMAND\n")
    fake.run("__fake-attach", "s")
    r = fake.run("-s", "s", "action", "list-clients")
    assert r.out == ("CLIENT_ID ZELLIJ_PANE_ID RUNNING_COMMAND\n"
                     "1         terminal_0     /bin/sleep 60  \n")
    r = fake.run("__fake-detach", "s")
    assert r.rc == 0
    assert fake.session("s")["clients"] == []


def test_suspended_pane_and_focus_actions(fake):
    make(fake)
    label = fake.run("-s", "s", "run", "--start-suspended", "--name", "later", "--",
                     "/bin/sh", "-c", "echo ran").out.strip()
    p = by_label(list_panes(fake, "s"), label)
    assert (p["is_held"], p["exited"], p["exit_status"]) == (True, False, None)
    r = fake.run("-s", "s", "action", "dump-screen", "--pane-id", label)
    assert r.out == ("Waiting to run: /bin/sh -c echo ran\n"
                     "<ENTER> run, <ESC> drop to shell, <Ctrl-c> exit\n\n")
    fake.run("-s", "s", "action", "write-chars", "--pane-id", label, " ")
    fake.wait_for(lambda: (fake.pane("s", label) or {}).get("exited"), what="run")
    assert fake.pane("s", label)["exit_status"] == 0
    # Ctrl-C on a held pane closes it
    fake.run("-s", "s", "action", "write", "--pane-id", label, "3")
    assert fake.pane("s", label) is None
    # focus-based actions in a detached session: silent no-ops
    for args in (["close-pane"], ["rename-pane", "x"], ["focus-next-pane"],
                 ["write-chars", "x"]):
        r = fake.run("-s", "s", "action", *args)
        assert (r.rc, r.out, r.err) == (0, "", "")
    assert [p["name"] for p in fake.panes("s")] == ["idle"]


def test_stacked_and_floating_flags(fake):
    make(fake)
    a = fake.run("-s", "s", "run", "--stacked", "--", "/bin/sleep", "30").out.strip()
    b = fake.run("-s", "s", "run", "--floating", "--width", "20", "--height", "10", "--",
                 "/bin/sleep", "30").out.strip()
    panes = list_panes(fake, "s")
    assert by_label(panes, b)["is_floating"] is True
    assert by_label(panes, b)["pane_columns"] == 20
    assert fake.pane("s", a)["stacked"] is True
    r = fake.run("-s", "s", "run", "--direction", "right", "--floating", "--", "true")
    assert r.rc == 2 and r.err.startswith("error:")
    r = fake.run("-s", "s", "run", "/bin/true")
    assert r.rc == 2 and r.err.startswith("error:")  # the `--` is mandatory
    r = fake.run("-s", "s", "action", "new-pane", "--close-on-exit")
    assert r.rc == 2 and r.err.startswith("error:")  # needs a command
