"""Slurm, as the Slurm executor uses it (SPEC §11): how a generation's wrapper becomes a job
step, and what the cluster says of the run's steps.

Every generation is one ``srun`` with one task: its own job, whose name carries the run, the
task and the generation (``zsw.<run-id>.<task-id>.<slot>.<gen>``, ``job_name``), so that a
supervisor — a resumed one too — finds its steps with ``squeue`` by name, without accounting
(``sacct``) being configured. With ``--slurm-alloc`` the steps run inside one allocation the
supervisor makes first (``salloc --no-shell``), each ``srun --jobid=J --exact``: no scheduling
round per task. Every call goes through ``external.run`` (a timeout, typed errors:
``executor_missing``, ``executor_call_timeout``, ``executor_call_failed``).

What is never trusted: ``srun``'s own exit status (it can exit 0 after losing its step); the
wrapper's exit sidecar is the outcome, and Slurm's job state only explains an end the wrapper
did not record, or recorded as a death by signal (``classify``): a code the worker exited with
stands whatever became of its node.
"""

from __future__ import annotations

import getpass
import re
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zellij_swarm import external
from zellij_swarm.config import slurm as resources_
from zellij_swarm.exc import BackendError

CALL_TIMEOUT = 10.0
# A job Slurm still has: queued, starting, running or being ended. Anything else is over.
ACTIVE = frozenset({"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING",
                    "SIGNALING", "STAGE_OUT", "RESV_DEL_HOLD", "REQUEUE_FED", "REQUEUE_HOLD", "SPECIAL_EXIT"})
_NAME = re.compile(r"zsw\.(?P<run>[0-9A-Za-z-]+)\.(?P<task>t\d+)\.(?P<slot>\d+)\.(?P<gen>\d+)\Z")


def job_name(run_id: str, task_id: str, slot: int, gen: int) -> str:
    return f"zsw.{run_id}.{task_id}.{slot}.{gen}"


def allocation_name(run_id: str) -> str:
    """The job name of a run's one allocation (``--slurm-alloc``)."""
    return f"zsw.{run_id}.alloc"


def run_of(name: str) -> tuple[str, int, int] | None:
    """(run id, slot, generation) of one of our job names; None for any other job."""
    m = _NAME.match(name)
    return (m["run"], int(m["slot"]), int(m["gen"])) if m else None


@dataclass(frozen=True)
class Job:
    id: str  # "1234", or "1234.5" for a step inside the swarm's allocation
    name: str
    state: str  # Slurm's: PENDING, RUNNING, ...
    reason: str  # why it waits (Resources, Priority, ...), "None" when it does not

    @property
    def active(self) -> bool:
        return self.state in ACTIVE

    @property
    def running(self) -> bool:
        return self.state in ("RUNNING", "COMPLETING", "SIGNALING")


