"""The body of scripts/profile: where a trivial task's CPU goes, the profile behind the CPU row
of ``scripts/bench`` (not a test).

Three runs of N × ``true`` at -j J through zellij-swarm headless (default 2,000 at 32), each in
a fresh state directory:

1. plain, as a user runs it: the CPU figures the run records of itself (``summary.json``
   "usage": the supervisor, its main thread, the launcher), per task;
2. in this process, under cProfile on each thread's own CPU clock (``time.thread_time``), the
   supervisor's main thread and its log-commit thread (group commit and folds) apart. The
   profiler slows Python code three- or fourfold, and its system calls not at all, so its
   figures are shares: each share of the main thread's profile is shown as ms per task of
   run 1's main thread, and the log-commit thread's the same way;
3. with ``--syscalls``, under ``strace -f``: the system calls per task of the supervisor's
   main thread, its other threads, and the launcher (the wrappers' are not ours).

Usage: scripts/profile [--tasks N] [--jobs J] [--top K] [--syscalls]
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import json
import os
import pstats
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMIT_THREAD = "zellij-swarm log commit"  # records.folding names its thread so
# What the main thread's loop is made of: (label, file, function) whose cumulative time is
# the part's, wherever it is called (a snapshot is built at the run's end too).
LOOP_PARTS = [
    ("dispatch: reserve, write, start", "engine/dispatch.py", "fill"),
    ("launcher replies: started, ended, collect", "engine/headless_workers.py", "on_readable"),
    ("snapshots", "engine/snapshot.py", "build"),
]


def zsw_argv(state: Path, tasks: Path, jobs: int) -> list[str]:
    return ["run", "-j", str(jobs), "--backend", "headless", "--output", "quiet", "--state-dir", str(state),
            str(tasks)]


def usage_of(state: Path) -> dict[str, float]:
    [summary] = state.glob("runs/*/summary.json")
    processes = json.loads(summary.read_text())["usage"]["processes"]
    return {"supervisor": processes["supervisor"]["cpu_s"], "main": processes["supervisor"]["loop_cpu_s"],
            "launcher": processes["launcher"]["cpu_s"]}


def profiled(state: Path, tasks: Path, jobs: int) -> tuple[pstats.Stats, pstats.Stats]:
    """Run 2: the main thread's profile and the log-commit thread's."""
    main, commit = cProfile.Profile(timer=time.thread_time), cProfile.Profile(timer=time.thread_time)
    run_thread = threading.Thread.run

    def run(self: threading.Thread) -> None:
        if self.name != COMMIT_THREAD:
            run_thread(self)
            return
        commit.enable()
        try:
            run_thread(self)
        finally:
            commit.disable()

    threading.Thread.run = run  # type: ignore[method-assign]
    sys.argv = ["zellij-swarm", *zsw_argv(state, tasks, jobs)]
    main.enable()  # before the imports: they are most of a run's start-up
    try:
        from zellij_swarm import cli
        cli.main()
    except SystemExit:
        pass
    finally:
        main.disable()
        threading.Thread.run = run_thread  # type: ignore[method-assign]
    return pstats.Stats(main), pstats.Stats(commit)


def cumulative(stats: pstats.Stats, file: str, function: str) -> float:
    return sum(row[3] for (path, _, name), row in stats.stats.items()  # type: ignore[attr-defined]
               if name == function and path.endswith(file))


def top(stats: pstats.Stats, k: int) -> list[tuple[float, str]]:
    """The ``k`` functions with the most time of their own: (seconds, where)."""
    rows = sorted(((row[2], f"{_short(path)}:{line}({name})")
                   for (path, line, name), row in stats.stats.items()), reverse=True)  # type: ignore[attr-defined]
    return rows[:k]


def _short(path: str) -> str:
    return path.split("/zellij_swarm/", 1)[-1] if "/zellij_swarm/" in path else os.path.basename(path)


def syscalls(state: Path, tasks: Path, jobs: int, n: int) -> None:
    """Run 3: system calls per task of each of our processes' threads, by kind."""
    with tempfile.TemporaryDirectory(prefix="zsw-strace-") as out:
        subprocess.run(["strace", "-ff", "-qq", "-s", "256", "-o", f"{out}/t", sys.executable, "-m", "zellij_swarm",
                        *zsw_argv(state, tasks, jobs)], check=True, cwd=ROOT)
        groups: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
        supervisor = None
        for trace in sorted(Path(out).iterdir(), key=lambda p: int(p.suffix[1:])):
            lines = trace.read_text(errors="replace").splitlines()
            first_exec = next((ln for ln in lines if ln.startswith("execve(")), "")
            if supervisor is None:
                supervisor, who = trace, "supervisor: main thread"
            elif "_launcher.py" in first_exec:
                who = "launcher"
            elif first_exec:
                continue  # a wrapper, a worker: not ours
            else:
                who = "supervisor: its other threads (log commit, calls)"
            groups[who].update(m.group(1) for ln in lines if (m := re.match(r"([a-z_0-9]+)\(", ln)))
    print(f"\nSystem calls per task (strace -f, {n} tasks):")
    for who, counts in groups.items():
        total = sum(counts.values()) / n
        common = ", ".join(f"{name} {count / n:.1f}" for name, count in counts.most_common(8))
        print(f"  {who}: {total:.1f} — {common}")


