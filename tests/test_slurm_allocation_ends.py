"""The Slurm executor's rules for an allocation (``--slurm-alloc``) that ended from outside,
and for a step Slurm never listed, against a stand-in cluster whose job states the test sets,
and a call runner that answers at once — so that the order of events a real cluster gives only
now and then (found by adversaries' scripts) is made on demand:

- a step explained *after* the run asked for a new allocation answers for the allocation it
  was given, not the new one (it was classified by the new one: ``failed (143)``, an attempt
  spent, 2 runs in 3);
- several steps of one ended allocation explained together tell the supervisor once, so it
  asks for one new allocation (it asked for one each, and a granted one was left holding the
  nodes after the run);
- a step whose worker exited 143 by itself (srun says its task exited) while the controller was
  down keeps its code when the allocation turns out forgotten (it was `lost` and ran again);
- a step squeue never listed while its srun waits on is withdrawn and runs again (a controller
  restarted without its job state issued an id again, and the srun of the job it forgot, ending,
  ended the new one before squeue listed it: its srun waited for ever, 3 restarts in 6)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest
from swarmtest import wait_until

from zellij_swarm.backends.base import LaunchRequest
from zellij_swarm.calls import Done
from zellij_swarm.config import settings
from zellij_swarm.config.swarmfile import TaskSpec
from zellij_swarm.engine.live import LiveGen
from zellij_swarm.engine.remote import LADDER_RETRY, SIDECAR_GRACE, SUBMIT_GRACE, RemoteEvents, SlurmExecutor
from zellij_swarm.engine.timers import Timers
from zellij_swarm.exc import BackendError
from zellij_swarm.records import generation_files
from zellij_swarm.records.generation_files import GenPaths
from zellij_swarm.records.task import TaskRecord
from zellij_swarm.worker import slurm
from zellij_swarm.worker.wrapper import PaneMode


class Cluster:
    """Slurm as the test says it is: each job's state (None: Slurm no longer knows it)."""

    def __init__(self, states: dict[str, str | None]) -> None:
        self.states = states

    def state(self, job_id: str, *, name: str | None = None) -> str | None:
        return self.states.get(job_id)


class AtOnce:
    """A call runner that makes each call as it is submitted and answers on the spot."""

    def submit(self, call: Callable[[], Any], then: Callable[[Done[Any]], None] | None = None) -> None:
        try:
            done: Done[Any] = Done(value=call())
        except Exception as e:  # (as the real runner hands it back)
            done = Done(error=e)
        if then is not None:
            then(done)


def executor(cluster: Cluster, told: list[tuple[str, str | None]], *, alloc: bool = True,
             live: dict[int, LiveGen] | None = None, clock: Callable[[], float] = lambda: 0.0,
             warned: list[str] | None = None) -> SlurmExecutor:
    def ignored(*_: object) -> None:
        return None

    events = RemoteEvents(running=ignored, seen=ignored, gone=ignored, queued_too_long=ignored,
                          allocation_ended=lambda job, state: told.append((job, state)),
                          warn=lambda code, message, task: (warned if warned is not None else []).append(message))
    return SlurmExecutor(cluster, run_id="20261205-000000-abcdef",  # type: ignore[arg-type]
                         settings=settings.resolve({"slurm_alloc": "true"} if alloc else {}, {}),
                         calls=AtOnce(),  # type: ignore[arg-type]
                         timers=Timers(clock), live=live or {}, clock=clock, wallclock=clock, on=events)


def step(slot: int, allocation: str) -> LiveGen:
    gen = GenPaths(Path(f"/nonexistent/slot-{slot}/gen-1"), slot, 1)
    task = TaskRecord(spec=TaskSpec(name=f"t{slot}", cmd="true"), id=f"t{slot}", order=slot, timeout=None,
                      retries=1, idle_timeout=None)
    lg = LiveGen(task, gen, LaunchRequest(gen, slot, f"t{slot}"), backfill=False, remote=True)
    lg.allocation = allocation
    lg.submitted_at = 0.0
    return lg


def explained(ex: SlurmExecutor, lg: LiveGen, *, recorded_signal: bool = True) -> str | None:
    said: list[str | None] = []
    ex.explain(lg, said.append, recorded_signal=recorded_signal)
    [reason] = said
    return reason


def test_a_step_explained_after_the_run_asked_anew_answers_for_the_allocation_it_was_given() -> None:
    told: list[tuple[str, str | None]] = []
    cluster = Cluster({"100": "NODE_FAIL", "200": "RUNNING"})
    ex = executor(cluster, told)
    ex.allocation = "100"
    first, late = step(1, "100"), step(2, "100")
    assert explained(ex, first) == "executor_lost"
    assert told == [("100", "NODE_FAIL")]
    ex.ask_again()  # what the supervisor does when told: a new allocation, granted
    ex.allocation = "200"
    # the other step's srun ends only now: its end is the old allocation's, not a failure of its own
    assert explained(ex, late) == "executor_lost"
    assert late.allocation_ended
    assert told == [("100", "NODE_FAIL")]  # the old one is not told again, the new one is not ended
    assert not ex.holding


