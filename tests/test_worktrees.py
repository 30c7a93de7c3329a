"""A worktree per agent (``worktree = true``, issue 15): each such task runs in a git worktree
of its own under the run's directory, on a branch ``swarm/<run-id>/<task>`` made from the
``HEAD`` the run started at; a retry continues in it; ``status`` shows it; ``prune`` removes
it without losing work. Every repository here is made in the test's own directory (never
this project's), and every run ends every process it started."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from swarmtest import Swarm, clean_env, kill_run_processes, validate, wait_until

from zellij_swarm.config.swarmfile import TaskSpec
from zellij_swarm.worker import worktree


def git_env(swarm: Swarm, **extra: str) -> dict[str, str]:
    """An environment in which git knows who commits, reads no config of this machine's, and
    never finds a repository above the test's directory."""
    return clean_env(GIT_AUTHOR_NAME="Agent", GIT_AUTHOR_EMAIL="agent@example.com", GIT_COMMITTER_NAME="Agent",
                     GIT_COMMITTER_EMAIL="agent@example.com", GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1",
                     GIT_CEILING_DIRECTORIES=str(swarm.cwd.parent), **extra)


def git(swarm: Swarm, *args: str, where: Path | None = None) -> str:
    p = subprocess.run(["git", "-C", str(where or swarm.cwd), *args], capture_output=True, text=True, timeout=30,
                       env=git_env(swarm), check=True)
    return p.stdout.strip()


def repo(swarm: Swarm, files: dict[str, str]) -> str:
    """Make the test's directory a repository holding ``files``, committed; its HEAD."""
    for name, text in files.items():
        (swarm.cwd / name).parent.mkdir(parents=True, exist_ok=True)
        swarm.write(name, text)
    git(swarm, "init", "-q", "-b", "main")
    git(swarm, "add", "-A")
    git(swarm, "commit", "-q", "-m", "start")
    return git(swarm, "rev-parse", "HEAD")


def run(swarm: Swarm, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, Path]:
    res = swarm("run", *args, "--backend", "headless", "--output", "quiet", env=env or git_env(swarm))
    return res.code, res.stderr, swarm.latest() if swarm.runs() else swarm.cwd


def real(path: Path | str) -> str:
    return os.path.realpath(path)


COMMITS = "echo x > x; git add x; git commit -qm x"  # a task that leaves a commit on its branch


def worktree_swarm(**commands: str) -> str:
    """A swarm file whose tasks (name=command, in order: t1, t2, …) each run in a worktree."""
    return "[swarm]\nworktree = true\n" + "".join(f"[[task]]\nname = {name!r}\ncmd = {cmd!r}\n"
                                                  for name, cmd in commands.items())


def swarm_branches(swarm: Swarm) -> list[str]:
    return git(swarm, "for-each-ref", "--format=%(refname:short)", "refs/heads/swarm").split()


