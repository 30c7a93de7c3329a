"""A run's liveness stamp (issue 23 §7, ``records.runlock``): the supervisor's host, pid and
Slurm job, rewritten every few seconds while it holds the run lock, gone when it lets go. On
another host — a login node following a run whose supervisor is a batch job — the kernel lock
says nothing, and the stamp's age is what tells a running run from an interrupted one."""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from swarmtest import wait_until

from zellij_swarm import exc
from zellij_swarm.commands import status as views
from zellij_swarm.records import runlock
from zellij_swarm.records.rundir import RunPaths


@pytest.fixture
def run(tmp_path: Path) -> RunPaths:
    d = tmp_path / "runs" / "20261201-000000-abcdef"
    d.mkdir(parents=True)
    (d / "run.json").write_text(json.dumps({"run_id": d.name, "started_at": time.time(), "settings": {}}))
    (d / "state.json").write_text(json.dumps({"run_id": d.name, "state": "running", "started_at": time.time(),
                                              "tasks": [], "slots": [], "counts": {}, "metrics": {},
                                              "warnings": []}))
    return RunPaths(d)


@pytest.fixture
def held(run: RunPaths, monkeypatch: pytest.MonkeyPatch) -> Iterator[runlock.RunLock]:
    monkeypatch.setattr(runlock, "STAMP_INTERVAL", 0.05)
    lock = runlock.RunLock(run)
    lock.acquire()
    try:
        yield lock
    finally:
        lock.release()


def stamp_from(run: RunPaths, host: str, *, age: float, job: str | None = None) -> None:
    run.alive.write_text(json.dumps({"host": host, "pid": 4242, "job": job, "at": time.time() - age}))


def test_the_holder_stamps_its_host_pid_and_job_and_keeps_it_fresh(run: RunPaths, held: runlock.RunLock) -> None:
    first = runlock.stamp(run)
    assert first is not None and first.here and first.pid == os.getpid() and first.fresh()
    wait_until(lambda: (s := runlock.stamp(run)) is not None and s.at > first.at, timeout=10, what="a newer stamp")
    held.release()
    assert not run.alive.exists() and runlock.holder(run) is None


def test_another_hosts_fresh_stamp_is_a_running_run_and_a_stale_one_is_not(run: RunPaths) -> None:
    stamp_from(run, "compute-7", age=1.0, job="123")
    assert runlock.holder(run) == -1  # its pid means nothing here
    assert views.load_status(run)["state"] == "running"
    with pytest.raises(exc.RunBusy, match=r"pid 4242 on compute-7 \(Slurm job 123\)"):
        runlock.RunLock(run).acquire()
    stamp_from(run, "compute-7", age=runlock.STAMP_STALE + 1)
    assert runlock.holder(run) is None
    assert views.load_status(run)["state"] == "interrupted"


def test_this_hosts_stamp_defers_to_the_kernel_lock(run: RunPaths) -> None:
    """A supervisor here that was killed left a fresh stamp: the lock, not the stamp, says it is gone."""
    stamp_from(run, socket.gethostname(), age=0.0)
    assert runlock.holder(run) is None


def test_a_requeued_job_takes_over_from_its_own_previous_run(run: RunPaths, monkeypatch: pytest.MonkeyPatch) -> None:
    stamp_from(run, "compute-7", age=1.0, job="123")
    monkeypatch.setenv("SLURM_JOB_ID", "123")
    assert runlock.holder(run) is None  # Slurm never runs two incarnations of one job
    lock = runlock.RunLock(run)
    lock.acquire()
    try:
        mine = runlock.stamp(run)
        assert mine is not None and mine.here and mine.job == "123"
    finally:
        lock.release()
