"""Reading what to run (SPEC §4): TOML swarm files, command-per-line files, stdin.

Everything is validated before anything runs; each error is one line naming the file, the
line and the key (``swarm.toml:12: task 'build': unknown key 'comand' (did you mean 'cmd'?)``).
An unknown key gets the closest known one as a suggestion (``exc.did_you_mean``), in ``[[task]]``
tables, ``[swarm]`` and inline tables alike.
"""

from __future__ import annotations

import itertools
import json
import re
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from zellij_swarm import exc, streams
from zellij_swarm.config import settings, slurm
from zellij_swarm.jsontext import compact

TASK_KEYS = frozenset(
    {"name", "cmd", "argv", "cwd", "env", "timeout", "retries", "idle_timeout", "after", "priority", "tags",
     "group", "worktree", "waiting_pattern", "slurm"}
)
GROUP_KEYS = frozenset({"jobs"})
_GROUP_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}\Z")
SWARM_KEYS = frozenset({s.key for s in settings.SETTINGS} | {"name", "slurm"})
_TASK_HEADER = re.compile(r"\s*\[\[\s*task\s*\]\]")
_TABLE_HEADER = re.compile(r"\s*\[")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_TOML_POS = re.compile(r"\s*\(at line (\d+), column \d+\)\s*$")


def unknown_key(key: str, known: Iterable[str]) -> str:
    """``unknown key 'comand' (did you mean 'cmd'?)``."""
    return f"unknown key {key!r}{exc.did_you_mean(key, known)}"


def is_env_name(key: str) -> bool:
    """A name a POSIX shell can ``export``."""
    return bool(_ENV_NAME.match(key))


RESERVED_ENV_PREFIXES = ("ZELLIJ_SWARM_", "_zsw_")


def is_reserved_env_name(key: str) -> bool:
    """A name a task's ``env`` may not set: ``ZELLIJ_SWARM_*`` (the run/slot/generation markers
    the kill ladder finds a generation's processes by, and the settings) and ``_zsw_*`` (the
    wrapper's own variables, such as where it writes its records)."""
    return key.startswith(RESERVED_ENV_PREFIXES)


# What a task without its own env or Slurm resources shares with every other such task: one
# read-only empty mapping, not a dict of its own each (a spec is held for every task of a run).
NOTHING: Mapping[str, Any] = MappingProxyType({})


def _nothing() -> Mapping[str, Any]:
    return NOTHING  # a factory: dataclasses take an unhashable default for a mutable one


