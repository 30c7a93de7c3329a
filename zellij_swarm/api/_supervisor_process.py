"""The supervisor process ``Swarm.start()`` starts: both of its sides.

``spawn`` (the caller's side) starts ``python -m zellij_swarm.api._supervisor_process FD`` in a
session of its own — so the caller's Ctrl-C and terminal do not reach it, and the caller may
end while the run goes on — and gives it the run's plan, checked already, on its stdin. The
process runs the plan as ``zellij-swarm run`` runs one (``commands.run.execute``, its signals
handled as ``run`` handles them: SIGTERM cancels, SIGHUP detaches) and says on the pipe FD,
once, either where its run is (its directory exists and its control inbox is watched) or why
there is none. ``spawn`` returns when it has said.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any, cast

from zellij_swarm import errors, exc, streams
from zellij_swarm.commands.run import execute
from zellij_swarm.config import settings, swarmfile
from zellij_swarm.records.rundir import RunPaths
from zellij_swarm.watch import Inotify

# The child's program: not ``-m`` this module, which the package it is in imports first (runpy
# then warns on the user's stderr that it was "found in sys.modules ... prior to execution").
_CHILD = "import sys; from zellij_swarm.api._supervisor_process import main; sys.exit(main(int(sys.argv[1])))"
SNAPSHOT_LOOK = 0.1  # seconds between two looks at whether the supervisor lives, while its first snapshot is due


def spawn(plan: Mapping[str, Any], *, env: Mapping[str, str]) -> tuple[subprocess.Popen[bytes], Path]:
    """Start the supervisor of ``plan`` (``main`` reads it) and return it with its run's
    directory once the run has begun. A run that never began raises what the supervisor
    said: ``errors.UsageError`` for bad input (exit 2), else ``errors.RunStartError``."""
    streams.open_standard_descriptors()  # a caller with stdout closed: the pipe must not become it
    said, tell = os.pipe2(os.O_CLOEXEC)
    with os.fdopen(said, "rb") as answers:
        try:
            process = subprocess.Popen([sys.executable, "-c", _CHILD, str(tell)],
                                       stdin=subprocess.PIPE, env=dict(env), pass_fds=(tell,),
                                       start_new_session=True)
        finally:
            os.close(tell)  # the process's alone: its end (or its word) ends the read below
        try:
            _give(process, json.dumps(plan).encode())
            word: dict[str, Any] = json.loads(answers.readline() or b"{}")
            if "run_dir" in word:
                _await_first_snapshot(process, RunPaths(Path(word["run_dir"])))
                return process, Path(word["run_dir"])
        except BaseException:  # Ctrl-C while it starts: its run ends as `run`'s does on SIGTERM (cancelled)
            process.terminate()
            process.wait()
            raise
    code = process.wait()
    message = word.get("error") or f"the supervisor exited with status {code} before its run began (see its stderr)"
    raise errors.UsageError(message) if code == exc.UsageError.exit_code else errors.RunStartError(message, code)


def _await_first_snapshot(process: subprocess.Popen[bytes], run: RunPaths) -> None:
    """Return once the run's first snapshot is written — from then on its status lists every
    task (before, only ``run.json`` says what it runs) — or its supervisor has ended. The
    supervisor writes it in its loop's first turn, moments after its run began."""
    watcher = Inotify()
    try:
        try:
            watcher.add(run.dir)
        except OSError:
            pass  # no watch to be had: the look every SNAPSHOT_LOOK finds it all the same
        while not run.state.exists() and process.poll() is None:
            select.select([watcher.fileno()], [], [], SNAPSHOT_LOOK)
            watcher.read()
    finally:
        watcher.close()


def _give(process: subprocess.Popen[bytes], plan: bytes) -> None:
    """Write the plan to the process's stdin; one that ended before reading it all says why
    on the pipe (or says nothing, having crashed)."""
    stdin = cast(IO[bytes], process.stdin)  # a pipe: spawn asks for one
    try:
        stdin.write(plan)
        stdin.close()
    except BrokenPipeError:
        pass


def main(tell_fd: int) -> int:
    """The supervisor's side: run the plan on stdin and say on ``tell_fd`` where its run is,
    or why there is none; exit as ``zellij-swarm run`` exits."""
    streams.open_standard_descriptors()  # a program with its stdout closed started this one
    os.set_inheritable(tell_fd, False)  # the run's workers never hold it: its end says the process ended
    tell = os.fdopen(tell_fd, "w")
    plan = json.loads(streams.read_bytes(sys.stdin))
    devnull = os.open(os.devnull, os.O_RDONLY)  # the plan was all stdin held: workers get no terminal input
    os.dup2(devnull, 0)
    os.close(devnull)

    def say(word: dict[str, str]) -> None:
        if not tell.closed:
            tell.write(json.dumps(word) + "\n")
            tell.close()

    try:
        outcome = execute([swarmfile.TaskSpec.from_record(t) for t in plan["tasks"]],
                          settings.Resolved.from_record(plan["settings"]), name=plan["name"], source=plan["source"],
                          env=os.environ, groups=plan["groups"], on_started=lambda run: say({"run_dir": str(run.dir)}))
    except exc.SwarmError as e:
        if tell.closed:  # the run had begun: said as `run` says it
            print(f"zellij-swarm: error: {e}", file=sys.stderr)
        say({"error": str(e)})
        return e.exit_code
    return outcome.exit_code


def plan_record(specs: list[swarmfile.TaskSpec], resolved: settings.Resolved, *, name: str | None,
                groups: Mapping[str, int], source: str) -> dict[str, Any]:
    """What ``main`` reads: the tasks and settings as the run records them (``run.json``)."""
    return {"tasks": [spec.to_record() for spec in specs], "settings": resolved.as_record(), "name": name,
            "groups": dict(groups), "source": source}

