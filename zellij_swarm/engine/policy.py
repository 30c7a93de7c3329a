"""The run's task policy (SPEC §8): what becomes of a task when one of its generations has
ended — it runs again (a ``restart``, a retry while attempts are left and the run goes on) or
takes its final status, and then its dependents are released or skipped, its joblog row is
written and, after a failure, ``--halt`` stops the run — and of the tasks still waiting
when the run is told to stop. ``RunStop`` holds every reason the run stops starting tasks.

Both take their collaborators in their constructors; neither knows the supervisor. Ending a
running generation is not decided here: a cancel, a halt or a restart asks ``kill``, and
the generation's own end comes back through ``generation_ended`` with the outcome the
outcome rule (``engine.outcome``) gave it.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from zellij_swarm.engine.live import LiveGen
from zellij_swarm.engine.outcome import kill_reached
from zellij_swarm.engine.scheduler import ReadyQueue
from zellij_swarm.engine.stopping import CANCELLED_BY_USER, RESTARTED
from zellij_swarm.records.generation_files import ExitRecord, GenPaths
from zellij_swarm.records.joblog import JobLog
from zellij_swarm.records.log import EventLog
from zellij_swarm.records.rows import TaskRow
from zellij_swarm.records.states import TaskStatus
from zellij_swarm.records.task import TaskRecord, command_text


@dataclass
class RunStop:
    """Why the run starts no more tasks; none of them set: it goes on."""

    signal: signal.Signals | None = None  # SIGINT or SIGTERM reached the supervisor
    cancelled: bool = False  # ``cancel RUN``
    halted: bool = False  # ``--halt`` after a failure
    launcher_failed: bool = False  # launchers kept dying with work given and none started
    start_error: str | None = None  # the backend could not start under require
    # What the user's whole-run stop did (not a cancel of one task before it): the generations
    # it set out to end, and whether it ended one — withdrew it before it ran (a Slurm step
    # still queued), or its signal reached its worker still running: the stop did something
    # then, whatever the worker did next (``outcome.kill_reached``) — or cancelled tasks still
    # waiting.
    ending: set[GenPaths] = field(default_factory=set)
    ended_a_generation: bool = False
    cancelled_waiting: bool = False
    # The user's stop came once every task had ended by itself (a cancel read in the turn the
    # last worker exited, a Ctrl-C as the run ends): it did none of the above and left no input
    # unread, so the run is not ``cancelled`` — its state and exit code are its tasks'
    # (``Supervisor._finish``).
    moot: bool = False

    def generation_ended(self, lg: LiveGen, status: TaskStatus, rec: ExitRecord | None) -> None:
        """One of the run's generations ended (with ``status``, its exit record ``rec``): one the
        whole-run stop set out to end was ended by it when it withdrew it before it ran (a
        Slurm step still queued: ``cancelled``), or when its signal reached its worker still
        running, whatever the worker did next (``outcome.kill_reached``)."""
        if lg.kill_reason == CANCELLED_BY_USER and lg.gen in self.ending and (  # (cheap test first: every end asks)
                status == TaskStatus.CANCELLED or rec is None or kill_reached(lg, rec)):
            self.ended_a_generation = True

    def ended_something(self, *, input_left: bool) -> bool:
        """Whether the whole-run stop ended anything, ``input_left`` unread too."""
        return self.ended_a_generation or self.cancelled_waiting or input_left

    @property
    def stopping(self) -> bool:
        return bool(self.signal or self.cancelled or self.halted or self.launcher_failed or self.start_error)

    @property
    def cancelled_by_user(self) -> bool:
        """The run was stopped by its user (a signal, ``cancel``) while it had something to
        stop: its state is ``cancelled``."""
        return (self.signal is not None or self.cancelled) and not self.moot


class TaskReporter(Protocol):
    def task_ended(self, task: TaskRecord, gen: GenPaths | None) -> None: ...


class TaskPolicy:
    def __init__(self, *, tasks: Mapping[str, TaskRecord], ready: ReadyQueue, live: Mapping[int, LiveGen],
                 stop: RunStop, halt: str, joblog: JobLog | None, events: EventLog, reporter: TaskReporter,
                 warn: Callable[[str, str, TaskRecord | None], None], kill: Callable[[LiveGen, str], None],
                 changed: Callable[[], None],
                 after_output: Callable[[GenPaths | None, Callable[[], None]], None] = lambda _gen, read: read(),
                 ) -> None:
        """``kill`` ends a running generation on purpose; ``changed`` marks the run's
        snapshot stale; ``after_output`` runs what reads a generation's output once it is
        whole in its log (a tmux pane's copy may come after its worker's end)."""
        self._tasks = tasks
        self._ready = ready
        self._live = live
        self.stop = stop
        self._halt = halt
        self._joblog = joblog
        self._events = events
        self._reporter = reporter
        self._warn = warn
        self._kill = kill
        self._changed = changed
        self._after_output = after_output
        self.ended_count = 0  # tasks that ended having run, and their total duration: for the ETA
        self.ended_took = 0.0
        # slot -> (task, first): a task to run again once the tree of its generation that ended
        # in that slot is gone (``tree_gone``)
        self._after_tree: dict[int, tuple[str, bool]] = {}

    def generation_ended(self, task: TaskRecord, status: TaskStatus, reason: str | None, gen: GenPaths, *,
                         tree_left: bool = False, cancelled: bool = False) -> None:
        """One of ``task``'s generations ended with ``status`` (its attempt is recorded): it
        runs again, or this is its final status. ``tree_left``: processes of that generation
        are still being ended (its wrapper is gone, not its worker, or not all of it): the
        task runs again only once they are (``tree_gone``) — never two runs of it at once.
        ``cancelled``: the generation was being cancelled (``runs_again``)."""
        if not self.runs_again(task, status, reason, cancelled=cancelled):
            self.finalise(task, status, reason, gen)
        elif reason == RESTARTED:
            task.restarts += 1  # SPEC §8: a restart does not use an attempt
            self._run_again(task, gen, first=True, tree_left=tree_left)
            self._events.emit("task_restarted", task=task.name, attempt=task.attempts + 1)
        else:
            self._run_again(task, gen, first=False, tree_left=tree_left)
            self._events.emit("task_retry", task=task.name, attempt=task.attempts + 1, after=str(status))

    def runs_again(self, task: TaskRecord, status: TaskStatus, reason: str | None, *, cancelled: bool = False) -> bool:
        """Whether an end of ``task``'s generation with ``status`` and ``reason`` runs it again:
        a restart, or a failure while attempts remain — unless the run is stopping, or the
        generation was being cancelled (``cancelled``): a task asked to cancel never runs
        again, also when it ended on its own first, the cancel's signal ignored or too late
        (its own end is its outcome, and its retries go unused)."""
        return not self.stop.stopping and not cancelled and (
            reason == RESTARTED or (status.retryable and task.attempts_left))

    def _run_again(self, task: TaskRecord, gen: GenPaths, *, first: bool, tree_left: bool) -> None:
        task.move(TaskStatus.PENDING)
        if tree_left:
            self._after_tree[gen.slot] = (task.id, first)
        else:
            self._ready.requeue(task.id, first=first)

    def tree_gone(self, gen: GenPaths) -> None:
        """What was left of the generation that ended in ``gen``'s slot is gone: its task, if
        it runs again, may now."""
        waiting = self._after_tree.pop(gen.slot, None)
        if waiting is not None and not self.stop.stopping and self._tasks[waiting[0]].status == TaskStatus.PENDING:
            self._ready.requeue(waiting[0], first=waiting[1])

    def _waiting_for_trees(self) -> list[str]:
        """The tasks to run again once their last generation's tree is gone, forgotten."""
        waiting = [tid for tid, _ in self._after_tree.values()]
        self._after_tree.clear()
        return waiting

    def finalise(self, task: TaskRecord, status: TaskStatus, reason: str | None, gen: GenPaths | None = None) -> None:
        """A task reached its final status: freeze it, release or skip its dependents."""
        task.finish(status, reason)
        if task.started_at is not None and task.ended_at is not None:
            self.ended_count += 1
            self.ended_took += task.ended_at - task.started_at
        row = task.row(now=None) if self._joblog is not None else None  # as it ended, whenever its line is written
        self._after_output(gen, lambda: self._report(task, gen, row))
        if status == TaskStatus.TIMED_OUT:
            self._events.emit("task_timed_out", task=task.name, reason=reason)
        elif status == TaskStatus.CANCELLED:
            self._events.emit("task_cancelled", task=task.name, reason=reason)
        _, skipped = self._ready.finished(task.id, succeeded=status == TaskStatus.SUCCEEDED)
        for tid in skipped:
            self.skip(self._tasks[tid])
        if status not in (TaskStatus.SUCCEEDED, TaskStatus.CANCELLED, TaskStatus.UNKNOWN):  # unknown: maybe fine
            self._failed()

    def _report(self, task: TaskRecord, gen: GenPaths | None, row: TaskRow | None) -> None:
        """The joblog's line of a task that ended (``row``: its row then; its output counted)
        and its report (its output copied)."""
        if self._joblog is not None and row is not None and (
                problem := self._joblog.task_finished(row, command_text(task.spec))):
            self._warn("joblog_error", problem, task)
        self._reporter.task_ended(task, gen)

    def skip(self, task: TaskRecord) -> None:
        task.finish(TaskStatus.SKIPPED, "dependency_failed")
        self._events.emit("task_skipped", task=task.name, reason="dependency_failed")
        self._reporter.task_ended(task, None)

    def cancel_pending(self, reason: str) -> bool:
        """Every task still waiting ends ``cancelled`` with ``reason``; whether there was one."""
        waiting = [*self._ready.drain(), *self._waiting_for_trees()]
        for tid in waiting:
            self.finalise(self._tasks[tid], TaskStatus.CANCELLED, reason)
        self._changed()
        return bool(waiting)

    def cancel_task(self, task: TaskRecord) -> bool:
        """Cancel one task: a waiting one ends now, a running one through the ladder. False
        when it had already ended."""
        if task.status == TaskStatus.PENDING:
            self._ready.discard(task.id)
            self._after_tree = {slot: w for slot, w in self._after_tree.items() if w[0] != task.id}
            self.finalise(task, TaskStatus.CANCELLED, CANCELLED_BY_USER)
            return True
        if task.status == TaskStatus.RUNNING and (lg := self._running(task)) is not None:
            self._kill(lg, CANCELLED_BY_USER)
            return True
        return False

    def restart_task(self, task: TaskRecord) -> bool:
        """End a running task's generation through the one stopping path and run it again at
        once (``RESTARTED``); False when it is not running."""
        if task.status != TaskStatus.RUNNING or (lg := self._running(task)) is None:
            return False
        self._kill(lg, RESTARTED)
        return True

    def _running(self, task: TaskRecord) -> LiveGen | None:
        return self._live.get(task.slot) if task.slot is not None else None

    def _failed(self) -> None:
        """A task failed: under ``--halt soon`` nothing more starts, under ``--halt now`` the
        running ones are ended too."""
        if self._halt == "never" or self.stop.halted:
            return
        self.stop.halted = True
        self._warn("halted", f"--halt {self._halt}: stopping after the first failure", None)
        self.cancel_pending("halted")
        if self._halt == "now":
            for lg in list(self._live.values()):
                self._kill(lg, "halted")
