"""Resuming an interrupted run (SPEC §8): reading it back from its records (``load``), then
turning them back into the live state of a new supervisor (``restore``).

Reading. A generation's task and attempt are named by its reservation in the event log (a
supervisor writes it before it starts the generation) or by its own wrapper's header (a
pane's, and runs recorded before the log did it); its claim says whether it ran; its exit
sidecar whether it ended. A generation whose outcome the log holds and whose claim is gone
was folded away (``generation_files.fold``): the log's outcome is all there is of it. The
event log adds what only the supervisor knew (outcomes it recorded, kill reasons, consumed
follow-ups and inbox messages, its dispatch counts — replayed by ``metrics``, so that a
resumed run's metrics are the whole run's). A generation is in one of four states:

- ``ended``: its exit is committed (recorded before the crash, or meanwhile);
- ``running``: its wrapper is alive — the same process, checked by pid **and** start time
  and command line, never a recycled pid — and is adopted;
- ``vanished``: it ran but its wrapper is gone without an exit record → ``lost`` — or, while
  something of it runs on, followed to that end, which nobody sees (``Generations.collect``);
- ``unstarted``: nobody claimed it, or a claim names no pid (or the supervisor) and no
  process runs its wrapper
  (a wrapper, or a supervisor taking a claim, killed between creating it and writing its
  owner in); the resuming supervisor takes the claim so that a late pane cannot run it, and
  the task is dispatched again as a new generation.

Restoring: task history, adopted wrappers followed where they run, exits that happened
meanwhile handled as if seen now, the ready queue rebuilt for the rest (tasks running at the
crash known to it, so a retry of theirs requeues), and the dispatch counts replayed from the
event log. What it needs of the supervisor is ``ResumedRun``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, overload

from zellij_swarm import exc
from zellij_swarm.backends.base import LaunchRequest
from zellij_swarm.config import settings, state_dir, swarmfile
from zellij_swarm.config.stream import Problem
from zellij_swarm.engine import metrics, remote, stopping
from zellij_swarm.engine.control import Control
from zellij_swarm.engine.follow import GenerationWatch
from zellij_swarm.engine.generations import Generations, idle_message
from zellij_swarm.engine.live import GenPhase, LiveGen
from zellij_swarm.engine.outcome import killed_status, outcome
from zellij_swarm.engine.policy import RunStop, TaskPolicy
from zellij_swarm.engine.remote import SlurmExecutor
from zellij_swarm.engine.scheduler import ReadyQueue
from zellij_swarm.engine.slots import Slots
from zellij_swarm.engine.stopping import RESTARTED
from zellij_swarm.records import envfile, generation_files, rundir, runlock, snapshot_file
from zellij_swarm.records import log as records
from zellij_swarm.records.generation_files import ExitRecord, GenPaths
from zellij_swarm.records.log import EventLog
from zellij_swarm.records.rows import WarningRow
from zellij_swarm.records.rundir import DamagedRecord, RunPaths, has_record, read_json
from zellij_swarm.records.states import TaskStatus
from zellij_swarm.records.task import TaskRecord
from zellij_swarm.records.task import task_id as id_of_order
from zellij_swarm.records.task import task_order as order_of_id
from zellij_swarm.records.task_table import TaskTable
from zellij_swarm.worker import procs
from zellij_swarm.worker.slurm import Job, Slurm
from zellij_swarm.worker.worktree import Worktrees

START_TOLERANCE = 1.0  # seconds: file mtimes are coarse, process start times are rounded


@dataclass
class GenState:
    gen: GenPaths
    task_id: str
    attempt: int
    state: str  # ended | running | vanished | unstarted
    exit: ExitRecord | None = None
    recorded: dict[str, Any] | None = None  # the worker_completed/failed event, if the old supervisor saw it
    kill_reason: str | None = None
    kill_sent_at: float | None = None  # when that kill reached the worker (the outcome rule)
    kill_caught: bool | None = None  # ... a process with a handler for it (the outcome rule)
    pid: int | None = None
    pane_id: str | None = None
    in_pane: bool = False  # shown in a pane (``pane_generation``)
    followups_consumed: bool = False
    job_id: str | None = None  # a Slurm run's: its step's job, still queued or running
    folded: bool = False  # its directory was folded away: its outcome event is all there is of it
    orphaned: bool = False  # its wrapper was killed while its worker ran on, as its supervisor said


@dataclass
class Recovered:
    meta: dict[str, Any]  # run.json, but its tasks: they are ``specs``
    env: dict[str, str]
    specs: RecordedSpecs
    gens: list[GenState]
    settled: dict[str, tuple[str, str | None]] = field(default_factory=dict)  # task -> (status, reason) without a gen
    # each slot's highest generation number the log reserved — also one withdrawn unstarted and
    # never made: never handed out again, so that a number names one generation only
    numbered: dict[int, int] = field(default_factory=dict)
    consumed_messages: set[str] = field(default_factory=set)
    stats: metrics.DispatchStats = field(default_factory=metrics.DispatchStats)  # replayed from the event log
    pauses: list[tuple[str | None, bool]] = field(default_factory=list)  # (group, paused), in the log's order
    # `retry`: task id -> (attempts it is granted anew, attempts it had made): the tasks to run
    # again, from the retry that started this supervisor or the last one since the run ended
    retry: dict[str, tuple[int, int]] = field(default_factory=dict)
    allocation: str | None = None  # a Slurm run's allocation (--slurm-alloc), as the log names it
    input_problem: Problem | None = None  # the bad record that stopped the reading of its stdin
    # every warning the run said before, in order, with its task's id (None: the run's own):
    # its snapshot lists them still, as it did (they were said once, in the log). An idle
    # timeout's kill put its warning on the task's row only, said from the silence it logged.
    warnings: list[tuple[WarningRow, str | None, float | None]] = field(default_factory=list)


def wrapper_alive(gen: GenPaths, pid: int) -> bool:
    """The wrapper that claimed ``gen`` is still this very process (not a recycled pid)."""
    import psutil  # here: only a resume needs it (worker.procs says why)

    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        created = proc.create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False
    claimed = generation_files.started_at(gen)
    return (claimed is not None and created <= claimed + START_TOLERANCE
            and procs.is_wrapper(gen, pid, procs.cmdline(pid)))


# What a launch and a spawn say, the records a resume reads say too (the generation's own
# files, its outcome event): at 100,000 tasks, skipping them leaves a third of the log unparsed.
UNREAD_EVENTS = frozenset({"worker_launch_invoked", "worker_process_spawned"})


BACKFILL = "backfill"  # an event of which a resume reads only how many there are (``metrics``)
ADDED_EVENTS = frozenset({"task_added"})  # the event-log lines ``task_specs`` reads


class RecordedSpecs(Sequence[swarmfile.TaskSpec]):
    """A run's task specs read back from its records (``task_specs``: each one checked, and
    taken as checked from then on), in id order, each turned into what the run holds of it
    when first asked for: its spec (``[i]``), or, for a task that goes back into the queue
    untouched, its spec packed (``packed``:
    ``swarmfile.pack_record``, some 70 bytes for a line of a lines file, where its record read
    from ``run.json`` takes some 800 and its spec 300). A resumed run of 100,000 tasks makes the
    specs and records of those that ran only, as the run did; the records read are let go of as
    they are turned."""

    def __init__(self, records: list[dict[str, Any]]) -> None:
        self.names: list[str] = [r["name"] for r in records]
        self._held: list[dict[str, Any] | bytes | swarmfile.TaskSpec] = list(records)

    def packed(self, index: int) -> bytes:
        held = self._held[index]
        if isinstance(held, bytes):
            return held
        if isinstance(held, swarmfile.TaskSpec):
            return held.pack()
        packed = self._held[index] = swarmfile.pack_record(held, checked=True)
        return packed

    def _spec(self, index: int) -> swarmfile.TaskSpec:
        held = self._held[index]
        if isinstance(held, swarmfile.TaskSpec):
            return held
        spec = swarmfile.TaskSpec.unpack(held) if isinstance(held, bytes) \
            else swarmfile.TaskSpec.from_record(held, checked=True)
        self._held[index] = spec
        return spec

    @overload
    def __getitem__(self, index: int) -> swarmfile.TaskSpec: ...
    @overload
    def __getitem__(self, index: slice) -> list[swarmfile.TaskSpec]: ...

    def __getitem__(self, index: int | slice) -> swarmfile.TaskSpec | list[swarmfile.TaskSpec]:
        if isinstance(index, slice):
            return [self._spec(i) for i in range(len(self._held))[index]]
        return self._spec(range(len(self._held))[index])  # (a negative index as a list takes it)

    def __len__(self) -> int:
        return len(self._held)


def task_specs(meta: dict[str, Any], events: list[dict[str, Any]]) -> RecordedSpecs:
    """Every task of a run in id order: those of ``run.json``, then those added while it ran
    (``add``, follow-ups), which only the event log records."""
    records_ = list(meta["tasks"]) + [e["spec"] for e in events if e["event"] in ADDED_EVENTS]
    try:
        for record in records_:
            swarmfile.check_record(record)
    except ValueError as e:
        raise DamagedRecord(f"the run's records hold a task that is not one ({e}): it cannot be read back "
                            "whole") from None
    return RecordedSpecs(records_)


def load(run: RunPaths, *, ended: bool = False) -> Recovered:
    """A run's records, for ``resume`` (an interrupted run) or, with ``ended``, for ``retry``
    (a run that finished, or was interrupted). A Slurm run's steps are found in its cluster's
    queue by name — asked with the run's own saved environment (``SLURM_CONF``, ``PATH``), as
    the resumed supervisor asks — and one still queued or running is adopted, never started
    again."""
    holder = runlock.holder(run)
    if holder is not None:
        what = f"retry: `{state_dir.command(run.state_dir, 'restart', run.run_id)} TASK` runs a running task again" \
            if ended else "resume"
        raise exc.RunBusy(f"run {run.run_id} is still supervised by pid {holder}; nothing to {what}")
    meta = read_json(run.run_json)
    if not (isinstance(meta.get("tasks"), list) and isinstance(meta.get("settings"), dict)
            and all(isinstance(t, dict) for t in meta["tasks"])):
        raise DamagedRecord(f"{run.run_json}: damaged record (no list of tasks and settings, which every run "
                            "records); it cannot be resumed")
    if not ended and has_record(run.summary):
        raise exc.RunNotActive(f"run {run.run_id} has finished; nothing to resume "
                               f"(`{state_dir.command(run.state_dir, 'retry', run.run_id)}` runs "
                               "its failures again)")
    for record in (run.events, run.dir / snapshot_file.ROWS_FILE):  # the resumed supervisor appends to both
        rundir.plain_or_absent(record)
    logged = _Logged(run.events)
    stats = metrics.DispatchStats.replay(logged.read())  # one pass over the log, each event taken in
    stats.backfill_count += logged.counted[BACKFILL]  # (counted as read, not parsed: ``_Logged.read``)
    if (behind := _log_behind_its_snapshots(run, logged)) is not None:
        raise DamagedRecord(behind)
    specs = task_specs(meta, logged.added)
    # the tasks' records: ``specs`` lets each go as restore turns it into what the run holds of it
    # (kept in ``meta`` too, they were a resumed 100,000-task run's largest thing: 81 MB)
    meta = {k: v for k, v in meta.items() if k != "tasks"}
    rec = Recovered(meta, envfile.load(run.saved_env), specs, [])
    rec.consumed_messages = logged.consumed
    names = {name: id_of_order(i) for i, name in enumerate(specs.names, 1)}
    rec.allocation = logged.allocation
    rec.warnings = [(w, names.get(w["task"]) if w["task"] is not None else None, silence)
                    for w, silence in logged.warnings]
    rec.input_problem = logged.input_problem
    on_disk = run.generations_on_disk()
    steps: dict[tuple[int, int], Job] = {}
    on_slurm = resolved_settings(meta).executor == "slurm"
    if on_slurm:
        try:
            steps = Slurm(rec.env or None).jobs(str(meta["run_id"]), allocation=rec.allocation)
        except exc.BackendError as unreachable:
            raise exc.UsageError(f"run {run.run_id} runs on Slurm, and Slurm cannot say which of its steps still "
                                 f"run ({unreachable}); nothing was changed") from None
    # every generation on disk or with an outcome, and every one the log reserved: one whose
    # directory is gone had it removed after it was made, and ran (``_inspect``) — not one
    # withdrawn unstarted (its directory stays, and it is on disk)
    for key in sorted(on_disk.keys() | logged.outcomes.keys() | (logged.reserved.keys() - logged.withdrawn)):
        gen = on_disk.get(key) or run.gen(*key)
        logged_exit, recorded = logged.outcomes.get(key, (None, None))
        header = generation_files.read_wrapper_header(gen) if key in on_disk else None
        name, attempt = logged.reserved.get(key, (None, None))
        task_id, attempt = header or (names.get(name) if isinstance(name, str) else None, attempt)
        if not isinstance(task_id, str) or not isinstance(attempt, int) or (
                key not in logged.reserved and key not in logged.outcomes
                and not generation_files.claimed_by_wrapper(gen)):
            # made at its reservation (a pane's wrapper written too), and the supervisor was
            # killed before its log named it, which it does before starting anything: it never
            # ran — unless a wrapper claimed it (the log could not be written; its launch went on)
            rec.gens.append(GenState(gen, "", 0, "unstarted"))
            continue
        if recorded is not None and (key not in on_disk or generation_files.read_claim(gen) is None):
            gs = GenState(gen, task_id, attempt, "ended", exit=logged_exit, recorded=recorded,
                          folded=key not in on_disk)
        else:
            gs = _inspect(gen, task_id, attempt, recorded, steps.get(key), slurm=on_slurm, logged_exit=logged_exit)
        gs.followups_consumed = key in logged.followups
        gs.orphaned = key in logged.orphaned
        rec.gens.append(gs)
    rec.stats = stats
    for slot, gen_no in logged.reserved:
        rec.numbered[slot] = max(rec.numbered.get(slot, 0), gen_no)
    rec.pauses = logged.pauses
    rec.retry = logged.retry
    rec.settled = {names[task]: end for task, end in logged.settled.items() if task in names}
    return rec


# the statuses a task reaches only once a generation of it was reserved, which the log says first
_RAN = (TaskStatus.RUNNING, TaskStatus.SUCCEEDED, TaskStatus.FAILED, TaskStatus.TIMED_OUT, TaskStatus.LOST,
        TaskStatus.UNKNOWN)


def _log_behind_its_snapshots(run: RunPaths, logged: _Logged) -> str | None:
    """Why the event log cannot be read back as the run's record (None: it can). A snapshot
    (``state.json``, ``summary.json``) is written after the log that led to it, so the tasks it
    counts as having run are at most those the log names reserved. A log with fewer was removed,
    emptied or cut short by hand: read back, the tasks it lost would look never run — and
    ``retry``, ``resume`` would run again work that was done (a task that succeeded, and
    pushed). *Decision:* such a run is a damaged record; nothing is run."""
    named = len({name for name, _ in logged.reserved.values()})
    for path in (run.state, run.summary):
        try:
            counts = snapshot_file.load(path, rows=False).get("counts")
        except (OSError, DamagedRecord):
            continue
        if not isinstance(counts, dict):
            continue
        ran = sum(n for status, n in counts.items() if status in _RAN and isinstance(n, int))
        if ran > named:
            return (f"{run.events}: the event log names {named} task(s) that ran, the run's {path.name} counts "
                    f"{ran}: it was removed or cut short, and what it lost cannot be told from work never done; "
                    "nothing was run")
    return None


# What ``restore`` reads of a generation's outcome event besides its exit record
_OUTCOME_KEPT = ("status", "reason", "node", "job", "queued_s")


@dataclass
class _Logged:
    """What ``load`` keeps of a run's event log, taken in one event at a time as it is read
    (``read``): held at once, a 100,000-task run's 160,000 events were most of a resume's
    memory (it peaked at 424 MB)."""

    path: Path  # the event log
    added: list[dict[str, Any]] = field(default_factory=list)  # the task_added events
    # (slot, gen) -> its exit record and what restore reads of its outcome event
    outcomes: dict[tuple[int, int], tuple[ExitRecord, dict[str, Any]]] = field(default_factory=dict)
    followups: set[tuple[int, int]] = field(default_factory=set)  # generations whose follow-ups were read
    consumed: set[str] = field(default_factory=set)  # inbox messages taken
    # (slot, gen) -> (task name, attempt), as the slot_reserved events say
    reserved: dict[tuple[Any, Any], tuple[Any, Any]] = field(default_factory=dict)
    newest: dict[str, tuple[int, int]] = field(default_factory=dict)  # task name -> its newest reserved generation
    # generations whose wrapper was killed while their worker ran on (a ``wrapper_lost``
    # warning, said of the task's newest generation): an end found later is the worker's
    orphaned: set[tuple[int, int]] = field(default_factory=set)
    withdrawn: set[tuple[int, int]] = field(default_factory=set)  # generations requeued unstarted (task_requeued)
    allocation: str | None = None  # the last executor_allocated's job
    input_problem: Problem | None = None  # what input_ended says stopped the reading
    pauses: list[tuple[str | None, bool]] = field(default_factory=list)
    retry: dict[str, tuple[int, int]] = field(default_factory=dict)  # the retry under way: the last since the run ended
    settled: dict[str, tuple[str, str | None]] = field(default_factory=dict)  # task name -> cancelled/skipped, reason
    # every warning said, in order, and an idle timeout's kill, with its silence: its message
    # needs its task's limit, not known here yet (``Recovered.warnings``)
    warnings: list[tuple[WarningRow, float | None]] = field(default_factory=list)
    counted: dict[str, int] = field(default_factory=lambda: {BACKFILL: 0})  # events counted, not read

    def read(self) -> Iterator[dict[str, Any]]:
        """The log's events, each taken in (``take``) as it is passed on. A line that parses
        but is not of the shape the supervisor writes (edited, damaged in place) is garbage,
        left out as a line that does not parse is — but for a task added (``take``). The
        ``backfill`` events, of which nothing is read but their number, are only counted
        (``counted``)."""
        for e in records.iter_events(self.path, skip=UNREAD_EVENTS, tally=self.counted):
            try:
                self.take(e)
            except DamagedRecord:
                raise
            except (KeyError, TypeError, ValueError, IndexError):
                continue
            yield e

    def take(self, e: dict[str, Any]) -> None:
        name = e.get("event")
        if not isinstance(name, str):
            raise TypeError(name)
        if name in generation_files.OUTCOME_EVENTS:
            TaskStatus(e["status"])  # what restore reads: a ValueError unless it is one
            if not all(e.get(k) is None or isinstance(e[k], str) for k in ("reason", "signal", "node", "job")):
                raise TypeError(e)
            if e.get("queued_s") is not None and (isinstance(e["queued_s"], bool)
                                                  or not isinstance(e["queued_s"], int | float)):
                raise TypeError(e)
            self.outcomes[_slot_gen(e)] = (_logged_exit(e), {k: e[k] for k in _OUTCOME_KEPT if k in e})
        elif name == "slot_reserved":
            key = _slot_gen(e)
            self.reserved[key] = (e.get("task"), e.get("attempt"))
            if isinstance(e.get("task"), str):
                self.newest[e["task"]] = key
            self.withdrawn.discard(key)  # (a number a resume gave again, before numbers were kept)
        elif name == "task_requeued":
            self.withdrawn.add(_slot_gen(e))
        elif name == "task_added":
            # left out, every task added after it would take its id: the record is damaged
            if not isinstance(e.get("spec"), dict):
                raise DamagedRecord(f"{self.path}: a task_added event without its task; the run cannot be read "
                                    "back whole")
            self.added.append(e)
        elif name == "followups_consumed":
            self.followups.add(_slot_gen(e))
        elif name == "inbox_consumed":
            self.consumed.add(_text(e["id"]))
        elif name == "executor_allocated":
            self.allocation = str(e["job"])
        elif name == "input_ended" and e.get("problem") is not None:
            self.input_problem = Problem(_text(e["problem"]), _count(e.get("tasks")))
        elif name in ("paused", "unpaused"):
            group = e.get("group")
            self.pauses.append((None if group is None else _text(group), name == "paused"))
        elif name == "run_finished":
            # (a run that ended has said what its input left unread: a retry's is its own end;
            # its pauses held its dispatch while it ran — a retry, an explicit request, runs)
            self.retry, self.input_problem, self.pauses = {}, None, []
        elif name == "run_retried" and isinstance(e.get("tasks"), dict):
            self.retry = {_text(tid): (int(v[0]), int(v[1])) for tid, v in e["tasks"].items()}
        elif name == "warning":
            task = e.get("task")
            self.warnings.append(({"code": _text(e["code"]), "message": _text(e["message"]),
                                   "task": None if task is None else _text(task)}, None))
            if e["code"] == "wrapper_lost" and isinstance(task, str) and task in self.newest:
                self.orphaned.add(self.newest[task])
        elif name == "idle_timeout" and e.get("policy") != "warn":  # (under warn: a warning event follows)
            self.warnings.append(({"code": "idle_timeout", "message": "", "task": _text(e["task"])},
                                  float(e["silence_s"])))
        elif name in ("task_cancelled", "task_skipped") and isinstance(task := e.get("task"), str):
            reason = e.get("reason")
            self.settled[task] = ("cancelled" if name == "task_cancelled" else "skipped",
                                  None if reason is None else _text(reason))


def _slot_gen(e: dict[str, Any]) -> tuple[int, int]:
    """An event's generation, (slot, gen): a TypeError unless both are whole numbers."""
    slot, gen = e["slot"], e["gen"]
    if type(slot) is not int or type(gen) is not int:
        raise TypeError((slot, gen))
    return slot, gen


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(value)
    return value


