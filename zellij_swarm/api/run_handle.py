"""``Run``: a handle on a run that goes on without the caller — one ``Swarm.start()`` began, or
any other (``open_run``) — that talks to it as the control commands do, through the run's
directory: its records for ``status``, ``wait`` and ``logs``, its control inbox for
``cancel``, ``add`` and ``pause``. Nothing of the run lives in the handle: dropping it, or the
program that made it ending, leaves the run going, and ``open_run`` finds it again.
"""

from __future__ import annotations

import os
import select
import subprocess
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from zellij_swarm import errors, pid_end
from zellij_swarm.api.results import OutputStream, RunStatus, SwarmResult
from zellij_swarm.commands import control
from zellij_swarm.commands import status as views
from zellij_swarm.config import settings
from zellij_swarm.config.state_dir import current_directory
from zellij_swarm.config.state_dir import find as find_state_dir
from zellij_swarm.records import log as records
from zellij_swarm.records import rundir, runlock
from zellij_swarm.records.rundir import RunPaths

if TYPE_CHECKING:
    from zellij_swarm.api import Task

__all__ = ["Run", "open_run"]

PROC_LOOK = 0.05  # seconds between two looks at /proc where the kernel gives no pidfd
FOREVER = 10.0 * 365 * 86400  # seconds of a wait beyond which it has no limit (select's time_t overflows)


class Run:
    """A run, by its directory. ``process`` is its supervisor when this program started it
    (``Swarm.start()``): then ``wait`` has the supervisor's own exit status."""

    def __init__(self, run: RunPaths, *, process: subprocess.Popen[bytes] | None = None) -> None:
        self._run = run
        self._process = process
        if process is not None:  # reaped when it ends, whoever holds this handle: one let go of (or held as the
            # program exits) while the run goes on is no "subprocess is still running" ResourceWarning, and its
            # supervisor no zombie (``wait`` and ``pid`` read the status the reaper collected)
            threading.Thread(target=process.wait, name=f"zellij-swarm reaper {run.run_id}", daemon=True).start()

    @property
    def run_id(self) -> str:
        return self._run.run_id

    @property
    def run_dir(self) -> Path:
        return self._run.dir

    @property
    def pid(self) -> int | None:
        """The supervisor's pid while it runs (None once the run has no supervisor)."""
        if self._process is not None:
            return self._process.pid if self._process.poll() is None else None
        holder = runlock.holder(self._run)
        return holder if holder is not None and holder > 0 else None

    def __repr__(self) -> str:
        return f"<Run {self.run_id} under {self.run_dir.parent.parent}>"

    def status(self) -> RunStatus:
        """The run now: its state, its tasks and their statuses (``zellij-swarm status``)."""
        return RunStatus(self.run_dir, views.load_status(self._run))

    def wait(self, timeout: float | None = None) -> SwarmResult:
        """Wait until the run has no supervisor — it ended, or was interrupted — and return
        its result, as ``Swarm.run()`` does. ``errors.WaitTimeout`` after ``timeout``
        seconds; the run goes on. Ctrl-C here leaves the run going (``cancel`` ends it)."""
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float)
                                    or not timeout >= 0):  # (NaN is not)
            raise errors.UsageError(f"wait: timeout must be a number of seconds (or None), not {timeout!r}")
        if timeout is not None and timeout > FOREVER:
            timeout = None  # longer than any clock here counts (inf, 1e300): no limit, as None
        deadline = None if timeout is None else time.monotonic() + timeout
        if self._process is not None:
            try:
                code = self._process.wait(timeout)
            except subprocess.TimeoutExpired:
                raise errors.WaitTimeout(self.run_id, timeout or 0.0) from None
            # The run's own record first: a host whose SIGCHLD is ignored has the kernel reap the
            # supervisor, and Popen then says 0 (ECHILD) whatever it exited with. Without a record
            # (a supervisor killed by signal N) its status, as a shell says it.
            recorded = _recorded_end(self._run)
            exit_code = recorded if recorded is not None else 128 - code if code < 0 else code
        else:
            while (holder := runlock.holder(self._run)) is not None:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise errors.WaitTimeout(self.run_id, timeout or 0.0)
                _wait_for_end(holder, left)
            exit_code = recorded_exit_code(self._run)
        return SwarmResult(exit_code, self.run_dir, views.load_status(self._run))

    def cancel(self, *tasks: str) -> None:
        """Cancel the whole run, or the named tasks (names or ids), as ``zellij-swarm cancel``
        does: the workers end through the kill ladder. ``errors.RunNotActive`` when the run
        has ended."""
        for i, task in enumerate(tasks, 1):
            if not isinstance(task, str):
                raise errors.UsageError(f"cancel: task #{i} is a {type(task).__name__}, not a task's name (a str)")
        control.cancel(self._writable(), tasks)

    def add(self, *tasks: Task) -> None:
        """Add tasks to the running swarm (``zellij-swarm add``); they may run after any of its
        tasks. The supervisor checks them: a bad one is an ``errors.UsageError``."""
        from zellij_swarm.api import Task  # (the package imports this module)

        for i, task in enumerate(tasks, 1):
            if not isinstance(task, Task):
                raise errors.InputError(f"task #{i} is a {type(task).__name__}, not a Task", path=settings.API_SOURCE)
        control.add(self._writable(), tasks=[task.as_record(current_directory()) for task in tasks])

    def pause(self, group: str | None = None) -> None:
        """Start no new task of the run (or of ``group``) until ``unpause``; running ones go on."""
        control.set_paused(self._writable(), _group(group, "pause"), paused=True)

    def unpause(self, group: str | None = None) -> None:
        control.set_paused(self._writable(), _group(group, "unpause"), paused=False)

    def logs(self, task: str, *, attempt: int | None = None, stream: OutputStream = "stdout", raw: bool = False) -> str:
        """What ``task`` wrote to ``stream`` in its latest attempt (or ``attempt``) so far
        (``TaskResult.output``)."""
        return self.status()[task].output(attempt, stream=stream, raw=raw)

    def _writable(self) -> RunPaths:
        """The run, once its records are found to be the caller's alone: a command that
        changes a run acts on no records another user could have written (SPEC §7)."""
        rundir.require_trusted(self.run_dir.parent.parent)
        rundir.require_trusted_run(self._run)
        return self._run


