"""The durable record of a run (SPEC §7): the event log, snapshots, the saved environment.

``events.jsonl`` is append-only, one JSON object per line, so recording an event costs the
same with 10 tasks or 10,000. Lines are buffered and flushed once per supervisor loop turn
(and on every ``flush``), never rewritten. ``state.json`` is rewritten whole, so it is
written at a bounded rate (``SnapshotWriter``) and always at the end; it holds the live part
of the run, and names how much of the append-only rows file (``snapshot_file``) it covers.
"""

from __future__ import annotations

import os
import time
from bisect import insort
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from zellij_swarm import jsontext
from zellij_swarm.jsontext import compact
from zellij_swarm.records import envfile, snapshot_file
from zellij_swarm.records.rundir import RunPaths, open_record, write_atomic
from zellij_swarm.records.snapshot_file import RowsFile

# The caller's environment, saved in its one format (the supervisor calls it by this name).
save_environment = envfile.save


class EventLog:
    """The run's event log, appended through a buffer that every loop turn flushes. A full or
    read-only disk does not end it: the lines that did not reach the file are kept, and each
    later flush cuts whatever part of them did reach it and writes them again, so that the log
    is whole once there is room (SPEC §5.8). ``error`` is the failure of the last write, None
    once the log is whole again."""

    def __init__(self, path: Path, *, clock: Callable[[], float] = time.time,
                 on_emit: Callable[[], None] = lambda: None) -> None:
        self._path = path
        self._clock = clock
        self._on_emit = on_emit
        self.error: OSError | None = None
        self._spilled: Path | None = None  # a spill (``spill``) of the lines since ``_good``
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        self._file: TextIO | None = os.fdopen(fd, "a", encoding="utf-8", buffering=1 << 16)
        self._unflushed: list[str] = []  # the lines since ``_good``
        if (spill := pending_spill(path)) is not None:
            self._good = spill.at  # an earlier supervisor's last lines, spilled: they come first
            self._unflushed = spill.body.decode("utf-8", "replace").splitlines(keepends=True)
            self._spilled = spill.path
            self._file.close()
            self._file = None
            self._rewrite()
        else:
            _end_torn_line(fd)
            self._good = os.fstat(fd).st_size  # the length known to be on disk, whole lines only

    def emit(self, event: str, **fields: Any) -> dict[str, Any]:
        record = {"ts": round(self._clock(), 6), "event": event, **fields}
        line = compact(record) + "\n"
        self._unflushed.append(line)
        if self._file is not None:
            try:
                self._file.write(line)
            except OSError as e:
                self._failed(e)
        self._on_emit()
        return record

    def flush(self) -> None:
        if self._file is None:
            self._rewrite()
            return
        try:
            self._file.flush()
            self._good = os.fstat(self._file.fileno()).st_size  # its only writer: whole lines
        except OSError as e:
            self._failed(e)
            return
        self._unflushed.clear()

    def _failed(self, e: OSError) -> None:
        """The disk is full or went read-only: keep running (the caller reports ``error``), the
        lines not written kept for ``_rewrite``."""
        self.error = e
        if self._file is not None:
            try:
                self._file.close()
            except OSError:
                pass  # its buffer is lost with it: the lines are in ``_unflushed``
            self._file = None

    def _rewrite(self) -> None:
        """Put back what did not reach the file: cut a part that did, write it all again."""
        try:
            fd = os.open(self._path, os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as e:
            self._failed(e)
            return
        try:
            os.ftruncate(fd, self._good)
            data = "".join(self._unflushed).encode()
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        except OSError as e:
            os.close(fd)
            self._failed(e)
            return
        self._good += len(data)
        self._unflushed.clear()
        self._file = os.fdopen(fd, "a", encoding="utf-8", buffering=1 << 16)
        self.error = None
        if self._spilled is not None:  # the log holds what the spill did: durably first
            try:
                os.fsync(fd)
                self._spilled.unlink()
            except OSError:
                pass  # a spill the log already holds is passed over by every reader
            self._spilled = None

    def spill(self, room: Path) -> bool:
        """Write the lines the log could not take into ``room``: the space set aside at the
        run's start for its last records (``SpaceReserve``), so taking it needs no new block.
        On a disk that something keeps full, those lines — the outcomes the launcher told
        while the disk refused the wrappers' sidecars — would otherwise be lost when this
        supervisor ends, and ``resume`` would find finished tasks ``unknown``. The longest run of
        whole lines that fits is kept, then the rest of the room is given back. Every reader
        (``iter_events``) reads the log up to where the spill starts, then the spill; the
        run's next ``EventLog`` (a ``resume``) puts it into the log. False when nothing needed it
        or it could not be written."""
        if self.error is None or not self._unflushed:
            return False
        header = compact({_SPILL_KEY: self._path.name, "at": self._good}).encode() + b"\n"
        try:
            fd = os.open(room, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            fits = os.fstat(fd).st_size - len(header)
            body = bytearray()
            for line in self._unflushed:
                data = line.encode()
                if len(body) + len(data) > fits:
                    break
                body += data
            if not body:
                return False
            # The body first, then the header that makes it a spill: a supervisor killed in
            # between leaves a plain reserve. Zeros past the body (killed before the cut) end it.
            os.pwrite(fd, body, len(header))
            os.fdatasync(fd)
            os.pwrite(fd, header, 0)
            os.fdatasync(fd)
            os.ftruncate(fd, len(header) + len(body))
        except OSError:
            return False
        finally:
            os.close(fd)
        self._spilled = room
        return True

    def close(self) -> None:
        self.flush()
        if self._file is not None:
            self._file.close()
            self._file = None


def _end_torn_line(fd: int) -> None:
    """A supervisor killed mid-write leaves half a line at the end of the log: end it, or the
    next supervisor's first event would be glued to it and lost to every reader."""
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            os.write(fd, b"\n")
    except OSError:
        pass  # a full disk: the writes that follow report it


_EVENT_KEY = b'"event":"'
_LINE_START = b'{"ts":'  # how every line the supervisor writes begins (``EventLog.emit``)


def _glued(line: bytes) -> Any:
    """The event a line that does not parse ends with, when it is one of ours glued to a
    partial line something else appended to the log while it was written
    (``{"ts":1,"ev{"ts":…}``): losing it, a resume took a task whose end it records for one
    that never ended, and ran it again. None when no whole event ends the line."""
    at = line.rfind(_LINE_START, 1)
    while at > 0:
        try:
            return jsontext.loads(line[at:].decode("utf-8"))
        except ValueError:
            at = line.rfind(_LINE_START, 1, at)
    return None


def parse_line(line: bytes) -> Any:
    """What a complete line of an event log holds: its JSON, or — a line glued to a partial
    one — the event it ends with (``_glued``); None when no whole event ends it."""
    try:
        return jsontext.loads(line.decode("utf-8"))  # (a str: bytes would have their encoding guessed)
    except ValueError:
        return _glued(line)


def read_events(path: Path, *, skip: frozenset[str] = frozenset(),
                only: frozenset[str] | None = None) -> list[dict[str, Any]]:
    """Every complete line of an event log, in a list (``iter_events``)."""
    return list(iter_events(path, skip=skip, only=only))


def iter_events(path: Path, *, skip: frozenset[str] = frozenset(), only: frozenset[str] | None = None,
                tally: dict[str, int] | None = None) -> Iterator[dict[str, Any]]:
    """Every complete line of an event log, one at a time (a torn last line, from a crash, is
    skipped): a resume of 100,000 tasks reads a log of some 300,000 events, which held at
    once were most of its memory. ``skip``: events of these names are left out; ``only``:
    all but those of these names are (``status --tag`` wants the tasks added, a few lines of
    hundreds of thousands). Either way a line is not even parsed when its name can be seen
    in it as the log writes it — a line that holds one event's start only: one glued to a
    partial line is the event it ends with (``_glued``), whatever name the partial one had
    got to. ``tally``: the events of its names are counted there instead (a line that holds a
    whole object, ``{`` to ``}``), not parsed either: a resume counts 50,000 ``backfill``
    events of a 100,000-task run, and reads nothing else of them."""
    def wanted(name: object) -> bool:  # (a name that is no string: a line that is no event)
        return isinstance(name, str) and name not in skip and (only is None or name in only)

    for line in _log_lines(path):
        if skip or only is not None or tally:
            at = line.find(_EVENT_KEY)
            if at >= 0 and line.find(_LINE_START, 1) < 0:
                start = at + len(_EVENT_KEY)
                name = line[start:line.find(b'"', start)].decode("utf-8", "replace")
                if tally and name in tally:
                    if line.startswith(b"{") and line.endswith(b"}\n"):
                        tally[name] += 1
                    continue
                if not wanted(name):
                    continue
        event = parse_line(line)
        if isinstance(event, dict) and wanted(event.get("event")):
            yield event


def last_events(path: Path, *, tail: int = 1 << 16) -> list[dict[str, Any]]:
    """The complete lines of the last ``tail`` bytes of an event log (a run's last word is
    among its last lines), then a spill's (``pending_spill``) when one holds the log's end."""
    if pending_spill(path) is not None:  # the log's end is in the spill: read through (rare)
        return list(deque(iter_events(path), maxlen=1000))
    try:
        with os.fdopen(open_record(path), "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - tail))
            lines = f.read().split(b"\n")
    except FileNotFoundError:
        return []
    if size > tail:
        lines = lines[1:]  # begins mid-line
    events = []
    for line in lines[:-1]:  # the last is empty, or torn
        try:
            event = jsontext.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events


def _log_lines(path: Path) -> Iterator[bytes]:
    """The complete lines of a log (a torn last one is passed over); with a spill pending, the
    log's up to where the spill starts, then the spill's."""
    spill = pending_spill(path)
    try:
        with os.fdopen(open_record(path), "rb") as f:  # a FIFO in its place is refused, not waited on
            left = spill.at if spill is not None else -1
            for line in f:
                if left >= 0:
                    if len(line) > left:
                        break
                    left -= len(line)
                if line.endswith(b"\n"):
                    yield line
    except FileNotFoundError:
        pass
    if spill is not None:
        yield from spill.body.splitlines(keepends=True)


_SPILL_KEY = "spill_of"
SPILL_ROOM = ".reserve"  # a run's room for its last records, beside its log (``SpaceReserve``)


@dataclass(frozen=True)
class Spill:
    path: Path
    at: int  # the length of the log the spilled lines follow
    body: bytes  # whole lines


def pending_spill(log: Path) -> Spill | None:
    """The lines a supervisor spilled into its reserved room (``EventLog.spill``) that the log
    does not hold yet (a log that went on from where the spill starts with the same lines holds
    them: a supervisor killed before it removed the spill it had just written back)."""
    room = log.parent / SPILL_ROOM
    try:
        with os.fdopen(open_record(room), "rb") as f:
            header = f.readline(256)
            if not header.startswith(b'{"%s":' % _SPILL_KEY.encode()):
                return None
            fields = jsontext.loads(header.decode("utf-8"))
            body = f.read().split(b"\0", 1)[0]
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(fields, dict) or fields.get(_SPILL_KEY) != log.name:
        return None
    at, body = fields.get("at"), body[:body.rfind(b"\n") + 1]
    if not isinstance(at, int) or at < 0 or not body:
        return None
    try:
        with os.fdopen(open_record(log), "rb") as f:
            at = min(at, os.fstat(f.fileno()).st_size)  # a log cut short since: the spill follows what is left
            f.seek(at)
            if f.read(len(body)) == body:
                return None
    except FileNotFoundError:
        at = 0
    except OSError:
        return None
    return Spill(room, at, body)


class SnapshotWriter:
    """Writes ``state.json`` at most once per ``interval`` seconds, plus on ``write``.

    ``build`` gives the snapshot; one that names the rows file (``snapshot_file``) has
    brought that file up to date first. The writer adds two figures of its own to the
    snapshot's ``metrics``: ``snapshot_write_ms`` (``p50``, ``max``, ``count`` of the time to
    build and write each snapshot before this one) and ``state_json_bytes`` (the length of
    this very snapshot as written)."""

    def __init__(self, run: RunPaths, build: Callable[[], dict[str, Any]], *, interval: float = 0.25,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._run = run
        self._build = build
        self._interval = interval
        self._clock = clock
        self._last = -float("inf")
        self.dirty = False
        self._error: OSError | None = None
        self.rows = RowsFile.of(run.dir)  # the builder's too: one appender per file
        self._took = _Durations()

    @property
    def error(self) -> OSError | None:
        """The first write of the snapshot or of its rows file that failed."""
        return self._error or self.rows.error

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
            self._write(None)

    def write(self, *, summary: Path | None = None, merged: bool = True) -> dict[str, Any]:
        """Write ``state.json``; at a run's end also ``summary`` (the same snapshot, with
        every row in it: ``summary.json`` is written once, and read by tools that know it as
        the whole record of a run), first: a kill between the two then leaves the summary
        readers trust, never a state.json that says the run ended while no summary.json
        exists. The rows file it names is made durable before the summary is written.

        Returns the whole snapshot, every row read back from the rows file
        (``snapshot_file.merge``: the run's end pays one pass over its rows); with
        ``merged=False``, the snapshot as built, its ``tasks`` the live rows only and its
        ``rows`` how much of the rows file stands for the rest (``snapshot_file.merge`` of it
        later gives the whole, even when the disk refused the write)."""
        snap = self._write(summary)
        return snapshot_file.merge(snap, self._run.dir) if merged else snap

    def _write(self, summary: Path | None) -> dict[str, Any]:
        began = time.perf_counter()
        snap = self._build()
        if summary is not None:
            snapshot_file.make_durable(self._run.dir, snap)
        data = self._encode(snap)
        error = None  # the state of this write only: a disk that has room again is fine again
        if summary is not None:
            try:
                write_atomic(summary, snapshot_file.whole_document(snap, self._run.dir))
            except OSError as e:
                error = e
        try:
            write_atomic(self._run.state, data)
        except OSError as e:
            error = error or e
        self._error = error
        self._took.add((time.perf_counter() - began) * 1000)
        self._last = self._clock()
        self.dirty = False
        return snap

    def _encode(self, snap: dict[str, Any]) -> bytes:
        """The snapshot as written, its own length in its ``metrics``: encoded once with a
        one-digit placeholder, which is then replaced (the first ``"state_json_bytes":0``
        of the document is the key: a quote inside a JSON string is escaped)."""
        figures = snap.get("metrics")
        if not isinstance(figures, dict):
            return (compact(snap) + "\n").encode()
        figures["snapshot_write_ms"] = self._took.figures()
        figures["state_json_bytes"] = 0
        data = (compact(snap) + "\n").encode()
        size = len(data)
        for _ in range(3):  # the length with its own digits in it
            size = len(data) - 1 + len(str(size))
        figures["state_json_bytes"] = size
        return data.replace(b'"state_json_bytes":0', b'"state_json_bytes":%d' % size, 1)



class _Durations:
    """``p50``, ``max`` and ``count`` of a run's snapshot writes, in ms: the median to 0.1 ms
    (one counter per distinct value, their sorted list kept as they appear), the max to
    0.01 ms."""

    def __init__(self) -> None:
        self._counts: dict[float, int] = {}
        self._keys: list[float] = []
        self._max = 0.0
        self.count = 0

    def add(self, ms: float) -> None:
        key = round(ms, 1)
        seen = self._counts.get(key)
        if seen is None:
            insort(self._keys, key)
        self._counts[key] = (seen or 0) + 1
        self._max = max(self._max, ms)
        self.count += 1

    def figures(self) -> dict[str, Any]:
        if not self.count:
            return {"p50": None, "max": None, "count": 0}
        rank, below, p50 = -(-self.count // 2), 0, self._keys[-1]
        for key in self._keys:
            below += self._counts[key]
            if below >= rank:
                p50 = key
                break
        return {"p50": p50, "max": round(self._max, 2), "count": self.count}


class SpaceReserve:
    """Room set aside at a run's start for its final records. A state directory that fills
    up during the run (a worker's output, another program) would otherwise leave no room
    for ``summary.json``, and the run would read ``interrupted`` for ever; it is given back
    just before the summary is written (``hand_over``). A room that holds a spill the log
    still needs (``pending_spill``: the run's log found the disk still full) is left as it is."""

    def __init__(self, run: RunPaths, tasks: int) -> None:
        self._path = run.dir / SPILL_ROOM
        size = min(max(256 << 10, 1536 * tasks), 32 << 20)  # a summary row is ~1 KB
        if pending_spill(run.events) is not None:
            return
        try:
            fd = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError:
            return  # a full state dir is reported by the writes that matter
        try:
            os.posix_fallocate(fd, 0, size)
        except OSError:
            pass
        finally:
            os.close(fd)

    def hand_over(self, log: EventLog) -> None:
        """Before a supervisor's last records: the lines its log could not take go into this
        room (``EventLog.spill``), which gives back the rest of it; with none, all of it is."""
        log.flush()
        if not log.spill(self._path):
            self.release()

    def release(self) -> None:
        try:
            os.unlink(self._path)
        except OSError:
            pass
