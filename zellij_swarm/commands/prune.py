"""``zellij-swarm prune``: clean up after ended runs.

Sessions zellij-swarm created are kept at the end of a run so the user can attach and look
(SPEC §2); prune removes those of ended runs (``swarm-<run-id>``, in Zellij and tmux), and
deletes the records of ended runs older than a given age. Running and interrupted runs (a
supervisor alive, or one that ``resume`` may still continue) are never touched.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from zellij_swarm import exc
from zellij_swarm.backends import Zellij, run_command
from zellij_swarm.commands import status as views
from zellij_swarm.records.rundir import all_runs

ENDED = ("finished", "cancelled")


def prune(state_dir: Path, env: Mapping[str, str], *, older_than: float, dry_run: bool) -> Iterator[str]:
    verb = "would remove" if dry_run else "removed"
    zellij_sessions = _zellij_sessions(env)
    now = time.time()
    for run in all_runs(state_dir):
        try:
            snap = views.load_status(run)
        except (exc.SwarmError, OSError, ValueError, KeyError):
            continue
        if snap["state"] not in ENDED:
            continue
        name = f"swarm-{run.run_id}"
        if name in zellij_sessions:
            if not dry_run:
                Zellij(env).call("delete-session", "--force", name, session=False, check=False)
            yield f"{verb} zellij session {name}"
        if _tmux_has(env, name):
            if not dry_run:
                run_command(["tmux", "kill-session", "-t", f"={name}"], timeout=10, env=env, check=False)
            yield f"{verb} tmux session {name}"
        ended = snap.get("ended_at") or snap.get("started_at") or now
        if now - ended > older_than:
            if not dry_run:
                shutil.rmtree(run.dir)
            yield f"{verb} run {run.run_id} ({run.dir})"


def _zellij_sessions(env: Mapping[str, str]) -> set[str]:
    if not shutil.which("zellij", path=env.get("PATH")):
        return set()
    try:
        return set(Zellij(env).sessions())
    except exc.BackendError:
        return set()


def _tmux_has(env: Mapping[str, str], name: str) -> bool:
    if not shutil.which("tmux", path=env.get("PATH")):
        return False
    try:
        return run_command(["tmux", "has-session", "-t", f"={name}"], timeout=10, env=env, check=False).returncode == 0
    except exc.BackendError:
        return False
