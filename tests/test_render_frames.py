"""The board and slot-view frames, built from synthetic run directories (no supervisor)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from zellij_swarm.records import runlock
from zellij_swarm.records.generation_files import GenPaths, read_gen
from zellij_swarm.records.rundir import RunPaths, write_json_atomic
from zellij_swarm.render.board import BoardView, board_frame
from zellij_swarm.render.slotview import SlotView, slot_frame
from zellij_swarm.render.text import width
from zellij_swarm.worker.screen import TailScreen

NOW = 1_800_000_000.0
SGR = re.compile(r"\x1b\[[0-9;]*m")


class FakeRun:
    """A run directory in the shapes the supervisor writes (SPEC §5, §7), built by hand."""

    def __init__(self, root: Path, jobs: int) -> None:
        self.run = RunPaths(root / "runs" / "20260511T101500-abcd")
        self.run.dir.mkdir(parents=True)
        write_json_atomic(self.run.run_json, {"started_at": NOW - 600})
        self.tasks: dict[str, dict[str, Any]] = {}
        self.slots = {
            n: {"slot": n, "state": "idle", "task": None, "task_id": None, "generation": None,
                "attempt": None, "started_at": None, "pane_id": None}
            for n in range(1, jobs + 1)
        }
        self.meta: dict[str, Any] = {"run_id": self.run.run_id, "name": "demo", "state": "running",
                                     "backend": "headless", "jobs": jobs, "started_at": NOW - 600,
                                     "ended_at": None}

    def start(self, slot: int, gen: int, task: str, *, at: float, output: bytes = b"",
              heartbeat: bool = True, record: bool = True) -> GenPaths:
        paths = self.run.gen(slot, gen)
        paths.dir.mkdir(parents=True)
        paths.claim.write_bytes(b"")
        os.utime(paths.claim, (at, at))
        if heartbeat:
            paths.heartbeat.write_text(json.dumps({"event": "started", "pid": 4000 + slot, "pane_id": None}) + "\n")
            os.utime(paths.heartbeat, (at + 0.1, at + 0.1))
        paths.output.write_bytes(output)
        if record:
            t = self.tasks.setdefault(task, {"name": task, "id": f"id-{task}", "attempts": 0, "history": [],
                                             "reason": None, "warnings": [], "pane_id": None})
            t.update(status="running", slot=slot, generation=gen, started_at=at, ended_at=None,
                     exit_code=None, signal=None, pid=4000 + slot, duration_s=None)
            t["attempts"] += 1
            t["history"].append({"attempt": t["attempts"], "slot": slot, "generation": gen, "status": "running",
                                 "exit_code": None, "signal": None, "reason": None, "started_at": at,
                                 "ended_at": None, "pid": 4000 + slot, "pane_id": None})
            self.slots[slot].update(state="running", task=task, task_id=t["id"], generation=gen,
                                    attempt=t["attempts"], started_at=at)
        return paths

    def finish(self, slot: int, gen: int, task: str, *, code: int, at: float, status: str | None = None,
               reason: str | None = None, record: bool = True) -> None:
        paths = self.run.gen(slot, gen)
        started = os.stat(paths.claim).st_mtime
        write_json_atomic(paths.exit_record, {"code": code, "signal": None, "started_at": started,
                                              "ended_at": at, "pid": 4000 + slot})
        if record:
            status = status or ("succeeded" if code == 0 else "failed")
            t = self.tasks[task]
            t.update(status=status, exit_code=code, ended_at=at, duration_s=at - started, reason=reason)
            t["history"][-1].update(status=status, exit_code=code, ended_at=at, reason=reason)
            self.slots[slot].update(state="idle", task=None, task_id=None)

    def state(self) -> dict[str, Any]:
        counts = dict.fromkeys(("pending", "running", "succeeded", "failed", "timed_out", "cancelled",
                                "skipped", "lost"), 0)
        for t in self.tasks.values():
            counts[t["status"]] += 1
        return {**self.meta, "updated_at": NOW, "settings": {}, "counts": counts,
                "tasks": list(self.tasks.values()), "slots": list(self.slots.values()), "metrics": {},
                "warnings": []}

    def write(self, **meta: Any) -> dict[str, Any]:
        self.meta.update(meta)
        state = self.state()
        write_json_atomic(self.run.state, state)
        return state


def plain(lines: list[str]) -> list[str]:
    return [SGR.sub("", line) for line in lines]


def body_of(lines: list[str]) -> list[str]:
    """The output area of a slot view (below the three header lines), blank lines dropped."""
    return [line for line in plain(lines)[3:] if line.strip()]


def slot_lines(fake: FakeRun, slot: int, *, now: float = NOW, cols: int = 80, rows: int = 24,
               color: bool = False, screen: TailScreen | None = None) -> list[str]:
    gens = fake.run.generations(slot)
    gen = read_gen(gens[-1]) if gens else None
    screen = screen or TailScreen()
    state = json.loads(fake.run.state.read_text()) if fake.run.state.exists() else None
    return slot_frame(slot, state, gen, cols=cols, rows=rows, now=now, color=color,
                      tail=lambda c, r: screen.render(gen.paths.output if gen else None, c, r, color=color))


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[FakeRun]:
    """A run whose supervisor is alive: this test holds its lock (a ``running`` run nobody
    holds is shown ``interrupted``)."""
    run = FakeRun(tmp_path, jobs=4)
    lock = runlock.RunLock(run.run)
    lock.acquire()
    yield run
    lock.release()


# -- slot view: terminal rendering ---------------------------------------------------------


def test_progress_bar_and_colour_render_as_one_updating_line(fake: FakeRun) -> None:
    out = b"\x1b[1;32mOK\x1b[0m compiling\n"
    out += b"".join(b"\r[%-10s] %3d%%" % (b"#" * (i // 10), i) for i in range(0, 60, 10))
    paths = fake.start(1, 1, "build", at=NOW - 5, output=out)
    fake.write()
    screen = TailScreen()
    first = slot_lines(fake, 1, screen=screen)
    assert body_of(first) == ["OK compiling", "[#####     ]  50%"]

    with open(paths.output, "ab") as f:  # the bar moves on: fed incrementally, same line
        f.write(b"".join(b"\r[%-10s] %3d%%" % (b"#" * (i // 10), i) for i in range(60, 101, 10)))
    second = slot_lines(fake, 1, screen=screen)
    assert body_of(second) == ["OK compiling", "[##########] 100%"]
    assert plain(second)[3:] == plain(slot_lines(fake, 1))[3:]  # incremental == from scratch

    coloured = slot_lines(fake, 1, color=True)
    assert coloured[3] == "\x1b[0;32;1mOK\x1b[0m compiling"
    assert all(width(line) <= 80 for line in plain(coloured))


def test_cursor_movement_and_split_escapes_render_like_a_terminal(fake: FakeRun) -> None:
    paths = fake.start(2, 1, "tui", at=NOW - 5, output=b"one\ntwo\nthree\n\x1b[3A\x1b[2CE")
    fake.write()
    screen = TailScreen()
    assert body_of(slot_lines(fake, 2, screen=screen)) == ["onE", "two", "three"]
    with open(paths.output, "ab") as f:  # an escape sequence split across two writes
        f.write(b"\x1b[3")
    slot_lines(fake, 2, screen=screen)
    with open(paths.output, "ab") as f:
        f.write(b"1mX\x1b[0m \xff\xfe")  # ... and bytes that are not UTF-8
    assert body_of(slot_lines(fake, 2, screen=screen))[0].startswith("onEX \ufffd")


def test_only_the_tail_is_fed_and_long_output_shows_its_end(fake: FakeRun) -> None:
    lines = b"".join(b"\x1b[33mline %06d \xc3\xa9\x1b[0m\n" % i for i in range(100_000))  # ~2 MB
    fake.start(3, 1, "noisy", at=NOW - 5, output=lines)
    fake.write()
    screen = TailScreen()
    body = body_of(slot_lines(fake, 3, screen=screen, rows=10))
    assert body == [f"line {i:06d} é" for i in range(99_994, 100_000)]  # rows 10 - header 3 - cursor row
    assert screen._offset == len(lines)


def test_narrow_pane_clips_every_line(fake: FakeRun) -> None:
    fake.start(1, 1, "a-task-with-a-rather-long-name", at=NOW - 75, output=b"x" * 200 + b"\n")
    fake.write()
    for cols in (1, 10, 33):
        lines = slot_lines(fake, 1, cols=cols, rows=6, color=True)
        assert len(lines) == 6
        assert all(width(line) <= cols for line in plain(lines))


# -- slot view: following generations and freezing -----------------------------------------


def test_slot_view_follows_the_slot_to_its_next_generation(fake: FakeRun) -> None:
    fake.start(1, 1, "first", at=NOW - 300, output=b"first output\n")
    fake.finish(1, 1, "first", code=0, at=NOW - 10)
    fake.write()
    lines = plain(slot_lines(fake, 1))
    assert lines[0] == "slot 1 · first · succeeded · attempt 1"
    assert lines[1].startswith("exit 0 · ran 4m50s · ended ")

    # gen-2 appears before state.json mentions it: output and own elapsed time already follow it.
    fake.start(1, 2, "second", at=NOW - 7, output=b"second output\n", record=False)
    lines = plain(slot_lines(fake, 1))
    assert lines[0] == "slot 1 · running"
    assert lines[1].startswith("elapsed 7.0s · heartbeat seen, 6.9s ago")
    assert body_of(slot_lines(fake, 1)) == ["second output"]

    _record_start(fake, 1, 2, "second", at=NOW - 7)  # state.json catches up
    fake.write()
    lines = plain(slot_lines(fake, 1))
    assert lines[0] == "slot 1 · second · running · attempt 1"
    assert lines[1].startswith("elapsed 7.0s")  # its own start, not the slot's first task (300 s ago)


def _record_start(fake: FakeRun, slot: int, gen: int, task: str, *, at: float) -> None:
    fake.tasks[task] = {"name": task, "id": f"id-{task}", "attempts": 1, "status": "running", "slot": slot,
                        "generation": gen, "started_at": at, "ended_at": None, "exit_code": None,
                        "signal": None, "pid": 4000 + slot, "pane_id": None, "reason": None,
                        "duration_s": None, "warnings": [],
                        "history": [{"attempt": 1, "slot": slot, "generation": gen, "status": "running",
                                     "exit_code": None, "signal": None, "reason": None, "started_at": at,
                                     "ended_at": None, "pid": 4000 + slot, "pane_id": None}]}
    fake.slots[slot].update(state="running", task=task, generation=gen, attempt=1, started_at=at)


def test_launch_heartbeat_waiting_then_seen(fake: FakeRun) -> None:
    paths = fake.start(4, 1, "slowstart", at=NOW - 3, heartbeat=False)
    fake.write()
    lines = plain(slot_lines(fake, 4))
    assert "starting" in lines[0] and "heartbeat waiting" in lines[1]
    paths.heartbeat.write_text('{"event":"started","pid":77,"pane_id":"%3"}\n')
    os.utime(paths.heartbeat, (NOW - 1, NOW - 1))
    lines = plain(slot_lines(fake, 4))
    assert "running" in lines[0] and "heartbeat seen, 1.0s ago · pid 77" in lines[1]


def test_finished_task_is_frozen_on_its_recorded_result(fake: FakeRun) -> None:
    fake.start(2, 1, "flaky", at=NOW - 60, output=b"boom\n")
    fake.finish(2, 1, "flaky", code=3, at=NOW - 30, reason=None)
    # The task is retried in another slot: slot 2 must still show attempt 1's own result.
    fake.start(3, 1, "flaky", at=NOW - 20, output=b"retrying\n")
    fake.write()
    early = slot_lines(fake, 2, now=NOW)
    late = slot_lines(fake, 2, now=NOW + 3600)
    assert early == late
    assert plain(early)[0] == "slot 2 · flaky · failed · attempt 1"
    assert plain(early)[1].startswith("exit 3 · ran 30s")
    assert body_of(early) == ["boom"]
    assert "attempt 2" in plain(slot_lines(fake, 3))[0]


def test_lost_generation_without_exit_record_shows_recorded_reason(fake: FakeRun) -> None:
    fake.start(1, 1, "vanished", at=NOW - 50)
    t = fake.tasks["vanished"]
    t.update(status="lost", reason="no_exit_record", ended_at=NOW - 5)
    t["history"][-1].update(status="lost", reason="no_exit_record", ended_at=NOW - 5)
    fake.slots[1].update(state="idle", task=None)
    fake.write()
    lines = plain(slot_lines(fake, 1))
    assert lines[0] == "slot 1 · vanished · lost · attempt 1"
    assert lines[1].startswith("no exit record · ran 45s") and "reason no_exit_record" in lines[1]


def test_slot_view_before_the_run_and_for_an_unused_slot(fake: FakeRun) -> None:
    assert "no state.json yet" in plain(slot_lines(fake, 1))[1]
    fake.write()
    lines = plain(slot_lines(fake, 4))
    assert lines[0] == "slot 4 · idle" and lines[1] == "no task has run in this slot yet"
    assert plain(slot_lines(fake, 9))[1] == "this run has slots 1-4; slot 9 will stay empty"


def test_slot_view_object_reads_the_run_dir(fake: FakeRun) -> None:
    fake.start(1, 1, "t", at=NOW - 2, output=b"hello\n")
    fake.write()
    view = SlotView(fake.run, 1)
    frame = view.frame(60, 12, NOW, color=False, notice=None)
    assert not frame.done and body_of(frame.lines) == ["hello"]
    assert set(frame.watch) == {fake.run.dir, fake.run.slots, fake.run.slot_dir(1), fake.run.gen(1, 1).dir}
    fake.finish(1, 1, "t", code=0, at=NOW - 1)
    fake.write(state="finished", ended_at=NOW - 1)
    assert view.frame(60, 12, NOW, color=False, notice=None).done


def test_a_slurm_step_waiting_in_the_queue_shows_queued_not_starting(fake: FakeRun) -> None:
    """A step Slurm has not started (squeue says PENDING, no launch heartbeat) is ``queued``
    on the board and in its slot view: its time there is not charged (issue 23 §2)."""
    fake.start(1, 1, "big", at=NOW - 40, heartbeat=False)
    fake.tasks["big"]["slurm"] = {"state": "PENDING", "reason": "Resources"}
    fake.start(2, 1, "small", at=NOW - 5, heartbeat=False)
    fake.write()
    board = plain(board_lines(fake))
    assert any(re.fullmatch(r"1 queued\s+big\s+40s\s+Slurm's queue: time not charged", line) for line in board), board
    assert any(re.fullmatch(r"2 starting\s+small\s+5\.0s\s+\(no launch heartbeat yet\)", line) for line in board), board
    assert plain(slot_lines(fake, 1))[0] == "slot 1 · big · queued · attempt 1"


def test_a_compact_workers_stderr_shows_below_its_stdout(fake: FakeRun) -> None:
    """A headless or compact worker's stderr is kept apart (stderr.log): its slot view shows
    the stderr's tail under the stdout's, and nothing of stderr when it wrote none."""
    paths = fake.start(1, 1, "build", at=NOW - 2, output=b"".join(b"step %d\n" % i for i in range(30)))
    fake.write()
    view = SlotView(fake.run, 1)
    assert body_of(view.frame(60, 12, NOW, color=False, notice=None).lines)[-1] == "step 29"
    paths.stderr.write_bytes(b"a.c:3: error: expected ';'\n\x1b[31mfatal\x1b[0m: 1 error\n")
    body = body_of(view.frame(60, 12, NOW, color=False, notice=None).lines)
    assert body[-3:] == ["── stderr " + "─" * 50, "a.c:3: error: expected ';'", "fatal: 1 error"]
    assert body[-4] == "step 29"  # stdout keeps the rows above, its newest line last
    assert all(len(line) <= 60 for line in plain(view.frame(60, 12, NOW, color=False, notice=None).lines))


# -- board -------------------------------------------------------------------------------


def board_lines(fake: FakeRun, *, now: float = NOW, cols: int = 80, rows: int = 24,
                color: bool = False) -> list[str]:
    return BoardView(fake.run).frame(cols, rows, now, color=color, notice=None).lines


def test_board_rows_show_state_task_elapsed_last_line_and_exit(fake: FakeRun) -> None:
    fake.start(1, 1, "build", at=NOW - 83, output=b"\x1b[1mcompiling\x1b[0m a.c\n\r 10%\r 90%")
    fake.start(2, 1, "lint", at=NOW - 30, output=b"x\n")
    fake.finish(2, 1, "lint", code=2, at=NOW - 18, reason=None)
    fake.start(3, 1, "pending-hb", at=NOW - 1, heartbeat=False)
    fake.start(4, 1, "oops", at=NOW - 50)
    fake.finish(4, 1, "oops", code=9, at=NOW - 40)
    fake.start(4, 2, "fine", at=NOW - 40)
    fake.finish(4, 2, "fine", code=0, at=NOW - 20)
    fake.write()
    lines = plain(board_lines(fake))
    # the run's id last, the first thing a narrow pane cuts; failures counted first
    assert lines[0] == "demo · running · 4 slots · 10m00s · 20260511T101500-abcd"
    assert lines[1] == "2 failed · 2 running · 0 pending · 1 succeeded"
    assert re.fullmatch(r"# state\s+task\s+time exit  output", lines[2])
    assert re.fullmatch(r"1 running\s+build\s+1m23s\s+ 90%", lines[3])
    assert re.fullmatch(r"2 failed\s+lint\s+12s\s+2  idle", lines[4])
    assert re.fullmatch(r"3 starting\s+pending-hb\s+1.0s\s+\(no launch heartbeat yet\)", lines[5])
    assert re.fullmatch(r"4 succeeded\s+fine\s+20s\s+0  idle", lines[6])
    # Slot 4 was reused: the attempt that failed there keeps a line of its own (by its
    # attempt: the slot's generation number is not one to show).
    assert re.fullmatch(r"  failed\s+oops\s+10s\s+9  slot 4, attempt 1", lines[7])
    assert len(lines) == 8


def test_a_run_whose_supervisor_is_gone_is_shown_interrupted_and_still_followed(tmp_path: Path) -> None:
    """Killed (``kill -9``) and not resumed yet: its snapshot still says ``running``. The board
    and the slot's view say ``interrupted``, as ``status`` does, rather than a run whose clock
    ticks on; they keep following it, for a ``resume`` makes it run again."""
    gone = FakeRun(tmp_path, jobs=1)
    gone.start(1, 1, "build", at=NOW - 83, output=b"compiling\n")
    gone.write()
    board, slot = BoardView(gone.run), SlotView(gone.run, 1)
    for view in (board, slot):
        frame = view.frame(80, 24, NOW, color=False, notice=None)
        assert "interrupted" in frame.lines[0] + frame.lines[2] and not frame.done, frame.lines[:3]
    lock = runlock.RunLock(gone.run)  # resumed: a supervisor holds the run again
    lock.acquire()
    try:
        assert "running" in board.frame(80, 24, NOW, color=False, notice=None).lines[0]
    finally:
        lock.release()


def test_an_interrupted_runs_end_that_no_supervisor_recorded_is_told_as_such(tmp_path: Path) -> None:
    """After kill -9, a worker that exits has its exit in its files only: the counters (the
    records) still count it running, as ``status`` does. Its row says it ended, with its
    exit, and that ``resume`` records it, never ``succeeded`` beside ``0 succeeded``; the
    run's clock stops where its records stop."""
    gone = FakeRun(tmp_path, jobs=2)
    gone.start(1, 1, "build", at=NOW - 83, output=b"compiling\n")
    gone.start(2, 1, "lint", at=NOW - 80)
    gone.finish(2, 1, "lint", code=0, at=NOW - 70, record=False)
    gone.write()
    state = gone.state()
    state["updated_at"] = NOW - 75  # its last snapshot, before the worker's end
    write_json_atomic(gone.run.state, state)
    lines = plain(BoardView(gone.run).frame(80, 24, NOW + 30, color=False, notice=None).lines)
    assert lines[0].startswith("demo · interrupted · 2 slots · 8m45s"), lines[0]
    assert lines[1] == "0 failed · 2 running · 0 succeeded", lines[1]
    assert re.fullmatch(r"1 running\s+build\s+1m53s\s+compiling", lines[3]), lines[3]
    assert re.fullmatch(r"2 ended\s+lint\s+10s\s+0  `resume` records it", lines[4]), lines[4]
    slot = plain(SlotView(gone.run, 2).frame(80, 24, NOW, color=False, notice=None).lines)
    assert slot[0].startswith("slot 2 · lint · ended"), slot[0]
    assert "not recorded: `resume` records it" in slot[1], slot[1]
    lock = runlock.RunLock(gone.run)  # resumed and running: the end is told as the records will say
    lock.acquire()
    try:
        lines = plain(BoardView(gone.run).frame(80, 24, NOW, color=False, notice=None).lines)
        assert re.fullmatch(r"2 succeeded\s+lint\s+10s\s+0  running", lines[4]), lines[4]
    finally:
        lock.release()


