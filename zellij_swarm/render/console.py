"""What ``run`` prints while a swarm goes on (SPEC §3 ``output``).

- ``progress``: one line on stderr, redrawn in place on a terminal (``progress_line``);
  elsewhere one line per finished task. Headless, with stdout a terminal, each task's output
  is copied to stdout in one piece as it ends (as ``group`` does); with panes the panes show
  it, and the end-of-run line says how to read any task's output (``zellij-swarm logs RUN
  TASK``: a resumed run is not always the newest). A task that did not succeed gets a
  ``zellij-swarm logs RUN TASK`` hint.
- ``group``: each task's output copied in one piece when it finishes (as GNU parallel's
  ``--group``): the worker's stdout to stdout, its stderr to stderr (a pane's one terminal:
  both in stdout); its status line on stderr.
- ``tag``: like ``group`` with every output line prefixed by ``[task-name] ``.
- ``quiet``: nothing but errors, and one line at the end when the run had warnings.

The run's warnings (``warning``) are said on stderr as the supervisor records them, one line
each, in every mode but ``quiet``; ``--json`` carries them in the summary.

Outputs are streamed from ``output.log`` in chunks, so a 50 MB log costs no memory. With
``--json`` the task output goes to stderr so that stdout stays one JSON document.

Task output is copied byte for byte; every line the reporter writes itself (task names,
paths, notices) passes through ``quoting.terminal_text``.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import IO, Any

from zellij_swarm import quoting, streams
from zellij_swarm.config import state_dir
from zellij_swarm.engine.progress import ProgressFacts
from zellij_swarm.records import rundir
from zellij_swarm.records.generation_files import GenPaths
from zellij_swarm.records.rows import TaskRow, WarningRow
from zellij_swarm.records.rundir import RunPaths
from zellij_swarm.records.states import FAILED_STATUSES, RunState
from zellij_swarm.records.task import TaskRecord
from zellij_swarm.render.text import duration
from zellij_swarm.render.text import width as text_width


def describe(row: TaskRow, *, named: bool = True) -> str:
    """``name: failed (exit 3, 1.2s, 2 attempts)`` for one task row; without ``named``, only
    ``failed (exit 3, 1.2s)`` (for a table that has the name and attempts in columns)."""
    bits: list[str] = []
    sig, code, reason = row.get("signal"), row.get("exit_code"), row.get("reason")
    if sig:
        # a death by signal N is the shell's status 128+N: the signal alone says it
        bits.append(sig if code is None or code == 128 + _signal_number(sig) else f"exit {code} ({sig})")
    elif code not in (None, 0):
        bits.append(f"exit {code}")
    if reason and _RESTATES.get(row["status"]) != reason:
        bits.append(reason)
    if row.get("duration_s") is not None:
        bits.append(f"{row['duration_s']:.1f}s")
    if named and (row.get("attempts") or 0) > 1:
        bits.append(f"{row['attempts']} attempts")
    tail = f" ({', '.join(bits)})" if bits else ""
    shown = f"{status_word(row['status'])}{tail}"
    return f"{row['name']}: {shown}" if named else shown


# A reason that only says again what the status says.
_RESTATES = {"timed_out": "timeout"}


def _signal_number(name: str) -> int:
    try:
        return int(signal.Signals[name])
    except KeyError:
        return 0


def status_word(status: str) -> str:
    """A task's status as every view says it, the counters included: the word of the records
    and ``--json`` (``succeeded``, never ``ok``), ``timed_out`` read as ``timed out``."""
    return status.replace("_", " ")


# Counters in the order a person reads them: what went wrong first.
COUNT_ORDER = ("failed", "timed_out", "lost", "unknown", "cancelled", "skipped", "running", "pending", "succeeded")


def counts_text(counts: dict[str, int]) -> str:
    """``1 failed, 2 running, 7 succeeded``: the statuses that have tasks, failures first."""
    order = [k for k in COUNT_ORDER if k in counts] + [k for k in counts if k not in COUNT_ORDER]
    return ", ".join(f"{counts[k]} {status_word(k)}" for k in order if counts[k]) or "no tasks"


# What a program prints when it needs a terminal and has none: end-of-file at once on its
# stdin (Python's EOFError, "end of file on standard input", "not a tty" checks), a terminal
# ioctl that fails, curses that cannot start (setupterm, "Error opening terminal", a call that
# returned ERR). A heuristic, only for the failure hint below — and never a word every tool
# prints on an ordinary failure: "npm ERR!", apt's "Err:1", make's "Err 2", a parser's
# "unexpected EOF".
_NEEDS_TERMINAL = re.compile(
    rb"EOFError|EOF when reading|end[ -]of[ -]file[^\n]{0,24}(stdin|standard input)|not an? (tty|terminal)"
    rb"|inappropriate ioctl|setupterm|error opening terminal|_curses\.error|returned ERR", re.IGNORECASE)
_TAIL_BYTES = 2048
STDIN_HINT = "it has no terminal in compact/headless mode (stdin closed); --ui live gives it one"


def reads_as_needing_a_terminal(gen: GenPaths) -> bool:
    """Whether the end of a generation's output (its stderr, then its stdout) reads like a
    program that needed a terminal: it met end-of-file on its stdin, or could not set one up."""
    for path in (gen.stderr, gen.output):
        try:
            tail = rundir.read_record_tail(path, _TAIL_BYTES)  # a FIFO a worker put there is never waited on
        except OSError:
            continue
        if _NEEDS_TERMINAL.search(tail) is not None:
            return True
    return False


def progress_line(f: ProgressFacts, width: int) -> str:
    """``12/40 done · 3 running · 2 failed · 1 skipped · 1 waiting for input · 1m04s · ETA 2m10s
    · longest build-17 45s``, fitted to ``width``: the least needed parts go first when it
    is too long (longest task, ETA, elapsed). ``done`` counts every task that ended except the
    skipped ones, which are counted apart; ``waiting:`` names the tasks waiting for input.
    ETA: see ``_eta``."""
    c = f.counts
    total = sum(c.values())
    done = total - c.get("pending", 0) - c.get("running", 0) - c.get("skipped", 0)
    bad = sum(c.get(s, 0) for s in FAILED_STATUSES)
    parts = [f"{done}/{total} done", f"{c.get('running', 0)} running"]
    if bad:
        parts.append(f"{bad} failed")
    if c.get("skipped"):
        parts.append(f"{c['skipped']} skipped")
    if f.waiting:
        parts.append("waiting: " + ", ".join(quoting.terminal_text(name) for name in f.waiting))
    optional = [duration(f.elapsed)]
    if (eta := _eta(f)) is not None:
        optional.append(f"ETA {eta}")
    if f.running:
        name, ran = max(f.running, key=lambda r: r[1])
        optional.append(f"longest {quoting.terminal_text(name)} {duration(ran)}")
    prefix = "zellij-swarm: "
    while True:
        text = prefix + " · ".join(parts + optional)
        if len(text) <= width or not optional:
            return text[:width]
        optional.pop()


def _eta(f: ProgressFacts) -> str | None:
    """The work left — pending tasks at the mean duration of those that ended, running ones
    for what that mean leaves of them — spread over the slots, and never less than the
    longest a running one has left: it stays to the end. None before a first task ended
    (nothing to go by); ``<1s`` once the running ones have outlasted the mean."""
    if f.mean_duration is None or not (f.counts.get("pending") or f.running):
        return None
    mean = f.mean_duration
    left_each = [max(mean - ran, 0.0) for _, ran in f.running]
    left = max((f.counts.get("pending", 0) * mean + sum(left_each)) / max(f.jobs, 1), max(left_each, default=0.0))
    return duration(left) if left > 0 else "<1s"


class ConsoleReporter:
    def __init__(self, mode: str, *, out: IO[bytes] | None = None, err: IO[str] | None = None,
                 run_id: str = "", state_dir: Path | None = None) -> None:
        """``run_id``, ``state_dir``: a resumed run's, whose tasks may end (and be hinted at)
        before it says it started."""
        self.mode = mode
        # A run that goes on (resume, retry) began long before this command: its end says the
        # time this command took, and the run's own since it began.
        self._continued_since = time.monotonic() if run_id else None
        self.out = out if out is not None else streams.bytes_out(sys.stdout)
        self.err = err if err is not None else streams.text_or_nowhere(sys.stderr)
        # a worker's stderr goes to stderr as it came, as GNU parallel's --group does
        self.err_bytes: IO[bytes] = streams.bytes_out(self.err)
        self.tty = self.err.isatty()
        self.wants_progress = self._draws_progress()
        # the workers are shown in panes (the run's backend is a multiplexer): their output is
        # not copied in ``progress`` mode; without panes it is, to a terminal
        self.panes = False
        self._mode_unattached: str | None = None  # the mode ``hold_for_attach`` put aside
        self._line_shown = False
        self._run_id = run_id
        self._state_dir = state_dir  # the run's, once it said it started (``_command``)
        self._warnings = 0
        self._unwritable: set[IO[bytes]] = set()  # given up: nobody reads them (``_copy_or_give_up``)

    def _draws_progress(self) -> bool:
        # a terminal that cannot erase a line (TERM=dumb: Emacs' shell) gets a line per task
        return self.mode == "progress" and self.tty and os.environ.get("TERM") != "dumb"

    def hold_for_attach(self) -> None:
        """``run --attach`` from outside the multiplexer: the session's client takes this
        terminal, and the run's own output would be drawn over: quiet, unless the run falls
        back to headless (``running_headless``), and no client ever comes."""
        self._mode_unattached, self.mode = self.mode, "quiet"
        self.wants_progress = False

    def running_headless(self) -> None:
        """The run's backend could not open and the run goes on headless: no pane shows a
        worker, so their output is copied as a headless run's is; and with no session, no
        client takes this terminal: what ``hold_for_attach`` held back is shown after all."""
        self.panes = False
        if self._mode_unattached is not None:
            self.mode, self._mode_unattached = self._mode_unattached, None
            self.wants_progress = self._draws_progress()

    @property
    def copies_output(self) -> bool:
        """Whether each task's output is copied to stdout as it ends: in ``group`` and ``tag``,
        and in ``progress`` on a terminal when no pane shows it (as GNU parallel groups it)."""
        return self.mode in ("group", "tag") or (self.wants_progress and not self.panes and _isatty(self.out))

    def warning(self, w: WarningRow) -> None:
        """One warning of the run, as the supervisor records it: its line on stderr; in ``quiet``, counted for
        the one line at the end. A full state directory is said by ``problem`` already."""
        self._warnings += 1
        if self.mode != "quiet" and w.get("code") != "state_dir_error":
            task = f" {w['task']}:" if w.get("task") else ""
            self._say(f"zellij-swarm: warning [{w.get('code')}]{task} {w.get('message')}")

    def started(self, run: RunPaths, total: int) -> None:
        self._run_id = run.run_id
        self._state_dir = run.state_dir
        if self.mode != "quiet":
            self._say(f"zellij-swarm: run {run.run_id}: {total} task(s); records in {run.dir}")

    def notice(self, text: str) -> None:
        if self.mode != "quiet":
            self._say(f"zellij-swarm: {text}")

    def problem(self, text: str) -> None:
        """A fault the user must hear of even with ``--output quiet`` (records not written)."""
        self._say(f"zellij-swarm: {text}")

    def task_ended(self, task: TaskRecord, gen: GenPaths | None) -> None:
        if self.mode == "quiet":
            return
        row = task.row(now=None)
        if gen is not None and self.copies_output:
            tag = f"[{quoting.terminal_text(task.name)}] ".encode() if self.mode == "tag" else None
            self._clear_line()
            for log, to in ((gen.output, self.out), (gen.stderr, self.err_bytes)):
                if to not in self._unwritable:
                    self._copy_or_give_up(log, to, tag)
        if self.mode != "progress" or not self.tty or row["status"] != "succeeded":
            self._say_fitted(describe(row), " — ", self._hint(task, row, gen))

    def _hint(self, task: TaskRecord, row: TaskRow, gen: GenPaths | None) -> str:
        """Where to look at a task that did not succeed (and why, when the lack of a terminal
        is the likely cause); nothing for one that did, or never ran."""
        if row["status"] == "succeeded" or gen is None:
            return ""
        hint = self._command('logs', self._run_id, quoting.task_word(task.name, task.id))
        if row["status"] == "failed" and task.pane_id is None and reads_as_needing_a_terminal(gen):
            hint += f" ({STDIN_HINT})"
        return hint

    def _copy_or_give_up(self, path: Path, to: IO[bytes], prefix: bytes | None) -> None:
        """``_copy``; a stream that cannot be written — its reader went away (`run … | head`), a
        redirect's disk is full — is given up for the rest of the run, which goes on (its
        outcomes do not depend on anyone reading), and said once on stderr."""
        try:
            self._copy(path, to, prefix)
        except (OSError, ValueError) as e:  # ValueError: a stream its program closed
            self._unwritable.add(to)
            streams.discard_unwritten(to)
            which = "stdout" if to is self.out and self.out is not self.err_bytes else "stderr"
            why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            self._say(f"zellij-swarm: warning: the workers' output is no longer copied to {which} "
                      f"({why}); the run goes on: `{self._command('logs', self._run_id)} TASK` reads it")

    @staticmethod
    def _copy(path: Path, to: IO[bytes], prefix: bytes | None) -> None:
        """A worker's log copied to ``to`` in one piece (each line after ``prefix``, if any).
        A log that cannot be read — gone, or no plain file (a FIFO a worker put in its place
        is never waited on) — copies nothing; only a failed write raises (``OSError``)."""
        try:
            f = os.fdopen(rundir.open_record(path), "rb")
        except OSError:
            return
        with f:
            if prefix is None:
                shutil.copyfileobj(f, to, 1 << 16)
            else:
                for line in f:
                    to.write(prefix + line if line.endswith(b"\n") else prefix + line + b"\n")
        to.flush()

    def progress(self, facts: ProgressFacts) -> None:
        if not self.wants_progress:
            return
        try:
            self.err.write("\r\033[K" + progress_line(facts, self._width()))
            self.err.flush()
        except (OSError, ValueError):
            streams.discard_unwritten(self.err)
        self._line_shown = True

    def _width(self) -> int:
        """The terminal's width less one column (writing the last one would wrap the line)."""
        try:
            columns = os.get_terminal_size(self.err.fileno()).columns
        except (OSError, ValueError, AttributeError):
            columns = 0
        return max((columns or 80) - 1, 20)  # a terminal that says 0 columns has not been sized

    def finished(self, snapshot: dict[str, Any], exit_code: int) -> None:
        run_id = snapshot["run_id"]
        if self.mode == "quiet":
            if self._warnings:
                read = self._command("status", run_id)
                self._say_fitted(f"zellij-swarm: {self._warnings} warning(s); read them with:", " ", read)
            return
        counts = {k: v for k, v in snapshot["counts"].items() if v}
        wall = (snapshot["metrics"].get("wall_time_ms") or 0) / 1000
        summary = counts_text(counts)
        verb = "detached" if snapshot["state"] == RunState.INTERRUPTED else str(snapshot["state"])
        took = f"{wall:.1f}s" if self._continued_since is None else \
            f"{time.monotonic() - self._continued_since:.1f}s ({wall:.1f}s since the run began)"
        self._say_fitted(f"zellij-swarm: run {run_id} {verb} in {took}:", " ", f"{summary} (exit {exit_code})")
        if snapshot["state"] == RunState.INTERRUPTED:
            self._say_fitted("zellij-swarm: workers keep running; continue with:", " ", self._command("resume", run_id))
        elif not self.copies_output:  # the output was in panes, or only in the logs
            self._say_fitted("zellij-swarm: read any task's output with:", " ",
                             f"{self._command('logs', run_id)} TASK")

    def _command(self, name: str, *words: str) -> str:
        """Our command ``name`` with ``words`` as a hint offers it, reaching this run's records
        from here as things stand when it is printed (a worker may have made a state directory
        the rule now finds first)."""
        return state_dir.command(self._state_dir, name, *words)

    def _clear_line(self) -> None:
        if self._line_shown:
            self._line_shown = False
            try:
                self.err.write("\r\033[K")
            except (OSError, ValueError):
                streams.discard_unwritten(self.err)

    def _say_fitted(self, text: str, sep: str, tail: str) -> None:
        """``text``, ``sep`` and ``tail`` (a command to copy, or what a colon announces; none
        when empty) on one line — but on a terminal too narrow for it, ``tail`` on a line of
        its own, indented: a run id cut in the middle by the terminal's wrap is no command to
        copy (an 80-column terminal wrapped the last lines of every run)."""
        if not tail:
            self._say(text)
        elif self.tty and text_width(quoting.terminal_text(text + sep + tail)) > self._width() + 1:
            self._say(text + sep.rstrip())
            self._say(f"  {tail}")
        else:
            self._say(text + sep + tail)

    def _say(self, text: str) -> None:
        self._clear_line()
        try:
            self.err.write(quoting.terminal_text(text) + "\n")
            self.err.flush()
        except (OSError, ValueError):  # nobody reads stderr any more (`2>&1 | head`), or it was closed
            streams.discard_unwritten(self.err)


def _isatty(stream: IO[bytes]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