def main() -> None:
    parser = argparse.ArgumentParser(description="Where a trivial task's CPU goes (see the module docstring).")
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--jobs", type=int, default=32)
    parser.add_argument("--top", type=int, default=15, help="functions listed per thread (default 15)")
    parser.add_argument("--syscalls", action="store_true", help="also count system calls (needs strace)")
    args = parser.parse_args()
    if args.tasks < 1 or args.jobs < 1:
        parser.error("--tasks and --jobs must be at least 1")
    if args.syscalls and shutil.which("strace") is None:
        parser.error("--syscalls needs strace (apt-get install strace)")
    n = args.tasks
    with tempfile.TemporaryDirectory(prefix="zsw-profile-") as work:
        tasks = Path(work) / "tasks.txt"
        tasks.write_text("true\n" * n)
        subprocess.run([sys.executable, "-m", "zellij_swarm", *zsw_argv(Path(work) / "plain", tasks, args.jobs)],
                       check=True, cwd=ROOT)
        usage = usage_of(Path(work) / "plain")
        main_stats, commit_stats = profiled(Path(work) / "profiled", tasks, args.jobs)
        per_task = {k: v / n * 1000 for k, v in usage.items()}
        print(f"CPU per task, {n} × `true` at -j {args.jobs}, as the run records it: our processes "
              f"{per_task['supervisor'] + per_task['launcher']:.3f} ms = supervisor {per_task['supervisor']:.3f} "
              f"(main thread {per_task['main']:.3f}, its other threads "
              f"{per_task['supervisor'] - per_task['main']:.3f}) + launcher {per_task['launcher']:.3f}")
        main_total = main_stats.total_tt  # type: ignore[attr-defined]
        scale = per_task["main"] / main_total if main_total else 0.0
        run = cumulative(main_stats, "engine/supervisor.py", "_run")
        finish = cumulative(main_stats, "engine/supervisor.py", "_finish")
        phases = [("start-up: imports, reading the tasks, setup", main_total - run), ("the loop", run - finish),
                  *((f"  of which {label}", cumulative(main_stats, file, function))
                    for label, file, function in LOOP_PARTS),
                  ("end of run", finish)]
        print("\nThe main thread, by phase (share of its profile, as ms per task of the plain run):")
        for label, spent in phases:
            print(f"  {label:<54} {spent / main_total:6.1%}  {spent * scale:.3f} ms")
        for title, stats, ms in (("main thread", main_stats, per_task["main"]),
                                 ("log-commit thread", commit_stats, per_task["supervisor"] - per_task["main"])):
            total = stats.total_tt  # type: ignore[attr-defined]
            print(f"\nThe {title}: functions by their own time (share; ms per task of the plain run)")
            for own, where in top(stats, args.top):
                print(f"  {own / total:6.1%}  {own / total * ms:.4f} ms  {where}")
        if args.syscalls:
            syscalls(Path(work) / "traced", tasks, args.jobs, n)


if __name__ == "__main__":
    main()
