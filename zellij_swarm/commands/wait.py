"""``zellij-swarm wait --for-input [RUN]``: block until a task of the run waits for input, then
print the command that shows it (``zellij-swarm attach …``; ``logs --follow …`` for a worker
with no pane, headless), one line per waiting task — a line to hand to any notifier
(``notify-send``, a chat hook, a phone).

It reads the run's snapshot (the supervisor rewrites it within a second of a change; only
its own rows, the running tasks', are read) every ``POLL`` seconds. With ``new``, a task
already waiting when it starts counts only once it has stopped waiting and waits again, so
that ``while zellij-swarm wait --for-input --new; do …; done`` says each wait once.

Exit 0 with the lines printed; 1 when the run ends (or its supervisor is gone) with no task
waiting.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from zellij_swarm import quoting
from zellij_swarm.commands.status import load_status, none_waiting, show_command, waiting_tasks
from zellij_swarm.records.rundir import RunPaths

POLL = 0.25  # seconds between two looks at the snapshot


def for_input(run: RunPaths, *, latest: bool, new: bool = False, say: Callable[[str], None] = print,
              sleep: Callable[[float], None] = time.sleep) -> int:
    """Wait for a task of ``run`` to wait for input and ``say`` how to show it; the exit code."""
    seen: set[tuple[str, Any]] | None = None  # (task, generation) waiting when we started: ``new``
    while True:
        snap = load_status(run, rows=False)
        waiting = {(t["name"], t.get("generation")): t for t in waiting_tasks(snap)}
        if seen is None:
            seen = set(waiting) if new else set()
        seen &= waiting.keys()  # a task that stopped waiting counts when it waits again
        fresh = [t for key, t in waiting.items() if key not in seen]
        if fresh:
            for t in fresh:
                say(show_command(snap, t, latest=latest, where=run.state_dir))
            return 0
        if snap["state"] != "running":
            ended = f"zellij-swarm: run {snap['run_id']} is {snap['state']}; {none_waiting(snap, run.state_dir)}"
            print(quoting.terminal_text(ended), file=sys.stderr)
            return 1
        sleep(POLL)