def test_each_task_runs_in_a_worktree_of_its_own_on_a_branch_of_its_own(swarm: Swarm) -> None:
    head = repo(swarm, {"README": "hello\n", "sub/keep": "", "s.toml": """
[swarm]
jobs = 3

[[task]]
name = "fix: the bug!"
cmd = "pwd -P > where; printf a > a.txt; printf b > b.txt; git add a.txt b.txt; git commit -qm work; \
printf more >> README; printf c > c.txt"

[[task]]
name = "fix/the bug"
cwd = "sub"
cmd = "pwd -P > where"

[[task]]
name = "../.lock"
cmd = "pwd -P > where"

[[task]]
name = "here"
worktree = false
cmd = "pwd -P > where-here"
"""})
    code, err, rundir = run(swarm, "s.toml", "--worktree")
    assert (code, err) == (0, "")
    rid = rundir.name
    wt = {tid: rundir / "worktrees" / tid for tid in ("t1", "t2", "t3")}
    # each worker ran in its worktree (the task's cwd taken inside it), all under the run's directory
    assert [(wt["t1"] / "where").read_text().strip(), (wt["t2"] / "sub" / "where").read_text().strip(),
            (wt["t3"] / "where").read_text().strip()] == [real(wt["t1"]), real(wt["t2"] / "sub"), real(wt["t3"])]
    assert sorted(os.listdir(rundir / "worktrees")) == ["t1", "t2", "t3"]  # "here" opted out
    assert (swarm.cwd / "where-here").read_text().strip() == real(swarm.cwd)
    assert not (swarm.cwd / "a.txt").exists() and not (swarm.cwd / "where").exists()
    # branches: names mapped to valid ones, a clash resolved with the task id
    assert swarm_branches(swarm) == [f"swarm/{rid}/fix-the-bug", f"swarm/{rid}/fix-the-bug-t2", f"swarm/{rid}/lock"]
    assert git(swarm, "rev-list", "--count", f"{head}..swarm/{rid}/fix-the-bug") == "1"
    listed = git(swarm, "worktree", "list", "--porcelain")
    assert all(f"worktree {real(p)}" in listed for p in wt.values())
    assert json.loads((rundir / "run.json").read_text())["worktree_base"] == {"repo": real(swarm.cwd), "commit": head}
    validate(json.loads((rundir / "run.json").read_text()), "run")
    tasks = swarm.tasks()
    assert tasks["fix: the bug!"]["worktree"] == {"path": str(wt["t1"]), "branch": f"swarm/{rid}/fix-the-bug",
                                                  "base": head, "changed_files": 5}  # a b README c where
    assert [tasks[n]["worktree"]["changed_files"] for n in ("fix/the bug", "../.lock")] == [1, 1]
    assert "worktree" not in tasks["here"]
    # said once in the snapshot and the text status: no git runs for it there
    status = swarm("status")
    assert status.code == 0
    lines = status.stdout.splitlines()
    # paths under the directory named once above them; the run's branches short (issue 24 item 12)
    at = lines.index(f"worktrees from commit {head[:7]}, in .zellij-swarm/runs/{rid}/worktrees/:")
    assert [ln.split() for ln in lines[at + 1:at + 5]] == [
        ["TASK", "CHANGED", "PATH", "BRANCH"],
        ["fix:", "the", "bug!", "5", "t1", "swarm/…/fix-the-bug"],
        ["fix/the", "bug", "1", "t2", "swarm/…/fix-the-bug-t2"],
        ["../.lock", "1", "t3", "swarm/…/lock"]]
    assert git(swarm, "status", "--porcelain") == "?? where-here"  # the source checkout: only what "here" did


def test_the_base_is_head_when_the_run_started_even_when_head_moves(swarm: Swarm) -> None:
    head = repo(swarm, {"s.toml": """
[swarm]
jobs = 1

[[task]]
name = "mover"
cmd = "git commit -q --allow-empty -m moved"

[[task]]
name = "agent"
worktree = true
after = ["mover"]
cmd = "git rev-parse HEAD > head"
"""})
    code, err, rundir = run(swarm, "s.toml")
    assert (code, err) == (0, "")
    assert git(swarm, "rev-parse", "HEAD") != head  # the mover moved the source's HEAD
    assert (rundir / "worktrees" / "t2" / "head").read_text().strip() == head
    assert swarm.tasks()["agent"]["worktree"]["base"] == head


def test_a_retry_continues_in_the_same_worktree(swarm: Swarm) -> None:
    repo(swarm, {"s.toml": """
[[task]]
name = "flaky"
worktree = true
retries = 1
cmd = "if [ -e first ]; then echo again > second; else touch first; exit 3; fi"
"""})
    code, err, rundir = run(swarm, "s.toml")
    assert (code, err) == (0, "")
    row = swarm.tasks()["flaky"]
    assert (row["status"], row["attempts"], [a["status"] for a in row["history"]]) == (
        "succeeded", 2, ["failed", "succeeded"])
    assert os.listdir(rundir / "worktrees") == ["t1"]
    assert sorted(os.listdir(rundir / "worktrees" / "t1")) == [".git", "first", "s.toml", "second"]
    assert row["worktree"]["changed_files"] == 2
    assert len(swarm_branches(swarm)) == 1


