"""``report RUN --html FILE``: one self-contained HTML page of a run — a timeline with a lane
per slot and a bar per attempt, the run's counts, and the proof's figures.

The page loads nothing: no script, no stylesheet, font or image from anywhere, so it opens
offline, from an archive of CI artifacts, or as an e-mail attachment. The timeline is inline
SVG and stands alone as XML (a test parses it with ``xml.etree``); its only URL is the SVG
namespace.

Every attempt of every task is a bar: the ended ones from the rows' ``history``, and a running
task's current attempt up to the moment the page is made (marked ``running``), so a report of
a run that is still going shows what has happened so far. A bar's colour is its outcome; its
``<title>`` (the hover text) says the task, the attempt, the exit code or signal, the reason
and the duration, and for a Slurm step the node and job it ran on (and, where Slurm accounting
is configured, its state and elapsed time as ``sacct`` recorded them). An attempt that did not
succeed is drawn over its neighbours and at least ``_MIN_FAILED_W`` wide, so a failure of 0
seconds in a long run still shows.

Time a worker spent waiting for input (its ``worker_waiting_input`` events) is hatched on its
bar, diagonal strokes drawn as one path (the page uses no ``url()``: no pattern), with a title
saying how long it waited. Under the timeline, the tasks that failed (failed, timed out,
lost): name, exit, duration, command.

Whatever a task or run name holds, it is data: shown the way ``quoting.terminal_text`` shows
it (a newline as ``\\n``, an escape character as ``\\x1b``), then HTML-escaped, with the
characters XML forbids removed (``junit.clean``), so the page and its SVG always parse.
"""

from __future__ import annotations

import html
import json
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from zellij_swarm import exc, quoting
from zellij_swarm.commands.junit import clean
from zellij_swarm.commands.proof import prove
from zellij_swarm.commands.status import load_status, task_specs_of, when
from zellij_swarm.records import log as records
from zellij_swarm.records.rundir import RunPaths, open_to_write, unwritable_why
from zellij_swarm.records.states import FAILED_STATUSES, UNSUCCESSFUL_STATUSES
from zellij_swarm.records.task import GENERATED_NAME, command_text
from zellij_swarm.render.console import COUNT_ORDER, counts_text
from zellij_swarm.worker.slurm import Slurm

# An outcome's colour: what went wrong is warm, what ended quietly is grey, what still runs is blue.
COLOURS = {"succeeded": "#2f9e44", "failed": "#e03131", "timed_out": "#f08c00", "lost": "#7048e8", "unknown": "#c2255c",
           "cancelled": "#868e96", "running": "#1c7ed6"}
_OTHER_COLOUR = "#495057"  # a status this version does not know (records of a newer one)
SVG_NS = "http://www.w3.org/2000/svg"

# Timeline geometry, in SVG user units (pixels at 100 %): 1200 wide fits a laptop window.
_WIDTH = 1160
_LABEL_W = 70  # the lane labels left of the bars
_RIGHT = 20
_AXIS_H = 28  # the time axis above the lanes
_LANE_H = 22
_LANE_GAP = 4
_MIN_BAR_W = 1.5  # an attempt of a few milliseconds is still visible
_MIN_FAILED_W = 4.0  # a failure of no time at all is seen, not only hovered
_HATCH = 5.0  # the spacing of the strokes that hatch time spent waiting for input
_LABEL_CHAR_W = 6.5  # the width of a character of an 11-unit sans-serif label, on average
_TICK_STEPS = (0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 43200, 86400)
_MAX_TICKS = 10


@dataclass(frozen=True, slots=True)
class Bar:
    """One attempt on the timeline."""

    task: str
    attempt: int
    slot: int
    generation: int | None
    start: float
    end: float
    status: str  # an attempt's status (SPEC §7.1), or "running"
    exit_code: int | None
    signal: str | None
    reason: str | None
    slurm: dict[str, Any] | None = None  # a Slurm step's node, job and time queued (``Attempt.slurm``)


