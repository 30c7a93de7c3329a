"""The disk-full phase of scripts/soak (issue 22, item 2; SPEC §5.8): the state directory is
a small tmpfs, mounted in the soak's private mount namespace, that another process fills at
a random moment of the run and frees 0.5–2 s later. A full disk must turn nothing into a
failure: the run exits 0, every task succeeded with its ledger line exactly once (in tmux
panes a worker whose end could not be recorded is `unknown` instead, and the run exits 1),
the run said once that the state directory was full and once that it had room again, and
its event log holds every outcome."""

from __future__ import annotations

import collections
import os
import random
import subprocess
import time
from pathlib import Path

from soak_swarm import Round, SoakSwarm, ledger_problems, recorded_wrong

TMPFS_SIZE = "16m"  # a 300-task run's records take about 3 MB
FILLER_BYTES = 64 << 20  # more than the tmpfs holds: the filler stops at ENOSPC
ROOM = 256 << 10  # the free space the supervisor waits for before it starts tasks again (SPEC §5.8)
SUPERVISOR_DEADLINE = 300.0
FULL_SAID = "is full or cannot be written: no new task starts"
ROOM_SAID = "has room again: new tasks start"
UNSEEN = ("unknown", "state_dir_error")
# Holds one fill may cause: the fill itself, and a write refused then but noticed after the room
# came back (a pane's missing exit record, at its heartbeat deadline). A run that held dispatch
# once a second until its end (each loop turn taking an old error for a full disk) did 12–40.
FLAPPING = 3




def private_mounts_problem() -> str | None:
    """Why this process cannot mount a tmpfs of its own, or None when it can: the soak runs
    in a private mount namespace of its own (``unshare -m``), so its mounts are no one else's."""
    probe = Path("/tmp") / f"zsw-soak-probe-{os.getpid()}"
    probe.mkdir(exist_ok=True)
    try:
        res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(probe)], capture_output=True,
                             text=True, timeout=30)
        if res.returncode != 0:
            return res.stderr.strip() or f"mount exited {res.returncode}"
        subprocess.run(["umount", str(probe)], capture_output=True, timeout=30)
        return None
    except (OSError, subprocess.TimeoutExpired) as e:
        return str(e)
    finally:
        probe.rmdir()


def run_round(number: int, seed: int, *, tasks: int, jobs: int, backend: str) -> tuple[Round, SoakSwarm]:
    rng = random.Random(f"{seed}/disk-full/{number}")
    swarm = SoakSwarm(backend)
    swarm.mount_state_dir(TMPFS_SIZE)
    commands = {f"t{i:04d}": f'echo start; sleep 0.0{rng.randint(1, 9)}; echo "$ZELLIJ_SWARM_TASK" >> ledger'
                for i in range(tasks)}
    swarm.write_swarm(commands, jobs)
    fill_line, fill_delay, free_after = rng.randrange(jobs, tasks * 2 // 3), rng.uniform(0, 0.1), rng.uniform(0.5, 2)
    result = Round(number, f"filled at ledger line {fill_line} + {fill_delay * 1000:.0f} ms, "
                                   f"freed {free_after:.2f}s later")
    proc = swarm.start("run", "soak.toml", "--state-dir", str(swarm.state_dir), "--output", "quiet",
                       *swarm.backend_args, log="run.err")
    with result.watching(swarm, proc):
        swarm.wait_for_run(proc)
        if swarm.wait_for_ledger(fill_line, proc):
            time.sleep(fill_delay)
            _fill_and_free(result, swarm.state_dir, free_after)
        else:
            result.missed = True
        code = proc.wait(SUPERVISOR_DEADLINE)
        _check(result, swarm, code, expected=list(commands))
    return result, swarm


def _fill_and_free(result: Round, state: Path, free_after: float) -> None:
    """Another process fills the state dir to its last byte; the soak frees it ``free_after``
    seconds later."""
    filler = state / "filler"
    subprocess.run(["sh", "-c", 'head -c "$1" /dev/zero > "$2"', "sh", str(FILLER_BYTES), str(filler)],
                   capture_output=True, timeout=60)
    fs = os.statvfs(state)
    if fs.f_bavail * fs.f_frsize >= ROOM:
        result.problems.append(f"the filler left {fs.f_bavail * fs.f_frsize} bytes free: not full")
    time.sleep(free_after)
    filler.unlink()


def _check(result: Round, swarm: SoakSwarm, code: int, expected: list[str]) -> None:
    summary = swarm.summary()
    # A pane's worker whose wrapper could not write its exit sidecar ended unseen: `unknown`
    # (SPEC §5.8), and the run exits 1. Headless, the launcher saw every end: all succeed.
    unseen = [t["name"] for t in summary["tasks"] if (t["status"], t["reason"]) == UNSEEN]
    if swarm.backend == "headless" and unseen:
        result.problems.append(f"{len(unseen)} headless tasks unknown, though the launcher saw their ends")
    if code != (1 if unseen else 0):
        result.problems.append(f"the run exited {code}, not {1 if unseen else 0}")
    result.tally["unknown (a pane's end unseen)"] += len(unseen)
    wrong = {t["name"]: f"{t['status']} ({t['reason']})" for t in summary["tasks"]
             if t["status"] != "succeeded" and t["name"] not in unseen}
    if wrong:
        shown = ", ".join(f"{n} {s}" for n, s in list(wrong.items())[:8])
        result.problems.append(f"{len(wrong)} tasks did not succeed: {shown}")
    result.problems += recorded_wrong(summary)
    twice, missing, unexpected = ledger_problems(swarm.ledger(), expected)
    if twice or missing or unexpected:
        result.problems.append(f"ledger: twice {twice[:8]}, missing {missing[:8]}, not expected {unexpected[:8]}")
    said = (swarm.dir / "run.err").read_text()
    full_said, room_said = said.count(FULL_SAID), said.count(ROOM_SAID)
    if not result.missed and (full_said, room_said) != (1, 1):
        # one fill: held once until there is room, said once each (a hold again with the
        # filler gone is a run that thinks the disk is full when it is not)
        result.problems.append(f"the run said {full_said}× that the state dir was full and {room_said}× that it had "
                               f"room again, not once each")
    if left := swarm.left():
        result.problems.append(f"{len(left)} processes of the run left: {[p.pid for p in left]}")
    events, torn = swarm.event_log()
    counts = collections.Counter(e["event"] for e in events)
    attempts = sum(t["attempts"] for t in summary["tasks"])
    outcomes = counts["worker_completed"] + counts["worker_failed"]
    if torn or outcomes != attempts or not events or events[-1]["event"] != "run_finished":
        last = events[-1]["event"] if events else None
        result.problems.append(f"the event log holds {outcomes} outcomes for {attempts} attempts, {torn} torn lines, "
                               f"and ends with {last}, not run_finished")
    if counts["dispatch_held"] > FLAPPING:
        result.problems.append(f"dispatch was held {counts['dispatch_held']} times for one fill: held again while "
                               f"there was room")
    result.tally.update({"dispatch held": counts["dispatch_held"], "dispatch resumed": counts["dispatch_resumed"],
                         "generations requeued": counts["task_requeued"]})
    result.facts = (f"exit {code}, {attempts} attempts for {len(expected)} tasks ({len(unseen)} unknown), "
                    f"dispatch held {counts['dispatch_held']}× and resumed {counts['dispatch_resumed']}×, "
                    f"{counts['task_requeued']} generations requeued, {outcomes} outcomes in the event log, "
                    f"ledger {len(swarm.ledger())} lines")
