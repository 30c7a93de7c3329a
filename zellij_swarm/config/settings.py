"""Run settings: one table, one precedence rule, every value recorded with its source.

Precedence (SPEC §3): flag > environment > swarm file > default. A task's own key
(``timeout``, ``retries``, ``idle_timeout``, ``worktree``, ``waiting_pattern``) beats the run-wide
value whatever its source; that is applied per task in ``swarmfile``. Invalid values raise ``exc.SettingError`` naming
the setting, where the value came from and what is allowed, before anything runs.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType, UnionType
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from zellij_swarm import exc
from zellij_swarm.config import ascii_int, slurm

_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*\Z", re.ASCII)  # (not another script's digits)
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}

BackendName = Literal["auto", "zellij", "tmux", "headless"]
UiMode = Literal["live", "compact"]
IdlePolicy = Literal["warn", "kill"]
OutputMode = Literal["progress", "group", "tag", "quiet"]
HaltMode = Literal["never", "soon", "now"]
ExecutorName = Literal["local", "slurm"]

MAX_JOBS = 1024


class _Invalid(ValueError):
    """Raised by a parser; carries the description of the allowed values."""


def parse_duration(raw: object, *, zero: bool = False) -> float:
    """Seconds from a number or a string like ``"500ms"``, ``"90s"``, ``"5m"``, ``"1h"``;
    above 0, or 0 too with ``zero``."""
    if isinstance(raw, bool):
        raise _Invalid("a duration such as 30, \"500ms\", \"90s\", \"5m\" or \"1h\"")
    if isinstance(raw, int | float):
        try:
            seconds = float(raw)
        except OverflowError:  # an integer past any float (TOML's are 64-bit, Python's are not bounded)
            seconds = float("inf")
    else:
        m = _DURATION.match(str(raw))
        if not m:
            raise _Invalid("a duration such as 30, \"500ms\", \"90s\", \"5m\" or \"1h\"")
        seconds = float(m.group(1)) * _DURATION_UNITS[m.group(2)]
    if seconds == float("inf"):
        raise _Invalid("a finite duration such as 30, \"5m\" or \"1h\"")
    if not (seconds > 0 or (zero and seconds == 0)):
        raise _Invalid("a duration of 0 or more" if zero else "a positive duration")
    return seconds


def truthy(value: str | None) -> bool:
    """An environment flag such as ``CI``: set to one of the true words (unset, empty or
    anything else is false)."""
    return (value or "").strip().lower() in _TRUE


def parse_bool(raw: object) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise _Invalid("one of 1/0, true/false, yes/no, on/off")


def _int_between(low: int, high: int | None) -> Callable[[object], int]:
    allowed = f"an integer {low}–{high}" if high is not None else f"an integer >= {low}"

    def parse(raw: object) -> int:
        if isinstance(raw, bool | float):
            raise _Invalid(allowed)
        try:
            value = ascii_int(str(raw).strip())
        except ValueError:
            raise _Invalid(allowed) from None
        if value < low or (high is not None and value > high):
            raise _Invalid(allowed)
        return value

    return parse


def _choice(mode: object) -> Callable[[object], str]:
    """A parser for one of the strings of the ``Literal`` type ``mode``."""
    choices: tuple[str, ...] = get_args(mode)

    def parse(raw: object) -> str:
        text = str(raw).strip().lower()
        if text not in choices:
            raise _Invalid("one of " + "|".join(choices))
        return text

    return parse


def _millis(raw: object) -> float:
    """The ``*_MS`` environment variables: a plain integer of milliseconds."""
    value = _int_between(1, None)(raw)
    return value / 1000.0


def _string(raw: object, what: str) -> str:
    """A setting's text as it was given: a TOML true, 1.5 or date is no name or pattern
    (``session = true`` was recorded as "True")."""
    if not isinstance(raw, str):
        raise _Invalid(f"{what}, as a string (not a {type(raw).__name__})")
    return raw


def _text(raw: object) -> str:
    text = _string(raw, "a non-empty single-line name")
    if not text.strip() or "\n" in text or "\0" in text:
        raise _Invalid("a non-empty single-line name")
    return text


def _regex(raw: object) -> str:
    """A Python regular expression (``""``: none at all)."""
    text = _string(raw, "a regular expression")
    if "\0" in text:
        raise _Invalid("a regular expression")
    try:
        re.compile(text)
    except re.error as e:
        raise _Invalid(f"a regular expression ({e})") from None
    return text


def _session(raw: object) -> str:
    """A multiplexer session name: a name, never an option (``zellij attach -x``), one line.
    What a backend cannot take beyond that (tmux: ``:`` and ``.``; Zellij: ``/``) is ``check_session``'s."""
    text = _text(raw)
    if text.startswith("-"):
        raise _Invalid("a session name that does not start with '-' (it would be read as an option)")
    return text


