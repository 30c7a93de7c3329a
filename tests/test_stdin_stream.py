"""Tasks from standard input as they arrive (SPEC §4.6, issue 22.12): the first runs while the
producer still writes, the pipe is read no further than the read-ahead (the producer blocks),
and a run stopped or killed before the end of its input says that the rest was never read."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
from swarmtest import GATE, clean_env, full, kill_run_processes, wait_until

from zellij_swarm.config.stream import InputStream, read_ahead

PRODUCER = r"""
import os, sys, time
marker, deadline = sys.argv[1], time.monotonic() + 30
print("touch " + marker, flush=True)
while not os.path.exists(marker):  # the first task ran while its input is still open
    if time.monotonic() > deadline:
        sys.exit("the first task never ran before the end of the input")
    time.sleep(0.01)
print("echo second >> ledger", flush=True)
"""


@pytest.mark.parametrize("mode", ["lines", "template", "null"])
def test_the_first_task_runs_while_the_producer_still_writes(swarm, mode):
    marker = swarm.cwd / "first-ran"
    args = {"lines": ["-"], "template": ["--template", "{}", "-"], "null": ["-0", "--template", "{}", "-"]}[mode]
    producer = PRODUCER if mode != "null" else PRODUCER.replace('flush=True)', 'end="\\0", flush=True)')
    script = f"{sys.executable} -c '{producer}' {marker} | {' '.join(swarm.cmd('run', '-j', '2', *args))}"
    res = subprocess.run(["sh", "-c", script], cwd=swarm.cwd, env=clean_env(), capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stderr
    assert (swarm.cwd / "ledger").read_text() == "second\n"
    assert [t["status"] for t in swarm.tasks().values()] == ["succeeded", "succeeded"]


def test_an_endless_producer_is_read_no_further_than_the_read_ahead(swarm):
    run_stdin = " ".join(swarm.cmd("run", "-j", "2", "-", "--output", "quiet"))
    proc = subprocess.Popen(["sh", "-c", f"yes 'sleep 30' | {run_stdin}"],
                            cwd=swarm.cwd, env=clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    run = swarm.started()
    try:
        events = run / "events.jsonl"

        def added() -> int:  # the tasks of the run's start, then those added as they were read
            if not (run / "run.json").exists() or not events.exists():
                return 0
            return len(json.loads((run / "run.json").read_text())["tasks"]) + events.read_text().count(
                '"event":"task_added"')

        # filled: the read-ahead waits, and the input was read on for the two that run (run.json
        # holds the first read-ahead before they are dispatched: 1,000 is not yet settled)
        wait_until(lambda: added() >= read_ahead(2) + 2, what="the read-ahead filled")
        supervisor = _supervisor(proc.pid)
        settled = added()
        deadline = time.monotonic() + 1.0  # reading on would add thousands within this second
        while time.monotonic() < deadline:
            assert added() == settled
            time.sleep(0.05)
        assert settled == read_ahead(2) + 2  # what waits, and what runs
        assert supervisor.memory_info().rss < 100 << 20
        supervisor.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) != 0
        assert "the rest never was" in proc.stderr.read()
        assert '"event":"input_unread"' in events.read_text()
    finally:
        proc.kill()
        kill_run_processes(run.name)


def test_resume_of_a_run_killed_while_reading_stdin_says_the_rest_was_never_read(swarm):
    run_stdin = " ".join(swarm.cmd("run", "-j", "2", "-", "--output", "quiet"))
    proc = subprocess.Popen(["sh", "-c", f"yes 'true' | {run_stdin}"],
                            cwd=swarm.cwd, env=clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    run = swarm.started()
    try:
        wait_until(lambda: (run / "run.json").exists() and (run / "events.jsonl").exists() and
                   (run / "events.jsonl").read_text().count("worker_completed") >= 10, what="some tasks done")
        _supervisor(proc.pid).kill()
        proc.wait(timeout=30)
        res = swarm("resume", run.name, "--output", "quiet")
        assert res.code == 0, res.stderr
        assert "the rest of that input was never read" in res.stderr
        assert {t["status"] for t in swarm.tasks().values()} == {"succeeded"}
    finally:
        proc.kill()
        kill_run_processes(run.name)


def test_a_bad_record_after_the_first_stops_the_reading_with_a_warning(tmp_path):
    r, w = __import__("os").pipe()
    __import__("os").write(w, b"echo a\n\xff\xfe\necho c\n")
    __import__("os").close(w)
    stream = InputStream.of_lines(r)
    assert [t.cmd for t in stream.first(1000)] == ["echo a"]
    assert stream.ended and stream.problem is not None and "not valid UTF-8" in stream.problem.message
    json.dumps(stream.problem.message)  # a plain line, for the warning


@pytest.mark.parametrize("mode, bad", [("lines", b"\xff\xfe"), ("lines", b"echo b\0c"),
                                       ("template", b"\xff\xfe"), ("null", b"\xff\xfe")])
def test_a_run_whose_input_stopped_at_a_bad_record_ends_with_exit_2(swarm, mode, bad):
    """The tasks read before a bad record run; the rest of the input never does. The run
    ended with 0 when those succeeded, as if the input had been whole: a pipeline took the
    tasks after it for done. It ends with 2 (bad input) and says so in one line."""
    separator = b"\0" if mode == "null" else b"\n"
    data = separator.join([b"echo a >> ledger", bad, b"echo c >> ledger", b""])
    args = {"lines": ["-"], "template": ["--template", "{}", "-"], "null": ["-0", "--template", "{}", "-"]}[mode]
    res = subprocess.run(swarm.cmd("run", "--output", "quiet", *args), cwd=swarm.cwd, env=clean_env(),
                         input=data, capture_output=True, timeout=60)
    assert res.returncode == 2, res
    assert (swarm.cwd / "ledger").read_text() == "a\n"
    error = [line for line in res.stderr.decode().splitlines() if line.startswith("zellij-swarm: error: ")]
    assert len(error) == 1 and "<stdin>" in error[0] and "the rest of the input is not read" in error[0], res
    assert [t["status"] for t in swarm.tasks().values()] == ["succeeded"]


def test_a_run_killed_after_its_input_stopped_at_a_bad_record_is_resumed_to_exit_2(swarm):
    """The supervisor killed after a bad record stopped the reading, before its end: the run
    its resume finishes ends with 2 and says what was not read, as the run would have; a
    retry after that ends as its own tasks do."""
    proc = subprocess.Popen(swarm.cmd("run", "--output", "quiet", "-"), cwd=swarm.cwd, env=clean_env(),
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert proc.stdin is not None
    proc.stdin.write(f"{GATE}; exit 3\n".encode() + b"\xff\n")
    proc.stdin.close()
    run = swarm.started()
    try:
        wait_until(lambda: b'"input_ended"' in (run / "events.jsonl").read_bytes(), what="the reading stopped")
        proc.kill()
        proc.wait(timeout=30)
        swarm.open_gate()
        res = swarm("resume", run.name, "--output", "quiet")
        assert res.code == 2, res
        error = [line for line in res.stderr.splitlines() if line.startswith("zellij-swarm: error: ")]
        assert len(error) == 1 and "<stdin>" in error[0] and "the rest of the input is not read" in error[0], res
        res = swarm("retry", run.name, "--output", "quiet")
        assert res.code == 1 and "zellij-swarm: error: " not in res.stderr, res
    finally:
        swarm.open_gate()
        kill_run_processes(run.name)


def _supervisor(shell: int) -> psutil.Process:
    """The ``zellij-swarm run`` below the test's shell (its launcher is a child of its own)."""
    for p in psutil.Process(shell).children():
        try:
            if "zellij_swarm" in " ".join(p.cmdline()):
                return p
        except psutil.NoSuchProcess:
            continue
    raise AssertionError("no supervisor")


