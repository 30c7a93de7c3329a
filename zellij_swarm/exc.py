"""One exception tree for everything zellij-swarm raises on purpose.

A worker's failure is never an exception (it is an outcome, see ``states``); these are for
bad input, missing runs and multiplexer faults. Every class carries the exit code the CLI
uses and a message that names what was wrong and where, so the CLI can print one line.
"""

from __future__ import annotations


class SwarmError(Exception):
    """Root of every deliberate zellij-swarm error."""

    exit_code = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class UsageError(SwarmError):
    """Bad input or usage: a malformed swarm file, an invalid setting, an unknown run."""

    exit_code = 2


class InputError(UsageError):
    """A swarm file or command list that cannot run; the message names file, line and key."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None) -> None:
        where = path or ""
        if path and line:
            where = f"{path}:{line}"
        super().__init__(f"{where}: {message}" if where else message)
        self.path = path
        self.line = line


def _as_written(value: object) -> str:
    """A bad value as its user wrote it: TOML's ``true`` and ``1979-05-27``, not Python's
    ``True`` and ``datetime.date(1979, 5, 27)``, a table or array by what it is (``[swarm.jobs]``
    is no Python dict to its writer); anything else as Python quotes it."""
    if isinstance(value, dict):
        return "(a table)"
    if isinstance(value, list):
        return "(an array)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if hasattr(value, "isoformat") and callable(value.isoformat):
        return str(value.isoformat())
    return repr(value)


class SettingError(UsageError):
    """A setting value outside its allowed values; names the setting and its source."""

    def __init__(self, setting: str, value: object, source: str, allowed: str) -> None:
        super().__init__(f"invalid {setting} {_as_written(value)} (from {source}): expected {allowed}")
        self.setting = setting
        self.source = source


class RunNotFound(UsageError):
    def __init__(self, run_id: str, state_dir: str, *, message: str | None = None) -> None:
        super().__init__(message or f"no run {run_id!r} under {state_dir}")
        self.run_id = run_id


class RunNotActive(UsageError):
    """An operation that needs a running supervisor (add, cancel) on a run that has ended."""


class RunBusy(SwarmError):
    """Another supervisor holds the run lock: a refusal, nothing done — exit 2, as a ``retry``
    or ``resume`` of a running run is, whether the other supervisor was seen before this one
    tried to take the run or only by the lock (two at once: one of them loses the race)."""

    exit_code = 2


class StateDirError(SwarmError):
    """The state directory cannot be created or written."""


class BackendError(SwarmError):
    """A multiplexer fault. ``code`` is the warning/reason vocabulary of SPEC §7."""

    def __init__(self, code: str, message: str, *, stderr: str = "", stdout: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.stderr = stderr
        self.stdout = stdout  # what a command that failed had printed before it did
