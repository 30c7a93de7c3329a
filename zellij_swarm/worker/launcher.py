"""The supervisor's end of the launcher (``_launcher``): submit wrappers, read what became
of them. Its file descriptor goes into the supervisor's selector like any other event.

The launcher can die under us (the OOM killer, a worker that kills it): its reply pipe then
reads end-of-file, which sets ``lost``. The caller must stop selecting on it at once (an
fd at EOF is always readable) and follow what it had started some other way."""

from __future__ import annotations

import os
import select
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

# A process's own peak RSS, as the launcher reads its own: the supervisor reads its own so too
from zellij_swarm.worker._launcher import peak_rss_kib as peak_rss_kib

SCRIPT = str(Path(__file__).with_name("_launcher.py"))  # what a launcher runs: in its command line
ANSWER_TIMEOUT = 5.0  # seconds a launcher may take to say whether it started a wrapper
CLOSE_TIMEOUT = 3.0  # seconds an idle launcher may take to exit once told to


def _reap(pid: int, *, block: bool) -> bool:
    """Reap the launcher; True once it is gone."""
    try:
        done, _ = os.waitpid(pid, 0 if block else os.WNOHANG)
    except ChildProcessError:
        return True
    return done != 0


@dataclass(frozen=True)
class Started:
    token: str
    pid: int


@dataclass(frozen=True)
class NotStarted:
    token: str
    message: str


@dataclass(frozen=True)
class Ended:
    pid: int
    status: int  # as from waitpid


@dataclass(frozen=True)
class Orphaned:
    """A started wrapper died of a signal (told before its ``Ended``), its worker ``worker``
    running on, now the launcher's child."""

    pid: int
    worker: int


@dataclass(frozen=True)
class WorkerEnded:
    """The worker an ``Orphaned`` named ended: its exact wait status."""

    worker: int
    status: int


Reply = Started | NotStarted | Ended | Orphaned | WorkerEnded


