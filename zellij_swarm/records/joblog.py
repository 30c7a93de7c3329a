"""``run --joblog FILE``: one line per task in GNU parallel's joblog format, so the tools that
read parallel's joblogs (``parallel --retry-failed --joblog FILE``, scripts that cut its
columns) read a swarm's too.

The format, as GNU parallel 20221122 writes it (``print_joblog``, checked against its output)::

    Seq<TAB>Host<TAB>Starttime<TAB>JobRuntime<TAB>Send<TAB>Receive<TAB>Exitval<TAB>Signal<TAB>Command
    1	:	1796051483.328	     0.000	0	0	3	0	exit 3
    2	:	1796051483.334	     0.005	0	0	0	15	kill -TERM $$

* ``Seq``: the task's place in the run (its id ``tN`` → N), so a task keeps its number whatever
  order the tasks end in.
* ``Host``: ``:``, parallel's name for this machine. ``Send``: 0 (nothing is sent to another
  host). ``Receive``: the bytes of the final attempt's output — its stdout alone where stdout
  and stderr are kept apart (headless and compact workers), as parallel counts a job's stdout;
  a pane's one terminal holds both. 0 when the output is not on disk (a folded generation).
* ``Starttime``: Unix seconds with 3 decimals (``%.3f``); ``JobRuntime``: seconds truncated to
  milliseconds, right-aligned in 10 columns (``%10.3f``). Both are the final attempt's.
* ``Exitval``/``Signal`` (``exit_columns``): a normal exit is its code and signal 0; a death by
  signal is 0 and the signal's number; a worker the supervisor ended (time limit, cancel) is -1,
  as parallel marks the jobs it kills, and a worker that vanished without an exit record too.
  A task that did not succeed never writes ``0 0``: that pair is what ``--retry-failed`` takes
  for success.
* ``Command``: the task's command, newlines written as NUL bytes as parallel does (parallel
  turns them back when it re-reads the file).

A task writes its line once, when its final attempt has ended — a retried task is one line,
like parallel's ``--retries``. A task that never started (skipped, cancelled while it waited)
writes none: parallel writes nothing for a job it never started either.

The file is opened before anything runs, so a path that cannot be written is a usage error
(exit 2). As in parallel, ``FILE`` is truncated and starts with the header, and ``+FILE``
appends (the header too when the file is empty, which parallel omits: ``--retry-failed``
always takes the first line for the header).

The run records its joblog (``records.outputs``): a ``resume`` or ``retry`` appends to it
(``JobLog.continued``) — a retried task's new line after its old one, as parallel's
``--resume-failed`` does — and never writes a line the file already has (the killed
supervisor wrote it just before its end, the outcome not yet in its event log).
"""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from zellij_swarm import exc
from zellij_swarm.records.rundir import RunPaths, open_to_write, unwritable_why

HEADER = "Seq\tHost\tStarttime\tJobRuntime\tSend\tReceive\tExitval\tSignal\tCommand\n"
_SEQ = re.compile(r"t([1-9][0-9]*)\Z")
_NUMBERED_SIGNAL = re.compile(r"SIG([1-9][0-9]*)\Z")  # generation_files.signal_name's fallback
# Outcomes in which the supervisor ended the worker: parallel marks the jobs it kills -1.
_ENDED_BY_SUPERVISOR = frozenset({"timed_out", "cancelled"})


@dataclass(frozen=True, slots=True)
class JobLine:
    """What one joblog line says: a task and its final attempt."""

    seq: int
    started_at: float
    ended_at: float
    status: str  # the final attempt's status (SPEC §7.1)
    exit_code: int | None
    signal: str | None  # a name, "SIGTERM"
    command: str
    received: int = 0  # bytes of its output (``Receive``)

    @classmethod
    def of_row(cls, row: Mapping[str, Any], command: str) -> JobLine | None:
        """The line of a terminal task row (``status --json``); None for a task that never
        started. ``command`` is given by the caller: a row carries it only for generated names."""
        history = row.get("history") or []
        if not history:
            return None
        last = history[-1]
        seq = _SEQ.match(str(row.get("id")))
        if seq is None:
            raise ValueError(f"task {row.get('name')!r}: id {row.get('id')!r} is not t<N>")
        end = last.get("ended_at")
        # A worker that never reported its start (a pane that never came up) still failed the
        # task: it is logged, with no run time, so that ``--retry-failed`` runs it again.
        start = last.get("started_at")
        start = end if start is None else start
        if start is None:
            return None  # an attempt with no time at all: not a record this can read
        return cls(int(seq.group(1)), float(start), float(start if end is None else end), str(last.get("status")),
                   last.get("exit_code"), last.get("signal"), command)

    @property
    def key(self) -> tuple[str, str]:
        """What tells this line from every other: its ``Seq`` and ``Starttime`` columns."""
        return str(self.seq), f"{self.started_at:.3f}"

    def line(self) -> str:
        exitval, signo = exit_columns(self.status, self.exit_code, self.signal)
        runtime = int(max(0.0, self.ended_at - self.started_at) * 1000) / 1000  # truncated, as parallel does
        command = self.command.replace("\n", "\0")
        return (f"{self.seq}\t:\t{self.started_at:.3f}\t{runtime:10.3f}\t0\t{self.received}\t{exitval}\t{signo}"
                f"\t{command}\n")


