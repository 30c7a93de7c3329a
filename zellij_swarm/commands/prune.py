"""``zellij-swarm prune``: clean up after ended runs.

Sessions zellij-swarm created are kept at the end of a run so the user can attach and look
(SPEC §2), and so are its window (tmux) or tab (Zellij) in the user's own session when
something failed. Prune removes those of ended runs — sessions, windows and tabs, found by
the names a run gives them (``backends.leftovers``) — and deletes the records of ended runs
older than a given age. Running and interrupted runs (a supervisor alive, or one that
``resume`` may still continue) are never touched.

The git worktrees of ended runs (``worktree = true``) go too, but not their work: a worktree
holding uncommitted changes is kept, and named, unless ``force``; a task's branch is kept
when it holds commits (they are the task's work) and deleted with its worktree when it
holds none. A run whose worktree is kept keeps its records, which its worktree is part of.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from zellij_swarm import exc
from zellij_swarm.backends import leftovers
from zellij_swarm.commands import status as views
from zellij_swarm.records.rundir import RunPaths, all_runs, read_json
from zellij_swarm.worker import worktree

ENDED = ("finished", "cancelled")
SHOWN_FILES = 3  # of a worktree's uncommitted files, the ones a refusal names


class Line(NamedTuple):
    text: str
    kept_work: bool = False  # a worktree kept because removing it would lose work


def prune(state_dir: Path, env: Mapping[str, str], *, older_than: float, dry_run: bool,
          force: bool) -> Iterator[Line]:
    verb = "would remove" if dry_run else "removed"
    ended = list(_ended_runs(state_dir))
    found: dict[str, list[leftovers.Leftover]] = {}
    for left in leftovers.find(env, [run.run_id for run, _ in ended]):
        found.setdefault(left.run_id, []).append(left)
    now = time.time()
    for run, snap in ended:
        for left in found.get(run.run_id, []):
            if left.remove is None:
                yield Line(f"cannot remove {left.what}: {left.why}")
                continue
            if not dry_run:
                left.remove()
            yield Line(f"{verb} {left.what}")
        kept = False
        for line in _worktrees(run, snap, dry_run=dry_run, force=force):
            kept = kept or line.kept_work
            yield line
        ended_at = snap.get("ended_at") or snap.get("started_at") or now
        if now - ended_at > older_than:
            if kept:
                yield Line(f"kept run {run.run_id} ({run.dir}): its worktrees are in it")
                continue
            if not dry_run:
                shutil.rmtree(run.dir)
            yield Line(f"{verb} run {run.run_id} ({run.dir})")


def _worktrees(run: RunPaths, snap: dict[str, Any], *, dry_run: bool, force: bool) -> Iterator[Line]:
    """Remove the run's worktrees, each one only if it holds no uncommitted work (``force``:
    whatever it holds); each line names the worktree, its task and what became of its branch."""
    names = {t["id"]: t["name"] for t in snap["tasks"]}
    base = _base_commit(run)
    for path in worktree.made(run.dir):
        what = f"worktree {path} (task {names.get(path.name, path.name)!r} of run {run.run_id})"
        try:
            dirty = [] if force else worktree.uncommitted(path)
            if dirty:
                shown = ", ".join(dirty[:SHOWN_FILES]) + (", …" if len(dirty) > SHOWN_FILES else "")
                yield Line(f"{'would keep' if dry_run else 'kept'} {what}: uncommitted work in {len(dirty)} "
                           f"file{'' if len(dirty) == 1 else 's'} ({shown}); commit it there, or prune --force "
                           "to discard it", kept_work=True)
            elif dry_run:
                yield Line(f"would remove {what}")
            else:
                yield Line(f"removed {what}; {_branch_fate(worktree.remove(path, base=base, force=force))}")
        except worktree.WorktreeError as e:
            yield Line(f"cannot remove {what}: {e}", kept_work=True)


def _branch_fate(removed: worktree.Removed) -> str:
    if removed.branch is None:
        return "it was on no branch (a detached HEAD)"
    if removed.branch_deleted:
        return f"deleted its branch {removed.branch}, which held no commits"
    commits = "" if removed.commits is None else f" ({removed.commits} commit{'' if removed.commits == 1 else 's'})"
    return f"kept its branch {removed.branch}{commits}"


def _base_commit(run: RunPaths) -> str | None:
    """The commit the run's worktrees were made from (``run.json``'s ``worktree_base``)."""
    try:
        base = worktree.Base.from_record(read_json(run.run_json).get("worktree_base"))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return base.commit if base is not None else None


def _ended_runs(state_dir: Path) -> Iterator[tuple[RunPaths, dict[str, Any]]]:
    for run in all_runs(state_dir):
        try:
            snap = views.load_status(run)
        except (exc.SwarmError, OSError, ValueError, KeyError):
            continue
        if snap["state"] in ENDED:
            yield run, snap
