"""One rule finds the state directory for every command, ``run`` included (issue 24 item 2),
and a command that is not given a run takes the one it can only mean (item 3): read-only
commands the newest run, commands that act the only run that qualifies."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from swarmtest import Swarm, clean_env

from zellij_swarm.config import state_dir


def repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


def swarm_in(cwd: Path) -> Swarm:
    cwd.mkdir(parents=True, exist_ok=True)
    return Swarm(cwd)


# ----- the rule, in-process ------------------------------------------------------------------------


def test_flag_then_variable_then_the_nearest_one_above(tmp_path):
    top = repo(tmp_path / "project")
    deep = top / "src" / "pkg"
    deep.mkdir(parents=True)
    env = {"HOME": str(tmp_path)}
    assert state_dir.find("here", env, deep) == state_dir.StateDir(deep / "here", "flag --state-dir")
    assert state_dir.find(None, {**env, "ZELLIJ_SWARM_STATE_DIR": "/x/y"}, deep).path == Path("/x/y")
    # nothing yet: where `run` creates it, the git top level
    found = state_dir.find(None, env, deep)
    assert (found.path, found.source, found.looked) == (top / ".zellij-swarm", "default", (deep, deep.parent, top))
    (top / ".zellij-swarm").mkdir()
    assert state_dir.find(None, env, deep).path == top / ".zellij-swarm"
    (deep / ".zellij-swarm").mkdir()  # the nearest wins
    assert state_dir.find(None, env, deep).path == deep / ".zellij-swarm"


def test_the_walk_stops_at_the_git_top_level_and_at_home(tmp_path):
    (tmp_path / ".zellij-swarm").mkdir()  # above the repository: another project's
    top = repo(tmp_path / "project")
    assert state_dir.find(None, {"HOME": "/nowhere"}, top / ".").path == top / ".zellij-swarm"
    home = tmp_path / "home"
    (home / "notes").mkdir(parents=True)
    found = state_dir.find(None, {"HOME": str(home)}, home / "notes")  # no repository: not above $HOME
    assert (found.path, found.looked) == (home / "notes" / ".zellij-swarm", (home / "notes", home))
    # a $HOME reached through a symlink (as /home -> /data/home): the walk, up the real
    # directories, went on above it and found another's state directory there
    (tmp_path / "link").symlink_to(home)
    found = state_dir.find(None, {"HOME": str(tmp_path / "link")}, home / "notes")
    assert (found.path, found.looked) == (home / "notes" / ".zellij-swarm", (home / "notes", home))


@pytest.mark.skipif(os.geteuid() != 0, reason="making a directory another user owns needs root")
def test_a_candidate_someone_else_owns_is_skipped_with_one_warning(tmp_path):
    top = repo(tmp_path / "project")
    (top / "src").mkdir()
    theirs = top / "src" / ".zellij-swarm"
    theirs.mkdir()
    os.chown(theirs, 12345, 12345)
    found = state_dir.find(None, {"HOME": str(tmp_path)}, top / "src")
    assert found.path == top / ".zellij-swarm"
    assert found.skipped is not None and str(theirs) in found.skipped and "uid 12345" in found.skipped


# ----- as a person meets it ------------------------------------------------------------------------


def test_run_at_the_top_then_status_logs_from_a_subdirectory(tmp_path):
    top = repo(tmp_path / "project")
    sub = swarm_in(top / "src" / "deep")
    res = sub("run", "--backend", "headless", "--output", "quiet", "echo out-{}; exit {}", ":::", "0", "3")
    assert res.code == 1, res
    assert (top / ".zellij-swarm" / "runs").is_dir() and not (sub.cwd / ".zellij-swarm").exists()
    other = swarm_in(top / "docs")  # another directory of the project (a new tmux window's)
    status = other("status")
    assert status.code == 0 and "task-2" in status.stdout, status
    assert other("logs", "task-2").stdout == "out-3\n"


def test_nothing_found_says_where_it_looked_and_how_to_point_elsewhere(tmp_path):
    top = repo(tmp_path / "project")
    res = swarm_in(top / "src")("status")
    assert res.code == 2 and res.stderr.count("\n") == 1, res
    assert f"looked for .zellij-swarm in {top / 'src'}, {top}" in res.stderr
    assert "--state-dir DIR" in res.stderr and "ZELLIJ_SWARM_STATE_DIR" in res.stderr


# ----- the run a command takes when none is named (item 3) ------------------------------------------


def test_read_only_commands_take_the_newest_run(swarm):
    swarm("run", "--backend", "headless", "--output", "quiet", "exit {}", ":::", "0")
    assert swarm("proof").code == 0
    assert swarm("report", "--html", str(swarm.cwd / "r.html")).code == 0
    assert "<html" in (swarm.cwd / "r.html").read_text().lower()


def test_retry_takes_the_one_ended_run_with_failures_else_lists_them(swarm):
    swarm("run", "--backend", "headless", "--output", "quiet", "exit {}", ":::", "0")
    first = swarm("run", "--backend", "headless", "--output", "quiet", "exit {}", ":::", "3")
    assert first.code == 1
    failing = swarm.latest().name
    res = swarm("retry", "--output", "quiet")  # the run that succeeded does not qualify
    assert res.code == 1, res
    assert swarm.tasks(swarm.state_dir / "runs" / failing)["task-1"]["attempts"] == 2
    swarm("run", "--backend", "headless", "--output", "quiet", "exit {}", ":::", "4")
    res = swarm("retry")
    assert res.code == 2 and res.stderr.count("\n") == 1, res
    assert "2 runs are ended with tasks that did not succeed" in res.stderr and failing in res.stderr
    assert "name the RUN to retry" in res.stderr


def test_acting_commands_without_a_running_run_say_so(swarm):
    swarm("run", "--backend", "headless", "--output", "quiet", "exit {}", ":::", "0")
    for args in (("cancel",), ("pause",), ("unpause",), ("restart", "task-1"), ("add", "--", "true")):
        res = swarm(*args)
        assert res.code == 2 and res.stderr.count("\n") == 1, (args, res)
        assert "is running: name the RUN to" in res.stderr, (args, res)


def test_help_and_errors_call_the_run_RUN(swarm):
    for command in ("proof", "report", "retry", "cancel", "pause", "restart", "add", "resume", "status", "logs"):
        usage = swarm(command, "--help").stdout.splitlines()[0]
        assert "RUN" in usage and "RUN_ID" not in usage, usage


def test_collect_takes_the_one_run_holding_worktrees(swarm):
    subprocess.run(["git", "init", "-q", str(swarm.cwd)], check=True)
    subprocess.run(["git", "-C", str(swarm.cwd), "-c", "user.email=a@b", "-c", "user.name=n", "commit", "-q",
                    "--allow-empty", "-m", "init"], check=True)
    swarm("run", "--backend", "headless", "--output", "quiet", "true", ":::", "plain")  # no worktree
    assert swarm("run", "--worktree", "--backend", "headless", "--output", "quiet", "echo x > {}.txt", ":::",
                 "a").code == 0
    res = swarm("collect", "task-1")
    assert res.code == 0 and re.search(r"\b[0-9a-f]{7,}\b", res.stdout), res


@pytest.mark.parametrize("command", [("ls",), ("status",), ("prune",), ("logs",), ("proof",)])
def test_a_stray_file_among_the_runs_is_no_run(swarm, command):
    """A file a user left in ``runs/`` (notes, an editor's backup) made every command that
    lists the runs an internal error (NotADirectoryError reading ``runs/notes.txt/run.json``)."""
    swarm.write("t.txt", "true\n")
    assert swarm("run", "t.txt").code == 0
    (swarm.runs()[0].parent / "notes.txt").write_text("mine\n")
    res = swarm(*command)
    assert res.code == 0 and "internal error" not in res.stderr, res


@pytest.mark.parametrize("command", ["ls", "status"])
def test_a_state_directory_that_is_a_file_is_said(tmp_path, command):
    (tmp_path / ".zellij-swarm").write_text("")
    res = swarm_in(tmp_path)(command)
    assert "internal error" not in res.stderr and "is not a directory" in res.stderr, res


@pytest.mark.parametrize("command", [("ls",), ("status",), ("logs", "x"), ("prune",), ("cancel",)])
@pytest.mark.parametrize("given", ["flag", "env"])
def test_a_state_directory_that_is_a_file_is_bad_input_said_once(tmp_path, command, given):
    """``--state-dir /etc/passwd``: a warning that it is no directory, then an error that it
    holds no runs (two lines; ``ls`` said "no runs", exit 0). One line, exit 2, naming the
    path and where it came from."""
    afile = tmp_path / "afile"
    afile.write_text("")
    if given == "flag":
        res = swarm_in(tmp_path)(*command, "--state-dir", str(afile))
    else:
        res = swarm_in(tmp_path)(*command, env=clean_env(ZELLIJ_SWARM_STATE_DIR=str(afile)))
    source = "flag --state-dir" if given == "flag" else "env ZELLIJ_SWARM_STATE_DIR"
    assert res.code == 2 and res.stderr == (f"zellij-swarm: error: state directory {afile} (from {source}) is not a "
                                            "directory\n"), res
