"""§2.0 target-session resolution, every row, plus the top-level --layout quirk."""
from __future__ import annotations

import subprocess

import pytest

pytestmark = pytest.mark.timeout(60)

ACTION = ("action", "query-tab-names")


def test_no_live_session(fake, version):
    r = fake.run("--session", "ghost", *ACTION, version=version)
    assert (r.rc, r.out, r.err) == (1, "", "There is no active session!\n")
    r = fake.run("run", "--", "true", version=version)
    assert (r.rc, r.out, r.err) == (1, "", "There is no active session!\n")


def test_one_live_session(fake, version):
    fake.create("only", version=version)
    # no --session: targets it, even with ZELLIJ_SESSION_NAME naming another one
    r = fake.run(*ACTION, version=version, ZELLIJ_SESSION_NAME="elsewhere")
    assert (r.rc, r.out, r.err) == (0, "Tab #1\n", "")
    r = fake.run("--session", "other", *ACTION, version=version)
    assert (r.rc, r.out, r.err) == (
        1, "", "Session 'other' not found. The following sessions are active:\nonly\n")
    r = fake.run("--session", "only", *ACTION, version=version)
    assert (r.rc, r.out) == (0, "Tab #1\n")


def test_two_live_sessions(fake):
    fake.create("one")
    fake.create("two")
    fake.create("three")
    fake.run("kill-session", "three")
    fake.wait_for(lambda: "EXITED" in fake.run("ls", "-n").out)
    r = fake.run("--session", "two", *ACTION)
    assert (r.rc, r.out) == (0, "Tab #1\n")
    # not found with ≥2 live: message on stderr, coloured list (newest first, with EXITED) on
    # stdout, exit 0
    r = fake.run("--session", "nope", *ACTION)
    assert r.rc == 0
    assert r.err == "Session 'nope' not found. The following sessions are active:\n"
    names = [line.split("\x1b[m")[0].replace("\x1b[32;1m", "") for line in r.out.splitlines()]
    assert names == ["three", "two", "one"]
    assert "EXITED" in r.out.splitlines()[0]
    r = fake.run(*ACTION)
    assert r.rc == 0
    assert r.err == ("Please specify the session name to send actions to. The following sessions "
                     "are active:\n")
    assert r.out.count("\n") == 3
    r = fake.run(*ACTION, ZELLIJ_SESSION_NAME="two")
    assert (r.rc, r.out) == (0, "Tab #1\n")


def test_two_live_sessions_stale_env_hangs(fake):
    fake.create("one")
    fake.create("two")
    with pytest.raises(subprocess.TimeoutExpired):
        fake.run(*ACTION, ZELLIJ_SESSION_NAME="gone", timeout=1.0)
    r = fake.run(*ACTION, ZELLIJ_SESSION_NAME="gone", faults="no_hang")
    assert r.rc == 1 and "gone" in r.err


def test_layout_quirk_with_session_name_env(fake):
    lay = fake.root / "l.kdl"
    lay.write_text('layout {\n    tab name="added" {\n        pane;\n    }\n}\n')
    fake.create("host")
    # ≥0.41: --layout + $ZELLIJ_SESSION_NAME → a tab is added to that session, attach ignored
    r = fake.run("--layout", str(lay), "attach", "--create-background", "fresh",
                 ZELLIJ_SESSION_NAME="host")
    assert (r.rc, r.out, r.err) == (0, "1\n", "")
    assert fake.run("-s", "host", *ACTION).out == "Tab #1\nadded\n"
    assert fake.run("ls", "-s").out == "host\n"
    # --session + --layout without a subcommand = new-tab; a missing session is NOT created
    r = fake.run("--session", "host", "--layout", str(lay))
    assert r.rc == 0 and r.out == "2\n"
    r = fake.run("--session", "missing", "--layout", str(lay))
    assert r.rc == 1 and r.err.startswith("Session 'missing' not found.")
    # without the env var: a new session with that layout
    r = fake.run("--layout", str(lay), "attach", "--create-background", "fresh")
    assert (r.rc, r.out, r.err) == (0, "", "")
    assert fake.run("-s", "fresh", *ACTION).out == "added\n"


def test_layout_quirk_absent_in_040(fake):
    v = "0.40.1"
    lay = fake.root / "l.kdl"
    lay.write_text('layout {\n    tab name="added" {\n        pane;\n    }\n}\n')
    fake.create("host", version=v)
    r = fake.run("--layout", str(lay), "attach", "--create-background", "fresh", version=v,
                 ZELLIJ_SESSION_NAME="host")
    assert (r.rc, r.err) == (0, "")
    assert sorted(fake.run("ls", "-s", version=v).out.split()) == ["fresh", "host"]