@dataclass(frozen=True, slots=True)
class TaskSpec:
    """One task as the user described it. ``cmd`` is a shell string, ``argv`` is exec'd."""

    name: str
    cmd: str | None = None
    argv: tuple[str, ...] | None = None
    cwd: str | None = None
    env: Mapping[str, str] = field(default_factory=_nothing)
    timeout: float | None = None
    retries: int | None = None
    idle_timeout: float | None = None
    after: tuple[str, ...] = ()
    priority: int = 0
    tags: tuple[str, ...] = ()
    group: str | None = None  # a [group.NAME] whose jobs bound how many of its tasks run at once
    worktree: bool | None = None  # run in a git worktree of its own; None: as the run's ``worktree`` setting says
    waiting_pattern: str | None = None  # what on its screen says it waits (worker.prompts); None: the run's
    slurm: Mapping[str, Any] = field(default_factory=_nothing)  # its own Slurm resources (config.slurm), over the run's
    # Where it was described, for messages (``origin``): the file, shared by all its tasks,
    # and the line in it (0: none), a number rather than a string of its own per task
    source: str = ""
    line: int = 0

    @property
    def origin(self) -> str:
        """``file:line`` (or the file alone) for messages."""
        return f"{self.source}:{self.line}" if self.line else self.source

    def to_record(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "cmd": self.cmd,
            "argv": list(self.argv) if self.argv is not None else None,
            "cwd": self.cwd,
            "env": dict(self.env),
            "timeout": self.timeout,
            "retries": self.retries,
            "idle_timeout": self.idle_timeout,
            "after": list(self.after),
            "priority": self.priority,
            "tags": list(self.tags),
            "group": self.group,
            "worktree": self.worktree,
            **({"waiting_pattern": self.waiting_pattern} if self.waiting_pattern is not None else {}),
            **({"slurm": dict(self.slurm)} if self.slurm else {}),
        }

    def pack(self) -> bytes:
        """The spec in few bytes (``unpack`` reads it): the JSON of its record's fields that
        differ from a bare spec's — ``{"name":"task-7","cmd":"make"}`` for a line of a lines
        file, 67 bytes held where the spec object and its strings take some 300. Its origin is
        not kept: it names the input for the messages given before a run starts."""
        rec = self.to_record()
        return compact({k: v for k, v in rec.items() if k not in _BARE or v != _BARE[k]}).encode()

    @classmethod
    def unpack(cls, packed: bytes) -> TaskSpec:
        """The spec ``pack`` made ``packed`` of. Trusted, unlike a record read from a file
        (``from_record``): its fields are a spec's own, of their types but for the JSON
        arrays and objects a tuple or mapping became (half the cost, and every queued task
        is unpacked at its dispatch)."""
        fields = cls.packed_fields(packed)
        for name in _CONTAINERS.keys() & fields.keys():
            fields[name] = _CONTAINERS[name](fields[name])
        return cls(**fields)

    @staticmethod
    def packed_fields(packed: bytes) -> dict[str, Any]:
        """What ``pack`` kept of a spec (its record's fields that differ from a bare spec's),
        as JSON values, without making the spec: enough for a queued task's pending row (a run
        of 100,000 tasks writes 100,000 of them at its first snapshot) at a third of
        ``unpack``'s cost."""
        fields: dict[str, Any] = _UNPACKER.decode(packed.decode())
        return fields

    @classmethod
    def from_record(cls, rec: dict[str, Any], *, checked: bool = False) -> TaskSpec:
        """The spec a record (``to_record``) read back from a file holds: a ``ValueError``
        naming the field when it is not of its type (a record edited or damaged in place) —
        unless ``checked``: its reader has passed it through ``check_record`` already (a
        resume checks every record before it changes anything; a second look at each cost a
        100,000-task resume 0.2 s)."""
        if not checked:
            check_record(rec)
        return cls(
            name=rec["name"],
            cmd=rec.get("cmd"),
            argv=tuple(rec["argv"]) if rec.get("argv") is not None else None,
            cwd=rec.get("cwd"),
            env=dict(rec["env"]) if rec.get("env") else NOTHING,
            timeout=rec.get("timeout"),
            retries=rec.get("retries"),
            idle_timeout=rec.get("idle_timeout"),
            after=tuple(rec.get("after") or ()),
            priority=int(rec.get("priority") or 0),
            tags=tuple(rec.get("tags") or ()),
            group=rec.get("group"),
            worktree=rec.get("worktree"),
            waiting_pattern=rec.get("waiting_pattern"),
            slurm=dict(rec["slurm"]) if rec.get("slurm") else NOTHING,
        )


def check_record(rec: object) -> None:
    """A ``ValueError`` naming the field of a task record (``to_record``, read back from a
    file) that is not of its type."""
    if not isinstance(rec, dict) or not isinstance(rec.get("name"), str):
        raise ValueError("a task record without a name")
    for field_name, (fits, what) in _RECORD_TYPES.items():
        value = rec.get(field_name)
        if value is not None and not fits(value):
            raise ValueError(f"task {rec['name']!r}: its record's {field_name} is not {what}")