def test_steps_of_one_ended_allocation_explained_together_tell_it_once() -> None:
    told: list[tuple[str, str | None]] = []
    ex = executor(Cluster({"100": "CANCELLED"}), told)
    ex.allocation = "100"
    reasons = [explained(ex, step(slot, "100")) for slot in (1, 2, 3)]
    assert reasons == ["executor_cancelled"] * 3
    assert told == [("100", "CANCELLED")]
    assert ex.holding  # nothing more is dispatched into it


def test_an_allocation_slurm_forgot_is_lost_not_cancelled() -> None:
    told: list[tuple[str, str | None]] = []
    ex = executor(Cluster({}), told)  # Slurm no longer knows job 100
    ex.allocation = "100"
    assert explained(ex, step(1, "100"), recorded_signal=False) == "executor_lost"
    assert told == [("100", None)]


def test_a_step_squeue_never_listed_while_its_srun_waits_on_is_withdrawn_and_runs_again(tmp_path: Path) -> None:
    submitted = 100.0  # (the monotonic clock)
    now = [submitted]
    lg = step(1, "")
    lg.allocation, lg.gen = None, GenPaths(tmp_path / "slot-1" / "gen-1", 1, 1)
    lg.gen.dir.mkdir(parents=True)
    srun = subprocess.Popen(["sleep", "60"])  # its srun, waiting for a grant that never comes
    try:
        lg.child, lg.pid, lg.remote_since = True, srun.pid, submitted
        warned: list[str] = []
        ex = executor(Cluster({}), [], alloc=False, live={1: lg}, clock=lambda: now[0], warned=warned)
        for after in (1.0, SUBMIT_GRACE - 0.5, SUBMIT_GRACE + 0.5, SUBMIT_GRACE + SIDECAR_GRACE - 0.5):
            now[0] = submitted + after
            ex._seen(Done(value={}))  # squeue answers, without it
            assert not lg.forgotten, after  # (a step is listed a moment after its submission)
        now[0] = submitted + SUBMIT_GRACE + SIDECAR_GRACE + 1.0
        ex._seen(Done(value={}))
        assert lg.forgotten and warned == ["slurm: the step of task 't1' was never listed by Slurm (its controller "
                                           "restarted without it); withdrawn, the task runs again"]
        claim = generation_files.claim_or_planted(lg.gen)
        assert claim is not None and claim.by_supervisor  # should Slurm start it after all, it runs nothing
        assert srun.wait(timeout=30) == -15  # its srun was ended
    finally:
        srun.kill()
        srun.wait()


# srun's words of a step's end, and whether they leave it open that Slurm ended it
_WORDS = (("srun: error: n1: task 0: Exited with exit code 143\n", False),
          ("srun: error: n1: task 0: Killed\n", True),
          ("srun: error: n1: task 0: Exited with exit code 137\nKilled\n", True),  # the wrapper's shell: a signal
          ("slurmstepd: error: *** STEP 5.3 ON n1 CANCELLED AT 2026-12-05T12:00:00 ***\n"
           "srun: error: n1: task 0: Exited with exit code 143\n", True))


def forgotten_step(tmp_path: Path, said: str, allocation: str, *, pane: bool = False) -> LiveGen:
    """A step of a job or allocation Slurm forgot, srun having said ``said`` (its executor log)."""
    lg = step(1, allocation)
    lg.gen = GenPaths(tmp_path / f"case-{len(list(tmp_path.iterdir()))}", 1, 1)
    lg.gen.dir.mkdir(parents=True)
    lg.gen.executor_log.write_text(said)
    lg.step = "5.0"  # (as its launch heartbeat names it)
    if pane:
        lg.pane = PaneMode("TMUX_PANE", "", tmp_path / "env")
    return lg


def test_a_step_of_a_forgotten_allocation_whose_task_exited_by_itself_keeps_its_code(tmp_path: Path) -> None:
    """slurmctld killed outright forgets the allocation: a step whose wrapper recorded a death
    by signal was `lost` and ran again — also one whose worker exited 143 by itself while the
    controller was down (an adversary: 9 tasks run twice in 2 runs). srun's words tell."""
    for said, slurm_hand in _WORDS:
        told: list[tuple[str, str | None]] = []
        ex = executor(Cluster({"100": None}), told)
        ex.allocation = "100"
        lg = forgotten_step(tmp_path, said, "100")
        assert explained(ex, lg) == ("executor_lost" if slurm_hand else None), said
        assert lg.allocation_ended and told == [("100", None)]
        assert explained(ex, forgotten_step(tmp_path, said, "100"), recorded_signal=False) == "executor_lost"
        pane = "executor_lost" if slurm.slurm_hand_shown(said) else "job_forgotten"
        assert explained(ex, forgotten_step(tmp_path, said, "100", pane=True)) == pane, said
        assert explained(ex, forgotten_step(tmp_path, said, "100", pane=True), recorded_signal=False) == \
            "executor_lost"


