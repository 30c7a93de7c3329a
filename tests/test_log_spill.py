"""The event log's lines a full disk refused, spilled into the room a run set aside for its
last records (``EventLog.spill``, SPEC §5.8): every reader reads them after the log, the
run's next log puts them into it, and a spill the log already holds is never read twice."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from zellij_swarm.engine import metrics
from zellij_swarm.records import log
from zellij_swarm.records.rundir import RunPaths


def _run(tmp_path: Path) -> RunPaths:
    run = RunPaths(tmp_path / "runs" / "20261207-000000-0abcde")
    run.dir.mkdir(parents=True)
    return run


def _line(n: int) -> bytes:
    return b'{"ts":%d,"event":"e","n":%d}\n' % (n, n)


def _spill(run: RunPaths, at: int, body: bytes, *, tail: bytes = b"") -> None:
    header = json.dumps({"spill_of": "events.jsonl", "at": at}, separators=(",", ":")).encode() + b"\n"
    (run.dir / log.SPILL_ROOM).write_bytes(header + body + tail)


def _numbers(run: RunPaths) -> list[int]:
    return [e["n"] for e in log.iter_events(run.events)]


def test_a_spill_is_read_after_the_log_up_to_where_it_starts(tmp_path):
    run = _run(tmp_path)
    # The log has a line the spill has too (written before the disk refused the rest) and half
    # a line: both past where the spill starts, so read from the spill only.
    run.events.write_bytes(_line(1) + _line(2) + b'{"ts":3,"ev')
    _spill(run, len(_line(1)), _line(2) + _line(3), tail=b"\0" * 100)  # zeros: cut before the room was
    assert _numbers(run) == [1, 2, 3]


def test_a_spill_the_log_already_holds_is_not_read_twice(tmp_path):
    """A supervisor killed after it wrote the spilled lines into the log, before it removed
    the spill: the log went on past them."""
    run = _run(tmp_path)
    run.events.write_bytes(_line(1) + _line(2) + _line(3) + _line(4))
    _spill(run, len(_line(1)), _line(2) + _line(3))
    assert _numbers(run) == [1, 2, 3, 4]
    assert log.pending_spill(run.events) is None


def test_the_runs_next_log_puts_the_spill_into_the_log_then_the_room_is_the_runs_again(tmp_path):
    run = _run(tmp_path)
    run.events.write_bytes(_line(1) + b'{"ts":2')
    _spill(run, len(_line(1)), _line(2) + _line(3))
    events = log.EventLog(run.events)
    events.emit("e", n=4)
    events.close()
    assert run.events.read_bytes().startswith(_line(1) + _line(2) + _line(3))
    assert _numbers(run) == [1, 2, 3, 4]
    assert not (run.dir / log.SPILL_ROOM).exists()
    log.SpaceReserve(run, 10)
    assert (run.dir / log.SPILL_ROOM).stat().st_size >= 256 << 10


@pytest.mark.parametrize("header", [b'{"spill_of":"other.jsonl","at":0}\n', b'{"spill_of":"events.jsonl","at":-1}\n',
                                    b'{"spill_of":"events.jsonl"\n', b"\0" * 64])
def test_a_room_that_holds_no_spill_of_the_log_is_passed_over(tmp_path, header):
    run = _run(tmp_path)
    run.events.write_bytes(_line(1))
    (run.dir / log.SPILL_ROOM).write_bytes(header + _line(9))
    assert _numbers(run) == [1]


# A real full disk: a private tmpfs the size of the room set aside and a little more.
_ON_A_FULL_DISK = """
import errno, os, sys
from pathlib import Path
from zellij_swarm.records import log
from zellij_swarm.records.rundir import RunPaths
run = RunPaths(Path(sys.argv[1]) / "runs" / "20261207-000000-0abcde")
run.dir.mkdir(parents=True)
events = log.EventLog(run.events)
events.emit("e", n=1)
events.flush()
room = log.SpaceReserve(run, 1)
fd = os.open(run.dir.parent / "filler", os.O_WRONLY | os.O_CREAT)  # every block left
try:
    while True:
        os.write(fd, b"x" * 4096)
except OSError as e:
    assert e.errno == errno.ENOSPC
for n in range(2, 2002):  # ~60 KB: more than a tmpfs page, less than the room
    events.emit("e", n=n, pad="p" * 8)
events.flush()
assert events.error is not None and events.error.errno == errno.ENOSPC
room.hand_over(events)
print([e["n"] for e in log.iter_events(run.events)] == list(range(1, 2002)))
"""


def test_lines_a_full_disk_refused_go_into_the_runs_room_and_outlive_its_supervisor(tmp_path):
    if shutil.which("unshare") is None:
        pytest.skip("unshare is not installed")
    state = tmp_path / "state"
    state.mkdir()
    res = subprocess.run(["unshare", "-m", "sh", "-c", f"mount -t tmpfs -o size=512k tmpfs {state} && "
                          f'"$0" -c "$1" {state}; echo exit $?; du -k {state}/runs/*/.reserve', sys.executable,
                          _ON_A_FULL_DISK], capture_output=True, text=True, timeout=60)
    if "mount" in res.stderr and "exit" not in res.stdout:
        pytest.skip(f"no private mount namespace here: {res.stderr.strip()}")
    lines = res.stdout.splitlines()
    assert lines[:2] == ["True", "exit 0"], res.stdout + res.stderr
    assert int(lines[2].split()[0]) < 128, "the room's rest was given back"


def test_a_spill_with_damaged_bytes_is_put_into_the_log_not_a_crash(tmp_path):
    run = _run(tmp_path)
    run.events.write_bytes(_line(1))
    _spill(run, len(_line(1)), b'{"ts":2,"event":"e","n":"\xff"}\n' + _line(3))
    log.EventLog(run.events).close()
    assert [e["n"] for e in log.iter_events(run.events)] == [1, "\ufffd", 3]


def test_proof_reads_a_spilled_outcome_and_first_batch_as_every_reader_does(tmp_path):
    """``proof`` read the log's file itself, not through ``log.iter_events``: a generation
    whose outcome the disk refused and the run spilled was a folded generation with no record,
    and the first batch's end in the spill was never seen."""
    from zellij_swarm.commands import proof

    run = _run(tmp_path)
    reserved = b'{"ts":1.0,"event":"slot_reserved","task":"a","slot":1,"gen":1,"attempt":1}\n'
    run.events.write_bytes(reserved + b'{"ts":2.0,"event":"batch_disp')
    outcome = (b'{"ts":3.0,"event":"worker_completed","task":"a","slot":1,"gen":1,"pid":7,'
               b'"started_at":2.5,"ended_at":2.9}\n')
    _spill(run, len(reserved), b'{"ts":2.0,"event":"batch_dispatch_started","size":1}\n' + outcome)
    assert proof._folded_outcomes(run) == {(1, 1): (2.5, 2.9, 7, None)}
    assert metrics.first_batch(proof._dispatch_events(run)) == (1.0, [(1, 1)])
