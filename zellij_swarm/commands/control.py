"""The CLI's side of a run's control inbox: ``cancel``, ``restart``, ``pause``/``unpause`` and
``add``.

Each sends one message and waits for the supervisor's answer while the supervisor lives; a
message the run never read (it ended first) is taken back, so nothing is half done and no
answer goes missing. A run without a supervisor (``interrupted``) gets the message too: its
``resume`` applies it (and ``cancel`` also ends the recorded workers at once). Each returns
the line to show the user; a refusal is an ``exc`` error (one line, its exit code).
"""

from __future__ import annotations

import errno
import os
import signal
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from zellij_swarm import exc, pid_end, quoting
from zellij_swarm.commands import status as views
from zellij_swarm.config import settings, state_dir, swarmfile
from zellij_swarm.records import inbox, runlock
from zellij_swarm.records.rundir import RunPaths, read_json
from zellij_swarm.records.states import RunState


def ask(run: RunPaths, kind: str, *, timeout: float, **body: Any) -> tuple[dict[str, Any] | None, int | None]:
    """(the supervisor's answer, its pid). None as the answer: it took the message, but did
    not answer within ``timeout``. Raises ``exc.SwarmError`` when the supervisor did not take
    the message — the run ended first, or its supervisor is stopped (``kill -STOP``, Ctrl-Z)
    or too busy to read it within ``timeout`` — which is then withdrawn: nothing was done."""
    pid = runlock.holder(run)
    return _answer(run, _post(run, kind, **body), kind, timeout=timeout), pid


def _post(run: RunPaths, kind: str, **body: Any) -> str:
    """``inbox.send``; a state directory with no room for the message, or read-only, is
    ``exc.StateDirError`` naming it — nothing was sent."""
    try:
        return inbox.send(run, kind, **body)
    except OSError as e:
        if e.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EROFS):
            raise
        raise exc.StateDirError(f"cannot send the {kind} to run {run.run_id}: its state directory {run.state_dir} "
                                f"cannot be written ({e.strerror}); nothing was done") from None


def _answer(run: RunPaths, msg_id: str, kind: str, *, timeout: float) -> dict[str, Any] | None:
    """The answer to the message ``msg_id`` (``ask``)."""
    answer = inbox.await_reply(run, msg_id, timeout=timeout, still_running=lambda: runlock.holder(run) is not None)
    if answer is None and inbox.withdraw(run, msg_id):
        raise exc.SwarmError(_not_taken(run, kind, timeout))
    if answer is None:  # taken while we gave up waiting: look once more for the answer
        answer = inbox.await_reply(run, msg_id, timeout=0, still_running=lambda: False)
    return answer


def _command(run: RunPaths, name: str) -> str:
    """Our command ``name`` on ``run``, as a hint offers it (``state_dir.command``)."""
    return state_dir.command(run.state_dir, name, run.run_id)


def _not_taken(run: RunPaths, kind: str, timeout: float) -> str:
    """Why the supervisor did not take a message: the run ended, or it still holds the run
    and did not read its inbox in time — told apart, for only the second is worth a retry."""
    holder = runlock.holder(run)
    if holder is None:
        return f"run {run.run_id} ended before the {kind} reached it; nothing was done"
    who = f"its supervisor (pid {holder})" if holder > 0 else "its supervisor"
    why = f" — it is stopped: `kill -CONT {holder}` lets it go on" if holder > 0 and pid_end.stopped(holder) else ""
    return f"run {run.run_id}: {who} did not take the {kind} within {timeout:g}s{why}; nothing was done"


def _active(run: RunPaths, verb: str) -> dict[str, Any]:
    snap = views.load_status(run)
    if snap["state"] not in (RunState.RUNNING, RunState.INTERRUPTED):
        raise exc.RunNotActive(f"run {run.run_id} is {snap['state']}: nothing to {verb}")
    return snap


