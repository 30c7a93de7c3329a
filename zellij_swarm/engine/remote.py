"""The Slurm executor on the supervisor's side (SPEC §11): what changes when a generation's
wrapper runs as a job step, possibly on another host.

- **Start**: the wrapper's argv gets ``srun`` before it (``prefix``), with the task's resources
  over the run's, and ``--pty`` in a live pane. A headless step's ``srun`` errors go to the
  generation's ``executor.log`` (its output is the wrapper's business), so that a step Slurm
  refused says why.
- **Seeing it**: files written on another host raise no inotify event here, so a remote
  generation's directory is polled (``follow``: every 0.25 s) — always, even on one host, so
  the tests run the path a real cluster needs; a headless step's ``srun`` exiting wakes the
  supervisor too. Every ``STATE_INTERVAL`` one ``squeue`` (off the loop) says which of the
  run's steps are queued or running: a pane's launch-heartbeat deadline starts only once its
  step runs (queued is not missing), and a step that left Slurm's queue without its wrapper's
  exit is collected after ``SIDECAR_GRACE`` — the time a network filesystem may take to show a
  file written on the node — spent re-reading its sidecar. Left the queue means: not listed
  *and* no ``srun`` of it runs here any more (a restarted controller forgets jobs whose steps
  run on). Time in the queue is not charged to its time limits (the supervisor's timers look
  at its claim); ``--slurm-max-queue`` withdraws a step that waits too long.
- **Outcome**: the sidecar is the truth. An end it does not explain — no sidecar, or a death by
  signal nobody here asked for — is read from the job's state (``slurm.classify``): its time
  limit is ``timed_out``; a cancel from outside ``cancelled`` (``executor_cancelled``); its node
  failed, or it was preempted, ``lost`` (``executor_lost``) — also over a death by signal the
  wrapper recorded (slurmd's SIGTERM) — which runs again without using an attempt, up to
  ``task.LOST_RERUNS`` times a task (a node that keeps failing then uses attempts like any
  fault). So is a step whose own job had an id another step of the run held meanwhile (a
  controller that forgot that one's job issued its id again, and Slurm ended the new job for
  the old step's sake: ``_ids_held_meanwhile``). A wrapper that died of a signal neither ours
  nor Slurm's may have left its worker running past the step: ``wrapper_lost``, unknown, never
  run again by itself (``_killed_wrapper_end``). A code the worker exited with stands.
- **Ending**: SIGTERM to the worker on its node (``step_signal``, run beside the step: it says
  whether the worker was running and had a handler for it — the outcome rule), or, when that
  cannot be said there, ``scancel --signal=TERM`` of the step (the wrapper and worker run their
  traps); the ``kill_grace``, then ``scancel`` (Slurm kills the whole tree on the node), each by
  id and job name (an id issued again is never ours). A step still queued is withdrawn: its claim taken
  (nothing of it can run any more), then a plain ``scancel`` — or, one waiting inside the
  allocation where squeue does not list it, SIGTERM to its ``srun``. Otherwise ``srun`` itself
  is never signalled: SIGTERM to srun kills the task without its traps. The slot is held until
  Slurm no longer lists the step.
- **The allocation** (``--slurm-alloc``) is asked for by a ``salloc`` of its own and followed
  in the queue until granted; nothing is dispatched meanwhile (``allocating``). ``close``
  cancels it, granted or not.
- **Never run here**: a Slurm generation is never taken over and run on this machine: a pane
  that never reported in runs again as a headless *step*.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zellij_swarm import exc, external
from zellij_swarm.backends.base import LaunchRequest
from zellij_swarm.calls import CallRunner, Done
from zellij_swarm.config.settings import Resolved
from zellij_swarm.config.swarmfile import TaskSpec
from zellij_swarm.engine import step_signal
from zellij_swarm.engine.live import GenPhase, LiveGen
from zellij_swarm.engine.timers import Timers
from zellij_swarm.exc import BackendError
from zellij_swarm.records import generation_files, rundir
from zellij_swarm.worker import procs, slurm
from zellij_swarm.worker.slurm import Job, Slurm

STATE_INTERVAL = 1.0  # seconds between two looks at the run's steps in squeue
SIDECAR_GRACE = 3.0  # seconds a step's exit sidecar may take to show after Slurm let the step go
SUBMIT_GRACE = 10.0  # seconds an srun may take to list its step before its absence means anything
SETTLE_WAIT = 5.0  # seconds Slurm may take to give an ended step's job its end state
SETTLE_POLL = 0.2  # seconds between two looks at it meanwhile (one scontrol each; Slurm has no event for it)
PANE_LOG_WAIT = 2.0  # seconds a pane's log may take to show what its terminal showed last (tmux's pipe-pane)
# seconds the SIGTERM sent on a step's node may take (srun some 30 ms, the helper's start a few
# hundred): a node that does not answer holds the run's Slurm calls this long, then the step
# is signalled through the controller
NODE_SIGNAL_TIMEOUT = 5.0
GONE_WAIT = 30.0  # seconds an ended step may stay in the queue (Slurm's KillWait and more) before its slot is freed
# seconds before a call of a step's ending ladder that failed (a controller that does not answer)
# is made again: until it is, the step runs on — and nothing else would ever end it
LADDER_RETRY = 2.0


@dataclass(frozen=True)
class RemoteEvents:
    """What the supervisor does with what Slurm says."""

    running: Callable[[LiveGen], None]  # its step runs: the launch heartbeat is due now
    seen: Callable[[LiveGen, Job], None]  # its step as squeue lists it
    gone: Callable[[LiveGen], None]  # its step left Slurm and its sidecar has had its grace
    queued_too_long: Callable[[LiveGen], None]  # its step waited longer than --slurm-max-queue
    # the run's allocation (--slurm-alloc) ended, not by the run: its job, Slurm's state of it
    # (None: Slurm no longer knows it); said once an allocation, before the first step it took
    # is explained
    allocation_ended: Callable[[str, str | None], None]
    warn: Callable[[str, str, Any], None]


@dataclass(frozen=True)
class AllocationEvents:
    """What the supervisor does while the swarm's allocation (``--slurm-alloc``) waits."""

    queued: Callable[[str, str], None]  # job id, why it waits (said again when that changes)
    granted: Callable[[str], None]
    gave_up: Callable[[str, str], None]  # a fault code, and why
    # it ended before Slurm granted it, not by the run: a cancel from outside (its state), or
    # a controller that forgot it (None) — as ``RemoteEvents.allocation_ended``
    ended: Callable[[str, str | None], None]


def preflight(cluster: Slurm, resources: Mapping[str, Any], tasks: Iterable[TaskSpec]) -> None:
    """Before a Slurm run exists: the cluster answers, and every partition asked for is one
    of its partitions (``exc.UsageError``, one line, otherwise)."""
    try:
        known = {p.rstrip("*") for p in cluster.partitions()}
    except BackendError as e:
        raise exc.UsageError(f"--executor slurm: cannot reach the Slurm cluster: {e}") from None
    wanted = [("the run", resources.get("partition"))] + [(f"task {t.name!r}", t.slurm.get("partition"))
                                                          for t in tasks]
    for who, partitions in wanted:
        for name in str(partitions).split(",") if partitions else ():
            if name not in known:
                raise exc.UsageError(f"--executor slurm: {who} asks for partition {name!r}, which the cluster does "
                                     f"not have (it has: {', '.join(sorted(known)) or 'none'})")