def pack_record(rec: dict[str, Any], *, checked: bool = False) -> bytes:
    """``TaskSpec.from_record(rec).pack()``, the same bytes, without making the spec (a third
    of the cost): a resumed run of 100,000 tasks holds those that never ran packed, as the run
    did. A ``ValueError`` as ``from_record`` raises it, unless ``checked`` as there."""
    if not checked:
        check_record(rec)
    kept: dict[str, Any] = {}
    for name in _RECORD_FIELDS:
        value = rec.get(name)
        # what ``from_record`` makes the bare spec's value of: unset, or an empty table or list
        if value is None or (not value and name in _EMPTY_IS_BARE) or value == _BARE.get(name):
            continue
        kept[name] = value
    return compact(kept).encode()


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# A record's fields, each as its spec holds it (None is always allowed: the field is not set)
_RECORD_TYPES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "cmd": (lambda v: isinstance(v, str), "a string"),
    "argv": (_strings, "a list of strings"),
    "cwd": (lambda v: isinstance(v, str), "a string"),
    "env": (lambda v: isinstance(v, dict) and all(isinstance(x, str) for x in v.values()), "a table of strings"),
    "timeout": (_number, "a number"),
    "retries": (lambda v: type(v) is int, "a whole number"),
    "idle_timeout": (_number, "a number"),
    "after": (_strings, "a list of strings"),
    "priority": (lambda v: type(v) is int, "a whole number"),
    "tags": (_strings, "a list of strings"),
    "group": (lambda v: isinstance(v, str), "a string"),
    "worktree": (lambda v: isinstance(v, bool), "true or false"),
    "waiting_pattern": (lambda v: isinstance(v, str), "a string"),
    "slurm": (lambda v: isinstance(v, dict), "a table"),
}


# What a spec with a name and nothing else records: ``pack`` leaves out what equals it
_BARE = TaskSpec(name="").to_record()
_UNPACKER = json.JSONDecoder()
_RECORD_FIELDS = ("name", *_RECORD_TYPES)  # in ``to_record``'s order, which ``pack`` keeps
# The fields whose empty value (or 0) ``from_record`` reads as the bare spec's
_EMPTY_IS_BARE = frozenset({"env", "after", "priority", "tags", "slurm"})
# The fields a record holds as JSON arrays or objects, and the types a spec holds them as
_CONTAINERS: dict[str, Callable[[Any], Any]] = {"argv": tuple, "env": dict, "after": tuple, "tags": tuple,
                                                "slurm": dict}


@dataclass
class SwarmInput:
    tasks: list[TaskSpec]
    file_settings: dict[str, settings.FileValue]
    name: str | None
    source: str  # path, "<stdin>" or settings.API_SOURCE
    groups: dict[str, int] = field(default_factory=dict)  # [group.NAME] jobs = N


MAX_FILE_BYTES = 1 << 28  # a swarm file, or a file of arguments: 100,000 tasks take a few MB


def load(path: str, *, known: Iterable[str] = (), known_groups: Iterable[str] = ()) -> SwarmInput:
    """Read ``path`` (``-`` for stdin): TOML when it ends in ``.toml``, else one command per line.
    ``known``: names of tasks that already exist (those of a running swarm the file adds to),
    which its tasks may depend on and must not reuse; ``known_groups``: that swarm's groups,
    which its tasks may name."""
    where, data = _read(path, "a swarm file")
    text = _decode(data, where)
    if Path(path).suffix == ".toml":
        return parse_toml(text, path, known=known, known_groups=known_groups)
    return parse_lines(text, where)


def unnamed_tasks(path: str) -> set[int]:
    """The positions of the ``[[task]]``s of the TOML file ``path`` (``load`` read it whole
    already) that give no name."""
    doc = tomllib.loads(_decode(_read(path, "a swarm file")[1], path))
    tasks = doc.get("task", [])
    return {i for i, t in enumerate(tasks) if isinstance(t, dict) and "name" not in t}