def test_a_step_of_a_forgotten_job_whose_task_exited_by_itself_keeps_its_code(tmp_path: Path) -> None:
    """The same of a step's own job (no ``--slurm-alloc``): Slurm no longer knows job 5. A
    step with no record is lost whatever srun said. A pane's, whose wrapper's words go to its
    terminal, is lost where srun's words show Slurm's hand, and otherwise unknown
    (``job_forgotten``): it was lost, and ran again, also when its worker had exited 143 by
    itself."""
    for said, slurm_hand in _WORDS:
        ex = executor(Cluster({}), [], alloc=False)
        assert explained(ex, forgotten_step(tmp_path, said, "")) == ("executor_lost" if slurm_hand else None), said
        assert explained(ex, forgotten_step(tmp_path, said, ""), recorded_signal=False) == "executor_lost"
        pane = "executor_lost" if slurm.slurm_hand_shown(said) else "job_forgotten"
        assert explained(ex, forgotten_step(tmp_path, said, "", pane=True)) == pane, said
        assert explained(ex, forgotten_step(tmp_path, said, "", pane=True), recorded_signal=False) == "executor_lost"




# srun's words of steps Slurm ended for another job that had their id: slurmstepd's FAILED (or
# CANCELLED, as for a cancel from outside), the wrapper's shell's "Terminated" — or nothing of
# the task (its wrapper SIGKILLed with it)
_ENDED_FOR_ANOTHER = ("slurmstepd-n2: error: *** STEP 5.0 ON n2 FAILED (non-zero exit code or other failure mode) ***\n"
                      "srun: error: n2: task 0: Exited with exit code 143\nTerminated\n",
                      "slurmstepd-n2: error: *** STEP 5.0 ON n2 CANCELLED AT 2026-12-06T09:12:41 ***\n"
                      "srun: error: n2: task 0: Exited with exit code 143\nTerminated\n",
                      "")


def test_a_step_whose_job_id_another_step_of_the_run_held_meanwhile_was_lost(tmp_path: Path) -> None:
    """slurmctld killed outright forgets its newest jobs and issues their ids again: job 5,
    generation A's (its step runs on, on n1), becomes B's. Slurm then ends B's job for A's sake
    (A's step registers on the wrong node): FAILED, JobLaunchFailure, ExitCode 0:9, B's step
    killed with its worker started. B was `lost (no_exit_record)`, or `failed 143`, or
    `cancelled` — its attempt spent, the task's work never done (an adversary, 3 in 3). Two
    generations of the run under one job id at once is the evidence: `executor_lost`, run
    again without using an attempt — whether A is still followed or was seen to end after B's
    submission. A worker srun says exited by itself keeps its code."""
    for said in _ENDED_FOR_ANOTHER:
        for a_ended_at in (None, 3.0):  # A followed still, or seen to end since B's submission (at 1.0)
            other = step(2, "")
            other.allocation, other.job_id = None, "5"
            ex = executor(Cluster({"5": "FAILED"}), [], alloc=False, live={2: other} if a_ended_at is None else {})
            if a_ended_at is not None:
                ex.step_over(other.gen, "5", a_ended_at)
            b = forgotten_step(tmp_path, said, "")
            b.allocation, b.submitted_at = None, 1.0
            recorded = bool(said)  # (its wrapper recorded the SIGTERM; SIGKILLed with it, nothing)
            assert explained(ex, b, recorded_signal=recorded) == "executor_lost", (said, a_ended_at)
    ex = executor(Cluster({"5": "FAILED"}), [], alloc=False)
    ex.step_over(GenPaths(tmp_path / "a", 2, 1), "5", 3.0)
    exited = forgotten_step(tmp_path, "srun: error: n2: task 0: Exited with exit code 143\n", "")
    exited.allocation, exited.submitted_at = None, 1.0
    assert explained(ex, exited) is None  # the worker's own 143 stands


def test_a_job_id_held_before_the_step_was_submitted_or_never_is_no_evidence(tmp_path: Path) -> None:
    """The neighbours stay as they were: a wrapper `kill -9`ed from outside (FAILED, no record)
    is `lost (no_exit_record)`, a death by signal it recorded stands, slurmstepd's CANCELLED
    is a cancel from outside — with no other generation under its id, or one that was seen to
    end before it was submitted (a controller's id issued again long after is harmless)."""
    for held_before in (False, True):
        for said, recorded, want in ((_ENDED_FOR_ANOTHER[0], True, None),
                                     (_ENDED_FOR_ANOTHER[1], True, "executor_cancelled"),
                                     ("", False, "no_exit_record")):
            ex = executor(Cluster({"5": "FAILED"}), [], alloc=False)
            if held_before:
                ex.step_over(GenPaths(tmp_path / "a", 2, 1), "5", 0.5)
            b = forgotten_step(tmp_path, said, "")
            b.allocation, b.submitted_at = None, 1.0
            assert explained(ex, b, recorded_signal=recorded) == want, (said, held_before)


