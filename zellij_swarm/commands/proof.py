"""The parallel-runtime proof (SPEC §8 ``proof``): how parallel a run really was, from the
evidence the wrappers left on disk — never from the scheduler's launch events.

Evidence, per generation directory ``slots/slot-<n>/gen-<m>/``:

* start: the ``claim`` file's modification time (the wrapper creates or restamps it as its
  first act) and its content, the wrapper's pid. A claim that holds ``supervisor`` (a pane that
  never reported in and was abandoned) or no claim at all means no wrapper ran there: not
  evidence, nor is a claim that names no pid and no end (a wrapper killed between creating
  its claim and writing its pid into it, which it does before running anything).
* end: the ``exit`` sidecar's modification time (the wrapper's last durable act); when there is
  no sidecar, ``exit.json``'s ``ended_at`` (the supervisor's record for a wrapper that vanished).
  A generation with neither is still running and counts up to ``now`` (or, on a run that has
  already ended, up to the run's recorded end, with a warning).

One ``stat`` of the claim, one read of its few bytes and one ``stat`` of the sidecar per
generation; ``exit.json`` is parsed only when the sidecar is missing (``generation_files``
``read_claim`` and ``ended_at``). The scheduler's records are read only for the slot count
(``run.json``), the reservation time and members of the first batch (the head of
``events.jsonl``, read by ``metrics.first_batch``, the same reading a resumed supervisor
rebuilds its metrics with) and, for the consistency check, its metrics (``summary.json``,
else ``state.json``).

Decisions (the upstream design's weaknesses, research notes §11 items 17–18, not repeated):

* Concurrency is a sweep line over the closed intervals ``[start, end]``. File modification
  times are coarse (the kernel stamps them from a clock tick, a few ms), so a slot's next worker
  can carry the very timestamp its predecessor ended with: at equal timestamps ends count
  before starts, and back-to-back generations never count as overlapping.
* Concurrency above the slot count always fails the proof (``concurrency_exceeded_slots``); one
  pid in two overlapping generations is impossible unless the records are corrupt
  (``pid_overlap``). A pid reused by non-overlapping generations (the OS recycles pids) is legal
  and only listed.
* The overlap timeline is bounded: up to ``TIMELINE_LIMIT`` exact change points; beyond that,
  ``TIMELINE_LIMIT`` equal-width buckets over the wall time, each with the highest, lowest and
  time-weighted mean concurrency inside it. Nothing is truncated away, so the timeline still
  covers the whole run.
* The consistency check compares the scheduler's ``active_slot_time_ms``, ``utilization`` (as the
  active time it implies: utilization × scheduler wall × slots), ``wall_time_ms`` (must cover the
  evidence's wall) and ``first_batch_launch_span_ms`` with this proof's figures. Tolerance: the
  larger of 20 ms and 5 % of the scheduler's value. Both sides come from the same wrapper files,
  so a disagreement beyond that means corrupt records or a scheduler that miscounts: unlike
  upstream, ``metrics_inconsistent`` is a blocker. It is checked only once the run has ended
  (finished or cancelled: a running or interrupted run's snapshot lags its files); otherwise it
  is reported as not checked, with the warning ``metrics_unchecked``.

CLI (``zellij-swarm proof RUN [--json] [--min-concurrency N] [--min-speedup X]
[--max-launch-span MS]``): print ``format_proof(report)`` or the report as JSON; exit 0 when
``report["ok"]``, else 1 (a run that is not a run directory: ``exc.UsageError``, exit 2).
"""

from __future__ import annotations

import textwrap
import time
from collections import defaultdict
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

from zellij_swarm import exc
from zellij_swarm.engine import metrics
from zellij_swarm.records import generation_files
from zellij_swarm.records import log as records
from zellij_swarm.records.rundir import RunPaths, read_json
from zellij_swarm.records.states import RunState

TIMELINE_LIMIT = 200
TOLERANCE_MS = 20.0
TOLERANCE_FRACTION = 0.05
_LIST_LIMIT = 20  # reused / overlapping pids listed in full up to this many
_FIRST_BATCH = frozenset(metrics.FIRST_BATCH_EVENTS)
_OUTCOMES = frozenset(generation_files.OUTCOME_EVENTS)
TIE_RULE = ("at equal timestamps ends count before starts: file modification times are coarse "
            "(a clock tick, a few ms), so back-to-back generations in one slot never overlap")