def _count(value: object) -> int:
    if type(value) is not int or value < 0:
        raise TypeError(value)
    return value


def _logged_exit(outcome: dict[str, Any]) -> ExitRecord:
    """A folded generation's exit record, from its outcome event (which carries it)."""
    return ExitRecord.from_json({"code": outcome.get("code"), "signal": outcome.get("signal"),
                                 "started_at": outcome.get("started_at"), "ended_at": outcome.get("ended_at"),
                                 "pid": outcome.get("pid")}) or ExitRecord(None, None, None, None, None)


def _inspect(gen: GenPaths, task_id: str, attempt: int, recorded: dict[str, Any] | None,
             step: Job | None = None, *, slurm: bool = False, logged_exit: ExitRecord | None = None) -> GenState:
    """What a generation's files say of it now. One whose end the log holds (``recorded``,
    ``logged_exit``) and whose files hold none — a pane's withdrawn before its wrapper came,
    under the supervisor's claim; one whose wrapper vanished — ended as the log says: its end
    is never recorded anew (*Decision*: a ``retry`` wrote an ``exit.json`` for it, its start
    the claim's time and its end the retry's: seconds of work that never was)."""
    gs = GenState(gen, task_id, attempt, "unstarted", recorded=recorded)
    gs.kill_reason = generation_files.kill_reason(gen)
    gs.kill_sent_at = generation_files.kill_sent_at(gen)
    gs.kill_caught = generation_files.kill_caught(gen)
    launch = generation_files.heartbeat_started(gen)
    if launch:
        gs.pane_id = launch["pane_id"]
    gs.in_pane = pane_generation(gen, launch)
    gs.exit = generation_files.exit_facts(gen)
    claim = generation_files.read_claim(gen)
    gs.pid = claim.pid if claim is not None else None
    found = None  # a process found running the wrapper now, by its command line
    # No claim, yet its wrapper began (its start, written after its claim, is there), or its
    # whole directory is gone, which dispatch made before the log named it: the claim, or the
    # directory, was removed — by its worker (``rm -rf``, ``git clean``), or by a fold whose
    # outcome the log lost. It ran: never unstarted, never taken over and run again.
    # An empty claim with that start is the same (its pid is written before the start): the
    # claim was emptied — taken for one whose wrapper died before writing it, the task ran
    # again beside its first worker (an adversary, 2 in 2).
    removed = gs.exit is None and (claim is None or claim.unwritten) and not slurm and (
        launch is not None or not gen.dir.is_dir())
    if removed:
        gs.pid = found = procs.wrapper_process(gen)
        if found is None and launch is not None:
            gs.pid = launch["pid"]
    if not removed and gs.exit is None and claim is not None and (claim.unwritten or claim.by_supervisor):
        # created, its pid not written yet: its wrapper writes it now, or died before it ran
        # anything — then no process runs the wrapper, and the generation stays unstarted.
        # Taken by the supervisor, it may have been handed to a wrapper started ``claimed``,
        # which runs without looking and restamps it with its pid as it starts: one whose
        # supervisor and launcher were killed before that runs under the supervisor's claim.
        # Such a wrapper started after the claim, by as long as the launcher took: not the
        # claim's own pid, whose process must have started with it (``wrapper_alive``).
        gs.pid = found = procs.wrapper_process(gen)
    if gs.exit is not None:
        gs.state = "ended"
    elif step is not None and step.active:
        # a Slurm step, queued or running (its wrapper's pid is on its node, not here)
        gs.state, gs.pid, gs.job_id = "running", None, step.id
    elif slurm and gs.pid is not None and procs.wrapper_process(gen) is not None:
        # a Slurm step its wrapper claimed, which Slurm does not list (a restarted controller
        # forgets its newest jobs) while its srun still runs here: followed, never run again
        gs.state, gs.pid = "running", None
    elif removed:
        gs.state = "running" if found is not None else "vanished"  # (its end: ``records_removed``)
    elif gs.pid is not None:
        gs.state = "running" if gs.pid == found or wrapper_alive(gen, gs.pid) else "vanished"
        # a wrapper that exits between the two checks has committed its record by now
        if gs.state == "vanished" and (late := generation_files.exit_facts(gen)) is not None:
            gs.exit, gs.state = late, "ended"
    if gs.exit is None and logged_exit is not None and gs.state != "running":
        gs.exit, gs.state = logged_exit, "ended"
    return gs


