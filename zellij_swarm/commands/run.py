"""Running one swarm end to end: pick the backend, supervise, report. Shared by the CLI and
the Python API so both behave the same."""

from __future__ import annotations

import functools
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import IO, Any

from zellij_swarm import exc, streams
from zellij_swarm.backends import leftovers, resumed, zellij_cli
from zellij_swarm.backends.base import Backend, LaunchRequest, RunPane
from zellij_swarm.backends.headless import HeadlessBackend
from zellij_swarm.backends.select import Choice, choose
from zellij_swarm.backends.zellij_cli import CALL_TIMEOUT, Zellij
from zellij_swarm.commands import junit
from zellij_swarm.commands import status as views
from zellij_swarm.config import settings, state_dir, swarmfile
from zellij_swarm.config import slurm as slurm_config
from zellij_swarm.config.settings import Resolved
from zellij_swarm.config.stream import InputStream
from zellij_swarm.engine import remote
from zellij_swarm.engine.resume import Recovered, load, resolved_settings
from zellij_swarm.engine.stopping import RESTARTED
from zellij_swarm.engine.supervisor import RunPlan, Supervisor, ensure_open_files, new_run_id
from zellij_swarm.records import log as records
from zellij_swarm.records import rundir, runlock, snapshot_file
from zellij_swarm.records.joblog import JobLog
from zellij_swarm.records.outputs import Outputs, require_apart, require_names, require_outside_records
from zellij_swarm.records.rundir import DamagedRecord, RunPaths
from zellij_swarm.records.states import UNSUCCESSFUL_STATUSES, RunState, TaskStatus, all_succeeded
from zellij_swarm.records.task import task_id, task_order
from zellij_swarm.render.console import ConsoleReporter
from zellij_swarm.worker import slurm_nodes, worktree
from zellij_swarm.worker.slurm import Slurm


@dataclass(frozen=True)
class Outcome:
    """A finished run (also the Python API's ``SwarmResult``)."""

    exit_code: int
    run_id: str
    run_dir: Path
    snapshot: dict[str, Any]  # the last one built: the running rows, and how much of tasks.jsonl holds the rest

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    @cached_property
    def summary(self) -> dict[str, Any]:
        """The run's summary with every task row, read back when asked for (``--json``,
        ``--junit``, the API): a run of 100,000 tasks does not hold them all to its end."""
        return snapshot_file.merge(self.snapshot, self.run_dir)