TOLERANCE_TEXT = (f"max({TOLERANCE_MS:g} ms, {TOLERANCE_FRACTION:.0%} of the scheduler's value); "
                  "utilization is compared as the active time it implies")


def _load(path: Path) -> dict[str, Any] | None:
    try:
        obj = read_json(path)
    except (FileNotFoundError, ValueError):
        return None
    return obj if isinstance(obj, dict) else None


def _dispatch_events(run: RunPaths) -> Iterator[dict[str, Any]]:
    """The events ``metrics.first_batch`` reads, lazily: it stops at the first batch's end, so
    only the head of a long log is read. Other lines are not parsed."""
    return records.iter_events(run.events, only=_FIRST_BATCH)


def _folded_outcomes(run: RunPaths) -> dict[tuple[int, int], tuple[float, float, int | None, str | None]]:
    """(start, end, pid, Slurm node) of every generation the log records as ended by its
    wrapper — a folded generation's only record (``generation_files.fold``); other lines are
    not parsed."""
    out: dict[tuple[int, int], tuple[float, float, int | None, str | None]] = {}
    for e in records.iter_events(run.events, only=_OUTCOMES):
        slot, gen, start, end, pid = (e.get(k) for k in ("slot", "gen", "started_at", "ended_at", "pid"))
        if isinstance(slot, int) and isinstance(gen, int) and isinstance(start, (int, float)) \
                and isinstance(end, (int, float)):
            node = e.get("node")
            out[(slot, gen)] = (float(start), float(end), pid if isinstance(pid, int) else None,
                                node if isinstance(node, str) else None)
    return out


def _node(gen: generation_files.GenPaths) -> str | None:
    """The Slurm node a generation's launch heartbeat names (None: a local one)."""
    hb = generation_files.heartbeat_started(gen)
    return hb["node"] if hb is not None else None


def _num(value: float | None) -> str:
    """A compared figure in a message; a side that measured nothing says so."""
    return "none" if value is None else f"{value:g}"


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def _timeline(points: list[tuple[float, int]], t0: float, t1: float) -> dict[str, Any]:
    """``points``: collapsed change points (time, level from then on), sorted by time."""
    out: dict[str, Any] = {"t0": t0, "limit": TIMELINE_LIMIT, "change_points": len(points)}
    if len(points) <= TIMELINE_LIMIT:
        out["mode"] = "change_points"
        out["points"] = [{"t": round(t - t0, 3), "running": lvl} for t, lvl in points]
        return out
    out["mode"] = "buckets"
    n = TIMELINE_LIMIT
    width = (t1 - t0) / n
    hi = [0] * n
    lo: list[int | None] = [None] * n
    area = [0.0] * n
    for (s, lvl), (e, _) in pairwise(points):
        b0 = min(n - 1, int((s - t0) / width))
        b1 = min(n - 1, int((e - t0) / width))
        for b in range(b0, b1 + 1):
            bs, be = t0 + b * width, t0 + (b + 1) * width
            overlap = min(e, be) - max(s, bs)
            if overlap <= 0:
                continue
            if lvl > hi[b]:
                hi[b] = lvl
            low = lo[b]
            if low is None or lvl < low:
                lo[b] = lvl
            area[b] += max(0.0, overlap) * lvl
    out["bucket_s"] = round(width, 6)
    out["points"] = [{"t": round(b * width, 3), "running": hi[b], "min": lo[b] or 0,
                      "mean": round(area[b] / width, 2)} for b in range(n)]
    return out


def prove(run: RunPaths, *, min_concurrency: int | None = None, min_speedup: float | None = None,
          max_launch_span_ms: float | None = None, now: float | None = None) -> dict[str, Any]:
    """The proof report of ``run`` (a JSON-able dict, schema ``schemas/proof.schema.json``), in
    any state the run is in. Records that cannot be read at all are ``exc.UsageError``."""
    try:
        return _prove(run, min_concurrency, min_speedup, max_launch_span_ms, time.time() if now is None else now)
    except OSError as e:
        raise exc.UsageError(f"cannot read the records of run {run.run_id}: {e.filename or run.dir}: "
                             f"{e.strerror or e}") from None


