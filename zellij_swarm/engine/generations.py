"""The generations in flight, from launch to recorded end: the generation tracker.

A generation is reserved and written by the dispatcher (``engine.dispatch``); from then on
it is followed here. Its launch is reported (``launched``: handed to the launcher, its pane
opened, or a fault that runs it headless); its wrapper's start is seen (``follow_child``, a
pane's launch ``heartbeat``, a Slurm step running); its time limits and idle watch are armed
(``arm_limits``); a kill asked for (``kill``) is carried out as soon as it can be and goes
through the one ladder (``engine.stopping``), which tells when its first signal reached the
worker (``delivered``); its end is noticed — by the launcher, a pidfd, its files, Slurm —
and read once (``collect``), classified (a missing record explained by our kill, the state
directory, the multiplexer or Slurm) and judged by the outcome rule (``engine.outcome``);
then it is let go, its slot freed or held while its tree goes, and its task handed to the
task policy (``engine.policy``) to run again or end. Each step moves the generation's state
machines (``engine.live``).

What happens when a worker exits 0 while a cancel is in flight: ``kill`` requested it;
``collect`` sees the end; if the ladder's signal is still on its way the reading waits for
its answer (``END_SEEN``); ``outcome`` then keeps ``succeeded`` unless that signal reached
the worker before it ended.

The tracker takes its collaborators in its constructor and knows nothing of the supervisor.
"""

from __future__ import annotations

import collections
import enum
import os
import signal
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from zellij_swarm.backends.base import LaunchFailed, LaunchResult, PaneExited, PaneOpened
from zellij_swarm.backends.offloop import OffLoopBackend
from zellij_swarm.config.settings import Resolved
from zellij_swarm.engine import metrics, remote, stopping
from zellij_swarm.engine.control import Control
from zellij_swarm.engine.follow import GenerationWatch
from zellij_swarm.engine.headless_workers import HeadlessWorkers
from zellij_swarm.engine.input_watch import InputWatch
from zellij_swarm.engine.live import GenPhase, KillState, LiveGen
from zellij_swarm.engine.outcome import ended_with_its_terminal, killed_status, outcome
from zellij_swarm.engine.policy import RunStop, TaskPolicy
from zellij_swarm.engine.remote import SlurmExecutor
from zellij_swarm.engine.room import ROOM_RECHECK
from zellij_swarm.engine.scheduler import ReadyQueue
from zellij_swarm.engine.slots import Slots
from zellij_swarm.engine.stopping import CANCELLED_BY_USER, Stopper
from zellij_swarm.engine.timers import Timers
from zellij_swarm.engine.watchdog import IdleWatchdog
from zellij_swarm.records import generation_files, rundir
from zellij_swarm.records.log import EventLog
from zellij_swarm.records.rundir import RunPaths
from zellij_swarm.records.states import REASON_STATUS, TaskStatus
from zellij_swarm.records.task import TaskRecord
from zellij_swarm.worker import procs, wrapper
from zellij_swarm.worker.slurm import Job

# Ends of a task's generation before anything of it ran — its pane's leader killed before its
# worker began (``_leader_killed``), its step's srun killed before the step began
# (``_classify_step``) — that run it again without using an attempt, for each cause; the next
# such end is a failure of its attempt: something that kills every new pane's first process, or
# every srun (a memory-starved machine's OOM killer), would otherwise run it again for ever.
FREE_RUNS = 3
TIMEOUT_RECHECK = 1.0  # seconds: how often a time limit looks again for a start that has not come (a queued step)

Warn = Callable[[str, str, TaskRecord | None], None]


def idle_message(silence: float, limit: float) -> str:
    """What an idle timeout's warning says (the run's, under ``idle_policy`` warn; the task's
    row only, under kill, where ``timed_out`` says the rest) — ``resume`` says it again from
    the ``idle_timeout`` event."""
    return f"no output and no heartbeat for {silence:.1f}s (idle_timeout {limit:g}s)"