def _busy_run(root: Path, jobs: int, running: int, failed: int = 0) -> FakeRun:
    fake = FakeRun(root, jobs=jobs)
    for n in range(1, jobs + 1):
        name = f"shard-{n:03d}"
        fake.start(n, 1, name, at=NOW - n, output=b"step %d\n" % n)
        if n > running:
            fake.finish(n, 1, name, code=1 if n <= running + failed else 0, at=NOW - 0.5)
    fake.write()
    return fake


def test_board_at_100_running_slots_fits_80x24_with_every_slot(tmp_path: Path) -> None:
    fake = _busy_run(tmp_path, jobs=100, running=100)
    lines = plain(board_lines(fake, color=True))
    assert len(lines) <= 24 and all(width(line) <= 80 for line in lines)
    shown = {int(m) for line in lines[2:] for m in re.findall(r"(?:^|\s)(\d{1,3}) r \d{3}\b", line)}
    assert shown == set(range(1, 101))


def test_board_at_100_slots_folds_idle_slots_into_one_line(tmp_path: Path) -> None:
    fake = _busy_run(tmp_path, jobs=100, running=15, failed=3)
    lines = plain(board_lines(fake))
    assert len(lines) <= 24 and all(width(line) <= 80 for line in lines)
    assert lines[2].lstrip().startswith("# state")
    rows = lines[3:-1]
    assert [int(r.split()[0]) for r in rows] == list(range(1, 19))  # 15 running + 3 failed, in order
    assert all("step" in r for r in rows[:15])
    assert lines[-1] == "82 more slots: 82 idle (19-100)"


