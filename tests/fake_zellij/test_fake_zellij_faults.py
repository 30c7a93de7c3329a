"""FAKE_ZELLIJ_FAULTS, the invocation log, and process hygiene."""
from __future__ import annotations

import json
import subprocess
import time

import pytest

pytestmark = pytest.mark.timeout(60)

LAYOUT = 'layout {\n    tab {\n        pane command="/bin/sleep" {\n            args "60";\n' \
         '        }\n    }\n}\n'


def make(fake, name="f", **kw):
    p = fake.root / "f.kdl"
    p.write_text(LAYOUT)
    fake.create(name, "--layout", str(p), **kw)


def test_silent_new_pane(fake):
    make(fake)
    r = fake.run("-s", "f", "run", "--name", "quiet", "--", "/bin/sleep", "30",
                 faults="silent_new_pane")
    assert (r.rc, r.out, r.err) == (0, "", "")
    assert [p["name"] for p in fake.panes("f")] == [None, "quiet"]
    r = fake.run("-s", "f", "action", "new-pane", "--", "/bin/sleep", "30",
                 faults="silent_new_pane")
    assert (r.rc, r.out) == (0, "")
    assert len(fake.panes("f")) == 3


# The window in which a new session drops (≥0.44) or holds (<0.44) actions: long enough that a
# loaded machine's calls come within it (600 ms was not: CI's fake tier at a load of 15 queried
# a session already built, and 0.43.1 answered its tab).
INIT_DELAY_MS = 4000


def test_init_delay_drops_actions(fake):
    make(fake, faults=f"init_delay_ms={INIT_DELAY_MS}")
    r = fake.run("-s", "f", "run", "--", "/bin/sleep", "30")
    assert (r.rc, r.out, r.err) == (0, "", "")  # dropped: no id, no pane
    r = fake.run("-s", "f", "action", "list-panes", "--json")
    # the layout's panes are not built yet (tests/zellij-transcripts/0.45.0/attach-create-background-layout)
    assert (r.rc, r.out, r.err) == (0, "[]\n", "")
    assert fake.session("f")["initialising"] is True
    assert "f [Created" in fake.run("ls", "-n").out  # live while initialising
    fake.wait_for(lambda: not fake.session("f")["initialising"], timeout=INIT_DELAY_MS / 1000 + 10)
    panes = fake.wait_for(lambda: fake.panes("f"), what="layout panes after init")
    assert len(panes) == 1
    assert fake.run("-s", "f", "run", "--", "/bin/sleep", "30").out == "terminal_1\n"


def test_init_delay_old_version_waits(fake):
    v = "0.43.1"
    make(fake, version=v, faults=f"init_delay_ms={INIT_DELAY_MS}")
    t0 = time.monotonic()
    r = fake.run("-s", "f", "action", "query-tab-names", version=v)
    assert (r.rc, r.out) == (0, "")
    assert time.monotonic() - t0 >= 0.3


def test_action_delay(fake):
    make(fake)
    t0 = time.monotonic()
    r = fake.run("-s", "f", "run", "--", "/bin/sleep", "30", faults="action_delay_ms=300")
    assert r.out == "terminal_1\n" and time.monotonic() - t0 >= 0.3
    # over the 1 s completion timeout (≥0.44): the pane is created, nothing is printed
    r = fake.run("-s", "f", "run", "--name", "late", "--", "/bin/sleep", "30",
                 faults="action_delay_ms=1100")
    assert (r.rc, r.out, r.err) == (0, "", "")
    assert "late" in [p["name"] for p in fake.panes("f")]
    r = fake.run("-s", "f", "action", "list-panes", "--json", faults="action_delay_ms=1100")
    assert (r.rc, r.err) == (2, "Timeout listing panes\n")


def test_fail_fault(fake):
    make(fake)
    faults = "fail:run:3:boom happened;fail:list-panes:2:nope,fail:attach:1:no attach"
    r = fake.run("-s", "f", "run", "--", "/bin/true", faults=faults)
    assert (r.rc, r.out, r.err) == (3, "", "boom happened\n")
    r = fake.run("-s", "f", "action", "list-panes", faults=faults)
    assert (r.rc, r.out, r.err) == (2, "", "nope\n")
    r = fake.run("attach", "-b", "other", faults=faults)
    assert (r.rc, r.err) == (1, "no attach\n")
    assert len(fake.panes("f")) == 1
    r = fake.run("-s", "f", "action", "list-clients", faults=faults)
    assert r.rc == 0


def test_hang_fault(fake):
    make(fake)
    with pytest.raises(subprocess.TimeoutExpired):
        fake.run("-s", "f", "action", "list-panes", faults="hang:list-panes", timeout=1.5)
    with pytest.raises(subprocess.TimeoutExpired):
        fake.run("ls", faults="hang:list-sessions", timeout=1.5)
    hung = [e for e in fake.log_entries() if e.get("hung")]
    assert [e["subcommand"] for e in hung] == ["list-panes", "list-sessions"]
    assert all(e["exit"] is None for e in hung)


def test_invocation_log(fake):
    make(fake)
    fake.run("--session", "f", "run", "--name", "n", "--", "/bin/echo", "a b",
             ZELLIJ_PANE_ID="5", FAKE_ZELLIJ_VERSION="0.44.3")
    entries = fake.log_entries()
    e = entries[-1]
    assert e["argv"] == ["--session", "f", "run", "--name", "n", "--", "/bin/echo", "a b"]
    assert e["subcommand"] == "run"
    assert e["cwd"] == str(fake.root)
    assert e["env"]["ZELLIJ_PANE_ID"] == "5"
    assert "ZELLIJ_SESSION_NAME" not in e["env"]
    assert e["env"]["FAKE_ZELLIJ_VERSION"] == "0.44.3"
    assert e["stdout"] == "terminal_1\n" and e["stderr"] == "" and e["exit"] == 0
    assert e["start"] <= e["end"]
    assert entries[0]["argv"][-3:] == ["attach", "--create-background", "f"]
    json.dumps(entries)  # plain JSON


def test_no_process_outlives_kill_all(fake):
    for name in ("h1", "h2"):
        make(fake, name)
        fake.run("-s", name, "run", "--", "/bin/sh", "-c", "sleep 60")
        fake.run("-s", name, "action", "new-pane")  # a shell pane
    procs = fake.processes()
    assert len(procs) >= 2 + 6  # 2 servers + 3 pane processes each
    r = fake.run("kill-all-sessions", "-y")
    assert r.rc == 0
    fake.wait_for(lambda: not fake.processes(), what="all fake processes to exit")
    assert fake.run("ls", "-n").out.count("EXITED") == 2
