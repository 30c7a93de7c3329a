"""Slurm accounting for real (issue 23 §9): ``scripts/slurm-local --accounting`` runs slurmdbd over
a MariaDB server of its own, so that ``sacct`` answers; ``doctor`` then says accounting is there,
and the HTML report's bar of each Slurm attempt says the state and elapsed time ``sacct``
recorded of its job. A cluster of its own (this one's database takes seconds to make): skipped,
saying why, where Debian's slurmdbd and mariadb-server are not installed."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from slurmtest import SLURM_LOCAL
from swarmtest import Swarm, clean_env, wait_until


@pytest.fixture(scope="module")
def accounted() -> Iterator[dict[str, str]]:
    if os.geteuid() != 0:
        pytest.skip("the Slurm executor's tests run a real cluster, whose daemons need root")
    missing = [exe for exe in ("slurmctld", "slurmdbd", "mariadbd") if shutil.which(exe) is None
               and not Path(f"/usr/sbin/{exe}").exists()]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (scripts/slurm-local start --accounting installs "
                    "slurmdbd and mariadb-server as root)")
    port = int(os.environ.get("ZSW_TEST_SLURM_PORT") or 17000) + 60  # clear of the shared cluster's ports
    d = Path(tempfile.mkdtemp(prefix="zsw-slurm-acct-", dir="/tmp"))
    args = ["--dir", str(d)]
    start = subprocess.run([sys.executable, str(SLURM_LOCAL), "start", *args, "--cpus", "4", "--port", str(port),
                            "--accounting"], capture_output=True, text=True, timeout=120)
    try:
        if start.returncode != 0:
            pytest.fail(f"the accounting cluster did not start: {start.stderr.strip()}")
        yield {"SLURM_CONF": shlex.split(start.stdout)[1].split("=", 1)[1], "ZSW_SLURM_DIR": str(d)}
    finally:
        subprocess.run([sys.executable, str(SLURM_LOCAL), "stop", *args], timeout=60)
        shutil.rmtree(d, ignore_errors=True)


def test_with_accounting_doctor_says_so_and_each_bar_says_what_sacct_recorded(swarm: Swarm,
                                                                             accounted: dict[str, str]) -> None:
    env = clean_env(**accounted)
    doctor = swarm("doctor", "--executor", "slurm", env=env)
    assert "accounting: not configured" not in doctor.stdout, doctor.stdout
    res = swarm("run", "--executor", "slurm", "--backend", "headless", "--output", "quiet", "-j", "2",
                "sleep 1; exit {}", ":::", "0", "3", env=env)
    assert res.code == 1, res.stderr
    run = swarm.latest().name
    out = swarm.cwd / "r.html"

    def page() -> str:
        assert swarm("report", run, "--html", str(out), env=env).code == 0
        return out.read_text()

    # slurmctld tells slurmdbd of a job's end a moment after it
    text = wait_until(lambda: (t := page()).count(" · sacct ") == 2 and t, timeout=30, what="both jobs accounted")
    assert re.search(r"· job \d+( · queued [0-9.]+ s)? · sacct COMPLETED, [12] s</title>", text), text
    assert re.search(r"· job \d+( · queued [0-9.]+ s)? · sacct FAILED, [12] s</title>", text), text