def _prove(run: RunPaths, min_concurrency: int | None, min_speedup: float | None,
           max_launch_span_ms: float | None, now: float) -> dict[str, Any]:
    meta = _load(run.run_json)
    if meta is None:
        raise exc.UsageError(f"{run.dir} is not a run directory (no readable run.json)")
    final = _load(run.summary)
    snapshot = final or _load(run.state)
    try:
        state = RunState(str((snapshot or {}).get("state")))
    except ValueError:
        state = RunState.RUNNING  # no snapshot yet: a supervisor that has not written one (or was killed first)
    jobs = meta.get("jobs")
    if not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1:
        raise exc.UsageError(f"{run.run_json} records no slot count (jobs): cannot check concurrency against it")
    # Ended: its supervisor finished (or was cancelled) and wrote its end. An interrupted run's
    # workers may still be going, so, like a running one, its open generations count up to now.
    run_ended = (snapshot or {}).get("ended_at") if state.ended else None
    if not isinstance(run_ended, (int, float)):
        run_ended = None
    open_until = run_ended if run_ended is not None else now

    blockers: list[dict[str, str]] = []
    warnings: list[dict[str, str]] = []

    # ----- the wrappers' evidence ---------------------------------------------------------
    gens: list[tuple[int, int, float, float, int | None, bool]] = []  # slot, gen, start, end, pid, open
    dirs = not_started = supervisor_ended = 0
    on_disk = {key: (g, generation_files.read_claim(g)) for key, g in run.generations_on_disk().items()}
    ends = {key: generation_files.ended_at(g) for key, (g, claim) in on_disk.items() if claim is not None}
    # The log is read after the files: a generation the supervisor folds away while they are read
    # (claim first, then its exit sidecar) is found in it, not taken for one still running.
    folded = _folded_outcomes(run)
    nodes: dict[str, int] = defaultdict(int)  # generations that ran on each Slurm node
    on_slurm = (meta.get("settings") or {}).get("executor", {}).get("value") == "slurm"
    for slot, no in sorted(on_disk.keys() | folded.keys()):
        dirs += 1
        if (slot, no) in folded:  # its outcome event is its record, on disk or folded away
            start, end, pid, node = folded[(slot, no)]
            gens.append((slot, no, start, max(start, end), pid, False))
            if node:
                nodes[node] += 1
            continue
        g, claim = on_disk[(slot, no)]
        if claim is None or claim.by_supervisor:
            not_started += 1
            continue
        ended = ends[(slot, no)]
        if ended is None and claim.unwritten:  # its wrapper writes its pid before running anything
            not_started += 1
            continue
        if ended is not None and ended[1]:
            supervisor_ended += 1
        end = open_until if ended is None else ended[0]
        gens.append((slot, no, claim.at, max(claim.at, end), claim.pid, ended is None))
        node = folded[(slot, no)][3] if (slot, no) in folded else _node(g) if on_slurm else None
        if node:
            nodes[node] += 1
    running = sum(1 for x in gens if x[5])
    if running and run_ended is not None:
        warnings.append({"code": "exit_record_missing",
                         "message": f"{running} generation(s) have no exit record although the run has ended; "
                                    "counted up to the run's end"})

    # ----- pids ---------------------------------------------------------------------------
    by_pid: dict[int, list[tuple[float, float, int, int]]] = defaultdict(list)
    missing_pid = 0
    for slot, gen, s, e, pid, _ in gens:
        if pid is None:
            missing_pid += 1
        else:
            by_pid[pid].append((s, e, slot, gen))
    reused: list[dict[str, Any]] = []
    overlapping: list[dict[str, Any]] = []
    for pid, uses in by_pid.items():
        if len(uses) < 2:
            continue
        uses.sort()
        clash = any(b[0] < a[1] for a, b in pairwise(uses))
        entry = {"pid": pid, "generations": [{"slot": sl, "generation": gn} for _, _, sl, gn in uses]}
        (overlapping if clash else reused).append(entry)
    if overlapping:
        ex = overlapping[0]
        blockers.append({"code": "pid_overlap",
                         "message": f"{len(overlapping)} pid(s) were used by overlapping generations (e.g. pid "
                                    f"{ex['pid']} in " + ", ".join(f"slot {g['slot']} gen {g['generation']}"
                                                                   for g in ex["generations"])
                                    + "): the records are corrupt"})

    # ----- concurrency sweep --------------------------------------------------------------
    changes: list[tuple[float, int]] = []
    for _, _, s, e, _, _ in gens:
        changes.append((s, 1))
        changes.append((e, -1))
    changes.sort()  # (t, -1) sorts before (t, +1): ends before starts at equal timestamps
    level = peak = 0
    peak_at: float | None = None
    points: list[tuple[float, int]] = []
    for t, delta in changes:
        level += delta
        if points and points[-1][0] == t:
            points[-1] = (t, level)
        else:
            points.append((t, level))
        if level > peak:
            peak, peak_at = level, t

    active = sum(e - s for _, _, s, e, _, _ in gens)
    t0: float | None
    t1: float | None
    timeline: dict[str, Any]
    if gens:
        t0 = min(x[2] for x in gens)
        t1 = max(x[3] for x in gens)
        wall = t1 - t0
        timeline = _timeline(points, t0, t1)
    else:
        t0 = t1 = None
        wall = 0.0
        timeline = {"mode": "change_points", "limit": TIMELINE_LIMIT, "change_points": 0, "t0": None, "points": []}
    speedup = round(active / wall, 3) if wall > 0 else None
    utilization = round(active / (wall * jobs), 4) if wall > 0 else None

    # ----- first batch --------------------------------------------------------------------
    reserved_at, members = metrics.first_batch(_dispatch_events(run))
    starts = {(sl, gn): s for sl, gn, s, _, _, _ in gens}
    member_starts = [starts[m] for m in members if m in starts]
    span = None
    if reserved_at is not None and member_starts:
        span = _ms(max(0.0, max(member_starts) - reserved_at))

    # ----- verdict ------------------------------------------------------------------------
    if not gens:
        blockers.append({"code": "no_evidence", "message": "no generation of this run was started by a wrapper"})
    if peak > jobs:
        blockers.append({"code": "concurrency_exceeded_slots",
                         "message": f"{peak} workers ran at once (at {peak_at:.3f}) but the run has {jobs} slot(s)"})
    if min_concurrency is not None and peak < min_concurrency:
        blockers.append({"code": "concurrency_below_min",
                         "message": f"at most {peak} worker(s) ran at once; at least {min_concurrency} required"})
    if min_speedup is not None and (speedup is None or speedup < min_speedup):
        got = "no measurable speed-up" if speedup is None else f"speed-up {speedup:g}×"
        blockers.append({"code": "speedup_below_min", "message": f"{got}; at least {min_speedup:g}× required"})
    if max_launch_span_ms is not None and (span is None or span > max_launch_span_ms):
        got = "the first batch's launch span could not be measured" if span is None else \
            f"the first batch took {span:g} ms to launch"
        blockers.append({"code": "launch_span_above_max",
                         "message": f"{got}; at most {max_launch_span_ms:g} ms allowed"})

    consistency = _consistency(snapshot, run_ended is not None, jobs, active, wall, span)
    if consistency["ok"] is False:
        bad = [c for c in consistency["checks"] if not c["ok"]]
        blockers.append({"code": "metrics_inconsistent",
                         "message": "the scheduler's metrics disagree with the wrappers' evidence: " + "; ".join(
                             f"{c['metric']} {_num(c['scheduler'])} vs {_num(c['proof'])} "
                             f"(tolerance {c['tolerance_ms']:g} ms)" for c in bad)})
    elif not consistency["checked"]:
        warnings.append({"code": "metrics_unchecked", "message": consistency["why"]})

    return {
        "run_id": run.run_id,
        "generated_at": round(now, 6),
        "run_state": state,
        "ok": not blockers,
        "slots": jobs,
        "generations": {"dirs": dirs, "ran": len(gens), "not_started": not_started, "running": running,
                        "ended_by_supervisor": supervisor_ended},
        "pids": {"unique": len(by_pid), "missing": missing_pid,
                 "reused_count": len(reused), "reused": reused[:_LIST_LIMIT],
                 "overlapping_count": len(overlapping), "overlapping": overlapping[:_LIST_LIMIT]},
        "nodes": dict(sorted(nodes.items())),
        "max_concurrency": peak,
        "max_concurrency_at": peak_at,
        "tie_rule": TIE_RULE,
        "first_start": t0,
        "last_end": t1,
        "wall_ms": _ms(wall),
        "active_ms": _ms(active),
        "speedup": speedup,
        "utilization": utilization,
        "first_batch": {"size": len(members), "started": len(member_starts), "reserved_at": reserved_at,
                        "last_start": max(member_starts) if member_starts else None, "launch_span_ms": span},
        "timeline": timeline,
        "consistency": consistency,
        "thresholds": {"min_concurrency": min_concurrency, "min_speedup": min_speedup,
                       "max_launch_span_ms": max_launch_span_ms},
        "blockers": blockers,
        "warnings": warnings,
    }