# Characters a backend's session names cannot hold, and why: tmux reads ``:`` and ``.`` in a
# target as "session:window.pane" (libtmux refuses them: BadSessionName); Zellij names a session's
# socket file by it and refuses ``/`` (zellij-utils 0.45.0, ``validate_session_name``).
SESSION_FORBIDDEN = {"tmux": (":.", "tmux reads them as session:window.pane"),
                     "zellij": ("/", "zellij names the session's socket file by it")}
# ... nor be: Zellij refuses ``.`` and ``..`` (``Invalid session name``).
SESSION_FORBIDDEN_WHOLE = {"zellij": (".", "..")}
# ... nor start with: in a tmux target ``$`` starts a session id, ``@`` a window's, ``%`` a
# pane's, ``=`` an exact name — ``--session '%1'`` ran in another session, and the hint to
# close it named the user's pane, whose session ``kill-session -t %1`` killed.
SESSION_FORBIDDEN_FIRST = {"tmux": "$@%="}


def check_session(resolved: Resolved, backend: str) -> None:
    """Refuse (exit 2) a ``session`` the chosen backend cannot name a session by."""
    name = resolved.session
    if not name:
        return
    chars, why = SESSION_FORBIDDEN.get(backend, ("", ""))
    bad = [c for c in chars if c in name]
    if bad:
        raise exc.SettingError("session", name, resolved.sources["session"],
                               f"a {backend} session name without {' or '.join(repr(c) for c in bad)} ({why})")
    if name in (whole := SESSION_FORBIDDEN_WHOLE.get(backend, ())):
        raise exc.SettingError("session", name, resolved.sources["session"],
                               f"a {backend} session name other than {' or '.join(repr(w) for w in whole)}")
    if name[0] in SESSION_FORBIDDEN_FIRST.get(backend, ""):
        raise exc.SettingError("session", name, resolved.sources["session"],
                               f"a {backend} session name that does not start with {name[0]!r} ({backend} reads "
                               f"{name[0]!r} at the start of a target as an id's mark)")


def _slurm_resource(key: str) -> Callable[[object], object]:
    """A parser of one ``slurm`` resource (``config.slurm``) as a setting."""
    parse = slurm.PARSERS[key]

    def parse_setting(raw: object) -> object:
        try:
            return parse(raw)
        except slurm.Invalid as e:
            raise _Invalid(str(e)) from None

    return parse_setting


_SLURM_HELP = {"partition": "partition(s) to run in", "cpus": "CPUs per task", "mem": "memory per task's node (4G)",
               "gres": "generic resources (gpu:1)", "time": "time limit per step (Slurm's form, or 30m)",
               "constraint": "node features (intel&avx2)", "account": "account to charge", "qos": "quality of service",
               "extra": "further srun options, after the table's ('--exclusive --cpu-bind=cores')"}


def _path(raw: object) -> str:
    text = os.fspath(raw) if isinstance(raw, os.PathLike) else _string(raw, "a path")
    if not text or "\0" in text:
        raise _Invalid("a path")
    return text