def signal_number(name: str | None) -> int:
    """``"SIGTERM"`` → 15; ``"SIG40"`` (a signal Python has no name for) → 40; none → 0."""
    if not name:
        return 0
    try:
        return int(signal.Signals[name])
    except KeyError:
        numbered = _NUMBERED_SIGNAL.match(name)
        return int(numbered.group(1)) if numbered else 0


def exit_columns(status: str, exit_code: int | None, signal_name: str | None) -> tuple[int, int]:
    """``Exitval`` and ``Signal`` as parallel would write them for this outcome.

    A POSIX shell reports death by signal N as status 128+N, and the exit record then names
    the signal (generation_files): parallel writes that as ``0, N``."""
    if status == "succeeded":
        return 0, 0
    signo = signal_number(signal_name)
    code = exit_code
    if signo and code in (None, 128 + signo):
        code = 0
    if code is None or (code == 0 and (status in _ENDED_BY_SUPERVISOR or not signo)):
        code = -1  # killed by us, vanished, or no code at all: never the "0 0" of a success
    return code, signo


class JobLog:
    """An open joblog: ``task_finished`` appends one line and writes it through at once."""

    def __init__(self, path: Path, *, append: bool = False) -> None:
        self.path = path
        self.run: RunPaths | None = None  # the run whose tasks it logs, told once it exists: Receive reads it
        self.written: set[tuple[str, str]] = set()  # the keys of the lines it holds, when continued
        try:
            self._fd: int | None = open_to_write(path, os.O_CREAT | os.O_APPEND | (0 if append else os.O_TRUNC), 0o644)
        except OSError as e:
            raise exc.UsageError(f"--joblog {path}: cannot write it: {unwritable_why(e)}") from None
        try:
            if os.fstat(self._fd).st_size == 0:
                self._write(HEADER)
        except OSError as e:
            self.close()
            raise exc.UsageError(f"--joblog {path}: cannot write it: {e.strerror}") from None

    @classmethod
    def from_option(cls, value: str) -> JobLog:
        """``--joblog FILE`` truncates FILE; ``--joblog +FILE`` appends to it (parallel's rule)."""
        if value.startswith("+"):
            return cls(Path(value[1:]), append=True)
        return cls(Path(value))

    @classmethod
    def continued(cls, path: Path) -> JobLog:
        """The joblog of a run another supervisor began, appended to (module docstring)."""
        log = cls(path, append=True)
        try:
            with open(path, "rb") as f:
                for line in f:
                    columns = line.split(b"\t", 3)
                    if len(columns) > 2:
                        log.written.add((columns[0].decode("ascii", "replace"), columns[2].decode("ascii", "replace")))
        except OSError as e:
            log.close()
            raise exc.UsageError(f"joblog {path}: cannot read it: {e.strerror}") from None
        return log

    def task_finished(self, row: Mapping[str, Any], command: str) -> str | None:
        """Write the line of a task that reached its final status (nothing if it never
        started). A failed write returns a one-line warning, once: the joblog then stops, and
        the run goes on."""
        job = JobLine.of_row(row, command)
        if job is None or self._fd is None or job.key in self.written:
            return None
        job = replace(job, received=self._received(row))
        try:
            self._write(job.line())
        except OSError as e:
            self.close()
            return f"cannot write the joblog {self.path}: {e.strerror}; it stops at the tasks before {row['name']!r}"
        return None

    def _received(self, row: Mapping[str, Any]) -> int:
        """The bytes of the final attempt's output (its stdout where it is kept apart)."""
        last = (row.get("history") or [{}])[-1]
        slot, gen = last.get("slot"), last.get("generation")
        if self.run is None or not isinstance(slot, int) or not isinstance(gen, int):
            return 0
        try:
            return os.stat(self.run.gen(slot, gen).output).st_size
        except OSError:
            return 0

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def _write(self, text: str) -> None:
        assert self._fd is not None
        data = text.encode("utf-8", "surrogateescape")
        while data:  # one write per line in practice; a short write to a pipe is finished
            data = data[os.write(self._fd, data):]
