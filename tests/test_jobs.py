"""Job views that never lie, the idle watchdog, and live additions (issue 6)."""

from __future__ import annotations

import json

import pytest
from swarmtest import GATE, kill_run_processes, run_processes, validate, wait_until
from tmuxtest import outside_env


@pytest.fixture(params=["headless", "tmux"])
def backend(request) -> tuple[tuple[str, ...], dict | None]:
    """The same job-view tests headless and with workers in live tmux panes."""
    if request.param == "headless":
        return ("--backend", "headless"), None
    t = request.getfixturevalue("tmux")
    return ("--backend", "tmux", "--ui", "live"), outside_env(t)


def status_json(swarm, *args: str) -> dict:
    res = swarm("status", "--json", *args)
    assert res.code == 0, res.stderr
    snap = json.loads(res.stdout)
    validate(snap, "status")
    return snap


def test_finished_row_is_frozen_while_its_slot_runs_another_task(swarm, backend):
    swarm.write("s.toml", """
[swarm]
jobs = 1
[[task]]
name = "A"
cmd = "echo a; exit 4"
[[task]]
name = "B"
cmd = "i=0; until [ -e gate ]; do i=$((i+1)); echo line-$i; sleep 0.05; done"
""")
    args, env = backend
    proc = swarm.popen("run", "s.toml", "--output", "quiet", *args, env=env)
    try:
        run = swarm.started()
        b_log = run / "slots/slot-1/gen-2/output.log"
        wait_until(lambda: b_log.exists() and b_log.read_text().count("\n") >= 3, what="B printing")
        wait_until(lambda: any(t["name"] == "B" and t["status"] == "running" for t in status_json(swarm)["tasks"]),
                   what="B running in the snapshot")
        first = status_json(swarm)
        wait_until(lambda: b_log.read_text().count("\n") >= 20, what="B printing more")
        swarm.open_gate()  # B prints until the test has seen it running; its end is the next snapshot
        second = wait_until(lambda: (s := status_json(swarm)) and s["updated_at"] > first["updated_at"] and s,
                            what="a newer snapshot")
        a1, a2 = (next(t for t in s["tasks"] if t["name"] == "A") for s in (first, second))
        assert a1 == a2
        assert (a1["status"], a1["exit_code"], a1["slot"], a1["generation"]) == ("failed", 4, 1, 1)
        assert a1["pid"] and a1["started_at"] <= a1["ended_at"]
        b1, b2 = (next(t for t in s["tasks"] if t["name"] == "B") for s in (first, second))
        assert (b1["slot"], b1["generation"]) == (1, 2) and b1["pid"] != a1["pid"]
        assert b1["started_at"] >= a1["ended_at"]  # B's elapsed time counts from its own start
        assert b2["duration_s"] > b1["duration_s"]
        assert [s["slot"] for s in first["slots"]] == [1]
        assert proc.wait(timeout=30) == 1
        # after the run, reloaded from disk, A's row is still the one recorded when it ended
        final = {t["name"]: t for t in status_json(swarm)["tasks"]}
        assert final["A"] == a1
    finally:
        proc.kill()
        kill_run_processes(swarm.latest().name)


def test_status_all_differs_by_idle_and_closed_slots(swarm):
    swarm.write("s.txt", "true\ntrue\n")
    swarm("run", "s.txt", "-j", "4")
    default, everything = status_json(swarm), status_json(swarm, "--all")
    assert default["slots"] == []
    assert [s["slot"] for s in everything["slots"]] == [1, 2, 3, 4]
    assert default["counts"] == everything["counts"] and default["tasks"] == everything["tasks"]


def test_idle_timeout_kill_and_warn(swarm, backend):
    swarm.write("i.toml", """
[swarm]
jobs = 4
[[task]]
name = "silent"
cmd = "sleep 30"
idle_timeout = "1s"
[[task]]
name = "chatty"
cmd = "for i in $(seq 1 15); do echo tick; sleep 0.2; done"
idle_timeout = "1s"
[[task]]
name = "heartbeat-only"
cmd = 'for i in $(seq 1 15); do echo alive >> "$ZELLIJ_SWARM_HEARTBEAT"; sleep 0.2; done'
idle_timeout = "1s"
""")
    args, env = backend
    res = swarm("run", "i.toml", "--output", "quiet", *args, env=env)
    assert res.code == 1
    rows = swarm.tasks()
    assert (rows["silent"]["status"], rows["silent"]["reason"]) == ("timed_out", "idle_timeout")
    assert "no output and no heartbeat for" in rows["silent"]["warnings"][0]["message"]
    assert rows["chatty"]["status"] == "succeeded" and rows["chatty"]["warnings"] == []
    assert rows["heartbeat-only"]["status"] == "succeeded" and rows["heartbeat-only"]["warnings"] == []
    idle = [json.loads(line) for line in (swarm.latest() / "events.jsonl").read_text().splitlines()
            if '"idle_timeout"' in line and '"event":"idle_timeout"' in line]
    assert [e["task"] for e in idle] == ["silent"] and idle[0]["silence_s"] > 1.0

    swarm.write("w.toml", """
[[task]]
name = "quiet"
cmd = "sleep 1.6; echo done"
idle_timeout = "0.5s"
""")
    res = swarm("run", "w.toml", "--idle-policy", "warn", "--output", "quiet", *args, env=env)
    assert res.code == 0
    summary = swarm.summary()
    assert [w["code"] for w in summary["warnings"]] == ["idle_timeout"]
    assert summary["tasks"][0]["status"] == "succeeded"


