"""Following a generation that runs in a multiplexer pane (SPEC §2, §5).

The wrapper in a pane is not the supervisor's child: its launch heartbeat and its exit
sidecar arrive as file events on the generation's directory, and once the heartbeat names
its pid, a pidfd notices it vanishing. A pane that does not report within the heartbeat
timeout loses its generation: the supervisor takes the claim and runs it headless with a
warning — or, under require, fails the task with ``<backend>_heartbeat_missing``. Part of
``Supervisor`` (a mixin only to keep the modules small).
"""

from __future__ import annotations

import os
import selectors
from dataclasses import replace

from . import procs, sidecars
from .live import LiveGen
from .states import TaskStatus


POLL_INTERVAL = 0.25  # seconds between looks at a generation directory that cannot be watched


class PaneFollowMixin:
    def _follow_pane(self, lg: LiveGen, pane_id: str | None) -> None:
        lg.pane_id = lg.task.pane_id = pane_id
        self.events.emit("pane_opened", task=lg.task.name, slot=lg.gen.slot, gen=lg.gen.gen, pane_id=pane_id)
        self._watch_generation(lg)
        self._running(lg)
        lg.deadlines.append(self.timers.after(self.settings.heartbeat_timeout, lambda: self._heartbeat_deadline(lg)))
        self._on_gen_change(lg)  # a fast pane may have reported before the watch existed

    def _watch_generation(self, lg: LiveGen) -> None:
        """File events on the generation's directory bring its heartbeat and its exit. When
        no watch can be added (the user's inotify watches are used up: ENOSPC) the
        directory is polled instead, with one ``watch_failed`` warning: slower, never lost."""
        if lg.files_followed:
            return
        lg.files_followed = True
        try:
            self.watcher.add(lg.gen.dir)
        except OSError as e:
            if not self._watch_failed:  # one cause, one warning: the rest are polled quietly
                self._watch_failed = True
                self._warn("watch_failed", f"cannot watch {lg.gen.dir} ({e.strerror}); polling generation "
                                           f"directories every {POLL_INTERVAL:g}s instead", lg.task)
            self.timers.after(POLL_INTERVAL, lambda: self._poll_generation(lg))
            return
        lg.watching_dir = True
        self.by_dir[lg.gen.dir] = lg

    def _poll_generation(self, lg: LiveGen) -> None:
        if lg.files_followed:
            self._on_gen_change(lg)
        if lg.files_followed:
            self.timers.after(POLL_INTERVAL, lambda: self._poll_generation(lg))

    def _on_files(self, changes: list) -> None:
        touched = {c.dir for c in changes}
        if self.paths.inbox in touched:
            self.control.read_inbox()
        for d in touched:
            lg = self.by_dir.get(d)
            if lg is not None:
                self._on_gen_change(lg)

    def _on_gen_change(self, lg: LiveGen) -> None:
        """A pane's generation directory changed: its launch heartbeat, or its exit."""
        if lg.collected:
            return
        if not lg.heartbeat_seen and (hb := sidecars.heartbeat_started(lg.gen)) is not None:
            lg.heartbeat_seen = True
            lg.pid = lg.task.pid = hb.get("pid")
            if isinstance(hb.get("pane_id"), str):
                lg.pane_id = lg.task.pane_id = hb["pane_id"]
            self.events.emit("worker_heartbeat_seen", task=lg.task.name, slot=lg.gen.slot, gen=lg.gen.gen,
                             pid=lg.pid, pane_id=lg.pane_id)
            self._running(lg)  # also when it reports before its pane's launch does
            if isinstance(lg.pid, int):
                self._follow_pid(lg)
        if not lg.collected and sidecars.read_sidecar(lg.gen) is not None:
            self._collect(lg)

    def _follow_pid(self, lg: LiveGen) -> None:
        """Notice the end of a wrapper that is not the launcher's child (a pane's, an adopted
        one, one whose launcher died): a pidfd in the selector. One already gone is
        collected at once — its exit sidecar, or its absence, says how it ended."""
        try:
            lg.pidfd = os.pidfd_open(lg.pid)  # type: ignore[arg-type]
        except ProcessLookupError:
            self._collect(lg)
            return
        self._sel.register(lg.pidfd, selectors.EVENT_READ, lg)

    def _heartbeat_deadline(self, lg: LiveGen) -> None:
        if lg.collected or lg.heartbeat_seen or not lg.in_pane:
            return
        if not sidecars.take_claim(lg.gen):
            # The pane claimed it: its heartbeat is on the way — unless the claimant is gone.
            pid = sidecars.wrapper_pid(lg.gen)
            if pid is not None and not procs.alive(pid):
                self._collect(lg)
            else:
                lg.deadlines.append(
                    self.timers.after(self.settings.heartbeat_timeout, lambda: self._heartbeat_deadline(lg)))
            return
        t = self.settings.heartbeat_timeout
        self.events.emit("heartbeat_missing", task=lg.task.name, slot=lg.gen.slot, gen=lg.gen.gen, pane_id=lg.pane_id)
        self.backend.abandon(lg.pane_id, lg.request)
        self._pane_fault(lg, "heartbeat_missing", f"pane {lg.pane_id} sent no launch heartbeat within {t:g}s",
                         claimed=True)

    def _pane_fault(self, lg: LiveGen, code: str, message: str, *, claimed: bool) -> None:
        """A multiplexer fault for one generation: a warning and the generation runs headless,
        or, under require, the task fails with the fault as its reason."""
        self._unwatch(lg)
        if not claimed and not sidecars.take_claim(lg.gen):
            self._follow_pane(lg, None)  # the pane exists after all and already claimed it
            return
        lg.request = replace(lg.request, claimed=True)
        if self.settings.require_multiplexer:
            self._end_generation(lg, None, TaskStatus.FAILED, f"{self.backend.name}_{code}")
            return
        self._warn(code, message, lg.task)
        [result] = self._start_headless([lg.request])
        self._launched(lg, result)

    def _unwatch(self, lg: LiveGen) -> None:
        lg.files_followed = False
        if lg.watching_dir:
            self.watcher.remove(lg.gen.dir)
            self.by_dir.pop(lg.gen.dir, None)
            lg.watching_dir = False
        if lg.pidfd is not None:
            self._sel.unregister(lg.pidfd)
            os.close(lg.pidfd)
            lg.pidfd = None
