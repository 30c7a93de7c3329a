"""The control inbox on the supervisor's side: ``cancel``, ``add`` and ``pause`` messages
from the CLI, and the follow-ups a worker leaves in ``$ZELLIJ_SWARM_ARTIFACT_DIR/followups.jsonl``.

``Control`` reads and answers them; what they do to the run is the run's (``ControlledRun``,
which the supervisor is): cancel it all, cancel one task, add tasks, pause or unpause the
dispatching of new tasks (of a group, or of the run).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from zellij_swarm import exc
from zellij_swarm.config import additions, swarmfile
from zellij_swarm.engine.live import LiveGen
from zellij_swarm.engine.scheduler import ReadyQueue
from zellij_swarm.engine.stopping import RESTARTED
from zellij_swarm.engine.timers import Timer, Timers
from zellij_swarm.records import generation_files, inbox, rundir
from zellij_swarm.records.log import EventLog
from zellij_swarm.records.rundir import RunPaths
from zellij_swarm.records.states import TaskStatus
from zellij_swarm.records.task import EndedTask, TaskRecord

WHOLE_RUN = "the whole run"  # what a whole-run cancel's answer says it cancelled
_DONE = {"cancel": "cancelled", "add": "added", "pause": "paused or unpaused", "restart": "restarted"}
# How long the answer to a cancel or restart of running tasks waits for their generations to
# end: below the CLI's wait (30 s), so that a worker slow to die (a long kill grace) still
# gets its asker an answer — the tasks still ending counted as done, which they then are
# unless they end on their own first.
ANSWER_WITHIN = 20.0


@dataclass
class _Awaited:
    """The answer to a cancel or restart of running tasks, held until their generations have
    ended: only then is it known whether the kill ended them, or they ended on their own
    first (its signal still on its way) — and stay as they ended, not cancelled, not run again."""

    msg: inbox.Message
    answer: dict[str, Any]
    done: str  # the answer's list of what was done: "cancelled" | "restarted"
    not_done: str  # … and of what was not: "already_ended" | "not_running"
    ending: dict[str, str] = field(default_factory=dict)  # task id -> name, kill under way
    timer: Timer | None = None
    whole_run: bool = False  # a cancel of the whole run: it did something, or nothing (``_cancel_run``)


class ControlledRun(Protocol):
    @property
    def groups(self) -> Mapping[str, int]: ...

    def find_task(self, name_or_id: str) -> TaskRecord | EndedTask | None: ...
    def task_names(self) -> Iterable[str]: ...
    def kept_name(self, name: str) -> bool: ...  # the input still to be read will give a task this name
    def refusal(self, spec: swarmfile.TaskSpec) -> str | None: ...  # why the run could never run it

    def is_stopping(self) -> bool: ...
    def cancel_all(self) -> dict[str, str]: ...  # the running tasks it sets out to end: id -> name
    def stop_ended_something(self) -> bool: ...  # the whole-run stop ended a worker, a waiting task, input
    def cancel_task(self, task: TaskRecord) -> bool: ...  # False: it had already ended
    def add_live(self, specs: list[swarmfile.TaskSpec], *, source: str) -> None: ...
    def pause(self, group: str | None, paused: bool) -> None: ...
    def restart_task(self, task: TaskRecord) -> bool: ...  # False: it was not running
    @property
    def ready(self) -> ReadyQueue: ...


class Control:
    def __init__(self, run: ControlledRun, *, paths: RunPaths, run_id: str, cwd: Path, events: EventLog,
                 timers: Timers, warn: Callable[[str, str, TaskRecord | None], None], applied: set[str]) -> None:
        self.run = run
        self.paths = paths
        self.run_id = run_id
        self.cwd = cwd
        self.events = events
        self.timers = timers
        self.warn = warn
        self.applied = applied  # message ids applied, by this supervisor or the one it resumes
        self._awaited: list[_Awaited] = []

    def read_inbox(self) -> None:
        for msg in inbox.pending(self.paths):
            if msg.id in self.applied:  # applied before a crash, not yet moved away
                inbox.consume(self.paths, msg)
                continue
            self.applied.add(msg.id)
            # Apply, then record, then move: a crash before the record leaves the message
            # to be applied again (cancel and add are safe to repeat); never lost.
            self._apply(msg)
            self.events.emit("inbox_consumed", id=msg.id, kind=msg.body.get("kind"))
            self.events.flush()
            inbox.consume(self.paths, msg)

    def kill_ended(self, task: TaskRecord, status: TaskStatus, reason: str | None, *, signalled: bool) -> None:
        """A generation of ``task`` that was being ended on purpose has ended with ``status``
        (``reason``), its kill's signal having reached the worker or not (``signalled``): an
        answer held for it says whether the cancel or restart did it, and, when the task ended
        on its own (what it did stands), whether it runs again (its task policy has decided)."""
        for awaited in [a for a in self._awaited if task.id in a.ending]:
            name = awaited.ending.pop(task.id)
            if awaited.whole_run:  # its answer names no task: said once all have ended
                if not awaited.ending:
                    self._answer_held(awaited)
                continue
            took = reason == RESTARTED if awaited.done == "restarted" else status == TaskStatus.CANCELLED
            if not took:  # it ended on its own (before the signal, or ignoring it), or by another kill
                kind = awaited.msg.body.get("kind")
                # another kill under way took it: a cancel, a time limit already ending it
                why = (f"{status} meanwhile" if status in (TaskStatus.CANCELLED, TaskStatus.TIMED_OUT)
                       else f"{status} on its own, not of the {kind}'s signal" if signalled
                       else f"{status} before the {kind} reached it")
                if status not in (TaskStatus.CANCELLED, TaskStatus.SUCCEEDED):
                    why += "; retried" if task.status == TaskStatus.PENDING else "; not run again"
                awaited.answer[awaited.done].remove(name)
                awaited.answer[awaited.not_done].append(f"{name} ({why})")
            if not awaited.ending:
                self._answer_held(awaited)

    def answer_late(self) -> None:
        """The run is over: a message that arrived while it ended (during the end-of-run
        sweep, say) is answered and put away, never silently dropped; an answer still held
        goes as it stands."""
        for awaited in list(self._awaited):
            self._answer_held(awaited)
        for msg in inbox.pending(self.paths):
            if msg.id not in self.applied:
                done = _DONE.get(str(msg.body.get("kind")), "done")
                inbox.reply(self.paths, msg, {"ok": False, "error": f"run {self.run_id} had already ended; "
                                                                    f"nothing was {done}"})
                self.events.emit("inbox_consumed", id=msg.id, kind=msg.body.get("kind"), late=True)
            inbox.consume(self.paths, msg)

    def followups(self, lg: LiveGen) -> None:
        """Tasks the worker asked for in ``$ZELLIJ_SWARM_ARTIFACT_DIR/followups.jsonl``."""
        path = f"{generation_files.plain(lg.gen, generation_files.ARTIFACTS)}/{additions.FOLLOWUPS}"
        unread: str | None = None
        try:  # once per task: a plain string, not a pathlib join
            data = rundir.read_record(path, additions.MAX_FOLLOWUPS_BYTES + 1)  # a plain file only, never waited on
        except FileNotFoundError:
            return
        except rundir.UnsafeRecord as e:  # a FIFO, a directory, a link the worker put there
            data, unread = b"", f"{e}; ignored"
        except OSError as e:
            data, unread = b"", f"{path}: cannot be read ({e.strerror}); ignored"
        batch = additions.from_followups(data, Path(path), lg.task.name, self.run.task_names(), self.cwd,
                                         self.run.groups, kept=self.run.kept_name)
        if unread is not None:
            batch.errors.append(unread)
        self.events.emit("followups_consumed", task=lg.task.name, slot=lg.gen.slot, gen=lg.gen.gen,
                         added=len(batch.specs), duplicates=batch.duplicates)
        for error in batch.errors:
            self.warn("invalid_followup", error, lg.task)
        # A task run again (a retry, or a free re-run after its session was lost) that writes
        # its follow-ups again meets the names its earlier run added: nothing is lost. The first
        # time it ran (this generation's end is its first in the history), the name is another
        # task's, or the file's own twice.
        if batch.duplicates and len(lg.task.history) == 1:
            self.warn("invalid_followup", f"{path}: not added, a task of that name exists already: "
                                          f"{', '.join(map(repr, batch.duplicates))}", lg.task)
        if batch.specs and self.run.is_stopping():
            self.warn("invalid_followup", f"{len(batch.specs)} follow-up(s) ignored: the run is stopping", lg.task)
        elif batch.specs:
            self.run.add_live(batch.specs, source=f"followup {lg.gen.slot}/{lg.gen.gen}")

    def _apply(self, msg: inbox.Message) -> None:
        kind = msg.body.get("kind")
        tasks = msg.body.get("tasks")
        if kind in ("cancel", "restart") and tasks is not None and (
                not isinstance(tasks, list) or not all(isinstance(t, str) for t in tasks)):
            # names are looked up as strings: anything else in a message (written by hand, or by a
            # caller's ``Run.cancel(None)``) is refused here, never raised out of the loop
            error = f"{kind}: tasks must be a list of task names (strings), not {tasks!r}"
            self.warn("invalid_message", f"inbox message {msg.id}: {error}", None)
            inbox.reply(self.paths, msg, {"ok": False, "error": error})
        elif kind == "add":
            inbox.reply(self.paths, msg, self._add(msg))
        elif kind == "cancel" and not msg.body.get("tasks"):
            self._cancel_run(msg)
        elif kind == "cancel":
            self._answer_once_ended(msg, self._cancel(msg.body.get("tasks") or []), "cancelled", "already_ended")
        elif kind == "restart":
            self._answer_once_ended(msg, self._restart(msg.body.get("tasks") or []), "restarted", "not_running")
        elif kind == "pause":
            inbox.reply(self.paths, msg, self._pause(msg.body.get("group"), msg.body.get("paused") is not False))
        else:
            self.warn("invalid_message", f"inbox message {msg.id}: unknown kind {kind!r}", None)

    def _answer_once_ended(self, msg: inbox.Message, answer: dict[str, Any], done: str, not_done: str) -> None:
        """Answer a cancel or restart once the generations it is ending have ended (or after
        ``ANSWER_WITHIN``): the ``done`` tasks still running now are being ended."""
        ending = {task.id: task.name for name in answer[done]
                  if isinstance(task := self.run.find_task(name), TaskRecord) and task.status == TaskStatus.RUNNING}
        if not ending:
            inbox.reply(self.paths, msg, answer)
            return
        awaited = _Awaited(msg, answer, done, not_done, ending)
        awaited.timer = self.timers.after(ANSWER_WITHIN, lambda: self._answer_held(awaited))
        self._awaited.append(awaited)

    def _cancel_run(self, msg: inbox.Message) -> None:
        """Cancel the whole run, answered as a cancel of tasks is, once the generations it ends
        have ended: only then is it known whether it ended anything, or came once every task
        had ended on its own — the run then finishes as it would have, and the answer says
        nothing was cancelled (it said "the whole run")."""
        ending = self.run.cancel_all()
        awaited = _Awaited(msg, {"cancelled": [WHOLE_RUN], "already_ended": []}, "cancelled", "already_ended",
                           ending, whole_run=True)
        self._awaited.append(awaited)
        if ending:
            awaited.timer = self.timers.after(ANSWER_WITHIN, lambda: self._answer_held(awaited))
        else:
            self._answer_held(awaited)

    def _answer_held(self, awaited: _Awaited) -> None:
        if awaited not in self._awaited:
            return
        self._awaited.remove(awaited)
        if awaited.timer is not None:
            self.timers.cancel(awaited.timer)
        answer = awaited.answer
        if awaited.whole_run and not awaited.ending and not self.run.stop_ended_something():
            answer = {"cancelled": [], "already_ended": ["every task"]}
        done, not_done = answer[awaited.done], answer[awaited.not_done]
        answer = _cancelled(done, not_done) if awaited.done == "cancelled" else _restarted(done, not_done)
        if awaited.ending:  # signalled, not ended yet: done, unless they end on their own first
            answer["still_ending"] = sorted(awaited.ending.values())
        inbox.reply(self.paths, awaited.msg, answer)

    def _cancel(self, names: list[str]) -> dict[str, Any]:
        """Cancel the named tasks (names or ids); the reply says what it did."""
        cancelled, ended = [], []
        for name in names:
            task = self.run.find_task(name)
            if task is None:
                self.warn("invalid_message", f"cancel: no task {name!r}", None)
            elif isinstance(task, TaskRecord) and self.run.cancel_task(task):
                cancelled.append(task.name)
            else:
                ended.append(task.name)
        return _cancelled(cancelled, ended)

    def _add(self, msg: inbox.Message) -> dict[str, Any]:
        if self.run.is_stopping():
            return {"ok": False, "error": f"run {self.run_id} is stopping; nothing added"}
        try:
            specs = additions.from_message(msg.body.get("tasks"), self.run.task_names(), self.cwd, self.run.groups,
                                           kept=self.run.kept_name)
        except exc.UsageError as e:
            return {"ok": False, "error": str(e)}
        if (why := next(filter(None, map(self.run.refusal, specs)), None)) is not None:
            return {"ok": False, "error": why}
        self.run.add_live(specs, source=f"add {msg.id}")
        return {"ok": True, "added": [spec.name for spec in specs]}

    def _pause(self, group: object, paused: bool) -> dict[str, Any]:
        """Stop (or resume) handing out new tasks, of one group or of the whole run."""
        if group is not None and (not isinstance(group, str) or group not in self.run.groups):
            known = ", ".join(sorted(self.run.groups)) or "none"
            return {"ok": False, "error": f"run {self.run_id} has no group {group!r} (its groups: {known})"}
        self.run.pause(group, paused)
        return {"ok": True, "paused": paused, "group": group}

    def _restart(self, names: list[str]) -> dict[str, Any]:
        """End the named tasks' running generations and run them again at once, in a paused
        run (or group) too."""
        restarted, idle = [], []
        for name in names:
            task = self.run.find_task(name)
            if task is None:
                idle.append(name)
            elif isinstance(task, TaskRecord) and self.run.restart_task(task):
                self.run.ready.run_through_pause(task.id)  # an explicit request: at once, paused or not
                restarted.append(task.name)
            else:
                idle.append(f"{task.name} ({task.status})")
        return _restarted(restarted, idle)


def _cancelled(cancelled: list[str], ended: list[str]) -> dict[str, Any]:
    """The answer to a cancel: the tasks it cancelled, and those that had already ended."""
    return {"ok": bool(cancelled), "cancelled": cancelled, "already_ended": ended,
            **({} if cancelled else {"error": f"nothing to cancel: {', '.join(ended) or 'no such task'} "
                                              f"already ended"})}


def _restarted(restarted: list[str], idle: list[str]) -> dict[str, Any]:
    """The answer to a restart: the tasks it restarted, and those that were not running."""
    return {"ok": bool(restarted) and not idle, "restarted": restarted, "not_running": idle,
            **({} if not idle else {"error": f"not running, so not restarted: {', '.join(idle)}"})}
