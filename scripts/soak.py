"""The body of scripts/soak: three phases that must each end with every task run exactly once.

kill: SIGKILL the supervisor at random moments, resume each time, and SIGKILL its launcher
at other random moments (the supervisor must start a new one), then check the outcome — one
terminal status per task, one ledger line per task, no process of the run left, and no busy
loop: the supervisors' CPU time (their start-ups included) stays well below the wall time —
a loop spinning on a dead launcher's pipe burns one core flat out.

cancel: rounds of a swarm stopped at a random moment by SIGTERM, Ctrl-C, `cancel` or
`--halt now`, then `retry` (scripts/soak_cancel.py).

disk-full: rounds of a swarm whose state directory, a small tmpfs, fills mid-run and is
freed again (scripts/soak_disk_full.py). The soak runs itself again inside a private mount
namespace (`unshare -m`) for it; without one it skips the phase in one line.

Prints the seed, a line per round and a summary; exits 1 on any violation, keeping the
round's directory and printing how to replay it."""

from __future__ import annotations

import argparse
import collections
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import psutil
import soak_cancel
import soak_disk_full
from soak_swarm import BACKENDS, SoakError, SoakSwarm

PHASES = ("kill", "cancel", "disk-full")
IN_PRIVATE_MOUNTS = "ZSW_SOAK_PRIVATE_MOUNTS"  # set once the soak has run itself again under unshare -m


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--phase", action="append", choices=PHASES, help="a phase to run (repeatable; default: all)")
    ap.add_argument("--tasks", type=int, default=300)
    ap.add_argument("--jobs", type=int, default=None, help="slots (default: 16 for kill, 8 for the others)")
    ap.add_argument("--kills", type=int, default=20, help="kill phase: SIGKILLs of the supervisor")
    ap.add_argument("--launcher-kills", type=int, default=10, help="kill phase: SIGKILLs of the launcher")
    ap.add_argument("--cancel-rounds", type=int, default=10, help="cancel phase: rounds (modes in turn)")
    ap.add_argument("--disk-full-rounds", type=int, default=10, help="disk-full phase: rounds")
    ap.add_argument("--round", type=int, default=None, help="run only this round of each round phase (a replay)")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--keep", action="store_true", help="keep every round's directory (a failed one is always kept)")
    ap.add_argument("--backend", default="headless", choices=BACKENDS)
    args = ap.parse_args()
    # a soak stopped by SIGTERM (a time limit, a loop of soaks ended) ends what its round
    # started, its tmux server included, as Ctrl-C does: the rounds' ``finally`` blocks run
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    phases = args.phase or list(PHASES)
    if args.tasks < 4 * (args.jobs or 16):
        ap.error("--tasks must be at least 4 × --jobs: a stop or a fill needs a run with a middle")
    if "disk-full" in phases and os.environ.get(IN_PRIVATE_MOUNTS) != "1":
        _run_in_private_mounts()  # returns only when that cannot be done
        print("soak: disk-full phase skipped: no private mount namespace here (unshare -m failed)", flush=True)
        phases.remove("disk-full")
    if "disk-full" in phases and (why := soak_disk_full.private_mounts_problem()):
        print(f"soak: disk-full phase skipped: cannot mount a tmpfs ({why})", flush=True)
        phases.remove("disk-full")
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    print(f"soak: seed {seed}, phases {' '.join(phases)}, {args.tasks} tasks, {args.backend}", flush=True)
    failed = []
    try:
        if "kill" in phases and not kill_phase(args, seed):
            failed.append("kill")
    except SoakError as e:
        print(f"soak kill: FAIL: {e}", flush=True)
        failed.append("kill")
    for phase, rounds, run_round in (("cancel", args.cancel_rounds, soak_cancel.run_round),
                                     ("disk-full", args.disk_full_rounds, soak_disk_full.run_round)):
        if phase in phases and not round_phase(phase, rounds, run_round, args, seed):
            failed.append(phase)
    print(f"soak: {'FAIL in ' + ', '.join(failed) if failed else 'PASS'} (seed {seed})", flush=True)
    return 1 if failed else 0


