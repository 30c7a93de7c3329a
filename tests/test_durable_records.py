"""Commit markers survive a power loss, and damaged records are clear errors (issue 10,
defect 14). A rename is atomic but not durable: ``run.json`` and ``summary.json`` (and a
supervisor's ``exit.json``) are fsynced (file, then directory) so that a power loss never
leaves a zero-length record; the event log, which holds every outcome, is made durable by
group commit before the summary; a record that is empty anyway counts as absent, and one
that does not parse is a one-line error in ``status`` and ``resume``, never a traceback."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from swarmtest import GATE, full, kill_run_processes, wait_until

from zellij_swarm import Swarm, Task
from zellij_swarm.records import generation_files, rundir


def test_commit_markers_are_fsynced(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    real_fdatasync = os.fdatasync

    def fdatasync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fdatasync(fd)

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    result = Swarm([Task("true", name="t"), Task("exit 3", name="u")], jobs=1).run()
    assert result.exit_code == 1
    for directory, name in ((result.run_dir, "run.json"), (result.run_dir, "summary.json")):
        temp = [i for i, p in enumerate(synced) if Path(p).parent == directory and Path(p).name.startswith(f".{name}.")]
        assert temp, f"{name}: its data was never fsynced"
        assert str(directory) in synced[temp[0] + 1:], f"{name}: its directory was not fsynced after the rename"
    # The event log, which holds each generation's exit record, is made durable by group commit
    # off the supervisor's loop, all of it before the summary says the run ended.
    summary = next(i for i, p in enumerate(synced) if Path(p).name.startswith(".summary.json."))
    log = [i for i, p in enumerate(synced) if p == str(result.run_dir / "events.jsonl")]
    assert log and log[-1] < summary, synced
    assert not list(result.run_dir.glob("slots/*/*")), "both generations were folded away"


@pytest.fixture
def ended_run(swarm):
    swarm.write("t.txt", "true\n")
    assert swarm("run", "t.txt", "--output", "quiet").code == 0
    return swarm.latest()


def _one_line_error(res) -> None:
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr, res.stderr
    assert res.stderr.count("\n") == 1 and res.stderr.startswith("zellij-swarm: error: "), res.stderr


def test_damaged_snapshots_in_status(swarm, ended_run):
    (ended_run / "summary.json").write_bytes(b"")
    res = swarm("status", "--json", ended_run.name)
    assert (res.code, res.stderr) == (0, "")  # an empty summary counts as absent: read from state.json
    (ended_run / "summary.json").unlink()
    (ended_run / "state.json").write_bytes(b'{"run_id": "x", "tasks": [')
    res = swarm("status", ended_run.name)
    _one_line_error(res)
    assert res.code == 1 and "state.json" in res.stderr


@pytest.mark.parametrize("damage", [b'{"run_id": "x", "tasks": [', b"\0" * 64, b'{"state": "finished", "tasks": 5}'],
                         ids=["truncated", "nuls", "shape"])
def test_a_damaged_state_json_of_an_ended_run_is_read_from_its_summary(swarm, ended_run, damage):
    """A run that ended has its whole record in summary.json (fsynced): a damaged state.json
    beside it made status, ls and every reader refuse the run — ls left it out without a word."""
    (ended_run / "state.json").write_bytes(damage)
    res = swarm("status", "--json", ended_run.name)
    assert (res.code, res.stderr) == (0, ""), res
    assert json.loads(res.stdout)["counts"]["succeeded"] == 1
    res = swarm("ls")
    assert (res.code, res.stderr) == (0, "") and ended_run.name in res.stdout and "finished" in res.stdout, res


@pytest.mark.parametrize("damage", [b'{"run_id": "x", "tasks": [', b'{"state": "gone"}'], ids=["truncated", "shape"])
def test_a_run_that_cannot_be_read_is_named_where_runs_are_looked_for(swarm, ended_run, damage):
    """With no summary, a damaged state.json leaves the run unreadable to status (one line,
    as before). ``ls`` said "no runs", ``resume`` with no RUN "no run is interrupted", and
    ``prune`` nothing, as if there were none: each now names it, and why."""
    (ended_run / "summary.json").unlink()
    (ended_run / "state.json").write_bytes(damage)
    res = swarm("ls")
    assert res.code == 0 and res.stdout.strip() == "no run that can be read (1 cannot)", res
    assert res.stderr.count("\n") == 1 and f"warning: run {ended_run.name}: " in res.stderr, res
    assert "damaged" in res.stderr and "Traceback" not in res.stderr
    for command in ("resume", "cancel"):
        res = swarm(command)
        _one_line_error(res)
        assert res.code == 2 and f"(run {ended_run.name}: " in res.stderr and "damaged" in res.stderr, res
    res = swarm("prune", "--older-than", "1s")  # nothing of it removed, and said
    assert res.code == 0 and f"skipped run {ended_run.name}: " in res.stdout and ended_run.exists(), res


def test_a_run_killed_before_it_recorded_itself_is_named_and_pruned(swarm, ended_run):
    """A supervisor killed as it started, before it wrote its run.json, leaves a run
    directory (its lock, its empty log, the room it reserved) no command saw: ``ls`` said
    nothing of it, ``prune`` left it for ever (an adversary, 3 in 20 early kills). ``ls``
    names it, and ``prune`` removes it — nothing of it ran. One whose log holds events lost
    its record: named, and left as it is."""
    runs = ended_run.parent
    unstarted, damaged = runs / "20991231-235959-0dead0", runs / "20991231-235959-0dead1"
    for run in (unstarted, damaged):
        run.mkdir()
        for name in ("lock", "events.jsonl", ".reserve"):
            (run / name).write_bytes(b"")
    (damaged / "events.jsonl").write_text('{"ts":1,"event":"run_started"}\n')
    res = swarm("ls")
    assert res.code == 0 and ended_run.name in res.stdout, res
    assert f"run {unstarted.name}: its supervisor went before it recorded the run; nothing of it ran" in res.stderr \
        or f"run {damaged.name}: its run record (run.json) is missing" in res.stderr, res.stderr
    assert "(and 1 more run(s) like it)" in res.stderr, res.stderr
    res = swarm("prune")  # kept its week, as any run record is
    assert res.code == 0 and unstarted.exists(), res
    os.utime(unstarted, (time.time() - 8 * 86400,) * 2)
    res = swarm("prune")
    assert res.code == 0 and f"removed run {unstarted.name}" in res.stdout, res
    assert f"skipped run {damaged.name}: its run record (run.json) is missing" in res.stdout, res
    assert damaged.exists() and not unstarted.exists()


@pytest.mark.parametrize("gone", ["empty", "missing"])
def test_an_interrupted_run_whose_snapshot_is_gone_is_not_read_as_one_that_started_nothing(swarm, gone):
    """An interrupted run whose state.json is empty (a crash as it was written) or missing:
    its readers took it for a run before its first snapshot — ``status`` said "1 pending"
    and listed no running task, ``logs`` had no such task (an adversary, 4 in 4). Its running
    tasks are in no other record but the event log: each reader says so in one line, and
    ``resume`` rebuilds it, running each task once."""
    swarm.write("t.toml", "".join(f'[[task]]\nname = "{n}"\ncmd = "{GATE}; echo {n} >> ledger"\n' for n in "ab")
                + '[[task]]\nname = "c"\ncmd = "echo c >> ledger"\nafter = ["a"]\n')
    proc = swarm.popen("run", "t.toml", "-j", "2", "--output", "quiet")
    run = swarm.started()
    try:
        wait_until(lambda: len(list(run.glob("slots/slot-*/gen-1/claim"))) == 2, what="two tasks running")
        state = run / "state.json"  # (none before the first snapshot; replaced whole by each)
        wait_until(lambda: state.exists() and '"running"' in state.read_text(), what="a snapshot of them")
        proc.kill()
        proc.wait(timeout=10)
        if gone == "empty":
            (run / "state.json").write_bytes(b"")
        else:
            (run / "state.json").unlink()
        for command in (("status", run.name), ("logs", run.name, "a")):
            res = swarm(*command)
            _one_line_error(res)
            assert res.code == 1 and "state.json" in res.stderr and "resume" in res.stderr, res
        swarm.open_gate()
        res = swarm("resume", run.name, "--output", "quiet")
        assert res.code == 0, res
        assert sorted((swarm.cwd / "ledger").read_text().split()) == ["a", "b", "c"]
        assert {t["name"]: t["status"] for t in json.loads(swarm("status", "--json", run.name).stdout)["tasks"]} \
            == {"a": "succeeded", "b": "succeeded", "c": "succeeded"}
    finally:
        proc.kill()
        kill_run_processes(run.name)


def test_a_running_run_whose_state_json_is_damaged_can_be_seen_and_cancelled(swarm):
    """state.json damaged while the run goes on, its supervisor idle (its workers run long):
    status refused the run and cancel could not end it, until the supervisor's next change.
    While a supervisor holds the run, it is read as before its first snapshot."""
    swarm.write("t.txt", f"{GATE}\n{GATE}\ntrue\n")
    proc = swarm.popen("run", "t.txt", "-j", "2", "--output", "quiet")
    run = swarm.started()
    try:
        swarm.wait_counts(run, running=2)
        (run / "state.json").write_bytes(b'{"run_id": "x", "tasks": [')
        res = swarm("status", "--json", run.name)
        assert (res.code, res.stderr) == (0, ""), res
        shown = json.loads(res.stdout)
        assert shown["state"] == "running" and "task-3" in [t["name"] for t in shown["tasks"]], shown
        text = swarm("status", run.name).stdout
        assert "1 pending" in text.splitlines()[0], text  # its rows counted, not "no tasks"
        res = swarm("cancel")  # the one running run, found through its damaged snapshot
        assert res.code == 0, res
        assert proc.wait(timeout=60) == 130
        assert {r["status"] for r in swarm.tasks().values()} == {"cancelled"}
    finally:
        swarm.open_gate()
        kill_run_processes(run.name)


@pytest.mark.parametrize("damage", [b"", b'{"run_id": "20261130-'], ids=["empty", "truncated"])
def test_a_damaged_run_json_is_one_line_in_status_and_resume(swarm, ended_run, damage):
    for name in ("summary.json", "state.json"):  # as if the machine stopped early in the run
        (ended_run / name).unlink()
    (ended_run / "run.json").write_bytes(damage)
    for args in (("status", ended_run.name), ("resume", ended_run.name)):
        res = swarm(*args)
        _one_line_error(res)
        assert res.code in (1, 2) and f"{ended_run / 'run.json'}: " in res.stderr, (args, res)
    assert swarm("ls").code == 0


@pytest.mark.parametrize("record", ["state.json", "run.json"])
@pytest.mark.parametrize("damage", [b"[]", b"null", b'"x"', b"5", b"{}", b'{"state": "finished", "tasks": 5}',
                                    b'{"state": "gone"}', b'{"state": "running", "tasks": []}',
                                    b'{"state": "finished", "tasks": [], "run_id": "r", "counts": {}, "slots": []}'])
def test_a_record_that_parses_but_is_not_one_is_one_line(swarm, ended_run, record, damage):
    """A snapshot or run record that is valid JSON of another shape: a reader's TypeError,
    KeyError or AttributeError — an internal error — in ls, status, logs, report, prune,
    retry and resume."""
    (ended_run / "summary.json").unlink()
    (ended_run / record).write_bytes(damage)
    for args in (("ls",), ("status",), ("status", "--json"), ("logs",), ("report", "--html", "r.html"), ("prune",),
                 ("retry", ended_run.name), ("resume", ended_run.name)):
        res = swarm(*args)
        assert "Traceback" not in res.stderr and "internal error" not in res.stderr, (args, res)
        assert res.code in (0, 1, 2) and res.stderr.count("\n") <= 1, (args, res)


@pytest.mark.parametrize("record", ["tasks.jsonl", "events.jsonl"])
def test_a_fifo_in_place_of_a_log_is_refused_not_waited_on(swarm, ended_run, record):
    """A FIFO put where the rows file or the event log was held every reader of it in its
    ``open`` or its ``read`` for ever: status, report, proof, retry and resume hung."""
    (ended_run / "summary.json").unlink()
    (ended_run / record).unlink()
    os.mkfifo(ended_run / record)
    for args in (("status", ended_run.name), ("status", "--json", ended_run.name),
                 ("report", "--html", "r.html", ended_run.name), ("proof", ended_run.name), ("retry", ended_run.name),
                 ("resume", ended_run.name), ("ls",)):
        res = swarm(*args, timeout=30)
        assert "Traceback" not in res.stderr and "internal error" not in res.stderr, (args, res)
        assert res.code in (0, 1, 2) and res.stderr.count("\n") <= 1, (args, res)
        if res.code:
            assert "a FIFO, not a plain file" in res.stderr, (args, res)
    if record == "events.jsonl":  # the tasks added are read there: a choice of them says what is wrong
        res = swarm("status", "--tag", "x", ended_run.name, timeout=30)
        assert res.code == 1 and "a FIFO, not a plain file" in res.stderr, res


MISTYPED_EVENTS = [
    {"event": "worker_completed"}, {"event": "worker_failed", "slot": [1], "gen": 1},
    {"event": "worker_completed", "slot": 1, "gen": 1, "code": "x", "started_at": "soon"},
    {"event": "worker_completed", "slot": 1, "gen": 1, "status": "succeeded", "queued_s": "x", "job": {"a": 1}},
    {"event": "slot_reserved", "slot": [1], "gen": {}}, {"event": "followups_consumed", "slot": 1},
    {"event": "inbox_consumed", "id": ["m"]}, {"event": "executor_allocated"},
    {"event": "paused", "group": ["g"]}, {"event": "unpaused", "group": 5},
    {"event": "run_retried", "tasks": {"t1": 5}}, {"event": "run_retried", "tasks": {"t1": [1]}},
    {"event": "run_retried", "tasks": {"t1": ["a", "b"]}}, {"event": "run_retried", "tasks": [1]},
    {"event": "task_cancelled", "task": "true", "reason": ["x"]}, {"event": ["worker_completed"]},
    {"event": "task_added"}, {"event": "task_added", "spec": "true"}, {"event": "task_added", "spec": {"cmd": 5}},
]


# CI runs one of each way a line can be wrong (a key missing, a slot not a number, a status that
# is none, a Slurm field, a name that is no string, a task added without its task); the rest
# are their neighbours (scripts/test-full)
_EVENTS_IN_CI = {0, 1, 2, 3, 10, 15, 17}


@pytest.mark.parametrize("line", [e if i in _EVENTS_IN_CI else full(e) for i, e in enumerate(MISTYPED_EVENTS)],
                         ids=[f"{e['event']}-{i}" for i, e in enumerate(MISTYPED_EVENTS)])
def test_an_event_line_of_another_shape_is_one_line_or_garbage_in_resume_and_retry(swarm, ended_run, line):
    """A line of the event log that parses but is not what the supervisor writes (edited, or
    damaged in place): a KeyError or TypeError in resume and retry — an internal error. It is
    either read as the garbage it is, as a line that does not parse is, or, where leaving it
    out would change which task is which (a task added), a damaged record: one line."""
    with (ended_run / "events.jsonl").open("a") as log:
        log.write(json.dumps(line) + "\n")
    for args in (("retry", ended_run.name), ("status", ended_run.name), ("report", "--html", "r.html", ended_run.name),
                 ("proof", ended_run.name)):
        res = swarm(*args)
        assert "Traceback" not in res.stderr and "internal error" not in res.stderr, (args, res)
        assert res.code in (0, 1, 2) and res.stderr.count("\n") <= 1, (args, res)
    (ended_run / "summary.json").unlink()
    res = swarm("resume", ended_run.name)
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr, res
    assert res.code in (0, 1, 2), res
    for args in (("status", ended_run.name), ("report", "--html", "r.html", ended_run.name)):  # what resume kept
        res = swarm(*args)
        assert "Traceback" not in res.stderr and "internal error" not in res.stderr, (args, res)


ROW_DAMAGES = [{"status": 5}, {"status": "gone"}, {"history": "x"}, {"history": [5]}, {"history": [{"status": 5}]},
               {"exit_code": "x"}, {"started_at": "x", "ended_at": []}, {"warnings": 5}, {"warnings": [5]},
               {"attempts": "x"}, {"pane_id": [1]}, {"duration_s": "x"}, {"reason": 5}, {"command": 5},
               {"exited": 5}, {"waiting_input": "x"}, {"slot": "x", "generation": []}, {"name": 5}]
STATE_DAMAGES = [{"tasks": 5}, {"tasks": [5]}, {"slots": 5}, {"slots": [5]}, {"rows": 5}, {"rows": {"file": ".."}},
                 {"rows": {"file": "../run.json", "bytes": 10}}, {"rows": {"file": "tasks.jsonl", "bytes": "x"}},
                 {"counts": 5}, {"metrics": 5}, {"warnings": 5}, {"warnings": [5]}, {"jobs": "x"},
                 {"started_at": "x"}, {"name": 5}, {"settings": 5}]


_ROWS_IN_CI, _STATES_IN_CI = {0, 3, 6}, {1, 3, 7, 11, 12, 14}  # the rest: neighbours (scripts/test-full)


@pytest.mark.parametrize("damage", [("row", d) if i in _ROWS_IN_CI else full(("row", d))
                                    for i, d in enumerate(ROW_DAMAGES)]
                         + [("state", d) if i in _STATES_IN_CI else full(("state", d))
                            for i, d in enumerate(STATE_DAMAGES)],
                         ids=[f"row-{i}" for i in range(len(ROW_DAMAGES))]
                         + [f"state-{i}" for i in range(len(STATE_DAMAGES))])
def test_a_row_or_snapshot_field_of_another_type_is_one_line_in_every_reader(swarm, damage):
    """A field of a task's row or of state.json that is not of its type (edited, damaged in
    place): the readers' TypeError or AttributeError was an internal error in status and logs."""
    swarm.write("t.txt", "echo hi\nfalse\n")
    swarm("run", "t.txt", "--output", "quiet")
    run = swarm.latest()
    (run / "summary.json").unlink()
    where, fields = damage
    if where == "row":
        last = json.loads((run / "tasks.jsonl").read_text().splitlines()[-1])
        with (run / "tasks.jsonl").open("a") as rows:
            rows.write(json.dumps({**last, **fields}) + "\n")
    else:
        state = json.loads((run / "state.json").read_text())
        (run / "state.json").write_text(json.dumps({**state, **fields}))
    for args in (("status", run.name), ("status", "--json", run.name), ("status", "--all", run.name), ("ls",),
                 ("logs", run.name, "task-2"), ("report", "--html", "r.html", run.name), ("proof", run.name)):
        res = swarm(*args)
        assert "Traceback" not in res.stderr and "internal error" not in res.stderr, (args, res)
        assert res.code in (0, 1, 2) and res.stderr.count("\n") <= 1, (args, res)
        if args[:2] == ("status", "--json") and res.code == 0:
            json.loads(res.stdout)