@dataclass(frozen=True)
class Setting:
    """One row of the table. ``parse`` takes a raw value (a flag's or variable's text, a swarm
    file's or API caller's value) and returns the value of the ``Resolved`` field ``name``."""

    name: str
    flag: str
    envs: tuple[str, ...]
    parse: Callable[[object], object]
    default: Callable[[], object]
    env_parse: Callable[[object], object] | None = None  # when the env form differs (``_MS``)
    help: str = ""
    # What the default is, in words, where its value does not say it: a ``None`` default (no
    # limit, decided later) or one computed here (the CPUs). ``doctor`` shows it.
    default_text: str = ""
    metavar: str = ""  # what --help shows as the flag's value, where the parser does not say it

    @property
    def key(self) -> str:
        """The swarm-file key under ``[swarm]``."""
        return self.name


def _cpus() -> int:
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(MAX_JOBS, usable))


SETTINGS: tuple[Setting, ...] = (
    Setting("jobs", "--jobs", ("ZELLIJ_SWARM_JOBS",), _int_between(1, MAX_JOBS), _cpus,
            help="concurrent slots, 1–1024 (default: number of CPUs)", default_text="the number of usable CPUs"),
    Setting("backend", "--backend", ("ZELLIJ_SWARM_BACKEND",), _choice(BackendName),
            lambda: "auto", help="where workers run: auto|zellij|tmux|headless"),
    Setting("ui", "--ui", ("ZELLIJ_SWARM_UI",), _choice(UiMode), lambda: "compact",
            help="live: worker in its pane on a TTY | compact: renderer pane per slot"),
    Setting("require_multiplexer", "--require-multiplexer",
            ("ZELLIJ_SWARM_REQUIRE_MULTIPLEXER", "ZELLIJ_SWARM_REQUIRE_ZELLIJ"), parse_bool, lambda: False,
            help="multiplexer faults fail tasks instead of falling back to headless"),
    Setting("heartbeat_timeout", "--heartbeat-timeout", ("ZELLIJ_SWARM_HEARTBEAT_TIMEOUT_MS",), parse_duration,
            lambda: 5.0, env_parse=_millis, help="launch-heartbeat deadline per generation"),
    Setting("pane_hold", "--pane-hold", ("ZELLIJ_SWARM_PANE_HOLD_MS",), parse_duration, lambda: 1.5,
            env_parse=_millis, help="how long a successful pane stays before closing"),
    Setting("keep_failed_panes", "--keep-failed-panes", ("ZELLIJ_SWARM_KEEP_FAILED_PANES",),
            _int_between(0, None), lambda: 8, help="failed panes kept on screen"),
    Setting("max_visible_panes", "--max-visible-panes", ("ZELLIJ_SWARM_MAX_VISIBLE_PANES",),
            _int_between(0, MAX_JOBS), lambda: 16, help="slot panes shown; further slots run headless"),
    Setting("min_pane_width", "--min-pane-width", ("ZELLIJ_SWARM_MIN_PANE_WIDTH",), _int_between(20, 1000),
            lambda: 60, help="tmux: the narrowest a live worker's pane gets, in columns; more panes open "
                             "in further windows", metavar="COLUMNS"),
    Setting("session", "--session", ("ZELLIJ_SWARM_SESSION",), _session, lambda: None,
            help="multiplexer session (default: current, else swarm-<run-id>)",
            default_text="the current session, else swarm-<run-id>"),
    Setting("state_dir", "--state-dir", ("ZELLIJ_SWARM_STATE_DIR",), _path, lambda: "./.zellij-swarm",
            help="where run records live"),
    Setting("timeout", "--timeout", ("ZELLIJ_SWARM_TIMEOUT",), parse_duration, lambda: None,
            help="wall-clock limit per task generation", default_text="none (no limit)"),
    Setting("retries", "--retries", ("ZELLIJ_SWARM_RETRIES",), _int_between(0, 1000), lambda: 0,
            help="extra attempts for failed, timed-out or lost tasks"),
    Setting("idle_timeout", "--idle-timeout", ("ZELLIJ_SWARM_IDLE_TIMEOUT",), parse_duration, lambda: None,
            help="limit on silence (no output, no heartbeat) per task; a worker waiting for input is not silent",
            default_text="none (no limit)"),
    Setting("waiting_pattern", "--waiting-pattern", ("ZELLIJ_SWARM_WAITING_PATTERN",), _regex, lambda: None,
            help="a regex that, found on a live worker's screen, says it waits for input ('' for none; "
                 "a task's own waiting_pattern wins)",
            default_text="the common agent prompts (Proceed?, [y/N], Do you want to, ...)", metavar="REGEX"),
    Setting("idle_policy", "--idle-policy", ("ZELLIJ_SWARM_IDLE_POLICY",), _choice(IdlePolicy),
            lambda: "kill", help="what an idle timeout does: warn|kill"),
    Setting("output", "--output", ("ZELLIJ_SWARM_OUTPUT",), _choice(OutputMode),
            lambda: None, help="progress|group|tag|quiet (default: progress on a TTY, group otherwise)",
            default_text="progress on a TTY, else group"),
    Setting("kill_grace", "--kill-grace", ("ZELLIJ_SWARM_KILL_GRACE",), parse_duration, lambda: 2.0,
            help="time between SIGTERM and SIGKILL when a worker is ended (default 2s)"),
    Setting("halt", "--halt", ("ZELLIJ_SWARM_HALT",), _choice(HaltMode), lambda: "never",
            help="after the first failure: never (keep going) | soon (stop dispatching) | now (cancel all)"),
    Setting("worktree", "--worktree", ("ZELLIJ_SWARM_WORKTREE",), parse_bool, lambda: False,
            help="run every task in a git worktree of its own, on a branch swarm/<run-id>/<task> made from HEAD "
                 "(a task's own worktree key wins)"),
    Setting("executor", "--executor", ("ZELLIJ_SWARM_EXECUTOR",), _choice(ExecutorName), lambda: "local",
            help="where workers run: local (this machine) | slurm (a job step each, through srun)"),
    Setting("slurm_alloc", "--slurm-alloc", ("ZELLIJ_SWARM_SLURM_ALLOC",), parse_bool, lambda: False,
            help="slurm: one allocation (salloc) for the whole swarm, every worker a step inside it"),
    Setting("slurm_alloc_wait", "--slurm-alloc-wait", ("ZELLIJ_SWARM_SLURM_ALLOC_WAIT",), parse_duration,
            lambda: None, help="slurm: how long --slurm-alloc waits for its allocation in Slurm's queue before "
                               "the run gives up", default_text="none (as long as it takes)"),
    Setting("slurm_max_queue", "--slurm-max-queue", ("ZELLIJ_SWARM_SLURM_MAX_QUEUE",), parse_duration,
            lambda: None, help="slurm: a step that waits in Slurm's queue longer is withdrawn, its task "
                               "cancelled (queued_too_long)", default_text="none (as long as it takes)"),
    *(Setting(f"slurm_{key}", f"--slurm-{key}", (f"ZELLIJ_SWARM_SLURM_{key.upper()}",), _slurm_resource(key),
              lambda: None, help=f"slurm: {_SLURM_HELP[key]} (a task's slurm.{key} wins)",
              default_text="none (the cluster's default)", metavar=slurm.METAVARS[key]) for key in slurm.KEYS),
)

BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}


def shown(name: str, value: object) -> str:
    """A value of setting ``name`` as a person reads it: durations with a unit (``1.5s``,
    ``500ms``), booleans ``on``/``off``, ``None`` as ``none``."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    if BY_NAME[name].parse is parse_duration and isinstance(value, int | float):
        return f"{value * 1000:g}ms" if value < 1 else f"{value:g}s"
    return str(value)


def default_text(name: str) -> str:
    """What setting ``name`` is when nothing sets it: ``5s``, ``auto``, ``none (no limit)``,
    ``the number of usable CPUs``."""
    spec = BY_NAME[name]
    return spec.default_text or shown(name, spec.default())
TASK_OVERRIDABLE = ("timeout", "retries", "idle_timeout", "worktree", "waiting_pattern")


API_SOURCE = "<api>"  # where the Python API's tasks come from, in messages and in the run's record


@dataclass(frozen=True)
class FileValue:
    """A setting as written in a swarm file (or given with a task of the API), with where it
    was written."""

    raw: object
    path: str
    line: int | None

    @property
    def source(self) -> str:
        """Where it was given, as messages and the run's record say it: ``api`` (as the API's
        own options), else ``file PATH[:LINE]``."""
        if self.path == API_SOURCE:
            return "api"
        return f"file {self.path}:{self.line}" if self.line else f"file {self.path}"


@dataclass(frozen=True)
class Resolved:
    """The resolved settings: one field per row of ``SETTINGS`` (checked at import), and
    ``sources[name]``, where each value came from (``flag --jobs``, ``env ZELLIJ_SWARM_UI``,
    ``file swarm.toml:4``, ``default``). Every value is checked against its field's type when
    the object is made, so no parser, caller or run record can put a wrong type in one."""

    jobs: int
    backend: BackendName
    ui: UiMode
    require_multiplexer: bool
    heartbeat_timeout: float
    pane_hold: float
    keep_failed_panes: int
    max_visible_panes: int
    min_pane_width: int
    session: str | None
    state_dir: str
    timeout: float | None
    retries: int
    idle_timeout: float | None
    waiting_pattern: str | None
    idle_policy: IdlePolicy
    output: OutputMode | None
    kill_grace: float
    halt: HaltMode
    worktree: bool
    executor: ExecutorName
    slurm_alloc: bool
    slurm_alloc_wait: float | None
    slurm_max_queue: float | None
    slurm_partition: str | None
    slurm_cpus: int | None
    slurm_mem: str | None
    slurm_gres: str | None
    slurm_time: str | None
    slurm_constraint: str | None
    slurm_account: str | None
    slurm_qos: str | None
    slurm_extra: str | None
    sources: Mapping[str, str]

    def __post_init__(self) -> None:
        for name, hint in _FIELD_TYPES.items():
            value = getattr(self, name)
            if not _conforms(value, hint):
                raise TypeError(f"setting {name}: {value!r} is not of type {hint}")
        if missing := _FIELD_TYPES.keys() - self.sources.keys():
            raise TypeError(f"settings without a source: {', '.join(sorted(missing))}")
        object.__setattr__(self, "sources", MappingProxyType(dict(self.sources)))

    @property
    def slurm(self) -> dict[str, Any]:
        """The run's Slurm resources (``config.slurm`` keys) that are set."""
        return {key: value for key in slurm.KEYS if (value := getattr(self, f"slurm_{key}")) is not None}

    @property
    def values(self) -> Mapping[str, object]:
        """Every setting's value by name, in table order (read-only: the fields are the values)."""
        return MappingProxyType({name: getattr(self, name) for name in BY_NAME})

    def as_record(self) -> dict[str, dict[str, Any]]:
        """The settings as ``run.json`` records them: ``{name: {"value", "source"}}``."""
        return {name: {"value": value, "source": self.sources[name]} for name, value in self.values.items()}

    @classmethod
    def from_record(cls, record: Mapping[str, Mapping[str, Any]]) -> Resolved:
        """The settings a run recorded (``as_record``), each value checked by its parser again;
        a setting the record predates has its default."""
        values: dict[str, Any] = {}
        sources: dict[str, str] = {}
        for spec in SETTINGS:
            entry = record.get(spec.name)
            if entry is None:
                values[spec.name], sources[spec.name] = spec.default(), "default"
                continue
            raw, source = entry["value"], entry["source"]
            values[spec.name] = None if raw is None else _parse(spec, spec.parse, raw, source)
            sources[spec.name] = source
        return cls(**values, sources=sources)