def execute(
    specs: list[swarmfile.TaskSpec],
    resolved: Resolved,
    *,
    name: str | None,
    source: str,
    env: Mapping[str, str],
    json_output: bool = False,
    junit_path: str | None = None,
    joblog_path: str | None = None,
    close_session: bool = False,
    here: bool = False,
    attach: bool = False,
    groups: Mapping[str, int] | None = None,
    stream: InputStream | None = None,
    handle_signals: bool = True,
    on_started: Callable[[RunPaths], None] | None = None,
    run_id: str | None = None,
    slurm_job: str | None = None,
) -> Outcome:
    """Run ``specs`` (and, with ``stream``, the tasks still to come from it) as a new run
    (``run_id``: under the id ``submit`` gave it when it submitted the batch job, else a new one;
    ``slurm_job``: that batch job, whose allocation its steps run in).
    ``handle_signals=False`` leaves the process's signal handlers alone (the Python API: a
    host program keeps its own); ``on_started`` is told the run's directory once it exists
    and its control inbox is watched (the API's handles talk to the run through it)."""
    _require_text(resolved, source=source, junit_path=junit_path, joblog_path=joblog_path)
    require_names(junit_path=junit_path, joblog_path=joblog_path)
    require_apart(junit_path, joblog_path)
    if junit_path is not None:
        junit.check_writable(Path(junit_path))
    ensure_open_files(resolved.jobs)
    choice = choose(resolved.backend, env)
    settings.check_session(resolved, choice.name)  # before any run directory exists
    _check_zellij_socket(resolved, choice, env, new_run_id(time.time()))  # (its length: a run id's)
    base = worktree.plan_base(specs, resolved, os.getcwd())  # HEAD now, once; exit 2 outside a repository
    if resolved.executor == "slurm":
        remote.preflight(Slurm(env), resolved.slurm, specs)
        slurm_nodes.preflight(Slurm(env), resolved.slurm, specs,
                              allocation=min(resolved.jobs, len(specs)) if resolved.slurm_alloc else None)
    elif note := slurm_config.ignored({name: resolved.sources[name] for name in settings.BY_NAME if
                                       name.startswith("slurm_") and resolved.sources[name] != "default"},
                                      [spec.name for spec in specs if spec.slurm]):
        print(f"zellij-swarm: warning: {note}", file=sys.stderr)
    # --attach inside the multiplexer moves this client to the swarm's window or tab; outside, the
    # session's client takes this terminal (and the run's own output would be drawn over: quiet)
    if attach and choice.name == "headless":  # no session, no panes: nothing takes this terminal
        print(f"zellij-swarm: --attach: the run is headless ({choice.why}), with no panes to show; not attaching",
              file=sys.stderr)
        attach = False
    takes_terminal = attach and not _inside(choice, env)
    if takes_terminal and not (sys.stdin.isatty() and sys.stdout.isatty()):
        print("zellij-swarm: --attach needs a terminal on stdin and stdout; not attaching", file=sys.stderr)
        attach = takes_terminal = False
    # before the joblog and the JUnit report are written: a state directory that cannot take the
    # run (a file, read-only, another user's) is exit 2 with the user's files as they were
    state_dir = Path(os.path.abspath(resolved.state_dir))  # as the supervisor takes it: from here
    rundir.prepare_state_dir(state_dir)
    require_outside_records(state_dir, junit_path=junit_path, joblog_path=joblog_path)
    backend = make_backend(choice, env, close_session=close_session or settings.truthy(env.get("CI")), here=here)
    outputs = Outputs.of_options(junit=junit_path, joblog=joblog_path, close_session=close_session)
    reporter = _reporter(resolved.output, json_output, record=outputs, on_started=on_started)
    if takes_terminal:
        reporter.hold_for_attach()
    reporter.panes = choice.name != "headless"
    # before the run: a bad path is exit 2
    joblog = JobLog.from_option(joblog_path) if joblog_path is not None else None
    plan = RunPlan(tasks=specs, settings=resolved, name=name, source=source, env=dict(env),
                   backend_reason=choice.why, attach=attach, groups=dict(groups or {}), joblog=joblog,
                   worktree_base=base, stream=stream, run_id=run_id, slurm_job=slurm_job)
    return _supervise(Supervisor(plan, backend, reporter, handle_signals=handle_signals),
                      None if junit_path is None else Path(junit_path))


