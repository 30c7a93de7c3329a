"""``zellij-swarm diff [RUN] [TASK] [--stat]``: what a worktree task changed (SPEC §8.4).

Against the commit its worktree started from (the run's base): the task's commits, one line
each, then the diff of its files as they are now — committed or not, untracked files
included, ignored ones left out (``worktree.work_diff``). Without TASK, or with ``--stat``
alone, one line per worktree task of the run: its outcome, what changed, its branch. A task
whose worktree ``prune`` removed is read from its branch, which keeps what it committed.

A task that ran without a worktree, or a run with none, is bad input (exit 2).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from zellij_swarm import exc, quoting
from zellij_swarm.commands import status as views
from zellij_swarm.records.rundir import RunPaths, read_json
from zellij_swarm.render import text
from zellij_swarm.worker import worktree


def worktree_of(snap: dict[str, Any], task: dict[str, Any]) -> dict[str, Any]:
    """The task's worktree record (``path``, ``branch``, ``base``); exit 2 when it has none."""
    record = task.get("worktree")
    if not isinstance(record, dict) or not record.get("path") or not record.get("base"):
        raise exc.UsageError(f"task {quoting.terminal_text(task['name'])} of run {snap['run_id']} ran without a "
                             "worktree: nothing to compare (worktree = true gives a task one)")
    return record


def show(run: RunPaths, snap: dict[str, Any], task: dict[str, Any] | None, *, stat: bool,
         width: int | None = None) -> str:
    """The text ``diff`` prints; the summary of every task fitted to ``width``, a terminal's
    (one task's diff is git's, whole)."""
    if task is None:
        return summary(snap, width)
    record = worktree_of(snap, task)
    path, base = Path(record["path"]), str(record["base"])
    head = f"task {task['name']} ({task['status']}) · {_where(record)} · base {base[:12]} · {path}"
    if (why := worktree.not_a_worktree(path)) is None:
        body = worktree.work_diff(path, base, stat=stat)
    elif record.get("branch") and (repo := _repo_of(run)) is not None:
        head += f" ({why}: its branch is shown)"
        body = worktree.branch_diff(repo, base, str(record["branch"]), stat=stat)
    else:
        raise exc.UsageError(f"task {task['name']}: its worktree {path} is {why}, and no branch of it is known")
    return quoting.terminal_text(head) + "\n" + (body or "no change\n")


def summary(snap: dict[str, Any], width: int | None = None) -> str:
    """One line per worktree task: ``agent-2  failed  3 files changed, … ; 2 commits  swarm/…``.
    With ``width`` (a terminal's), as ``status`` shows its tables: every line cut to it, never
    wrapped, the run's own branches as ``swarm/…/TASK`` (the run id, 22 columns, on every row
    pushed the counts off an 80-column screen), and a name wider than the name column on a line
    of its own, the rest of its row under it."""
    rows = [t for t in snap["tasks"] if isinstance(t.get("worktree"), dict) and t["worktree"].get("base")]
    if not rows:
        raise exc.UsageError(f"run {snap['run_id']} ran no task in a worktree (worktree = true gives a task one)")
    names = {t["id"]: quoting.terminal_text(t["name"]) for t in rows}
    widths = [text.width(name) for name in names.values()]  # display columns: a CJK name's are 2 each
    cols = max(widths) if width is None else max((w for w in widths if w <= views.NAME_COLUMN_MAX), default=4)
    ours = f"swarm/{snap['run_id']}/" if width is not None else None
    lines = []
    for t in rows:
        record = t["worktree"]
        path = Path(record["path"])
        try:
            why = worktree.not_a_worktree(path)
            what = worktree.work_summary(path, str(record["base"])) if why is None else f"worktree {why}"
        except worktree.WorktreeError as e:
            what = f"cannot tell: {e}"
        name = names[t["id"]]
        if text.width(name) > cols:
            lines.append(name)
            name = ""
        lines.append(f"{text.pad(name, cols)}  {t['status']:<9}  {what}  "
                     f"{quoting.terminal_text(_where(record, ours))}")
    return "".join(views.fit(line, width) + "\n" for line in lines)


def _where(record: dict[str, Any], ours: str | None = None) -> str:
    """``branch swarm/…``, as the worktree is now: an agent may have left its HEAD detached.
    A branch under ``ours`` (the run's ``swarm/<run-id>/``) is shown ``swarm/…/TASK``."""
    path, branch = Path(record["path"]), record.get("branch")
    try:
        on = worktree.current_branch(path) if (path / ".git").exists() else branch
    except worktree.WorktreeError:
        on = branch

    def short(name: str) -> str:
        return "swarm/…/" + name[len(ours):] if ours is not None and name.startswith(ours) else name

    if on is not None:
        return f"branch {short(on)}"
    return "detached HEAD" + (f" (its branch {short(branch)})" if branch else "")


def _repo_of(run: RunPaths) -> str | None:
    """The repository the run's worktrees were made from, as its ``run.json`` records it."""
    try:
        base = read_json(run.run_json).get("worktree_base") or {}
    except (OSError, ValueError):
        return None
    repo = base.get("repo") if isinstance(base, dict) else None
    return repo if isinstance(repo, str) else None
