"""Reading runs back for ``status``, ``ls`` and ``logs``: records only, never live processes
(except asking the run lock whether a supervisor is still alive).

The text views are one line per row whatever a task or run name holds: each line passes
through ``quoting.terminal_text``. ``--json`` and ``logs`` give the exact records."""

from __future__ import annotations

import datetime as _dt
import gc
import json
import os
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from zellij_swarm import exc, pid_end, quoting
from zellij_swarm.config import state_dir
from zellij_swarm.config.swarmfile import TaskSpec
from zellij_swarm.records import generation_files, runlock, snapshot_file
from zellij_swarm.records.rows import TaskRow
from zellij_swarm.records.rundir import DamagedRecord, RunPaths, all_runs, has_record, read_json, runs_without_record
from zellij_swarm.records.states import ACTIVE_SLOT_STATES, FAILED_STATUSES, RunState, TaskStatus
from zellij_swarm.records.task import packed_spec_fields
from zellij_swarm.render import text
from zellij_swarm.render.console import counts_text, describe


def load_status(run: RunPaths, *, rows: bool = True) -> dict[str, Any]:
    """The run's latest snapshot, whole (``snapshot_file.load``: every task row, in plan
    order); a ``running`` run whose supervisor is gone is ``interrupted``. ``rows=False``
    skips the rows file: ``tasks`` then holds only the rows the snapshot itself holds (the
    running ones), for a caller that needs the run's state or counts."""
    snap = load_written(run)
    whole = {k: v for k, v in snap.items() if k != "rows"}
    if rows:
        whole["tasks"] = rows_of(snap, run, None)
    return whole


def load_written(run: RunPaths) -> dict[str, Any]:
    """The run's latest snapshot as written: every row in ``tasks`` (a summary, or a run
    recorded before the rows file), or its own rows (the running ones) and ``rows`` naming
    how much of the rows file stands for the rest (``rows_of`` reads them). The final
    ``state.json`` is the summary without its rows, so a run that ended is read from it; a
    summary newer than it (a kill between the two) is read whole. A ``running`` run whose
    supervisor is gone is ``interrupted``; a running task's duration is taken now."""
    try:
        snap = _latest_snapshot(run)
    except DamagedRecord as damaged:
        snap = _instead_of_damaged(run, damaged)
    if snap["state"] == RunState.RUNNING and runlock.holder(run) is None:
        snap["state"] = RunState.INTERRUPTED
    if snap["state"] in (RunState.RUNNING, RunState.INTERRUPTED):
        _running_durations_now(snap, run, time.time())
    return snap


# What every reader of a snapshot takes as given, and the type it takes it as (SPEC §7.1)
_SNAPSHOT_FIELDS: tuple[tuple[str, type | tuple[type, ...], bool], ...] = (
    ("state", str, True), ("run_id", str, True), ("tasks", list, True), ("counts", dict, True),
    ("slots", list, True), ("settings", dict, False), ("metrics", dict, False), ("warnings", list, False),
    ("rows", dict, False), ("started_at", (int, float), True))


def _latest_snapshot(run: RunPaths) -> dict[str, Any]:
    """``load_written``'s snapshot as the files hold it, of the shape every reader takes as
    given (``_check_shape``)."""
    snap: dict[str, Any]  # a snapshot record: a JSON object (SPEC §7.1)
    try:
        state = read_json(run.state)
    except FileNotFoundError:
        state = None
    if isinstance(state, dict) and isinstance(state.get("rows"), dict) and (not has_record(run.summary) or (
            # an ended run's, while its rows file holds what it stands for (cut short: the summary, whole)
            state.get("ended_at") is not None and _rows_file_holds(run, state["rows"]))):
        snap = state
    else:
        for path in (run.summary, run.state):
            try:
                snap = read_json(path)
                break
            except FileNotFoundError:
                continue
        else:
            snap = _before_any_snapshot(run)  # (a damaged run.json is said first)
            if _started_tasks(run):
                # Its snapshot (a zero-length one: a crash as it was written, or a hand) held
                # its running tasks, which its rows file does not: read as a run before its
                # first snapshot, an interrupted run showed them as never started, and nothing
                # of them to ``logs`` (an adversary). Said instead; ``_instead_of_damaged``
                # reads it so while its supervisor lives, which writes it again.
                raise DamagedRecord(f"{run.state}: missing or empty, though the run started tasks (its event log "
                                    "says so); it cannot be read — `resume` rebuilds it from the event log")
    _check_shape(snap, run)
    return snap


def _started_tasks(run: RunPaths) -> bool:
    """The run's event log names a reservation: it started tasks. (Its first lines: the
    first batch is reserved as the run starts.)"""
    try:
        with open(run.events, "rb") as f:
            return b'"event":"slot_reserved"' in f.read(1 << 20)
    except OSError:
        return False


def _rows_file_holds(run: RunPaths, rows: dict[str, Any]) -> bool:
    """The rows file holds at least what the snapshot says stands for its rows."""
    try:
        return os.stat(run.dir / snapshot_file.ROWS_FILE).st_size >= int(rows.get("bytes") or 0)
    except (OSError, TypeError, ValueError):
        return False


