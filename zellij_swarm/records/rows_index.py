"""The index of a run's rows file (SPEC §7.2): ``tasks.idx``, beside ``tasks.jsonl``, says
where the newest line of each task is and what its status is, so that ``status`` reads only
the rows it shows and ``status --json`` copies every row without parsing one.

    header  32 bytes: b"ZSWIDX1\\n", covered (u64), the rows file's inode (u64), crc32 of
            the 24 bytes before it (u32), 4 bytes of zeros
    entry   16 bytes at 32 + 16·n for task ``t<n>``: offset (u64) and length (u32) of its
            newest line, its status (u8, ``STATUSES``; 255 another word), 3 bytes of zeros;
            all zeros: no line yet

It is written by the rows file's one writer (``snapshot_file.RowsFile``) after the lines it
indexes, entries before header, and fsynced with them. The header's ``covered`` is the
length of the rows file the entries stand for. A reader trusts it only when it matches: the
same file (inode), ``covered`` not beyond the snapshot's ``N`` (a stretch up to ``N`` it does
not cover is read forwards from the file), every entry it uses inside ``covered`` and pointing
at a whole line of its own task. Anything else — no index (a run recorded before it, a
supervisor killed between the lines and their index), a torn or garbled one — and the reader
returns None: the caller reads the rows file itself, as before. Nothing is ever wrong for a
missing index, only slower.
"""

from __future__ import annotations

import errno
import heapq
import mmap
import os
import stat
import struct
import zlib
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from zellij_swarm import jsontext
from zellij_swarm.records.rundir import open_record

INDEX_FILE = "tasks.idx"
# The highest task number an index holds (an index of 160 MB): a row numbered beyond it is
# not one a run wrote (a hand's), and an index longer than that is no index of ours.
MOST_TASKS = 10_000_000
STATUSES = ("pending", "running", "succeeded", "failed", "timed_out", "cancelled", "skipped", "lost", "unknown")
OTHER = 255  # a status word not in STATUSES: the reader must parse the row to know it

_MAGIC = b"ZSWIDX1\n"
_HEADER = struct.Struct("<8sQQI4x")
_ENTRY = struct.Struct("<QIB3x")
_CODES = {s.encode(): i for i, s in enumerate(STATUSES)}
_ID_KEY = b'","id":"t'
_STATUS_KEY = b'","status":"'


def line_key(line: bytes) -> tuple[int, int] | None:
    """``(n, status code)`` of a row line as ``snapshot_file`` writes it (name, id ``t<n>``,
    status first), None for any other (a torn line, an id not numbered). A name's own quotes
    are escaped, so the first ``","id":"`` of such a line ends it."""
    if not line.startswith(b'{"name":"'):
        return None
    at = line.find(_ID_KEY)
    if at < 0:
        return None
    at += len(_ID_KEY)
    end = line.find(b'"', at)
    digits = line[at:end]
    if not digits.isdigit() or len(digits) > 9 or not line.startswith(_STATUS_KEY, end):
        return None
    at = end + len(_STATUS_KEY)
    word = line[at:line.find(b'"', at)]
    return int(digits), _CODES.get(word, OTHER)


# ----- writing ------------------------------------------------------------------------------


