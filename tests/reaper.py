"""What a test process started ends with it, even when it dies without tearing down.

A test run ended by SIGTERM or SIGKILL (a CI job's timeout, ``timeout``, an impatient
developer) runs no fixture's teardown: the supervisors, fake and real Zellij servers, tmux
servers, Slurm daemons and workers its tests had started went on, and a Slurm daemon kept the
port the next run's cluster needed. So each test process marks its environment
(``ZSW_TEST_OWNER``: a token of its own, never a pid, which a later process may have), which
every process its tests start inherits, and starts this watcher in a session of its own. When
the test process is gone, the watcher kills every process that still carries its mark, then
exits. A test process that ends normally stops the watcher first (conftest): it has cleaned up
after itself, and what is left running was meant to be.

Run as a script: ``python tests/reaper.py OWNER_PID MARK``. The mark is looked for where the
run's own sweep looks for its markers (``procs.marked``): the environment a process was started
with (a process forked without an exec, like the zygote's runs, shows its parent's, which
carries the same mark).
"""

from __future__ import annotations

import sys
import time

from fakeprocs import kill_all

from zellij_swarm import pid_end
from zellij_swarm.worker import procs

MARK = "ZSW_TEST_OWNER"
WATCH_S = 3600.0  # one wait on the owner's pidfd; looked at again after each


def reap(mark: str) -> None:
    """SIGKILL every process that carries ``mark``, again until none is left (a server's pane
    may have forked while the first were killed), for at most ten seconds."""
    deadline = time.monotonic() + 10
    while (left := procs.marked((f"{MARK}={mark}".encode(),))) and time.monotonic() < deadline:
        kill_all(left, timeout=1)


def main() -> None:
    """Wait for the owner's end on its pidfd (``pid_end``: by its start ticks, so a pid the
    kernel gave another process meanwhile reads as ended, and so does a zombie — not by
    psutil's ``create_time``, which adds a boot time the kernel derives from the wall clock
    anew each time), then reap what carries the mark."""
    owner, mark = int(sys.argv[1]), sys.argv[2]
    started = pid_end.start_ticks(owner)
    while not pid_end.ended(owner, started) and not pid_end.wait_end(owner, WATCH_S):
        pass
    reap(mark)


if __name__ == "__main__":
    main()
