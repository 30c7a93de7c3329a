"""Group commit of the event log, then folding away what it made redundant (SPEC §7).

A generation's outcome event carries its exit record, so once that line is on disk for
good its small files are no longer the only copy of anything: ``generation_files.fold``
removes them. ``fdatasync`` of the log is the group commit: the supervisor's loop hands over
the generations it ended in a turn, after writing that turn's events, and a thread of its
own syncs once for all of them — while it syncs, the next turns' generations gather. One
sync per task on the loop would cost a journal commit per task, and every file the loop
creates meanwhile would wait on it. A sync that fails (full or read-only disk) folds
nothing: the files stay, and readers read them.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

from zellij_swarm.records import generation_files
from zellij_swarm.records.generation_files import GenPaths


class LogCommit:
    def __init__(self, log: Path, *, sync: Callable[[int], None] | None = None,
                 fold: Callable[[GenPaths], None] = generation_files.fold) -> None:
        self._fd = os.open(log, os.O_RDONLY | os.O_CLOEXEC)
        self._sync = sync or os.fdatasync
        self._fold = fold
        self._cond = threading.Condition()
        self._pending: list[GenPaths] = []
        self._unfolded = 0  # handed over and not folded yet (``backlog``)
        self._wanted = False  # a sync is asked for, with or without generations to fold
        self._closed = False
        self.error: OSError | None = None
        self.crash: Exception | None = None  # a fold's bug: the supervisor raises it (``raise_crash``)
        self._thread = threading.Thread(target=self._work, name="zellij-swarm log commit", daemon=True)
        self._thread.start()

    def submit(self, ended: list[GenPaths]) -> None:
        """Make the log as written so far durable, then fold ``ended`` (generations whose
        outcome that log holds). Called after the log was flushed."""
        with self._cond:
            self._pending.extend(ended)
            self._unfolded += len(ended)
            self._wanted = True
            self._cond.notify_all()

    @property
    def backlog(self) -> int:
        """Generations handed over and not folded yet. Folding is slower than a loop ending
        trivial tasks (a tenth of a millisecond of files each, on a thread that shares the
        interpreter with the loop): unchecked, 100,000 of them left tens of thousands
        waiting, each held in memory and on disk, and no shell came back (the supervisor
        holds dispatch above ``FOLD_BACKLOG``)."""
        return self._unfolded

    def raise_crash(self) -> None:
        """A fold raised (a bug): raise it here, on the supervisor's loop, which ends as on
        any internal error — its workers run on, and ``resume`` takes them up — rather than
        waiting for ever on folds that no longer come."""
        if self.crash is not None:
            raise self.crash

    def _folded(self, count: int) -> None:
        with self._cond:
            self._unfolded -= count

    def close(self) -> None:
        """Wait until everything handed over is durable and folded; a last sync makes the
        whole log durable (the run's summary is written after it). Closing again does nothing."""
        if self._closed:
            return
        self.submit([])
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join()
        os.close(self._fd)

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._wanted and not self._closed:
                    self._cond.wait()
                if not self._wanted:
                    return
                batch, self._pending, self._wanted = self._pending, [], False
            try:
                self._sync(self._fd)
            except OSError as e:
                self.error = self.error or e
                self._folded(len(batch))  # left as they are: not to be folded
                continue
            for gen in batch:
                try:
                    self._fold(gen)
                except Exception as e:  # a bug: told to the loop, which would otherwise wait on the backlog
                    self.crash = self.crash or e
                self._folded(1)
