"""Groups bound how many of their tasks run at once, and pause stops new tasks (issue 15,
parts 3 and 4): driven through the CLI, headless and in tmux."""

from __future__ import annotations

import json
from typing import Any

import pytest
from swarmtest import Running, full, validate, wait_until

GPU_SWARM = """
[swarm]
jobs = 4
[group.gpu]
jobs = 2
[[task]]
name = "g1"
cmd = "while [ ! -e go ]; do sleep 0.05; done"
group = "gpu"
priority = 5
[[task]]
name = "g2"
cmd = "while [ ! -e go ]; do sleep 0.05; done"
group = "gpu"
priority = 5
[[task]]
name = "g3"
cmd = "true"
group = "gpu"
priority = 5
[[task]]
name = "c1"
cmd = "true"
[[task]]
name = "c2"
cmd = "true"
"""


def snapshot(swarm, run) -> dict[str, Any]:
    try:
        return json.loads(swarm("status", "--json", run.name).stdout)
    except ValueError:
        return {}


def rows(snap: dict[str, Any]) -> dict[str, str]:
    return {t["name"]: t["status"] for t in snap.get("tasks", [])}


@pytest.mark.parametrize("backend", ["headless", full("tmux")])
def test_a_full_group_holds_its_own_tasks_only(swarm, request, backend):
    """gpu may run 2 at once: its third waits although slots are free, while the tasks of
    no group (ranked lower) run at once."""
    env = None
    if backend == "tmux":
        from tmuxtest import outside_env

        env = outside_env(request.getfixturevalue("tmux"))
    swarm.write("g.toml", GPU_SWARM)
    with Running(swarm, "g.toml", "--backend", backend, "--output", "quiet", env=env) as r:
        run = r.run
        wait_until(lambda: rows(snapshot(swarm, run)) == {"g1": "running", "g2": "running", "g3": "pending",
                                                        "c1": "succeeded", "c2": "succeeded"},
                   what="two gpu tasks running, the third waiting, the others done")
        snap = snapshot(swarm, run)
        validate(snap, "status")
        assert snap["groups"] == [{"name": "gpu", "jobs": 2, "running": 2}]
        text = swarm("status", run.name).stdout
        assert "group gpu 2/2 running" in text and " GROUP " in text.splitlines()[2]
        (swarm.cwd / "go").touch()
        assert r.proc.wait(timeout=60) == 0
    done = {t["name"]: t for t in snapshot(swarm, run)["tasks"]}
    assert done["g3"]["started_at"] >= min(done["g1"]["ended_at"], done["g2"]["ended_at"]) - 0.05


def test_a_group_above_the_runs_jobs_is_capped_with_a_warning(swarm):
    swarm.write("g.toml", "[swarm]\njobs = 2\n[group.io]\njobs = 8\n[[task]]\nname = \"a\"\ncmd = \"true\"\n"
                          "group = \"io\"\n")
    assert swarm("run", "g.toml", "--backend", "headless", "--output", "quiet").code == 0
    snap = json.loads(swarm("status", "--json").stdout)
    assert snap["groups"] == [{"name": "io", "jobs": 2, "running": 0}]
    [warning] = [w for w in snap["warnings"] if w["code"] == "group_capped"]
    assert "jobs 8 is more than the run's 2 slots" in warning["message"]


@pytest.mark.parametrize("text,message", [
    ('[[task]]\nname = "a"\ncmd = "true"\ngroup = "gpu"\n', "t.toml:1: task 'a': unknown group 'gpu' "
                                                            "(no [group.NAME] is defined)"),
    ('[group.gpu]\njobs = 1\n[[task]]\nname = "a"\ncmd = "true"\ngroup = "gpx"\n',
     "t.toml:3: task 'a': unknown group 'gpx' (did you mean 'gpu'?)"),
    full('[group.gpu]\njobs = 0\n', "t.toml:2: [group.gpu]: jobs must be an integer ≥ 1"),
    full('[group.gpu]\njob = 1\n', "[group.gpu]: unknown key 'job' (did you mean 'jobs'?)"),
    # the key's own line, not its table's header (as a [[task]]'s keys are named)
    ('[group.gpu]\n\njobs = 2\njbos = 3\n', "t.toml:4: [group.gpu]: unknown key 'jbos' (did you mean 'jobs'?)"),
    ('[[task]]\ncmd = "true"\n[group.g]\n# slots\njobs = 0\n', "t.toml:5: [group.g]: jobs must be an integer ≥ 1"),
    ('[group.gpu]\njobs = 1\n[[task]]\nname = "a"\ncmd = "true"\ngroup = 3\n',
     "task 'a': group must be the name of a [group.NAME] table"),
])
def test_bad_groups_are_one_line_errors_before_anything_runs(swarm, text, message):
    swarm.write("t.toml", text)
    res = swarm("run", "t.toml", "--backend", "headless")
    assert res.code == 2 and res.stderr.count("\n") == 1 and message in res.stderr, res.stderr
    assert swarm.runs() == []


