"""The POSIX ``sh`` wrapper every generation runs through (SPEC §5).

The wrapper is the contract between the supervisor and a worker, whatever the backend:

1. it claims the generation (``claim`` created with O_EXCL through ``set -C``); a wrapper that
   finds the claim taken exits 0 without running anything, so a generation runs at most once.
   Started with the argument ``claimed`` it skips this: the supervisor took the claim for it
   (a pane that never reported in, run headless instead) and the wrapper only restamps the
   claim file, whose modification time is the generation's start;
2. appends the launch heartbeat ``{"event":"started","pid":…,"pane_id":…}``;
3. exports the worker environment (in a pane it first restores the caller's saved
   environment, because a multiplexer pane inherits the multiplexer server's);
4. changes to the task's cwd itself and runs the command, output to ``output.log``;
5. writes the ``exit`` sidecar — one line, ``<code>`` or ``- cwd_missing`` — as its last
   durable act (the commit marker); its modification time is the end time;
6. appends ``{"event":"exited","code":…}`` and exits with the worker's code.

Cost matters (2,000 short tasks is a real use), so the wrapper uses shell builtins only: no
``date``, ``mv``, ``tee`` or ``cat``; times come from file modification times. A shell
command runs in a subshell of the wrapper through ``eval`` rather than a second ``sh -c``
(one fork, no exec); the wrapper's own variables all start with ``_zsw_``.

Every value spliced into the script goes through ``shlex.quote``; the header comment holds
only generated identifiers, never a task name (a newline in a name would end a comment).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from .rundir import GenPaths


@dataclass(frozen=True)
class WorkerIdentity:
    run_id: str
    task_name: str
    task_id: str
    slot: int
    generation: int
    attempt: int


def render(
    gen: GenPaths,
    who: WorkerIdentity,
    *,
    cmd: str | None,
    argv: tuple[str, ...] | None,
    cwd: str,
    env: dict[str, str],
) -> str:
    q = shlex.quote
    d = str(gen.dir)
    lines = [
        "# zellij-swarm generation wrapper: run %s, task id %s, slot %d, generation %d (generated; do not edit)"
        % (who.run_id, who.task_id, who.slot, who.generation),
        f"_zsw_d={q(d)}",
        'if [ "${1-}" = claimed ]; then echo $$ >|"$_zsw_d/claim"',
        'else set -C; { echo $$ >"$_zsw_d/claim"; } 2>/dev/null || exit 0; set +C',
        "fi",
        # Survive the signals aimed at the worker so the exit is still recorded.
        "trap : HUP INT TERM",
        # The wrapper's own stdout/stderr stay out of the log (the shell reports a worker's
        # death by signal there); only the worker's output goes to output.log.
        "exec </dev/null",
        'printf \'{"event":"started","pid":%s,"pane_id":null}\\n\' $$ >>"$_zsw_d/heartbeat.jsonl"',
    ]
    exports = {
        "ZELLIJ_SWARM_RUN_ID": who.run_id,
        "ZELLIJ_SWARM_TASK": who.task_name,
        "ZELLIJ_SWARM_TASK_ID": who.task_id,
        "ZELLIJ_SWARM_SLOT": str(who.slot),
        "ZELLIJ_SWARM_GENERATION": str(who.generation),
        "ZELLIJ_SWARM_ATTEMPT": str(who.attempt),
        "ZELLIJ_SWARM_HEARTBEAT": str(gen.heartbeat),
        "ZELLIJ_SWARM_ARTIFACT_DIR": str(gen.artifacts),
        **env,
    }
    lines.append("export " + " ".join(f"{k}={q(v)}" for k, v in exports.items()))
    if argv is not None:
        lines.append("set -- " + " ".join(q(a) for a in argv))
        run = '( exec "$@" )'
    else:
        lines.append("set --")
        run = f"( eval {q(cmd or ':')} )"
    lines += [
        f"if cd -- {q(cwd)} 2>/dev/null; then",
        f'  {run} >>"$_zsw_d/output.log" 2>&1',
        "  _zsw_rc=$?",
        "  printf '%s\\n' \"$_zsw_rc\" >\"$_zsw_d/exit\"",
        "else",
        f"  echo \"zellij-swarm: cwd does not exist: \"{q(cwd)} >>\"$_zsw_d/output.log\"",
        "  _zsw_rc=1",
        "  printf '%s\\n' '- cwd_missing' >\"$_zsw_d/exit\"",
        "fi",
        'printf \'{"event":"exited","code":%s}\\n\' "$_zsw_rc" >>"$_zsw_d/heartbeat.jsonl"',
        'exit "$_zsw_rc"',
    ]
    return "\n".join(lines) + "\n"