def load_arguments(path: str, *, null: bool) -> tuple[str, list[str]]:
    """The arguments of a template (``run --template T FILE``) in ``path`` (``-`` for stdin),
    and the name messages give it: one per line, or with ``null`` one per NUL-terminated item.
    Read as GNU parallel reads them, not as command lines: nothing is stripped or skipped (an
    empty line is an empty argument, ``#`` is text), and a final separator ends the last
    argument rather than starting an empty one."""
    where, data = _read(path, "a file of arguments")
    items = data.split(b"\0" if null else b"\n")
    if items[-1] == b"":
        items.pop()
    arguments = []
    for number, item in enumerate(items, 1):
        if b"\0" in item:  # a shell string cannot hold one
            raise exc.InputError(f"argument {number} contains a NUL byte (-0 reads NUL-separated arguments)",
                                 path=where)
        try:
            arguments.append(item.decode("utf-8"))
        except UnicodeDecodeError:
            raise exc.InputError(f"argument {number} is not valid UTF-8", path=where) from None
    return where, arguments


def _read(path: str, expected: str) -> tuple[str, bytes]:
    """The bytes of ``path`` (``-``: stdin) and the name messages give it (``<stdin>``)."""
    if path == "-":
        import sys

        return "<stdin>", streams.read_bytes(sys.stdin)
    if not path:
        raise exc.InputError(f"an empty file name: name {expected} (or - for standard input)")
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise exc.InputError("no such file", path=path) from None
    except IsADirectoryError:
        raise exc.InputError(f"is a directory, expected {expected}", path=path) from None
    except OSError as e:
        raise exc.InputError(f"cannot read: {e.strerror}", path=path) from None
    if len(data) > MAX_FILE_BYTES:  # /dev/zero has no end: read whole, it would take all memory
        raise exc.InputError(f"larger than {MAX_FILE_BYTES:,} bytes, expected {expected}; a longer input is "
                             "read as it comes from stdin (run -)", path=path)
    return path, data


UTF8_BOM = b"\xef\xbb\xbf"  # what some editors put first in a UTF-8 file: no part of its text


def _decode(data: bytes, where: str) -> str:
    try:
        return data.removeprefix(UTF8_BOM).decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise exc.InputError("not valid UTF-8", path=where, line=line) from None


def parse_lines(text: str, source: str) -> SwarmInput:
    tasks: list[TaskSpec] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        command = line.strip()
        if not command or command.startswith("#"):
            continue
        if "\0" in command:
            raise exc.InputError("command contains a NUL byte", path=source, line=lineno)
        tasks.append(TaskSpec(name=f"task-{len(tasks) + 1}", cmd=command, source=source, line=lineno))
    return SwarmInput(tasks, {}, None, source)


