"""Resuming an interrupted run: the supervisor's side of ``recovery``.

``recovery`` reads the records; this mixin turns them back into live state — task history,
adopted wrappers followed where they run, exits that happened meanwhile handled as if seen
now, the ready queue rebuilt for the rest, and the dispatch counts replayed from the event log
(completed with the reservations a kill kept out of it), so the metrics are the whole run's. Part of ``Supervisor`` (a mixin only to keep
the modules small): it uses the supervisor's state and its generation-following methods.
"""

from __future__ import annotations

import os
from typing import Any

from . import sidecars
from .backends.base import LaunchRequest
from .live import LiveGen
from .model import TaskRecord
from .recovery import Recovered
from .states import TaskStatus


class RestoreMixin:
    def _restore(self, rec: Recovered) -> None:
        """Rebuild every task from the records of an interrupted run (see ``recovery``):
        record exits that happened meanwhile, adopt live wrappers, queue the rest."""
        self._add_tasks(rec.specs, enqueue=False)
        for lost in rec.unlogged:  # reservations the killed supervisor made but never logged, at their time
            self.events.emit(lost["event"], **{k: v for k, v in lost.items() if k != "event"})
        self.events.emit("run_resumed", run_id=self.run_id, pid=os.getpid(), generations=len(rec.gens))
        self.stats = rec.stats  # replayed from that completed log: the metrics are the whole run's
        by_task: dict[str, list] = {}
        for gs in rec.gens:
            self.slots.seen(gs.gen.slot, gs.gen.gen)
            if gs.task_id not in self.tasks or gs.state == "unstarted":
                sidecars.take_claim(gs.gen)  # it never ran, and now never will: a new generation runs instead
            else:
                by_task.setdefault(gs.task_id, []).append(gs)
        to_collect: list[LiveGen] = []
        to_adopt: list[LiveGen] = []
        for task_id, gens in by_task.items():
            task = self.tasks[task_id]
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
                    self._replay(lg, gs)
            if busy or (to_collect and to_collect[-1].task is task):
                task.restore(TaskStatus.RUNNING)
            else:
                self._status_after(task)
        for task in self.tasks.values():
            if task.status == TaskStatus.PENDING and task.id in rec.settled:
                status, reason = rec.settled[task.id]
                task.finish(TaskStatus(status), reason)
            if task.status.terminal:
                self.ready.settled(task.id, task.status == TaskStatus.SUCCEEDED)
        for task in self.tasks.values():
            if task.status == TaskStatus.PENDING and task.id not in self.ready:
                after = [self.by_name[d].id for d in task.spec.after]
                for skipped in self.ready.add(task.id, after=after, priority=task.spec.priority, order=task.order):
                    self._skip(self.tasks[skipped])
        for lg in to_collect:
            self._adopt(lg)
            self._collect(lg)
        for lg in to_adopt:
            self._adopt(lg)
        self.control.read_inbox()  # what was sent while no supervisor was there (a cancel, an addition)

    def _replay(self, lg: LiveGen, gs: Any) -> None:
        """Put a generation that ended before this supervisor into its task's history."""
        exit_rec = gs.exit or sidecars.record_missing_exit(lg.gen, reason=gs.kill_reason or "no_exit_record",
                                                           code=None, signal=None, ended_at=self.wallclock())
        if gs.recorded is not None:
            status, reason = TaskStatus(gs.recorded["status"]), gs.recorded.get("reason")
        else:
            # no backend is open yet: a hang-up is read as its pane's, as it was while it ran
            status, reason = self._outcome(lg, exit_rec, session_alive=True)
        lg.task.end_generation(status, exit_rec, reason, backfill=lg.backfill, ended_at=self.wallclock())
        if not gs.followups_consumed:
            self.control.followups(lg)

    def _status_after(self, task: TaskRecord) -> None:
        """A restored task with only finished attempts: retry it, or end it as its last attempt."""
        last = task.history[-1]
        again = last.reason == "multiplexer_lost" or (last.status.retryable and task.attempts_left)
        if again and last.status != TaskStatus.SUCCEEDED:
            task.restore(TaskStatus.PENDING)
        else:
            task.restore(last.status, last.reason)

    def _adopt(self, lg: LiveGen) -> None:
        """Follow a wrapper that outlived its supervisor: file events on its directory for the
        exit, a pidfd on its pid to notice it vanishing, and what is left of its time limits."""
        slot = lg.gen.slot
        self.slots.adopt(slot)
        self.live[slot] = lg
        lg.task.restore(TaskStatus.RUNNING)
        self.events.emit("worker_adopted", task=lg.task.name, slot=slot, gen=lg.gen.gen, pid=lg.pid)
        self.follow.watch(lg)
        started = sidecars.started_at(lg.gen)
        self._arm_limits(lg, elapsed=self.wallclock() - started if started is not None else 0.0)
        self.follow.changed(lg)  # it may have ended between the records' reading and now
        if lg.collected:
            return
        if lg.pid is None:
            self._collect(lg)
        else:
            self.follow.follow_pid(lg)  # collected at once if already gone
        if lg.kill_reason is not None and not lg.collected:  # the old supervisor had begun ending it
            reason, lg.kill_reason = lg.kill_reason, None
            self._kill(lg, reason)
