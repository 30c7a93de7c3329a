"""Where the fake used to be kinder than Zellij (issue 11), and the faults the backend's tests
inject: over-long `--session` names (§2.3/§6.7), `kill-session` exiting asynchronously (§2.4),
failing `rename-pane`/`close-pane`/`list-clients`, faults changed mid-run, a crashing server."""
from __future__ import annotations

import json
import os
import re

import psutil
import pytest

pytestmark = pytest.mark.timeout(90)

LAYOUT = """layout {
    tab name="main" {
        pane name="idle" command="/bin/sleep" {
            args "60";
        }
    }
}
"""


def make(fake, version=None, name="s", **kw):
    path = fake.root / f"{name}.kdl"
    path.write_text(LAYOUT)
    fake.create(name, "--layout", str(path), version=version, **kw)
    pane = fake.wait_for(lambda: next((p for p in fake.panes(name, version) if p["pid"]), None),
                         what="layout pane to start")
    return pane


def gone(pid):
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def row(fake, version, name="s"):
    return next((ln for ln in fake.run("ls", "-n", version=version).out.splitlines()
                 if ln.startswith(name + " ")), None)


# ------------------------------------------------------------------ session name length

def test_over_long_session_name_says_zero_characters(fake, version):
    """cli.rs validate_session: SOCK_MAX.saturating_sub(len(whole socket path)) - 1 → 0."""
    d = os.path.join(fake.sockdir, "contract_version_1" if version >= "0.44" else version)
    fits = "n" * (107 - len(d) - 1)  # socket path of 107 bytes: accepted
    r = fake.run("--session", fits, "action", "query-tab-names", version=version)
    assert (r.rc, r.err) == (1, "There is no active session!\n"), r
    for name in (fits + "x", "x" * 100):
        r = fake.run("--session", name, "action", "list-clients", version=version)
        assert r.rc == 2 and r.out == "", r
        word = "invalid value" if version >= "0.45" else "Invalid value"
        assert r.err.startswith(f"error: {word} ")
        assert "session name must be less than 0 characters" in r.err, r.err


# ------------------------------------------------------------------ kill-session (§2.4)

# the oldest and newest in CI; the versions between are neighbours (scripts/test-full)
@pytest.mark.parametrize("version", ["0.40.1", *(pytest.param(v, marks=pytest.mark.full)
                                                 for v in ("0.41.2", "0.43.1", "0.44.3", "0.45.0"))])
def test_kill_session_returns_before_the_server_exits(fake, version):
    idle = make(fake, version)
    slow = "kill_delay_ms=6000"  # long enough for the checks below on a loaded machine
    r = fake.run("kill-session", "s", version=version, faults=slow)
    assert (r.rc, r.out, r.err) == (0, "", "")
    # still listed, still live: the name is not free yet, and the pane still runs
    assert row(fake, version) is not None and "EXITED" not in row(fake, version)
    assert fake.session("s", version)["dying"] is True
    r = fake.run("attach", "--create-background", "s", version=version)
    assert (r.rc, r.err) == (1, "Session already exists\n")
    assert not gone(idle["pid"])
    # actions reach nothing any more
    r = fake.run("-s", "s", "run", "--", "/bin/true", version=version)
    assert (r.rc, r.out) == (0, "")
    # then the server exits: EXITED row, the pane got its hang-up
    fake.wait_for(lambda: "EXITED" in (row(fake, version) or ""), timeout=20, what="EXITED row")
    fake.wait_for(lambda: gone(idle["pid"]), what="pane process to end")
    assert fake.state(version=version)["sessions"] == []


def test_kill_session_default_delay_is_short_but_real(fake):
    idle = make(fake, "0.45.0")
    r = fake.run("kill-session", "s")
    assert r.rc == 0
    fake.wait_for(lambda: "EXITED" in (row(fake, "0.45.0") or ""), timeout=5, what="EXITED")
    fake.wait_for(lambda: gone(idle["pid"]), what="pane process to end")


def test_kill_delay_zero_frees_the_name_before_returning(fake, version):
    make(fake, version)
    r = fake.run("kill-session", "s", version=version, faults="kill_delay_ms=0")
    assert r.rc == 0
    assert "EXITED" in row(fake, version)
    r = fake.run("delete-session", "s", version=version)
    assert r.rc == 0
    fake.create("s", version=version)