def _field_types(resolved: type, table: tuple[Setting, ...]) -> dict[str, object]:
    """The type of each setting's field of ``resolved``; a setting without a field, or a
    field without a setting, is an error at import."""
    hints = {name: hint for name, hint in get_type_hints(resolved).items() if name != "sources"}
    names = [s.name for s in table]
    if unmatched := sorted(set(names) ^ set(hints)):
        raise TypeError(f"settings table and {resolved.__name__} fields differ: {', '.join(unmatched)}")
    return {name: hints[name] for name in names}


def _conforms(value: object, hint: object) -> bool:
    """Whether ``value`` is of the type ``hint`` (the few kinds ``Resolved`` fields use)."""
    origin = get_origin(hint)
    if origin is Literal:
        return value in get_args(hint)
    if origin is Union or origin is UnionType:
        return any(_conforms(value, member) for member in get_args(hint))
    if not isinstance(hint, type):
        raise TypeError(f"a setting of type {hint} cannot be checked")
    if isinstance(value, bool) != (hint is bool):  # bool is an int to isinstance, never to a setting
        return False
    return isinstance(value, int | float) if hint is float else isinstance(value, hint)


_FIELD_TYPES = _field_types(Resolved, SETTINGS)


def parse_as(setting: str, raw: object, source: str) -> object:
    """Parse one value of ``setting`` (also used for task-level keys)."""
    spec = BY_NAME[setting]
    return _parse(spec, spec.parse, raw, source)