def _tolerance(value: float) -> float:
    return max(TOLERANCE_MS, TOLERANCE_FRACTION * abs(value))


def _consistency(snapshot: dict[str, Any] | None, ended: bool, jobs: int, active_s: float, wall_s: float,
                 span: float | None) -> dict[str, Any]:
    out: dict[str, Any] = {"checked": False, "ok": None, "tolerance": TOLERANCE_TEXT, "why": None, "checks": []}
    figures = (snapshot or {}).get("metrics")
    if not isinstance(figures, dict):
        out["why"] = "the run has no scheduler metrics (no summary.json or state.json)"
        return out
    if not ended:
        out["why"] = "the run has not ended (running or interrupted): its scheduler snapshot lags the wrappers' files"
        return out
    checks = out["checks"]
    active, wall = active_s * 1000, wall_s * 1000

    def check(metric: str, sched: float, proof: float, ok: bool | None = None) -> None:
        tol = _tolerance(sched)
        good = abs(sched - proof) <= tol if ok is None else ok
        checks.append({"metric": metric, "scheduler": round(sched, 4), "proof": round(proof, 4),
                       "delta_ms": round(sched - proof, 1) + 0.0, "tolerance_ms": round(tol, 1), "ok": good})

    sched_active = figures.get("active_slot_time_ms")
    if isinstance(sched_active, (int, float)):
        check("active_slot_time_ms", sched_active, active)
    sched_wall = figures.get("wall_time_ms")
    if isinstance(sched_wall, (int, float)):
        # The run's wall (supervisor start → end) must cover the evidence's wall.
        check("wall_time_ms", sched_wall, wall, ok=sched_wall + _tolerance(sched_wall) >= wall)
        util = figures.get("utilization")
        if isinstance(util, (int, float)) and sched_wall > 0:
            implied = util * sched_wall * jobs
            tol = _tolerance(implied) + sched_wall * jobs * 0.00005  # utilization is rounded to 4 places
            checks.append({"metric": "utilization", "scheduler": util,
                           "proof": round(active / (sched_wall * jobs), 4),
                           "delta_ms": round(implied - active, 1) + 0.0,
                           "tolerance_ms": round(tol, 1), "ok": abs(implied - active) <= tol})
    sched_span = figures.get("first_batch_launch_span_ms")
    if not isinstance(sched_span, (int, float)):
        sched_span = None  # not measured (or not a number): only a match for an unmeasured span
    if sched_span is not None and span is not None:
        check("first_batch_launch_span_ms", sched_span, span)
    elif (sched_span is None) != (span is None):
        checks.append({"metric": "first_batch_launch_span_ms", "scheduler": sched_span, "proof": span,
                       "delta_ms": None, "tolerance_ms": TOLERANCE_MS, "ok": False})
    out["checked"] = bool(checks)
    out["ok"] = all(c["ok"] for c in checks) if checks else None
    if not checks:
        out["why"] = "the scheduler recorded none of the compared metrics"
    return out