def parse_toml(text: str, path: str, *, known: Iterable[str] = (), known_groups: Iterable[str] = ()) -> SwarmInput:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        msg = str(e)
        m = _TOML_POS.search(msg)
        line = int(m.group(1)) if m else None
        raise exc.InputError(f"invalid TOML: {_TOML_POS.sub('', msg)}", path=path, line=line) from None
    except RecursionError:  # tomllib parses nested arrays and tables by recursion
        raise exc.InputError("invalid TOML: arrays or tables nested too deeply", path=path) from None
    lines = text.splitlines()
    unknown = sorted(set(doc) - {"swarm", "task", "group"})
    if unknown:
        hint = exc.did_you_mean(unknown[0], ("swarm", "task", "group"))
        raise exc.InputError(f"unknown table or key {unknown[0]!r}{hint} (expected [swarm], [group.NAME] and "
                             "[[task]])", path=path, line=_line_of(lines, unknown[0]))
    groups = _groups(doc.get("group", {}), path, lines)
    swarm = doc.get("swarm", {})
    if not isinstance(swarm, dict):
        raise exc.InputError("[swarm] must be a table", path=path, line=_line_of(lines, "swarm"))
    swarm_start = next((i for i, ln in enumerate(lines) if re.match(r"\s*\[\s*swarm\s*\]", ln)), None)
    swarm_span = _span(lines, swarm_start)
    file_settings: dict[str, settings.FileValue] = {}
    name = None
    for key, raw in swarm.items():
        line = _key_line(lines, swarm_span, key)
        if key not in SWARM_KEYS:
            raise exc.InputError(f"[swarm]: {unknown_key(key, SWARM_KEYS)}", path=path, line=line)
        if key == "name":
            if not is_run_name(raw):
                raise exc.InputError("[swarm]: name must be a non-empty string", path=path, line=line)
            name = raw
            continue
        fv = settings.FileValue(raw, path, line)
        if key == "slurm":  # the run's resources: one setting each (slurm_partition, ...)
            try:
                table = slurm.parse_table(raw)
            except slurm.Invalid as e:
                raise exc.InputError(f"[swarm]: {e}", path=path, line=line) from None
            for name in table:
                file_settings[f"slurm_{name}"] = settings.FileValue(raw[name], path, line)
            continue
        if isinstance(raw, (dict, list)):
            raise exc.SettingError(key, raw, fv.source, "a single value")
        settings.parse_as(key, raw, fv.source)  # reject bad values now, with their line
        file_settings[key] = fv
    raw_tasks = doc.get("task", [])
    if not isinstance(raw_tasks, list):
        raise exc.InputError("task must be an array of tables ([[task]])", path=path, line=_line_of(lines, "task"))
    starts = [i for i, ln in enumerate(lines) if _TASK_HEADER.match(ln)]
    base = Path(path).resolve().parent
    tasks = []
    known = set(known)
    # Added to a running swarm, an unnamed task is given a name none of its tasks has (the
    # supervisor names it for good: ``add``); in a swarm of its own, ``task-<its number>``.
    taken = known | {t["name"] for t in raw_tasks if isinstance(t, dict) and isinstance(t.get("name"), str)}
    free = (f"task-{n}" for n in itertools.count(1) if f"task-{n}" not in taken)
    for index, raw in enumerate(raw_tasks):
        start = starts[index] if index < len(starts) else None
        unnamed = known and isinstance(raw, dict) and "name" not in raw
        tasks.append(_task({**raw, "name": next(free)} if unnamed else raw, index, path, lines,
                           _span(lines, start), base))
    validate(tasks, known=known, groups={*groups, *known_groups})
    return SwarmInput(tasks, file_settings, name, path, groups)


def _groups(raw: object, path: str, lines: list[str]) -> dict[str, int]:
    """``[group.NAME] jobs = N`` tables: at most N tasks of the group run at once."""
    if not isinstance(raw, dict):
        raise exc.InputError("group must be tables: [group.NAME] with jobs = N", path=path,
                             line=_line_of(lines, "group"))
    groups = {}
    for name, table in raw.items():
        header = _line_of(lines, f"group.{name}")
        line = header or _line_of(lines, "group")
        span = _span(lines, header - 1) if header is not None else None  # its [group.NAME] table
        if not isinstance(name, str) or not _GROUP_NAME.match(name):
            raise exc.InputError(f"group name {name!r} must be 1-64 letters, digits, '_', '-' or '.'", path=path,
                                 line=line)
        if not isinstance(table, dict):
            raise exc.InputError(f"[group.{name}] must be a table with jobs = N", path=path, line=line)
        for key in table:
            if key not in GROUP_KEYS:
                raise exc.InputError(f"[group.{name}]: {unknown_key(key, GROUP_KEYS)}", path=path,
                                     line=_key_line(lines, span, str(key)) if span else line)
        jobs = table.get("jobs")
        if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
            raise exc.InputError(f"[group.{name}]: jobs must be an integer ≥ 1", path=path,
                                 line=_key_line(lines, span, "jobs") if span else line)
        groups[name] = jobs
    return groups