@pytest.mark.parametrize("damage", [b"\0" * 20, b"\x01", b"\n\n", b"x"], ids=["nuls", "control", "cut", "syntax"])
def test_a_row_damaged_in_place_is_no_row_and_the_one_before_it_stands(swarm, damage):
    """A row overwritten in place, still a whole line (NULs from a disk, a byte from a hand):
    ``status --json`` copied it as it was — invalid JSON — and the readers took it for its
    task's newest row and dropped the task. It is no row: the task's row before it stands;
    with none, ``status`` says a counted task has no row that can be read."""
    swarm.write("t.txt", "echo hi\nfalse\n")
    swarm("run", "t.txt", "--output", "quiet")
    run = swarm.latest()
    (run / "summary.json").unlink()
    rows_file = run / "tasks.jsonl"
    first, second = sorted(rows_file.read_bytes().splitlines(keepends=True), key=lambda row: b'"id":"t2"' in row)
    damaged = bytearray(second)
    at = 40 if damage != b"x" else second.index(b'"exit_code":') + len(b'"exit_code"')  # x for its colon
    damaged[at:at + len(damage)] = damage  # in place: the index still points at it
    rows_file.write_bytes(first + bytes(damaged))
    if damage != b"x":  # (copied through the index unparsed, a line of printable bytes is not checked)
        res = swarm("status", "--json", run.name)
        assert res.code == 0, res
        assert [t["name"] for t in json.loads(res.stdout)["tasks"]] == ["task-1"]
    res = swarm("status", run.name)
    assert res.code == 0 and "1 task counted with no row that can be read" in res.stdout, res
    # an older row of the task before the damaged one: it stands
    older = json.loads(second) | {"status": "running", "exit_code": None}
    rows_file.write_bytes(first + json.dumps(older, separators=(",", ":")).encode() + b"\n" + bytes(damaged))
    (run / "tasks.idx").unlink()
    state = json.loads((run / "state.json").read_text())
    state["rows"]["bytes"] = rows_file.stat().st_size
    (run / "state.json").write_text(json.dumps(state))
    res = swarm("status", "--json", run.name)
    assert res.code == 0, res
    assert [(t["name"], t["status"]) for t in json.loads(res.stdout)["tasks"]] == [("task-1", "succeeded"),
                                                                                    ("task-2", "running")]
    res = swarm("status", run.name)
    assert res.code == 0 and "task-2  running" in res.stdout and "no row that can be read" not in res.stdout, res