def end_steps_now(cluster: Slurm, run_id: str, gens: list[generation_files.GenPaths], grace: float, *,
                  whole_run: bool) -> int:
    """``cancel`` with no supervisor, blocking: the ladder for these generations' steps —
    TERM to a running one (the moment recorded with its kill's reason, which the caller
    wrote: the outcome rule), a queued one withdrawn, ``grace`` for them to leave the queue,
    then ``scancel``. The steps of the run's allocation (``--slurm-alloc``) are listed in it —
    a plain ``squeue`` lists none, and they ran on after the cancel — and a ``whole_run``
    cancel ends the allocation too, granted or still queued (it held a node with no time
    limit until someone resumed the run). Returns how many steps it ended."""
    by_key = {(gen.slot, gen.gen): gen for gen in gens}
    generations = set(by_key)
    allocations = cluster.named(slurm.allocation_name(run_id))
    granted = next((job_id for job_id, state in allocations if state == "RUNNING"), None)

    def listed() -> dict[tuple[int, int], Job]:
        inside = cluster.jobs(run_id, allocation=granted) if granted is not None else {}
        return {**cluster.jobs(run_id), **inside}  # (a task added later may run outside it)

    jobs = [(by_key[key], job) for key, job in listed().items() if key in generations]
    for gen, job in jobs:
        if not job.running:
            cluster.cancel(job.id)
            continue
        hb = generation_files.launch_heartbeat(gen)
        where = (hb["node"], hb["step"]) if hb and hb["node"] and hb["step"] else None
        sent = term_step(cluster, run_id, gen, job.id, where, procs.coarse_wallclock)
        if (reason := generation_files.kill_reason(gen)) is not None:
            generation_files.write_kill_reason(gen, reason, sent_at=sent[0], caught=sent[1])
    ids = [job.id for _, job in jobs]
    deadline = time.monotonic() + grace
    while ids and time.monotonic() < deadline and generations & listed().keys():
        time.sleep(0.1)
    for job_id in ids:
        cluster.cancel(job_id)  # gone already: scancel says so, and nothing happens
    settled = time.monotonic() + SETTLE_WAIT  # and they leave the queue before this returns
    while ids and time.monotonic() < settled and generations & listed().keys():
        time.sleep(SETTLE_POLL)
    if whole_run:
        for job_id, _ in allocations:
            cluster.cancel(job_id, name=slurm.allocation_name(run_id))
    return len(ids)


def term_step(cluster: Slurm, run_id: str, gen: generation_files.GenPaths, step_id: str, where: tuple[str, str] | None,
              now: Callable[[], float], *, name: str | None = None) -> tuple[float, bool]:
    """SIGTERM to the worker of the generation's running step ``step_id`` (blocking): when it
    was sent, and whether the worker had a handler for it (the outcome rule). Sent on the
    node (``where``: node and ``job.step``, as the launch heartbeat names them) by
    ``step_signal``, which can tell; otherwise ``scancel --signal=TERM`` of the step, as caught,
    at the moment it is sent — or, when the helper gave no answer in its time (it may have
    sent the signal and hung), at the moment taken before the node was asked. A helper that
    ended without saying it sent one sent none: a worker that ended meanwhile (its step gone,
    the helper's ``srun`` with it) ended on its own, and taking the earlier moment recorded
    work that ran to exit 0 as cancelled, run again by ``retry``. ``name``: only while the job
    still has that name (``slurm._named``)."""
    at = now()
    if where is not None:
        node, step = where
        try:
            said = cluster.run_beside(step.partition(".")[0], node,
                                      (*step_signal.ARGV, run_id, str(gen.slot), str(gen.gen), str(gen.dir)),
                                      timeout=NODE_SIGNAL_TIMEOUT)
        except BackendError:  # no answer in its time
            said = None
        if said is not None and (sent := step_signal.parse(said)) is not None:
            return sent
        if said is not None:
            at = now()
    cluster.signal(step_id, "TERM", name=name)
    return at, True


# What srun says when Slurm's controller cannot be reached (stopped, restarting, the network):
# nothing of the step was started, and the same request succeeds once it answers again. So too
# when a controller that restarted without its newest jobs issued the step a job id again whose
# credential the node had revoked as it killed the forgotten job's orphans: refused before the
# step's wrapper began ("Application launch failed: Job credential revoked").
_UNREACHABLE = ("Unable to contact slurm controller", "connect failure", "Socket timed out",
                "Zero Bytes were transmitted or received", "Connection refused", "Connection reset by peer",
                "Job credential revoked")


def controller_unreachable(gen: generation_files.GenPaths) -> bool:
    """The generation's srun ended because Slurm's controller could not be reached (or, just
    restarted, handed out a job id whose credential was revoked)."""
    said = srun_error(gen)
    return any(words in said for words in _UNREACHABLE)


# What srun says when Slurm refuses its request outright (a node, partition, feature or amount
# no node has): no job was made — inside an allocation, no step — so nothing of it can start.
_REFUSED = ("Unable to allocate resources", "Unable to create step", "Invalid generic resource")


def srun_refused(gen: generation_files.GenPaths) -> bool:
    """The generation's srun was refused by Slurm before any job was made (its executor log
    says so): once it has ended, nothing of the step can start or show late — no reason to
    wait for it to be listed (``SUBMIT_GRACE``) or for its sidecar (``SIDECAR_GRACE``)."""
    said = srun_said(gen, 4096)
    return any(f"srun: error: {words}" in said for words in _REFUSED)


# srun's word of its task — the wrapper — ended by a signal ("srun: error: n1: task 0: Killed"),
# and words of Slurm's own hand in a step's end: slurmstepd's (a cancel, a time limit, an
# oom-kill), a node that failed, a preemption
_TASK_SIGNALLED = re.compile(r": task \d+: (?!Exited with exit code)")
_SLURMS_END = re.compile(r"slurmstepd|CANCELLED|DUE TO|oom[-_ ]?kill|Out Of Memory|Node failure|[Pp]reempt")


def wrapper_killed(said: str) -> bool:
    """Whether srun's words (``said``) say that its task, the step's wrapper, died of a signal,
    and nothing says Slurm sent it: the wrapper was killed from outside."""
    return bool(_TASK_SIGNALLED.search(said)) and not _SLURMS_END.search(said)


def srun_error(gen: generation_files.GenPaths) -> str:
    """``: <srun's last error line>`` from a headless step's executor log, or nothing."""
    lines = srun_said(gen, 4096).strip().splitlines()
    return f": {lines[-1].strip()}" if lines else ""


def _said(path: str | os.PathLike[str], at_most: int) -> str:
    """The end of a log, or nothing."""
    try:
        return rundir.read_record_tail(path, at_most).decode(errors="replace")
    except OSError:  # (an unsafe record is one too)
        return ""