def _span(lines: list[str], start: int | None) -> tuple[int, int] | None:
    """Line indexes [start, end) of the table beginning at ``start``."""
    if start is None:
        return None
    end = next((i for i in range(start + 1, len(lines)) if _TABLE_HEADER.match(lines[i])), len(lines))
    return start, end


def _key_line(lines: list[str], span: tuple[int, int] | None, key: str) -> int | None:
    """The line setting ``key`` in the table ``span``; without a table header (an inline table:
    ``swarm = {…}``, ``task = [{…}]``, a dotted key ``swarm.jobs = …``) the first line of the
    file where ``key =`` is written. A key written as a table of its own (``[swarm.jobs]``) is
    on that table's header line."""
    if span is None:
        anywhere = re.compile(r"(?:^|[\s{,.])[\"']?" + re.escape(key) + r"[\"']?\s*=")
        found = next((i + 1 for i, ln in enumerate(lines) if anywhere.search(ln)), None)
    else:
        pattern = re.compile(r"\s*[\"']?" + re.escape(key) + r"[\"']?\s*=")
        found = next((i + 1 for i in range(span[0], span[1]) if pattern.match(lines[i])), None)
    if found is None:
        own_table = re.compile(r"\s*\[\s*[^\[\]#]*\.\s*[\"']?" + re.escape(key) + r"[\"']?\s*\]")
        found = next((i + 1 for i, ln in enumerate(lines) if own_table.match(ln)), None)
    return found if found is not None or span is None else span[0] + 1


def _env_key_line(lines: list[str], span: tuple[int, int] | None, key: str) -> int | None:
    """The line setting ``key`` of a task's env: ``env = {KEY = …}``, ``env.KEY = …``, or in
    its ``[task.env]`` table (which runs until the next ``[[task]]``)."""
    if span is None:
        return None
    pattern = re.compile(r"(?:^|[\s.{,])[\"']?" + re.escape(key) + r"[\"']?\s*=")
    for i in range(span[0], len(lines)):
        if i > span[0] and _TASK_HEADER.match(lines[i]):
            break
        if pattern.search(lines[i]):
            return i + 1
    return None


def _line_of(lines: list[str], word: str) -> int | None:
    for i, ln in enumerate(lines):
        if word in ln:
            return i + 1
    return None


def unencodable(value: object) -> str | None:
    """The first text in ``value`` (a string, or in a list or table of them, keys too) that
    UTF-8 cannot hold — a lone surrogate, as Python decodes a byte that is not UTF-8 from the
    command line or a file name; None when there is none."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value
        return None
    if isinstance(value, dict):
        parts = [part for pair in value.items() for part in pair]
    elif isinstance(value, list | tuple):
        parts = list(value)
    else:
        return None
    return next((bad for part in parts if (bad := unencodable(part)) is not None), None)


def is_run_name(value: object) -> bool:
    """A run's name (``[swarm] name``, ``--name``, the API's ``name``): text, not only blanks,
    that a run's records can hold."""
    return isinstance(value, str) and bool(value.strip()) and unencodable(value) is None


def require_utf8(what: str, value: object, why: str) -> None:
    """Refuse (exit 2, one line) ``value`` when it holds text that UTF-8 cannot (``unencodable``):
    ``what`` names it, ``why`` says what it would have been written into."""
    if (bad := unencodable(value)) is not None:
        raise exc.UsageError(f"{what} {bad!r} is not valid UTF-8: {why}")


def task_from_dict(raw: object, index: int, source: str, base: Path) -> TaskSpec:
    """One task from a mapping with the ``[[task]]`` keys (Python API, follow-ups)."""
    return _task(raw, index, source, [], None, base)