def _run_in_private_mounts() -> None:
    """Runs this soak again in a mount namespace of its own, whose tmpfs mounts no other
    process sees; returns only if that is not possible here."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return
    probe = subprocess.run([unshare, "-m", "--propagation", "private", "true"], capture_output=True, timeout=30)
    if probe.returncode != 0:
        return
    os.execve(unshare, [unshare, "-m", "--propagation", "private", sys.executable, *sys.argv],
              {**os.environ, IN_PRIVATE_MOUNTS: "1"})


def round_phase(phase: str, rounds: int, run_round: Callable[..., tuple[Any, SoakSwarm]],
                args: argparse.Namespace, seed: int) -> bool:
    """Runs the rounds of a phase, a line each, then its summary line; True when none failed."""
    jobs = args.jobs or 8
    numbers = [args.round] if args.round else list(range(1, rounds + 1))
    passed = missed = 0
    tally: collections.Counter[str] = collections.Counter()
    started = time.monotonic()
    for number in numbers:
        t0 = time.monotonic()
        result, swarm = run_round(number, seed, tasks=args.tasks, jobs=jobs, backend=args.backend)
        verdict = "FAIL" if not result.ok else "MISSED" if result.missed else "PASS"
        print(f"soak {phase} {number}/{rounds} ({result.moment}): {verdict} in {time.monotonic() - t0:.1f}s: "
              f"{result.facts}", flush=True)
        swarm.close(keep=not result.ok or args.keep)
        for problem in result.problems:
            print(f"    {problem}", flush=True)
        if not result.ok or args.keep:
            print(f"    run dir {swarm.run_dir}; replay: scripts/soak --phase {phase} --seed {seed} --round {number} "
                  f"--tasks {args.tasks} --jobs {jobs} --backend {args.backend}", flush=True)
        passed += result.ok and not result.missed
        missed += result.ok and result.missed
        tally.update(result.tally)
    failed = len(numbers) - passed - missed
    print(f"soak {phase}: {passed} of {len(numbers)} rounds passed, {missed} missed (the run ended first), "
          f"{failed} failed, in {time.monotonic() - started:.0f}s; "
          + ", ".join(f"{what} {n}" for what, n in sorted(tally.items())), flush=True)
    return failed == 0


def _finished(swarm: SoakSwarm) -> int | None:
    """The exit code the run's log says it finished with, None while it has not: a kill may
    land after the supervisor wrote its end and before it exited (`resume` then says there is
    nothing to resume, rightly)."""
    ends = [e for e in swarm.event_log()[0] if e.get("event") == "run_finished"]
    return int(ends[-1]["exit_code"]) if ends else None


def kill_phase(args: argparse.Namespace, seed: int) -> bool:
    rng = random.Random(seed)
    jobs = args.jobs or 16
    print(f"soak kill: -j {jobs}, {args.kills} kills, {args.launcher_kills} launcher kills", flush=True)
    swarm = SoakSwarm(args.backend)
    swarm.write_swarm({f"t{i:04d}": f'sleep {rng.randint(50, 300) / 1000:.3f}; echo "$ZELLIJ_SWARM_TASK" >> ledger'
                       for i in range(args.tasks)}, jobs)
    started = time.monotonic()
    proc = swarm.start("run", "soak.toml", "--output", "quiet", *swarm.backend_args, log="run.err")
    kills = launcher_kills = 0
    ended: int | None = None  # the run's exit code, when a kill came after it finished
    cpu = 0.0  # CPU seconds of every supervisor, measured just before it is killed or ends
    ok = False
    try:
        swarm.wait_for_run(proc)
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
                if (ended := _finished(swarm)) is not None:  # killed as it exited: nothing to resume
                    break
                proc = swarm.start("resume", swarm.run_id, "--output", "quiet", log="run.err")
        if ended is None:
            cpu += _cpu(proc.pid)
            code = proc.wait()
        else:
            code = ended
        summary = swarm.summary()
        statuses = {t["status"] for t in summary["tasks"]}
        ledger = swarm.ledger()
        names = sorted(t["name"] for t in summary["tasks"])
        left = swarm.left()
        adopted = swarm.events()["worker_adopted"]
        wall = time.monotonic() - started
        lost = sum(1 for w in summary["warnings"] if w["code"] == "launcher_lost")
        ok = code == 0 and statuses == {"succeeded"} and sorted(ledger) == names and not left and cpu < 0.8 * wall
        print(f"soak kill: {'PASS' if ok else 'FAIL'} in {wall:.1f}s: {kills} kills and resumes, "
              f"{launcher_kills} launcher kills ({lost} launcher_lost warnings in the last supervisor), "
              f"supervisor CPU {cpu:.1f}s, "
              f"{adopted} workers adopted, exit {code}, statuses {sorted(statuses)}, "
              f"ledger {len(ledger)} lines for {len(names)} tasks ({len(set(ledger))} distinct), "
              f"{len(left)} processes left", flush=True)
        if not ok:
            print(f"    run dir {swarm.run_dir}", flush=True)
        return ok
    finally:
        if proc.poll() is None:
            proc.kill()
        swarm.close(keep=not ok)


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
