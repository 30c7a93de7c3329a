"""Reading what a wrapper left behind, and normalising it into ``exit.json``.

The ``exit`` sidecar is complete once it ends with a newline (the wrapper writes it with one
``printf``); an empty or partial file means "not yet". ``exit.json`` is written atomically by
whichever supervisor reads the sidecar first, so no reader ever sees a partial record.

A POSIX shell cannot tell ``exit 143`` from death by SIGTERM: ``code`` keeps the shell's
status and any status above 128 also names the likely signal in ``signal``.
"""

from __future__ import annotations

import json
import os
import signal as _signal
from dataclasses import dataclass

from .rundir import GenPaths, GroupSync, read_json, write_json_atomic


@dataclass(frozen=True)
class ExitRecord:
    code: int | None
    signal: str | None
    started_at: float | None
    ended_at: float | None
    pid: int | None
    reason: str | None = None  # set by the wrapper (cwd_missing) or by the supervisor

    def to_json(self) -> dict:
        out = {"code": self.code, "signal": self.signal, "started_at": self.started_at, "ended_at": self.ended_at,
               "pid": self.pid}
        if self.reason is not None:
            out["reason"] = self.reason
        return out


def signal_name(code: int | None) -> str | None:
    if code is None or code <= 128 or code > 128 + 64:
        return None
    try:
        return _signal.Signals(code - 128).name
    except ValueError:
        return f"SIG{code - 128}"


def _mtime(path: os.PathLike) -> float | None:
    try:
        return os.stat(path).st_mtime
    except FileNotFoundError:
        return None


def claim_owner(gen: GenPaths) -> str | None:
    """The claim's content: the wrapper's pid, or ``supervisor`` (None when unclaimed)."""
    try:
        with open(gen.claim, "rb") as f:
            return f.read().decode("ascii", "replace").strip() or None
    except FileNotFoundError:
        return None


def take_claim(gen: GenPaths) -> bool:
    """The supervisor claims a generation (O_EXCL, no symlink follow); False if already claimed."""
    try:
        fd = os.open(gen.claim, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as f:
        f.write("supervisor\n")
    return True


def started_at(gen: GenPaths) -> float | None:
    """When the generation started: the claim's modification time (the wrapper restamps it)."""
    return _mtime(gen.claim)


def read_sidecar(gen: GenPaths) -> tuple[int | None, str | None] | None:
    """``(code, reason)`` from a complete ``exit`` sidecar, else None."""
    try:
        with open(gen.exit_sidecar, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return None
    if not raw.endswith(b"\n"):
        return None
    head, _, reason = raw.decode("ascii", "replace").strip().partition(" ")
    code = None if head == "-" else int(head) if head.lstrip("-").isdigit() else None
    return code, reason or None


def wrapper_pid(gen: GenPaths) -> int | None:
    owner = claim_owner(gen)
    return int(owner) if owner and owner.isdigit() else None


def heartbeat_started(gen: GenPaths) -> dict | None:
    """The launch heartbeat line, once the wrapper has written it."""
    try:
        with open(gen.heartbeat, "rb") as f:
            first = f.readline()
    except FileNotFoundError:
        return None
    if not first.endswith(b"\n"):
        return None
    try:
        obj = json.loads(first)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) and obj.get("event") == "started" else None


def collect_exit(gen: GenPaths, *, pid: int | None = None, sync: GroupSync | None = None) -> ExitRecord | None:
    """The generation's exit record: ``exit.json`` if written, else built from the sidecar
    and written now. None while the wrapper has not committed its exit. ``pid``, when the
    caller knows the wrapper's, saves reading it from the claim."""
    side = read_sidecar(gen)
    # exit.json exists before the sidecar only when a supervisor wrote it for a vanished wrapper
    if side is None or gen.exit_record.exists():
        existing = _read_record(gen)
        if existing is not None or side is None:
            return existing
    code, reason = side
    rec = ExitRecord(code, signal_name(code), started_at(gen), _mtime(gen.exit_sidecar), pid or wrapper_pid(gen), reason)
    _save(gen, rec, sync)
    return rec


def _read_record(gen: GenPaths) -> ExitRecord | None:
    try:
        rec = read_json(gen.exit_record)
        return ExitRecord(**{k: rec.get(k) for k in ("code", "signal", "started_at", "ended_at", "pid", "reason")})
    except (FileNotFoundError, ValueError, TypeError):
        return None


def _save(gen: GenPaths, rec: ExitRecord, sync: GroupSync | None = None) -> None:
    """Write exit.json. A full or read-only state dir loses only this copy: the sidecar stays
    the truth, and the next reader writes exit.json again."""
    try:
        write_json_atomic(gen.exit_record, rec.to_json(), sync=sync)
    except OSError:
        pass


def record_missing_exit(gen: GenPaths, *, reason: str, code: int | None, signal: str | None, ended_at: float,
                        sync: GroupSync | None = None) -> ExitRecord:
    """The supervisor's record for a wrapper that is gone without committing its exit."""
    rec = ExitRecord(code, signal, started_at(gen), ended_at, wrapper_pid(gen), reason)
    _save(gen, rec, sync)
    return rec
