"""The board as the user reads it in a small pane (issue 24 §6, §13): the output column of a
TUI agent is the last line its rendered screen says, with no escape debris; a compact board at
80×24 (its pane 39×6) names every failed task before a line goes to closed slots; busy slots
in the grid keep their state; the run id is never cut."""

from __future__ import annotations

import re
from pathlib import Path

from test_render_frames import NOW, FakeRun, plain

from zellij_swarm.records.generation_files import read_gen
from zellij_swarm.render.board import BoardView, board_frame
from zellij_swarm.worker.screen import LastScreenLines

E = "\x1b"
# What a curses agent wrote: charsets designated (ESC ( B, ESC ) 0), the alternate screen, a
# clock at the top, a prompt, and bottom rules in the DEC line-drawing set (ncurses' ESC ( 0
# … ESC ( B, and SO … SI).
CURSES = (f"{E}(B{E})0{E}[?1049h{E}[1;24r{E}[m{E}[H{E}[2Jclock 19:00:00{E}[6;3HReply to agent-2? "
          f"{E}[8;1H{E}(0mqqqqqqqqj{E}(B{E}[9;1H\x0eqqqqqqqqqq\x0f{E}[1;7H19:00:01{E}[6;20H").encode()
# An Ink agent: its prompt in a box, the box's bottom border last.
BOXED = "╭────────────╮\n│ > fix it    │\n╰────────────╯\n".encode()


def frames(fake: FakeRun, cols: int, rows: int) -> list[str]:
    return plain(BoardView(fake.run).frame(cols, rows, NOW, color=False, notice=None).lines)


def test_the_output_column_is_the_last_line_the_rendered_screen_says(tmp_path: Path) -> None:
    fake = FakeRun(tmp_path, jobs=2)
    fake.start(1, 1, "curses", at=NOW - 5, output=CURSES)
    fake.start(2, 1, "ink", at=NOW - 5, output=BOXED)
    fake.write()
    lines = frames(fake, 80, 24)
    assert re.fullmatch(r"1 running\s+curses\s+5.0s\s+Reply to agent-2\?", lines[3]), lines
    assert re.fullmatch(r"2 running\s+ink\s+5.0s\s+> fix it", lines[4]), lines
    assert not any(debris in line for line in lines for debris in ("(B", ")0", "qqq", "└", "╰", "─"))


def test_the_last_line_is_read_again_only_when_the_file_changed(tmp_path: Path) -> None:
    log = tmp_path / "output.log"
    log.write_bytes(b"one\ntwo\n")
    seen = LastScreenLines()
    assert seen.get(log) == "two"
    with log.open("ab") as f:
        f.write(b"\r\x1b[Kthree")
    assert seen.get(log) == "three"
    seen.forget_except(set())
    assert seen.get(tmp_path / "gone.log") == ""


def _failed_run(root: Path) -> FakeRun:
    """Four slots, eight tasks, four of them failed, every slot reused and closed at the end."""
    fake = FakeRun(root, jobs=4)
    outcomes = {"agent-1": 0, "agent-2": 3, "agent-3": 0, "agent-4": 1, "agent-5": 2, "agent-6": 0,
                "agent-7": 1, "agent-8": 0}
    for i, (name, code) in enumerate(outcomes.items()):
        slot, gen = i % 4 + 1, i // 4 + 1
        fake.start(slot, gen, name, at=NOW - 60 + i, output=b"work\n")
        fake.finish(slot, gen, name, code=code, at=NOW - 50 + i)
    for s in fake.slots.values():
        s["state"] = "closed"
    fake.write(state="finished", ended_at=NOW - 40)
    return fake


def test_a_compact_board_at_80x24_names_every_failed_task_before_the_closed_slots(tmp_path: Path) -> None:
    fake = _failed_run(tmp_path)
    lines = frames(fake, 39, 6)
    assert lines[0] == "demo · finished · 4 slots · 9m20s"  # the run id left out, not cut
    assert lines[1] == "4 failed · 4 succeeded"
    named = " ".join(lines[2:])
    for name, code in (("agent-2", 3), ("agent-4", 1), ("agent-5", 2), ("agent-7", 1)):
        assert f"{name} (exit {code})" in named
    assert lines[2].startswith("failed: ") and all(len(line) <= 39 for line in lines)
    # with a row to spare, the closed slots get theirs last
    assert frames(fake, 39, 7)[-1] == "4 more slots: 4 closed (1-4)"


def test_too_many_failures_for_the_pane_are_counted_never_cut(tmp_path: Path) -> None:
    fake = _failed_run(tmp_path)
    lines = frames(fake, 30, 4)
    assert lines[2:] == ["failed: agent-2 (exit 3)", "agent-4 (exit 1) · +2 more"]


def test_busy_slots_in_the_grid_keep_their_state(tmp_path: Path) -> None:
    fake = FakeRun(tmp_path, jobs=4)
    for n in range(1, 5):
        fake.start(n, 1, f"agent-{n}", at=NOW - n)
    fake.tasks["agent-3"]["waiting_input"] = True
    state = fake.write()
    gens = {n: read_gen(fake.run.generations(n)[-1]) for n in range(1, 5)}
    lines = plain(board_frame(state, gens, cols=39, rows=6, now=NOW))
    cells = " ".join(lines[3:])
    assert re.search(r"1 run\s+t-1\b", cells) and re.search(r"3 wait\s+t-3\b", cells), lines


def test_an_ended_worktree_task_shows_how_many_files_it_changed(tmp_path: Path) -> None:
    fake = FakeRun(tmp_path, jobs=2)
    for slot, name in ((1, "agent-1"), (2, "agent-2")):
        fake.start(slot, 1, name, at=NOW - 9)
        fake.finish(slot, 1, name, code=0, at=NOW - 5)
    fake.tasks["agent-1"]["worktree"] = {"path": "/x", "branch": "swarm/r/agent-1", "base": "abc",
                                         "changed_files": 3}
    fake.tasks["agent-2"]["worktree"] = {"path": "/y", "branch": "swarm/r/agent-2", "base": "abc",
                                         "changed_files": 1}
    fake.write()
    lines = frames(fake, 80, 24)
    assert re.fullmatch(r"1 succeeded\s+agent-1\s+4.0s\s+0  3 files changed · idle", lines[3]), lines
    assert lines[4].endswith("0  1 file changed · idle")
