"""The run lock (issue 10, defect 8): readers never make a writer fail. ``status`` and ``ls``
used to take a shared lock for a moment to ask whether a supervisor was alive, and a
``resume`` whose non-blocking lock fell in that moment failed with "is being supervised by
pid None"."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import struct
import subprocess
import sys
import threading

import pytest
from swarmtest import clean_env, full, kill_run_processes, wait_until

from zellij_swarm import exc
from zellij_swarm.records import runlock
from zellij_swarm.records.rundir import RunPaths

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


# A supervisor that holds the run's lock and then has a child that is, as a spawned process
# is until its exec, a copy holding the lock's open file: the child waits on its stdin.
SPAWNING_SUPERVISOR = """
import os, sys
from pathlib import Path
from zellij_swarm.records import runlock
from zellij_swarm.records.rundir import RunPaths
runlock.RunLock(RunPaths(Path(sys.argv[1]))).acquire()
if os.fork() == 0:
    os.read(0, 1)
    os._exit(0)
print("spawning", flush=True)
os.read(0, 1)
"""


@pytest.fixture
def killed_while_spawning(tmp_path):
    """A run dir whose supervisor was SIGKILLed while a child it started still holds the lock
    (its pid, and the pipe that ends the child when closed)."""
    run = RunPaths(tmp_path / "20261203-000000-abcdef")
    run.dir.mkdir()
    release_r, release_w = os.pipe()
    sup = subprocess.Popen([sys.executable, "-c", SPAWNING_SUPERVISOR, str(run.dir)], stdin=release_r,
                           stdout=subprocess.PIPE, text=True, env=clean_env())
    os.close(release_r)
    try:
        assert sup.stdout.readline() == "spawning\n"
        sup.send_signal(signal.SIGKILL)
        assert sup.wait(timeout=10) == -signal.SIGKILL
        yield run, sup.pid, release_w
    finally:
        with contextlib.suppress(OSError):
            os.close(release_w)  # the child reads end-of-file and ends
        sup.kill()
        sup.wait()


def test_a_lock_held_by_a_killed_supervisors_child_is_no_supervisor(killed_while_spawning):
    """Killed in the moment a process it spawned had not yet exec'd, a supervisor left its run
    "running" to ``status`` and busy to ``resume`` (CI: a kill -9 test saw "running")."""
    run, _, _ = killed_while_spawning
    probe = os.open(run.lock, os.O_RDWR)
    try:  # the premise: the kernel still calls the lock held
        with pytest.raises(OSError):
            fcntl.fcntl(probe, fcntl.F_OFD_SETLK, struct.pack("hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0))
    finally:
        os.close(probe)
    assert runlock.holder(run) is None


def test_resume_waits_for_a_killed_supervisors_child_to_let_go_of_the_lock(killed_while_spawning):
    run, _, release_w = killed_while_spawning
    lock = runlock.RunLock(run)
    taken: list[BaseException | None] = []
    taker = threading.Thread(target=lambda: taken.append(_raised(lock.acquire)))
    taker.start()
    try:
        os.close(release_w)  # the child ends, as a spawned one execs
        taker.join(timeout=runlock.HANDOVER_WAIT + 5)
        assert taken == [None]
        assert runlock.holder(run) == os.getpid()
    finally:
        lock.release()


def test_a_killed_supervisors_child_that_keeps_the_lock_makes_resume_say_so(killed_while_spawning, monkeypatch):
    run, dead_pid, _ = killed_while_spawning
    monkeypatch.setattr(runlock, "HANDOVER_WAIT", 0.3)
    with pytest.raises(exc.RunBusy, match=rf"still held by a process its gone supervisor \(pid {dead_pid}\) started"):
        runlock.RunLock(run).acquire()


def _raised(step) -> BaseException | None:
    try:
        step()
    except BaseException as e:  # handed to the test's thread, which asserts on it
        return e
    return None


# A supervisor of the run that holds its lock until its stdin closes.
HOLDING_SUPERVISOR = """
import os, sys
from pathlib import Path
from zellij_swarm.records import runlock
from zellij_swarm.records.rundir import RunPaths
runlock.RunLock(RunPaths(Path(sys.argv[1]))).acquire()
print("holding", flush=True)
os.read(0, 1)
"""
# The command, as one that looked for a supervisor in the moment before another took the run:
# every look before it takes the lock finds none.
LOOKED_TOO_EARLY = """
import sys
from zellij_swarm.records import runlock
from zellij_swarm.cli import main
holder, acquire = runlock.holder, runlock.RunLock.acquire
def acquire_now(lock):
    runlock.holder = holder
    return acquire(lock)
runlock.holder, runlock.RunLock.acquire = (lambda run: None), acquire_now
main(sys.argv[1:])
"""


@pytest.mark.parametrize("command", ["retry", "resume"])
def test_a_retry_or_resume_that_loses_the_run_to_another_is_refused_with_exit_2(swarm, command):
    """Two ``retry`` of one run at once (an adversary): the one that found the run free and
    then lost its lock to the other said "is being supervised by pid N" with exit 1, where a
    ``retry`` of a running run is exit 2 — as it is when the other supervisor is seen first."""
    swarm.write("w.txt", "false\n" if command == "retry" else "sleep 0.1\n")
    if command == "retry":
        assert swarm("run", "w.txt", "--output", "quiet").code == 1
        run = swarm.runs()[0].name
    else:
        run = interrupted_run(swarm)
    holder = subprocess.Popen([sys.executable, "-c", HOLDING_SUPERVISOR, str(swarm.state_dir / "runs" / run)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=clean_env())
    try:
        assert holder.stdout.readline() == "holding\n"
        res = subprocess.run([sys.executable, "-c", LOOKED_TOO_EARLY, command, run, "--output", "quiet"],
                             cwd=swarm.cwd, capture_output=True, text=True, env=clean_env(), timeout=60)
        assert res.returncode == 2, res.stderr
        assert f"is being supervised by pid {holder.pid}" in res.stderr and "Traceback" not in res.stderr
    finally:
        holder.stdin.close()
        holder.wait(timeout=10)
        kill_run_processes(run)
