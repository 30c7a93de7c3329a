"""The parallel-runtime proof (SPEC §8 ``proof``, issue 6 item 6): real swarms through the CLI,
and synthetic run directories whose wrapper evidence (claim/exit mtimes, pids) is chosen."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from swarmtest import Swarm, validate

from zellij_swarm.commands.proof import TIMELINE_LIMIT, format_proof, prove
from zellij_swarm.records import generation_files
from zellij_swarm.records.rundir import RunPaths

T0 = 1_800_000_000.0  # synthetic runs start here (exact in binary, and in nanoseconds)


def proof_of(run_dir: Path, **kw: Any) -> dict[str, Any]:
    report = prove(RunPaths(run_dir), **kw)
    validate(report, "proof")
    json.dumps(report)  # JSON-able
    assert format_proof(report)
    return report


def codes(report: dict[str, Any]) -> list[str]:
    return [b["code"] for b in report["blockers"]]


# ----- real swarms -----------------------------------------------------------------------------


def test_32_slots_64_one_second_tasks(swarm: Swarm) -> None:
    swarm.write("tasks.txt", "sleep 1\n" * 64)
    res = swarm("run", "-j", "32", "tasks.txt")
    assert res.code == 0, res.stderr
    report = proof_of(swarm.latest(), min_concurrency=32)
    print(format_proof(report))
    print(f"64 x sleep 1 at -j 32: speed-up {report['speedup']}x, wall {report['wall_ms']} ms, "
          f"first-batch launch span {report['first_batch']['launch_span_ms']} ms")
    assert report["ok"], report["blockers"]
    assert report["slots"] == 32
    assert report["max_concurrency"] == 32
    assert report["generations"]["ran"] == 64
    assert report["pids"]["overlapping_count"] == 0
    assert report["pids"]["missing"] == 0 and report["pids"]["unique"] >= 32  # a pid may be recycled later
    assert report["speedup"] > 16
    assert report["first_batch"]["size"] == 32 and report["first_batch"]["started"] == 32
    assert report["consistency"]["checked"] and report["consistency"]["ok"], report["consistency"]
    assert {c["metric"] for c in report["consistency"]["checks"]} == {
        "active_slot_time_ms", "wall_time_ms", "utilization", "first_batch_launch_span_ms"}
    # Thresholds are opt-in and named.
    strict = proof_of(swarm.latest(), min_concurrency=33, min_speedup=1000, max_launch_span_ms=0.0)
    assert not strict["ok"]
    assert {"concurrency_below_min", "speedup_below_min"} <= set(codes(strict))


def test_one_slot_is_concurrency_one_and_min_two_fails(swarm: Swarm) -> None:
    swarm.write("tasks.txt", "sleep 0.05\n" * 4)
    assert swarm("run", "-j", "1", "tasks.txt").code == 0
    report = proof_of(swarm.latest())
    assert report["ok"], report["blockers"]
    assert report["max_concurrency"] == 1
    assert report["generations"]["ran"] == 4
    assert report["speedup"] <= 1.0
    failed = proof_of(swarm.latest(), min_concurrency=2)
    assert not failed["ok"]
    assert codes(failed) == ["concurrency_below_min"]
    assert "proof: FAILED" in format_proof(failed) and "concurrency_below_min" in format_proof(failed)


def test_proof_command(swarm: Swarm) -> None:
    """Through the CLI (``--json`` stays parseable; a failed threshold exits 1)."""
    swarm.write("tasks.txt", "sleep 0.05\n" * 3)
    assert swarm("run", "-j", "1", "tasks.txt").code == 0
    run_id = swarm.latest().name
    res = swarm("proof", run_id, "--json")
    assert res.code == 0, res.stderr
    report = json.loads(res.stdout)
    validate(report, "proof")
    assert report["max_concurrency"] == 1
    res = swarm("proof", run_id, "--min-concurrency", "2")
    assert res.code == 1
    assert "concurrency_below_min" in res.stdout + res.stderr


# ----- synthetic run directories ---------------------------------------------------------------

Gen = tuple  # (slot, gen, start offset s, end offset s | None, pid | "supervisor" | None)


def _stamp(path: Path, at: float) -> None:
    ns = round((T0 + at) * 1e9)
    os.utime(path, ns=(ns, ns))


def make_run(root: Path, jobs: int, gens: list[Gen], *, state: str = "finished",
             metrics: dict[str, Any] | None = None, events: list[dict[str, Any]] | None = None,
             ended: float | None = None) -> Path:
    run = root / "runs" / "20300101-000000-abcdef"
    (run / "slots").mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"run_id": run.name, "started_at": T0 - 0.01, "jobs": jobs}))
    for slot, gen, start, end, pid in gens:
        d = run / "slots" / f"slot-{slot}" / f"gen-{gen}"
        d.mkdir(parents=True)
        if pid is not False:
            (d / "claim").write_text(f"{pid if pid is not None else ''}\n")
            _stamp(d / "claim", start)
        if end is not None:
            (d / "exit").write_text("0\n")
            _stamp(d / "exit", end)
    if events is not None:
        (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    snap = {"run_id": run.name, "state": state, "jobs": jobs, "started_at": T0 - 0.01,
            "ended_at": None if state == "running" else T0 + (ended if ended is not None else 1000.0),
            "metrics": metrics}
    (run / ("state.json" if state == "running" else "summary.json")).write_text(json.dumps(snap))
    return run


def test_concurrency_above_slots_fails(tmp_path: Path) -> None:
    run = make_run(tmp_path, 2, [(1, 1, 0.0, 1.0, 101), (2, 1, 0.1, 1.0, 102), (3, 1, 0.2, 0.5, 103)])
    report = proof_of(run)
    assert report["max_concurrency"] == 3
    assert not report["ok"]
    assert "concurrency_exceeded_slots" in codes(report)
    assert report["max_concurrency_at"] == pytest.approx(T0 + 0.2)


@pytest.mark.parametrize("width", [80, 60])
def test_on_a_terminal_every_line_of_the_proof_fits_its_width(tmp_path: Path, width: int) -> None:
    """The timeline line (a 60-column bar, then its scale) and the scheduler check's tolerance
    were wider than 80 columns in every run's proof: an 80x24 terminal wrapped them."""
    run = make_run(tmp_path, 2, [(1, 1, 0.0, 1.0, 101), (2, 1, 0.1, 1.0, 102), (3, 1, 0.2, 0.5, 103)])
    report = proof_of(run)
    shown = format_proof(report, width=width)
    assert all(len(line) <= width for line in shown.splitlines()), shown
    bar = next(line for line in shown.splitlines() if line.startswith("  timeline:         |"))
    assert bar.endswith("|") and len(bar) == width, shown  # the bar on a line of its own, as wide as there is room
    words = [w for w in format_proof(report).split() if "|" not in w]
    assert [w for w in shown.split() if "|" not in w] == words, shown  # nothing lost, nothing cut