def test_delete_force_of_a_dying_session_leaves_no_record(fake):
    make(fake)
    r = fake.run("kill-session", "s", faults="kill_delay_ms=4000")
    assert r.rc == 0
    r = fake.run("delete-session", "--force", "s", faults="kill_delay_ms=4000")
    assert r.rc == 0 and "will be force killed and deleted" in r.out
    fake.wait_for(lambda: fake.state()["sessions"] == [], timeout=20, what="server to exit")
    r = fake.run("ls", "-n")
    assert (r.rc, r.out) == (1, ""), r


# ------------------------------------------------------------------ failing pane calls

@pytest.mark.parametrize("action", ["rename-pane", "close-pane", "list-clients"])
def test_failing_pane_calls_do_nothing(fake, version, action):
    idle = make(fake, version)
    faults = f"fail:{action}:1:{action} broke"
    args = {"rename-pane": ["rename-pane", "renamed"], "close-pane": ["close-pane"],
            "list-clients": ["list-clients"]}[action]
    if version >= "0.44" and action != "list-clients":
        args += ["--pane-id", idle["pane_id"]]
    else:
        fake.run("__fake-attach", "s", version=version)
    r = fake.run("-s", "s", "action", *args, version=version, faults=faults)
    assert (r.rc, r.out, r.err) == (1, "", f"{action} broke\n")
    pane = fake.pane("s", idle["pane_id"], version)
    assert pane is not None and pane["name"] == "idle"
    # the same call without the fault works
    r = fake.run("-s", "s", "action", *args, version=version)
    assert r.rc == 0 and r.err == ""
    entry = [e for e in fake.log_entries() if e["subcommand"] == action]
    assert [e["exit"] for e in entry] == [1, 0]


def test_faults_file_changes_faults_mid_run(fake):
    idle = make(fake, "0.45.0")
    ffile = fake.root / "faults"
    env = fake.environ("0.45.0", FAKE_ZELLIJ_FAULTS_FILE=str(ffile),
                       FAKE_ZELLIJ_FAULTS="fail:list-tabs:3:tabs")
    rename = ["-s", "s", "action", "rename-pane", "--pane-id", idle["pane_id"]]
    assert fake.run(*rename, "a", env=env).rc == 0
    ffile.write_text("fail:rename-pane:4:late failure\nfail:list-clients:2:probe failed\n")
    r = fake.run(*rename, "b", env=env)
    assert (r.rc, r.err) == (4, "late failure\n")
    r = fake.run("-s", "s", "action", "list-clients", env=env)
    assert (r.rc, r.err) == (2, "probe failed\n")
    assert fake.run("-s", "s", "action", "list-tabs", env=env).rc == 3  # env faults still apply
    ffile.unlink()
    assert fake.run(*rename, "c", env=env).rc == 0
    assert fake.pane("s", idle["pane_id"])["name"] == "c"


# ------------------------------------------------------------------ a crashing server

def test_crashed_server_leaves_a_stale_socket_and_hung_up_panes(fake, version):
    idle = make(fake, version)
    server = fake.session("s", version)["server_pid"]
    r = fake.run("__fake-crash", "s", version=version)
    assert (r.rc, r.out) == (0, f"{server}\n"), r
    assert gone(server)
    sock = os.path.join(fake.sockdir, "contract_version_1" if version >= "0.44" else version, "s")
    assert os.path.exists(sock)  # nobody removed it
    fake.wait_for(lambda: gone(idle["pid"]), what="the pane to get its hang-up")
    r = fake.run("-s", "s", "run", "--", "/bin/true", version=version)
    assert (r.rc, r.err) == (1, "There is no active session!\n")
    assert not os.path.exists(sock)  # the CLI removed the refusing socket (§2.2)
    assert re.fullmatch(r"s \[Created \d+s ago\] \(EXITED - attach to resurrect\)",
                        row(fake, version))


def test_state_shows_the_tree_order_and_expanded_flags(fake):
    make(fake)
    st = fake.session("s")
    pane = st["tabs"][0]["panes"][0]
    assert pane["stacked"] is False and pane["expanded"] is False and st["dying"] is False
    assert json.loads(json.dumps(st)) == st
