"""What a task asks of Slurm (SPEC §11): its resources, as ``srun`` options.

``slurm = { partition, cpus, mem, gres, time, constraint, account, qos }`` — in ``[swarm]`` for
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
- ``constraint``: node features, ``&``, ``|``, ``,`` and brackets allowed (``intel&avx2``).

A value never starts with ``-`` and holds no whitespace: each is passed as one ``--key=value``
argument, never through a shell.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*\Z")
_NAMES = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*(,[A-Za-z0-9_][A-Za-z0-9_.-]*)*\Z")
_MEM = re.compile(r"[1-9][0-9]{0,12}[KMGT]?\Z")
_GRES = re.compile(r"[A-Za-z0-9_]+(:[A-Za-z0-9_.-]+){0,2}(,[A-Za-z0-9_]+(:[A-Za-z0-9_.-]+){0,2})*\Z")
_CONSTRAINT = re.compile(r"[A-Za-z0-9_\[(][A-Za-z0-9_.&|,*\[\]()-]*\Z")
_SLURM_TIME = re.compile(r"(\d+)(?:-(\d+)(?::(\d+)(?::(\d+))?)?|:(\d+)(?::(\d+))?)?\Z")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(s|m|h|d)\Z")


class Invalid(ValueError):
    """A value outside what the key allows; its text says what is allowed."""


def _word(pattern: re.Pattern[str], allowed: str, *, upper: bool = False) -> Callable[[object], str]:
    """A parser of a value that is one word of ``pattern`` (a string or a number)."""
    def parse(raw: object) -> str:
        text = str(raw).strip()
        text = text.upper() if upper else text
        if isinstance(raw, bool) or not pattern.match(text):
            raise Invalid(allowed)
        return text

    return parse


def _cpus(raw: object) -> int:
    if isinstance(raw, bool | float):
        raise Invalid("an integer 1–4096 (CPUs per task)")
    try:
        value = int(str(raw).strip(), 10)
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
    return text


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
}
KEYS = tuple(PARSERS)  # in srun options' order
_OPTION = {key: "--cpus-per-task" if key == "cpus" else f"--{key}" for key in KEYS}


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
    """``--key=value`` for every resource set, in ``KEYS`` order."""
    return [f"{_OPTION[k]}={resources[k]}" for k in KEYS if resources.get(k) is not None]