def test_an_addition_naming_an_unknown_group_is_refused(swarm):
    swarm.write("g.toml", "[group.gpu]\njobs = 1\n[[task]]\nname = \"w\"\ncmd = \"while [ ! -e go ]; do sleep 0.05;"
                          " done\"\n")
    with Running(swarm, "g.toml", "--backend", "headless", "--output", "quiet") as r:
        run = r.run
        wait_until(lambda: rows(snapshot(swarm, run)).get("w") == "running", what="the worker")
        swarm.write("more.toml", '[[task]]\nname = "x"\ncmd = "true"\ngroup = "nope"\n')
        res = swarm("add", run.name, "more.toml")
        assert res.code != 0 and "unknown group 'nope'" in res.stderr, res.stderr
        swarm.write("ok.toml", '[[task]]\nname = "y"\ncmd = "true"\ngroup = "gpu"\n')
        assert swarm("add", run.name, "ok.toml").code == 0
    assert rows(snapshot(swarm, run)) == {"w": "succeeded", "y": "succeeded"}


def test_pause_starts_nothing_new_survives_a_resume_and_unpause_goes_on(swarm):
    import signal

    from swarmtest import clean_env

    swarm.write("p.toml", '[swarm]\njobs = 1\n[[task]]\nname = "a"\ncmd = "while [ ! -e go ]; do sleep 0.05; done"\n'
                          '[[task]]\nname = "b"\ncmd = "true"\n')
    with Running(swarm, "p.toml", "--backend", "headless", "--output", "quiet") as r:
        run = r.run
        wait_until(lambda: rows(snapshot(swarm, run)).get("a") == "running", what="a running")
        res = swarm("pause", run.name)
        assert res.code == 0 and "paused run" in res.stderr, res.stderr
        (swarm.cwd / "go").touch()
        wait_until(lambda: rows(snapshot(swarm, run)).get("a") == "succeeded", what="a done")
        # an answered addition proves the loop turned (and would have started b) since a ended
        assert swarm("add", run.name, "--name", "c", "--", "true").code == 0
        # the snapshot follows within its interval
        snap = wait_until(lambda: _listing(snapshot(swarm, run), "c"), what="c in the snapshot")
        assert rows(snap) == {"a": "succeeded", "b": "pending", "c": "pending"}
        assert snap["paused"] == {"run": True, "groups": []}
        assert "paused: no new task starts" in swarm("status", run.name).stdout
        board = swarm("board", run.name, "--once", env=clean_env(COLUMNS="80", LINES="10")).stdout
        assert board.splitlines()[0].startswith("swarm · running · paused · ")
        # killed while paused, resumed: still paused
        r.proc.send_signal(signal.SIGKILL)
        r.proc.wait(timeout=10)
        r.proc = swarm.popen("resume", run.name, "--output", "quiet")
        wait_until(lambda: snapshot(swarm, run).get("state") == "running", what="resumed")
        assert swarm("add", run.name, "--name", "d", "--", "true").code == 0
        snap = wait_until(lambda: _listing(snapshot(swarm, run), "d"), what="d in the snapshot")
        assert rows(snap) == {"a": "succeeded", "b": "pending", "c": "pending", "d": "pending"}
        res = swarm("unpause", run.name)
        assert res.code == 0, res.stderr
        assert r.proc.wait(timeout=60) == 0
    assert set(rows(snapshot(swarm, run)).values()) == {"succeeded"}


def test_pause_of_one_group_holds_it_only(swarm):
    swarm.write("p.toml", '[swarm]\njobs = 2\n[group.gpu]\njobs = 1\n'
                          '[[task]]\nname = "w"\ncmd = "while [ ! -e go ]; do sleep 0.05; done"\n'
                          '[[task]]\nname = "g"\ncmd = "true"\ngroup = "gpu"\npriority = 9\n'
                          '[[task]]\nname = "c"\ncmd = "while [ ! -e go2 ]; do sleep 0.05; done"\n')
    with Running(swarm, "p.toml", "--backend", "headless", "--output", "quiet", "-j", "1") as r:
        run = r.run
        # -j 1: g (ranked first) runs first; then w
        wait_until(lambda: rows(snapshot(swarm, run)).get("w") == "running", what="w running")
        assert swarm("pause", run.name, "--group", "nope").code == 2
        assert swarm("pause", run.name, "--group", "gpu").code == 0
        swarm.write("more.toml", '[[task]]\nname = "g2"\ncmd = "true"\ngroup = "gpu"\npriority = 9\n')
        assert swarm("add", run.name, "more.toml").code == 0
        (swarm.cwd / "go").touch()
        # w ends: c (no group) runs although g2 ranks higher, its group being paused
        wait_until(lambda: rows(snapshot(swarm, run)).get("c") == "running", what="c running")
        assert rows(snapshot(swarm, run))["g2"] == "pending"
        assert snapshot(swarm, run)["paused"] == {"run": False, "groups": ["gpu"]}
        assert swarm("unpause", run.name, "--group", "gpu").code == 0
        (swarm.cwd / "go2").touch()
        assert r.proc.wait(timeout=60) == 0


