"""Where a run's files live, and the two primitives every writer uses.

Layout (SPEC §5, §7)::

    <state-dir>/.gitignore                     ignores everything
    <state-dir>/runs/<run-id>/                 mode 0700
        run.json  events.jsonl  state.json  summary.json  env.sh (0600)  lock
        inbox/                                 control messages, one file each
        inbox/consumed/                        messages already applied
        slots/slot-<n>/gen-<m>/                one directory per generation:
            wrapper.sh  claim  heartbeat.jsonl  output.log  exit  exit.json  artifacts/

Run ids start with the UTC start time, so they sort by age; ``find_run`` still orders by
the recorded start time rather than trusting names.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from . import exc

_SLOT_DIR = re.compile(r"slot-(\d+)\Z")
_GEN_DIR = re.compile(r"gen-(\d+)\Z")


def write_atomic(path: Path, data: str | bytes, *, mode: int = 0o600) -> None:
    """Write ``path`` so that no reader ever sees a partial file (temp file + rename).

    The temp file is created with O_EXCL|O_NOFOLLOW, so a planted symlink is never followed.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    payload = data.encode() if isinstance(data, str) else data
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


_compact = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def write_json_atomic(path: Path, obj: Any) -> None:
    """Compact JSON: the C encoder is several times faster than an indenting one, and
    snapshots of thousands of tasks are written while the run goes on."""
    write_atomic(path, _compact(obj) + "\n")


def write_new(path: Path, data: str, *, mode: int) -> None:
    """Create a file nobody reads yet (a generation's wrapper): O_EXCL, no rename needed."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    with os.fdopen(fd, "w") as f:
        f.write(data)


def unwritable(path: Path) -> bool:
    """The filesystem holding ``path`` is full or read-only."""
    try:
        st = os.statvfs(path)
    except OSError:
        return True
    return bool(st.f_flag & os.ST_RDONLY) or st.f_bavail == 0


def read_json(path: Path) -> Any:
    with open(path, "rb") as f:
        return json.loads(f.read())


@dataclass(frozen=True)
class GenPaths:
    """The files of one generation (one attempt of one task in one slot). The paths are
    computed once each: the supervisor touches them for every one of thousands of tasks."""

    dir: Path
    slot: int
    gen: int

    @cached_property
    def wrapper(self) -> Path:
        return self.dir / "wrapper.sh"

    @cached_property
    def claim(self) -> Path:
        return self.dir / "claim"

    @cached_property
    def heartbeat(self) -> Path:
        return self.dir / "heartbeat.jsonl"

    @cached_property
    def output(self) -> Path:
        return self.dir / "output.log"

    @cached_property
    def exit_sidecar(self) -> Path:
        return self.dir / "exit"

    @cached_property
    def exit_record(self) -> Path:
        return self.dir / "exit.json"

    @cached_property
    def artifacts(self) -> Path:
        return self.dir / "artifacts"

    @cached_property
    def kill(self) -> Path:
        """Why the supervisor ended this generation (timeout, cancelled_by_user, …), written
        before the first signal so that a resumed supervisor classifies its exit the same."""
        return self.dir / "kill"


@dataclass(frozen=True)
class RunPaths:
    dir: Path

    @property
    def run_id(self) -> str:
        return self.dir.name

    @property
    def run_json(self) -> Path:
        return self.dir / "run.json"

    @property
    def events(self) -> Path:
        return self.dir / "events.jsonl"

    @property
    def state(self) -> Path:
        return self.dir / "state.json"

    @property
    def summary(self) -> Path:
        return self.dir / "summary.json"

    @property
    def saved_env(self) -> Path:
        return self.dir / "env.sh"

    @property
    def lock(self) -> Path:
        return self.dir / "lock"

    @property
    def inbox(self) -> Path:
        return self.dir / "inbox"

    @property
    def consumed(self) -> Path:
        return self.dir / "inbox" / "consumed"

    @property
    def replies(self) -> Path:
        return self.dir / "inbox" / "replies"

    @property
    def slots(self) -> Path:
        return self.dir / "slots"

    def slot_dir(self, slot: int) -> Path:
        return self.slots / f"slot-{slot}"

    def gen(self, slot: int, gen: int) -> GenPaths:
        return GenPaths(self.slot_dir(slot) / f"gen-{gen}", slot, gen)

    def generations(self, slot: int) -> list[GenPaths]:
        """The slot's generation directories in numeric order (never by name padding)."""
        try:
            names = os.listdir(self.slot_dir(slot))
        except FileNotFoundError:
            return []
        found = [(int(m.group(1)), n) for n in names if (m := _GEN_DIR.match(n))]
        return [self.gen(slot, g) for g, _ in sorted(found)]

    def slot_numbers(self) -> list[int]:
        try:
            names = os.listdir(self.slots)
        except FileNotFoundError:
            return []
        return sorted(int(m.group(1)) for n in names if (m := _SLOT_DIR.match(n)))


def runs_root(state_dir: Path) -> Path:
    return state_dir / "runs"


def prepare_state_dir(state_dir: Path) -> None:
    """Create the state dir with a ``.gitignore`` that ignores everything in it."""
    try:
        runs_root(state_dir).mkdir(parents=True, exist_ok=True, mode=0o700)
        ignore = state_dir / ".gitignore"
        if not ignore.exists():
            write_atomic(ignore, "# zellij-swarm run records\n*\n", mode=0o644)
    except OSError as e:
        raise exc.StateDirError(f"cannot use state directory {state_dir}: {e.strerror}") from e


def all_runs(state_dir: Path) -> list[RunPaths]:
    """Every run directory, newest first by recorded start time."""
    root = runs_root(state_dir)
    try:
        entries = [root / n for n in os.listdir(root) if not n.startswith(".")]
    except FileNotFoundError:
        return []
    runs = [RunPaths(p) for p in entries if (p / "run.json").is_file()]
    return sorted(runs, key=_started_at, reverse=True)


def _started_at(run: RunPaths) -> tuple[float, str]:
    try:
        return float(read_json(run.run_json).get("started_at") or 0.0), run.run_id
    except (OSError, ValueError):
        return 0.0, run.run_id


def find_run(state_dir: Path, run_id: str | None) -> RunPaths:
    """The named run (a unique prefix of its id is enough), or the newest one."""
    if run_id is None:
        runs = all_runs(state_dir)
        if not runs:
            raise exc.UsageError(f"no runs under {state_dir}")
        return runs[0]
    if "/" in run_id or run_id.startswith("."):
        raise exc.RunNotFound(run_id, str(state_dir))
    exact = RunPaths(runs_root(state_dir) / run_id)
    if exact.run_json.is_file():
        return exact
    matches = [r for r in all_runs(state_dir) if r.run_id.startswith(run_id)]
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise exc.UsageError(f"run id prefix {run_id!r} is ambiguous: {', '.join(r.run_id for r in matches)}")
    raise exc.RunNotFound(run_id, str(state_dir))