@pytest.mark.parametrize("head", [{}, {"run_id": "r", "argv": ["a\nb", "naïve \"x\""]}], ids=["empty", "fields"])
@pytest.mark.parametrize("items", [[], [{"name": "t\u2713"}], [{"n": i} for i in range(300)]],
                         ids=["no-task", "one", "many"])
def test_run_json_written_a_task_at_a_time_is_the_document_encoded_whole(head, items):
    """run.json's tasks are encoded one at a time (at 100,000 tasks, the record built whole
    was the supervisor's peak memory), into the same bytes as the whole document."""
    from zellij_swarm.records import rundir

    written = b"".join(rundir.json_chunks(head, "tasks", iter(items)))
    whole = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode({**head, "tasks": items}) + "\n"
    assert written == whole.encode()


def test_an_event_log_read_with_names_skipped_leaves_out_those_and_garbage_only(tmp_path):
    """``resume`` reads the log leaving launch and spawn events unparsed: every other complete
    event is read as before, and a line that is not an event is left out either way."""
    from zellij_swarm.records import log

    path = tmp_path / "events.jsonl"
    lines = [b'{"ts":1,"event":"slot_reserved","task":"a \\"event\\":\\"worker_process_spawned"}',
             b'{"ts":2,"event":"worker_process_spawned","pid":5}',
             b'{"event":"worker_launch_invoked","ts":3}',  # another key order: parsed, then left out
             b'[1, 2]', b'\xff\xfe', b'{"ts":4,"event":"worker_completed","code":0}',
             b'{"ts":5,"event":"worker_process_spawned","pid":']  # torn: a killed writer's
    path.write_bytes(b"\n".join(lines))
    skip = frozenset({"worker_process_spawned", "worker_launch_invoked"})
    assert [e["ts"] for e in log.read_events(path, skip=skip)] == [1, 4]
    assert [e["ts"] for e in log.read_events(path)] == [1, 2, 3, 4]


