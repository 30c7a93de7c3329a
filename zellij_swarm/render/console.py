"""What ``run`` prints while a swarm goes on (SPEC §3 ``output``).

- ``progress``: one line on stderr, redrawn in place on a terminal; elsewhere one line per
  finished task. Worker output stays in the logs (``zellij-swarm logs``).
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

import shutil
import sys
from typing import IO, Any

from zellij_swarm import quoting
from zellij_swarm.records.generation_files import GenPaths
from zellij_swarm.records.rundir import RunPaths
from zellij_swarm.records.states import FAILED_STATUSES
from zellij_swarm.records.task import TaskRecord

_MARK = {"succeeded": "ok", "failed": "FAILED", "timed_out": "TIMED OUT", "cancelled": "cancelled",
         "skipped": "skipped", "lost": "LOST"}


def describe(row: dict[str, Any]) -> str:
    """``name: failed (exit 3, 1.2s, 2 attempts)`` for one task row."""
    bits = []
    if row.get("signal"):
        bits.append(f"exit {row['exit_code']} ({row['signal']})" if row.get("exit_code") is not None else row["signal"])
    elif row.get("exit_code") not in (None, 0):
        bits.append(f"exit {row['exit_code']}")
    if row.get("reason"):
        bits.append(row["reason"])
    if row.get("duration_s") is not None:
        bits.append(f"{row['duration_s']:.1f}s")
    if (row.get("attempts") or 0) > 1:
        bits.append(f"{row['attempts']} attempts")
    tail = f" ({', '.join(bits)})" if bits else ""
    return f"{row['name']}: {_MARK.get(row['status'], row['status'])}{tail}"


class ConsoleReporter:
    def __init__(self, mode: str, *, out: IO[bytes] | None = None, err: IO[str] | None = None) -> None:
        self.mode = mode
        self.out = out if out is not None else sys.stdout.buffer
        self.err = err if err is not None else sys.stderr
        self.tty = self.err.isatty()
        self.wants_progress = mode == "progress" and self.tty
        self._line_shown = False

    def started(self, run: RunPaths, total: int) -> None:
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
            self._say(describe(row))

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

    def progress(self, counts: dict[str, int], now: float) -> None:
        if not self.wants_progress:
            return
        # The total is counted now, not at the start: ``add`` and follow-ups grow it.
        total = sum(counts.values())
        done = total - counts["pending"] - counts["running"]
        bad = sum(counts[s] for s in FAILED_STATUSES)
        text = f"zellij-swarm: {done}/{total} done, {counts['running']} running"
        if bad:
            text += f", {bad} failed"
        self.err.write("\r\033[K" + text)
        self.err.flush()
        self._line_shown = True

    def finished(self, snapshot: dict[str, Any], exit_code: int) -> None:
        if self.mode == "quiet":
            return
        counts = {k: v for k, v in snapshot["counts"].items() if v}
        wall = (snapshot["metrics"].get("wall_time_ms") or 0) / 1000
        summary = ", ".join(f"{v} {k}" for k, v in counts.items()) or "no tasks"
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
