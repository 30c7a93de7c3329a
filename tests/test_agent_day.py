"""The agent user's day (issue 24): what ``run``, ``status``, ``ls`` and the joblog show, as
a person meets them — the words and widths in-process, and in a real tmux (its own server,
80x24, read with capture-pane) where the terminal matters: ``run --attach`` inside tmux,
headless output on a terminal, ``status`` of a run with failures."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from swarmtest import Swarm, full, kill_run_processes, wait_until
from tmuxtest import Tmux, outside_env

from zellij_swarm.commands import status as views
from zellij_swarm.engine.progress import ProgressFacts
from zellij_swarm.render.console import STDIN_HINT, describe, progress_line

needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None,
                                reason="tmux is not installed (scripts/setup installs it)")
needs_script = pytest.mark.skipif(shutil.which("script") is None, reason="script (util-linux) is not installed")
RUN_ID = "20261201-190549-1c110c"


def facts(**over: Any) -> ProgressFacts:
    base: dict[str, Any] = dict(counts={"pending": 0, "running": 2, "succeeded": 5}, elapsed=64.0, jobs=2,
                                mean_duration=30.0, running=[("agent-2", 12.0), ("agent-6", 3.0)],
                                waiting=["agent-2", "agent-6"])
    return ProgressFacts(**{**base, **over})


# ----- words and widths, in-process --------------------------------------------------------------------


def test_the_progress_line_names_the_waiting_tasks():
    line = progress_line(facts(), 200)  # the supervisor names them in the progress facts
    assert "waiting: agent-2, agent-6" in line and "waiting for input" not in line


def test_the_eta_stays_to_the_end_from_the_running_tasks():
    # nothing pending: what the mean leaves of the running ones (the longest left, agent-6's 27s)
    assert "ETA 27s" in progress_line(facts(), 200)
    overdue = facts(running=[("agent-2", 45.0)], counts={"running": 1, "succeeded": 5})
    assert "ETA <1s" in progress_line(overdue, 200)
    assert "ETA" not in progress_line(facts(mean_duration=None), 200)  # no task ended: nothing to go by


def test_one_word_per_outcome():
    row = {"name": "a", "status": "succeeded", "exit_code": 0, "duration_s": 1.0}
    assert describe(row) == "a: succeeded (1.0s)"
    assert describe({**row, "status": "timed_out", "exit_code": None}) == "a: timed out (1.0s)"


def status_snapshot() -> dict[str, Any]:
    def task(n: int, status: str, code: int | None, **more: Any) -> dict[str, Any]:
        name = f"agent-{n}" if n != 4 else "agent-4-refactors-the-parser-and-its-tests"
        wt = {"branch": f"swarm/{RUN_ID}/{name}", "base": "45cbef07ee5e0000", "changed_files": n,
              "path": f"/home/u/proj/.zellij-swarm/runs/{RUN_ID}/worktrees/t{n}"}
        return {"name": name, "id": f"t{n}", "status": status, "exit_code": code, "signal": None, "attempts": 1,
                "slot": n, "duration_s": 12.5, "reason": None, "worktree": wt, **more}

    return {"run_id": RUN_ID, "name": "agents", "state": "running", "started_at": 1796051483.0,
            "counts": {"failed": 2, "running": 2, "succeeded": 2},
            "tasks": [task(1, "succeeded", 0), task(2, "failed", 3),
                      task(3, "running", None, waiting_input=True, pane_id="terminal_3"),
                      task(4, "failed", 1, command="claude -p 'refactor the parser, then its tests, then docs'"),
                      task(5, "running", None), task(6, "succeeded", 0)],
            "slots": [], "warnings": []}


def test_status_fits_80_columns_with_short_branches_and_relative_worktrees(monkeypatch):
    monkeypatch.chdir("/")
    text = views.format_status(status_snapshot(), False, 80)
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines), text
    assert sum(RUN_ID in line for line in lines) <= 2, "the run id: in the header and the worktrees' place only"
    assert lines[0].startswith(f"run {RUN_ID} (agents): running")
    assert "1 waiting for input (status --waiting)" in text
    assert re.search(r"^  agent-2 +failed \(exit 3, 12\.5s\)", text, re.M)
    assert re.search(r"^  agent-1 +1 +t1 +swarm/…/agent-1$", text, re.M)
    assert "ok" not in text.split()
    assert any(line.endswith("…") for line in lines), "a long row is cut, not wrapped"


def test_a_worktree_task_whose_name_is_too_long_keeps_its_row_at_80_columns(monkeypatch):
    """The worktrees table follows the task table's rule: a name too long for its column has a
    line of its own and the rest of its row (files changed, path, branch) the next one — the
    cut would take them all."""
    monkeypatch.chdir("/")
    snap = status_snapshot()
    long = "agent-4-refactors-the-parser-and-its-tests-then-the-docs-and-the-changelog"
    snap["tasks"][3] = {**snap["tasks"][3], "name": long,
                        "worktree": {**snap["tasks"][3]["worktree"], "branch": f"swarm/{RUN_ID}/{long[:64]}"}}
    lines = views.format_status(snap, False, 80).splitlines()
    table = lines[next(i for i, line in enumerate(lines) if line.startswith("  TASK  ") and "CHANGED" in line):]
    at = table.index(f"  {long}")
    assert re.match(r"^ +4 +t4 +swarm/…/agent-4-refactors", table[at + 1]), "\n".join(table)


def test_the_hint_to_list_every_task_survives_80_columns(monkeypatch):
    """A run of over 100 tasks lists only its running and failed ones; the line that says so
    is cut at a terminal's width like every line, so the command that lists the rest comes
    first in it, where the cut does not take it."""
    monkeypatch.chdir("/")
    lines = views.format_status(status_snapshot(), False, 80, hidden=189).splitlines()
    hint = next(line for line in lines if "189 tasks not listed" in line)
    assert "`zellij-swarm status --all`" in hint, hint


def test_diff_of_every_task_at_80_columns_keeps_its_counts(tmp_path):
    """``diff`` (every worktree task, a line each) repeated the run's ``swarm/<run-id>/``
    branch on every row and padded to its longest name: at 80 columns every line wrapped. On
    a terminal its lines are fitted as ``status``'s are."""
    from zellij_swarm.commands import diff

    def task(name: str) -> dict[str, Any]:
        return {"id": name, "name": name, "status": "succeeded",
                "worktree": {"path": str(tmp_path / name), "base": "0" * 40, "branch": f"swarm/{RUN_ID}/{name}"}}

    long = "agent-" + "x" * 60
    snap = {"run_id": RUN_ID, "tasks": [task("agent-1"), task(long)]}
    lines = diff.summary(snap, 80).splitlines()
    assert all(len(line) <= 80 for line in lines), lines
    assert lines[0].split()[:2] == ["agent-1", "succeeded"] and lines[0].endswith("branch swarm/…/agent-1"), lines
    assert lines[1] == long and lines[2].split()[0] == "succeeded", lines  # its own line, the rest under
    assert f"branch swarm/{RUN_ID}/agent-1" in diff.summary(snap).splitlines()[0]  # piped: whole