def test_an_event_glued_to_a_partial_line_another_writer_left_is_read(tmp_path):
    """Something else appended a partial line to the log while the run wrote it: the
    supervisor's next line is glued to it. That line's event — a task's end — is read all
    the same; lost, a resume ran a task that had ended again. A line no event ends is still
    garbage, and a torn last line is still left out."""
    from zellij_swarm.records import log

    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"ts":1,"event":"slot_reserved","slot":1,"gen":1}\n'
                     b'{"ts":1,"ev{"ts":1,"ev{"ts":2,"event":"worker_completed","slot":1,"gen":1}\n'
                     b'{"ts":3,"ev{"ts":3,"event":"x","a":[}\n'
                     b'{"ts":4,"event":"worker_failed","slot":1,"gen":2}')
    assert [(e["ts"], e["event"]) for e in log.read_events(path)] == [(1, "slot_reserved"), (2, "worker_completed")]
    skip = frozenset({"worker_process_spawned"})
    assert [e["ts"] for e in log.read_events(path, skip=skip)] == [1, 2]


@pytest.mark.parametrize("cut", ["worker_process_spawned", "backfill"])
def test_an_event_glued_to_a_partial_line_that_names_an_event_left_unread_is_read(tmp_path, cut):
    """The partial line cut after its name (``{"ts":1,"event":"backfill","sl``): a reader
    that leaves events of that name unparsed, or only counts them, took the whole line for
    one of them by its first name, and lost the task's end glued after it — a resume ran the
    ended task again. A line with more than one event's start is parsed. ``proof``, which
    parsed the lines naming an outcome with no regard for glue, missed it too."""
    from zellij_swarm.commands import proof
    from zellij_swarm.engine import resume
    from zellij_swarm.records import log
    from zellij_swarm.records.rundir import RunPaths

    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"ts":1,"event":"slot_reserved","task":"a","slot":1,"gen":1,"attempt":1}\n'
                     b'{"ts":1,"event":"%s","sl{"ts":2,"event":"worker_completed","task":"a","slot":1,"gen":1,'
                     b'"status":"succeeded","code":0,"started_at":1.5,"ended_at":2.0,"pid":7}\n' % cut.encode())
    skip = frozenset({"worker_process_spawned"})
    assert [e["event"] for e in log.read_events(path, skip=skip)] == ["slot_reserved", "worker_completed"]
    logged = resume._Logged(path)
    assert [e["event"] for e in logged.read()] == ["slot_reserved", "worker_completed"]
    assert list(logged.outcomes) == [(1, 1)] and logged.counted == {"backfill": 0}
    # ``proof`` reads it too: a folded generation's outcome is its only record
    assert proof._folded_outcomes(RunPaths(tmp_path)) == {(1, 1): (1.5, 2.0, 7, None)}
    with path.open("ab") as f:  # and a dispatch glued so: the first batch's end, for proof's figures
        f.write(b'{"ts":3,"event":"%s","sl{"ts":3,"event":"batch_dispatch_started","size":1}\n' % cut.encode())
    assert [e["event"] for e in proof._dispatch_events(RunPaths(tmp_path))] == ["slot_reserved",
                                                                                 "batch_dispatch_started"]


