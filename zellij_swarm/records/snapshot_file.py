"""A run's snapshot on disk (SPEC §7.1): ``state.json`` / ``summary.json`` and the task rows
file they name, ``tasks.jsonl`` — written here (``RowsFile``) and read back here (``load``,
``RowsReader``), the one reader every command and renderer uses.

A snapshot holds the run's live part: its slots, counts, metrics, warnings, and the rows of
the tasks whose row changes by itself (running: its duration grows). Every other row —
a terminal task's, frozen when it ended, or a waiting task's — is a line of ``tasks.jsonl``,
appended when it changed, so writing a snapshot costs the same with 100 or 100,000 tasks:

    {..., "tasks": [<running rows>], "rows": {"file": "tasks.jsonl", "bytes": N}, ...}

``tasks.jsonl`` is append-only, one JSON row per line; a later line for the same task id
supersedes an earlier one (a retried task gets a new row), and a row in the snapshot's own
``tasks`` supersedes the file's. ``N`` is how much of the file the snapshot covers: the file
is written up to ``N`` before the snapshot naming it, so a reader of exactly ``N`` bytes sees
every row as of that snapshot, whatever was appended since. A supervisor killed mid-write can
leave a torn last line; readers take only complete lines up to ``N``, and the next writer
ends the torn line first (``RowsFile``).

``load`` merges the two into the whole snapshot, every row in plan order (by the number of
the id, ``t<order>``): the shape ``status --json`` shows. A snapshot written before the rows
file existed has every row in ``tasks`` and no ``rows`` field; it reads back unchanged.
"""

from __future__ import annotations

import errno
import gc
import heapq
import os
import re
import stat
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO, ClassVar, cast

from zellij_swarm import jsontext
from zellij_swarm.jsontext import compact
from zellij_swarm.records import rows_index
from zellij_swarm.records.rows import Snapshot, TaskRow
from zellij_swarm.records.rows_index import IndexWriter
from zellij_swarm.records.rundir import UnsafeRecord, open_record, read_json

ROWS_FILE = "tasks.jsonl"

_TASK_ID = re.compile(r"t([0-9]{1,9})\Z")
_ID_KEY = b'","id":"'  # in a row line, right after the name
_CHUNK = 1 << 20  # bytes of the rows file read at a time
_BATCH = 1 << 20  # bytes of queued rows written without waiting for the next snapshot


def encode(row: Mapping[str, object]) -> bytes:
    """One line of the rows file (JSON escapes every newline inside a value)."""
    return (compact(row) + "\n").encode()


def pending_line(name: str, task_id: str, optional: Mapping[str, Any]) -> bytes:
    """The line of a task that has not run yet — ``encode(task.row(...))`` of such a task, at
    a fraction of its cost: a run of 100,000 tasks writes 100,000 of them at its start.
    ``optional``: the row's ``TaskRecord.optional_fields``."""
    tail = f",{compact(optional)[1:]}\n" if optional else "}\n"  # its members, after the row's own
    return (f'{{"name":{compact(name)},"id":{compact(task_id)},"status":"pending","exit_code":null,'
            '"signal":null,"attempts":0,"slot":null,"generation":null,"pid":null,"pane_id":null,'
            '"started_at":null,"ended_at":null,"duration_s":null,"reason":null,"waiting_input":false,'
            '"warnings":[],"history":[]' + tail).encode()


def reference(committed: int) -> dict[str, Any]:
    """A snapshot's ``rows`` field: it covers the rows file up to ``committed`` bytes."""
    return {"file": ROWS_FILE, "bytes": committed}


# ----- writing ------------------------------------------------------------------------------


