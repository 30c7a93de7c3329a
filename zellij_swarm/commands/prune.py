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

import os
import shutil
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from zellij_swarm import names, quoting
from zellij_swarm.backends import leftovers
from zellij_swarm.commands import status as views
from zellij_swarm.records.rundir import RunPaths, all_runs, read_json
from zellij_swarm.records.states import RunState
from zellij_swarm.worker import worktree

ENDED = tuple(s for s in RunState if s.ended)
SHOWN_FILES = 3  # of a worktree's uncommitted or ignored files, the ones a refusal names


class Line(NamedTuple):
    text: str
    kept_work: bool = False  # a worktree kept because removing it would lose work
    unanswered: bool = False  # a multiplexer that gave no answer: what is in it was not looked at


def prune(state_dir: Path, env: Mapping[str, str], *, older_than: float, dry_run: bool, force: bool,
          drop_ignored: bool = False) -> Iterator[Line]:
    """What prune did (``dry_run``: would do), a line each, safe to print: a name in them
    (a file's, a task's, a session's) may hold anything, a terminal's escapes included."""
    for line in _prune(state_dir, env, older_than=older_than, dry_run=dry_run, force=force,
                       drop_ignored=drop_ignored):
        yield line._replace(text=quoting.terminal_text(line.text))


def _prune(state_dir: Path, env: Mapping[str, str], *, older_than: float, dry_run: bool, force: bool,
           drop_ignored: bool) -> Iterator[Line]:
    verb = "would remove" if dry_run else "removed"
    unreadable: list[str] = []
    runs = list(views.statuses(all_runs(state_dir), unreadable))
    for why in unreadable:  # nothing of it is removed
        yield Line(f"skipped {why}")
    now = time.time()
    for run, why, never_ran in views.unrecorded_runs(state_dir):
        if not never_ran:
            yield Line(f"skipped {why}")
        elif now - _mtime(run.dir, now) > older_than:  # its age: when its supervisor last wrote in it
            if not dry_run and not _remove_run(run.dir):
                continue
            yield Line(f"{verb} run {run.run_id} ({run.dir}): its supervisor went before it recorded the run")
    ended = [(run, snap) for run, snap in runs if snap["state"] in ENDED]
    found: dict[str, list[leftovers.Leftover]] = {}
    looked = leftovers.find(env, [run.run_id for run, _ in ended], _named_sessions(runs),
                            expected={(snap.get("multiplexer") or {}).get("backend") or "" for _, snap in ended})
    for why in looked.unanswered:  # whatever the runs left there stays: said, and prune exits 1
        yield Line(f"could not look for what ended runs left: {why}", unanswered=True)
    for left in looked.leftovers:
        found.setdefault(left.run_id, []).append(left)
    for run, snap in ended:
        for left in found.get(run.run_id, []):
            if left.remove is None:
                yield Line(f"cannot remove {left.what}: {left.why}")
                continue
            if not dry_run:
                left.remove()
            yield Line(f"{verb} {left.what}")
        kept = False
        for line in _worktrees(run, snap, dry_run=dry_run, force=force, drop_ignored=drop_ignored):
            kept = kept or line.kept_work
            yield line
        ended_at = snap.get("ended_at") or snap.get("started_at") or now
        if now - ended_at > older_than:
            if kept:
                yield Line(f"kept run {run.run_id} ({run.dir}): its worktrees are in it")
                continue
            if not dry_run and not _remove_run(run.dir):
                continue
            yield Line(f"{verb} run {run.run_id} ({run.dir})")


def _remove_run(path: Path) -> bool:
    """Remove a run's directory; False when it was gone already: another ``prune`` beside this
    one removed it (with ``--older-than 0`` every ended run is both one's), and what of it that
    one removes meanwhile is no error here either."""
    def gone_already(func: object, where: str, info: tuple[type[BaseException], BaseException, object]) -> None:
        if not isinstance(info[1], FileNotFoundError):
            raise info[1]

    try:
        os.lstat(path)
    except FileNotFoundError:
        return False
    shutil.rmtree(path, onerror=gone_already)
    return True


def _mtime(path: Path, default: float) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return default


def _named_sessions(runs: list[tuple[RunPaths, dict[str, Any]]]) -> list[leftovers.NamedSession]:
    """The sessions ended runs created under a name of the user's (``--session NAME``): each
    one the run that last used its name (``runs`` is newest first) created — a name a later
    run, or a running one, uses is its."""
    named: list[leftovers.NamedSession] = []
    seen: set[tuple[str, str]] = set()
    for run, snap in runs:
        place = snap.get("multiplexer") or {}
        name, backend = place.get("session"), place.get("backend")
        if not isinstance(name, str) or not isinstance(backend, str) or (backend, name) in seen:
            continue
        seen.add((backend, name))
        if place.get("created_session") is True and snap["state"] in ENDED and name != names.session(run.run_id):
            tmux_id = place.get("session_id")
            named.append(leftovers.NamedSession(run.run_id, backend, name,
                                                tmux_id if isinstance(tmux_id, str) else None))
    return named


