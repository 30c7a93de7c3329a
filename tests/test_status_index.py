"""A 100,000-task run stays interactive (issue 26 §4, the ``status`` side): the rows file's
writer keeps ``tasks.idx``, where each task's newest line is, so ``status`` parses only the
rows it shows (the running and failed ones of a big run; ``--all`` every one) and
``status --json`` copies every row without parsing it. Held here, in process: the index
reads back as the rows file does on random histories; ``status`` reads only what it shows;
a torn, garbled, stale, foreign or missing index is never believed (the rows file is read,
the same answer); the next writer catches up or rebuilds it; a run recorded before it
(no index, or every row in its summary) reads as it did."""

from __future__ import annotations

import json
import os
import random
import struct
from pathlib import Path
from typing import Any

import pytest
from test_snapshot_incremental import FakeRun, _row, _step

from zellij_swarm.commands import status as views
from zellij_swarm.engine import snapshot
from zellij_swarm.records import log as records
from zellij_swarm.records import rows_index, snapshot_file
from zellij_swarm.records.generation_files import ExitRecord
from zellij_swarm.records.rows_index import INDEX_FILE
from zellij_swarm.records.rundir import write_json_atomic
from zellij_swarm.records.snapshot_file import ROWS_FILE, RowsFile
from zellij_swarm.records.states import TaskStatus


def _show(run: FakeRun, **how: Any) -> str:
    options: dict[str, Any] = {"json_output": False, "show_all": False, "group": None, "tags": (), "waiting": False,
                               "latest": True, "width": None}
    shown = views.show_status(run.paths, **(options | how))
    return shown if isinstance(shown, str) else b"".join(shown).decode()


def _whole(run: FakeRun) -> list[dict[str, Any]]:
    """Every row as the rows file itself says (no index): the answer the index must give."""
    written = json.loads(run.paths.state.read_bytes())
    return snapshot_file.RowsReader().merge(written, run.paths.dir)["tasks"]  # type: ignore[no-any-return]


def _snap_of(committed: int) -> dict[str, Any]:
    """A snapshot that names the rows file up to ``committed`` bytes and holds no row itself."""
    return {"run_id": "r", "state": "running", "started_at": 1.0, "counts": {}, "tasks": [], "slots": [],
            "metrics": {}, "warnings": [], "rows": snapshot_file.reference(committed)}


