"""``zellij-swarm logs``: one attempt's output, optionally followed as it grows; or, with no
task named, the run's tasks, to pick one from.

**Streams.** A headless or compact worker's stdout (``output.log``) is shown on stdout and
its stderr (``stderr.log``) on stderr, as the worker wrote them; ``--stdout``/``--stderr``
show one. A worker in a pane had one terminal for both: its ``output.log`` holds them
together, and ``--stderr`` says so (exit 2). A run recorded before the streams were kept
apart has its stderr in ``output.log`` too.

**Line ends.** A live worker's output is copied from its pane's terminal, which ends every
line with CRLF (the tty's ``onlcr``); a compact or headless worker's output has the bare LF
the worker wrote. ``logs`` shows both alike: every ``\\r\\n`` is shown as ``\\n``, in ``-f``
too (a ``\\r`` that ends one read is held until the next shows whether a ``\\n`` follows). A
lone ``\\r`` — a progress bar redrawing its line — is kept. The stored ``output.log`` is never
changed, and ``--raw`` shows it byte for byte. The rule is the same for every generation, live
or not: a headless worker that wrote CRLF itself is shown with LF too (``--raw`` has it).

**Following** waits on file events (``watch.follow``: an inotify watch on the generation
directory; where none can be had, a look every ``POLL_INTERVAL``, said once) and stops once
the attempt's exit is committed and everything written has been printed (exit 0) — which the
wrapper writes with or without a supervisor: a supervisor that dies ends nothing while the
generation's wrapper lives. When the supervisor is gone and so is the wrapper, without an
exit, ``logs -f`` says the run is interrupted and exits 1 (``_AttemptEnd``). Following a task
that is still pending first waits for it to start (the run's snapshots change when it does);
the run interrupted meanwhile is exit 1 too. Ctrl-C ends the waiting quietly.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from zellij_swarm import exc, pid_end, quoting, streams
from zellij_swarm.commands import status as views
from zellij_swarm.config import state_dir
from zellij_swarm.records import generation_files, rundir
from zellij_swarm.records.generation_files import GenPaths
from zellij_swarm.records.rundir import RunPaths
from zellij_swarm.records.states import RunState
from zellij_swarm.records.task import GENERATED_NAME, command_text
from zellij_swarm.watch import Wake, follow
from zellij_swarm.worker import procs

MIN_INTERVAL = 0.05  # seconds between two looks: a worker writing nonstop is read in batches
POLL_INTERVAL = 0.25  # seconds between two looks when the directory cannot be watched


class LineEnds:
    """Writes a log to ``out`` with a terminal's CRLF shown as LF (``raw``: as stored).

    A ``\\r`` at the end of one chunk is held back until the next chunk (or ``end``) shows
    whether it was the first half of a CRLF split across two reads."""

    def __init__(self, out: BinaryIO, *, raw: bool = False) -> None:
        self.out = out
        self.raw = raw
        self.held = b""

    def write(self, chunk: bytes) -> None:
        if self.raw:
            self.out.write(chunk)
            return
        data, self.held = self.held + chunk, b""
        if data.endswith(b"\r"):
            data, self.held = data[:-1], b"\r"
        self.out.write(data.replace(b"\r\n", b"\n"))

    def flush(self) -> None:
        """Show what was written so far (a held ``\r`` stays held)."""
        self.out.flush()

    def end(self) -> None:
        """No more output: a held ``\\r`` was a lone one."""
        if self.held:
            self.out.write(self.held)
            self.held = b""
        self.out.flush()


def _attempt_gen(run: RunPaths, task: dict[str, Any], attempt: int | None) -> tuple[GenPaths | None, bool]:
    """The attempt's generation (None: it never started), and whether it ran in a pane."""
    history = task.get("history") or []
    if attempt is not None:
        for a in history:
            if a["attempt"] == attempt:
                return run.gen(a["slot"], a["generation"]), a.get("pane_id") is not None
        if task["status"] == "running" and attempt == task["attempts"]:
            return run.gen(task["slot"], task["generation"]), task.get("pane_id") is not None
        raise exc.UsageError(f"task {task['name']!r} has no attempt {attempt} (it has {task['attempts']})")
    if task["slot"] is None:
        return None, False
    return run.gen(task["slot"], task["generation"]), task.get("pane_id") is not None


