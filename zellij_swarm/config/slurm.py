"""What a task asks of Slurm (SPEC §11): its resources, as ``srun`` options.

``slurm = { partition, cpus, mem, gres, time, constraint, account, qos, extra }`` — in ``[swarm]`` for
the whole run (also ``--slurm-partition`` … and ``ZELLIJ_SWARM_SLURM_PARTITION`` …, one
setting each), and as a task key, whose values win over the run's one by one. Every value is
checked before anything runs, in the form ``srun`` takes:

- ``partition``, ``account``, ``qos``: a name (letters, digits, ``_ . -``; ``partition`` may
  list several, comma-separated);
- ``cpus``: CPUs per task, an integer 1–4096 (``--cpus-per-task``);
- ``mem``: memory per node, an integer with an optional unit K, M, G or T (``--mem``);
- ``gres``: generic resources, ``name[:type][:count]``, comma-separated (``gpu:2``);
- ``time``: a time limit as Slurm writes one — minutes, ``MM:SS``, ``HH:MM:SS``, ``D-HH``,
  ``D-HH:MM``, ``D-HH:MM:SS`` — or a duration like ``90s``, ``5m``, ``2h`` (rounded up to
  whole minutes, Slurm's unit);
- ``constraint``: node features, ``&``, ``|``, ``,`` and brackets allowed (``intel&avx2``);
- ``extra``: further ``srun`` options the table does not name (``--exclusive``,
  ``--gpus-per-task=1``, ``--cpu-bind=cores``), a list of words or one string split as a shell
  would; passed after the table's options (``extra_options``).

A value of the other keys never starts with ``-`` and holds no whitespace: each is passed as one
``--key=value`` argument, never through a shell.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from zellij_swarm.config import ascii_int

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*\Z")
_NAMES = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*(,[A-Za-z0-9_][A-Za-z0-9_.-]*)*\Z")
_MEM = re.compile(r"[1-9][0-9]{0,12}[KMGT]?\Z")
_GRES = re.compile(r"[A-Za-z0-9_]+(:[A-Za-z0-9_.-]+){0,2}(,[A-Za-z0-9_]+(:[A-Za-z0-9_.-]+){0,2})*\Z")
_CONSTRAINT = re.compile(r"[A-Za-z0-9_\[(][A-Za-z0-9_.&|,*\[\]()-]*\Z")
# (re.ASCII: another script's digits are no time srun takes)
_SLURM_TIME = re.compile(r"(\d+)(?:-(\d+)(?::(\d+)(?::(\d+))?)?|:(\d+)(?::(\d+))?)?\Z", re.ASCII)
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(s|m|h|d)\Z", re.ASCII)


class Invalid(ValueError):
    """A value outside what the key allows; its text says what is allowed."""


def _word(pattern: re.Pattern[str], allowed: str, *, upper: bool = False) -> Callable[[object], str]:
    """A parser of a value that is one word of ``pattern`` (a string or an integer: not
    whatever ``str`` makes of any object — through the API, ``(1,)`` passed as a constraint)."""
    def parse(raw: object) -> str:
        if isinstance(raw, bool) or not isinstance(raw, str | int):
            raise Invalid(allowed)
        text = str(raw).strip()
        text = text.upper() if upper else text
        if not pattern.match(text):
            raise Invalid(allowed)
        return text

    return parse


def _cpus(raw: object) -> int:
    if isinstance(raw, bool | float):
        raise Invalid("an integer 1–4096 (CPUs per task)")
    try:
        value = ascii_int(str(raw).strip())
    except ValueError:
        raise Invalid("an integer 1–4096 (CPUs per task)") from None
    if not 1 <= value <= 4096:
        raise Invalid("an integer 1–4096 (CPUs per task)")
    return value


def _time(raw: object) -> str:
    """Slurm's own forms are kept as written; a duration becomes whole minutes."""
    allowed = "a time limit: minutes, MM:SS, HH:MM:SS, D-HH[:MM[:SS]], or a duration like 90s, 5m, 2h"
    if isinstance(raw, bool):
        raise Invalid(allowed)
    text = str(raw).strip()
    if isinstance(raw, int) and raw > 0:
        return str(raw)
    if (m := _DURATION.match(text)) is not None:
        seconds = float(m.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]
        if seconds <= 0:
            raise Invalid(allowed)
        return str(max(1, math.ceil(seconds / 60)))
    m = _SLURM_TIME.match(text)
    if m is None or not any(int(g) for g in m.groups() if g is not None):
        raise Invalid(allowed)
    # after the first field: hours of a day below 24, minutes and seconds below 60 (1:99 is no time)
    limits = [(m.group(2), 24), (m.group(3), 60), (m.group(4), 60), (m.group(5), 60), (m.group(6), 60)]
    if any(field is not None and int(field) >= limit for field, limit in limits):
        raise Invalid(allowed)
    return text


