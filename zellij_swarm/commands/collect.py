"""``zellij-swarm collect [RUN] TASK… [--verify]``: commit what a worktree task left uncommitted
onto its branch, so that the branch can be merged or pushed (SPEC §8.4).

- A task still running (or, in a running run, yet to run) is refused: its agent may be
  writing. So is one whose worktree has unresolved merge conflicts (their markers would be
  committed as its work), or sits on a detached HEAD that does not contain its branch (moving
  the branch there would leave commits on no branch). Every task named is checked before
  anything is committed.
- Its files as they are, untracked ones included, ignored ones left out, in one commit whose
  message names the task and the run; a detached HEAD (the agent checked out a commit) is
  committed on and the task's branch moved to the commit — also when the agent committed
  everything there itself.
- The repository's identity commits; where it names no one, ``zellij-swarm
  <zellij-swarm@localhost>``, and the line says so. No hook runs unless ``--verify``.
- One line per task, the commit id first: ``<commit>  agent-2 · committed on swarm/…``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from zellij_swarm import exc, quoting
from zellij_swarm.commands.diff import worktree_of
from zellij_swarm.commands.status import find_task, task_specs_of
from zellij_swarm.records.rundir import RunPaths, read_json
from zellij_swarm.records.states import RunState
from zellij_swarm.records.task import task_id
from zellij_swarm.worker import worktree


def message(task: str, run_id: str) -> str:
    return (f"{task}: work collected from zellij-swarm run {run_id}\n\n"
            f"What task {task} of run {run_id} left uncommitted in its worktree, committed by zellij-swarm collect.")


def collect(run: RunPaths, snap: dict[str, Any], names: tuple[str, ...], *, verify: bool) -> list[str]:
    """Collect each task of ``names``; the lines to print. Bad input (exit 2) before anything
    is committed: an unknown task, one without a worktree, one still running, one whose
    worktree is gone."""
    chosen = [find_task(snap, name) for name in names]
    for t in chosen:
        shown = quoting.terminal_text(t["name"])
        record = worktree_of(snap, t)
        if t["status"] == "running" or (t["status"] == "pending" and snap["state"] == RunState.RUNNING):
            cancel = quoting.positional_line([snap["run_id"], quoting.task_word(t["name"], t["id"])])
            raise exc.UsageError(f"task {shown} is {t['status']}: its agent may still write; collect it once it has "
                                 f"ended (zellij-swarm cancel {cancel} "
                                 "ends it)")
        if (why := worktree.not_a_worktree(Path(record["path"]))) is not None:
            raise exc.UsageError(f"task {shown}: its worktree {record['path']} is {why}; its branch "
                                 f"{record.get('branch') or '(unknown)'} keeps what it committed")
        if (why := worktree.collect_refusal(Path(record["path"]), _branch(run, t))) is not None:
            raise exc.UsageError(f"task {shown}: its worktree {record['path']} {why}")
    lines = []
    for t in chosen:
        record = t["worktree"]
        branch = _branch(run, t)
        done = worktree.collect(Path(record["path"]), branch=branch, message=message(t["name"], snap["run_id"]),
                                verify=verify)
        # the agent switched its worktree to a branch of its own
        elsewhere = (f"the branch its worktree is on (the task's branch {branch} did not move)"
                     if done.on is not None and branch is not None and done.on != branch else None)
        if not done.committed:
            if done.moved:  # the agent committed on a detached HEAD
                what = f"nothing uncommitted; its branch {done.moved} moved to this commit"
            elif elsewhere:
                what = f"nothing uncommitted: this commit is on {done.on}, {elsewhere}"
            else:
                what = "nothing uncommitted: its branch is at this commit"
        else:
            what = f"committed on {done.on or 'its HEAD'}" + (" (moved to it)" if done.moved else "")
            if elsewhere:
                what += f", {elsewhere}"
            what += f" as {done.identity}" + (" (the repository names no one)" if done.fallback else "")
            what += "" if verify else ", no hooks run"
        lines.append(quoting.terminal_text(f"{done.commit}  {t['name']} · {what}"))
    return lines


def _branch(run: RunPaths, task: dict[str, Any]) -> str | None:
    """The task's branch: as its worktree's record names it, else as the run named it."""
    return task["worktree"].get("branch") or _task_branch(run, task)


def _task_branch(run: RunPaths, task: dict[str, Any]) -> str | None:
    """The branch a task was given, named again as the run named it (``BranchNames``): its
    record has none when the run adopted its worktree on a detached HEAD."""
    try:
        default = bool(read_json(run.run_json)["settings"]["worktree"]["value"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    specs = [(task_id(i), spec) for i, spec in enumerate(task_specs_of(run), 1)]
    if task["id"] not in {tid for tid, _ in specs}:
        return None
    return worktree.BranchNames(run.run_id).of(task["id"], ((tid, s.name) for tid, s in specs
                                                            if worktree.wanted(s, default)))