class RowsFile:
    """The appending end of a run's rows file. Lines are queued (``add``) and written in one
    ``write`` by ``commit`` (or as soon as a MB of them is queued), which returns
    ``committed``: the length of the file that holds only complete lines, the ``N`` a
    snapshot may name. One per file in a process (``of``):
    whoever builds the snapshot and whoever writes it agree on that length.

    The file is opened for each commit (a few times a second), never held open. Its first
    commit ends a torn line a killed supervisor left. A write that fails (a full disk) keeps
    its lines queued — ``uncommitted`` gives them to the snapshot itself meanwhile — and the
    next commit first cuts whatever part of it reached the file, beyond ``committed``, where
    no reader looks."""

    _by_path: ClassVar[weakref.WeakValueDictionary[str, RowsFile]] = weakref.WeakValueDictionary()

    def __init__(self, path: Path) -> None:
        self.path = path
        self._queued: list[bytes] = []
        self._queued_bytes = 0
        self.committed: int | None = None  # unknown until the first commit looks at the file
        self._tail_dirty = False  # a failed write may have left part of itself past ``committed``
        self.error: OSError | None = None
        self._index = IndexWriter(path)  # tasks.idx: where each task's newest line is (rows_index)

    @classmethod
    def of(cls, run_dir: Path) -> RowsFile:
        path = run_dir / ROWS_FILE
        rows = cls._by_path.get(str(path))
        if rows is None:
            rows = cls._by_path[str(path)] = cls(path)
        return rows

    def add(self, line: bytes) -> None:
        self._queued.append(line)
        self._queued_bytes += len(line)
        if self._queued_bytes >= _BATCH and not self._tail_dirty:  # the rows of 100,000 new tasks
            self.commit()  # are not held all at once (after a failed write: at the next snapshot)

    def earlier_rows(self) -> rows_index.NewestLines | None:
        """The newest line of each task as the file holds it before this writer's first line
        — a resumed run's, as the supervisor before this one left them — from its index,
        brought up to the file first (``commit``); None when the index cannot say, or this
        writer has written already. ``close`` it when done."""
        if self.committed is not None or self._queued:
            return None
        committed = self.commit()
        if self.committed is None or not committed:  # an empty file, or one that could not be opened
            return None
        return rows_index.newest_lines(self.path.parent, self.path.name, committed, mapped=False)

    def uncommitted(self) -> list[TaskRow]:
        """The rows queued and not yet in the file (after a failed write)."""
        return [jsontext.loads(line) for line in self._queued]

    def commit(self, *, durable: bool = False) -> int:
        """Write what is queued (and with ``durable``, fsync the file); the committed length."""
        if not (self._queued or durable or self._tail_dirty) and self.committed is not None:
            return self.committed
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                         0o600)
            if not stat.S_ISREG(os.fstat(fd).st_mode):  # a FIFO put in its place would hold every read
                os.close(fd)
                raise UnsafeRecord(self.path, "no plain file")
        except OSError as e:
            self.error = self.error or e
            return self.committed or 0
        try:
            if self.committed is None:
                self.committed = _end_torn_line(fd)
                self._indexing(lambda: self._index.start(fd, self.committed or 0))
            elif self._tail_dirty:
                os.ftruncate(fd, self.committed)
                self._tail_dirty = False
            data = b"".join(self._queued)
            if data:
                self._tail_dirty = True
                _write_all(fd, data)
                self._tail_dirty = False
                written = self.committed
                self.committed += len(data)
                self._index.note_lines((line[:-1] for line in self._queued), written)
                self._queued.clear()
                self._queued_bytes = 0
                self._indexing(lambda: self._index.flush(self.committed or 0))
            if durable:
                os.fsync(fd)
                self._indexing(self._index.fsync)
            self.error = None  # whole again: a disk that has room again is fine again
        except OSError as e:
            self.error = self.error or e
        finally:
            os.close(fd)
        return self.committed or 0


    @staticmethod
    def _indexing(step: Callable[[], None]) -> None:
        """The index is a shortcut for readers, never a record: a step of it that fails (a
        full disk) leaves it behind the rows file, which readers then read instead."""
        try:
            step()
        except OSError:
            pass


def _end_torn_line(fd: int) -> int:
    """The file's length once a torn last line (a writer killed mid-line) is ended: the lines
    that follow must not be glued to it. Readers skip the line it leaves."""
    size = os.fstat(fd).st_size
    if size and os.pread(fd, 1, size - 1) != b"\n":
        _write_all(fd, b"\n")
        size += 1
    return size


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def make_durable(run_dir: Path, snap: dict[str, Any]) -> None:
    """The rows file a snapshot names is on disk before the snapshot is (``summary.json``,
    a commit marker, says the run ended: the rows it covers must survive a power loss)."""
    ref = snap.get("rows")
    if isinstance(ref, dict) and isinstance(ref.get("file"), str):
        RowsFile.of(run_dir).commit(durable=True)


