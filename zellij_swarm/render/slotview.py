"""``slot-view``: one slot of a run, for a compact-mode pane (SPEC §2, §9).

Layout (every line clipped to the pane width)::

    slot 3 · build-17 · running · attempt 2
    elapsed 1m23s · heartbeat seen, 2s ago · pid 4242
    ── output ─────────────────────────── run running ──
    <the tail of output.log through a pyte screen filling the remaining rows>
    ── stderr ──────────────────────────────────────────
    <the tail of stderr.log, when a headless or compact worker wrote to it: up to a third>

The view follows the slot's newest generation directory for output (state.json may lag it by
~250 ms) and state.json for the task's identity and recorded status. Elapsed time counts from
this generation's own start (its ``claim``), not the slot's. Once the generation has an exit
record, or state.json records a terminal status for it, the header shows only recorded facts
(status, exit code, duration, end time, reason) and stops changing until the next generation
appears in the slot.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import IO, Any

from zellij_swarm import exc
from zellij_swarm.quoting import terminal_text
from zellij_swarm.records.generation_files import GenInfo, GenReader
from zellij_swarm.records.rundir import RunPaths
from zellij_swarm.records.states import RunState
from zellij_swarm.render.loop import Frame, run_view
from zellij_swarm.render.reader import UNRECORDED_END, StateReader, describe_slot, gen_records, slot_entries
from zellij_swarm.render.text import STATUS_SGR, clip, clock_time, duration, join_parts
from zellij_swarm.worker.screen import TailScreen

Tail = Callable[[int, int], list[str]]
STDERR_MIN_BODY = 4  # output rows below which a slot view shows stdout alone


def _exit_text(code: int | None, signal: str | None) -> str:
    if code is None:
        return "no exit record"
    return f"exit {code}" + (f" ({signal})" if signal else "")


def slot_frame(
    slot: int,
    state: dict[str, Any] | None,
    gen: GenInfo | None,
    *,
    cols: int,
    rows: int,
    now: float,
    tail: Tail | None = None,
    color: bool = False,
    notice: str | None = None,
) -> list[str]:
    """The slot view's lines for one moment: a pure function of its inputs and ``tail``.

    ``tail(cols, rows)`` gives the rendered output lines (see ``TailScreen.render``).
    """
    entry = slot_entries(state).get(slot)
    row = describe_slot(slot, gen, entry, gen_records(state),
                        interrupted=(state or {}).get("state") == RunState.INTERRUPTED)
    style = STATUS_SGR.get(row.status)

    title: list[tuple[str, str | None]] = [(f"slot {slot}", "1"), (" · ", None)]
    if row.task is not None:
        title += [(terminal_text(row.task), "1"), (" · ", None)]
        if row.command:  # a generated name (task-N) says little: its command says what it is
            title += [(terminal_text(row.command), None), (" · ", None)]
    title.append(("waiting for input", "1;45") if row.waiting else (row.status.replace("_", " "), style))
    if row.attempt is not None:
        title.append((f" · attempt {row.attempt}", None))

    if state is None:
        detail = "waiting for the run to start (no state.json yet)"
    elif isinstance(state.get("jobs"), int) and not 1 <= slot <= state["jobs"]:
        detail = f"this run has slots 1-{state['jobs']}; slot {slot} will stay empty"
    elif row.gen is None and (row.live or row.task is None):  # (one folded away is told by its record)
        detail = "waiting for the worker to start" if row.live else "no task has run in this slot yet"
    elif row.live and row.gen is not None:
        hb = row.gen
        parts = [f"elapsed {duration(row.elapsed(now))}"]
        if hb.heartbeat_seen and hb.heartbeat_at is not None:
            parts.append(f"heartbeat seen, {duration(now - hb.heartbeat_at)} ago")
        else:
            parts.append("heartbeat waiting")
        if hb.pid is not None:
            parts.append(f"pid {hb.pid}")
        detail = " · ".join(parts)
    else:
        parts = [_exit_text(row.exit_code, row.signal), f"ran {duration(row.elapsed(now))}"]
        if row.reason:
            parts.append(f"reason {terminal_text(row.reason)}")
        if row.ended_at is not None:
            parts.append(f"ended {clock_time(row.ended_at)}")
        if row.status == UNRECORDED_END:
            parts.append("not recorded: `resume` records it")
        # Only what was recorded (SPEC §9): whether a launch heartbeat was seen is not — it
        # goes with the generation's files when they are folded, maybe before a view read it
        # (a worker that never sent one ended with a reason, shown above).
        detail = " · ".join(parts)

    run_state = (state or {}).get("state") or "starting"
    label = f" {notice} " if notice else " output "
    right = f" run {terminal_text(run_state)} ──"
    fill = max(cols - 2 - len(label) - len(right), 0)
    rule = clip("──" + label + "─" * fill + right, cols)

    lines = [
        join_parts(title, cols, color),
        clip(detail, cols),
        join_parts([(rule, "33" if notice else "2")], cols, color),
    ][:rows]
    body = rows - len(lines)
    if body > 0:
        out = tail(cols, body) if tail is not None and row.gen is not None else []
        lines += (out + [""] * body)[:body]
    return lines


class SlotView:
    """Reads the run directory for ``slot_frame``; keeps the pyte screen between frames."""

    def __init__(self, run: RunPaths, slot: int) -> None:
        self.run = run
        self.slot = slot
        self.states = StateReader(run)
        self.gens = GenReader(run)
        self.screen = TailScreen()
        self.errors = TailScreen()  # a compact worker's stderr, kept apart from its stdout (stderr.log)

    def frame(self, cols: int, rows: int, now: float, *, color: bool, notice: str | None) -> Frame:
        state = self.states.load()
        gen = self.gens.newest(self.slot)

        def tail(c: int, r: int) -> list[str]:
            if gen is None:
                return []
            # The stderr's own rows, as many as it wrote up to a third of the body: a compiler's
            # error stays in sight under the output it interrupted.
            err = self.errors.render(gen.paths.stderr, c, r // 3, color=color) if r >= STDERR_MIN_BODY else []
            while err and not err[-1]:  # a blank row is "" (screen._line_text)
                err.pop()
            if not err:
                return self.screen.render(gen.paths.output, c, r, color=color)
            return [*self.screen.render(gen.paths.output, c, r - 1 - len(err), color=color),
                    join_parts([(("── stderr " + "─" * c)[:c], "2")], c, color), *err]

        lines = slot_frame(
            self.slot, self.states.shown(state), gen, cols=cols, rows=rows, now=now, tail=tail, color=color,
            notice=notice,
        )
        done = state is not None and state.get("state") != RunState.RUNNING
        watch = [self.run.dir, self.run.slots, self.run.slot_dir(self.slot)]
        if gen is not None:
            watch.append(gen.paths.dir)
        return Frame(lines, done=done, watch=tuple(p for p in watch if os.path.isdir(p)))


def run_slot_view(run: RunPaths, slot: int, *, once: bool = False, out: IO[str] | None = None, **options: Any) -> int:
    """``zellij-swarm slot-view [RUN] SLOT``: follow one slot until the run ends; 0 on a clean end.

    ``once`` prints one frame (sized to the terminal, 80×24 when there is none) and returns.
    ``options`` go to ``loop.Loop`` (``watcher``, ``clock``, ``sleep``, ``size``, ``color``).
    """
    if slot < 1:
        raise exc.UsageError(f"slot must be 1 or more, not {slot}")
    return run_view(SlotView(run, slot), once=once, out=out or sys.stdout, **options)