def format_proof(report: dict[str, Any], width: int | None = None) -> str:
    """The report for humans: a few lines, the verdict last. With ``width`` (a terminal's)
    every line fits it: the timeline's bar is narrowed to leave room for its label, and a
    longer line goes on under its label, never wrapped by the terminal mid-word."""
    lines = _proof_lines(report, SPARK_WIDTH if width is None else max(8, min(SPARK_WIDTH, width - LABEL - 2)))
    if width is None:
        return "\n".join(lines)
    out = []
    for line in lines:  # (one column per character: the report is ASCII but for ×, – and the bar's blocks)
        out.extend(textwrap.wrap(line, width, subsequent_indent=" " * LABEL, break_on_hyphens=False) or [""])
    return "\n".join(out)


SPARK_WIDTH = 60  # the timeline bar's columns, where there is room
LABEL = len("  scheduler check:  ")  # where the values start


def _proof_lines(report: dict[str, Any], spark_width: int) -> list[str]:
    r = report
    lines = [f"run {r['run_id']} ({r['run_state']}): {r['slots']} slot(s)"]
    g = r["generations"]
    extra = f", {g['running']} still running" if g["running"] else ""
    lines.append(f"  generations:      {g['ran']} ran (of {g['dirs']} reserved){extra}")
    p = r["pids"]
    pid_line = f"  wrapper pids:     {p['unique']} unique"
    if p["reused_count"]:
        pid_line += f", {p['reused_count']} reused by non-overlapping generations"
    if p["overlapping_count"]:
        pid_line += f", {p['overlapping_count']} in OVERLAPPING generations"
    lines.append(pid_line)
    lines.append(f"  max concurrency:  {r['max_concurrency']} (ends before starts at equal timestamps)")
    if r["nodes"]:
        lines.append("  slurm nodes:      " + ", ".join(f"{n} ({c})" for n, c in r["nodes"].items()))
    sp = "n/a" if r["speedup"] is None else f"{r['speedup']:.2f}×"
    lines.append(f"  speed-up:         {sp}  (sum of durations {r['active_ms'] / 1000:.3f} s / wall "
                 f"{r['wall_ms'] / 1000:.3f} s)")
    if r["utilization"] is not None:
        lines.append(f"  utilization:      {r['utilization']:.1%} of {r['slots']} slot(s) over that wall")
    fb = r["first_batch"]
    if fb["launch_span_ms"] is not None:
        lines.append(f"  first batch:      {fb['started']}/{fb['size']} started within {fb['launch_span_ms']:g} ms "
                     "of reservation")
    tl = r["timeline"]
    if tl["points"] and r["wall_ms"] > 0:
        top = max(r["slots"], r["max_concurrency"])
        lines.append(f"  timeline:         |{_spark(tl['points'], r['wall_ms'] / 1000, top, spark_width)}| "
                     f"0–{r['wall_ms'] / 1000:.2f} s, max per column of 0..{top}")
    c = r["consistency"]
    if c["checked"]:
        lines.append(f"  scheduler check:  {'consistent' if c['ok'] else 'INCONSISTENT'} (tolerance {c['tolerance']})")
    else:
        lines.append(f"  scheduler check:  not checked — {c['why']}")
    for w in r["warnings"]:
        if w["code"] != "metrics_unchecked":
            lines.append(f"  warning {w['code']}: {w['message']}")
    if r["ok"]:
        lines.append("proof: OK")
    else:
        lines.append("proof: FAILED")
        lines.extend(f"  blocker {b['code']}: {b['message']}" for b in r["blockers"])
    return lines


def _spark(points: list[dict[str, Any]], wall: float, top: int, width: int = 60) -> str:
    """One terminal line: the highest concurrency in each of ``width`` equal time columns."""
    bars = " ▁▂▃▄▅▆▇█"
    cols = [0] * width
    ends = [pt["t"] for pt in points[1:]] + [wall]
    for pt, end in zip(points, ends, strict=True):
        first = min(width - 1, int(pt["t"] / wall * width))
        last = min(width - 1, max(first, int(end / wall * width - 1e-9)))
        for c in range(first, last + 1):
            cols[c] = max(cols[c], pt["running"])
    return "".join(bars[min(8, -(-8 * lv // top))] for lv in cols)
