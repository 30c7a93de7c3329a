"""``zellij-swarm logs``: one attempt's output, optionally followed as it grows.

Following waits on file events (``watch.follow``: an inotify watch on the generation
directory) and stops once the attempt's exit is committed and everything written has been
printed. Following a task that is still pending first waits for it to start (the run's
snapshots change when it does). Ctrl-C ends the waiting quietly.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from zellij_swarm import exc
from zellij_swarm.commands import status as views
from zellij_swarm.records import generation_files
from zellij_swarm.records.generation_files import GenPaths
from zellij_swarm.records.rundir import RunPaths
from zellij_swarm.watch import follow

MIN_INTERVAL = 0.05  # seconds between two looks: a worker writing nonstop is read in batches


def _attempt_gen(run: RunPaths, task: dict[str, Any], attempt: int | None) -> GenPaths | None:
    history = task.get("history") or []
    if attempt is not None:
        for a in history:
            if a["attempt"] == attempt:
                return run.gen(a["slot"], a["generation"])
        if task["status"] == "running" and attempt == task["attempts"]:
            return run.gen(task["slot"], task["generation"])
        raise exc.UsageError(f"task {task['name']!r} has no attempt {attempt} (it has {task['attempts']})")
    if task["slot"] is None:
        return None
    return run.gen(task["slot"], task["generation"])


def show(run: RunPaths, key: str, *, attempt: int | None, follow: bool, out: BinaryIO | None = None) -> int:
    out = out or sys.stdout.buffer
    snap = views.load_status(run)
    task = views.find_task(snap, key)
    gen = _attempt_gen(run, task, attempt)
    if gen is None and follow and snap["state"] == "running":
        print(f"zellij-swarm: task {task['name']!r} is pending; waiting for it to start", file=sys.stderr)
        snap, task = _wait_for_start(run, snap, task)
        gen = _attempt_gen(run, task, attempt)
    if gen is None:
        print(f"zellij-swarm: task {task['name']!r} " + ("has not started yet" if task["status"] == "pending" else
              f"ended without starting ({task['status']}{': ' + task['reason'] if task.get('reason') else ''})"),
              file=sys.stderr)
        return 0
    offset = _copy_from(gen, 0, out)
    if follow and snap["state"] == "running" and gen.dir.is_dir():
        for _ in _changes(gen.dir):
            offset = _copy_from(gen, offset, out)
            if _over(run, gen, task["id"]):
                _copy_from(gen, offset, out)
                break
    return 0


def _over(run: RunPaths, gen: GenPaths, task_id: str) -> bool:
    """The generation followed has ended, or its run has: its exit is committed, it was folded
    away (its outcome is in the log, its directory gone or left with its output only), or the
    run's status no longer shows it running."""
    if generation_files.ended_at(gen) is not None or not gen.dir.is_dir():
        return True
    snap = views.load_status(run)
    task = views.find_task(snap, task_id)
    return (snap["state"] != "running" or task["status"] != "running"
            or (task["slot"], task["generation"]) != (gen.slot, gen.gen))


def _wait_for_start(run: RunPaths, snap: dict[str, Any], task: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The run's status (from ``snap``, ``task`` on) once the task has a generation, has ended
    without one (skipped, cancelled), or the run stopped running (or the user pressed Ctrl-C)."""
    task_id = task["id"]
    for _ in _changes(run.dir):
        snap = views.load_status(run)
        task = views.find_task(snap, task_id)
        if task["slot"] is not None or task["status"] != "pending" or snap["state"] != "running":
            break
    return snap, task


def _changes(path: Path) -> Iterator[None]:
    """Yields once the watch on ``path`` is in place, then on every change of a file in it
    and at least once a second (a supervisor that died changes no file), never twice within
    ``MIN_INTERVAL``. Ctrl-C ends it, quietly: the following is over."""
    try:
        for _ in follow([path], threading.Event()):
            looked = time.monotonic()
            yield None
            rest = MIN_INTERVAL - (time.monotonic() - looked)
            if rest > 0:
                time.sleep(rest)
    except KeyboardInterrupt:
        return


def _copy_from(gen: GenPaths, offset: int, out: BinaryIO) -> int:
    try:
        with open(gen.output, "rb") as f:
            f.seek(offset)
            while chunk := f.read(1 << 16):
                out.write(chunk)
                offset += len(chunk)
    except FileNotFoundError:
        return offset
    out.flush()
    return offset