def test_prune_removes_worktrees_keeps_work_and_refuses_uncommitted_work_unless_forced(swarm: Swarm) -> None:
    head = repo(swarm, {"s.toml": worktree_swarm(kept=COMMITS, dirty="echo y > notes.txt", idle="true")})
    code, _, rundir = run(swarm, "s.toml")
    assert code == 0
    rid = rundir.name
    wt = {tid: rundir / "worktrees" / tid for tid in ("t1", "t2", "t3")}
    dry = swarm("prune", "--dry-run", env=git_env(swarm))
    assert (dry.code, dry.stdout.splitlines()) == (0, [
        f"would remove worktree {wt['t1']} (task 'kept' of run {rid})",
        f"would keep worktree {wt['t2']} (task 'dirty' of run {rid}): uncommitted work in 1 file (notes.txt); "
        "commit it there, or prune --force to discard it",
        f"would remove worktree {wt['t3']} (task 'idle' of run {rid})"])
    assert all(p.exists() for p in wt.values())
    res = swarm("prune", "--older-than", "1ms", env=git_env(swarm))
    assert res.code == 1
    assert res.stdout.splitlines() == [
        f"removed worktree {wt['t1']} (task 'kept' of run {rid}); kept its branch swarm/{rid}/kept (1 commit)",
        f"kept worktree {wt['t2']} (task 'dirty' of run {rid}): uncommitted work in 1 file (notes.txt); "
        "commit it there, or prune --force to discard it",
        f"removed worktree {wt['t3']} (task 'idle' of run {rid}); deleted its branch swarm/{rid}/idle, which held "
        "no commits",
        f"kept run {rid} ({rundir}): its worktrees are in it"]
    assert res.stderr == ("zellij-swarm: error: kept 1 worktree of ended runs (above) so as not to lose work; "
                          "save it as its line says, or prune --force to discard it\n")
    assert [p.exists() for p in wt.values()] == [False, True, False]
    assert swarm_branches(swarm) == [f"swarm/{rid}/dirty", f"swarm/{rid}/kept"]
    forced = swarm("prune", "--older-than", "1ms", "--force", env=git_env(swarm))
    assert (forced.code, forced.stdout.splitlines()) == (0, [
        f"removed worktree {wt['t2']} (task 'dirty' of run {rid}); deleted its branch swarm/{rid}/dirty, which "
        "held no commits",
        f"removed run {rid} ({rundir})"])
    assert not rundir.exists()
    assert swarm_branches(swarm) == [f"swarm/{rid}/kept"]  # the work stays, on its branch
    assert git(swarm, "rev-list", "--count", f"{head}..swarm/{rid}/kept") == "1"
    assert git(swarm, "worktree", "list", "--porcelain").count("worktree ") == 1


