"""What the Python API reads back from a run: ``RunStatus`` (a run as it is now), ``SwarmResult``
(a run that ended: what ``Swarm.run()`` and ``Run.wait()`` return) and ``TaskResult`` (one
task's row).

They are views of the run's records — the document ``zellij-swarm status --json`` prints —
read when asked for: a run of 100,000 tasks holds no row in memory until ``tasks`` is read.
``record`` is that document itself, for what the views do not name (metrics, history).
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, get_args

from zellij_swarm import errors
from zellij_swarm.commands import logs
from zellij_swarm.records import snapshot_file
from zellij_swarm.records.rows import TaskRow
from zellij_swarm.records.rundir import RunPaths
from zellij_swarm.records.states import RunState, TaskStatus

__all__ = ["OutputStream", "RunState", "RunStatus", "RunWarning", "SwarmResult", "TaskResult"]

OutputStream = Literal["stdout", "stderr"]


@dataclass(frozen=True)
class RunWarning:
    """One of the run's warnings (SPEC §7): its ``code`` (``process_left_behind``, …), what it
    says, and the task it is about, if any."""

    code: str
    message: str
    task: str | None


@dataclass(frozen=True)
class TaskResult:
    """One task as the run's records have it. ``status`` says how it ended (or that it is
    pending or running); ``exit_code`` and ``signal`` are its last attempt's (a shell's
    status above 128 also names the likely signal, SPEC §5.5); ``duration`` is in seconds."""

    name: str
    id: str
    status: TaskStatus
    exit_code: int | None
    signal: str | None
    attempts: int
    duration: float | None
    reason: str | None
    record: TaskRow = field(repr=False, compare=False)  # the row of `status --json`
    _run: RunPaths = field(repr=False, compare=False)

    @classmethod
    def of_row(cls, row: TaskRow, run: RunPaths) -> TaskResult:
        return cls(name=row["name"], id=row["id"], status=TaskStatus(row["status"]), exit_code=row["exit_code"],
                   signal=row["signal"], attempts=row["attempts"], duration=row["duration_s"], reason=row["reason"],
                   record=row, _run=run)

    @property
    def ok(self) -> bool:
        return self.status is TaskStatus.SUCCEEDED

    def output(self, attempt: int | None = None, *, stream: OutputStream = "stdout", raw: bool = False) -> str:
        """What the worker wrote to ``stream`` in its last attempt (or ``attempt``, from 1), as
        ``zellij-swarm logs --stdout`` / ``--stderr`` shows it: a pane's CRLF line ends as LF
        unless ``raw``; bytes that are not UTF-8 replaced. A worker in a pane had one terminal
        for both: its stdout holds all it wrote, and its stderr is a ``UsageError``. A task
        that never started wrote nothing (``""``)."""
        if stream not in get_args(OutputStream):
            raise errors.UnknownName("stream", str(stream), get_args(OutputStream))
        if attempt is None and self.record["slot"] is None:
            return ""
        out = io.BytesIO()
        snap = {"run_id": self._run.run_id, "state": "finished", "tasks": [self.record]}
        logs.show(self._run, self.id, attempt=attempt, follow=False, raw=raw, out=out, err=out, snap=snap,
                  stream=stream)
        return out.getvalue().decode("utf-8", "replace")


class RunStatus:
    """A run as its records say it is now (``Run.status()``): its ``state``, its ``tasks``
    in plan order, ``result["build"]`` for one of them (by name or id), ``counts`` and
    ``warnings``."""

    def __init__(self, run_dir: Path, snapshot: Mapping[str, Any]) -> None:
        """``snapshot``: the run's record, whole (``load_status``) or as its supervisor last
        built it, naming the rows file that holds the rows of the tasks not running."""
        self.run_dir = run_dir
        self.run_id: str = snapshot["run_id"]
        self.name: str | None = snapshot.get("name")
        self.state = RunState(snapshot["state"])
        self._snapshot = snapshot

    @cached_property
    def record(self) -> Mapping[str, Any]:
        """The run's status document, every task row in it (``zellij-swarm status --json``)."""
        if "rows" not in self._snapshot:
            return self._snapshot
        return snapshot_file.merge(dict(self._snapshot), self.run_dir)

    @cached_property
    def tasks(self) -> list[TaskResult]:
        run = RunPaths(self.run_dir)
        return [TaskResult.of_row(row, run) for row in self.record["tasks"]]

    @cached_property
    def _by_key(self) -> dict[str, TaskResult]:
        return {**{t.id: t for t in self.tasks}, **{t.name: t for t in self.tasks}}

    def __getitem__(self, name: str) -> TaskResult:
        """The task named ``name`` (or of id ``name``); ``errors.UnknownTask``, a
        ``KeyError``, saying the closest name when there is none."""
        if not isinstance(name, str):  # result[0]: tasks are named, not numbered (iterate for order)
            raise TypeError(f"a task is looked up by its name or id (a str), not by {type(name).__name__}: "
                            "iterate over result.tasks for their order")
        try:
            return self._by_key[name]
        except KeyError:
            raise errors.UnknownTask(self.run_id, name, [t.name for t in self.tasks]) from None

    def __contains__(self, name: object) -> bool:
        return name in self._by_key

    def __iter__(self) -> Iterator[TaskResult]:
        return iter(self.tasks)

    def __len__(self) -> int:
        return len(self.tasks)

    @property
    def counts(self) -> dict[TaskStatus, int]:
        """How many tasks are in each status (those with none left out)."""
        return {TaskStatus(status): n for status, n in self._snapshot.get("counts", {}).items() if n}

    @property
    def warnings(self) -> list[RunWarning]:
        return [RunWarning(w["code"], w["message"], w["task"]) for w in self._snapshot.get("warnings", [])]

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.run_id} {self.state} {self._counts_text()}>"

    def _counts_text(self) -> str:
        return ", ".join(f"{n} {status}" for status, n in self.counts.items()) or "no tasks"


class SwarmResult(RunStatus):
    """A run that ended: ``exit_code`` is what ``zellij-swarm run`` exits with (SPEC §8: 0
    every task succeeded, 1 some did not, 130 cancelled or Ctrl-C, 143 SIGTERM, 129 the
    supervisor detached), ``ok`` whether it is 0."""

    def __init__(self, exit_code: int, run_dir: Path, snapshot: Mapping[str, Any]) -> None:
        super().__init__(run_dir, snapshot)
        self.exit_code = exit_code

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    @property
    def summary(self) -> dict[str, Any]:
        """Deprecated: the run's status document as a dict. Use ``tasks`` (``TaskResult``
        objects), ``counts``, ``warnings``, or ``record`` for the document itself. Kept for
        one release."""
        warnings.warn("SwarmResult.summary is deprecated and goes in the next release: use result.tasks "
                      "(TaskResult objects), result.counts, result.warnings, or result.record",
                      DeprecationWarning, stacklevel=2)
        return dict(self.record)

    def __repr__(self) -> str:
        return f"<SwarmResult {self.run_id} {self.state} exit {self.exit_code}: {self._counts_text()}>"
