"""The ladder's SIGTERM to a Slurm step's worker, sent on the step's node (SPEC §6, the outcome rule).

``scancel --signal=TERM`` reaches every process of a step, but says nothing of them: not
whether the worker was still running, nor whether it had a handler for the signal. Without
that, a worker that ignores SIGTERM and then exits 0 on its own, its work done, was taken for
one the signal ended — ``timed_out`` or ``restarted`` — and ran again. So the supervisor runs
this module as a step of its own beside the generation's (``srun --overlap`` on the node its
launch heartbeat names): it signals the generation's processes there exactly as the local
ladder does (``stopping.ProcessSignaller``: the worker's own running processes, each looked
at just before its signal, its handler read first) and prints what that came to, one line:

    sent <time> caught|uncaught    the signal reached a running process of the worker's
    none                           nothing of the worker was running there

``<time>`` is on the node's coarse clock, the one its wrapper stamps the generation's end
with. The supervisor falls back to ``scancel --signal=TERM`` when this prints ``none`` or
cannot run (``remote.term_step``). A process that left the wrapper's tree and emptied its
environment is not found here, as it is not locally; the step's ``scancel`` after the grace
ends it.

Usage: ``python -m zellij_swarm.engine.step_signal RUN_ID SLOT GENERATION GEN_DIR``.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from zellij_swarm.engine.stopping import ProcessSignaller
from zellij_swarm.records import generation_files
from zellij_swarm.records.generation_files import GenPaths
from zellij_swarm.worker import procs

NOTHING_RAN = "none"
# How the supervisor runs it on a node: this interpreter (a node sees the submit host's files,
# as it sees the wrappers), the package found as the supervisor found it (srun passes the
# environment and the working directory on)
ARGV = (sys.executable, "-m", "zellij_swarm.engine.step_signal")


def _wrapper_pid(gen: GenPaths) -> int | None:
    """The pid the generation's launch heartbeat names, when that process is its wrapper here
    (its command line names the generation's directory): on another node, or once it has
    ended, the number may be anyone's."""
    hb = generation_files.launch_heartbeat(gen)
    pid = hb["pid"] if hb is not None else None
    if not isinstance(pid, int):
        return None
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()
    except OSError:
        return None
    return pid if os.fsencode(gen.dir) in cmdline else None


def terminate(run_id: str, gen: GenPaths) -> str:
    """SIGTERM to ``gen``'s worker on this node; the line that says what it came to."""
    pid = _wrapper_pid(gen)
    markers = procs.generation_markers(run_id, gen.slot, gen.gen)
    delivery = ProcessSignaller().deliver(gen, signal.SIGTERM, lambda: procs.generation_tree(pid, markers))
    if delivery.sent_at is None:
        return NOTHING_RAN
    return f"sent {delivery.sent_at!r} {'caught' if delivery.caught else 'uncaught'}"


def parse(printed: str) -> tuple[float, bool] | None:
    """``terminate``'s line read back from what the step printed: (sent at, caught), or None
    (nothing ran, or no such line: it could not run)."""
    words = printed.split()
    if len(words) != 3 or words[0] != "sent" or words[2] not in ("caught", "uncaught"):
        return None
    try:
        return float(words[1]), words[2] == "caught"
    except ValueError:
        return None


def main(argv: list[str]) -> int:
    if len(argv) != 4 or not argv[1].isdigit() or not argv[2].isdigit():
        print("usage: step_signal RUN_ID SLOT GENERATION GEN_DIR", file=sys.stderr)
        return 2
    run_id, slot, no, directory = argv
    print(terminate(run_id, GenPaths(Path(directory), int(slot), int(no))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