def test_end_and_start_at_the_same_timestamp_do_not_overlap(tmp_path: Path) -> None:
    # One slot, back to back: gen 2 starts at exactly the mtime gen 1 ended with.
    gens = [(1, 1, 0.0, 1.0, 101), (1, 2, 1.0, 2.0, 102), (1, 3, 2.0, 3.0, 103)]
    report = proof_of(make_run(tmp_path, 1, gens))
    assert report["ok"], report["blockers"]
    assert report["max_concurrency"] == 1
    assert report["speedup"] == pytest.approx(1.0)
    assert "ends" in report["tie_rule"] and "before starts" in report["tie_rule"]
    # The timeline's change points collapse at the shared instants: 1 running throughout.
    assert [p["running"] for p in report["timeline"]["points"]] == [1, 1, 1, 0]


def test_a_real_overlap_of_one_millisecond_counts(tmp_path: Path) -> None:
    report = proof_of(make_run(tmp_path, 1, [(1, 1, 0.0, 1.001, 101), (2, 1, 1.0, 2.0, 102)]))
    assert report["max_concurrency"] == 2
    assert codes(report) == ["concurrency_exceeded_slots"]


def test_pid_in_overlapping_generations_is_a_blocker(tmp_path: Path) -> None:
    report = proof_of(make_run(tmp_path, 2, [(1, 1, 0.0, 1.0, 555), (2, 1, 0.5, 1.5, 555)]))
    assert "pid_overlap" in codes(report)
    assert report["pids"]["overlapping_count"] == 1
    assert report["pids"]["overlapping"][0]["pid"] == 555