def resume(run: RunPaths, *, output: settings.OutputMode | None, json_output: bool = False,
           handle_signals: bool = True) -> Outcome:
    """Continue an interrupted run. Adopted workers keep running where they are (a pane's
    wrapper is followed in its pane, which lives on as in a live run: ``backends.resumed``);
    new generations run headless. ``handle_signals`` as for ``execute``."""
    rundir.require_trusted_run(run)  # its records say what to run: another user's are refused
    if (reported := _report_of_finished(run)) is not None:
        return reported
    rec = load(run)
    rundir.require_writable_run(run)
    resolved = resolved_settings(rec.meta)
    ensure_open_files(resolved.jobs)
    if output:
        resolved = replace(resolved, output=output, sources={**resolved.sources, "output": "flag --output"})
    reporter = _reporter(resolved.output, json_output, run=run)
    outputs = Outputs.load(run)
    try:
        place = views.load_status(run, rows=False).get("multiplexer")  # where its panes are
    except DamagedRecord as damaged:
        # What is done and what runs is in the event log and the generations' files; only
        # where the panes are is lost with it: they are followed through their files.
        print(f"zellij-swarm: warning: {damaged}; the run is resumed from its event log, its panes (if any) "
              "followed through their files only", file=sys.stderr)
        place = None
    close_session = outputs.close_session or settings.truthy(rec.env.get("CI"))
    backend = resumed.backend_for(place, rec.env, _run_panes(rec, resolved), close_session=close_session)
    plan = RunPlan(tasks=[], settings=resolved, name=rec.meta.get("name"), source=rec.meta.get("source", ""),
                   cwd=rec.meta["cwd"], env=rec.env, argv=list(sys.argv),
                   backend_reason="resumed: its panes followed where they are, new generations headless",
                   resume=rec, run_dir=run.dir, groups=dict(rec.meta.get("groups") or {}),
                   worktree_base=worktree.Base.from_record(rec.meta.get("worktree_base")),
                   joblog=_continued_joblog(outputs))
    if rec.meta.get("streamed") and not _input_ended(run):
        print(f"zellij-swarm: run {run.run_id} was reading its tasks from standard input when it stopped: it goes on "
              f"with the {len(rec.specs)} it read; the rest of that input was never read", file=sys.stderr)
    outcome = _supervise(Supervisor(plan, backend, reporter, handle_signals=handle_signals), outputs.junit)
    if outcome.snapshot["state"] != RunState.INTERRUPTED and close_session:
        _close_session(run.run_id, place, rec.env)
    return outcome


def _report_of_finished(run: RunPaths) -> Outcome | None:
    """A finished run whose supervisor was ended after it recorded the end (``summary.json``)
    and before it wrote the JUnit report: the report still says that the run did not finish,
    and to resume it. The report is written from the run's summary — all that is left to do —
    and the outcome is the run's own. None for any other run (``load`` says what it is)."""
    if not rundir.has_record(run.summary) or runlock.holder(run) is not None:
        return None
    report = Outputs.load(run).junit
    if report is None or not junit.left_unfinished(report, run.run_id):
        return None
    summary = rundir.read_json(run.summary)
    if problem := junit.write(report, run, summary):
        print(f"zellij-swarm: warning: {problem}", file=sys.stderr)
    else:
        print(f"zellij-swarm: run {run.run_id} had finished; wrote its JUnit report {report}, which its supervisor, "
              "ended before it, had left unwritten", file=sys.stderr)
    return Outcome(_finished_code(run, summary), run.run_id, run.dir, summary)


def _finished_code(run: RunPaths, summary: dict[str, Any]) -> int:
    """What the run exited with (its ``run_finished`` event); a supervisor killed before it
    logged that, just after the summary: the summary's — 0 when every task succeeded."""
    for event in reversed(records.last_events(run.events)):
        if event.get("event") == "run_finished" and isinstance(event.get("exit_code"), int):
            return int(event["exit_code"])
    counts = summary.get("counts")
    return 0 if isinstance(counts, dict) and all_succeeded(counts) else 1


def _run_panes(rec: Recovered, resolved: Resolved) -> list[RunPane]:
    """The panes the run's generations ran in (their launch heartbeats name them), in the order
    they ended: those whose end was recorded first, by its time, then the others."""
    panes = []
    for gs in rec.gens:
        order = task_order(gs.task_id)
        if gs.pane_id is None or order is None or order > len(rec.specs):
            continue
        spec = rec.specs[order - 1]
        retries = spec.retries if spec.retries is not None else resolved.retries
        req = LaunchRequest(gs.gen, gs.gen.slot, spec.name, pane=True, attempt=gs.attempt, attempts=retries + 1)
        status = gs.recorded.get("status") if gs.recorded is not None else None
        status = status if isinstance(status, str) else None
        ended = gs.exit.ended_at if gs.exit is not None else None
        panes.append((status is None, ended or 0.0, RunPane(req, gs.pane_id, status)))
    return [pane for *_, pane in sorted(panes, key=lambda p: p[:2])]


