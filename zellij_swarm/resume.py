"""Resuming an interrupted run, on the supervisor's side: ``recovery`` reads the records;
``restore`` turns them back into live state — task history, adopted wrappers followed where
they run, exits that happened meanwhile handled as if seen now, the ready queue rebuilt for
the rest, and the dispatch counts replayed from the event log (completed with the
reservations a kill kept out of it), so the metrics are the whole run's.

What it needs of the supervisor is ``ResumedRun``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Protocol

from . import generation_files, metrics
from .backends.base import LaunchRequest
from .control import Control
from .follow import GenerationWatch
from .live import LiveGen
from .model import TaskRecord
from .records import EventLog
from .recovery import GenState, Recovered
from .scheduler import ReadyQueue
from .slots import Slots
from .states import TaskStatus
from .swarmfile import TaskSpec


class ResumedRun(Protocol):
    run_id: str
    stats: metrics.DispatchStats  # replaced by the one replayed from the records

    @property
    def tasks(self) -> Mapping[str, TaskRecord]: ...
    @property
    def by_name(self) -> Mapping[str, TaskRecord]: ...
    @property
    def ready(self) -> ReadyQueue: ...
    @property
    def slots(self) -> Slots: ...
    @property
    def live(self) -> dict[int, LiveGen]: ...
    @property
    def events(self) -> EventLog: ...
    @property
    def follow(self) -> GenerationWatch: ...
    @property
    def control(self) -> Control: ...

    def wallclock(self) -> float: ...
    def add_tasks(self, specs: list[TaskSpec], *, enqueue: bool = True) -> list[TaskRecord]: ...
    def skip(self, task: TaskRecord) -> None: ...
    def outcome(self, lg: LiveGen, rec: generation_files.ExitRecord, *,
                session_alive: bool) -> tuple[TaskStatus, str | None]: ...
    def arm_limits(self, lg: LiveGen, *, elapsed: float) -> None: ...
    def collect(self, lg: LiveGen, wait_status: int | None = None) -> None: ...
    def kill(self, lg: LiveGen, reason: str) -> None: ...


def restore(run: ResumedRun, rec: Recovered) -> None:
    """Rebuild every task from the records of an interrupted run (see ``recovery``):
    record exits that happened meanwhile, adopt live wrappers, queue the rest."""
    run.add_tasks(rec.specs, enqueue=False)
    for lost in rec.unlogged:  # reservations the killed supervisor made but never logged, at their time
        run.events.emit(lost["event"], **{k: v for k, v in lost.items() if k != "event"})
    run.events.emit("run_resumed", run_id=run.run_id, pid=os.getpid(), generations=len(rec.gens))
    run.stats = rec.stats  # replayed from that completed log: the metrics are the whole run's
    by_task: dict[str, list[GenState]] = {}
    for gs in rec.gens:
        run.slots.seen(gs.gen.slot, gs.gen.gen)
        if gs.task_id not in run.tasks or gs.state == "unstarted":
            generation_files.take_claim(gs.gen)  # it never ran, and now never will: a new generation runs instead
        else:
            by_task.setdefault(gs.task_id, []).append(gs)
    to_collect: list[LiveGen] = []
    to_adopt: list[LiveGen] = []
    for task_id, gens in by_task.items():
        task = run.tasks[task_id]
        gens.sort(key=lambda g: g.attempt)
        busy = any(g.state == "running" for g in gens)
        for gs in gens:
            task.attempts = max(task.attempts, gs.attempt)
            task.slot, task.generation, task.pane_id = gs.gen.slot, gs.gen.gen, gs.pane_id
            lg = LiveGen(task, gs.gen, LaunchRequest(gs.gen, gs.gen.slot, task.name, pane=gs.pane_id is not None),
                         backfill=gs.gen.gen > 1, pid=gs.pid, pane_id=gs.pane_id, heartbeat_seen=True,
                         timeout_armed=True, kill_reason=gs.kill_reason)
            if gs.state == "running":
                to_adopt.append(lg)
            elif gs.recorded is None and not busy and gs is gens[-1]:
                to_collect.append(lg)  # its last attempt ended unseen: handled as if seen now
            else:
                _replay(run, lg, gs)
        if busy or (to_collect and to_collect[-1].task is task):
            task.restore(TaskStatus.RUNNING)
        else:
            _status_after(task)
    for task in run.tasks.values():
        if task.status == TaskStatus.PENDING and task.id in rec.settled:
            status, reason = rec.settled[task.id]
            task.finish(TaskStatus(status), reason)
        if task.status.terminal:
            run.ready.settled(task.id, task.status == TaskStatus.SUCCEEDED)
    for task in run.tasks.values():
        if task.status == TaskStatus.RUNNING:  # adopted or collected below; a retry requeues it
            run.ready.handed_out(task.id, priority=task.spec.priority, order=task.order)
        elif task.status == TaskStatus.PENDING and task.id not in run.ready:
            after = [run.by_name[d].id for d in task.spec.after]
            for skipped in run.ready.add(task.id, after=after, priority=task.spec.priority, order=task.order):
                run.skip(run.tasks[skipped])
    for lg in to_collect:
        _adopt(run, lg)
        run.collect(lg)
    for lg in to_adopt:
        _adopt(run, lg)
    run.control.read_inbox()  # what was sent while no supervisor was there (a cancel, an addition)

def _replay(run: ResumedRun, lg: LiveGen, gs: GenState) -> None:
    """Put a generation that ended before this supervisor into its task's history."""
    exit_rec = gs.exit or generation_files.record_missing_exit(lg.gen, reason=gs.kill_reason or "no_exit_record",
                                                       code=None, signal=None, ended_at=run.wallclock())
    if gs.recorded is not None:
        status, reason = TaskStatus(gs.recorded["status"]), gs.recorded.get("reason")
    else:
        # no backend is open yet: a hang-up is read as its pane's, as it was while it ran
        status, reason = run.outcome(lg, exit_rec, session_alive=True)
    lg.task.end_generation(status, exit_rec, reason, backfill=lg.backfill, ended_at=run.wallclock())
    if not gs.followups_consumed:
        run.control.followups(lg)

def _status_after(task: TaskRecord) -> None:
    """A restored task with only finished attempts: retry it, or end it as its last attempt."""
    last = task.history[-1]
    again = last.reason == "multiplexer_lost" or (last.status.retryable and task.attempts_left)
    if again and last.status != TaskStatus.SUCCEEDED:
        task.restore(TaskStatus.PENDING)
    else:
        task.restore(last.status, last.reason)

def _adopt(run: ResumedRun, lg: LiveGen) -> None:
    """Follow a wrapper that outlived its supervisor: file events on its directory for the
    exit, a pidfd on its pid to notice it vanishing, and what is left of its time limits."""
    slot = lg.gen.slot
    run.slots.adopt(slot)
    run.live[slot] = lg
    lg.task.restore(TaskStatus.RUNNING)
    run.events.emit("worker_adopted", task=lg.task.name, slot=slot, gen=lg.gen.gen, pid=lg.pid)
    run.follow.watch(lg)
    started = generation_files.started_at(lg.gen)
    run.arm_limits(lg, elapsed=run.wallclock() - started if started is not None else 0.0)
    run.follow.changed(lg)  # it may have ended between the records' reading and now
    if lg.collected:
        return
    if lg.pid is None:
        run.collect(lg)
    else:
        run.follow.follow_pid(lg)  # collected at once if already gone
    if lg.kill_reason is not None and not lg.collected:  # the old supervisor had begun ending it
        reason, lg.kill_reason = lg.kill_reason, None
        run.kill(lg, reason)
