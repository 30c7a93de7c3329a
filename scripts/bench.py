"""The body of scripts/bench: times N trivial tasks at -j J through four runners, alternating
them over several rounds, then a 100-slot batch of `sleep 1`, and prints medians and ratios.

Every timed run gets a fresh directory; directories are removed only after all rounds,
because deleting a large tree just before a run slows that run's file I/O 2–3× here.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from zellij_swarm.records import generation_files, rundir
from zellij_swarm.worker import wrapper

ROOT = Path(__file__).resolve().parent.parent
ZSW = [str(ROOT / ".venv/bin/zellij-swarm")]


def timed(argv: list[str], *, stdin_path: Path | None = None, cwd: Path) -> tuple[float, float, float]:
    """(wall seconds, peak RSS MiB of the top process and its reaped children, CPU seconds)."""
    with open(stdin_path, "rb") if stdin_path else contextlib.nullcontext(subprocess.DEVNULL) as stdin:
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, cwd=cwd, stdin=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode != 0:
            sys.exit(f"bench: {argv[0]} failed ({p.returncode}): {p.stderr.read().decode()[-500:]}")
    return wall, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def make_wrappers(base: Path, n: int) -> Path:
    """N generation directories with real wrappers, as the supervisor writes them."""
    listing = base / "wrappers.txt"
    paths = []
    for i in range(1, n + 1):
        gen = generation_files.GenPaths(base / f"slot-1/gen-{i}", 1, i)
        gen.dir.mkdir(parents=True)
        gen.artifacts.mkdir()
        who = wrapper.WorkerIdentity("bench", f"task-{i}", f"t{i}", 1, i, 1)
        script = wrapper.render(gen, who, cmd="true", argv=None, cwd=str(base), env={})
        rundir.write_new(gen.wrapper, script, mode=0o700)
        paths.append(str(gen.wrapper))
    listing.write_text("\n".join(paths) + "\n")
    return listing


def tmux_first_batch(work: Path) -> tuple[float, float] | None:
    """32 live panes on a private tmux server: (ms from the batch's start to its 32nd pane
    opened, ms to its 32nd worker started)."""
    d = work / "tmux32"
    (d / "tmp").mkdir(parents=True)
    (d / "sleep.txt").write_text("sleep 1\n" * 32)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TMUX", "ZELLIJ"))}
    env["TMUX_TMPDIR"] = str(d / "tmp")
    try:
        subprocess.run([*ZSW, "run", "-j", "32", "--max-visible-panes", "32", "--backend", "tmux", "--ui", "live",
                        "--require-multiplexer", "--output", "quiet", "--state-dir", str(d / "s"),
                        str(d / "sleep.txt")], cwd=d, env=env, check=True, capture_output=True, timeout=120)
    finally:
        subprocess.run(["tmux", "kill-server"], env=env, capture_output=True)
    run = next((d / "s/runs").iterdir())
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    start = next(e["ts"] for e in events if e["event"] == "batch_dispatch_started")
    opened = [e["ts"] for e in events if e["event"] == "pane_opened"]
    metrics = json.loads((run / "summary.json").read_text())["metrics"]
    if len(opened) != 32:
        return None
    return (max(opened) - start) * 1000, metrics["first_batch_launch_span_ms"]


def headless_refill_p95(run: Path) -> float:
    """ms from a headless slot's worker ending to that slot's next reservation, p95 — the
    slots past the visible cap (slot 1 has the one pane)."""
    ended: dict[tuple[int, int], float] = {}
    reserved: dict[tuple[int, int], float] = {}
    for line in (run / "events.jsonl").read_text().splitlines():
        e = json.loads(line)
        if e["event"] in ("worker_completed", "worker_failed"):
            ended[(e["slot"], e["gen"])] = e["ts"]
        elif e["event"] == "slot_reserved":
            reserved[(e["slot"], e["gen"])] = e["ts"]
    gaps = sorted((t - ended[(slot, gen - 1)]) * 1000 for (slot, gen), t in reserved.items()
                  if slot > 1 and (slot, gen - 1) in ended)
    return gaps[min(len(gaps) - 1, int(len(gaps) * 0.95))]


def stuck_zellij_refill(work: Path) -> tuple[float, float]:
    """Headless refill p95 (ms) of 200 short tasks at -j 8 under the fake zellij, one pane
    shown: (no fault, every retitle hanging for its 10 s timeout). The backend's calls run on
    their own thread, so the second should be no worse than the first."""
    out = []
    for fault in ("", "hang:rename-pane"):
        d = work / f"stuck-{fault or 'none'}"
        (d / "sock").mkdir(parents=True)
        (d / "tasks.txt").write_text("sleep 0.05\n" * 200)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TMUX", "ZELLIJ", "FAKE_ZELLIJ"))}
        env.update(PATH=f"{ROOT / 'scripts/fake-zellij'}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}",
                   ZELLIJ_SOCKET_DIR=str(d / "sock"), HOME=str(d), XDG_RUNTIME_DIR=str(d / "run"),
                   FAKE_ZELLIJ_PYTHON=sys.executable, FAKE_ZELLIJ_VERSION="0.45.0", FAKE_ZELLIJ_FAULTS=fault,
                   ZELLIJ_SWARM_ZELLIJ_CALL_TIMEOUT_MS="10000", SHELL="/bin/sh", CI="true")
        try:
            subprocess.run([*ZSW, "run", "-j", "8", "--max-visible-panes", "1", "--backend", "zellij", "--ui", "live",
                            "--output", "quiet", "--state-dir", str(d / "s"), str(d / "tasks.txt")],
                           cwd=d, env=env, check=True, capture_output=True, timeout=180)
        finally:
            subprocess.run(["zellij", "kill-all-sessions", "--yes"], env=env, capture_output=True, timeout=30)
        out.append(headless_refill_p95(next((d / "s/runs").iterdir())))
    return out[0], out[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tasks", type=int, default=2000)
    ap.add_argument("--jobs", type=int, default=32)
    args = ap.parse_args()
    n, j = args.tasks, args.jobs
    work = Path(tempfile.mkdtemp(prefix="zsw-bench-"))
    try:
        commands = work / "true.txt"
        commands.write_text("true\n" * n)
        numbers = work / "numbers.txt"
        numbers.write_text("".join(f"{i}\n" for i in range(n)))
        times: dict[str, list[float]] = {k: [] for k in ("zellij-swarm", "xargs", "xargs+wrapper", "parallel")}
        cpu: dict[str, list[float]] = {k: [] for k in times}
        refill50, refill95, spans, rss = [], [], [], []
        for r in range(args.rounds):
            order = list(times)[r % 4:] + list(times)[:r % 4]
            for name in order:
                d = work / f"round-{r}-{name}"
                d.mkdir()
                if name == "zellij-swarm":
                    wall, peak, c = timed([*ZSW, "run", "-j", str(j), "--output", "quiet", "--state-dir", str(d / "s"),
                                           str(commands)], cwd=d)
                    summary = json.loads(next((d / "s/runs").iterdir()).joinpath("summary.json").read_text())
                    m = summary["metrics"]
                    refill50.append(m["refill_latency_ms"]["p50"])
                    refill95.append(m["refill_latency_ms"]["p95"])
                    spans.append(m["first_batch_launch_span_ms"])
                    rss.append(peak)
                elif name == "xargs":
                    wall, _, c = timed(["xargs", "-P", str(j), "-n", "1", "sh", "-c", "true"],
                                       stdin_path=numbers, cwd=d)
                elif name == "xargs+wrapper":
                    listing = make_wrappers(d, n)
                    wall, _, c = timed(["xargs", "-P", str(j), "-n", "1", "/bin/sh"], stdin_path=listing, cwd=d)
                else:
                    wall, _, c = timed(["parallel", "-j", str(j)], stdin_path=commands, cwd=d)
                times[name].append(wall)
                cpu[name].append(c)
            print(f"round {r + 1}/{args.rounds}: " + ", ".join(f"{k} {v[-1]:.2f}s" for k, v in times.items()),
                  file=sys.stderr)

        tmux_open = tmux_first_batch(work) if shutil.which("tmux") else None
        stuck = stuck_zellij_refill(work)

        d = work / "sleep-batch"
        d.mkdir()
        (d / "sleep.txt").write_text("sleep 1\n" * 100)
        wall100, _, _ = timed([*ZSW, "run", "-j", "100", "--output", "quiet", "--state-dir", str(d / "s"),
                               str(d / "sleep.txt")], cwd=d)
        m100 = json.loads(next((d / "s/runs").iterdir()).joinpath("summary.json").read_text())["metrics"]
    finally:
        shutil.rmtree(work, ignore_errors=True)

    med = {k: statistics.median(v) for k, v in times.items()}
    med_cpu = {k: statistics.median(v) for k, v in cpu.items()}
    print(f"\n{n} trivial tasks at -j {j}, median of {args.rounds} alternating rounds (wall seconds):")
    for k, v in med.items():
        print(f"  {k:<15} {v:7.3f} s   (CPU {med_cpu[k]:.2f} s)")
    print("ratios:")
    print(f"  zellij-swarm / xargs            {med['zellij-swarm'] / med['xargs']:.2f}x   (target <= 3)")
    print(f"  zellij-swarm / (xargs+wrapper)  {med['zellij-swarm'] / med['xargs+wrapper']:.2f}x   (target <= 1.3)")
    print(f"  zellij-swarm / parallel         {med['zellij-swarm'] / med['parallel']:.2f}x   (target < 1)")
    per_task = (med["xargs+wrapper"] - med["xargs"]) / n * 1000
    per_task_cpu = (med_cpu["xargs+wrapper"] - med_cpu["xargs"]) / n * 1000
    print(f"wrapper's own cost per task: {per_task:.3f} ms wall at -j {j}, {per_task_cpu:.3f} ms CPU")
    print(f"supervisor overhead per task (CPU beyond xargs+wrapper): "
          f"{(med_cpu['zellij-swarm'] - med_cpu['xargs+wrapper']) / n * 1000:.3f} ms")
    print(f"refill latency (median over rounds): p50 {statistics.median(refill50):.1f} ms, "
          f"p95 {statistics.median(refill95):.1f} ms   (target p95 < 20)")
    print(f"first batch launch span at -j {j}: {statistics.median(spans):.1f} ms")
    print(f"supervisor peak RSS: {max(rss):.1f} MiB")
    if tmux_open:
        print(f"tmux, 32 live panes in one batch: all opened {tmux_open[0]:.0f} ms after the batch started, "
              f"all 32 workers running after {tmux_open[1]:.0f} ms (target < 1000)")
    print(f"headless refill p95, 200 x `sleep 0.05` at -j 8 under zellij with one pane: {stuck[0]:.1f} ms; "
          f"while every pane retitle hangs 10 s: {stuck[1]:.1f} ms (+{stuck[1] - stuck[0]:.1f}; target +2 at most)")
    print(f"100 x `sleep 1` at -j 100: wall {wall100:.2f} s, first batch launch span "
          f"{m100['first_batch_launch_span_ms']} ms, utilization {m100['utilization']}")


if __name__ == "__main__":
    main()