def test_recycled_pid_in_separate_generations_is_only_noted(tmp_path: Path) -> None:
    gens = [(1, 1, 0.0, 1.0, 555), (1, 2, 1.0, 2.0, 556), (2, 1, 1.0, 1.5, 555)]
    report = proof_of(make_run(tmp_path, 2, gens))
    assert report["ok"], report["blockers"]
    assert report["pids"]["unique"] == 2
    assert report["pids"]["reused_count"] == 1
    assert report["pids"]["reused"][0]["generations"] == [{"slot": 1, "generation": 1}, {"slot": 2, "generation": 1}]


def test_no_evidence(tmp_path: Path) -> None:
    report = proof_of(make_run(tmp_path, 4, []))
    assert codes(report) == ["no_evidence"]
    assert report["max_concurrency"] == 0 and report["speedup"] is None and report["timeline"]["points"] == []


def test_generations_no_wrapper_ran_are_not_evidence(tmp_path: Path) -> None:
    # Reserved but never claimed, and claimed by the supervisor (a pane that never reported in).
    report = proof_of(make_run(tmp_path, 2, [(1, 1, 0.0, None, False), (2, 1, 0.0, None, "supervisor")]))
    assert codes(report) == ["no_evidence"]
    assert report["generations"] == {"dirs": 2, "ran": 0, "not_started": 2, "running": 0, "ended_by_supervisor": 0}


def test_exit_json_of_a_vanished_wrapper_gives_the_end(tmp_path: Path) -> None:
    run = make_run(tmp_path, 1, [(1, 1, 0.0, None, 101)])
    (run / "slots/slot-1/gen-1/exit.json").write_text(json.dumps(
        {"code": None, "signal": "SIGKILL", "started_at": T0, "ended_at": T0 + 2.5, "pid": 101,
         "reason": "no_exit_record"}))
    report = proof_of(run)
    assert report["generations"]["ended_by_supervisor"] == 1 and report["generations"]["running"] == 0
    assert report["wall_ms"] == pytest.approx(2500.0)


def test_running_generation_counts_up_to_now(tmp_path: Path) -> None:
    run = make_run(tmp_path, 2, [(1, 1, 0.0, 1.0, 101), (2, 1, 0.5, None, 102)], state="running",
                   metrics={"active_slot_time_ms": 1.0})
    report = proof_of(run, now=T0 + 4.0)
    assert report["run_state"] == "running"
    assert report["generations"]["running"] == 1
    assert report["last_end"] == pytest.approx(T0 + 4.0)
    assert report["active_ms"] == pytest.approx(1000.0 + 3500.0)
    assert report["max_concurrency"] == 2
    # A live run's snapshot lags its files: not compared, and said so.
    assert report["consistency"]["checked"] is False and report["ok"]
    assert [w["code"] for w in report["warnings"]] == ["metrics_unchecked"]