def _before_any_snapshot(run: RunPaths) -> dict[str, Any]:
    """A running run before its first snapshot, from its ``run.json``: every task of its plan
    (and those added since), each as the row its rows file holds so far, else as the event log
    says — running once a generation of it was reserved and has no outcome there yet — else
    pending. The supervisor writes the rows file's pending rows after it has started its first
    batch, a MB at a time: a reader in between saw only the rows written so far — none of
    the running tasks, and no counts."""
    meta = read_json(run.run_json)
    try:
        written = os.stat(run.dir / snapshot_file.ROWS_FILE).st_size
    except FileNotFoundError:
        written = 0
    rows = snapshot_file.merge({"rows": {"file": snapshot_file.ROWS_FILE, "bytes": written}, "tasks": []},
                               run.dir)["tasks"]
    by_id: dict[str, dict[str, Any]] = {row["id"]: row for row in rows
                                        if isinstance(row, dict) and isinstance(row.get("id"), str)}
    planned = [t for t in (meta["tasks"] if isinstance(meta.get("tasks"), list) else ()) if isinstance(t, dict)]
    # (a run whose every planned task has a row that is not pending — a damaged state.json
    # late in a big run — has nothing the event log would change: it is not read)
    settled = all(by_id.get(f"t{n}", {}).get("status") not in (None, "pending") for n in range(1, len(planned) + 1))
    added, reserved = ([], {}) if settled else _since_the_plan(run)
    plan = [*planned, *(t for t in added if isinstance(t, dict))]
    tasks = [by_id.pop(f"t{n}") if f"t{n}" in by_id else _pending_row(spec, f"t{n}") for n, spec in enumerate(plan, 1)]
    tasks += by_id.values()  # (rows of tasks the plan does not name: shown as they are)
    for i, row in enumerate(tasks):
        if row.get("status") == "pending" and (gen := reserved.get(str(row.get("name")))) is not None:
            tasks[i] = {**row, "status": "running", "attempts": gen.get("attempt", row.get("attempts")),
                        "slot": gen.get("slot"), "generation": gen.get("gen")}
    counts = dict.fromkeys((s.value for s in TaskStatus), 0)
    for row in tasks:
        if row.get("status") in counts:
            counts[row["status"]] += 1
    return {"run_id": run.run_id, "name": meta.get("name"), "state": "running", "started_at": meta["started_at"],
            "ended_at": None, "settings": meta.get("settings", {}), "counts": counts, "tasks": tasks, "slots": [],
            "metrics": {}, "warnings": []}


def _pending_row(spec: dict[str, Any], tid: str) -> dict[str, Any]:
    """The row of a planned task that has not run, as the rows file would hold it."""
    name = spec.get("name")
    row: dict[str, Any] = json.loads(snapshot_file.pending_line(name if isinstance(name, str) else tid, tid,
                                                                packed_spec_fields(spec)))
    return row


def _since_the_plan(run: RunPaths) -> tuple[list[Any], dict[str, dict[str, Any]]]:
    """What the event log adds to a run's plan, in one read: the task records added since it
    started (``resume.task_specs``'s), and by name the tasks a generation of which it names
    reserved with no outcome after it, that reservation (slot, gen, attempt)."""
    from zellij_swarm.engine import resume
    from zellij_swarm.records import log as records

    added: list[Any] = []
    reserved: dict[str, dict[str, Any]] = {}
    wanted = frozenset({*resume.ADDED_EVENTS, "slot_reserved", *generation_files.OUTCOME_EVENTS})
    for event in records.iter_events(run.events, only=wanted):
        name = event.get("task")
        if event["event"] in resume.ADDED_EVENTS:
            added.append(event.get("spec"))
        elif not isinstance(name, str):
            continue
        elif event["event"] == "slot_reserved":
            reserved[name] = event
        elif (gen := reserved.get(name)) is not None and (gen.get("slot"), gen.get("gen")) == (
                event.get("slot"), event.get("gen")):
            del reserved[name]
    return added, reserved


def _instead_of_damaged(run: RunPaths, damaged: DamagedRecord) -> dict[str, Any]:
    """The snapshot of a run whose ``state.json`` is damaged (by a hand, a disk), from what
    stands for it: ``summary.json``, the whole record of a run that ended (fsynced); or,
    while the run's supervisor is alive — it writes ``state.json`` again at its next change —
    what the run read before its first snapshot, so that it can be seen and acted on
    (``cancel``) meanwhile. Otherwise the damage is the reader's one-line error: ``resume``
    rebuilds the snapshot from the event log."""
    if has_record(run.summary):
        snap = read_json(run.summary)
    elif runlock.holder(run) is not None:
        snap = _before_any_snapshot(run)
    else:
        raise damaged
    _check_shape(snap, run)
    return snap


