"""``zellij-swarm prune``: clean up after ended runs.

Sessions zellij-swarm created are kept at the end of a run so the user can attach and look
(SPEC §2), and so are its window (tmux) or tab (Zellij) in the user's own session when
something failed. Prune removes those of ended runs — sessions, windows and tabs, found by
the names a run gives them (``backends.leftovers``) — and deletes the records of ended runs
older than a given age. Running and interrupted runs (a supervisor alive, or one that
``resume`` may still continue) are never touched.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from zellij_swarm import exc
from zellij_swarm.backends import leftovers
from zellij_swarm.commands import status as views
from zellij_swarm.records.rundir import RunPaths, all_runs

ENDED = ("finished", "cancelled")


def prune(state_dir: Path, env: Mapping[str, str], *, older_than: float, dry_run: bool) -> Iterator[str]:
    verb = "would remove" if dry_run else "removed"
    ended = list(_ended_runs(state_dir))
    found: dict[str, list[leftovers.Leftover]] = {}
    for left in leftovers.find(env, [run.run_id for run, _ in ended]):
        found.setdefault(left.run_id, []).append(left)
    now = time.time()
    for run, snap in ended:
        for left in found.get(run.run_id, []):
            if left.remove is None:
                yield f"cannot remove {left.what}: {left.why}"
                continue
            if not dry_run:
                left.remove()
            yield f"{verb} {left.what}"
        ended_at = snap.get("ended_at") or snap.get("started_at") or now
        if now - ended_at > older_than:
            if not dry_run:
                shutil.rmtree(run.dir)
            yield f"{verb} run {run.run_id} ({run.dir})"


def _ended_runs(state_dir: Path) -> Iterator[tuple[RunPaths, dict[str, Any]]]:
    for run in all_runs(state_dir):
        try:
            snap = views.load_status(run)
        except (exc.SwarmError, OSError, ValueError, KeyError):
            continue
        if snap["state"] in ENDED:
            yield run, snap
