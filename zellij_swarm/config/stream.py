"""Tasks read from standard input as they arrive (``run -``, ``run --template T -`` with or
without ``-0``), as GNU parallel reads them (SPEC §4.6).

The run starts at the first task, not at the end of the input: ``InputStream.first`` reads
(blocking) until one task is complete or the input has ended, so an empty input and a bad first
record are what they are without a stream (``no tasks to run``, exit 2). The rest is read by the
supervisor's loop whenever the descriptor is readable — one ``read`` at a time, never blocking,
into a buffer of at most one read's worth — and taken from that buffer only while fewer than
``read_ahead(jobs)`` tasks wait for a slot: past that the pipe is not read, so the producer
blocks (backpressure) and memory stays bounded whatever it writes (``yes true | zellij-swarm
run -``).

A record is a line (``\\n``), or with ``-0`` a NUL-terminated item; a final record without its
terminator counts. Lines mode skips blank lines and ``#`` comments, as a lines file does; a
template's arguments are taken as they are (GNU parallel's reading). A bad record later on (not
UTF-8, a NUL byte in a line) stops the reading there: what was read runs, and the run says in
one line where the input went wrong.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, replace

from zellij_swarm import exc
from zellij_swarm.config import template as templates
from zellij_swarm.config.swarmfile import UTF8_BOM, TaskSpec

CHUNK = 1 << 16


def read_ahead(jobs: int) -> int:
    """How many tasks read from the input may wait for a slot before the input is read again."""
    return max(2 * jobs, 1000)


@dataclass
class Problem:
    """Why the reading stopped before the end of the input, and how far it had got."""

    message: str
    tasks_read: int

    @property
    def unread(self) -> str:
        """What it left unread, in one line: the run's ``input_error`` warning, and what it says
        at its end, which is exit 2 (SPEC §4.6)."""
        return f"{self.message}: the rest of the input is not read ({self.tasks_read} task(s) were read before it)"


class InputStream:
    def __init__(self, fd: int, source: str, *, separator: bytes, make: Callable[[str, int], TaskSpec | None]) -> None:
        """``make(text, record_number)``: the task of one record (None: a record that is
        no task, a blank line)."""
        self.fd = fd
        self.source = source
        self._separator = separator
        self._make = make
        self._buffer = b""  # read and not yet taken: whole records, then the start of one
        self._input_ended = False  # the descriptor said end of file
        self._records = 0
        self.tasks_read = 0
        self.ended = False  # every task of the input was taken (or the reading stopped: ``problem``)
        self.problem: Problem | None = None

    @classmethod
    def of_lines(cls, fd: int, source: str = "<stdin>") -> InputStream:
        """``run -``: one shell command per line, named ``task-N``."""
        def make(text: str, record: int) -> TaskSpec | None:
            command = text.strip()
            if not command or command.startswith("#"):
                return None
            if "\0" in command:
                raise exc.InputError("command contains a NUL byte", path=source, line=record)
            return TaskSpec(name="", cmd=command, source=source, line=record)

        return cls(fd, source, separator=b"\n", make=make)

    @classmethod
    def of_arguments(cls, fd: int, template: templates.Template, *, null: bool,
                     source: str = "<stdin>") -> InputStream:
        """``run --template TEMPLATE -`` (``-0``: NUL-separated): TEMPLATE once per argument."""
        def make(text: str, record: int) -> TaskSpec | None:
            if "\0" in text:
                raise exc.InputError(f"argument {record} contains a NUL byte (-0 reads NUL-separated arguments)",
                                     path=source)
            return TaskSpec(name="", cmd=templates.command(template, [text], record), source=source)

        return cls(fd, source, separator=b"\0" if null else b"\n", make=make)

    def first(self, limit: int) -> list[TaskSpec]:
        """Read, blocking, until one task is complete or the input has ended: at most ``limit``
        of the tasks read so far (the rest stays buffered). Bad input here is the caller's
        error (exit 2)."""
        while True:
            if tasks := self.take(1, strict=True):
                return tasks + self.take(limit - 1)  # a bad record past the first: the run says so
            if self._input_ended:
                return []
            try:
                self._fill(os.read(self.fd, CHUNK))
            except OSError as e:  # open for writing only (``0>>file``), or a device that fails
                raise exc.UsageError(f"cannot read {self.source}: {e.strerror}") from None

    @property
    def buffered(self) -> bool:
        """A whole record (or the input's last) waits in the buffer."""
        return self._separator in self._buffer or (self._input_ended and bool(self._buffer))

    def read(self) -> None:
        """One read of what is there (the descriptor is readable: it does not block) into the
        buffer; the caller takes the tasks (``take``)."""
        try:
            self._fill(os.read(self.fd, CHUNK))
        except OSError as e:
            self._stop(f"cannot read {self.source}: {e.strerror}")

    def _fill(self, data: bytes) -> None:
        if data:
            self._buffer += data
        else:
            self._input_ended = True
            if not self._buffer:
                self.ended = True

    def take(self, limit: int, *, strict: bool = False) -> list[TaskSpec]:
        """At most ``limit`` tasks from the records in the buffer; a bad record stops the
        reading (``problem``), or with ``strict`` raises."""
        tasks: list[TaskSpec] = []
        while len(tasks) < limit and not self.ended:
            cut = self._buffer.find(self._separator)
            if cut >= 0:
                raw, self._buffer = self._buffer[:cut], self._buffer[cut + len(self._separator):]
            elif self._input_ended:
                raw, self._buffer, self.ended = self._buffer, b"", True
                if not raw:
                    break
            else:
                break
            self._records += 1
            try:
                spec = self._make(self._decode(raw), self._records)
            except exc.InputError as e:
                if strict:
                    raise
                self._stop(str(e))
                break
            if spec is not None:
                self.tasks_read += 1
                tasks.append(replace(spec, name=f"task-{self.tasks_read}"))
        if self._input_ended and not self._buffer:
            self.ended = True
        return tasks

    def _decode(self, raw: bytes) -> str:
        if self._records == 1:
            raw = raw.removeprefix(UTF8_BOM)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise exc.InputError(f"record {self._records} is not valid UTF-8", path=self.source) from None

    def _stop(self, message: str) -> None:
        self.ended = True
        self.problem = Problem(message, self.tasks_read)