def test_a_forgotten_step_whose_claim_cannot_be_written_is_withdrawn_at_a_later_look(tmp_path: Path,
                                                                                    monkeypatch) -> None:
    """A full state directory as the step is withdrawn: the claim's write failed out of the
    look at the queue, on the supervisor's loop. It is tried again at the next look."""
    submitted = 100.0
    now = [submitted + SUBMIT_GRACE + SIDECAR_GRACE + 1.0]
    lg = step(1, "")
    lg.allocation, lg.gen = None, GenPaths(tmp_path / "slot-1" / "gen-1", 1, 1)
    lg.gen.dir.mkdir(parents=True)
    srun = subprocess.Popen(["sleep", "60"])
    try:
        lg.child, lg.pid, lg.remote_since, lg.unlisted_since = True, srun.pid, submitted, submitted + SUBMIT_GRACE
        ex = executor(Cluster({}), [], alloc=False, live={1: lg}, clock=lambda: now[0])

        def full(_gen: GenPaths) -> bool:
            raise OSError(28, "No space left on device")

        with monkeypatch.context() as m:
            m.setattr(generation_files, "take_claim", full)
            ex._seen(Done(value={}))
        assert not lg.forgotten and srun.poll() is None
        now[0] += 1.0
        ex._seen(Done(value={}))
        assert lg.forgotten and srun.wait(timeout=30) == -15
    finally:
        srun.kill()
        srun.wait()


def test_a_step_refused_for_a_job_id_a_restarted_controller_issued_again_ran_nothing(tmp_path: Path) -> None:
    """A controller restarted without its newest jobs issues their ids again; a node that
    killed the forgotten job's orphans revoked its credential, and refuses a new step of that
    id before its wrapper begins. Nothing ran, and the same request works with the next id:
    read as the controller's outage (the task waits for a slot again, no attempt spent), not
    a final ``executor_failed`` (seen once in CI's Slurm tier, and by an adversary)."""
    from zellij_swarm.engine import remote

    gen = GenPaths(tmp_path / "slot-1" / "gen-2", 1, 2)
    gen.dir.mkdir(parents=True)
    gen.executor_log.write_text("srun: error: Application launch failed: Job credential revoked\n")
    assert remote.controller_unreachable(gen)
    gen.executor_log.write_text("srun: error: Unable to allocate resources: Connection reset by peer\n")
    assert remote.controller_unreachable(gen)  # (the controller killed as it answered)
    gen.executor_log.write_text("srun: error: Unable to allocate resources: Requested node configuration is not "
                                "available\n")
    assert not remote.controller_unreachable(gen)


def test_a_step_whose_srun_was_killed_here_is_no_cancel_from_outside(tmp_path: Path) -> None:
    """``kill -9`` of a step's ``srun`` (the OOM killer's too): the srun process it leaves ends
    the job, which Slurm records as a cancel (slurmstepd's CANCELLED, "cancelled by interactive
    user"). It was `cancelled (executor_cancelled)`, never run again, though nobody cancelled
    anything (an adversary, 3 in 3): the step ended as a process of the run killed from outside
    ends it — its wrapper's record stands, or none: `lost (no_exit_record)`. A `scancel` from
    outside ends srun by its exit, and stays a cancel."""
    said = "slurmstepd: error: *** STEP 5.0 ON n1 CANCELLED AT 2026-12-06T10:00:00 ***\n"
    for srun_status, recorded, want in ((9, False, "no_exit_record"), (9, True, None),  # died of SIGKILL
                                        (1 << 8, False, "executor_cancelled"), (1 << 8, True, "executor_cancelled")):
        ex = executor(Cluster({"5": "CANCELLED"}), [], alloc=False)
        lg = forgotten_step(tmp_path, said, "")
        lg.allocation, lg.child, lg.wait_status = None, True, srun_status
        assert explained(ex, lg, recorded_signal=recorded) == want, (srun_status, recorded)


