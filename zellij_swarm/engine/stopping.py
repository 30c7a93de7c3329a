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

When a signal of the ladder first reaches a process of the worker's own (running, not a
zombie, not the generation's wrapper or pty relay: ``procs.is_worker_process``), the
generation's kill is *sent* (``Delivery.sent_at``): the outcome rule (``engine.outcome``)
keeps a worker's own outcome when it ended before that moment, whatever was requested. A
kill that finds nothing running changes nothing: the worker had already ended on its own.

With no supervisor (``cancel`` of a run whose supervisor is gone), ``end_now`` walks the
same ladder in the caller, blocking.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from zellij_swarm.calls import CallRunner, Done
from zellij_swarm.engine.live import Ladder, LiveGen
from zellij_swarm.engine.slots import Slots
from zellij_swarm.engine.timers import Timers
from zellij_swarm.records import generation_files, shells
from zellij_swarm.records.generation_files import GenPaths
from zellij_swarm.records.task import TaskRecord
from zellij_swarm.worker import procs

if TYPE_CHECKING:
    import psutil

    from zellij_swarm.engine.remote import SlurmExecutor  # (it imports step_signal, which imports this)

SWEEP_ROUNDS = 5  # a daemon may fork again while it is being ended: scan until none is left
GONE_LOOK = 0.25  # seconds between two looks at what is left of a held generation's tree


RESTARTED = "restarted"  # the reason of a generation ended by `restart`: the task runs again at once
CANCELLED_BY_USER = "cancelled_by_user"  # by `cancel`, Ctrl-C or a signal: the task never runs again


def leftovers(run_id: str, gen: GenPaths) -> list[psutil.Process]:
    """The processes left of a generation that ended: those that carry its markers."""
    return procs.marked(procs.generation_markers(run_id, gen.slot, gen.gen))


def end_leftovers(run_id: str, gens: Iterable[GenPaths], grace: float) -> None:
    """What is left of ended generations, ended blocking (TERM, KILL after ``grace``): a
    resume's, before their tasks run again."""
    left = [p for gen in gens for p in leftovers(run_id, gen)]
    if left:
        procs.end_all(left, grace)


def end_now(run_id: str, gen: GenPaths, grace: float) -> int:
    """The ladder without a supervisor, blocking: returns how many processes it ended. The
    moment it reached a worker's process is recorded with the kill's reason (the caller wrote
    that first), for the ``resume`` that records the outcome."""
    found = procs.generation_tree(None, procs.generation_markers(run_id, gen.slot, gen.gen))
    # the reason to mark sent; an earlier cancel's signal is the one that counts, its moment kept
    reason = generation_files.kill_reason(gen) if generation_files.kill_sent_at(gen) is None else None
    stamped = None
    if reason is not None:
        # Marked sent before it goes, as the live ladder times its signals: a resume starting
        # meanwhile collects the worker's death by it at once, and must find the kill that
        # caused it (seen without its moment, the kill counts for nothing: "failed (SIGTERM)").
        stamped = ProcessSignaller().now()
        generation_files.write_kill_reason(gen, reason, sent_at=stamped)
    delivery = ProcessSignaller().deliver(gen, signal.SIGTERM, lambda: found)
    if reason is not None:
        # with whether any process it reached could take it: one that ignores it and then
        # exits 0 within the grace finished on its own (recorded as caught, it was cancelled);
        # one it reached none of had ended on its own: no kill was sent (the moment marked is
        # taken back — not a resumed supervisor's, whose signal reached it first)
        generation_files.write_kill_reason(gen, reason, sent_at=delivery.sent_at, caught=delivery.caught,
                                           stamped=stamped)
    procs.end_all(found, grace, termed=True)
    ended = len(found)
    for _ in range(SWEEP_ROUNDS):  # what a worker forked between the look and its signal runs on: looked for again
        left = leftovers(run_id, gen)
        if not left:
            break
        procs.end_all(left, grace)
        ended += len(left)
    return ended


