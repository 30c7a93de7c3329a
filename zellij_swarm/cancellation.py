"""Ending workers: one path for ``cancel``, Ctrl-C and SIGTERM, ``--halt``, timeouts and the
idle watchdog, plus SIGHUP's detach and the end-of-run sweep for processes left behind.

A worker's whole tree is ended by one ladder (``_end_tree``): SIGTERM, then SIGKILL after a
grace period to whatever of the tree is left, then the wrapper itself if it still has not
recorded the exit; the slot waits until the tree is gone. The reason is written to the
generation before the first signal, so whoever reads the exit — this supervisor or a
resumed one — classifies it the same way. Part of ``Supervisor`` (a mixin only to keep the modules small).
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from typing import Any

import psutil

from . import procs, rundir, sidecars
from .live import LiveGen
from .states import SlotState, TaskStatus, transition

EXIT_CODES = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}


def killed_status(reason: str) -> TaskStatus:
    """The status of a generation the supervisor ended on purpose, by the reason it was ended
    for: a time limit is ``timed_out``, its multiplexer gone is ``lost`` (re-run headless),
    anything else (cancel, halt, shutdown) ``cancelled``."""
    if reason in ("timeout", "idle_timeout"):
        return TaskStatus.TIMED_OUT
    if reason == "multiplexer_lost":
        return TaskStatus.LOST
    return TaskStatus.CANCELLED


class CancelMixin:
    def _install_signals(self) -> tuple[int | None, Callable[[], None]]:
        if threading.current_thread() is not threading.main_thread():
            return None, lambda: None
        r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        old_fd = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        old = {s: signal.signal(s, lambda *_: None) for s in EXIT_CODES}

        def restore() -> None:
            for s, h in old.items():
                signal.signal(s, h)
            signal.set_wakeup_fd(old_fd)
            os.close(r)
            os.close(w)

        return r, restore

    def _on_signals(self, fd: int) -> None:
        try:
            data = os.read(fd, 64)
        except BlockingIOError:
            return
        for num in data:
            sig = signal.Signals(num)
            if sig == signal.SIGHUP:
                self._detach()
                return
            if self.stop_signal is None:
                self.stop_signal = sig
                self._warn("cancelled_by_user", f"received {sig.name}", None)
                self._stop_everything("cancelled_by_user")

    def _on_failure(self) -> None:
        mode = self.settings.halt
        if mode == "never" or self.halted:
            return
        self.halted = True
        self._warn("halted", f"--halt {mode}: stopping after the first failure", None)
        self._cancel_pending("halted")
        if mode == "now":
            for lg in list(self.live.values()):
                self._kill(lg, "halted")

    def _stop_everything(self, reason: str) -> None:
        self.pool.close()
        self._cancel_pending(reason)
        for lg in list(self.live.values()):
            self._kill(lg, reason)
        # Their ends are reported by the launcher, which may be stopped or stuck: a pidfd on
        # each makes sure the run ends when they do.
        for lg in list(self.children.values()):
            if lg.pidfd is None and not lg.done:
                self._follow_pid(lg)

    def _cancel_pending(self, reason: str) -> None:
        for tid in self.ready.drain():
            self._finalise(self.tasks[tid], TaskStatus.CANCELLED, reason)
        self.snapshots.dirty = True

    def _kill(self, lg: LiveGen, reason: str) -> None:
        """End a generation on purpose (``reason``: timeout, cancel, halt…) through the one
        ladder of ``_end_tree``. The reason is written first, so whoever reads the exit —
        this supervisor or a resumed one — classifies it the same way."""
        if lg.collected or lg.kill_reason is not None:
            return
        lg.kill_reason = reason
        if lg.opening:
            return  # ended as soon as the backend says how it starts (``_launched``)
        try:
            rundir.write_atomic(lg.gen.kill, reason + "\n")
        except OSError as e:
            self._warn("state_dir_error", f"cannot record the kill reason: {e.strerror}", lg.task)
        if lg.in_pane and not lg.heartbeat_seen and sidecars.take_claim(lg.gen):
            # Its pane never started the wrapper, and now never will: nothing to end.
            self._unwatch(lg)
            self.backend.abandon(lg.pane_id, lg.request)
            self._end_generation(lg, None, killed_status(reason), reason)
            return
        if lg.pid is None and not lg.in_pane:
            return  # handed to the launcher, not started yet: ended the moment it starts
        self._end_tree(lg)

    def _end_tree(self, lg: LiveGen) -> None:
        """The one way a generation's processes are ended, whatever the cause (cancel,
        timeout, idle, halt, shutdown, a pane closed or its multiplexer lost): SIGTERM to
        every one of them now; after the ``kill_grace`` setting, SIGKILL to every one still
        alive — whether or not the wrapper has recorded its exit by then, since a child that
        ignores SIGTERM outlives it; one grace later the wrapper itself if it still has not.
        Its slot is not used again until the whole tree is gone (``_hold_slot``)."""
        if lg.ending:
            return
        lg.ending = True
        self._signal_tree(lg, signal.SIGTERM)
        self.timers.after(self.settings.kill_grace, lambda: self._kill_tree(lg))

    def _kill_tree(self, lg: LiveGen) -> None:
        lg.tree_killed = True
        self._signal_tree(lg, signal.SIGKILL)
        if lg.done:
            self._release_when_gone(lg, deadline=self.clock() + self.settings.kill_grace)
        else:
            self.timers.after(self.settings.kill_grace, lambda: self._kill_wrapper(lg))

    def _kill_wrapper(self, lg: LiveGen) -> None:
        if not lg.done and lg.pid:
            try:
                os.kill(lg.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def _signal_tree(self, lg: LiveGen, sig: int,
                     then: Callable[[list[psutil.Process]], None] | None = None) -> None:
        """Send ``sig`` to every process of the generation still running, its wrapper
        excluded, from the process runner's thread: finding them reads all of ``/proc``,
        which must not hold up the loop. ``then`` gets the processes that were signalled."""
        markers = procs.generation_markers(self.run_id, lg.gen.slot, lg.gen.gen)
        pid = lg.pid
        find: Callable[[], list[psutil.Process]]
        if not lg.done:  # the wrapper's descendants, and whatever carries the markers
            find = lambda: procs.generation_tree(pid, markers)  # noqa: E731
        else:  # ... or was started in the wrapper's session before the wrapper ended
            sessions = {pid: lg.task.ended_at or self.wallclock()} if pid else None
            find = lambda: [p for p in procs.marked(markers, sessions) if p.pid != pid]  # noqa: E731
        self.proc_calls.submit(lambda: procs.send(find(), sig),
                               None if then is None else lambda done: then(done.value or []))

    def _hold_slot(self, lg: LiveGen) -> bool:
        """At the end of a generation that is being ended: its slot stays ``stopping`` until
        no process of its tree is left, so a slot never runs two generations at once. True
        when the slot is held; ``_release_when_gone`` gives it back."""
        if not lg.ending:
            return False
        slot = lg.gen.slot
        self.slot_state[slot] = transition(f"slot {slot}", self.slot_state[slot], SlotState.STOPPING)
        self.stopping[slot] = lg
        if lg.tree_killed:  # the ladder is past SIGKILL: what is left was forked since
            self._kill_tree(lg)
        else:  # released now if nothing is left, else by the ladder's SIGKILL
            self._signal_tree(lg, 0, lambda left: left or self._release(lg))  # signal 0: is any left?
        return True

    def _release_when_gone(self, lg: LiveGen, *, deadline: float) -> None:
        if self.stopping.get(lg.gen.slot) is not lg:
            return

        def signalled(left: list[psutil.Process]) -> None:
            if left and self.clock() < deadline:
                self.timers.after(0.01, lambda: self._release_when_gone(lg, deadline=deadline))
                return
            if left:
                names = ", ".join(f"{p.pid} ({_name(p)})" for p in left[:10])
                self._warn("process_left_behind", f"{len(left)} process(es) of slot {lg.gen.slot} generation "
                                                  f"{lg.gen.gen} survived SIGKILL: {names}", lg.task)
            self._release(lg)

        self._signal_tree(lg, signal.SIGKILL, signalled)

    def _release(self, lg: LiveGen) -> None:
        slot = lg.gen.slot
        if self.stopping.get(slot) is not lg:
            return
        del self.stopping[slot]
        self._free_slot(slot)
        self.events.emit("slot_released", slot=slot, gen=lg.gen.gen)

    def _detach(self) -> None:
        """SIGHUP: leave the workers running; ``resume`` picks the run up."""
        self.detached = True
        self._warn("detached", "received SIGHUP: supervisor detached", None)

    def _reap_leftovers(self) -> None:
        """Processes still carrying the run's id (a daemon a worker left behind) are ended.
        So are the panes' holds (Zellij before 0.44) when their session is gone: they would
        otherwise end only with a pane that no longer exists."""
        sessions = {a.pid: a.ended_at for t in self.tasks.values() for a in t.history if a.pid and a.ended_at}
        left = procs.marked(procs.run_markers(self.run_id), sessions)
        holds = [] if self.backend.session_alive_now() else procs.marked(procs.hold_markers(self.run_id))
        if left:
            names = ", ".join(f"{p.pid} ({_name(p)})" for p in left[:10])
            self._warn("process_left_behind", f"{len(left)} process(es) of this run still running, ending them: "
                                              f"{names}", None)
            self.events.flush()  # on disk now: the grace below is why the run has not ended yet
        procs.end_all(holds, self.settings.kill_grace)
        for _ in range(5):  # a daemon may fork again while it is being ended: scan until none is left
            if not left:
                return
            procs.end_all(left, self.settings.kill_grace)
            left = procs.marked(procs.run_markers(self.run_id), sessions)



def _name(p: Any) -> str:
    try:
        return p.name()
    except Exception:
        return "?"
