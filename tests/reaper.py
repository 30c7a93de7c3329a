"""What a test process started ends with it, even when it dies without tearing down.

A test run ended by SIGTERM or SIGKILL (a CI job's timeout, ``timeout``, an impatient
developer) runs no fixture's teardown: the supervisors, fake and real Zellij servers, tmux
servers, Slurm daemons and workers its tests had started went on, and a Slurm daemon kept the
port the next run's cluster needed. So each test process marks its environment
(``ZSW_TEST_OWNER``: its pid), which every process its tests start inherits, and starts this
watcher in a session of its own. When the test process is gone, the watcher kills every
process that still carries its mark, then exits. A test process that ends normally stops the
watcher first (conftest): it has cleaned up after itself, and what is left running was meant
to be.

Run as a script: ``python tests/reaper.py OWNER_PID``. Only ``/proc/PID/environ`` is read: the
environment a process was started with (a process forked without an exec, like the zygote's
runs, shows its parent's, which carries the same mark).
"""

from __future__ import annotations

import os
import signal
import sys
import time

import psutil

MARK = "ZSW_TEST_OWNER"
POLL_S = 0.5


def marked(owner: int) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["pid"]):
        if proc.pid == os.getpid():
            continue
        try:
            if proc.environ().get(MARK) == str(owner):
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


def reap(owner: int) -> None:
    """SIGKILL every process marked as ``owner``'s, again until none is left (a server's pane
    may have forked while the first were killed), for at most ten seconds."""
    deadline = time.monotonic() + 10
    while (left := marked(owner)) and time.monotonic() < deadline:
        for proc in left:
            try:
                proc.send_signal(signal.SIGKILL)
            except psutil.Error:
                pass
        psutil.wait_procs(left, timeout=1)


def main() -> None:
    owner = int(sys.argv[1])
    try:
        started = psutil.Process(owner).create_time()
        while _alive(owner, started):
            time.sleep(POLL_S)
    except psutil.NoSuchProcess:
        pass
    reap(owner)


def _alive(pid: int, started: float) -> bool:
    """Not ended, not a zombie its parent has yet to reap, and not its pid reused."""
    proc = psutil.Process(pid)
    return proc.create_time() == started and proc.status() != psutil.STATUS_ZOMBIE


if __name__ == "__main__":
    main()
