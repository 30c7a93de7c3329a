"""A worker on a terminal of its own, its output logged: how a Zellij pane runs its worker
(Zellij has nothing like tmux's ``pipe-pane``).

Run as ``python -I -S _ptyrelay.py LOG CMD…``: stdlib only, no site, started in a few ms.

CMD runs as the session leader of a new pty, so it sees a TTY. What it writes is copied to
this process's stdout (the pane) and appended to LOG, with the terminal's CRLF turned back
into LF. Keystrokes on our stdin go to it, our own terminal in raw mode so that the pty's
line discipline (Ctrl-C included) is the only one that applies; the inner terminal starts
with the pane's settings and follows its size.

The exit status is CMD's, exactly: its code, or 128+N for a death by signal N. That is why
this replaces ``script -qfec``, which exits 0 when it is itself sent TERM, INT, QUIT or USR1
(and 134 on ALRM), whatever became of its command. A signal aimed at the worker that reaches
the relay — ``kill -SIG -- -PGID`` of the pane's group, ``scancel --signal`` of a step, the
pane leader passing on a hang-up — is passed on to CMD's process group, and the relay waits:
the worker's fate is the record.

Once CMD has exited, what it left in the pty is drained and the relay exits, even while a
background process still holds the terminal (the kernel hangs it up: its session leader is
gone); the drain ends at the pty's end of file, or after ``DRAIN`` seconds without output.
"""

from __future__ import annotations

import errno
import fcntl
import os
import select
import signal
import sys
import termios
import time

if __package__:
    from zellij_swarm.worker._paneleader import WORKER_SIGNALS, worker_defaults
else:  # run as a script under -I, which keeps the script's own directory off sys.path
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _paneleader import WORKER_SIGNALS, worker_defaults  # type: ignore[import-not-found,no-redef]

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs 20 ms of the relay's start
    from typing import Any

DRAIN = 0.2  # seconds of silence after the worker's exit before a held-open pty is given up
CHUNK = 65536


class Log:
    """LOG, appended to as output arrives, with CRLF as LF. A ``\\r`` that ends one chunk is
    held until the next shows whether it was half of a CRLF split between two reads."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.held = b""

    def write(self, chunk: bytes) -> None:
        data, self.held = self.held + chunk, b""
        if data.endswith(b"\r"):
            data, self.held = data[:-1], b"\r"
        write_all(self.fd, data.replace(b"\r\n", b"\n"))

    def close(self) -> None:
        write_all(self.fd, self.held)
        os.close(self.fd)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def start(argv: list[str], outer: list[Any] | None, size: bytes | None) -> tuple[int, int]:
    """Fork CMD on a new pty: (its pid, the master's fd)."""
    master, slave = os.openpty()
    if outer is not None:
        termios.tcsetattr(slave, termios.TCSANOW, outer)
    if size is not None:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, size)
    pid = os.fork()
    if pid == 0:
        try:
            os.close(master)
            os.login_tty(slave)
            worker_defaults()
            os.execvp(argv[0], argv)
        except OSError as e:
            os.write(2, f"zellij-swarm: cannot run {argv[0]}: {e.strerror}\n".encode())
        finally:
            os._exit(127)
    os.close(slave)
    return pid, master


def relay(master: int, child: int, log: Log, stdin_open: bool) -> int:
    """Copy both ways until CMD has exited and its output is drained: CMD's wait status."""
    wake_r, wake_w = os.pipe()
    # Never blocked on the worker's input: keys typed while it reads nothing would stop its
    # output from being copied, and it would wait on that output forever.
    for fd in (wake_r, wake_w, master):
        os.set_blocking(fd, False)
    signal.set_wakeup_fd(wake_w)
    screen = True  # the pane's terminal still takes output
    status: int | None = None
    quiet_until = 0.0
    while True:
        if status is None:
            pid, st = os.waitpid(child, os.WNOHANG)
            if pid:
                status, quiet_until = st, time.monotonic() + DRAIN
        watched = [master, wake_r] + ([0] if stdin_open else [])
        timeout = None if status is None else max(0.0, quiet_until - time.monotonic())
        ready = select.select(watched, [], [], timeout)[0]
        if not ready and status is not None:
            return status
        if wake_r in ready:
            try:
                os.read(wake_r, CHUNK)
            except BlockingIOError:
                pass
        if 0 in ready:
            try:
                keys = os.read(0, CHUNK)
            except OSError:
                keys = b""
            if keys:
                try:
                    write_all(master, keys)
                except OSError:  # full (the worker reads nothing): dropped, as a terminal does
                    pass
            else:
                stdin_open = False
        if master in ready:
            try:
                data = os.read(master, CHUNK)
            except BlockingIOError:
                continue
            except OSError as e:  # EIO: every process has closed the terminal
                if e.errno != errno.EIO:
                    raise
                data = b""
            if not data:
                return status if status is not None else os.waitpid(child, 0)[1]
            log.write(data)
            if screen:
                try:
                    write_all(1, data)
                except OSError:
                    screen = False
            if status is not None:
                quiet_until = time.monotonic() + DRAIN


def raw(attrs: list[Any]) -> list[Any]:
    """``attrs`` made raw, as cfmakeraw(3) does."""
    mode = list(attrs)
    mode[0] &= ~(termios.IGNBRK | termios.BRKINT | termios.PARMRK | termios.ISTRIP | termios.INLCR
                 | termios.IGNCR | termios.ICRNL | termios.IXON)
    mode[1] &= ~termios.OPOST
    mode[2] = (mode[2] & ~(termios.CSIZE | termios.PARENB)) | termios.CS8
    mode[3] &= ~(termios.ECHO | termios.ECHONL | termios.ICANON | termios.ISIG | termios.IEXTEN)
    mode[6] = list(mode[6])
    mode[6][termios.VMIN], mode[6][termios.VTIME] = 1, 0
    return mode


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        sys.stderr.write("usage: _ptyrelay.py LOG CMD...\n")
        return 2
    log = Log(argv[0])
    on_tty = os.isatty(0)
    outer = termios.tcgetattr(0) if on_tty else None
    size = fcntl.ioctl(0, termios.TIOCGWINSZ, b"\0" * 8) if on_tty else None
    child = 0

    def forward(signum: int, _frame: object) -> None:
        if child:  # 0 until forked, and in the child itself until it execs
            try:
                os.killpg(child, signum)
            except OSError:
                pass

    def resize(_signum: int, _frame: object) -> None:
        try:
            fcntl.ioctl(master, termios.TIOCSWINSZ, fcntl.ioctl(0, termios.TIOCGWINSZ, b"\0" * 8))
        except OSError:
            pass

    for name in WORKER_SIGNALS:
        signal.signal(getattr(signal, name), forward)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so the wakeup fd sees it
    child, master = start(argv[1:], outer, size)
    if outer is not None:
        signal.signal(signal.SIGWINCH, resize)
        termios.tcsetattr(0, termios.TCSANOW, raw(outer))  # not FLUSH: keys typed ahead are the worker's
    try:
        status = relay(master, child, log, stdin_open=on_tty)
    finally:
        if outer is not None:
            try:
                termios.tcsetattr(0, termios.TCSANOW, outer)  # never waits on a pane nobody reads
            except termios.error:
                pass
        log.close()
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
