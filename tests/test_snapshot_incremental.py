"""The run's snapshot at any size (issue 13, item 2): ``state.json`` holds the live part and
names how much of the append-only ``tasks.jsonl`` it covers; counts and metrics are kept as
tasks move, never recomputed over every task. Held here: the incremental snapshot reads back
exactly as the one built from scratch (``snapshot.full``) on random histories, its metrics
agree with ``metrics.compute``, a snapshot does no work per finished task, and the one
reader (``snapshot_file.load``) copes with torn lines, later rows, older snapshots and
failed writes."""

from __future__ import annotations

import json
import math
import os
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from zellij_swarm.config import settings
from zellij_swarm.config.swarmfile import TaskSpec
from zellij_swarm.engine import metrics, snapshot
from zellij_swarm.engine.policy import RunStop
from zellij_swarm.engine.slots import Slots
from zellij_swarm.records import log as records
from zellij_swarm.records import rows_index, snapshot_file
from zellij_swarm.records.generation_files import ExitRecord
from zellij_swarm.records.rundir import RunPaths, write_json_atomic
from zellij_swarm.records.snapshot_file import ROWS_FILE, RowsFile, RowsReader
from zellij_swarm.records.states import TaskStatus
from zellij_swarm.records.task import Attempt, TaskRecord, task_id, task_order
from zellij_swarm.records.task_table import TaskTable
from zellij_swarm.render.reader import StateReader

# ----- metrics: the incremental figures are compute()'s ---------------------------------------


def _random_attempts(rng: random.Random, *, slots: int, gens: int) -> list[Attempt]:
    """Unique (slot, generation) pairs, some never timed, some missing, latencies on and
    around the rounding boundaries of the shown figures."""
    out = []
    for slot in range(1, slots + 1):
        t = rng.uniform(0, 5)
        for gen in range(1, gens + 1):
            if rng.random() < 0.08:
                continue  # a generation withdrawn, or one whose record is elsewhere
            gap = rng.choice([0.0, 0.00005, 0.00015, 0.00025, -0.001, rng.uniform(0, 0.01), rng.expovariate(200)])
            start = t + gap
            end = start + rng.choice([0.0, rng.uniform(0, 0.2), rng.expovariate(5)])
            untimed = rng.random() < 0.05
            out.append(Attempt(1, slot, gen, TaskStatus.SUCCEEDED, 0, None, None,
                               None if untimed and rng.random() < 0.5 else start,
                               None if untimed else end, None, None, backfill=gen > 1 and rng.random() < 0.9))
            t = end
    rng.shuffle(out)  # arrival order is not plan order, nor generation order (resume, late discovery)
    return out


@pytest.mark.parametrize("seed", range(40))
def test_accumulator_agrees_with_compute_on_random_histories(seed: int) -> None:
    rng = random.Random(seed)
    attempts = _random_attempts(rng, slots=rng.randint(1, 12), gens=rng.randint(1, 40))
    stats = metrics.DispatchStats()
    acc = metrics.Accumulator()
    seen: list[Attempt] = []
    first_at = rng.randrange(0, len(attempts) + 1)
    for i, a in enumerate(attempts):
        if i == first_at:  # the first batch becomes known part-way (a resumed run's)
            # its members: the first generation reserved on some of the slots (one withdrawn
            # has no attempt; the slot's next is not a member)
            slots = sorted({b.slot for b in attempts})
            members = [(slot, 1) for slot in rng.sample(slots, min(len(slots), rng.randint(1, 8)))]
            at = rng.uniform(0, 5)
            for member in members:
                stats.reserved(at, member)
            stats.batch(len(members))
        acc.add(a)
        seen.append(a)
        if rng.random() < 0.3 or i == len(attempts) - 1:
            ended = rng.uniform(0, 50)
            want = metrics.compute(seen, stats, jobs=8, started_at=1.0, ended_at=ended)
            got = acc.figures(stats, jobs=8, started_at=1.0, ended_at=ended)
            assert got == want, (seed, i)


def test_accumulator_keeps_what_the_slots_need_not_every_attempt() -> None:
    acc = metrics.Accumulator()
    for gen in range(1, 10_001):
        for slot in range(1, 5):
            acc.add(Attempt(1, slot, gen, TaskStatus.SUCCEEDED, 0, None, None, gen * 1.0, gen + 0.5, None, None,
                            backfill=gen > 1))
    assert sum(len(g) for g in acc._unpaired.values()) <= 2 * 4  # the latest (and the first) per slot
    assert acc.refill.count == 4 * 9_999


