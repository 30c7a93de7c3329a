"""Zellij faults: without require the swarm completes with recorded warnings and every
generation ran at most once (the ledger); with require the affected tasks fail with a
``zellij_<code>`` reason and ``run`` exits 1."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from zellijtest import FAST

TASKS = 5
SWARM = "[swarm]\njobs = 2\n" + "".join(
    f'[[task]]\nname = "t{i}"\ncmd = "echo t{i} >> ledger.txt; sleep 0.2"\n' for i in range(TASKS))


def events(run: Path) -> list[dict]:
    return [json.loads(ln) for ln in (run / "events.jsonl").read_text().splitlines()]


def ledger(swarm) -> list[str]:
    path = swarm.cwd / "ledger.txt"
    return sorted(path.read_text().split()) if path.exists() else []


def run(swarm, env, *args):
    swarm.write("sw.toml", SWARM)
    return swarm("run", "sw.toml", "--backend", "zellij", "--ui", "live", *args, env=env, timeout=90)


# fault -> (the warning code it causes, whether it hits the first batch as well)
FAULTS = {
    "fail:run:1:boom": "pane_call_failed",
    "fail:attach:1:cannot create": "pane_call_failed",
    "hang:run": "pane_call_timeout",
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_fault_is_a_warning(swarm, fz, fault):
    env = fz.env("0.45.0", faults=fault, ZELLIJ_SWARM_ZELLIJ_CALL_TIMEOUT_MS="1500", **FAST)
    res = run(swarm, env)
    assert res.code == 0, res.stderr
    assert ledger(swarm) == sorted(f"t{i}" for i in range(TASKS))  # each exactly once
    codes = {e["code"] for e in events(swarm.latest()) if e["event"] == "warning"}
    assert codes == {FAULTS[fault]}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_fault_fails_tasks_under_require(swarm, fz, fault):
    env = fz.env("0.45.0", faults=fault, ZELLIJ_SWARM_ZELLIJ_CALL_TIMEOUT_MS="1500", **FAST)
    res = run(swarm, env, "--require-zellij")
    assert res.code == 1, res.stderr
    rows = swarm.tasks()
    failed = {n for n, r in rows.items() if r["status"] != "succeeded"}
    assert failed and {rows[n]["reason"] for n in failed} == {f"zellij_{FAULTS[fault]}"}
    assert set(ledger(swarm)) == {n for n in rows if n not in failed}  # failed ones never ran
    assert len(ledger(swarm)) == len(set(ledger(swarm)))


@pytest.mark.parametrize("fault", ["silent_new_pane", "init_delay_ms=1500", "fail:new-pane:1:unused"])
def test_recovered_faults(swarm, fz, fault):
    """A silent ``run`` is found by name in list-panes; a slow session start is awaited."""
    res = run(swarm, fz.env("0.45.0", faults=fault, **FAST), "--require-zellij")
    assert res.code == 0, res.stderr
    assert ledger(swarm) == sorted(f"t{i}" for i in range(TASKS))
    run_dir = swarm.latest()
    assert not [e for e in events(run_dir) if e["event"] == "warning"]
    assert all(r["pane_id"].startswith("terminal_") for r in swarm.tasks().values())


def test_heartbeat_deadline_race_runs_each_generation_once(swarm, fz):
    """A 1 ms heartbeat deadline: the supervisor and the panes race for every claim, and
    whoever loses does not run the worker."""
    env = fz.env("0.45.0", ZELLIJ_SWARM_HEARTBEAT_TIMEOUT_MS="1", ZELLIJ_SWARM_PANE_HOLD_MS="200")
    res = run(swarm, env)
    assert res.code == 0, res.stderr
    assert ledger(swarm) == sorted(f"t{i}" for i in range(TASKS))
    codes = {e["code"] for e in events(swarm.latest()) if e["event"] == "warning"}
    assert codes <= {"heartbeat_missing"}


@pytest.mark.parametrize("require", [False, True])
def test_no_zellij_on_path(swarm, fz, require):
    env = fz.env("0.45.0", **FAST)
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if "fake-zellij" not in p)
    res = run(swarm, env, *(["--require-zellij"] if require else []))
    rows = swarm.tasks()
    if require:
        assert res.code == 1
        assert {r["reason"] for r in rows.values()} == {"zellij_multiplexer_missing"}
        assert ledger(swarm) == []
    else:
        assert res.code == 0, res.stderr
        assert ledger(swarm) == sorted(f"t{i}" for i in range(TASKS))
        assert [e["code"] for e in events(swarm.latest()) if e["event"] == "warning"] == ["multiplexer_missing"]
