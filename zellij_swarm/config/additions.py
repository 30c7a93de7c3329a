"""Tasks added to a running swarm: ``zellij-swarm add`` and workers' follow-ups (SPEC §6).

Both arrive as mappings with the ``[[task]]`` keys and are checked like a swarm file, against
the names the run already has. Each addition is consumed once: an inbox message moves to
``consumed/`` after it is applied, and a follow-up without a name is named after its task
and line (``build/followup-2``), so the same line written again by a retry of that task is
recognised as a duplicate and does not run twice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from zellij_swarm import exc, jsontext
from zellij_swarm.config import swarmfile

FOLLOWUPS = "followups.jsonl"
MAX_FOLLOWUPS_BYTES = 1 << 20


@dataclass
class Batch:
    specs: list[swarmfile.TaskSpec] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)


def _never(name: str) -> bool:
    return False


def from_message(raw_tasks: object, known: Iterable[str], base: Path, groups: Iterable[str] = (),
                 kept: Callable[[str], bool] = _never) -> list[swarmfile.TaskSpec]:
    """An ``add`` message's tasks; raises ``exc.UsageError`` with one line if any is invalid
    (then none is added). ``groups``: the run's, the only ones its tasks may name. ``kept``:
    the names the run's input, still being read, will give its tasks (``Supervisor.kept_name``):
    not one of them is taken, nor given to an unnamed task."""
    if not isinstance(raw_tasks, list) or not raw_tasks:
        raise exc.UsageError("add: no tasks given")
    known = set(known)
    taken = set(known)  # and the names of this message's tasks so far
    specs: list[swarmfile.TaskSpec] = []
    for i, raw in enumerate(raw_tasks):
        if isinstance(raw, dict) and "name" not in raw:
            raw = {**raw, "name": _free_name(taken, kept)}
        spec = swarmfile.task_from_dict(raw, i, "add", base)
        _refuse_kept(spec.name, kept)
        specs.append(spec)
        taken.add(spec.name)
    swarmfile.validate(specs, known=known, groups=groups)
    return specs


def _free_name(taken: set[str], kept: Callable[[str], bool]) -> str:
    """``task-N``, the first free after as many as are taken; while the run still reads tasks
    from stdin, which names them ``task-N`` in its order, ``added-N`` instead."""
    prefix = "added" if kept(f"task-{len(taken) + 1}") else "task"
    n = 1 if prefix == "added" else len(taken) + 1
    while f"{prefix}-{n}" in taken:
        n += 1
    return f"{prefix}-{n}"


def _refuse_kept(name: str, kept: Callable[[str], bool]) -> None:
    if kept(name):
        raise exc.UsageError(f"the name {name!r} is the one the run will give a task it has still to read from "
                             "stdin (task-N, in input order); give this task another name")


def from_followups(data: bytes, path: Path, parent: str, known: Iterable[str], base: Path,
                   groups: Iterable[str] = (), kept: Callable[[str], bool] = _never) -> Batch:
    """The follow-up lines ``data`` a generation left in its artifact directory, read from
    ``path`` (which the messages name; ``kept``: as for ``from_message``)."""
    out = Batch()
    if len(data) > MAX_FOLLOWUPS_BYTES:
        out.errors.append(f"{path}: larger than {MAX_FOLLOWUPS_BYTES} bytes; ignored")
        return out
    taken = set(known)
    for lineno, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            raw = jsontext.loads(line)
            if not isinstance(raw, dict):
                raise ValueError("not a JSON object")
        except ValueError as e:
            out.errors.append(f"{path}:{lineno}: invalid follow-up: {e}")
            continue
        raw.setdefault("name", f"{parent}/followup-{lineno}")
        if raw["name"] in taken:
            out.duplicates.append(str(raw["name"]))
            continue
        try:
            spec = swarmfile.task_from_dict(raw, lineno - 1, f"{path}:{lineno}", base)
            _refuse_kept(spec.name, kept)
            swarmfile.validate([spec], known=taken, groups=groups)
        except exc.UsageError as e:  # it names the line already (the task's source is ``path:lineno``)
            where = f"{path}:{lineno}"
            out.errors.append(str(e) if str(e).startswith(where) else f"{where}: {e}")
            continue
        taken.add(spec.name)
        out.specs.append(spec)
    return out
