"""End to end: `zellij-swarm run` gives every task exactly the right outcome, and every
record of it (status --json, summary.json, exit.json, events, JUnit, logs) agrees."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from swarmtest import run_processes, validate

MIXED = """
[swarm]
name = "mixed"
jobs = 4

[[task]]
name = "ok"
cmd = "echo ok-out"

[[task]]
name = "three"
cmd = "echo three-out; exit 3"

[[task]]
name = "sigterm"
argv = ["sh", "-c", "echo sigterm-out; kill -TERM $$"]

[[task]]
name = "slow"
cmd = "echo slow-out; sleep 30"
timeout = "500ms"

[[task]]
name = "after-ok"
cmd = "echo after-ok-out"
after = ["ok"]

[[task]]
name = "after-three"
cmd = "echo never"
after = ["three"]

[[task]]
name = "flaky"
cmd = 'echo "flaky-out $ZELLIJ_SWARM_ATTEMPT"; [ "$ZELLIJ_SWARM_ATTEMPT" -ge 2 ]'
retries = 2

[[task]]
name = "missing"
argv = ["zsw-definitely-not-a-command"]
"""

EXPECTED = {
    # name: (status, exit_code, signal, attempts, reason)
    "ok": ("succeeded", 0, None, 1, None),
    "three": ("failed", 3, None, 1, None),
    "sigterm": ("failed", 143, "SIGTERM", 1, None),
    "slow": ("timed_out", 143, "SIGTERM", 1, "timeout"),
    "after-ok": ("succeeded", 0, None, 1, None),
    "after-three": ("skipped", None, None, 0, "dependency_failed"),
    "flaky": ("succeeded", 0, None, 2, None),
    "missing": ("failed", 127, None, 1, None),
}


def _check(rows: dict[str, dict]) -> None:
    for name, (status, code, sig, attempts, reason) in EXPECTED.items():
        row = rows[name]
        assert (row["status"], row["exit_code"], row["signal"], row["attempts"], row["reason"]) == (
            status, code, sig, attempts, reason), (name, row)


def test_mixed_swarm_outcomes_agree_everywhere(swarm):
    swarm.write("mixed.toml", MIXED)
    res = swarm("run", "mixed.toml", "--junit", "report.xml", "--json")
    assert res.code == 1, res.stderr
    assert "Traceback" not in res.stderr

    printed = json.loads(res.stdout)
    validate(printed, "status")
    _check({t["name"]: t for t in printed["tasks"]})
    _check(swarm.tasks())
    assert printed["state"] == "finished"

    status = swarm("status", "--json")
    assert status.code == 0
    snap = json.loads(status.stdout)
    validate(snap, "status")
    _check({t["name"]: t for t in snap["tasks"]})

    # every attempt's exit record (its outcome event: exit.json files are folded away) validates
    # and matches its history entry
    run = swarm.latest()
    outcomes = {(e["slot"], e["gen"]): e for e in map(json.loads, (run / "events.jsonl").read_text().splitlines())
                if e["event"] in ("worker_completed", "worker_failed")}
    for task in snap["tasks"]:
        for a in task["history"]:
            e = outcomes[(a["slot"], a["generation"])]
            rec = {k: e[k] for k in ("code", "signal", "started_at", "ended_at", "pid")}
            validate(rec, "exit")
            assert rec["code"] == a["exit_code"]
            assert rec["started_at"] <= rec["ended_at"]
    flaky = next(t for t in snap["tasks"] if t["name"] == "flaky")
    assert [a["status"] for a in flaky["history"]] == ["failed", "succeeded"]

    for line in (run / "events.jsonl").read_text().splitlines():
        validate(json.loads(line), "event")
    validate(json.loads((run / "run.json").read_text()), "run")

    suite = ET.parse(swarm.cwd / "report.xml").getroot()
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert set(cases) == set(EXPECTED)
    kinds = {n: [child.tag for child in c if child.tag not in ("system-out", "system-err")] for n, c in cases.items()}
    assert kinds == {"ok": [], "three": ["failure"], "sigterm": ["failure"], "slow": ["failure"], "after-ok": [],
                     "after-three": ["skipped"], "flaky": [], "missing": ["failure"]}
    assert suite.get("failures") == "4" and suite.get("skipped") == "1" and suite.get("errors") == "0"
    assert "three-out" in cases["three"].find("system-out").text
    assert "not found" in cases["missing"].find("system-err").text  # a headless worker's stderr, kept apart

    for name, expected in [("ok", "ok-out\n"), ("three", "three-out\n"), ("sigterm", "sigterm-out\n"),
                           ("after-ok", "after-ok-out\n"), ("flaky", "flaky-out 2\n")]:
        logs = swarm("logs", printed["run_id"], name)
        assert logs.code == 0 and logs.stdout == expected, (name, logs)
    assert swarm("logs", printed["run_id"], "flaky", "--attempt", "1").stdout == "flaky-out 1\n"
    assert "slow-out" in swarm("logs", printed["run_id"], "slow").stdout
    assert "not found" in swarm("logs", printed["run_id"], "missing").stderr
    assert run_processes(printed["run_id"]) == []


def test_all_succeeded_exits_zero_and_group_output_is_per_task(swarm):
    swarm.write("cmds.txt", "# comment\n\necho one\necho two; echo two-b\n")
    res = swarm("run", "cmds.txt", "-j", "2", "--output", "group")
    assert res.code == 0, res.stderr
    chunks = res.stdout.split("one\n")
    assert "two\ntwo-b\n" in res.stdout and len(chunks) == 2
    assert set(swarm.tasks()) == {"task-1", "task-2"}


def test_tag_mode_prefixes_each_line(swarm):
    swarm.write("cmds.txt", "printf 'a\\nb\\n'\n")
    res = swarm("run", "cmds.txt", "--output", "tag")
    assert res.stdout == "[task-1] a\n[task-1] b\n"


def test_stdin_commands_work_like_xargs(swarm):
    res = swarm("run", "-j", "3", "--output", "quiet", "-", input="true\nexit 4\n")
    assert res.code == 1 and res.stderr == ""
    rows = swarm.tasks()
    assert rows["task-1"]["status"] == "succeeded" and rows["task-2"]["exit_code"] == 4


def test_empty_input_is_a_notice_and_exit_zero(swarm):
    res = swarm("run", "-", input="\n# nothing\n")
    assert res.code == 0
    assert res.stderr.strip() == "zellij-swarm: <stdin>: no tasks to run"
    assert swarm.runs() == []


def test_priority_then_file_order_with_one_slot(swarm):
    swarm.write("p.toml", """