def _big_run(tmp_path: Path, n: int = 300, failed: tuple[int, ...] = (7, 120, 299)) -> FakeRun:
    """``n`` tasks: the first half ended (``failed`` failed, the others succeeded, each at
    once), then two running, the rest pending."""
    run = FakeRun(tmp_path / "big", jobs=4)
    run.add(n)
    for i in (*range(1, n // 2), *(f for f in failed if f >= n // 2)):
        task = run.tasks[f"t{i}"]
        run.start(task)
        run.busy.pop(task.slot or 0)
        status = TaskStatus.FAILED if i in failed else TaskStatus.SUCCEEDED
        task.end_generation(status, ExitRecord(int(i in failed), None, run.now - 1, run.now, 4000), None,
                            backfill=False, ended_at=run.now)
        task.finish(status)
    for i in (n // 2, n // 2 + 1):
        run.start(run.tasks[f"t{i}"])
    records.SnapshotWriter(run.paths, lambda: snapshot.build(run)).write()
    return run


@pytest.mark.parametrize("seed", range(12))
def test_the_index_reads_back_as_the_rows_file_does(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    run = FakeRun(tmp_path / f"run-{seed}", jobs=rng.randint(1, 5))
    run.add(rng.randint(1, 40))
    writer = records.SnapshotWriter(run.paths, lambda: snapshot.build(run))
    for _ in range(rng.randint(40, 250)):
        _step(run, rng)
        if rng.random() < 0.3:
            written = writer.write(merged=False)
            whole = _whole(run)
            assert (run.paths.dir / INDEX_FILE).exists()
            assert snapshot_file.rows_with(written, run.paths.dir, None) == whole
            failed = frozenset({"failed", "cancelled"})
            assert snapshot_file.rows_with(written, run.paths.dir, failed) == [t for t in whole
                                                                                 if t["status"] in failed]
            lines = snapshot_file.every_row_line(written, run.paths.dir, lambda row: json.dumps(row).encode())
            assert lines is not None and [json.loads(line) for line in lines] == whole


def test_status_parses_only_the_rows_it_shows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = _big_run(tmp_path)
    parsed: list[int] = []
    real = snapshot_file._parse
    monkeypatch.setattr(snapshot_file, "_parse", lambda lines: (parsed.append(len(lines := list(lines))),
                                                                real(lines))[1])
    text = _show(run)
    assert parsed == [3]  # the failed rows; the running ones are the snapshot's own
    shown = [line.split()[0] for line in text.splitlines()[2:] if line.startswith("  task")]
    assert shown == ["task"] * 5 and "failed" in text and text.count(" running ") >= 2
    assert "(295 tasks not listed" in text and "status --all" in text
    parsed.clear()
    every = _show(run, show_all=True)
    assert "more tasks" not in every and sum(line.startswith("  task ") for line in every.splitlines()) == 300
    parsed.clear()
    got = json.loads(_show(run, json_output=True))
    assert parsed == []  # every row copied as written, none parsed
    assert got["tasks"] == views.load_status(run.paths)["tasks"] and len(got["tasks"]) == 300
    assert got == {**views.load_status(run.paths), "slots": got["slots"], "tasks": got["tasks"]}


def test_a_small_run_shows_every_task_as_before(tmp_path: Path) -> None:
    run = FakeRun(tmp_path / "small")
    run.add(3)
    records.SnapshotWriter(run.paths, lambda: snapshot.build(run)).write()
    assert sum(line.startswith("  task ") for line in _show(run).splitlines()) == 3


def _damage(run_dir: Path, how: str) -> None:
    index = run_dir / INDEX_FILE
    data = index.read_bytes()
    if how == "missing":
        index.unlink()
    elif how == "torn":  # a header cut short
        index.write_bytes(data[:20])
    elif how == "garbage":
        index.write_bytes(os.urandom(len(data)))
    elif how == "zeroed header":
        index.write_bytes(bytes(32) + data[32:])
    elif how == "entries past their header":  # a writer killed between its entries and its header
        index.write_bytes(data + struct.pack("<QIB3x", 10 << 20, 100, 3))
    elif how == "pointing at another task's line":
        first = struct.unpack_from("<QIB3x", data, 32 + 16)
        index.write_bytes(data[:32 + 32] + struct.pack("<QIB3x", *first) + data[32 + 48:])
    elif how == "cut short":  # whole entries lost under a good header: their tasks would vanish
        index.write_bytes(data[:32 + 16 * 100])
    elif how == "entries zeroed":
        index.write_bytes(data[:32] + bytes(len(data) - 32))
    elif how == "a FIFO":  # never waited on
        index.unlink()
        os.mkfifo(index)
    elif how == "a link to /dev/zero":  # never followed
        index.unlink()
        index.symlink_to("/dev/zero")
    elif how == "another file's":  # the rows file replaced: another inode
        rows = run_dir / ROWS_FILE
        copy = rows.read_bytes()
        rows.unlink()
        rows.write_bytes(copy)
    elif how == "behind":  # a writer that appended and was killed before indexing
        header = bytearray(data[:32])
        covered = struct.unpack_from("<Q", header, 8)[0]
        rows = (run_dir / ROWS_FILE).read_bytes()
        back = rows.rfind(b"\n", 0, covered - 1) + 1
        index.write_bytes(rows_index._header(back, (run_dir / ROWS_FILE).stat().st_ino) + data[32:])
    else:
        raise AssertionError(how)


DAMAGES = ["missing", "torn", "garbage", "zeroed header", "entries past their header",
           "pointing at another task's line", "another file's", "behind", "a FIFO", "a link to /dev/zero"]
# Damages a reader sees by the snapshot's counts (an index missing tasks) and the next writer
# does not: it has no count to hold the index to, and leaves it to readers, who read the file.
COUNTED_DAMAGES = ["cut short", "entries zeroed"]


@pytest.mark.parametrize("how", DAMAGES + COUNTED_DAMAGES)
def test_a_damaged_index_is_never_believed(tmp_path: Path, how: str) -> None:
    run = _big_run(tmp_path)
    before = {flags: _show(run, **dict(flags)) for flags in
              ((), (("show_all", True),), (("json_output", True),))}
    _damage(run.paths.dir, how)
    for flags, text in before.items():
        got = _show(run, **dict(flags))
        if ("json_output", True) in flags:
            assert json.loads(got) == json.loads(text)
        else:
            assert got == text


@pytest.mark.parametrize("how", DAMAGES)
def test_the_next_writer_makes_the_index_whole_again(tmp_path: Path, how: str) -> None:
    run = _big_run(tmp_path)
    _damage(run.paths.dir, how)
    rows = RowsFile(run.paths.dir / ROWS_FILE)  # a resumed supervisor's writer
    rows.add(snapshot_file.encode(_row("t300", "failed", name="task 300 \"q\"\n")))
    n = rows.commit()
    written = {**json.loads(run.paths.state.read_bytes()), "rows": snapshot_file.reference(n), "tasks": []}
    index = rows_index.newest_lines(run.paths.dir, ROWS_FILE, n)
    assert index is not None and len(index.numbers()) == 298  # trusted again (the two running rows are the snapshot's)
    assert snapshot_file.rows_with(written, run.paths.dir, None) == snapshot_file.merge(written, run.paths.dir)["tasks"]


def test_an_index_write_cut_short_by_a_full_disk_is_never_believed(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A disk that fills as the index grows may take part of a write of its entries: the
    header must not then say the index covers the lines those entries were for, or an entry
    left as it was points at an older line of its task, taken for its newest."""
    rows = RowsFile(tmp_path / ROWS_FILE)
    rows.add(snapshot_file.encode(_row("t1", "pending")))
    rows.add(snapshot_file.encode(_row("t2", "pending")))
    first = rows.commit()
    real_pwrite = os.pwrite
    # the two entries' write takes the first only; the header's (at 0) is whole
    monkeypatch.setattr(os, "pwrite", lambda fd, data, at: real_pwrite(fd, data[:16] if at else data, at))
    rows.add(snapshot_file.encode(_row("t2", "failed")))
    rows.add(snapshot_file.encode(_row("t1", "failed")))
    n = rows.commit()
    monkeypatch.undo()
    assert n > first
    written = _snap_of(n)
    got = snapshot_file.rows_with(written, tmp_path, frozenset({"pending", "failed"}))  # through the index, if believed
    assert [row["status"] for row in got] == ["failed", "failed"]
    assert got == snapshot_file.merge(written, tmp_path)["tasks"]


def test_a_torn_line_left_by_a_killed_writer_is_not_indexed(tmp_path: Path) -> None:
    path = tmp_path / ROWS_FILE
    path.write_bytes(snapshot_file.encode(_row("t1")) + b'{"name":"nt2","id":"t2","sta')
    rows = RowsFile(path)
    rows.add(snapshot_file.encode(_row("t3")))
    n = rows.commit()
    index = rows_index.newest_lines(tmp_path, ROWS_FILE, n)
    assert index is not None and index.numbers() == [1, 3]


def test_a_row_the_index_cannot_hold_removes_it(tmp_path: Path) -> None:
    rows = RowsFile(tmp_path / ROWS_FILE)
    rows.add(snapshot_file.encode(_row("t1")))
    rows.commit()
    assert (tmp_path / INDEX_FILE).exists()
    rows.add(snapshot_file.encode(_row("custom-id")))  # never written so today: readers read the file
    n = rows.commit()
    assert not (tmp_path / INDEX_FILE).exists()
    assert [t["id"] for t in snapshot_file.rows_with(_snap_of(n), tmp_path, None)] == ["t1", "custom-id"]


def _snap_of(n: int) -> dict[str, Any]:
    return {"run_id": "r", "state": "running", "started_at": 1.0, "counts": {}, "tasks": [], "slots": [],
            "metrics": {}, "warnings": [], "rows": snapshot_file.reference(n)}


def test_the_index_is_fsynced_with_the_rows_it_indexes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = FakeRun(tmp_path / "d")
    run.add(3)
    writer = records.SnapshotWriter(run.paths, lambda: snapshot.build(run))
    synced: list[str] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")), real_fsync(fd)))
    writer.write(summary=run.paths.summary)
    assert [Path(p).name for p in synced][:2] == [ROWS_FILE, INDEX_FILE]  # before the summary


def test_an_ended_run_is_read_from_its_final_state_not_its_whole_summary(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = _big_run(tmp_path)
    run.ended_at = run.now
    records.SnapshotWriter(run.paths, lambda: snapshot.build(run)).write(summary=run.paths.summary)
    read: list[str] = []
    real = views.read_json
    monkeypatch.setattr(views, "read_json", lambda path: (read.append(Path(path).name), real(path))[1])
    assert json.loads(_show(run, json_output=True))["tasks"] == json.loads(run.paths.summary.read_bytes())["tasks"]
    assert read == ["state.json"]


def test_a_run_recorded_before_the_index_reads_as_it_did(tmp_path: Path) -> None:
    """Two older forms: a rows file without an index, and a summary with every row and no
    rows file at all (the state.json beside it, of the same age, holds every row too)."""
    run = _big_run(tmp_path)
    expected = {flags: _show(run, **dict(flags)) for flags in ((), (("show_all", True),), (("json_output", True),))}
    (run.paths.dir / INDEX_FILE).unlink()
    for flags, text in expected.items():
        assert _show(run, **dict(flags)) == text
    whole = views.load_status(run.paths)
    for name in (ROWS_FILE, "state.json"):
        (run.paths.dir / name).unlink()
    write_json_atomic(run.paths.summary, {**whole, "state": "finished", "ended_at": whole["started_at"] + 1})
    got = json.loads(_show(run, json_output=True))
    assert got["tasks"] == whole["tasks"] and got["state"] == "finished"
    text = _show(run)
    assert "(295 tasks not listed" in text and sum(line.startswith("  task ") for line in text.splitlines()) == 5


def test_a_big_run_that_nothing_failed_in_reads_no_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = _big_run(tmp_path, failed=())
    (run.paths.dir / INDEX_FILE).unlink()  # not even the index is needed: the counts say it
    monkeypatch.setattr(snapshot_file, "RowsReader", None)
    text = _show(run)
    assert sum(line.startswith("  task ") for line in text.splitlines()) == 2 and "(298 tasks not listed" in text


def test_a_summary_newer_than_the_state_it_follows_is_read_whole(tmp_path: Path) -> None:
    """A supervisor killed between writing the summary and the final state.json: the summary
    says how the run ended."""
    run = _big_run(tmp_path)
    whole = views.load_status(run.paths)
    write_json_atomic(run.paths.summary, {**whole, "state": "finished", "ended_at": whole["started_at"] + 1})
    got = json.loads(_show(run, json_output=True))
    assert got["state"] == "finished" and got["tasks"] == whole["tasks"]


@pytest.mark.parametrize("how", ["removed", "an older copy put back"])
def test_an_index_taken_from_under_its_writer_is_never_made_again_half(tmp_path: Path, how: str) -> None:
    """The index removed (or an older copy put back) while its run went on: the writer's next
    commit made a new file of only the entries noted since, under a header covering the whole
    rows file — the run's final record then lost tasks. It now has no index: readers read
    the rows file."""
    path = tmp_path / ROWS_FILE
    rows = RowsFile(path)
    rows.add(b"".join(snapshot_file.encode(_row(f"t{n}")) for n in range(1, 51)))
    rows.commit()
    index = tmp_path / INDEX_FILE
    older = index.read_bytes()
    index.unlink()
    if how == "an older copy put back":
        rows.add(snapshot_file.encode(_row("t51")))
        rows.commit()
        index.write_bytes(older)
    rows.add(snapshot_file.encode(_row("t52", "failed")))
    n = rows.commit()
    assert rows_index.newest_lines(tmp_path, ROWS_FILE, n) is None
    expected = [f"t{i}" for i in range(1, 53) if i != 51 or how != "removed"]
    assert [t["id"] for t in snapshot_file.rows_with(_snap_of(n), tmp_path, None)] == expected


def test_a_row_numbered_beyond_any_run_makes_no_index_of_gigabytes(tmp_path: Path) -> None:
    """A foreign row (``t999999999``) written into the rows file: the next writer's index put
    its entry 16 GB out, and every reader then read that whole file into memory."""
    path = tmp_path / ROWS_FILE
    path.write_bytes(snapshot_file.encode(_row("t1")) + snapshot_file.encode(_row("t999999999")))
    rows = RowsFile(path)
    rows.add(snapshot_file.encode(_row("t2")))
    n = rows.commit()
    assert not (tmp_path / INDEX_FILE).exists()
    assert [t["id"] for t in snapshot_file.rows_with(_snap_of(n), tmp_path, None)] == ["t1", "t2", "t999999999"]
