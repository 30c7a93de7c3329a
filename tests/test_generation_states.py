"""The generation's three state machines (``engine.live``): the moves their tables allow,
and that any other raises — the harness's scenarios then fail on an illegal one."""

from __future__ import annotations

from pathlib import Path

import pytest

from zellij_swarm.backends.base import LaunchRequest
from zellij_swarm.config.swarmfile import TaskSpec
from zellij_swarm.engine.live import GEN_TRANSITIONS, GenPhase, KillState, Ladder, LiveGen
from zellij_swarm.records.generation_files import GenPaths
from zellij_swarm.records.states import InvalidTransition
from zellij_swarm.records.task import TaskRecord


def _gen(**kw: object) -> LiveGen:
    gen = GenPaths(Path("/nonexistent/slot-1/gen-1"), 1, 1)
    task = TaskRecord(spec=TaskSpec(name="t", cmd="true"), id="t1", order=1, timeout=None, retries=0,
                      idle_timeout=None)
    return LiveGen(task, gen, LaunchRequest(gen, 1, "t"), backfill=False, **kw)  # type: ignore[arg-type]


def test_a_headless_generation_that_was_cancelled_while_running_goes_the_whole_way() -> None:
    lg = _gen()
    for step in (GenPhase.LAUNCHED, GenPhase.STARTED):
        lg.move(step)
    lg.request_kill("cancelled_by_user")
    lg.move(Ladder.TERM)
    lg.kill_reached_worker(12.5, caught=True)
    lg.move(GenPhase.END_SEEN)  # its end noticed while the SIGTERM's answer was on its way
    lg.move(GenPhase.COLLECTED)
    lg.move(GenPhase.DONE)
    assert (lg.phase, lg.kill, lg.ladder, lg.kill_sent_at) == (GenPhase.DONE, KillState.SENT, Ladder.TERM, 12.5)
    assert [dst for _, dst in lg.history] == [
        GenPhase.LAUNCHED, GenPhase.STARTED, KillState.REQUESTED, Ladder.TERM, KillState.SENT,
        GenPhase.END_SEEN, GenPhase.COLLECTED, GenPhase.DONE]


@pytest.mark.parametrize(("steps", "illegal"), [
    ((GenPhase.LAUNCHED, GenPhase.STARTED, GenPhase.COLLECTED, GenPhase.DONE), GenPhase.STARTED),
    ((GenPhase.LAUNCHED, GenPhase.STARTED), GenPhase.OPENING),
    ((GenPhase.LAUNCHED, GenPhase.COLLECTED), GenPhase.END_SEEN),
    ((), GenPhase.STARTED),  # a reserved generation has not been handed to anything yet
    ((KillState.REQUESTED, KillState.SENT), KillState.REQUESTED),
    ((KillState.REQUESTED,), KillState.REQUESTED),  # one kill per generation
    ((), Ladder.KILL),  # SIGKILL comes after SIGTERM
    ((Ladder.TERM,), Ladder.TERM),
], ids=str)
def test_a_move_the_tables_do_not_allow_raises(steps: tuple[object, ...], illegal: object) -> None:
    lg = _gen()
    for step in steps:
        lg.move(step)  # type: ignore[type-var]
    with pytest.raises(InvalidTransition, match="illegal transition"):
        lg.move(illegal)  # type: ignore[type-var]


def test_a_resumed_generation_carries_the_kill_its_first_supervisor_recorded() -> None:
    assert _gen(kill_reason="timeout").kill is KillState.REQUESTED
    assert _gen(kill_reason="timeout", kill_sent_at=3.0).kill is KillState.SENT
    assert _gen().kill is KillState.NONE


def test_every_state_of_every_machine_has_its_row_and_done_is_final() -> None:
    for machine in (GenPhase, KillState, Ladder):
        table = GEN_TRANSITIONS[machine]
        assert set(table) == set(machine)
        assert all(isinstance(dst, machine) for dsts in table.values() for dst in dsts)
    assert GEN_TRANSITIONS[GenPhase][GenPhase.DONE] == frozenset()
    assert all(GenPhase.DONE in dsts for phase, dsts in GEN_TRANSITIONS[GenPhase].items()
               if phase is not GenPhase.DONE)


@pytest.mark.parametrize("code, sig, marked_after_end, status, remote", [
    (1, None, 0.01, ("cancelled", "pane_closed"), False),  # yes's EIO, just before its leader's mark
    (1, None, -0.5, ("cancelled", "pane_closed"), False),
    ("SIGPIPE", "SIGPIPE", 0.2, ("cancelled", "pane_closed"), False),
    (1, None, 30.0, ("failed", None), False),  # it failed; its pane, held, was closed later
    (3, None, -2.5, ("failed", None), False),  # it ignored the hang-up and failed on its own, later
    (0, None, -1.0, ("succeeded", None), False),  # finished work, whenever its pane closed
    (129, "SIGHUP", 30.0, ("cancelled", "pane_closed"), False),  # a death by the hang-up's SIGHUP
    (1, None, None, ("failed", None), False),  # no mark: its own failure
    # a Slurm step's exit 0 in the second after its pane closed: Slurm's kill of the step, which
    # left the worker's shell to run on to ``exit 0``; before the close, or long after: its own
    (0, None, -0.02, ("cancelled", "pane_closed"), True),
    (0, None, -0.9, ("cancelled", "pane_closed"), True),
    (0, None, 0.02, ("succeeded", None), True),
    (0, None, -2.5, ("succeeded", None), True),
    (0, None, -0.02, ("succeeded", None), False),  # a local pane's worker heard the hang-up, and finished
    (0, None, None, ("succeeded", None), True),
    (3, None, -0.3, ("cancelled", "pane_closed"), True),
])
def test_a_pane_worker_that_ended_as_its_terminal_hung_up_was_ended_by_it(tmp_path, code, sig, marked_after_end,
                                                                           status, remote) -> None:
    """SPEC §6: any end but exit 0 in a pane whose leader marked the hang-up within 1 s of it
    was the hang-up's doing; one long before or after it was not. A Slurm step's exit 0 in
    the second after the mark too."""
    import os

    from zellij_swarm.engine.outcome import outcome
    from zellij_swarm.records.generation_files import HANGUP, ExitRecord

    gen = GenPaths(tmp_path, 1, 1)
    task = TaskRecord(spec=TaskSpec(name="t", cmd="yes"), id="t1", order=1, timeout=None, retries=0, idle_timeout=None)
    lg = LiveGen(task, gen, LaunchRequest(gen, 1, "t", pane=True), backfill=False, remote=remote)
    ended = 1_700_000_000.0
    if marked_after_end is not None:
        (tmp_path / HANGUP).touch()
        os.utime(tmp_path / HANGUP, (ended + marked_after_end, ended + marked_after_end))
    rec = ExitRecord(code=141 if code == "SIGPIPE" else code, signal=sig, started_at=ended - 5, ended_at=ended, pid=1)
    got, reason = outcome(lg, rec, session_alive=True)
    assert (str(got), reason) == status
    if status[1] == "pane_closed":
        assert outcome(lg, rec, session_alive=False)[1] == "multiplexer_lost"