def test_a_generation_folded_while_proof_reads_it_is_ended_not_still_running(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The supervisor folds an ended generation (its outcome logged, then its claim and exit
    sidecar removed) between ``proof`` reading its claim and its exit: the log has its end, so it
    does not count as running up to now, overlapping the next generation of its slot."""
    run = make_run(tmp_path, 1, [(1, 1, 0.0, 1.0, 101), (1, 2, 1.0, None, 102)], state="running",
                   metrics={"active_slot_time_ms": 1.0}, events=[])
    real_ended_at = generation_files.ended_at

    def folded_under_the_reader(gen: generation_files.GenPaths) -> Any:
        if gen.gen == 1:
            with (run / "events.jsonl").open("a") as log:
                log.write(json.dumps({"event": "worker_completed", "slot": 1, "gen": 1, "started_at": T0,
                                      "ended_at": T0 + 1.0, "pid": 101}, separators=(",", ":")) + "\n")
            generation_files.fold(gen)
        return real_ended_at(gen)

    monkeypatch.setattr(generation_files, "ended_at", folded_under_the_reader)
    report = proof_of(run, now=T0 + 4.0)
    assert not (run / "slots/slot-1/gen-1").exists()  # folded away while it was read
    assert report["ok"], report["blockers"]
    assert report["max_concurrency"] == 1 and report["generations"]["running"] == 1
    assert report["active_ms"] == pytest.approx(1000.0 + 3000.0)


def test_interrupted_run_counts_open_generations_up_to_now(tmp_path: Path) -> None:
    run = make_run(tmp_path, 2, [(1, 1, 0.0, None, 101)], state="interrupted", metrics={"active_slot_time_ms": 0.0})
    report = proof_of(run, now=T0 + 10.0)
    assert report["wall_ms"] == pytest.approx(10000.0)
    assert not report["consistency"]["checked"] and report["ok"]


def test_ended_run_with_an_open_generation_counts_it_to_the_run_end(tmp_path: Path) -> None:
    run = make_run(tmp_path, 2, [(1, 1, 0.0, 1.0, 101), (2, 1, 0.0, None, 102)], ended=3.0)
    report = proof_of(run, now=T0 + 100.0)
    assert report["last_end"] == pytest.approx(T0 + 3.0)
    assert "exit_record_missing" in [w["code"] for w in report["warnings"]]


def test_not_a_run_directory(tmp_path: Path) -> None:
    from zellij_swarm import exc

    with pytest.raises(exc.UsageError):
        prove(RunPaths(tmp_path))


def _consistent_run(root: Path, **changes: float) -> Path:
    # 4 workers of 1 s in 2 slots, scheduler wall 2.05 s: active 4000 ms, utilization 4000/(2050*2).
    gens = [(1, 1, 0.0, 1.0, 101), (2, 1, 0.002, 1.0, 102), (1, 2, 1.0, 2.0, 103), (2, 2, 1.0, 2.002, 104)]
    metrics = {"wall_time_ms": 2050.0, "active_slot_time_ms": 4000.0, "utilization": round(4000 / (2050 * 2), 4),
               "first_batch_launch_span_ms": 2.5}
    metrics.update(changes)
    events = [{"ts": T0 - 0.0005, "event": "slot_reserved", "slot": 1, "gen": 1},
              {"ts": T0 - 0.0004, "event": "slot_reserved", "slot": 2, "gen": 1},
              {"ts": T0 - 0.0003, "event": "batch_dispatch_started", "size": 2},
              {"ts": T0 + 1.0, "event": "slot_reserved", "slot": 1, "gen": 2}]
    return make_run(root, 2, gens, metrics=metrics, events=events, ended=2.04)


def test_consistency_with_the_scheduler_metrics(tmp_path: Path) -> None:
    report = proof_of(_consistent_run(tmp_path / "a"))
    c = report["consistency"]
    assert report["ok"], report["blockers"]
    assert c["checked"] and c["ok"] and len(c["checks"]) == 4
    assert report["first_batch"]["size"] == 2 and report["first_batch"]["launch_span_ms"] == 2.5
    assert "20 ms" in c["tolerance"] and "5%" in c["tolerance"]
    # Within tolerance: 15 ms off on a 4 s total (tolerance 200 ms), 15 ms off a 2.5 ms span (20 ms).
    near = proof_of(_consistent_run(tmp_path / "b", active_slot_time_ms=4150.0, first_batch_launch_span_ms=17.5))
    assert near["ok"], near["blockers"]


@pytest.mark.parametrize("changes,metric", [
    ({"active_slot_time_ms": 5000.0}, "active_slot_time_ms"),
    ({"utilization": 0.5}, "utilization"),
    ({"wall_time_ms": 1000.0, "utilization": 2.0}, "wall_time_ms"),
    ({"first_batch_launch_span_ms": 400.0}, "first_batch_launch_span_ms"),
])
def test_inconsistent_metrics_are_a_blocker(tmp_path: Path, changes: dict[str, float], metric: str) -> None:
    report = proof_of(_consistent_run(tmp_path, **changes))
    assert codes(report) == ["metrics_inconsistent"]
    bad = [c["metric"] for c in report["consistency"]["checks"] if not c["ok"]]
    assert bad == [metric]
    assert metric in report["blockers"][0]["message"]


def test_launch_span_and_speedup_thresholds(tmp_path: Path) -> None:
    run = _consistent_run(tmp_path)
    assert proof_of(run, max_launch_span_ms=3, min_speedup=1.9)["ok"]
    report = proof_of(run, max_launch_span_ms=2, min_speedup=2.5)
    assert codes(report) == ["speedup_below_min", "launch_span_above_max"]
    assert report["thresholds"] == {"min_concurrency": None, "min_speedup": 2.5, "max_launch_span_ms": 2}


def test_ten_thousand_generations_bounded_timeline_and_fast(tmp_path: Path) -> None:
    slots, per_slot = 32, 313  # 10,016 generations; each slot back to back, 0.1 s per worker
    gens = []
    for s in range(1, slots + 1):
        for g in range(1, per_slot + 1):
            start_ms = s + (g - 1) * 100  # integer ms: a slot's end and next start are the same float
            gens.append((s, g, start_ms / 1000, (start_ms + 100) / 1000, 10_000 + s * 1000 + g))
    run = make_run(tmp_path, slots, gens)
    # the CPU time this process spent, not the wall clock: the bound is on the proof's work,
    # which a loaded machine does not change (under load the wall clock took over 2 s)
    began = time.process_time()
    report = prove(RunPaths(run))
    took = time.process_time() - began
    print(f"proof of {len(gens)} generations took {took * 1000:.0f} ms of CPU")
    validate(report, "proof")
    assert took < 2.0  # typically ~0.1-0.2 s
    tl = report["timeline"]
    assert tl["mode"] == "buckets" and len(tl["points"]) == TIMELINE_LIMIT
    assert tl["change_points"] > TIMELINE_LIMIT
    assert report["max_concurrency"] == 32
    assert max(p["running"] for p in tl["points"]) == 32
    # The buckets cover the whole run (nothing truncated): the mean level integrates to the active time.
    area = sum(p["mean"] for p in tl["points"]) * tl["bucket_s"]
    assert area == pytest.approx(report["active_ms"] / 1000, rel=0.01)
    assert report["speedup"] == pytest.approx(32, rel=0.01)


def test_first_batch_whose_event_a_kill_lost_ends_at_the_resume(tmp_path: Path) -> None:
    # The first supervisor reserved slots 1-2 and was killed before it logged that batch; the
    # resumer's own batch (slot 3) is not part of the run's first batch.
    gens = [(1, 1, 0.0, 1.0, 101), (2, 1, 0.004, 1.0, 102), (3, 1, 2.0, 3.0, 103)]
    events = [{"ts": T0 - 0.001, "event": "slot_reserved", "slot": 1, "gen": 1},
              {"ts": T0 - 0.0009, "event": "slot_reserved", "slot": 2, "gen": 1},
              {"ts": T0 + 1.5, "event": "run_resumed"},
              {"ts": T0 + 1.9, "event": "slot_reserved", "slot": 3, "gen": 1},
              {"ts": T0 + 1.9, "event": "batch_dispatch_started", "size": 1}]
    report = proof_of(make_run(tmp_path, 3, gens, events=events, metrics={"first_batch_launch_span_ms": 5.0},
                               ended=3.01))
    assert report["first_batch"]["size"] == 2 and report["first_batch"]["started"] == 2
    assert report["first_batch"]["launch_span_ms"] == pytest.approx(5.0)
    assert report["ok"], report["blockers"]


def test_a_span_only_one_side_measured_is_a_blocker_not_a_crash(tmp_path: Path) -> None:
    report = proof_of(_consistent_run(tmp_path, first_batch_launch_span_ms=None))  # type: ignore[arg-type]
    assert codes(report) == ["metrics_inconsistent"]
    assert "first_batch_launch_span_ms none vs 2.5" in report["blockers"][0]["message"]


@pytest.mark.parametrize("state", ["finished", "interrupted", "running"])
def test_a_claim_that_names_no_pid_is_not_evidence(tmp_path: Path, state: str) -> None:
    # A wrapper creates its claim, then writes its pid into it before it runs anything: killed
    # in between, it leaves an empty claim and ran nothing. It is not a worker that runs on.
    run = make_run(tmp_path, 1, [(1, 1, 0.0, 1.0, 101), (1, 2, 0.5, None, None), (1, 3, 1.0, 2.0, 103)],
                   state=state, ended=3.0, metrics={"active_slot_time_ms": 2000.0, "wall_time_ms": 2000.0})
    report = proof_of(run, now=T0 + 3.0)
    assert report["ok"], report["blockers"]
    assert report["max_concurrency"] == 1
    assert report["generations"] == {"dirs": 3, "ran": 2, "not_started": 1, "running": 0, "ended_by_supervisor": 0}