def attempt_bars(tasks: Iterable[dict[str, Any]], now: float) -> list[Bar]:
    """Every attempt of every task row: its ended ones (``history``), then its running one."""
    bars = []
    for t in tasks:
        for a in t.get("history") or []:
            end = a.get("ended_at")
            start = a.get("started_at")
            if end is None and start is None:
                continue  # no time recorded: nothing to place
            start = end if start is None else start  # a worker never seen starting: a sliver at its end
            bars.append(Bar(t["name"], a["attempt"], a["slot"], a.get("generation"), start,
                            end if end is not None else now, a["status"], a.get("exit_code"), a.get("signal"),
                            a.get("reason"), a.get("slurm")))
        if t["status"] == "running" and t.get("slot") is not None and t.get("started_at") is not None:
            bars.append(Bar(t["name"], t["attempts"], t["slot"], t.get("generation"), t["started_at"],
                            max(now, t["started_at"]), "running", None, None, None, t.get("slurm")))
    return bars


def with_accounting(bars: list[Bar], cluster: Slurm) -> list[Bar]:
    """Each Slurm attempt's bar with what Slurm accounting recorded of its job — its end state
    and elapsed time (``sacct``, one call for the page) — where accounting is configured; the
    bars as they are otherwise."""
    jobs = [str(b.slurm["job"]) for b in bars if b.slurm and b.slurm.get("job")]
    accounted = cluster.accounting(jobs) if jobs else None
    if not accounted:
        return bars
    out = []
    for b in bars:
        got = accounted.get(str(b.slurm.get("job"))) if b.slurm else None
        out.append(b if got is None or b.slurm is None else
                   replace(b, slurm={**b.slurm, "sacct": {"state": got[0], "elapsed_s": got[1]}}))
    return out


Waits = dict[tuple[int, int], list[tuple[float, float]]]


WAITING_EVENTS = frozenset({"worker_waiting_input"})  # the event-log lines ``waiting_spans`` reads


def waiting_spans(events: Iterable[dict[str, Any]], bars: Iterable[Bar]) -> Waits:
    """The time each generation, by ``(slot, generation)``, waited for input: from a
    ``worker_waiting_input`` event saying it waits to the next saying it does not (or cannot
    be known), else to the end of its bar."""
    ends = {(b.slot, b.generation): b.end for b in bars if b.generation is not None}
    spans: Waits = {}
    since: dict[tuple[int, int], float] = {}
    for e in events:
        if e.get("event") not in WAITING_EVENTS:
            continue
        key, ts = (e.get("slot"), e.get("gen")), e.get("ts")
        if not isinstance(key[0], int) or not isinstance(key[1], int) or not isinstance(ts, (int, float)):
            continue
        gen = (key[0], key[1])
        if e.get("waiting") is True:
            since.setdefault(gen, ts)
        elif gen in since:
            spans.setdefault(gen, []).append((since.pop(gen), ts))
    for gen, start in since.items():
        if gen in ends:
            spans.setdefault(gen, []).append((start, max(start, ends[gen])))
    return spans


def _shown(text: object) -> str:
    """``text`` for the page: visible escapes for controls, then HTML/XML-escaped."""
    return html.escape(clean(quoting.terminal_text(text)), quote=True)


def bar_title(bar: Bar) -> str:
    """The hover text of a bar (plain text; escaped where it is placed)."""
    outcome = bar.status.replace("_", " ")
    if bar.signal:
        outcome += f", {bar.signal}" + (f" (exit {bar.exit_code})" if bar.exit_code is not None else "")
    elif bar.exit_code is not None:
        outcome += f", exit {bar.exit_code}"
    if bar.reason:
        outcome += f", reason {bar.reason}"
    so_far = " so far" if bar.status == "running" else ""
    slurm = bar.slurm or {}
    where = "".join(f" · {key} {slurm[key]}" for key in ("node", "job") if slurm.get(key))
    if slurm.get("queued_s"):  # time in Slurm's queue, not in the bar: it was not charged
        where += f" · queued {slurm['queued_s']:g} s"
    if accounted := slurm.get("sacct"):  # Slurm accounting's word, where it is configured
        where += f" · sacct {accounted['state']}, {accounted['elapsed_s']:g} s"
    return (f"{bar.task} · attempt {bar.attempt} · {outcome} · {bar.end - bar.start:.3f} s{so_far} · slot {bar.slot}"
            f"{where}")