def pane_generation(gen: GenPaths, launch: dict[str, Any] | None) -> bool:
    """A generation handed to a pane: its launch heartbeat names the pane — or, none written
    (its pane's session went as it started, and nothing of it began), it has a wrapper of its
    own, which only a pane's generation is given. Taken for a headless one, it was ``lost
    (no_exit_record)`` and never run, where the session's loss runs it again headless, no
    attempt spent. (A pane's generation run headless instead names no pane as it starts.)"""
    if launch is not None:
        return launch["pane_id"] is not None
    return gen.wrapper.is_file()


def resolved_settings(meta: dict[str, Any]) -> settings.Resolved:
    return settings.Resolved.from_record(meta["settings"])


class ResumedRun(Protocol):
    run_id: str
    stats: metrics.DispatchStats  # replaced by the one replayed from the records
    worktrees: Worktrees

    @property
    def tasks(self) -> TaskTable: ...
    @property
    def ready(self) -> ReadyQueue: ...
    @property
    def slots(self) -> Slots: ...
    @property
    def live(self) -> dict[int, LiveGen]: ...
    @property
    def events(self) -> EventLog: ...
    @property
    def warnings(self) -> list[WarningRow]: ...
    @property
    def follow(self) -> GenerationWatch: ...
    @property
    def control(self) -> Control: ...
    @property
    def executor(self) -> SlurmExecutor | None: ...

    @property
    def kill_grace(self) -> float: ...

    def wallclock(self) -> float: ...
    def id_named(self, name: str) -> str: ...
    @property
    def policy(self) -> TaskPolicy: ...
    @property
    def stop(self) -> RunStop: ...
    @property
    def gens(self) -> Generations: ...


