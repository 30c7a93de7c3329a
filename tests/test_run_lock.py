"""The run lock (issue 10, defect 8): readers never make a writer fail. ``status`` and ``ls``
used to take a shared lock for a moment to ask whether a supervisor was alive, and a
``resume`` whose non-blocking lock fell in that moment failed with "is being supervised by
pid None"."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest
from swarmtest import clean_env, full, kill_run_processes, wait_until

# Readers in a loop in one process: mostly the question `status` and `ls` ask of the lock
# (is a supervisor alive?), through the function they ask it with, and now and then the whole
# commands — many readers one after the other, without a Python start-up for each.
HAMMER = """
import contextlib, io, sys
from pathlib import Path
from zellij_swarm.records import rundir, runlock
from zellij_swarm.cli import main
run_id = sys.argv[1]
run = rundir.find_run(Path(".zellij-swarm").absolute(), run_id)
print("looking", flush=True)
while True:
    for _ in range(2000):
        runlock.holder(run)
    for argv in (["status", "--json", run_id], ["ls"]):
        with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
            main(argv)
"""


def interrupted_run(swarm) -> str:
    """A run whose supervisor was killed while its one worker ran."""
    before = set(swarm.runs())
    proc = swarm.popen("run", "w.txt", "--output", "quiet")
    try:
        run = wait_until(lambda: [r for r in swarm.runs() if r not in before], what="run dir")[0]
        wait_until(lambda: (run / "slots/slot-1/gen-1/claim").exists(), what="the worker started")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    return run.name


@pytest.mark.parametrize("count", [3, full(6)])  # the race is the same each time: more tries, more chances
def test_resume_never_fails_because_readers_are_looking(swarm, count):
    swarm.write("w.txt", "sleep 0.1\n")
    runs = [interrupted_run(swarm) for _ in range(count)]
    try:
        for run in runs:
            hammers = [subprocess.Popen([sys.executable, "-c", HAMMER, run], cwd=swarm.cwd, env=clean_env(),
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
                       for _ in range(3)]
            try:
                for h in hammers:
                    assert h.stdout.readline() == "looking\n"
                res = swarm("resume", run, "--output", "quiet")
            finally:
                for h in hammers:
                    h.kill()
                    h.wait(timeout=10)
            assert res.code == 0, f"resume {runs.index(run) + 1} of {len(runs)}: {res.stderr}"
            assert "being supervised" not in res.stderr
    finally:
        for run in runs:
            kill_run_processes(run)
