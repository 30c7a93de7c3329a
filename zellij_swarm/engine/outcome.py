"""The outcome rule (SPEC §5.7): what one generation's end stands for — the one place that
says what happens when a worker exits 0 while a cancel, a timeout or a halt is in flight.

A generation a kill was asked for (``LiveGen.kill_reason``) was ended by it only if the
kill's first signal reached a process of the worker (``KillState.SENT``, at
``kill_sent_at``: ``stopping`` records that moment) and the worker ended at or after it —
dying of a signal, or exiting when a process the signal reached had a handler for it
(``kill_caught``; ``ended_by_kill``). Then it is ``cancelled``/``timed_out``/…
(``killed_status``), keeping the code and signal it reported — an agent that traps SIGTERM,
saves and exits 0 was ended by it; a shell with no trap that exits 0 was not. A worker that
ended before that moment keeps its own outcome (``own_end`` of its code and signal),
whatever was requested: finished work is never recorded as unfinished, and so never run
again. A kill requested but not yet sent when the end is read (the ladder's signal still on
its way) holds the reading back until the signal's delivery is answered
(``GenPhase.END_SEEN``), so the rule always compares two known moments.

Without a kill, the wrapper's exit record says it: a reason a vanished wrapper or Slurm's
job state left (``REASON_STATUS``), else the worker's own code and signal — except a death by
SIGHUP in a pane, which is the multiplexer's doing when its session is gone (``lost``) or its
pane's leader saw the terminal hang up (``cancelled (pane_closed)``); and any end but exit 0
in a pane whose leader saw its terminal hang up within a second of it (``hung_up``: a
write that met the dead terminal's EIO first), which is the same.
"""

from __future__ import annotations

from zellij_swarm.engine.live import LiveGen
from zellij_swarm.records import generation_files
from zellij_swarm.records.generation_files import ExitRecord
from zellij_swarm.records.states import REASON_STATUS, TaskStatus, own_end


def killed_status(reason: str) -> TaskStatus:
    """The status of a generation ended on purpose, by the reason it was ended for: a time
    limit is ``timed_out``, its multiplexer gone is ``lost`` (re-run headless), anything
    else (cancel, halt, shutdown, a closed pane) ``cancelled``."""
    return REASON_STATUS.get(reason, TaskStatus.CANCELLED)


def kill_reached(lg: LiveGen, rec: ExitRecord) -> bool:
    """Whether the kill's first signal reached the worker while it ran: it ended at or after
    that moment (an end of unknown time counts as after)."""
    return lg.kill_sent_at is not None and (rec.ended_at is None or rec.ended_at >= lg.kill_sent_at)


def ended_by_kill(lg: LiveGen, rec: ExitRecord) -> bool:
    """Whether the kill's first signal reached the worker, and the worker ended at or after
    that moment (an end of unknown time counts as after) — by that signal, or by an exit of
    its own a process of it could have made on hearing it: a normal exit (a code, no signal)
    when no process the signal reached had a handler for it (``kill_caught`` False) was not
    the signal's doing. The signal then reached a process already inside ``exit()`` (the
    check before it and the signal are two steps), or a child (a ``sleep`` killed, its shell
    went on to the end) — the soak of a tmux run saw a task that wrote its ledger line and
    exited 0 recorded ``cancelled`` and run again."""
    if not kill_reached(lg, rec):
        return False
    own_exit = rec.code is not None and rec.signal is None
    return not own_exit or lg.kill_caught is not False


def ended_with_its_terminal(lg: LiveGen, rec: ExitRecord) -> bool:
    """Whether a pane generation ended of its terminal's hang-up (SPEC §6), which its leader
    marked: a death by SIGHUP — the hang-up's, not the worker's own — or any end but exit 0
    within a second of the mark (a write that met the dead terminal's EIO before the
    hang-up's SIGHUP arrived: ``yes`` exits 1; not a worker that ignored the hang-up and
    failed on its own later). A Slurm step's exit 0 within a second after the mark too: the
    close ends its srun, and Slurm kills the step with SIGKILL, which no worker can answer
    by finishing its work — but a sweep of the step's processes one by one
    (proctrack/linuxproc) can kill the worker's child and leave its shell to run on to
    ``exit 0`` (2 steps in 8 here)."""
    if rec.signal == "SIGHUP":
        return generation_files.hung_up(lg.gen)
    if (rec.code, rec.signal) != (0, None):
        return generation_files.hung_up(lg.gen, ended_at=rec.ended_at)
    return lg.remote and rec.ended_at is not None and generation_files.hung_up(lg.gen, ended_at=rec.ended_at,
                                                                                before_it=True)


def outcome(lg: LiveGen, rec: ExitRecord, *, session_alive: bool) -> tuple[TaskStatus, str | None]:
    """The task status and reason one generation's exit record stands for."""
    reason = rec.reason
    recorded = REASON_STATUS.get(reason or "")
    if recorded == TaskStatus.FAILED:  # it could not start, or Slurm ended it for its memory
        return recorded, reason
    if lg.kill_reason is not None and (ended_by_kill(lg, rec) or reason == lg.kill_reason):
        # ended by our kill, or withdrawn by it before anything ran (the supervisor wrote its reason)
        return killed_status(lg.kill_reason), lg.kill_reason
    if recorded is not None:  # a vanished wrapper, or a step's end as Slurm explained it
        return recorded, reason
    if lg.in_pane and rec.signal == "SIGHUP" and not session_alive:
        return TaskStatus.LOST, "multiplexer_lost"  # SPEC §6: its own SIGHUP may come before the hang-up mark
    if lg.in_pane and ended_with_its_terminal(lg, rec):
        return (TaskStatus.CANCELLED, "pane_closed") if session_alive else (TaskStatus.LOST, "multiplexer_lost")
    return own_end(rec.code, rec.signal), reason
