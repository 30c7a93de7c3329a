"""The supervisor: one event loop that owns every task's state for the life of a run.

Each loop turn runs the same steps in the same order: wait on the selector (headless
wrappers' starts and ends from the launcher's pipe, pane wrappers' heartbeats and exits and
the control inbox through inotify, the wrappers' pidfds, results of the slow calls made on
the runner threads, signals through the wakeup fd, and the nearest timer), handle what
arrived, run due timers, dispatch into every free slot at once (a batch), flush the event
log, and write a snapshot if one is due. Backfill is therefore
event driven: a worker's exit and the next worker's launch happen in the same turn.

The supervisor is the only writer of task and slot state. A worker's failure is an outcome,
never an exception; only setup problems (bad state directory, busy run) raise.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import resource
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from zellij_swarm import __version__, exc
from zellij_swarm.backends.base import Backend, RunContext
from zellij_swarm.backends.headless import HeadlessBackend, worker_env
from zellij_swarm.backends.offloop import OffLoopBackend
from zellij_swarm.calls import CallRunner
from zellij_swarm.config import state_dir, swarmfile
from zellij_swarm.config.settings import API_SOURCE, Resolved
from zellij_swarm.config.stream import InputStream, Problem, read_ahead
from zellij_swarm.engine import metrics, resume, snapshot, view_watch
from zellij_swarm.engine.control import Control
from zellij_swarm.engine.dispatch import Dispatcher
from zellij_swarm.engine.follow import POLL_INTERVAL, GenerationWatch, Seen
from zellij_swarm.engine.generations import Generations
from zellij_swarm.engine.headless_workers import Followers, HeadlessWorkers
from zellij_swarm.engine.input_watch import InputWatch
from zellij_swarm.engine.live import LiveGen
from zellij_swarm.engine.policy import RunStop, TaskPolicy
from zellij_swarm.engine.progress import ProgressFacts
from zellij_swarm.engine.remote import AllocationEvents, RemoteEvents, SlurmExecutor
from zellij_swarm.engine.resume import Recovered
from zellij_swarm.engine.room import StateDirRoom
from zellij_swarm.engine.scheduler import ReadyQueue
from zellij_swarm.engine.signals import EXIT_CODES, SignalWakeup
from zellij_swarm.engine.slots import Slots
from zellij_swarm.engine.stopping import (
    CANCELLED_BY_USER,
    ProcessSignaller,
    Signaller,
    Stopper,
    names,
)
from zellij_swarm.engine.timers import Timer, Timers
from zellij_swarm.engine.watchdog import IdleWatchdog
from zellij_swarm.records import generation_files, inbox, rundir, runlock
from zellij_swarm.records import log as records
from zellij_swarm.records.folding import LogCommit
from zellij_swarm.records.joblog import JobLog
from zellij_swarm.records.rows import WarningRow
from zellij_swarm.records.shells import ShellPool
from zellij_swarm.records.states import TaskStatus, all_succeeded
from zellij_swarm.records.task import EndedTask, EndedTasks, TaskRecord, input_number, task_id, wrapper_ends
from zellij_swarm.records.task_table import TaskTable
from zellij_swarm.watch import Inotify, Watcher
from zellij_swarm.worker import slurm, worktree, wrapper
from zellij_swarm.worker.launcher import Launcher, peak_rss_kib
from zellij_swarm.worker.slurm import Slurm

if TYPE_CHECKING:
    import psutil


@dataclass
class RunPlan:
    """Everything a run needs, resolved and validated."""

    # The run's first tasks. The supervisor takes them: it empties the list as it adds them,
    # so that a run of 100,000 tasks does not hold their specs all along (TaskTable). A
    # resumed run's are in its records (``resume``).
    tasks: list[swarmfile.TaskSpec]
    settings: Resolved
    name: str | None = None
    source: str = API_SOURCE
    cwd: str = field(default_factory=os.getcwd)
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    argv: list[str] = field(default_factory=lambda: list(sys.argv))
    backend_reason: str = ""
    attach: bool = False  # attach to a session the backend creates, in the foreground (on a TTY)
    resume: Recovered | None = None  # continue this interrupted run instead of starting one
    run_dir: Path | None = None
    groups: dict[str, int] = field(default_factory=dict)  # [group.NAME] jobs = N, as written
    retrying: bool = False  # ``resume`` holds an ended run whose tasks ``retry`` runs again
    worktree_base: worktree.Base | None = None  # what worktree tasks' worktrees are made from (plan_base)
    joblog: JobLog | None = None  # run --joblog: a line per task as it reaches its final status
    stream: InputStream | None = None  # the rest of the tasks, read from stdin as they come (``tasks``: the first)
    run_id: str | None = None  # a new run's id chosen before it started (``submit``'s); None: made here
    # the Slurm batch job this supervisor runs in (``submit``): its steps run in the job's own
    # allocation, which the run never cancels, and its inbox is polled (written from other hosts);
    # a resumed run's is its record's, when this process runs in that job again (a requeue)
    slurm_job: str | None = None


def _taken(items: list[swarmfile.TaskSpec]) -> Iterator[swarmfile.TaskSpec]:
    """The items of ``items``, first to last, each taken out of the list as it is handed
    over: the list is empty at the end, and each item is freed once its taker lets go of it
    (a spec once packed) — not all at the end, with the taker's own copies of them all made."""
    items.reverse()
    while items:
        yield items.pop()


class Reporter(Protocol):
    """What the user sees while a run goes on (``report`` has the console implementations)."""

    def started(self, run: rundir.RunPaths, total: int) -> None: ...
    def notice(self, text: str) -> None: ...
    def problem(self, text: str) -> None: ...  # shown in every output mode, quiet included
    def warning(self, w: WarningRow) -> None: ...  # one of the run's warnings, as it is recorded
    def task_ended(self, task: TaskRecord, gen: generation_files.GenPaths | None) -> None: ...
    def running_headless(self) -> None: ...  # the backend fell back: no pane shows a worker
    wants_progress: bool  # whether progress() draws anything (the loop wakes for it only then)

    def progress(self, facts: ProgressFacts) -> None: ...
    def finished(self, snapshot: dict[str, Any], exit_code: int) -> None: ...


MAX_WAIT = 3600.0  # seconds: the longest single wait of the loop (see ``run``)
# Generations ended and not yet folded (``LogCommit.backlog``) above which nothing new is
# dispatched, looked at again every FOLD_RECHECK seconds: what a run of trivial tasks ends
# faster than it folds waits, not piles up (memory, disk, and shells that never come back).
# Unbounded, a run of 100,000 reached 22,000; at 1,024, one of 10,000 at -j 32 held up to 780,
# at 256 up to 300, 0.7 MB less at its peak and no slower.
FOLD_BACKLOG = 256
FOLD_RECHECK = 0.01


