"""Dispatch: every free slot a ready task can use is reserved, its generation written and
started, in batches — headless ones through the launcher at once (a large batch's in chunks
as it is reserved), those whose slot the
backend shows once the backend's thread has said how each runs (its pane, or headless), so
that a slow multiplexer never holds up a headless start. How each start went comes back
through ``launched``. A task with a worktree gets it (made, or its own again) at its
reservation, and its worker runs in it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from zellij_swarm.backends.base import LaunchFailed, LaunchRequest, LaunchResult, PaneResult
from zellij_swarm.backends.offloop import OffLoopBackend
from zellij_swarm.engine import metrics
from zellij_swarm.engine.follow import GenerationWatch
from zellij_swarm.engine.headless_workers import HeadlessWorkers
from zellij_swarm.engine.live import GenPhase, LiveGen
from zellij_swarm.engine.remote import SlurmExecutor
from zellij_swarm.engine.scheduler import ReadyQueue
from zellij_swarm.engine.slots import Slots
from zellij_swarm.records import envfile, rundir
from zellij_swarm.records.log import EventLog
from zellij_swarm.records.shells import ShellPool
from zellij_swarm.records.task import TaskRecord
from zellij_swarm.records.task_table import TaskTable
from zellij_swarm.worker import wrapper
from zellij_swarm.worker.worktree import WorktreeError, Worktrees
from zellij_swarm.worker.wrapper import PaneMode

# Headless generations of a batch handed to the launcher together while the rest of the batch
# is still being reserved: a reservation makes directories (a first batch's ~1 ms each here),
# which the first wrappers' starts then overlap on another core. Small enough that the
# launcher starts early; each chunk costs a log write and a pipe write.
START_CHUNK = 8


class Dispatcher:
    def __init__(self, *, run_id: str, paths: rundir.RunPaths, cwd: str, tasks: TaskTable,
                 ready: ReadyQueue, slots: Slots, live: dict[int, LiveGen], backend: OffLoopBackend,
                 headless: HeadlessWorkers, follow: GenerationWatch, events: EventLog, stats: metrics.DispatchStats,
                 stopping: Callable[[], bool],
                 launched: Callable[[LiveGen, LaunchResult], None], worktrees: Worktrees, shells: ShellPool,
                 executor: SlurmExecutor | None = None, live_panes: bool = False) -> None:
        self._run_id = run_id
        self._paths = paths
        self._cwd = cwd
        self._tasks = tasks
        self._ready = ready
        self._slots = slots
        self._live = live  # slot -> generation in flight: the supervisor's, filled here
        self._backend = backend
        self._headless = headless
        self._follow = follow
        self._events = events
        self._stats = stats
        self._stopping = stopping
        self._launched = launched
        self._shells = shells
        self._worktrees = worktrees
        self._executor = executor  # the Slurm executor: every generation runs as a job step
        self._live_panes = live_panes  # a pane shows its worker on a TTY (live UI), not a renderer
        # the saved environment, when some of its variables need an exec to reach a worker
        self._unexportable_env = paths.saved_env if envfile.unexportable(envfile.load(paths.saved_env)) else None

    def fill(self) -> None:
        """Fill every free slot a ready task can use. A launch that fails at once frees its
        slot again within the batch, so batches repeat until nothing more can start."""
        while not self._stopping() and self._slots.free_count and self._ready.has_ready():
            self._batch()

    def _batch(self) -> None:
        """Reserve the free slots and start their generations together: headless ones
        ``START_CHUNK`` at a time while more are reserved (so the first wrappers of a batch
        of more than a chunk run while the rest are still being reserved), the last of them
        after the last reservation; those whose slot the backend shows once its thread has
        said how (pane or headless). Each generation's directory is made
        at its reservation, so its number is on disk before anything else can happen to it (a
        supervisor killed meanwhile leaves a generation ``resume`` knows never ran)."""
        shown: list[LiveGen] = []
        headless: list[LiveGen] = []  # reserved, not started yet
        started: list[LiveGen] = []  # of this batch, started while it was still being reserved
        while not self._stopping() and self._slots.free_count and (task_id := self._ready.pop()) is not None:
            lg = self._reserve(self._tasks[task_id])
            in_pane = self._backend.shows(lg.gen.slot)
            try:
                # A headless one runs in a folded generation's directory where there is one
                # (records.shells; a Slurm run keeps none): never one a pane may write to.
                if in_pane or not self._shells.take(lg.gen):  # a shell comes with its artifacts/
                    rundir.make_private_dir(lg.gen.dir, exist_ok=False)  # and slot-<n>/ for its first generation
                    rundir.make_private_dir(lg.gen.artifacts)
            except OSError as e:  # a full or read-only state directory: this task fails, the run goes on
                self._log_reserved(lg)
                self._launched(lg, LaunchFailed("state_dir_error", f"cannot write {lg.gen.dir}: {e.strerror}"))
                continue
            self._log_reserved(lg)
            if self._worktrees.wanted(lg.task.spec) and not self._enter_worktree(lg):
                continue
            (shown if in_pane else headless).append(lg)
            if len(headless) == START_CHUNK and self._slots.free_count and self._ready.has_ready():
                chunk = self._written(headless)
                self._go(chunk)
                started += chunk
                headless = []
        self._start_generations(headless, started=started)
        if shown:
            for lg in shown:
                lg.move(GenPhase.OPENING)
            self._backend.pane_modes([lg.gen.slot for lg in shown], lambda modes: self._panes_decided(shown, modes))

    def _enter_worktree(self, lg: LiveGen) -> bool:
        """Give the generation its task's worktree: made on its first generation, the same
        one for a retry. One that cannot be made fails the generation (before it could be
        shown in a pane, so that it fails rather than fall back to headless)."""
        try:
            lg.task.worktree = self._worktrees.ready(lg.task.id, lg.task.spec, cwd=self._cwd,
                                                     tasks=self._tasks.specs)
        except WorktreeError as e:
            self._launched(lg, LaunchFailed("worktree_failed", f"cannot make the worktree of task {lg.task.name!r} "
                                                               f"({self._worktrees.path(lg.task.id)}): {e}"))
            return False
        return True

    def _panes_decided(self, batch: list[LiveGen], modes: list[PaneMode | None]) -> None:
        for lg, mode in zip(batch, modes, strict=True):
            lg.pane = mode
            lg.request = replace(lg.request, pane=mode is not None)
        self._start_generations(batch)

    def _start_generations(self, batch: list[LiveGen], started: list[LiveGen] | None = None) -> None:
        """Write each generation of ``batch`` and start them all: the batch's events, then
        ``_go``. ``started`` are the batch's members started already, while it was being
        reserved: ``batch_dispatch_started`` counts them in its ``size`` and follows the
        batch's last reservation. (The first batch, to every reader, is every reservation
        before the run's first such event — its pane generations', reserved in the same pass,
        too: ``metrics.DispatchStats``.)"""
        written = self._written(batch)
        members = [*(started or ()), *written]
        if not members:
            return
        is_batch = len(members) > 1 or self._stats.batch_count == 0
        if is_batch:
            self._events.emit("batch_dispatch_started", size=len(members))
        self._stats.batch(len(members))
        self._go(written)
        if is_batch:
            self._events.emit("batch_dispatch_completed", size=len(members))

    def _written(self, batch: list[LiveGen]) -> list[LiveGen]:
        """The generations of ``batch`` whose start could be written; each other one fails."""
        written = []
        for lg in batch:
            try:
                self._write_generation(lg)
                written.append(lg)
            except OSError as e:  # a full or read-only state directory: this task fails, the run goes on
                self._launched(lg, LaunchFailed("state_dir_error", f"cannot write {lg.gen.dir}: {e.strerror}"))
        return written

    def _go(self, written: list[LiveGen]) -> None:
        """Start written generations: headless ones through the launcher, pane ones through
        the backend's thread — once the log that names them is written, so that a supervisor
        killed after this leaves each started generation known to ``resume`` (a headless one
        has no file of its own naming its task)."""
        if not written:
            return
        for lg in written:
            self._events.emit("worker_launch_invoked", task=lg.task.name, slot=lg.gen.slot, gen=lg.gen.gen)
        self._events.flush()
        if self._executor is not None:
            for lg in written:
                self._executor.launched(lg)
        headless = [lg for lg in written if not lg.in_pane]
        for lg, result in zip(headless, self._headless.start([lg.request for lg in headless]), strict=True):
            self._launched(lg, result)
        in_panes = [lg for lg in written if lg.in_pane]  # OPENING since their pane modes were asked for
        if in_panes:
            for lg in in_panes:
                self._follow.watch(lg)  # a pane's wrapper may report before its launch does
            self._backend.launch([lg.request for lg in in_panes],
                                lambda results: self._panes_launched(in_panes, results))

    def _panes_launched(self, batch: list[LiveGen], results: list[PaneResult]) -> None:
        for lg, result in zip(batch, results, strict=True):
            self._launched(lg, result)

    def _reserve(self, task: TaskRecord) -> LiveGen:
        slot, gen_no = self._slots.reserve()
        gen = self._paths.gen(slot, gen_no)
        task.start_generation(slot, gen_no)
        lg = LiveGen(task, gen, LaunchRequest(gen, slot, task.name, attempt=task.attempts, attempts=task.retries + 1),
                     gen_no > 1)
        self._live[slot] = lg
        return lg

    def _log_reserved(self, lg: LiveGen) -> None:
        """Name the reservation in the log — once its directory is made (or could not be):
        the log's lines may reach the disk at any emit, and a generation the log names whose
        directory is missing had it removed after it was made: it ran (``resume._inspect``)."""
        task, slot, gen_no = lg.task, lg.gen.slot, lg.gen.gen
        reserved = self._events.emit("slot_reserved", task=task.name, slot=slot, gen=gen_no, attempt=task.attempts)
        self._stats.reserved(reserved["ts"], (slot, gen_no))
        if lg.backfill:
            self._stats.backfill_count += 1
            self._events.emit("backfill", task=task.name, slot=slot, gen=gen_no)

    def _write_generation(self, lg: LiveGen) -> None:
        """How the generation starts: headless, the run's wrapper with its arguments; in a
        pane, a wrapper of its own (raises OSError when the state dir is full)."""
        gen, task, spec = lg.gen, lg.task, lg.task.spec
        who = wrapper.WorkerIdentity(self._run_id, spec.name, task.id, gen.slot, gen.gen, task.attempts)
        cwd = spec.cwd or self._cwd
        if task.worktree is not None:
            cwd = task.worktree.workdir(cwd)
        if lg.pane is None:
            args = wrapper.arguments(gen, who, cmd=spec.cmd, argv=spec.argv, cwd=cwd, env=spec.env,
                                     unexportable_env=self._unexportable_env, headless=True)
            argv = wrapper.headless_argv(self._paths.worker_script, args)
        else:
            if self._executor is not None:
                lg.pane = replace(lg.pane, step_env=True)
            text = wrapper.render(gen, who, cmd=spec.cmd, argv=spec.argv, cwd=cwd, env=spec.env, pane=lg.pane,
                                  unexportable_env=self._unexportable_env)
            rundir.write_new(gen.wrapper, text, mode=0o700)
            argv = ("/bin/sh", str(gen.wrapper))
        prefix: tuple[str, ...] = ()
        if self._executor is not None:
            lg.remote = True
            prefix = self._executor.prefix(lg, pty=lg.pane is not None and self._live_panes)
            if lg.pane is not None:  # srun, run by the pane, with the caller's environment (envfile)
                prefix = (*envfile.exec_argv("step", lg.pane.saved_env), lg.pane.pane_var, *prefix)
        lg.request = replace(lg.request, argv=argv, prefix=prefix)