def restore(run: ResumedRun, rec: Recovered) -> None:
    """Rebuild every task from the records of an interrupted run (read by ``load``):
    record exits that happened meanwhile, adopt live wrappers, queue the rest."""
    touched = _touched(run, rec)
    for i, name in enumerate(rec.specs.names):  # (in order: a task's order is its id)
        if i + 1 in touched:
            run.tasks.add(rec.specs[i], packed=False)
        else:  # never ran, nothing settled it: it goes back into the queue as it is held
            run.tasks.add_packed(name, rec.specs.packed(i))
    for task in run.tasks.records():  # before any row is frozen: a task's row shows its worktree
        task.worktree = run.worktrees.existing(task.id)
    for warning, task_id, idle_silence in rec.warnings:
        owner = run.tasks[task_id] if task_id is not None and task_id in run.tasks else None
        if idle_silence is None:
            run.warnings.append(warning)
        elif owner is None or owner.idle_timeout is None:
            continue
        else:  # an idle timeout's kill: on its task's row only, as it was said
            warning = {**warning, "message": idle_message(idle_silence, owner.idle_timeout)}
        if owner is not None:
            owner.warn(warning)
    run.events.emit("run_resumed", run_id=run.run_id, pid=os.getpid(), generations=len(rec.gens))
    run.stats = rec.stats  # replayed from that completed log: the metrics are the whole run's
    for slot, gen_no in rec.numbered.items():
        run.slots.seen(slot, gen_no)
    by_task: dict[str, list[GenState]] = {}
    for gs in rec.gens:
        if not gs.task_id and _forget(gs.gen):
            continue  # nothing ever named it: its number is free again
        run.slots.seen(gs.gen.slot, gs.gen.gen)
        # a generation nothing started whose end the log records (a kill took its claim first)
        # was an attempt of its task all the same: replayed below, or a retry would count one less
        if gs.task_id not in run.tasks or (gs.state == "unstarted" and gs.recorded is None):
            with contextlib.suppress(FileNotFoundError, NotADirectoryError):  # it never ran, and now never will
                if procs.claim_for_supervisor(gs.gen) and run.executor is not None:
                    # its srun, the killed supervisor's, may still wait here: for ever, when a
                    # restarted controller forgot its job (Slurm no longer lists it)
                    remote.end_srun(gs.gen)
            if gs.task_id in run.tasks and gs.kill_reason not in (None, RESTARTED):
                # ended before it started (a cancel, a halt): no new generation runs either
                rec.settled.setdefault(gs.task_id, (str(killed_status(gs.kill_reason)), gs.kill_reason))
        else:
            by_task.setdefault(gs.task_id, []).append(gs)
    to_collect: list[LiveGen] = []
    to_adopt: list[LiveGen] = []
    for task_id, gens in by_task.items():
        task = run.tasks[task_id]
        gens.sort(key=lambda g: g.attempt)
        busy = any(g.state == "running" for g in gens)
        for gs in gens:
            task.attempts = max(task.attempts, gs.attempt)
            task.slot, task.generation, task.pane_id = gs.gen.slot, gs.gen.gen, gs.pane_id
            request = LaunchRequest(gs.gen, gs.gen.slot, task.name, pane=gs.in_pane, attempt=gs.attempt,
                                    attempts=task.retries + 1)
            lg = LiveGen(task, gs.gen, request,
                         backfill=gs.gen.gen > 1, pid=gs.pid, pane_id=gs.pane_id, heartbeat_seen=True,
                         phase=GenPhase.STARTED, timeout_armed=True, kill_reason=gs.kill_reason,
                         kill_sent_at=gs.kill_sent_at, kill_caught=gs.kill_caught,
                         remote=run.executor is not None, job_id=gs.job_id,
                         # the allocation its step was given, as the log says: the run may ask for
                         # a new one now, and the end of that one says nothing of this step's
                         allocation=rec.allocation if run.executor is not None else None)
            if gs.kill_reason == stopping.CANCELLED_BY_USER and gs.kill_sent_at is not None:
                # a ``cancel`` of the run while no supervisor ran sent it: the stop its message asks
                # for (applied once this resume reads the inbox) set out to end it
                run.stop.ending.add(gs.gen)
            if gs.state == "running":
                to_adopt.append(lg)
            elif gs.recorded is None and not busy and gs is gens[-1]:
                if gs.orphaned and gs.state == "vanished":
                    # the supervisor saw its wrapper killed and its worker run on: whatever is
                    # left of it is that worker, whose end nobody saw (``wrapper_lost``) — it
                    # may have finished, and pushed
                    lg.move(GenPhase.ORPHANED)
                to_collect.append(lg)  # its last attempt ended unseen: handled as if seen now
            else:
                _replay(run, lg, gs)
        task.restarts = sum(1 for a in task.history if a.reason == RESTARTED)
        task.granted, before = rec.retry.get(task.id, (0, -1))
        if busy or (to_collect and to_collect[-1].task is task):
            task.restore(TaskStatus.RUNNING)
        elif task.attempts == before:  # retried, and no attempt since: it runs again
            task.restore(TaskStatus.PENDING)
        else:
            _status_after(task)
    for task in list(run.tasks.records()):  # (a task still packed is pending, and nothing settled it)
        again = rec.retry.get(task.id, (0, -1))[1] == task.attempts  # a retried task that never ran since
        if task.status == TaskStatus.PENDING and task.id in rec.settled and not again:
            status, reason = rec.settled[task.id]
            task.finish(TaskStatus(status), reason)
        if task.status.terminal:
            run.ready.settled(task.id, task.status == TaskStatus.SUCCEEDED)
    _end_what_is_left_before_reruns(run, by_task)
    for order in range(1, len(run.tasks) + 1):
        held = run.tasks.look(order)
        if isinstance(held, dict):  # still packed: pending
            tid, after, priority, group = id_of_order(order), held.get("after", ()), held.get("priority", 0), \
                held.get("group")
        elif held is None or held.status not in (TaskStatus.RUNNING, TaskStatus.PENDING):
            continue
        elif held.status == TaskStatus.RUNNING:  # adopted or collected below; a retry requeues it
            run.ready.handed_out(held.id, priority=held.spec.priority, order=order, group=held.spec.group)
            continue
        else:
            tid, after, priority, group = held.id, held.spec.after, held.spec.priority, held.spec.group
        if tid not in run.ready:
            for skipped in run.ready.add(tid, after=[run.id_named(d) for d in after], priority=priority, order=order,
                                         group=group):
                run.policy.skip(run.tasks[skipped])
    for lg in to_collect:
        _adopt(run, lg, gone=True)
        run.gens.collect(lg)
    for lg in to_adopt:
        _adopt(run, lg)
    for group, paused in rec.pauses:  # a paused run stays paused (the pauses of one that ended do not last)
        (run.ready.pause if paused else run.ready.unpause)(group)
    run.control.read_inbox()  # what was sent while no supervisor was there (a cancel, an addition)

