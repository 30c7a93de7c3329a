"""The commands a person types every day, as they type them (issue 14, parts 7 and 8):
``logs [RUN] [TASK]`` and its line ends, ``attach`` in tmux and Zellij, ``ls`` with names and
counts, ``doctor`` with defaults."""

from __future__ import annotations

import io
import json
import re
import shlex
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from swarmtest import GATE, Swarm, clean_env, full, kill_run_processes, validate, wait_until
from tmuxtest import inside_env, outside_env
from zellijtest import FAST, FakeZellij, check_calls

from zellij_swarm.backends import zellij_attach
from zellij_swarm.backends.zellij_attach import REATTACHES
from zellij_swarm.commands import status as views
from zellij_swarm.commands.logs import LineEnds

needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None,
                                reason="tmux is not installed (scripts/setup installs it)")
needs_script = pytest.mark.skipif(shutil.which("script") is None, reason="script (util-linux) is not installed")


def one_line_error(res: Any, code: int, needle: str) -> None:
    assert res.code == code, res
    assert res.stderr.count("\n") == 1 and res.stderr.startswith("zellij-swarm: error: "), res.stderr
    assert needle in res.stderr, res.stderr


def on_a_terminal(swarm: Swarm, *args: str) -> list[str]:
    """``zellij-swarm ARGS`` with a terminal on stdin and stdout, as a person runs it (``script``)."""
    return ["script", "-qfec", shlex.join(swarm.cmd(*args)), "/dev/null"]


def output(swarm: Swarm, *args: str) -> bytes:
    """stdout of ``zellij-swarm ARGS`` as bytes (``Swarm`` reads text, which turns CRLF into LF)."""
    return subprocess.run(swarm.cmd(*args), cwd=swarm.cwd, env=clean_env(), capture_output=True, timeout=60).stdout