# ----- reading ------------------------------------------------------------------------------


class RowsReader:
    """The rows of one rows file, read incrementally: each ``read`` parses only the complete
    lines appended since the last one (a renderer follows a run without re-reading it).
    The same file replaced (another inode) or shorter than already read is read afresh."""

    def __init__(self) -> None:
        self._reset(None)

    def _reset(self, key: tuple[str, int] | None) -> None:
        self._key = key
        self._offset = 0
        self._numbered: list[dict[str, Any] | None] = []  # by the number of the id
        self._named: dict[str, dict[str, Any]] = {}  # ids that are not t<n> (never written so), after

    def read(self, path: Path, upto: int) -> None:
        """Take in the file's complete lines up to ``upto`` bytes. What was appended since
        the last read is read forwards, later lines winning; a long stretch (a first read)
        backwards, a MB at a time, so that only the last line of each task is parsed, never
        the rows it supersedes (in a big run, every task's first row: it was added waiting)."""
        collecting = gc.isenabled()
        gc.disable()  # rows hold no cycles: collecting while 100,000 of them are made only costs time
        try:
            with os.fdopen(open_record(path), "rb") as f:  # a FIFO in its place is refused, not waited on
                key = (str(path), os.fstat(f.fileno()).st_ino)
                if key != self._key or upto < self._offset:
                    self._reset(key)
                end = self._lines_end(f, upto)
                if end - self._offset > _CHUNK:
                    self._backwards(f, end)
                elif end > self._offset:
                    f.seek(self._offset)
                    self._forwards(f.read(end - self._offset).split(b"\n")[:-1])
                self._offset = max(self._offset, end)
        except FileNotFoundError:
            self._reset(None)
        finally:
            if collecting:
                gc.enable()

    def _lines_end(self, f: BinaryIO, upto: int) -> int:
        """Where the complete lines up to ``upto`` end: the file may be shorter than said (a
        crash before its data reached the disk), its last line torn."""
        end = min(upto, os.fstat(f.fileno()).st_size)
        at = end
        while at > self._offset:
            step = min(_CHUNK, at - self._offset)
            f.seek(at - step)
            newline = f.read(step).rfind(b"\n")
            if newline >= 0:
                return at - step + newline + 1
            at -= step
        return self._offset

    def _forwards(self, lines: list[bytes]) -> None:
        numbers = _numbers(lines)
        latest: dict[int | bytes, bytes] = {}  # the last line of each task: the others are superseded
        for line, number in zip(lines, numbers, strict=True):
            # a line not as written here stands for itself; one damaged in place, for nothing
            latest[line if number < 0 or not rows_index.intact(line) else number] = line
        rows = _parse_whole(list(latest.values()))
        if rows is None:  # one of them does not parse: the line before it, if any, stands
            taken: set[int] = set()
            rows = _newest_that_parse(zip(reversed(lines), reversed(numbers), strict=True),
                                      taken.__contains__, taken.add)[::-1]
        for row in rows:
            self._put(row)

    def _backwards(self, f: BinaryIO, end: int) -> None:
        seen = bytearray()  # by number: a later line of that task was kept already
        done = _Newest()
        at, carry = end, b""
        while at > self._offset:
            step = min(_CHUNK, at - self._offset)
            at -= step
            f.seek(at)
            data = f.read(step) + carry
            cut = data.find(b"\n") + 1 if at > self._offset else 0  # a line cut by the block waits
            carry, lines = data[:cut], data[cut:].split(b"\n")[:-1]
            numbers = _numbers(lines)
            kept, marked = [], []
            for line, number in zip(reversed(lines), reversed(numbers), strict=True):
                if 0 <= number < len(seen) + 1_000_000:  # not an array of a made-up size
                    if number >= len(seen):
                        seen.extend(bytes(number + 1 - len(seen)))
                    elif seen[number]:
                        continue
                    if not rows_index.intact(line):  # damaged in place: the line before it stands
                        continue
                    seen[number] = 1
                    marked.append(number)
                kept.append(line)
            rows = _parse_whole(kept)
            if rows is None:  # one that looks whole does not parse: each line on its own
                for number in marked:
                    seen[number] = 0
                rows = _newest_that_parse(zip(reversed(lines), reversed(numbers), strict=True),
                                          lambda n: n < len(seen) and bool(seen[n]),
                                          lambda n: seen.__setitem__(n, 1) if n < len(seen) else None)
            for row in rows:  # the newest first
                done.put(self, row)

    def _put(self, row: Any) -> None:
        if not isinstance(row, dict) or not isinstance(row.get("id"), str):
            return
        number = _number(row["id"])
        if number is None or number > len(self._numbered) + 1_000_000:
            self._named[row["id"]] = row
            return
        if number >= len(self._numbered):
            self._numbered.extend([None] * (number + 1 - len(self._numbered)))
        self._numbered[number] = row

    def merged(self, rows: Iterable[Any]) -> list[dict[str, Any]]:
        """The file's rows with ``rows`` (a snapshot's own) over them, in plan order."""
        numbered = list(self._numbered)
        named = dict(self._named)
        for row in rows:
            if not isinstance(row, dict):
                continue
            tid = row.get("id")
            number = _number(tid) if isinstance(tid, str) else None
            if number is None or number > len(numbered) + 1_000_000:
                named[tid if isinstance(tid, str) else f"\0{len(named)}"] = row  # every row is kept
                continue
            if number >= len(numbered):
                numbered.extend([None] * (number + 1 - len(numbered)))
            numbered[number] = row
        return [r for r in numbered if r is not None] + list(named.values())

    def merge(self, snap: dict[str, Any], run_dir: Path) -> dict[str, Any]:
        """The whole snapshot ``snap`` stands for, read from ``run_dir``'s rows file as far
        as it says: every row, in plan order, no ``rows`` field. A snapshot without one (an
        older version's) is every row already, and is returned as it is."""
        ref = snap.get("rows")
        if not isinstance(ref, dict):
            return snap
        name, upto = ref.get("file"), ref.get("bytes")
        if isinstance(name, str) and "/" not in name and isinstance(upto, int) and not isinstance(upto, bool):
            self.read(run_dir / name, upto)
        else:
            self._reset(None)
        own = snap.get("tasks")
        tasks = self.merged(own if isinstance(own, list) else [])
        return {k: (tasks if k == "tasks" else v) for k, v in snap.items() if k != "rows"}


