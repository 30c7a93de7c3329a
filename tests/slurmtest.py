"""The real throw-away Slurm cluster the Slurm tests run against (scripts/slurm-local): one per
test process, on ports of its own. Every test file that uses it is named ``test_slurm*.py`` (the
slurm tier: conftest ``_tier``); conftest makes the fixture ``cluster`` theirs."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

SLURM_LOCAL = Path(__file__).resolve().parent.parent / "scripts" / "slurm-local"
# Starts of the cluster before its tests fail: once, on a machine booted minutes before, the
# daemons of one test process did not answer within slurm-local's 30 s (and did at once
# afterwards): 92 tests failed for it. Each failed start's logs are in the failure.
START_TRIES = 2


@pytest.fixture(scope="session")
def cluster() -> Iterator[dict[str, str]]:
    """A cluster for this test process; its environment (``SLURM_CONF``) to run against it."""
    if os.geteuid() != 0:
        pytest.skip("the Slurm executor's tests run a real cluster, whose daemons need root")
    if shutil.which("slurmctld") is None and not Path("/usr/sbin/slurmctld").exists():
        pytest.skip("Slurm is not installed (scripts/setup installs slurmctld, slurmd, slurm-client and munge "
                    "as root)")
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    # ZSW_TEST_SLURM_PORT: two pytest runs on one machine (no xdist) each name a cluster of their own
    port = int(os.environ.get("ZSW_TEST_SLURM_PORT")
               or 17000 + 100 * int("".join(c for c in worker if c.isdigit()) or 0))
    failures = []
    for _ in range(START_TRIES):
        # not under pytest's own temporary directory: munged (its own user) must reach its files
        d = Path(tempfile.mkdtemp(prefix=f"zsw-slurm-{worker}-", dir="/tmp"))
        args = ["--dir", str(d)]
        start = subprocess.run([sys.executable, str(SLURM_LOCAL), "start", *args, "--cpus", "8", "--port", str(port)],
                               capture_output=True, text=True, timeout=120)
        if start.returncode == 0:
            break
        failures.append(f"{start.stderr.strip()}\n{_log_tails(d)}")
        subprocess.run([sys.executable, str(SLURM_LOCAL), "stop", *args], timeout=60)
        shutil.rmtree(d, ignore_errors=True)
    else:
        pytest.fail("the test cluster did not start:\n" + "\n".join(failures))
    if failures:  # (shown with the output of a test that fails)
        print(f"the test cluster started at its second try; the first:\n{failures[0]}", file=sys.stderr)
    env = {"SLURM_CONF": shlex.split(start.stdout)[1].split("=", 1)[1], "ZSW_SLURM_DIR": str(d)}
    try:
        yield env
    finally:
        subprocess.run([sys.executable, str(SLURM_LOCAL), "stop", *args], timeout=60)
        shutil.rmtree(d, ignore_errors=True)


def _log_tails(d: Path, lines: int = 15) -> str:
    """The last lines of each daemon's log in the cluster directory ``d`` (removed after a
    failed start, so the failure must carry them)."""
    out = []
    for log in sorted([*d.glob("log/*"), d / "munge" / "munged.log"]):
        try:
            tail = log.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            continue
        out.append(f"--- {log.name}\n" + "\n".join(tail))
    return "\n".join(out) or "(no daemon wrote a log)"