def _tick_step(span: float) -> float:
    return next((s for s in _TICK_STEPS if span / s <= _MAX_TICKS), span / _MAX_TICKS)


def _offset(seconds: float) -> str:
    """A tick label: time since the timeline's start."""
    if seconds < 60:
        return f"{seconds:g}s"
    m, s = divmod(int(seconds), 60)
    return f"{m}m{s:02d}s" if m < 60 else f"{m // 60}h{m % 60:02d}m"


def _hatch(x0: float, x1: float, y0: float, y1: float) -> str:
    """The path data of 45° strokes every ``_HATCH`` units across the box, clipped to it."""
    h = y1 - y0
    out = []
    a = x0 - h
    while a < x1:  # a stroke from (a, y1) up to (a + h, y0)
        sx, sy = (a, y1) if a >= x0 else (x0, y1 - (x0 - a))
        ex, ey = (a + h, y0) if a + h <= x1 else (x1, y0 + (a + h - x1))
        if ex > sx:
            out.append(f"M{sx:.2f} {sy:.2f}L{ex:.2f} {ey:.2f}")
        a += _HATCH
    return "".join(out)


def timeline_svg(bars: list[Bar], slots: int, t0: float, t1: float, waits: Waits | None = None) -> str:
    """The timeline: lanes ``slot 1`` … ``slot N`` top to bottom, time left to right;
    ``waits``: time spent waiting for input, hatched on the bars."""
    waits = waits or {}
    span = max(t1 - t0, 1e-3)
    plot_w = _WIDTH - _LABEL_W - _RIGHT
    height = _AXIS_H + slots * (_LANE_H + _LANE_GAP) + _LANE_GAP

    def x(t: float) -> float:
        return _LABEL_W + (t - t0) / span * plot_w

    out = [f'<svg xmlns="{SVG_NS}" class="timeline" width="{_WIDTH}" height="{height}" '
           f'viewBox="0 0 {_WIDTH} {height}" font-family="sans-serif" font-size="12">']
    step = _tick_step(span)
    ticks = [i * step for i in range(int(span / step) + 1)]
    out.append('<g class="axis">')
    for tick in ticks:
        tx = x(t0 + tick)
        out.append(f'<line x1="{tx:.1f}" y1="{_AXIS_H - 6}" x2="{tx:.1f}" y2="{height}" stroke="#dee2e6"/>')
        out.append(f'<text x="{tx:.1f}" y="{_AXIS_H - 10}" text-anchor="middle" fill="#495057">{_offset(tick)}</text>')
    out.append("</g>")
    by_slot: dict[int, list[Bar]] = {}
    for b in bars:
        by_slot.setdefault(b.slot, []).append(b)
    for slot in range(1, slots + 1):
        y = _AXIS_H + (slot - 1) * (_LANE_H + _LANE_GAP) + _LANE_GAP
        out.append(f'<g class="lane" data-slot="{slot}">')
        out.append(f'<text x="{_LABEL_W - 8}" y="{y + _LANE_H * 0.7:.1f}" text-anchor="end">slot {slot}</text>')
        out.append(f'<rect class="lane-bg" x="{_LABEL_W}" y="{y}" width="{plot_w}" height="{_LANE_H}" fill="#f8f9fa"/>')
        # what did not succeed last: drawn over a neighbour that starts where it ended
        for b in sorted(by_slot.get(slot, []), key=lambda b: b.status in UNSUCCESSFUL_STATUSES):
            bx = x(b.start)
            bw = max(_MIN_FAILED_W if b.status in UNSUCCESSFUL_STATUSES else _MIN_BAR_W, x(b.end) - bx)
            out.append(f'<rect class="bar" data-status="{_shown(b.status)}" data-task="{_shown(b.task)}" '
                       f'data-attempt="{b.attempt}" x="{bx:.2f}" y="{y + 2}" width="{bw:.2f}" height="{_LANE_H - 4}" '
                       f'fill="{COLOURS.get(b.status, _OTHER_COLOUR)}" stroke="#ffffff" stroke-width="0.5">'
                       f"<title>{_shown(bar_title(b))}</title></rect>")
            for start, end in waits.get((b.slot, b.generation), []) if b.generation is not None else []:
                wx0, wx1 = max(bx, x(start)), min(bx + bw, x(max(end, start)))
                if wx1 - wx0 < 1:
                    wx1 = min(bx + bw, wx0 + 1)
                hatch = _hatch(wx0, wx1, y + 2, y + _LANE_H - 2)
                out.append(f'<path class="waiting" data-task="{_shown(b.task)}" d="{hatch}" stroke="#ffffff" '
                           f'stroke-width="1.5" stroke-opacity="0.8" fill="none">'
                           f"<title>{_shown(f'{b.task} · waiting for input · {end - start:.1f} s')}</title></path>")
            if (label := _fitted(quoting.terminal_text(b.task), bw)) is not None:
                out.append(f'<text class="label" x="{bx + 4:.2f}" y="{y + _LANE_H * 0.68:.1f}" fill="#ffffff" '
                           f'font-size="11" pointer-events="none">{_shown(label)}</text>')
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out)


