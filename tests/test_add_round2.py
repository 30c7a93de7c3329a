"""``add`` to a running swarm (issue 10, defect 7): added tasks may depend on tasks already in
the run — those of its swarm file and those added while it runs — and ``add -- CMD`` takes
``--name``, ``--after`` and ``--priority``. Unknown names are still one-line errors, exit 2."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from subprocess import Popen

from swarmtest import kill_run_processes, wait_until

BASE = """
[[task]]
name = "a"
cmd = "while [ ! -e go ]; do sleep 0.05; done; echo a"
"""


@contextmanager
def first_task_running(swarm, file: str) -> Iterator[tuple[Popen, Path]]:
    """A run of ``file`` on one slot, once its first task has started (it waits for ``go``);
    whatever of it is left on the way out is ended."""
    proc = swarm.popen("run", file, "-j", "1", "--output", "quiet")
    run = swarm.started()
    try:
        wait_until(lambda: (run / "slots/slot-1/gen-1/claim").exists(), what="the first task started")
        yield proc, run
    finally:
        (swarm.cwd / "go").touch()
        proc.kill()
        kill_run_processes(run.name)


def test_additions_depend_on_tasks_already_in_the_run(swarm):
    swarm.write("base.toml", BASE)
    swarm.write("b.toml", '[[task]]\nname = "b"\ncmd = "echo b"\nafter = ["a"]\n')
    swarm.write("c.toml", '[[task]]\nname = "c"\ncmd = "echo c"\nafter = ["x"]\n')
    swarm.write("bad.toml", '[[task]]\nname = "d"\ncmd = "echo d"\nafter = ["nope"]\n')
    with first_task_running(swarm, "base.toml") as (proc, run):
        res = swarm("add", run.name, "b.toml")
        assert (res.code, res.stderr) == (0, f"zellij-swarm: added to run {run.name}: b\n")
        res = swarm("add", run.name, "--name", "x", "--after", "a", "--priority", "5", "--", "echo", "hi")
        assert (res.code, res.stderr) == (0, f"zellij-swarm: added to run {run.name}: x\n")
        res = swarm("add", run.name, "c.toml")  # x is in the run only through its event log
        assert (res.code, res.stderr) == (0, f"zellij-swarm: added to run {run.name}: c\n")
        res = swarm("add", run.name, "bad.toml")
        assert (res.code, res.stderr) == (
            2, "zellij-swarm: error: bad.toml:1: task 'd': after names unknown task 'nope'\n")
        res = swarm("add", run.name, "--name", "y", "--after", "zz", "--", "true")
        assert (res.code, res.stderr) == (2, "zellij-swarm: error: add: task 'y': after names unknown task 'zz'\n")
        res = swarm("add", run.name, "--name", "a", "--", "true")
        assert res.code == 2 and "duplicate task name 'a'" in res.stderr and res.stderr.count("\n") == 1
        (swarm.cwd / "go").touch()
        assert proc.wait(timeout=60) == 0, proc.stderr.read()
    rows = swarm.tasks()
    assert sorted(rows) == ["a", "b", "c", "x"] and {r["status"] for r in rows.values()} == {"succeeded"}
    # one slot: after a, x (priority 5) runs before b (priority 0), and c after x
    order = sorted(rows, key=lambda n: rows[n]["started_at"])
    assert order == ["a", "x", "b", "c"], order
    assert rows["x"]["started_at"] >= rows["a"]["ended_at"]
    added = {e["task"]: e["spec"] for e in map(json.loads, (run / "events.jsonl").read_text().splitlines())
             if e["event"] == "task_added"}
    assert (added["x"]["argv"], added["x"]["after"], added["x"]["priority"]) == (["echo", "hi"], ["a"], 5)
    assert added["b"]["after"] == ["a"] and added["c"]["after"] == ["x"]


def test_an_unnamed_task_of_an_added_file_is_named_by_the_run(swarm):
    """``add FILE.toml`` with a ``[[task]]`` that gives no name: it was named ``task-1`` by its
    place in the file, refused as a duplicate in any run with a ``task-1``."""
    swarm.write("base.txt", "while [ ! -e go ]; do sleep 0.05; done\n")
    swarm.write("more.toml", '[[task]]\ncmd = "echo unnamed"\n[[task]]\nname = "named"\ncmd = "echo named"\n')
    with first_task_running(swarm, "base.txt") as (proc, run):
        res = swarm("add", run.name, "more.toml")
        assert (res.code, res.stderr) == (0, f"zellij-swarm: added to run {run.name}: task-2, named\n")
        swarm.write("again.toml", '[[task]]\ncmd = "echo again"\n')
        res = swarm("add", run.name, "again.toml")
        assert (res.code, res.stderr) == (0, f"zellij-swarm: added to run {run.name}: task-4\n")
        (swarm.cwd / "go").touch()
        assert proc.wait(timeout=60) == 0
    assert list(swarm.tasks()) == ["task-1", "task-2", "named", "task-4"]


def test_an_addition_that_is_not_utf8_is_refused_and_the_run_goes_on(swarm):
    """``add -- echo $'\\xff'``: the supervisor died of it (UnicodeEncodeError packing the
    task), the run left interrupted. The CLI refuses it, exit 2, one line; a message that
    holds such text all the same is refused by the supervisor, which goes on."""
    from zellij_swarm.commands.control import ask
    from zellij_swarm.records.rundir import RunPaths

    swarm.write("base.toml", BASE)
    with first_task_running(swarm, "base.toml") as (proc, run):
        for args in (("--", "echo", "\udcff"), ("--name", "\udcff", "--", "true"),
                     ("--after", "a\udcff", "--", "true")):
            res = swarm("add", run.name, *args)
            assert res.code == 2 and "not valid UTF-8" in res.stderr and len(res.stderr.splitlines()) == 1, res
        answer, _ = ask(RunPaths(run), "add", timeout=15, tasks=[{"argv": ["echo", "\udcff"]}])
        assert answer is not None and not answer["ok"] and "not valid UTF-8" in answer["error"], answer
        (swarm.cwd / "go").touch()
        assert proc.wait(timeout=60) == 0, proc.stderr.read()
    assert {n: t["status"] for n, t in swarm.tasks().items()} == {"a": "succeeded"}