def test_pause_of_an_ended_run_is_refused(swarm):
    swarm.write("t.txt", "true\n")
    swarm("run", "t.txt", "--backend", "headless", "--output", "quiet")
    res = swarm("pause", swarm.latest().name)
    assert res.code == 2 and "is finished: nothing to pause" in res.stderr, res.stderr


def test_a_run_that_ended_paused_is_retried_unpaused_and_offers_no_unpause(swarm):
    """A run paused (and a group of it) until it ended kept its pauses: `status` told to run
    `zellij-swarm unpause RUN`, which an ended run refuses, and `retry` ran nothing, silently,
    for ever — its tasks waited for an unpause. A pause holds a running run's dispatch; the
    run's end lifts it."""
    swarm.write("p.toml", '[swarm]\njobs = 1\n[group.gpu]\njobs = 1\n'
                          '[[task]]\nname = "a"\ngroup = "gpu"\n'
                          'cmd = "while [ ! -e go ]; do sleep 0.05; done; test -e again || { touch again; exit 1; }"\n')
    with Running(swarm, "p.toml", "--backend", "headless", "--output", "quiet") as r:
        run = r.run
        wait_until(lambda: rows(snapshot(swarm, run)).get("a") == "running", what="a running")
        assert swarm("pause", run.name).code == 0
        assert swarm("pause", run.name, "--group", "gpu").code == 0
        (swarm.cwd / "go").touch()
        assert r.proc.wait(timeout=60) == 1
    shown = swarm("status", run.name).stdout
    assert "unpause" not in shown and "paused" not in shown, shown
    assert swarm("unpause", run.name).code == 2  # (what it would have offered)
    res = swarm("retry", run.name, "--output", "quiet", timeout=60)
    assert res.code == 0, res.stderr
    assert rows(snapshot(swarm, run)) == {"a": "succeeded"}


FILTERED = """
[swarm]
jobs = 4
[group.gpu]
jobs = 2
[[task]]
name = "train"
cmd = "while [ ! -e go ]; do sleep 0.05; done"
group = "gpu"
tags = ["slow"]
[[task]]
name = "eval"
cmd = "while [ ! -e go ]; do sleep 0.05; done"
group = "gpu"
[[task]]
name = "lint"
cmd = "while [ ! -e go ]; do sleep 0.05; done"
tags = ["slow", "ci"]
[[task]]
name = "fmt"
cmd = "while [ ! -e go ]; do sleep 0.05; done"
tags = ["ci"]
"""


def test_status_cancel_and_logs_take_a_group_or_tags(swarm):
    swarm.write("f.toml", FILTERED)
    with Running(swarm, "f.toml", "--backend", "headless", "--output", "quiet") as r:
        run = r.run
        wait_until(lambda: set(rows(snapshot(swarm, run)).values()) == {"running"}, what="all four running")
        listed = json.loads(swarm("status", run.name, "--json", "--group", "gpu").stdout)["tasks"]
        assert [t["name"] for t in listed] == ["train", "eval"] and {t["group"] for t in listed} == {"gpu"}
        text = swarm("status", run.name, "--tag", "slow").stdout
        assert "train" in text and "lint" in text and "eval" not in text and "fmt" not in text
        assert swarm("status", run.name, "--group", "cpu").code == 2
        listing = swarm("logs", run.name, "--tag", "ci").stdout
        assert "lint" in listing and "fmt" in listing and "train" not in listing
        res = swarm("cancel", run.name, "--tag", "slow", "--group", "gpu")
        assert res.code == 0 and "cancelled in run" in res.stderr and "train" in res.stderr, res.stderr
        wait_until(lambda: rows(snapshot(swarm, run))["train"] == "cancelled", what="train cancelled")
        # A selection that chooses nothing is an error to every command that takes it: a
        # typo'd tag must not read as "no such tasks" (an empty table, exit 0).
        for command in ("cancel", "status", "logs"):
            res = swarm(command, run.name, "--tag", "none-such")
            assert res.code == 2 and "has no task with tag 'none-such'" in res.stderr, (command, res.stderr)
        res = swarm("status", run.name, "--json", "--group", "gpu", "--tag", "ci")
        assert res.code == 2 and "has no task in group 'gpu' with tag 'ci'" in res.stderr, res.stderr
        (swarm.cwd / "go").touch()
        assert r.proc.wait(timeout=60) == 1  # a task was cancelled
    assert rows(snapshot(swarm, run)) == {"train": "cancelled", "eval": "succeeded", "lint": "succeeded",
                                          "fmt": "succeeded"}