def test_a_task_added_while_stdin_is_read_never_takes_a_name_the_input_will_give(swarm, tmp_path):
    """The input names its tasks ``task-N`` in its order, as it reads them: an ``add`` meanwhile
    must not take such a name. An unnamed one took ``task-<n+1>``, the name of the next task
    read — and the supervisor died of the clash (or, the added task ended and let go, the two
    shared a name and ``resume`` credited one's run to the other)."""
    fifo = tmp_path / "input"
    os.mkfifo(fifo)
    proc = subprocess.Popen(["sh", "-c", f"exec {' '.join(swarm.cmd('run', '-j', '2', '-', '--output', 'quiet'))} "
                                         f"< {fifo}"], cwd=swarm.cwd, env=clean_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        with open(fifo, "w") as producer:
            producer.write("echo one >> ledger\n")
            producer.flush()
            wait_until(lambda: (swarm.cwd / "ledger").exists(), what="the first task read")
            run = swarm.latest().name
            unnamed = swarm("add", run, "--", "sh", "-c", "echo added >> ledger")
            assert unnamed.code == 0, unnamed.stderr
            taken = swarm("add", run, "--name", "task-3", "--", "true")  # the third task the input will give
            assert taken.code != 0 and "task-3" in taken.stderr and "stdin" in taken.stderr, taken
            producer.write("echo two >> ledger\necho three >> ledger\n")
        assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        kill_run_processes(swarm.latest().name)
    tasks = swarm.tasks()
    assert sorted(tasks) == ["added-1", "task-1", "task-2", "task-3"]
    assert {t["status"] for t in tasks.values()} == {"succeeded"}
    assert sorted((swarm.cwd / "ledger").read_text().split()) == ["added", "one", "three", "two"]


def test_the_names_the_input_will_give_are_kept_from_every_addition(tmp_path):
    """``add`` and follow-ups alike: while the run reads stdin (here 4 tasks read so far), an
    unnamed addition is ``added-N``, and a ``task-N`` past those read is refused with one line."""
    from zellij_swarm import exc
    from zellij_swarm.config import additions

    def kept(name: str) -> bool:
        return name.startswith("task-") and int(name[5:]) > 4

    known = [f"task-{n}" for n in range(1, 5)]
    specs = additions.from_message([{"cmd": "true"}, {"cmd": "true"}], known, tmp_path, kept=kept)
    assert [s.name for s in specs] == ["added-1", "added-2"]
    assert [s.name for s in additions.from_message([{"cmd": "true"}], known, tmp_path)] == ["task-5"]  # no stream
    with pytest.raises(exc.UsageError, match="'task-5' is the one the run will give a task it has still to read"):
        additions.from_message([{"name": "task-5", "cmd": "true"}], known, tmp_path, kept=kept)
    followups = tmp_path / "followups.jsonl"
    followups.write_text('{"name": "task-9", "cmd": "true"}\n{"cmd": "true"}\n')
    batch = additions.from_followups(followups.read_bytes(), followups, "parent", known, tmp_path, kept=kept)
    assert [s.name for s in batch.specs] == ["parent/followup-2"] and len(batch.errors) == 1
    assert "task-9" in batch.errors[0] and "stdin" in batch.errors[0]


@pytest.mark.parametrize("mode", ["lines", full("template"), full("null")])
def test_stdin_a_file_is_read_whole_as_the_run_goes(swarm, mode):
    """``run - < tasks.txt``: epoll takes no regular file (EPERM), and registering the input
    killed the supervisor after its first tasks started. A file is read when tasks are wanted,
    a read never blocking; every task runs once, in the input's order of names."""
    count = 2 * read_ahead(3) + 5  # past what the first read-ahead takes
    separator = "\0" if mode == "null" else "\n"
    (swarm.cwd / "tasks.txt").write_text("".join(f"echo {i} >> ledger{separator}" for i in range(count)))
    args = {"lines": ["-"], "template": ["--template", "{}", "-"], "null": ["-0", "--template", "{}", "-"]}[mode]
    with open(swarm.cwd / "tasks.txt", "rb") as stdin:
        res = subprocess.run(swarm.cmd("run", "-j", "3", "--output", "quiet", *args), cwd=swarm.cwd,
                             env=clean_env(), stdin=stdin, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert sorted(map(int, (swarm.cwd / "ledger").read_text().split())) == list(range(count))
    tasks = swarm.tasks()
    assert list(tasks) == [f"task-{i}" for i in range(1, count + 1)]
    assert {t["status"] for t in tasks.values()} == {"succeeded"}


def test_stdin_from_dev_null_has_no_tasks(swarm):
    res = subprocess.run(swarm.cmd("run", "-", "--output", "quiet"), cwd=swarm.cwd, env=clean_env(),
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert (res.returncode, res.stderr) == (0, "zellij-swarm: <stdin>: no tasks to run\n")


@pytest.mark.parametrize("source", ["file", "stdin", "toml"])
def test_a_utf8_byte_order_mark_first_is_no_part_of_the_input(swarm, source):
    """Some editors start a UTF-8 file with a byte order mark: it became part of the first
    command (``sh: exec: \\ufeffecho: not found``, exit 127), and a TOML file's was "invalid
    TOML". It is read as no part of the text, as Python's own ``utf-8-sig`` reads it."""
    bom = b"\xef\xbb\xbf"
    if source == "toml":
        (swarm.cwd / "s.toml").write_bytes(bom + b'[[task]]\nname = "first"\ncmd = "echo first"\n')
        res = swarm("run", "s.toml", "--backend", "headless", "--output", "group")
    elif source == "file":
        (swarm.cwd / "s.txt").write_bytes(bom + b"echo first\necho second\n")
        res = swarm("run", "s.txt", "-j", "1", "--backend", "headless", "--output", "group")
    else:
        res = swarm("run", "-", "-j", "1", "--backend", "headless", "--output", "group",
                    input=(bom + b"echo first\necho second\n").decode())
    assert res.code == 0, res.stderr
    assert res.stdout.splitlines()[0] == "first", res.stdout
