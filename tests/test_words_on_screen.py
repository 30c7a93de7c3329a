"""What a person reads (issue 14): the progress line, the board's counters at any width, the
status and ls tables, the hints a failure prints, and who waits for input."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from swarmtest import clean_env, full, kill_run_processes, validate, wait_until

from zellij_swarm.engine.progress import ProgressFacts
from zellij_swarm.render.board import board_frame
from zellij_swarm.render.console import STDIN_HINT, progress_line
from zellij_swarm.render.text import width

SGR = re.compile(r"\x1b\[[0-9;]*m")


def first_row(swarm, run) -> dict[str, Any]:
    """The run's first task row, from ``status --json`` (empty until there is one)."""
    try:
        snap = json.loads(swarm("status", "--json", run.name).stdout)
    except ValueError:
        return {}
    return snap["tasks"][0] if snap.get("tasks") else {}


def facts(**over: Any) -> ProgressFacts:
    counts = {"pending": 10, "running": 2, "succeeded": 5, "failed": 1, "timed_out": 1, "cancelled": 0,
              "skipped": 2, "lost": 0}
    base: dict[str, Any] = dict(counts=counts, elapsed=64.0, jobs=2, mean_duration=4.0,
                                running=[("build-17", 45.0), ("lint", 1.0)], waiting=["lint"])
    return ProgressFacts(**{**base, **over})


def test_the_progress_line_says_done_total_failed_skipped_waiting_eta_and_the_longest_task() -> None:
    line = progress_line(facts(), 200)
    # done: every task that ended except the skipped ones, counted apart
    assert line == ("zellij-swarm: 7/21 done · 2 running · 2 failed · 2 skipped · waiting: lint · 1m04s"
                    " · ETA 21s · longest build-17 45s")


def test_the_progress_line_total_grows_and_eta_waits_for_a_first_duration() -> None:
    more = facts(counts={"pending": 30, "running": 2, "succeeded": 0}, mean_duration=None, running=[], waiting=[])
    assert progress_line(more, 200) == "zellij-swarm: 0/32 done · 2 running · 1m04s"


@pytest.mark.parametrize("cols", [20, 40, 60, 80, 120])
def test_the_progress_line_fits_the_terminal_dropping_the_least_needed_parts(cols: int) -> None:
    line = progress_line(facts(), cols)
    assert len(line) <= cols
    if cols >= 80:
        assert "waiting: lint" in line and "2 failed" in line


def _state(counts: dict[str, int], tasks: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"run_id": "20261130-101010-abcdef", "name": "demo", "state": "running", "jobs": 3,
            "started_at": 100.0, "ended_at": None, "counts": counts, "tasks": tasks or [], "slots": []}


@pytest.mark.parametrize("cols", range(40, 121, 7))
def test_the_board_counters_stay_whole_at_every_width_failures_first(cols: int) -> None:
    counts = {"running": 3, "pending": 120, "succeeded": 958, "failed": 12, "timed_out": 2, "cancelled": 1,
              "skipped": 40, "lost": 1}
    waiting = [{"name": "agent", "id": "t1", "status": "running", "waiting_input": True}]
    lines = [SGR.sub("", line) for line in board_frame(_state(counts, waiting), {}, cols=cols, rows=24, now=160.0)]
    assert all(width(line) <= cols for line in lines)
    header = next(i for i, line in enumerate(lines) if line.startswith("# state"))
    counters = " · ".join(lines[1:header])
    shown = [part.strip() for part in counters.split("·")]
    assert shown == ["12 failed", "2 timed out", "1 lost", "1 cancelled", "40 skipped", "1 waiting for input",
                     "3 running", "120 pending", "958 succeeded"]


def test_status_is_a_table_with_headers_and_commands_of_generated_names(swarm) -> None:
    swarm.write("lines.txt", "echo one\nexit 4\n")
    res = swarm("run", "lines.txt", "--backend", "headless", "-j", "2")
    assert res.code == 1, res.stderr
    text = swarm("status").stdout.splitlines()
    assert text[0].endswith("1 failed, 1 succeeded")
    assert text[1].split() == ["TASK", "STATUS", "ATTEMPTS", "SLOT", "NOTE"]
    rows = {line.split()[0]: line for line in text[2:4]}
    assert rows["task-1"].endswith("echo one") and rows["task-2"].endswith("exit 4")
    assert "gen" not in "\n".join(text), "a slot's generation number reads like an attempt"
    snap = json.loads(swarm("status", "--json").stdout)
    validate(snap, "status")
    assert {t["name"]: (t["command"], t["waiting_input"]) for t in snap["tasks"]} == {
        "task-1": ("echo one", False), "task-2": ("exit 4", False)}


