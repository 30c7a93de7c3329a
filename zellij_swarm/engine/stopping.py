"""Ending a generation's processes: the one ladder every cause goes through — cancel,
timeout, idle, halt, Ctrl-C/SIGTERM, a closed pane, a lost multiplexer — and the end-of-run
sweep for processes a run left behind.

The ladder: SIGTERM to every process of the generation, then after the ``kill_grace``
setting SIGKILL to every one still alive (whether or not the wrapper has recorded its exit:
a child that ignores SIGTERM outlives it), one grace later the wrapper itself if it still has
not. A generation's processes are found by ``procs`` (descendants, markers, session), which
reads all of ``/proc``: so every find-and-signal runs on a ``CallRunner`` thread, never on
the loop. Its slot stays ``stopping`` until the whole tree is gone, so a slot never runs two
generations at once.

With no supervisor (``cancel`` of a run whose supervisor is gone), ``end_now`` walks the
same ladder in the caller, blocking.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterable

import psutil

from zellij_swarm.engine.calls import CallRunner
from zellij_swarm.engine.live import LiveGen
from zellij_swarm.engine.remote import SlurmExecutor
from zellij_swarm.engine.slots import Slots
from zellij_swarm.engine.timers import Timers
from zellij_swarm.records.states import REASON_STATUS, TaskStatus
from zellij_swarm.records.task import TaskRecord
from zellij_swarm.worker import procs

SWEEP_ROUNDS = 5  # a daemon may fork again while it is being ended: scan until none is left


RESTARTED = "restarted"  # the reason of a generation ended by `restart`: the task runs again at once


def killed_status(reason: str) -> TaskStatus:
    """The status of a generation ended on purpose, by the reason it was ended for: a time
    limit is ``timed_out``, its multiplexer gone is ``lost`` (re-run headless), anything
    else (cancel, halt, shutdown, a closed pane) ``cancelled``."""
    return REASON_STATUS.get(reason, TaskStatus.CANCELLED)


def end_now(run_id: str, slot: int, gen: int, grace: float) -> int:
    """The ladder without a supervisor, blocking: returns how many processes it ended."""
    found = procs.generation_tree(None, procs.generation_markers(run_id, slot, gen))
    procs.end_all(found, grace)
    return len(found)


Warn = Callable[[str, str, TaskRecord | None], None]


class Stopper:
    def __init__(self, *, run_id: str, grace: float, slots: Slots, timers: Timers, calls: CallRunner,
                 clock: Callable[[], float], wallclock: Callable[[], float], warn: Warn,
                 released: Callable[[LiveGen], None]) -> None:
        self.run_id = run_id
        self.grace = grace
        self.slots = slots
        self.timers = timers
        self.calls = calls
        self.clock = clock
        self.wallclock = wallclock
        self.warn = warn
        self.released = released  # a held slot was given back
        self.stopping: dict[int, LiveGen] = {}  # slot -> ended generation whose tree is going away
        self.remote: SlurmExecutor | None = None  # ends the generations that run as Slurm steps

    def end_tree(self, lg: LiveGen) -> None:
        """Start the ladder for ``lg`` (once)."""
        if lg.ending:
            return
        lg.ending = True
        if lg.remote and self.remote is not None:
            self.remote.end(lg, self.grace)  # scancel: TERM to the step, after the grace the step
            return
        self._signal(lg, signal.SIGTERM)
        self.timers.after(self.grace, lambda: self._kill_tree(lg))

    def hold_slot(self, lg: LiveGen) -> bool:
        """At the end of a generation that is being ended: its slot stays ``stopping`` until
        no process of its tree is left. True when the slot is held (given back later)."""
        if not lg.ending:
            return False
        self.slots.stopping(lg.gen.slot)
        self.stopping[lg.gen.slot] = lg
        if lg.remote and self.remote is not None:
            self.remote.when_gone(lg, lambda: self._release(lg))
        elif lg.tree_killed:  # the ladder is past SIGKILL: what is left was forked since
            self._kill_tree(lg)
        else:  # given back now if nothing is left, else after the ladder's SIGKILL
            self._signal(lg, None, lambda left: None if left else self._release(lg))
        return True

    def sweep(self, tasks: Iterable[TaskRecord], *, session_alive: bool,
              found: Callable[[list[psutil.Process]], None]) -> None:
        """The run is over: end what still carries its id (a daemon a worker left behind),
        blocking; ``found`` hears of them first. The panes' holds (Zellij before 0.44) too
        when their session is gone: they would otherwise end only with a pane that no longer
        exists."""
        sessions = {a.pid: a.ended_at for t in tasks for a in t.history if a.pid and a.ended_at}
        left = procs.marked(procs.run_markers(self.run_id), sessions)
        if left:
            found(left)
        procs.end_all([] if session_alive else procs.marked(procs.hold_markers(self.run_id)), self.grace)
        for _ in range(SWEEP_ROUNDS):
            if not left:
                return
            procs.end_all(left, self.grace)
            left = procs.marked(procs.run_markers(self.run_id), sessions)

    def _kill_tree(self, lg: LiveGen) -> None:
        lg.tree_killed = True
        self._signal(lg, signal.SIGKILL)
        if lg.done:
            self._release_when_gone(lg, deadline=self.clock() + self.grace)
        else:
            self.timers.after(self.grace, lambda: self._kill_wrapper(lg))

    def _kill_wrapper(self, lg: LiveGen) -> None:
        if not lg.done and lg.pid:
            try:
                os.kill(lg.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def _signal(self, lg: LiveGen, sig: signal.Signals | None,
                then: Callable[[list[psutil.Process]], None] | None = None) -> None:
        """Send ``sig`` to every process of the generation still running, its wrapper
        excluded, on the runner's thread (``None``: only look for them); ``then`` gets the
        processes that were found."""
        markers = procs.generation_markers(self.run_id, lg.gen.slot, lg.gen.gen)
        pid = lg.pid
        find: Callable[[], list[psutil.Process]]
        if not lg.done:  # the wrapper's descendants, and whatever carries the markers
            def find() -> list[psutil.Process]:
                return procs.generation_tree(pid, markers)
        else:  # ... or was started in the wrapper's session before the wrapper ended
            sessions = {pid: lg.task.ended_at or self.wallclock()} if pid else None

            def find() -> list[psutil.Process]:
                return [p for p in procs.marked(markers, sessions) if p.pid != pid]
        self.calls.submit(lambda: find() if sig is None else procs.send(find(), sig),
                          None if then is None else lambda done: then(done.value or []))

    def _release_when_gone(self, lg: LiveGen, *, deadline: float) -> None:
        if self.stopping.get(lg.gen.slot) is not lg:
            return

        def signalled(left: list[psutil.Process]) -> None:
            if left and self.clock() < deadline:
                self.timers.after(0.01, lambda: self._release_when_gone(lg, deadline=deadline))
                return
            if left:
                self.warn("process_left_behind", f"{len(left)} process(es) of slot {lg.gen.slot} generation "
                                                 f"{lg.gen.gen} survived SIGKILL: {names(left)}", lg.task)
            self._release(lg)

        self._signal(lg, signal.SIGKILL, signalled)

    def _release(self, lg: LiveGen) -> None:
        slot = lg.gen.slot
        if self.stopping.get(slot) is not lg:
            return
        del self.stopping[slot]
        self.slots.free(slot)
        self.released(lg)


def names(found: list[psutil.Process]) -> str:
    """The first processes of a list, for a warning: ``pid (name)``."""
    def name(p: psutil.Process) -> str:
        try:
            return str(p.name())
        except psutil.Error:
            return "?"

    return ", ".join(f"{p.pid} ({name(p)})" for p in found[:10])
