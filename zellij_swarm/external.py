"""The one way an external command runs — a multiplexer's, or Slurm's for the Slurm executor:
with a timeout, and with every failure turned into a ``BackendError`` whose code is the SPEC §7
vocabulary (``multiplexer_missing``, ``pane_call_timeout``, ``pane_call_failed``; for Slurm
``executor_missing``, ``executor_call_timeout``, ``executor_call_failed``) and which carries the
command's stderr."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from zellij_swarm import pid_end
from zellij_swarm.exc import BackendError


@dataclass(frozen=True)
class CmdResult:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def lines(self) -> list[str]:
        return [ln for ln in self.stdout.splitlines() if ln]


@dataclass(frozen=True)
class Faults:
    """The codes a command's failures get, by kind of command."""

    missing: str
    timeout: str
    failed: str


MULTIPLEXER = Faults("multiplexer_missing", "pane_call_timeout", "pane_call_failed")
EXECUTOR = Faults("executor_missing", "executor_call_timeout", "executor_call_failed")  # srun, squeue, scancel…


# How often a command that has not answered yet is asked ``give_up`` (``run``).
GIVE_UP_EVERY = 0.5
# A multiplexer's server that once gave no answer in a call's time is not asked again, but
# whether its session lives is: that decides what became of its panes' workers. That probe
# waits this long (seconds) on such a server, not a whole call's time.
PROBE_TIMEOUT = 2.0


class StoppedServer:
    """A ``give_up`` for a call to a multiplexer's server (``run``): the call's error once the
    server has been stopped (SIGSTOP: ``pid_end.stopped``) for ``PROBE_TIMEOUT``. No answer
    can come before someone continues it, and a Ctrl-C would otherwise wait out the whole
    timeout of each call it makes. A shorter stop (a debugger's, a moment's) is waited
    through, as any slow answer is. ``pid``: the server's, when known (None: it is not
    watched)."""

    def __init__(self, argv: Sequence[str], server: str, pid: Callable[[], int | None]) -> None:
        self.argv = argv
        self.server = server
        self.pid = pid
        self.since: float | None = None  # when the server was first seen stopped, since it last ran

    def __call__(self) -> BackendError | None:
        pid = self.pid()
        if pid is None or not pid_end.stopped(pid):
            self.since = None
            return None
        now = time.monotonic()
        if self.since is None:
            self.since = now
        if now - self.since < PROBE_TIMEOUT:
            return None
        return BackendError(MULTIPLEXER.timeout, f"{what(self.argv)}: no answer: {self.server} (pid {pid}) is stopped")


def probe_timeout(unresponsive: BackendError | None, timeout: float) -> float | None:
    """How long a probe of whether a session lives waits: ``PROBE_TIMEOUT`` on a server that
    once gave no answer (``unresponsive``, the call that did not get one), else as long as
    any call (None)."""
    return min(PROBE_TIMEOUT, timeout) if unresponsive is not None else None


def run(argv: Sequence[str], *, timeout: float, env: Mapping[str, str] | None = None, check: bool = True,
        faults: Faults = MULTIPLEXER, give_up: Callable[[], BackendError | None] | None = None,
        exact: bool = False) -> CmdResult:
    """Run ``argv``; raise ``BackendError`` (with a code of ``faults``) when it cannot start,
    times out, or (``check``) fails. ``give_up``, asked every ``GIVE_UP_EVERY`` seconds while
    the command has not answered, may end the wait sooner: the error it returns is raised,
    the command killed — for a command whose answer can no longer come (the real Zellij's CLI,
    its server killed in the middle of a call, spins on the closed socket until it is killed).
    With ``exact``, stdout is every byte as it came, as file names are (``os.fsdecode``: no
    newline translated, a byte that is not UTF-8 kept as it is) — for file names a command
    lists (``git status -z``); else it is text, ``\r`` read as a newline."""
    command = what(argv)
    try:
        proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=not exact,
                                errors=None if exact else "replace", env=dict(env) if env is not None else None,
                                stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise BackendError(faults.missing, f"{argv[0]}: not found on PATH") from None
    deadline = time.monotonic() + timeout
    with proc:
        try:
            stdout, stderr = _answer(proc, deadline, give_up)
            if isinstance(stdout, bytes):
                stdout, stderr = os.fsdecode(stdout), _text(stderr)
        except subprocess.TimeoutExpired as e:
            _kill(proc)
            err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
            said = what_it_said(err)
            raise BackendError(faults.timeout, f"{command}: no answer within {timeout:g}s"
                               + (f" (it said: {said})" if said else ""), stderr=err) from None
        except BaseException:  # given up on (``give_up``'s error), or the caller was interrupted
            _kill(proc)
            raise
    result = CmdResult(tuple(argv), proc.returncode, stdout, stderr)
    if check and proc.returncode != 0:
        first = what_it_said(stderr) or f"exit status {proc.returncode}"
        first = first.removeprefix(f"{os.path.basename(argv[0])}: ")  # said once, by us
        raise BackendError(faults.failed, f"{command}: {first}", stderr=stderr, stdout=stdout)
    return result


def what_it_said(stderr: str) -> str:
    """The line of a command's stderr that says what went wrong: its first — but the last of
    a Python traceback (a script that crashed: its first line, "Traceback (most recent call
    last):", says nothing) — with the next, when the first ends with a colon that announces it
    (zellij: "the IPC socket path is too long (111 bytes, max 107):", the path on the next).
    Empty when it said nothing."""
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    if lines[0].startswith("Traceback (most recent call last)"):
        return lines[-1]
    return f"{lines[0]} {lines[1]}" if lines[0].endswith(":") and len(lines) > 1 else lines[0]


def _answer(proc: subprocess.Popen[Any], deadline: float,
            give_up: Callable[[], BackendError | None] | None) -> tuple[Any, Any]:
    """The command's stdout and stderr once it has ended; ``TimeoutExpired`` at the
    deadline; what ``give_up`` returns, when it returns something, raised."""
    while True:
        left = deadline - time.monotonic()
        try:
            return proc.communicate(timeout=max(0.0, min(left, GIVE_UP_EVERY) if give_up else left))
        except subprocess.TimeoutExpired:
            if give_up is None or time.monotonic() >= deadline:
                raise
            why = give_up()
            if why is not None:
                raise why from None


def _text(data: str | bytes) -> str:
    """A command's stderr as text (universal newlines, undecodable bytes replaced)."""
    if isinstance(data, str):
        return data
    return data.decode(errors="replace").replace("\r\n", "\n").replace("\r", "\n")


def _kill(proc: subprocess.Popen[Any]) -> None:
    """Kill the command and reap it — without reading its pipes to their end, which a
    process it started may hold open (the pipes are closed as ``run``'s ``with`` ends)."""
    proc.kill()
    proc.wait()


def what(argv: Sequence[str]) -> str:
    """A command as messages name it: its program and subcommand (``zellij action list-panes``)."""
    return f"{argv[0]} {_subcommand(argv)}".strip()


def _subcommand(argv: Sequence[str]) -> str:
    """The subcommand, for messages: the first word that is not an option or an option's
    value, with the action it names for ``zellij action X`` ("action rename-pane")."""
    words: list[str] = []
    skip = False
    for word in argv[1:]:
        if word == "--":
            break
        if skip:
            skip = False
        elif word in ("-S", "-L", "-f", "--session", "-s"):
            skip = True
        elif not word.startswith("-"):
            words.append(word)
            if word != "action" or len(words) == 2:
                break
    return " ".join(words)