def _group(group: object, call: str) -> str | None:
    if group is not None and not isinstance(group, str):
        raise errors.UsageError(f"{call}: group must be a group's name (a str) or None, not a {type(group).__name__}")
    return group


def open_run(run_id: str, *, state_dir: str | os.PathLike[str] | None = None) -> Run:
    """A handle on the run ``run_id`` (or a unique prefix of it) under ``state_dir`` (default:
    found by the commands' one rule, SPEC §3.1: ``$ZELLIJ_SWARM_STATE_DIR``, else the nearest
    ``.zellij-swarm`` here or above, else at the git top level or here), started by anyone:
    ``zellij-swarm run``, a ``Swarm.start()`` of another program. ``errors.RunNotFound`` when
    there is none."""
    if not isinstance(run_id, str):
        raise errors.UsageError(f"open_run: run_id must be a run id (a string), not a {type(run_id).__name__}")
    if state_dir is not None and not isinstance(state_dir, str | os.PathLike):
        raise errors.UsageError(f"open_run: state_dir must be a path, not a {type(state_dir).__name__}")
    if state_dir is not None:
        return Run(rundir.find_run(Path(state_dir).absolute(), run_id))
    found = find_state_dir(None, os.environ)
    return Run(rundir.find_run(found.path, run_id, found=found))


def recorded_exit_code(run: RunPaths) -> int:
    """What ``zellij-swarm run`` exited with for ``run``, from its event log: the last
    ``run_finished`` since the run last (re)started, 129 after ``run_detached``. A supervisor
    that vanished without a word: 1 (its records say the run is interrupted)."""
    recorded = _recorded_end(run)
    return 1 if recorded is None else recorded


def _recorded_end(run: RunPaths) -> int | None:
    """The exit code ``run``'s event log gives its last end (``recorded_exit_code``), or None
    when it records none since the run last (re)started."""
    for event in reversed(records.last_events(run.events)):
        name = event.get("event")
        if name == "run_finished" and isinstance(event.get("exit_code"), int):
            return int(event["exit_code"])
        if name == "run_detached":
            return 129
        if name in ("run_started", "run_resumed", "run_retried"):
            break
    return None


def _wait_for_end(pid: int, timeout: float | None) -> None:
    """Return when process ``pid`` (not our child: a supervisor started elsewhere) has
    ended, or after ``timeout``: a pidfd, readable at its end; else a look at /proc now and
    then. ``pid`` -1 (the supervisor still writing its pid) is looked at again shortly."""
    if pid <= 0:
        time.sleep(PROC_LOOK)
        return
    try:
        fd = pid_end.open_pidfd(pid)
    except pid_end.PidfdUnavailable:
        start = pid_end.start_ticks(pid)
        deadline = None if timeout is None else time.monotonic() + timeout
        while not pid_end.ended(pid, start) and (deadline is None or time.monotonic() < deadline):
            time.sleep(PROC_LOOK)
        return
    if fd is None:
        return
    try:
        select.select([fd], [], [], timeout)
    finally:
        os.close(fd)
