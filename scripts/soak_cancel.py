"""The cancel-race phase of scripts/soak (issue 22, item 1): a swarm of short tasks, each
writing its ledger line as its last act, is stopped at a random moment — SIGTERM to the
supervisor, SIGINT to its process group (a Ctrl-C), ``zellij-swarm cancel RUN``, or
``--halt now`` set off by one task that fails on purpose — then ``zellij-swarm retry RUN``
(``--halt never`` after a halt) finishes it. Finished work must never run again: every
task's ledger line is there exactly once, no attempt that exited 0 is recorded as anything
but succeeded, and no process of the run is left."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Any

from soak_swarm import Round, SoakSwarm, ledger_problems, recorded_wrong

MODES = ("sigterm", "sigint", "cancel", "halt")
STOPPED_EXIT = {"sigterm": 143, "sigint": 130, "cancel": 130, "halt": 1}
FAILING_EXIT = 7  # the task that sets off --halt now
SUPERVISOR_DEADLINE = 300.0  # seconds for a run or retry to end: a kill ladder is 2 s, 300 tasks far less


@dataclass(kw_only=True)
class CancelRound(Round):
    mode: str  # how the run was stopped


def run_round(number: int, seed: int, *, tasks: int, jobs: int, backend: str) -> tuple[CancelRound, SoakSwarm]:
    rng = random.Random(f"{seed}/cancel/{number}")
    mode = MODES[(number - 1) % len(MODES)]
    swarm = SoakSwarm(backend)
    failing = f"t{rng.randrange(jobs, tasks - jobs):04d}" if mode == "halt" else None
    commands = {}
    for i in range(tasks):
        name = f"t{i:04d}"
        last = f"exit {FAILING_EXIT}" if name == failing else 'echo "$ZELLIJ_SWARM_TASK" >> ledger'
        commands[name] = f"echo start; sleep 0.0{rng.randint(1, 9)}; {last}"
    swarm.write_swarm(commands, jobs)
    stop_line, stop_delay = rng.randrange(0, tasks * 2 // 3), rng.uniform(0, 0.1)
    moment = f"{failing} fails" if failing else f"at ledger line {stop_line} + {stop_delay * 1000:.0f} ms"
    result = CancelRound(number=number, mode=mode, moment=f"{mode} {moment}")
    result.tally[f"{mode} rounds"] += 1
    halt = ["--halt", "now"] if failing else []
    started = time.monotonic()
    proc = swarm.start("run", "soak.toml", "--output", "quiet", *swarm.backend_args, *halt, log="run.err",
                       new_session=True)
    with result.watching(swarm, proc):
        swarm.wait_for_run(proc)
        if not failing and swarm.wait_for_ledger(stop_line, proc):
            time.sleep(stop_delay)
            _stop(swarm, proc, mode)
        code = proc.wait(SUPERVISOR_DEADLINE)
        stopped_after = time.monotonic() - started
        first = swarm.summary()
        _check_stopped(result, swarm, first, code)
        retry_code = None
        if {t["status"] for t in first["tasks"]} != {"succeeded"}:
            result.tally["tasks retried"] += sum(t["status"] != "succeeded" for t in first["tasks"])
            never = ["--halt", "never"] if failing else []
            retry = swarm.start("retry", swarm.run_id, "--output", "quiet", *swarm.backend_args, *never,
                                log="retry.err")
            retry_code = retry.wait(SUPERVISOR_DEADLINE)
        result.facts += f", stopped in {stopped_after:.1f}s, {result.tally['tasks retried']} tasks retried"
        _check_finished(result, swarm, first, retry_code, failing, expected=[n for n in commands if n != failing])
    return result, swarm


def _stop(swarm: SoakSwarm, proc: subprocess.Popen[bytes], mode: str) -> None:
    if mode == "sigterm":
        proc.send_signal(signal.SIGTERM)
    elif mode == "sigint":
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C sends: the whole foreground group
    else:
        swarm.command("cancel", swarm.run_id, log="cancel.err")


def _check_stopped(result: CancelRound, swarm: SoakSwarm, summary: dict[str, Any], code: int) -> None:
    if code == 0 and {t["status"] for t in summary["tasks"]} == {"succeeded"}:
        result.missed = True  # every task had ended before the stop: nothing to prove here
    elif code != STOPPED_EXIT[result.mode]:
        result.problems.append(f"the stopped run exited {code}, not {STOPPED_EXIT[result.mode]}")
    result.problems += [f"after the stop: {p}" for p in recorded_wrong(summary)]
    if left := swarm.left():
        result.problems.append(f"{len(left)} processes of the run left after the stop: "
                               f"{[p.pid for p in left]}")
    counts: dict[str, int] = {}
    for t in summary["tasks"]:
        counts[t["status"]] = counts.get(t["status"], 0) + 1
    ended = sum(t["status"] == "cancelled" and bool(t["history"]) for t in summary["tasks"])
    result.tally["running tasks ended by the stop"] += ended
    result.facts = (f"stopped run exit {code}: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
                    + f" ({ended} of them ended running)")


def _check_finished(result: CancelRound, swarm: SoakSwarm, first: dict[str, Any], retry_code: int | None,
                    failing: str | None, expected: list[str]) -> None:
    final = swarm.summary()
    wanted_exit = 1 if failing else 0
    if retry_code is not None and retry_code != wanted_exit:
        result.problems.append(f"retry exited {retry_code}, not {wanted_exit}")
    wrong = {t["name"]: t["status"] for t in final["tasks"]
             if t["status"] != ("failed" if t["name"] == failing else "succeeded")}
    if wrong:
        result.problems.append(f"after the retry {len(wrong)} tasks not as expected: {_some(wrong)}")
    result.problems += [f"after the retry: {p}" for p in recorded_wrong(final)]
    twice, missing, unexpected = ledger_problems(swarm.ledger(), expected)
    # A kill that lands between a task's ledger write and its shell's exit ends that attempt
    # by the signal: it truly was ended by the stop, and retry runs it again. That window is
    # the workload's own (microseconds), not a finished task run again, so it is counted
    # apart; a second line from a task whose first attempt ran to its end is a violation.
    killed_last = {t["name"] for t in first["tasks"] if t["signal"] is not None and t["status"] != "succeeded"}
    result.tally["killed after their ledger write"] += sum(n in killed_last for n in twice)
    rerun = [n for n in twice if n not in killed_last]
    if rerun:
        result.problems.append(f"finished tasks ran again (ledger line twice): {_some(rerun)}")
    if missing or unexpected:
        result.problems.append(f"ledger lines missing: {_some(missing)}; not expected: {_some(unexpected)}")
    if left := swarm.left():
        result.problems.append(f"{len(left)} processes of the run left after the retry: {[p.pid for p in left]}")
    result.facts += f", retry exit {retry_code}, ledger {len(swarm.ledger())} lines for {len(expected)} tasks"
    if killed := result.tally["killed after their ledger write"]:
        result.facts += f" ({killed} killed after their ledger write, run again)"


def _some(items: list[str] | dict[str, str], most: int = 8) -> str:
    shown = [f"{k} {v}" for k, v in items.items()] if isinstance(items, dict) else list(items)
    return ", ".join(shown[:most]) + (f" and {len(shown) - most} more" if len(shown) > most else "")