@dataclass(frozen=True)
class Delivery:
    """What one signal of the ladder came to."""

    processes: list[psutil.Process]  # those signalled (or, with no signal, found)
    sent_at: float | None  # when it reached a running process of the worker's own; None: none ran
    # one it reached has a handler for it (``procs.catches``): a worker that then exits
    # normally may have done so because of it. None reached that can: a normal exit is its own
    caught: bool = True


class Signaller(Protocol):
    """How the ladder's signals reach a generation's processes (a test replaces it)."""

    def deliver(self, gen: GenPaths, sig: signal.Signals | None,
                find: Callable[[], list[psutil.Process]]) -> Delivery:
        """On the procs thread: send ``sig`` to what ``find`` finds of ``gen``'s processes
        (None: only look)."""
        ...

    def now(self) -> float:
        """The moment a signal sent now is recorded at (comparable with exit records' ends)."""
        ...


class ProcessSignaller:
    """The real one: signals through ``/proc``, moments on the files' coarse clock."""

    def deliver(self, gen: GenPaths, sig: signal.Signals | None,
                find: Callable[[], list[psutil.Process]]) -> Delivery:
        started = procs.relay_started(gen)  # before the scan (``procs._relay_stands_for_worker``)
        found = find()
        if sig is None:
            return Delivery(found, None)
        workers = [p for p in found if procs.is_worker_process(p, gen, relay_started=started)]
        # A relay that carries a started worker passes the signal on to it: sent to both, the
        # worker heard it twice (an agent's save on SIGTERM begun again, cut short). SIGKILL
        # it does not pass on, and takes itself.
        others = [p for p in found if p not in workers and (sig == signal.SIGKILL or not procs.is_relay(p))]
        at = self.now()  # before sending: a worker's end caused by it cannot look earlier
        # The worker's own processes first: a pane's pty relay passes a signal on and reaps
        # its worker at once, so a worker signalled after it could be gone already — ended by
        # this very signal, yet not reached by it, and its end taken for its own. Each is
        # looked at again just before its signal: one that ended on its own since the scan
        # (a zombie takes a signal without a word) was not reached by it.
        #
        # A normal exit may be the signal's doing only if it reached the worker's top process
        # — the one whose end the wrapper records — while that ran, and a process it reached
        # has a handler for it: the top itself, or one below it that the top waits for (an
        # init that takes the signal by sigwait and passes it on, ``tini``). A top that had
        # ended was not reached, whatever a child it left in the background traps
        # (*Decision*, SPEC §5.7). Its wrapper gone with no record (killed from outside), no
        # process can be told for its top: any reached that has a handler counts.
        reached: list[psutil.Process] = []
        top_reached = any_hears = False
        for p in workers:
            if procs.running(p):
                hears = procs.catches(p, sig)  # read before the signal: its handler then
                top = procs.is_worker_top(p, gen)
                if procs.send([p], sig):
                    reached.append(p)
                    any_hears, top_reached = any_hears or hears, top_reached or top
        caught = any_hears and (top_reached or (not procs.wrapper_processes([gen], leaders=False)
                                                and generation_files.read_sidecar(gen) is None))
        return Delivery(reached + procs.send(others, sig), at if reached else None, caught)

    def now(self) -> float:
        return procs.coarse_wallclock()


Warn = Callable[[str, str, TaskRecord | None], None]


def wrapper_sessions(ends: Iterable[tuple[int, float]]) -> dict[int, float]:
    """The sessions of the run's ended headless wrappers (``ends``: each one's pid and end
    time, ``records.task.wrapper_ends``; the launcher starts each as a
    session leader: its pid is its session's id, and nothing of the run's stays in it after
    it) that some process is in now, their leader gone, with when each wrapper ended
    (``procs.marked``). A pane's session is its multiplexer's and holds its pane leader, and
    the hold before Zellij 0.44, as long as the pane stays: never swept by session. Only
    those some process is in: a few, where a run has 100,000 attempts (a mapping of them all
    was the largest thing its end made). A process found later in another of them was forked
    by one there now.

    A session whose leader lives is not a wrapper's: every wrapper here has ended, so its
    pid came round again, to a process that leads a session of its own — a login shell,
    another run's wrapper. The start-time check of ``procs.marked`` cannot tell: a run
    resumed after its wrappers died unseen records each such end as when it noticed it,
    after that stranger's session began (swept, it was killed)."""
    left = procs.leaderless_sessions()
    return {pid: ended_at for pid, ended_at in ends if pid in left}