def _input_ended(run: RunPaths) -> bool:
    """Whether a run that read its tasks from stdin saw that input end (SPEC §4.6)."""
    return any(True for _ in records.iter_events(run.events, only=frozenset({"input_ended"})))


def _close_session(run_id: str, place: Any, env: Mapping[str, str]) -> None:
    """``--close-session`` (or ``CI``) at the end of a resumed run: what the run left in its
    multiplexer and its backend did not close (its place found gone, a window the snapshot did
    not record yet) goes, found as ``prune`` finds it — its ``swarm-<run-id>`` session,
    windows and tabs, and the session it created under a name."""
    named = []
    if isinstance(place, dict) and place.get("created_session") is True and isinstance(place.get("session"), str):
        session_id = place.get("session_id")
        named.append(leftovers.NamedSession(run_id, str(place.get("backend")), place["session"],
                                            session_id if isinstance(session_id, str) else None))
    for left in leftovers.find(env, [run_id], named).leftovers:
        if left.remove is not None:
            left.remove()


def retry(run: RunPaths, names: list[str], *, flags: Mapping[str, object], env: Mapping[str, str],
          json_output: bool = False, unknown: bool = False) -> Outcome:
    """Run again, in the same run record, the tasks of an ended run that did not succeed (and
    those skipped because of them), or the named ones: new attempts, their history kept,
    their retries given anew, under the run's recorded settings (``flags`` given here win).
    A task whose outcome is ``unknown`` runs again only when named, or with ``unknown``: it
    may have finished; the caller is told in one line which were left out."""
    rundir.require_trusted_run(run)
    if runlock.holder(run) is not None:
        raise exc.UsageError(f"run {run.run_id} is running: `{state_dir.command(run.state_dir, 'restart', run.run_id)} "
                             "TASK` runs a running "
                             "task again")
    rundir.require_writable_run(run)
    rec = load(run, ended=True)
    snap = views.load_status(run)
    counted = sum(n for n in (snap.get("counts") or {}).values() if isinstance(n, int))
    if len(snap["tasks"]) < counted:  # what retry chooses from: a task with no row would look fine
        raise DamagedRecord(f"run {run.run_id}: its rows file ({snapshot_file.ROWS_FILE}) is damaged: "
                            f"{counted - len(snap['tasks'])} of its {counted} tasks have no row that can be read, "
                            "and which of them did not succeed cannot be told; nothing was run")
    rec.retry = retry_selection(snap, rec.specs, names, run.run_id, unknown=unknown, where=run.state_dir)
    left_out = sorted(t["name"] for t in snap["tasks"]
                      if t["status"] == TaskStatus.UNKNOWN and t["id"] not in rec.retry)
    if left_out:
        print(f"zellij-swarm: not run again, as they may have finished (outcome unknown): {', '.join(left_out)}; "
              f"name them, or add --unknown", file=sys.stderr)
    resolved = _overridden(resolved_settings(rec.meta), flags)
    _check_retry_settings(run, rec, resolved, env)
    ensure_open_files(resolved.jobs)
    outputs = Outputs.load(run)
    choice = choose(resolved.backend, env)
    settings.check_session(resolved, choice.name)  # as run's (retry --session 'a:b' made a session 'a_b')
    _check_zellij_socket(resolved, choice, env, run.run_id)
    backend = make_backend(choice, env, close_session=outputs.close_session or settings.truthy(env.get("CI")))
    if isinstance(backend, resumed.TakesOver):  # what the run's earlier supervisors left there is taken over
        backend = resumed.RetriedBackend(backend, snap.get("multiplexer"), _run_panes(rec, resolved))
    plan = RunPlan(tasks=[], settings=resolved, name=rec.meta.get("name"), source=rec.meta.get("source", ""),
                   cwd=rec.meta["cwd"], env=rec.env, argv=list(sys.argv), backend_reason=choice.why, resume=rec,
                   run_dir=run.dir, groups=dict(rec.meta.get("groups") or {}), retrying=True,
                   worktree_base=worktree.Base.from_record(rec.meta.get("worktree_base")),
                   joblog=_continued_joblog(outputs))
    reporter = _reporter(resolved.output, json_output, run=run)
    reporter.panes = choice.name != "headless"
    return _supervise(Supervisor(plan, backend, reporter), outputs.junit)