def _check_shape(snap: dict[str, Any], run: RunPaths) -> None:
    """A snapshot that parses but is not one (``{}``, a list where the tasks go) is a
    damaged record, said in one line — not a reader's KeyError or TypeError."""
    for field, kind, required in _SNAPSHOT_FIELDS:
        if (field in snap or required) and not isinstance(snap.get(field), kind):
            raise DamagedRecord(f"{run.dir}: damaged snapshot ({field!r} is missing or not a "
                                f"{kind.__name__ if isinstance(kind, type) else 'number'}); it cannot be read")
    if snap["state"] not in set(RunState):
        raise DamagedRecord(f"{run.dir}: damaged snapshot (state {snap['state']!r}); it cannot be read")
    for field in ("tasks", "slots", "warnings"):
        if not all(isinstance(item, dict) for item in snap.get(field) or ()):
            raise DamagedRecord(f"{run.dir}: damaged snapshot ({field!r} holds what is not a record); it cannot "
                                "be read")
    for field, kind in (("name", str), ("jobs", int)):
        if snap.get(field) is not None and not isinstance(snap[field], kind):
            raise DamagedRecord(f"{run.dir}: damaged snapshot ({field!r} is not a {kind.__name__}); it cannot be "
                                "read")


def rows_of(snap: dict[str, Any], run: RunPaths, statuses: frozenset[str] | None) -> list[TaskRow]:
    """The rows of ``snap`` (``load_written``'s) with one of ``statuses`` (None: every row),
    in plan order: only those are read when the rows file's index can be trusted."""
    return snapshot_file.rows_with(snap, run.dir, statuses)


# A run of at most this many tasks shows every one; a bigger one only those that need a look
# (running, failed, timed out, lost, unknown): `status --all` shows every one.
EVERY_TASK_UP_TO = 100
NOTEWORTHY = frozenset({"running", "unknown", *FAILED_STATUSES})


def show_status(run: RunPaths, *, json_output: bool, show_all: bool, group: str | None, tags: Sequence[str],
                waiting: bool, latest: bool, width: int | None) -> str | Iterator[bytes]:
    """What ``status`` prints. Only what it shows is read: the snapshot's own rows for
    ``--waiting``; in a run of more than ``EVERY_TASK_UP_TO`` tasks, the noteworthy rows
    (through the rows file's index), unless ``--all``; ``--json`` every row, copied from the
    rows file as written (SPEC §7.2), in pieces of UTF-8 to be written in turn."""
    collecting = gc.isenabled()
    gc.disable()  # rows and the lines made of them hold no cycles: collecting over 100,000 rows only costs time
    try:
        return _status_of(run, json_output=json_output, show_all=show_all, group=group, tags=tags,
                          waiting=waiting, latest=latest, width=width)
    finally:
        if collecting:
            gc.enable()


def _status_of(run: RunPaths, *, json_output: bool, show_all: bool, group: str | None, tags: Sequence[str],
               waiting: bool, latest: bool, width: int | None) -> str | Iterator[bytes]:
    snap = load_written(run)
    view = {k: v for k, v in snap.items() if k != "rows"}
    if waiting:
        view["tasks"] = waiting_tasks(snap)  # running rows: the snapshot's own
        if not json_output:
            return format_waiting(view, latest, run.state_dir)
    hidden = unreadable = 0
    if group is not None or tags:
        chosen = set(chosen_tasks(run, group=group, tags=tags))
        # more than a screen of them: those that need a look, as for the whole run
        every = waiting or json_output or show_all or len(chosen) <= EVERY_TASK_UP_TO
        rows = view["tasks"] if waiting else rows_of(snap, run, None if every else NOTEWORTHY)
        view["tasks"] = [t for t in rows if t["name"] in chosen]
        hidden = len(chosen) - len(view["tasks"]) if not every else 0
        view["slots"] = [s for s in view["slots"] if s["task"] is None or s["task"] in chosen]
    elif json_output and not waiting:
        return json_document({**view, "slots": visible_slots(view, show_all)}, json_row_lines(snap, run))
    elif not waiting:
        counts = _counts(view)
        total = sum(counts.values())
        every = show_all or total <= EVERY_TASK_UP_TO
        if every or any(counts.get(s) for s in NOTEWORTHY - {"running"}):
            view["tasks"] = rows_of(snap, run, None if every else NOTEWORTHY)
        else:  # none ended badly, the counts say: the running rows are the snapshot's own
            view["tasks"] = [t for t in view["tasks"] if t.get("status") == "running"]
        hidden = max(0, total - len(view["tasks"]))
        if every:  # every row was read: a task counted without one has none that can be read
            unreadable, hidden = hidden, 0
    if json_output:
        return snapshot_json({**view, "slots": visible_slots(view, show_all)})
    return format_status(view, show_all, width, hidden=hidden, unreadable=unreadable, where=run.state_dir)


_ROW = json.JSONEncoder(separators=(",", ":")).encode  # ASCII: any name, a lone surrogate too, is printable


