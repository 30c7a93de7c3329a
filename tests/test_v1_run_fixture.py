"""A run recorded in the generation-files form (SPEC §5, one directory per generation, its
claim and exit sidecar), kept as it was left: every later form of the records must still read
it (issue 26 §1: "runs recorded in today's form").

``tests/fixtures/run-v1/`` holds the run directory of ``swarm.toml`` beside it, run headless
with two slots at commit de89d70 and ended by ``kill -9`` of every process of it (supervisor,
launcher, wrappers, workers) while ``gate`` and ``hold`` ran, ``later`` and ``after-gate``
waiting: six tasks ended (one printed on both streams, one exited 3, one died of SIGTERM, one
timed out, one skipped, one trivial), two running whose processes are gone, two pending.
Git keeps neither empty directories nor modification times — the generations' start and end
times — nor the modes the supervisor gave its files: ``manifest.json`` has them, and
``install`` puts them back. The run's 256 KiB disk reserve (``.reserve``, zeros) is left out.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import psutil
import pytest
from swarmtest import Swarm, validate, wait_until

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "run-v1"
MANIFEST = json.loads((FIXTURE / "manifest.json").read_text())
RUN = MANIFEST["run"]

# (status, exit code, signal, reason, attempts) as the run left them
RECORDED = {
    "prints": ("succeeded", 0, None, None, 1),
    "exits-3": ("failed", 3, None, None, 1),
    "term": ("failed", 143, "SIGTERM", None, 1),
    "slow": ("timed_out", 143, "SIGTERM", "timeout", 1),
    "after-exits-3": ("skipped", None, None, "dependency_failed", 0),
    "trivial": ("succeeded", 0, None, None, 1),
    "gate": ("running", None, None, None, 1),
    "hold": ("running", None, None, None, 1),
    "later": ("pending", None, None, None, 0),
    "after-gate": ("pending", None, None, None, 0),
}


def install(swarm: Swarm) -> Path:
    """The fixture's run, in ``swarm``'s state directory, as the run left it on disk."""
    run = swarm.state_dir / "runs" / RUN
    run.parent.mkdir(parents=True, mode=0o700)
    shutil.copytree(FIXTURE / RUN, run)
    for name in MANIFEST["empty_dirs"]:
        (run / name).mkdir(parents=True, exist_ok=True)
    for name, mode in MANIFEST["mode"].items():
        os.chmod(run / name, int(mode, 8))
    for name, mtime_ns in MANIFEST["mtime_ns"].items():
        os.utime(run / name, ns=(mtime_ns, mtime_ns))
    return run


def rows(data: dict[str, Any]) -> dict[str, tuple[Any, ...]]:
    return {t["name"]: (t["status"], t["exit_code"], t["signal"], t["reason"], t["attempts"]) for t in data["tasks"]}


@pytest.fixture
def v1(swarm: Swarm) -> Path:
    return install(swarm)


def test_status_shows_the_run_as_it_was_left(swarm: Swarm, v1: Path) -> None:
    res = swarm("status", RUN, "--json")
    assert res.code == 0, res.stderr
    data = json.loads(res.stdout)
    validate(data, "status")
    assert data["state"] == "interrupted"  # its supervisor is gone
    assert rows(data) == RECORDED
    text = swarm("status", RUN)
    assert text.code == 0 and "interrupted" in text.stdout and "timed out" in text.stdout, text


def test_logs_report_and_proof_read_its_generations(swarm: Swarm, v1: Path, tmp_path: Path) -> None:
    prints = swarm("logs", RUN, "prints")
    assert (prints.code, prints.stdout, prints.stderr) == (0, "hello from prints\n", "a warning\n")
    assert swarm("logs", RUN, "exits-3").stdout == "about to fail\n"
    assert swarm("logs", RUN, "gate").stdout == "gate started\n"  # a generation still on disk whole
    assert swarm("logs", RUN, "trivial").stdout == ""  # folded away: nothing was printed

    page = tmp_path / "report.html"
    res = swarm("report", RUN, "--html", str(page))
    assert res.code == 0, res.stderr
    html = page.read_text()
    # a bar per attempt, its title the task's
    assert {name for name, row in RECORDED.items() if row[4]} == set(re.findall(r"<title>([^<·]+) · attempt 1 ", html))

    res = swarm("proof", RUN, "--json")
    assert res.code == 0, res.stderr
    proof = json.loads(res.stdout)
    validate(proof, "proof")
    assert proof["ok"] and proof["blockers"] == []
    # the seven generations that ran, each its own wrapper, two at a time in two slots
    assert proof["generations"]["ran"] == 7 and proof["pids"]["unique"] == 7
    assert proof["max_concurrency"] == 2 and proof["first_batch"]["size"] == 2


def test_resume_ends_it_running_only_what_never_ran(swarm: Swarm, v1: Path) -> None:
    before = (v1 / "events.jsonl").read_text().count("\n")
    res = swarm("resume", RUN, "--output", "quiet")
    assert res.code == 1, res.stderr  # tasks failed
    data = swarm.summary(v1)
    after = rows(data)
    # began, and gone without an exit record, nobody's kill, nothing of them left: they may
    # have finished (``unknown``, never run again by itself), and what waited on ``gate`` skipped
    assert after == {**RECORDED, "gate": ("unknown", None, None, "wrapper_lost", 1),
                     "hold": ("unknown", None, None, "wrapper_lost", 1),
                     "later": ("succeeded", 0, None, None, 1),
                     "after-gate": ("skipped", None, None, "dependency_failed", 0)}
    new = [json.loads(line) for line in (v1 / "events.jsonl").read_text().splitlines()[before:]]
    assert [e["task"] for e in new if e["event"] == "slot_reserved"] == ["later"]  # nothing ran twice
    assert swarm("logs", RUN, "later").stdout == "later ran\n"
    assert swarm("logs", RUN, "prints").stdout == "hello from prints\n"

    res = swarm("prune")
    assert res.code == 0, res.stderr
    assert swarm("logs", RUN, "prints").stdout == "hello from prints\n"  # a run's records are never pruned


@pytest.mark.parametrize("ending", [False, True], ids=["running", "being-cancelled"])
def test_resume_leaves_alone_a_stranger_that_took_a_lost_wrapper_s_pid(swarm: Swarm, v1: Path, ending: bool) -> None:
    """``gate``'s wrapper is gone; its pid, in its claim, now leads somebody else's session (a
    reboot, pids come round). Collecting it, the resumed run ended what it found in
    that session; and when the supervisor before had begun ending it (its ``kill``), it
    carried on that ladder on the pid's process tree: a stranger's processes, both."""
    stranger = subprocess.Popen(["sh", "-c", "sleep 300 & wait"], start_new_session=True)
    try:
        member = wait_until(lambda: next((p.pid for p in psutil.Process(stranger.pid).children()), None),
                            what="the stranger's child")
        claim = v1 / "slots/slot-1/gen-4/claim"
        claim.write_text(f"{stranger.pid}\n")
        os.utime(claim, ns=(MANIFEST["mtime_ns"]["slots/slot-1/gen-4/claim"],) * 2)
        if ending:  # asked, not sent: the wrapper had claimed it, so it ran, and how it ended is not known
            (v1 / "slots/slot-1/gen-4/kill").write_text("cancelled_by_user\n")
        res = swarm("resume", RUN, "--output", "quiet")
        assert res.code == 1, res.stderr
        assert rows(swarm.summary(v1))["gate"] == ("unknown", None, None, "wrapper_lost", 1)
        assert psutil.Process(member).status() != psutil.STATUS_ZOMBIE and stranger.poll() is None
    finally:
        os.killpg(stranger.pid, signal.SIGKILL)
        stranger.wait()