_EXTRA_ALLOWED = "srun options such as [\"--exclusive\", \"--gpus-per-task=1\"] (a list, or one string)"
# Options the executor sets itself (SPEC §11): a step is named, logged and placed by the swarm.
_OWNED = {"--job-name": "-J", "--pty": None, "--output": "-o", "--error": "-e", "--input": "-i",
          "--jobid": None, "--kill-on-bad-exit": "-K", "--quiet": "-Q", "--export": None, "--multi-prog": None}
# Options a key of the table sets: one way to say each thing (and the preflight reads the key).
_KEYED = {"--partition": ("-p", "partition"), "--cpus-per-task": ("-c", "cpus"), "--mem": (None, "mem"),
          "--gres": (None, "gres"), "--time": ("-t", "time"), "--constraint": ("-C", "constraint"),
          "--account": ("-A", "account"), "--qos": ("-q", "qos")}
# One task on one node per step, until multi-task steps are designed: the wrapper would run once per task.
_ONE = {"--ntasks": "-n", "--nodes": "-N"}
_WATCHED = {**_OWNED, **{o: s for o, (s, _) in _KEYED.items()}, **_ONE}
_SHORT = {short: long for long, short in _WATCHED.items() if short}
# srun's short options that take no value: a word after one of them would be srun's command
_SHORT_FLAGS = frozenset("EHhIKklOQsuVvXZ")


def _extra(raw: object) -> str:
    """``extra``: srun options, checked; kept as one shell-quoted string (``shlex.join``), so
    that it is one text setting like the others, recorded and shown as it reads."""
    if isinstance(raw, str):
        try:
            words = shlex.split(raw)
        except ValueError as e:
            raise Invalid(f"{_EXTRA_ALLOWED}; cannot split it: {e}") from None
    elif isinstance(raw, list | tuple) and all(isinstance(w, str) for w in raw):
        words = list(raw)
    else:
        raise Invalid(_EXTRA_ALLOWED)
    if not words:
        raise Invalid(_EXTRA_ALLOWED)
    _check_extra(words)
    return shlex.join(words)


def _check_extra(words: list[str]) -> None:
    """Refuse what would break a step: an option the executor or the table owns, more than
    one task or node, a word srun would take for the command (every value of a long option
    other than these is written ``--name=value``)."""
    i = 0
    while i < len(words):
        word = words[i]
        if any(c in word for c in "\0\n") or not word.startswith("-") or word in ("-", "--"):
            raise Invalid(f"options only ({word!r} would be srun's command)")
        if word.startswith("--"):
            name, eq, value = word.partition("=")
            known = name in _WATCHED
            if not known and any(w.startswith(name) for w in _WATCHED):
                raise Invalid(f"options written in full ({word!r} abbreviates one)")
            takes_value = known
        else:
            name, value = _SHORT.get(word[:2], word[:2]), word[2:]
            eq = "=" if value else ""
            takes_value = word[1] not in _SHORT_FLAGS
        if not eq and i + 1 < len(words) and not words[i + 1].startswith("-"):
            if not takes_value:
                how = "; write a value as --name=VALUE" if word.startswith("--") else ""
                raise Invalid(f"options only ({words[i + 1]!r} after {word!r} would be srun's command{how})")
            value, i = words[i + 1], i + 1
            word = f"{word} {value}"
        _refuse_watched(word, name, value)
        i += 1