def snapshot_json(snap: dict[str, Any]) -> str:
    """A snapshot as ``--json`` prints it: indented, each task row on a line of its own. The
    indenting encoder is pure Python; rows go through the C one, so 100,000 of them take a
    fraction of a second rather than several."""
    tasks = snap.get("tasks")
    if not isinstance(tasks, list) or not tasks:
        return json.dumps(snap, indent=1)
    head, tail = _around_tasks(snap)
    return head + "\n \"tasks\": [\n" + ",\n".join(f"  {_ROW(row)}" for row in tasks) + "\n ]" + tail


def json_document(snap: dict[str, Any], row_lines: list[bytes]) -> Iterator[bytes]:
    """``snapshot_json`` of ``snap`` with ``row_lines`` (``json_row_lines``) as its rows, in
    pieces to be written one after another: 100,000 rows are never joined into one string."""
    if not row_lines:
        yield json.dumps({**snap, "tasks": []}, indent=1).encode() + b"\n"
        return
    head, tail = _around_tasks(snap)
    yield head.encode() + b'\n "tasks": [\n  '
    yield from _between(row_lines, b",\n  ")
    yield b"\n ]" + tail.encode() + b"\n"


def _around_tasks(snap: dict[str, Any]) -> tuple[str, str]:
    """The indented document of ``snap`` before and after its top-level ``tasks`` (its own
    line: a newline inside a string is escaped)."""
    head, tail = json.dumps({**snap, "tasks": []}, indent=1).split('\n "tasks": []', 1)
    return head, tail


def _between(items: list[bytes], separator: bytes) -> Iterator[bytes]:
    for i, item in enumerate(items):
        if i:
            yield separator
        yield item


def json_row_lines(snap: dict[str, Any], run: RunPaths) -> list[bytes]:
    """Every row of ``snap`` (``load_written``'s) as a line of JSON, in plan order: the rows
    file's lines copied as they are through its index, never parsed (100,000 rows in a
    fraction of a second); without a trusted index, every row read and encoded."""
    lines = snapshot_file.every_row_line(snap, run.dir, _row_bytes)
    return lines if lines is not None else [_row_bytes(row) for row in rows_of(snap, run, None)]


def _row_bytes(row: Mapping[str, object]) -> bytes:
    return _ROW(row).encode()


def _running_durations_now(snap: dict[str, Any], run: RunPaths, now: float) -> None:
    """A task still running has run until now, not until the snapshot was written (which may
    be long ago: snapshots are written on changes): its ``duration_s`` is taken at reading.
    In an interrupted run a "running" task may have ended since its supervisor went: its
    wrapper's committed exit says so (``exited``: the exit ``resume`` will record) and when,
    and its duration stops there instead of growing until someone resumes the run."""
    interrupted = snap["state"] == RunState.INTERRUPTED
    for t in snap["tasks"]:
        if t.get("status") != "running" or t.get("ended_at") is not None:
            continue
        if interrupted:
            _since_the_supervisor_went(run, t)
        if t.get("started_at") is not None:
            until = t["exited"]["ended_at"] if "exited" in t else now
            t["duration_s"] = round(max(0.0, until - t["started_at"]), 3)


def _since_the_supervisor_went(run: RunPaths, t: dict[str, Any]) -> None:
    """What an interrupted run's running row's generation says that its supervisor did not
    write down: when it started (a supervisor killed before it saw the start), and the exit
    it committed (its sidecar). A worker that ended waits for no one: its ``waiting_input``
    is false once its exit is known, and unknown (None) once its wrapper is gone without one
    — the supervisor that would have said so is gone (``wait --for-input`` sent the user to
    a task that had ended). Otherwise what the supervisor last said is weighed as the board
    weighs it (``waiting.with_no_supervisor``: not seen waiting, unknown — an agent sat at
    its prompt, said not needed; seen waiting in a pane, the kernel asked again — a person's
    answer left it "waiting" in every view)."""
    if not isinstance(t.get("slot"), int) or not isinstance(t.get("generation"), int):
        return
    gen = run.gen(t["slot"], t["generation"])
    try:
        started = generation_files.started_at(gen) if t.get("started_at") is None else None
        sidecar, ended = generation_files.read_sidecar(gen), generation_files.ended_at(gen)
        wrapper = generation_files.wrapper_pid(gen)
    except OSError:  # unreadable: nothing to say of it
        return
    if started is not None:
        t["started_at"] = started
    if sidecar is not None and ended is not None:
        code, reason = sidecar
        t["exited"] = {"code": code, "reason": reason, "ended_at": ended[0]}
        t["waiting_input"] = False
    else:
        from zellij_swarm.worker import waiting  # only for a run with no supervisor

        gone = wrapper is not None and pid_end.ended(wrapper, None)
        t["waiting_input"] = waiting.with_no_supervisor(t.get("waiting_input"), in_pane=t.get("pane_id") is not None,
                                                        pid=None if gone else wrapper)


def visible_slots(snap: dict[str, Any], show_all: bool) -> list[dict[str, Any]]:
    """Slots that can still do work; with ``show_all`` also idle and closed ones."""
    return [s for s in snap["slots"] if show_all or s["state"] in ACTIVE_SLOT_STATES]


