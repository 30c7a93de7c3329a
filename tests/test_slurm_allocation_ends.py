"""The Slurm executor's rules for an allocation (``--slurm-alloc``) that ended from outside,
against a stand-in cluster whose job states the test sets, and a call runner that answers at
once — so that the order of events a real cluster gives only now and then (found by an
adversary's scripts) is made on demand:

- a step explained *after* the run asked for a new allocation answers for the allocation it
  was given, not the new one (it was classified by the new one: ``failed (143)``, an attempt
  spent, 2 runs in 3);
- several steps of one ended allocation explained together tell the supervisor once, so it
  asks for one new allocation (it asked for one each, and a granted one was left holding the
  nodes after the run)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from zellij_swarm.backends.base import LaunchRequest
from zellij_swarm.calls import Done
from zellij_swarm.config import settings
from zellij_swarm.config.swarmfile import TaskSpec
from zellij_swarm.engine.live import LiveGen
from zellij_swarm.engine.remote import RemoteEvents, SlurmExecutor
from zellij_swarm.engine.timers import Timers
from zellij_swarm.records.generation_files import GenPaths
from zellij_swarm.records.task import TaskRecord


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


def executor(cluster: Cluster, told: list[tuple[str, str | None]]) -> SlurmExecutor:
    def ignored(*_: object) -> None:
        return None

    events = RemoteEvents(running=ignored, seen=ignored, gone=ignored, queued_too_long=ignored,
                          allocation_ended=lambda job, state: told.append((job, state)), warn=ignored)
    return SlurmExecutor(cluster, run_id="20261205-000000-abcdef",  # type: ignore[arg-type]
                         settings=settings.resolve({"slurm_alloc": "true"}, {}), calls=AtOnce(),  # type: ignore[arg-type]
                         timers=Timers(lambda: 0.0), live={}, clock=lambda: 0.0, wallclock=lambda: 0.0, on=events)


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