# Open files a supervisor needs: its records, pipes, watches and the calls it makes, and for
# each slot a pidfd when a stop follows every worker at once. Measured: a run crashed at
# `ulimit -n` 20 as it started, and at 40 with -j 32 on a SIGTERM; 24 served -j 3, 48 -j 32
# and 124 -j 100, each stopped by a SIGTERM.
OPEN_FILES_BASE = 48
OPEN_FILES_PER_SLOT = 1


def ensure_open_files(jobs: int) -> None:
    """Raise this process's soft limit of open files (``ulimit -n``) to what a run of
    ``jobs`` slots needs, as far as its hard limit allows; ``UsageError`` (exit 2, nothing
    done) when that is not enough. Its workers inherit the raised limit: the lowest that
    serves the run, never more."""
    needed = OPEN_FILES_BASE + OPEN_FILES_PER_SLOT * jobs
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return
    if hard != resource.RLIM_INFINITY and hard < needed:
        raise exc.UsageError(f"open files: a run of -j {jobs} needs {needed}, and this shell allows at most {hard} "
                             f"(`ulimit -Hn`); run fewer at a time, or raise the limit")
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


def new_run_id(now: float) -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime(now)) + "-" + os.urandom(3).hex()


def _said_by(backend: str, message: str) -> str:
    """A backend's fault as the run tells it: named by the backend, once (``tmux: not found
    on PATH`` already is)."""
    return message if message.startswith(f"{backend}:") else f"{backend}: {message}"