def test_status_waiting_lists_them_with_the_attach_command():
    text = views.format_waiting(status_snapshot(), latest=True)
    assert text.splitlines()[1].split() == ["agent-3", "3", "zellij-swarm", "attach", "agent-3"]
    assert f"attach {RUN_ID} agent-3" in views.format_waiting(status_snapshot(), latest=False)


# ----- as a person meets it: real runs -------------------------------------------------------------------


def test_a_waiting_task_is_counted_in_ls_and_status_and_listed_by_status_waiting(swarm):
    cmd = ('echo \'{"event":"waiting_input"}\' >> "$ZELLIJ_SWARM_HEARTBEAT"; '
           'while [ ! -e done ]; do sleep 0.05; done')
    swarm.write("s.toml", "[[task]]\nname = \"agent-2\"\ncmd = '''" + cmd + "'''\n")
    proc = swarm.popen("run", "s.toml", "--backend", "headless", "--output", "quiet")
    run = None
    try:
        run = swarm.started()
        wait_until(lambda: "waiting for input" in swarm("status").stdout, what="the task waiting")
        assert json.loads(swarm("ls", "--json").stdout)[0]["waiting"] == 1
        assert swarm("ls").stdout.splitlines()[1].split()[5] == "1"  # RUN NAME STATE STARTED (2 words) WAITING
        # headless: no pane to attach to — its output, followed, is where what it asked shows
        assert swarm("status", "--waiting").stdout.splitlines()[1].split() == [
            "agent-2", "1", "zellij-swarm", "logs", "--follow", "agent-2"]
        assert swarm("wait", "--for-input").stdout == "zellij-swarm logs --follow agent-2\n"
    finally:
        (swarm.cwd / "done").touch()
        proc.wait(timeout=30)
        if run is not None:
            kill_run_processes(run.name)