def _touched(run: ResumedRun, rec: Recovered) -> set[int]:
    """The orders of the tasks ``restore`` needs the records of: those with a generation, one
    settled (cancelled, skipped) or retried, one a warning names — every one in a run that
    makes worktrees: a worktree may be there for a generation the log on disk never named (a
    supervisor killed before it wrote out the line it had emitted)."""
    if run.worktrees.base is not None:
        return set(range(1, len(rec.specs) + 1))
    ids = {gs.task_id for gs in rec.gens} | rec.settled.keys() | rec.retry.keys() | {
        task_id for _, task_id, _ in rec.warnings if task_id is not None}
    return {order for tid in ids if (order := order_of_id(tid)) is not None}


def _end_what_is_left_before_reruns(run: ResumedRun, by_task: dict[str, list[GenState]]) -> None:
    """A task that runs again after a generation that ended before this supervisor (a failure
    retried, a restart) may have left processes of that generation running — the vanished
    supervisor was ending them: they are ended first (TERM, KILL after the grace), before
    anything runs, so that the task never runs twice at once. A Slurm step's are Slurm's."""
    if run.executor is None:
        stopping.end_leftovers(run.run_id, [gens[-1].gen for task_id, gens in by_task.items()
                                            if run.tasks[task_id].status == TaskStatus.PENDING], run.kill_grace)