class Supervisor:
    def __init__(
        self,
        plan: RunPlan,
        backend: Backend,
        reporter: Reporter,
        *,
        clock: Callable[[], float] = time.monotonic,
        wallclock: Callable[[], float] = time.time,
        watcher: Watcher | None = None,
        selector: Callable[[], selectors.BaseSelector] = selectors.DefaultSelector,
        launcher: Callable[[dict[str, str]], Launcher] = Launcher,
        signaller: Signaller | None = None,
        handle_signals: bool = True,
    ) -> None:
        """``clock``, ``wallclock``, ``watcher``, ``selector``, ``launcher`` and ``signaller``
        are what a test replaces to run the loop in virtual time without processes
        (tests/harness.py); ``handle_signals=False`` leaves the process's signal handlers alone."""
        self.plan = plan
        self.settings = plan.settings
        self.chosen_backend = backend  # run() makes every call to it on a thread of its own
        self.reporter = reporter
        self.clock = clock
        self.wallclock = wallclock
        self.watcher: Watcher = watcher or Inotify()
        self._new_selector = selector
        self._new_launcher = launcher
        self._loop_thread: int | None = None  # the thread that runs the loop (``run``): its CPU is ``usage``'s
        self.signaller: Signaller = signaller or ProcessSignaller()
        self._handle_signals = handle_signals
        self._wakeup: SignalWakeup | None = None  # the loop's signals, while it handles them
        self._take_signals: Callable[[], None] = lambda: None  # those arrived since the loop last looked
        self.applied_messages: set[str] = set(plan.resume.consumed_messages) if plan.resume else set()
        self.jobs: int = self.settings.jobs
        if plan.resume is not None and plan.run_dir is not None:
            self.started_at = plan.resume.meta["started_at"]
            self.run_id = plan.resume.meta["run_id"]
            # a submitted run that its batch job, requeued by Slurm (the same job id), resumes
            job = plan.resume.meta.get("slurm_job")
            self.slurm_job: str | None = job if job is not None and job == os.environ.get("SLURM_JOB_ID") else None
            self.paths = rundir.RunPaths(plan.run_dir)
            self.state_dir = plan.run_dir.parent.parent
        else:
            self.started_at = wallclock()
            self.run_id = plan.run_id or new_run_id(self.started_at)
            self.slurm_job = plan.slurm_job
            self.state_dir = Path(self.settings.state_dir)
            if not self.state_dir.is_absolute():
                self.state_dir = Path(plan.cwd) / self.state_dir
            self.paths = rundir.RunPaths(rundir.runs_root(self.state_dir) / self.run_id)
        # The tasks not ended (and those that ended before the snapshot followed them), by id
        # and by name, each one's record made when first asked for; what is kept of the
        # others (``_let_go_of_ended``).
        self.tasks = TaskTable(self._task_record)
        self.ended = EndedTasks()
        # A group may run at most as many tasks as the run has slots (more is capped, with a
        # warning once the run's records exist: see run()).
        self.groups = {name: min(jobs, self.jobs) for name, jobs in plan.groups.items()}
        self.ready = ReadyQueue(self.groups)
        self.slots = Slots(self.jobs)
        self.live: dict[int, LiveGen] = {}  # slot -> generation in flight
        self.stats = metrics.DispatchStats()
        self.warnings: list[WarningRow] = []
        self.timers = Timers(clock)
        self.watchdog = IdleWatchdog(self.timers.after, wallclock)
        self.input_watch = InputWatch(self.timers, wallclock,
                                      lambda lg, waiting: self.gens.waiting_changed(lg, waiting),
                                      run_pattern=self.settings.waiting_pattern)
        self.stop = RunStop()
        self.detached = False
        self.ended_at: float | None = None
        self._state_dir_said = False  # the user was told the state dir cannot be written
        self._input_watched = False  # the input stream's descriptor is in the selector
        self._input_unpolled = False  # it is a file, which no selector takes: read when wanted
        self._input_ended_said = False
        self._backend_closed = False
        self.attached: subprocess.Popen[bytes] | None = None
        self.views: view_watch.ViewWatch | None = None  # the run's view panes, followed from run()
        self._last_progress = 0.0
        self._fold_recheck: Timer | None = None  # armed while dispatch waits for folding to catch up
        self.worktrees = worktree.Worktrees(plan.worktree_base, run_dir=self.paths.dir, run_id=self.run_id,
                                            default=self.settings.worktree)

    @property
    def name(self) -> str | None:
        return self.plan.name

    @property
    def backend_name(self) -> str:
        return self.backend.name

    @property
    def kill_grace(self) -> float:
        return self.settings.kill_grace

    @property
    def dispatching(self) -> dict[str, Any]:
        """The snapshot's ``paused`` (the run, and groups one by one), when the run has
        groups, ``groups``: each one's jobs and how many of its tasks run, and while its Slurm
        allocation waits in the queue, ``slurm_allocation`` (``job``, ``reason``)."""
        run_paused, groups_paused = self.ready.paused
        out: dict[str, Any] = {"paused": {"run": run_paused, "groups": groups_paused}}
        if self.groups:
            out["groups"] = [{"name": name, "jobs": jobs, "running": self.ready.out_in(name)}
                             for name, jobs in self.groups.items()]
        if (self.allocation_queued is not None and self.executor is not None and self.executor.allocating
                and self.ended_at is None):  # (at the run's end its allocation is cancelled, granted or not)
            out["slurm_allocation"] = self.allocation_queued  # nothing starts until Slurm grants it
        return out

    @property
    def multiplexer(self) -> dict[str, Any] | None:
        return self.backend.place() if hasattr(self, "backend") else None  # None before _open makes it

    @property
    def usage(self) -> dict[str, Any]:
        """CPU seconds and peak RSS of this run's own processes, workers excluded: the
        supervisor, and its launcher once it has said (as it exits). Asked on the loop's
        thread, the supervisor's part also says how much of its CPU was that thread's
        (``loop_cpu_s``: start-up and loop; the rest is its helper threads', mostly the log
        commit's folding) — where a performance change must look."""
        me = resource.getrusage(resource.RUSAGE_SELF)
        processes: dict[str, dict[str, Any]] = {
            "supervisor": {"cpu_s": round(me.ru_utime + me.ru_stime, 3),
                           "peak_rss_mb": round(peak_rss_kib(me.ru_maxrss) / 1024, 1)}}
        if threading.get_ident() == self._loop_thread:  # the rest is its helper threads' (the log commit's folds)
            processes["supervisor"]["loop_cpu_s"] = round(time.thread_time(), 3)
        if self.headless.launcher.usage is not None:
            processes["launcher"] = self.headless.launcher.usage
        return {"cpu_s": round(sum(p["cpu_s"] for p in processes.values()), 3),
                "peak_rss_mb": round(sum(p["peak_rss_mb"] for p in processes.values()), 1),
                "processes": processes}

    # ----- setup ---------------------------------------------------------------------------

    def _create_run_dir(self) -> None:
        rundir.prepare_state_dir(self.state_dir)
        try:
            rundir.make_private_dir(self.paths.dir, exist_ok=False)
            rundir.make_private_dir(self.paths.slots)
            inbox.make_dirs(self.paths)
        except OSError as e:
            raise exc.StateDirError(f"cannot create run directory {self.paths.dir}: {e.strerror}") from e

    def add_tasks(self, specs: Iterable[swarmfile.TaskSpec]) -> list[str]:
        """Add tasks to the run and queue them (their ids, returned, are ``t<order>``), held
        packed until dispatched (``TaskTable``)."""
        added = []
        later = []  # queued tasks with a dependency on one further on in ``specs``
        for spec in specs:
            order = self.tasks.add(spec, packed=True)
            added.append(task_id(order))
            if all(self._order_named(d) is not None for d in spec.after):
                self._enqueue(order, spec.after, spec.priority, spec.group)
            else:
                later.append((order, spec.after, spec.priority, spec.group))
        for queued in later:
            self._enqueue(*queued)
        return added

    def _enqueue(self, order: int, after: tuple[str, ...], priority: int, group: str | None) -> None:
        for skipped in self.ready.add(task_id(order), after=[self.id_named(d) for d in after], priority=priority,
                                      order=order, group=group):
            self.policy.skip(self.tasks[skipped])

    def _task_record(self, order: int, spec: swarmfile.TaskSpec) -> TaskRecord:
        return TaskRecord(
            spec=spec, id=task_id(order), order=order,
            timeout=spec.timeout if spec.timeout is not None else self.settings.timeout,
            retries=spec.retries if spec.retries is not None else self.settings.retries,
            idle_timeout=spec.idle_timeout if spec.idle_timeout is not None else self.settings.idle_timeout,
        )

    def id_named(self, name: str) -> str:
        """The id of the task named ``name`` (one that exists: the spec naming it was checked),
        making no record."""
        order = self._order_named(name)
        assert order is not None, name
        return task_id(order)

    def _order_named(self, name: str) -> int | None:
        if (order := self.tasks.order_named(name)) is not None:
            return order
        ended = self.ended.named(name)
        return None if ended is None else ended.order

    def find_task(self, name_or_id: str) -> TaskRecord | EndedTask | None:
        """A task by name, else by id: its record, or what is kept of it once it ended."""
        return (self.tasks.named(name_or_id) or self.ended.named(name_or_id)
                or self.tasks.get(name_or_id) or self.ended.with_id(name_or_id))

    def task_names(self) -> Iterator[str]:
        """The names every task of the run has taken, ended ones' too."""
        yield from self.tasks.names()
        yield from self.ended.names()

    def refusal(self, spec: swarmfile.TaskSpec) -> str | None:
        """Why the run could never run ``spec`` (an addition): a worktree it cannot have."""
        return self.worktrees.refusal(spec, cwd=self.plan.cwd)

    def kept_name(self, name: str) -> bool:
        """A name the run's input will give a task it has still to read (``task-N`` past the
        tasks read so far, while stdin is read: SPEC §4.6), which no addition may take."""
        stream = self.plan.stream
        number = input_number(name)
        return stream is not None and not stream.ended and number is not None and number > stream.tasks_read

    def _let_go_of_ended(self) -> None:
        """Keep of each task that reached its final status only what the run still asks of
        it (``EndedTasks``), once the snapshot has its row, counts and attempts: a run of
        100,000 tasks then holds the records of those still to end, not of every task. A
        live generation may still hold the record it ran (until its slot is released)."""
        for task in snapshot.take_settled(self):
            if not task.status.terminal or task.id not in self.tasks:
                continue
            self.worktrees.name_before_letting_go(task.id, task.spec, self.tasks.specs)
            if self.tasks.remove(task):
                self.ended.add(task)

    def _start_retry(self, rec: Recovered) -> None:
        """The run is running again: the retry, with what it grants each task, is in the log
        before anything runs (a supervisor killed from here on is resumed into the same
        retry), and the summary of the run's earlier end goes."""
        self.events.emit("run_retried", run_id=self.run_id, pid=os.getpid(),
                         tasks={tid: list(grant) for tid, grant in sorted(rec.retry.items())})
        self.events.flush()
        try:
            self.paths.summary.unlink(missing_ok=True)
        except OSError as e:
            raise exc.StateDirError(f"cannot remove {self.paths.summary}: {e.strerror}") from e

    def _write_run_json(self, specs: list[swarmfile.TaskSpec]) -> None:
        """run.json: the run's settings and ``specs``, its first tasks (ids t1, t2, …)."""
        head = {
            "run_id": self.run_id,
            "name": self.plan.name,
            "started_at": self.started_at,
            "source": self.plan.source,
            "streamed": self.plan.stream is not None,  # more tasks came as task_added events (SPEC §4.6)
            "cwd": self.plan.cwd,
            "argv": self.plan.argv,
            "pid": os.getpid(),
            "slurm_job": self.slurm_job,  # the batch job it runs in (``submit``): a requeued job resumes it
            "versions": {"zellij_swarm": __version__, "python": sys.version.split()[0]},
            "backend": {"name": self.backend.name, "why": self.plan.backend_reason},
            "jobs": self.jobs,
            "settings": self.settings.as_record(),
            "groups": self.plan.groups,
            "worktree_base": None if self.plan.worktree_base is None else self.plan.worktree_base.to_record(),
        }
        rundir.write_atomic(self.paths.run_json, rundir.json_chunks(
            head, "tasks", ({"id": task_id(order), **spec.to_record()} for order, spec in enumerate(specs, 1))))

    # ----- the loop ------------------------------------------------------------------------

    def run(self, *, complete: Callable[[int], None] = lambda code: None) -> int:
        """Run the swarm to the end; returns the exit code of SPEC §8. ``complete`` is given
        it once the run's records are final, while the run's lock is still held (no retry or
        resume can have begun): the caller completes the run's outputs there (its joblog, its
        JUnit report). With ``--attach``, the run's end then waits for its client (the user
        detaches, or the session just closed lets it go) — after its lock is let go, so that
        the board the user looks at, ``status`` and ``ls`` say it ended; before the end's
        report is printed on the terminal the client held."""
        try:
            with contextlib.ExitStack() as stack:
                code = self._run(stack)
                complete(code)
            if self.attached is not None:
                self.attached.wait()
            self.reporter.finished(self.final_snapshot, code)
            return code
        finally:
            if self._wakeup is not None:
                self._wakeup.restore()  # a stop since the end was recorded did nothing (SignalWakeup)

    def _run(self, stack: contextlib.ExitStack[Any]) -> int:
        self._loop_thread = threading.get_ident()
        self._open_records(stack)
        if self.plan.resume is None:
            self.add_tasks(_taken(self.plan.tasks))  # held packed from now on (RunPlan.tasks)
            self.events.emit("run_started", run_id=self.run_id, jobs=self.jobs, tasks=len(self.tasks),
                             backend=self.backend.name, pid=os.getpid())
            if self.plan.worktree_base is not None and (
                    changes := worktree.source_changes(self.plan.worktree_base)) is not None:
                self._warn("worktree_base", changes, None)
            for name, jobs in self.plan.groups.items():
                if jobs > self.jobs:
                    self._warn("group_capped", f"group {name!r}: jobs {jobs} is more than the run's {self.jobs} "
                                               f"slots; at most {self.jobs} of its tasks run at once", None)
        else:
            if self.plan.retrying:
                self._start_retry(self.plan.resume)
            resume.restore(self, self.plan.resume)
            self.gens.stats = self.stats  # replayed from the records: the whole run's
            if self.plan.retrying:
                # the earlier end's state.json says the run ended: a retry killed once its
                # first workers start would leave a run read as finished, and not resumable
                self.snapshots.write(merged=False)
        self.reporter.started(self.paths, len(self.tasks))
        if not self._allocate() or not self._open_backend():
            return self._finish()
        if self.multiplexer is not None:
            # where the panes will be, on disk before any pane claims its generation: a resume
            # asks the multiplexer there whether a pane that hung up was closed or lost with it
            self.snapshots.write(merged=False)
        # A Ctrl-C while the backend opened (a multiplexer slow to answer) is heard before the
        # first dispatch: no task starts after it.
        self._take_signals()
        self.dispatcher = Dispatcher(  # after resume and the backend: both may replace what it uses
            run_id=self.run_id, paths=self.paths, cwd=self.plan.cwd, tasks=self.tasks, ready=self.ready,
            slots=self.slots, live=self.live, backend=self.backend, headless=self.headless, follow=self.follow,
            events=self.events, stats=self.stats, stopping=self._holding_dispatch,
            launched=self.gens.launched, worktrees=self.worktrees, shells=self.shells, executor=self.executor,
            live_panes=self.settings.ui == "live")
        self.dispatcher.fill()
        self._follow_input()
        self._maybe_attach()
        while not self._done():
            self._turn()
            if self.detached:
                break
        return self._finish()

    def _turn(self) -> None:
        """One turn of the loop: wait for the next event or timer, handle what arrived, run
        the due timers, dispatch into every free slot, flush the event log, write the
        snapshot if one is due."""
        timeout = min((t for t in (self.timers.due_in(), self.snapshots.due_in(), self._progress_due())
                       if t is not None), default=MAX_WAIT)
        # A duration may be anything a user can write (25 days, 1000 hours); the selector
        # takes at most ~24.8 days, so the loop never waits longer than MAX_WAIT at a time
        # and simply looks again.
        for key, _ in self._sel.select(min(timeout, MAX_WAIT)):
            key.data()
        self.timers.run_due()
        if self.detached:
            return
        self.dispatcher.fill()
        self._follow_input()
        self._maybe_attach()
        self.events.flush()
        if self.gens.ended:
            if self.events.error is None:  # a log that could not be written holds no outcome
                self.commit.submit(self.gens.ended)
            self.gens.ended = []
        self.snapshots.maybe_write()
        self._let_go_of_ended()
        self.room.records_failed(self.events.error or self.snapshots.error)
        self._maybe_progress()
        self.commit.raise_crash()

    def _open_records(self, stack: contextlib.ExitStack[Any]) -> None:
        """``_open``, and a new run's first records. A state directory with room for its probe
        (``rundir.check_can_create``: an empty file) but not for what a run writes before
        anything runs — its lock, the room set aside for its final records, its run.json — is
        refused as a full one is: one line naming it (exit 2), nothing started. (Any other
        error names the file it met, as before: a read-only directory is the probe's.)"""
        try:
            self._open(stack)
            if self.plan.resume is None:
                records.save_environment(self.paths.saved_env, self.plan.env)
                self._write_run_json(self.plan.tasks)
        except OSError as e:
            if e.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            raise exc.UsageError(f"cannot use state directory {self.state_dir}: {e.strerror}") from None

    def _open(self, stack: contextlib.ExitStack[Any]) -> None:
        """The run's records, and every source of events in one selector, each registered
        with the call that handles it; ``stack`` closes them all, in reverse, on any exit."""
        if self.plan.resume is None:
            self._create_run_dir()
        lock = runlock.RunLock(self.paths)
        lock.acquire()
        stack.callback(lock.release)
        self.snapshots = records.SnapshotWriter(
            self.paths, lambda: snapshot.build(self), interval=0.25,  # its cost does not grow with the run
            clock=self.clock)
        # Every state change is an event (SPEC §7), so every event marks the snapshot stale:
        # state.json follows spawns, heartbeats and exits within the snapshot interval.
        self.events = records.EventLog(self.paths.events, clock=self.wallclock, on_emit=self.snapshots.touch)
        stack.callback(self.events.close)
        self.control = Control(self, paths=self.paths, run_id=self.run_id, cwd=Path(self.plan.cwd), events=self.events,
                               timers=self.timers, warn=self._warn, applied=self.applied_messages)
        self.room = StateDirRoom(run_id=self.run_id, run_dir=self.paths.dir, state_dir=self.state_dir,
                                 events=self.events, timers=self.timers, clock=self.clock, wallclock=self.wallclock,
                                 warn=self._warn, problem=self.reporter.problem, busy=self._busy,
                                 give_up=self._interrupt)
        self.policy = TaskPolicy(tasks=self.tasks, ready=self.ready, live=self.live, stop=self.stop,
                                 halt=self.settings.halt, joblog=self.plan.joblog, events=self.events,
                                 reporter=self.reporter, warn=self._warn,
                                 kill=lambda lg, reason: self.gens.kill(lg, reason), changed=self.snapshots.touch,
                                 after_output=lambda gen, read: self.backend.after_output(gen, read))
        given = len(self.plan.tasks) if self.plan.resume is None else len(self.plan.resume.specs)
        self.reserve = records.SpaceReserve(self.paths, given)
        # The log made durable off the loop, then folding, into shells the next generations
        # take. Folds come in bursts, one per group commit (a sync of tens of milliseconds, in
        # which every slot may turn over more than once): a pool of twice the slots ran dry
        # between bursts and overflowed in them, 60 % of 2,000 trivial tasks found a shell;
        # eight times, over 90 %. A Slurm step never takes one.
        self.shells = ShellPool(self.paths.slots, limit=0 if self.settings.executor == "slurm" else 8 * self.jobs,
                                leftovers=lambda: self.headless.leftovers_alive())  # (folds come after it is made)
        self.commit = LogCommit(self.paths.events, fold=self.shells.fold)
        stack.callback(self.commit.close)
        # The run's one headless wrapper; rewritten on resume (a new version may run it).
        rundir.write_atomic(self.paths.worker_script, wrapper.run_script(self.run_id), mode=0o700)
        self._sel = sel = self._new_selector()
        stack.callback(sel.close)
        watcher = self.watcher
        stack.callback(watcher.close)
        self.follow = GenerationWatch(watcher=watcher, selector=sel, timers=self.timers,
                                      seen=Seen(heartbeat=lambda lg, hb: self.gens.heartbeat(lg, hb),
                                                ended=lambda lg: self.gens.collect(lg), warn=self._warn))
        self._watch_inbox()
        sel.register(watcher.fileno(), selectors.EVENT_READ, lambda: self._on_files(watcher.read()))
        self.views = views = view_watch.ViewWatch(self.paths, schedule=self.timers.after,  # before any pane exists
                                                  earlier=not self.plan.retrying)
        stack.callback(views.close)
        sel.register(views.fileno(), selectors.EVENT_READ, lambda: self._on_views_gone(views.read()))
        # two threads for slow calls: tree kills never wait behind a pane call
        for runner in (calls := CallRunner("zellij-swarm backend"), tree_calls := CallRunner("zellij-swarm procs")):
            stack.callback(runner.close)
            sel.register(runner.fileno(), selectors.EVENT_READ, runner.drain)
        self.calls, self.proc_calls = calls, tree_calls
        self.backend = OffLoopBackend(self.chosen_backend, calls)
        self.stopper = Stopper(run_id=self.run_id, grace=self.settings.kill_grace, slots=self.slots,
                               timers=self.timers, calls=tree_calls, clock=self.clock, wallclock=self.wallclock,
                               warn=self._warn, released=lambda lg: self.gens.slot_released(lg),
                               delivered=lambda lg, at, caught: self.gens.delivered(lg, at, caught),
                               signaller=self.signaller)
        self.executor: SlurmExecutor | None = None
        self.allocation_queued: dict[str, str] | None = None  # --slurm-alloc: its job, and why Slurm makes it wait
        if self.settings.executor == "slurm":
            stack.callback((slurm_calls := CallRunner("zellij-swarm slurm")).close)
            sel.register(slurm_calls.fileno(), selectors.EVENT_READ, slurm_calls.drain)
            self.executor = SlurmExecutor(
                Slurm(self.plan.env), run_id=self.run_id, settings=self.settings, calls=slurm_calls,
                timers=self.timers, live=self.live, clock=self.clock, wallclock=self.wallclock,
                host_job=self.slurm_job,
                on=RemoteEvents(running=lambda lg: self.gens.step_running(lg),
                                seen=lambda lg, job: self.gens.step_seen(lg, job),
                                gone=lambda lg: self.gens.step_gone(lg),
                                queued_too_long=lambda lg: self.gens.queued_too_long(lg),
                                allocation_ended=self._allocation_ended, warn=self._warn))
            self.stopper.remote = self.executor
            self.executor.requeued = self.slurm_job is not None and self.plan.resume is not None
        self.headless = HeadlessWorkers(
            worker_env(self.plan.env), selector=sel, timers=self.timers, new_launcher=self._new_launcher,
            followers=Followers(started=lambda lg, pid: self.gens.follow_child(lg, pid),
                                launched=lambda lg, result: self.gens.launched(lg, result),
                                ended=lambda lg, status: self.gens.collect(lg, status),
                                follow_pid=self.follow.follow_pid,
                                worker_ended=lambda lg, status: self.gens.worker_ended(lg, status),
                                worker_unreported=lambda lg: self.gens.worker_unreported(lg),
                                end_tree=self.stopper.end_tree, warn=self._warn, gave_up=self._no_launcher))
        stack.callback(lambda: self.headless.close(wait=not self.detached))
        # the collaborators above report to it (their callbacks look it up when they fire)
        self.gens = Generations(
            settings=self.settings, paths=self.paths, state_dir=self.state_dir, live=self.live, slots=self.slots,
            ready=self.ready, timers=self.timers, clock=self.clock, wallclock=self.wallclock, events=self.events,
            follow=self.follow, backend=self.backend, executor=self.executor, stopper=self.stopper,
            headless=self.headless, control=self.control, stats=self.stats, watchdog=self.watchdog,
            input_watch=self.input_watch, policy=self.policy, stop=self.stop, warn=self._warn,
            records_unwritable=self.room.unwritable, backend_unstartable=self._backend_unstartable,
            full_seen_at=lambda: self.room.full_seen_at)
        if self._handle_signals:
            self._wakeup = wakeup = SignalWakeup()
            stack.callback(wakeup.close)
            if (fd := wakeup.fileno()) is not None:
                self._take_signals = lambda: self._on_signals(wakeup.received())
                sel.register(fd, selectors.EVENT_READ, self._take_signals)

    def _watch_inbox(self) -> None:
        """``cancel`` and ``add`` arrive as files in the inbox: watched, or polled (with one
        ``watch_failed`` warning) when no inotify watch can be had. In a batch job they are
        written from another host (the login node), which inotify does not see: polled."""
        if self.slurm_job is not None:
            self._poll_inbox()
            return
        try:
            self.watcher.add(self.paths.inbox)
        except OSError as e:
            self._warn("watch_failed", f"cannot watch the control inbox ({e.strerror}); polling it every "
                                       f"{POLL_INTERVAL:g}s instead", None)
            self._poll_inbox()

    def _poll_inbox(self) -> None:
        self.control.read_inbox()
        self.timers.after(POLL_INTERVAL, self._poll_inbox)

    def renderer_argv(self, command: str, *args: str) -> list[str]:
        """How a pane runs one of our renderers for this run (same Python, absolute paths);
        ``--view-pane``: it registers, so that its death is noticed (``view_watch``)."""
        return [sys.executable, "-m", "zellij_swarm", command, self.run_id, *args, "--state-dir", str(self.state_dir),
                "--view-pane"]

    def _on_views_gone(self, gone: list[view_watch.Gone]) -> None:
        """Board or renderer panes that died while the run goes on: an event each and, once
        per run, the ``renderer_died`` warning (SPEC §2, §7). No task is touched."""
        for v in gone:
            self.events.emit("view_gone", view=v.name, pid=v.pid)
        if gone and not any(w["code"] == "renderer_died" for w in self.warnings):
            self._warn("renderer_died", view_watch.message(gone, self.run_id, self.paths.state_dir), None)

    def _allocate(self, *, resumed: bool | None = None) -> bool:
        """``--slurm-alloc``: the run's one allocation (a resumed run's own, while Slurm runs
        it; one still queued was an earlier supervisor's request — maybe killed before it said
        so — withdrawn, and asked anew), for as many tasks as may run at once: min(jobs, tasks
        left). Nothing is dispatched while it waits in Slurm's queue (``_holding_dispatch``).
        One that cannot be asked for fails the run before any task starts (False)."""
        if self.executor is None or not self.settings.slurm_alloc or self.slurm_job is not None:
            return True  # in a batch job, the job is the allocation
        left = self.tasks.unended()
        wanted = self.jobs if self._input_open() else min(self.jobs, left)
        try:
            job = self.executor.allocate(
                resumed=self.plan.resume is not None if resumed is None else resumed, wanted=wanted,
                log=self.paths.dir / "salloc.log",
                on=AllocationEvents(queued=self._allocation_queued, granted=self._allocation_granted,
                                    gave_up=self._allocation_gave_up, ended=self._allocation_ended))
        except exc.BackendError as e:
            self._allocation_gave_up(e.code, e.message)
            return False
        if job is not None:
            self.events.emit("executor_allocating", job=job, tasks=wanted)
        return True

    def _allocation_queued(self, job: str, reason: str) -> None:
        self.allocation_queued = {"job": job, "reason": reason}
        self.events.emit("executor_allocation_queued", job=job, reason=reason)
        self.reporter.notice(f"slurm: the swarm's allocation (job {job}) is queued in Slurm ({reason})")

    def _allocation_granted(self, job: str) -> None:
        self.events.emit("executor_allocated", job=job)

    def _allocation_ended(self, job: str, state: str | None) -> None:
        """The run's allocation ended, not by the run — granted, with its steps, or while it
        still waited in the queue. A cancel from outside (``scancel``) is the run's cancel:
        what still waits ends ``cancelled`` (``executor_cancelled``), as the steps that ran
        in it do, and the run exits 130. Otherwise (its node failed, it was preempted, its
        time limit, Slurm forgot it) the work was lost, not done badly: the run asks for a
        new allocation and goes on there — its lost steps run again without using an attempt."""
        assert self.executor is not None
        if state in slurm.CANCELLED:
            self._warn("executor_cancelled", f"slurm: the swarm's allocation (job {job}) was cancelled from outside "
                                             "the run: the run is cancelled", None)
            self.stop.cancelled = True
            self._start_nothing_more("executor_cancelled")  # (its steps end with it: Slurm kills them)
            return
        stopping = self.is_stopping()
        self._warn("executor_lost", f"slurm: the swarm's allocation (job {job}) ended "
                                    f"({state or 'Slurm no longer knows it'})"
                                    + ("" if stopping else "; the run asks for a new allocation"), None)
        if not stopping:  # (a run that stops starts nothing more: it holds dispatch on the ended one)
            self.executor.ask_again()
            self._allocate(resumed=False)

    def _allocation_gave_up(self, code: str, why: str) -> None:
        """The allocation cannot be had: the run fails before any task starts (its request
        is cancelled at the end, with the rest of the run's jobs)."""
        self._fail_before_start(f"slurm: cannot allocate the swarm's nodes: {why}", code, code, why, why="")

    def _open_backend(self) -> bool:
        """Open the backend's session/window. A failure is a warning and the run goes on
        headless — or, under require, fails every task before any starts (returns False)."""
        ctx = RunContext(paths=self.paths, run_id=self.run_id, settings=self.settings,
                         schedule=self.timers.after, warn=lambda code, msg: self._warn(code, msg, None),
                         notice=self.reporter.notice, renderer_argv=self.renderer_argv, attach=self.plan.attach)
        try:
            self.backend.open(self.backend.context(ctx, schedule=self.timers.after))
            return True
        except exc.BackendError as e:
            name = self.backend.name
            self.backend = self.gens.backend = OffLoopBackend(HeadlessBackend(), self.calls)
            self.reporter.running_headless()
            if not self.settings.require_multiplexer:
                self._warn(e.code, f"{_said_by(name, e.message)}; running headless", None)
                return True
            self._backend_unstartable(name, e.code, e.message)
            return False

    def _backend_unstartable(self, name: str, code: str, message: str) -> None:
        """Under require, a backend that cannot start fails the run before any task runs,
        whether that shows at ``open`` (compact) or at the first launch (live): every task
        still waiting ends ``cancelled`` with reason ``<backend>_<code>``, attempts 0."""
        self._fail_before_start(_said_by(name, message), code, f"{name}_{code}", message,
                                why="required (--require-multiplexer)")

    def _fail_before_start(self, error: str, code: str, reason: str, message: str, *, why: str) -> None:
        """The run fails before any task runs: ``error`` is its start error (a warning
        ``code``; ``why`` says what made it fatal), ``run_failed`` says ``reason``, and every
        task still waiting ends ``cancelled`` with it, attempts 0."""
        self.stop.start_error = error
        said = f"{error}; {why}, so no task runs" if why else f"{error}; no task runs"
        self._warn(code, said, None)
        self.reporter.problem(f"error: {said}")
        self.events.emit("run_failed", reason=reason, message=message)
        self.policy.cancel_pending(reason)

    def _close_backend(self) -> None:
        """Once, at the end of a run (``_finish``, before its summary, so a closing fault is
        in it). Not on any other way out — detached (SIGHUP, a full state dir: ``_finish``
        returns first) or an internal error: the run's workers go on in their panes for
        ``resume`` to take up, and nothing of the session is touched. (With
        ``--close-session``, or ``CI`` set, closing it killed them, and ``resume`` ran their
        tasks again.)"""
        if self._backend_closed:
            return
        self._backend_closed = True
        stopped = self.stop.cancelled_by_user
        counts = snapshot.counts_of(self)
        failed = stopped or not all_succeeded(counts)
        try:
            self.backend.close(cancelled=stopped, failed=failed)
        except exc.BackendError as e:
            self._warn(e.code, f"{self.backend.name}: closing: {e.message}", None)
        if (hint := self.backend.leftover_hint()) is not None:
            self.reporter.notice(hint)

    def _maybe_attach(self) -> None:
        """``--attach``: once the backend's session exists, its client takes the terminal.
        Interactive and unbounded in time, it is the one external command run without a
        timeout; the run's end waits for it (the user detaches, or the session closes)."""
        if self.plan.attach and self.attached is None and (cmd := self.backend.attach_command()):
            argv, env = cmd
            self.attached = subprocess.Popen(argv, env=env)

    def _done(self) -> bool:
        return not self.live and not self.stopper.stopping and (
            self.is_stopping() or (len(self.ready) == 0 and not self._input_open()))

    # ----- tasks read from stdin as they come (SPEC §4.6) ------------------------------------

    def _input_open(self) -> bool:
        """More tasks may still come from the input stream."""
        return self.plan.stream is not None and not self.plan.stream.ended

    def _follow_input(self) -> None:
        """Take tasks from the input while it is open, the run goes on and fewer than the
        read-ahead wait for a slot — from what was read, then by reading the descriptor when it
        is readable (a file, which no selector takes, at once); else leave the pipe unread (its
        writer blocks)."""
        stream = self.plan.stream
        if stream is None:
            return
        while True:
            self._input_end_seen()  # also an input that ended before the run began
            room = read_ahead(self.jobs) - len(self.ready) if self._input_open() and not self.is_stopping() else 0
            if room > 0 and stream.buffered:
                self._take_input(stream.take(room))
                room = read_ahead(self.jobs) - len(self.ready) if self._input_open() else 0
            wanted = room > 0 and not stream.buffered
            if not (wanted and self._input_unpolled):
                break
            stream.read()  # a file: a read never blocks
        if wanted and not self._input_watched and not self._input_unpolled:
            try:
                self._sel.register(stream.fd, selectors.EVENT_READ, self._read_input)
            except PermissionError:  # epoll refuses a regular file and /dev/null (`run - < tasks.txt`)
                self._input_unpolled = True
                self._follow_input()
                return
        elif not wanted and self._input_watched:
            self._sel.unregister(stream.fd)
        self._input_watched = wanted

    def _read_input(self) -> None:
        stream = self.plan.stream
        assert stream is not None
        stream.read()
        self._follow_input()

    def _take_input(self, specs: list[swarmfile.TaskSpec]) -> None:
        if specs:
            self.add_live(specs, source="stdin")
        self._input_end_seen()

    def _input_end_seen(self) -> None:
        """The input has ended (or its reading stopped): recorded once, for ``resume``."""
        stream = self.plan.stream
        if stream is None or not stream.ended or self._input_ended_said:
            return
        self._input_ended_said = True
        self.events.emit("input_ended", tasks=stream.tasks_read,
                         problem=stream.problem.message if stream.problem else None)
        if stream.problem is not None:
            self._warn("input_error", stream.problem.unread, None)

    # ----- starts ---------------------------------------------------------------------------

    def pause(self, group: str | None, paused: bool) -> None:
        """Stop (or resume) handing out new tasks of ``group`` (None: of the whole run); the
        running ones go on. Recorded as an event, so a resumed run stays paused."""
        (self.ready.pause if paused else self.ready.unpause)(group)
        self.events.emit("paused" if paused else "unpaused", group=group)

    # ----- panes ---------------------------------------------------------------------------

    def _on_files(self, changes: list[Any]) -> None:
        touched = {c.dir for c in changes}
        if self.paths.inbox in touched:
            self.control.read_inbox()
        self.follow.on_changes(touched)

    # ----- warnings ------------------------------------------------------------------------

    def is_stopping(self) -> bool:
        return self.stop.stopping

    def _warn(self, code: str, message: str, task: TaskRecord | None) -> None:
        if code == "state_dir_error" and not self._state_dir_said:
            # A full or read-only state dir is said once, whatever the output mode.
            self._state_dir_said = True
            self.reporter.problem(f"warning: {message}")
        w: WarningRow = {"code": code, "message": message, "task": task.name if task else None}
        self.warnings.append(w)
        if task is not None:
            task.warn(w)
        self.reporter.warning(w)
        self.events.emit("warning", **w)

    # ----- what the control inbox does to the run ---------------------------------------------

    def cancel_all(self) -> dict[str, str]:
        running = {lg.task.id: lg.task.name for lg in self.live.values()}
        self.stop.cancelled = True
        self._stop_everything(CANCELLED_BY_USER)
        return running

    def stop_ended_something(self) -> bool:
        return self.stop.ended_something(input_left=self._input_open())

    def cancel_task(self, task: TaskRecord) -> bool:
        return self.policy.cancel_task(task)

    def restart_task(self, task: TaskRecord) -> bool:
        return self.policy.restart_task(task)

    def add_live(self, specs: list[swarmfile.TaskSpec], *, source: str) -> None:
        for tid, spec in zip(self.add_tasks(specs), specs, strict=True):
            self.events.emit("task_added", task=spec.name, id=tid, source=source, spec=spec.to_record())
        self.snapshots.touch()

    # ----- stopping: signals, halt, cancel ---------------------------------------------------

    def _on_signals(self, received: list[signal.Signals]) -> None:
        for sig in received:
            if sig == signal.SIGHUP:
                self.detached = True  # the workers go on; ``resume`` picks the run up
                self._warn("detached", "received SIGHUP: supervisor detached", None)
                return
            if self.stop.signal is None:
                self.stop.signal = sig
                self._warn(CANCELLED_BY_USER, f"received {sig.name}", None)
                self._stop_everything(CANCELLED_BY_USER)

    def _stop_everything(self, reason: str) -> None:
        self._start_nothing_more(reason)
        for lg in list(self.live.values()):
            self.stop.ending.add(lg.gen)
            self.gens.kill(lg, reason)
        self.headless.follow_all()

    def _start_nothing_more(self, reason: str) -> None:
        """No slot takes a task any more, and every task still waiting ends ``cancelled`` with
        ``reason``; what runs is left to the caller."""
        self.slots.close()
        if self.policy.cancel_pending(reason):
            self.stop.cancelled_waiting = True

    def _no_launcher(self) -> None:
        """Launchers keep dying with work given and none of it started: nothing more is
        dispatched; the tasks still waiting end ``cancelled`` with reason ``launcher_lost``."""
        self.stop.launcher_failed = True
        self.policy.cancel_pending("launcher_lost")

    def _left_behind(self, found: list[psutil.Process]) -> None:
        self._warn("process_left_behind", f"{len(found)} process(es) of this run still running, ending them: "
                                          f"{names(found)}", None)
        self.events.flush()  # on disk now: the grace of ending them is why the run has not ended yet

    # ----- progress, snapshots, the end ----------------------------------------------------

    def _progress_due(self) -> float | None:
        if not (self.live and self.reporter.wants_progress):
            return None
        return max(0.0, self._last_progress + 0.2 - self.clock())

    def _maybe_progress(self) -> None:
        now = self.clock()
        if self.reporter.wants_progress and now - self._last_progress >= 0.2:
            self._last_progress = now
            wall = self.wallclock()
            ended, took = self.policy.ended_count, self.policy.ended_took
            self.reporter.progress(ProgressFacts(
                counts=snapshot.counts_of(self), elapsed=wall - self.started_at, jobs=self.jobs,
                mean_duration=took / ended if ended else None,
                running=[(lg.task.name, wall - lg.task.started_at) for lg in self.live.values()
                         if lg.task.started_at is not None],
                waiting=sorted(lg.task.name for lg in self.live.values() if lg.task.waiting_input)))

    def _busy(self) -> bool:
        """Something still runs, is being ended, or the run is stopping."""
        return bool(self.live) or bool(self.stopper.stopping) or self.is_stopping()

    def _interrupt(self) -> None:
        self.detached = True  # the run stops here, resumable as it is

    def _holding_dispatch(self) -> bool:
        return (self.is_stopping() or self.room.full or (self.executor is not None and self.executor.holding)
                or self._folding_behind())

    def _folding_behind(self) -> bool:
        """More generations wait to be folded than ``FOLD_BACKLOG``: a turn is due again
        shortly (a timer), to dispatch once they are fewer."""
        if self.commit.backlog <= FOLD_BACKLOG:
            return False
        if self._fold_recheck is None or self._fold_recheck.fn is None:  # none yet, or it fired
            self._fold_recheck = self.timers.after(FOLD_RECHECK, lambda: None)
        return True

    def _finish(self) -> int:
        if self.detached:
            # These are this supervisor's last records: the room kept for them is theirs. On a
            # full state dir the outcomes it saw (the launcher's, for wrappers that could not
            # write theirs) are in memory only, and `resume` would find them lost: the log's
            # lines go into that room first, then the snapshot gets what is left of it.
            self.backend.outputs_now()
            self.events.emit("run_detached", resume=state_dir.command(self.paths.state_dir, "resume", self.run_id))
            self.reserve.hand_over(self.events)
            self.final_snapshot = self.snapshots.write(merged=False)
            self.events.flush()
            return 1 if self.room.full else 129  # gave up on a full state dir; else detached (SIGHUP)
        if self.executor is not None and (left := self.executor.close()):
            self._warn("process_left_behind", f"slurm: {len(left)} step(s) of the run were still queued or running at "
                                              f"its end; cancelled: {', '.join(left[:10])}", None)
        if self._input_open():  # stopped (a cancel, a halt) before the end of its input
            stream = self.plan.stream
            assert stream is not None
            self.events.emit("input_unread", tasks=stream.tasks_read)
            self.reporter.problem(f"the run ended before the end of {stream.source}: {stream.tasks_read} task(s) were "
                                  "read, the rest never was")
        elif (problem := self._input_problem()) is not None:  # the run's exit: 2
            self.reporter.problem(f"error: {problem.unread}")
        self.stopper.sweep(itertools.chain(wrapper_ends(self.tasks.records()), self.ended.wrapper_ends()),
                           session_alive=self.backend.session_alive_now(), launcher=self.headless.live_launcher(),
                           found=self._left_behind)
        self.control.answer_late()
        if self.stop.cancelled_by_user and not self.stop_ended_something():
            self.stop.moot = True
            self.reporter.notice("the stop came after every task had ended by itself: nothing was cancelled")
        self.ended_at = self.wallclock()
        self._close_backend()
        self.backend.outputs_now()  # a backend's thread stuck past the close's wait: reported as they are
        self.headless.close(wait=True)  # every worker has ended; its usage is the summary's
        self.reserve.hand_over(self.events)  # (flushed; what a full disk refused, kept in its room)
        self.commit.submit(self.gens.ended if self.events.error is None else [])
        self.commit.close()  # every outcome is durable before the summary says the run ended
        self.shells.clear()
        snap = self.snapshots.write(summary=self.paths.summary, merged=False)
        self.room.records_failed(self.events.error or self.snapshots.error)
        self.final_snapshot = snap
        code = self.exit_code(snap)
        self.events.emit("run_finished", state=snap["state"], exit_code=code, counts=snap["counts"])
        self.events.flush()
        return code

    def _input_problem(self) -> Problem | None:
        """The bad record that stopped the reading of the run's stdin: this supervisor's, or,
        resumed, the one the log says stopped an earlier one (SPEC §4.6)."""
        if self.plan.stream is not None:
            return self.plan.stream.problem
        return self.plan.resume.input_problem if self.plan.resume is not None else None

    def exit_code(self, snap: dict[str, Any]) -> int:
        if self.stop.cancelled_by_user:
            return EXIT_CODES[self.stop.signal] if self.stop.signal is not None else 130
        if self._input_problem() is not None:
            return 2  # bad input: a record of it stopped the reading (what was read before it ran)
        if self.stop.start_error:
            return 1
        return 0 if all_succeeded(snap["counts"]) else 1


def _pane_label(a: Any) -> str:
    """The state part of a finished pane's title, in the words every other view uses for an
    outcome (``succeeded``, ``timed out``)."""
    word = str(a.status).replace("_", " ")
    return f"{word} (exit {a.exit_code})" if a.exit_code is not None and a.status != TaskStatus.SUCCEEDED else word