class IndexWriter:
    """The appending side: ``note`` each line as it is written to the rows file, ``flush``
    after the write (and ``fsync`` with the rows file's). ``start`` at the writer's first
    commit makes the index cover the file as it is (an index left by a supervisor killed
    before it caught up is caught up from the file; a missing or garbled one is rebuilt).
    A line that cannot be indexed (not as ``snapshot_file`` writes rows) removes the index:
    readers then read the rows file, which is always right."""

    def __init__(self, rows_path: Path) -> None:
        self.path = rows_path.with_name(INDEX_FILE)
        self._rows_path = rows_path
        self._entries: dict[int, bytes] = {}
        self._broken = False
        self._inode: int | None = None  # the rows file's, once ``start`` has looked at it
        self._covered = 0
        self._own: int | None = None  # the index file's inode, once written: it must stay that file

    def start(self, fd: int, size: int) -> None:
        """Bring the index up to the rows file ``fd`` of ``size`` bytes (its torn line ended)."""
        inode = os.fstat(fd).st_ino
        covered = _covered(self.path, inode)
        if covered is None or covered > size:
            covered = 0
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
        self._inode = inode
        at = covered
        while at < size:
            data = os.pread(fd, min(1 << 24, size - at), at)
            cut = data.rfind(b"\n") + 1
            if not cut:
                break
            self.note_lines(data[:cut].split(b"\n")[:-1], at, skip_torn=True)
            at += cut
        self._covered = covered
        self.flush(at)

    def note_lines(self, lines: Iterable[bytes], at: int, *, skip_torn: bool = False) -> None:
        """Lines (without their newline) written at offset ``at`` of the rows file."""
        entries = self._entries
        for line in lines:
            key = line_key(line)
            if key is None:
                if not skip_torn or _a_row(line):  # only a torn line, read back, is no row at all
                    self._broken = True
            elif key[0] > MOST_TASKS:  # a row no run of ours wrote: its entry would be gigabytes out
                self._broken = True
            else:
                entries[key[0]] = _ENTRY.pack(at, len(line) + 1, key[1])
            at += len(line) + 1

    def flush(self, covered: int) -> None:
        """Write the entries noted, then a header saying the index covers ``covered`` bytes."""
        if self._broken or self._inode is None:  # never started: a failed start leaves it to readers
            self._entries.clear()
            try:
                os.unlink(self.path)
            except OSError:  # none there (or a directory: readers refuse anything but a plain file)
                pass
            return
        if not self._entries and covered == self._covered:
            return
        # Once written, the index is added to, never made again: one removed or put in its
        # place since (by hand: a copy of an older one) would hold only the entries noted
        # since, under a header saying it covers the whole file. Then there is none: readers
        # read the rows file, as for a run recorded before the index.
        create = os.O_CREAT if self._own is None else 0
        try:
            fd = os.open(self.path, os.O_RDWR | create | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o600)
        except FileNotFoundError:
            self._broken = True
            self.flush(covered)
            return
        st = os.fstat(fd)
        if (self._own is not None and st.st_ino != self._own) or not stat.S_ISREG(st.st_mode):
            os.close(fd)
            self._broken = True
            self.flush(covered)
            return
        self._own = st.st_ino
        try:
            for first, run in _runs(sorted(self._entries)):
                _write_at(fd, b"".join(self._entries[n] for n in run), _HEADER.size + _ENTRY.size * first)
            self._entries.clear()
            _write_at(fd, _header(covered, self._inode), 0)
            self._covered = covered
        finally:
            os.close(fd)

    def fsync(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _write_at(fd: int, data: bytes, offset: int) -> None:
    """``pwrite`` all of ``data``, or raise: a write cut short (a disk that filled as the index
    grew) must not be followed by a header saying the index covers lines whose entries did not
    all reach it — those left would point at an older line of their task, which readers, and a
    resumed supervisor deciding which rows it need not write again, would take for its newest."""
    if os.pwrite(fd, data, offset) != len(data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _a_row(line: bytes) -> bool:
    try:
        return isinstance(jsontext.loads(line), dict)
    except ValueError:
        return False


def _runs(numbers: Sequence[int]) -> Iterable[tuple[int, list[int]]]:
    """Sorted numbers as runs of consecutive ones: one write per run."""
    run: list[int] = []
    for n in numbers:
        if run and n != run[-1] + 1:
            yield run[0], run
            run = []
        run.append(n)
    if run:
        yield run[0], run


def _header(covered: int, inode: int) -> bytes:
    head = struct.pack("<8sQQ", _MAGIC, covered, inode)
    return _HEADER.pack(_MAGIC, covered, inode, zlib.crc32(head))


def _covered(path: Path, inode: int) -> int | None:
    """How much of the rows file of ``inode`` the index at ``path`` covers; None when it is
    missing, garbled, another file's, or has entries past what it covers (a writer killed
    between its entries and its header may have left them for lines that never reached the
    disk)."""
    data = _read_index(path)
    if data is None:
        return None
    covered = _valid_header(data[:_HEADER.size], inode)
    if covered is None or _entries(data, covered) is None:
        return None
    return covered


def _read_index(path: Path) -> bytes | None:
    """The index file's bytes; None unless it is a plain file (never a link followed, or a
    FIFO waited on) of a size an index can have."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > _HEADER.size + _ENTRY.size * (MOST_TASKS + 1):
            return None
        with os.fdopen(os.dup(fd), "rb") as f:
            return f.read()
    except OSError:
        return None
    finally:
        os.close(fd)


def _valid_header(head: bytes, inode: int) -> int | None:
    if len(head) != _HEADER.size:
        return None
    magic, covered, of, crc = _HEADER.unpack(head)
    if magic != _MAGIC or of != inode or crc != zlib.crc32(head[:24]):
        return None
    return int(covered)


# ----- reading ------------------------------------------------------------------------------


def _entries(data: bytes, covered: int) -> memoryview | None:
    """The index's entries, whole ones only, as they are in ``data`` (16 bytes each, read in
    place: no object per task — a dict of them was a 100,000-task run's largest thing at
    its end); None when one points past ``covered`` (written after its header: a writer
    caught mid-way, or killed there)."""
    body = memoryview(data)[_HEADER.size:]
    body = body[:len(body) - len(body) % _ENTRY.size]
    if any(length and offset + length > covered for offset, length, _ in _ENTRY.iter_unpack(body)):
        return None
    return body


class NewestLines:
    """Where each task's newest line is, as of ``upto`` bytes of the rows file: ``line``
    gives one (bytes, newline cut), checked. Read through a mapping (``status``: only the
    pages of the rows it shows are read) or, ``mapped=False``, line by line with ``pread``
    (a pass over every row, at a run's end: a mapping's pages, all read, would count as the
    supervisor's memory — most of it, at 100,000 tasks). ``close`` when done."""

    def __init__(self, rows: mmap.mmap | int, entries: memoryview, later: dict[int, tuple[int, int, int]]) -> None:
        self._rows = rows  # the mapping, or the open file's descriptor
        self._entries = entries  # the index's, as ``_entries`` checked them
        self._later = later  # n -> (offset, length, status code) of lines past what the index covers

    def close(self) -> None:
        if isinstance(self._rows, int):
            os.close(self._rows)
        else:
            self._rows.close()

    def _entry(self, n: int) -> tuple[int, int, int] | None:
        if n in self._later:
            return self._later[n]
        if n < len(self._entries) // _ENTRY.size:
            entry: tuple[int, int, int] = _ENTRY.unpack_from(self._entries, _ENTRY.size * n)
            return entry if entry[1] else None
        return None

    def numbered(self) -> Iterator[int]:
        """The numbers of the tasks with a line, ascending."""
        return (n for n, _ in self._coded())

    def _coded(self) -> Iterator[tuple[int, int]]:
        """(number, status code) of each task with a line, ascending."""
        if not self._later:  # (most readings: nothing written since the index) no merge
            return ((n, code) for n, (_, length, code) in enumerate(_ENTRY.iter_unpack(self._entries)) if length)
        indexed = ((n, code) for n, (_, length, code) in enumerate(_ENTRY.iter_unpack(self._entries))
                   if length and n not in self._later)
        return heapq.merge(indexed, sorted((n, code) for n, (_, _, code) in self._later.items()))

    def numbers(self, statuses: frozenset[str] | None = None) -> list[int]:
        """The tasks' numbers in plan order; with ``statuses``, only the rows that may have one
        of them (a word the index does not know is kept: its row says)."""
        codes = None if statuses is None else {i for i, s in enumerate(STATUSES) if s in statuses} | {OTHER}
        return [n for n, code in self._coded() if codes is None or code in codes]

    def line(self, n: int) -> bytes | None:
        """Task ``t<n>``'s newest line, None when the index does not point at a line of it."""
        entry = self._entry(n)
        line = self._whole_line(entry[0], entry[1]) if entry is not None else None
        if line is None:
            return None
        # a row's own quotes are escaped: its id and status keys, in this order, are only its own
        return line if line.startswith(b'{"name":"') and b'","id":"t%d","status":"' % n in line \
            and intact(line) else None

    def holds(self, n: int, line: bytes) -> bool:
        """Whether task ``t<n>``'s newest line is ``line`` (a row of that task as
        ``snapshot_file`` writes it, its newline cut), byte for byte: what ``line`` checks of
        the row found, ``line`` is already."""
        entry = self._entry(n)
        return entry is not None and entry[1] == len(line) + 1 and self._whole_line(entry[0], entry[1]) == line

    def _whole_line(self, offset: int, length: int) -> bytes | None:
        """The line of ``length`` bytes (its newline in them) at ``offset``, without its
        newline; None unless a newline ends it and another, or the file's start, comes
        before it (or it cannot be read)."""
        start = offset - 1 if offset else 0  # the byte before it too: a line starts after a newline
        end = offset + length
        try:
            read = os.pread(self._rows, end - start, start) if isinstance(self._rows, int) else self._rows[start:end]
        except OSError:
            return None
        if len(read) != end - start or read[-1:] != b"\n" or (offset and read[:1] != b"\n"):
            return None
        return read[offset - start:-1]


_CONTROL_BYTES = bytes(range(32))


def intact(line: bytes) -> bool:
    """Whether a row line (without its newline) can be as it was written: JSON escapes every
    control character, and a row's object ends it. One with a raw control byte in it, or cut
    short, was damaged in place (a disk's doing, or a hand's): copied as it is, it made
    ``status --json`` invalid JSON; taken for its task's newest, it hid the row before it."""
    return line.endswith(b"}") and len(line.translate(None, _CONTROL_BYTES)) == len(line)


def newest_lines(run_dir: Path, rows_file: str, upto: int, *, mapped: bool = True) -> NewestLines | None:
    """The newest line of every task in ``rows_file`` up to ``upto`` bytes, from its index;
    None when the index cannot be trusted (the caller reads the rows file instead).
    ``mapped``: read through a mapping, else with ``pread`` (``NewestLines``)."""
    data = _read_index(run_dir / INDEX_FILE)
    if data is None:
        return None
    try:
        with os.fdopen(open_record(run_dir / rows_file), "rb") as f:  # not a FIFO: it would hold the read
            size = os.fstat(f.fileno()).st_size
            covered = _valid_header(data[:_HEADER.size], os.fstat(f.fileno()).st_ino)
            if covered is None or covered > upto or size < upto or not upto:
                return None
            entries = _entries(data, covered)
            if entries is None:
                return None
            later: dict[int, tuple[int, int, int]] = {}
            if covered < upto:  # lines the index does not cover yet: read them forwards
                at = covered
                for line in os.pread(f.fileno(), upto - covered, covered).split(b"\n")[:-1]:
                    key = line_key(line)
                    if key is not None:
                        later[key[0]] = (at, len(line) + 1, key[1])
                    at += len(line) + 1
            rows: mmap.mmap | int = (mmap.mmap(f.fileno(), upto, access=mmap.ACCESS_READ) if mapped
                                     else os.dup(f.fileno()))  # only the rows used are read
    except (OSError, ValueError):
        return None
    return NewestLines(rows, entries, later)
