"""What ``run`` prints while a swarm goes on (SPEC §3 ``output``).

- ``progress``: one line on stderr, redrawn in place on a terminal (``progress_line``);
  elsewhere one line per finished task. Worker output stays in the logs; a task that did not
  succeed gets a ``zellij-swarm logs RUN TASK`` hint.
- ``group``: each task's output copied to stdout in one piece when it finishes (as GNU
  parallel's ``--group``), its status line on stderr.
- ``tag``: like ``group`` with every output line prefixed by ``[task-name] ``.
- ``quiet``: nothing but errors.

Outputs are streamed from ``output.log`` in chunks, so a 50 MB log costs no memory. With
``--json`` the task output goes to stderr so that stdout stays one JSON document.

Task output is copied byte for byte; every line the reporter writes itself (task names,
paths, notices) passes through ``quoting.terminal_text``.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
from typing import IO, Any

from zellij_swarm import quoting
from zellij_swarm.engine.progress import ProgressFacts
from zellij_swarm.records.generation_files import GenPaths
from zellij_swarm.records.rundir import RunPaths
from zellij_swarm.records.states import FAILED_STATUSES
from zellij_swarm.records.task import TaskRecord
from zellij_swarm.render.text import duration

_MARK = {"succeeded": "ok", "failed": "FAILED", "timed_out": "TIMED OUT", "cancelled": "cancelled",
         "skipped": "skipped", "lost": "LOST", "unknown": "UNKNOWN"}


def describe(row: dict[str, Any], *, named: bool = True) -> str:
    """``name: failed (exit 3, 1.2s, 2 attempts)`` for one task row; without ``named``, only
    ``failed (exit 3, 1.2s)`` (for a table that has the name and attempts in columns)."""
    bits = []
    if row.get("signal"):
        bits.append(f"exit {row['exit_code']} ({row['signal']})" if row.get("exit_code") is not None else row["signal"])
    elif row.get("exit_code") not in (None, 0):
        bits.append(f"exit {row['exit_code']}")
    if row.get("reason"):
        bits.append(row["reason"])
    if row.get("duration_s") is not None:
        bits.append(f"{row['duration_s']:.1f}s")
    if named and (row.get("attempts") or 0) > 1:
        bits.append(f"{row['attempts']} attempts")
    tail = f" ({', '.join(bits)})" if bits else ""
    shown = f"{_MARK.get(row['status'], row['status'])}{tail}"
    return f"{row['name']}: {shown}" if named else shown


# Counters in the order a person reads them: what went wrong first.
COUNT_ORDER = ("failed", "timed_out", "lost", "unknown", "cancelled", "skipped", "running", "pending", "succeeded")


def counts_text(counts: dict[str, int]) -> str:
    """``1 failed, 2 running, 7 succeeded``: the statuses that have tasks, failures first."""
    order = [k for k in COUNT_ORDER if k in counts] + [k for k in counts if k not in COUNT_ORDER]
    return ", ".join(f"{counts[k]} {k.replace('_', ' ')}" for k in order if counts[k]) or "no tasks"


# What a program prints when its stdin gives end-of-file at once (Python's EOFError, C's
# "end of file", "not a tty" checks): a heuristic, only for the failure hint below.
_STDIN_EOF = re.compile(rb"\bEOF\b|EOFError|end[ -]of[ -]file|not an? (tty|terminal)|inappropriate ioctl",
                        re.IGNORECASE)
_TAIL_BYTES = 2048
STDIN_HINT = "stdin is closed in compact/headless mode; --ui live gives it a terminal"


def read_stdin_eof(gen: GenPaths) -> bool:
    """Whether the end of a generation's output reads like a program that met end-of-file
    on its stdin."""
    try:
        with open(gen.output, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - _TAIL_BYTES))
            return _STDIN_EOF.search(f.read()) is not None
    except OSError:
        return False


def progress_line(f: ProgressFacts, width: int) -> str:
    """``12/40 done · 3 running · 2 failed · 1 skipped · 1 waiting for input · 1m04s · ETA 2m10s
    · longest build-17 45s``, fitted to ``width``: the least needed parts go first when it
    is too long (longest task, ETA, elapsed). ``done`` counts every task that ended except the
    skipped ones, which are counted apart; ETA is the work left (pending tasks at the mean
    duration, running ones for what their mean leaves) spread over the slots, shown while
    tasks are pending (once only running ones are left, nothing says how long they take)."""
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
        parts.append(f"{f.waiting} waiting for input")
    optional = [duration(f.elapsed)]
    if f.mean_duration is not None and c.get("pending"):  # the running ones alone: nothing to go by
        left = c.get("pending", 0) * f.mean_duration + sum(max(f.mean_duration - ran, 0.0) for _, ran in f.running)
        optional.append(f"ETA {duration(left / max(f.jobs, 1))}")
    if f.running:
        name, ran = max(f.running, key=lambda r: r[1])
        optional.append(f"longest {quoting.terminal_text(name)} {duration(ran)}")
    prefix = "zellij-swarm: "
    while True:
        text = prefix + " · ".join(parts + optional)
        if len(text) <= width or not optional:
            return text[:width]
        optional.pop()


class ConsoleReporter:
    def __init__(self, mode: str, *, out: IO[bytes] | None = None, err: IO[str] | None = None,
                 run_id: str = "") -> None:
        """``run_id``: a resumed run's, whose tasks may end (and be hinted at) before it says it started."""
        self.mode = mode
        self.out = out if out is not None else sys.stdout.buffer
        self.err = err if err is not None else sys.stderr
        self.tty = self.err.isatty()
        self.wants_progress = mode == "progress" and self.tty
        self._line_shown = False
        self._run_id = run_id

    def started(self, run: RunPaths, total: int) -> None:
        self._run_id = run.run_id
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
        if gen is not None and self.mode in ("group", "tag"):
            tag = f"[{quoting.terminal_text(task.name)}] ".encode() if self.mode == "tag" else None
            self._copy_output(gen, tag)
        if self.mode != "progress" or not self.tty or row["status"] != "succeeded":
            self._say(describe(row) + self._hint(task, row, gen))

    def _hint(self, task: TaskRecord, row: dict[str, Any], gen: GenPaths | None) -> str:
        """Where to look at a task that did not succeed (and why, when its stdin is the likely
        cause); nothing for one that did, or never ran."""
        if row["status"] == "succeeded" or gen is None:
            return ""
        hint = f" — zellij-swarm logs {self._run_id} {shlex.quote(task.name)}"
        if row["status"] == "failed" and task.pane_id is None and read_stdin_eof(gen):
            hint += f" ({STDIN_HINT})"
        return hint

    def _copy_output(self, gen: GenPaths, prefix: bytes | None) -> None:
        self._clear_line()
        try:
            with open(gen.output, "rb") as f:
                if prefix is None:
                    shutil.copyfileobj(f, self.out, 1 << 16)
                else:
                    for line in f:
                        self.out.write(prefix + line if line.endswith(b"\n") else prefix + line + b"\n")
        except FileNotFoundError:
            return
        self.out.flush()

    def progress(self, facts: ProgressFacts) -> None:
        if not self.wants_progress:
            return
        self.err.write("\r\033[K" + progress_line(facts, self._width()))
        self.err.flush()
        self._line_shown = True

    def _width(self) -> int:
        """The terminal's width less one column (writing the last one would wrap the line)."""
        try:
            columns = os.get_terminal_size(self.err.fileno()).columns
        except (OSError, ValueError, AttributeError):
            columns = 0
        return max((columns or 80) - 1, 20)  # a terminal that says 0 columns has not been sized

    def finished(self, snapshot: dict[str, Any], exit_code: int) -> None:
        if self.mode == "quiet":
            return
        counts = {k: v for k, v in snapshot["counts"].items() if v}
        wall = (snapshot["metrics"].get("wall_time_ms") or 0) / 1000
        summary = counts_text(counts)
        verb = {"finished": "finished", "cancelled": "cancelled", "interrupted": "detached"}[snapshot["state"]]
        self._say(f"zellij-swarm: run {snapshot['run_id']} {verb} in {wall:.1f}s: {summary} (exit {exit_code})")
        if snapshot["state"] == "interrupted":
            self._say(f"zellij-swarm: workers keep running; continue with: zellij-swarm resume {snapshot['run_id']}")

    def _clear_line(self) -> None:
        if self._line_shown:
            self.err.write("\r\033[K")
            self._line_shown = False

    def _say(self, text: str) -> None:
        self._clear_line()
        self.err.write(quoting.terminal_text(text) + "\n")
        self.err.flush()
