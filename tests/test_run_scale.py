"""Structural facts of a busy run, read from the wrappers' own timestamps, and big output."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import signal
import subprocess
import sys
import time

import psutil
from swarmtest import clean_env, run_processes


def _attempts(summary: dict) -> list[dict]:
    return [a for t in summary["tasks"] for a in t["history"]]


def max_concurrency(intervals: list[tuple[float, float]]) -> int:
    """Sweep line; an end at the same instant as a start is counted first (coarse mtimes)."""
    points = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals], key=lambda p: (p[0], p[1]))
    live = peak = 0
    for _, delta in points:
        live += delta
        peak = max(peak, live)
    return peak


def test_200_tasks_never_exceed_8_slots(swarm):
    lines = "".join(f"sleep 0.0{i % 10}\n" for i in range(200))
    swarm.write("many.txt", lines)
    res = swarm("run", "many.txt", "-j", "8", "--output", "quiet")
    assert res.code == 0, res.stderr
    summary = swarm.summary()
    attempts = _attempts(summary)
    assert len(attempts) == 200 and all(a["status"] == "succeeded" for a in attempts)
    assert {a["slot"] for a in attempts} <= set(range(1, 9))
    assert not list((swarm.latest() / "slots").glob("slot-*/.*")), "the run's end leaves no shell"
    assert max_concurrency([(a["started_at"], a["ended_at"]) for a in attempts]) <= 8
    by_slot: dict[int, list[dict]] = {}
    for a in attempts:
        by_slot.setdefault(a["slot"], []).append(a)
    for slot, gens in by_slot.items():
        gens.sort(key=lambda a: a["generation"])
        assert [a["generation"] for a in gens] == list(range(1, len(gens) + 1))
        for prev, nxt in itertools.pairwise(gens):
            assert nxt["started_at"] >= prev["ended_at"], (slot, prev, nxt)
    m = summary["metrics"]
    assert m["backfill_count"] == 192 and m["largest_batch_size"] == 8
    assert m["refill_latency_ms"]["count"] == 192
    # Figures to quote, not to assert against a clock:
    print(f"\n200x -j8: utilization {m['utilization']}, refill p50 {m['refill_latency_ms']['p50']} ms, "
          f"p95 {m['refill_latency_ms']['p95']} ms, first batch span {m['first_batch_launch_span_ms']} ms")


def test_50mb_output_keeps_log_intact_and_supervisor_rss_flat(swarm):
    size = 50_000_000
    swarm.write("small.txt", "echo small\n")
    swarm.write("big.txt", f"yes 0123456789abcdefghijklmnopqrstuvwxyz | head -c {size}\n")

    def peak_rss(path: str) -> int:
        p = swarm.popen("run", path, "--output", "quiet")
        proc, peak = psutil.Process(p.pid), 0
        while p.poll() is None:
            try:
                peak = max(peak, proc.memory_info().rss)
            except psutil.NoSuchProcess:
                break
            time.sleep(0.01)
        assert p.wait(timeout=60) == 0
        return peak

    baseline = peak_rss("small.txt")
    big = peak_rss("big.txt")
    log = swarm.latest() / "slots/slot-1/gen-1/output.log"
    assert log.stat().st_size == size
    expected = hashlib.sha256()
    line = b"0123456789abcdefghijklmnopqrstuvwxyz\n"
    full, rest = divmod(size, len(line))
    expected.update(line * full + line[:rest])
    assert hashlib.sha256(log.read_bytes()).hexdigest() == expected.hexdigest()
    assert big - baseline < 10 * 2**20, (baseline, big)
    # `logs` streams it back without loading it whole
    logs = swarm.popen("logs", swarm.latest().name, "task-1")
    total = 0
    while chunk := logs.stdout.buffer.read(1 << 20) if hasattr(logs.stdout, "buffer") else b"":
        total += len(chunk)
    assert logs.wait(timeout=60) == 0 and total == size


def test_summary_is_recorded_once_per_run(swarm):
    swarm.write("a.txt", "true\n")
    swarm("run", "a.txt")
    swarm("run", "a.txt")
    rows = json.loads(swarm("ls", "--json").stdout)
    from swarmtest import validate

    validate(rows, "ls")
    assert len(rows) == 2 and rows[0]["started_at"] >= rows[1]["started_at"]
    assert all(run_processes(r["run_id"]) == [] for r in rows)


def test_a_leftover_holding_its_workers_output_never_writes_into_another_tasks(swarm):
    """A worker that leaves a daemon behind (its own session: no ladder ends it) still holding
    its stdout. The daemon writes once the next tasks run; none of that may show in their
    logs. Reused as its slot's shell, the first generation's output.log would be a later
    task's (``generation_files``, shells): its folding must see the file is open elsewhere."""
    pidfile = swarm.cwd / "daemon.pid"
    daemon = f"setsid sh -c 'echo $$ >{pidfile}; until [ -e go ]; do sleep 0.02; done; " \
             "while :; do echo LATE; sleep 0.05; done' &"
    swarm.write("tasks.txt", "\n".join([daemon, "touch go; sleep 0.3", *["sleep 0.3"] * 4]) + "\n")
    try:
        res = swarm("run", "tasks.txt", "-j", "1", "--output", "quiet")
        assert res.code == 0, res.stderr
        pid = int(pidfile.read_text())
        # it ran all along: the end-of-run sweep found it still running (and ended it)
        assert [w for w in swarm.summary()["warnings"]
                if w["code"] == "process_left_behind" and f"{pid} (sh)" in w["message"]], "the daemon ran all along"
        # its own generation's log may hold it (written before that generation was folded)
        [own] = [a["generation"] for t in swarm.summary()["tasks"] if t["command"].startswith("setsid")
                 for a in t["history"]]
        outputs = {p.parent.name: p.read_text() for p in (swarm.latest() / "slots").glob("slot-*/gen-*/output.log")
                   if p.parent.name != f"gen-{own}"}
        assert not [name for name, text in outputs.items() if "LATE" in text], outputs
    finally:
        if pidfile.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pidfile.read_text()), signal.SIGKILL)


def test_the_supervisor_reports_its_own_peak_memory_not_its_parents(swarm):
    """`usage` is the run's own processes. ru_maxrss is not: a process started by vfork
    (Python's subprocess, posix_spawn) keeps its parent's peak across the exec — a bench
    holding 60 MB made a 35 MB supervisor report 59. A parent holding 300 MB here."""
    swarm.write("t.txt", "true\n")
    parent = ("import subprocess, sys\n"
              "held = bytearray(300 << 20)\n"
              "held[::4096] = b'x' * len(held[::4096])  # touched: resident\n"
              "sys.exit(subprocess.run(sys.argv[1:]).returncode)\n")
    done = subprocess.run([sys.executable, "-c", parent, *swarm.cmd("run", "t.txt", "--output", "quiet")],
                          cwd=swarm.cwd, env=clean_env(), capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    usage = json.loads((swarm.latest() / "summary.json").read_text())["usage"]
    assert 5 < usage["processes"]["supervisor"]["peak_rss_mb"] < 150, usage
    # its main thread's CPU (start-up and loop) is part of the process's, beside its helper threads'
    assert 0 < usage["processes"]["supervisor"]["loop_cpu_s"] <= usage["processes"]["supervisor"]["cpu_s"], usage