def test_prune_forgets_a_worktree_deleted_by_hand_and_its_empty_branch(swarm: Swarm) -> None:
    """A worktree the user deleted by hand (``rm -rf``): ``prune`` said nothing of it, and the
    repository kept its record: its branch stayed checked out there (``+`` in ``git branch``;
    no other worktree could check it out) until a ``git worktree prune`` of the whole
    repository. It now forgets that record, the run's own only, and its branch goes as a
    removed worktree's does: kept with its commits, deleted without."""
    import shutil

    head = repo(swarm, {"s.toml": worktree_swarm(kept=COMMITS, idle="true", away="true")})
    code, _, rundir = run(swarm, "s.toml")
    assert code == 0
    rid = rundir.name
    wt = {tid: rundir / "worktrees" / tid for tid in ("t1", "t2")}
    locked = rundir / "worktrees" / "t3"  # one the user locked (on a drive not mounted, say): left as it is
    git(swarm, "worktree", "lock", str(locked))
    for path in [*wt.values(), locked]:
        shutil.rmtree(path)
    elsewhere = swarm.cwd.parent / "not-the-runs"  # another worktree deleted by hand: not the run's to forget
    git(swarm, "worktree", "add", "-q", "-b", "theirs", str(elsewhere))
    shutil.rmtree(elsewhere)
    what = {tid: f"git's record of worktree {path} (task {name!r} of run {rid}), deleted or moved by hand"
            for (tid, path), name in zip(wt.items(), ("kept", "idle"), strict=True)}
    dry = swarm("prune", "--dry-run", env=git_env(swarm))
    assert (dry.code, dry.stdout.splitlines()) == (0, [f"would remove {what['t1']}", f"would remove {what['t2']}"])
    res = swarm("prune", "--older-than", "1ms", env=git_env(swarm))
    assert (res.code, res.stdout.splitlines()) == (0, [
        f"removed {what['t1']}; kept its branch swarm/{rid}/kept (1 commit)",
        f"removed {what['t2']}; deleted its branch swarm/{rid}/idle, which held no commits",
        f"removed run {rid} ({rundir})"]), res
    listed = git(swarm, "worktree", "list", "--porcelain")
    assert str(wt["t1"]) not in listed and str(wt["t2"]) not in listed and "theirs" in listed
    assert f"{real(locked)}\0" in listed.replace("\n", "\0")
    assert swarm_branches(swarm) == [f"swarm/{rid}/away", f"swarm/{rid}/kept"]
    assert git(swarm, "rev-list", "--count", f"{head}..swarm/{rid}/kept") == "1"


@pytest.mark.parametrize("how", ["flag", "env", "task"])
def test_outside_a_git_repository_a_worktree_run_is_bad_input_and_nothing_runs(swarm: Swarm, how: str) -> None:
    marker = swarm.cwd / "ran"
    key = "worktree = true\n" if how == "task" else ""
    swarm.write("s.toml", f'[[task]]\nname = "a"\n{key}cmd = "touch {marker}"\n')
    env = git_env(swarm, **({"ZELLIJ_SWARM_WORKTREE": "yes"} if how == "env" else {}))
    res = swarm("run", "s.toml", "--backend", "headless", *(["--worktree"] if how == "flag" else []), env=env)
    why = {"flag": "worktree is on (from flag --worktree)", "env": "worktree is on (from env ZELLIJ_SWARM_WORKTREE)",
           "task": "task 'a' has worktree = true"}[how]
    assert (res.code, res.stderr) == (2, f"zellij-swarm: error: not a git repository: {swarm.cwd} ({why}, and "
                                         "worktrees are made from the repository the run starts in)\n")
    assert swarm.runs() == [] and not marker.exists()


@pytest.mark.parametrize("files, committed, needle", [
    ({"s.toml": '[[task]]\nname = "a"\nworktree = "maybe"\ncmd = "true"\n'}, True,
     "s.toml:3: task 'a': invalid worktree 'maybe'"),
    ({"s.toml": '[[task]]\nname = "a"\nworktree = true\ncwd = "/"\ncmd = "true"\n'}, True,
     "task 'a': cwd / is outside the git repository"),
    ({"s.toml": '[[task]]\nname = "a"\nworktree = true\ncmd = "true"\n'}, False, "has no commit yet"),
])
def test_worktree_bad_input_is_one_line_and_exit_2(swarm: Swarm, files: dict[str, str], committed: bool,
                                                   needle: str) -> None:
    if committed:
        repo(swarm, files)
    else:
        swarm.write("s.toml", files["s.toml"])
        git(swarm, "init", "-q")
    res = swarm("run", "s.toml", "--backend", "headless", env=git_env(swarm))
    assert res.code == 2 and res.stderr.count("\n") == 1 and needle in res.stderr, res.stderr
    assert swarm.runs() == []