@pytest.mark.parametrize("policy", ["kill", full("warn")])
def test_a_task_waiting_for_input_is_not_idle(swarm, policy):
    """An agent that asked a person something is silent until they answer: with
    ``--idle-timeout`` it was ended (``timed_out (idle_timeout)``) while it waited — or, with
    ``warn``, called idle. Its silence now counts anew while it waits; it ends as it does."""
    cmd = ('echo \'{"event":"waiting_input"}\' >> "$ZELLIJ_SWARM_HEARTBEAT"; '
           'while [ ! -e answer ]; do sleep 0.05; done; echo answered')
    swarm.write("s.toml", "[[task]]\nname = \"agent\"\ncmd = '''" + cmd + "'''\n")
    proc = swarm.popen("run", "s.toml", "--backend", "headless", "--output", "quiet", "--idle-timeout", "0.5s",
                       "--idle-policy", policy)
    run = None
    try:
        run = swarm.started()
        wait_until(lambda: (run / "events.jsonl").read_text().count('"event":"idle_while_waiting"') >= 2,
                   what="the idle watch passing over the waiting task twice")
        (swarm.cwd / "answer").touch()
        assert proc.wait(timeout=30) == 0
    finally:
        (swarm.cwd / "answer").touch()
        proc.wait(timeout=30)
        if run is not None:
            kill_run_processes(run.name)
    row = swarm.tasks()["agent"]
    assert (row["status"], row["warnings"]) == ("succeeded", []), row
    assert '"event":"idle_timeout"' not in (run / "events.jsonl").read_text()


def test_a_task_waiting_for_input_is_not_idle_to_the_run_that_resumes_it(swarm):
    """The neighbour after ``kill -9`` of the supervisor: ``resume`` adopts the waiting agent,
    silent for longer than its limit, and its idle watch fired before the first look for
    input (``--idle-timeout 1s``: a tick of 0.25 s, the look's 0.5 s) — ``timed_out
    (idle_timeout)``, its conversation lost (an adversary, 2 in 2). Whether it waits is looked
    at first; it ends as it does."""
    cmd = ('echo \'{"event":"waiting_input"}\' >> "$ZELLIJ_SWARM_HEARTBEAT"; '
           'while [ ! -e answer ]; do sleep 0.05; done; echo answered')
    swarm.write("s.toml", "[[task]]\nname = \"agent\"\ncmd = '''" + cmd + "'''\n")
    proc = swarm.popen("run", "s.toml", "--backend", "headless", "--output", "quiet", "--idle-timeout", "1s")
    resumed = run = None
    try:
        run = swarm.started()
        wait_until(lambda: '"event":"idle_while_waiting"' in (run / "events.jsonl").read_text(),
                   what="the idle watch passing over the waiting task")
        proc.kill()
        proc.wait(timeout=10)
        resumed = swarm.popen("resume", run.name, "--output", "quiet")
        wait_until(lambda: (run / "events.jsonl").read_text().count('"event":"idle_while_waiting"') >= 2
                   or '"event":"idle_timeout"' in (run / "events.jsonl").read_text(),
                   what="the resumed run's idle watch passing over it")
        (swarm.cwd / "answer").touch()
        assert resumed.wait(timeout=30) == 0
    finally:
        (swarm.cwd / "answer").touch()
        for p in (proc, resumed):
            if p is not None:
                p.kill()
                p.wait(timeout=30)
        if run is not None:
            kill_run_processes(run.name)
    assert swarm.tasks()["agent"]["status"] == "succeeded"
    assert '"event":"idle_timeout"' not in (run / "events.jsonl").read_text()