# What reading a run's records may raise: a damaged or unsafe record (a SwarmError), one that
# cannot be opened (OSError), one of another shape (ValueError, KeyError).
READ_ERRORS = (exc.SwarmError, OSError, ValueError, KeyError)


def statuses(runs: Iterable[RunPaths], unreadable: list[str], *,
             rows: bool = True) -> Iterator[tuple[RunPaths, dict[str, Any]]]:
    """Each of ``runs`` that can be read, with its status (``load_status``); why each other
    one cannot (``unreadable_run``) appended to ``unreadable``: no run is passed over without a
    word."""
    for run in runs:
        try:
            snap = load_status(run, rows=rows)
        except READ_ERRORS as e:
            unreadable.append(unreadable_run(run, e))
            continue
        yield run, snap


def unrecorded_runs(where: Path) -> Iterator[tuple[RunPaths, str, bool]]:
    """The run directories with no run record and no supervisor (one starting has none yet),
    each with why it cannot be read, and whether nothing of it ever ran — its event log is
    empty: a supervisor that went before it recorded its run (a kill as it started), whose
    directory ``prune`` removes. One whose log holds anything lost its record: left as it is."""
    for run in runs_without_record(where):
        if runlock.holder(run) is not None:
            continue
        if has_record(run.events):
            yield run, f"run {run.run_id}: its run record ({run.run_json.name}) is missing; it cannot be read", False
        else:
            yield run, (f"run {run.run_id}: its supervisor went before it recorded the run; nothing of it ran — "
                        f"`{state_dir.command(run.state_dir, 'prune')}` removes it"), True