def test_uncommitted_changes_of_the_source_are_not_carried_over_and_said_once(swarm: Swarm) -> None:
    head = repo(swarm, {"README": "committed\n", "s.toml": """
[swarm]
worktree = true

[[task]]
name = "a"
cmd = "cat README > seen"

[[task]]
name = "b"
cmd = "cat README > seen"
"""})
    swarm.write("README", "edited, not committed\n")
    swarm.write("scratch.txt", "untracked\n")
    code, _, rundir = run(swarm, "s.toml")
    assert code == 0
    assert [(rundir / "worktrees" / t / "seen").read_text() for t in ("t1", "t2")] == ["committed\n"] * 2
    said = [w for w in swarm.summary()["warnings"] if w["code"] == "worktree_base"]
    assert said == [{"code": "worktree_base", "task": None, "message": (
        f"the checkout {real(swarm.cwd)} has uncommitted changes (2 files, untracked ones included): worktrees start "
        f"from its HEAD commit {head[:12]} and do not have them")}]
    events = [json.loads(line) for line in (rundir / "events.jsonl").read_text().splitlines()]
    assert [e["code"] for e in events if e["event"] == "warning"] == ["worktree_base"]


def test_a_worktree_that_cannot_be_made_fails_its_generation_with_the_reason(swarm: Swarm) -> None:
    marker = swarm.cwd / "ran"
    repo(swarm, {"s.toml": f'[[task]]\nname = "a"\nworktree = true\nretries = 1\ncmd = "touch {marker}"\n'})
    git(swarm, "branch", "swarm")  # refs/heads/swarm is a file: no branch swarm/<run>/… can be made
    code, _, rundir = run(swarm, "s.toml")
    row = swarm.tasks()["a"]
    assert (code, row["status"], row["reason"], row["attempts"], row["exit_code"]) == (
        1, "failed", "worktree_failed", 2, None)
    message = row["warnings"][0]["message"]
    assert message.startswith(f"cannot make the worktree of task 'a' ({rundir / 'worktrees' / 't1'}): git worktree: ")
    assert "'refs/heads/swarm' exists" in message
    assert not marker.exists() and "worktree" not in row


def test_the_base_and_the_worktrees_survive_resume(swarm: Swarm) -> None:
    gate = swarm.cwd / "gate"
    head = repo(swarm, {"s.toml": f"""
[swarm]
jobs = 1
worktree = true

[[task]]
name = "a"
cmd = "until [ -e {gate} ]; do sleep 0.02; done; echo a > a"

[[task]]
name = "b"
cmd = "git rev-parse HEAD > head"
"""})
    proc = swarm.popen("run", "s.toml", "--backend", "headless", "--output", "quiet", env=git_env(swarm))
    rundir = swarm.started()
    try:
        wait_until(lambda: (rundir / "slots/slot-1/gen-1/claim").exists(), what="the worker started")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        git(swarm, "commit", "-q", "--allow-empty", "-m", "moved while nobody supervised")
        gate.touch()
        res = swarm("resume", rundir.name, "--output", "quiet", env=git_env(swarm))
        assert res.code == 0, res.stderr
    finally:
        gate.touch()
        if proc.poll() is None:
            proc.kill()
        kill_run_processes(rundir.name)
    assert (rundir / "worktrees" / "t2" / "head").read_text().strip() == head
    tasks = swarm.tasks()
    assert [tasks[n]["worktree"]["path"] for n in ("a", "b")] == [str(rundir / "worktrees" / t) for t in ("t1", "t2")]
    assert tasks["a"]["worktree"]["changed_files"] == 1


# ----- the pieces ----------------------------------------------------------------------------


def test_task_names_become_valid_branch_names_and_clashes_get_the_task_id(swarm: Swarm) -> None:
    names = ["fix: the bug!", "fix/the bug", "../..", "-lead", "a..b", "x.lock.lock", "@{u}", "ünïcödé",
             "line\nbreak", "HEAD", "a" * 200, "tail.", "t3"]
    given = worktree.BranchNames("20261130-141323-56d8ea")
    tasks = [(f"t{i}", name) for i, name in enumerate(names, 1)]
    branches = [given.of(tid, tasks) for tid, _ in tasks]
    assert [b.removeprefix("swarm/20261130-141323-56d8ea/") for b in branches] == [
        "fix-the-bug", "fix-the-bug-t2", "t3", "lead", "a.b", "x", "u", "n-c-d", "line-break", "HEAD", "a" * 64,
        "tail", "t3-t13"]
    for branch in branches:  # git's own rule, for every one
        subprocess.run(["git", "check-ref-format", "--branch", branch], check=True, capture_output=True, timeout=30)
    assert given.of("t2", tasks[:1]) == branches[1]  # asked again, with tasks added or not: the same


