"""``prune`` destroys nothing a task made (issue 22, items 6 and 7): a worktree whose HEAD
reaches commits no ref reaches (a detached HEAD, a rebase under way) is kept like
uncommitted work, and so is one holding files git ignores (``.env``, results, ``node_modules/``)
unless ``--drop-ignored``; what ``prune`` prints of a file name is safe for the terminal. Every
repository is made in the test's own directory; every run ends every process it started."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from swarmtest import Swarm
from test_worktrees import git, git_env, repo, run

KEPT = "commit it there, or prune --force to discard it"


def one_task(swarm: Swarm, cmd: str, *, ignore: str = "") -> tuple[Path, str, str]:
    """A repository (with ``.gitignore`` = ``ignore``) and an ended run of one worktree task
    running ``cmd``; its worktree, the run id and the base commit."""
    files = {"s.toml": f'[swarm]\nworktree = true\n\n[[task]]\nname = "agent"\ncmd = """{cmd}"""\n', "a": "a\n"}
    if ignore:
        files[".gitignore"] = ignore
    head = repo(swarm, files)
    code, err, rundir = run(swarm, "s.toml")
    assert code == 0, err
    return rundir / "worktrees" / "t1", rundir.name, head


def prune(swarm: Swarm, *args: str) -> tuple[int, list[str], str]:
    res = swarm("prune", "--older-than", "1ms", *args, env=git_env(swarm))
    return res.code, res.stdout.splitlines(), res.stderr


def test_a_commit_on_a_detached_head_is_kept_until_it_is_on_a_branch(swarm: Swarm) -> None:
    wt, rid, head = one_task(swarm, "git checkout -q --detach && echo x > x && git add x && git commit -qm x")
    lost = git(swarm, "rev-parse", "HEAD", where=wt)
    code, out, _ = prune(swarm, "--dry-run")
    assert (code, out[0]) == (0, f"would keep worktree {wt} (task 'agent' of run {rid}): 1 commit on no branch "
                                 f"(its HEAD is detached at {lost[:12]}); make a branch of it there "
                                 f"(git branch NAME), or prune --force to discard it")
    code, out, _ = prune(swarm)
    assert code == 1 and out[0].startswith(f"kept worktree {wt} (task 'agent' of run {rid}): 1 commit on no branch")
    assert wt.is_dir() and git(swarm, "cat-file", "-t", lost) == "commit"
    git(swarm, "branch", "saved", where=wt)  # what the line says to do
    code, out, _ = prune(swarm)
    assert (code, out[0]) == (0, f"removed worktree {wt} (task 'agent' of run {rid}); its HEAD was on no branch "
                                 f"(detached); deleted its branch swarm/{rid}/agent, which held no commits")
    assert git(swarm, "rev-parse", "saved") == lost and head != lost


def test_a_detached_head_without_a_commit_of_its_own_loses_nothing_and_goes(swarm: Swarm) -> None:
    wt, rid, _ = one_task(swarm, "git checkout -q --detach")
    code, out, _ = prune(swarm)
    assert (code, out[0]) == (0, f"removed worktree {wt} (task 'agent' of run {rid}); its HEAD was on no branch "
                                 f"(detached); deleted its branch swarm/{rid}/agent, which held no commits")
    assert not wt.exists() and git(swarm, "branch", "--list", "swarm/*") == ""


def test_a_rebase_under_way_keeps_the_commits_it_made(swarm: Swarm) -> None:
    # two commits, then a rebase that rewrites the first (its exec amends it) and stops there
    # (the exec fails): the rewritten commit is on no branch; the branch still has the old ones
    wt, rid, _ = one_task(swarm, """