def _fitted(name: str, width: float) -> str | None:
    """The task's name cut to fit inside its bar (a screenshot has no hover), or None when
    not even two characters fit."""
    room = int((width - 8) / _LABEL_CHAR_W)
    if room < 2:
        return None
    return name if len(name) <= room else name[:room - 1] + "…"


def _proof_rows(proof: dict[str, Any]) -> list[tuple[str, str]]:
    fb = proof["first_batch"]
    return [
        ("verdict", "OK" if proof["ok"] else "FAILED: " + "; ".join(f"{b['code']}: {b['message']}"
                                                                   for b in proof["blockers"])),
        ("max concurrency", f"{proof['max_concurrency']} of {proof['slots']} slot(s)"),
        ("speed-up", "n/a" if proof["speedup"] is None else f"{proof['speedup']:.2f}×"),
        ("utilization", "n/a" if proof["utilization"] is None else f"{proof['utilization']:.1%}"),
        ("wall / active", f"{proof['wall_ms'] / 1000:.3f} s / {proof['active_ms'] / 1000:.3f} s"),
        ("generations", f"{proof['generations']['ran']} ran of {proof['generations']['dirs']} reserved"
                        + (f", {proof['generations']['running']} running" if proof["generations"]["running"] else "")),
        ("wrapper pids", f"{proof['pids']['unique']} unique"),
        ("first batch", "n/a" if fb["launch_span_ms"] is None else
         f"{fb['started']}/{fb['size']} started within {fb['launch_span_ms']:g} ms"),
        ("scheduler check", ("consistent" if proof["consistency"]["ok"] else "INCONSISTENT")
         if proof["consistency"]["checked"] else f"not checked: {proof['consistency']['why']}"),
    ] + [(f"warning {w['code']}", w["message"]) for w in proof["warnings"]]


def failed_rows(tasks: Iterable[dict[str, Any]], commands: dict[str, str]) -> list[tuple[str, str, str, str]]:
    """The tasks that failed, in plan order: name, exit (or signal, or outcome), duration,
    command (``commands``: by name, the task's as it was given)."""
    out = []
    for t in tasks:
        if t.get("status") not in FAILED_STATUSES:
            continue
        code, signal = t.get("exit_code"), t.get("signal")
        how = signal or (str(code) if code is not None else "-")
        if t["status"] != "failed":
            how = f"{t['status'].replace('_', ' ')}" + (f" ({how})" if how != "-" else "")
        took = t.get("duration_s")
        out.append((t["name"], how, "-" if took is None else f"{took:.3f} s",
                    t.get("command") or commands.get(t["name"], "")))
    return out