def test_rounded_quantiles_are_nearest_rank_of_the_shown_values() -> None:
    rng = random.Random(7)
    for _ in range(200):
        values = [rng.choice([rng.uniform(0, 3), round(rng.uniform(0, 3), 2), 0.05, 0.15, 0.25, 1.45])
                  for _ in range(rng.randint(1, 60))]
        q = metrics.RoundedQuantiles(1)
        for v in values:
            q.add(v)
        for p in (1, 50, 95, 99, 100):
            want = metrics.percentile(values, p)
            assert want is not None and q.percentile(p) == round(want, 1)


def test_active_time_is_the_exact_sum_in_any_order() -> None:
    values = [1e16, 1.0, -1e16, 3.3, 1e-3] * 50
    partials: list[float] = []
    for v in reversed(values):
        metrics._exact_add(partials, v)
    assert math.fsum(partials) == math.fsum(values)


# ----- a run view, driven through random histories --------------------------------------------


def _record(order: int, spec: TaskSpec) -> TaskRecord:
    return TaskRecord(spec=spec, id=task_id(order), order=order, timeout=None, retries=1, idle_timeout=None)


class FakeRun:
    """What ``snapshot.build`` reads of a supervisor (``RunView``), with real task records."""

    def __init__(self, run_dir: Path, jobs: int = 4) -> None:
        run_dir.mkdir(parents=True, exist_ok=True)
        self.paths = RunPaths(run_dir)
        self.run_id, self.name, self.backend_name, self.jobs = run_dir.name, None, "headless", jobs
        self.settings = settings.resolve({}, {})
        self.started_at, self.ended_at = 1000.0, None
        self.detached = False
        self.stop = RunStop()
        self.tasks = TaskTable(_record)
        self.live: dict[int, Any] = {}
        self.slots = Slots(jobs)
        self.stats = metrics.DispatchStats()
        self.warnings: list[dict[str, Any]] = []
        self.views = None
        self.now = 1000.0
        self.wallclock: Callable[[], float] = lambda: self.now
        self.usage: dict[str, Any] | None = None
        self.multiplexer: dict[str, Any] | None = None
        self.dispatching: dict[str, Any] = {}
        self._gens = dict.fromkeys(range(1, jobs + 1), 0)
        self.busy: dict[int, TaskRecord] = {}

    def add(self, n: int, *, packed: bool = True) -> None:
        """Add ``n`` tasks: held packed, as a run queues them, or with their records made."""
        for _ in range(n):
            i = len(self.tasks) + 1
            self.tasks.add(TaskSpec(name=f"task {i} \"q\"\n", cmd="true"), packed=packed)

    def pending(self) -> list[str]:
        """The ids of the pending tasks, making no record (a task still packed is pending)."""
        held = ((tid, self.tasks.look(task_order(tid) or 0)) for tid in self.tasks)
        return [tid for tid, t in held if not isinstance(t, TaskRecord) or t.status == TaskStatus.PENDING]

    def start(self, task: TaskRecord) -> None:
        slot = next(s for s in range(1, self.jobs + 1) if s not in self.busy)
        self._gens[slot] += 1
        task.start_generation(slot, self._gens[slot])
        self.busy[slot] = task
        if not self.stats.first_batch:
            self.stats.reserved(self.now - 0.01, (slot, self._gens[slot]))
            self.stats.batch(1)

    def end(self, slot: int, rng: random.Random) -> None:
        task = self.busy.pop(slot)
        code = rng.choice([0, 0, 1])
        started = self.now - rng.uniform(0, 1)
        status = TaskStatus.SUCCEEDED if code == 0 else TaskStatus.FAILED
        task.end_generation(status, ExitRecord(code, None, started, self.now, 4000 + slot), None,
                            backfill=rng.random() < 0.8, ended_at=self.now)
        if status == TaskStatus.FAILED and task.attempts_left:
            task.move(TaskStatus.PENDING)
        else:
            task.finish(status)