def cancel(run: RunPaths, names: Iterable[str], *, group: str | None = None, tags: Iterable[str] = ()) -> str:
    """Cancel the whole run, or the named tasks, or those of ``group`` / with any of ``tags``."""
    snap = _active(run, "cancel")
    names, tags = list(names), list(tags)
    specs = views.task_specs_of(run, strict=True)
    exc.UnknownTask.check(run.run_id, names, {s.name for s in specs} | {t["id"] for t in snap["tasks"]},
                          suggested=(s.name for s in specs))
    if group is not None or tags:
        names += [n for n in views.chosen_tasks(run, group=group, tags=tags, specs=specs) if n not in names]
    if snap["state"] == RunState.INTERRUPTED:
        msg_id = _post(run, "cancel", tasks=names)  # a resume records it
        try:
            return _cancel_unsupervised(run, snap, set(names))
        except exc.RunBusy:  # a resume took the run meanwhile: its supervisor reads the message, and answers
            return _told(run, "cancel", "cancelled", _answer(run, msg_id, "cancel", timeout=30), runlock.holder(run))
    try:
        return _tell(run, "cancel", "cancelled", tasks=names)
    except exc.StateDirError as e:
        # No message can reach the supervisor; the signal that cancels a whole run can
        # (SPEC §5.8). Some tasks only, no signal says which: refused, nothing done.
        pid = runlock.holder(run)
        if names or pid is None or pid <= 0:
            raise
        os.kill(pid, signal.SIGTERM)
        return (f"zellij-swarm: {str(e).removesuffix('; nothing was done')}: sent its supervisor (pid {pid}) "
                "SIGTERM instead, which cancels the run")


def _tell(run: RunPaths, kind: str, done: str, **body: Any) -> str:
    """Ask the supervisor to ``kind`` some tasks; the line saying which it did (the reply's
    ``done`` list) and, when it could not do them all, why. None done: an error."""
    answer, pid = ask(run, kind, timeout=30, **body)
    return _told(run, kind, done, answer, pid)


def _told(run: RunPaths, kind: str, done: str, answer: dict[str, Any] | None, pid: int | None) -> str:
    """``_tell``'s line, from the supervisor's ``answer``."""
    if answer is None:
        return f"zellij-swarm: {kind} delivered to run {run.run_id} (supervisor pid {pid}), no answer"
    if not answer.get(done):
        raise exc.SwarmError(answer.get("error") or f"run {run.run_id}: nothing {done}")
    what = quoting.terminal_text(", ".join(answer[done]))
    also = f"; {quoting.terminal_text(answer['error'])}" if answer.get("error") else ""
    if kind == "cancel" and answer.get("already_ended") and not answer.get("error"):
        # some were cancelled: those that had ended stay as they ended, and the line says so
        also += f"; already ended, not cancelled: {quoting.terminal_text(', '.join(answer['already_ended']))}"
    if answer.get("still_ending"):  # the supervisor answers before a worker slow to die has died
        also += (f"; still ending: {quoting.terminal_text(', '.join(answer['still_ending']))} "
                 f"(unless it ends on its own first)")
    return f"zellij-swarm: {done} in run {run.run_id}: {what} (supervisor pid {pid}){also}"


def restart(run: RunPaths, names: Iterable[str]) -> str:
    """End the named running tasks' generations and run them again at once (a new attempt
    that does not count against their retries)."""
    names = list(names)
    snap = views.load_status(run, rows=False)
    if snap["state"] != RunState.RUNNING:
        hint = f"; `{_command(run, 'resume')}` first" if snap["state"] == RunState.INTERRUPTED else ""
        raise exc.RunNotActive(f"run {run.run_id} is {snap['state']}: nothing to restart{hint}")
    exc.UnknownTask.check(run.run_id, names, {s.name for s in views.task_specs_of(run, strict=True)})
    return _tell(run, "restart", "restarted", tasks=names)


def _cancel_unsupervised(run: RunPaths, snap: dict[str, Any], names: set[str]) -> str:
    """No supervisor: end the workers its records say may run, here, through the supervisor's
    own ladder (``stopping``), each generation's reason recorded first, so that a later
    `resume` records them as cancelled. The grace is the run's own ``kill_grace``. What runs
    is read from the run's records as a resume reads them (``resume.load``), not from its
    last snapshot: a supervisor killed between two snapshots had started generations none
    names, and ended (and folded away) some it calls running. A generation that ended on its
    own after its supervisor went gets the reason too, never sent: its own end stands, and
    its task is not run again (SPEC §5.7)."""
    from zellij_swarm.engine import resume, stopping
    from zellij_swarm.records import generation_files
    from zellij_swarm.records.task import task_id

    resolved = settings.Resolved.from_record(snap.get("settings") or {})  # the table's defaults if older
    records = resume.load(run)
    name_of = {task_id(i): spec.name for i, spec in enumerate(records.specs, 1)}
    chosen, ended_alone, ended_keys = [], [], set()
    for gs in records.gens:
        name = name_of.get(gs.task_id)
        if name is None or (names and name not in names and gs.task_id not in names):
            continue
        if gs.state in ("running", "vanished"):  # a wrapper gone may leave its worker running
            chosen.append(gs.gen)
        elif gs.state == "ended" and gs.recorded is None and not gs.folded:  # ended after its supervisor
            ended_alone.append(name)
            ended_keys |= {name, gs.task_id}  # named either way
        else:
            continue
        generation_files.write_kill_reason(gs.gen, stopping.CANCELLED_BY_USER)  # (none in a directory removed)
    if resolved.executor == "slurm":  # its workers are job steps: Slurm ends them, wherever they run
        from zellij_swarm.engine import remote
        from zellij_swarm.records import envfile
        from zellij_swarm.worker.slurm import Slurm

        try:  # with the run's own environment (its SLURM_CONF), whatever the caller's shell has
            cluster = Slurm(envfile.load(run.saved_env) or None)
            ended = remote.end_steps_now(cluster, run.run_id, chosen, resolved.kill_grace, whole_run=not names)
        except exc.BackendError as e:
            raise exc.SwarmError(f"run {run.run_id} runs on Slurm, which cannot be reached to end its steps: "
                                 f"{e}") from None
        what = "Slurm step(s)"
    else:
        ended = sum(stopping.end_now(run.run_id, gen, resolved.kill_grace) for gen in chosen)
        what = "worker process(es)"
    line = f"zellij-swarm: run {run.run_id} has no supervisor: ended {ended} {what}"
    if chosen or not names or names - ended_keys:  # something is left for resume to cancel
        line += f"; `{_command(run, 'resume')}` records the cancellation"
    if ended_alone:
        line += (f"; ended on their own before the cancel, not cancelled: "
                 f"{quoting.terminal_text(', '.join(ended_alone))} (`{_command(run, 'resume')}` records how)")
    return line


