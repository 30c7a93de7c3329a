"""Reading an interrupted run back from its records, for ``zellij-swarm resume`` (SPEC §8).

The generation directories are the ground truth: each wrapper's header names its task,
slot, generation and attempt; its claim says whether it ran; its exit sidecar whether it
ended. The event log adds what only the supervisor knew (outcomes it recorded, kill
reasons, consumed follow-ups and inbox messages, its dispatch counts — replayed by
``metrics``, so that a resumed run's metrics are the whole run's). A generation is in one
of four states:

- ``ended``: its exit is committed (recorded before the crash, or meanwhile);
- ``running``: its wrapper is alive — the same process, checked by pid **and** start time
  and command line, never a recycled pid — and is adopted;
- ``vanished``: it ran but its wrapper is gone without an exit record → ``lost``;
- ``unstarted``: nobody claimed it; the resuming supervisor takes the claim so that a late
  pane cannot run it, and the task is dispatched again as a new generation.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from . import exc, generation_files, metrics, records, runlock, settings, swarmfile
from .generation_files import ExitRecord, GenPaths
from .rundir import RunPaths, has_record, read_json

START_TOLERANCE = 1.0  # seconds: file mtimes are coarse, process start times are rounded


@dataclass
class GenState:
    gen: GenPaths
    task_id: str
    attempt: int
    state: str  # ended | running | vanished | unstarted
    exit: ExitRecord | None = None
    recorded: dict[str, Any] | None = None  # the worker_completed/failed event, if the old supervisor saw it
    kill_reason: str | None = None
    pid: int | None = None
    pane_id: str | None = None
    followups_consumed: bool = False


@dataclass
class Recovered:
    meta: dict[str, Any]
    env: dict[str, str]
    specs: list[swarmfile.TaskSpec]
    gens: list[GenState]
    settled: dict[str, tuple[str, str | None]] = field(default_factory=dict)  # task -> (status, reason) without a gen
    consumed_messages: set[str] = field(default_factory=set)
    stats: metrics.DispatchStats = field(default_factory=metrics.DispatchStats)  # replayed from the event log
    unlogged: list[dict[str, Any]] = field(default_factory=list)  # reservations a kill kept out of the log


def load_environment(path: Path) -> dict[str, str]:
    """Parse the ``export K='v'`` lines written by ``records.save_environment``."""
    env: dict[str, str] = {}
    try:
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
    except FileNotFoundError:
        return env
    for line in text.splitlines():
        words = shlex.split(line)
        if len(words) == 2 and words[0] == "export" and "=" in words[1]:
            key, _, value = words[1].partition("=")
            env[key] = value
    return env


def wrapper_alive(gen: GenPaths, pid: int) -> bool:
    """The wrapper that claimed ``gen`` is still this very process (not a recycled pid)."""
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        created = proc.create_time()
        cmdline = proc.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False
    claimed = generation_files.started_at(gen)
    return claimed is not None and created <= claimed + START_TOLERANCE and str(gen.wrapper) in cmdline


def task_specs(meta: dict[str, Any], events: list[dict[str, Any]]) -> list[swarmfile.TaskSpec]:
    """Every task of a run in id order: those of ``run.json``, then those added while it ran
    (``add``, follow-ups), which only the event log records."""
    records_ = list(meta["tasks"]) + [e["spec"] for e in events if e["event"] == "task_added"]
    return [swarmfile.TaskSpec.from_record(t) for t in records_]


def load(run: RunPaths) -> Recovered:
    holder = runlock.holder(run)
    if holder is not None:
        raise exc.RunBusy(f"run {run.run_id} is still supervised by pid {holder}; nothing to resume")
    meta = read_json(run.run_json)
    if has_record(run.summary):
        raise exc.RunNotActive(f"run {run.run_id} has finished; nothing to resume")
    events = records.read_events(run.events)
    specs = task_specs(meta, events)
    outcome_events = {(e["slot"], e["gen"]): e for e in events if e["event"] in ("worker_completed", "worker_failed")}
    followups = {(e["slot"], e["gen"]) for e in events if e["event"] == "followups_consumed"}
    rec = Recovered(meta, load_environment(run.saved_env), specs, [])
    rec.consumed_messages = {e["id"] for e in events if e["event"] == "inbox_consumed"}
    logged = {(e["event"], e.get("slot"), e.get("gen")) for e in events if e["event"] in ("slot_reserved", "backfill")}
    names = {s.name: f"t{i}" for i, s in enumerate(specs, 1)}
    task_names = {tid: name for name, tid in names.items()}
    for slot in run.slot_numbers():
        for gen in run.generations(slot):
            who = generation_files.read_wrapper_header(gen)
            rec.unlogged += _lost_reservation(gen, who, task_names, logged)
            if who is None:  # created, but its wrapper never written: it cannot have run
                rec.gens.append(GenState(gen, "", 0, "unstarted"))
                continue
            gs = _inspect(gen, *who, outcome_events.get((slot, gen.gen)))
            gs.followups_consumed = (slot, gen.gen) in followups
            rec.gens.append(gs)
    rec.unlogged.sort(key=lambda e: e["ts"])
    rec.stats = metrics.DispatchStats.replay([*events, *rec.unlogged])
    for e in events:
        task = e.get("task")
        if e["event"] in ("task_cancelled", "task_skipped") and isinstance(task, str) and task in names:
            status = "cancelled" if e["event"] == "task_cancelled" else "skipped"
            rec.settled[names[task]] = (status, e.get("reason"))
    return rec


def _lost_reservation(gen: GenPaths, who: tuple[str, int] | None, task_names: dict[str, str],
                      logged: set[tuple[str, Any, Any]]) -> list[dict[str, Any]]:
    """The reservation events (as ``Supervisor._reserve`` writes them) of a generation that is
    on disk but not in the log: a supervisor writes its log once per loop turn, after it has
    launched that turn's workers, so a kill can lose them. Stamped with the time the wrapper
    was written (right after the reservation) and marked ``recovered``."""
    slot, no = gen.slot, gen.gen
    lost: list[dict[str, Any]] = []
    if ("slot_reserved", slot, no) not in logged:
        lost.append({"event": "slot_reserved", "attempt": who[1] if who else None})
    if no > 1 and ("backfill", slot, no) not in logged:
        lost.append({"event": "backfill"})
    if not lost:
        return []
    try:
        ts = (gen.wrapper if who else gen.dir).stat().st_mtime
    except FileNotFoundError:
        ts = gen.dir.stat().st_mtime
    task = task_names.get(who[0]) if who else None
    return [{"ts": round(ts, 6), "event": e.pop("event"), "task": task, "slot": slot, "gen": no, **e,
             "recovered": True} for e in lost]


def _inspect(gen: GenPaths, task_id: str, attempt: int, recorded: dict[str, Any] | None) -> GenState:
    gs = GenState(gen, task_id, attempt, "unstarted", recorded=recorded)
    gs.kill_reason = generation_files.kill_reason(gen)
    launch = generation_files.heartbeat_started(gen)
    if launch:
        gs.pane_id = launch["pane_id"]
    gs.exit = generation_files.collect_exit(gen)
    gs.pid = generation_files.wrapper_pid(gen)
    if gs.exit is not None:
        gs.state = "ended"
    elif gs.pid is not None:
        gs.state = "running" if wrapper_alive(gen, gs.pid) else "vanished"
        # a wrapper that exits between the two checks has committed its record by now
        if gs.state == "vanished" and (late := generation_files.collect_exit(gen)) is not None:
            gs.exit, gs.state = late, "ended"
    return gs


def resolved_settings(meta: dict[str, Any]) -> settings.Resolved:
    return settings.Resolved.from_record(meta["settings"])