class _Newest:
    """Rows met newest first (a backward read): only the first of each id is put."""

    def __init__(self) -> None:
        self._numbers = bytearray()
        self._names: set[str] = set()

    def put(self, reader: RowsReader, row: Any) -> None:
        if not isinstance(row, dict) or not isinstance(row.get("id"), str):
            return
        number = _number(row["id"])
        if number is not None and number < len(self._numbers) + 1_000_000:
            if number >= len(self._numbers):
                self._numbers.extend(bytes(number + 1 - len(self._numbers)))
            elif self._numbers[number]:
                return
            self._numbers[number] = 1
        elif row["id"] in self._names:
            return
        else:
            self._names.add(row["id"])
        reader._put(row)


def _numbers(lines: list[bytes]) -> list[int]:
    """The number ``n`` of each row line's id ``t<n>``, or -1 for a line not as this module
    writes it. The id is the second key, after the name, whose own quotes are escaped: the
    first ``","id":"`` of such a line ends the name."""
    ids = [line[at:line.find(b'"', at)] if line.startswith(b'{"name":"') and (at := line.find(_ID_KEY) + 8) > 7
           else b"" for line in lines]
    return [int(tid[1:]) if tid[:1] == b"t" and tid[1:].isdigit() and len(tid) < 11 else -1 for tid in ids]


def _number(task_id: str) -> int | None:
    m = _TASK_ID.match(task_id)
    return int(m.group(1)) if m else None


def _parse_whole(lines: list[bytes]) -> list[Any] | None:
    """Lines of JSON parsed as one document (one parse shares the keys of every row: far less
    memory for a big run); None when one of them does not parse."""
    if not lines:
        return []
    try:
        parsed = jsontext.loads(b"[" + b",".join(lines) + b"]")
    except ValueError:
        return None
    return parsed if isinstance(parsed, list) and len(parsed) == len(lines) else None