def resolve(
    flags: Mapping[str, object],
    env: Mapping[str, str],
    file_values: Mapping[str, FileValue] | None = None,
    *,
    flag_source: str = "flag",
) -> Resolved:
    """Apply flag > env > file > default to every setting; values are validated here."""
    file_values = file_values or {}
    values: dict[str, Any] = {}  # each of its own setting's type, which Resolved checks
    sources: dict[str, str] = {}
    for spec in SETTINGS:
        value: object
        if flags.get(spec.name) is not None:
            source = f"{flag_source} {spec.flag}" if flag_source == "flag" else flag_source
            value = _parse(spec, spec.parse, flags[spec.name], source)
        elif (hit := _from_env(spec, env)) is not None:
            value, source = hit
        elif spec.name in file_values:
            fv = file_values[spec.name]
            source = fv.source
            value = _parse(spec, spec.parse, fv.raw, source)
            if spec.name == "state_dir" and isinstance(value, str) and not os.path.isabs(value):
                value = str(Path(fv.path).resolve().parent / value)
        else:
            value, source = spec.default(), "default"
        values[spec.name] = value
        sources[spec.name] = source
    return Resolved(**values, sources=sources)


def _parse(spec: Setting, parser: Callable[[object], object], raw: object, source: str) -> object:
    try:
        return parser(raw)
    except _Invalid as e:
        raise exc.SettingError(spec.name, raw, source, str(e)) from None


def _from_env(spec: Setting, env: Mapping[str, str]) -> tuple[object, str] | None:
    if spec.name == "require_multiplexer":
        # The two require variables are aliases: any true value of either turns it on.
        seen = [(name, _parse(spec, parse_bool, env[name], f"env {name}"))
                for name in spec.envs if env.get(name, "") != ""]
        if not seen:
            return None
        on = [name for name, v in seen if v]
        return (True, f"env {on[0]}") if on else (False, f"env {seen[0][0]}")
    for name in spec.envs:
        raw = env.get(name)
        if raw is not None and raw != "":
            return _parse(spec, spec.env_parse or spec.parse, raw, f"env {name}"), f"env {name}"
    return None