def status(swarm: Swarm, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    res = swarm("status", "--json", *args, env=env)
    assert res.code == 0, res.stderr  # (it once printed nothing here, under load, saying why on stderr only)
    return json.loads(res.stdout)


# ----- logs [RUN] [TASK] ----------------------------------------------------------------------


def test_logs_takes_a_task_of_the_latest_run_or_lists_a_runs_tasks(swarm):
    swarm.write("lines.txt", "echo from-line-one\necho two; exit 3\n")
    swarm("run", "lines.txt", "--output", "quiet")
    first = swarm.latest()
    swarm.write("named.toml", '[swarm]\nname = "nightly"\n[[task]]\nname = "build"\ncmd = "echo built"\n')
    assert swarm("run", "named.toml", "--output", "quiet").code == 0
    latest = swarm.latest()

    res = swarm("logs", "build")  # the latest run's task, as `status` takes the latest run
    assert (res.code, res.stdout) == (0, "built\n")
    assert swarm("logs", first.name, "task-1").stdout == "from-line-one\n"  # RUN TASK as before

    listed = swarm("logs")
    assert listed.code == 0
    assert listed.stdout.splitlines() == [f"run {latest.name} (nightly): finished, 1 task",
                                          "  TASK   STATUS     ATTEMPTS", "  build  succeeded  1"]
    assert listed.stderr == "zellij-swarm: show a task's output with: zellij-swarm logs build\n"

    # one argument that is no task of the latest run but a prefix of another run's id: that run
    res = swarm("logs", first.name[:-2])
    assert res.code == 0
    assert res.stdout.splitlines() == [f"run {first.name}: finished, 2 tasks",
                                       "  TASK    STATUS     ATTEMPTS  COMMAND",
                                       "  task-1  succeeded  1         echo from-line-one",
                                       "  task-2  failed     1         echo two; exit 3"]
    assert res.stderr == f"zellij-swarm: show a task's output with: zellij-swarm logs {first.name[:-2]} task-1\n"

    one_line_error(swarm("logs", "ghost"), 2, f"run {latest.name} has no task 'ghost', and no run id starts with it")
    one_line_error(swarm("logs", first.name, "ghost"), 2, f"run {first.name} has no task 'ghost'")
    # a misspelt task: the closest one named, for every command that takes a task
    for command in (("logs",), ("logs", first.name), ("attach",), ("diff",), ("retry", first.name)):
        typo = "bulid" if len(command) == 1 else "tsak-2"
        meant = "build" if len(command) == 1 else "task-2"
        one_line_error(swarm(*command, typo), 2, f"has no task '{typo}'")
        assert f"(did you mean '{meant}'?)" in swarm(*command, typo).stderr, command
    one_line_error(swarm("logs", "-f"), 2, "-f needs a task")
    one_line_error(swarm("logs", "a", "b", "c"), 2, "logs takes [RUN] [TASK], not 3 arguments")


def test_a_task_named_like_a_run_is_the_task(swarm):
    """A single argument is a run only when no task of the latest run has that name."""
    swarm.write("a.txt", "echo older\n")
    swarm("run", "a.txt", "--output", "quiet")
    older = swarm.latest().name
    swarm.write("b.toml", f'[[task]]\nname = "{older[:8]}"\ncmd = "echo the-task"\n')
    swarm("run", "b.toml", "--output", "quiet")
    assert swarm("logs", older[:8]).stdout == "the-task\n"
    assert swarm("logs", older).stdout.startswith(f"run {older}: finished")  # a longer prefix: the run


def test_line_ends_split_across_reads():
    out = io.BytesIO()
    ends = LineEnds(out)
    for chunk in (b"a\r", b"\nb\r", b"c\r", b"\r\n", b"50%\r"):
        ends.write(chunk)
    ends.end()
    assert out.getvalue() == b"a\nb\rc\r\n50%\r"  # only CR LF is LF; lone CRs stay, the last one too
    raw = io.BytesIO()
    ends = LineEnds(raw, raw=True)
    ends.write(b"a\r")
    ends.write(b"\n")
    assert raw.getvalue() == b"a\r\n"


def test_logs_shows_crlf_as_lf_and_raw_as_stored(swarm):
    swarm.write("crlf.toml", "[[task]]\nname = \"t\"\ncmd = \"printf 'one\\\\r\\\\n50%%\\\\r100%%\\\\r\\\\n'\"\n")
    assert swarm("run", "crlf.toml", "--output", "quiet").code == 0
    stored = (swarm.latest() / "slots/slot-1/gen-1/output.log").read_bytes()
    assert stored == b"one\r\n50%\r100%\r\n"
    assert output(swarm, "logs", "t") == b"one\n50%\r100%\n"
    assert output(swarm, "logs", "--raw", "t") == stored


def test_logs_follow_joins_a_crlf_split_between_two_reads(swarm):
    """``-f`` reads ``one\\r`` while the worker waits, then ``\\ntwo\\r\\n``: the held CR and the
    LF that comes later are one line end."""
    swarm.write("f.toml", f"[[task]]\nname = \"t\"\ncmd = \"printf 'one\\\\r'; {GATE}; printf '\\\\ntwo\\\\r\\\\n'\"\n")
    proc = swarm.popen("run", "f.toml", "--output", "quiet")
    run = swarm.started()
    logs = None
    try:
        wait_until(lambda: (run / "slots/slot-1/gen-1/output.log").exists()
                   and (run / "slots/slot-1/gen-1/output.log").read_bytes() == b"one\r", what="the first write")
        logs = subprocess.Popen(swarm.cmd("logs", "-f", "t"), cwd=swarm.cwd, env=clean_env(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        first: list[bytes] = []
        reader = threading.Thread(target=lambda: first.append(logs.stdout.read(3)), daemon=True)
        reader.start()
        reader.join(timeout=30)
        assert first == [b"one"]  # shown, with its CR held back until the next read
        swarm.open_gate()
        rest, _ = logs.communicate(timeout=60)
        assert (logs.returncode, first[0] + rest) == (0, b"one\ntwo\n")
        assert proc.wait(timeout=60) == 0
    finally:
        swarm.open_gate()
        if logs is not None:
            logs.kill()
        proc.kill()
        kill_run_processes(run.name)


@needs_tmux
def test_logs_of_a_live_tmux_pane_read_like_a_compact_one(swarm, tmux):
    swarm.write("a.txt", "echo hello; echo world\n")
    res = swarm("run", "a.txt", "--backend", "tmux", "--ui", "live", "--output", "quiet", env=outside_env(tmux))
    assert res.code == 0, res.stderr
    assert (swarm.latest() / "slots/slot-1/gen-1/output.log").read_bytes() == b"hello\r\nworld\r\n"  # the terminal's
    assert output(swarm, "logs", "task-1") == b"hello\nworld\n"
    assert output(swarm, "logs", "--raw", "task-1") == b"hello\r\nworld\r\n"


# ----- ls and doctor --------------------------------------------------------------------------


def test_ls_names_runs_and_counts_each_status(swarm):
    swarm.write("h.toml", f'[swarm]\nname = "nightly"\njobs = 2\nhalt = "now"\n[[task]]\nname = "bad"\n'
                          f'cmd = "until [ -e started ]; do sleep 0.02; done; exit 1"\n'
                          f'[[task]]\nname = "long"\ncmd = "touch started; {GATE}"\n')
    assert swarm("run", "h.toml", "--output", "quiet").code == 1
    [row] = json.loads(swarm("ls", "--json").stdout)
    validate([row], "ls")
    assert (row["name"], row["tasks"], row["failed"], row["counts"]) == ("nightly", 2, 1, {"failed": 1, "cancelled": 1})
    text = swarm("ls").stdout
    assert "nightly" in text and "1 failed" in text and "1 cancelled" in text


def test_doctor_shows_defaults_not_none(swarm):
    res = swarm("doctor", env=clean_env(ZELLIJ_SWARM_RETRIES="2"))
    assert res.code == 0 and "None" not in res.stdout, res.stdout
    lines = res.stdout.splitlines()
    for line in ("  timeout = none (no limit)  (default)", "  pane_hold = 1.5s  (default)",
                 "  output = progress on a TTY, else group  (default)", "  retries = 2  (env ZELLIJ_SWARM_RETRIES)",
                 "  session = swarm-<run-id> (a session of the run's own)  (default)"):
        assert line in lines, res.stdout
    assert any(ln.startswith("  jobs = ") and ln.endswith("(default: the number of usable CPUs)") for ln in lines)
    info = json.loads(swarm("doctor", "--json").stdout)["settings"]
    assert info["timeout"] == {"value": None, "source": "default", "default": "none (no limit)"}
    assert info["heartbeat_timeout"] == {"value": 5.0, "source": "default", "default": "5s"}


@pytest.mark.parametrize("inside", [True, False])
def test_doctor_names_the_callers_zellij_session_only_from_inside_zellij(swarm, inside):
    """A ZELLIJ_SESSION_NAME without ZELLIJ (kept by ``sudo -E``) puts the caller in no session:
    a run makes one of its own. ``doctor`` named it "the current zellij session" all the same."""
    env = clean_env(ZELLIJ_SWARM_BACKEND="zellij", ZELLIJ_SESSION_NAME="ghost", **({"ZELLIJ": "0"} if inside else {}))
    res = swarm("doctor", env=env)
    expected = "ghost (the current zellij session)" if inside else "swarm-<run-id> (a session of the run's own)"
    assert res.code == 0 and f"  session = {expected}  (default)" in res.stdout.splitlines(), res.stdout


# ----- attach ---------------------------------------------------------------------------------


def test_attach_to_a_headless_run_says_there_is_nothing(swarm):
    swarm.write("a.txt", "true\n")
    swarm("run", "a.txt", "--output", "quiet")
    run = swarm.latest().name
    for args in (("attach",), ("attach", "task-1"), ("attach", run, "task-1")):
        one_line_error(swarm(*args), 1, f"run {run} ran headless: there is nothing to attach to")
        assert f"zellij-swarm status {run}" in swarm(*args).stderr
    one_line_error(swarm("attach", run, "ghost"), 2, f"run {run} has no task 'ghost'")


def start_live_tmux_run(swarm: Swarm, env: dict[str, str]) -> tuple[subprocess.Popen[str], Path, dict[str, str]]:
    """Two gated live workers in tmux panes; returns the run's process, directory and the
    tasks' pane ids."""
    swarm.write("g.toml", f'[swarm]\njobs = 2\n[[task]]\nname = "w1"\ncmd = "{GATE}"\n'
                          f'[[task]]\nname = "w2"\ncmd = "{GATE}"\n')
    proc = swarm.popen("run", "g.toml", "--backend", "tmux", "--ui", "live", "--output", "quiet", env=env)
    try:
        run = swarm.started()
        panes = wait_until(lambda: (rows := {t["name"]: t["pane_id"] for t in status(swarm, env=env)["tasks"]})
                           and all(rows.values()) and rows, what="both workers in their panes")
    except BaseException:  # the caller gets no process to end: its run is ended here (one was left running)
        swarm.open_gate()
        proc.kill()
        proc.wait(timeout=30)
        if swarm.runs():
            kill_run_processes(swarm.runs()[0].name)
        raise
    return proc, run, panes


def finish(swarm: Swarm, proc: subprocess.Popen[str], run: Path) -> None:
    swarm.open_gate()
    try:
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
        kill_run_processes(run.name)


@needs_tmux
def test_attach_inside_tmux_selects_the_runs_window_and_the_tasks_pane(swarm, tmux):
    env = inside_env(tmux)
    proc, run, panes = start_live_tmux_run(swarm, env)
    try:
        before = tmux("display-message", "-p", "-t", "host:", "#{window_name} #{pane_id}").split()
        assert before[0] != f"swarm-{run.name}"
        res = swarm("attach", "w2", env=env)
        assert (res.code, res.stderr) == (0, "")
        shown = tmux("display-message", "-p", "-t", "host:", "#{window_name} #{pane_id}").split()
        assert shown == [f"swarm-{run.name}", panes["w2"]]
        assert swarm("attach", run.name, "w1", env=env).code == 0
        assert tmux("display-message", "-p", "-t", "host:", "#{pane_id}").strip() == panes["w1"]
    finally:
        finish(swarm, proc, run)


@needs_tmux
def test_attach_to_a_compact_task_selects_its_slot_view(swarm, tmux):
    """Compact workers have no pane: a running task is shown by its slot's slot-view pane."""
    env = inside_env(tmux)
    swarm.write("c.toml", f'[swarm]\njobs = 2\n[[task]]\nname = "w1"\ncmd = "{GATE}"\n'
                          f'[[task]]\nname = "w2"\ncmd = "{GATE}"\n')
    proc = swarm.popen("run", "c.toml", "--backend", "tmux", "--ui", "compact", "--output", "quiet", env=env)
    run = swarm.started()
    try:
        slot = wait_until(lambda: {t["name"]: t["slot"] for t in status(swarm, env=env)["tasks"]}.get("w2"),
                          what="w2 running in a slot")
        view = wait_until(lambda: [p for p, row in tmux.panes().items() if row["title"] == f"slot {slot}"],
                          what="the slot-view pane")[0]

        def attached() -> bool:
            assert swarm("attach", "w2", env=env).code == 0
            return tmux("display-message", "-p", "-t", "host:", "#{pane_id}").strip() == view

        # (again while the run still opens its panes, off its loop: a batch of them ends by
        # selecting again the pane that was active as it began, undoing an attach made meanwhile
        # — a known race — and status tells a task's slot as soon as it is reserved)
        wait_until(attached, what="the client at w2's slot view")
    finally:
        finish(swarm, proc, run)


@needs_tmux
@needs_script
def test_attach_inside_tmux_switches_the_client_to_the_runs_session(swarm, tmux):
    """The run has a session of its own on the server the user's terminal is a client of."""
    env = inside_env(tmux)
    terminal = subprocess.Popen(["script", "-qfec", f"tmux -S {tmux.socket} attach -t host", "/dev/null"],
                                cwd=swarm.cwd, env=outside_env(tmux, TERM="xterm"), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    proc = run = None
    try:
        wait_until(lambda: tmux("list-clients", "-F", "#{client_session}", check=False).split() == ["host"],
                   what="the user's terminal on session host")
        proc, run, panes = start_live_tmux_run(swarm, outside_env(tmux))
        res = swarm("attach", "w2", env=env)
        assert (res.code, res.stderr) == (0, "")
        session = f"swarm-{run.name}"
        assert tmux("list-clients", "-F", "#{client_session}").split() == [session]
        assert tmux("display-message", "-p", "-t", f"{session}:", "#{pane_id}").strip() == panes["w2"]
    finally:
        terminal.kill()
        terminal.wait(timeout=30)
        if proc is not None and run is not None:
            finish(swarm, proc, run)


@needs_tmux
@needs_script
def test_attach_outside_tmux_becomes_a_client_at_the_tasks_pane(swarm, tmux):
    env = outside_env(tmux)
    proc, run, panes = start_live_tmux_run(swarm, env)
    session = f"swarm-{run.name}"
    client = None
    try:
        no_tty = swarm("attach", "w1", env=env)
        # the run recorded its server: the command names it, wherever it is run from
        one_line_error(no_tty, 1, f"attaching needs a terminal on stdin and stdout; from one, run: tmux -S "
                                  f"{tmux.socket} attach -t {session}")
        client = subprocess.Popen(on_a_terminal(swarm, "attach", "w1"), cwd=swarm.cwd, env=dict(env, TERM="xterm"),
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_until(lambda: tmux("list-clients", "-F", "#{client_session}", check=False).split() == [session],
                   what="this terminal attached to the run's session")
        assert tmux("display-message", "-p", "-t", f"{session}:", "#{pane_id}").strip() == panes["w1"]
        tmux("detach-client", "-s", session)
        assert client.wait(timeout=30) == 0
    finally:
        if client is not None:
            client.kill()
        finish(swarm, proc, run)
    tmux("kill-session", "-t", session)
    gone = f"run {run.name}'s tmux windows are gone from the tmux server at {tmux.socket}"
    one_line_error(swarm("attach", env=env), 1, gone)


def zellij_run(swarm: Swarm, fz: FakeZellij, version: str, inside: str | None) -> Path:
    """A finished live run in Zellij whose failed task's pane stays; its session stays too."""
    swarm.write("z.toml", '[swarm]\njobs = 2\n[[task]]\nname = "ok"\ncmd = "true"\n'
                          '[[task]]\nname = "bad"\ncmd = "exit 3"\n')
    res = swarm("run", "z.toml", "--backend", "zellij", "--ui", "live", "--output", "quiet",
                env=fz.env(version, inside=inside, **FAST), timeout=60)
    assert res.code == 1, res.stderr
    return swarm.latest()


@pytest.mark.parametrize("faults", ["", "unprobed:host"], ids=["listed", "left-out-by-ls"])
def test_attach_inside_zellij_goes_to_the_runs_tab_and_focuses_the_tasks_pane(swarm, fz, faults):
    """``left-out-by-ls``: the session's server fails ``ls``'s probe (busy, contract §2.2); it
    is live all the same, and the run is found in it."""
    version = "0.45.0"
    fz.host("host", version, client=True)
    run = zellij_run(swarm, fz, version, "host")
    fz.zellij("--session", "host", "action", "go-to-tab", "1", version=version)
    tab = fz.tab(version, run.name, "host")
    assert fz.state(version)["sessions"][0]["clients"][0]["tab_id"] != tab["id"]
    pane = swarm.tasks()["bad"]["pane_id"]
    res = swarm("attach", "bad", env=fz.env(version, inside="host", faults=faults))
    assert (res.code, res.stderr) == (0, "")
    host = fz.session(version, "host")
    assert host["clients"][0]["tab_id"] == tab["id"]
    assert fz.tab(version, run.name, "host")["focused_pane"] == pane
    actions = [c["argv"] for c in fz.calls() if c["subcommand"] in ("go-to-tab-name", "go-to-tab-by-id",
                                                                      "focus-pane-id")]
    assert actions == [["--session", "host", "action", "go-to-tab-by-id", str(tab["id"])],  # its name may be marked
                       ["--session", "host", "action", "focus-pane-id", pane]]
    check_calls(fz.calls())


@pytest.mark.parametrize("version", ["0.45.0", full("0.44.3")])
def test_attach_inside_zellij_to_a_task_whose_pane_closed_shows_the_runs_tab(swarm, fz, version):
    """A task whose pane has closed (its hold ended): the run's tab, with a note, exit 0 —
    as in tmux. Zellij's own error for a pane it no longer has ("Pane with id Terminal(11)
    not found") was the answer, exit 1, after the client had moved."""
    fz.host("host", version, client=True)
    run = zellij_run(swarm, fz, version, "host")
    fz.zellij("--session", "host", "action", "go-to-tab", "1", version=version)
    tab = fz.tab(version, run.name, "host")
    assert swarm.tasks()["ok"]["pane_id"] is not None
    res = swarm("attach", "ok", env=fz.env(version, inside="host"))
    assert (res.code, res.stderr) == (0, "zellij-swarm: task ok has no pane open (succeeded); showing the run's tab\n")
    assert fz.session(version, "host")["clients"][0]["tab_id"] == tab["id"]
    assert "focus-pane-id" not in [c["subcommand"] for c in fz.calls()]
    check_calls(fz.calls())


@needs_script
def test_attach_outside_zellij_makes_this_terminal_a_client_of_the_session(swarm, fz):
    version = "0.44.3"
    run = zellij_run(swarm, fz, version, None)
    env = fz.env(version)
    client = subprocess.run(on_a_terminal(swarm, "attach", run.name), cwd=swarm.cwd, env=env,
                            stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    attach = fz.calls()[-1]
    assert attach["argv"] == ["attach", f"swarm-{run.name}"]  # contract §6.7: the full name, no flags
    assert client.returncode == attach["exit"]  # zellij ran as our client on this terminal: its status is ours
    check_calls(fz.calls()[:-1])  # (the fake does not model an interactive client: it says so and exits 2)
    fz.zellij("kill-session", f"swarm-{run.name}", version=version)
    wait_until(lambda: not [s for s in fz.state(version)["sessions"] if s["name"] == f"swarm-{run.name}"
                            and s.get("live")], what="the session ended")
    one_line_error(swarm("attach", env=env), 1, f"run {run.name}'s zellij session is gone")


@needs_script
@pytest.mark.parametrize("drops,probe", [(1, True), (REATTACHES + 1, True), (1, False)],
                         ids=["once", "every-time", "once-left-out-by-ls"])
def test_attach_outside_zellij_attaches_again_when_zellij_dropped_its_client_as_it_attached(swarm, fz, tmp_path,
                                                                                               drops, probe):
    """Contract §6.19: Zellij 0.45 may drop a client as it attaches, exit 0, and say so only in
    its log. ``attach`` then attaches again while the session lives, at most REATTACHES times
    — also when ``ls`` leaves the session out (``probe`` False: its server failed the probe,
    §2.2)."""
    version = "0.45.0"
    run = zellij_run(swarm, fz, version, None)
    unprobed = "" if probe else f",unprobed:swarm-{run.name}"
    env = fz.env(version, faults=f"drop_attach={drops}{unprobed}", TMPDIR=str(tmp_path))
    client = subprocess.run(on_a_terminal(swarm, "attach", run.name), cwd=swarm.cwd, env=env,
                            stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    attaches = [c for c in fz.calls() if c["argv"] == ["attach", f"swarm-{run.name}"]]
    assert len(attaches) == min(drops, REATTACHES) + 1, client.stdout
    assert client.returncode == attaches[-1]["exit"]  # 2 when the fake did not drop it: "not modelled"
    assert client.stdout.count(b"attaching to swarm-") == len(attaches) - 1, client.stdout


@needs_script
def test_run_attach_outside_zellij_attaches_again_when_zellij_dropped_its_client(swarm, fz, tmp_path):
    """``run --attach`` outside Zellij: its client, dropped as it attached (contract §6.19),
    is attached again; the run goes on to its end either way."""
    version = "0.45.0"
    swarm.write("one.toml", f'[[task]]\nname = "one"\ncmd = "{GATE}"\n')
    env = fz.env(version, faults="drop_attach=1", TMPDIR=str(tmp_path), **FAST)
    run = subprocess.Popen(on_a_terminal(swarm, "run", "one.toml", "--backend", "zellij", "--ui", "live", "--attach",
                                         "--close-session"), cwd=swarm.cwd, env=env, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        def attaches() -> list[dict[str, Any]]:
            return [c for c in fz.calls() if c["argv"][:1] == ["attach"] and c["argv"][1].startswith("swarm-")]

        wait_until(lambda: len(attaches()) == 2, what="the client attached again")
        swarm.open_gate()
        out, _ = run.communicate(timeout=60)
    finally:
        run.kill()
        run.communicate()
    assert run.returncode == 0, out
    assert [c["exit"] for c in attaches()] == [0, 2]  # dropped, then the fake's "not modelled"
    assert out.count(b"attaching to swarm-") == 1, out


def test_a_client_that_lived_is_not_attached_again_whatever_the_log_says(tmp_path, monkeypatch) -> None:
    """A user's detach after a while, while another client of the session was dropped and
    logged so: the attach ends with the client's status (it attached again, in a sweep)."""
    log = Path(zellij_attach.log_file({"TMPDIR": str(tmp_path)}))
    log.parent.mkdir(parents=True)
    calls = []

    def client(argv: list[str], env: Any) -> int:
        calls.append(argv)
        began = time.monotonic()
        with log.open("a") as f:  # another client of this session, dropped meanwhile
            f.write("INFO |zellij_client| lib.rs:1616: \nYour zellij client lost connection to the zellij server."
                    "\n      time: `zellij attach s1`\n")
        while time.monotonic() - began <= zellij_attach.DROPPED_WITHIN:  # the user looks, then detaches
            time.sleep(0.01)
        return 0

    monkeypatch.setattr(zellij_attach, "DROPPED_WITHIN", 0.05)
    monkeypatch.setattr(zellij_attach, "_client", client)
    monkeypatch.setattr(zellij_attach, "_live", lambda session, env: True)
    assert zellij_attach.attach("s1", {"TMPDIR": str(tmp_path)}) == 0
    assert len(calls) == 1


def test_only_this_sessions_dropped_client_counts_as_dropped() -> None:
    """A detach, a quit or another session's dropped client leave no reason to attach again."""
    line = b"INFO |zellij_client| lib.rs:1616: \nYour zellij client lost connection to the zellij server.\n"
    tip = b"    - Reattach to your previous session and see if it works out better this\n      time: "
    assert zellij_attach.dropped_as_attached(line + b"...\n" + tip + b"`zellij attach swarm-1`\n", "swarm-1")
    assert not zellij_attach.dropped_as_attached(line + tip + b"`zellij attach swarm-10`\n", "swarm-1")
    assert not zellij_attach.dropped_as_attached(b"INFO |zellij_client| lib.rs:1616: Bye from Zellij!\n", "swarm-1")
    assert not zellij_attach.dropped_as_attached(line + b"x" * 2000 + b"`zellij attach swarm-1`", "swarm-1")


def test_attach_from_another_zellij_session_refuses_to_nest(swarm, fz):
    version = "0.44.3"
    run = zellij_run(swarm, fz, version, None)
    fz.host("elsewhere", version)
    res = swarm("attach", env=fz.env(version, inside="elsewhere"))
    one_line_error(res, 1, f"run {run.name} is in zellij session 'swarm-{run.name}', not in 'elsewhere'")


@needs_tmux
def test_attach_from_outside_finds_a_run_on_another_tmux_server_by_its_record(swarm, tmux):
    """A run made inside a tmux server of its own socket is found from a terminal outside
    any tmux: the snapshot records the server's socket, session and windows."""
    swarm.write("f.toml", '[[task]]\nname = "bad"\ncmd = "exit 3"\n')
    res = swarm("run", "f.toml", "--backend", "tmux", "--ui", "live", "--output", "quiet", env=inside_env(tmux))
    assert res.code == 1, res.stderr
    run = swarm.latest()
    place = status(swarm)["multiplexer"]
    assert place["backend"] == "tmux" and place["socket"] == str(tmux.socket) and place["session"] == "host"
    assert place["windows"] and not place["created_session"]
    # the window stays (a task failed): from outside tmux, with no terminal, the way there is said
    outside = clean_env()
    one_line_error(swarm("attach", run.name, "bad", env=outside), 1, f"-S {tmux.socket}")


def test_logs_takes_a_name_before_an_id_and_its_hint_runs_as_printed(swarm):
    """A task named like another task's id: ``logs t1`` showed the task whose id is ``t1``
    (named ``-x``) while ``retry t1`` took the one named ``t1``. And the hint of a task named
    ``-x`` could not be pasted (``-x`` read as an option)."""
    swarm.write("s.toml", '[[task]]\nname = "-x"\ncmd = "echo neg; exit 4"\n'
                          '[[task]]\nname = "t1"\ncmd = "echo named-t1"\n')
    res = swarm("run", "s.toml", "-j", "1", "--output", "group")
    assert swarm("logs", "t1").stdout == "named-t1\n"
    assert swarm("logs", "t2").stdout == "named-t1\n"  # the id still finds a task no name shadows
    hint = next(line for line in res.stderr.splitlines() if line.startswith("-x: failed"))
    words = shlex.split(hint.split(" — zellij-swarm ", 1)[1])
    assert words[:2] == ["logs", "--"]
    assert swarm(*words).stdout == "neg\n"


def test_a_hint_copied_as_printed_reaches_a_run_kept_in_another_state_dir(swarm: Swarm, tmp_path: Path) -> None:
    """A run given ``--state-dir`` elsewhere: every command its hints offer names that
    directory, so that each, copied as printed into the same shell, finds the run (they named
    none, and said "no run …", exit 2). Hints of a run in the project's own state directory
    stay as short as before."""
    elsewhere = tmp_path / "records of mine"
    res = swarm("run", "--state-dir", str(elsewhere), ":::", "echo four; exit 4")
    assert res.code == 1, res.stderr
    offered = [line[line.index("zellij-swarm logs"):].removesuffix(" TASK")
               for line in res.stderr.splitlines() if "zellij-swarm logs" in line]
    assert offered, res.stderr
    for hint in offered:
        words = shlex.split(hint)
        assert words[:4] == ["zellij-swarm", "logs", "--state-dir", str(elsewhere)], hint
        copied = swarm(*words[1:])
        assert copied.code == 0, (hint, copied.stderr)
    listed = swarm("logs", "--state-dir", str(elsewhere))
    assert f"zellij-swarm logs --state-dir '{elsewhere}' task-1" in listed.stderr, listed.stderr
    here = swarm("run", ":::", "exit 4")
    assert "zellij-swarm logs" in here.stderr and "--state-dir" not in here.stderr, here.stderr


def test_a_hint_names_the_state_dir_when_a_worker_made_one_the_rule_now_finds_first(swarm: Swarm) -> None:
    """Whether a hint needs ``--state-dir`` is decided as it is printed: run from ``sub/`` with
    the project's state directory above it, a task that makes ``sub/.zellij-swarm`` and fails
    leaves the rule finding that one. Its hint, decided as the run started, named no state
    directory, and copied as printed found no run there (exit 2)."""
    swarm.state_dir.mkdir()
    sub = Swarm(swarm.cwd / "sub")
    sub.cwd.mkdir()
    res = sub("run", ":::", "mkdir .zellij-swarm; exit 3")
    assert res.code == 1 and (sub.cwd / ".zellij-swarm").is_dir(), res.stderr
    [hint] = [line.split(" — ")[1] for line in res.stderr.splitlines() if " — zellij-swarm logs" in line]
    words = shlex.split(hint)
    assert words[:4] == ["zellij-swarm", "logs", "--state-dir", str(swarm.state_dir)], hint
    assert sub(*words[1:]).code == 0


def test_the_commands_readers_offer_reach_a_run_kept_in_another_state_dir(swarm: Swarm, tmp_path: Path) -> None:
    """Not only ``run``'s hints: the command ``status --waiting`` and ``wait --for-input`` offer
    to show a waiting task, ``status``'s ``--all`` of a big run and ``attach``'s look elsewhere
    at a headless run name the state directory the rule would not find, so that each, copied as
    printed, reaches the run (they named none: "no runs under …", exit 2)."""
    elsewhere = tmp_path / "records of mine"
    res = swarm("run", "--state-dir", str(elsewhere), ":::", *[f"exit {n % 2}" for n in range(101)])
    assert res.code == 1, res.stderr
    snap = json.loads(swarm("status", "--state-dir", str(elsewhere), "--json").stdout)
    waiting = {**snap, "tasks": [{**snap["tasks"][0], "status": "running", "waiting_input": True}]}
    offered = [re.search(r"zellij-swarm status[^`]*", swarm("status", "--state-dir", str(elsewhere)).stdout)[0],
               re.search(r"zellij-swarm status[^`]*", swarm("attach", "--state-dir", str(elsewhere)).stderr)[0],
               views.format_waiting(waiting, latest=True, where=elsewhere).splitlines()[1].split("  ")[-1].strip()]
    for hint in offered:
        words = shlex.split(hint)
        assert "--state-dir" in words and words[words.index("--state-dir") + 1] == str(elsewhere), hint
        if words[1] != "attach":  # (a headless run has no pane to attach to)
            copied = swarm(*words[1:])
            assert copied.code == 0, (hint, copied.stderr)
    assert "--state-dir" not in views.format_waiting(waiting, latest=True, where=None)


def test_the_commands_an_interrupted_runs_readers_offer_reach_it_in_another_state_dir(swarm: Swarm,
                                                                                       tmp_path: Path) -> None:
    """The neighbours of the hints above (an adversary found them after): an interrupted run
    kept elsewhere — what ``status --waiting`` and ``cancel`` say ``resume`` does, and the
    ``retry`` a finished run's ``resume`` offers — name its state directory, and work pasted."""
    elsewhere = tmp_path / "records 'of' mine"
    proc = swarm.popen("run", "--state-dir", str(elsewhere), "--output", "quiet", ":::", GATE)
    try:
        run = wait_until(lambda: next(iter((elsewhere / "runs").glob("*/state.json")), None), what="the run").parent
        wait_until(lambda: json.loads(swarm("status", "--state-dir", str(elsewhere), "--json").stdout)["counts"]
                   .get("running") == 1, what="the task running")
        proc.send_signal(9)
        proc.wait(timeout=10)

        def offered(text: str, name: str) -> list[str]:
            words = shlex.split(re.search(rf"`(zellij-swarm {name}[^`]*)`", text)[1])
            assert words[2:4] == ["--state-dir", str(elsewhere)], text
            return words

        offered(swarm("status", "--state-dir", str(elsewhere), "--waiting").stdout, "resume")
        cancelled = swarm("cancel", "--state-dir", str(elsewhere), run.name)
        assert cancelled.code == 0, cancelled.stderr
        resumed = swarm(*offered(cancelled.stderr, "resume")[1:])
        assert resumed.code == 130, resumed.stderr
        again = swarm("resume", "--state-dir", str(elsewhere), run.name)
        swarm.open_gate()  # the retry runs the cancelled task again
        assert again.code == 2 and swarm(*offered(again.stderr, "retry")[1:]).code == 0, again.stderr
    finally:
        proc.kill()
        kill_run_processes(run.name)