def _step(run: FakeRun, rng: random.Random) -> None:
    run.now += rng.uniform(0, 0.5)
    roll = rng.random()
    pending = run.pending()
    if roll < 0.1:
        run.add(rng.randint(1, 5), packed=rng.random() < 0.7)
    elif roll < 0.15 and pending:
        run.tasks[rng.choice(pending)].finish(TaskStatus.CANCELLED, "cancelled_by_user")
    elif roll < 0.18 and pending:
        run.tasks[rng.choice(pending)].finish(TaskStatus.SKIPPED, "dependency_failed")
    elif roll < 0.2 and run.busy:
        task = run.busy[rng.choice(list(run.busy))]
        task.warn({"code": "idle_timeout", "message": "quiet", "task": task.name})
    elif roll < 0.6 and pending and len(run.busy) < run.jobs:
        run.start(run.tasks[rng.choice(pending)])
    elif run.busy:
        run.end(rng.choice(list(run.busy)), rng)


def _read_back(run: FakeRun) -> dict[str, Any]:
    written = snapshot.build(run)
    assert all(t["status"] == "running" for t in written["tasks"])  # the live part only
    return snapshot_file.merge(json.loads(json.dumps(written)), run.paths.dir)


@pytest.mark.parametrize("seed", range(25))
def test_the_incremental_snapshot_reads_back_as_the_full_one(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    run = FakeRun(tmp_path / f"run-{seed}", jobs=rng.randint(1, 6))
    run.add(rng.randint(0, 30))
    for i in range(rng.randint(50, 400)):
        _step(run, rng)
        if rng.random() < 0.25:
            assert _read_back(run) == snapshot.full(run), (seed, i)
    run.ended_at = run.now
    assert _read_back(run) == snapshot.full(run)
    assert snapshot.counts_of(run) == snapshot.counts(run.tasks)


def test_a_resumed_run_is_taken_in_whole_at_its_first_snapshot(tmp_path: Path) -> None:
    run = FakeRun(tmp_path / "r")
    run.add(6)
    rng = random.Random(3)
    for task in list(run.tasks.values())[:4]:  # rebuilt from the records before any snapshot
        run.start(task)
    for slot in list(run.busy)[:3]:
        run.end(slot, rng)
    run.tasks["t6"].restore(TaskStatus.CANCELLED, "cancelled_by_user")
    assert run.tasks["t6"]._frozen is not None  # kept until a journal takes it over
    assert _read_back(run) == snapshot.full(run)
    assert all(t._frozen is None for t in run.tasks.values())  # handed to the rows file, not kept


class CountingTasks(TaskTable):
    """A task table that counts passes over it."""

    passes = 0

    def records(self) -> Iterator[TaskRecord]:
        CountingTasks.passes += 1
        return super().records()

    def specs(self, start: int = 1) -> Iterator[tuple[str, TaskSpec]]:
        CountingTasks.passes += 1
        return super().specs(start)

    def __iter__(self) -> Iterator[str]:
        CountingTasks.passes += 1
        return super().__iter__()


def test_a_snapshot_does_no_work_per_finished_task(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = FakeRun(tmp_path / "big", jobs=8)
    run.tasks = CountingTasks(_record)
    run.add(5000)
    rng = random.Random(1)
    for task in list(run.tasks.values()):
        while not task.status.terminal:
            run.start(task)
            run.end(1, rng)
        if task.order == 3000:
            snapshot.build(run)  # the first one takes every task in, once
    for _ in range(8):
        run.add(1)
        run.start(run.tasks[f"t{len(run.tasks)}"])
    rows = []
    real_row = TaskRecord.row

    def counted_row(self: TaskRecord, *, now: float | None) -> dict[str, Any]:
        rows.append(self.id)
        return real_row(self, now=now)

    monkeypatch.setattr(TaskRecord, "row", counted_row)
    CountingTasks.passes = 0
    snap = snapshot.build(run)
    run.end(next(iter(run.busy)), rng)
    snap = snapshot.build(run)
    assert CountingTasks.passes == 0  # counts, metrics and rows: nothing walks the tasks
    assert len(rows) == 8 + 1 + 7  # the running rows of two snapshots, and the one that ended
    assert len(snap["tasks"]) == 7 and snap["counts"]["running"] == 7
    assert len(json.dumps(snap)) < 20_000
    monkeypatch.undo()
    assert snapshot_file.merge(snap, run.paths.dir) == snapshot.full(run) | {"updated_at": snap["updated_at"]}


def test_task_records_keep_no_dict_and_no_row_once_followed(tmp_path: Path) -> None:
    run = FakeRun(tmp_path / "m")
    run.add(3)
    snapshot.build(run)
    run.start(run.tasks["t1"])
    run.end(1, random.Random(0))
    task = run.tasks["t1"]
    assert not hasattr(task, "__dict__") and not hasattr(task.history[0], "__dict__")
    assert task._frozen is None and task.journal is not None


# ----- the rows file and the one reader -------------------------------------------------------


def _row(tid: str, status: str = "succeeded", **more: Any) -> dict[str, Any]:
    return {"name": f"n{tid}", "id": tid, "status": status, "exit_code": 0, "signal": None, "attempts": 1,
            "slot": 1, "generation": 1, "pid": 1, "pane_id": None, "started_at": 1.0, "ended_at": 2.0,
            "duration_s": 1.0, "reason": None, "warnings": [], "history": [], **more}


def _snap(tasks: list[dict[str, Any]], committed: int | None) -> dict[str, Any]:
    snap: dict[str, Any] = {"run_id": "r", "state": "running", "started_at": 1.0, "counts": {}, "tasks": tasks,
                            "slots": [], "metrics": {}, "warnings": []}
    if committed is not None:
        snap["rows"] = snapshot_file.reference(committed)
    return snap


def test_the_reader_reads_up_to_the_named_length_later_lines_winning(tmp_path: Path) -> None:
    rows = RowsFile.of(tmp_path)
    for tid in ("t3", "t1", "t10"):
        rows.add(snapshot_file.pending_line(f"n{tid}", tid, {}))
    rows.add(snapshot_file.encode(_row("t1", "failed")))
    n = rows.commit()
    rows.add(snapshot_file.encode(_row("t3")))  # appended after the snapshot: not in its view
    rows.commit()
    write_json_atomic(tmp_path / "state.json", _snap([_row("t10", "running")], n))
    got = snapshot_file.load(tmp_path / "state.json")
    assert [(t["id"], t["status"]) for t in got["tasks"]] == [("t1", "failed"), ("t3", "pending"), ("t10", "running")]
    assert "rows" not in got and list(got) == [k for k in _snap([], None)]
    assert snapshot_file.load(tmp_path / "state.json", rows=False)["tasks"] == [_row("t10", "running")]


@pytest.mark.parametrize("argv", [None, ("printf", "%s\n", "a b", "☃")])
@pytest.mark.parametrize("name,group", [('a "b"\n\\ c ☃', None), ("task-12", None), ("task-3", "gpu"), ("x", "g")])
def test_a_pending_line_is_the_row_of_a_task_that_has_not_run(name: str, group: str | None,
                                                                argv: tuple[str, ...] | None) -> None:
    """A generated name's row has its command, a grouped task's its group — also as the first
    snapshot writes it from the task's packed spec, making no record."""
    spec = TaskSpec(name=name, cmd='echo "☃"\n' if argv is None else None, argv=argv, group=group)
    task = TaskRecord(spec=spec, id="t1", order=1, timeout=None, retries=0, idle_timeout=None)
    line = snapshot_file.pending_line(task.name, task.id, task.optional_fields)
    assert line == snapshot_file.encode(task.row(now=None))
    table = TaskTable(lambda order, spec: pytest.fail("a record was made"))
    table.add(spec, packed=True)
    followed = snapshot.Followed(RowsFile(Path("/nonexistent/tasks.jsonl")))
    followed.discover(table)
    assert followed.rows.uncommitted() == [json.loads(line)]


def test_older_snapshots_read_as_they_are(tmp_path: Path) -> None:
    old = _snap([_row("t2"), _row("t1")], None)
    write_json_atomic(tmp_path / "summary.json", old)
    assert snapshot_file.load(tmp_path / "summary.json") == old


def test_a_torn_line_is_skipped_by_readers_and_ended_by_the_next_writer(tmp_path: Path) -> None:
    path = tmp_path / ROWS_FILE
    good = snapshot_file.encode(_row("t1"))
    path.write_bytes(good + b'{"name":"nt2","id":"t2","sta')  # a writer killed mid-line
    reader = RowsReader()
    assert [t["id"] for t in reader.merge(_snap([], path.stat().st_size), tmp_path)["tasks"]] == ["t1"]
    rows = RowsFile(path)  # a fresh process's writer (not the shared one)
    rows.add(snapshot_file.encode(_row("t2")))
    n = rows.commit()
    assert path.read_bytes().count(b"\n") == 3 and n == path.stat().st_size
    assert [t["id"] for t in snapshot_file.merge(_snap([], n), tmp_path)["tasks"]] == ["t1", "t2"]
    assert [t["id"] for t in reader.merge(_snap([], n), tmp_path)["tasks"]] == ["t1", "t2"]


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many lines each parse of the rows file was given."""
    counts: list[int] = []
    real = snapshot_file._parse_whole

    def counting(lines: list[bytes]) -> list[Any] | None:
        counts.append(len(lines))
        return real(lines)

    monkeypatch.setattr(snapshot_file, "_parse_whole", counting)
    return counts


def test_a_reader_parses_only_what_was_appended(tmp_path: Path, parsed: list[int]) -> None:
    rows, reader = RowsFile.of(tmp_path), RowsReader()
    for i in range(1, 101):
        rows.add(snapshot_file.encode(_row(f"t{i}")))
    first = reader.merge(_snap([], rows.commit()), tmp_path)
    rows.add(snapshot_file.encode(_row("t101")))
    rows.add(snapshot_file.encode(_row("t5", "failed")))
    second = reader.merge(_snap([], rows.commit()), tmp_path)
    assert sum(parsed) == 102 and len(first["tasks"]) == 100 and len(second["tasks"]) == 101
    assert second["tasks"][4]["status"] == "failed"


def test_a_failed_write_keeps_its_rows_in_the_snapshot_and_is_cut_on_retry(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = FakeRun(tmp_path / "full")
    run.add(3)
    writer = records.SnapshotWriter(run.paths, lambda: snapshot.build(run))
    writer.write()
    real_write = os.write

    def half_then_enospc(fd: int, data: Any) -> int:
        real_write(fd, bytes(data[:7]))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", half_then_enospc)
    run.start(run.tasks["t1"])
    run.end(1, random.Random(1))
    snap = writer.write(merged=False)
    assert writer.error is not None and writer.error.errno == 28
    assert [t["id"] for t in snap["tasks"]] == ["t1"]  # the row the file could not take
    assert snapshot_file.load(run.paths.state) == snapshot.full(run) | {"updated_at": snap["updated_at"],
                                                                         "metrics": snap["metrics"]}
    monkeypatch.undo()
    assert writer.write(merged=False)["tasks"] == []
    data = (run.paths.dir / ROWS_FILE).read_bytes()  # the part of the failed write was cut first
    assert json.loads(run.paths.state.read_bytes())["rows"]["bytes"] == len(data)
    assert all(json.loads(line) for line in data.splitlines())
    assert snapshot_file.load(run.paths.state)["tasks"] == snapshot.full(run)["tasks"]


def test_the_writer_says_its_own_size_and_cost_and_makes_rows_durable_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = FakeRun(tmp_path / "w")
    run.add(5)
    run.usage = {"cpu_s": 1.5}
    writer = records.SnapshotWriter(run.paths, lambda: snapshot.build(run))
    for _ in range(3):
        writer.write()
    synced: list[str] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")), real_fsync(fd)))
    whole = writer.write(summary=run.paths.summary)
    written = json.loads(run.paths.summary.read_bytes())
    # state.json says its own size; summary.json, written once, holds every row besides
    assert written["metrics"]["state_json_bytes"] == run.paths.state.stat().st_size
    assert len(written["tasks"]) == 5 and "rows" not in written
    assert written["metrics"]["snapshot_write_ms"]["count"] == 3 and written["usage"] == {"cpu_s": 1.5}
    assert [Path(p).name for p in synced][:1] == [ROWS_FILE]  # before the summary's own fsync
    assert len(whole["tasks"]) == 5 and whole == snapshot_file.load(run.paths.summary)


def test_state_reader_and_status_see_every_row(tmp_path: Path) -> None:
    run = FakeRun(tmp_path / "s")
    run.add(4)
    writer = records.SnapshotWriter(run.paths, lambda: snapshot.build(run))
    reader = StateReader(run.paths)
    writer.write()
    assert [t["status"] for t in reader.load()["tasks"]] == ["pending"] * 4  # type: ignore[index]
    run.start(run.tasks["t2"])
    run.end(1, random.Random(0))
    run.start(run.tasks["t3"])
    writer.write()
    got = reader.load()
    assert got is not None and [t["id"] for t in got["tasks"]] == ["t1", "t2", "t3", "t4"]
    assert got["tasks"] == snapshot_file.load(run.paths.state)["tasks"]
    assert reader.load() is got  # not replaced since: not read again


def test_a_run_records_its_rows_once_and_every_reader_sees_them(swarm: Any) -> None:
    swarm.write("t.txt", "true\nfalse\ntrue\n")
    assert swarm("run", "t.txt", "-j", "2", "--output", "quiet").code == 1
    run = swarm.latest()
    written = json.loads((run / "state.json").read_text())
    assert written["tasks"] == [] and written["rows"] == {"file": ROWS_FILE, "bytes": (run / ROWS_FILE).stat().st_size}
    # summary.json, written once at the end, is the whole record of the run, as tools read it
    assert [t["id"] for t in json.loads((run / "summary.json").read_text())["tasks"]] == ["t1", "t2", "t3"]
    status = json.loads(swarm("status", "--json", run.name).stdout)
    assert [(t["id"], t["status"]) for t in status["tasks"]] == [("t1", "succeeded"), ("t2", "failed"),
                                                                 ("t3", "succeeded")]
    assert status["tasks"] == swarm.summary(run)["tasks"] and "rows" not in status
    [row] = json.loads(swarm("ls", "--json").stdout)
    assert (row["tasks"], row["failed"]) == (3, 1)


def test_a_long_file_is_read_once_per_task_not_once_per_line(tmp_path: Path, parsed: list[int],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapshot_file, "_CHUNK", 4096)  # many blocks, lines cut across them
    rows = RowsFile.of(tmp_path)
    for i in range(1, 301):
        rows.add(snapshot_file.pending_line(f"n{i}", f"t{i}", {}))
    for i in (5, 300, 1, 5):
        rows.add(snapshot_file.encode(_row(f"t{i}", "failed" if i == 5 else "succeeded", attempts=i)))
    rows.add(b'{"odd": 1, "id": "x"}\n')
    got = snapshot_file.merge(_snap([], rows.commit()), tmp_path)["tasks"]
    assert sum(parsed) == 301  # each task's last line, and the odd one
    assert [t["id"] for t in got] == [f"t{i}" for i in range(1, 301)] + ["x"]
    assert [got[i]["status"] for i in (0, 4, 299, 5)] == ["succeeded", "failed", "succeeded", "pending"]


@pytest.mark.parametrize("index", ["trusted", "absent", "unusable"])
def test_a_resumed_supervisor_appends_to_the_rows_file_of_the_killed_one(tmp_path: Path, index: str) -> None:
    """It ends the killed one's torn line and appends the rows that changed. A row that is
    its task's newest line in the file as it is, it does not write again when the index
    says where that line is (a resumed run of 100,000 tasks wrote all of them again, 40 MB)
    — an index it rebuilt from the file, when there was none; when it can have none (a
    directory in its place), it writes every row again. Either way the snapshot reads back
    whole."""
    first = FakeRun(tmp_path / "run")
    first.add(5)
    rng = random.Random(5)
    first.start(first.tasks["t1"])
    first.end(1, rng)
    first.start(first.tasks["t5"])
    first.end(first.tasks["t5"].slot, rng)
    writer = records.SnapshotWriter(first.paths, lambda: snapshot.build(first))
    writer.write()
    rows_file = first.paths.dir / ROWS_FILE
    written = rows_file.read_bytes().splitlines()
    if index != "trusted":
        (first.paths.dir / rows_index.INDEX_FILE).unlink()
    if index == "unusable":
        (first.paths.dir / rows_index.INDEX_FILE).mkdir()
    with open(rows_file, "ab") as f:  # killed in the middle of its next line
        f.write(b'{"name":"task 2","id":"t2","status":"succ')
    del writer
    RowsFile._by_path.clear()  # a new process: nothing of the killed one is left
    again = FakeRun(tmp_path / "run")  # rebuilt from the records (resume), then on
    again.add(5)
    again.start(again.tasks["t1"])
    again.end(1, random.Random(5))
    again.start(again.tasks["t5"])  # ... and ended otherwise than the killed supervisor saw it
    again.end(again.tasks["t5"].slot, random.Random(6))
    again.tasks["t2"].restore(TaskStatus.CANCELLED, "cancelled_by_user")
    again.start(again.tasks["t3"])
    whole = records.SnapshotWriter(again.paths, lambda: snapshot.build(again)).write()
    assert whole == snapshot.full(again) | {"updated_at": whole["updated_at"], "metrics": whole["metrics"]}
    assert snapshot_file.load(again.paths.state) == whole
    lines = rows_file.read_bytes().splitlines()
    [t1_row] = [line for line in written if b'"id":"t1"' in line]
    [t4_row] = [line for line in written if b'"id":"t4"' in line]  # waiting still, as it was written
    assert lines[:len(written)] == written and lines[len(written)].endswith(b'"status":"succ')
    again_written = lines[len(written) + 1:]
    assert [task_order(json.loads(line)["id"]) for line in again_written] == \
        ([1, 2, 4, 5] if index == "unusable" else [2, 5])
    assert (t1_row in again_written, t4_row in again_written) == ((index == "unusable",) * 2)


def test_a_row_the_file_holds_changed_in_place_is_written_again_by_a_resumed_supervisor(tmp_path: Path) -> None:
    """The line the index points at is compared byte for byte: one of the same length whose
    bytes were changed (a disk's doing, or a hand's) is not taken for the row."""
    first = FakeRun(tmp_path / "run")
    first.add(2)
    first.start(first.tasks["t1"])
    first.end(1, random.Random(5))
    records.SnapshotWriter(first.paths, lambda: snapshot.build(first)).write()
    rows_file = first.paths.dir / ROWS_FILE
    data = rows_file.read_bytes()
    at = data.rindex(b'"id":"t1"') + len(b'"id":"t1"')
    rows_file.write_bytes(data[:at] + data[at:].replace(b'"attempts":1', b'"attempts":7', 1))
    RowsFile._by_path.clear()
    again = FakeRun(tmp_path / "run")
    again.add(2)
    again.start(again.tasks["t1"])
    again.end(1, random.Random(5))
    whole = records.SnapshotWriter(again.paths, lambda: snapshot.build(again)).write()
    assert whole == snapshot.full(again) | {"updated_at": whole["updated_at"], "metrics": whole["metrics"]}
    assert [t["attempts"] for t in snapshot_file.load(again.paths.state)["tasks"]] == [1, 0]
    assert rows_file.read_bytes().count(b'"id":"t1"') == 2


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("index", ["trusted", "absent", "astray"],
                         ids=["through-the-index", "without-an-index", "an-index-pointing-astray"])
def test_the_summary_written_in_chunks_is_the_merged_snapshot_byte_for_byte(tmp_path: Path, seed: int,
                                                                           index: str) -> None:
    """``summary.json`` is written from the rows file's lines as they are, one at a time (a
    run of 100,000 tasks once held every row as an object, then every line, to write it):
    the same bytes as the merged snapshot encoded whole — names with quotes, newlines and
    non-ASCII included, running rows that are newer than the file's, without a trusted
    index, and when a line the index points at is not its task's (found before the first
    byte is written: the whole is merged instead)."""
    rng = random.Random(seed)
    run = FakeRun(tmp_path / f"run-{seed}", jobs=rng.randint(1, 6))
    run.add(rng.randint(1, 30))
    run.tasks["t1"].spec = TaskSpec(name="naïve \"agent\"\n✓", cmd="true")
    for _ in range(rng.randint(20, 300)):
        _step(run, rng)
    written = json.loads(json.dumps(snapshot.build(run)))
    if index == "absent":
        (run.paths.dir / rows_index.INDEX_FILE).unlink()
    if index == "astray":  # the first task's entry points at the last one's line, a row of another task
        entries = (run.paths.dir / rows_index.INDEX_FILE).read_bytes()[32:]
        numbered = [n for n in range(len(entries) // 16) if entries[16 * n:16 * n + 16].strip(b"\0")]
        if len(numbered) > 1:
            first, last = numbered[0], numbered[-1]
            with open(run.paths.dir / rows_index.INDEX_FILE, "r+b") as f:
                f.seek(32 + 16 * first)
                f.write(entries[16 * last:16 * last + 16])
            astray = rows_index.newest_lines(run.paths.dir, written["rows"]["file"], written["rows"]["bytes"])
            assert astray is not None and astray.line(first) is None
            astray.close()
    whole = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode(
        snapshot_file.merge(written, run.paths.dir)) + "\n"
    assert b"".join(snapshot_file.whole_document(written, run.paths.dir)) == whole.encode()