def _newest_that_parse(newest_first: Iterable[tuple[bytes, int]], taken: Callable[[int], bool],
                       take: Callable[[int], None]) -> list[Any]:
    """The rows of lines met newest first (with their tasks' numbers, -1 for a line not as
    written here): for each task, its newest line that parses — one damaged in place that
    still looks whole leaves the line before it standing. ``taken``/``take``: the numbers
    whose row was taken already (in a newer stretch of the file), and taking one."""
    rows = []
    for line, number in newest_first:
        if number >= 0 and taken(number):
            continue
        try:
            row = jsontext.loads(line)
        except ValueError:
            continue
        if number >= 0:
            take(number)
        rows.append(row)
    return rows


def _parse(lines: Iterable[bytes]) -> list[Any]:
    """Lines of JSON, parsed as one document when they all are (one parse shares the keys
    of every row: far less memory for a big run), else one by one, skipping the broken one
    (the torn line a killed writer left, ended by the next)."""
    lines = list(lines)
    parsed = _parse_whole(lines)
    if parsed is not None:
        return parsed
    out = []
    for line in lines:
        try:
            out.append(jsontext.loads(line))
        except ValueError:
            continue
    return out


def merge(snap: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    """``RowsReader.merge`` with a reader of its own (``load`` of a snapshot already read)."""
    return RowsReader().merge(snap, run_dir)


def load(path: Path, *, rows: bool = True) -> Snapshot:
    """The snapshot ``path`` (``state.json`` or ``summary.json``) holds, whole: every task row
    merged from the rows file it names, in plan order — the shape of ``status --json``.
    Raises as ``read_json`` does (absent or empty: ``FileNotFoundError``; damaged:
    ``DamagedRecord``). ``rows=False`` reads only the snapshot (its live rows), for a caller
    that needs its state or counts. Typed as it was written (the writers' output is checked
    against the schema in the tests)."""
    snap: dict[str, Any] = read_json(path)
    if not isinstance(snap, dict):
        return cast(Snapshot, snap)
    if not rows:
        return cast(Snapshot, {k: v for k, v in snap.items() if k != "rows"})
    return cast(Snapshot, merge(snap, path.parent))


# ----- reading some rows: through the index ---------------------------------------------------


def _index_of(snap: dict[str, Any], run_dir: Path, *, mapped: bool = True) -> rows_index.NewestLines | None:
    ref = snap.get("rows")
    if not isinstance(ref, dict):
        return None
    name, upto = ref.get("file"), ref.get("bytes")
    if not isinstance(name, str) or "/" in name or not isinstance(upto, int) or isinstance(upto, bool):
        return None
    index = rows_index.newest_lines(run_dir, name, upto, mapped=mapped)
    if index is not None and not _every_task_in(index, snap):
        index.close()
        return None
    return index


def _every_task_in(index: rows_index.NewestLines, snap: dict[str, Any]) -> bool:
    """Whether the index (with the snapshot's own rows) has a line for as many tasks as the
    snapshot counts: an index cut short or zeroed under a good header (a disk's doing, or a
    hand's) lost tasks, which would vanish from every reading of it. (Counts that cannot be
    read say nothing.)"""
    counts = snap.get("counts")
    if not isinstance(counts, dict) or not all(isinstance(v, int) for v in counts.values()):
        return True
    own = {row["id"] for row in _own_rows(snap) if isinstance(row, dict) and isinstance(row.get("id"), str)}
    own_numbers = {n for i in own if (n := _number(i)) is not None and i == f"t{n}"}
    indexed = sum(1 for n in index.numbered() if n not in own_numbers)
    return indexed + len(own) >= sum(counts.values())


def _own_rows(snap: dict[str, Any]) -> list[Any]:
    own = snap.get("tasks")
    return own if isinstance(own, list) else []


def rows_with(snap: dict[str, Any], run_dir: Path, statuses: frozenset[str] | None) -> list[TaskRow]:
    """The rows of the whole snapshot ``snap`` (as written: its own rows, and ``rows`` naming
    the rows file) stands for whose status is one of ``statuses`` (None: every row), in plan
    order. Through the rows file's index (``rows_index``) only those rows are parsed; for
    every row, or without a trusted index, the rows file is read (``merge``)."""
    def chosen(rows: Iterable[Any]) -> list[TaskRow]:
        return [cast(TaskRow, r) for r in rows
                if isinstance(r, dict) and (statuses is None or r.get("status") in statuses)]

    index = None if statuses is None else _index_of(snap, run_dir)  # every row: one backward read is quicker
    numbers = [] if index is None else index.numbers(statuses)
    lines = [] if index is None else [index.line(n) for n in numbers]
    parsed = [] if None in lines else _parse(line for line in lines if line is not None)
    if index is None or len(parsed) != len(numbers):  # a line not as the index says
        return chosen(merge(snap, run_dir)["tasks"])
    by_number = dict(zip(numbers, parsed, strict=True))
    named = []
    for row in _own_rows(snap):  # newer than the file's
        number = _number(row["id"]) if isinstance(row, dict) and isinstance(row.get("id"), str) else None
        if number is None:
            named.append(row)
        else:
            by_number[number] = row
    return chosen([by_number[n] for n in sorted(by_number)] + named)


def whole_document(snap: dict[str, Any], run_dir: Path) -> Iterator[bytes]:
    """``merge(snap, run_dir)`` as compact JSON, in chunks, byte for byte: the rows file's
    lines copied as they are through its index, never parsed, one at a time — a run of
    100,000 tasks ends without holding its rows, as objects or as bytes; without a trusted
    index, merged and encoded whole. The lines are read twice: once to check every one is
    where the index says (else the whole is merged), once to copy them."""
    index = _index_of(snap, run_dir, mapped=False)
    try:
        if index is None or None in _row_lines(snap, index, _encoded):
            yield (compact(merge(snap, run_dir)) + "\n").encode()
            return
        keys = [k for k in snap if k != "rows"]
        at = keys.index("tasks") if "tasks" in keys else len(keys)
        before = compact({k: snap[k] for k in keys[:at]})[:-1]  # "{...", its closing brace left out
        after = compact({k: snap[k] for k in keys[at + 1:]})[1:]  # "...}", its opening brace left out
        yield f'{before}{"," if at else ""}"tasks":['.encode()
        separator = b""
        for line in _row_lines(snap, index, _encoded):
            if line is None:  # checked a moment ago: only a rows file rewritten since gets here
                raise OSError(errno.ESTALE, f"{run_dir}: the rows file changed while the summary was written")
            yield separator + line
            separator = b","
        yield f'],{after}\n'.encode() if after != "}" else b"]}\n"
    finally:
        if index is not None:
            index.close()


def _encoded(row: dict[str, Any]) -> bytes:
    return compact(row).encode()


def every_row_line(snap: dict[str, Any], run_dir: Path,
                   encode_own: Callable[[dict[str, Any]], bytes]) -> list[bytes] | None:
    """Every row of the whole snapshot ``snap`` stands for, each as a line of JSON, in plan
    order — the rows file's lines as they are (found through its index, never parsed), the
    snapshot's own rows (newer) through ``encode_own``. None without a trusted index."""
    index = _index_of(snap, run_dir)
    if index is None:
        return None
    out = []
    for line in _row_lines(snap, index, encode_own):
        if line is None:
            return None
        out.append(line)
    return out


def _unique(ascending: Iterable[int]) -> Iterator[int]:
    """Each number of an ascending sequence once."""
    last = None
    for n in ascending:
        if n != last:
            yield n
        last = n


def _row_lines(snap: dict[str, Any], index: rows_index.NewestLines,
               encode_own: Callable[[dict[str, Any]], bytes]) -> Iterator[bytes | None]:
    """``every_row_line``'s lines one by one; None for a line not where the index says."""
    own: dict[int, dict[str, Any]] = {}
    named = []
    for row in _own_rows(snap):
        if not isinstance(row, dict):
            continue
        number = _number(row["id"]) if isinstance(row.get("id"), str) else None
        if number is None:
            named.append(row)
        else:
            own[number] = row
    if not own:  # (a run that has ended, one between its tasks) the index's lines alone
        yield from map(index.line, index.numbered())
    else:
        for n in _unique(heapq.merge(index.numbered(), sorted(own))):
            yield encode_own(own[n]) if n in own else index.line(n)
    for row in named:
        yield encode_own(row)