def test_a_pane_step_whose_srun_was_killed_here_is_no_cancel_from_outside(tmp_path: Path) -> None:
    """In a pane, the step's ``srun`` is the pane leader's child, not the supervisor's: its
    ``kill -9`` was `cancelled (executor_cancelled)` (an adversary, 3 in 3 on the local
    cluster: Slurm records a cancel, and slurmstepd says nothing on the pane's terminal). The
    pane's leader writes srun's death by a signal it did not pass on itself in the
    generation's ``executor-killed``: read as a headless step's srun killed here — its
    wrapper's record stands, or `lost (no_exit_record)`. Without it (a `scancel`, which ends
    srun by its exit) it stays a cancel."""
    for killed, recorded, want in ((True, False, "no_exit_record"), (True, True, None),
                                   (False, False, "executor_cancelled"), (False, True, "executor_cancelled")):
        ex = executor(Cluster({"5": "CANCELLED"}), [], alloc=False)
        lg = forgotten_step(tmp_path, "", "", pane=True)  # (srun says nothing in a pane)
        lg.allocation = None
        if killed:
            (lg.gen.dir / generation_files.EXECUTOR_KILLED).write_text("9\n")
        assert explained(ex, lg, recorded_signal=recorded) == want, (killed, recorded)
    # our own kill (a withdrawal, a timeout) is no kill from outside: Slurm's state says
    ex = executor(Cluster({"5": "CANCELLED"}), [], alloc=False)
    lg = forgotten_step(tmp_path, "", "", pane=True)
    lg.allocation, lg.kill_reason = None, "cancelled_by_user"
    (lg.gen.dir / generation_files.EXECUTOR_KILLED).write_text("15\n")
    assert explained(ex, lg, recorded_signal=False) == "executor_cancelled"


class Steps(Cluster):
    """A cluster that also lists the steps of each job (``Slurm.steps``: job id -> names)."""

    def __init__(self, states: dict[str, str | None], steps: dict[str, set[str]]) -> None:
        super().__init__(states)
        self.listed = steps
        self.asked = 0

    def steps(self, job_ids: Any) -> dict[str, set[str]]:
        self.asked += 1
        return {job: self.listed[job] for job in job_ids if job in self.listed}


def _orphaned_step(tmp_path: Path, *, pane: bool) -> tuple[LiveGen, str]:
    lg = step(1, "")
    lg.allocation, lg.gen = None, GenPaths(tmp_path / "slot-1" / "gen-1", 1, 1)
    lg.gen.dir.mkdir(parents=True)
    lg.job_id, lg.step, lg.step_running = "5", "5.0", True
    if pane:
        lg.pane = PaneMode("TMUX_PANE", "", tmp_path / "env")
        lg.request = LaunchRequest(lg.gen, 1, "t1", pane=True)
    else:  # its srun, our child, died of SIGKILL, as its launcher reported
        lg.child, lg.pid, lg.wait_status = True, 999999, 9
    return lg, slurm.job_name("20261205-000000-abcdef", "t1", 1, 1)


@pytest.mark.parametrize("pane", [False, True])
def test_a_step_whose_srun_was_killed_is_gone_only_once_slurm_no_longer_lists_it(tmp_path: Path, pane: bool) -> None:
    """``kill -9`` of a step's ``srun`` and its helper: the step runs on, unseen by srun, and
    its job stays RUNNING. It was `lost (no_exit_record)` 3 s later and ran again beside its
    own running copy (headless: srun's death was taken for the step's end; helper 85, on a
    local cluster). Now: while Slurm lists the step it is followed (its record, when it comes,
    is the outcome); gone from the job — at two looks — it left the queue (its sidecar's
    grace, then its end is read), and its job, empty, is cancelled. In a pane too (srun is the
    pane leader's child): there the job stayed RUNNING, empty, and the run never ended —
    unless an srun of it still runs here."""
    now = [100.0]
    lg, name = _orphaned_step(tmp_path, pane=pane)
    gone: list[LiveGen] = []
    cluster = Steps({"5": "RUNNING"}, {"5": {name, "python"}})  # (python: a step_signal beside it)
    events = RemoteEvents(running=lambda _lg: None, seen=lambda _lg, _job: None, gone=gone.append,
                          queued_too_long=lambda _lg: None, allocation_ended=lambda *_: None,
                          warn=lambda *_: None)
    timers = Timers(lambda: now[0])
    ex = SlurmExecutor(cluster, run_id="20261205-000000-abcdef",  # type: ignore[arg-type]
                       settings=settings.resolve({}, {}), calls=AtOnce(),  # type: ignore[arg-type]
                       timers=timers, live={1: lg}, clock=lambda: now[0], wallclock=lambda: now[0], on=events)
    listed = {(1, 1): slurm.Job("5", name, "RUNNING", "None")}

    def look(after: float) -> None:
        now[0] += after
        timers.run_due()
        ex._seen(Done(value=listed))

    for _ in range(5):  # its step runs on: followed, never taken for gone
        look(1.0)
        look(1.0)
    assert not gone and not lg.step_left_job and cluster.asked == 10, pane
    cluster.listed["5"] = {"python"}  # its step ended, no record: the job stays, empty
    look(1.0)
    assert lg.stepless_since is not None and not lg.step_left_job  # one look is not enough
    look(1.0)
    assert lg.step_left_job
    for _ in range(int(SIDECAR_GRACE / 0.25) + 2):  # its sidecar's grace
        look(0.25)
    assert gone == [lg], pane
    # once its end is recorded, its job, empty, is cancelled at the next look
    cancelled: list[str] = []
    cluster.cancel = lambda job_id, name=None: cancelled.append(job_id)  # type: ignore[attr-defined]
    del ex.live[1]  # (``collect``: its end recorded, the generation let go)
    ex.step_ended(lg.gen, emptied=True)
    look(1.0)
    assert cancelled == ["5"], pane