def _supervise(sup: Supervisor, report: Path | None) -> Outcome:
    """Run ``sup`` to its end and complete the run's outputs: until then its JUnit report says
    that it has not finished (a stale one, green perhaps, never passes for this run's); a
    supervisor that detaches leaves it so, for ``resume`` to write."""
    if report is not None and (problem := junit.mark_unfinished(report, sup.paths)):
        print(f"zellij-swarm: warning: {problem}", file=sys.stderr)
    if sup.plan.joblog is not None:
        sup.plan.joblog.run = sup.paths  # its Receive column reads each task's output there
    ended: list[Outcome] = []

    def complete(code: int) -> None:
        """The run's outputs, once its records are final and while it is still its own: an
        ``--attach``'s client may hold the run's end long after (a retry written meanwhile was
        overwritten with this end's report)."""
        if sup.plan.joblog is not None:
            sup.plan.joblog.close()
        outcome = Outcome(code, sup.run_id, sup.paths.dir, sup.final_snapshot)
        if report is not None and outcome.snapshot["state"] != RunState.INTERRUPTED and (
                problem := junit.write(report, sup.paths, outcome.summary)):
            print(f"zellij-swarm: warning: {problem}", file=sys.stderr)
        ended.append(outcome)

    try:
        sup.run(complete=complete)
    finally:
        if sup.plan.joblog is not None:
            sup.plan.joblog.close()
    return ended[0]


def _continued_joblog(outputs: Outputs) -> JobLog | None:
    """The run's joblog, for the supervisor that goes on with the run (``JobLog.continued``);
    none, with a warning, when it cannot be written any more: the run goes on without it."""
    if outputs.joblog is None:
        return None
    try:
        return JobLog.continued(outputs.joblog)
    except exc.UsageError as e:
        print(f"zellij-swarm: warning: {e.message}; the run goes on without it", file=sys.stderr)
        return None


# What `retry` runs again by default: every task that ended without succeeding, but a skipped
# one only through the dependency it was skipped for (``retry_selection``), and one whose
# outcome is unknown only when asked: it may have finished (an agent that pushed).
RETRIED = UNSUCCESSFUL_STATUSES - {TaskStatus.SKIPPED, TaskStatus.UNKNOWN}


def _check_retry_settings(run: RunPaths, rec: Recovered, resolved: Resolved, env: Mapping[str, str]) -> None:
    """What ``run`` refuses before anything runs, a retry refuses too (exit 2), its records as
    they were: settings given to it that its tasks cannot run with. *Decision:* they were
    found out by each task's new attempt, which failed (``worktree_failed``,
    ``executor_failed``) and was spent, its output hidden behind that empty attempt."""
    retried = [spec for order, spec in enumerate(rec.specs, 1) if task_id(order) in rec.retry]
    if rec.meta.get("worktree_base") is None and (wants := next(
            (spec for spec in retried if worktree.wanted(spec, resolved.worktree)), None)) is not None:
        raise exc.UsageError(f"run {run.run_id} started with no task in a worktree, so it has no base commit for one: "
                             f"task {wants.name!r} cannot be retried in a worktree (start a new run with --worktree)")
    if resolved.executor == "slurm":
        remote.preflight(Slurm(env), resolved.slurm, retried)
        slurm_nodes.preflight(Slurm(env), resolved.slurm, retried,
                              allocation=min(resolved.jobs, len(retried)) if resolved.slurm_alloc else None)


