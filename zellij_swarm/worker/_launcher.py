"""The launcher: a small child of the supervisor that starts headless wrappers for it.

Starting a process blocks its parent until the child has executed its program (vfork),
about half a millisecond per task here — time the supervisor's event loop would not spend
on exits and backfill. The launcher does that on the other core. Protocol (lines, except
that a request ends with NUL: a path may hold a newline, never a NUL):

    in:  <token> TAB <claimed 0|1> TAB <wrapper path> NUL
    out: S <token> <pid>            started
         F <token> <errno> <text>   could not start
         X <pid> <wait status>      a started wrapper ended (reaped here)
    in:  ? NUL   out: P             a ping, answered at once

Each wrapper starts in its own session with stdio on /dev/null and every signal at its
default. When its input closes (the supervisor ended or died) the launcher keeps reaping
until the last wrapper has ended, then exits: workers outlive their supervisor. Run as
``python -I -S _launcher.py``: stdlib only.
"""

import os
import signal
import sys
import threading
from collections.abc import Iterator

STDIO = [
    (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
    (os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0),
    (os.POSIX_SPAWN_OPEN, 2, "/dev/null", os.O_WRONLY, 0),
]
DEFAULTS = frozenset(signal.valid_signals()) - {signal.SIGKILL, signal.SIGSTOP}


def main() -> None:
    out = sys.stdout.fileno()
    state = threading.Condition()
    running = 0
    closed = False

    def reply(line: str) -> None:
        try:
            os.write(out, line.encode())
        except BrokenPipeError:
            pass  # the supervisor is gone; keep reaping

    def reap() -> None:
        nonlocal running
        while True:
            with state:
                while running == 0 and not closed:
                    state.wait()
                if running == 0:
                    return
            pid, status = os.waitpid(-1, 0)
            with state:
                running -= 1
                reply(f"X {pid} {status}\n")

    reaper = threading.Thread(target=reap, daemon=True)
    reaper.start()
    env = dict(os.environ)
    for raw in requests(sys.stdin.fileno()):
        if raw == b"?":  # are you there? (a stopped or stuck launcher does not answer)
            reply("P\n")
            continue
        token, claimed, path = raw.decode("utf-8", "surrogateescape").split("\t", 2)
        argv = ["/bin/sh", path] + (["claimed"] if claimed == "1" else [])
        with state:
            try:
                pid = os.posix_spawn("/bin/sh", argv, env, file_actions=STDIO, setsid=True,
                                     setsigdef=DEFAULTS, setsigmask=())
            except OSError as e:
                reply(f"F {token} {e.errno} {e.strerror}\n")
                continue
            running += 1
            reply(f"S {token} {pid}\n")
            state.notify()
    with state:
        closed = True
        state.notify()
    reaper.join()


def requests(fd: int) -> Iterator[bytes]:
    """The NUL-terminated requests read from ``fd`` until it closes."""
    pending = b""
    while chunk := os.read(fd, 65536):
        *done, pending = (pending + chunk).split(b"\0")
        yield from done


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    main()