def _grid(header: tuple[str, ...], rows: Iterable[tuple[str, ...]], css: str) -> str:
    head = "".join(f"<th>{_shown(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_shown(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{css}"><tr>{head}</tr>{body}</table>'


def _table(rows: Iterable[tuple[str, str]], css: str) -> str:
    cells = "".join(f"<tr><th>{_shown(k)}</th><td>{_shown(v)}</td></tr>" for k, v in rows)
    return f'<table class="{css}">{cells}</table>'


_STYLE = """
body { font-family: sans-serif; margin: 20px; color: #212529; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 18px 0 6px; }
.sub { color: #495057; margin-bottom: 12px; }
table { border-collapse: collapse; } th, td { text-align: left; padding: 2px 12px 2px 0; vertical-align: top; }
th { font-weight: normal; color: #495057; }
.legend span { display: inline-block; margin-right: 14px; }
.legend i { display: inline-block; width: 12px; height: 12px; margin-right: 4px; vertical-align: -1px; }
.legend i.hatch { background: repeating-linear-gradient(-45deg, #1c7ed6 0 3px, #a5d8ff 3px 5px); }
table.failed td { font-family: monospace; } table.failed th { color: #212529; }
.columns { display: flex; gap: 48px; flex-wrap: wrap; }
pre { font-size: 11px; background: #f8f9fa; padding: 8px; overflow: auto; }
"""


def render_report(run: RunPaths, *, now: float | None = None) -> str:
    """The page for ``run`` in whatever state it is in (``load_status``, ``prove``)."""
    now = time.time() if now is None else now
    snap = load_status(run)
    proof = prove(run, now=now)
    bars = with_accounting(attempt_bars(snap["tasks"], now), Slurm(os.environ))
    waits = waiting_spans(records.iter_events(run.events, only=WAITING_EVENTS), bars)
    failed = failed_rows(snap["tasks"], {spec.name: command_text(spec) for spec in task_specs_of(run)
                                         if not GENERATED_NAME.fullmatch(spec.name)})
    slots = max([snap.get("jobs") or 0, proof["slots"], *(b.slot for b in bars)])
    t0 = min([snap["started_at"], *(b.start for b in bars)])
    ended = snap.get("ended_at")
    t1 = max([ended if ended is not None else now, *(b.end for b in bars)])
    counts = snap.get("counts") or {}
    name = snap.get("name")
    title = f"{name} · {snap['run_id']}" if name else snap["run_id"]
    legend = "".join(f'<span><i style="background:{c}"></i>{s.replace("_", " ")}</span>' for s, c in COLOURS.items())
    count_rows = [(s.replace("_", " "), str(counts[s])) for s in COUNT_ORDER if counts.get(s)]
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>zellij-swarm report: {_shown(title)}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>{_shown(title)}</h1>",
        f'<div class="sub">{_shown(snap["state"])} · started {_shown(when(snap["started_at"]))}'
        f" · {slots} slot(s) · {_shown(counts_text(counts))} · report made {_shown(when(now))}</div>",
        "<h2>Timeline</h2>",
        f'<div class="legend">{legend}<span><i class="hatch"></i>waiting for input (hatched)</span></div>',
        timeline_svg(bars, slots, t0, t1, waits),
        *([f"<h2>Failed tasks ({len(failed)})</h2>",
           _grid(("task", "exit", "duration", "command"), failed, "failed")] if failed else []),
        '<div class="columns"><div><h2>Tasks</h2>',
        _table(count_rows or [("tasks", "none")], "counts"),
        "</div><div><h2>Proof of parallelism</h2>",
        _table(_proof_rows(proof), "proof"),
        "</div></div>",
        "<details><summary>proof --json</summary>",
        f"<pre>{_shown_block(json.dumps(proof, indent=1, ensure_ascii=False))}</pre></details>",
        "</body></html>",
        "",
    ])


def _shown_block(text: str) -> str:
    """Multi-line text for a ``<pre>``: each line as ``_shown`` shows it."""
    return "\n".join(_shown(line) for line in text.split("\n"))


def write_report(run: RunPaths, out: Path, *, now: float | None = None) -> None:
    """Write the page to ``out``: a file, or a device or FIFO written through (never replaced,
    so ``--html /dev/stdout`` works). A path that cannot be written — a directory, a missing
    directory, no permission — is a usage error naming it, as for ``--junit`` and ``--joblog``."""
    if out.is_dir():
        raise exc.UsageError(f"--html {out}: is a directory, expected a file name")
    page = render_report(run, now=now)  # first: a run that cannot be read leaves ``out`` untouched
    try:
        with open(open_to_write(out, os.O_CREAT | os.O_TRUNC), "w", encoding="utf-8") as f:
            f.write(page)
    except OSError as e:
        raise exc.UsageError(f"--html {out}: cannot write it: {unwritable_why(e)}") from None