def test_a_record_nested_too_deep_to_parse_is_damaged_not_a_crash(swarm, ended_run):
    """``[[[[…`` (100,000 deep) in place of a record, or as a line of a log, exceeded the
    parser's recursion limit: an internal error in every reader. It is text that is not JSON."""
    deep = b"[" * 100_000
    with (ended_run / "events.jsonl").open("ab") as log:
        log.write(deep + b"\n")
    with (ended_run / "tasks.jsonl").open("ab") as rows:
        rows.write(deep + b"\n")
    for args in (("status",), ("proof", ended_run.name), ("retry", ended_run.name)):
        res = swarm(*args)
        assert "Traceback" not in res.stderr and "internal error" not in res.stderr, (args, res)
    (ended_run / "summary.json").write_bytes(deep)
    (ended_run / "state.json").write_bytes(deep)
    for args in (("ls",), ("status",), ("logs",), ("retry", ended_run.name), ("resume", ended_run.name)):
        res = swarm(*args)
        assert "Traceback" not in res.stderr and "internal error" not in res.stderr, (args, res)
        assert res.stderr.count("\n") <= 1, (args, res)


def test_a_kills_sent_line_says_whether_it_was_caught_and_reads_back(tmp_path: Path) -> None:
    """`sent <time>` (a run recorded before: caught, as it may have been), `sent <time> uncaught`;
    a later reason keeps the first signal's moment and what it found."""
    gen = generation_files.GenPaths(tmp_path / "gen-1", 1, 1)
    gen.dir.mkdir()
    generation_files.write_kill_reason(gen, "cancelled_by_user")
    assert generation_files.kill_sent_at(gen) is None and generation_files.kill_caught(gen) is None
    generation_files.write_kill_reason(gen, "cancelled_by_user", sent_at=12.5, caught=False)
    assert gen.kill.read_text() == "cancelled_by_user\nsent 12.5 uncaught\n"
    generation_files.write_kill_reason(gen, "halted")
    assert (generation_files.kill_sent_at(gen), generation_files.kill_caught(gen)) == (12.5, False)
    gen.kill.write_text("cancelled_by_user\nsent 12.5\n")  # as runs recorded it before
    assert (generation_files.kill_sent_at(gen), generation_files.kill_caught(gen)) == (12.5, True)


