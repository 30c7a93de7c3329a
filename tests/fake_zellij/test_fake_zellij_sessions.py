"""Golden tests: session lifecycle commands, byte for byte (contract §2.1–§2.6, §0)."""
from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.timeout(60)

ANSI_ROW = re.compile(r"^\x1b\[32;1m(?P<name>[^\x1b]+)\x1b\[m \[Created \x1b\[35;1m"
                      r"(?P<dur>[0-9a-z ]+)\x1b\[m ago\] (?P<suffix>.*)$")


def test_version_output(fake, version):
    r = fake.run("--version", version=version)
    assert (r.rc, r.stdout_b, r.stderr_b) == (0, f"zellij {version}\n".encode(), b"")
    r = fake.run("-V", version=version)
    assert r.stdout_b == f"zellij {version}\n".encode()


def test_session_lifecycle_golden(fake, version):
    v = version
    r = fake.run("ls", version=v)
    assert (r.rc, r.out, r.err) == (1, "", "No active zellij sessions found.\n")

    r = fake.run("attach", "--create-background", "alpha", version=v)
    assert (r.rc, r.out, r.err) == (0, "", "")
    r = fake.run("attach", "--create-background", "alpha", version=v)
    assert (r.rc, r.out, r.err) == (1, "", "Session already exists\n")

    r = fake.run("ls", "-n", version=v)
    assert r.rc == 0 and r.err == ""
    assert re.fullmatch(r"alpha \[Created \d+s ago\] \n", r.out), r.out
    r = fake.run("list-sessions", version=v)
    m = ANSI_ROW.match(r.out.rstrip("\n"))
    assert m and m["name"] == "alpha" and m["suffix"] == "" and r.out.endswith("] \n"), r.out
    r = fake.run("ls", "-s", version=v)
    assert r.out == "alpha\n"
    r = fake.run("ls", "-n", version=v, ZELLIJ_SESSION_NAME="alpha")
    assert r.out.endswith("] (current)\n")

    # kill: exit 0, nothing printed; the server exits asynchronously (§2.4), then the session
    # stays as EXITED
    r = fake.run("kill-session", "alpha", version=v)
    assert (r.rc, r.out, r.err) == (0, "", "")
    fake.wait_for(lambda: "EXITED" in fake.run("ls", "-n", version=v).out, what="EXITED row")
    r = fake.run("ls", "-n", version=v)
    assert re.fullmatch(r"alpha \[Created \d+s ago\] \(EXITED - attach to resurrect\)\n", r.out)
    r = fake.run("ls", version=v)
    assert "(\x1b[31;1mEXITED\x1b[m - attach to resurrect)\n" in r.out
    r = fake.run("ls", "-s", "-n", version=v)
    assert r.out == "alpha\n"  # --short wins, dead rows indistinguishable

    r = fake.run("kill-session", "alpha", version=v)
    assert (r.rc, r.out, r.err) == (1, 'No session named "alpha" found.\n', "")
    r = fake.run("kill-session", version=v)
    assert (r.rc, r.out) == (1, "Please specify the session name to kill.\n")

    r = fake.run("delete-session", "alpha", version=v)
    assert (r.rc, r.out, r.err) == (0, 'Session: "alpha" successfully deleted.\n', "")
    r = fake.run("delete-session", "alpha", version=v)
    assert (r.rc, r.out, r.err) == (2, "", 'Session: "alpha" not found.\n')
    r = fake.run("delete-session", version=v)
    assert (r.rc, r.out) == (1, "Please specify the session name to delete.\n")
    r = fake.run("ls", version=v)
    assert r.rc == 1


def test_delete_live_session_force(fake):
    fake.create("beta")
    r = fake.run("delete-session", "beta")
    assert (r.rc, r.out) == (
        1, 'A session by the name "beta" exists and is active, use --force to delete it.\n')
    r = fake.run("delete-session", "--force", "beta")
    assert r.rc == 0
    assert r.out == ('A session by the name "beta" exists and is active, but will be force killed '
                     'and deleted.\nSession: "beta" successfully deleted.\n')
    # the server exits asynchronously (§2.4): the name is free once it has gone
    fake.wait_for(lambda: fake.run("ls").rc == 1, what="the killed server to exit")
    fake.create("beta")


def test_kill_session_did_you_mean(fake):
    fake.create("workers")
    r = fake.run("kill-session", "worker")
    assert r.rc == 1
    assert r.out == 'No session named "worker" found.\n  help: Did you mean `workers`?\n'


def test_list_sessions_order_and_reverse(fake):
    import os
    import time
    fake.create("old")
    fake.create("new")
    old_sock = os.path.join(fake.sockdir, "contract_version_1", "old")
    t = time.time() - (2 * 86400 + 3 * 3600 + 5 * 60 + 2)
    os.utime(old_sock, (t, t))
    r = fake.run("ls", "-n")
    assert r.out.splitlines()[0] == "old [Created 2days 3h 5m 2s ago] "
    assert fake.run("ls", "-s").out == "old\nnew\n"
    assert fake.run("ls", "-s", "-r").out == "new\nold\n"


