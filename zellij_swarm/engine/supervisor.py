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
import os
import resource
import secrets
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import psutil

from zellij_swarm import __version__, exc
from zellij_swarm.backends.base import Backend, LaunchFailed, LaunchResult, PaneOpened, RunContext
from zellij_swarm.backends.headless import HeadlessBackend, worker_env
from zellij_swarm.backends.offloop import OffLoopBackend
from zellij_swarm.calls import CallRunner
from zellij_swarm.config import swarmfile
from zellij_swarm.config.settings import Resolved
from zellij_swarm.config.stream import InputStream, read_ahead
from zellij_swarm.engine import metrics, remote, resume, snapshot, view_watch
from zellij_swarm.engine.control import Control
from zellij_swarm.engine.dispatch import Dispatcher
from zellij_swarm.engine.follow import POLL_INTERVAL, GenerationWatch, Seen
from zellij_swarm.engine.headless_workers import Followers, HeadlessWorkers
from zellij_swarm.engine.input_watch import InputWatch
from zellij_swarm.engine.live import GenPhase, KillState, LiveGen
from zellij_swarm.engine.outcome import killed_status, outcome
from zellij_swarm.engine.progress import ProgressFacts
from zellij_swarm.engine.remote import AllocationEvents, RemoteEvents, SlurmExecutor
from zellij_swarm.engine.resume import Recovered
from zellij_swarm.engine.scheduler import ReadyQueue
from zellij_swarm.engine.signals import EXIT_CODES, SignalWakeup
from zellij_swarm.engine.slots import Slots
from zellij_swarm.engine.stopping import (
    RESTARTED,
    ProcessSignaller,
    Signaller,
    Stopper,
    names,
)
from zellij_swarm.engine.timers import Timers
from zellij_swarm.engine.watchdog import IdleWatchdog
from zellij_swarm.records import generation_files, inbox, rundir, runlock
from zellij_swarm.records import log as records
from zellij_swarm.records.folding import LogCommit
from zellij_swarm.records.joblog import JobLog
from zellij_swarm.records.states import REASON_STATUS, TaskStatus, all_succeeded
from zellij_swarm.records.task import TaskRecord, command_text
from zellij_swarm.watch import Inotify, Watcher
from zellij_swarm.worker import procs, worktree, wrapper
from zellij_swarm.worker.launcher import Launcher
from zellij_swarm.worker.slurm import Job, Slurm


@dataclass
class RunPlan:
    """Everything a run needs, resolved and validated."""

    tasks: list[swarmfile.TaskSpec]
    settings: Resolved
    name: str | None = None
    source: str = "<api>"
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


class Reporter(Protocol):
    """What the user sees while a run goes on (``report`` has the console implementations)."""

    def started(self, run: rundir.RunPaths, total: int) -> None: ...
    def notice(self, text: str) -> None: ...
    def problem(self, text: str) -> None: ...  # shown in every output mode, quiet included
    def warning(self, w: dict[str, Any]) -> None: ...  # one of the run's warnings, as it is recorded
    def task_ended(self, task: TaskRecord, gen: generation_files.GenPaths | None) -> None: ...
    wants_progress: bool  # whether progress() draws anything (the loop wakes for it only then)

    def progress(self, facts: ProgressFacts) -> None: ...
    def finished(self, snapshot: dict[str, Any], exit_code: int) -> None: ...


MAX_WAIT = 3600.0  # seconds: the longest single wait of the loop (see ``run``)
ROOM_RECHECK = 1.0  # seconds: how often a full state directory is looked at again
FULL_GIVE_UP = 60.0  # seconds with nothing running and still no room: the run ends interrupted
TIMEOUT_RECHECK = 1.0  # seconds: how often a time limit looks again for a start that has not come (a queued step)


