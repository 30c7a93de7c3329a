"""The durable record of a run (SPEC §7): the event log, snapshots, the saved environment.

``events.jsonl`` is append-only, one JSON object per line, so recording an event costs the
same with 10 tasks or 10,000. Lines are buffered and flushed once per supervisor loop turn
(and on every ``flush``), never rewritten. ``state.json`` is a whole snapshot, so it is
written at a bounded rate (``SnapshotWriter``) and always at the end.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from zellij_swarm import quoting
from zellij_swarm.config.swarmfile import is_env_name
from zellij_swarm.records.rundir import RunPaths, write_atomic, write_json_atomic


class EventLog:
    def __init__(self, path: Path, *, clock: Callable[[], float] = time.time,
                 on_emit: Callable[[], None] = lambda: None) -> None:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        _end_torn_line(fd)
        self._file = os.fdopen(fd, "a", encoding="utf-8", buffering=1 << 16)
        self._clock = clock
        self._on_emit = on_emit
        self._dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
        self.error: OSError | None = None

    def emit(self, event: str, **fields: Any) -> dict[str, Any]:
        record = {"ts": round(self._clock(), 6), "event": event, **fields}
        try:
            self._file.write(self._dumps(record) + "\n")
        except OSError as e:
            self._failed(e)
        self._on_emit()
        return record

    def flush(self) -> None:
        try:
            self._file.flush()
        except OSError as e:
            self._failed(e)

    def _failed(self, e: OSError) -> None:
        """The disk is full or went read-only: keep running; the caller reports ``error``."""
        self.error = self.error or e
        try:
            self._file.close()
        except OSError:
            pass
        self._file = open(os.devnull, "w")  # noqa: SIM115 - replaces the dead log for good

    def close(self) -> None:
        if not self._file.closed:
            self.flush()
            self._file.close()


def _end_torn_line(fd: int) -> None:
    """A supervisor killed mid-write leaves half a line at the end of the log: end it, or the
    next supervisor's first event would be glued to it and lost to every reader."""
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            os.write(fd, b"\n")
    except OSError:
        pass  # a full disk: the writes that follow report it


def read_events(path: Path) -> list[dict[str, Any]]:
    """Every complete line of an event log (a torn last line, from a crash, is skipped)."""
    out = []
    try:
        with open(path, "rb") as f:
            for line in f:
                if line.endswith(b"\n"):
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        continue
    except FileNotFoundError:
        pass
    return out


class SnapshotWriter:
    """Writes ``state.json`` at most once per ``interval`` seconds, plus on ``force``."""

    def __init__(self, run: RunPaths, build: Callable[[], dict[str, Any]], *, interval: float = 0.25,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._run = run
        self._build = build
        self._interval = interval
        self._clock = clock
        self._last = -float("inf")
        self.dirty = False
        self.error: OSError | None = None

    def touch(self) -> None:
        """Something changed: write a snapshot when the interval allows."""
        self.dirty = True

    def due_in(self) -> float | None:
        """Seconds until a pending write is due (None when nothing is pending)."""
        if not self.dirty:
            return None
        return max(0.0, self._last + self._interval - self._clock())

    def maybe_write(self) -> None:
        if self.dirty and self._clock() - self._last >= self._interval:
            self.write()

    def write(self, *, summary: Path | None = None) -> dict[str, Any]:
        """Write ``state.json``; at a run's end also ``summary`` (the same snapshot), first:
        a kill between the two then leaves the summary readers trust, never a state.json
        that says the run ended while no summary.json exists."""
        snap = self._build()
        for path in ([summary] if summary is not None else []) + [self._run.state]:
            try:
                write_json_atomic(path, snap)
            except OSError as e:
                self.error = self.error or e
        self._last = self._clock()
        self.dirty = False
        return snap


def save_environment(path: Path, env: Mapping[str, str]) -> None:
    """The caller's environment as a sourceable ``sh`` file (0600): a multiplexer pane gets
    the server's environment, and the wrapper restores this one instead."""
    lines = [f"export {k}={quoting.shell_word(v)}" for k, v in sorted(env.items()) if is_env_name(k)]
    # Byte-exact: os.environ holds bytes that are not UTF-8 as lone surrogates
    # (surrogateescape); they are written back as the very bytes they came from.
    write_atomic(path, ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape"), mode=0o600)


class SpaceReserve:
    """Room set aside at a run's start for its final records. A state directory that fills
    up during the run (a worker's output, another program) would otherwise leave no room
    for ``summary.json``, and the run would read ``interrupted`` for ever; releasing the
    reserve just before the summary is written gives it back."""

    def __init__(self, path: Path, tasks: int) -> None:
        self._path = path
        size = min(max(256 << 10, 1536 * tasks), 32 << 20)  # a summary row is ~1 KB
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError:
            return  # a full state dir is reported by the writes that matter
        try:
            os.posix_fallocate(fd, 0, size)
        except OSError:
            pass
        finally:
            os.close(fd)

    def release(self) -> None:
        try:
            os.unlink(self._path)
        except OSError:
            pass