class Launcher:
    def __init__(self, env: Mapping[str, str]) -> None:
        req_r, self._req_w = os.pipe2(os.O_CLOEXEC)
        self._rep_r, rep_w = os.pipe2(os.O_CLOEXEC)
        actions = [(os.POSIX_SPAWN_DUP2, req_r, 0), (os.POSIX_SPAWN_DUP2, rep_w, 1),
                   (os.POSIX_SPAWN_OPEN, 2, "/dev/null", os.O_WRONLY, 0)]
        # Its own session: a Ctrl-C for the supervisor must not reach it or its wrappers.
        self.pid = os.posix_spawn(sys.executable, [sys.executable, "-I", "-S", SCRIPT], dict(env),
                                  file_actions=actions, setsid=True,
                                  setsigdef=frozenset(signal.valid_signals()) - {signal.SIGKILL, signal.SIGSTOP})
        os.close(req_r)
        os.close(rep_w)
        os.set_blocking(self._rep_r, False)
        # The wrappers' environment goes down the pipe, not through the launcher's own: the
        # interpreter it runs in adds LC_CTYPE to its own under the C locale (PEP 538).
        self._write(b"E\0%d\0" % len(env) + b"".join(f"{k}={v}\0".encode("utf-8", "surrogateescape")
                                                      for k, v in env.items()))
        self._partial = b""
        self.lost = False  # its reply pipe reached end-of-file: the launcher is gone
        self.submitted = self.started = 0  # wrappers asked for, and reported started
        self.killed = False  # by us, for not answering
        self.usage: dict[str, float] | None = None  # its own CPU and peak RSS, told as it exits
        self.adopted = 0  # its children that are no wrapper, as it last said (what workers left)
        self.ping_unanswered = False

    def fileno(self) -> int:
        return self._rep_r

    def submit(self, requests: list[tuple[str, str, tuple[str, ...]]]) -> None:
        """Queue wrappers to start: (token, generation directory, argv) — the directory of a
        local headless wrapper, where the launcher records its worker's end should the wrapper
        be killed with no supervisor left to tell; empty for any other. A launcher that died
        takes nothing; its loss shows on the reply pipe."""
        if self.lost:
            return
        self.submitted += len(requests)
        self._write("".join(f"S\0{token}\0{directory}\0{len(argv)}\0" + "\0".join(argv) + "\0"  # (argv: never empty)
                            for token, directory, argv in requests).encode("utf-8", "surrogateescape"))

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._req_w, view):]
        except BrokenPipeError:
            pass  # it died; ``read`` reports that through ``lost``

    def ping(self) -> None:
        """Ask the launcher to answer (``ping_unanswered`` until it does)."""
        if not self.lost:
            self.ping_unanswered = True
            self._write(b"?\0")

    def read(self) -> list[Reply]:
        chunks = [self._partial]
        while True:
            try:
                chunk = os.read(self._rep_r, 65536)
            except BlockingIOError:
                break
            if not chunk:
                self.lost = True
                break
            chunks.append(chunk)
        data = b"".join(chunks)
        *lines, self._partial = data.split(b"\n")
        out: list[Reply] = []
        for line in lines:
            kind, _, rest = line.decode("utf-8", "replace").partition(" ")
            if kind == "S":
                token, pid = rest.split(" ")
                self.started += 1
                out.append(Started(token, int(pid)))
            elif kind == "F":  # F TOKEN ERRNO STRERROR: the message is the error's text
                token, _, failure = rest.partition(" ")
                out.append(NotStarted(token, failure.partition(" ")[2] or failure))
            elif kind == "P":
                self.ping_unanswered = False
            elif kind == "X":
                pid, status = rest.split(" ")
                out.append(Ended(int(pid), int(status)))
            elif kind == "A":
                pid, worker = rest.split(" ")
                out.append(Orphaned(int(pid), int(worker)))
            elif kind == "O":
                worker, status = rest.split(" ")
                out.append(WorkerEnded(int(worker), int(status)))
            elif kind == "L":
                self.adopted = int(rest)
            elif kind == "U":
                cpu, rss = rest.split(" ")
                self.usage = {"cpu_s": float(cpu), "peak_rss_mb": round(int(rss) / 1024, 1)}
        return out

    def close(self, *, wait: bool) -> None:
        """Stop taking requests; the launcher exits once its wrappers have all ended — at
        once when none runs (``wait``: reaped here, its last replies read for its ``usage``,
        and killed if it does not exit within a few seconds, e.g. stopped), later when the
        supervisor detaches from live ones. Closing again does nothing."""
        if self._req_w >= 0:
            os.close(self._req_w)
            self._req_w = -1
        if not wait or self._rep_r < 0:
            self._close_pipes()
            _reap(self.pid, block=False)
            return
        deadline = time.monotonic() + CLOSE_TIMEOUT
        while not self.lost and (left := deadline - time.monotonic()) > 0:  # to its end of file
            if select.select([self._rep_r], [], [], left)[0]:
                self.read()
        if not self.lost:
            self.kill()  # stopped or stuck
        self._close_pipes()
        _reap(self.pid, block=True)

    def kill(self) -> None:
        """End a launcher that stopped answering (stopped, or stuck); its reply pipe then
        reads end-of-file and the supervisor takes over its wrappers."""
        self.killed = True
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def _close_pipes(self) -> None:
        for fd in (self._req_w, self._rep_r):
            if fd >= 0:
                os.close(fd)
        self._req_w = self._rep_r = -1

    def end_status(self) -> str:
        """Reap a launcher that was ``lost`` and say how it ended ("killed by SIGKILL")."""
        self._close_pipes()
        try:
            _, status = os.waitpid(self.pid, 0)
        except ChildProcessError:
            return "ended"
        if self.killed:
            return f"did not answer for {ANSWER_TIMEOUT:g}s and was killed"
        if os.WIFSIGNALED(status):
            return f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
        return f"exited with status {os.waitstatus_to_exitcode(status)}"