[[task]]
name = "low"
cmd = "true"
[[task]]
name = "high"
cmd = "true"
priority = 5
[[task]]
name = "mid-a"
cmd = "true"
priority = 1
[[task]]
name = "mid-b"
cmd = "true"
priority = 1
""")
    assert swarm("run", "p.toml", "-j", "1").code == 0
    order = sorted(swarm.tasks().values(), key=lambda t: t["generation"])
    assert [t["name"] for t in order] == ["high", "mid-a", "mid-b", "low"]


def test_cwd_missing_fails_that_task_only(swarm):
    swarm.write("c.toml", """
[[task]]
name = "make-dir"
cmd = "mkdir later"
[[task]]
name = "uses-it"
cmd = "pwd"
cwd = "later"
after = ["make-dir"]
[[task]]
name = "nowhere"
cmd = "true"
cwd = "does/not/exist"
""")
    res = swarm("run", "c.toml")
    assert res.code == 1
    rows = swarm.tasks()
    assert rows["uses-it"]["status"] == "succeeded"
    assert (rows["nowhere"]["status"], rows["nowhere"]["reason"], rows["nowhere"]["exit_code"]) == (
        "failed", "cwd_missing", None)
    assert swarm("logs", swarm.latest().name, "uses-it").stdout.strip() == str(swarm.cwd / "later")


def test_worker_environment(swarm):
    cmd = ('echo "$ZELLIJ_SWARM_TASK|$ZELLIJ_SWARM_TASK_ID|$ZELLIJ_SWARM_SLOT|$ZELLIJ_SWARM_GENERATION'
           '|$ZELLIJ_SWARM_ATTEMPT|$MY_VAR|$PYTHONUNBUFFERED|${TMUX_PANE-unset}"; '
           'head -n 1 "$ZELLIJ_SWARM_HEARTBEAT"; test -d "$ZELLIJ_SWARM_ARTIFACT_DIR"; read x || echo stdin-empty')
    swarm.write("e.toml", f"""
[swarm]
jobs = 1
[[task]]
name = "env"
cmd = '{cmd}'
env = {{ MY_VAR = "it's $HOME" }}
""")
    from swarmtest import clean_env

    res = swarm("run", "e.toml", env=clean_env(TMUX_PANE="%99"))
    assert res.code == 0, res.stderr
    run_id = swarm.latest().name
    out = swarm("logs", run_id, "env").stdout.splitlines()
    assert (out[0], out[2]) == ("env|t1|1|1|1|it's $HOME|1|unset", "stdin-empty")
    first = json.loads(out[1])  # the launch heartbeat, as the worker saw it while it ran
    assert first["event"] == "started" and first["pane_id"] is None and isinstance(first["pid"], int)
    # once its outcome is logged, the generation's files are folded away but for its output
    assert [p.name for p in (swarm.latest() / "slots/slot-1/gen-1").iterdir()] == ["output.log"]
    ended = [json.loads(line) for line in (swarm.latest() / "events.jsonl").read_text().splitlines()
             if '"worker_completed"' in line]
    assert [(e["code"], e["pid"]) for e in ended] == [(0, first["pid"])]