def test_ls_names_the_run_and_counts_by_status(swarm) -> None:
    swarm.write("s.toml", '[swarm]\nname = "nightly"\n[[task]]\nname = "a"\ncmd = "sleep 30"\ntimeout = "1s"\n'
                          '[[task]]\nname = "b"\ncmd = "true"\n')
    swarm("run", "s.toml", "--backend", "headless")
    rows = json.loads(swarm("ls", "--json").stdout)
    validate(rows, "ls")
    assert rows[0]["name"] == "nightly"
    assert rows[0]["counts"] == {"timed_out": 1, "succeeded": 1} and rows[0]["failed"] == 1
    text = swarm("ls").stdout.splitlines()
    assert text[0].split() == ["RUN", "NAME", "STATE", "STARTED", "WAITING", "TASKS"]
    assert "nightly" in text[1] and "1 timed out, 1 succeeded" in text[1]


def test_a_cancelled_task_is_not_counted_failed_by_ls(swarm) -> None:
    swarm.write("s.toml", '[[task]]\nname = "a"\ncmd = "true"\n[[task]]\nname = "b"\ncmd = "exit 1"\n'
                          '[[task]]\nname = "c"\ncmd = "true"\nafter = ["b"]\n')
    swarm("run", "s.toml", "--backend", "headless", "-j", "1")
    [row] = json.loads(swarm("ls", "--json").stdout)
    assert row["counts"] == {"succeeded": 1, "failed": 1, "skipped": 1} and row["failed"] == 1


@pytest.mark.parametrize("program", [
    "python3 -c 'input()'",  # EOFError: EOF when reading a line
    full("python3 -c 'import sys; sys.exit(\"error: end of file on standard input\")'"),
])
def test_a_task_that_meets_eof_on_stdin_gets_a_hint_and_every_failure_a_logs_hint(swarm, program: str) -> None:
    swarm.write("s.toml", "[[task]]\nname = \"asks\"\ncmd = '''" + program + "'''\n")
    res = swarm("run", "s.toml", "--backend", "headless")
    assert res.code == 1
    run = swarm.latest().name
    [line] = [ln for ln in res.stderr.splitlines() if ln.startswith("asks: failed")]
    assert f"zellij-swarm logs {run} asks" in line
    assert STDIN_HINT in line


@pytest.mark.parametrize("said", [
    "compile error", "npm ERR! code E404", "Err:1 http://deb.debian.org/debian bookworm InRelease",
    "make: *** [all] Err 2", "go: err a", "ERR", "parse: unexpected EOF", "tar: Unexpected end of file",
])
def test_a_failure_that_is_not_about_stdin_gets_no_stdin_hint(swarm, said: str) -> None:
    """An ordinary failure's words — a bare "err", npm's "ERR!", apt's "Err:1", a parser's
    "unexpected EOF" — are no sign of a program that needed a terminal."""
    swarm.write("s.toml", '[[task]]\nname = "x y"\ncmd = """echo \'' + said + '\' >&2; exit 2"""\n')
    res = swarm("run", "s.toml", "--backend", "headless")
    [line] = [ln for ln in res.stderr.splitlines() if ln.startswith("x y: failed")]
    assert line.endswith(f"zellij-swarm logs {swarm.latest().name} 'x y'") and STDIN_HINT not in line