def show(run: RunPaths, key: str, *, attempt: int | None, follow: bool, raw: bool = False,
         out: BinaryIO | None = None, err: BinaryIO | None = None, snap: dict[str, Any] | None = None,
         stream: str = "both") -> int:
    """Print the output of task ``key`` (a name or id) of ``run``: its stdout to ``out`` and
    its stderr to ``err`` (``stream``: one of them only); ``snap``: its status, when the
    caller has just read it. An unknown task is a usage error (exit 2) naming the run and the
    task; so is ``--stderr`` of an attempt that ran in a pane, whose one terminal held both."""
    to_out = out or streams.bytes_out(sys.stdout)
    to_err = err or streams.bytes_out(sys.stderr)
    by_stream = {"stdout": [(LineEnds(to_out, raw=raw), "output")],
                 # then what srun said of a Slurm step (why it never started, how Slurm ended it)
                 "stderr": [(LineEnds(to_err, raw=raw), "stderr"), (LineEnds(to_err, raw=raw), "executor_log")]}
    writers = by_stream["stdout"] + by_stream["stderr"] if stream == "both" else by_stream[stream]
    snap = snap or views.load_status(run)
    task = views.find_task(snap, key)
    gen, in_pane = _attempt_gen(run, task, attempt)
    if gen is None and follow and snap["state"] == "running":
        print(f"zellij-swarm: task {task['name']!r} is pending; waiting for it to start", file=sys.stderr)
        snap, task = _wait_for_start(run, snap, task)
        gen, in_pane = _attempt_gen(run, task, attempt)
        if gen is None and snap["state"] == RunState.INTERRUPTED:
            return _interrupted(run, f"before task {task['name']!r} started")
    if in_pane and stream == "stderr":
        both = quoting.positional_line([quoting.task_word(task["name"], task["id"])])
        raise exc.UsageError(f"task {task['name']!r} ran in a pane, whose one terminal held its stdout and stderr "
                             f"together: `{state_dir.command(run.state_dir, 'logs', run.run_id)} {both}` shows both")
    if gen is None:
        print(f"zellij-swarm: task {task['name']!r} " + ("has not started yet" if task["status"] == "pending" else
              f"ended without starting ({task['status']}{': ' + task['reason'] if task.get('reason') else ''})"),
              file=sys.stderr)
        return 0
    paths = [(writer, getattr(gen, log)) for writer, log in writers]
    offsets = [_copy_from(path, 0, writer) for writer, path in paths]
    end = "over"
    if follow and snap["state"] in (RunState.RUNNING, RunState.INTERRUPTED) and gen.dir.is_dir():
        attempt_ends = _AttemptEnd(run, gen, task["id"])
        for _ in _changes(gen.dir):
            offsets = [_copy_from(path, at, writer) for (writer, path), at in zip(paths, offsets, strict=True)]
            if (end := attempt_ends.look()) != "following":
                for (writer, path), at in zip(paths, offsets, strict=True):
                    _copy_from(path, at, writer)
                break
    for writer, _ in paths:
        writer.end()
    if end == RunState.INTERRUPTED:
        return _interrupted(run, f"and task {task['name']!r}'s attempt ended without recording its exit: its output "
                                 "may stop short")
    return 0


def task_list(run: RunPaths, snap: dict[str, Any], *, width: int | None = None) -> list[str]:
    """The run's line, then its tasks, one line each under a header: name, status, attempts,
    and for a task whose name was generated (``task-3``) its command — the row's ``command``,
    else (a run recorded before rows had it) the one ``run.json`` or the event log holds.
    Every line is safe to print (``terminal_text``), and cut to ``width`` columns if given."""
    tasks: list[dict[str, Any]] = snap["tasks"]
    name = f" ({snap['name']})" if snap.get("name") else ""
    head = f"run {snap['run_id']}{name}: {snap['state']}, {len(tasks)} task{'' if len(tasks) == 1 else 's'}"
    generated = [t for t in tasks if GENERATED_NAME.fullmatch(t["name"])]
    recorded = _commands(run) if any(not t.get("command") for t in generated) else {}
    rows = [(t["name"], t["status"], str(t.get("attempts") or 0),
             (t.get("command") or recorded.get(t["name"], "")) if GENERATED_NAME.fullmatch(t["name"]) else "")
            for t in tasks]
    lines = [head, *views.table(("TASK", "STATUS", "ATTEMPTS", "COMMAND" if generated else ""), rows,
                                           width=width)] if tasks \
        else [head]
    return [views.fit(quoting.terminal_text(line), width) for line in lines]


