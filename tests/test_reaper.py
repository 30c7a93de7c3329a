"""The watcher that ends what a test process started when it dies without a teardown
(tests/reaper.py)."""

from __future__ import annotations

import subprocess
import sys

import psutil
import reaper
from fakeprocs import alive, kill_all
from swarmtest import wait_until


def test_what_a_killed_test_process_started_is_killed_and_nothing_else():
    # the owner: a shell with two children, one marked as its own (as a test process marks
    # what its tests start), one marked as this test process's
    owner = subprocess.Popen(["sh", "-c", f"{reaper.MARK}=its sleep 300 & echo $!; sleep 300 & echo $!; wait"],
                             stdout=subprocess.PIPE, text=True)
    assert owner.stdout is not None
    its, not_its = (psutil.Process(int(owner.stdout.readline())) for _ in range(2))
    watcher = subprocess.Popen([sys.executable, reaper.__file__, str(owner.pid), "its"], start_new_session=True)
    try:
        wait_until(lambda: its.name() == not_its.name() == "sleep", what="both children's exec")
        assert its.environ()[reaper.MARK] == "its" != not_its.environ()[reaper.MARK]
        owner.kill()
        owner.wait()
        assert watcher.wait(timeout=30) == 0
        assert not alive(its) and alive(not_its)
    finally:
        watcher.kill()
        watcher.wait()
        kill_all([its, not_its])
