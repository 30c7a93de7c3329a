"""A generation's files: their names, and every write and read of them (SPEC §5, §7).

A generation is one attempt of one task in one slot, with a directory of its own,
``<run-dir>/slots/slot-<n>/gen-<m>/`` (``rundir.RunPaths.gen``), made at its reservation.
Its wrapper writes most of it::

    wrapper.sh       a pane's generation only: its own wrapper, arguments inside; its first
                     line names run, task id, slot, generation, attempt. A headless generation
                     runs the run's one ``worker.sh`` with its arguments (``wrapper``)
    claim            created O_EXCL by whoever runs the generation, so that it runs at most
                     once: the wrapper (content: its pid) or the supervisor (``supervisor``).
                     Its modification time is the start (the wrapper restamps it)
    heartbeat.jsonl  the launch heartbeat ``{"event":"started","pid":…,"pane_id":…}``, any lines
                     the worker appends, then ``{"event":"exited","code":…}``
    output.log       the worker's output
    exit             the exit sidecar, the wrapper's last durable act: one line, the exit
                     status or ``- <reason>``. Complete once it ends with a newline: an empty
                     or partial one means "not yet" (a zero-length one is absent, SPEC §7)
    exit.json        ``{"code","signal","started_at","ended_at","pid"}`` (and ``reason``),
                     written by the supervisor only for a wrapper that vanished without its
                     sidecar; every other exit record lives in the event log alone
    kill             why the supervisor ended the generation, written before its first signal,
                     and when that kill reached the worker (``sent <time>``), if it did
    hangup           made by a pane's leader when its terminal hung up (the pane closed, or
                     the session went): a worker's SIGHUP of its own leaves none
    released         Zellij before 0.44: the swarm closed the pane; a wrapper that has not
                     reached its hold yet holds nothing (``backends.zellij``)
    artifacts/       the worker's own files (``$ZELLIJ_SWARM_ARTIFACT_DIR``; ``followups.jsonl``).
                     Made with the directory: workers append to it without making it first

**Folding.** Once a headless generation's outcome (``worker_completed``/``worker_failed``,
which carries its exit record) is durably in the event log, its small files are folded away
(``fold``): a trivial task leaves no directory at all, one that printed keeps its
``output.log``. Readers therefore take a generation's facts from the event log when it has
an outcome there and no claim is left (resume, proof), and a missing ``output.log`` is an
empty one (logs, the renderers). A pane's generation is never folded: the pane's log copy and
its hold may still be writing there.

**Shells.** A folded generation whose directory holds only its wrapper's files may be kept,
emptied, for a later generation to run in (``fold``'s ``keep``; ``records.shells``): the
wrapper's files that exist then read as absent, as a zero-length file always has.

This module owns that format: the names (``GenPaths``, and the constants the wrapper's shell
template is rendered with), the supervisor's writes (claim, missing-exit record, kill reason),
folding, and every reading of the files — the supervisor's and resume's, the proof's
(``read_claim``, ``ended_at``: a few system calls per generation, for runs of 10,000) and the
renderers' (``read_gen``, ``GenReader``: many times a second, caching what cannot change any more).

A missing, empty, partial or garbled file reads as absent (None) — except the claim, taken
once the file exists, whatever it holds — and a field of the wrong type as None. Only a file
that exists but cannot be read (no permission, a directory in its place) raises ``OSError``,
except to the renderers, which show what they can.

A POSIX shell cannot tell ``exit 143`` from death by SIGTERM: ``code`` keeps the shell's
status and any status above 128 also names the likely signal in ``signal``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import signal as _signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

from zellij_swarm import jsontext

WRAPPER = "wrapper.sh"
CLAIM = "claim"
CLAIM_DRAFT = "claim.draft"  # the supervisor's claim, written whole before it is put in place
HEARTBEAT = "heartbeat.jsonl"
OUTPUT = "output.log"  # a worker's stdout (a pane's: its one terminal, stderr included)
STDERR = "stderr.log"  # a headless or compact worker's stderr, kept apart from its stdout
EXECUTOR_LOG = "executor.log"  # what runs a wrapper elsewhere (srun) said itself: a headless step's errors
EXIT_SIDECAR = "exit"
EXIT_RECORD = "exit.json"
KILL = "kill"
HANGUP = "hangup"
# A pane's Slurm step: the signal its ``srun`` (the pane leader's child) died of, one the
# leader did not pass on itself (``_paneleader --killed``): killed from outside, no cancel
EXECUTOR_KILLED = "executor-killed"
# made by a Zellij pane's pty relay as its worker exits, before it drains the worker's terminal
# (up to 2 s): the worker's end, which the exit sidecar, written after the drain, would postdate
WORKER_ENDED = "worker-ended"
# the pty relay's worker (its pid and session), from just before the worker's exec until the relay
# has its status: a relay with neither this nor WORKER_ENDED has not started its worker yet
RELAY_RECORD = "worker-session"
RELEASED = "released"
# the pid of the process that copies a tmux pane's output to OUTPUT (``pipe-pane``'s ``cat``),
# written by it as it starts: its end of the copy is waited for before the output is read
LOG_COPIER = "log-copier"
ARTIFACTS = "artifacts"

# The events that record a generation's outcome, and carry its exit record: all there is of a
# generation once it was folded away.
WORKER_COMPLETED, WORKER_FAILED = OUTCOME_EVENTS = ("worker_completed", "worker_failed")

SUPERVISOR = "supervisor"  # a claim's content when the supervisor took it: no wrapper runs there

_LINE_LIMIT = 4096  # the first lines read here are a few dozen bytes; a garbled file is not read whole

_HEADER = ("# zellij-swarm generation wrapper: run {run_id}, task id {task_id}, slot {slot:d}, "
           "generation {gen:d}, attempt {attempt:d} (generated; do not edit)")
_HEADER_FIELDS = re.compile(r"# zellij-swarm generation wrapper: run (\S+), task id (\S+), slot (\d+), "
                            r"generation (\d+), attempt (\d+)")


@dataclass(frozen=True)
class GenPaths:
    """The files of one generation. The paths are computed once each: the supervisor touches
    them for every one of thousands of tasks."""

    dir: Path
    slot: int
    gen: int

    @cached_property
    def wrapper(self) -> Path:
        return self.dir / WRAPPER

    @cached_property
    def claim(self) -> Path:
        return self.dir / CLAIM

    @cached_property
    def heartbeat(self) -> Path:
        return self.dir / HEARTBEAT

    @cached_property
    def output(self) -> Path:
        return self.dir / OUTPUT

    @cached_property
    def stderr(self) -> Path:
        return self.dir / STDERR

    @cached_property
    def executor_log(self) -> Path:
        return self.dir / EXECUTOR_LOG

    @cached_property
    def exit_sidecar(self) -> Path:
        return self.dir / EXIT_SIDECAR

    @cached_property
    def exit_record(self) -> Path:
        return self.dir / EXIT_RECORD

    @cached_property
    def artifacts(self) -> Path:
        return self.dir / ARTIFACTS

    @cached_property
    def released(self) -> Path:
        return self.dir / RELEASED

    @cached_property
    def kill(self) -> Path:
        """Why the supervisor ended this generation (timeout, cancelled_by_user, …), written
        before the first signal so that a resumed supervisor classifies its exit the same."""
        return self.dir / KILL


def plain(gen: GenPaths, name: str) -> str:
    """A file of ``gen`` as a plain string, for what runs for each of 10,000 generations (the
    supervisor's hot path, the proof): a pathlib join costs more than the system call it is
    made for."""
    return f"{gen.dir}/{name}"


def _mtime(path: str | os.PathLike[str]) -> float | None:
    """A file's modification time; a symlink's own, never its target's (``lstat``)."""
    try:
        return os.lstat(path).st_mtime
    except OSError:
        return None


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


# ----- wrapper.sh -------------------------------------------------------------------------

def wrapper_header(run_id: str, task_id: str, slot: int, gen: int, attempt: int) -> str:
    """The wrapper's first line, a shell comment. Generated identifiers only, never a task name:
    a newline in a name would end the comment."""
    return _HEADER.format(run_id=run_id, task_id=task_id, slot=slot, gen=gen, attempt=attempt)


def worker_script_header(run_id: str) -> str:
    """The first line of the run's one headless wrapper (``RunPaths.worker_script``)."""
    return f"# zellij-swarm worker wrapper of run {run_id} (generated; do not edit)"


def read_wrapper_header(gen: GenPaths) -> tuple[str, int] | None:
    """(task id, attempt) from the wrapper's first line; None without a wrapper."""
    try:
        first = rundir.read_record(gen.wrapper, _LINE_LIMIT).split(b"\n", 1)[0]
    except FileNotFoundError:
        return None
    m = _HEADER_FIELDS.match(first.decode("utf-8", "replace"))
    return (m.group(2), int(m.group(5))) if m else None


# ----- claim ------------------------------------------------------------------------------

PLANTED = "planted"  # the owner of a claim that is no plain file (``read_claim``)


@dataclass(frozen=True)
class Claim:
    """Who runs a generation, and since when."""

    at: float  # the generation's start: the claim's modification time
    owner: str | None  # the wrapper's pid, SUPERVISOR, or None while the wrapper writes it

    @property
    def pid(self) -> int | None:
        return int(self.owner) if self.owner and self.owner.isdigit() else None

    @property
    def by_supervisor(self) -> bool:
        return self.owner == SUPERVISOR

    @property
    def unwritten(self) -> bool:
        """Created, but naming no owner: a wrapper between creating its claim and writing its
        pid into it — or one killed in between, which ran nothing (the pid is written before
        anything runs). A process scan tells which (``procs.take_abandoned_claim``). A planted
        one is not: whoever put it there ran."""
        return self.pid is None and not self.by_supervisor and self.owner != PLANTED


# Filesystems without hard links (vfat, some FUSE mounts) refuse link() with one of these.
_NO_HARD_LINKS = frozenset({errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS})


def take_claim(gen: GenPaths) -> bool:
    """The supervisor claims a generation; False if already claimed. The claim appears whole:
    written aside, then hard-linked into place (``link`` fails on an existing name as O_EXCL
    does, and never follows a symlink there). A supervisor killed midway leaves no claim or
    a complete one — never an empty file, which reads as a wrapper's claim still being
    written (``Claim.unwritten``)."""
    try:
        return _install_supervisor_claim(gen, os.link)
    except OSError as e:
        if e.errno not in _NO_HARD_LINKS:
            raise
    try:
        fd = os.open(gen.claim, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        return False
    try:
        os.write(fd, _SUPERVISOR_CLAIM)
    finally:
        os.close(fd)
    return True


def take_unwritten_claim(gen: GenPaths) -> bool:
    """Replace, atomically, a claim that names no owner with the supervisor's — for a claim
    whose wrapper is known to be gone (``procs.take_abandoned_claim`` makes sure). False
    when the claim names an owner after all, or is not there."""
    claim = claim_or_planted(gen)
    return claim is not None and claim.unwritten and _install_supervisor_claim(gen, os.replace)


_SUPERVISOR_CLAIM = (SUPERVISOR + "\n").encode()


def _install_supervisor_claim(gen: GenPaths, install: Callable[[str, str], None]) -> bool:
    draft = plain(gen, CLAIM_DRAFT)
    fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, _SUPERVISOR_CLAIM)
    finally:
        os.close(fd)
    try:
        install(draft, plain(gen, CLAIM))
    except FileExistsError:
        return False
    finally:
        _remove(draft)
    return True


def read_claim(gen: GenPaths) -> Claim | None:
    """The claim, or None while nobody has claimed the generation; ``UnsafeRecord`` when
    something else than a plain file is in its place (``claim_or_planted`` reads that as a
    claim)."""
    try:
        fd, st = rundir.open_record_stat(plain(gen, CLAIM))
    except FileNotFoundError:
        return None
    try:
        data = os.read(fd, 64)
    finally:
        os.close(fd)
    return Claim(st.st_mtime, data.decode("ascii", "replace").strip() or None)


def claim_or_planted(gen: GenPaths) -> Claim | None:
    """``read_claim``, for a reader that must decide on it: a FIFO, directory or link in the
    claim's place (a worker's doing) is a claim of nobody we know (``PLANTED``) — the
    generation was claimed, and its worker has run."""
    try:
        return read_claim(gen)
    except rundir.UnsafeRecord:
        return Claim(os.lstat(plain(gen, CLAIM)).st_mtime, PLANTED)


def claimed_by_wrapper(gen: GenPaths) -> bool:
    """A wrapper has claimed the generation (its claim exists and is not the supervisor's):
    it started, whether or not it has written its pid yet."""
    claim = claim_or_planted(gen)
    return claim is not None and not claim.by_supervisor


def claim_owner(gen: GenPaths) -> str | None:
    """The claim's content: the wrapper's pid, or ``supervisor`` (None when unclaimed)."""
    claim = claim_or_planted(gen)
    return claim.owner if claim else None


def wrapper_pid(gen: GenPaths) -> int | None:
    claim = claim_or_planted(gen)
    return claim.pid if claim else None


def started_at(gen: GenPaths) -> float | None:
    """When the generation started: the claim's modification time (the wrapper restamps it)."""
    return _mtime(gen.claim)


# ----- heartbeat.jsonl --------------------------------------------------------------------

def heartbeat_started(gen: GenPaths) -> dict[str, Any] | None:
    """The launch heartbeat, once the wrapper has written it: ``{"pid": int | None,
    "pane_id": str | None, "node": str | None, "step": str | None}`` (a Slurm step's node, and
    its ``job.step`` id)."""
    try:
        first = rundir.read_record(gen.heartbeat, _LINE_LIMIT).partition(b"\n")
    except FileNotFoundError:
        return None
    if not first[1]:
        return None
    try:
        line = jsontext.loads(first[0])
    except ValueError:
        return None
    if not isinstance(line, dict) or line.get("event") != "started":
        return None
    return {"pid": _int(line.get("pid")), "pane_id": _str(line.get("pane_id")), "node": _str(line.get("node")),
            "step": _str(line.get("step"))}


def launch_heartbeat(gen: GenPaths) -> dict[str, Any] | None:
    """``heartbeat_started`` for a run in progress: None also when the generation's worker put
    something else in its place (a symlink, a directory — never read through). That is the
    worker's doing, no reason to stop the run (the supervisor stopped on it, the run left
    interrupted); its exit sidecar says how it ended all the same. ``resume`` and ``proof``
    report such a record."""
    try:
        return heartbeat_started(gen)
    except OSError:
        return None


# ----- exit, exit.json --------------------------------------------------------------------

@dataclass(frozen=True)
class ExitRecord:
    """How a generation ended: what exit.json holds."""

    code: int | None
    signal: str | None
    started_at: float | None
    ended_at: float | None
    pid: int | None
    reason: str | None = None  # set by the wrapper (cwd_missing) or by the supervisor

    def to_json(self) -> dict[str, Any]:
        out = {"code": self.code, "signal": self.signal, "started_at": self.started_at, "ended_at": self.ended_at,
               "pid": self.pid}
        if self.reason is not None:
            out["reason"] = self.reason
        return out

    @classmethod
    def from_json(cls, obj: Any) -> ExitRecord | None:
        """The record ``to_json`` gave; None for anything but a JSON object."""
        if not isinstance(obj, dict):
            return None
        return cls(_int(obj.get("code")), _str(obj.get("signal")), _num(obj.get("started_at")),
                   _num(obj.get("ended_at")), _int(obj.get("pid")), _str(obj.get("reason")))


def signal_name(code: int | None) -> str | None:
    if code is None or code <= 128 or code > 128 + 64:
        return None
    try:
        return _signal.Signals(code - 128).name
    except ValueError:
        return f"SIG{code - 128}"


# What a wrapper's own ``- <reason>`` sidecar may say: its task's cwd is missing, or it could
# not fork the worker's process (no process to be had: RLIMIT_NPROC, a full process table)
SIDECAR_REASONS = (None, "cwd_missing", "spawn_failed")
# The reason of a generation whose exit sidecar holds what no wrapper writes (garbled, or a
# symlink planted in its place): it ended, and how is not known. Never the sidecar's own text.
EXIT_GARBLED = "exit_garbled"
_SIDECAR = re.compile(rb"(?:(-?[0-9]{1,9})|- (cwd_missing|spawn_failed))\n")


def committed_by_wrapper(rec: ExitRecord) -> bool:
    """The record comes from the wrapper's sidecar, not from a supervisor's ``exit.json``."""
    return rec.reason in SIDECAR_REASONS


def read_sidecar(gen: GenPaths) -> tuple[int | None, str | None] | None:
    """``(code, reason)`` from a complete ``exit`` sidecar, else None; ``(None, EXIT_GARBLED)``
    from one holding what no wrapper writes, or a symlink (never followed)."""
    try:
        return _parse_sidecar(rundir.read_record(gen.exit_sidecar, _LINE_LIMIT))
    except FileNotFoundError:
        return None
    except rundir.UnsafeRecord:
        return None, EXIT_GARBLED


def _parse_sidecar(raw: bytes) -> tuple[int | None, str | None] | None:
    """What the wrapper writes: its status, or ``- cwd_missing``/``- spawn_failed`` (the worker never ran), one
    line; incomplete until the newline is there."""
    if not raw.endswith(b"\n"):
        return None
    m = _SIDECAR.fullmatch(raw)
    if m is None:
        return None, EXIT_GARBLED
    return (int(m.group(1)), None) if m.group(1) is not None else (None, m.group(2).decode())


def read_exit_record(gen: GenPaths) -> ExitRecord | None:
    """``exit.json``, or None until one is written."""
    try:
        return ExitRecord.from_json(rundir.read_json(gen.exit_record))
    except (FileNotFoundError, ValueError):
        return None


def ended_at(gen: GenPaths) -> tuple[float, bool] | None:
    """When the generation ended, and whether only the supervisor's record says so (a wrapper
    that vanished without its sidecar); None while it runs. One ``stat`` of the sidecar — a
    non-empty one has had the ``printf`` that writes it whole; exit.json is read only without one."""
    try:
        st = os.lstat(plain(gen, EXIT_SIDECAR))  # a symlink there is a garbled sidecar: ended
        if st.st_size > 0:
            return _worker_end(gen, st.st_mtime), False
    except (FileNotFoundError, NotADirectoryError):  # (a file in its directory's place: as rundir reads it)
        pass
    rec = read_exit_record(gen)
    return (rec.ended_at, True) if rec is not None and rec.ended_at is not None else None


def exit_facts(gen: GenPaths, *, pid: int | None = None, relayed: bool = True) -> ExitRecord | None:
    """How the generation ended, from its files: the exit sidecar with the claim's and the
    sidecar's times, else ``exit.json`` where a supervisor wrote one (a wrapper that vanished
    without a sidecar; runs recorded before exit records moved into the event log have both).
    None while the wrapper has not committed its exit. ``pid``, when the caller knows the
    wrapper's, saves reading it from the claim; ``relayed`` False, for a generation never
    written for a pane (so never run under the pty relay), saves looking for the relay's mark
    of its worker's end (``_worker_end``). The supervisor reads this once per task: five
    system calls when it knows both."""
    side: tuple[int | None, str | None] | None
    try:
        fd, st = rundir.open_record_stat(plain(gen, EXIT_SIDECAR))
    except FileNotFoundError:
        return read_exit_record(gen)
    except rundir.UnsafeRecord:  # planted in its place, or no file: the generation ended, how is not known
        ended, side = os.lstat(plain(gen, EXIT_SIDECAR)).st_mtime, (None, EXIT_GARBLED)
    else:
        try:
            ended = st.st_mtime
            side = _parse_sidecar(os.read(fd, _LINE_LIMIT))
        finally:
            os.close(fd)
    if side is None:
        return read_exit_record(gen)
    code, reason = side
    return ExitRecord(code, signal_name(code), _mtime(plain(gen, CLAIM)), _worker_end(gen, ended) if relayed else ended,
                      pid or wrapper_pid(gen), reason)


def _worker_end(gen: GenPaths, recorded: float) -> float:
    """When the worker ended: the sidecar's time ``recorded``, or the pty relay's earlier mark
    of its exit (``WORKER_ENDED``; a pane's worker in Zellij from 0.44)."""
    marked = _mtime(plain(gen, WORKER_ENDED))
    return min(recorded, marked) if marked is not None else recorded


def relayed_exit(gen: GenPaths) -> ExitRecord | None:
    """The worker's end as a Zellij pane's pty relay marked it having reaped it
    (``WORKER_ENDED``: its code, and its time), recorded as the wrapper would have, for a
    wrapper killed before it could; None with no such mark: no relay (tmux, headless), one
    killed before it reaped the worker, or a mark something else wrote (not a code)."""
    try:
        code = rundir.read_record(plain(gen, WORKER_ENDED), 16).strip()
        ended = os.lstat(plain(gen, WORKER_ENDED)).st_mtime
    except OSError:
        return None
    if not (code.isdigit() and len(code) <= 3):
        return None
    return record_missing_exit(gen, reason=None, code=int(code), signal=signal_name(int(code)), ended_at=ended)


def record_missing_exit(gen: GenPaths, *, reason: str | None, code: int | None, signal: str | None,
                        ended_at: float) -> ExitRecord:
    """The supervisor's record for a wrapper that is gone without committing its exit, written
    durably at once (rare: a wrapper killed from outside, a lost session). A full or read-only
    state dir loses only this copy: the outcome is also in the event log."""
    rec = ExitRecord(code, signal, started_at(gen), ended_at, wrapper_pid(gen), reason)
    try:
        rundir.write_json_atomic(gen.exit_record, rec.to_json())
    except OSError:
        pass
    return rec


# What a fold removes before anything else: the claim first (a reader that finds no claim
# takes the log's word for the generation), then the supervisor's records of it.
_FOLDED_FIRST = (CLAIM, CLAIM_DRAFT, EXIT_RECORD, KILL, HANGUP, EXECUTOR_KILLED)


def fold(gen: GenPaths, keep: Callable[[Path, set[str]], bool] | None = None) -> None:
    """Fold away an ended generation whose facts are durably in the run's event log (SPEC §7):
    its claim first — a reader that finds no claim takes the log's word for the generation —
    then its sidecar, records, the heartbeat when it holds only the wrapper's own lines, the
    output and executor logs and the artifacts directory when empty; the directory goes when nothing else is
    left in it (output, a heartbeat the worker wrote to, artifacts) — unless ``keep`` takes it,
    folded down to the wrapper's files (``SHELL_FILES``) and perhaps its empty ``artifacts/``,
    as a shell (``keep`` is given the names the directory held once the records went). Best
    effort: a file that cannot be removed stays, and readers still read it."""
    try:
        present = set(os.listdir(gen.dir))  # one listing, not an unlink of each name that may be there
    except OSError:
        present = set(_FOLDED_FIRST)
    for name in _FOLDED_FIRST:
        if name in present:
            _remove(f"{gen.dir}/{name}")
    # kept with its artifacts directory, empty, or without
    if keep is not None and keep(gen.dir, present.difference(_FOLDED_FIRST)):
        return
    try:
        os.rmdir(f"{gen.dir}/{ARTIFACTS}")
    except OSError:
        pass  # the worker's files
    _remove(f"{gen.dir}/{EXIT_SIDECAR}")
    if wrapper_heartbeat(f"{gen.dir}/{HEARTBEAT}"):
        _remove(f"{gen.dir}/{HEARTBEAT}")
    for log in (OUTPUT, STDERR, EXECUTOR_LOG):
        _remove_empty(f"{gen.dir}/{log}")
    try:
        os.rmdir(gen.dir)
    except OSError:
        pass  # something of the worker's is left in it


# What a headless wrapper writes besides its claim, by path: a shell's files (``records.shells``).
SHELL_FILES = (EXIT_SIDECAR, HEARTBEAT, OUTPUT, STDERR)


def wrapper_heartbeat(path: str) -> bool:
    """The heartbeat holds the wrapper's own lines only (or nothing)."""
    try:
        lines = rundir.read_record(path, _LINE_LIMIT + 1).splitlines()
    except OSError:
        return False
    return len(lines) <= 2 and all(_wrapper_line(line) for line in lines)


def heartbeat_says_exited(gen: GenPaths) -> bool:
    """The heartbeat ends with the wrapper's ``exited`` line, which it appends after its exit
    sidecar: a wrapper whose sidecar is missing went on to its end all the same — the state
    directory refused the sidecar (full), or a leftover removed it. (A worker can write that
    line too: read as such an end, it is an end not known, never a run to make again.)"""
    try:
        tail = rundir.read_record_tail(gen.heartbeat, _LINE_LIMIT)
    except (FileNotFoundError, rundir.UnsafeRecord):
        return False
    lines = tail.rstrip(b"\n").rsplit(b"\n", 1)
    return tail.endswith(b"\n") and lines[-1].startswith(b'{"event":"exited",')


def discard_unstarted(gen: GenPaths) -> bool:
    """Remove a generation that never ran: its wrapper (a pane's), a claim the supervisor
    took, an empty executor log and artifacts directory (and the mark of a pane's ``srun``
    killed while it waited), then the directory. False when anything else is left in it."""
    _remove(f"{gen.dir}/{WRAPPER}")
    _remove(f"{gen.dir}/{CLAIM_DRAFT}")
    _remove_empty(f"{gen.dir}/{EXECUTOR_LOG}")
    _remove(f"{gen.dir}/{EXECUTOR_KILLED}")
    for name in SHELL_FILES:  # a shell's, as it came (``records.shells``)
        _remove_empty(f"{gen.dir}/{name}")
    claim = read_claim(gen)
    if claim is not None and claim.by_supervisor:
        _remove(f"{gen.dir}/{CLAIM}")
    try:
        os.rmdir(f"{gen.dir}/{ARTIFACTS}")
    except OSError:
        pass
    try:
        os.rmdir(gen.dir)
    except OSError:
        return False
    return True


def _remove_empty(path: str) -> None:
    try:
        if os.stat(path).st_size == 0:
            _remove(path)
    except OSError:
        pass


def _wrapper_line(line: bytes) -> bool:
    return line.startswith((b'{"event":"started",', b'{"event":"exited",'))


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


# ----- kill -------------------------------------------------------------------------------

# ``kill``: why the generation is being ended (written when that is decided, before any
# signal), then, once a signal reached a process of the worker's own, a second line
# ``sent <wall time>``: the moment the outcome rule compares the worker's end with — and
# `` uncaught`` after it when no process it reached had a handler for it (a normal exit is
# then the worker's own; a run recorded before says nothing of it, and reads as caught).
_SENT = "sent "
_UNCAUGHT = "uncaught"


def write_kill_reason(gen: GenPaths, reason: str, *, sent_at: float | None = None, caught: bool = True,
                      stamped: float | None = None) -> None:
    """Record why the generation is being ended, and the moment its kill was sent. The first
    signal is what counts: a moment already recorded (an earlier supervisor's, a ``cancel``'s
    with no supervisor) is kept, with whether it was caught, unless ``sent_at`` is earlier —
    a resumed supervisor whose ladder reaches what is left of a worker (a child it forked)
    after a ``cancel``'s signal had ended the worker itself must not put its later moment in
    the place of the one that ended it (the worker's end then looked earlier than any kill:
    ``failed (SIGTERM)``). ``stamped``: the moment this caller recorded before its signal
    went (``stopping.end_now``), its own to replace — with what the signal came to
    (``sent_at``), or taken back when it reached nothing (None): another's moment recorded
    in its place meanwhile stays.

    A generation whose directory is gone takes no record: folded once its outcome was in the
    log (a resume that read a ``cancel``'s message collected it meanwhile), or removed by its
    worker (``rm -rf``; its end says the records went) — nothing is left to record it in.
    Raises OSError when the directory is there and refuses the write (a full state dir).

    The record is read and written back by one writer at a time (``_kill_record_held``): the
    supervisor and a ``cancel`` with no supervisor (``stopping.end_now``) write it from two
    processes, and one that wrote back what it had read before the other's write erased it."""
    with _kill_record_held(gen):
        recorded = kill_sent_at(gen)
        if recorded is not None and recorded != stamped and (sent_at is None or recorded < sent_at):
            sent_at, caught = recorded, kill_caught(gen) is not False
        sent = f"{_SENT}{sent_at!r}" + ("" if caught else f" {_UNCAUGHT}") + "\n" if sent_at is not None else ""
        try:
            rundir.write_atomic(gen.kill, reason + "\n" + sent)
        except FileNotFoundError:
            if gen.dir.is_dir():
                raise


KILL_RECORD_WAIT = 1.0  # seconds a kill record's writer waits for another, which holds it for a read and a write


@contextlib.contextmanager
def _kill_record_held(gen: GenPaths) -> Iterator[None]:
    """Hold the generation's kill record while it is read and written back: an ``flock`` on
    the generation's directory, so that nothing is added to it. A resumed supervisor read
    the record to write a cancel's reason into it, a ``cancel`` with no supervisor then
    recorded the moment its SIGTERM reached the worker, and the supervisor's write put the
    reason back with no moment: the worker's death by the cancel was ``failed (SIGTERM)``
    (a cancel of an interrupted run as its resume starts, headless and tmux, under load). A
    holder that does not let go within ``KILL_RECORD_WAIT`` (stopped midway: Ctrl-Z) is not
    waited for further, nor is a directory that cannot be locked (gone: the write says so; a
    file system without ``flock``): the record is then written unheld."""
    try:
        fd = os.open(gen.dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        yield
        return
    try:
        with contextlib.suppress(OSError):  # (not taken within the wait, or no flock: unheld)
            rundir.flock_within(fd, KILL_RECORD_WAIT, every=0.001)
        yield
    finally:
        os.close(fd)  # releases the lock


def _kill_lines(gen: GenPaths) -> list[str]:
    try:
        return rundir.read_record(gen.kill, _LINE_LIMIT).decode("utf-8", "replace").splitlines()
    except FileNotFoundError:
        return []


def kill_reason(gen: GenPaths) -> str | None:
    lines = _kill_lines(gen)
    return (lines[0].strip() or None) if lines else None


HANGUP_NEAR_END = 1.0  # seconds between a hang-up and a worker's end that make the end the hang-up's


def hung_up(gen: GenPaths, *, ended_at: float | None = None, before_it: bool = False) -> bool:
    """Its pane's terminal hung up (``_paneleader --hangup``) — with ``ended_at``, within
    ``HANGUP_NEAR_END`` of that end, on either side: a worker that died of the hang-up's EIO
    can end before its leader, woken by the same hang-up, has made the mark (both are file
    times of one clock); a pane closed well after its worker ended, or a worker that ignored
    the hang-up and failed well after it, was not ended by it. With ``before_it``, only a
    hang-up in the second before the end: the end came after the pane closed (a Slurm step's,
    whose close Slurm answers with a kill of the step)."""
    made = _mtime(plain(gen, HANGUP))
    if made is None or ended_at is None:
        return made is not None
    return (0.0 if before_it else -HANGUP_NEAR_END) <= ended_at - made <= HANGUP_NEAR_END


def executor_killed(gen: GenPaths) -> int | None:
    """The signal a pane's step's ``srun`` died of, as the pane's leader wrote it
    (``EXECUTOR_KILLED``); None when it did not die so (or nothing says)."""
    try:
        text = rundir.read_record(plain(gen, EXECUTOR_KILLED), _LINE_LIMIT).decode("ascii", "replace")
    except OSError:
        return None
    return int(text) if text.strip().isdigit() else None


def began_its_step(gen: GenPaths) -> bool:
    """A pane's Slurm step got as far as its ``srun``: the executor log is there, which the
    shell that starts ``srun`` opens first (``SlurmExecutor.prefix``). Not there: the pane
    closed before its step was even asked for."""
    return os.path.lexists(plain(gen, EXECUTOR_LOG))


def kill_sent_at(gen: GenPaths) -> float | None:
    """When the kill's first signal reached the worker, if it did."""
    words = _sent_words(gen)
    try:
        return float(words[0]) if words else None
    except ValueError:
        return None


def kill_caught(gen: GenPaths) -> bool | None:
    """Whether a process the kill's first signal reached had a handler for it (True for a run
    recorded before this was: it may have); None when no signal reached the worker."""
    words = _sent_words(gen)
    return None if not words else _UNCAUGHT not in words[1:]


def _sent_words(gen: GenPaths) -> list[str]:
    for line in _kill_lines(gen)[1:]:
        if line.startswith(_SENT):
            return line[len(_SENT):].split()
    return []


# ----- the renderers' reading -------------------------------------------------------------

@dataclass(frozen=True)
class GenInfo:
    """What a generation's own files say about it."""

    paths: GenPaths
    started_at: float | None
    ended_at: float | None
    exit_code: int | None
    signal: str | None
    pid: int | None
    done: bool
    heartbeat_seen: bool
    heartbeat_at: float | None

    @property
    def slot(self) -> int:
        return self.paths.slot

    @property
    def gen(self) -> int:
        return self.paths.gen


_T = TypeVar("_T")


def _unless_unreadable(read: Callable[[GenPaths], _T | None], gen: GenPaths) -> _T | None:
    try:
        return read(gen)
    except OSError:
        return None


def read_gen(paths: GenPaths, earlier: GenInfo | None = None) -> GenInfo:
    """The generation's facts from its files; absent or unreadable files give ``None``/``False``.
    ``earlier``, this generation's previous reading, saves reading again what never changes once
    seen: the claim time and the launch heartbeat."""
    claim_at = earlier.started_at if earlier else None
    if claim_at is None:
        claim_at = _mtime(paths.claim)
    heartbeat_at = _mtime(paths.heartbeat)
    seen, launch_pid = (True, earlier.pid) if earlier and earlier.heartbeat_seen else (False, None)
    if not seen and heartbeat_at is not None:
        launch = _unless_unreadable(heartbeat_started, paths)
        if launch is not None:
            seen, launch_pid = True, launch["pid"]
    record = _unless_unreadable(exit_facts, paths)
    if record is None:
        return GenInfo(paths, claim_at, None, None, None, launch_pid, False, seen, heartbeat_at)
    return GenInfo(paths, record.started_at or claim_at, record.ended_at, record.code, record.signal, record.pid,
                   True, seen, heartbeat_at)


class GenReader:
    """A slot's newest generation, for a renderer that asks many times a second, at a few
    stats per slot.

    A slot's listing is re-read only when its directory changed; a generation's claim time and
    launch heartbeat are read until seen (they never change after); a finished generation's
    facts are final and kept.
    """

    def __init__(self, run: rundir.RunPaths) -> None:
        self.run = run
        self._listing: dict[int, tuple[int, GenPaths | None]] = {}
        self._last: dict[int, GenInfo] = {}

    def newest(self, slot: int) -> GenInfo | None:
        try:
            mtime = os.stat(self.run.slot_dir(slot)).st_mtime_ns
        except OSError:
            return None
        cached = self._listing.get(slot)
        # Directory mtimes are coarse (a kernel tick): two generations created within one tick
        # leave the same mtime, so a listing is trusted only once its mtime is a second old.
        if cached is None or cached[0] != mtime or time.time() - mtime / 1e9 < 1.0:
            gens = self.run.generations(slot)
            cached = self._listing[slot] = (mtime, gens[-1] if gens else None)
        paths = cached[1]
        if paths is None:
            return None
        last = self._last.get(slot)
        if last is not None and last.paths != paths:
            last = None  # a newer generation: the slot has moved on
        if last is None or not last.done:
            last = self._last[slot] = read_gen(paths, last)
        return last


# Last, because rundir builds its RunPaths.gen from GenPaths: with the module (not its names)
# bound here, either module can be imported first.
from zellij_swarm.records import rundir  # noqa: E402