def _commands(run: RunPaths) -> dict[str, str]:
    """Each task's command as typed (``cmd``, or ``argv`` joined as a shell would read it), by
    name: from ``run.json`` and the tasks added while the run ran (the event log)."""
    return {s.name: command_text(s) for s in views.task_specs_of(run)}


class _AttemptEnd:
    """Whether the attempt followed is over. It is when its exit is committed — the wrapper
    writes it, supervisor or not — or it was folded away (its outcome is in the log, its
    directory gone or left with its output only), or the run's supervisor says the task no
    longer runs this attempt (the run ended, a restart). A supervisor that is gone (the run
    is ``interrupted``) ends nothing: the worker may go on writing, and is followed while the
    generation's wrapper lives; once it is gone too, without an exit, the run is interrupted
    for this attempt."""

    def __init__(self, run: RunPaths, gen: GenPaths, task_id: str) -> None:
        self.run, self.gen, self.task_id = run, gen, task_id
        self.wrapper: tuple[int, int | None] | None = None  # (pid, start ticks), once looked for

    def look(self) -> str:
        """``over``, ``following`` or ``interrupted``."""
        if generation_files.ended_at(self.gen) is not None or not self.gen.dir.is_dir():
            return "over"
        snap = views.load_status(self.run, rows=False)
        if snap["state"] == RunState.INTERRUPTED:
            if self._wrapper_lives():
                return "following"
            # a wrapper that wrote its exit and ended while the status was read is over, not cut off
            return "over" if generation_files.ended_at(self.gen) is not None else "interrupted"
        task = next((t for t in snap["tasks"] if t["id"] == self.task_id), None)
        if snap["state"] != "running" or task is None:
            return "over"
        return "following" if (task["slot"], task["generation"]) == (self.gen.slot, self.gen.gen) else "over"

    def _wrapper_lives(self) -> bool:
        if self.wrapper is None:
            pid = procs.wrapper_process(self.gen)  # one scan of /proc: then its pid is watched
            if pid is None:
                return False
            self.wrapper = (pid, pid_end.start_ticks(pid))
        return not pid_end.ended(*self.wrapper)


def _interrupted(run: RunPaths, what: str) -> int:
    print(f"zellij-swarm: run {run.run_id} is interrupted (its supervisor is gone) {what}; "
          f"`{state_dir.command(run.state_dir, 'resume', run.run_id)}` goes on with it", file=sys.stderr)
    return 1


def _wait_for_start(run: RunPaths, snap: dict[str, Any], task: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The run's status (from ``snap``, ``task`` on) once the task has a generation, has ended
    without one (skipped, cancelled), or the run stopped running (or the user pressed Ctrl-C)."""
    task_id = task["id"]
    for _ in _changes(run.dir):
        snap = views.load_status(run)
        task = views.find_task(snap, task_id)
        if task["slot"] is not None or task["status"] != "pending" or snap["state"] != "running":
            break
    return snap, task


def _changes(path: Path) -> Iterator[None]:
    """Yields once the watch on ``path`` is in place, then on every change of a file in it
    and at least once a second (a supervisor that died changes no file), never twice within
    ``MIN_INTERVAL``. Where ``path`` cannot be watched (no inotify instance or watch to be had)
    it says so once and yields every ``POLL_INTERVAL`` instead. Ctrl-C ends it, quietly: the
    following is over."""
    try:
        try:
            for _ in follow([path], Wake()):
                looked = time.monotonic()
                yield None
                rest = MIN_INTERVAL - (time.monotonic() - looked)
                if rest > 0:
                    time.sleep(rest)
        except OSError as e:
            print(f"zellij-swarm: warning: cannot watch {quoting.terminal_text(str(path))} ({e.strerror}); "
                  f"looking every {POLL_INTERVAL:g}s instead", file=sys.stderr)
            while True:
                yield None
                time.sleep(POLL_INTERVAL)
    except KeyboardInterrupt:
        return


def _copy_from(path: Path, offset: int, out: LineEnds) -> int:
    """Write the log at ``path`` from byte ``offset`` on; returns the offset after it (of the
    file as stored: ``out`` may show fewer bytes)."""
    try:
        with os.fdopen(rundir.open_record(path), "rb") as f:  # never through a planted symlink
            f.seek(offset)
            while chunk := f.read(1 << 16):
                out.write(chunk)
                offset += len(chunk)
    except FileNotFoundError:
        return offset
    out.flush()
    return offset
