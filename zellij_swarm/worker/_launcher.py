"""The launcher: a small child of the supervisor that starts headless wrappers for it.

Starting a process blocks its parent until the child has executed its program (vfork),
about half a millisecond per task here — time the supervisor's event loop would not spend
on exits and backfill. The launcher does that on the other core. Protocol: replies are lines;
requests are fields each ended by NUL (an argument may hold a newline, never a NUL):

    in:  S <token> <argc> <arg>...  start argv (each of these a field)
    out: S <token> <pid>            started
         F <token> <errno> <text>   could not start
         X <pid> <wait status>      a started wrapper ended (reaped here)
         U <cpu seconds> <max RSS KiB>  its own usage, last, as it exits
    in:  ?                          a ping; out: P, at once

Each wrapper starts in its own session with stdio on /dev/null and every signal at its
default. When its input closes (the supervisor ended or died) the launcher keeps reaping
until the last wrapper has ended, then exits: workers outlive their supervisor. Run as
``python -I -S _launcher.py``: stdlib only.
"""

import os
import resource
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
    received = fields(sys.stdin.fileno())
    for kind in received:
        if kind == "?":  # are you there? (a stopped or stuck launcher does not answer)
            reply("P\n")
            continue
        token = next(received, "")
        argv = [next(received, "") for _ in range(int(next(received, "0")))]
        with state:
            try:
                pid = os.posix_spawn(argv[0], argv, env, file_actions=STDIO, setsid=True,
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
    usage = resource.getrusage(resource.RUSAGE_SELF)
    reply(f"U {usage.ru_utime + usage.ru_stime:.6f} {peak_rss_kib(usage.ru_maxrss)}\n")


def peak_rss_kib(fallback: int) -> int:
    """This process's own peak RSS. Not ``ru_maxrss``: an exec keeps the larger of the old and
    new images' peaks, and this process began as the supervisor's vfork child."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return fallback


def fields(fd: int) -> Iterator[str]:
    """The NUL-terminated fields read from ``fd`` until it closes."""
    pending = b""
    while chunk := os.read(fd, 65536):
        *done, pending = (pending + chunk).split(b"\0")
        for field in done:
            yield field.decode("utf-8", "surrogateescape")


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    main()