def _forget(gen: GenPaths) -> bool:
    """Remove what dispatch made for a generation no log line names (see ``load``); False
    when something else is in it after all: it is then held like any unstarted one."""
    return generation_files.discard_unstarted(gen)


def _replay(run: ResumedRun, lg: LiveGen, gs: GenState) -> None:
    """Put a generation that ended before this supervisor into its task's history."""
    # our kill's reason when it reached the worker, or when nothing ever ran (SPEC §5.7)
    ours = gs.kill_reason if gs.kill_sent_at is not None or gs.state == "unstarted" else None
    exit_rec = gs.exit or generation_files.record_missing_exit(lg.gen, reason=ours or "no_exit_record",
                                                               code=None, signal=None, ended_at=run.wallclock())
    if gs.recorded is not None:
        status, reason = TaskStatus(gs.recorded["status"]), gs.recorded.get("reason")
    else:
        # no backend is open yet: a hang-up is read as its pane's, as it was while it ran
        status, reason = outcome(lg, exit_rec, session_alive=True)
    # where a Slurm step ran, as its outcome event says (``Attempt.slurm``)
    slurm: dict[str, Any] | None = {k: gs.recorded[k] for k in ("node", "job", "queued_s") if k in gs.recorded} \
        if gs.recorded else None
    if slurm:
        lg.task.slurm = slurm  # its row's too, as when it was seen to end (`status`: "on n2 · queued 1.2s")
    lg.task.end_generation(status, exit_rec, reason, backfill=lg.backfill, ended_at=run.wallclock(), slurm=slurm)
    run.stop.generation_ended(lg, status, exit_rec)
    if run.executor is not None and slurm and gs.recorded:  # (its job's id was held until then)
        run.executor.step_over(lg.gen, slurm.get("job"), gs.recorded.get("ts", run.wallclock()))
    if run.executor is not None and gs.exit is not None and generation_files.committed_by_wrapper(gs.exit):
        run.executor.step_ended(lg.gen)  # ended while no supervisor ran: a job of it Slurm keeps is cancelled
    if not gs.followups_consumed and not gs.folded:  # a folded generation has no artifacts left to read
        run.control.followups(lg)