def test_adding_a_worktree_waits_for_another_swarm_adding_one_to_the_same_repository(
        swarm: Swarm, monkeypatch: pytest.MonkeyPatch) -> None:
    head = repo(swarm, {"README": "x\n"})
    monkeypatch.setattr(worktree, "LOCK_TIMEOUT", 0.2)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(swarm.cwd.parent))
    wts = worktree.Worktrees(worktree.Base(real(swarm.cwd), head), run_dir=swarm.cwd / "run", run_id="R",
                             default=True)
    spec = TaskSpec(name="a", cmd="true")
    fd = os.open(swarm.cwd / ".git", os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(worktree.WorktreeError, match="stayed locked by another swarm adding a worktree"):
            wts.ready("t1", spec, cwd=str(swarm.cwd), tasks=lambda start: [("t1", spec)])
    finally:
        os.close(fd)
    made = wts.ready("t1", spec, cwd=str(swarm.cwd), tasks=lambda start: [("t1", spec)])
    assert (made.branch, made.workdir(str(swarm.cwd))) == ("swarm/R/a", str(swarm.cwd / "run" / "worktrees" / "t1"))


def test_a_run_planned_without_worktrees_fails_a_task_that_asks_for_one_later(tmp_path: Path) -> None:
    """A task added to a running swarm (``add``) that asks for a worktree, in a run that
    resolved no base when it started: its generation fails, saying why."""
    wts = worktree.Worktrees(None, run_dir=tmp_path, run_id="R", default=False)
    spec = TaskSpec(name="late", cmd="true", worktree=True)
    assert wts.wanted(spec) and not wts.wanted(TaskSpec(name="other", cmd="true"))
    with pytest.raises(worktree.WorktreeError, match="the run has no base commit for worktrees"):
        wts.ready("t9", spec, cwd=str(tmp_path), tasks=lambda start: [("t9", spec)])
    assert not (tmp_path / "worktrees").exists()


@pytest.mark.parametrize("how", ["add", "api"])
def test_a_worktree_task_added_to_a_run_without_a_base_is_refused_at_once(swarm: Swarm, how: str) -> None:
    """``add`` of a task with ``worktree = true`` to a swarm that started with none said
    "added", then failed every attempt of it (``worktree_failed``): refused at once, one line,
    exit 2 (``Run.add``: a ``UsageError``), nothing added, the run going on."""
    from zellij_swarm import Task, errors, open_run

    repo(swarm, {"README": "x\n"})
    swarm.write("late.toml", '[[task]]\nname = "late"\ncmd = "echo late"\nworktree = true\n')
    swarm.write("first.txt", "until [ -e go ]; do sleep 0.02; done\n")
    proc = swarm.popen("run", "first.txt", "--backend", "headless", "--output", "quiet", env=git_env(swarm))
    run_dir = swarm.started()
    try:
        wait_until(lambda: (run_dir / "slots/slot-1/gen-1/claim").exists(), what="the first task started")
        why = "task 'late' wants a worktree, and the run has no base commit for worktrees"
        if how == "add":
            res = swarm("add", run_dir.name, "late.toml", env=git_env(swarm))
            assert res.code == 2 and why in res.stderr and len(res.stderr.splitlines()) == 1, res
        else:
            with pytest.raises(errors.UsageError, match=why):
                open_run(run_dir.name, state_dir=swarm.cwd / ".zellij-swarm").add(Task("echo late", name="late",
                                                                                       worktree=True))
        (swarm.cwd / "go").touch()
        assert proc.wait(timeout=60) == 0, proc.stderr.read()
    finally:
        (swarm.cwd / "go").touch()
        proc.kill()
        kill_run_processes(run_dir.name)
    assert list(swarm.tasks()) == ["task-1"]


def test_a_branch_name_counts_the_tasks_the_run_let_go_of(swarm: Swarm) -> None:
    """Branch names are given in id order over every worktree task, so a retry or a resume
    gives the same ones. A task that ended before any later one was dispatched (skipped: its
    dependency failed) and was let go (``EndedTasks``) dropped out of that order: the next task
    of the same name took its branch, which a retry of it then found taken."""
    repo(swarm, {"README": "x\n", "s.toml": """
[swarm]
jobs = 1

[[task]]
name = "setup"
cmd = "false"

[[task]]
name = "fix:bug"
cmd = "true"
after = ["setup"]

[[task]]
name = "between"
worktree = false
cmd = "sleep 1"

[[task]]
name = "fix bug"
cmd = "true"
"""})
    code, err, rundir = run(swarm, "s.toml", "--worktree")
    assert code == 1, err
    rid = rundir.name
    tasks = swarm.tasks(rundir)
    assert tasks["fix:bug"]["status"] == "skipped" and tasks["fix bug"]["status"] == "succeeded"
    assert sorted(swarm_branches(swarm)) == [f"swarm/{rid}/fix-bug-t4", f"swarm/{rid}/setup"]


def test_naming_branches_walks_the_tasks_once_however_many_are_named(tmp_path: Path) -> None:
    """A name depends only on the tasks before it, so each task is looked at once over the
    run — not once per task named (a walk from the first task per name: 20,000 cancelled
    worktree tasks held the loop 25 s)."""
    wts = worktree.Worktrees(worktree.Base(str(tmp_path), "0" * 40), run_dir=tmp_path / "run", run_id="R",
                             default=True)
    specs = [(f"t{n}", TaskSpec(name=f"fix {n % 7}")) for n in range(1, 301)]
    looked: list[int] = []

    def tasks(start: int) -> Iterator[tuple[str, TaskSpec]]:
        for tid, spec in specs[start - 1:]:
            looked.append(int(tid[1:]))
            yield tid, spec

    for tid, spec in specs:  # every task let go of before it ran, in id order
        wts.name_before_letting_go(tid, spec, tasks)
    assert len(looked) <= len(specs) + 1
    # the names are those of one walk over every task
    given = worktree.BranchNames("R")
    assert all(wts._names.of(tid, []) == given.of(tid, [(t, s.name) for t, s in specs]) for tid, _ in specs)


@pytest.mark.parametrize("again", ["retries", "retry"])
def test_a_task_that_removed_its_worktree_runs_again_in_a_new_one(swarm: Swarm, again: str) -> None:
    """A worktree task that removed its own worktree (``rm -rf`` of it) and failed could never
    run again: git keeps the registration of a removed worktree, and refused to add one there
    ("missing but already registered"), every attempt ``worktree_failed``; within the run
    the next attempt was sent to the missing directory. The next attempt gets its worktree
    again, from the task's branch, which kept what it committed."""
    cmd = (f"if [ -e {swarm.cwd}/first ]; then git log --format=%s -1 > seen; "
           f"else touch {swarm.cwd}/first; echo k > k; git add k; git commit -qm kept; "
           'cd .. && rm -rf \\"$OLDPWD\\"; exit 1; fi')
    repo(swarm, {"s.toml": f"""
[[task]]
name = "wrecker"
worktree = true
retries = {1 if again == "retries" else 0}
cmd = "{cmd}"
"""})
    code, _, rundir = run(swarm, "s.toml")
    if again == "retry":
        assert code == 1
        res = swarm("retry", rundir.name, env=git_env(swarm))
        assert res.code == 0, res.stderr
    else:
        assert code == 0
    row = swarm.tasks()["wrecker"]
    assert (row["status"], [a["status"] for a in row["history"]]) == ("succeeded", ["failed", "succeeded"]), row
    assert (rundir / "worktrees" / "t1" / "seen").read_text() == "kept\n"
    res = swarm("diff", rundir.name, "wrecker", env=git_env(swarm))
    assert res.code == 0 and "kept" in res.stdout, res