def test_a_pane_step_whose_srun_still_runs_here_is_not_asked_about(tmp_path: Path) -> None:
    """Slurm listing no step of a job is no evidence while its srun runs here: it may be
    creating it (a pane's srun, found by its command line)."""
    now = [100.0]
    lg, name = _orphaned_step(tmp_path, pane=True)
    cluster = Steps({"5": "RUNNING"}, {})
    gone: list[LiveGen] = []
    events = RemoteEvents(running=lambda _lg: None, seen=lambda _lg, _job: None, gone=gone.append,
                          queued_too_long=lambda _lg: None, allocation_ended=lambda *_: None, warn=lambda *_: None)
    ex = SlurmExecutor(cluster, run_id="20261205-000000-abcdef",  # type: ignore[arg-type]
                       settings=settings.resolve({}, {}), calls=AtOnce(),  # type: ignore[arg-type]
                       timers=Timers(lambda: now[0]), live={1: lg}, clock=lambda: now[0], wallclock=lambda: now[0],
                       on=events)
    srun = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)",  # (it names the wrapper)
                             str(lg.gen.wrapper)])
    try:
        # (until its exec is done, it has this process's command line: no srun of the step)
        wait_until(lambda: str(lg.gen.wrapper) in psutil.Process(srun.pid).cmdline(), what="srun's exec")
        for _ in range(3):
            now[0] += 1.0
            ex._seen(Done(value={(1, 1): slurm.Job("5", name, "RUNNING", "None")}))
        assert not lg.step_left_job and not gone and cluster.asked == 0
        # a queued job whose srun is not ours to see: not asked about either
        srun.kill()
        srun.wait()
        ex._seen(Done(value={(1, 1): slurm.Job("5", name, "PENDING", "Resources")}))
        assert lg.stepless_since is None and cluster.asked == 0
    finally:
        srun.kill()
        srun.wait()


def test_a_left_queue_begun_before_a_pane_fallback_does_not_take_its_new_step_for_gone(tmp_path: Path) -> None:
    """A pane whose srun was killed as its step started sent no heartbeat: it runs again as a
    headless step, the same generation. The sidecar re-reads begun when its first job left the
    queue ran on, and took the new step, running, for lost: its task ran again beside it
    (an experiment, 1 in 1). A generation started again meanwhile is followed anew."""
    from dataclasses import replace

    now = [100.0]
    lg, _ = _orphaned_step(tmp_path, pane=True)
    gone: list[LiveGen] = []
    events = RemoteEvents(running=lambda _lg: None, seen=lambda _lg, _job: None, gone=gone.append,
                          queued_too_long=lambda _lg: None, allocation_ended=lambda *_: None, warn=lambda *_: None)
    timers = Timers(lambda: now[0])
    ex = SlurmExecutor(Cluster({}), run_id="20261205-000000-abcdef",  # type: ignore[arg-type]
                       settings=settings.resolve({}, {}), calls=AtOnce(),  # type: ignore[arg-type]
                       timers=timers, live={1: lg}, clock=lambda: now[0], wallclock=lambda: now[0], on=events)
    ex.left_queue(lg)
    now[0] += 1.0
    timers.run_due()
    lg.request = replace(lg.request, claimed=True)  # (``_pane_fault``: it runs headless now)
    for _ in range(int(SIDECAR_GRACE / 0.25) + 4):
        now[0] += 0.25
        timers.run_due()
    assert not gone and not lg.gone_seen


class Ending(Cluster):
    """Slurm as the ladder meets it: ``signal`` and ``cancel`` calls recorded as made (the
    step or job id), the first ``down`` of them refused as a controller that does not answer."""

    def __init__(self, down: int = 0) -> None:
        super().__init__({})
        self.down = down
        self.made: list[tuple[str, str]] = []

    def _call(self, what: str, target: str) -> None:
        if self.down:
            self.down -= 1
            raise BackendError("scancel: error: Unable to contact slurm controller (connect failure)")
        self.made.append((what, target))

    def signal(self, step_id: str, sig: str, *, name: str | None = None) -> None:
        self._call(f"signal {sig}", step_id)

    def cancel(self, step_id: str, *, name: str | None = None) -> None:
        self._call("cancel", step_id)