# Job states in which Slurm, not the worker, ended the step: its node failed or went away, or
# another job took its place — the work was lost, not done badly, whatever the wrapper saw
# (slurmd ends the step's processes with SIGTERM first).
NODE_LOST = frozenset({"NODE_FAIL", "BOOT_FAIL", "PREEMPTED"})
CANCELLED = frozenset({"CANCELLED", "REVOKED"})  # a cancel from outside the run
# States of a batch job that is ending or being requeued while its batch step still runs: the
# steps Slurm ends meanwhile go with the job
JOB_ENDING = frozenset({"COMPLETING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "PENDING", *NODE_LOST})


UNKNOWN_JOB = "Invalid job id specified"  # what scontrol says of a job its controller does not know


def classify(state: str | None, *, recorded_signal: bool = False) -> str | None:
    """The reason (``states.REASON_STATUS`` says its status) of a step whose wrapper did not
    record its exit, or recorded a death by signal (``recorded_signal``), from the job's end
    state: its time limit, a cancel from outside, its memory, its node. Otherwise a death by
    signal the wrapper recorded stands (None: Slurm says no more than the wrapper did) — but a
    job Slurm no longer knows (None) was lost with it (``executor_lost``), recorded or not (the
    caller first rules out a worker srun says exited by itself: ``ended_by_slurm``). With no
    record, one that simply failed or completed is what a wrapper gone without its record is on
    this machine (``no_exit_record``). ``state`` must be the job's as Slurm answered: a caller
    with no job to ask about does not call this."""
    if state == "TIMEOUT":
        return "timeout"
    if state in CANCELLED:
        return "executor_cancelled"
    if state == "OUT_OF_MEMORY":
        return "out_of_memory"
    if state in NODE_LOST or state is None:
        # a job Slurm no longer knows (its controller restarted without it) has its steps
        # killed as orphans: a death by signal then is Slurm's doing, even when the wrapper
        # outlived its worker long enough to record it
        return "executor_lost"
    if recorded_signal:
        return None
    return "no_exit_record"


# What srun's stderr (a generation's executor log) says of its step's end. Slurm's own hand:
# slurmstepd's "*** STEP 171.0 ON n2 CANCELLED AT … ***" (or JOB), srun's "task 0: Killed" for a
# task a signal ended. A wrapper outlives every signal aimed at its worker and exits with the
# worker's status: srun's "task 0: Exited with exit code 143" says it ran to its end by itself.
_SLURM_HAND = re.compile(r"\*\*\* (?:STEP|JOB) \S+ ON \S+ CANCELLED|: task \d+: (?!Exited with exit code)")
_TASK_EXITED = re.compile(r": task \d+: Exited with exit code \d+")
# slurmstepd's word of a cancel nobody but a person asked for: a `scancel` of the step or its
# job from outside (Slurm's own say "… CANCELLED AT … DUE TO TIME LIMIT", "… NODE FAILURE").
_CANCELLED_FROM_OUTSIDE = re.compile(r"\*\*\* (?:STEP|JOB) \S+ ON \S+ CANCELLED AT \S+ \*\*\*")


def ended_by_slurm(said: str) -> bool:
    """Whether a headless step's srun's words (``said``) leave it open that Slurm ended the
    step: they show its hand, or say nothing of the step's task (what is not known is not ruled
    out) — or the wrapper's shell said something there too. Its shell reports a worker's death
    by a signal ("Killed", "Terminated") on its stderr, which srun passes on beside its own
    words, and nothing for a worker that exited with a code: a wrapper that outlived an
    orphan's SIGKILL of its worker exits 137 as one whose worker exited 137."""
    if _SLURM_HAND.search(said) or not _TASK_EXITED.search(said):
        return True
    return any(line.strip() and not line.startswith(("srun:", "slurmstepd")) for line in said.splitlines())


def slurm_hand_shown(said: str) -> bool:
    """Whether srun's words (``said``) show Slurm's own hand in its step's end: slurmstepd's
    CANCELLED, or srun's word of a task a signal ended."""
    return bool(_SLURM_HAND.search(said))


def cancelled_from_outside(said: str) -> bool:
    """Whether srun's words (``said``) say the step, or its job, was cancelled from outside
    the run (``scancel``): slurmstepd's CANCELLED with no reason of Slurm's own after it."""
    return bool(_CANCELLED_FROM_OUTSIDE.search(said))


def step_end_said(said: str) -> bool:
    """Whether srun's words say how the step's task ended (its exit, or Slurm's hand)."""
    return bool(_SLURM_HAND.search(said) or _TASK_EXITED.search(said))


class Slurm:
    """The cluster, through its commands (``SLURM_CONF`` and ``PATH`` from ``env``)."""

    def __init__(self, env: Mapping[str, str] | None = None, *, timeout: float = CALL_TIMEOUT) -> None:
        self.env = dict(env) if env is not None else None
        self.timeout = timeout
        self.user = getpass.getuser()

    def _run(self, argv: Sequence[str], *, check: bool = True, timeout: float | None = None) -> external.CmdResult:
        return external.run(argv, timeout=timeout or self.timeout, env=self.env, check=check, faults=external.EXECUTOR)

    def prefix(self, name: str, resources: Mapping[str, Any], *, pty: bool, allocation: str | None) -> tuple[str, ...]:
        """``srun`` before a wrapper's argv: one task on one node, named, its resources, a
        real TTY on the compute node when it is shown in a live pane."""
        where = [f"--jobid={allocation}", "--exact"] if allocation else []
        return ("srun", "--ntasks=1", "--nodes=1", f"--job-name={name}", "--quiet", "--kill-on-bad-exit=1",
                *where, *resources_.srun_options(resources), *(["--pty"] if pty else []))

    def jobs(self, run_id: str, *, allocation: str | None = None) -> dict[tuple[int, int], Job]:
        """The run's jobs Slurm still has, by (slot, generation): one ``squeue`` (of the
        allocation's steps with ``allocation``)."""
        argv = ["squeue", "--noheader", f"--user={self.user}", "--format=%i|%j|%T|%r"]
        if allocation:
            argv = ["squeue", "--noheader", "--steps", f"--jobs={allocation}", "--format=%i|%j|RUNNING|None"]
        out: dict[tuple[int, int], Job] = {}
        for line in self._run(argv).lines:
            parts = line.strip().split("|")
            if len(parts) != 4:
                continue
            job = Job(*parts)
            where = run_of(job.name)
            if where is not None and where[0] == run_id:
                out[(where[1], where[2])] = job
        return out

    def steps(self, job_ids: Iterable[str]) -> dict[str, set[str]]:
        """The steps Slurm lists in each of these jobs: job id -> the names of its steps (one
        ``squeue --steps``; a job with none, or one Slurm no longer has, is left out). Raises
        ``BackendError`` when Slurm does not answer."""
        wanted = sorted(set(job_ids))
        out: dict[str, set[str]] = {}
        if not wanted:
            return out
        res = self._run(["squeue", "--noheader", "--steps", f"--jobs={','.join(wanted)}", "--format=%i|%j"])
        for line in res.lines:
            step, _, name = line.strip().partition("|")
            out.setdefault(step.split(".")[0], set()).add(name)
        return out

    def state(self, job_id: str, *, name: str | None = None) -> str | None:
        """A job's state, ended ones included while Slurm remembers them (``MinJobAge``). A
        job's, never a step's: Slurm keeps no end state of a step's own. With ``name``: None
        when the id is now another job's (``_named``). None means Slurm said it does not know
        the job; a call that failed otherwise (a controller that does not answer) raises."""
        res = self._run(["scontrol", "--oneliner", "show", "job", job_id], check=False)
        if res.returncode != 0 and UNKNOWN_JOB not in res.stderr:
            said = (res.stderr.strip().splitlines() or [f"exit status {res.returncode}"])[0]
            raise BackendError(external.EXECUTOR.failed, f"scontrol show job {job_id}: {said}", stderr=res.stderr)
        m = re.search(r"\bJobState=(\S+)", res.stdout)
        if name is not None and re.search(rf"\bJobName={re.escape(name)}(\s|$)", res.stdout) is None:
            return None
        return m.group(1) if m else None

    def signal(self, job_id: str, sig: str, *, name: str | None = None) -> None:
        """Send ``sig`` to every process of the job's steps (their traps run); with ``name``,
        only if the job still has that name (``_named``)."""
        self._run(["scancel", f"--signal={sig}", *_named(name), job_id], check=False)

    def run_beside(self, job_id: str, node: str, argv: Sequence[str], *, timeout: float | None = None) -> str:
        """``argv`` run on ``node`` as a step of its own in the running job ``job_id``, beside
        its steps (``--overlap``: it takes none of their resources and waits for none): what
        it printed, whatever its status — a job of one generation ends, and this step with
        it, as soon as that generation's wrapper does, which may be at once."""
        return self._run(["srun", f"--jobid={job_id}", "--overlap", f"--nodelist={node}", "--nodes=1",
                          "--ntasks=1", "--quiet", *argv], check=False, timeout=timeout).stdout

    def cancel(self, job_id: str, *, name: str | None = None) -> None:
        """End the job (or step): Slurm kills its whole process tree on the node (with
        ``name``: only if the job still has that name)."""
        self._run(["scancel", *_named(name), job_id], check=False)

    def request_allocation(self, run_id: str, tasks: int, resources: Mapping[str, Any],
                           log: Path) -> tuple[str, subprocess.Popen[bytes]]:
        """Ask for one allocation for the whole swarm (``--slurm-alloc``): its job id, and the
        ``salloc --no-shell`` that asked. salloc blocks until Slurm grants it, which on a busy
        cluster takes as long as it takes: so it runs as a process of its own (its output in
        ``log``), its job id read from its first line within the call timeout; ``job_state``
        follows the job, ``cancel`` withdraws it (salloc then exits)."""
        argv = ["salloc", "--no-shell", f"--ntasks={tasks}", f"--job-name={allocation_name(run_id)}",
                *resources_.allocation_options(resources)]  # the ``extra`` words are each step's
        with open(log, "wb") as out:
            try:
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=self.env,
                                        start_new_session=True)  # a Ctrl-C of the terminal is the supervisor's
            except FileNotFoundError:
                raise BackendError(external.EXECUTOR.missing, "salloc: not found on PATH") from None
        deadline = time.monotonic() + self.timeout
        while True:
            # whether it exited, asked before its log is read: ``--no-shell`` exits as soon as
            # the allocation is granted, and one that exited has written all it will
            exited = proc.poll() is not None
            if (m := re.search(rb"(?:Pending|Granted) job allocation (\d+)", log.read_bytes())) is not None:
                break
            if exited or time.monotonic() > deadline:
                end_process(proc, wait=0.0)
                said = log.read_bytes().decode(errors="replace").strip().splitlines()
                if exited:
                    raise BackendError(external.EXECUTOR.failed,
                                       said[-1] if said else f"salloc: exit {proc.returncode}")
                raise BackendError(external.EXECUTOR.timeout, f"salloc: no job allocation within {self.timeout:g}s")
            time.sleep(0.05)
        return m.group(1).decode(), proc

    def accounting(self, jobs: Iterable[str]) -> dict[str, tuple[str, float]] | None:
        """What Slurm accounting recorded of ``jobs`` (``job`` or ``job.step`` ids), by id: each
        one's end state and elapsed seconds, from one ``sacct``; None when accounting is not
        configured or does not answer (``doctor`` says which)."""
        wanted = sorted({job.split(".")[0] for job in jobs})
        if not wanted:
            return {}
        try:
            res = self._run(["sacct", "--noheader", "--parsable2", "--allusers", "--format=JobID,State,ElapsedRaw",
                             f"--jobs={','.join(wanted)}"], check=False)
        except BackendError:
            return None
        if res.returncode != 0:
            return None
        out = {}
        for line in res.lines:
            parts = line.split("|")
            if len(parts) == 3 and parts[1] and parts[2].isdigit():
                out[parts[0]] = (parts[1].split()[0], float(parts[2]))  # "CANCELLED by 0": its word
        return out

    def named(self, name: str, *, ended: bool = False) -> list[tuple[str, str]]:
        """Our jobs of that name Slurm lists: (id, state) each; with ``ended``, those that
        ended too, while Slurm remembers them (``MinJobAge``)."""
        res = self._run(["squeue", "--noheader", f"--user={self.user}", f"--name={name}", "--format=%i|%T",
                         *(["--states=all"] if ended else [])])
        return [(parts[0], parts[1]) for line in res.lines if len(parts := line.strip().split("|")) == 2]

    def job_state(self, job_id: str) -> tuple[str, str] | None:
        """A job's state and why it waits (``None`` when it does not), while Slurm lists it."""
        res = self._run(["squeue", "--noheader", f"--jobs={job_id}", "--format=%T|%r"], check=False)
        parts = res.stdout.strip().split("|")
        return (parts[0], parts[1]) if len(parts) == 2 else None

    def probe(self, node: str, argv: Sequence[str], *, timeout: float) -> str | None:
        """Run ``argv`` as a step on ``node`` (``doctor``); None when it ran, else why not."""
        try:
            res = self._run(["srun", f"--nodelist={node}", "--nodes=1", "--ntasks=1", "--job-name=zsw.doctor",
                             "--quiet", *argv], check=False, timeout=timeout)
        except BackendError as e:
            return str(e)
        return None if res.returncode == 0 else (res.stderr.strip().splitlines() or [f"exit {res.returncode}"])[-1]

    def partitions(self) -> list[str]:
        """The cluster's partitions (the default one marked ``*``)."""
        return [line.strip() for line in self._run(["sinfo", "--noheader", "--format=%P"]).lines]

    def describe(self) -> dict[str, Any]:
        """For ``doctor``: version, cluster, partitions and nodes."""
        version = self._run(["sinfo", "--version"]).stdout.strip()
        cluster = self._run(["scontrol", "show", "config"]).stdout
        m = re.search(r"^ClusterName\s*=\s*(\S+)", cluster, re.M)
        parts = [line.split("|") for line in self._run(["sinfo", "--noheader", "--format=%P|%a|%D|%T"]).lines]
        nodes = [line.split("|") for line in self._run(["sinfo", "--noheader", "--Node", "--format=%N|%T"]).lines]
        return {"version": version, "cluster": m.group(1) if m else None,
                "partitions": [{"name": p[0], "available": p[1], "nodes": p[2], "state": p[3]} for p in parts
                               if len(p) == 4],
                "nodes": sorted({(n[0], n[1]) for n in nodes if len(n) == 2})}


def _named(name: str | None) -> list[str]:
    """scancel's filter on the job's name: a controller that restarted and forgot its newest
    jobs issues their ids again, and an id we knew may now be someone else's job."""
    return [f"--name={name}"] if name else []


def end_process(proc: subprocess.Popen[bytes], wait: float = 5.0) -> None:
    """Wait ``wait`` seconds for one of our Slurm clients to exit (a cancelled salloc does),
    then kill it."""
    try:
        proc.wait(timeout=wait)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