def _task(raw: object, index: int, path: str, lines: list[str], span: tuple[int, int] | None,
          base: Path) -> TaskSpec:
    header = span[0] + 1 if span else None
    if not isinstance(raw, dict):  # (``task = ["x"]`` has no [[task]] header: the line that sets it)
        raise exc.InputError(f"task #{index + 1} must be a table", path=path,
                             line=header or _key_line(lines, None, "task"))
    label = f"task {raw['name']!r}" if isinstance(raw.get("name"), str) else f"task #{index + 1}"

    def fail(message: str, key: str | None = None) -> exc.InputError:
        line = _key_line(lines, span, key) if key else header
        return exc.InputError(f"{label}: {message}", path=path, line=line)

    for key in raw:
        if key not in TASK_KEYS:
            raise fail(unknown_key(key, TASK_KEYS), key)
    for key, value in raw.items():
        if (bad := unencodable(value)) is not None:  # an API's str, an add's argument: the records are UTF-8
            raise fail(f"{key} holds {bad!r}, which is not valid UTF-8 text: a run records its tasks as text", key)
    name = raw.get("name", f"task-{index + 1}")
    if not isinstance(name, str) or not name.strip() or "\0" in name:
        raise fail("name must be a non-empty string", "name")
    has_cmd, has_argv = "cmd" in raw, "argv" in raw
    if has_cmd == has_argv:
        raise fail("needs exactly one of cmd (a shell string) or argv (a list)", "cmd" if has_cmd else None)
    cmd = argv = None
    if has_cmd:
        cmd = raw["cmd"]
        if not isinstance(cmd, str):
            raise fail("cmd must be a string", "cmd")
        if not cmd.strip():
            raise fail("cmd is empty", "cmd")
        if "\0" in cmd:
            raise fail("cmd contains a NUL byte", "cmd")
    else:
        argv = raw["argv"]
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            raise fail("argv must be a list of strings", "argv")
        if not argv or not argv[0]:
            raise fail("argv is empty", "argv")
        if any("\0" in a for a in argv):
            raise fail("argv contains a NUL byte", "argv")
        argv = tuple(argv)
    cwd = raw.get("cwd")
    if cwd is not None:
        if not isinstance(cwd, str) or not cwd:
            raise fail("cwd must be a non-empty string", "cwd")
        if "\0" in cwd:
            raise fail("cwd contains a NUL byte", "cwd")
        try:
            cwd = str(base / Path(cwd).expanduser())  # relative to the file; pathlib keeps an absolute one
        except RuntimeError:  # ~user of a user this system does not know
            raise fail(f"cwd {cwd!r}: no such user's home directory to expand", "cwd") from None
    env = raw.get("env", {})
    if not isinstance(env, dict):
        raise fail("env must be a table of strings", "env")
    clean_env = {}
    for k, v in env.items():
        if not isinstance(k, str) or not is_env_name(k):
            raise fail(f"env key {k!r} is no name a shell can export (letters, digits and _, not starting with a "
                       "digit)", "env")
        if isinstance(v, (dict, list)):
            raise fail(f"env key {k!r} must be a string, not a {'table' if isinstance(v, dict) else 'list'}", "env")
        if v is None:  # (the API's: TOML has no null)
            raise fail(f"env key {k!r} is None, not a string", "env")
        if not isinstance(v, (str, int)):  # (bool is an int) a float or a date loses how it was written
            raise fail(f"env key {k!r} is a TOML {type(v).__name__}, not a string: quote it (unquoted it would "
                       f"reach the worker as {str(v)!r}, not as written)", "env")
        if isinstance(v, str) and "\0" in v:
            raise fail(f"env key {k!r}: its value contains a NUL byte, which no environment can hold", "env")
        if is_reserved_env_name(k):
            raise exc.InputError(
                f"{label}: env key {k!r} is reserved: ZELLIJ_SWARM_* names mark a generation's processes (cancel "
                "and timeouts find them by it) and _zsw_* names are the wrapper's own; a task cannot set them",
                path=path, line=_env_key_line(lines, span, k) or header)
        clean_env[k] = str(v).lower() if isinstance(v, bool) else str(v)
    overrides: dict[str, Any] = {}  # each of its setting's type, as TaskSpec declares it
    for key in settings.TASK_OVERRIDABLE:
        if key in raw:
            line = _key_line(lines, span, key)
            if isinstance(raw[key], (dict, list)):  # as in [swarm]: not a text to take the value of
                raise fail(f"{key} must be a single value, not a {'table' if isinstance(raw[key], dict) else 'list'}",
                           key)
            try:
                overrides[key] = settings.parse_as(key, raw[key], settings.FileValue(raw[key], path, line).source)
            except exc.SettingError as e:
                raise exc.InputError(f"{label}: {e.message}", path=path, line=line) from None
    after = raw.get("after", [])
    if isinstance(after, str):
        after = [after]
    if not isinstance(after, list) or not all(isinstance(a, str) for a in after):
        raise fail("after must be a list of task names", "after")
    priority = raw.get("priority", 0)
    if not isinstance(priority, int) or isinstance(priority, bool):
        raise fail("priority must be an integer", "priority")
    tags = raw.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise fail("tags must be a list of strings", "tags")
    group = raw.get("group")
    if group is not None and not isinstance(group, str):
        raise fail("group must be the name of a [group.NAME] table", "group")
    try:
        resources = slurm.parse_table(raw.get("slurm", {}))
    except slurm.Invalid as e:
        raise fail(f"slurm: {e}", "slurm") from None
    return TaskSpec(
        name=name, cmd=cmd, argv=argv, cwd=cwd, env=clean_env, after=tuple(after), priority=priority,
        tags=tuple(tags), group=group, slurm=resources, source=path, line=header or 0, **overrides,
    )


