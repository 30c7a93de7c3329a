"""Review each agent's work (issue 24 §16): ``diff`` shows what a worktree task changed against
the commit it started from, commits and uncommitted files; ``collect`` commits what it left
uncommitted onto its branch — refusing a running task, on a detached HEAD too, as the
repository's identity or a named fallback, without hooks unless ``--verify``, ignored files
left out — and prints the commit id."""

from __future__ import annotations

import json
import re

from swarmtest import Swarm, kill_run_processes, wait_until
from test_worktrees import git, git_env, repo

SWARM = """
[swarm]
worktree = true
[[task]]
name = "agent-1"
cmd = 'echo edited >> README && git commit -qam "agent edit" && echo new > new.txt && echo junk > x.log'
[[task]]
name = "agent-2"
cmd = 'git checkout -q --detach && echo detached > d.txt'
[[task]]
name = "plain"
cmd = "true"
worktree = false
"""


def anonymous_env(swarm: Swarm) -> dict[str, str]:
    """git as on a machine where nobody configured an identity."""
    return {k: v for k, v in git_env(swarm).items() if not k.startswith(("GIT_AUTHOR_", "GIT_COMMITTER_"))}


def ran(swarm: Swarm) -> str:
    """The swarm run in a fresh repository; then hooks that would refuse any commit and mark
    that they ran. The base commit."""
    base = repo(swarm, {"README": "hello\n", ".gitignore": "*.log\n", "s.toml": SWARM})
    res = swarm("run", "s.toml", "--backend", "headless", "--output", "quiet", env=git_env(swarm))
    assert res.code == 0, res.stderr
    hooks = swarm.cwd / ".git" / "hooks"
    for hook, body in (("pre-commit", "exit 1"), ("post-commit", f"touch {swarm.cwd}/post-commit-ran")):
        (hooks / hook).write_text(f"#!/bin/sh\n{body}\n")
        (hooks / hook).chmod(0o755)
    return base


def test_diff_shows_commits_and_uncommitted_files_and_leaves_the_index_alone(swarm: Swarm) -> None:
    base = ran(swarm)
    env = git_env(swarm)
    run = swarm.latest().name
    wt = swarm.cwd / ".zellij-swarm" / "runs" / run / "worktrees" / "t1"
    before = git(swarm, "status", "--porcelain", where=wt)
    out = swarm("diff", "agent-1", env=env)
    assert out.code == 0, out.stderr
    head, *body = out.stdout.splitlines()
    assert head.startswith(f"task agent-1 (succeeded) · branch swarm/{run}/agent-1 · base {base[:12]}")
    assert re.fullmatch(r"[0-9a-f]{7,} agent edit", body[0])
    assert "+edited" in out.stdout and "+new" in out.stdout and "new.txt" in out.stdout
    assert "x.log" not in out.stdout  # ignored
    assert git(swarm, "status", "--porcelain", where=wt) == before  # nothing staged by the look
    stat_all = swarm("diff", env=env).stdout.splitlines()
    assert [line.split()[0] for line in stat_all] == ["agent-1", "agent-2"]
    assert "2 files changed, 2 insertions(+); 1 commit" in stat_all[0]
    assert "1 file changed, 1 insertion(+)" in stat_all[1]
    assert f"detached HEAD (its branch swarm/{run}/agent-2)" in stat_all[1]
    one = swarm("diff", "--stat", "agent-1", env=env).stdout
    assert re.search(r"README\s+\|\s+1 \+", one) and re.search(r"new.txt\s+\|\s+1 \+", one)
    res = swarm("diff", "plain", env=env)
    assert res.code == 2 and "ran without a worktree" in res.stderr and "Traceback" not in res.stderr


def test_diff_of_a_worktree_holding_a_repository_with_no_commit_shows_the_rest_and_says_so(swarm: Swarm) -> None:
    """git cannot add a repository that has no commit checked out ("'sub/' does not have a
    commit checked out"): ``diff`` failed whole on it. The rest of the work is shown, and the
    path left out is named — by the task's diff, and counted on its line of the run's."""
    repo(swarm, {"README": "hello\n", "s.toml": """
[swarm]
worktree = true
[[task]]
name = "nested"
cmd = 'mkdir vendor && git -C vendor init -q && echo new > new.txt'
"""})
    env = git_env(swarm)
    assert swarm("run", "s.toml", "--backend", "headless", "--output", "quiet", env=env).code == 0
    out = swarm("diff", "nested", env=env)
    assert out.code == 0, out.stderr
    assert "+new" in out.stdout
    assert out.stdout.splitlines()[-1] == "not in the diff: vendor/ (git cannot add it)"
    line = swarm("diff", env=env)
    assert line.code == 0, line.stderr
    assert "1 file changed, 1 insertion(+); 1 path git cannot add" in line.stdout
    refused = swarm("collect", "nested", env=env)
    assert refused.code == 2 and "Traceback" not in refused.stderr, refused.stderr
    assert "holds what git cannot add (vendor/): commit in it, or remove it" in refused.stderr