class Stopper:
    def __init__(self, *, run_id: str, grace: float, slots: Slots, timers: Timers, calls: CallRunner,
                 clock: Callable[[], float], wallclock: Callable[[], float], warn: Warn,
                 released: Callable[[LiveGen], None], delivered: Callable[[LiveGen, float | None, bool], None],
                 signaller: Signaller) -> None:
        """``delivered`` hears, on the loop, how each signal aimed at a generation that has not
        ended came out (its ``sent_at``), and after the last one in flight, that none is."""
        self.run_id = run_id
        self.grace = grace
        self.slots = slots
        self.timers = timers
        self.calls = calls
        self.clock = clock
        self.wallclock = wallclock
        self.warn = warn
        self.released = released  # a held slot was given back
        self.delivered = delivered
        self.signaller = signaller
        self.stopping: dict[int, LiveGen] = {}  # slot -> ended generation whose tree is going away
        self.remote: SlurmExecutor | None = None  # ends the generations that run as Slurm steps

    def end_tree(self, lg: LiveGen) -> None:
        """Start the ladder for ``lg`` (once)."""
        if lg.ending:
            return
        lg.move(Ladder.TERM)
        if lg.remote and self.remote is not None:
            # scancel: TERM to the step, after the grace the step; a queued one is withdrawn
            lg.signalling += 1
            self.remote.end(lg, self.grace, self.signaller.now, lambda at, caught: self._answered(lg, at, caught))
            return
        if lg.kill_sent_at is not None:  # an earlier supervisor's ladder sent its SIGTERM: carry it on
            due = self.grace - (self.wallclock() - lg.kill_sent_at)
            self.timers.after(max(0.0, due), lambda: self._kill_tree(lg))
            return
        self._signal(lg, signal.SIGTERM)
        self.timers.after(self.grace, lambda: self._kill_tree(lg))

    def may_have_left(self, lg: LiveGen) -> bool:
        """Whether processes of a generation whose wrapper recorded its end may run on, to be
        ended before its task runs again. A pane's may (its worker's sessions are the pty
        relay's), and one whose wrapper's pid is unknown; a headless one while its wrapper's
        process group is not empty (one signal), or while a process carries its markers — a
        child that made a group or a session of its own (GNU ``timeout``, a daemon): one
        read of every process's environment, where the ladder reads it twice more. A process
        that emptied its environment and left the group cannot be told from any other."""
        if lg.in_pane or lg.pid is None or not shells.group_gone(lg.pid):
            return True
        return bool(leftovers(self.run_id, lg.gen))

    def hold_slot(self, lg: LiveGen) -> bool:
        """At the end of a generation that is being ended: its slot stays ``stopping`` until
        no process of its tree is left. True when the slot is held (given back later)."""
        if not lg.ending:
            return False
        self.slots.stopping(lg.gen.slot)
        self.stopping[lg.gen.slot] = lg
        if lg.remote and self.remote is not None:
            self.remote.when_gone(lg, lambda: self._release(lg))
        elif lg.ladder is Ladder.KILL:  # the ladder is past SIGKILL: what is left was forked since
            self._kill_tree(lg)
        else:  # given back as soon as nothing is left — by itself, or after the ladder's SIGKILL
            self._look_until_gone(lg)
        return True

    def _look_until_gone(self, lg: LiveGen) -> None:
        """Look at what is left of a held generation's tree now and then (``GONE_LOOK``) —
        what waits on it (its slot, its task's next run) goes on as soon as it has ended by
        itself, not only once the ladder's SIGKILL is due."""
        def looked(left: list[psutil.Process]) -> None:
            if not left:
                self._release(lg)
            elif self.stopping.get(lg.gen.slot) is lg and lg.ladder is not Ladder.KILL:
                self.timers.after(GONE_LOOK, lambda: self._look_until_gone(lg))

        if self.stopping.get(lg.gen.slot) is lg:
            self._signal(lg, None, looked)

    def sweep(self, wrapper_ends: Iterable[tuple[int, float]], *, session_alive: bool, launcher: int | None,
              found: Callable[[list[psutil.Process]], None]) -> None:
        """The run is over: end what still carries its id (a daemon a worker left behind),
        and what the ``launcher`` (its pid: alive, every wrapper it started ended) adopted —
        a daemon that left nothing of the run on it; blocking, and ``found`` hears of them
        first. The panes' holds (Zellij before 0.44) too when their session is gone: they
        would otherwise end only with a pane that no longer exists."""
        # a Slurm step's pid is its node's: it names no session here
        sessions = wrapper_sessions(wrapper_ends) if self.remote is None else {}

        def left_now() -> list[psutil.Process]:
            return procs.marked(procs.run_markers(self.run_id), sessions, adopted_by=launcher)

        left = left_now()
        if left:
            found(left)
        procs.end_all([] if session_alive else procs.marked(procs.hold_markers(self.run_id)), self.grace)
        for _ in range(SWEEP_ROUNDS):
            if not left:
                return
            procs.end_all(left, self.grace)
            left = left_now()

    def _kill_tree(self, lg: LiveGen) -> None:
        lg.move(Ladder.KILL)
        self._signal(lg, signal.SIGKILL)
        if lg.done:
            self._release_when_gone(lg, deadline=self.clock() + self.grace)
        else:
            self.timers.after(self.grace, lambda: self._kill_wrapper(lg))

    def _kill_wrapper(self, lg: LiveGen) -> None:
        if not lg.done and lg.pid and not lg.outlived_its_wrapper:
            at = self.signaller.now()
            try:
                os.kill(lg.pid, signal.SIGKILL)
            except ProcessLookupError:
                return
            self.delivered(lg, at, True)  # the generation ends here, by our hand

    def _signal(self, lg: LiveGen, sig: signal.Signals | None,
                then: Callable[[list[psutil.Process]], None] | None = None) -> None:
        """Send ``sig`` to every process of the generation still running, its wrapper
        excluded, on the runner's thread (``None``: only look for them); ``then`` gets the
        processes that were found."""
        markers = procs.generation_markers(self.run_id, lg.gen.slot, lg.gen.gen)
        pid = lg.pid
        find: Callable[[], list[psutil.Process]]
        if not (lg.done or lg.outlived_its_wrapper):  # the wrapper's descendants, and whatever carries the markers
            def find() -> list[psutil.Process]:
                return procs.generation_tree(pid, markers)
        else:  # ... or was started in the wrapper's session before the wrapper ended
            ends = [(pid, lg.task.ended_at or self.wallclock())] if pid else []

            def find() -> list[psutil.Process]:  # a session led by a live process is not the wrapper's
                return [p for p in procs.marked(markers, wrapper_sessions(ends)) if p.pid != pid]
        counted = sig is not None and not lg.done  # its outcome waits for the answer
        if counted:
            lg.signalling += 1

        def answered(done: Done[Delivery]) -> None:
            if counted:
                self._answered(lg, done.value.sent_at if done.value is not None else None,
                               done.value.caught if done.value is not None else True)
            if then is not None:
                then(done.value.processes if done.value is not None else [])

        self.calls.submit(lambda: self.signaller.deliver(lg.gen, sig, find), answered)

    def _answered(self, lg: LiveGen, sent_at: float | None, caught: bool) -> None:
        lg.signalling -= 1
        self.delivered(lg, sent_at, caught)

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
    import psutil  # here, once something was found (worker.procs says why)

    def name(p: psutil.Process) -> str:
        try:
            return str(p.name())
        except psutil.Error:
            return "?"

    return ", ".join(f"{p.pid} ({name(p)})" for p in found[:10])