def test_a_worker_that_says_it_waits_for_input_is_shown_waiting_until_it_writes(swarm) -> None:
    """A headless worker has no terminal; it can still say it waits (a heartbeat line)."""
    cmd = ('echo asking; echo \'{"event":"waiting_input"}\' >> "$ZELLIJ_SWARM_HEARTBEAT"; '
           'while [ ! -e answer ]; do sleep 0.05; done; echo answered; while [ ! -e done ]; do sleep 0.05; done')
    swarm.write("s.toml", "[[task]]\nname = \"agent\"\ncmd = '''" + cmd + "'''\n")
    proc = swarm.popen("run", "s.toml", "--backend", "headless", "--output", "quiet")
    try:
        run = swarm.started()

        def waiting() -> Any:
            return first_row(swarm, run).get("waiting_input")

        wait_until(lambda: waiting() is True, timeout=10, what="waiting_input true")
        assert "waiting for input" in swarm("status", run.name).stdout
        board = swarm("board", run.name, "--once", env=clean_env(COLUMNS="80", LINES="12")).stdout
        assert "1 waiting for input" in board and "waiting" in board.splitlines()[3]
        (swarm.cwd / "answer").touch()
        wait_until(lambda: waiting() is False, timeout=10, what="waiting_input cleared")
        events = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]
        assert [e["waiting"] for e in events if e["event"] == "worker_waiting_input"] == [True, False]
    finally:
        (swarm.cwd / "answer").touch()
        (swarm.cwd / "done").touch()
        proc.wait(timeout=30)
        kill_run_processes(run.name)


@pytest.mark.parametrize("program", [
    "read answer; echo \"got $answer\"",  # sh's read on the terminal
    full("python3 -c 'print(\"got\", input(\"name? \"))'"),  # Python's input()
    # readline polls the terminal: waiting once the prompt has been silent for a while
    full("python3 -c 'import readline; print(\"got\", input(\"name? \"))'"),
])
def test_a_live_worker_blocked_reading_its_terminal_is_waiting_until_it_reads(swarm, tmux, program: str) -> None:
    """In a live tmux pane: shown waiting for input in status, on the board and in the pane's
    title within 2 s, and cleared once it has read its line."""
    from tmuxtest import outside_env

    then = "; while [ ! -e done ]; do sleep 0.05; done"  # it goes on after reading
    swarm.write("s.toml", "[[task]]\nname = \"asks\"\ncmd = '''" + program + then + "'''\n")
    proc = swarm.popen("run", "s.toml", "--backend", "tmux", "--ui", "live", "--require-multiplexer",
                       "--output", "quiet", env=outside_env(tmux))
    run = None
    try:
        run = swarm.started()

        def row() -> dict[str, Any]:
            return first_row(swarm, run)

        wait_until(lambda: row().get("waiting_input") is True, timeout=15, what="waiting_input true")
        [pane] = [p for p, info in tmux.panes().items() if info["title"].startswith("slot 1")]
        wait_until(lambda: "waiting for input" in tmux.panes()[pane]["title"], what="the pane's title says it")
        tmux("send-keys", "-t", pane, "-l", "swarm")
        tmux("send-keys", "-t", pane, "Enter")
        wait_until(lambda: row().get("waiting_input") is False, timeout=15, what="waiting_input cleared")
        assert row()["status"] == "running"
        wait_until(lambda: "waiting for input" not in tmux.panes()[pane]["title"], what="the title cleared")
        (swarm.cwd / "done").touch()
        assert proc.wait(timeout=30) == 0
        assert "got swarm" in swarm("logs", run.name, "asks").stdout
        events = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]
        assert [e["waiting"] for e in events if e["event"] == "worker_waiting_input"] == [True, False]
    finally:
        (swarm.cwd / "done").touch()
        if proc.poll() is None:
            proc.kill()
        if run is not None:
            kill_run_processes(run.name)


def test_a_live_worker_polling_a_socket_is_never_waiting(swarm, tmux) -> None:
    """An event loop waiting on the network (its terminal not in its epoll set) is not
    waiting for a person, however long it is silent: by the time a worker that sleeps past
    the silence threshold and then reads is shown waiting, the silent one never was."""
    from tmuxtest import outside_env

    from zellij_swarm.worker.waiting import QUIET_AFTER

    net = ("python3 -c 'import select, socket, os\n"
           "a, b = socket.socketpair(); ep = select.epoll(); ep.register(a.fileno(), select.EPOLLIN)\n"
           "while not os.path.exists(\"go\"): ep.poll(0.2)'")
    asks = f"sleep {QUIET_AFTER + 1}; read answer"
    swarm.write("s.toml", "[[task]]\nname = \"net\"\ncmd = '''" + net + "'''\n"
                          "[[task]]\nname = \"asks\"\ncmd = '''" + asks + "'''\n")
    proc = swarm.popen("run", "s.toml", "-j", "2", "--backend", "tmux", "--ui", "live", "--require-multiplexer",
                       "--output", "quiet", env=outside_env(tmux))
    run = None
    try:
        run = swarm.started()
        events = run / "events.jsonl"

        def flagged() -> list[str]:
            text = events.read_text() if events.exists() else ""
            return [json.loads(x)["task"] for x in text.splitlines() if "worker_waiting_input" in x]

        wait_until(lambda: "asks" in flagged(), timeout=30, what="the reader shown waiting")
        assert flagged() == ["asks"]
    finally:
        (swarm.cwd / "go").touch()
        for pane in tmux.panes():
            tmux("send-keys", "-t", pane, "Enter", check=False)
        proc.wait(timeout=30)
        if run is not None:
            kill_run_processes(run.name)


