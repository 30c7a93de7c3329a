"""The run lock: a supervisor holds a write lock on ``<run>/lock`` while it is alive.

The lock file also holds the owner's pid, so ``resume`` and ``cancel`` can name it. The
kernel drops the lock when the process dies, however it dies, so a stale pid in the file
never blocks anyone.

Only supervisors take the lock. Readers (``status``, ``ls``, ``add``, a resuming
supervisor's own check) ask the kernel who holds it with ``F_OFD_GETLK``, which takes
nothing: a reader that took even a shared lock for a moment would make a supervisor's
non-blocking ``acquire`` fail in that moment (it did: ``resume`` failed while ``status``
ran). Open-file-description locks (Linux ≥ 3.15) are used rather than ``flock`` because
only they can be queried; like ``flock`` they belong to the open file, not the process.

**Across hosts** (a supervisor in a Slurm batch job, ``submit``; its records on a shared
filesystem) the kernel lock says nothing: it is this host's. So the holder also keeps
``alive.json`` — its host, pid, Slurm job and the wall-clock time — and rewrites it every
``STAMP_INTERVAL`` from a thread of its own (the loop may wait an hour for its next event);
it removes it when it lets go of the lock. Another host judges the run supervised while that
stamp is younger than ``STAMP_STALE``; this host asks the kernel, as before. A supervisor that
was killed leaves its stamp, which goes stale. The one exception to "a fresh stamp is a
supervisor": the stamp of the same Slurm job, left by its previous run before Slurm requeued
it — Slurm never runs two incarnations of one job at once.

**A lock that outlives its supervisor, for a moment.** A process the supervisor starts
(``posix_spawn``, ``subprocess``) is a copy of it until its ``exec``, and the copy holds the
lock's open file — ``O_CLOEXEC`` closes it only at the ``exec``. A supervisor killed in that
moment leaves the lock held after it is gone and reaped: measured, 9 kills in 300 of a process
that spawned in a loop. So a lock held under a pid that is no longer running (or a zombie)
is no supervisor: ``holder`` says nobody, and ``acquire`` waits up to ``HANDOVER_WAIT`` for the
copy to let go (its ``exec`` is milliseconds away) before it calls the run busy. The pid is
read in this host's pid namespace, as the kernel lock is this host's.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import struct
import threading
import time
from dataclasses import dataclass

from zellij_swarm import exc, jsontext, pid_end
from zellij_swarm.records import rundir
from zellij_swarm.records.rundir import RunPaths

STAMP_INTERVAL = 3.0  # seconds between two rewrites of the liveness stamp
STAMP_STALE = 20.0  # seconds after which a stamp no longer says a supervisor lives (clocks of two hosts differ)
HANDOVER_WAIT = 5.0  # seconds ``acquire`` waits for a gone supervisor's child to let go of the lock
_HANDOVER_LOOK = 0.01  # seconds between two tries meanwhile

# struct flock {short l_type; short l_whence; off_t l_start; off_t l_len; pid_t l_pid;},
# padded to its C size; l_start = l_len = 0 covers the whole file.
_FLOCK = "hhqqi4x"


def _whole_file(lock_type: int) -> bytes:
    return struct.pack(_FLOCK, lock_type, os.SEEK_SET, 0, 0, 0)


@dataclass(frozen=True)
class Stamp:
    """What ``alive.json`` says: who supervises the run, where, and when it last said so."""

    host: str
    pid: int
    job: str | None  # the Slurm job the supervisor runs in (``submit``), else None
    at: float  # wall-clock seconds

    def fresh(self, now: float | None = None) -> bool:
        return (time.time() if now is None else now) - self.at < STAMP_STALE

    @property
    def here(self) -> bool:
        return self.host == _HOST

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}" + (f" (Slurm job {self.job})" if self.job else "")


_HOST = os.uname().nodename  # gethostname's answer, without the socket module's memory


def _own_job() -> str | None:
    return os.environ.get("SLURM_JOB_ID") or None


class RunLock:
    def __init__(self, run: RunPaths) -> None:
        self._run = run
        self._fd: int | None = None
        self._stop = threading.Event()
        self._stamper: threading.Thread | None = None

    def acquire(self) -> None:
        fd = os.open(self._run.lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        deadline = time.monotonic() + HANDOVER_WAIT
        while True:
            try:
                fcntl.fcntl(fd, fcntl.F_OFD_SETLK, _whole_file(fcntl.F_WRLCK))
                break
            except OSError:  # EAGAIN or EACCES: held by another supervisor, or a gone one's child
                pid = holder(self._run)
                if pid is None and time.monotonic() < deadline:
                    time.sleep(_HANDOVER_LOOK)
                    continue
                gone = _pid_in(fd)
                os.close(fd)
                if pid is None:
                    raise exc.RunBusy(f"run {self._run.run_id}: its lock is still held by a process its gone "
                                      f"supervisor (pid {gone}) started, {HANDOVER_WAIT:.0f}s after "
                                      "it ended; try again when that process has ended") from None
                who = f"pid {pid}" if pid > 0 else "another process"
                raise exc.RunBusy(f"run {self._run.run_id} is being supervised by {who}") from None
        if (other := elsewhere(self._run)) is not None:
            os.close(fd)
            raise exc.RunBusy(f"run {self._run.run_id} is being supervised by {other.describe()}: its liveness "
                              f"stamp is {time.time() - other.at:.0f}s old")
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        self._stamp()  # before acquire returns: the run is seen supervised from everywhere at once
        self._stamper = threading.Thread(target=self._keep_stamping, name="zellij-swarm alive", daemon=True)
        self._stamper.start()

    def release(self) -> None:
        if self._fd is not None:
            self._stop.set()
            if self._stamper is not None:
                self._stamper.join()
            with contextlib.suppress(OSError):
                self._run.alive.unlink()  # before the lock goes: never a moment with neither
            os.close(self._fd)
            self._fd = None

    def _stamp(self) -> None:
        stamp = {"host": _HOST, "pid": os.getpid(), "job": _own_job(), "at": time.time()}
        rundir.write_atomic(self._run.alive, json.dumps(stamp) + "\n")

    def _keep_stamping(self) -> None:
        """Rewrite the stamp every ``STAMP_INTERVAL`` until released. A write that fails (a
        full disk) is tried again next time: the stamp goes stale only if it keeps failing."""
        while not self._stop.wait(STAMP_INTERVAL):
            with contextlib.suppress(OSError):
                self._stamp()


def stamp(run: RunPaths) -> Stamp | None:
    """The run's liveness stamp as its supervisor last wrote it (None: none, or unreadable)."""
    try:
        data = jsontext.loads(rundir.read_record(run.alive, 4096))
        return Stamp(str(data["host"]), int(data["pid"]), str(data["job"]) if data.get("job") else None,
                     float(data["at"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def elsewhere(run: RunPaths) -> Stamp | None:
    """The supervisor of ``run`` on another host, judged by its stamp: one younger than
    ``STAMP_STALE``; None when there is none (this host's is the kernel lock's to say), or
    the stamp is our own Slurm job's, left by its run before a requeue."""
    found = stamp(run)
    if found is None or found.here or not found.fresh():
        return None
    return None if found.job is not None and found.job == _own_job() else found


def holder(run: RunPaths) -> int | None:
    """The pid of the live supervisor of ``run`` (-1 while it is still writing its pid, or
    when it runs on another host: its pid means nothing here), or None when nobody holds the
    lock here and no other host's stamp is fresh, or the lock is held under a pid that has
    ended (a child of a killed supervisor, before its ``exec``). Takes no lock itself."""
    if elsewhere(run) is not None:
        return -1
    try:
        fd = os.open(run.lock, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        answer = fcntl.fcntl(fd, fcntl.F_OFD_GETLK, _whole_file(fcntl.F_RDLCK))
        if struct.unpack(_FLOCK, answer)[0] == fcntl.F_UNLCK:
            return None
        pid = _pid_in(fd)
    finally:
        os.close(fd)
    if pid is None:
        return -1
    return None if pid_end.ended(pid, None) else pid


def _pid_in(fd: int) -> int | None:
    """The pid the lock file names; None while its holder has not written it yet."""
    text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    return int(text) if text.isdigit() else None