def set_paused(run: RunPaths, group: str | None, *, paused: bool) -> str:
    """Stop (or start again) handing out new tasks of the run, or of one of its groups."""
    verb = "pause" if paused else "unpause"
    snap = _active(run, verb)
    views.check_group(run, group)
    what = f"group {group!r} of run {run.run_id}" if group else f"run {run.run_id}"
    if snap["state"] == RunState.INTERRUPTED:
        _post(run, "pause", group=group, paused=paused)
        return f"zellij-swarm: {what} will be {verb}d when it is resumed"
    answer, pid = ask(run, "pause", timeout=30, group=group, paused=paused)
    if answer is None:
        return f"zellij-swarm: {verb} delivered to {what} (supervisor pid {pid}), no answer"
    if not answer.get("ok"):
        raise exc.SwarmError(answer.get("error") or f"{what} was not {verb}d")
    return f"zellij-swarm: {verb}d {what}" + (": running tasks go on" if paused else "")


def add(run: RunPaths, *, file: str | None = None, tasks: list[dict[str, Any]] | None = None) -> str:
    """Add the tasks of ``file`` (a swarm file or command lines), or ``tasks`` (mappings with
    the ``[[task]]`` keys), to a running swarm."""
    snap = views.load_status(run, rows=False)
    if snap["state"] != RunState.RUNNING:
        raise exc.RunNotActive(f"run {run.run_id} is {snap['state']}: tasks can only be added to a running swarm")
    if file is not None:
        tasks = _tasks_of_file(file, run)
    swarmfile.require_utf8("add:", tasks, "a run records its tasks as text")  # (as ``run`` refuses its arguments)
    answer, _ = ask(run, "add", timeout=15, tasks=tasks)
    if answer is None:
        raise exc.RunNotActive(f"run {run.run_id} did not answer the addition in time")
    if not answer.get("ok"):
        raise exc.UsageError(answer.get("error") or "the supervisor refused the addition")
    return f"zellij-swarm: added to run {run.run_id}: {quoting.terminal_text(', '.join(answer['added']))}"


def _tasks_of_file(path: str, run: RunPaths) -> list[dict[str, Any]]:
    """The ``[[task]]`` mappings of an ``add`` FILE, checked against the run's tasks and groups
    (the supervisor checks them again, against the tasks it has when the message arrives)."""
    groups = read_json(run.run_json).get("groups") or {}
    source = swarmfile.load(path, known={s.name for s in views.task_specs_of(run, strict=True)}, known_groups=groups)
    if source.file_settings or source.groups:
        raise exc.UsageError(f"{path}: [swarm] settings and [group.NAME] tables cannot change a running swarm; "
                             "give only [[task]]s")
    tasks = [{k: v for k, v in t.to_record().items() if v not in (None, [], {})} for t in source.tasks]
    # command lines, and [[task]]s without a name, are named by the supervisor, after the run's tasks
    unnamed = swarmfile.unnamed_tasks(path) if Path(path).suffix == ".toml" else range(len(tasks))
    tasks = [{k: v for k, v in t.items() if k != "name"} if i in unnamed else t for i, t in enumerate(tasks)]
    if not tasks:
        raise exc.UsageError(f"{path}: no tasks to add")
    return tasks