def test_add_during_a_run_and_followups_run_once(swarm):
    # the first task holds the run open until the addition is in: a gate, not a race with 2 s of work
    swarm.write("twenty.txt", f"{GATE}\n" + "sleep 0.1\n" * 19)
    proc = swarm.popen("run", "twenty.txt", "-j", "2", "--output", "quiet")
    try:
        run = swarm.started()
        wait_until(lambda: (run / "slots/slot-1/gen-1/claim").exists(), what="first worker")
        swarm.write("five.txt", "echo extra\n" * 5)
        res = swarm("add", run.name, "five.txt")
        assert res.code == 0, res.stderr
        swarm.open_gate()
        assert proc.wait(timeout=60) == 0
        rows = swarm.tasks()
        assert len(rows) == 25 and all(r["status"] == "succeeded" for r in rows.values())
        assert run_processes(run.name) == []
    finally:
        proc.kill()
        kill_run_processes(swarm.latest().name)

    parent = ("""echo '{"cmd": "echo child >> ledger"}' >> "$ZELLIJ_SWARM_ARTIFACT_DIR/followups.jsonl"; """
              """echo 'not json' >> "$ZELLIJ_SWARM_ARTIFACT_DIR/followups.jsonl"; """
              """[ "$ZELLIJ_SWARM_ATTEMPT" -ge 2 ]""")
    swarm.write("f.toml", f"""
[[task]]
name = "parent"
cmd = '''{parent}'''
retries = 1
""")
    res = swarm("run", "f.toml", "--output", "quiet")
    assert res.code == 0, res.stderr
    assert (swarm.cwd / "ledger").read_text() == "child\n"
    rows = swarm.tasks()
    assert rows["parent"]["attempts"] == 2 and rows["parent/followup-1"]["status"] == "succeeded"
    invalid = [w for w in swarm.summary()["warnings"] if w["code"] == "invalid_followup"]
    assert len(invalid) == 2 and "invalid follow-up" in invalid[0]["message"]


def test_a_followup_named_like_another_task_is_not_added_and_said_so(swarm):
    """A first attempt's follow-up that takes another task's name (or its file's own twice) was
    dropped without a word: an agent's next step lost. It is still not added — the name is
    the other task's — but a warning names it; a retry writing its follow-ups again stays quiet."""
    lines = ['{"name": "other", "cmd": "echo stolen >> ledger"}', '{"name": "next", "cmd": "echo next >> ledger"}',
             '{"name": "next", "cmd": "echo twice >> ledger"}']
    parent = "".join(f"""echo '{line}' >> "$ZELLIJ_SWARM_ARTIFACT_DIR/followups.jsonl"; """ for line in lines)
    swarm.write("f.toml", f"""
[[task]]
name = "parent"
cmd = '''{parent}[ "$ZELLIJ_SWARM_ATTEMPT" -ge 2 ]'''
retries = 1
[[task]]
name = "other"
cmd = "echo other >> ledger"
after = ["parent"]
""")
    res = swarm("run", "f.toml", "--output", "quiet")
    assert res.code == 0, res.stderr
    assert sorted((swarm.cwd / "ledger").read_text().splitlines()) == ["next", "other"]
    [warning] = [w for w in swarm.summary()["warnings"] if w["code"] == "invalid_followup"]
    assert warning["task"] == "parent" and "'other', 'next'" in warning["message"], warning


def test_add_is_refused_on_bad_input_and_finished_runs(swarm):
    swarm.write("a.txt", "true\n")
    swarm("run", "a.txt")
    res = swarm("add", swarm.latest().name, "--", "true")
    assert res.code == 2 and "is finished" in res.stderr and res.stderr.count("\n") == 1


def test_an_invalid_followup_names_its_file_and_line_once(tmp_path):
    """The warning said ``followups.jsonl:1: followups.jsonl:1: task …``."""
    from zellij_swarm.config import additions

    path = tmp_path / "followups.jsonl"
    path.write_text('{"cmd": 5}\n{"cmd": "x", "after": ["nope"]}\n[]\n')
    batch = additions.from_followups(path.read_bytes(), path, "p", ["p"], tmp_path)
    assert batch.errors == [f"{path}:1: task 'p/followup-1': cmd must be a string",
                            f"{path}:2: task 'p/followup-2': after names unknown task 'nope'",
                            f"{path}:3: invalid follow-up: not a JSON object"]