def ls_rows(state_dir: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """One row per run, newest first: its name, state, start, how many tasks it has in each
    status (``failed`` counts the tasks that failed, timed out or were lost — a cancelled or
    skipped task did not fail) and how many wait for input (the snapshot's running rows say);
    and, for each run whose records cannot be read, why."""
    rows: list[dict[str, Any]] = []
    unreadable: list[str] = []
    for run, snap in statuses(all_runs(state_dir), unreadable, rows=False):  # the counts say it: no rows read
        counts = _counts(snap)
        rows.append({"run_id": run.run_id, "name": snap.get("name"), "state": snap["state"],
                     "started_at": snap["started_at"], "tasks": sum(counts.values()),
                     "failed": sum(v for k, v in counts.items() if k in FAILED_STATUSES), "counts": counts,
                     "waiting": len(waiting_tasks(snap))})
    unreadable += [why for _, why, _ in unrecorded_runs(state_dir)]
    return rows, unreadable


def unreadable_run(run: RunPaths, error: Exception) -> str:
    """Why ``run`` cannot be read, in one line that names it (a record's own error names the
    record and says it cannot be read)."""
    if isinstance(error, OSError) and error.filename is not None:
        return f"run {run.run_id}: {error.filename}: {error.strerror}; it cannot be read"
    if isinstance(error, exc.SwarmError):
        return f"run {run.run_id}: {error}"
    return f"run {run.run_id}: a record of another shape ({type(error).__name__}: {error}); it cannot be read"


def _counts(snap: dict[str, Any]) -> dict[str, int]:
    """Tasks by status: the snapshot's counts (kept over every task), else its rows'."""
    counts = snap.get("counts")
    if isinstance(counts, dict) and counts and all(isinstance(v, int) for v in counts.values()):
        return {k: v for k, v in counts.items() if v}
    tally: dict[str, int] = {}
    for t in snap["tasks"]:
        tally[t["status"]] = tally.get(t["status"], 0) + 1
    return tally


def task_specs_of(run: RunPaths, *, strict: bool = False) -> list[TaskSpec]:
    """Every task of a run as it was given — ``run.json``'s and those added while it ran (the
    event log) — for what rows do not carry: tags, a named task's command. Records that
    cannot be read give none — ``strict``, for a choice of tasks (``--tag``, a name to act
    on), one line saying why: "no task with tag x" would not be what is wrong."""
    from zellij_swarm.engine import resume
    from zellij_swarm.records import log as records

    try:
        return list(resume.task_specs(read_json(run.run_json),
                                      records.read_events(run.events, only=resume.ADDED_EVENTS)))
    except FileNotFoundError:  # (a run whose record is not written yet)
        return []
    except (OSError, ValueError, KeyError, TypeError) as e:
        if not strict:
            return []
        if isinstance(e, exc.SwarmError):
            raise
        raise DamagedRecord(f"{run.dir}: its tasks cannot be read ({e}); no task can be chosen in it") from None


def select(specs: Iterable[TaskSpec], *, group: str | None, tags: Iterable[str]) -> list[str]:
    """Names of the tasks of ``group`` (if given) that have any of ``tags`` (if given)."""
    wanted = set(tags)
    return [s.name for s in specs
            if (group is None or s.group == group) and (not wanted or wanted & set(s.tags))]


def chosen_tasks(run: RunPaths, *, group: str | None, tags: Iterable[str],
                 specs: Iterable[TaskSpec] | None = None) -> list[str]:
    """The names ``--group``/``--tag`` choose: ``select`` over the run's tasks (``specs``, else
    read), exit 2 when the group is not the run's or nothing is chosen — a tag no task has is
    as likely a typo as an unknown group, and an empty table would not say so."""
    check_group(run, group)
    tags = list(tags)
    chosen = select(task_specs_of(run, strict=True) if specs is None else specs, group=group, tags=tags)
    if not chosen and (group is not None or tags):
        raise exc.UsageError(f"run {run.run_id} has no task {selection_text(group, tags)}")
    return chosen


def check_group(run: RunPaths, group: str | None) -> None:
    """A ``--group`` must name one of the run's groups (exit 2 otherwise)."""
    groups = read_json(run.run_json).get("groups") or {}
    if group is not None and group not in groups:
        raise exc.UsageError(f"run {run.run_id} has no group {group!r} (its groups: {', '.join(groups) or 'none'})")


def selection_text(group: str | None, tags: Iterable[str]) -> str:
    """``in group 'gpu' with tag 'slow' or 'big'``, for messages about a selection."""
    parts = [f"in group {group!r}"] if group is not None else []
    if tags := list(tags):
        parts.append("with tag " + " or ".join(map(repr, tags)))
    return " ".join(parts)


def find_task(snap: dict[str, Any], key: str) -> dict[str, Any]:
    """The task named ``key``, else the one whose id it is — a name first, as the supervisor
    takes it (``retry``, ``cancel``): a task may be named like another one's id (``t1``)."""
    tasks: list[dict[str, Any]] = snap["tasks"]
    found = next((t for t in tasks if t["name"] == key), None) or next((t for t in tasks if t["id"] == key), None)
    if found is None:
        raise exc.UnknownTask(snap["run_id"], key, (t["name"] for t in tasks))
    return found


def when(ts: float | None) -> str:
    return _dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S") if ts else "-"


def _day_and_minute(ts: float | None) -> str:
    return _dt.datetime.fromtimestamp(ts).strftime("%m-%d %H:%M") if ts else "-"


def short_when(ts: float | None, now: float) -> str:
    """``19:05:49`` today, ``2026-11-30 19:05`` another day."""
    if not ts:
        return "-"
    at = _dt.datetime.fromtimestamp(ts)
    return at.strftime("%H:%M:%S") if at.date() == _dt.datetime.fromtimestamp(now).date() else at.strftime(
        "%Y-%m-%d %H:%M")


def show_command(snap: dict[str, Any], task: dict[str, Any], *, latest: bool, where: Path | None = None) -> str:
    """The command that shows a waiting task: ``attach`` to its pane — or, for a worker with
    no pane (headless, a Slurm step run so), which has nothing to attach to, its output
    followed (``logs --follow``), where what it asked is. The run named unless it is the
    latest, and its state directory ``where`` when the rule would not find it from here."""
    run = [] if latest else [snap["run_id"]]
    how = "attach" if task.get("pane_id") is not None else "logs --follow"
    return state_dir.command(where, how, *run, quoting.task_word(task["name"], task["id"]))


def none_waiting(snap: dict[str, Any], where: Path | None = None) -> str:
    """What is said when no task of ``snap`` is shown waiting for input: none does — or, with
    no supervisor (``interrupted``), nothing watches, and whether one waits is not known
    (``where``: its state directory, for the command that resumes it)."""
    if snap["state"] == RunState.INTERRUPTED:
        return (f"nothing watches its workers for input until `{state_dir.command(where, 'resume', snap['run_id'])}` "
                "(whether one waits is not known)")
    return "no task waits for input"


def waiting_tasks(snap: dict[str, Any]) -> list[dict[str, Any]]:
    """The running tasks whose workers wait for input, in plan order."""
    return [t for t in snap["tasks"] if t.get("status") == "running" and t.get("waiting_input")]


def fit(line: str, width: int | None) -> str:
    """A line cut to ``width`` columns with ``…`` (None: whole): a table never wraps. Columns
    as the terminal counts them: a wide character (CJK) takes two."""
    return line if width is None else text.clip(line, width)


# A slot's state as a person says it: one whose generation is starting is not "reserved".
SLOT_WORDS = {"reserved": "starting"}
NAME_COLUMN_MAX = 40


def dispatching_text(snap: dict[str, Any], where: Path | None = None) -> str | None:
    """``paused: new tasks wait for unpause`` and each group's ``gpu 2/2 running (paused)``;
    None when the run has no groups and nothing is paused. An ended run's pauses are over
    (an ended run cannot be unpaused, and its retry is not paused): not shown."""
    ended = snap.get("state") not in (RunState.RUNNING, RunState.INTERRUPTED)
    paused = {} if ended else snap.get("paused") or {}
    groups = snap.get("groups") or []
    if not paused.get("run") and not paused.get("groups") and not groups:
        return None
    parts = [f"paused: no new task starts until `{state_dir.command(where, 'unpause', snap['run_id'])}`"] \
        if paused.get("run") else []
    held = set(paused.get("groups") or [])
    running = snap.get("state") == RunState.RUNNING
    parts += [f"group {g['name']} " + (f"{g['running']}/{g['jobs']} running" if running else f"jobs {g['jobs']}")
              + (" (paused)" if g["name"] in held else "") for g in groups]
    return " · ".join(parts)


def task_note(t: dict[str, Any]) -> str:
    """What else a person needs to know of a task row: that it waits for them, or in Slurm's
    queue (or the node it runs on), and the command of a task known only by a generated name
    (why it ended as it did is in its status, ``describe``)."""
    notes = []
    if (exited := t.get("exited")) is not None:  # an interrupted run's (``_unrecorded_exit``)
        ended = f"exit {exited['code']}" if exited["code"] is not None else exited["reason"]
        notes.append(f"ended ({ended}): `resume` records it")
    elif t.get("status") == "running" and t.get("waiting_input"):
        notes.append("waiting for input")
    step = t.get("slurm") or {}
    if t.get("status") == "running" and step.get("state") == "PENDING":
        notes.append(f"queued in Slurm ({step.get('reason') or 'waiting'})")
    elif step.get("node"):
        notes.append(f"on {step['node']}")
    if step.get("queued_s"):
        notes.append(f"queued {step['queued_s']:.1f}s")
    if t.get("command"):
        notes.append(t["command"])
    return " · ".join(notes)


def table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]], indent: str = "  ", *,
          width: int | None = None) -> list[str]:
    """Columns as wide as their widest cell, two spaces apart; the last column is free. The
    first is as wide as its widest name of at most NAME_COLUMN_MAX columns. A longer name is
    never cut (it is what a user types to name the task): it pushes its own line — or, with
    ``width`` (a terminal's, where every line is cut to it), has a line of its own and the
    rest of its row comes on the next, under the columns, which the cut would have taken.
    Cells are measured as the terminal shows them: escaped first (a tab is ``\\t``, two
    columns), a wide character two columns, a combining mark none."""
    shown = [tuple(quoting.terminal_text(c) for c in cells) for cells in (header, *rows)]
    widths = [max(text.width(cells[i]) for cells in shown) for i in range(len(header) - 1)]
    widths[0] = max(w for cells in shown if (w := text.width(cells[0])) <= NAME_COLUMN_MAX)  # the header's fits
    out = []
    for cells in shown:
        if width is not None and text.width(cells[0]) > widths[0]:
            out.append(indent + cells[0])
            cells = ("", *cells[1:])
        line = "".join(c + " " * (max(w - text.width(c), 0) + 2)
                       for c, w in zip(cells, widths, strict=False)) + cells[-1]
        out.append(indent + line.rstrip())
    return out