def _worktrees(run: RunPaths, snap: dict[str, Any], *, dry_run: bool, force: bool,
               drop_ignored: bool) -> Iterator[Line]:
    """Remove the run's worktrees, each one only if removing it loses nothing but what
    ``drop_ignored`` lets go (``force``: whatever it holds); each line names the worktree, its
    task and what became of its branch."""
    names = {t["id"]: t["name"] for t in snap["tasks"]}
    branches = {t["id"]: (t.get("worktree") or {}).get("branch") for t in snap["tasks"]}
    base = _base(run)
    yield from _deleted_by_hand(run, snap, base, dry_run=dry_run)
    for path in worktree.made(run.dir):
        what = f"worktree {path} (task {names.get(path.name, path.name)!r} of run {run.run_id})"
        try:
            held = None if force else worktree.unsaved(path)
            if held is not None and (held.work or (held.ignored and not drop_ignored)):
                yield Line(f"{'would keep' if dry_run else 'kept'} {what}: {_kept_because(held)}", kept_work=True)
                continue
            dropped = f" with {_ignored(held)}" if held is not None and held.ignored else ""
            if dry_run:
                yield Line(f"would remove {what}{dropped}")
            else:
                removed = worktree.remove(path, base=base.commit if base else None, force=force,
                                          task_branch=branches.get(path.name))
                yield Line(f"removed {what}{dropped}; {_branch_fate(removed)}")
        except worktree.WorktreeError as e:
            yield Line(f"cannot remove {what}: {e}", kept_work=True)


def _kept_because(held: worktree.Unsaved) -> str:
    """What a kept worktree holds, and how to save it or let it go."""
    what, save = [], []
    if held.uncommitted:
        what.append(f"uncommitted work in {_plural(len(held.uncommitted), 'file')} ({_shown(held.uncommitted)})")
        save.append("commit it")
    if held.stray_commits:
        what.append(f"{_plural(held.stray_commits, 'commit')} on no branch (its HEAD is detached at "
                    f"{held.head[:12]})")
        save.append("make a branch of it")
    if held.ignored:
        what.append(f"{_plural(held.ignored_files, 'file')} git ignores ({_size(held.ignored_bytes)}: "
                    f"{_shown(held.ignored)})")
    if not save:
        return f"{what[0]}; move them out, or prune --drop-ignored to discard them"
    branch = " (git branch NAME)" if held.stray_commits else ""
    return f"{', and '.join(what)}; {' and '.join(save)} there{branch}, or prune --force to discard it"


def _ignored(held: worktree.Unsaved) -> str:
    return f"{_plural(held.ignored_files, 'file')} git ignores ({_size(held.ignored_bytes)})"


def _shown(names: list[str]) -> str:
    return ", ".join(names[:SHOWN_FILES]) + (", …" if len(names) > SHOWN_FILES else "")


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _size(n: int) -> str:
    """Bytes as people read them, in SI units (as ``du --si``): ``17 B``, ``1.2 kB``."""
    size, unit = float(n), "B"
    for bigger in ("kB", "MB", "GB", "TB"):
        if size < 1000:
            break
        size, unit = size / 1000, bigger
    return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"


def _branch_fate(removed: worktree.Removed) -> str:
    detached = "its HEAD was on no branch (detached)"
    if removed.branch is None:
        return detached
    if removed.branch_deleted:
        fate = f"deleted its branch {removed.branch}, which held no commits"
    else:
        commits = "" if removed.commits is None else f" ({_plural(removed.commits, 'commit')})"
        fate = f"kept its branch {removed.branch}{commits}"
    return f"{detached}; {fate}" if removed.detached else fate


def _deleted_by_hand(run: RunPaths, snap: dict[str, Any], base: worktree.Base | None, *,
                     dry_run: bool) -> Iterator[Line]:
    """The run's worktrees whose directories were deleted or moved by hand while their
    repository still records them (their branches checked out there, for git): each record
    removed, the run's own only (``worktree.forget``), with a line that says so."""
    made = worktree.worktrees_dir(run.dir)
    gone = [t for t in snap["tasks"] if t.get("worktree") and not os.path.lexists(made / t["id"])]
    records = worktree.missing_records(base) if base is not None and gone else {}
    for task in gone:
        path = made / task["id"]
        if base is None or (where := worktree.as_recorded(path)) not in records:
            continue
        what = f"git's record of worktree {path} (task {task['name']!r} of run {run.run_id}), deleted or moved by hand"
        if dry_run:
            yield Line(f"would remove {what}")
            continue
        try:
            forgotten = worktree.forget(where, base=base, branch=records[where],
                                        task_branch=task["worktree"].get("branch"))
        except worktree.WorktreeError as e:
            yield Line(f"cannot remove {what}: {e}", kept_work=True)
            continue
        yield Line(f"removed {what}; {_branch_fate(forgotten)}")


def _base(run: RunPaths) -> worktree.Base | None:
    """What the run's worktrees were made from (``run.json``'s ``worktree_base``)."""
    try:
        return worktree.Base.from_record(read_json(run.run_json).get("worktree_base"))
    except (OSError, ValueError, KeyError, TypeError):
        return None