def retry_selection(snap: Mapping[str, Any], specs: Sequence[swarmfile.TaskSpec], names: list[str],
                    run_id: str, *, unknown: bool = False,
                    where: Path | None = None) -> dict[str, tuple[int, int]]:
    """The tasks a ``retry`` runs again — the named ones, else every one that ended without
    succeeding (``RETRIED``) — with the tasks skipped because of them, transitively; each as
    ``id: (attempts granted anew, attempts made)``: its retries start again from here, and
    a restart, which used none, is not counted twice. ``where``: the run's state directory,
    for the hint of an error."""
    rows = {t["name"]: t for t in snap["tasks"]}
    exc.UnknownTask.check(run_id, names, rows.keys())
    retried = RETRIED | {TaskStatus.UNKNOWN} if unknown else RETRIED
    chosen = set(names) if names else {n for n, t in rows.items() if t["status"] in retried}
    after = {s.name: set(s.after) for s in specs}
    grew = True
    while grew:  # the dependents skipped because of a chosen task get their chance again
        more = {n for n, t in rows.items() if t["status"] == "skipped" and after.get(n, set()) & chosen} - chosen
        chosen |= more
        grew = bool(more)
    if not chosen:
        unknowns = sum(1 for t in rows.values() if t["status"] == TaskStatus.UNKNOWN)
        unended = sum(1 for t in rows.values() if t["status"] in (TaskStatus.PENDING, TaskStatus.RUNNING))
        if unknowns:
            raise exc.UsageError(f"run {run_id}: {unknowns} task(s) of unknown outcome and no other to retry; add "
                                 "--unknown or name them")
        if unended:  # an interrupted run: its work is not over, and none of it failed
            raise exc.UsageError(f"run {run_id}: no task failed; {unended} have not ended (the run was interrupted): "
                                 f"`{state_dir.command(where, 'resume', run_id)}` goes on with them")
        raise exc.UsageError(f"run {run_id}: every task succeeded; nothing to retry (name tasks to run them again)")
    selection = {}
    for name in chosen:
        t = rows[name]
        restarts = sum(1 for a in t.get("history") or [] if a.get("reason") == RESTARTED)
        selection[t["id"]] = ((t.get("attempts") or 0) - restarts, t.get("attempts") or 0)
    return selection


def _overridden(recorded: Resolved, flags: Mapping[str, object]) -> Resolved:
    """The recorded settings, with those given as flags now instead (checked as ``run``
    checks them)."""
    given = settings.resolve(flags, {})
    # each of its own setting's type, which Resolved checks again
    now: dict[str, Any] = {name: value for name, value in given.values.items()
                           if given.sources[name].startswith("flag")}
    return replace(recorded, **now, sources={**recorded.sources, **{name: given.sources[name] for name in now}})


def _require_text(resolved: Resolved, *, source: str, junit_path: str | None, joblog_path: str | None = None) -> None:
    """Refuse (exit 2), before a run directory exists, a working directory, state directory,
    --junit path or command-line argument that is not UTF-8: ``run.json`` records them as JSON
    text, which cannot hold such bytes. (The environment is saved byte-exact: ``envfile``.)"""
    checks = [("the working directory", os.getcwd()), ("--junit", junit_path or ""), ("--joblog", joblog_path or ""),
              ("swarm file", source)]
    checks += [(f"{n} (from {resolved.sources.get(n, 'default')})", str(v)) for n, v in resolved.values.items()]
    checks += [("command-line argument", a) for a in sys.argv]
    for what, value in checks:
        swarmfile.require_utf8(what, value, "zellij-swarm records it as text; use a UTF-8 name")