def _terminal_said(gen: generation_files.GenPaths) -> str:
    """The end of what a pane's terminal showed (its output log), or nothing."""
    return _said(gen.output, 4096)


def srun_said(gen: generation_files.GenPaths, at_most: int = 65536) -> str:
    """The end of the generation's executor log (what srun said), or nothing."""
    return _said(generation_files.plain(gen, generation_files.EXECUTOR_LOG), at_most)


def end_srun(gen: generation_files.GenPaths, child: int | None = None) -> None:
    """SIGTERM to the ``srun`` of a step withdrawn before its wrapper started (its claim is
    ours: nothing of it runs or will): ``child``, ours, else found by its command line — in a
    pane, or adopted by ``resume``, or the orphan of a killed supervisor, which waits for ever
    when Slurm no longer knows its job (a controller restarted without its job state)."""
    if (pid := child if child is not None else procs.wrapper_process(gen)) is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)


class SlurmExecutor:
    def __init__(self, cluster: Slurm, *, run_id: str, settings: Resolved, calls: CallRunner, timers: Timers,
                 live: dict[int, LiveGen], clock: Callable[[], float], wallclock: Callable[[], float],
                 on: RemoteEvents, host_job: str | None = None) -> None:
        """``host_job``: the batch job the supervisor runs in (``submit``), whose allocation
        its steps run in; the run's end leaves it alone (the supervisor is its batch step)."""
        self.cluster = cluster
        self.run_id = run_id
        self.settings = settings
        self.calls = calls
        self.timers = timers
        self.live = live
        self.clock = clock
        self.wallclock = wallclock
        self.on = on
        self.allocation: str | None = host_job  # granted, or the batch job's own
        self.host_job = host_job
        self.requeued = False  # the batch job runs again: its earlier run's steps ended with it
        self.host_ending = False  # the batch job is being ended or requeued: nothing more starts
        self.request: tuple[str, subprocess.Popen[bytes]] | None = None  # its job, and the salloc that asked
        # the run's allocations that ended, not by the run (a cancel from outside, a node
        # failed, a time limit, a controller that forgot it): Slurm's state of each, and those
        # the supervisor was told of. Nothing more is dispatched into one.
        self.ended_allocations: dict[str, str | None] = {}
        self._told: set[str] = set()
        self._ticking = False
        self._call_failed = False  # said once: squeue keeps failing
        # the steps whose wrapper recorded their end while Slurm still listed them, by (slot,
        # generation), each since when (``step_ended``, ``_end_lingering``)
        self._ended_steps: dict[tuple[int, int], float] = {}
        self._emptied: set[tuple[int, int]] = set()  # ... of those, the ones Slurm let go of the step (``emptied``)
        # the job ids of the run's steps seen to end, each with when (wall clock) and its (slot,
        # generation), in that order: kept while a step submitted before that end is followed
        # (``_ids_held_meanwhile``; ``_forget_released`` lets go of the rest)
        self._released: collections.deque[tuple[float, str, tuple[int, int]]] = collections.deque()

    # ----- start ---------------------------------------------------------------------------

    def allocate(self, *, resumed: bool, wanted: int, log: Path, on: AllocationEvents) -> str | None:
        """``--slurm-alloc``: the run's one allocation, for ``wanted`` tasks at once — a
        resumed run's own while Slurm runs it (one still queued was an earlier supervisor's
        request, maybe killed before it said so: withdrawn, and asked anew). The job asked for,
        followed until Slurm grants it (``on``); None when one was adopted or nothing is left
        to run (``wanted`` 0). Blocking, briefly; raises ``BackendError``."""
        name = slurm.allocation_name(self.run_id)
        for job_id, state in self.cluster.named(name) if resumed else []:
            if state == "RUNNING" and self.allocation is None:
                self.allocation = job_id
            else:
                self.cluster.cancel(job_id, name=name)
        if self.allocation is not None or wanted == 0:
            return None
        self.request = self.cluster.request_allocation(self.run_id, wanted, self.settings.slurm, log)
        self._await_allocation(self.request[0], self.settings.slurm_alloc_wait, on)
        return self.request[0]

    @property
    def holding(self) -> bool:
        """Nothing is dispatched: the allocation was asked for and not granted yet, or it
        ended (``ended_allocations``), or the batch job the run is in is ending."""
        return self.allocating or self.host_ending or self.allocation in self.ended_allocations

    def ask_again(self) -> None:
        """The allocation ended: forget it, so that ``allocate`` asks for a new one; the steps
        it took are followed to their ends as before."""
        if self.request is not None and self.request[1].poll() is None:
            self.request[1].kill()  # one still queued, or forgotten: its salloc waits for ever
            self.request[1].wait()
        if (ended := self.allocation) is not None and ended in self.ended_allocations:
            # Slurm may give the new one this one's id (a restarted controller that forgot it
            # issues the id again): the ended one is told apart from here on by a name of its
            # own, or the new one would be taken for it — nothing dispatched into it, for ever
            apart = f"{ended}~{len(self.ended_allocations)}"
            self.ended_allocations[apart] = self.ended_allocations[ended]
            if ended in self._told:
                self._told.add(apart)
            for lg in self.live.values():
                if lg.allocation == ended:
                    lg.allocation = apart
            del self.ended_allocations[ended]
            self._told.discard(ended)
        self.allocation, self.request = None, None

    @property
    def allocating(self) -> bool:
        """The allocation was asked for and not granted yet."""
        return self.request is not None and self.allocation is None

    def _await_allocation(self, job: str, limit: float | None, on: AllocationEvents) -> None:
        """Follow the allocation asked for (``job``) until Slurm grants it (``on.granted``);
        while it waits, ``on.queued`` with Slurm's reason; ``on.ended`` when it was cancelled
        from outside or forgotten first, ``on.gave_up`` when it waited ``limit`` seconds or
        ended otherwise. ``close`` cancels it, granted or not. Asked for anew (``ask_again``),
        it is no longer followed."""
        deadline = None if limit is None else self.clock() + limit
        said: list[str] = []
        name = slurm.allocation_name(self.run_id)

        def current() -> bool:
            return self.request is not None and self.request[0] == job and self.allocation is None

        def state() -> tuple[str | None, str]:
            # squeue lists it while it waits or runs; once it ended, its end state (None:
            # Slurm no longer knows it)
            return self.cluster.job_state(job) or (self.cluster.state(job, name=name), "")

        def look() -> None:
            if current():
                self.calls.submit(state, answered)

        def answered(done: Done[tuple[str | None, str]]) -> None:
            if not current():
                return
            if done.error is None:
                state, reason = done.value or ("", "")
                if state == "RUNNING":
                    self.allocation = job
                    on.granted(job)
                    return
                if state is None or state in slurm.CANCELLED:
                    on.ended(job, state)
                    return
                if state not in slurm.ACTIVE:
                    on.gave_up(external.EXECUTOR.failed, f"its job {job} ended ({state}) before Slurm granted it")
                    return
                if reason != (said[-1] if said else None):
                    said.append(reason)
                    on.queued(job, reason)
            if deadline is not None and self.clock() >= deadline:
                on.gave_up("queued_too_long", f"its job {job} waited in Slurm's queue for {limit:g}s "
                                              "(--slurm-alloc-wait)")
                return
            self.timers.after(STATE_INTERVAL, look)

        look()

    def prefix(self, lg: LiveGen, *, pty: bool) -> tuple[str, ...]:
        resources = {**self.settings.slurm, **lg.task.spec.slurm}
        name = slurm.job_name(self.run_id, lg.task.id, lg.gen.slot, lg.gen.gen)
        srun = self.cluster.prefix(name, resources, pty=pty, allocation=self.allocation)
        # srun's own messages go to the step's executor log, in a pane too (with --pty the
        # worker's output comes on srun's stdout, the pane's terminal): ``logs`` shows them
        # apart, never mixed into the worker's output
        log = generation_files.plain(lg.gen, generation_files.EXECUTOR_LOG)
        return ("/bin/sh", "-c", 'exec "$@" 2>>"$0"', log, *srun)

    def launched(self, lg: LiveGen) -> None:
        """A generation was handed to srun: follow its step from now on (and withdraw it
        once it has waited ``--slurm-max-queue`` without starting)."""
        lg.remote_since, lg.submitted_at = self.clock(), self.wallclock()
        lg.allocation = self.allocation if self.allocation != self.host_job else None
        if (limit := self.settings.slurm_max_queue) is not None:
            lg.deadlines.append(self.timers.after(limit, lambda: self._queue_limit(lg)))
        if not self._ticking:
            self._ticking = True
            self.timers.after(STATE_INTERVAL, self._tick)

    @staticmethod
    def where(lg: LiveGen, *, ended_at: float | None = None) -> dict[str, Any]:
        """What a task's row keeps of its step: the node it ran on, its job (``job``: as squeue
        listed it — inside an allocation its "job.step" id —, else as its wrapper saw it), and how long it
        waited in Slurm's queue (``queued_s``: from its ``srun`` to its wrapper's start, or to
        ``ended_at`` for one that never started) — not charged to its time limits."""
        out: dict[str, Any] = {"node": lg.node} if lg.node else {}
        if job := lg.job_id or lg.step:
            out["job"] = job
        started = generation_files.started_at(lg.gen)
        if lg.submitted_at is not None and (until := started if started is not None else ended_at) is not None:
            out["queued_s"] = round(max(0.0, until - lg.submitted_at), 3)
        return out

    def _queue_limit(self, lg: LiveGen) -> None:
        """``--slurm-max-queue`` fell due: a step still queued is withdrawn. Its claim is taken
        here, as the limit falls due, never later: a wrapper that claimed first runs (its wait
        is over, and it runs on untouched), one that comes after runs nothing. (*Decision*: the
        look here and the claim's taking, by the ladder's first call, were apart; a step Slurm
        started in between had its worker sent TERM and its task was recorded ``cancelled
        (queued_too_long)`` after running for up to 3 s — an adversary, 6 of 16 steps.)"""
        if lg.done or lg.collected or lg.kill_reason is not None:
            return
        try:
            lg.withheld = generation_files.take_claim(lg.gen)
        except OSError:  # no room, its directory gone: the ladder takes it, as it may
            if generation_files.started_at(lg.gen) is None:
                self.on.queued_too_long(lg)
            return
        if lg.withheld:
            self.on.queued_too_long(lg)

    # ----- following -----------------------------------------------------------------------

    def _remote(self) -> list[LiveGen]:
        return [lg for lg in self.live.values() if lg.remote and not lg.collected]

    def _tick(self) -> None:
        if not self._remote():
            self._ticking = False
            return
        self.calls.submit(lambda: self.cluster.jobs(self.run_id, allocation=self.allocation), self._seen)

    def _seen(self, done: Done[dict[tuple[int, int], Job]]) -> None:
        self.timers.after(STATE_INTERVAL, self._tick)
        if done.error is not None:
            if not self._call_failed:
                self._call_failed = True
                code = done.error.code if isinstance(done.error, BackendError) else external.EXECUTOR.failed
                self.on.warn(code, f"slurm: cannot list the run's steps ({done.error}); following them by their files "
                                   "only", None)
            return
        jobs = done.value or {}
        now = self.clock()
        self._forget_released()
        orphaned: list[tuple[LiveGen, Job, bool]] = []
        for lg in self._remote():
            job = jobs.get((lg.gen.slot, lg.gen.gen))
            if job is not None:
                lg.job_id, lg.unlisted_since = job.id, None
                self.on.seen(lg, job)
                if job.running and not lg.step_running:
                    lg.step_running = True
                    self.on.running(lg)
                if (look := self._srun_may_be_gone(lg, job)) is not None:
                    orphaned.append((lg, job, look))
                else:
                    lg.stepless_since = None
            elif self._forgotten_in_queue(lg, now):
                self._withdraw_forgotten(lg)
            elif (lg.job_id is not None or generation_files.claim_or_planted(lg.gen) is not None
                  or now - (lg.remote_since or now) > SUBMIT_GRACE or srun_refused(lg.gen)) \
                    and not self._srun_alive(lg):
                # listed before, or its wrapper started, or given time to be listed, or refused
                # outright — and no srun of it runs here any more. Slurm not listing a step is
                # no evidence it is gone: a controller that restarted may have forgotten its job
                # while the step runs on, and a step waiting inside the allocation is not listed
                self.left_queue(lg)
        self._end_lingering(jobs, now)
        if orphaned:
            self._look_for_steps(orphaned)

    def _srun_may_be_gone(self, lg: LiveGen, job: Job) -> bool | None:
        """Whether the listed ``job`` of ``lg``'s own step may have no ``srun`` left here, so
        that Slurm's steps of it are to be asked for (on the loop: nothing blocks): True when
        that is to be looked for first (``procs.wrapper_processes``: a pane's srun, the pane
        leader's child; one a resume adopted), False when it is known — a headless step's
        srun, our child, ended (its launcher said so) — None otherwise. Never inside the
        allocation, whose squeue lists steps (a step it no longer lists left the queue), nor
        a step still queued whose srun may run elsewhere: only our own child's end says that
        nothing will ever start it."""
        if self.allocation is not None or lg.gone_seen or lg.forgotten:
            return None
        if lg.child and lg.pid is not None:
            return False if lg.wait_status is not None else None
        return True if job.running else None

    def _look_for_steps(self, orphaned: list[tuple[LiveGen, Job, bool]]) -> None:
        """Ask Slurm, off the loop, which of these listed jobs, whose ``srun`` may be gone,
        still have their step: a step whose srun was killed here (``kill -9`` of srun and its
        helper) runs on, unseen by srun, its job RUNNING, and ends with its wrapper's record —
        or Slurm ended it as it started, with no record, and keeps its job RUNNING, empty,
        for ever (a pane's task showed running, and its run never ended). Not Slurm's answer
        of the job, nor srun's death, says the step's work is over: Slurm no longer listing
        the step, no srun of it left here, does (``_steps_seen``)."""
        asked = [(lg.gen, job.id, job.name, look) for lg, job, look in orphaned]

        def stepless() -> set[tuple[int, int]]:
            alive = procs.wrapper_processes(gen for gen, _, _, look in asked if look)
            left = [(gen, job, name) for gen, job, name, _ in asked if gen.dir not in alive]
            steps = self.cluster.steps(job for _, job, _ in left) if left else {}
            return {(gen.slot, gen.gen) for gen, job, name in left if name not in steps.get(job, ())}

        keys = {(lg.gen.slot, lg.gen.gen): lg for lg, _, _ in orphaned}
        self.calls.submit(stepless, lambda done: self._steps_seen(keys, done))

    def _steps_seen(self, asked: dict[tuple[int, int], LiveGen], done: Done[set[tuple[int, int]]]) -> None:
        """Slurm's steps of jobs whose srun may be gone (``_look_for_steps``): a generation
        whose job lists no step of it, no srun of it left here, at two looks in a row, has
        left the queue (``left_queue``: its sidecar's grace, then its end is read) — its job,
        empty, is cancelled once its end is recorded (``step_ended``). Slurm not answering
        says nothing: it is followed by its files, as when squeue fails."""
        if done.error is not None:
            return
        now = self.clock()
        for key, lg in asked.items():
            if lg.collected or lg.gone_seen or self.live.get(key[0]) is not lg:
                continue
            if key not in (done.value or set()):
                lg.stepless_since = None
            elif lg.stepless_since is None:
                lg.stepless_since = now
            elif now - lg.stepless_since >= STATE_INTERVAL / 2:
                lg.step_left_job = True
                self.left_queue(lg)

    def step_over(self, gen: generation_files.GenPaths, job: str | None, at: float) -> None:
        """The step of ``gen``, whose job was ``job`` (an id, or "job.step"; None: never
        known), was seen to end at ``at`` (wall clock: the supervisor recorded its end — or,
        for a resume, the earlier supervisor did): its id counts as held until then
        (``_ids_held_meanwhile``)."""
        if job:
            self._released.append((at, job.split(".")[0], (gen.slot, gen.gen)))

    def _forget_released(self) -> None:
        """Let go of the ends recorded before every step followed now was submitted: no step
        that can still end was in Slurm's queue while they held their ids. Kept all while a
        step a resume adopted runs (when it was submitted is not known)."""
        followed = [lg.submitted_at for lg in self.live.values() if lg.remote]
        if None in followed:
            return
        horizon = min((at for at in followed if at is not None), default=None)
        while self._released and (horizon is None or self._released[0][0] < horizon):
            self._released.popleft()

    def _ids_held_meanwhile(self, lg: LiveGen) -> frozenset[str]:
        """The job ids other generations of the run held while ``lg``'s step was in Slurm:
        those of every step still followed (its end not recorded yet), and those of the steps
        seen to end since ``lg``'s was submitted (since its wrapper started, for one a resume
        adopted: when it was submitted is not known). Slurm never issues one id to two jobs
        at once — only a controller that forgot its newest jobs issues their ids again."""
        since = lg.submitted_at if lg.submitted_at is not None else generation_files.started_at(lg.gen)
        if since is None:
            return frozenset()
        itself = (lg.gen.slot, lg.gen.gen)
        others = [other for other in self.live.values() if other.remote and (other.gen.slot, other.gen.gen) != itself]
        for other in others:
            other.read_step()  # (squeue may not have listed it before its controller forgot it)
        followed = {job.split(".")[0] for other in others if (job := other.job_id or other.step)}
        ended = {job for at, job, key in self._released if at >= since and key != itself}
        return frozenset(followed | ended)

    def step_ended(self, gen: generation_files.GenPaths, *, emptied: bool = False) -> None:
        """The step of ``gen`` ended, its wrapper's record of it committed: the evidence that
        nothing of its work is left (``_end_lingering``). ``emptied``: Slurm no longer lists
        the step in its job, and no srun of it is left here to end that job
        (``_steps_seen``): the job is cancelled at the next look, not ``GONE_WAIT`` later."""
        key = (gen.slot, gen.gen)
        self._ended_steps[key] = self.clock() - (GONE_WAIT if emptied else 0.0)
        if emptied:
            self._emptied.add(key)
        else:
            self._emptied.discard(key)

    def _end_lingering(self, jobs: dict[tuple[int, int], Job], now: float) -> None:
        """Cancel a job of the run that Slurm still lists ``GONE_WAIT`` after its step's wrapper
        recorded its end. An ``srun`` that cannot reach the controller when its step ends
        retries some ten seconds and exits; Slurm then keeps its job RUNNING, nothing in it,
        holding its CPUs until the run's end cancels it — and the run's queued steps waited
        for them for ever (a controller down 12 s). Never a step with no such record: nothing
        says its work is over. By id and name: an id issued again is another's."""
        for key in self._ended_steps.keys() - jobs.keys():  # it left the queue
            del self._ended_steps[key]
            self._emptied.discard(key)
        for key, job in jobs.items():
            ended = self._ended_steps.get(key)
            # (not one COMPLETING: Slurm winds it down itself — a step that ended while the
            # controller was away stays so a minute — and a cancel changes nothing of it)
            if ended is None or now - ended < GONE_WAIT or job.state == "COMPLETING":
                continue
            del self._ended_steps[key]
            if key in self._emptied:
                self._emptied.discard(key)
                self.on.warn("process_left_behind", f"slurm: job {job.id} ({job.name}) was still {job.state.lower()} "
                                                    "with no step left in it and no srun of it left here; cancelled",
                             None)
            else:
                self.on.warn("process_left_behind", f"slurm: job {job.id} ({job.name}) was still "
                                                    f"{job.state.lower()} {GONE_WAIT:g}s after its step ended; "
                                                    "cancelled", None)
            self.calls.submit(functools.partial(self.cluster.cancel, job.id, name=job.name), self._cancel_said)

    def _cancel_said(self, done: Done[None]) -> None:
        if done.error is not None:
            self.on.warn(external.EXECUTOR.failed, f"slurm: cannot cancel a job of the run ({done.error})", None)

    def _forgotten_in_queue(self, lg: LiveGen, now: float) -> bool:
        """Squeue listed the step as queued and has not listed it for ``SIDECAR_GRACE``, its
        wrapper never started, and its ``srun`` still waits here: a controller restarted
        without its job state forgot it, and that ``srun`` would wait for ever for a grant
        (a running step it forgot runs on, and is followed to its sidecar).

        Or squeue never listed it, ``SUBMIT_GRACE`` after its submission (outside an
        allocation: a step waiting inside one is never listed): a controller restarted without
        its job state issues ids again, and the srun of a job it forgot, ending, ended the new
        job that had its id before squeue could list it — its srun waited for ever."""
        if lg.step_running or lg.forgotten or lg.kill_reason is not None or lg.collected:
            return False
        if lg.job_id is None and (self.allocation is not None or now - (lg.remote_since or now) < SUBMIT_GRACE):
            return False
        if lg.unlisted_since is None:
            lg.unlisted_since = now
        return (now - lg.unlisted_since >= SIDECAR_GRACE and generation_files.claim_or_planted(lg.gen) is None
                and self._srun_alive(lg))

    def _withdraw_forgotten(self, lg: LiveGen) -> None:
        """A queued step Slurm forgot: its claim taken — should Slurm start it after all, its
        wrapper runs nothing (no claim to be had: it started meanwhile, and is followed as any
        other) — and its ``srun`` ended; the task waits for a slot again (``forgotten``)."""
        try:
            if not generation_files.take_claim(lg.gen):
                return
        except OSError:  # a full state directory: looked at again at the next look at the queue
            return
        lg.forgotten = True
        which = f"the queued step of task {lg.task.name!r} (job {lg.job_id}) is no longer known to Slurm" \
            if lg.job_id is not None else f"the step of task {lg.task.name!r} was never listed by Slurm"
        self.on.warn("executor_lost", f"slurm: {which} (its controller restarted without it); withdrawn, the task "
                                      "runs again", lg.task)
        end_srun(lg.gen, lg.pid if lg.child else None)

    @staticmethod
    def _srun_alive(lg: LiveGen) -> bool:
        """The generation's ``srun`` still runs here: our child (headless), else found by its
        command line (in a pane; adopted by ``resume``)."""
        if lg.child and lg.pid is not None:
            return lg.wait_status is None and procs.alive(lg.pid)  # (its end reported: gone)
        return procs.wrapper_process(lg.gen) is not None

    @staticmethod
    def srun_killed(lg: LiveGen) -> bool:
        """A headless step's ``srun``, our child, died of a signal (``kill -9`` from outside,
        the OOM killer): its step may run on without it — Slurm says when it is gone."""
        return lg.child and lg.wait_status is not None and os.WIFSIGNALED(lg.wait_status)

    def left_queue(self, lg: LiveGen, waited: float = 0.0, request: LaunchRequest | None = None) -> None:
        """Slurm no longer has the step: its sidecar is re-read for ``SIDECAR_GRACE`` — unless
        it was withdrawn before its wrapper ran (its claim is ours), or Slurm refused its srun:
        no sidecar will come. A generation started again meanwhile as a step of its own (a
        pane that sent no heartbeat runs headless) is no longer the step that left: it is
        followed anew (the re-reads ran on, and took its new step, running, for lost)."""
        if lg.collected or lg.gone_seen:
            return
        if request is None:
            request = lg.request
        elif lg.request is not request:
            return
        claim = generation_files.claim_or_planted(lg.gen)
        withdrawn = claim is not None and claim.by_supervisor and not lg.request.claimed
        if withdrawn or generation_files.read_sidecar(lg.gen) is not None or waited >= SIDECAR_GRACE or \
                (claim is None and srun_refused(lg.gen)):
            lg.gone_seen = True
            self.on.gone(lg)
            return
        self.timers.after(0.25, lambda: self.left_queue(lg, waited + 0.25, request))

    def explain(self, lg: LiveGen, then: Callable[[str | None], None], *, recorded_signal: bool) -> None:
        """The reason of a step's end from Slurm's job state, off the loop (``slurm.classify``;
        None: the wrapper's record of a death by signal stands). A failed call says nothing:
        the record stands, and a step with none is ``executor_lost``. A step of a batch job's
        run before Slurm requeued the job (``requeued``; adopted, so not ``submitted`` by this
        supervisor) went with the job: ``executor_lost``, as a node's failure is."""
        if self.requeued and lg.submitted_at is None:
            then("executor_lost")
            return
        unknown = None if recorded_signal else "executor_lost"  # Slurm says nothing: the record stands
        ended_allocations = self.ended_allocations
        # (on the loop: ``live`` is the loop's; a step in the run's allocation has no job of its own)
        held_meanwhile = self._ids_held_meanwhile(lg) if self.allocation is None else frozenset()
        ours = lg.kill_reason is not None  # (a withdrawal ends a pane's srun: no kill from outside)
        srun_killed = lg.child and not ours and lg.wait_status is not None and os.WIFSIGNALED(lg.wait_status)

        def ask() -> str | None:
            if self.host_job is not None and self.cluster.state(self.host_job) in slurm.JOB_ENDING:
                # Slurm ends (or requeues) the batch job whose steps these are: the step went
                # with it, and nothing more is started in it. A `scancel` of the job cancelled
                # the work in it — slurmstepd says so, with no reason of Slurm's own (a requeue
                # says "DUE TO JOB REQUEUE"): that step is not run again (it was lost, and
                # only the run's cancel that came after kept it from running again)
                self.host_ending = True
                return "executor_cancelled" if self._cancelled_from_outside(lg) else "executor_lost"
            if (allocation := lg.allocation) is not None and (
                    allocation in ended_allocations or self._allocation_end_read(allocation)):
                # the allocation it was given went, and every step in it — whatever its
                # wrapper saw (slurmd's SIGTERM), or a step that could not start in it ("job
                # has expired") — but not a step whose wrapper srun says ran to its end before
                # a controller that restarted forgot the allocation (as of a step's own job)
                lg.allocation_ended = True
                # (told apart meanwhile, if the run asked for a new one: ``ask_again``)
                state = ended_allocations.get(allocation, ended_allocations.get(lg.allocation or ""))
                if state in slurm.CANCELLED:
                    return "executor_cancelled"
                return by_end_state(state, "executor_lost")
            if srun_killed or (not ours and generation_files.executor_killed(lg.gen) is not None):
                # Its srun, our child — or in a pane its pane leader's, which wrote the signal
                # (``_paneleader --killed``) — was killed here by a signal nothing of ours sent
                # (`kill -9`, the OOM killer): the srun process it leaves ends the job, which
                # Slurm records as a cancel ("cancelled by interactive user", slurmstepd's
                # CANCELLED) — no cancel from outside, which ends srun by its exit. The step
                # ended as a process of the run killed from outside ends it, as a wrapper's
                # death does: its record stands, or it is `lost (no_exit_record)`, as with
                # both of srun's processes killed (*Decision*: it was `cancelled`, never run
                # again; in a pane too)
                return None if recorded_signal else "no_exit_record"
            cancelled = self._cancelled_from_outside(lg)
            step = self._step(lg) if not cancelled or held_meanwhile else None
            name = slurm.job_name(self.run_id, lg.task.id, lg.gen.slot, lg.gen.gen)  # not an id issued again
            if step is None and not cancelled and not ours and self.allocation is None and \
                    lg.submitted_at is not None and not controller_unreachable(lg.gen):
                # never listed: a job Slurm made and ended between two looks at the queue (a
                # `scancel` of it while it waited) is known by its name, with its end state —
                # but not one whose srun gave up on the controller: srun cancels the job it had
                # asked for, and that CANCELLED is its own, no cancel from outside
                step = lg.job_id = next((job for job, _ in self.cluster.named(name, ended=True)), None)
            own_job = step.split(".")[0] if step and self.allocation is None else None
            if cancelled and own_job not in held_meanwhile:
                return "executor_cancelled"  # `scancel` of the step (JOB.STEP), which leaves its job no state of it
            if own_job is None:  # never listed, or inside the allocation: no job state of its own to read
                return unknown if recorded_signal or ours else self._killed_wrapper_end(lg, unknown)
            # (the wrapper has ended; Slurm may still be winding its job down)
            state = self._settled_state(own_job, name, running_settles=lg.step_left_job)  # (empty: it stays so)
            verdict = slurm.classify(state, recorded_signal=recorded_signal)
            if own_job in held_meanwhile and verdict in (None, "no_exit_record"):
                # Its job had an id another step of the run held meanwhile: a controller that
                # forgot that step's job issued the id again, and Slurm ended this job for the
                # other's sake — the old step registered on the wrong node, or its srun ended
                # the job with that id: FAILED, JobLaunchFailure, its step killed (slurmstepd
                # may say CANCELLED, as for a cancel from outside). Read as an orphan's end:
                # a worker srun says exited by itself stands
                lg.id_issued_again = True
                return self._forgotten_job_end(lg, recorded_signal)
            if cancelled:
                return "executor_cancelled"
            verdict = by_end_state(state, verdict)
            return self._killed_wrapper_end(lg, verdict) if verdict == "no_exit_record" and not ours else verdict

        def by_end_state(state: str | None, otherwise: str | None) -> str | None:
            """The step's end from the end state of its job, or of its allocation: Slurm
            forgot it (None), its node stopped answering — or ``otherwise``."""
            if state is None:
                return self._forgotten_job_end(lg, recorded_signal)
            if state in slurm.NODE_LOST and not recorded_signal:
                return self._node_failed_end(lg)
            return otherwise

        def answered(done: Done[str | None]) -> None:
            if (allocation := lg.allocation) in self.ended_allocations and allocation not in self._told:
                self._told.add(allocation)  # (an allocation asked for anew is not ended again)
                if allocation == self.allocation:
                    self.on.allocation_ended(allocation, self.ended_allocations[allocation])
            then(done.value if done.error is None else unknown)

        self.calls.submit(ask, answered)

    def _forgotten_job_end(self, lg: LiveGen, recorded_signal: bool) -> str | None:
        """How a step of a job — or an allocation — Slurm no longer knows ended (off the loop):
        slurmd kills a forgotten job's steps as orphans, so it was lost with it
        (``executor_lost``, run again) — unless its wrapper recorded its worker's end and srun
        says the worker exited by itself (``slurm.ended_by_slurm``): the record stands (None).
        A controller killed outright forgets its newest jobs, and a worker that exited 143
        while it was down — a code a shell cannot tell from a death by SIGTERM — ran again.
        A pane's wrapper says what its shell saw on the pane's terminal, not to srun's log:
        without Slurm's own hand there (``slurm_hand_shown``), whether Slurm or the worker
        ended it nothing says — ``job_forgotten``, unknown, not run again by itself (it may
        have finished, and pushed)."""
        if not recorded_signal:
            return "executor_lost"
        said = self._step_end_said(lg)
        if lg.pane is None:
            return "executor_lost" if slurm.ended_by_slurm(said) else None
        return "executor_lost" if slurm.slurm_hand_shown(said) else "job_forgotten"

    def _killed_wrapper_end(self, lg: LiveGen, otherwise: str | None) -> str | None:
        """How a step whose wrapper recorded nothing ended, when Slurm's state of it says no
        more than that (off the loop): its job failed or completed, or it ran in the run's
        allocation, which lives on. One whose wrapper claimed its generation and then died of
        a signal — srun says its task did (``wrapper_killed``) — that was not ours (no kill of
        the run's) nor Slurm's (no time limit, cancel, memory or node of Slurm's in its state
        or its words) was killed from outside (``kill -9``, the OOM killer), and its worker
        may run on: a process reparented as its wrapper dies leaves what Slurm tracks of the
        step (proctrack/linuxproc; a worker that left the step's cgroup), and ends with nothing
        Slurm does. ``wrapper_lost``, unknown, never run again by itself — as on this machine
        when nobody sees the worker's end (*Decision*: it was `lost (no_exit_record)` and, with
        a retry left, ran again beside itself). Otherwise ``otherwise``. Asked only of a step
        no kill of ours was asked for."""
        claim = generation_files.claim_or_planted(lg.gen)
        if claim is None or claim.by_supervisor or not wrapper_killed(self._step_end_said(lg)):
            return otherwise
        return "wrapper_lost"

    def _cancelled_from_outside(self, lg: LiveGen) -> bool:
        """Whether the step was cancelled from outside (off the loop): slurmstepd says so in
        srun's words — or, for a step with a terminal (``srun --pty``, a live pane), on that
        terminal, which its pane's log copies (a moment later: looked at again for up to
        ``PANE_LOG_WAIT`` once srun says Slurm killed its task)."""
        said = self._step_end_said(lg)
        if slurm.cancelled_from_outside(said):
            return True
        if lg.pane is None:
            return False
        deadline = time.monotonic() + (PANE_LOG_WAIT if slurm.slurm_hand_shown(said) else 0.0)
        while not slurm.cancelled_from_outside(shown := _terminal_said(lg.gen)) and time.monotonic() < deadline:
            time.sleep(SETTLE_POLL)
        return slurm.cancelled_from_outside(shown)

    def _node_failed_end(self, lg: LiveGen) -> str:
        """How a step whose node failed, and whose wrapper recorded nothing, ended (off the
        loop). Slurm says NODE_FAIL when the node's slurmd stops answering: that is no word
        that its worker stopped — with slurmd gone, nothing on the node ends the step, and the
        worker runs on to its end. One whose wrapper claimed it, with no word of Slurm's hand
        in srun's (slurmstepd's CANCELLED, a task killed), may still run there: ``node_failed``,
        unknown, never run again by itself (finished work run twice is the worst outcome). One
        that never started, or that Slurm was seen to end, was lost: ``executor_lost``."""
        claim = generation_files.claim_or_planted(lg.gen)
        if claim is None or claim.by_supervisor or slurm.slurm_hand_shown(self._step_end_said(lg)):
            return "executor_lost"
        return "node_failed"

    def _step_end_said(self, lg: LiveGen) -> str:
        """What srun said of the step (off the loop): read again, while its ``srun`` runs on
        (the wrapper's sidecar may show before srun has written its task's end), for up to
        ``SETTLE_WAIT`` until it has said how the step's task ended."""
        deadline = time.monotonic() + SETTLE_WAIT
        said = srun_said(lg.gen)
        while not slurm.step_end_said(said) and time.monotonic() < deadline and self._srun_alive(lg):
            time.sleep(SETTLE_POLL)
            said = srun_said(lg.gen)
        return said

    def _allocation_end_read(self, job: str) -> bool:
        """Whether the run's allocation ``job`` ended (off the loop): its end state, once it
        has settled, goes in ``ended_allocations`` (None: Slurm no longer knows it)."""
        state = self._settled_state(job, slurm.allocation_name(self.run_id), running_settles=True)
        if state in slurm.ACTIVE:
            return False
        self.ended_allocations[job] = state
        return True

    def _settled_state(self, job_id: str, name: str, *, running_settles: bool = False) -> str | None:
        """The state of our job ``job_id`` named ``name`` (``Slurm.state``: None once Slurm no
        longer knows it), read again for up to ``SETTLE_WAIT`` while it is still being ended
        (``RUNNING`` too, unless ``running_settles``: an allocation that runs is no ending one).
        Off the loop: Slurm has no event for a job's end state."""
        state = self.cluster.state(job_id, name=name)
        deadline = time.monotonic() + SETTLE_WAIT
        while state in slurm.ACTIVE and not (running_settles and state == "RUNNING") and \
                time.monotonic() < deadline:
            time.sleep(SETTLE_POLL)
            state = self.cluster.state(job_id, name=name)
        return state

    def _step(self, lg: LiveGen) -> str | None:
        """The step's ``job.step`` id: as its wrapper's launch heartbeat names it (read here,
        off the loop, when not yet), else as squeue lists it; None while Slurm has not
        started it."""
        lg.read_step()
        if lg.step is not None:
            return lg.step
        if lg.job_id is None:
            job = self.cluster.jobs(self.run_id, allocation=self.allocation).get((lg.gen.slot, lg.gen.gen))
            lg.job_id = job.id if job else None
        return lg.job_id

    # ----- ending --------------------------------------------------------------------------

    def end(self, lg: LiveGen, grace: float, now: Callable[[], float],
            delivered: Callable[[float | None, bool], None]) -> None:
        """SIGTERM to the step's worker now, ``scancel`` of the step after ``grace``; a step
        still queued is withdrawn at once with a plain ``scancel`` (Slurm refuses to signal
        it, and nothing of it runs). The TERM is sent on the step's node (``step_signal``),
        which tells whether it reached the worker running and whether the worker had a
        handler for it; when that cannot be said there (nothing of the worker found running,
        no node known yet, ``srun`` refused), ``scancel --signal=TERM`` sends it to the whole
        step, taken as caught. ``delivered`` hears, on the loop, when the TERM was sent to a
        step that runs and whether it was caught (None: it was not sent). A failing Slurm
        call is a warning (once) and is made again every ``LADDER_RETRY`` until it works or
        the step has ended by itself (``delivered`` hears then that nothing was sent): the
        grace's ``scancel`` comes ``grace`` after the TERM was sent. (*Decision*: a timeout
        due while the controller did not answer had both calls fail once and never again —
        the worker ran on and the run never ended; and the ``scancel``, when it came after
        the failed TERM, recorded the step it ended ``lost (no_exit_record)``, not
        ``timed_out``: its TERM counted as never sent.)"""
        # its own job is ended by id and name: a restarted controller may have issued its id again
        name = slurm.job_name(self.run_id, lg.task.id, lg.gen.slot, lg.gen.gen) if self.allocation is None else None

        def target(step: str) -> str:
            # A step of a job of its own is signalled and cancelled through its job: Slurm ends
            # every step of it on its node. A controller killed outright comes back knowing
            # the job (saved as it was granted) and not its step (saved only with a later
            # change): a `scancel` of JOB.STEP is then "not found", and nothing else ends it
            return step.partition(".")[0] if name is not None else step

        def term() -> tuple[float, bool] | None:
            step = self._step(lg)
            if lg.step is None and not lg.step_running and (lg.withheld or generation_files.take_claim(lg.gen)):
                # queued: withdrawn, and should Slurm start it meanwhile, its wrapper finds its
                # claim taken and runs nothing. Its job is cancelled, and its srun, our child,
                # which nothing of it runs under, is ended too: a step squeue does not list (it
                # waits inside the allocation), or a job a restarted controller forgot — its
                # srun waits for ever for a grant, and a cancel of the run waited with it
                if step is not None:
                    self.cluster.cancel(step, name=name)
                end_srun(lg.gen, lg.pid if lg.child else None)
                return None
            if step is None:
                return None
            where = (lg.node, lg.step) if lg.node is not None and lg.step is not None else None
            return term_step(self.cluster, self.run_id, lg.gen, target(step), where, now, name=name)

        def kill() -> None:
            if (step := self._step(lg)) is not None:
                self.cluster.cancel(target(step), name=name)

        failed: set[str] = set()  # the calls that failed (said once each)

        def ended() -> bool:  # by itself, while a call of the ladder failed
            return lg.collected or lg.phase is GenPhase.END_SEEN or lg.phase is GenPhase.ORPHANED

        def answered(done: Done[tuple[float, bool] | None]) -> None:
            if done.error is not None and not ended():
                if "term" not in failed:
                    failed.add("term")
                    self.on.warn(external.EXECUTOR.failed, f"slurm: cannot signal the step of task {lg.task.name!r} "
                                                       f"({done.error}); asked again every {LADDER_RETRY:g}s",
                                 lg.task)
                self.timers.after(LADDER_RETRY, lambda: self.calls.submit(term, answered) if not ended()
                                  else answered(Done()))  # (nothing was sent)
                return
            sent_at, caught = done.value if done.value is not None else (None, True)
            delivered(sent_at, caught)
            self.timers.after(grace, lambda: self.calls.submit(kill, cancelled))

        def cancelled(done: Done[None]) -> None:
            if done.error is not None and not lg.collected:
                if "kill" not in failed:
                    failed.add("kill")
                    self.on.warn(external.EXECUTOR.failed, f"slurm: cannot cancel the step of task {lg.task.name!r} "
                                                       f"({done.error}); asked again every {LADDER_RETRY:g}s",
                                 lg.task)
                self.timers.after(LADDER_RETRY, lambda: None if lg.collected else self.calls.submit(kill, cancelled))

        self.calls.submit(term, answered)

    def when_gone(self, lg: LiveGen, then: Callable[[], None], waited: float = 0.0) -> None:
        """Call ``then`` once Slurm no longer lists the step (or after ``GONE_WAIT``)."""
        def still() -> bool:
            return (lg.gen.slot, lg.gen.gen) in self.cluster.jobs(self.run_id, allocation=self.allocation)

        def seen(done: Done[bool]) -> None:
            if done.error is None and done.value and waited < GONE_WAIT:
                self.timers.after(0.2, lambda: self.when_gone(lg, then, waited + 0.2))
            else:
                then()

        self.calls.submit(still, seen)

    def close(self) -> list[str]:
        """The run is over (blocking): cancel what is left of its steps once those that ended
        have had ``SETTLE_WAIT`` to leave Slurm's queue, then its allocation. Returns the job
        ids cancelled."""
        try:
            left = self.cluster.jobs(self.run_id, allocation=self.allocation)
            deadline = time.monotonic() + SETTLE_WAIT
            while left and time.monotonic() < deadline:  # steps whose wrappers ended, still winding down
                time.sleep(0.1)
                left = self.cluster.jobs(self.run_id, allocation=self.allocation)
            for job in left.values():
                self.cluster.cancel(job.id)
            # the allocation, granted or still queued (its salloc exits once it is cancelled)
            for job_id in {self.allocation, self.request[0] if self.request else None} - {None, self.host_job}:
                self.cluster.cancel(str(job_id))
            if self.request is not None:
                slurm.end_process(self.request[1])
        except BackendError as e:
            self.on.warn(e.code, f"slurm: cannot end what is left of the run's steps: {e}", None)
            return []
        return [job.id for job in left.values()]