def new_run_id(now: float) -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime(now)) + "-" + secrets.token_hex(3)


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
        self.signaller: Signaller = signaller or ProcessSignaller()
        self._handle_signals = handle_signals
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
        self.tasks: dict[str, TaskRecord] = {}
        self.by_name: dict[str, TaskRecord] = {}
        # A group may run at most as many tasks as the run has slots (more is capped, with a
        # warning once the run's records exist: see run()).
        self.groups = {name: min(jobs, self.jobs) for name, jobs in plan.groups.items()}
        self.ready = ReadyQueue(self.groups)
        self.slots = Slots(self.jobs)
        self.live: dict[int, LiveGen] = {}  # slot -> generation in flight
        self.stats = metrics.DispatchStats()
        self.warnings: list[dict[str, Any]] = []
        self.timers = Timers(clock)
        self.watchdog = IdleWatchdog(self.timers.after, wallclock)
        self.input_watch = InputWatch(self.timers, wallclock, self._waiting_changed)
        self.stop_signal: signal.Signals | None = None
        self.cancelled = False
        self.halted = False
        self.launcher_failed = False  # the launcher died and could not be replaced
        self.detached = False
        self.ended_at: float | None = None
        self.start_error: str | None = None  # the backend could not start under require
        self._records_warned = False
        self._state_dir_said = False  # the user was told the state dir cannot be written
        self.state_dir_full = False  # no new task starts until the state dir has room again
        self._full_said = False  # the user was told it filled and had room again
        self._full_seen_at: float | None = None  # when it was last found full (wall clock)
        self._input_watched = False  # the input stream's descriptor is in the selector
        self._input_ended_said = False
        self._idle_full_since: float | None = None  # when the last worker ended while it was full
        self._backend_closed = False
        self.attached: subprocess.Popen[bytes] | None = None
        self.views: view_watch.ViewWatch | None = None  # the run's view panes, followed from run()
        self._last_progress = 0.0
        self._ended_time = [0, 0.0]  # tasks that ended having run, and their total duration: for the ETA
        self._ended: list[generation_files.GenPaths] = []  # this turn's, folded once their outcome is durable
        self._freed_at: dict[int, float] = {}  # slot -> when its worker's end was taken (monotonic)
        self.worktrees = worktree.Worktrees(plan.worktree_base, run_dir=self.paths.dir, run_id=self.run_id,
                                            default=self.settings.worktree)

    @property
    def name(self) -> str | None:
        return self.plan.name

    @property
    def backend_name(self) -> str:
        return self.backend.name

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
        if self.allocation_queued is not None and self.executor is not None and self.executor.allocating:
            out["slurm_allocation"] = self.allocation_queued  # nothing starts until Slurm grants it
        return out

    @property
    def multiplexer(self) -> dict[str, Any] | None:
        return self.backend.place() if hasattr(self, "backend") else None  # None before _open makes it

    @property
    def usage(self) -> dict[str, Any]:
        """CPU seconds and peak RSS of this run's own processes, workers excluded: the
        supervisor, and its launcher once it has said (as it exits)."""
        me = resource.getrusage(resource.RUSAGE_SELF)
        processes = {"supervisor": {"cpu_s": round(me.ru_utime + me.ru_stime, 3),
                                    "peak_rss_mb": round(me.ru_maxrss / 1024, 1)}}
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

    def add_tasks(self, specs: list[swarmfile.TaskSpec], *, enqueue: bool = True) -> list[TaskRecord]:
        added = []
        for spec in specs:
            n = len(self.tasks) + 1
            rec = TaskRecord(
                spec=spec, id=f"t{n}", order=n,
                timeout=spec.timeout if spec.timeout is not None else self.settings.timeout,
                retries=spec.retries if spec.retries is not None else self.settings.retries,
                idle_timeout=spec.idle_timeout if spec.idle_timeout is not None else self.settings.idle_timeout,
            )
            self.tasks[rec.id] = rec
            self.by_name[spec.name] = rec
            added.append(rec)
        for rec in added if enqueue else ():
            after_ids = [self.by_name[d].id for d in rec.spec.after]
            for skipped in self.ready.add(rec.id, after=after_ids, priority=rec.spec.priority, order=rec.order,
                                          group=rec.spec.group):
                self.skip(self.tasks[skipped])
        return added

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

    def _write_run_json(self) -> None:
        rundir.write_json_atomic(self.paths.run_json, {
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
            "tasks": [{"id": t.id, **t.spec.to_record()} for t in self.tasks.values()],
        })

    # ----- the loop ------------------------------------------------------------------------

    def run(self) -> int:
        """Run the swarm to the end; returns the exit code of SPEC §8."""
        with contextlib.ExitStack() as stack:
            self._open(stack)
            if self.plan.resume is None:
                records.save_environment(self.paths.saved_env, self.plan.env)
                self.add_tasks(self.plan.tasks)
                self._write_run_json()
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
            self.reporter.started(self.paths, len(self.tasks))
            if not self._allocate() or not self._open_backend():
                return self._finish()
            self.dispatcher = Dispatcher(  # after resume and the backend: both may replace what it uses
                run_id=self.run_id, paths=self.paths, cwd=self.plan.cwd, tasks=self.tasks, ready=self.ready,
                slots=self.slots, live=self.live, backend=self.backend, headless=self.headless, follow=self.follow,
                events=self.events, stats=self.stats, wallclock=self.wallclock, stopping=self._holding_dispatch,
                launched=self._launched, worktrees=self.worktrees, executor=self.executor,
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
        if self._ended:
            if self.events.error is None:  # a log that could not be written holds no outcome
                self.commit.submit(self._ended)
            self._ended = []
        self.snapshots.maybe_write()
        self._check_records()
        self._maybe_progress()

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
                               warn=self._warn, applied=self.applied_messages)
        self.reserve = records.SpaceReserve(self.paths.dir / ".reserve", len(self.plan.tasks))
        self.commit = LogCommit(self.paths.events)  # the log made durable off the loop, then folding
        stack.callback(self.commit.close)
        # The run's one headless wrapper; rewritten on resume (a new version may run it).
        rundir.write_atomic(self.paths.worker_script, wrapper.run_script(self.run_id), mode=0o700)
        self._sel = sel = self._new_selector()
        stack.callback(sel.close)
        watcher = self.watcher
        stack.callback(watcher.close)
        self.follow = GenerationWatch(watcher=watcher, selector=sel, timers=self.timers,
                                      seen=Seen(heartbeat=self._heartbeat, ended=self.collect, warn=self._warn))
        self._watch_inbox()
        sel.register(watcher.fileno(), selectors.EVENT_READ, lambda: self._on_files(watcher.read()))
        self.views = views = view_watch.ViewWatch(self.paths, schedule=self.timers.after)  # before any pane exists
        stack.callback(views.close)
        sel.register(views.fileno(), selectors.EVENT_READ, lambda: self._on_views_gone(views.read()))
        # two threads for slow calls: tree kills never wait behind a pane call
        for runner in (calls := CallRunner("zellij-swarm backend"), tree_calls := CallRunner("zellij-swarm procs")):
            stack.callback(runner.close)
            sel.register(runner.fileno(), selectors.EVENT_READ, runner.drain)
        self.calls, self.proc_calls = calls, tree_calls
        self.backend = OffLoopBackend(self.chosen_backend, calls)
        stack.callback(self._close_backend)
        self.stopper = Stopper(run_id=self.run_id, grace=self.settings.kill_grace, slots=self.slots,
                               timers=self.timers, calls=tree_calls, clock=self.clock, wallclock=self.wallclock,
                               warn=self._warn, released=self._slot_released, delivered=self._delivered,
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
                on=RemoteEvents(running=self._step_running, seen=self._step_seen, gone=self._step_gone,
                                queued_too_long=self._queued_too_long, warn=self._warn))
            self.stopper.remote = self.executor
            self.executor.requeued = self.slurm_job is not None and self.plan.resume is not None
        self.headless = HeadlessWorkers(
            worker_env(self.plan.env), selector=sel, timers=self.timers, new_launcher=self._new_launcher,
            followers=Followers(started=self._follow_child, launched=self._launched, ended=self.collect,
                                follow_pid=self.follow.follow_pid, end_tree=self.stopper.end_tree, warn=self._warn,
                                gave_up=self._no_launcher))
        stack.callback(lambda: self.headless.close(wait=not self.detached))
        if self._handle_signals:
            wakeup = SignalWakeup()
            stack.callback(wakeup.close)
            if (fd := wakeup.fileno()) is not None:
                sel.register(fd, selectors.EVENT_READ, lambda: self._on_signals(wakeup.received()))

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
            self._warn("renderer_died", view_watch.message(gone, self.run_id), None)

    def _allocate(self) -> bool:
        """``--slurm-alloc``: the run's one allocation (a resumed run's own, while Slurm runs
        it; one still queued was an earlier supervisor's request — maybe killed before it said
        so — withdrawn, and asked anew), for as many tasks as may run at once: min(jobs, tasks
        left). Nothing is dispatched while it waits in Slurm's queue (``_holding_dispatch``).
        One that cannot be asked for fails the run before any task starts (False)."""
        if self.executor is None or not self.settings.slurm_alloc or self.slurm_job is not None:
            return True  # in a batch job, the job is the allocation
        cluster, name = self.executor.cluster, f"zsw.{self.run_id}.alloc"
        left = sum(not t.status.terminal for t in self.tasks.values())
        try:
            for job_id, state in cluster.named(name) if self.plan.resume is not None else []:
                if state == "RUNNING" and self.executor.allocation is None:
                    self.executor.allocation = job_id
                else:
                    cluster.cancel(job_id, name=name)
            if self.executor.allocation is not None or not (left or self._input_open()):
                return True  # adopted, or nothing is left to run in one
            tasks = self.jobs if self._input_open() else min(self.jobs, left)
            job = self.executor.request_allocation(tasks, self.paths.dir / "salloc.log")
        except exc.BackendError as e:
            self._allocation_gave_up(e.code, e.message)
            return False
        self.events.emit("executor_allocating", job=job, tasks=tasks)
        self.executor.await_allocation(self.settings.slurm_alloc_wait, AllocationEvents(
            queued=self._allocation_queued, granted=self._allocation_granted, gave_up=self._allocation_gave_up))
        return True

    def _allocation_queued(self, job: str, reason: str) -> None:
        self.allocation_queued = {"job": job, "reason": reason}
        self.events.emit("executor_allocation_queued", job=job, reason=reason)
        self.reporter.notice(f"slurm: the swarm's allocation (job {job}) is queued in Slurm ({reason})")

    def _allocation_granted(self, job: str) -> None:
        self.events.emit("executor_allocated", job=job)

    def _allocation_gave_up(self, code: str, why: str) -> None:
        """The allocation cannot be had: the run fails before any task starts (its request
        is cancelled at the end, with the rest of the run's jobs)."""
        self._fail_before_start(f"slurm: cannot allocate the swarm's nodes: {why}", code, code, why, why="")

    def _open_backend(self) -> bool:
        """Open the backend's session/window. A failure is a warning and the run goes on
        headless — or, under require, fails every task before any starts (returns False)."""
        ctx = RunContext(paths=self.paths, run_id=self.run_id, settings=self.settings,
                         schedule=self.timers.after, warn=lambda code, msg: self._warn(code, msg, None),
                         notice=self.reporter.notice, renderer_argv=self.renderer_argv)
        try:
            self.backend.open(self.backend.context(ctx, schedule=self.timers.after))
            return True
        except exc.BackendError as e:
            name = self.backend.name
            self.backend = OffLoopBackend(HeadlessBackend(), self.calls)
            if not self.settings.require_multiplexer:
                self._warn(e.code, f"{name}: {e.message}; running headless", None)
                return True
            self._backend_unstartable(name, e.code, e.message)
            return False

    def _backend_unstartable(self, name: str, code: str, message: str) -> None:
        """Under require, a backend that cannot start fails the run before any task runs,
        whether that shows at ``open`` (compact) or at the first launch (live): every task
        still waiting ends ``cancelled`` with reason ``<backend>_<code>``, attempts 0."""
        self._fail_before_start(f"{name}: {message}", code, f"{name}_{code}", message,
                                why="required (--require-multiplexer)")

    def _fail_before_start(self, error: str, code: str, reason: str, message: str, *, why: str) -> None:
        """The run fails before any task runs: ``error`` is its start error (a warning
        ``code``; ``why`` says what made it fatal), ``run_failed`` says ``reason``, and every
        task still waiting ends ``cancelled`` with it, attempts 0."""
        self.start_error = error
        said = f"{error}; {why}, so no task runs" if why else f"{error}; no task runs"
        self._warn(code, said, None)
        self.reporter.problem(f"error: {said}")
        self.events.emit("run_failed", reason=reason, message=message)
        self._cancel_pending(reason)

    def _close_backend(self) -> None:
        """Once: at the end of a run (before its summary, so a closing fault is in it), or
        on the way out of any other exit."""
        if self._backend_closed:
            return
        self._backend_closed = True
        stopped = self.stop_signal is not None or self.cancelled
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
        is readable; else leave the pipe unread (its writer blocks)."""
        stream = self.plan.stream
        if stream is None:
            return
        self._input_end_seen()  # also an input that ended before the run began
        room = read_ahead(self.jobs) - len(self.ready) if self._input_open() and not self.is_stopping() else 0
        if room > 0 and stream.buffered:
            self._take_input(stream.take(room))
            room = read_ahead(self.jobs) - len(self.ready) if self._input_open() else 0
        wanted = room > 0 and not stream.buffered
        if wanted and not self._input_watched:
            self._sel.register(stream.fd, selectors.EVENT_READ, self._read_input)
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
            self._warn("input_error", f"{stream.problem.message}: the rest of the input is not read", None)

    # ----- starts ---------------------------------------------------------------------------

    def _launched(self, lg: LiveGen, result: LaunchResult) -> None:
        """How a generation's start went. A pane's wrapper may have reported its exit
        before its launch did: then there is nothing left to follow but the pane's record."""
        if lg.collected:
            if isinstance(result, PaneOpened):
                self._pane_opened(lg, result.pane_id)
            return
        lg.launched()
        if isinstance(result, LaunchFailed) and result.code == "launcher_lost":
            # no launcher can be had any more: like the tasks still waiting, it never ran
            self._withdraw(lg, "launcher_lost", claimed=lg.request.claimed)
        elif isinstance(result, LaunchFailed) and result.unstartable and self.settings.require_multiplexer:
            if self.start_error is None:
                self._backend_unstartable(self.backend.name, result.code, result.message)
            self._withdraw(lg, f"{self.backend.name}_{result.code}")
        elif isinstance(result, LaunchFailed) and result.code == "state_dir_error":
            # its files could not be made (in a pane as headless): it waits for room (SPEC §5.8)
            self._records_unwritable(result.message, lg.task)
            self._requeue_unstarted(lg)
        elif isinstance(result, LaunchFailed):
            if lg.in_pane:
                self._pane_fault(lg, result.code, result.message, claimed=False)
            else:
                self._warn(result.code, result.message, lg.task)
                self._end_generation(lg, None, TaskStatus.FAILED, result.code)
        elif isinstance(result, PaneOpened):
            self._follow_pane(lg, result.pane_id)
        else:
            self.headless.wait_for(result.token, lg)  # a kill while it waited is applied when it starts
        if lg.in_pane:
            self.kill_pending(lg)  # ended while its pane was opening

    def _withdraw(self, lg: LiveGen, reason: str, *, claimed: bool = False) -> None:
        """Take back a reserved generation that was never started, its claim first (unless
        this supervisor holds it) so a pane that appears late runs nothing; one whose pane
        claimed it already is followed."""
        if not claimed and not generation_files.take_claim(lg.gen):
            self._follow_pane(lg, None)
            return
        self._let_go(lg)
        self.slots.free(lg.gen.slot)
        lg.task.withdraw_generation()
        self._finalise(lg.task, TaskStatus.CANCELLED, reason)

    def _let_go(self, lg: LiveGen) -> None:
        """A generation is over for this supervisor: out of ``live``, its timers, idle watch
        and input watch gone (its slot is the caller's to free or hold)."""
        lg.move(GenPhase.DONE)
        del self.live[lg.gen.slot]
        for timer in lg.deadlines:
            self.timers.cancel(timer)
        lg.deadlines.clear()
        self.watchdog.unregister(lg.gen)
        self.input_watch.unregister(lg)
        if lg.task.waiting_input and not lg.in_pane:  # a pane's mark goes with its end (``backend.ended``)
            self.backend.waiting(lg.request, None, False)

    def _running(self, lg: LiveGen) -> None:
        freed = self._freed_at.pop(lg.gen.slot, None)
        if freed is not None and lg.backfill:
            self.stats.seen_refill.add((self.clock() - freed) * 1000)
        self.slots.running(lg.gen.slot)
        if not lg.timeout_armed:  # a fallback after a pane fault: the same generation, the same clocks
            self.arm_limits(lg, elapsed=0.0)

    def arm_limits(self, lg: LiveGen, *, elapsed: float) -> None:
        """The task's time limits for this generation: what is left of its timeout after
        ``elapsed`` seconds (a resumed run's adopted workers have used some), its idle watch, and
        whether it waits for input."""
        lg.timeout_armed = True
        if not lg.remote:  # its processes are on another host: /proc here cannot tell
            self.input_watch.register(lg)
        if lg.task.timeout is not None:
            left = max(0.0, lg.task.timeout - elapsed)
            lg.deadlines.append(self.timers.after(left, lambda: self._time_limit(lg, lg.task.timeout or 0.0)))
        if lg.task.idle_timeout is not None:
            self._watch_idle(lg, since=self.wallclock() - elapsed)

    def _watch_idle(self, lg: LiveGen, *, since: float) -> None:
        """Its idle watch: silence counts from ``since`` — for a Slurm step, from its wrapper's
        start (its claim), looked for until it has come: time in the queue is not silence."""
        if lg.done or lg.collected or lg.task.idle_timeout is None:
            return
        if lg.remote:
            if (started := generation_files.started_at(lg.gen)) is None:
                lg.deadlines.append(self.timers.after(TIMEOUT_RECHECK, lambda: self._watch_idle(lg, since=since)))
                return
            since = max(since, started)
        self.watchdog.register(lg.gen, lg.task.idle_timeout, lambda silence: self._on_idle(lg, silence), since=since)

    def _time_limit(self, lg: LiveGen, limit: float) -> None:
        """Its timeout is due by this supervisor's clock. It is judged on the worker's own
        start (its claim's time) and end (its sidecar's): a supervisor that was stopped
        (Ctrl-Z, SIGSTOP) wakes late, a worker that ended meanwhile within its limit is not
        timed out, and a Slurm step's time in the queue, before its wrapper started, is not
        charged."""
        if lg.done or lg.collected:
            return
        started = generation_files.started_at(lg.gen)
        if generation_files.ended_at(lg.gen) is not None:
            return  # it has ended: its end is on the way to ``collect``, which judges it
        if started is None:  # not started yet (a queued step): looked at again until it has
            lg.deadlines.append(self.timers.after(min(limit, TIMEOUT_RECHECK), lambda: self._time_limit(lg, limit)))
            return
        if (left := limit - (self.wallclock() - started)) > 0:
            lg.deadlines.append(self.timers.after(left, lambda: self._time_limit(lg, limit)))
            return
        self.kill(lg, "timeout")

    def _on_idle(self, lg: LiveGen, silence: float) -> None:
        """The watchdog found a worker silent for longer than its idle_timeout."""
        if lg.done:
            return
        limit = lg.task.idle_timeout
        message = f"no output and no heartbeat for {silence:.1f}s (idle_timeout {limit:g}s)"
        self.events.emit("idle_timeout", task=lg.task.name, slot=lg.gen.slot, gen=lg.gen.gen,
                         silence_s=round(silence, 3), policy=self.settings.idle_policy)
        if self.settings.idle_policy == "warn":
            self._warn("idle_timeout", message, lg.task)
        else:
            lg.idle_message = message
            self.kill(lg, "idle_timeout")

    def _waiting_changed(self, lg: LiveGen, waiting: bool | None) -> None:
        """A worker started or stopped waiting for input (None: it cannot be known)."""
        lg.task.waiting_input = waiting
        self.events.emit("worker_waiting_input", task=lg.task.name, slot=lg.gen.slot, gen=lg.gen.gen,
                         waiting=waiting)
        if waiting is not None:  # one without a pane is counted in the run's window too
            self.backend.waiting(lg.request, lg.pane_id if lg.in_pane else None, waiting)

    def pause(self, group: str | None, paused: bool) -> None:
        """Stop (or resume) handing out new tasks of ``group`` (None: of the whole run); the
        running ones go on. Recorded as an event, so a resumed run stays paused."""
        (self.ready.pause if paused else self.ready.unpause)(group)
        self.events.emit("paused" if paused else "unpaused", group=group)

    def _follow_child(self, lg: LiveGen, pid: int) -> None:
        lg.pid = lg.task.pid = pid
        lg.started()
        self.events.emit("worker_process_spawned", task=lg.task.name, slot=lg.gen.slot, gen=lg.gen.gen, pid=pid)
        if lg.remote:  # its exit sidecar may come before srun lets go of the step: its files are polled too
            lg.heartbeat_seen = True  # the pid to follow is srun's, here; the heartbeat's is on the node
            self.follow.watch(lg)
        self._running(lg)
        self.kill_pending(lg)  # cancelled while it was waiting to start: end it now

    # ----- panes ---------------------------------------------------------------------------

    def _on_files(self, changes: list[Any]) -> None:
        touched = {c.dir for c in changes}
        if self.paths.inbox in touched:
            self.control.read_inbox()
        self.follow.on_changes(touched)

    def _follow_pane(self, lg: LiveGen, pane_id: str | None) -> None:
        """A pane opened for ``lg``: its wrapper must send its launch heartbeat in time."""
        self._pane_opened(lg, pane_id)
        self.follow.watch(lg)
        self._running(lg)
        if not lg.remote or lg.step_running:  # a queued step is not a missing one: armed when it runs
            self._arm_heartbeat_deadline(lg)
        self.follow.changed(lg)  # a fast pane may have reported before the watch existed

    def _arm_heartbeat_deadline(self, lg: LiveGen) -> None:
        lg.deadlines.append(self.timers.after(self.settings.heartbeat_timeout, lambda: self._heartbeat_deadline(lg)))

    def _step_running(self, lg: LiveGen) -> None:
        """Slurm runs a generation's step: a pane's launch heartbeat is due from now on."""
        if lg.in_pane and not lg.heartbeat_seen and not lg.opening and not lg.collected:
            self._arm_heartbeat_deadline(lg)

    def _step_seen(self, lg: LiveGen, job: Job) -> None:
        """A generation's step as squeue lists it: its task's row shows it (a queued one with
        Slurm's reason); a change of state is an event, so the snapshot follows it."""
        step = {"job": job.id, "state": job.state, "reason": None if job.reason == "None" else job.reason}
        if job.running:
            lg.read_step()
        step.update(remote.SlurmExecutor.where(lg))
        if lg.task.slurm != step:
            lg.task.slurm = step
            self.events.emit("step_state", task=lg.task.name, slot=lg.gen.slot, gen=lg.gen.gen, **step)

    def _queued_too_long(self, lg: LiveGen) -> None:
        """A step waited in Slurm's queue longer than ``--slurm-max-queue``: withdrawn, its
        task ``cancelled (queued_too_long)``."""
        limit = self.settings.slurm_max_queue or 0.0
        self._warn("queued_too_long", f"slurm: the step of task {lg.task.name!r} waited in the queue for more than "
                                      f"{limit:g}s (--slurm-max-queue); withdrawn", lg.task)
        self.kill(lg, "queued_too_long")

    def _step_gone(self, lg: LiveGen) -> None:
        """Slurm let a generation's step go and its sidecar had its grace: collect it."""
        self.follow.changed(lg)
        self.collect(lg)

    def _pane_opened(self, lg: LiveGen, pane_id: str | None) -> None:
        lg.pane_id = lg.task.pane_id = pane_id or lg.pane_id  # before 0.44 only the heartbeat says
        self.events.emit("pane_opened", task=lg.task.name, slot=lg.gen.slot, gen=lg.gen.gen, pane_id=lg.pane_id)

    def _heartbeat(self, lg: LiveGen, hb: dict[str, Any]) -> None:
        lg.started()
        lg.pid = lg.task.pid = hb.get("pid")
        lg.node, lg.step = hb.get("node"), hb.get("step")
        if isinstance(hb.get("pane_id"), str):
            lg.pane_id = lg.task.pane_id = hb["pane_id"]
        self.events.emit("worker_heartbeat_seen", task=lg.task.name, slot=lg.gen.slot, gen=lg.gen.gen,
                         pid=lg.pid, pane_id=lg.pane_id)
        self._running(lg)  # also when it reports before its pane's launch does
        if isinstance(lg.pid, int) and not lg.remote:  # a step's pid is on its node, not here
            self.follow.follow_pid(lg)

    def _heartbeat_deadline(self, lg: LiveGen) -> None:
        """No launch heartbeat in time: unless the pane claimed the generation after all, the
        claim is taken and the pane closed (``_pane_fault``)."""
        if lg.collected or lg.heartbeat_seen or not lg.in_pane:
            return
        try:
            taken = procs.claim_for_supervisor(lg.gen)
        except OSError as e:  # no room for our claim: the pane's fate is decided once there is
            self._records_unwritable(f"cannot write the claim of {lg.gen.dir}: {e.strerror}", lg.task)
            lg.deadlines.append(self.timers.after(ROOM_RECHECK, lambda: self._heartbeat_deadline(lg)))
            return
        if not taken:
            # The pane claimed it: its heartbeat is on the way — unless the claimant is gone.
            # (One gone before it wrote its pid ran nothing: its claim was taken over above.)
            pid = generation_files.wrapper_pid(lg.gen)
            if pid is not None and not procs.alive(pid):
                self.collect(lg)
            else:
                lg.deadlines.append(
                    self.timers.after(self.settings.heartbeat_timeout, lambda: self._heartbeat_deadline(lg)))
            return
        t = self.settings.heartbeat_timeout
        self.events.emit("heartbeat_missing", task=lg.task.name, slot=lg.gen.slot, gen=lg.gen.gen, pane_id=lg.pane_id)
        self.backend.abandon(lg.pane_id, lg.request)
        self._pane_fault(lg, "heartbeat_missing", f"pane {lg.pane_id} sent no launch heartbeat within {t:g}s",
                         claimed=True)

    def _pane_fault(self, lg: LiveGen, code: str, message: str, *, claimed: bool) -> None:
        """A multiplexer fault for one generation: a warning and the generation runs headless,
        or, under require, the task fails with the fault as its reason."""
        self.follow.unwatch(lg)
        if not claimed and not generation_files.take_claim(lg.gen):
            self._follow_pane(lg, None)  # the pane exists after all and already claimed it
            return
        lg.request = replace(lg.request, claimed=True)
        if self.settings.require_multiplexer:
            self._end_generation(lg, None, TaskStatus.FAILED, f"{self.backend.name}_{code}")
            return
        self._warn(code, message, lg.task)
        [result] = self.headless.start([lg.request])
        self._launched(lg, result)

    # ----- exits ---------------------------------------------------------------------------

    def collect(self, lg: LiveGen, wait_status: int | None = None) -> None:
        """Read how a generation's wrapper ended (once, whoever notices first). A pane's
        wrapper gone without an exit record, or hung up, ended with its pane or with the
        whole session: the backend's thread asks the multiplexer which, and the outcome
        waits for the answer."""
        if lg.collected:
            return
        if lg.signalling:  # a signal of its ladder is on its way: whether it reached the worker decides
            lg.move(GenPhase.END_SEEN)
            lg.wait_status = wait_status
            return
        if self.executor is not None and lg.remote and not lg.gone_seen and \
                generation_files.read_sidecar(lg.gen) is None:
            self.executor.left_queue(lg)  # a sidecar written on the node may show late: re-read first
            return
        lg.move(GenPhase.COLLECTED)
        self.follow.unwatch(lg)
        if lg.remote:
            lg.read_step()
        rec = generation_files.exit_facts(lg.gen, pid=lg.pid if lg.child and not lg.remote else None)
        # its pane, or session, went away (a step whose wrapper never started is the executor's failure)
        hung_up = rec is None or (rec.signal == "SIGHUP" and generation_files.hung_up(lg.gen))
        pane_gone = lg.in_pane and hung_up and not (lg.remote and generation_files.read_claim(lg.gen) is None)
        if self.executor is not None and lg.remote and lg.kill_reason is None and (rec is None or rec.signal) \
                and not pane_gone:
            # an end the wrapper did not explain: Slurm's job state does (its time limit, a
            # cancel from outside, a node lost)
            self.executor.explain(lg, lambda verdict: self._classify_step(lg, rec, verdict),
                                  recorded_signal=rec is not None)
            return
        sig = None
        if wait_status is not None and os.WIFSIGNALED(wait_status):
            sig = signal.Signals(os.WTERMSIG(wait_status)).name
        # A pane's worker dead of SIGHUP with no mark of its leader's (yet): the multiplexer may
        # have signalled it before it closed the terminal (a killed tmux server does): ask it too.
        unmarked_hangup = lg.in_pane and rec is not None and rec.signal == "SIGHUP" and not pane_gone
        if (pane_gone or unmarked_hangup) and lg.kill_sent_at is None:  # not our kill's doing
            self.backend.session_alive(lambda alive: self._classify(lg, rec, sig, session_alive=alive))
        else:
            self._classify(lg, rec, sig, session_alive=True, wait_status=wait_status)

    def _classify(self, lg: LiveGen, rec: generation_files.ExitRecord | None, sig: str | None, *,
                  session_alive: bool, missing: str = "no_exit_record", wait_status: int | None = None) -> None:
        """A generation's end from its exit record; without one, the reason is ours (a kill),
        the state directory's, the lost session's, or ``missing`` (what else is known)."""
        if rec is None:
            # The wrapper is gone without committing its exit: killed by us (our kill reached
            # it, or it never ran), or by someone else, or it could not write.
            claim = generation_files.read_claim(lg.gen)
            # A headless wrapper that ended by itself, its claim its own or never written: it
            # could not write its claim, or ran to its end and could not write its sidecar.
            exited = lg.child and wait_status is not None and os.WIFEXITED(wait_status) and (
                claim is None or claim.unwritten or claim.pid == lg.pid or (claim.by_supervisor and lg.request.claimed))
            ran = claim is not None and not claim.by_supervisor  # the wrapper claimed it: its worker may have run
            if lg.kill_reason and (lg.kill_sent_at is not None or not ran):
                reason = lg.kill_reason
            elif exited or rundir.unwritable(self.paths.dir) or self._full_while_it_ran(lg):
                self._records_unwritable(f"the state directory {self.state_dir} is full or cannot be written: the "
                                         f"wrapper of task {lg.task.name!r} could not record its start or its exit",
                                         lg.task)
                if claim is None or claim.unwritten:  # it could not claim the generation: nothing ran
                    self._requeue_unstarted(lg)
                    return
                if exited:  # the launcher waited for it, and a wrapper exits with its worker's status
                    code = os.WEXITSTATUS(wait_status or 0)
                    rec = generation_files.record_missing_exit(lg.gen, reason=None, code=code,
                                                               signal=generation_files.signal_name(code),
                                                               ended_at=self.wallclock())
                    self._end_generation(lg, rec, *outcome(lg, rec, session_alive=session_alive))
                    return
                reason = "state_dir_error"  # it ran, and how it ended is known to nobody: ``unknown``
            elif not session_alive:
                reason = "multiplexer_lost"
            else:
                reason = missing
            rec = generation_files.record_missing_exit(lg.gen, reason=reason, code=None, signal=sig,
                                                       ended_at=self.wallclock())
        self._end_generation(lg, rec, *outcome(lg, rec, session_alive=session_alive))

    def _classify_step(self, lg: LiveGen, rec: generation_files.ExitRecord | None, verdict: str | None) -> None:
        """A step's end the wrapper did not record, or recorded as a death by signal, as
        Slurm's job state explains it (``slurm.classify``; None: the record stands)."""
        if verdict is None:
            self._classify(lg, rec, None, session_alive=True)  # a worker killed by a signal of its own
            return
        reason = verdict
        if rec is None and REASON_STATUS[reason] == TaskStatus.LOST and generation_files.read_claim(lg.gen) is None:
            # its wrapper never started: srun refused the step, or could not reach Slurm
            reason = "executor_failed"
            self._warn("executor_failed", f"slurm: the step of task {lg.task.name!r} never started its wrapper"
                                          + remote.srun_error(lg.gen), lg.task)
        if rec is None:
            self._classify(lg, None, None, session_alive=True, missing=reason)
        else:
            self._end_generation(lg, rec, REASON_STATUS[reason], reason)

    def _end_generation(self, lg: LiveGen, rec: generation_files.ExitRecord | None, status: TaskStatus,
                        reason: str | None) -> None:
        task, slot = lg.task, lg.gen.slot
        self._let_go(lg)
        self._freed_at[slot] = self.clock()
        if lg.remote:  # what stays of its step in the row: where it ran, how long it queued
            task.slurm = remote.SlurmExecutor.where(lg, ended_at=self.wallclock()) or None
        if reason in ("multiplexer_lost", "pane_closed") or (rec is not None and not
                                                            generation_files.committed_by_wrapper(rec)):
            # Its terminal or its wrapper is gone, but the worker may not be (a program that
            # never writes does not notice; a killed wrapper leaves its child running): end
            # what is left of it before anything runs again.
            self.stopper.end_tree(lg)
        if not self.stopper.hold_slot(lg):
            self.slots.free(slot)
        attempt = task.end_generation(status, rec, reason, backfill=lg.backfill, ended_at=self.wallclock(),
                                      slurm=task.slurm if lg.remote else None)
        if lg.idle_message:
            task.warnings.append({"code": "idle_timeout", "message": lg.idle_message, "task": task.name})
        self.control.followups(lg)
        if lg.in_pane or (status == TaskStatus.SUCCEEDED and task.attempts > 1):
            # a success after failed attempts also lets their kept panes go
            self.backend.ended(lg.request, lg.pane_id if lg.in_pane else None, str(status), _pane_label(attempt))
        self.events.emit(
            generation_files.WORKER_COMPLETED if status == TaskStatus.SUCCEEDED else generation_files.WORKER_FAILED,
            task=task.name, slot=slot, gen=lg.gen.gen, pid=attempt.pid, status=str(status), code=attempt.exit_code,
            signal=attempt.signal, reason=reason, started_at=attempt.started_at, ended_at=attempt.ended_at,
            **(task.slurm if lg.remote and task.slurm else {}),
        )
        if rec is not None and generation_files.committed_by_wrapper(rec) and not lg.request.pane:
            # Folded once its outcome is durable — never one that was ever handed to a pane,
            # also when it ran headless after all: a pane that comes up late must find its
            # claim taken and run nothing (a generation runs at most once).
            self._ended.append(lg.gen)
        if task.last_end_is_free:
            task.attempts -= 1
        if reason == "multiplexer_lost":
            # The session is gone for every pane: a worker that ignores the hang-up would run
            # on unseen, holding its slot. All of them go through the ladder and re-run headless.
            for other in [o for o in self.live.values() if o.in_pane]:
                self.kill(other, "multiplexer_lost")
        if reason == RESTARTED and not self.is_stopping():
            task.restarts += 1  # SPEC §8: a restart does not use an attempt
            task.move(TaskStatus.PENDING)
            self.ready.requeue(task.id, first=True)
            self.events.emit("task_restarted", task=task.name, attempt=task.attempts + 1)
        elif status.retryable and task.attempts_left and not self.is_stopping():
            task.move(TaskStatus.PENDING)
            self.ready.requeue(task.id)
            self.events.emit("task_retry", task=task.name, attempt=task.attempts + 1, after=str(status))
        else:
            self._finalise(task, status, reason, lg.gen)

    def _finalise(self, task: TaskRecord, status: TaskStatus, reason: str | None,
                  gen: generation_files.GenPaths | None = None) -> None:
        """A task reached its final status: freeze it, release or skip its dependents."""
        task.finish(status, reason)
        if self.plan.joblog is not None and (
                problem := self.plan.joblog.task_finished(task.row(now=None), command_text(task.spec))):
            self._warn("joblog_error", problem, task)
        if task.started_at is not None and task.ended_at is not None:
            self._ended_time[0] += 1
            self._ended_time[1] += task.ended_at - task.started_at
        self.reporter.task_ended(task, gen)
        if status == TaskStatus.TIMED_OUT:
            self.events.emit("task_timed_out", task=task.name, reason=reason)
        elif status == TaskStatus.CANCELLED:
            self.events.emit("task_cancelled", task=task.name, reason=reason)
        _, skipped = self.ready.finished(task.id, succeeded=status == TaskStatus.SUCCEEDED)
        for tid in skipped:
            self.skip(self.tasks[tid])
        if status not in (TaskStatus.SUCCEEDED, TaskStatus.CANCELLED, TaskStatus.UNKNOWN):  # unknown: maybe fine
            self._on_failure()

    def skip(self, task: TaskRecord) -> None:
        task.finish(TaskStatus.SKIPPED, "dependency_failed")
        self.events.emit("task_skipped", task=task.name, reason="dependency_failed")
        self.reporter.task_ended(task, None)

    def is_stopping(self) -> bool:
        return bool(self.stop_signal or self.cancelled or self.halted or self.launcher_failed or self.start_error)

    def _warn(self, code: str, message: str, task: TaskRecord | None) -> None:
        if code == "state_dir_error" and not self._state_dir_said:
            # A full or read-only state dir is said once, whatever the output mode.
            self._state_dir_said = True
            self.reporter.problem(f"warning: {message}")
        w = {"code": code, "message": message, "task": task.name if task else None}
        self.warnings.append(w)
        if task is not None:
            task.warnings.append(w)
        self.reporter.warning(w)
        self.events.emit("warning", **w)

    # ----- what the control inbox does to the run ---------------------------------------------

    def cancel_all(self) -> None:
        self.cancelled = True
        self._stop_everything("cancelled_by_user")

    def cancel_task(self, task: TaskRecord) -> bool:
        """Cancel one task: a waiting one ends now, a running one through the ladder. False
        when it had already ended."""
        if task.status == TaskStatus.PENDING:
            self.ready.discard(task.id)
            self._finalise(task, TaskStatus.CANCELLED, "cancelled_by_user")
            return True
        if task.status == TaskStatus.RUNNING and task.slot in self.live:
            self.kill(self.live[task.slot], "cancelled_by_user")
            return True
        return False

    def restart_task(self, task: TaskRecord) -> bool:
        """End a running task's generation through the one stopping path and run it again at
        once (``RESTARTED``); False when it is not running."""
        if task.status != TaskStatus.RUNNING or task.slot not in self.live:
            return False
        self.kill(self.live[task.slot], RESTARTED)
        return True

    def add_live(self, specs: list[swarmfile.TaskSpec], *, source: str) -> list[TaskRecord]:
        added = self.add_tasks(specs)
        for t in added:
            self.events.emit("task_added", task=t.name, id=t.id, source=source, spec=t.spec.to_record())
        self.snapshots.dirty = True
        return added

    # ----- stopping: signals, halt, cancel ---------------------------------------------------

    def _on_signals(self, received: list[signal.Signals]) -> None:
        for sig in received:
            if sig == signal.SIGHUP:
                self.detached = True  # the workers go on; ``resume`` picks the run up
                self._warn("detached", "received SIGHUP: supervisor detached", None)
                return
            if self.stop_signal is None:
                self.stop_signal = sig
                self._warn("cancelled_by_user", f"received {sig.name}", None)
                self._stop_everything("cancelled_by_user")

    def _on_failure(self) -> None:
        mode = self.settings.halt
        if mode == "never" or self.halted:
            return
        self.halted = True
        self._warn("halted", f"--halt {mode}: stopping after the first failure", None)
        self._cancel_pending("halted")
        if mode == "now":
            for lg in list(self.live.values()):
                self.kill(lg, "halted")

    def _stop_everything(self, reason: str) -> None:
        self.slots.close()
        self._cancel_pending(reason)
        for lg in list(self.live.values()):
            self.kill(lg, reason)
        self.headless.follow_all()

    def _no_launcher(self) -> None:
        """Launchers keep dying with work given and none of it started: nothing more is
        dispatched; the tasks still waiting end ``cancelled`` with reason ``launcher_lost``."""
        self.launcher_failed = True
        self._cancel_pending("launcher_lost")

    def _cancel_pending(self, reason: str) -> None:
        for tid in self.ready.drain():
            self._finalise(self.tasks[tid], TaskStatus.CANCELLED, reason)
        self.snapshots.dirty = True

    def kill(self, lg: LiveGen, reason: str) -> None:
        """End a generation on purpose (``reason``: timeout, cancel, halt…). Not started yet:
        it is ended the moment it starts. In a pane that never started its wrapper: the
        claim is taken and the pane closed, nothing runs. Otherwise: the one ladder
        (``stopping``)."""
        if lg.collected or lg.kill is not KillState.NONE:
            return
        lg.request_kill(reason)
        self._carry_out_kill(lg, reason)

    def kill_pending(self, lg: LiveGen) -> None:
        """A kill asked for before the generation could be ended — while it waited to start,
        while its pane opened, or by a supervisor that was killed — is carried out now."""
        if lg.kill_reason is not None and not lg.collected:
            self._carry_out_kill(lg, lg.kill_reason)

    def _carry_out_kill(self, lg: LiveGen, reason: str) -> None:
        if lg.opening:
            return  # ended as soon as the backend says how it starts (``_launched``)
        try:
            generation_files.write_kill_reason(lg.gen, reason)
        except OSError as e:
            self._warn("state_dir_error", f"cannot record the kill reason: {e.strerror}", lg.task)
        if lg.in_pane and not lg.heartbeat_seen and generation_files.take_claim(lg.gen):
            self.follow.unwatch(lg)
            self.backend.abandon(lg.pane_id, lg.request)
            if lg.remote:
                self.stopper.end_tree(lg)  # its step may be queued or starting: Slurm lets it go
            self._end_generation(lg, None, killed_status(reason), reason)
            return
        if lg.pid is None and not lg.in_pane:
            return  # handed to the launcher, not started yet: ended the moment it starts
        self.stopper.end_tree(lg)

    def _delivered(self, lg: LiveGen, sent_at: float | None) -> None:
        """A signal of a generation's ladder came out. The first that reached the worker is
        the moment its kill was *sent* (recorded with the kill's reason, and in the event
        log); an end noticed while signals were in flight is read once none is."""
        if sent_at is not None and lg.kill is not KillState.SENT and not lg.done:
            lg.kill_reached_worker(sent_at)
            reason = lg.kill_reason or "ended"
            try:
                generation_files.write_kill_reason(lg.gen, reason, sent_at=sent_at)
            except OSError as e:
                self._warn("state_dir_error", f"cannot record the kill: {e.strerror}", lg.task)
            self.events.emit("kill_sent", task=lg.task.name, slot=lg.gen.slot, gen=lg.gen.gen, reason=reason,
                             at=sent_at)
        if not lg.signalling and lg.phase is GenPhase.END_SEEN:
            self.collect(lg, lg.wait_status)

    def _slot_released(self, lg: LiveGen) -> None:
        self.events.emit("slot_released", slot=lg.gen.slot, gen=lg.gen.gen)

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
            ended, took = self._ended_time
            self.reporter.progress(ProgressFacts(
                counts=snapshot.counts_of(self), elapsed=wall - self.started_at, jobs=self.jobs,
                mean_duration=took / ended if ended else None,
                running=[(lg.task.name, wall - lg.task.started_at) for lg in self.live.values()
                         if lg.task.started_at is not None],
                waiting=sorted(lg.task.name for lg in self.live.values() if lg.task.waiting_input)))

    def _check_records(self) -> None:
        """A full or read-only state directory: say so once; the run itself goes on."""
        error = self.events.error or self.snapshots.error
        if error is not None:
            self._records_unwritable(f"cannot write the run's records in {self.paths.dir}: {error.strerror}; "
                                     "outcomes are still tracked in memory", None)

    def _records_unwritable(self, message: str, task: TaskRecord | None) -> None:
        """The state directory cannot be written: one ``state_dir_error`` warning a run,
        whoever noticed first (the supervisor's own writes, or a wrapper's); no new task
        starts until it can be again."""
        if not self._records_warned:
            self._records_warned = True
            self._warn("state_dir_error", message, task)
        self._state_dir_full(message)

    # ----- a full state directory (SPEC §5.8) ------------------------------------------------

    def _full_while_it_ran(self, lg: LiveGen) -> bool:
        """The state directory was found full since this generation started: a record it
        lacks may be one it could not write, even if there is room again now."""
        started = lg.task.started_at
        return self._full_seen_at is not None and (started is None or started <= self._full_seen_at)

    def _holding_dispatch(self) -> bool:
        return self.is_stopping() or self.state_dir_full or (self.executor is not None and self.executor.holding)

    def _state_dir_full(self, why: str) -> None:
        """The state directory cannot take a generation's records: no new task starts —
        none is turned into a failure for it — until there is room again; running ones go
        on. Said once each time it fills."""
        if self.state_dir_full:
            return
        self.state_dir_full = True
        self._full_seen_at = self.wallclock()
        if not self._full_said:  # the first time; a disk that fills again is in the event log
            self.reporter.problem(f"warning: the state directory {self.state_dir} is full or cannot be written: "
                                  "no new task starts until it has room again")
        self.events.emit("dispatch_held", reason="state_dir_full", why=why)
        self.timers.after(ROOM_RECHECK, self._look_for_room)

    def _look_for_room(self) -> None:
        if not self.state_dir_full:
            return
        self.events.flush()  # the log goes first: it is whole again once there is room
        if rundir.has_room(self.paths.dir) and self.events.error is None:
            self.state_dir_full = False
            self._idle_full_since = None
            if not self._full_said:
                self._full_said = True
                self.reporter.problem(f"the state directory {self.state_dir} has room again: new tasks start")
            self.events.emit("dispatch_resumed", reason="state_dir_full")
            return
        if self.live or self.stopper.stopping or self.is_stopping():
            self._idle_full_since = None
        elif self._idle_full_since is None:
            self._idle_full_since = self.clock()
        elif self.clock() - self._idle_full_since >= FULL_GIVE_UP:
            # Nothing runs and nothing can start: the run stops here, resumable as it is.
            self.reporter.problem(f"error: the state directory {self.state_dir} has had no room for "
                                  f"{FULL_GIVE_UP:g}s: run {self.run_id} is interrupted; "
                                  f"`zellij-swarm resume {self.run_id}` goes on once there is room")
            self.detached = True
            return
        self.timers.after(ROOM_RECHECK, self._look_for_room)

    def _requeue_unstarted(self, lg: LiveGen) -> None:
        """A generation that never started because the state directory was full: its task
        waits for a slot again, first in line, as if it had never been given one."""
        self._let_go(lg)
        self.slots.free(lg.gen.slot)
        self.follow.unwatch(lg)
        lg.task.withdraw_generation()
        lg.task.move(TaskStatus.PENDING)
        self.ready.requeue(lg.task.id, first=True)
        self.events.emit("task_requeued", task=lg.task.name, slot=lg.gen.slot, gen=lg.gen.gen, reason="state_dir_full")

    def _finish(self) -> int:
        if self.detached:
            snap = self.final_snapshot = self.snapshots.write(merged=False)
            self.events.emit("run_detached", resume=f"zellij-swarm resume {self.run_id}")
            self.events.flush()
            code = 1 if self.state_dir_full else 129  # gave up on a full state dir; else detached (SIGHUP)
            self.reporter.finished(snap, code)
            return code
        if self.executor is not None and (left := self.executor.close()):
            self._warn("process_left_behind", f"slurm: {len(left)} step(s) of the run were still queued or running at "
                                              f"its end; cancelled: {', '.join(left[:10])}", None)
        if self._input_open():  # stopped (a cancel, a halt) before the end of its input
            stream = self.plan.stream
            assert stream is not None
            self.events.emit("input_unread", tasks=stream.tasks_read)
            self.reporter.problem(f"the run ended before the end of {stream.source}: {stream.tasks_read} task(s) were "
                                  "read, the rest never was")
        self.stopper.sweep(self.tasks.values(), session_alive=self.backend.session_alive_now(), found=self._left_behind)
        self.control.answer_late()
        self.ended_at = self.wallclock()
        self._close_backend()
        if self.attached is not None:
            self.attached.wait()  # the user detaches, or the session just closed lets it go
        self.reserve.release()
        self.headless.close(wait=True)  # every worker has ended; its usage is the summary's
        self.events.flush()
        self.commit.submit(self._ended if self.events.error is None else [])
        self.commit.close()  # every outcome is durable before the summary says the run ended
        snap = self.snapshots.write(summary=self.paths.summary, merged=False)
        self._check_records()
        self.final_snapshot = snap
        code = self.exit_code(snap)
        self.events.emit("run_finished", state=snap["state"], exit_code=code, counts=snap["counts"])
        self.events.flush()
        self.reporter.finished(snap, code)
        return code

    def exit_code(self, snap: dict[str, Any]) -> int:
        if self.stop_signal is not None:
            return EXIT_CODES[self.stop_signal]
        if self.cancelled:
            return 130
        if self.start_error:
            return 1
        return 0 if all_succeeded(snap["counts"]) else 1


def _pane_label(a: Any) -> str:
    """The state part of a finished pane's title, in the words every other view uses for an
    outcome (``succeeded``, ``timed out``)."""
    word = str(a.status).replace("_", " ")
    return f"{word} (exit {a.exit_code})" if a.exit_code is not None and a.status != TaskStatus.SUCCEEDED else word
