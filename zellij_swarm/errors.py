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

from collections.abc import Iterable

from zellij_swarm.config.swarmfile import did_you_mean
from zellij_swarm.exc import (
    BackendError,
    InputError,
    RunBusy,
    RunNotActive,
    RunNotFound,
    SettingError,
    StateDirError,
    SwarmError,
    UsageError,
)

__all__ = ["BackendError", "InputError", "RunBusy", "RunNotActive", "RunNotFound", "RunStartError", "SettingError",
           "StateDirError", "SwarmError", "UnknownName", "UnknownTask", "UsageError", "WaitTimeout"]


class UnknownName(UsageError):
    """A keyword, setting or task name that does not exist: ``what`` it was meant to be and
    the ``name`` given; the message names the closest of ``known`` when one is close."""

    def __init__(self, what: str, name: str, known: Iterable[str], *, message: str = "") -> None:
        self.what = what
        self.name = name
        self.known = tuple(sorted(known))
        super().__init__(f"{message or f'unknown {what} {name!r}'}{did_you_mean(name, self.known)}")


class UnknownTask(UnknownName, KeyError):
    """``result["biuld"]``: the run has no task of that name or id (a ``KeyError`` too, as a
    mapping's missing key is)."""

    def __init__(self, run_id: str, name: str, known: Iterable[str]) -> None:
        super().__init__("task", name, known, message=f"run {run_id} has no task {name!r}")
        self.run_id = run_id


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