def _reporter(output: str | None, json_output: bool, *, run: RunPaths | None = None, record: Outputs | None = None,
              on_started: Callable[[RunPaths], None] | None = None) -> ConsoleReporter:
    """The output mode (default: progress on a terminal, group elsewhere); with --json the
    workers' output goes to stderr so that stdout is one JSON document. ``run``: a run
    that goes on, whose hints name it before it says it started; ``record``: a new run's
    outputs, recorded in its directory as it starts (and ``on_started`` told it)."""
    mode = output or ("progress" if sys.stderr.isatty() else "group")
    out = streams.bytes_out(sys.stderr) if json_output else None
    if record is not None:
        return _RecordingReporter(mode, record, out=out, on_started=on_started)
    return ConsoleReporter(mode, out=out, run_id=run.run_id if run else "", state_dir=run.state_dir if run else None)


class _RecordingReporter(ConsoleReporter):
    """A new run's reporter that records its outputs (``records.outputs``) the moment its
    directory exists — ``started``, before any task runs — so that whoever finishes the run
    completes them."""

    def __init__(self, mode: str, outputs: Outputs, *, out: IO[bytes] | None,
                 on_started: Callable[[RunPaths], None] | None = None) -> None:
        super().__init__(mode, out=out)
        self.outputs = outputs
        self.on_started = on_started

    def started(self, run: RunPaths, total: int) -> None:
        try:
            self.outputs.save(run)
        except OSError as e:
            self.problem(f"warning: cannot record the run's outputs in {run.dir}: {e.strerror}; a resume of this "
                         "run would not complete its JUnit report and joblog")
        super().started(run, total)
        if self.on_started is not None:
            self.on_started(run)


def make_backend(choice: Choice, env: Mapping[str, str], *, close_session: bool, here: bool = False) -> Backend:
    if choice.name == "tmux":
        from zellij_swarm.backends.tmux import TmuxBackend

        return TmuxBackend(env, inside=bool(env.get("TMUX")), close_session=close_session)
    if choice.name == "zellij":
        from zellij_swarm.backends.zellij import ZellijBackend

        return ZellijBackend(env, close_session=close_session, here=here)
    return HeadlessBackend()


def _check_zellij_socket(resolved: Resolved, choice: Choice, env: Mapping[str, str], run_id: str) -> None:
    """Refuse (exit 2) a Zellij session the run would make whose socket's path is too long
    for a socket: Zellij refused it only as the run made it, which then went on headless, or,
    under ``--require-multiplexer``, cancelled every task. The session is the one the backend
    will take (``zellij_cli.run_session``); one that is live has its socket already. A Zellij
    that cannot be asked is the backend's to report, as before."""
    if choice.name != "zellij":
        return
    z = Zellij(env, timeout=CALL_TIMEOUT)
    own = zellij_cli.caller_session(env)

    def taken_if(live: bool) -> str:  # the session the backend takes if every session asked is live, or none
        return zellij_cli.run_session(resolved.session, own, run_id, lambda _name: live)[0]

    candidates = {taken_if(True), taken_if(False)}
    try:
        z.version()
        if all(z.socket_too_long(name) is None for name in candidates):
            return  # whichever it takes fits: which sessions live need not be asked
        sessions = z.sessions()
    except exc.BackendError:
        return
    live = functools.cache(lambda name: z.live_in(sessions, name))
    session, _ = zellij_cli.run_session(resolved.session, own, run_id, live)
    if live(session) or (why := z.socket_too_long(session)) is None:
        return
    if resolved.session:
        raise exc.SettingError("session", resolved.session, resolved.sources["session"],
                               f"a shorter name, or a shorter ZELLIJ_SOCKET_DIR: {why}")
    raise exc.UsageError(f"the run's zellij session cannot be made: {why}; set a shorter ZELLIJ_SOCKET_DIR")


def _inside(choice: Choice, env: Mapping[str, str]) -> bool:
    """Whether this terminal is a client of the multiplexer the run's panes go to."""
    return bool(env.get("TMUX")) if choice.name == "tmux" else choice.name == "zellij" and \
        zellij_cli.caller_session(env) is not None