def _refuse_watched(word: str, name: str, value: str) -> None:
    if name in _OWNED:
        raise Invalid(f"options the Slurm executor does not set itself ({word!r}: {name} is its own)")
    if name in _KEYED:
        key = _KEYED[name][1]
        raise Invalid(f"no {name} here: slurm.{key} (--slurm-{key}) sets it ({word!r})")
    if name in _ONE and any(int(n) > 1 for n in re.findall(r"\d+", value)):
        raise Invalid(f"one task on one node per step ({word!r} asks for more, and the wrapper would run once "
                      "per task)")


_ANY_NAME = _word(_NAME, "a name of letters, digits, '_', '.' and '-'")
PARSERS: Mapping[str, Callable[[object], object]] = {
    "partition": _word(_NAMES, "a partition name, or several separated by commas"),
    "cpus": _cpus,
    "mem": _word(_MEM, "a memory size such as 512M, 4G or 2048 (megabytes)", upper=True),
    "gres": _word(_GRES, "generic resources such as gpu:2 or gpu:a100:1"),
    "time": _time,
    "constraint": _word(_CONSTRAINT, "node features such as intel&avx2"),
    "account": _ANY_NAME,
    "qos": _ANY_NAME,
    "extra": _extra,
}
KEYS = tuple(PARSERS)  # in srun options' order: ``extra`` last, after the table's own
_OPTION = {key: "--cpus-per-task" if key == "cpus" else f"--{key}" for key in KEYS if key != "extra"}
# What ``--help`` shows as each one's value
METAVARS = {"partition": "NAME[,NAME]", "cpus": "N", "mem": "SIZE", "gres": "GRES", "time": "TIME",
            "constraint": "FEATURES", "account": "NAME", "qos": "NAME", "extra": "'OPTIONS'"}


def parse_table(raw: object) -> dict[str, Any]:
    """A ``slurm = {…}`` table, each value checked; ``Invalid`` names the key at fault."""
    if not isinstance(raw, dict):
        raise Invalid("a table such as { partition = \"gpu\", cpus = 4 }")
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in PARSERS:
            raise Invalid(f"unknown key {key!r} in slurm (known: {', '.join(KEYS)})")
        try:
            out[key] = PARSERS[key](value)
        except Invalid as e:
            raise Invalid(f"slurm.{key} {value!r}: expected {e}") from None
    return out


def srun_options(resources: Mapping[str, Any]) -> list[str]:
    """``--key=value`` for every resource set, in ``KEYS`` order, then the ``extra`` words."""
    return allocation_options(resources) + extra_options(resources)


def allocation_options(resources: Mapping[str, Any]) -> list[str]:
    """The table's options alone: what ``salloc`` takes for the swarm's allocation (the
    ``extra`` words are ``srun``'s, and salloc refuses some: ``--cpu-bind``)."""
    return [f"{_OPTION[k]}={resources[k]}" for k in KEYS if k != "extra" and resources.get(k) is not None]


def extra_options(resources: Mapping[str, Any]) -> list[str]:
    """The ``extra`` words, as they were given."""
    extra = resources.get("extra")
    return shlex.split(extra) if extra else []


def ignored(run_sources: Mapping[str, str], tasks: Sequence[str]) -> str | None:
    """What a run with the local executor would silently ignore: the run's Slurm settings set
    (``{setting: source}``) and the tasks with a ``slurm`` table of their own; None when
    there is nothing."""
    parts = [f"{name} ({source})" for name, source in run_sources.items()]
    if tasks:
        more = f" and {len(tasks) - 1} more" if len(tasks) > 1 else ""
        parts.append(f"the slurm table of task {tasks[0]!r}{more}")
    if not parts:
        return None
    return f"{', '.join(parts)}: ignored, as the executor is local (--executor slurm runs each task as a Slurm step)"
