"""Following generations the launcher does not report on — a pane's wrapper, an adopted one,
one whose launcher died: file events on the generation's directory bring its launch heartbeat
and its exit sidecar, and once the heartbeat names its pid, a pidfd in the loop's selector
notices it vanishing.

When no inotify watch can be added (the user's watches are used up: ENOSPC; no inotify
instance: EMFILE) the directory is polled instead, with one ``watch_failed`` warning: slower,
never lost. Where the kernel gives no pidfd (``pid_end``) a followed pid is looked for in
``/proc`` every ``POLL_INTERVAL`` instead, with one ``pidfd_unavailable`` warning.
"""

from __future__ import annotations

import errno
import os
import selectors
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zellij_swarm import pid_end
from zellij_swarm.engine.live import LiveGen
from zellij_swarm.engine.timers import Timers
from zellij_swarm.records import generation_files
from zellij_swarm.records.task import TaskRecord
from zellij_swarm.watch import Watcher
from zellij_swarm.worker import procs

POLL_INTERVAL = 0.25  # seconds between looks at a directory that cannot be watched (or a pid, in /proc)


@dataclass(frozen=True)
class Seen:
    """What the supervisor does with what a generation's files and pid show."""

    heartbeat: Callable[[LiveGen, dict[str, Any]], None]  # its launch heartbeat, first line
    ended: Callable[[LiveGen], None]  # its exit sidecar is there, or its wrapper is gone
    warn: Callable[[str, str, TaskRecord | None], None]


class GenerationWatch:
    def __init__(self, *, watcher: Watcher, selector: selectors.BaseSelector, timers: Timers, seen: Seen) -> None:
        self._watcher = watcher
        self._sel = selector
        self._timers = timers
        self._seen = seen
        self._by_dir: dict[Path, LiveGen] = {}
        self._watch_failed = False  # one cause, one warning: the rest are polled quietly
        self._pidfd_failed = False  # the same for pids
        self._polled_pids: dict[int, tuple[LiveGen, int]] = {}  # id(lg) -> (lg, pid): pids looked for in /proc

    def watch(self, lg: LiveGen) -> None:
        """Follow the generation's directory (once, until ``unwatch``)."""
        if lg.files_followed:
            return
        lg.files_followed = True
        if lg.remote:  # written on another host: no inotify event here (engine.remote)
            self._timers.after(POLL_INTERVAL, lambda: self._poll(lg))
            return
        try:
            self._watcher.add(lg.gen.dir)
        except OSError as e:
            # (a directory that is gone — its worker removed it — is polled, and nothing said:
            # its end is told as records removed; the watcher itself failing is worth a word)
            if not self._watch_failed and e.errno not in (errno.ENOENT, errno.ENOTDIR):
                self._watch_failed = True
                self._seen.warn("watch_failed", f"cannot watch {lg.gen.dir} ({e.strerror}); polling generation "
                                                f"directories every {POLL_INTERVAL:g}s instead", lg.task)
            self._timers.after(POLL_INTERVAL, lambda: self._poll(lg))
            return
        lg.watching_dir = True
        self._by_dir[lg.gen.dir] = lg

    def unwatch(self, lg: LiveGen) -> None:
        lg.files_followed = False
        if lg.watching_dir:
            self._watcher.remove(lg.gen.dir)
            self._by_dir.pop(lg.gen.dir, None)
            lg.watching_dir = False
        self._polled_pids.pop(id(lg), None)
        self._drop_pidfd(lg)

    def _drop_pidfd(self, lg: LiveGen) -> None:
        if lg.pidfd is not None:
            self._sel.unregister(lg.pidfd)
            os.close(lg.pidfd)
            lg.pidfd = None

    def follow_pid(self, lg: LiveGen, pid: int | None = None) -> None:
        """Notice the wrapper's end by a pidfd on ``pid`` (its heartbeat's), or by looks at
        /proc where there is no pidfd; one already gone has ended."""
        assert lg.pid is not None
        target = pid or lg.pid
        try:
            fd = pid_end.open_pidfd(target)
        except pid_end.PidfdUnavailable as e:
            self._follow_in_proc(lg, target, e)
            return
        if fd is None:
            self._pid_gone(lg)
            return
        self._drop_pidfd(lg)  # following another pid of it now: the one before would wake it for nothing
        lg.pidfd = fd
        self._sel.register(lg.pidfd, selectors.EVENT_READ, lambda: self._pid_gone(lg))

    def _follow_in_proc(self, lg: LiveGen, pid: int, error: OSError) -> None:
        if not self._pidfd_failed:
            self._pidfd_failed = True
            self._seen.warn("pidfd_unavailable", f"cannot open a pidfd ({error.strerror}: a kernel before Linux 5.3, "
                                                 f"or a seccomp filter); looking for followed workers in /proc every "
                                                 f"{POLL_INTERVAL:g}s instead", lg.task)
        start = pid_end.start_ticks(pid)
        if start is None:
            self._pid_gone(lg)
            return
        self._polled_pids[id(lg)] = (lg, pid)

        def look() -> None:
            if self._polled_pids.get(id(lg)) != (lg, pid):
                return  # unfollowed, or following another pid of it now
            if pid_end.ended(pid, start):
                del self._polled_pids[id(lg)]
                self._pid_gone(lg)
            else:
                self._timers.after(POLL_INTERVAL, look)

        self._timers.after(POLL_INTERVAL, look)

    def on_changes(self, dirs: Iterable[Path]) -> None:
        for d in dirs:
            if (lg := self._by_dir.get(d)) is not None:
                self.changed(lg)

    def changed(self, lg: LiveGen) -> None:
        """Look at a generation's files: its launch heartbeat, or its exit."""
        if lg.collected:
            return
        if not lg.heartbeat_seen and (hb := generation_files.launch_heartbeat(lg.gen)) is not None:
            lg.heartbeat_seen = True
            self._seen.heartbeat(lg, hb)
        if not lg.collected and generation_files.read_sidecar(lg.gen) is not None:
            self._seen.ended(lg)

    def _poll(self, lg: LiveGen) -> None:
        if lg.files_followed:
            self.changed(lg)
        if lg.files_followed:
            self._timers.after(POLL_INTERVAL, lambda: self._poll(lg))

    def _pid_gone(self, lg: LiveGen) -> None:
        self._drop_pidfd(lg)  # (a pidfd that has fired stays readable: never left registered)
        if lg.done:  # its exit sidecar was collected earlier in this loop turn
            return
        # A pane's heartbeat names its leader, which can die (kill -9) before the wrapper's
        # second stage, its child, has recorded anything: while that still runs, follow it.
        if lg.in_pane and generation_files.read_sidecar(lg.gen) is None and (
                stage := procs.wrapper_process(lg.gen)) is not None:
            self.follow_pid(lg, stage)
            return
        self._seen.ended(lg)