def test_a_kills_first_moment_stays_whoever_records_a_later_one(tmp_path: Path) -> None:
    """The first signal is what counts: a later moment (a resumed supervisor's ladder reaching
    what a ``cancel``'s signal left of the worker) does not take the place of an earlier one;
    an earlier one does. A moment marked before its signal went (``stamped``) is its marker's
    to replace, or to take back when the signal reached nothing — not another's, recorded
    in its place meanwhile."""
    gen = generation_files.GenPaths(tmp_path / "gen-1", 1, 1)
    gen.dir.mkdir()

    def recorded() -> tuple[float | None, bool | None]:
        return generation_files.kill_sent_at(gen), generation_files.kill_caught(gen)

    generation_files.write_kill_reason(gen, "cancelled_by_user", sent_at=10.0, caught=True)
    generation_files.write_kill_reason(gen, "cancelled_by_user", sent_at=10.5, caught=False)
    assert recorded() == (10.0, True) and gen.kill.read_text() == "cancelled_by_user\nsent 10.0\n"
    generation_files.write_kill_reason(gen, "cancelled_by_user", sent_at=9.5, caught=False)
    assert recorded() == (9.5, False)
    # end_now: its own mark replaced by what its signal came to, or taken back
    generation_files.write_kill_reason(gen, "cancelled_by_user", sent_at=9.5, caught=True, stamped=9.5)
    assert recorded() == (9.5, True)
    generation_files.write_kill_reason(gen, "cancelled_by_user", sent_at=None, stamped=9.5)
    assert recorded() == (None, None) and gen.kill.read_text() == "cancelled_by_user\n"
    generation_files.write_kill_reason(gen, "cancelled_by_user", sent_at=20.0)  # its mark
    generation_files.write_kill_reason(gen, "cancelled_by_user", sent_at=19.0, caught=False)  # a supervisor's, earlier
    generation_files.write_kill_reason(gen, "cancelled_by_user", sent_at=None, stamped=20.0)  # reached nothing
    assert recorded() == (19.0, False)