class Generations:
    def __init__(self, *, settings: Resolved, paths: RunPaths, state_dir: Path, live: dict[int, LiveGen],
                 slots: Slots, ready: ReadyQueue, timers: Timers, clock: Callable[[], float],
                 wallclock: Callable[[], float], events: EventLog, follow: GenerationWatch,
                 backend: OffLoopBackend, executor: SlurmExecutor | None, stopper: Stopper,
                 headless: HeadlessWorkers, control: Control, stats: metrics.DispatchStats,
                 watchdog: IdleWatchdog, input_watch: InputWatch, policy: TaskPolicy, stop: RunStop, warn: Warn,
                 records_unwritable: Callable[[str, TaskRecord | None], None],
                 backend_unstartable: Callable[[str, str, str], None],
                 full_seen_at: Callable[[], float | None]) -> None:
        """``records_unwritable`` is told when a generation's files could not be written (the
        run holds dispatch until there is room), ``backend_unstartable`` when a backend that
        is required cannot start, and ``full_seen_at`` says when the state directory was last
        found full."""
        self.settings = settings
        self.paths = paths
        self.state_dir = state_dir
        self.live = live
        self.slots = slots
        self.ready = ready
        self.timers = timers
        self.clock = clock
        self.wallclock = wallclock
        self.events = events
        self.follow = follow
        self.backend = backend
        self.executor = executor
        self.stopper = stopper
        self.headless = headless
        self.control = control
        self.stats = stats
        self.watchdog = watchdog
        self.input_watch = input_watch
        self.policy = policy
        self.stop = stop
        self._warn = warn
        self._records_unwritable = records_unwritable
        self._backend_unstartable = backend_unstartable
        self._full_seen_at = full_seen_at
        self.ended: list[generation_files.GenPaths] = []  # this turn's, folded once their outcome is durable
        self._freed_at: dict[int, float] = {}  # slot -> when its worker's end was taken (monotonic)
        self._lost_said = False  # the session's loss has been told
        self._free_runs: collections.Counter[tuple[str, str]] = collections.Counter()  # (cause, task id) -> runs

    def launched(self, lg: LiveGen, result: LaunchResult) -> None:
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
            if self.stop.start_error is None:
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
        self.policy.finalise(lg.task, TaskStatus.CANCELLED, reason)

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
        lg.limits_from = self.wallclock() - elapsed
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
        if started is None and lg.limits_from is not None and not lg.remote and not lg.gen.dir.is_dir():
            # its worker removed its records: it started, and its limit counts from when this
            # supervisor saw it start — read as "not started yet", it was never ended
            started = lg.limits_from
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
        """The watchdog found a worker silent for longer than its idle_timeout. One that waits
        for input is not idle: an agent that asked a person something is silent until they
        answer, and ending it (``idle_policy`` kill) lost the conversation — its silence is
        counted anew from now, and the idle limit still ends one that stalls after its wait."""
        if lg.done:
            return
        limit = lg.task.idle_timeout
        assert limit is not None  # (watched only with one)
        if lg.task.waiting_input:
            self.events.emit("idle_while_waiting", task=lg.task.name, slot=lg.gen.slot, gen=lg.gen.gen,
                             silence_s=round(silence, 3))
            self.watchdog.register(lg.gen, limit, lambda again: self._on_idle(lg, again))
            return
        if not self.input_watch.looked_at(lg):
            # whether it waits is not known yet (a worker a resume adopted, silent for longer
            # than its limit, before the first look for input): its silence stands, and is
            # judged again at the watchdog's next tick
            self.watchdog.register(lg.gen, limit, lambda again: self._on_idle(lg, again),
                                   since=self.wallclock() - silence)
            return
        message = idle_message(silence, limit)
        self.events.emit("idle_timeout", task=lg.task.name, slot=lg.gen.slot, gen=lg.gen.gen,
                         silence_s=round(silence, 3), policy=self.settings.idle_policy)
        if self.settings.idle_policy == "warn":
            self._warn("idle_timeout", message, lg.task)
        else:
            lg.idle_message = message
            self.kill(lg, "idle_timeout")

    def waiting_changed(self, lg: LiveGen, waiting: bool | None) -> None:
        """A worker started or stopped waiting for input (None: it cannot be known)."""
        lg.task.waiting_input = waiting
        self.events.emit("worker_waiting_input", task=lg.task.name, slot=lg.gen.slot, gen=lg.gen.gen,
                         waiting=waiting)
        if waiting is not None:  # one without a pane is counted in the run's window too
            self.backend.waiting(lg.request, lg.pane_id if lg.in_pane else None, waiting)

    def follow_child(self, lg: LiveGen, pid: int) -> None:
        lg.pid = lg.task.pid = pid
        lg.started()
        self.events.emit("worker_process_spawned", task=lg.task.name, slot=lg.gen.slot, gen=lg.gen.gen, pid=pid)
        if lg.remote:  # its exit sidecar may come before srun lets go of the step: its files are polled too
            lg.heartbeat_seen = True  # the pid to follow is srun's, here; the heartbeat's is on the node
            self.follow.watch(lg)
        self._running(lg)
        self.kill_pending(lg)  # cancelled while it was waiting to start: end it now

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

    def step_running(self, lg: LiveGen) -> None:
        """Slurm runs a generation's step: a pane's launch heartbeat is due from now on."""
        if lg.in_pane and not lg.heartbeat_seen and not lg.opening and not lg.collected:
            self._arm_heartbeat_deadline(lg)

    def step_seen(self, lg: LiveGen, job: Job) -> None:
        """A generation's step as squeue lists it: its task's row shows it (a queued one with
        Slurm's reason); a change of state is an event, so the snapshot follows it."""
        step = {"job": job.id, "state": job.state, "reason": None if job.reason == "None" else job.reason}
        if job.running:
            lg.read_step()
        step.update(remote.SlurmExecutor.where(lg))
        if lg.task.slurm != step:
            lg.task.slurm = step
            self.events.emit("step_state", task=lg.task.name, slot=lg.gen.slot, gen=lg.gen.gen, **step)

    def queued_too_long(self, lg: LiveGen) -> None:
        """A step waited in Slurm's queue longer than ``--slurm-max-queue``: withdrawn, its
        task ``cancelled (queued_too_long)``."""
        limit = self.settings.slurm_max_queue or 0.0
        self._warn("queued_too_long", f"slurm: the step of task {lg.task.name!r} waited in the queue for more than "
                                      f"{limit:g}s (--slurm-max-queue); withdrawn", lg.task)
        self.kill(lg, "queued_too_long")

    def step_gone(self, lg: LiveGen) -> None:
        """Slurm let a generation's step go and its sidecar had its grace: collect it."""
        self.follow.changed(lg)
        self.collect(lg)

    def _pane_opened(self, lg: LiveGen, pane_id: str | None) -> None:
        lg.pane_id = lg.task.pane_id = pane_id or lg.pane_id  # before 0.44 only the heartbeat says
        self.events.emit("pane_opened", task=lg.task.name, slot=lg.gen.slot, gen=lg.gen.gen, pane_id=lg.pane_id)

    def heartbeat(self, lg: LiveGen, hb: dict[str, Any]) -> None:
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
        claim is taken, and whether the multiplexer still lists the pane decides what it was
        (``_unreported``): closed before it ran, or a pane fault (``_pane_fault``)."""
        if lg.collected or lg.heartbeat_seen or not lg.in_pane:
            return
        try:
            taken = procs.claim_for_supervisor(lg.gen)
        except OSError as e:
            if self._collected_if_removed(lg):
                return
            if not generation_files.claimed_by_wrapper(lg.gen):
                # no room for our claim: the pane's fate is decided once there is
                self._records_unwritable(f"cannot write the claim of {lg.gen.dir}: {e.strerror}", lg.task)
                lg.deadlines.append(self.timers.after(ROOM_RECHECK, lambda: self._heartbeat_deadline(lg)))
                return
            # The pane claimed it, and wrote no start (a full disk): ours, a draft first, needed
            # room it did not — re-armed while the disk stayed full, the claimant's end was never
            # looked for, and the run never ended (an adversary: tmux, 3 in 3)
            taken = False
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
        # The claim is ours: nothing starts in that pane any more. Whether it is still there
        # says what became of it (``_unreported``).
        self.backend.pane_listed(lg.pane_id, lambda listed: self._unreported(lg, listed))

    def _unreported(self, lg: LiveGen, listed: bool | None) -> None:
        """A pane generation whose launch heartbeat never came, its claim taken by the
        supervisor, once the multiplexer has said whether it still lists the pane. Gone, it was
        closed before its first stage could claim it (by hand, as it opened: its shell died of
        the hang-up before it armed itself), or its session went: nothing ran — ended as a pane
        closed at the start gate is (``collect``: ``pane_closed``, or ``multiplexer_lost``).
        Run headless instead, the user's cancel was not the task's end: it ran in full
        (*Decision*, SPEC §2). Listed, or nobody can say: a pane fault (``_pane_fault``)."""
        if lg.collected:
            return
        if listed is False:
            self.collect(lg)
            return
        t = self.settings.heartbeat_timeout
        self.events.emit("heartbeat_missing", task=lg.task.name, slot=lg.gen.slot, gen=lg.gen.gen, pane_id=lg.pane_id)
        self.backend.abandon(lg.pane_id, lg.request)
        self._pane_fault(lg, "heartbeat_missing", f"pane {lg.pane_id} sent no launch heartbeat within {t:g}s",
                         claimed=True)

    def _collected_if_removed(self, lg: LiveGen) -> bool:
        """A pane generation whose claim could not be taken at its heartbeat deadline because
        its directory is gone: made at its reservation, only its worker removes it — it ran.
        Collected (its end is ``_unrecorded``'s to name, or a kill's that reached it); False
        while the directory is there."""
        if lg.gen.dir.is_dir():
            return False
        self.collect(lg)
        return True

    def _pane_fault(self, lg: LiveGen, code: str, message: str, *, claimed: bool) -> None:
        """A multiplexer fault for one generation: a warning and the generation runs headless,
        or, under require, the task fails with the fault as its reason — or, a kill asked for
        meanwhile, it ends killed, never started."""
        self.follow.unwatch(lg)
        if not claimed and not generation_files.take_claim(lg.gen):
            self._follow_pane(lg, None)  # the pane exists after all and already claimed it
            return
        lg.request = replace(lg.request, claimed=True)
        if lg.kill_reason is not None:
            # Stopped while its pane was asked for (a Ctrl-C while the multiplexer gave no
            # answer): it never ran, and it is not started headless now to be ended at once.
            self._record_kill_reason(lg, lg.kill_reason)
            self._end_generation(lg, None, killed_status(lg.kill_reason), lg.kill_reason)
            return
        if self.settings.require_multiplexer:
            self._end_generation(lg, None, TaskStatus.FAILED, f"{self.backend.name}_{code}")
            return
        self._warn(code, message, lg.task)
        [result] = self.headless.start([lg.request])
        self.launched(lg, result)

    def collect(self, lg: LiveGen, wait_status: int | None = None) -> None:
        """Read how a generation's wrapper ended (once, whoever notices first). A pane's
        wrapper gone without an exit record, or hung up, ended with its pane or with the
        whole session: the backend's thread asks the multiplexer which, and the outcome
        waits for the answer."""
        if lg.collected:
            return
        if wait_status is None and lg.child and not lg.remote and lg.wait_status is None \
                and lg.phase is not GenPhase.ORPHANED and generation_files.read_sidecar(lg.gen) is None:
            # A headless wrapper gone without its sidecar (a full disk refused it, or it was
            # killed), its end seen first by its pidfd, which a stopping run watches as well:
            # its launcher, which reaps it and still answers, tells its wait status in a
            # moment (``ended``) — the outcome SPEC §5.8 takes, never ``unknown`` for want of
            # waiting. A launcher lost meanwhile hands it back to its pidfd, no longer its child.
            return
        if lg.phase is GenPhase.ORPHANED and not lg.worker_over:
            if generation_files.read_sidecar(lg.gen) is not None:
                # its end, which the launcher that started its wrapper wrote with no supervisor
                # to tell (``_launcher.record_end``) — what it left (a daemon) may run on, and
                # kept a resumed run waiting for it
                lg.worker_over = True
            elif not self._worker_gone(lg):
                return  # its worker runs on: its end comes (``worker_ended``, or a pidfd's: ``_worker_gone``)
        if lg.signalling:  # a signal of its ladder is on its way: whether it reached the worker decides
            lg.move(GenPhase.END_SEEN)
            if wait_status is not None:  # (the launcher's, told first: a pidfd's later news has none)
                lg.wait_status = wait_status
            return
        if not lg.outlived_its_wrapper and (worker := self._left_running(lg, wait_status)) is not None:
            # followed to its end whatever became of a pane's session since: its leader was dead
            # before the session could take anything from it (no hang-up mark), as a live
            # supervisor that followed it before the session went keeps following it
            self._await_worker(lg, wait_status, worker)
            return
        if lg.remote and wait_status is not None:
            lg.wait_status = wait_status  # its srun's end, for ``explain`` once its sidecar had its wait
        if self.executor is not None and lg.remote and not lg.gone_seen and \
                generation_files.read_sidecar(lg.gen) is None:
            # A step's srun that exits — it waited for its step's task — lets its sidecar,
            # written on the node, show late: re-read first. One that died of a signal here
            # (``kill -9`` of it and its helper) says nothing of its step, which may run on to
            # its end: it is followed as before, until its record comes or Slurm no longer
            # lists it (``SlurmExecutor._seen``) — taken for lost at once, it ran again beside
            # itself (*Decision*, SPEC §11)
            if not self.executor.srun_killed(lg):
                self.executor.left_queue(lg)
            return
        lg.move(GenPhase.COLLECTED)
        self.follow.unwatch(lg)
        if not lg.child and (sent := generation_files.kill_sent_at(lg.gen)) is not None and (
                lg.kill_sent_at is None or sent < lg.kill_sent_at):
            # A `cancel` of the run while no supervisor held it ended the worker of a
            # generation this one adopts (``control``: its reason, then the moment its signal
            # reached the worker, in the kill file) — also while a resume was starting, whose
            # own kill, asked by the same cancel, came later or reached nothing: the first
            # signal is what the outcome rule weighs.
            lg.kill_reason = lg.kill_reason or generation_files.kill_reason(lg.gen)
            lg.kill_sent_at, lg.kill_caught = sent, generation_files.kill_caught(lg.gen)
        if lg.remote:
            lg.read_step()
        rec = generation_files.exit_facts(lg.gen, pid=lg.pid if lg.child and not lg.remote else None,
                                          relayed=not (lg.child and lg.pane is None))  # headless from the start
        if rec is None and lg.in_pane and (lg.outlived_its_wrapper or _leader_and_wrapper_killed(lg)):
            # the worker its pane's killed leader and wrapper left — followed to its end, or
            # ended before anyone looked — as its pty relay reaped it (a Zellij pane's): its
            # own end, which no wrapper recorded; none (tmux, a relay killed too): ``_classify``
            rec = generation_files.relayed_exit(lg.gen)
        if lg.forgotten and rec is None and lg.kill_reason is None:
            # Slurm forgot its step while it was queued, and it was withdrawn (its claim is
            # ours; in a pane, its srun's end closed it): nothing of it ran, and the task waits
            # for a slot again, its attempt not spent
            self._requeue_unstarted(lg, reason="executor_forgot")
            return
        # its pane, or session, went away (a step whose wrapper never started is the executor's
        # failure — unless its pane closed before the step began, or while it waited in Slurm's queue)
        hung_up = rec is None or ended_with_its_terminal(lg, rec)
        pane_gone = lg.in_pane and hung_up and not (
            lg.remote and generation_files.claim_or_planted(lg.gen) is None and not _pane_closed(lg))
        if pane_gone and rec is None and lg.remote and self.executor is not None and lg.kill_reason is None \
                and not generation_files.hung_up(lg.gen):
            # A step in a pane that began, with no record and no hang-up its pane's leader
            # marked: its pane did not close — Slurm ended it (an orphan's kill once a restarted
            # controller forgot its job, a node lost), as for a headless step — unless the
            # whole session went with it
            self.backend.session_alive(lambda alive: self._step_or_session_end(lg, alive))
            return
        if self.executor is not None and lg.remote and lg.kill_reason is None and (rec is None or rec.signal) \
                and not pane_gone:
            # an end the wrapper did not explain: Slurm's job state does (its time limit, a
            # cancel from outside, a node lost) — or its srun's own death here
            self.executor.explain(lg, lambda verdict: self._classify_step(lg, rec, verdict),
                                  recorded_signal=rec is not None)
            return
        if rec is None and lg.worker_status is not None:  # the worker's own end, as the launcher reaped it
            self._end_by_wait_status(lg, lg.worker_status, session_alive=True)
            return
        sig = None
        if wait_status is not None and os.WIFSIGNALED(wait_status):
            sig = signal.Signals(os.WTERMSIG(wait_status)).name
        # A pane's worker dead of SIGHUP with no mark of its leader's (yet): the multiplexer may
        # have signalled it before it closed the terminal (a killed tmux server does): ask it too
        # — unless its leader is gone with no mark: no hang-up reached it while its worker ran.
        unmarked_hangup = lg.in_pane and rec is not None and rec.signal == "SIGHUP" and not pane_gone \
            and not _leader_gone_unmarked(lg)
        # not our kill's doing — or our kill is the session's loss, sent after it (a worker that
        # ended by the hang-up before it is lost with its session, not closed with its pane)
        if pane_gone and rec is None and lg.kill_sent_at is None and _unstarted_in_its_pane(lg):
            # closed as it opened, or its leader killed before its worker began: the multiplexer
            # says which — a pane it still lists, its first process ended, was not closed
            self.backend.session_and_pane(lg.pane_id, lambda alive, exited: self._classify(
                lg, rec, sig, session_alive=alive, pane_exited=exited))
        elif (pane_gone or unmarked_hangup) and (lg.kill_sent_at is None or lg.kill_reason == "multiplexer_lost"):
            self.backend.session_alive(lambda alive: self._classify(lg, rec, sig, session_alive=alive))
        else:
            self._classify(lg, rec, sig, session_alive=True, wait_status=wait_status)

    def _left_running(self, lg: LiveGen, wait_status: int | None) -> int | None:
        """What of a local generation runs on after its wrapper was killed from outside
        (``kill -9``, the OOM killer) before it recorded its worker's end: the pid to follow.
        Such a worker may finish its work yet: it is not ended, and its end is the
        generation's (SPEC §5.7). None when nothing of it runs on, or its end is known
        otherwise: its record was written, a signal of ours reached it first (the kill's), or
        it never began.

        Headless: the wrapper's wait status is a death by a signal, or a resume or a lost
        launcher found it gone (no status). Its launcher named the worker (``worker_pid``) and
        tells its exact end; where none tells it — none left, or none named one (a worker that
        left its wrapper's process group: ``setsid``) — a process that carries the
        generation's markers is followed to its end, which nobody sees.

        In a pane: its leader, the worker's subreaper, is gone too, and the worker ignored the
        hang-up that followed. Not a pane that was closed: a leader marks its terminal's
        hang-up before anything else, so a close it lived to see left its mark
        (``pane_closed``, as before); with no mark it was dead before its pane could be closed
        — a close now hangs up nothing that had not hung up as its leader died."""
        if lg.remote or lg.pid is None:
            return None
        if not lg.in_pane and wait_status is not None and not os.WIFSIGNALED(wait_status):
            return None  # (said before any look at its files: what nearly every headless end is)
        if generation_files.ended_at(lg.gen) is not None:
            return None
        if lg.in_pane:
            if lg.phase not in (GenPhase.STARTED, GenPhase.END_SEEN) or not _leader_and_wrapper_killed(lg):
                return None
        else:
            if lg.worker_pid is None and lg.kill_sent_at is not None:
                return None
            if not (generation_files.claimed_by_wrapper(lg.gen) or _began(lg.gen)):  # (its claim removed since)
                return None
            if lg.worker_pid is not None:
                return lg.worker_pid
        left = stopping.leftovers(self.paths.run_id, lg.gen)
        return left[0].pid if left else None

    def _await_worker(self, lg: LiveGen, wait_status: int | None, worker: int) -> None:
        """ORPHANED, once: its end, seen, is read as the worker's (``outlived_its_wrapper``)."""
        lg.move(GenPhase.ORPHANED)
        lg.wait_status = wait_status
        how = f"was killed by {signal.Signals(os.WTERMSIG(wait_status)).name}" if wait_status is not None else "is gone"
        then = ("its worker's own end, as its launcher saw it, is the task's" if lg.worker_pid is not None else
                "its worker runs on, and is followed to its end: its pty relay's record of it (Zellij) is the "
                "task's, else nobody sees it"
                if lg.in_pane else "its worker runs on, and is followed to its end, which nobody sees")
        who = f"is gone with its pane's leader (pid {lg.pid})" if lg.in_pane else f"(pid {lg.pid}) {how}"
        self._warn("wrapper_lost", f"the wrapper of task {lg.task.name!r} {who} before it recorded "
                                   f"its worker's end: {then}", lg.task)
        if lg.worker_pid is None:
            self.follow.follow_pid(lg, worker)

    def worker_ended(self, lg: LiveGen, wait_status: int) -> None:
        """The worker of a killed wrapper (``_left_running``) ended so, as its
        launcher reaped it."""
        lg.worker_status = wait_status
        lg.worker_over = True
        self.collect(lg, lg.wait_status)

    def worker_unreported(self, lg: LiveGen) -> None:
        """The launcher that would tell how a killed wrapper's worker ends is gone (or may be
        stuck, at the run's end): what is left of the generation is followed as well."""
        if lg.phase is GenPhase.ORPHANED and not lg.worker_over:
            lg.worker_pid = None
            if self._worker_gone(lg):
                self.collect(lg, lg.wait_status)

    def _worker_gone(self, lg: LiveGen) -> bool:
        """Whether the worker of an ORPHANED generation has ended, where no launcher tells its
        end (``worker_pid`` None): nothing carries the generation's markers any more — its
        markers, not its wrapper's process group: a resume cannot tell when the wrapper died,
        and a group with its id may be another's by then (a test run beside others found
        one, and waited on it). While something does, one of those processes is followed by
        its pidfd, and the look is made again when it ends (``GenerationWatch.follow_pid``,
        which collects): no polling."""
        if lg.worker_pid is not None:
            return False
        left = stopping.leftovers(self.paths.run_id, lg.gen)
        if left:
            self.follow.follow_pid(lg, left[0].pid)
            return False
        lg.worker_over = True
        return True

    def _classify(self, lg: LiveGen, rec: generation_files.ExitRecord | None, sig: str | None, *,
                  session_alive: bool, missing: str = "no_exit_record", wait_status: int | None = None,
                  pane_exited: PaneExited | None = None) -> None:
        """A generation's end from its exit record; without one, the reason is ours (a kill),
        the state directory's, the lost session's, or ``missing`` (what else is known).
        ``pane_exited``: its pane is still listed, its first process ended (asked only of a
        pane generation that never began, ``_unstarted_in_its_pane``)."""
        if rec is None:
            # The wrapper is gone without committing its exit: killed by us (our kill reached
            # it, or it never ran), or by someone else, or it could not write.
            claim = generation_files.claim_or_planted(lg.gen)
            # A headless wrapper that ended by itself, its claim its own or never written: it
            # could not write its claim, or ran to its end and could not write its sidecar.
            exited = lg.child and wait_status is not None and os.WIFEXITED(wait_status) and (
                claim is None or claim.unwritten or claim.pid == lg.pid or (claim.by_supervisor and lg.request.claimed))
            unrecorded = _unrecorded(lg, claim, os.WEXITSTATUS(wait_status or 0) if exited else None)
            ran = unrecorded is Unrecorded.RECORDS_REMOVED or (claim is not None and not claim.by_supervisor)
            # a wrapper that ran and exited by itself gave its worker's status to the launcher:
            # the outcome rule weighs that status against the kill, as it would its sidecar's
            # (a worker that ignored the TERM and exited 0 ended on its own)
            known = exited and unrecorded in (Unrecorded.UNWRITTEN, Unrecorded.RECORDS_REMOVED)
            if lg.kill_reason and (lg.kill_sent_at is not None or not ran) and not known:
                reason = lg.kill_reason
                if unrecorded is Unrecorded.RECORDS_REMOVED:
                    self._warn("records_removed", f"the records of task {lg.task.name!r} ({lg.gen.dir}) were removed "
                                                  f"while it ran, before its kill ({reason}) ended it", lg.task)
            elif unrecorded is Unrecorded.NEVER_BEGAN:
                self._warn("records_removed", f"the wrapper of task {lg.task.name!r} ended (status "
                                              f"{os.WEXITSTATUS(wait_status or 0)}) before it claimed its generation "
                                              f"({lg.gen.dir}): nothing ran", lg.task)
                reason = "no_exit_record"
            elif unrecorded is Unrecorded.RECORDS_REMOVED:
                said = "its outcome is its exit status" if exited else "how it ended is not known"
                self._warn("records_removed", f"the records of task {lg.task.name!r} ({lg.gen.dir}) were removed "
                                              f"while it ran: {said}", lg.task)
                if not exited:  # a pane's, a step's: nobody saw its status; it is not run again
                    reason = "records_removed"
                else:
                    self._end_by_wait_status(lg, wait_status or 0, session_alive=session_alive)
                    return
            elif exited or rundir.unwritable(self.paths.dir) or self._full_while_it_ran(lg) \
                    or generation_files.heartbeat_says_exited(lg.gen):  # (its sidecar refused, then room again)
                self._records_unwritable(f"the state directory {self.state_dir} is full or cannot be written: the "
                                         f"wrapper of task {lg.task.name!r} could not record its start or its exit",
                                         lg.task)
                if unrecorded is Unrecorded.NOTHING_RAN or (not exited and (claim is None or claim.unwritten)):
                    self._requeue_unstarted(lg)  # nothing ran
                    return
                if exited:
                    self._end_by_wait_status(lg, wait_status or 0, session_alive=session_alive)
                    return
                reason = "state_dir_error"  # it ran, and how it ended is known to nobody: ``unknown``
            elif lg.outlived_its_wrapper or (not lg.in_pane and not lg.remote and _began(lg.gen)) or \
                    _leader_and_wrapper_killed(lg):
                # its worker ran on to an end nobody saw — or began, and its wrapper was killed
                # (``kill -9``; found gone by a resume) with nothing of it left: it ended with its
                # wrapper, or before it, or after it with no launcher left to see it; it may
                # have finished, and pushed (*Decision*, SPEC §5.7). (A Zellij pane's relay
                # that saw the worker's end gave it to ``collect``.) Whatever became of a pane's
                # session since: its killed leader had hung up its terminal already, with no
                # mark — a session lost while the leader lived leaves one — so the session's end
                # took nothing from it (*Decision*: it was ``lost``, and a worker that had
                # finished before the session was killed ran again).
                reason = "wrapper_lost"
            elif not session_alive:
                reason = "multiplexer_lost"
            elif pane_exited is not None and _unstarted_in_its_pane(lg):
                self._leader_killed(lg, pane_exited)
                return
            elif _pane_closed(lg) and (claim is not None or not lg.remote or generation_files.take_claim(lg.gen)):
                # (a step that never started is claimed here: one Slurm would start late runs nothing)
                reason = "pane_closed"
            else:
                reason = missing
            rec = generation_files.record_missing_exit(lg.gen, reason=reason, code=None, signal=sig,
                                                       ended_at=self.wallclock())
        self._end_generation(lg, rec, *outcome(lg, rec, session_alive=session_alive))

    def _leader_killed(self, lg: LiveGen, exited: PaneExited) -> None:
        """A pane generation with no exit record, no start and no hang-up mark, whose pane its
        multiplexer still lists with its first process ended: nobody closed it — its leader
        (or the first stage that becomes it) was killed before its worker began (``kill -9``,
        the OOM killer). Nothing ran, and nothing of it can start the worker any more: its
        start would come before it (``_began`` is read after the multiplexer's answer, so
        after the leader's end), and the second stage starts no worker once its terminal
        has hung up (tmux closes a dead pane's) or its leader is gone (``wrapper``'s guard).
        Its pane is closed and its task waits for a slot again, its attempt not spent — up to
        ``FREE_RUNS`` times; after that, such an end is the attempt's
        failure, with how the leader ended, as a leader killed later is (SPEC §2)."""
        kills = self._free_run(lg, "pane_leader_killed")
        said = (f"the pane {lg.pane_id} of task {lg.task.name!r} was not closed, but its first process "
                f"{exited.says()} before its worker started: nothing ran; ")
        if kills > FREE_RUNS:
            self._warn("pane_leader_killed", said + f"its panes' first processes were killed {kills} times: "
                                                    "this attempt counts as failed", lg.task)
            rec = generation_files.record_missing_exit(lg.gen, reason=None, code=exited.code,
                                                       signal=generation_files.signal_name(exited.code),
                                                       ended_at=self.wallclock())
            self._end_generation(lg, rec, TaskStatus.FAILED, None)
            return
        self._warn("pane_leader_killed", said + "it runs again, without using an attempt", lg.task)
        self.backend.abandon(lg.pane_id, lg.request)
        self._requeue_unstarted(lg, reason="pane_leader_killed")

    def _free_run(self, lg: LiveGen, cause: str) -> int:
        """One more end of ``lg``'s task before anything of it ran, for ``cause``: how many so
        far (``FREE_RUNS`` of them run it again without using an attempt)."""
        self._free_runs[(cause, lg.task.id)] += 1
        return self._free_runs[(cause, lg.task.id)]

    def _end_by_wait_status(self, lg: LiveGen, wait_status: int, *, session_alive: bool) -> None:
        """End a generation whose wrapper exited without its exit record as the launcher saw
        it exit — a wrapper exits with its worker's status — or whose worker the launcher
        reaped after its wrapper was killed (a death by a signal is its code, as a shell says
        it)."""
        code = os.WEXITSTATUS(wait_status) if os.WIFEXITED(wait_status) else 128 + os.WTERMSIG(wait_status)
        rec = generation_files.record_missing_exit(lg.gen, reason=None, code=code,
                                                   signal=generation_files.signal_name(code), ended_at=self.wallclock())
        self._end_generation(lg, rec, *outcome(lg, rec, session_alive=session_alive))

    def _step_or_session_end(self, lg: LiveGen, session_alive: bool) -> None:
        """``collect``'s end of a pane's step with no record and no hang-up mark: the session's
        loss when it is gone, else Slurm's job state says (``executor.explain``)."""
        if not session_alive or self.executor is None:
            self._classify(lg, None, None, session_alive=session_alive)
            return
        self.executor.explain(lg, lambda verdict: self._classify_step(lg, None, verdict), recorded_signal=False)

    def _classify_step(self, lg: LiveGen, rec: generation_files.ExitRecord | None, verdict: str | None) -> None:
        """A step's end the wrapper did not record, or recorded as a death by signal, as
        Slurm's job state explains it (``slurm.classify``; None: the record stands)."""
        if verdict is None:
            self._classify(lg, rec, None, session_alive=True)  # a worker killed by a signal of its own
            return
        reason = verdict
        if rec is None and REASON_STATUS[reason] == TaskStatus.LOST and \
                generation_files.claim_or_planted(lg.gen) is None:
            # its wrapper never started: srun refused the step, could not reach Slurm, or was
            # killed before its step began (from outside, or with a supervisor, as the run's
            # process group: it said nothing, and its job, granted later, holds no step). Not
            # a pane's srun: one that ends silently there went with its pane (``_classify``:
            # closed as it opened, or its leader killed), and ran again it ran what was cancelled
            silent = not lg.in_pane and not remote.srun_said(lg.gen, 4096).strip()
            if lg.kill_reason is None and (lg.allocation_ended or lg.id_issued_again
                                           or remote.controller_unreachable(lg.gen)
                                           or (silent and self._free_run(lg, "srun_lost") <= FREE_RUNS)) and \
                    generation_files.take_claim(lg.gen):
                # Nothing ran (its claim is ours now: a step Slurm starts late runs nothing),
                # and the same request works once the controller answers again (a restart, a
                # moment's outage), or in the allocation asked for anew, or with a job id of its
                # own: the task waits for a slot again, its attempt not spent.
                if lg.allocation_ended:
                    self._requeue_unstarted(lg, reason="allocation_lost")
                    return
                if lg.id_issued_again:  # Slurm ended its job, before its wrapper began, for a forgotten one
                    self._requeue_unstarted(lg, reason="executor_forgot")
                    return
                if silent:
                    self._warn("executor_failed", f"slurm: the srun of task {lg.task.name!r} ended before its step "
                                                  "began, and said nothing (killed): nothing of it ran; it runs again",
                               lg.task)
                    self._requeue_unstarted(lg, reason="srun_lost")
                    return
                self._warn("executor_failed", f"slurm: the step of task {lg.task.name!r} could not reach Slurm's "
                                              f"controller{remote.srun_error(lg.gen)}; it runs again", lg.task)
                self._requeue_unstarted(lg, reason="executor_unreachable")
                return
            reason = "executor_failed"
            self._warn("executor_failed", f"slurm: the step of task {lg.task.name!r} never started its wrapper"
                                          + remote.srun_error(lg.gen), lg.task)
        if reason == "job_forgotten" and rec is not None:
            self._warn(reason, f"slurm: the step of task {lg.task.name!r} ended (status {rec.code}) while Slurm's "
                               "controller was down, and the controller came back without its job: whether Slurm or "
                               "the worker ended it, nothing says; not run again (retry --unknown runs it)", lg.task)
        if reason == "node_failed":
            lg.read_step()
            self._warn(reason, f"slurm: the node{' ' + lg.node if lg.node else ''} of task {lg.task.name!r} failed "
                               "while it ran (Slurm lost its slurmd), and nothing says its worker ended: it may still "
                               "run there; not run again (retry --unknown runs it)", lg.task)
        if reason == "wrapper_lost":
            lg.read_step()
            self._warn(reason, f"slurm: the wrapper of task {lg.task.name!r} was killed"
                               f"{' on ' + lg.node if lg.node else ''} by a signal neither the run nor Slurm sent, "
                               "before it recorded its worker's end: its worker may run on where Slurm does not see "
                               "it; not run again (retry --unknown runs it)", lg.task)
        if rec is None:
            self._classify(lg, None, None, session_alive=True, missing=reason)
        else:
            self._end_generation(lg, rec, REASON_STATUS[reason], reason)

    def _end_generation(self, lg: LiveGen, rec: generation_files.ExitRecord | None, status: TaskStatus,
                        reason: str | None) -> None:
        task, slot = lg.task, lg.gen.slot
        cancelled = lg.kill_reason == CANCELLED_BY_USER
        self.stop.generation_ended(lg, status, rec)
        self._let_go(lg)
        self._freed_at[slot] = self.clock()
        if lg.remote:  # what stays of its step in the row: where it ran, how long it queued
            task.slurm = remote.SlurmExecutor.where(lg, ended_at=self.wallclock()) or None
            if self.executor is not None:
                self.executor.step_over(lg.gen, (task.slurm or {}).get("job"), self.wallclock())
        if (reason in ("multiplexer_lost", "pane_closed") or (rec is not None and not
                                                             generation_files.committed_by_wrapper(rec))
                or (not lg.remote and self.policy.runs_again(task, status, reason, cancelled=cancelled)
                    and self.stopper.may_have_left(lg))) and not lg.step_left_job:
            # Its terminal or its wrapper is gone, but the worker may not be (a program that
            # never writes does not notice; a killed wrapper leaves its child running): end
            # what is left of it before anything runs again. So too when the task runs again
            # after a failure its wrapper recorded: a child of it that ignores the hang-up or
            # the signal that ended its shell runs on (a Slurm step's end is Slurm's to clean).
            # Not a step Slurm no longer lists, whose srun is gone: nothing of it is left.
            self.stopper.end_tree(lg)
        tree_left = self.stopper.hold_slot(lg)
        if not tree_left:
            self.slots.free(slot)
        attempt = task.end_generation(status, rec, reason, backfill=lg.backfill, ended_at=self.wallclock(),
                                      slurm=task.slurm if lg.remote else None)
        if lg.idle_message:
            task.warn({"code": "idle_timeout", "message": lg.idle_message, "task": task.name})
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
        if lg.remote and self.executor is not None and lg.step_left_job:
            self.executor.step_ended(lg.gen, emptied=True)  # its job, empty, nothing of it will end: cancelled
        if rec is not None and generation_files.committed_by_wrapper(rec):
            if lg.remote and self.executor is not None and not lg.step_left_job:
                self.executor.step_ended(lg.gen)  # nothing of it is left: a job that stays is cancelled
            if not lg.request.pane:
                # Folded once its outcome is durable — never one that was ever handed to a pane,
                # also when it ran headless after all: a pane that comes up late must find its
                # claim taken and run nothing (a generation runs at most once).
                self.ended.append(lg.gen)
        if task.last_end_is_free:
            task.attempts -= 1
        if reason == "multiplexer_lost":
            if not self._lost_said and self.backend.name != "headless":  # (a resume found it gone: said then)
                self._lost_said = True
                self._warn("multiplexer_lost", f"the run's {self.backend.name} session is gone: the tasks that ran in "
                                               "its panes run again headless, without using an attempt, and so "
                                               "does the rest of the run", None)
            # The session is gone for every pane: a worker that ignores the hang-up would run
            # on unseen, holding its slot. All of them go through the ladder and re-run headless.
            for other in [o for o in self.live.values() if o.in_pane]:
                self.kill(other, "multiplexer_lost")
        self.policy.generation_ended(task, status, reason, lg.gen, tree_left=tree_left, cancelled=cancelled)
        if lg.kill_reason is not None:
            self.control.kill_ended(task, status, reason, signalled=lg.kill_sent_at is not None)

    def kill(self, lg: LiveGen, reason: str) -> None:
        """End a generation on purpose (``reason``: timeout, cancel, halt…). Not started yet:
        it is ended the moment it starts. In a pane that never started its wrapper: the
        claim is taken and the pane closed, nothing runs. Otherwise: the one ladder
        (``stopping``). A cancel of the task asked while another kill is under way — a
        restart's, a timeout's, which would run it again — takes that one's place: the ladder
        goes on as it was, and what it ends is the cancel's. A stop of the whole run (a halt,
        a signal, a cancel of the run) runs nothing again anyway: the kill under way keeps
        its reason, which is what happened."""
        if lg.collected:
            return
        if lg.kill is not KillState.NONE:
            if reason == CANCELLED_BY_USER and lg.kill_reason != reason and not self.stop.stopping:
                lg.kill_reason = reason
                self._record_kill_reason(lg, reason)
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
        self._record_kill_reason(lg, reason)
        taken = False
        if lg.in_pane and not lg.heartbeat_seen:
            try:
                taken = lg.withheld or generation_files.take_claim(lg.gen)
            except OSError:
                # No room for it, or its directory gone — removed by its worker, which runs or
                # ran: the pane's wrapper is ended as one that runs, and whether the kill
                # reached anything of it says whose end it was (the heartbeat deadline
                # collects it, ``_collected_if_removed``).
                pass
        if taken:
            self.follow.unwatch(lg)
            self.backend.abandon(lg.pane_id, lg.request)
            if lg.remote:
                self.stopper.end_tree(lg)  # its step may be queued or starting: Slurm lets it go
            self._end_generation(lg, None, killed_status(reason), reason)
            return
        if lg.pid is None and not lg.in_pane and not lg.remote:
            return  # handed to the launcher, not started yet: ended the moment it starts
        # (a Slurm step adopted by ``resume`` has no pid of ours — its srun was an earlier
        # supervisor's — and is ended through Slurm: a queued one was left waiting, and ran)
        self.stopper.end_tree(lg)

    def _record_kill_reason(self, lg: LiveGen, reason: str) -> None:
        """``kill``: the reason, and the moment the kill was sent if it was (kept as it was)."""
        self._write_kill(lg, reason, sent_at=lg.kill_sent_at, caught=lg.kill_caught is not False)

    def _write_kill(self, lg: LiveGen, reason: str, *, sent_at: float | None, caught: bool) -> None:
        """The kill in the generation's records, for ``resume`` (none in a directory that is
        gone: ``write_kill_reason``)."""
        try:
            generation_files.write_kill_reason(lg.gen, reason, sent_at=sent_at, caught=caught)
        except OSError as e:
            self._warn("state_dir_error", f"cannot record the kill of task {lg.task.name!r}: {e.strerror}", lg.task)

    def delivered(self, lg: LiveGen, sent_at: float | None, caught: bool) -> None:
        """A signal of a generation's ladder came out. The first that reached the worker is
        the moment its kill was *sent* (recorded with the kill's reason, and in the event
        log); an end noticed while signals were in flight is read once none is."""
        if sent_at is not None and lg.kill is not KillState.SENT and not lg.done:
            lg.kill_reached_worker(sent_at, caught)
            reason = lg.kill_reason or "ended"
            self._write_kill(lg, reason, sent_at=sent_at, caught=caught)
            self.events.emit("kill_sent", task=lg.task.name, slot=lg.gen.slot, gen=lg.gen.gen, reason=reason,
                             at=sent_at, caught=caught)
        if not lg.signalling and lg.phase is GenPhase.END_SEEN:
            self.collect(lg, lg.wait_status)

    def slot_released(self, lg: LiveGen) -> None:
        self.events.emit("slot_released", slot=lg.gen.slot, gen=lg.gen.gen)
        self.policy.tree_gone(lg.gen)

    def _full_while_it_ran(self, lg: LiveGen) -> bool:
        """The state directory was found full since this generation started: a record it
        lacks may be one it could not write, even if there is room again now."""
        started, full_at = lg.task.started_at, self._full_seen_at()
        return full_at is not None and (started is None or started <= full_at)

    def _requeue_unstarted(self, lg: LiveGen, *, reason: str = "state_dir_full") -> None:
        """A generation that never started — the state directory was full, or Slurm's
        controller could not be reached: its task waits for a slot again, first in line, as
        if it had never been given one."""
        self._let_go(lg)
        self.slots.free(lg.gen.slot)
        self.follow.unwatch(lg)
        lg.task.withdraw_generation()
        lg.task.move(TaskStatus.PENDING)
        self.ready.requeue(lg.task.id, first=True)
        self.events.emit("task_requeued", task=lg.task.name, slot=lg.gen.slot, gen=lg.gen.gen, reason=reason)


class Unrecorded(enum.Enum):
    """Why a generation whose wrapper is gone left no exit record, as its files tell it."""

    NOTHING_RAN = "nothing_ran"  # its wrapper could not claim it (exit 223, or a claim begun and left empty)
    NEVER_BEGAN = "never_began"  # its directory is there with no claim of the wrapper's and no start
    RECORDS_REMOVED = "records_removed"  # it began, and its claim or its directory went while it ran
    UNWRITTEN = "unwritten"  # it ran with its records there: its exit could not be written (or was not)


def _unrecorded(lg: LiveGen, claim: generation_files.Claim | None, status: int | None) -> Unrecorded:
    """``Unrecorded`` of ``lg``, whose wrapper ended without an exit record; ``status``: the
    one the launcher saw it exit with (None: a pane's, a step's, one killed by a signal). A
    directory does not vanish by itself, nor a claim: their worker (``rm -rf``, a ``git clean``
    of the state directory) removed them — it ran. A wrapper exits with its worker's status,
    and only one that could not claim its generation exits 223 (``wrapper.UNCLAIMED_EXIT``):
    with its directory still there, that status is the evidence that nothing ran."""
    there = lg.gen.dir.is_dir()
    if status is not None and (claim.unwritten if claim is not None else
                               status == wrapper.UNCLAIMED_EXIT and there):
        return Unrecorded.NOTHING_RAN
    if not there:  # (a headless wrapper never seen to start may have been stopped before it could;
        # a pane's claims the generation before anything else, and only its worker removes it; one
        # a resume took up began — ``resume._inspect`` — as it was made before the log named it)
        ran = status is not None or lg.pid is not None or lg.in_pane or lg.heartbeat_seen
        return Unrecorded.RECORDS_REMOVED if ran else Unrecorded.UNWRITTEN
    if status is not None and (claim is None or claim.by_supervisor) and not _began(lg.gen):
        return Unrecorded.NEVER_BEGAN  # (the claim the supervisor took for a "claimed" one is not its own)
    if claim is None and (status is not None or _began(lg.gen)):
        return Unrecorded.RECORDS_REMOVED  # (its start is written after its claim)
    return Unrecorded.UNWRITTEN


def _pane_closed(lg: LiveGen) -> bool:
    """A pane generation with no exit record ended with its pane, closed: its leader marked
    the hang-up (a Slurm step's srun, whose end made Slurm kill the step before anything could
    record it, or which waited in Slurm's queue); or the pane closed as it opened, before its
    worker began (the pane's leader, or the stage it starts, died of the hang-up before it
    could arm itself against it) — nothing ran, as when the pane closes at the start gate. Not
    a step whose srun began and ended with no mark: it failed at once, and its pane ended with
    it — the executor's failure. (A pane its multiplexer still lists, its first process ended,
    was not closed: ``_leader_killed``, asked first.)"""
    if not lg.in_pane:
        return False
    if generation_files.hung_up(lg.gen):
        return True
    return not _began(lg.gen) and not (lg.remote and generation_files.began_its_step(lg.gen))


def _leader_and_wrapper_killed(lg: LiveGen) -> bool:
    """A local pane generation with no exit record whose leader and wrapper were killed from
    outside (``kill -9``, the OOM killer) after its worker began: no hang-up mark (a leader
    marks its terminal's hang-up before anything else: a pane closed, or a session lost, while
    it lived has it), its claim still its wrapper's, and no signal of ours sent (SPEC §5.7)."""
    return lg.in_pane and not lg.remote and lg.kill_sent_at is None \
        and generation_files.kill_sent_at(lg.gen) is None and not generation_files.hung_up(lg.gen) \
        and generation_files.claimed_by_wrapper(lg.gen) and _began(lg.gen)


def _leader_gone_unmarked(lg: LiveGen) -> bool:
    """A local pane generation whose leader (and second stage) ended with no hang-up mark. A
    leader marks a hang-up that comes while its second stage lives, before it reaps the stage
    (a pending SIGHUP is taken before the SIGCHLD): so the pane's terminal did not hang up, nor
    did its multiplexer signal it, while the worker ran — a SIGHUP the worker died of was its
    own (``exit 129``, ``kill -HUP $$``), whatever became of its session after. *Decision*: a
    ``resume`` that found the session killed since took the death for the session's, ``lost
    (multiplexer_lost)``, and ran the finished task again. Looked at in this order: a mark made
    just before the leader ended is seen. A leader that still runs (its mark may be on its way)
    says nothing: the session is asked, as before."""
    return lg.in_pane and not lg.remote and procs.wrapper_process(lg.gen) is None \
        and not generation_files.hung_up(lg.gen)


def _unstarted_in_its_pane(lg: LiveGen) -> bool:
    """A local pane generation that left no start and no hang-up mark: its pane closed as it
    opened, or its leader was killed before its worker began (``_pane_closed``)."""
    return lg.in_pane and not lg.remote and not generation_files.hung_up(lg.gen) and not _began(lg.gen)


def _began(gen: generation_files.GenPaths) -> bool:
    """The generation's wrapper wrote its start in the heartbeat (after its claim)."""
    try:
        return generation_files.heartbeat_started(gen) is not None
    except OSError:  # no plain file there: something wrote it
        return True


def _pane_label(a: Any) -> str:
    """The state part of a finished pane's title, in the words every other view uses for an
    outcome (``succeeded``, ``timed out``)."""
    word = str(a.status).replace("_", " ")
    return f"{word} (exit {a.exit_code})" if a.exit_code is not None and a.status != TaskStatus.SUCCEEDED else word
