"""Ending workers: one path for ``cancel``, Ctrl-C and SIGTERM, ``--halt``, timeouts and the
idle watchdog, plus SIGHUP's detach and the end-of-run sweep for processes left behind.

A worker's whole tree is ended: SIGTERM, then SIGKILL after a grace period, then the wrapper
itself if it still has not recorded the exit. The reason is written to the generation before
the first signal, so whoever reads the exit — this supervisor or a resumed one — classifies
it the same way. Part of ``Supervisor`` (a mixin only to keep the modules small).
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from typing import Any

from . import procs, rundir, sidecars
from .live import LiveGen
from .states import TaskStatus

KILL_GRACE = 2.0  # seconds between SIGTERM and SIGKILL when ending a worker's tree
EXIT_CODES = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}


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
                self.events.emit("warning", code="cancelled_by_user", message=f"received {sig.name}", task=None)
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

    def _cancel_pending(self, reason: str) -> None:
        for tid in self.ready.drain():
            self._finalise(self.tasks[tid], TaskStatus.CANCELLED, reason)
        self.snapshots.dirty = True

    def _kill(self, lg: LiveGen, reason: str) -> None:
        """End a generation's whole process tree: SIGTERM, then SIGKILL after a grace period,
        then the wrapper itself if it still has not recorded the exit."""
        if lg.done or lg.kill_reason is not None:
            return
        lg.kill_reason = reason
        try:
            rundir.write_atomic(lg.gen.kill, reason + "\n")
        except OSError as e:
            self._warn("state_dir_error", f"cannot record the kill reason: {e.strerror}", lg.task)
        if lg.in_pane and not lg.heartbeat_seen and sidecars.take_claim(lg.gen):
            # Its pane never started the wrapper, and now never will: nothing to end.
            self._unwatch(lg)
            self.backend.abandon(lg.pane_id, lg.request)
            self._end_generation(lg, None, TaskStatus.TIMED_OUT if reason == "timeout" else TaskStatus.CANCELLED,
                                 reason)
            return
        markers = procs.generation_markers(self.run_id, lg.gen.slot, lg.gen.gen)
        procs.send(procs.generation_tree(lg.pid, markers), signal.SIGTERM)

        def escalate() -> None:
            if lg.done:
                return
            procs.send(procs.generation_tree(lg.pid, markers), signal.SIGKILL)
            self.timers.after(KILL_GRACE, kill_wrapper)

        def kill_wrapper() -> None:
            if not lg.done and lg.pid:
                try:
                    os.kill(lg.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

        self.timers.after(KILL_GRACE, escalate)

    def _detach(self) -> None:
        """SIGHUP: leave the workers running; ``resume`` picks the run up."""
        self.detached = True
        self.events.emit("warning", code="detached", message="received SIGHUP: supervisor detached", task=None)

    def _reap_leftovers(self) -> None:
        """Processes still carrying the run's id (a daemon a worker left behind) are ended."""
        sessions = {a.pid: a.ended_at for t in self.tasks.values() for a in t.history if a.pid and a.ended_at}
        left = procs.marked(procs.run_markers(self.run_id), sessions)
        if not left:
            return
        names = ", ".join(f"{p.pid} ({_name(p)})" for p in left[:10])
        self._warn("process_left_behind", f"{len(left)} process(es) of this run still running, ending them: {names}", None)
        for _ in range(5):  # a daemon may fork again while it is being ended: scan until none is left
            procs.end_all(left, KILL_GRACE)
            left = procs.marked(procs.run_markers(self.run_id), sessions)
            if not left:
                return



def _name(p: Any) -> str:
    try:
        return p.name()
    except Exception:
        return "?"