def test_one_look_that_cannot_tell_changes_nothing_two_do(tmp_path, monkeypatch) -> None:
    """A worker's threads may end between two reads of /proc: one unknown look keeps what
    was known; two in a row make it unknown. No tick is left once no worker is watched."""
    from zellij_swarm.backends.base import LaunchRequest
    from zellij_swarm.config.swarmfile import TaskSpec
    from zellij_swarm.engine import input_watch
    from zellij_swarm.engine.live import LiveGen
    from zellij_swarm.engine.timers import Timers
    from zellij_swarm.records.generation_files import GenPaths
    from zellij_swarm.records.task import TaskRecord
    from zellij_swarm.worker.waiting import TtyWait

    looks = iter([TtyWait.READING, TtyWait.UNKNOWN, TtyWait.READING, TtyWait.UNKNOWN, TtyWait.UNKNOWN])
    monkeypatch.setattr(input_watch.waiting, "look", lambda pid, procs: input_watch.waiting.Look(next(looks)))
    monkeypatch.setattr(input_watch.waiting, "scan_procs", lambda: {})
    now = [0.0]
    timers = Timers(lambda: now[0])
    seen: list[bool | None] = []
    watch = input_watch.InputWatch(timers, lambda: 1000.0, lambda lg, verdict: seen.append(verdict))
    gen = GenPaths(tmp_path / "gen-1", 1, 1)
    gen.dir.mkdir()
    task = TaskRecord(spec=TaskSpec(name="agent", cmd="read x"), id="t1", order=1, timeout=None, retries=0,
                      idle_timeout=None)
    lg = LiveGen(task, gen, LaunchRequest(gen, 1, "agent", pane=True), backfill=False, pid=4242)
    watch.register(lg)
    for _ in range(5):
        now[0] += input_watch.TICK
        timers.run_due()
    assert seen == [True, None]
    watch.unregister(lg)
    assert len(timers) == 0


@pytest.mark.full  # the tmux case runs in CI; this one takes a Zellij session's start
def test_a_live_zellij_worker_blocked_reading_is_waiting_until_it_reads(swarm, fz) -> None:
    """The other backend: in a Zellij pane the worker runs under ``script``, on the inner
    terminal it makes; the judge follows it there. Typed into with write-chars."""
    from zellijtest import FAST

    version = "0.45.0"
    then = "; while [ ! -e done ]; do sleep 0.05; done"
    swarm.write("s.toml", "[[task]]\nname = \"asks\"\ncmd = '''read answer; echo \"got $answer\"" + then + "'''\n")
    env = fz.env(version, **FAST)
    proc = swarm.popen("run", "s.toml", "--backend", "zellij", "--ui", "live", "--require-multiplexer",
                       "--output", "quiet", env=env)
    run = None
    try:
        run = swarm.started()

        def row() -> dict[str, Any]:
            return first_row(swarm, run)

        wait_until(lambda: row().get("waiting_input") is True, timeout=20, what="waiting_input true")
        wait_until(lambda: any("waiting for input" in " ".join(c["argv"]) for c in fz.calls()
                               if c["subcommand"] == "rename-pane"), what="the pane renamed")
        session = json.loads(swarm("status", "--json", run.name).stdout)["multiplexer"]["session"]
        fz.zellij("--session", session, "action", "write-chars", "--pane-id", row()["pane_id"], "--", "swarm\r",
                  version=version)
        wait_until(lambda: row().get("waiting_input") is False, timeout=20, what="waiting_input cleared")
        (swarm.cwd / "done").touch()
        assert proc.wait(timeout=60) == 0
        assert "got swarm" in swarm("logs", run.name, "asks").stdout
    finally:
        (swarm.cwd / "done").touch()
        if proc.poll() is None:
            proc.kill()
        if run is not None:
            kill_run_processes(run.name)