def test_board_frame_is_pure_and_the_final_picture_is_frozen(tmp_path: Path) -> None:
    fake = _busy_run(tmp_path, jobs=100, running=0, failed=4)
    state = fake.write(state="finished", ended_at=NOW - 0.5)
    gens = {n: read_gen(fake.run.generations(n)[-1]) for n in range(1, 101)}
    early = board_frame(state, gens, cols=80, rows=24, now=NOW)
    assert early == board_frame(state, gens, cols=80, rows=24, now=NOW + 9999)
    assert "finished" in early[0] and early[1] == "4 failed · 96 succeeded"  # an ended run counts no 0 running
    assert [int(line.split()[0]) for line in early[3:7]] == [1, 2, 3, 4]
    assert early[-1] == "96 more slots: 96 idle (5-100)"
    view = BoardView(fake.run)
    frame = view.frame(80, 24, NOW, color=False, notice=None)
    assert frame.done and frame.lines == early


def test_board_in_a_tiny_terminal_says_what_it_hides(tmp_path: Path) -> None:
    fake = _busy_run(tmp_path, jobs=100, running=100)
    lines = plain(board_lines(fake, cols=30, rows=6))
    assert len(lines) == 6 and all(width(line) <= 30 for line in lines)
    assert lines[-1].startswith("96 busy slots not shown")


