"""What a test process started ends with it, even when it dies without tearing down.

A test run ended by SIGTERM or SIGKILL (a CI job's timeout, ``timeout``, an impatient
developer) runs no fixture's teardown: the supervisors, fake and real Zellij servers, tmux
servers, Slurm daemons and workers its tests had started went on, and a Slurm daemon kept the
port the next run's cluster needed. So each test process marks its environment
(``ZSW_TEST_OWNER``: a token of its own, never a pid, which a later process may have), which
every process its tests start inherits, and starts this watcher in a session of its own. When
the test process is gone, the watcher kills every process that still carries its mark, then
exits. A test process that ends normally stops the
watcher first (conftest): it has cleaned up after itself, and what is left running was meant
to be.

Run as a script: ``python tests/reaper.py OWNER_PID MARK``. Only ``/proc/PID/environ`` is read: the
environment a process was started with (a process forked without an exec, like the zygote's
runs, shows its parent's, which carries the same mark).
"""

from __future__ import annotations

import os
import signal
import sys
import time

import psutil

from zellij_swarm.worker._kernel import stat_fields

MARK = "ZSW_TEST_OWNER"
POLL_S = 0.5


def marked(mark: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["pid"]):
        if proc.pid == os.getpid():
            continue
        try:
            if proc.environ().get(MARK) == mark:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


def reap(mark: str) -> None:
    """SIGKILL every process that carries ``mark``, again until none is left (a server's pane
    may have forked while the first were killed), for at most ten seconds."""
    deadline = time.monotonic() + 10
    while (left := marked(mark)) and time.monotonic() < deadline:
        for proc in left:
            try:
                proc.send_signal(signal.SIGKILL)
            except psutil.Error:
                pass
        psutil.wait_procs(left, timeout=1)


def main() -> None:
    owner, mark = int(sys.argv[1]), sys.argv[2]
    started = _start_ticks(owner)
    while started is not None and _start_ticks(owner) == started:
        time.sleep(POLL_S)
    reap(mark)


def _start_ticks(pid: int) -> bytes | None:
    """When ``pid`` started, in the kernel's clock ticks since boot (``/proc/PID/stat``); None
    once it has ended or is a zombie. Not psutil's ``create_time``: it adds the boot time,
    which the kernel derives from the wall clock anew each time, and a step of the clock (a
    virtual machine's snapshot resumed) made a live test process look replaced — the watcher
    of pytest-xdist's controller killed every worker."""
    fields = stat_fields(pid)
    return None if fields is None or fields[0] == b"Z" else fields[19]


if __name__ == "__main__":
    main()