def _status_after(task: TaskRecord) -> None:
    """A restored task with only finished attempts: retry it, or end it as its last attempt."""
    last = task.history[-1]
    again = last.reason == RESTARTED or task.last_end_is_free or (last.status.retryable and task.attempts_left)
    if again and last.status != TaskStatus.SUCCEEDED:
        task.restore(TaskStatus.PENDING)
    else:
        task.restore(last.status, last.reason)

def _adopt(run: ResumedRun, lg: LiveGen, *, gone: bool = False) -> None:
    """Follow a wrapper that outlived its supervisor: file events on its directory for the
    exit, a pidfd on its pid to notice it vanishing, and what is left of its time limits.
    ``gone``: its wrapper is known to have vanished (``restore`` collects it at once): its
    pid, which another process may have now, is neither followed nor signalled."""
    slot = lg.gen.slot
    run.slots.adopt(slot)
    run.live[slot] = lg
    lg.task.restore(TaskStatus.RUNNING)
    run.events.emit("worker_adopted", task=lg.task.name, slot=slot, gen=lg.gen.gen, pid=lg.pid)
    run.follow.watch(lg)
    started = generation_files.started_at(lg.gen)
    run.gens.arm_limits(lg, elapsed=run.wallclock() - started if started is not None else 0.0)
    run.follow.changed(lg)  # it may have ended between the records' reading and now
    if lg.collected:
        return
    if run.executor is not None:
        given = lg.allocation
        run.executor.launched(lg)  # a Slurm step: followed in Slurm's queue and by its files
        lg.submitted_at = None  # handed to srun before this supervisor: how long it queued is not known
        lg.allocation = given  # ... in the allocation it was given then, not the one this run has (or asks for)
    elif gone:
        return
    elif lg.pid is None:
        run.gens.collect(lg)
    else:
        run.follow.follow_pid(lg)  # collected at once if already gone
    run.gens.kill_pending(lg)  # the old supervisor had begun ending it