def test_an_ended_run_whose_rows_file_was_cut_short_is_read_from_its_summary(swarm):
    """The rows file of a run that ended lost its tail (a disk, a hand); its summary, written
    once and fsynced, holds every row: status shows each task as it ended, never `pending`
    in a finished run, nor a task missing."""
    swarm.write("t.txt", "exit 0\nexit 1\nexit 0\nexit 1\n")
    assert swarm("run", "t.txt", "-j", "2", "--output", "quiet").code == 1
    run = swarm.latest()
    rows = run / "tasks.jsonl"
    os.truncate(rows, rows.stat().st_size // 2)
    shown = json.loads(swarm("status", "--json", run.name).stdout)
    assert [(t["name"], t["status"]) for t in shown["tasks"]] == [
        ("task-1", "succeeded"), ("task-2", "failed"), ("task-3", "succeeded"), ("task-4", "failed")], shown["tasks"]
    text = swarm("status", run.name).stdout
    assert "pending" not in text and "task-4" in text, text


def test_a_directory_lock_is_taken_once_let_go_and_not_while_another_holds_it(tmp_path):
    """``rundir.flock_within``, under the kill record's writers and the worktrees' adder: a
    second holder waits out its time and is told so (False), then takes it once it is free."""
    first, second = (os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC) for _ in range(2))
    try:
        assert rundir.flock_within(first, 0.05, every=0.01)
        assert not rundir.flock_within(second, 0.05, every=0.01)
        os.close(first)
        first = -1
        assert rundir.flock_within(second, 0.05, every=0.01)
    finally:
        for fd in (first, second):
            if fd >= 0:
                os.close(fd)