def _attempts(t: dict[str, Any]) -> str:
    return str(t.get("attempts") or "-")


def format_status(snap: dict[str, Any], show_all: bool, width: int | None = None, *, hidden: int = 0,
                  unreadable: int = 0, where: Path | None = None) -> str:
    """The run's line (its counts, and how many wait for input), then a table of its tasks
    (one line each, with a header; ``hidden``: how many more the run has, said after it) and
    of its slots that can still do work (all with ``show_all``), its worktrees, views and
    warnings. With ``width`` (a terminal's), every line is cut to it: the run id is in the
    header, never repeated on a row."""
    lines = header_lines(snap, width)
    if (dispatching := dispatching_text(snap, where)) is not None:
        lines.append(dispatching)
    tasks = snap["tasks"]
    if tasks:
        grouped = any(t.get("group") for t in tasks)
        rows = []
        for t in tasks:
            status = describe(t, named=False)
            rows.append((t["name"], status, _attempts(t), "-" if t.get("slot") is None else str(t["slot"]),
                         *((t.get("group") or "-",) if grouped else ()), task_note(t)))
        lines += table(("TASK", "STATUS", "ATTEMPTS", "SLOT", *(("GROUP",) if grouped else ()), "NOTE"), rows,
                       width=width)
    if hidden:
        # the command first: a terminal's width cuts the end of the line
        lines.append(f"  ({hidden:,} {'task' if hidden == 1 else 'tasks'} not listed: "
                     f"`{state_dir.command(where, 'status --all')}` lists every task; a run of over "
                     f"{EVERY_TASK_UP_TO} lists its running and failed ones)")
    if unreadable:
        lines.append(f"  ({unreadable:,} {'task' if unreadable == 1 else 'tasks'} counted with no row that can be "
                     "read: the rows file (tasks.jsonl) is damaged)")
    lines += worktree_lines(tasks, snap["run_id"], width)
    slots = visible_slots(snap, show_all)
    if slots:
        lines.append("slots:")
        lines += table(("SLOT", "STATE", "TASK"),
                        [(str(s["slot"]), SLOT_WORDS.get(s["state"], s["state"]), s["task"] or "") for s in slots])
    gone = [v["view"] for v in snap.get("views", []) if v["state"] == "gone"]
    if gone:
        from zellij_swarm.engine.view_watch import describe as describe_views  # rare: loaded when needed

        lines.append(f"view: {describe_views(gone)} gone (renderer_died); the tasks are not affected — "
                     f"`{state_dir.command(where, 'board', snap['run_id'])}` shows the run in any terminal")
    for w in snap.get("warnings", []):
        lines.append(f"warning [{w['code']}]{' ' + w['task'] + ':' if w.get('task') else ''} {w['message']}")
    return "\n".join(fit(quoting.terminal_text(line), width) for line in lines)