def test_a_path_git_cannot_add_is_named_whole_and_safe_for_a_terminal(swarm: Swarm) -> None:
    """git's own message prints the name as it is: a newline cut it (and what followed read as
    another path), an escape reached the terminal. The name is read whole and shown escaped."""
    repo(swarm, {"README": "hello\n", "s.toml": r"""
[swarm]
worktree = true
[[task]]
name = "hostile"
cmd = '''d="$(printf 'x\nerror: phantom\033[31m')"; mkdir "$d" && git -C "$d" init -q'''
"""})
    env = git_env(swarm)
    assert swarm("run", "s.toml", "--backend", "headless", "--output", "quiet", env=env).code == 0
    out = swarm("diff", "hostile", env=env)
    assert out.code == 0, out.stderr
    assert out.stdout.splitlines()[1:] == [r"not in the diff: x\nerror: phantom\x1b[31m/ (git cannot add it)"]
    assert "1 path git cannot add" in swarm("diff", env=env).stdout
    refused = swarm("collect", "hostile", env=env)
    assert refused.code == 2 and len(refused.stderr.splitlines()) == 1 and "\x1b" not in refused.stderr


def test_collect_commits_the_rest_onto_the_branch_detached_or_not(swarm: Swarm) -> None:
    ran(swarm)
    run = swarm.latest().name
    res = swarm("collect", run, "agent-1", "agent-2", env=anonymous_env(swarm))
    assert res.code == 0, res.stderr
    lines = res.stdout.splitlines()
    assert len(lines) == 2
    shas = [line.split()[0] for line in lines]
    assert all(re.fullmatch(r"[0-9a-f]{40}", sha) for sha in shas)
    assert lines[0].endswith(f"agent-1 · committed on swarm/{run}/agent-1 as zellij-swarm <zellij-swarm@localhost> "
                             "(the repository names no one), no hooks run")
    assert f"committed on swarm/{run}/agent-2 (moved to it)" in lines[1]
    for sha, task in zip(shas, ("agent-1", "agent-2"), strict=True):
        assert git(swarm, "rev-parse", f"refs/heads/swarm/{run}/{task}") == sha
        assert git(swarm, "log", "-1", "--format=%an <%ae>%n%s", sha).splitlines() == [
            "zellij-swarm <zellij-swarm@localhost>", f"{task}: work collected from zellij-swarm run {run}"]
    files = git(swarm, "ls-tree", "-r", "--name-only", shas[0]).split()
    assert "new.txt" in files and "x.log" not in files
    assert "d.txt" in git(swarm, "ls-tree", "-r", "--name-only", shas[1]).split()
    assert not (swarm.cwd / "post-commit-ran").exists()  # no hook ran, the failing pre-commit neither
    again = swarm("collect", run, "agent-1", env=anonymous_env(swarm))
    assert again.stdout == f"{shas[0]}  agent-1 · nothing uncommitted: its branch is at this commit\n"


def test_collect_names_the_branch_it_committed_on_when_the_agent_switched(swarm: Swarm) -> None:
    """An agent that made a branch of its own in its worktree (``git checkout -b mywork``) and
    left a file: ``collect`` committed on ``mywork`` and said "committed on swarm/…/agent" —
    a branch that had not moved. It names the branch the commit is on, and says the task's
    did not move."""
    repo(swarm, {"README": "x\n"})
    swarm.write("s.toml", '[[task]]\nname = "agent"\nworktree = true\n'
                          'cmd = "git checkout -q -b mywork && echo left > left.txt"\n')
    res = swarm("run", "s.toml", "--backend", "headless", "--output", "quiet", env=git_env(swarm))
    assert res.code == 0, res.stderr
    run = swarm.latest().name
    res = swarm("collect", run, "agent", env=git_env(swarm))
    assert res.code == 0, res.stderr
    sha = res.stdout.split()[0]
    assert git(swarm, "rev-parse", "refs/heads/mywork") == sha
    assert (f"agent · committed on mywork, the branch its worktree is on (the task's branch swarm/{run}/agent did "
            "not move) as Agent <agent@example.com>, no hooks run") in res.stdout, res.stdout
    assert git(swarm, "rev-parse", f"refs/heads/swarm/{run}/agent") != sha