def test_a_slot_whose_newest_generations_were_folded_away_shows_their_record(tmp_path: Path) -> None:
    """A trivial generation leaves no directory once its outcome is logged: the slot shows
    its newest recorded generation, not an older one still on disk (for its output)."""
    from zellij_swarm.render.reader import describe_slot

    older = GenPaths(tmp_path / "slots/slot-1/gen-1", 1, 1)
    older.dir.mkdir(parents=True)
    older.output.write_text("kept output\n")
    records = {(1, 1): {"task": "a", "status": "succeeded", "attempt": 1, "exit_code": 0},
               (1, 2): {"task": "b", "status": "succeeded", "attempt": 1, "exit_code": 0},
               (1, 3): {"task": "c", "status": "failed", "attempt": 1, "exit_code": 3,
                        "started_at": 10.0, "ended_at": 12.5}}
    for gen in (read_gen(older), None):
        row = describe_slot(1, gen, {"slot": 1, "state": "idle"}, records)
        assert (row.task, row.status, row.exit_code, row.elapsed(99.0)) == ("c", "failed", 3, 2.5)
    row = describe_slot(1, read_gen(older), {"slot": 1, "state": "running", "generation": 4, "task": "d"}, records)
    assert (row.task, row.status) == ("d", "running")  # its own generation is not on disk yet
    row = describe_slot(1, read_gen(older), {"slot": 1, "state": "reserved", "generation": 4, "task": "d"}, records)
    assert (row.task, row.status) == ("d", "starting")


def test_a_narrow_boards_title_drops_its_clock_and_id_whole_never_cuts_them(tmp_path: Path) -> None:
    """At 31 columns (the board's width in Zellij's default layout at 80×24) the title read
    `zadv · finished · 12 slots · 4…`, the clock cut: it is left out whole, as the run id is."""
    fake = _busy_run(tmp_path, jobs=12, running=0, failed=1)
    state = fake.write(state="finished", ended_at=NOW - 0.5)
    gens = {n: read_gen(fake.run.generations(n)[-1]) for n in range(1, 13)}
    base = "demo · finished · 12 slots"
    for cols in range(width(base), 80):
        title = board_frame(state, gens, cols=cols, rows=24, now=NOW)[0]
        assert title.startswith(base) and "…" not in title and width(title) <= cols, (cols, title)
    assert board_frame(state, gens, cols=31, rows=24, now=NOW)[0] == base