def _listing(snap, task: str):
    """``snap`` once it lists ``task`` (None before)."""
    return snap if task in rows(snap) else None


def test_a_selection_of_a_big_run_lists_what_needs_a_look_and_reads_only_added_tasks(swarm, monkeypatch):
    """``status --tag`` of a big run listed every chosen row (50,000 lines of a 100,000-task
    run) and parsed its whole event log to find the tasks added while it ran: four seconds
    and 700 MB. A selection of over a screen of tasks now lists, as the whole run does, the
    running and failed ones (``--all``: every one); the event log's other lines stay unparsed."""
    from zellij_swarm.commands import status as views
    from zellij_swarm.records import log
    from zellij_swarm.records.rundir import RunPaths

    swarm.write("big.toml", "".join(f'[[task]]\nname = "n{i}"\ncmd = "exit {int(i in (4, 150))}"\n'
                                    f'tags = ["{"even" if i % 2 == 0 else "odd"}"]\n' for i in range(240)))
    res = swarm("run", "big.toml", "-j", "8", "--backend", "headless", "--output", "quiet")
    assert res.code == 1, res.stderr
    text = swarm("status", "--tag", "even").stdout
    listed = [line.split()[0] for line in text.splitlines() if line.startswith("  n")]
    assert listed == ["n4", "n150"] and "(118 tasks not listed" in text, text
    every = swarm("status", "--all", "--tag", "even").stdout
    assert [line.split()[0] for line in every.splitlines() if line.startswith("  n")] == [
        f"n{i}" for i in range(0, 240, 2)]
    assert len(json.loads(swarm("status", "--json", "--tag", "odd").stdout)["tasks"]) == 120
    run = RunPaths(swarm.latest())
    added = {"ts": 1.0, "event": "task_added", "task": "late", "id": "t241", "source": "add",
             "spec": {"name": "late", "cmd": "true", "tags": ["even"]}}
    with run.events.open("a") as f:
        f.write(json.dumps(added, separators=(",", ":")) + "\n")
    parsed: list[str] = []
    real = log.jsontext.loads  # every record's parse: the event log's lines are those with an event in them

    def parse(text: str | bytes) -> object:
        if b'"event":' in (text.encode() if isinstance(text, str) else text):
            parsed.append(str(text))
        return real(text)

    monkeypatch.setattr(log.jsontext, "loads", parse)
    specs = views.task_specs_of(run)
    assert len(specs) == 241 and specs[-1].tags == ("even",) and len(parsed) == 1


def test_a_groups_bound_holds_for_its_tasks_that_a_resume_queues_again(swarm):
    """A resumed run puts the tasks that never ran back into its queue as it held them: their
    group comes with them, and its bound holds — one ``gpu`` task at a time, the one running at
    the crash adopted, the others after it — while a task of no group runs beside them."""
    import signal

    ledger = swarm.cwd / "ledger"
    step = f'echo \\"start $0\\" >> {ledger}; while [ ! -e go ]; do sleep 0.02; done; echo \\"end $0\\" >> {ledger}'
    swarm.write("g.toml", "[swarm]\njobs = 3\n[group.gpu]\njobs = 1\n" + "".join(
        f'[[task]]\nname = "{name}"\ncmd = "sh -c \'{step}\' {name}"\n' + ('group = "gpu"\n' if name != "free" else "")
        for name in ("g1", "g2", "g3", "free")))
    with Running(swarm, "g.toml", "--backend", "headless", "--output", "quiet") as r:
        run = r.run
        wait_until(lambda: ledger.exists() and ledger.read_text().count("start") == 2, what="g1 and free running")
        r.proc.send_signal(signal.SIGKILL)
        r.proc.wait(timeout=10)
        r.proc = swarm.popen("resume", run.name, "--output", "quiet")
        wait_until(lambda: snapshot(swarm, run).get("state") == "running", what="resumed")
        (swarm.cwd / "go").touch()
        assert r.proc.wait(timeout=60) == 0
    lines = ledger.read_text().splitlines()
    gpu = [line for line in lines if line.split()[1] != "free"]
    assert gpu == ["start g1", "end g1", "start g2", "end g2", "start g3", "end g3"], lines
    assert sorted(lines) == sorted(f"{what} {name}" for what in ("start", "end") for name in ("g1", "g2", "g3", "free"))