def on_a_terminal(swarm, *args: str, cols: int) -> list[str]:
    """What ``zellij-swarm ARGS`` prints on a terminal ``cols`` columns wide: its lines."""
    import fcntl
    import os
    import pty
    import struct
    import termios

    pid, fd = pty.fork()
    if pid == 0:  # the child: its stdout is the terminal, that wide
        fcntl.ioctl(1, termios.TIOCSWINSZ, struct.pack("HHHH", 24, cols, 0, 0))
        os.chdir(swarm.cwd)
        os.execve(swarm.cmd(*args)[0], swarm.cmd(*args), clean_env())
    out = b""
    try:
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: the child has gone, and the terminal with it
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.waitpid(pid, 0)
        os.close(fd)
    return out.decode().replace("\r\n", "\n").splitlines()


def test_ls_on_an_80_column_terminal_cuts_its_lines_never_wraps_them(swarm) -> None:
    """A run whose counts take more than the row's room wrapped its ``ls`` row at 80 columns
    (``6: 2 f`` / ``ailed, …``). On a terminal every line is cut to its width, as ``status``
    cuts its own; piped, the row is whole (``ls --json`` has every count)."""
    swarm.write("s.txt", "exit 1\nexit 1\ntrue\ntrue\ntrue\ntrue\n")
    assert swarm("run", "s.txt", "--backend", "headless", "--output", "quiet").code == 1
    lines = on_a_terminal(swarm, "ls", cols=80)
    assert len(lines) == 2 and all(width(line) <= 80 for line in lines), lines
    assert lines[1].endswith("…"), lines
    # the counts are what ls is read for: the start, day and minute, leaves them room
    assert "6: 2 failed" in lines[1], lines
    whole = swarm("ls").stdout.splitlines()
    assert whole[1].endswith("6: 2 failed, 4 succeeded") and whole[1].startswith(lines[1][:-1]), whole


def test_status_and_ls_count_a_wide_characters_two_columns_when_they_cut_a_line(swarm) -> None:
    """``status`` and ``ls`` cut every line to the terminal's width by counting characters: a
    swarm and task named in CJK, two columns each, made 110-column lines on an 80-column
    terminal. They count columns as the terminal does now; ``logs``' list of tasks, which cut
    none, too."""
    swarm.write("w.toml", '[swarm]\nname = "' + "構築" * 15 + '"\n[[task]]\nname = "' + "構築" * 18
                + '"\ncmd = "exit 3"\n')
    assert swarm("run", "w.toml", "--backend", "headless", "--output", "quiet").code == 1
    for command in ("status", "ls", "logs"):
        lines = on_a_terminal(swarm, command, cols=80)
        if command == "logs":  # (its last line, on stderr, is a command to copy: whole)
            assert lines.pop().startswith("zellij-swarm: show a task's output with: zellij-swarm logs "), lines
        assert lines and all(width(line) <= 80 for line in lines), (command, lines)
        assert any("構築" in line and line.endswith("…") for line in lines), (command, lines)


@pytest.mark.parametrize("cmd", ["exit 3", "true"])
def test_slot_view_of_a_finished_silent_task_tells_its_recorded_end(swarm, cmd) -> None:
    """A task that printed nothing leaves no files once folded: ``slot-view`` took the slot
    for one no task had run in, under a title naming the task and its end."""
    swarm.write("s.txt", cmd + "\n")
    swarm("run", "s.txt", "-j", "1", "--backend", "headless", "--output", "quiet")
    title, detail = swarm("slot-view", "1", "--once", env=clean_env(COLUMNS="80", LINES="6")).stdout.splitlines()[:2]
    code = 3 if cmd == "exit 3" else 0
    assert title.startswith("slot 1 · task-1 · "), title
    assert detail.startswith(f"exit {code} · ran ") and " · ended " in detail, detail
