"""The body of scripts/soak: SIGKILL the supervisor at random moments, resume each time, and
SIGKILL its launcher at other random moments (the supervisor must start a new one), then
check the outcome — one terminal status per task, one ledger line per task, no process of
the run left, and no busy loop: the supervisors' CPU time (their start-ups included) stays
well below the wall time — a loop spinning on a dead launcher's pipe burns one core flat out.
Prints the seed so a failure can be replayed."""

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

import psutil

from zellij_swarm.worker import procs

ZSW = [sys.executable, "-m", "zellij_swarm"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tasks", type=int, default=300)
    ap.add_argument("--jobs", type=int, default=16)
    ap.add_argument("--kills", type=int, default=20, help="SIGKILLs of the supervisor")
    ap.add_argument("--launcher-kills", type=int, default=10, help="SIGKILLs of the launcher")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--backend", default="headless", choices=["headless", "tmux"])
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    print(f"soak: seed {seed}, {args.tasks} tasks, -j {args.jobs}, {args.kills} kills, "
          f"{args.launcher_kills} launcher kills, {args.backend}", flush=True)
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
    proc = subprocess.Popen([*ZSW, "run", "soak.toml", "--output", "quiet", *extra], cwd=work, env=env)
    kills = launcher_kills = 0
    cpu = 0.0  # CPU seconds of every supervisor, measured just before it is killed or ends
    run_id = None
    runs = work / ".zellij-swarm/runs"
    try:
        deadline = time.monotonic() + 30
        while not (runs.exists() and any(r.joinpath("run.json").exists() for r in runs.iterdir())):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit("soak: the run never started")
            time.sleep(0.01)
        run_id = next(runs.iterdir()).name
        while kills < args.kills or launcher_kills < args.launcher_kills:
            time.sleep(rng.uniform(0.05, 0.3))
            if proc.poll() is not None:
                break
            launcher = _launcher(proc.pid)
            if launcher_kills < args.launcher_kills and launcher and (kills >= args.kills or rng.random() < 0.4):
                launcher.kill()
                launcher_kills += 1
                continue
            if kills < args.kills:
                cpu += _cpu(proc.pid)
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                kills += 1
                proc = subprocess.Popen([*ZSW, "resume", run_id, "--output", "quiet"], cwd=work, env=env)
        cpu += _cpu(proc.pid)
        code = proc.wait()
        run = runs / run_id
        summary = json.loads((run / "summary.json").read_text())
        statuses = {t["status"] for t in summary["tasks"]}
        ledger = (work / "ledger").read_text().split()
        names = sorted(t["name"] for t in summary["tasks"])
        left = procs.marked(procs.run_markers(run_id))
        adopted = sum(1 for line in (run / "events.jsonl").read_text().splitlines() if '"worker_adopted"' in line)
        wall = time.monotonic() - started
        lost = sum(1 for w in summary["warnings"] if w["code"] == "launcher_lost")
        ok = code == 0 and statuses == {"succeeded"} and sorted(ledger) == names and not left and cpu < 0.8 * wall
        print(f"soak: {'PASS' if ok else 'FAIL'} in {wall:.1f}s: {kills} kills and resumes, "
              f"{launcher_kills} launcher kills ({lost} launcher_lost warnings in the last supervisor), "
              f"supervisor CPU {cpu:.1f}s, "
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


def _launcher(supervisor: int) -> psutil.Process | None:
    try:
        return next((p for p in psutil.Process(supervisor).children()
                     if any(a.endswith("_launcher.py") for a in p.cmdline())), None)
    except psutil.Error:
        return None


def _cpu(pid: int) -> float:
    """CPU seconds a supervisor used so far, read just before it is killed or reaped."""
    try:
        times = psutil.Process(pid).cpu_times()
        return times.user + times.system
    except psutil.Error:
        return 0.0


if __name__ == "__main__":
    sys.exit(main())