def header_lines(snap: dict[str, Any], width: int | None) -> list[str]:
    """``run ID (name): running, started 19:05:49; 2 running, 1 failed; 1 waiting for input``
    — the counts on a line of their own when the one line would not fit ``width``."""
    name = f" ({snap['name']})" if snap.get("name") else ""
    head = f"run {snap['run_id']}{name}: {snap['state']}, started {short_when(snap['started_at'], time.time())}"
    tail = counts_text(_counts(snap))  # (a snapshot not written yet has its rows only)
    if waiting := len(waiting_tasks(snap)):
        tail += f"; {waiting} waiting for input (status --waiting)"
    if alloc := snap.get("slurm_allocation"):
        tail += f"; its allocation (job {alloc['job']}) is queued in Slurm ({alloc['reason']})"
    if width is not None and text.width(quoting.terminal_text(f"{head}; {tail}")) > width:
        return [head, f"  {tail}"]
    return [f"{head}; {tail}"]


def format_waiting(snap: dict[str, Any], latest: bool, where: Path | None = None) -> str:
    """``status --waiting``: the tasks waiting for input, each with the command that shows its
    pane (the run named unless it is the latest, which ``attach`` takes by default)."""
    waiting = waiting_tasks(snap)
    if not waiting:
        interrupted = "interrupted; " if snap["state"] == RunState.INTERRUPTED else ""
        return _shown([f"run {snap['run_id']}: {interrupted}{none_waiting(snap, where)}"])
    return _shown(table(("TASK", "SLOT", "SHOW IT"),
                        [(t["name"], "-" if t.get("slot") is None else str(t["slot"]),
                          show_command(snap, t, latest=latest, where=where)) for t in waiting],
                        indent=""))


def worktree_lines(tasks: Iterable[dict[str, Any]], run_id: str, width: int | None = None) -> list[str]:
    """The tasks' worktrees (``worktree = true``): files changed against the run's base commit
    (counted when the task ended: ``-`` until then), where each one is, relative to the
    directory that holds them all, named once above the table (on a line of its own when
    ``width`` is too narrow for both), and its branch last (the column a narrow terminal cuts:
    ``swarm/…/TASK`` when it is the run's ``swarm/<run-id>/TASK``)."""
    mine = [(t, wt) for t in tasks if (wt := t.get("worktree"))]
    if not mine:
        return []
    paths = [str(wt["path"]) for _, wt in mine]
    holder = os.path.commonpath(paths) if len(paths) > 1 else os.path.dirname(paths[0])
    prefix = f"swarm/{run_id}/"
    rows = [(t["name"], "-" if wt.get("changed_files") is None else str(wt["changed_files"]),
             os.path.relpath(wt["path"], holder), "(detached HEAD)" if not wt["branch"] else
             "swarm/…/" + wt["branch"][len(prefix):] if wt["branch"].startswith(prefix) else wt["branch"])
            for t, wt in mine]
    base = mine[0][1]["base"]
    head, where = f"worktrees from commit {base[:7]}, in", f"{_near(holder)}/:"
    fits = width is None or text.width(quoting.terminal_text(f"{head} {where}")) <= width
    return [*([f"{head} {where}"] if fits else [head, f"  {where}"]),
            *table(("TASK", "CHANGED", "PATH", "BRANCH"), rows, width=width)]


def _near(path: str) -> str:
    """``path`` relative to the current directory when it is under it, else as it is."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def format_ls(rows: list[dict[str, Any]], *, unreadable: int = 0, width: int | None = None) -> str:
    """One row per run; with ``width`` (a terminal's) every line is cut to it, never wrapped.
    Its start is the day and minute (``12-07 04:06``; ``ls --json`` has the moment, and the
    run id the UTC second): with the whole date and the seconds, an 80-column terminal cut
    every run's counts, the column a user reads ``ls`` for."""
    if not rows:
        return f"no run that can be read ({unreadable} cannot)" if unreadable else "no runs"
    lines = table(("RUN", "NAME", "STATE", "STARTED", "WAITING", "TASKS"),
                  [(r["run_id"], r.get("name") or "-", r["state"], _day_and_minute(r["started_at"]),
                    str(r.get("waiting") or 0) if r["state"] == RunState.RUNNING else "-",
                    f"{r['tasks']}: {counts_text(r['counts'])}" if r["tasks"] else "none")
                   for r in rows], indent="")
    return "\n".join(fit(quoting.terminal_text(line), width) for line in lines)


def _shown(lines: Iterable[str]) -> str:
    return "\n".join(quoting.terminal_text(line) for line in lines)
