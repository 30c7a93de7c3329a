"""``board``: every slot of a run on one screen, plus the run's counters (SPEC §2, §9).

Layout::

    demo · 20260511T101500-ab12 · running · 12 slots · 3m04s
    running 9 · pending 30 · succeeded 58 · failed 2 · timed out 1
      1 running   build-17         1m23s       compiling foo.c
      2 starting  test-3              2s       (no launch heartbeat yet)
      3 failed    lint              12s     1  idle · reason timeout
      4 idle

A row shows the slot's newest generation: state, task, elapsed time, exit code (once a
worktree task has ended, how many files it changed: ``3 files changed · idle``) and, while it
runs, the last line of its output that says something, as the slot view shows it: the
worker's output rendered through a terminal screen (``worker.screen``), so a TUI's cursor
moves, charset switches and box borders leave no debris. A finished row
shows only what was recorded when it finished (§9). When every slot fits and rows are left
over, attempts that did not succeed in a slot that has since been reused get a line each
(``  failed  lint  12s  2  slot 3 gen 1``), so the final picture names every failure.

Fitting many slots (e.g. 100 slots in 80×24), in three steps:

1. **Full**: one line per slot, in slot order, when they all fit.
2. **Folded**: otherwise the busy slots (running, starting, reserved) keep their full lines,
   then slots whose last task did not succeed, as many as fit (most recent first), all shown in
   slot order; every other slot is folded into one summary line, ``+ 72 more: 70 idle
   (3-5,9,…) · 2 closed``.
3. **Grid**: when even the busy slots do not fit one per line, they are laid out in columns of
   short cells, ``slot task elapsed`` (no output line), as many columns as needed; the rest is
   folded as above. At 80×24 that is 5 columns × 21 rows: 100 running slots, all visible. If a
   terminal is too small even for that, the summary line counts the busy slots not shown.

Whatever the step, every task that failed is named before any line goes to idle or closed
slots: when their rows do not fit, the rows after the busy ones name them, ``failed:
agent-2 (exit 3) · agent-4 (exit 1)``, names never cut. The title drops the run's id rather
than cut it, and a run that has ended counts no zero ``running`` or ``pending``.

No paging or scrolling: the picture is a stable function of the run's state, so the final
frame left on screen at the end of the run is complete and readable.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping
from typing import IO, Any

from zellij_swarm.quoting import terminal_text
from zellij_swarm.records.generation_files import GenInfo, GenReader
from zellij_swarm.records.rundir import RunPaths
from zellij_swarm.records.states import FAILED_STATUSES, TERMINAL_STATUSES, UNSUCCESSFUL_STATUSES, RunState
from zellij_swarm.render.console import COUNT_ORDER
from zellij_swarm.render.loop import Frame, run_view
from zellij_swarm.render.reader import (
    UNRECORDED_END,
    SlotRow,
    StateReader,
    describe_slot,
    gen_records,
    json_number,
    slot_entries,
)
from zellij_swarm.render.text import STATUS_SGR, clip, clip_middle, duration, join_parts, pad, ranges, width
from zellij_swarm.worker.screen import LastScreenLines

WAITING = "waiting_for_input"  # not a status: running tasks whose worker waits for a person
WAITING_SGR = "1;45"
# the console's order (failures first), with who waits for a person before the running ones
COUNTERS = (*COUNT_ORDER[:COUNT_ORDER.index("running")], WAITING, *COUNT_ORDER[COUNT_ORDER.index("running"):])
ALWAYS_COUNTED = frozenset({"failed", "running", "pending", "succeeded"})
COLUMNS = ("state", "task", "time", "exit", "output")
STATUS_W = 9
ELAPSED_W = 6
EXIT_W = 4
MIN_CELL = 12


def _slot_numbers(state: dict[str, Any] | None, gens: Mapping[int, GenInfo | None]) -> list[int]:
    jobs = (state or {}).get("jobs")
    numbers = set(range(1, jobs + 1)) if isinstance(jobs, int) and 0 < jobs <= 4096 else set()
    return sorted(numbers | set(slot_entries(state)) | set(gens))


def _header(state: dict[str, Any] | None, n_slots: int, cols: int, now: float, color: bool,
            waiting: int | None = None) -> list[str]:
    """The run's title line (its id last: the first thing a narrow pane cuts), then its
    counters, never cut: they wrap onto further lines when the pane is narrow (``waiting``:
    how many wait for input, when not as the state's rows say)."""
    if state is None:
        return [clip("waiting for the run to start (no state.json yet)", cols)]
    run_state = str(state.get("state") or "?")
    started = json_number(state.get("started_at"))
    until = json_number(state.get("ended_at")) or json_number(state.get("last_seen_at"))  # (``StateReader.shown``)
    elapsed = None if started is None else (until or now) - started
    title = [
        (terminal_text(state.get("name") or "swarm"), "1"),
        (" · ", None),
        (run_state, "1;33" if run_state == RunState.RUNNING else ("32" if run_state == RunState.FINISHED else "1;31")),
        *_paused(state),
        (f" · {n_slots} slots", None),
    ]
    # then its clock and its id, each only whole: a time or a run id cut short says nothing
    for part in (f" · {duration(elapsed)}", f" · {terminal_text(state.get('run_id') or '')}"):
        if sum(width(text) for text, _ in title) + width(part) > cols:
            break
        title.append((part, None))
    return [join_parts(title, cols, color), *_counters(state, cols, color, waiting)]


def _paused(state: dict[str, Any]) -> list[tuple[str, str | None]]:
    """`` · paused`` (the run) or `` · paused: gpu, io`` (groups), while the run goes on."""
    paused = state.get("paused") if state.get("state") == RunState.RUNNING else None
    if not isinstance(paused, dict) or not (paused.get("run") or paused.get("groups")):
        return []
    what = "paused" if paused.get("run") else "paused: " + ", ".join(map(terminal_text, paused.get("groups") or []))
    return [(" · ", None), (what, "1;35")]


def _counters(state: dict[str, Any], cols: int, color: bool, waiting: int | None = None) -> list[str]:
    """``1 failed · 2 waiting for input · 3 running · 10 pending · 58 succeeded``: failures
    first, then who needs a person, then the rest; as many lines as the width needs."""
    counts = dict(state.get("counts") or {})
    if waiting is None:
        waiting = sum(1 for t in state.get("tasks") or [] if isinstance(t, dict) and t.get("status") == "running"
                      and t.get("waiting_input"))
    parts: list[tuple[str, str | None]] = []
    ended = state.get("state") != RunState.RUNNING
    for name in COUNTERS:
        n = (waiting if name == WAITING else counts.get(name)) or 0
        if n or (name in ALWAYS_COUNTED and not (ended and name in ("running", "pending"))):
            code = (WAITING_SGR if name == WAITING else STATUS_SGR.get(name)) if n else None
            parts.append((f"{n} {name.replace('_', ' ')}", code))
    lines: list[list[tuple[str, str | None]]] = [[]]
    used = 0
    for text, code in parts:
        gap = 3 if lines[-1] else 0  # " · "
        if lines[-1] and used + gap + len(text) > cols:
            lines.append([])
            used, gap = 0, 0
        if gap:
            lines[-1].append((" · ", None))
        lines[-1].append((text, code))
        used += gap + len(text)
    return [join_parts(line, cols, color) for line in lines]


def _changed_files(state: dict[str, Any] | None) -> dict[str, int]:
    """A worktree task's changed-files count by task name, once it has one (when it ended)."""
    out = {}
    for t in (state or {}).get("tasks") or []:
        wt = t.get("worktree") if isinstance(t, dict) else None
        if isinstance(wt, dict) and isinstance(wt.get("changed_files"), int):
            out[str(t.get("name"))] = wt["changed_files"]
    return out


def _detail(row: SlotRow, last_line: str, changed: int | None = None) -> str:
    if row.status in TERMINAL_STATUSES and changed is not None:  # a worktree task's work, for review
        files = f"{changed} file{'' if changed == 1 else 's'} changed"
        return f"{files} · {_detail(row, last_line)}"
    if row.waiting:
        return f"waiting for input · {last_line}" if last_line else "waiting for input"
    if row.status == "starting":
        return last_line or "(no launch heartbeat yet)"
    if row.status == "queued":
        return "Slurm's queue: time not charged"
    if row.live:
        return last_line or (row.command or "")
    if row.status == UNRECORDED_END:
        return "`resume` records it"
    if row.status in TERMINAL_STATUSES:
        where = "idle" if row.slot_state == "idle" else row.slot_state
        return f"{where} · reason {terminal_text(row.reason)}" if row.reason else where
    return ""


def _task_text(row: SlotRow) -> str:
    """A task's name, and its command when the name was generated (``task-3 make -C lib``)."""
    name = terminal_text(row.task or "")
    return f"{name} {terminal_text(row.command)}" if row.command else name


def _state_word(row: SlotRow) -> str:
    return "waiting" if row.waiting else row.status.replace("_", " ")


def _column_header(sw: int, tw: int, cols: int, color: bool) -> str:
    text = (f"{'#':>{sw}} " + pad("state", STATUS_W) + " " + pad("task", tw) + " " + pad("time", ELAPSED_W, right=True)
            + " " + pad("exit", EXIT_W, right=True) + "  output")
    return join_parts([(text, "2")], cols, color).rstrip()


def _row_line(row: SlotRow, sw: int, tw: int, cols: int, now: float, last_line: str, color: bool,
              changed: int | None = None) -> str:
    exit_text = "" if row.exit_code is None else str(row.exit_code)
    elapsed = row.elapsed(now)
    parts = [
        (f"{row.slot:>{sw}} ", None),
        (pad(_state_word(row), STATUS_W), WAITING_SGR if row.waiting else STATUS_SGR.get(row.status)),
        (" " + pad(_task_text(row), tw), None),
        (" " + pad("" if elapsed is None else duration(elapsed), ELAPSED_W, right=True), None),
        (" " + pad(exit_text, EXIT_W, right=True), "1;31" if row.exit_code not in (None, 0) else None),
        ("  " + terminal_text(_detail(row, last_line, changed)), "2" if not row.live else None),
    ]
    return join_parts(parts, cols, color).rstrip()


def _short(seconds: float | None) -> str:
    """At most 3 columns: ``42s``, ``12m``, ``3h``, ``4d``."""
    if seconds is None:
        return "…"
    s = max(int(seconds), 0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s // size}{unit}" if s // size < 100 else f"99{unit}"
    return f"{s}s"


CELL_STATES = {"running": "run", "waiting": "wait", "starting": "start", "queued": "queue", "reserved": "rsrv"}
CELL_STATE_W = 5
CELL_NAME_W = 6  # the narrowest name a cell keeps next to its state word; narrower, a letter


def _cell_state_w(sw: int, cell_w: int) -> int:
    """The columns a grid cell gives its state: the short word, or its first letter."""
    return CELL_STATE_W if cell_w - sw - 1 - CELL_STATE_W - 1 - 1 - 3 - 1 >= CELL_NAME_W else 1


def _cell(row: SlotRow, sw: int, cell_w: int, now: float, color: bool, strip: str = "") -> str:
    """``12 wait  agent-7  3m``: a busy slot in the grid, its state kept (short: a letter in
    narrow cells)."""
    state_w = _cell_state_w(sw, cell_w)
    name_w = max(cell_w - sw - 1 - state_w - 1 - 1 - 3 - 1, 1)
    name = terminal_text(row.task or row.status)
    name = clip_middle(name[len(strip) :] if strip and name.startswith(strip) else name, name_w)
    state = _state_word(row)
    parts = [(f"{row.slot:>{sw}} ", None),
             (f"{CELL_STATES.get(state, state):<{state_w}.{state_w}}",
              WAITING_SGR if row.waiting else STATUS_SGR.get(row.status)),
             (f" {name:<{name_w}} {_short(row.elapsed(now)):>3}", None)]
    return join_parts(parts, cell_w - 1, color)


def _failed_tasks(state: dict[str, Any] | None) -> list[tuple[str, str]]:
    """Every task that failed (failed, timed out, lost), in plan order, with how:
    ``("agent-2", "exit 3")``."""
    out = []
    for t in (state or {}).get("tasks") or []:
        if isinstance(t, dict) and t.get("status") in FAILED_STATUSES:
            code = t.get("exit_code")
            how = f"exit {code}" if t["status"] == "failed" and isinstance(code, int) else str(t["status"])
            out.append((terminal_text(str(t.get("name"))), how.replace("_", " ")))
    return out


def _names_failures(body: list[str], failed: list[tuple[str, str]]) -> bool:
    """Whether every failed task's name stands whole on a line of ``body``."""
    words = {w for line in body for w in line.split()}
    return all(name in words for name, _ in failed)


def _failure_lines(failed: list[tuple[str, str]], cols: int, room: int, color: bool) -> list[str]:
    """``failed: agent-2 (exit 3) · agent-4 (exit 1)``, wrapped over at most ``room`` lines
    without cutting a name; the names that do not fit are counted (``+3 more``)."""
    if room <= 0 or not failed:
        return []
    words = [f"{name} ({how})" for name, how in failed]

    def text(i: int, row: list[str]) -> str:
        return ("failed: " if i == 0 else "") + " · ".join(row)

    rows: list[list[str]] = [[]]
    for word in words:
        if rows[-1] and width(text(len(rows) - 1, [*rows[-1], word])) > cols:
            rows.append([])
        rows[-1].append(word)
    if len(rows) > room:
        rows = rows[:room]
        shown = sum(map(len, rows))
        while rows[-1] and width(text(room - 1, [*rows[-1], f"+{len(words) - shown} more"])) > cols:
            rows[-1].pop()
            shown -= 1
        rows[-1].append(f"+{len(words) - shown} more")
    return [join_parts([(text(i, row), "1;31")], cols, color) for i, row in enumerate(rows)]


def _common_prefix(names: list[str], keep: int) -> str:
    """The prefix all ``names`` share (``shard-``), if dropping it helps: at least 3 characters,
    and leaving every name at least ``keep`` characters."""
    if len(names) < 2:
        return ""
    # Character by character (task names, not paths): the prefix the smallest and the largest
    # name share is the one every name shares.
    first, last = min(names), max(names)
    size, limit = 0, min(len(first), len(last))
    while size < limit and first[size] == last[size]:
        size += 1
    prefix = first[:size]
    prefix = prefix[: max(min(len(n) for n in names) - keep, 0)]
    return prefix if len(prefix) >= 3 else ""


def _fold_line(rest: list[SlotRow], hidden_busy: int, cols: int, strip: str = "") -> str:
    """The slots without a line of their own, in words: ``4 more slots: 3 idle (2-3, 6),
    1 idle after a failure (5)``."""
    by_kind: dict[str, list[int]] = {}
    for row in rest:
        if row.live:
            kind = "busy"
        elif row.slot_state == "closed":
            kind = "closed"
        else:
            kind = "idle after a failure" if row.status in UNSUCCESSFUL_STATUSES else "idle"
        by_kind.setdefault(kind, []).append(row.slot)
    parts = [f"{len(by_kind[kind])} {kind} ({ranges(by_kind[kind]).replace(',', ', ')})"
             for kind in ("idle after a failure", "idle", "closed") if kind in by_kind]
    if hidden_busy:  # what matters most first: a narrow pane cuts the end
        text = f"{hidden_busy} busy slots not shown (enlarge the pane)" + "".join(f", {p}" for p in parts)
    else:
        text = f"{len(rest)} more slot{'s' if len(rest) != 1 else ''}: " + ", ".join(parts) if rest else ""
    if strip:
        note = f"names without {strip!r}"
        text = f"{note} · {text}" if text and not hidden_busy else (f"{text} · {note}" if text else note)
    return clip(text, cols)


def _unlucky_tasks(records: dict[tuple[int, int], dict[str, Any]], shown: set[tuple[int, int]], sw: int,
                   tw: int, cols: int, room: int, color: bool) -> list[str]:
    """Lines for attempts that did not succeed and are no longer any slot's newest generation,
    newest first, in the rows left over: a slot's reuse must not hide a failure."""
    hidden = sorted(
        ((key, rec) for key, rec in records.items()
         if key not in shown and rec.get("status") in UNSUCCESSFUL_STATUSES),
        key=lambda item: -(json_number(item[1].get("ended_at")) or 0.0),
    )
    if room <= 0 or not hidden:
        return []
    lines = []
    for (slot, _), rec in hidden[: room if len(hidden) <= room else room - 1]:
        status = str(rec.get("status"))
        started, ended = json_number(rec.get("started_at")), json_number(rec.get("ended_at"))
        took = duration(ended - started) if started is not None and ended is not None else ""
        code = rec.get("exit_code")
        attempt = rec.get("attempt")
        where = f"slot {slot}" + (f", attempt {attempt}" if isinstance(attempt, int) else "")
        where += f" · reason {terminal_text(rec['reason'])}" if rec.get("reason") else ""
        where += " · then succeeded" if rec.get("task_status") == "succeeded" else ""
        parts = [
            (" " * sw + " ", None),
            (pad(status.replace("_", " "), STATUS_W), STATUS_SGR.get(status)),
            (" " + pad(_task_text(SlotRow(slot, "", status, task=rec.get("task"), command=rec.get("command"))), tw),
             None),
            (" " + pad(took, ELAPSED_W, right=True), None),
            (" " + pad("" if code is None else str(code), EXIT_W, right=True), "1;31" if code else None),
            ("  " + where, "2"),
        ]
        lines.append(join_parts(parts, cols, color).rstrip())
    if len(hidden) > room:
        lines.append(clip(f"{len(hidden) - room + 1} more attempts did not succeed", cols))
    return lines


def board_frame(
    state: dict[str, Any] | None,
    gens: Mapping[int, GenInfo | None],
    *,
    cols: int,
    rows: int,
    now: float,
    last_lines: Mapping[int, str] | None = None,
    color: bool = False,
    notice: str | None = None,
) -> list[str]:
    """The board's lines for one moment: a pure function of its inputs.

    ``gens`` maps slot numbers to their newest generation (or ``None``); ``last_lines`` maps
    slot numbers to the last output line of that generation.
    """
    last_lines = last_lines or {}
    entries = slot_entries(state)
    records = gen_records(state)
    changed = _changed_files(state)
    interrupted = (state or {}).get("state") == RunState.INTERRUPTED
    slots = [describe_slot(n, gens.get(n), entries.get(n), records, interrupted=interrupted)
             for n in _slot_numbers(state, gens)]
    # with no supervisor its rows' waiting is a gone one's last word: the slots' own (``describe_slot``)
    lines = _header(state, len(slots), cols, now, color, sum(1 for r in slots if r.waiting) if interrupted else None)
    footer = [join_parts([(notice, "33")], cols, color)] if notice else []
    room = max(rows - len(lines) - len(footer), 0)
    sw = len(str(max((r.slot for r in slots), default=1)))
    fixed = sw + 1 + STATUS_W + 1 + 1 + ELAPSED_W + 1 + EXIT_W + 2
    name_lengths = [len(_task_text(r)) for r in slots]
    tw = min(max([*name_lengths, 8]), max((cols - fixed) // 2, 8))

    def full(selected: list[SlotRow], room: int) -> list[str]:
        """A column header, the rows of ``selected``, then the attempts that did not succeed
        and are no slot's newest any more, in the rows left of ``room``."""
        lines = [_row_line(r, sw, tw, cols, now, last_lines.get(r.slot, ""), color, changed.get(r.task or ""))
                 for r in selected]
        shown = {(r.slot, r.number) for r in selected if r.number is not None}
        lines += _unlucky_tasks(records, shown, sw, tw, cols, room - 1 - len(lines), color)
        return [_column_header(sw, tw, cols, color), *lines] if lines else []

    busy = [r for r in slots if r.live]
    hidden_busy, strip, fold = 0, "", True
    if len(slots) < room:
        body = full(slots, room)
        busy_part = full(busy, len(busy) + 1) if busy else []
        chosen, fold = {r.slot for r in slots}, False
    elif room == 0:
        body = busy_part = []
        chosen = set()
    else:
        unlucky = sorted(
            (r for r in slots if r.status in UNSUCCESSFUL_STATUSES),
            key=lambda r: -(r.ended_at or 0.0),
        )
        if len(busy) <= room - 2:  # a column header, the busy rows, the fold line
            chosen = {r.slot for r in busy} | {r.slot for r in unlucky[: room - 2 - len(busy)]}
            body = full([r for r in slots if r.slot in chosen], room - 1)
            busy_part = full(busy, len(busy) + 1) if busy else []
        else:
            grid_rows = room - 1
            ncols = max(math.ceil(len(busy) / grid_rows), 1) if grid_rows else 1
            cell_w = cols // ncols
            while ncols > 1 and cell_w < MIN_CELL:
                ncols -= 1
                cell_w = cols // ncols
            capacity = grid_rows * ncols
            visible, hidden = busy[:capacity], busy[capacity:]
            used_rows = math.ceil(len(visible) / ncols) if visible else 0
            body = []
            names = [terminal_text(r.task or r.status) for r in visible]
            name_w = cell_w - sw - 6 - _cell_state_w(sw, cell_w) - 1
            strip = _common_prefix(names, 3) if max(map(len, names), default=0) > name_w else ""
            for y in range(used_rows):
                # Column-major, like ``ls``: slot numbers run down each column.
                cells = [visible[x * used_rows + y] for x in range(ncols) if x * used_rows + y < len(visible)]
                body.append("".join(_cell(r, sw, cell_w, now, color, strip) + " " for r in cells).rstrip())
            busy_part = list(body)
            chosen = {r.slot for r in visible}
            hidden_busy = len(hidden)
    failed = _failed_tasks(state)
    if room and failed and not _names_failures(body, failed):
        # the busy rows, then every failure by name, then (a row left) what the other slots do
        named = _failure_lines(failed, cols, room - len(busy_part), color)
        body = busy_part + named
        chosen &= {r.slot for r in busy}
        fold = len(body) < room
    rest = [r for r in slots if r.slot not in chosen]
    if fold and (rest or strip or hidden_busy):
        body.append(_fold_line(rest, hidden_busy, cols, strip))
    return (lines + body + footer)[:rows]


class BoardView:
    """Reads the run directory for ``board_frame``; caches what cannot change any more."""

    def __init__(self, run: RunPaths) -> None:
        self.run = run
        self.states = StateReader(run)
        self.last_lines = LastScreenLines()
        self.gens = GenReader(run)

    def frame(self, cols: int, rows: int, now: float, *, color: bool, notice: str | None) -> Frame:
        state = self.states.load()
        numbers = set(self.run.slot_numbers()) | set(slot_entries(state))
        gens = {n: self.gens.newest(n) for n in sorted(numbers)}
        live_paths = {g.paths.output: n for n, g in gens.items() if g is not None and not g.done}
        last = {n: self.last_lines.get(p) for p, n in live_paths.items()}
        self.last_lines.forget_except(set(live_paths))
        lines = board_frame(self.states.shown(state), gens, cols=cols, rows=rows, now=now, last_lines=last, color=color,
                            notice=notice)
        done = state is not None and state.get("state") != RunState.RUNNING
        watch = [self.run.dir, self.run.slots]
        watch += [self.run.slot_dir(n) for n in gens]
        watch += [g.paths.dir for g in gens.values() if g is not None and not g.done]
        return Frame(lines, done=done, watch=tuple(p for p in watch if os.path.isdir(p)))


def run_board(run: RunPaths, *, once: bool = False, out: IO[str] | None = None, **options: Any) -> int:
    """``zellij-swarm board [RUN]``: show the board until the run ends; 0 on a clean end.

    ``once`` prints one frame (sized to the terminal, 80×24 when there is none) and returns.
    ``options`` go to ``loop.Loop`` (``watcher``, ``clock``, ``sleep``, ``size``, ``color``).
    """
    return run_view(BoardView(run), once=once, out=out or sys.stdout, **options)