def test_a_running_run_before_its_first_snapshot_shows_every_task(swarm):
    """A run read between its start and its first snapshot — its rows file still being
    written (the supervisor writes every pending row, one batch of up to a MB at a time, after
    it has started its first batch), ``state.json`` not there yet: ``status`` showed only the
    rows written so far, none of the running tasks, and no counts (an adversary: 0, 3,681 or
    4,984 of 5,000 tasks, and 19,984 of 20,000 a second into a run). Every task of the plan is
    shown: as its row when it has one, running when the event log has started it, pending
    otherwise; the counts are theirs."""
    from zellij_swarm.records import runlock
    from zellij_swarm.records.rundir import RunPaths

    swarm.write("t.toml", "".join(f'[[task]]\nname = "g{i}"\ncmd = "{GATE}"\n' for i in (1, 2))
                + "".join(f'[[task]]\nname = "p{i}"\ncmd = "true"\nafter = ["g1"]\n' for i in range(8)))
    proc = swarm.popen("run", "t.toml", "-j", "2", "--output", "quiet")
    run = swarm.started()
    lock = runlock.RunLock(RunPaths(run))
    try:
        state = run / "state.json"
        wait_until(lambda: state.exists() and state.read_text().count('"running"') >= 2, what="a snapshot of g1, g2")
        proc.kill()
        proc.wait(timeout=10)
        # as a reader finds it a moment earlier: no snapshot yet, three rows written of eight
        state.unlink()
        rows = (run / "tasks.jsonl").read_bytes().splitlines(keepends=True)
        assert len(rows) >= 8, rows
        (run / "tasks.jsonl").write_bytes(b"".join(rows[:3]))
        (run / "tasks.idx").unlink(missing_ok=True)
        lock.acquire()  # its supervisor holds the run
        res = swarm("status", "--json", run.name)
        assert (res.code, res.stderr) == (0, ""), res
        shown = json.loads(res.stdout)
        assert {t["name"]: t["status"] for t in shown["tasks"]} == \
            {"g1": "running", "g2": "running", **{f"p{i}": "pending" for i in range(8)}}, shown["tasks"]
        assert {k: v for k, v in shown["counts"].items() if v} == {"running": 2, "pending": 8}, shown["counts"]
        text = swarm("status", run.name).stdout
        assert "2 running, 8 pending" in text.splitlines()[0], text
    finally:
        lock.release()
        proc.kill()
        swarm.open_gate()
        kill_run_processes(run.name)
