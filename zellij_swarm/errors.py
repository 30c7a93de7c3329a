"""The exceptions of the Python API, one tree under ``SwarmError``.

They are the classes the engine raises (``zellij_swarm.exc``), so ``except errors.UsageError``
catches a bad swarm file and a bad keyword alike, and the few only a library caller meets: a
name that does not exist, a wait that ran out of time, a started run that never began. A
worker's failure is never one of them: it is a task's status (``TaskResult.status``).

    from zellij_swarm import Swarm, Task, errors
    try:
        Swarm([Task("make", name="build")], job=4)
    except errors.UnknownName as e:
        print(e)  # unknown setting 'job' (did you mean 'jobs'?)
"""

from __future__ import annotations

from zellij_swarm.exc import (
    BackendError,
    InputError,
    RunBusy,
    RunNotActive,
    RunNotFound,
    SettingError,
    StateDirError,
    SwarmError,
    UnknownName,
    UnknownTask,
    UsageError,
)

__all__ = ["BackendError", "InputError", "RunBusy", "RunNotActive", "RunNotFound", "RunStartError", "SettingError",
           "StateDirError", "SwarmError", "UnknownName", "UnknownTask", "UsageError", "WaitTimeout"]


class WaitTimeout(SwarmError, TimeoutError):
    """``Run.wait(timeout=…)`` ran out of time; the run goes on (wait again, or ``cancel``)."""

    def __init__(self, run_id: str, timeout: float) -> None:
        super().__init__(f"run {run_id} has not ended after {timeout:g}s; it goes on")
        self.run_id = run_id
        self.timeout = timeout


class RunStartError(SwarmError):
    """``Swarm.start()``: the supervisor process ended before its run began, for a reason
    other than bad input (which is a ``UsageError``); ``exit_code`` is its exit status."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code