def test_a_task_that_needs_a_terminal_gets_the_hint(swarm):
    swarm.write("s.toml", "[[task]]\nname = \"tui\"\ncmd = '''python3 -c \"import curses; "
                          "curses.setupterm('no-such-terminal')\"'''\n")
    res = swarm("run", "s.toml", "--backend", "headless")
    [line] = [ln for ln in res.stderr.splitlines() if ln.startswith("tui: failed")]
    assert STDIN_HINT in line and "--ui live" in line


def git_repo_with_a_change(path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    subprocess.run(["git", "-C", str(path), "-c", "user.email=a@b", "-c", "user.name=n", "commit", "-q",
                    "--allow-empty", "-m", "init"], check=True)
    (path / "draft.txt").write_text("not committed\n")


def test_warnings_are_said_as_they_happen_or_counted_at_the_end_in_quiet(swarm):
    git_repo_with_a_change(swarm.cwd)
    res = swarm("run", "--worktree", "--backend", "headless", "--output", "group", "true", ":::", "a")
    warned = [ln for ln in res.stderr.splitlines() if ln.startswith("zellij-swarm: warning [worktree_base]")]
    assert len(warned) == 1 and "uncommitted changes" in warned[0], res.stderr
    assert res.stderr.index(warned[0]) < res.stderr.index("finished in"), "said as it happened"
    quiet = swarm("run", "--worktree", "--backend", "headless", "--output", "quiet", "--json", "true", ":::", "a")
    run = swarm.latest().name
    assert quiet.stderr == f"zellij-swarm: 1 warning(s); read them with: zellij-swarm status {run}\n"
    assert [w["code"] for w in json.loads(quiet.stdout)["warnings"]] == ["worktree_base"]


def test_the_joblog_receive_column_is_the_outputs_byte_count(swarm):
    res = swarm("run", "--backend", "headless", "--joblog", "jl", "echo {}", ":::", "hello", "")
    assert res.code == 0, res
    rows = [line.split("\t") for line in (swarm.cwd / "jl").read_text().splitlines()[1:]]
    assert {r[8]: r[5] for r in rows} == {"echo hello": "6", "echo ''": "1"}  # as GNU parallel counts them


# ----- in a real tmux at 80x24 ------------------------------------------------------------------------------


class Terminal:
    """A shell in an 80x24 tmux pane on the test's own server, with a client attached (through
    ``script``) as a person's terminal would be; commands are typed into it."""

    def __init__(self, tmux: Tmux, cwd: Path) -> None:
        self.tmux = tmux
        bin_dir = Path(sys.executable).parent
        env = outside_env(tmux, TERM="xterm", PATH=f"{bin_dir}:/usr/bin:/bin", HOME=str(cwd), PS1="$ ")
        shell = ["env", *(f"{k}={env[k]}" for k in ("PATH", "HOME", "PS1", "TMUX_TMPDIR")), "bash", "--norc",
                 "--noprofile"]
        tmux("new-session", "-d", "-s", "host", "-x", "80", "-y", "24", "-c", str(cwd), shlex.join(shell))
        self.pane = tmux("display-message", "-p", "-t", "host:", "#{pane_id}").strip()
        attach = f"stty rows 24 cols 80; tmux -S {tmux.socket} attach -t host"
        self.client = subprocess.Popen(["script", "-qfec", attach, "/dev/null"], env=env, stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        # script forwards the end of its stdin as ^D, which would end the shell: a pipe held open
        wait_until(lambda: tmux("list-clients", "-F", "#{client_width}x#{client_height}", check=False).split()
                   == ["80x24"] or self.client.poll() is not None, what="an 80x24 client on session host")
        assert self.client.poll() is None, self.client.communicate(timeout=30)

    def type(self, command: str) -> str:
        """Type ``command`` and return the screen once it has finished (its exit code is shown)."""
        self.tmux("send-keys", "-t", self.pane, "clear", "Enter")
        wait_until(lambda: "clear" not in self.screen(), what="a clear screen")
        self.tmux("send-keys", "-t", self.pane, "-l", f"{command}; echo \"[exit $?]\"")
        self.tmux("send-keys", "-t", self.pane, "Enter")
        def finished() -> str | None:
            screen = self.screen()
            return screen if re.search(r"^\[exit \d+\]$", screen, re.M) else None

        return wait_until(finished, timeout=60, what=f"{command} to finish")

    def screen(self) -> str:
        """The pane's screen with each wrapped line joined back (``-J``): a line longer than the
        terminal is one long line here, not two that each fit."""
        return self.tmux("capture-pane", "-p", "-J", "-t", self.pane)

    def close(self) -> None:
        self.client.kill()
        self.client.communicate(timeout=30)


@pytest.fixture
def terminal(tmux: Tmux, swarm: Swarm) -> Iterator[Terminal]:
    t = Terminal(tmux, swarm.cwd)
    try:
        yield t
    finally:
        t.close()


def check_80(screen: str) -> None:
    """Every line of a screen read with ``-J`` fits 80 columns: none wrapped."""
    assert all(len(row.rstrip()) <= 80 for row in screen.splitlines()), screen


@needs_tmux
@needs_script
def test_run_attach_inside_tmux_keeps_its_output_and_switches_to_the_swarm(swarm, tmux, terminal):
    command = shlex.join(["zellij-swarm", "run", "--backend", "tmux", "--ui", "live", "--attach", "--pane-hold",
                          "100ms", "echo out-{}; exit {}", ":::", "0", "3"])
    screen = terminal.type(command)
    assert swarm.runs(), screen
    run = swarm.latest().name
    assert "zellij-swarm: panes in tmux; see them from any terminal: zellij-swarm attach" in screen.splitlines()
    assert "task-2: failed (exit 3" in screen and "[exit 1]" in screen
    assert tmux("list-clients", "-F", "#{window_name}").split() == [f"swarm-{run}"], "the client shows the swarm"
    kill_run_processes(run)
    pane = swarm("logs", "--stderr", "task-1")  # a pane's one terminal held both streams
    assert pane.code == 2 and "ran in a pane, whose one terminal held its stdout and stderr" in pane.stderr, pane


@needs_tmux
@needs_script
def test_run_attach_of_a_headless_run_keeps_its_output(swarm, tmux, terminal):
    """A headless run has no session for ``--attach`` to show: nothing takes the terminal, so
    the run prints what it prints without the flag (not quiet, as for a client drawn over it)."""
    screen = terminal.type(shlex.join(["zellij-swarm", "run", "--backend", "headless", "--attach", "-j", "1",
                                       "echo out-{}; exit {}", ":::", "0", "3"]))
    lines = screen.splitlines()
    assert [ln for ln in lines if ln.startswith("out-")] == ["out-0", "out-3"], screen
    assert "task-2: failed (exit 3" in screen and "[exit 1]" in screen, screen


@needs_tmux
@needs_script
@pytest.mark.parametrize("attach", [["--attach"], []], ids=["attach", "no-attach"])
def test_a_run_whose_backend_falls_back_to_headless_prints_as_a_headless_run(swarm, tmux, terminal, attach):
    """``--backend zellij`` where Zellij cannot make the run's session (here: no zellij on
    PATH): the run goes on headless. No pane shows a worker, so the output is copied as a
    headless run's is; and with ``--attach`` no session's client ever takes the terminal, so
    nothing is held back — it printed its warning and nothing else, not the tasks' output nor
    their failures (an adversary's find)."""
    screen = terminal.type(shlex.join(["zellij-swarm", "run", "--backend", "zellij", *attach, "-j", "1",
                                       "echo out-{}; exit {}", ":::", "0", "3"]))
    lines = screen.splitlines()
    assert "running headless" in screen, screen
    assert [ln for ln in lines if ln.startswith("out-")] == ["out-0", "out-3"], screen
    assert "task-2: failed (exit 3" in screen and "[exit 1]" in screen, screen


@needs_tmux
@needs_script
def test_headless_on_a_terminal_shows_each_tasks_output_and_status_fits(swarm, tmux, terminal):
    screen = terminal.type(shlex.join(["zellij-swarm", "run", "--backend", "headless", "-j", "1",
                                       "echo out-{}; exit {}", ":::", "0", "3", "0"]))
    lines = screen.splitlines()
    assert [ln for ln in lines if ln.startswith("out-")] == ["out-0", "out-3", "out-0"], screen
    assert "task-2: failed (exit 3" in screen
    screen = terminal.type("zellij-swarm status")
    check_80(screen)
    assert re.search(r"^  task-2 +failed \(exit 3, ", screen, re.M), screen
    assert re.search(r"^  task-1 +succeeded ", screen, re.M), screen


@needs_tmux
@needs_script
@pytest.mark.parametrize("output", ["progress", "quiet"])
def test_a_runs_lines_fit_80_columns_with_each_command_to_copy_whole(swarm, tmux, terminal, output):
    """The lines that end a run name a command to copy, the run's id in it: a failed task's
    `— zellij-swarm logs RUN TASK`, `read them with: zellij-swarm status RUN`, `read any task's
    output with: …`. On an 80-column terminal they were 81 to 93 columns: the terminal wrapped
    them, the run id cut in two (an adversary's find). A command too wide for its line now has
    a line of its own."""
    swarm.write("s.toml", '[[task]]\nname = "deploy-the-frontend"\ncmd = "exit 3"\n'
                          '[[task]]\nname = "ok"\ncmd = "true"\n')
    screen = terminal.type(f"zellij-swarm run s.toml --backend zellij -j 1 --output {output}")
    run = swarm.latest().name
    shown = [ln for ln in screen.splitlines() if run in ln and "records in" not in ln]  # (a path: as long as it is)
    check_80("\n".join(shown))
    lines = [ln.strip() for ln in shown]
    if output == "quiet":
        assert f"zellij-swarm status {run}" in lines, screen
    else:
        assert f"zellij-swarm logs {run} deploy-the-frontend" in lines, screen


# ----- restart on a paused run (item 10) ----------------------------------------------------------------


def test_a_restarted_task_is_handed_out_through_a_pause_and_nothing_else_is():
    from zellij_swarm.engine.scheduler import ReadyQueue

    q = ReadyQueue({"gpu": 1})
    for order, (task, group) in enumerate([("a", "gpu"), ("b", "gpu"), ("c", None)]):
        q.add(task, after=[], priority=0, order=order, group=group)
    assert q.pop() == "a"
    q.pause()
    q.run_through_pause("a")
    q.requeue("a", first=True)  # its generation ended (restart): back first in line
    assert q.pop() == "a" and q.pop() is None, "b and c wait for the unpause"


def test_restart_in_a_paused_run_runs_the_task_again_at_once(swarm):
    swarm.write("p.toml", '[swarm]\njobs = 2\n[[task]]\nname = "agent"\n'
                          'cmd = "echo $ZELLIJ_SWARM_ATTEMPT >> attempts; while [ ! -e go ]; do sleep 0.05; done"\n'
                          '[[task]]\nname = "later"\ncmd = "true"\nafter = ["agent"]\n')
    proc = swarm.popen("run", "p.toml", "--backend", "headless", "--output", "quiet")
    run = None
    try:
        run = swarm.started()
        attempts = swarm.cwd / "attempts"
        wait_until(lambda: attempts.exists() and attempts.read_text() == "1\n", what="the first attempt")
        assert swarm("pause").code == 0
        res = swarm("restart", "agent")
        assert res.code == 0 and "restarted in run" in res.stderr, res.stderr
        wait_until(lambda: attempts.read_text() == "1\n2\n", what="the second attempt, while paused")
        (swarm.cwd / "go").touch()
        snap = wait_until(lambda: (s := json.loads(swarm("status", "--json").stdout))["counts"].get("succeeded") and s,
                          what="agent done")
        assert {t["name"]: t["status"] for t in snap["tasks"]} == {"agent": "succeeded", "later": "pending"}
        assert snap["paused"]["run"] is True
        assert swarm("unpause").code == 0
        assert proc.wait(timeout=60) == 0
    finally:
        (swarm.cwd / "go").touch()
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)
        if run is not None:
            kill_run_processes(run.name)


# ----- a worker's stderr kept apart (item 9) -------------------------------------------------------------


def test_group_and_tag_send_a_workers_stderr_to_stderr_and_logs_shows_both_or_one(swarm):
    res = swarm("run", "--backend", "headless", "--output", "group", "echo out-{}; echo err-{} >&2", ":::", "a")
    assert res.stdout == "out-a\n" and "err-a\n" in res.stderr, res
    tagged = swarm("run", "--backend", "headless", "--output", "tag", "echo out-{}; echo err-{} >&2", ":::", "b")
    assert tagged.stdout == "[task-1] out-b\n" and "[task-1] err-b\n" in tagged.stderr, tagged
    both = swarm("logs", "task-1")
    assert (both.stdout, both.stderr) == ("out-b\n", "err-b\n")
    assert (swarm("logs", "--stdout", "task-1").stdout, swarm("logs", "--stdout", "task-1").stderr) == ("out-b\n", "")
    assert (swarm("logs", "--stderr", "task-1").stdout, swarm("logs", "--stderr", "task-1").stderr) == ("", "err-b\n")


def test_a_worker_that_writes_only_to_stderr_is_not_idle(swarm):
    # 3.2 s of ticks on stderr alone, 0.2 s apart: silent for longer than the 2 s limit, were stderr not output
    cmd = "for i in $(seq 16); do echo tick-{} >&2; sleep 0.2; done"
    res = swarm("run", "--backend", "headless", "--output", "quiet", "--idle-timeout", "2s", cmd, ":::", "x")
    assert res.code == 0, res
    assert swarm.tasks()["task-1"]["status"] == "succeeded"


def test_the_joblog_receive_column_counts_stdout_as_parallel_does(swarm):
    assert swarm("run", "--backend", "headless", "--joblog", "jl", "echo {}; echo err >&2", ":::", "hello").code == 0
    [row] = [line.split("\t") for line in (swarm.cwd / "jl").read_text().splitlines()[1:]]
    assert row[5] == "6"


def test_run_attach_inside_zellij_goes_to_the_swarms_tab_and_keeps_its_output(swarm, fz):
    from zellijtest import FAST, check_calls

    version = "0.45.0"
    fz.host("host", version, client=True)
    own = fz.shell("host", version)
    res = swarm("run", "--backend", "zellij", "--ui", "live", "--attach", "echo {}; exit {}", ":::", "0", "3",
                env=fz.env(version, inside="host", ZELLIJ_PANE_ID=str(own["id"]), **FAST), timeout=60)
    assert res.code == 1, res
    run = swarm.latest().name
    assert "zellij-swarm: panes in Zellij; see them from any terminal: zellij-swarm attach" in res.stderr
    assert "task-2: failed (exit 3" in res.stderr, "the output is as without --attach"
    assert all(len(line) <= 80 for line in res.stderr.splitlines() if "panes in" in line)
    assert fz.session(version, "host")["clients"][0]["tab_id"] == fz.tab(version, run, "host")["id"]
    tab = fz.tab(version, run, "host")["id"]
    actions = [c["argv"] for c in fz.calls() if c["subcommand"] in ("go-to-tab-name", "go-to-tab-by-id")]
    # by id (a mark renames it); never back to the user's tab first: two calls the real server
    # may take in either order (each its own connection)
    assert actions == [["--session", "host", "action", "go-to-tab-by-id", str(tab)]], actions
    check_calls(fz.calls())


@pytest.mark.parametrize(("version", "faults", "ui"), [
    ("0.45.0", "layout_delay_ms=600", "live"), full("0.45.0", "", "live"),
    full("0.44.1", "layout_delay_ms=600", "live"), full("0.45.0", "layout_delay_ms=600", "compact")])
def test_run_inside_zellij_gives_the_client_back_its_tab_when_zellij_lays_the_swarms_tab_out_late(
        swarm, fz, version: str, faults: str, ui: str) -> None:
    """Zellij moves the client to a tab made by ``new-tab`` as it lays the tab out, which can
    be after ``new-tab`` has answered; the client is given back its own tab after that move,
    not before it (the real Zellij, loaded, once kept it on the swarm's tab)."""
    from zellijtest import FAST, check_calls

    fz.host("host", version, client=True)
    own = fz.shell("host", version)
    res = swarm("run", "--backend", "zellij", "--ui", ui, "echo {}; exit {}", ":::", "0", "3",
                env=fz.env(version, faults=faults, inside="host", ZELLIJ_PANE_ID=str(own["id"]), **FAST), timeout=60)
    assert res.code == 1, res
    assert fz.session(version, "host")["clients"][0]["tab_id"] == own["tab_id"]
    assert fz.tab(version, swarm.latest().name, "host")["id"] != own["tab_id"]
    check_calls(fz.calls())


def test_run_inside_zellij_whose_move_back_to_the_users_tab_hangs_runs_in_its_panes_all_the_same(swarm, fz) -> None:
    """Giving the client back its tab is the one call of the tab's making whose failure
    changes nothing else: it hangs to its timeout, the client stays on the swarm's tab, and
    the tasks run in the panes made for them, with no warning."""
    from zellijtest import FAST

    version = "0.45.0"
    fz.host("host", version, client=True)
    own = fz.shell("host", version)
    res = swarm("run", "--backend", "zellij", "--ui", "live", "--max-visible-panes", "2", "echo {}; exit {}", ":::",
                "0", "3", env=fz.env(version, faults="hang:go-to-tab-by-id", inside="host",
                                     ZELLIJ_PANE_ID=str(own["id"]), ZELLIJ_SWARM_ZELLIJ_CALL_TIMEOUT_MS="1000",
                                     **FAST), timeout=60)
    assert res.code == 1, res
    assert "warning" not in res.stderr and "headless" not in res.stderr, res.stderr
    assert all(row["pane_id"] for row in swarm.tasks().values()), swarm.tasks()
    tab = fz.tab(version, swarm.latest().name, "host")
    assert fz.session(version, "host")["clients"][0]["tab_id"] == tab["id"]