def _ended(cluster: Ending, *, alloc: bool) -> tuple[list[float | None], list[float], list[str]]:
    """A running step (``300.0``, no node known: the TERM goes through the controller) ended
    with a grace of 1 s, and 10 s of the loop's timers after: when the TERM was delivered, the
    clock at each call made, and the warnings."""
    now = [100.0]
    timers = Timers(lambda: now[0])
    warned: list[str] = []
    ex = executor(cluster, [], alloc=alloc, warned=warned, clock=lambda: now[0])
    ex.timers = timers
    ex.allocation = "200" if alloc else None
    lg = step(1, "200")
    lg.allocation = ex.allocation
    lg.step, lg.step_running = "300.0", True
    delivered: list[float | None] = []
    made_at: list[float] = []
    ex.end(lg, 1.0, lambda: now[0], lambda at, _caught: delivered.append(at))
    seen = 0
    for _ in range(40):
        now[0] += 0.25
        timers.run_due()
        made_at += [now[0]] * (len(cluster.made) - seen)
        seen = len(cluster.made)
    return delivered, made_at, warned


@pytest.mark.parametrize("alloc, target", [(False, "300"), (True, "300.0")])
def test_a_step_of_a_job_of_its_own_is_signalled_and_cancelled_through_its_job(alloc: bool, target: str) -> None:
    """A restarted controller may know a job and not its step (it saves a step only with a
    later change): ``scancel`` of ``JOB.STEP`` was "not found" and nothing ended the worker.
    A step of a job of its own is ended through the job; one inside an allocation by its id."""
    cluster = Ending()
    delivered, _, warned = _ended(cluster, alloc=alloc)
    assert cluster.made == [("signal TERM", target), ("cancel", target)] and delivered == [100.0] and not warned


def test_a_ladder_call_refused_by_a_controller_that_does_not_answer_is_made_again() -> None:
    """The TERM refused twice (the controller down): it was never made again, the worker ran
    on and the run never ended. It is made again every ``LADDER_RETRY`` (one warning), and the
    grace's ``scancel`` comes a grace after the TERM that was sent."""
    cluster = Ending(down=2)
    delivered, made_at, warned = _ended(cluster, alloc=False)
    assert [what for what, _ in cluster.made] == ["signal TERM", "cancel"]
    assert delivered == [100.0 + 2 * LADDER_RETRY] and made_at[1] - delivered[0] == pytest.approx(1.0, abs=0.25)
    assert len(warned) == 1 and "asked again" in warned[0], warned


class Queued(Cluster):
    """A cluster where the step's job waits in the queue: what the run asks of it is kept."""

    def __init__(self, name: str) -> None:
        super().__init__({"5": "PENDING"})
        self.name = name
        self.cancelled: list[str] = []
        self.signalled: list[str] = []

    def jobs(self, run_id: str, *, allocation: str | None = None) -> dict[tuple[int, int], slurm.Job]:
        return {(1, 1): slurm.Job("5", self.name, "PENDING", "Resources")}

    def cancel(self, job_id: str, *, name: str | None = None) -> None:
        self.cancelled.append(job_id)

    def signal(self, job_id: str, sig: str, *, name: str | None = None) -> None:
        self.signalled.append(job_id)