echo 1 > one && git add one && git commit -qm one
echo 2 > two && git add two && git commit -qm two
git rebase -q --exec 'git commit -q --amend -m rewritten && false' HEAD~2 2>/dev/null || true
""")
    assert Path(git(swarm, "rev-parse", "--path-format=absolute", "--git-path", "rebase-merge", where=wt)).is_dir()
    rewritten = git(swarm, "rev-parse", "HEAD", where=wt)
    code, out, _ = prune(swarm)
    assert code == 1
    assert out[0].startswith(f"kept worktree {wt} (task 'agent' of run {rid}): 1 commit on no branch "
                             f"(its HEAD is detached at {rewritten[:12]})")
    assert wt.is_dir()


def test_a_detached_head_with_uncommitted_work_names_both(swarm: Swarm) -> None:
    wt, rid, _ = one_task(swarm, "git checkout -q --detach && echo x > x && git add x && git commit -qm x "
                                 "&& echo y > y")
    code, out, _ = prune(swarm)
    assert code == 1
    assert out[0].startswith(f"kept worktree {wt} (task 'agent' of run {rid}): uncommitted work in 1 file (y), "
                             "and 1 commit on no branch")
    assert out[0].endswith("; commit it and make a branch of it there (git branch NAME), or prune --force to "
                           "discard it")


IGNORE = "node_modules/\n.env\nout/*.csv\n"


def test_ignored_files_an_agent_wrote_are_kept_and_counted(swarm: Swarm) -> None:
    wt, rid, _ = one_task(swarm, "echo SECRET=1 > .env && mkdir out && printf 'a,b\\n1,2\\n' > out/data.csv",
                          ignore=IGNORE)
    code, out, err = prune(swarm)
    assert code == 1
    assert out[0] == (f"kept worktree {wt} (task 'agent' of run {rid}): 2 files git ignores (17 B: .env, "
                      "out/data.csv); move them out, or prune --drop-ignored to discard them")
    assert (wt / ".env").read_text() == "SECRET=1\n" and (wt / "out/data.csv").exists()
    assert err.startswith("zellij-swarm: error: kept 1 worktree of ended runs (above) so as not to lose work")
    code, out, err = prune(swarm, "--drop-ignored")
    assert (code, out[0]) == (0, f"removed worktree {wt} (task 'agent' of run {rid}) with 2 files git ignores "
                                 f"(17 B); deleted its branch swarm/{rid}/agent, which held no commits")
    assert not wt.exists()


def test_an_ignored_directory_counts_its_files_and_drop_ignored_removes_it(swarm: Swarm) -> None:
    wt, rid, _ = one_task(swarm, "mkdir -p node_modules/p/q && printf 1234 > node_modules/p/q/i.js && "
                                 "printf 12 > node_modules/x.js && ln -s /etc/passwd node_modules/link",
                          ignore=IGNORE)
    code, out, _ = prune(swarm, "--dry-run")
    assert out[0] == (f"would keep worktree {wt} (task 'agent' of run {rid}): 3 files git ignores "
                      f"({6 + len('/etc/passwd')} B: node_modules/); move them out, or prune --drop-ignored to "
                      "discard them")
    code, out, _ = prune(swarm, "--drop-ignored", "--dry-run")
    assert out[0] == f"would remove worktree {wt} (task 'agent' of run {rid}) with 3 files git ignores (17 B)"
    code, out, _ = prune(swarm, "--drop-ignored")
    assert code == 0 and not wt.exists()
    assert Path("/etc/passwd").exists()  # a link is removed, never followed


def test_drop_ignored_does_not_discard_uncommitted_work(swarm: Swarm) -> None:
    wt, rid, _ = one_task(swarm, "echo S=1 > .env && echo notes > notes.txt", ignore=IGNORE)
    code, out, _ = prune(swarm, "--drop-ignored")
    assert code == 1
    assert out[0] == (f"kept worktree {wt} (task 'agent' of run {rid}): uncommitted work in 1 file (notes.txt), "
                      f"and 1 file git ignores (4 B: .env); {KEPT}")
    assert (wt / ".env").exists()


@pytest.mark.parametrize("name", ["evil\x1b]0;pwned\x07.txt", "new\nline.txt", "\u009b2J.txt"])
def test_file_names_prune_shows_are_safe_for_the_terminal(swarm: Swarm, name: str) -> None:
    wt, rid, _ = one_task(swarm, "true")
    (wt / name).write_text("x")  # as the task could have
    code, out, _ = prune(swarm)
    assert code == 1 and len(out) == 2, out  # its line, and the run's: a newline in a name ends no line
    assert out[0].startswith(f"kept worktree {wt} (task 'agent' of run {rid}): uncommitted work in 1 file (")
    assert not any(ch in out[0] for ch in "\x1b\x07\u009b\n"), out


def test_a_worktree_whose_task_removed_its_git_file_is_kept_then_forced_away(swarm: Swarm) -> None:
    """Its task ran ``rm -rf .git``: git answered for the checkout around it (or not at all),
    and ``prune --force`` said "cannot remove" and to use --force, every time."""
    wt, rid, _ = one_task(swarm, "echo work > w && rm -rf .git")
    code, out, _ = prune(swarm)
    assert code == 1 and out[0] == (f"cannot remove worktree {wt} (task 'agent' of run {rid}): its .git file is "
                                    "gone (its task removed it): git cannot tell what it holds; look, then prune "
                                    "--force removes the directory")
    assert (wt / "w").read_text() == "work\n"
    code, out, _ = prune(swarm, "--force")
    assert code == 0 and out[0].startswith(f"removed worktree {wt} (task 'agent' of run {rid})"), out
    assert not wt.exists()


def test_ignored_files_with_a_carriage_return_or_bytes_not_utf8_in_their_names_are_counted(swarm: Swarm) -> None:
    """git's list of files was read as text with universal newlines and undecodable bytes
    replaced: ``x\\r.log`` came back as ``x\\n.log`` and ``\\xff.log`` as ``\\ufffd.log``,
    names that are not there — "0 files git ignores (0 B: x\\n.log)" (an adversary, 2 in 2).
    The names are read as the bytes they are (one not UTF-8 shown as ``terminal_text`` does)."""
    wt, rid, _ = one_task(swarm, "true", ignore="*.log\n")
    (wt / "x\r.log").write_bytes(b"12345")  # as the task could have
    with open(os.fsencode(wt) + b"/\xff.log", "wb") as f:
        f.write(b"123")
    code, out, _ = prune(swarm)
    assert code == 1
    assert out[0] == (f"kept worktree {wt} (task 'agent' of run {rid}): 2 files git ignores (8 B: x\\r.log, "
                      "\\udcff.log); move them out, or prune --drop-ignored to discard them"), out


def test_untracked_names_with_a_carriage_return_are_shown_as_they_are(swarm: Swarm) -> None:
    wt, rid, _ = one_task(swarm, "true")
    (wt / "a\rb").write_text("x")
    code, out, _ = prune(swarm)
    assert code == 1
    assert out[0] == f"kept worktree {wt} (task 'agent' of run {rid}): uncommitted work in 1 file (a\\rb); {KEPT}", out


@pytest.mark.parametrize("force", [False, True])
def test_a_worktree_replaced_by_a_symbolic_link_is_never_worked_through(swarm: Swarm, tmp_path: Path,
                                                                          force: bool) -> None:
    """A worktree moved elsewhere and a link left in its place (or any link planted there):
    ``prune`` removed what the link points to — git emptied the directory outside the run,
    then failed on the link, "Not a directory" — and ``prune --force`` crashed, "internal
    error: Cannot call rmtree on a symbolic link" (an adversary, 2 in 2 each). A run's records
    are never worked through a link (SPEC §7): it is named and left for a person to look at."""
    wt, rid, _ = one_task(swarm, "true")
    elsewhere = tmp_path / "elsewhere"
    wt.rename(elsewhere)
    wt.symlink_to(elsewhere)
    code, out, err = prune(swarm, *(["--force"] if force else []))
    assert code == 1, err
    assert out[0] == (f"cannot remove worktree {wt} (task 'agent' of run {rid}): it is a symbolic link (to "
                      f"{elsewhere}), not the directory the run made; look, then remove it by hand"), out
    assert (elsewhere / "a").exists() and wt.is_symlink()


@pytest.mark.parametrize("left", [None, "echo x > sub/notes.txt", "echo x > sub/cache.tmp"])
def test_a_worktree_with_a_submodule_goes_when_nothing_in_it_would_be_lost(swarm: Swarm, left: str | None) -> None:
    """git refuses to remove a worktree that holds an initialised submodule ("working trees
    containing submodules cannot be moved or removed") unless forced: a clean one was kept
    for ever, `prune` exit 1, its line offering only `prune --force`. What a submodule holds
    is looked at as the worktree's own is — untracked, ignored, commits on no branch — and a
    worktree that loses nothing goes."""
    library = swarm.cwd.parent / f"{swarm.cwd.name}-library"
    library.mkdir()
    for args in (("init", "-q", "-b", "main"), ("commit", "-q", "--allow-empty", "-m", "lib")):
        git(swarm, *args, where=library)
    (library / ".gitignore").write_text("*.tmp\n")
    git(swarm, "add", ".gitignore", where=library)
    git(swarm, "commit", "-q", "-m", "ignore", where=library)
    head = repo(swarm, {"a": "a\n"})
    git(swarm, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(library), "sub")
    git(swarm, "commit", "-q", "-m", "sub")
    init = "git -c protocol.file.allow=always submodule update -q --init"
    swarm.write("s.toml", f'[swarm]\nworktree = true\n\n[[task]]\nname = "agent"\n'
                          f'cmd = """{init}{f"; {left}" if left else ""}"""\n')
    code, err, rundir = run(swarm, "s.toml")
    assert code == 0 and head, err
    wt, rid = rundir / "worktrees" / "t1", rundir.name
    code, out, _ = prune(swarm)
    if left is None:
        assert code == 0 and out[0].startswith(f"removed worktree {wt} (task 'agent' of run {rid})"), out
        assert not wt.exists()
    else:
        name = left.split()[-1]
        kept = f"kept worktree {wt} (task 'agent' of run {rid}): "
        assert code == 1 and out[0].startswith(kept) and name in out[0], out
        assert (wt / name).exists()