@pytest.mark.parametrize("name,msg", [
    ("", "Session name cannot be empty. Please provide a specific session name.\n"),
    ("  ", "Session name cannot be empty. Please provide a specific session name.\n"),
    (".", 'Invalid session name: ".".\n'),
    ("..", 'Invalid session name: "..".\n'),
    ("a/b", "Session name cannot contain '/'.\n"),
])
def test_attach_invalid_names(fake, name, msg):
    r = fake.run("attach", "--create-background", name)
    assert (r.rc, r.out, r.err) == (1, "", msg)


def test_attach_to_current_session_panics(fake):
    r = fake.run("attach", "-b", "me", ZELLIJ_SESSION_NAME="me")
    assert r.rc == 101
    assert ('You are trying to attach to the current session ("me"). This is not supported.'
            in r.err)


def test_socket_path_too_long(fake):
    name = "x" * 100
    r = fake.run("attach", "--create-background", name)
    assert r.rc == 1 and r.err.startswith("Error: the IPC socket path is too long")
    assert "ZELLIJ_SOCKET_DIR" in r.err
    r = fake.run("--session", name, "action", "list-clients")
    assert r.rc == 2 and r.err.startswith("error:")
    assert "session name must be less than" in r.err


def test_kill_all_sessions(fake):
    r = fake.run("kill-all-sessions", "-y")
    assert (r.rc, r.err) == (1, "No active zellij sessions found.\n")
    fake.create("k1")
    fake.create("k2")
    r = fake.run("kill-all-sessions", "-y")
    assert (r.rc, r.out, r.err) == (0, "", "")
    fake.wait_for(lambda: fake.run("ls", "-n").out.count("EXITED") == 2, what="both EXITED")
    r = fake.run("ls", "-n")
    assert r.out.count("(EXITED - attach to resurrect)") == 2


def test_socket_dirs_per_version(fake):
    fake.create("new-style", version="0.44.3")
    fake.create("old-style", version="0.43.1")
    import os
    assert os.listdir(os.path.join(fake.sockdir, "contract_version_1")) == ["new-style"]
    assert os.listdir(os.path.join(fake.sockdir, "0.43.1")) == ["old-style"]
    # ≤0.43: sessions of other versions are invisible
    assert fake.run("ls", "-s", version="0.43.1").out == "old-style\n"
    assert fake.run("ls", "-s", version="0.45.0").out == "new-style\n"
    assert fake.run("ls", "-s", version="0.41.2").rc == 1


def test_resurrection_suspends_commands(fake, tmp_path):
    fake.create("res")
    r = fake.run("-s", "res", "run", "--name", "job", "--", "/bin/sh", "-c", "echo hi; sleep 30")
    assert r.out == "terminal_1\n"
    fake.run("kill-session", "res")
    fake.wait_for(lambda: "EXITED" in fake.run("ls", "-n").out, what="EXITED row")
    r = fake.run("attach", "--create-background", "res")
    assert (r.rc, r.out, r.err) == (0, "", "")
    job = fake.wait_for(lambda: next((p for p in fake.panes("res") if p["name"] == "job"), None))
    assert job["state"] == "suspended" and job["pid"] is None and job["held"]
    r = fake.run("-s", "res", "action", "dump-screen", "--pane-id", job["pane_id"])
    assert "Waiting to run: /bin/sh -c echo hi; sleep 30" in r.out
    fake.run("kill-session", "res")
    fake.wait_for(lambda: "EXITED" in fake.run("ls", "-n").out, what="EXITED row")
    fake.run("attach", "--create-background", "res", "--force-run-commands")
    job = fake.wait_for(lambda: next((p for p in fake.panes("res")
                                      if p["name"] == "job" and p["pid"]), None))
    assert job["state"] == "running"


@pytest.mark.parametrize("args", [
    ["frobnicate"],
    ["action", "frobnicate"],
    ["run", "--no-such-flag", "--", "true"],
    ["ls", "--bogus"],
    ["run", "--session", "u", "--", "true"],  # --session is top-level only
    ["action", "list-panes", "--session", "u"],
])
def test_unknown_subcommands_and_flags_are_usage_errors(fake, args):
    fake.create("u")
    r = fake.run(*args)
    assert r.rc == 2 and r.err.startswith("error:"), r
    assert r.out == ""


@pytest.mark.parametrize("version,args", [
    ("0.40.1", ["--new-session-with-layout", "x.kdl", "attach", "-b", "n"]),
    ("0.42.0", ["run", "--stacked", "--", "true"]),
    ("0.43.1", ["action", "list-panes"]),
    ("0.43.1", ["action", "close-pane", "--pane-id", "1"]),
    ("0.43.1", ["run", "--blocking", "--", "true"]),
    ("0.43.1", ["action", "dump-screen", "--path", "/tmp/x"]),
    ("0.44.0", ["run", "--tab-id", "0", "--", "true"]),
    ("0.44.3", ["run", "--no-focus", "--", "true"]),
    ("0.44.0", ["--layout-string", "layout {}", "attach", "-b", "n"]),
    ("0.41.2", ["run", "--pinned", "true", "--floating", "--", "true"]),
    ("0.40.0", ["action", "list-clients"]),
])
def test_version_gating(fake, version, args):
    r = fake.run(*args, version=version)
    assert r.rc == 2 and r.err.startswith("error:"), r


def test_help_exits_zero(fake):
    r = fake.run("--help")
    assert r.rc == 0 and "does NOT model" in r.out
