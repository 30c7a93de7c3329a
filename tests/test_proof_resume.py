"""``proof`` of a resumed run (issue 10, defect 6): the dispatch metrics of a run are the whole
run's, rebuilt from its event log on ``resume`` (``metrics.DispatchStats.replay``), so the
summary agrees with the events and the proof passes; and ``proof`` answers in every state a run
can be in — a report, or one line and a non-zero exit, never a traceback."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from swarmtest import GATE, Swarm, kill_run_processes, validate, wait_until

from zellij_swarm.engine import metrics

# 20 tasks at -j 4; the last wave runs until the test opens the gate, so there is always a moment to kill in
TASKS = "sleep 0.3\n" * 16 + f"{GATE}\n" * 4


def events_of(run: Path) -> list[dict[str, Any]]:
    try:
        text = (run / "events.jsonl").read_text()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.splitlines(keepends=True) if line.endswith("\n")]


def count(run: Path, name: str) -> int:
    return sum(1 for e in events_of(run) if e["event"] == name)


def files(run: Path, name: str) -> int:
    """Generations with ``name`` (a claim, an exit sidecar) — on disk, or folded away once
    their outcome is in the log (which then stands for both)."""
    on_disk = {(p.parent.parent.name, p.parent.name) for p in run.glob(f"slots/slot-*/gen-*/{name}")}
    folded = {(f"slot-{e['slot']}", f"gen-{e['gen']}") for e in events_of(run)
              if e["event"] in ("worker_completed", "worker_failed")}
    return len(on_disk | folded)


def proof_json(swarm: Swarm, run: Path) -> dict[str, Any]:
    """``proof --json`` through the CLI, in whatever state the run is: a valid report, exit 0 or 1."""
    res = swarm("proof", run.name, "--json")
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr, res.stderr
    assert res.code in (0, 1), (res.code, res.stderr)
    report = json.loads(res.stdout)
    validate(report, "proof")
    human = swarm("proof", run.name)
    assert "Traceback" not in human.stderr and "internal error" not in human.stderr, human.stderr
    if res.code == 1 and report["run_state"] in ("running", "interrupted"):
        # A live run's evidence grows between the two calls: before its first wrapper has
        # written its claim there is none (no_evidence), a moment later there is.
        assert [b["code"] for b in report["blockers"]] == ["no_evidence"], report["blockers"]
        assert human.code in (0, 1), human.stderr
    else:
        assert human.code == res.code, (human.stdout, human.stderr)
    return report


def sigkill(proc: subprocess.Popen) -> None:
    assert proc.poll() is None, "the supervisor ended before the moment it was to be killed at"
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=10) == -signal.SIGKILL


def interrupted(swarm: Swarm, run: Path) -> None:
    """Right after a supervisor was killed: the proof still answers, and checks nothing it cannot."""
    report = proof_json(swarm, run)
    assert report["consistency"]["checked"] is False
    assert not (run / "summary.json").exists()


def assert_whole_run_metrics(swarm: Swarm, run: Path) -> None:
    """The summary's dispatch metrics are those its event log records, for the whole run, and the
    proof of the run passes with every metric compared."""
    summary = swarm.summary(run)
    assert summary["state"] == "finished"
    assert {t["status"] for t in summary["tasks"]} == {"succeeded"}
    m, events = summary["metrics"], events_of(run)
    batches = [e["size"] for e in events if e["event"] == "batch_dispatch_started"]
    assert m["batch_dispatch_count"] == len(batches)
    assert m["largest_batch_size"] == max(batches) == 4
    # every generation past a slot's first is a backfill: 16, and one more for each generation
    # a killed supervisor had reserved but not yet started (it runs again in a new one)
    assert m["backfill_count"] == count(run, "backfill") == count(run, "slot_reserved") - 4 >= 16
    report = proof_json(swarm, run)
    assert report["ok"], report["blockers"]
    c = report["consistency"]
    assert c["checked"] and c["ok"], c
    assert {x["metric"] for x in c["checks"]} == {
        "active_slot_time_ms", "wall_time_ms", "utilization", "first_batch_launch_span_ms"}
    # The first batch is the run's first (the four gen-1 workers), whichever supervisor measured it.
    assert report["first_batch"]["size"] == 4 and report["first_batch"]["started"] == 4
    assert m["first_batch_launch_span_ms"] == pytest.approx(report["first_batch"]["launch_span_ms"], abs=1.0)
    assert report["generations"]["ran"] == 20 and report["max_concurrency"] == 4


def first_batch_launched(run: Path) -> bool:
    return count(run, "batch_dispatch_started") >= 1 and files(run, "claim") >= 4


def mid_run(run: Path) -> bool:
    return count(run, "backfill") >= 5 and files(run, "exit") >= 8


def all_dispatched(run: Path) -> bool:
    return files(run, "claim") == 20 and count(run, "slot_reserved") == 20


@pytest.mark.parametrize("moment", [first_batch_launched, pytest.param(mid_run, marks=pytest.mark.full),
                                    all_dispatched], ids=["after-first-batch", "mid-run", "all-dispatched"])
def test_proof_of_a_run_resumed_after_a_kill(swarm: Swarm, moment: Any) -> None:
    swarm.write("t.txt", TASKS)
    proc = swarm.popen("run", "t.txt", "-j", "4", "--backend", "headless", "--output", "quiet")
    run = swarm.started()
    try:
        wait_until(lambda: (run / "run.json").exists(), what="run.json")
        proof_json(swarm, run)  # while it runs
        wait_until(lambda: moment(run), timeout=30, what=moment.__name__)
        sigkill(proc)
        interrupted(swarm, run)
        swarm.open_gate()
        res = swarm("resume", run.name, "--output", "quiet")
        assert res.code == 0, res.stderr
        assert_whole_run_metrics(swarm, run)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        kill_run_processes(run.name)


def test_proof_of_a_run_resumed_twice(swarm: Swarm) -> None:
    """The resumer is killed too, after dispatching work of its own; a second resume ends the run."""
    swarm.write("t.txt", TASKS)
    proc = swarm.popen("run", "t.txt", "-j", "4", "--backend", "headless", "--output", "quiet")
    run = swarm.started()
    try:
        wait_until(lambda: mid_run(run), timeout=30, what="mid run")
        sigkill(proc)
        reserved = count(run, "slot_reserved")
        proc = swarm.popen("resume", run.name, "--output", "quiet")
        wait_until(lambda: count(run, "run_resumed") == 1 and count(run, "slot_reserved") >= reserved + 2
                   and files(run, "claim") >= reserved + 2, timeout=30, what="the resumer's own dispatches")
        proof_json(swarm, run)  # while the resumer runs
        sigkill(proc)
        interrupted(swarm, run)
        swarm.open_gate()
        res = swarm("resume", run.name, "--output", "quiet")
        assert res.code == 0, res.stderr
        assert count(run, "run_resumed") == 2
        assert_whole_run_metrics(swarm, run)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        kill_run_processes(run.name)


# ----- the event log's reading, without processes ----------------------------------------------


def _reserve(ts: float, slot: int, gen: int) -> dict[str, Any]:
    return {"ts": ts, "event": "slot_reserved", "slot": slot, "gen": gen}


def test_replay_reads_the_dispatch_counts_of_every_supervisor() -> None:
    log = [{"ts": 1.0, "event": "run_started"}, _reserve(1.1, 1, 1), _reserve(1.2, 2, 1),
           {"ts": 1.3, "event": "batch_dispatch_started", "size": 2}, _reserve(2.0, 1, 2),
           {"ts": 2.0, "event": "backfill", "slot": 1, "gen": 2},
           {"ts": 3.0, "event": "run_resumed"}, _reserve(3.1, 2, 2), _reserve(3.1, 3, 1),
           {"ts": 3.1, "event": "backfill", "slot": 2, "gen": 2},
           {"ts": 3.2, "event": "batch_dispatch_started", "size": 2}, "torn", None]
    stats = metrics.DispatchStats.replay(log)
    assert (stats.batch_count, stats.largest_batch, stats.backfill_count) == (2, 2, 2)
    assert stats.first_batch_reserved_at == 1.1 and stats.first_batch == [(1, 1), (2, 1)]
    # The next dispatch goes on counting as the first supervisor would have.
    stats.reserved(4.0, (1, 3))
    stats.batch(1)
    assert (stats.batch_count, stats.first_batch) == (2, [(1, 1), (2, 1)])


def test_a_resume_counts_the_backfills_it_does_not_parse_as_the_replay_of_every_event_does(tmp_path: Path) -> None:
    """A resume counts the ``backfill`` lines of the log without parsing them (a third of a
    100,000-task run's log): the same count as a replay of every parsed event — a line that is
    no whole object (garbage, torn, cut mid-line by hand) counts in neither."""
    from zellij_swarm.engine import resume
    from zellij_swarm.records import log as records

    lines = [json.dumps(e, separators=(",", ":")) for e in (
        {"ts": 1.0, "event": "run_started"}, _reserve(1.1, 1, 1), {"ts": 1.2, "event": "batch_dispatch_started",
                                                                   "size": 1},
        _reserve(2.0, 1, 2), {"ts": 2.0, "event": "backfill", "slot": 1, "gen": 2},
        _reserve(3.0, 1, 3), {"ts": 3.0, "event": "backfill", "slot": 1, "gen": 3})]
    lines += ['{"ts":3.5,"event":"backfill","slot"', '{"event":"backfill"} trailing', '{"ts":4,"event":"backfill"}']
    log = tmp_path / "events.jsonl"
    log.write_text("\n".join(lines) + '\n{"ts":5,"event":"backfill"')  # the last line torn
    logged = resume._Logged(log)
    stats = metrics.DispatchStats.replay(logged.read())
    assert logged.counted == {"backfill": 3} and stats.backfill_count == 0
    assert metrics.DispatchStats.replay(records.iter_events(log)).backfill_count == 3


def test_first_batch_whose_event_a_kill_swallowed_ends_at_the_resume() -> None:
    # Reservations written, the batch's own event lost with its supervisor.
    head = [_reserve(1.0, 1, 1), _reserve(1.01, 2, 1)]
    resumed = [*head, {"ts": 5.0, "event": "run_resumed"}, _reserve(5.1, 3, 1),
               {"ts": 5.2, "event": "batch_dispatch_started", "size": 1}]
    assert metrics.first_batch(head) == metrics.first_batch(resumed) == (1.0, [(1, 1), (2, 1)])
    # Nothing reserved before the resume (the log's tail was lost): the resumer's batch is the first.
    lost = [{"ts": 5.0, "event": "run_resumed"}, _reserve(5.1, 3, 1),
            {"ts": 5.2, "event": "batch_dispatch_started", "size": 1}]
    assert metrics.first_batch(lost) == (5.1, [(3, 1)])
    assert metrics.DispatchStats.replay(lost).first_batch == [(3, 1)]
    # Replayed before its own reservations, a resuming supervisor goes on as the log reads:
    # after reservations without their event, its own are not the first batch; after none, they are.
    for log, first in ((head, [(1, 1), (2, 1)]), ([{"ts": 5.0, "event": "run_resumed"}], [(3, 1)])):
        stats = metrics.DispatchStats.replay(log)
        stats.reserved(5.1, (3, 1))
        stats.batch(1)
        assert stats.first_batch == first


# ----- proof answers in every state ------------------------------------------------------------


def test_proof_of_odd_records_is_a_report_or_one_line(swarm: Swarm) -> None:
    swarm.write("t.txt", "true\ntrue\n")
    assert swarm("run", "t.txt", "-j", "2", "--output", "quiet").code == 0
    run = swarm.latest()
    # A summary whose span the scheduler could not measure, the proof can: a blocker, not a crash.
    summary = json.loads((run / "summary.json").read_text())
    summary["metrics"]["first_batch_launch_span_ms"] = None
    (run / "summary.json").write_text(json.dumps(summary))
    report = proof_json(swarm, run)
    assert [b["code"] for b in report["blockers"]] == ["metrics_inconsistent"]
    assert "first_batch_launch_span_ms none vs" in report["blockers"][0]["message"]
    # Garbage where numbers and a state belong.
    summary["state"], summary["metrics"]["first_batch_launch_span_ms"] = 7, "fast"
    (run / "summary.json").write_text(json.dumps(summary))
    assert proof_json(swarm, run)["run_state"] == "running"
    # No summary.json, no state.json, no event log: a run killed before its first snapshot.
    for name in ("summary.json", "state.json", "events.jsonl"):
        (run / name).unlink()
    report = proof_json(swarm, run)
    assert report["run_state"] == "running" and not report["consistency"]["checked"]
    assert report["first_batch"]["size"] == 0
    # Records that cannot be read at all: one line, exit 2.
    claim = run / "slots/slot-1/gen-1/claim"
    claim.parent.mkdir(parents=True, exist_ok=True)  # folded away once the run recorded it
    claim.unlink(missing_ok=True)
    claim.mkdir()
    res = swarm("proof", run.name)
    assert res.code == 2 and res.stdout == "", res
    assert res.stderr.startswith("zellij-swarm: error: cannot read the records of run") and \
        len(res.stderr.splitlines()) == 1, res.stderr
    # A run directory whose run.json is not written yet (a supervisor starting up).
    (run / "run.json").unlink()
    res = swarm("proof", run.name)
    assert res.code == 2 and res.stderr.startswith("zellij-swarm: error: ") and len(res.stderr.splitlines()) == 1, res


@pytest.mark.parametrize("moment", [first_batch_launched, all_dispatched], ids=["first-batch", "all-dispatched"])
def test_a_kill_leaves_no_started_generation_out_of_the_log(swarm: Swarm, moment: Any) -> None:
    """A supervisor writes the reservations of a batch to its log before it starts any of it,
    so a kill at any moment leaves every generation that ran named there (a headless one has
    no file of its own naming its task); the counts and the first batch are the whole run's."""
    swarm.write("t.txt", TASKS)
    proc = swarm.popen("run", "t.txt", "-j", "4", "--backend", "headless", "--output", "quiet")
    run = swarm.started()
    try:
        wait_until(lambda: moment(run), timeout=30, what="the moment to kill at")
        sigkill(proc)
        reserved = {(e["slot"], e["gen"]) for e in events_of(run) if e["event"] == "slot_reserved"}
        claimed = {(int(p.parent.parent.name[5:]), int(p.parent.name[4:])) for p in run.glob("slots/*/*/claim")}
        assert claimed <= reserved
        swarm.open_gate()
        res = swarm("resume", run.name, "--output", "quiet")
        assert res.code == 0, res.stderr
        assert count(run, "slot_reserved") == 20
        assert_whole_run_metrics(swarm, run)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        kill_run_processes(run.name)
