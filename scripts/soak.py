"""The body of scripts/soak: SIGKILL the supervisor at random moments, resume each time,
and check the outcome — one terminal status per task, one ledger line per task, no process
of the run left. Prints the seed so a failure can be replayed."""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from zellij_swarm import procs

ZSW = [sys.executable, "-m", "zellij_swarm"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tasks", type=int, default=300)
    ap.add_argument("--jobs", type=int, default=16)
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--backend", default="headless", choices=["headless", "tmux"])
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    print(f"soak: seed {seed}, {args.tasks} tasks, -j {args.jobs}, {args.kills} kills, {args.backend}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="zsw-soak-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZELLIJ", "TMUX")) and k != "CI"}
    extra: list[str] = []
    if args.backend == "tmux":
        (work / "tmux").mkdir()
        env["TMUX_TMPDIR"] = str(work / "tmux")
        extra = ["--backend", "tmux", "--ui", "live", "--max-visible-panes", "8"]
    lines = [f"[swarm]\njobs = {args.jobs}\n"]
    for i in range(args.tasks):
        lines.append(f'[[task]]\nname = "t{i:04d}"\n'
                     f"cmd = 'sleep {rng.randint(50, 300) / 1000:.3f}; echo \"$ZELLIJ_SWARM_TASK\" >> ledger'\n")
    (work / "soak.toml").write_text("".join(lines))
    started = time.monotonic()
    proc = subprocess.Popen(ZSW + ["run", "soak.toml", "--output", "quiet", *extra], cwd=work, env=env)
    kills = 0
    run_id = None
    runs = work / ".zellij-swarm/runs"
    try:
        deadline = time.monotonic() + 30
        while not (runs.exists() and any(r.joinpath("run.json").exists() for r in runs.iterdir())):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit("soak: the run never started")
            time.sleep(0.01)
        run_id = next(runs.iterdir()).name
        while kills < args.kills:
            time.sleep(rng.uniform(0.05, 0.3))
            if proc.poll() is not None:
                break
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            kills += 1
            proc = subprocess.Popen(ZSW + ["resume", run_id, "--output", "quiet"], cwd=work, env=env)
        code = proc.wait()
        run = runs / run_id
        summary = json.loads((run / "summary.json").read_text())
        statuses = {t["status"] for t in summary["tasks"]}
        ledger = (work / "ledger").read_text().split()
        names = sorted(t["name"] for t in summary["tasks"])
        left = procs.marked(procs.run_markers(run_id))
        adopted = sum(1 for line in (run / "events.jsonl").read_text().splitlines() if '"worker_adopted"' in line)
        ok = code == 0 and statuses == {"succeeded"} and sorted(ledger) == names and not left
        print(f"soak: {'PASS' if ok else 'FAIL'} in {time.monotonic() - started:.1f}s: {kills} kills and resumes, "
              f"{adopted} workers adopted, exit {code}, statuses {sorted(statuses)}, "
              f"ledger {len(ledger)} lines for {len(names)} tasks ({len(set(ledger))} distinct), "
              f"{len(left)} processes left")
        return 0 if ok else 1
    finally:
        if proc.poll() is None:
            proc.kill()
        if run_id:
            procs.end_all(procs.marked(procs.run_markers(run_id)), 1.0)
        if args.backend == "tmux":
            subprocess.run(["tmux", "kill-server"], env=env, capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