def test_collect_moves_the_branch_to_a_detached_head_that_committed_everything(swarm: Swarm) -> None:
    """An agent that detached its HEAD and committed all its work there left nothing
    uncommitted: ``collect`` said "its branch is at this commit" and moved nothing, so the
    task's branch stayed at the base and the work on no branch. The branch moves there, as
    it does when something was committed; an agent on a branch of its own is named."""
    repo(swarm, {"README": "x\n"})
    swarm.write("s.toml", '[[task]]\nname = "det"\nworktree = true\n'
                          'cmd = "git checkout -q --detach && echo y > y && git add y && git commit -qm mine"\n'
                          '[[task]]\nname = "own"\nworktree = true\n'
                          'cmd = "git checkout -q -b mywork && echo z > z && git add z && git commit -qm mine"\n')
    res = swarm("run", "s.toml", "--backend", "headless", "--output", "quiet", env=git_env(swarm))
    assert res.code == 0, res.stderr
    run = swarm.latest().name
    res = swarm("collect", run, "det", "own", env=git_env(swarm))
    assert res.code == 0, res.stderr
    det, own = res.stdout.splitlines()
    wt = swarm.cwd / ".zellij-swarm" / "runs" / run / "worktrees"
    head = git(swarm, "rev-parse", "HEAD", where=wt / "t1")
    assert git(swarm, "log", "-1", "--format=%s", head) == "mine"
    assert git(swarm, "rev-parse", f"refs/heads/swarm/{run}/det") == head
    assert det == f"{head}  det · nothing uncommitted; its branch swarm/{run}/det moved to this commit"
    mine = git(swarm, "rev-parse", "refs/heads/mywork")
    assert own == (f"{mine}  own · nothing uncommitted: this commit is on mywork, the branch its worktree is on "
                   f"(the task's branch swarm/{run}/own did not move)")
    again = swarm("collect", run, "det", env=git_env(swarm))
    assert again.stdout == f"{head}  det · nothing uncommitted: its branch is at this commit\n", again.stdout


def test_collect_uses_the_repositorys_identity_and_runs_hooks_with_verify(swarm: Swarm) -> None:
    ran(swarm)
    git(swarm, "config", "user.name", "Repo Person")
    git(swarm, "config", "user.email", "person@example.com")
    run = swarm.latest().name
    res = swarm("collect", run, "agent-1", "--verify", env=anonymous_env(swarm))
    assert res.code == 1 and "--verify ran the repository's commit hooks" in res.stderr  # the pre-commit said no
    (swarm.cwd / ".git" / "hooks" / "pre-commit").unlink()
    res = swarm("collect", run, "agent-1", "--verify", env=anonymous_env(swarm))
    assert res.code == 0, res.stderr
    assert res.stdout.rstrip().endswith("as Repo Person <person@example.com>")
    assert (swarm.cwd / "post-commit-ran").exists()


def test_collect_refuses_a_running_task(swarm: Swarm) -> None:
    repo(swarm, {"README": "hello\n"})
    gate = f"until [ -e {swarm.cwd}/gate ]; do sleep 0.02; done"  # it runs in its worktree, not here
    swarm.write("s.toml", f"[swarm]\nworktree = true\n[[task]]\nname = \"busy\"\ncmd = '{gate}'\n")
    proc = swarm.popen("run", "s.toml", "--backend", "headless", "--output", "quiet", env=git_env(swarm))
    try:
        run = swarm.started().name
        wait_until(lambda: [t["status"] for t in json.loads(swarm("status", "--json", run).stdout)["tasks"]]
                   == ["running"], what="busy running")
        res = swarm("collect", run, "busy", env=git_env(swarm))
        assert res.code == 2 and res.stderr.startswith("zellij-swarm: error: task busy is running: its agent may")
    finally:
        swarm.open_gate()
        try:
            proc.wait(timeout=30)
        finally:  # whatever happened: nothing of the run outlives the test
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
            if swarm.runs():
                kill_run_processes(swarm.runs()[0].name)


