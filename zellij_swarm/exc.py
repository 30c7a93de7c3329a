"""One exception tree for everything zellij-swarm raises on purpose.

A worker's failure is never an exception (it is an outcome, see ``states``); these are for
bad input, missing runs and multiplexer faults. Every class carries the exit code the CLI
uses and a message that names what was wrong and where, so the CLI can print one line.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable


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


# How alike a misspelt name and a known one must be (``difflib`` ratio) to be suggested:
# ``comand`` is 0.67 like ``cmd``, ``job`` 0.86 like ``jobs``, while ``flavour`` is at most
# 0.32 like any setting (0.6 is also difflib's own default).
SUGGEST_CUTOFF = 0.6


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """`` (did you mean 'cmd'?)`` for a misspelt key or name, or ``""`` when nothing known is
    close. Compared in lower case with ``-`` read as ``_`` on both sides (``Max-Visible-Panes``
    for a key, ``agnet_1`` for a task ``agent-1``); the known name is said as it is. Of equally
    close names the one sharing the longest start wins (``args``: ``argv``, not ``tags``)."""
    import difflib  # only for a misspelt name: not worth its memory in every run

    def norm(name: str) -> str:
        return name.lower().replace("-", "_")

    typed = norm(word)
    named: dict[str, str] = {}
    for name in sorted(known):
        named.setdefault(norm(name), name)
    close = difflib.get_close_matches(typed, list(named), n=3, cutoff=SUGGEST_CUTOFF)
    if not close:
        return ""

    def likeness(key: str) -> tuple[float, int]:
        pairs = zip(typed, key, strict=False)
        shared = next((i for i, (a, b) in enumerate(pairs) if a != b), min(len(typed), len(key)))
        return round(difflib.SequenceMatcher(None, typed, key).ratio(), 6), shared

    return f" (did you mean {named[max(close, key=likeness)]!r}?)"


class UnknownName(UsageError):
    """A keyword, setting or task name that does not exist: ``what`` it was meant to be and
    the ``name`` given; the message names the closest of ``known`` when one is close."""

    def __init__(self, what: str, name: str, known: Iterable[str], *, message: str = "") -> None:
        self.what = what
        self.name = name
        self.known = tuple(sorted(known))
        super().__init__(f"{message or f'unknown {what} {name!r}'}{did_you_mean(name, self.known)}")


class UnknownTask(UnknownName, KeyError):
    """The run has no task of that name or id: ``result["biuld"]``, ``cancel biuld`` (a
    ``KeyError`` too, as a mapping's missing key is). ``also``: what else the word was not
    (``, and no run id starts with it``), said before the suggestion."""

    def __init__(self, run_id: str, name: str, known: Iterable[str], *, also: str = "") -> None:
        super().__init__("task", name, known, message=f"run {run_id} has no task {name!r}{also}")
        self.run_id = run_id

    @classmethod
    def check(cls, run_id: str, names: Iterable[str], known: Collection[str],
              suggested: Iterable[str] | None = None) -> None:
        """Raise for the first of ``names`` not in ``known`` (names and ids a command takes),
        suggesting the closest of ``suggested`` (default: ``known``)."""
        for name in names:  # (not ``next(..., None)``: a None among the names is missing too)
            if name not in known:
                raise cls(run_id, name, known if suggested is None else suggested)


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
