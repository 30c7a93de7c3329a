"""The one way zellij-swarm talks to tmux: the tmux backend, ``attach``, ``prune``, ``doctor``
and the tests' private servers all go through ``TmuxClient``, and every tmux answer is read
here (``WindowRow``, ``PaneRow``, ``TmuxVersion``), not parsed again by each caller.

Two roads, one per kind of call:

- **libtmux** (``TmuxClient.call`` and what is built on it: ``windows``, ``panes``,
  ``has_session``, ``version``): discovery — the sessions, windows and panes there are, and
  which run a window belongs to (its ``@zsw_run`` option, ``names.RUN_OPTION``) — and the one
  command at a time that ``attach`` (select, switch) and ``prune`` (kill) send. libtmux is
  imported only when one of these is called: a command that never talks to
  tmux (``status``, ``logs``, a headless run) never imports it.
  libtmux 0.62 has no timeout of its own (``libtmux.common.tmux_cmd`` waits on
  ``Popen.communicate()`` with none), so each call runs under a deadline (``_bounded``): in a
  thread of its own, joined for ``timeout`` seconds; when the deadline passes, the tmux
  clients the call started are killed and it raises ``BackendError("pane_call_timeout")``, as
  ``external.run`` does. A server that once did not answer is not asked again.
- **external.run** (``TmuxClient.chain``): the backend's hot path. A batch of panes — a
  ``split-window`` and a ``select-layout`` per pane, their titles, a window's options — is one
  tmux invocation per window, its commands chained with ``;``. libtmux runs one tmux process
  per command and cannot batch: 32 panes would be about a hundred processes instead of three.

The version: tmux 3.3 is the tested one (``TESTED``, the machines' Debian package). What the
backend needs of older ones is said here (``REMAIN_ON_EXIT_FORMAT_SINCE``, ``WORKS_SINCE``),
and a run checks it once (``TmuxBackend.open``).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from zellij_swarm import external, names, pid_end, quoting
from zellij_swarm.exc import BackendError

# What one tmux invocation may send its server: tmux packs a command's arguments into one
# message of at most 16 KiB (MAX_IMSGSIZE), less its headers — 16,364 bytes measured with
# tmux 3.3 — and refuses a longer one whole ("command too long"). With room to spare.
MESSAGE_LIMIT = 16_000

if TYPE_CHECKING:
    import libtmux

CALL_TIMEOUT = 10.0
TESTED = (3, 3)  # the tmux the tests run against (Debian's 3.3a)
# 3.2 and older have no ``remain-on-exit-format``: a dead pane gets tmux's fixed "Pane is dead"
# line, which scrolls a renderer's first line (the board's counters) out of sight.
REMAIN_ON_EXIT_FORMAT_SINCE = (3, 3)
DEAD_SIGNAL_SINCE = (3, 3)  # ``#{pane_dead_signal}``
QUIET_SINCE = (3, 2)  # below it a run warns, once: untested
TMUX_COMMAND_SINCE = (3, 2)  # ``run-shell -C``: a tmux command, its formats expanded
# Pane options (``set-option -p``) came with 3.0: every title (``@zsw_title``) is one.
WORKS_SINCE = (3, 0)

T = TypeVar("T")


@functools.cache
def _require_libtmux() -> None:
    """Raise ``multiplexer_missing`` when this interpreter cannot import libtmux, a package
    zellij-swarm declares: a broken install (a venv made by hand, another Python) is told in
    one line that names the interpreter, not as an internal error at the first tmux call."""
    try:
        import libtmux  # noqa: F401  # (imported where it is used; here only whether it can be)
    except ImportError as e:
        raise BackendError("multiplexer_missing",
                           f"tmux: the Python package libtmux cannot be imported by {sys.executable} ({e}); "
                           "install zellij-swarm with its dependencies (scripts/setup does)") from None


@dataclass(frozen=True)
class TmuxVersion:
    text: str  # as ``tmux -V`` says it, without "tmux ": "3.3a", "next-3.4", "master"
    number: tuple[int, int] | None  # None: a build that names no version (master)

    @property
    def tested(self) -> bool:
        return self.number is not None and self.number[:2] == TESTED

    @property
    def too_old(self) -> bool:
        return self.number is not None and self.number < WORKS_SINCE

    @property
    def untested_old(self) -> bool:
        """Old enough to warn (below ``QUIET_SINCE``), not too old to work."""
        return self.number is not None and WORKS_SINCE <= self.number < QUIET_SINCE

    @property
    def has_remain_on_exit_format(self) -> bool:
        return self.number is None or self.number >= REMAIN_ON_EXIT_FORMAT_SINCE

    @property
    def runs_tmux_commands(self) -> bool:
        """``run-shell -C`` (tmux 3.2): a tmux command whose formats are expanded as it runs."""
        return self.number is None or self.number >= TMUX_COMMAND_SINCE

    @property
    def has_dead_signal(self) -> bool:
        """``#{pane_dead_signal}`` (tmux 3.3): a dead pane's signal; before, a pane whose first
        process died of one says nothing of how it ended."""
        return self.number is None or self.number >= DEAD_SIGNAL_SINCE


def parse_version(text: str) -> TmuxVersion:
    """``3.3a``, ``next-3.4``, ``3.2-rc``, ``master``: the first ``N.M`` in it."""
    m = re.search(r"(\d+)\.(\d+)", text)
    return TmuxVersion(text, (int(m.group(1)), int(m.group(2))) if m else None)


@dataclass(frozen=True)
class WindowRow:
    session_id: str
    session_name: str
    id: str
    run: str  # its ``@zsw_run``; "" for a window no run marked (an older run's, or not ours)
    name: str


@dataclass(frozen=True)
class PaneRow:
    id: str
    window_id: str
    run: str  # its window's ``@zsw_run``
    short: str  # ``@zsw_short``: set on the board's pane only
    window_name: str
    title: str  # ``@zsw_title``


# Tab-separated, the free text last: tmux escapes a tab in session and window names, and a
# title is made printable before it is set (``tmux.title_text``).
_WINDOW_FORMAT = "\t".join(["#{session_id}", "#{session_name}", "#{window_id}", f"#{{{names.RUN_OPTION}}}",
                            "#{window_name}"])
_PANE_FORMAT = "\t".join(["#{pane_id}", "#{window_id}", f"#{{{names.RUN_OPTION}}}", "#{@zsw_short}",
                          "#{window_name}", "#{@zsw_title}"])


def default_socket(env: Mapping[str, str]) -> str:
    """The socket tmux talks to when given none, as tmux picks it: the server of the session
    ``env`` is in (``$TMUX``), else ``default`` in ``$TMUX_TMPDIR`` (or ``/tmp``)."""
    inside = env.get("TMUX", "").split(",")[0]
    if inside:
        return inside
    return os.path.join(os.path.realpath(env.get("TMUX_TMPDIR") or "/tmp"), f"tmux-{os.getuid()}", "default")


def _server_of(env: Mapping[str, str], socket_path: str) -> int | None:
    """The pid of the server at ``socket_path`` when ``$TMUX`` (``SOCKET,PID,SESSION``, set in
    tmux's panes) names it; None otherwise (learnt at the backend's start)."""
    socket_path_, _, rest = env.get("TMUX", "").partition(",")
    pid = rest.partition(",")[0]
    return int(pid) if socket_path_ and socket_path_ == socket_path and pid.isdigit() else None


class TmuxClient:
    """One tmux server: the one at ``socket``, or (None) the one tmux would pick in ``env``."""

    def __init__(self, env: Mapping[str, str], socket: str | None = None, *, timeout: float = CALL_TIMEOUT) -> None:
        self.env = dict(env)
        self.socket = socket
        self.timeout = timeout
        self.binary = shutil.which("tmux", path=self.env.get("PATH"))
        self.unresponsive: BackendError | None = None  # the call that timed out, once one did
        self.server_pid = _server_of(self.env, self.socket_path)  # once known: a stopped one is given up on
        self._server: libtmux.Server | None = None

    @property
    def socket_path(self) -> str:
        return self.socket or default_socket(self.env)

    def attach_argv(self, session_id: str) -> list[str]:
        """``tmux attach`` to a session by its id (a name may hold what a target reads as
        ``session:window.pane``; an id never does): ``exec``'d, it is the user's terminal."""
        return ["tmux", *(["-S", self.socket] if self.socket else []), "attach", "-t", session_id]

    # ----- the hot path: one invocation, chained ------------------------------------------

    def chain(self, commands: Sequence[Sequence[str]], *, check: bool = True) -> external.CmdResult:
        """Run tmux commands in one invocation, separated by ``;`` — and only by ours: every
        argument is encoded so that tmux's parser reads it back unchanged. A chain longer
        than ``MESSAGE_LIMIT`` (``message_size``) is refused by tmux ("command too long"):
        the caller cuts it."""
        if self.unresponsive is not None:  # one timeout is enough: never wait on it again
            raise self.unresponsive
        argv = ["tmux"] + ([f"-S{self.socket}"] if self.socket else [])
        for i, command in enumerate(commands):
            argv += ([";"] if i else []) + [quoting.tmux_arg(a) for a in command]
        try:
            return external.run(argv, timeout=self.timeout, env=self.env, check=check, give_up=self._stopped(argv))
        except BackendError as e:
            if e.code == "pane_call_timeout":
                # A server that does not answer (stopped, stuck) would cost every later call
                # its whole timeout — a run's end or a Ctrl-C would take minutes.
                self.unresponsive = e
            raise

    @staticmethod
    def message_size(commands: Sequence[Sequence[str]]) -> int:
        """The bytes ``chain`` sends tmux for ``commands``: each argument as encoded, with its
        NUL, and the ``;`` between two commands."""
        return sum(len(quoting.tmux_arg(a).encode("utf-8", "surrogateescape")) + 1 for c in commands for a in c) \
            + 2 * max(0, len(commands) - 1)

    # ----- libtmux: one command at a time -------------------------------------------------

    def call(self, *args: str, check: bool = True) -> external.CmdResult:
        """One tmux command, each argument encoded so that tmux reads it back unchanged."""
        return self.argv([quoting.tmux_arg(a) for a in args], check=check)

    def argv(self, words: Sequence[str], *, check: bool = True) -> external.CmdResult:
        """tmux run with ``words`` as they are (a ``;`` word separates commands), through
        libtmux, under the deadline; a failure (``check``) is a ``BackendError`` with tmux's
        first line, as ``external.run`` gives it."""
        encoded = list(words)
        what = f"tmux {encoded[0]}" if encoded else "tmux"
        proc = self._bounded(what, lambda: self.server().cmd(*encoded))
        # as tmux printed them: libtmux gives lines, its trailing empty ones dropped
        stdout, stderr = "".join(f"{ln}\n" for ln in proc.stdout), "".join(f"{ln}\n" for ln in proc.stderr)
        if encoded[:1] == ["has-session"] and proc.returncode != 0:
            stdout = ""  # libtmux puts has-session's complaint in its stdout too
        result = external.CmdResult(("tmux", *encoded), proc.returncode, stdout, stderr)
        if check and proc.returncode != 0:
            first = (proc.stderr or [f"exit status {proc.returncode}"])[0]
            raise BackendError("pane_call_failed", f"{what}: {first}", stderr=stderr)
        return result

    def server(self) -> libtmux.Server:
        """The libtmux ``Server`` of this socket (no call is made here)."""
        if self._server is None:
            if self.binary is None:
                raise BackendError("multiplexer_missing", "tmux: not found on PATH")
            _require_libtmux()
            import libtmux  # here, not at the top: see the module docstring

            self._server = libtmux.Server(socket_path=self.socket_path, tmux_bin=self.binary)
        return self._server

    def version(self) -> TmuxVersion:
        """The tmux binary's version, asked once per binary in a process (libtmux caches it)."""
        if self.binary is None:
            raise BackendError("multiplexer_missing", "tmux: not found on PATH")
        _require_libtmux()
        from libtmux.common import get_version_str

        binary = self.binary
        return parse_version(self._bounded("tmux -V", lambda: get_version_str(tmux_bin=binary)))

    def running(self) -> bool:
        """Whether a server answers at the socket (none yet is not an error)."""
        return self.call("list-sessions", check=False).returncode == 0

    def has_session(self, target: str) -> bool:
        """Whether the session ``target`` is there. Asked even of a server that once gave no
        answer (``unresponsive``), within ``external.PROBE_TIMEOUT``: whether a session is
        gone decides what became of its panes' workers, and is worth a short wait — never
        assumed."""
        encoded = ["has-session", "-t", quoting.tmux_arg(target)]
        proc = self._bounded("tmux has-session", lambda: self.server().cmd(*encoded),
                             timeout=external.probe_timeout(self.unresponsive, self.timeout))
        return proc.returncode == 0

    def listening(self) -> bool:
        """Whether a server still holds this client's socket: a connection to it is not
        refused. The evidence asked for when a call gave no answer: a busy or stopped server
        still takes connections (its backlog full: it lives); a dead one's socket refuses
        them, or is gone."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.setblocking(False)
            try:
                probe.connect(self.socket_path)
            except (BlockingIOError, InterruptedError):
                return True
            except OSError:
                return False
        return True

    def windows(self) -> list[WindowRow]:
        """Every window of the server, in tmux's order; none when no server runs."""
        res = self.call("list-windows", "-a", "-F", _WINDOW_FORMAT, check=False)
        if res.returncode != 0:
            return []
        return [WindowRow(*line.split("\t", 4)) for line in res.lines if line.count("\t") >= 4]

    def panes(self, target: str | None = None) -> list[PaneRow] | None:
        """The panes of the window ``target``, or (None) of the whole server; None when the
        window or the server is not there."""
        where = ["-t", target] if target is not None else ["-a"]
        res = self.call("list-panes", *where, "-F", _PANE_FORMAT, check=False)
        if res.returncode != 0:
            return None
        return [PaneRow(*line.split("\t", 5)) for line in res.lines if line.count("\t") >= 5]

    def _bounded(self, what: str, call: Callable[[], T], *, timeout: float | None = None) -> T:
        """``call()`` within ``timeout`` seconds (the client's), its libtmux errors made
        ``BackendError``s. Once a call has given no answer, every later one fails at once —
        but for one given a ``timeout`` of its own (``has_session``)."""
        if self.unresponsive is not None and timeout is None:
            raise self.unresponsive
        limit = timeout or self.timeout
        box: list[tuple[bool, object]] = []

        def run() -> None:
            try:
                box.append((True, call()))
            except BaseException as e:  # handed to the caller's thread below
                box.append((False, e))

        started = pid_end.ticks_now()
        deadline = time.monotonic() + limit
        stopped = self._stopped(what.split())
        thread = threading.Thread(target=run, name=what, daemon=True)
        thread.start()
        given_up = None
        while thread.is_alive() and given_up is None and (left := deadline - time.monotonic()) > 0:
            thread.join(min(left, external.GIVE_UP_EVERY))
            if thread.is_alive():
                given_up = stopped()
        if thread.is_alive():
            self._kill_clients(started)
            thread.join(1.0)
            self.unresponsive = given_up or BackendError("pane_call_timeout", f"{what}: no answer within {limit:g}s")
            raise self.unresponsive
        ok, value = box[0]
        if ok:
            return value  # type: ignore[return-value]  # what call() returned
        if isinstance(value, BackendError):  # (libtmux missing: ``_require_libtmux``)
            raise value
        from libtmux import exc as libtmux_exc

        if isinstance(value, libtmux_exc.TmuxCommandNotFound):
            raise BackendError("multiplexer_missing", "tmux: not found on PATH") from None
        if isinstance(value, libtmux_exc.LibTmuxException):
            raise BackendError("pane_call_failed", f"{what}: {value}") from None
        assert isinstance(value, BaseException)
        raise value

    def _stopped(self, argv: Sequence[str]) -> external.StoppedServer:
        return external.StoppedServer(argv, "the tmux server", lambda: self.server_pid)

    def _kill_clients(self, since: int | None) -> None:
        """Kill the tmux clients of ours that talk to this server and started since the call
        did (``since``: in clock ticks since boot, as the kernel keeps a process's start — not
        psutil's wall-clock start, which a boot time rounded to the second moved up to a second
        before the call on one machine, so that none was killed); a server that does not
        answer leaves them waiting for good."""
        import psutil

        for child in psutil.Process().children():
            try:
                argv = child.cmdline()
                start = pid_end.start_ticks(child.pid)
                if (argv and argv[0] == self.binary and start is not None and (since is None or start >= since - 1)
                        and any(self.socket_path in a for a in argv)):
                    child.kill()
            except psutil.Error:
                pass  # it ended meanwhile