def _wrapper_claims(gen: GenPaths) -> bool:
    """What the step's wrapper does as Slurm starts it: claim the generation, unless taken."""
    try:
        fd = os.open(gen.claim, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    os.write(fd, b"4242\n")
    os.close(fd)
    return True


@pytest.mark.parametrize("wrapper_first", [False, True])
def test_a_step_that_starts_as_its_queue_limit_falls_due_is_never_ended_for_it(tmp_path: Path,
                                                                                wrapper_first: bool) -> None:
    """``--slurm-max-queue`` withdraws a step still queued. The limit's look (no claim yet)
    and the claim's taking (by the ladder's first call, later, off the loop) were apart: a
    step Slurm started in between had its running worker sent TERM, and its task was recorded
    ``cancelled (queued_too_long)`` after running up to 3 s (an adversary on the local
    cluster, a blocker released as the limit fell due: 6 of 16 steps, 2 runs in 4). Now a
    step whose wrapper claimed first runs on untouched, and one whose wrapper comes after the
    limit finds the claim taken and runs nothing: its job is withdrawn, never signalled."""
    now = [100.0]
    lg = step(1, "")
    lg.allocation, lg.gen = None, GenPaths(tmp_path / "slot-1" / "gen-1", 1, 1)
    lg.gen.dir.mkdir(parents=True)
    cluster = Queued(slurm.job_name("20261205-000000-abcdef", "t1", 1, 1))
    timers = Timers(lambda: now[0])
    started: list[bool] = []

    def due(withdrawn: LiveGen) -> None:  # the run's kill: the ladder, its first call at once
        if not wrapper_first:  # Slurm grants the job just as the limit falls due
            started.append(_wrapper_claims(withdrawn.gen))
        ex.end(withdrawn, 2.0, lambda: now[0], lambda _at, _caught: None)

    events = RemoteEvents(running=lambda _lg: None, seen=lambda _lg, _job: None, gone=lambda _lg: None,
                          queued_too_long=due, allocation_ended=lambda *_: None, warn=lambda *_: None)
    ex = SlurmExecutor(cluster, run_id="20261205-000000-abcdef",  # type: ignore[arg-type]
                       settings=settings.resolve({"slurm_max_queue": "3s"}, {}), calls=AtOnce(),  # type: ignore[arg-type]
                       timers=timers, live={1: lg}, clock=lambda: now[0], wallclock=lambda: now[0], on=events)
    ex.launched(lg)
    for _ in range(30):
        now[0] += 0.25
        if wrapper_first and now[0] >= 102.9 and not started:
            started.append(_wrapper_claims(lg.gen))
        timers.run_due()
    assert cluster.signalled == [], "a step that started was ended for its time in the queue"
    if wrapper_first:
        assert started == [True] and cluster.cancelled == [] and lg.kill_reason is None
    else:
        assert started == [False], "the step's wrapper could start after the limit fell due"
        assert set(cluster.cancelled) == {"5"}  # withdrawn (a plain scancel), once more after the grace


class Named(Cluster):
    """A cluster that remembers an ended job of the step's name."""

    def jobs(self, run_id: str, *, allocation: str | None = None) -> dict[Any, Any]:
        return {}  # never listed while it waited

    def named(self, name: str, *, ended: bool = False) -> list[tuple[str, str]]:
        return [(job, state) for job, state in self.states.items() if state is not None and ended]


@pytest.mark.parametrize("said", ["srun: error: Unable to allocate resources: Socket timed out on send/recv "
                                  "operation\n", "srun: error: Unable to contact slurm controller (connect failure)\n"])
def test_a_step_whose_srun_gave_up_on_the_controller_is_no_cancel_from_outside(tmp_path: Path, said: str) -> None:
    """A step's srun that gave up on an unanswering controller cancels the job it had asked
    for, never listed by the run, and Slurm remembers it by its name as CANCELLED: that read as
    a cancel from outside (a queued step scancelled before the run's first look), and the task
    was `cancelled (executor_cancelled)` instead of waiting for a slot again (CI's Slurm tier,
    once). srun's own words say whose end it was: lost, no attempt spent."""
    ex = executor(Named({"7": "CANCELLED"}), [], alloc=False)
    lg = forgotten_step(tmp_path, said, "")
    lg.allocation, lg.step = None, None
    assert explained(ex, lg, recorded_signal=False) == "executor_lost"
    scancelled = forgotten_step(tmp_path, "srun: error: Unable to allocate resources: Job/step already completing "
                                          "or completed\n", "")
    scancelled.allocation, scancelled.step = None, None
    assert explained(ex, scancelled, recorded_signal=False) == "executor_cancelled"  # (703a926's case stands)


def test_a_salloc_granted_at_once_is_an_allocation_not_a_failure(tmp_path: Path) -> None:
    """``salloc --no-shell`` exits as soon as Slurm grants the allocation. The run read its log,
    found no "Granted" line yet, then saw it exited — having written that line in between —
    and failed before any task: "cannot allocate the swarm's nodes: salloc: Granted job
    allocation 88" (the real cluster, once in a tier's run). Whether it exited is now asked
    before the log is read. Here the first read of the log comes just before salloc writes."""
    from zellij_swarm.worker.slurm import Slurm

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    salloc = bin_dir / "salloc"
    salloc.write_text("#!/bin/sh\necho $$ > \"$0.pid\"\nwhile [ ! -e \"$0.go\" ]; do sleep 0.01; done\n"
                      "echo 'salloc: Granted job allocation 88'\n")
    salloc.chmod(0o755)

    def ended(pid: int) -> bool:  # our child, not reaped yet: a zombie
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE

    class LogReadTooSoon(type(Path())):  # type: ignore[misc]
        """The log, whose first read happens just before salloc writes its line and exits."""

        reads = 0

        def read_bytes(self) -> bytes:
            data = super().read_bytes()
            LogReadTooSoon.reads += 1
            if LogReadTooSoon.reads == 1:
                pid = wait_until(lambda: (bin_dir / "salloc.pid").exists() and
                                 int((bin_dir / "salloc.pid").read_text() or 0), what="salloc started")
                (bin_dir / "salloc.go").touch()
                wait_until(lambda: ended(pid), what="salloc granted and exited")
            return data

    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    job, proc = Slurm(env, timeout=10).request_allocation("r1", 2, {}, LogReadTooSoon(tmp_path / "salloc.log"))
    proc.wait(5)
    assert job == "88"