def test_a_worktree_taken_apart_by_hand_is_not_called_pruned(swarm: Swarm) -> None:
    """A worktree whose directory is there without its ``.git`` was reported "gone (pruned)"
    by ``collect`` and "removed" by ``diff``: its files are still there, and a user looking
    for them would be told they were deleted. Each now says which it is."""
    ran(swarm)
    env = git_env(swarm)
    run = swarm.latest().name
    worktrees = swarm.cwd / ".zellij-swarm" / "runs" / run / "worktrees"
    (worktrees / "t1" / ".git").unlink()  # agent-1's: taken apart, its files kept
    git(swarm, "worktree", "remove", "--force", str(worktrees / "t2"))  # agent-2's: gone
    res = swarm("collect", run, "agent-1", env=env)
    assert res.code == 2 and f"{worktrees / 't1'} is no longer a git worktree (no .git in it)" in res.stderr
    res = swarm("collect", run, "agent-2", env=env)
    assert res.code == 2 and f"{worktrees / 't2'} is gone (pruned)" in res.stderr
    out = swarm("diff", "agent-1", env=env)
    assert out.code == 0 and "(no longer a git worktree (no .git in it): its branch is shown)" in out.stdout
    lines = swarm("diff", env=env).stdout.splitlines()
    assert "worktree no longer a git worktree" in lines[0] and "worktree gone (pruned)" in lines[1], lines


def test_collect_refuses_what_would_commit_conflict_markers_or_drop_commits(swarm: Swarm) -> None:
    """``collect`` committed an unresolved merge, its conflict markers as the task's work, and
    on a detached HEAD that did not contain the task's branch it moved the branch there,
    leaving the agent's earlier commit on no branch; both said "committed" and exited 0.
    Each is refused, exit 2, one line, nothing committed — and collected once the agent's
    worktree is put right."""
    repo(swarm, {"f.txt": "base\n"})
    git(swarm, "checkout", "-q", "-b", "other")
    (swarm.cwd / "f.txt").write_text("theirs\n")
    git(swarm, "commit", "-qam", "theirs")
    git(swarm, "checkout", "-q", "-")
    swarm.write("s.toml", "[swarm]\nworktree = true\n"
                          '[[task]]\nname = "conflict"\n'
                          "cmd = 'echo ours > f.txt && git commit -qam ours && git merge -q other || true'\n"
                          '[[task]]\nname = "diverge"\n'
                          "cmd = 'echo a > a.txt && git add a.txt && git commit -qm A"
                          " && git checkout -q --detach HEAD~1 && echo b > b.txt'\n")
    res = swarm("run", "s.toml", "--backend", "headless", "--output", "quiet", env=git_env(swarm))
    assert res.code == 0, res.stderr
    run = swarm.latest().name
    tips = {task: git(swarm, "rev-parse", f"refs/heads/swarm/{run}/{task}") for task in ("conflict", "diverge")}
    res = swarm("collect", run, "conflict", env=git_env(swarm))
    assert res.code == 2 and len(res.stderr.splitlines()) == 1, res
    assert "unresolved merge conflicts (f.txt)" in res.stderr
    res = swarm("collect", run, "diverge", env=git_env(swarm))
    assert res.code == 2 and len(res.stderr.splitlines()) == 1, res
    assert f"does not contain the task's branch swarm/{run}/diverge" in res.stderr
    assert {task: git(swarm, "rev-parse", f"refs/heads/swarm/{run}/{task}") for task in tips} == tips
    worktrees = swarm.cwd / ".zellij-swarm" / "runs" / run / "worktrees"
    (worktrees / "t1" / "f.txt").write_text("resolved\n")
    git(swarm, "add", "f.txt", where=worktrees / "t1")
    git(swarm, "merge", "-q", f"swarm/{run}/diverge", where=worktrees / "t2")
    res = swarm("collect", run, "conflict", "diverge", env=git_env(swarm))
    assert res.code == 0, res.stderr
    assert git(swarm, "merge-base", "--is-ancestor", tips["diverge"], f"refs/heads/swarm/{run}/diverge") == ""


def test_diff_summary_columns_line_up_for_wide_names(tmp_path) -> None:
    """``diff`` with no task: one line per worktree task, its columns aligned in display
    columns — a CJK character takes two (they were counted as one, and the row that named
    one stood out by as many columns as it had such characters)."""
    from zellij_swarm.commands.diff import summary
    from zellij_swarm.render.text import width

    tasks = [{"id": f"t{i}", "name": name, "status": status,
              "worktree": {"base": "0" * 40, "path": str(tmp_path / f"wt{i}"), "branch": f"swarm/x/{i}"}}
             for i, (name, status) in enumerate([("agent-1", "succeeded"), ("agent 2 '日本'", "failed")], 1)]
    lines = summary({"run_id": "r", "tasks": tasks}).splitlines()
    starts = [width(line[:line.index(status)]) for line, status in zip(lines, ("succeeded", "failed"), strict=True)]
    assert len(set(starts)) == 1, lines