def validate(tasks: Iterable[TaskSpec], known: Iterable[str] = (), groups: Iterable[str] | None = None) -> None:
    """Reject duplicate names, unknown ``after`` names, dependency cycles and, when ``groups``
    is given, groups it does not name."""
    tasks = list(tasks)
    if groups is not None:
        named = set(groups)
        for t in tasks:
            if t.group is not None and t.group not in named:
                hint = exc.did_you_mean(t.group, named)
                raise exc.InputError(f"task {t.name!r}: unknown group {t.group!r}{hint}"
                                     f"{'' if named else ' (no [group.NAME] is defined)'}", path=t.origin or None)
    names: dict[str, TaskSpec] = {n: TaskSpec(name=n) for n in known}
    for t in tasks:
        if t.name in names:
            raise exc.InputError(f"duplicate task name {t.name!r}", path=t.origin or None)
        names[t.name] = t
    for t in tasks:
        for dep in t.after:
            if dep not in names:
                raise exc.InputError(f"task {t.name!r}: after names unknown task {dep!r}", path=t.origin or None)
            if dep == t.name:
                raise exc.InputError(f"task {t.name!r}: depends on itself", path=t.origin or None)
    cycle = _find_cycle({t.name: t.after for t in tasks})
    if cycle:
        first = next(t for t in tasks if t.name == cycle[0])
        raise exc.InputError("dependency cycle: " + " -> ".join([*cycle, cycle[0]]), path=first.origin or None)


def _find_cycle(graph: dict[str, tuple[str, ...]]) -> list[str] | None:
    """A cycle in ``graph`` as a list of names, or None (iterative DFS: deep chains are fine)."""
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    for root in graph:
        if state.get(root):
            continue
        stack: list[tuple[str, Iterator[str]]] = [(root, iter(graph.get(root, ())))]
        path = [root]
        state[root] = 1
        while stack:
            node, deps = stack[-1]
            dep = next(deps, None)
            if dep is None:
                stack.pop()
                path.pop()
                state[node] = 2
            elif state.get(dep) == 1:
                return path[path.index(dep):]
            elif not state.get(dep) and dep in graph:
                state[dep] = 1
                path.append(dep)
                stack.append((dep, iter(graph.get(dep, ()))))
    return None
