"""Read-only views of a run directory for the renderers (SPEC §5, §7).

The renderers never talk to the supervisor or to processes; they read what it wrote:
``state.json`` for task identity and status (it lags the files by up to ~250 ms), and each
slot's newest generation directory for live facts (start time, launch heartbeat, heartbeat
age, exit record: ``generation_files.GenReader``) and output.

Every read tolerates files that are missing, half-created or unreadable: a renderer shows
"waiting" rather than crash while the supervisor is still writing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from zellij_swarm.records import runlock
from zellij_swarm.records.generation_files import GenInfo
from zellij_swarm.records.rundir import RunPaths, read_json
from zellij_swarm.records.snapshot_file import RowsReader
from zellij_swarm.records.states import ACTIVE_SLOT_STATES, TERMINAL_STATUSES, RunState, own_end


def json_number(value: Any) -> float | None:
    """A JSON number as a float (a bool is none); None for anything else."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class StateReader:
    """``state.json``, re-parsed only when the file was replaced (it is written atomically),
    whole: the rows file it names is followed by a ``RowsReader``, which reads only what was
    appended since the last snapshot (``snapshot_file``)."""

    def __init__(self, run: RunPaths) -> None:
        self.run = run
        self._key: tuple[int, int, int] | None = None
        self._state: dict[str, Any] | None = None
        self._rows = RowsReader()

    def load(self) -> dict[str, Any] | None:
        try:
            st = os.stat(self.run.state)
        except OSError:
            return self._state
        key = (st.st_ino, st.st_mtime_ns, st.st_size)
        if key != self._key:
            try:
                loaded = read_json(self.run.state)
                if isinstance(loaded, dict):
                    self._state, self._key = self._rows.merge(loaded, self.run.dir), key
            except (OSError, ValueError):
                return self._state
        return self._state

    def shown(self, state: dict[str, Any] | None) -> dict[str, Any] | None:
        """``state`` as a view shows it: a run whose snapshot says ``running`` while no
        supervisor holds its lock (killed; ``resume`` takes it up) is ``interrupted``, as
        ``status`` says — its clock ticking on and its rows "running" were a run that seemed
        to go on. The view keeps following it all the same: a resume makes it run again.
        Its clock stops at ``last_seen_at``: the last moment the supervisor was known alive,
        the later of its last snapshot and its liveness stamp (rewritten every few seconds)."""
        if state is not None and state.get("state") == RunState.RUNNING and runlock.holder(self.run) is None:
            stamp = runlock.stamp(self.run)
            seen = [t for t in (json_number(state.get("updated_at")), stamp.at if stamp else None) if t is not None]
            return {**state, "state": RunState.INTERRUPTED, "last_seen_at": max(seen, default=None)}
        return state


def gen_records(state: dict[str, Any] | None) -> dict[tuple[int, int], dict[str, Any]]:
    """Every recorded attempt by ``(slot, generation)``: ``{"task", "status", "exit_code", ...}``.

    A slot is reused, so a generation's row comes from its own history entry (frozen when it
    finished), never from whatever the task or the slot is doing now. The task's top-level
    fields fill in for its current attempt, unless the task is back to ``pending`` (a retry).
    """
    out: dict[tuple[int, int], dict[str, Any]] = {}
    for task in (state or {}).get("tasks") or []:
        if not isinstance(task, dict):
            continue
        name = task.get("name")
        for entry in task.get("history") or []:
            if not isinstance(entry, dict):
                continue
            entry_slot, entry_gen = entry.get("slot"), entry.get("generation")
            if isinstance(entry_slot, int) and isinstance(entry_gen, int):
                out[(entry_slot, entry_gen)] = {**entry, "task": name, "task_id": task.get("id"),
                                                "command": task.get("command"), "task_status": task.get("status")}
        slot, gen = task.get("slot"), task.get("generation")
        if isinstance(slot, int) and isinstance(gen, int) and task.get("status") != "pending":
            current = out.get((slot, gen), {})
            out[(slot, gen)] = {
                **current,
                "task": name,
                "task_id": task.get("id"),
                "status": task.get("status"),
                "exit_code": task.get("exit_code"),
                "signal": task.get("signal"),
                "reason": task.get("reason"),
                "attempt": current.get("attempt", task.get("attempts")),
                "started_at": current.get("started_at", task.get("started_at")),
                "ended_at": task.get("ended_at") if task.get("status") in TERMINAL_STATUSES else None,
                "pid": task.get("pid"),
                "pane_id": task.get("pane_id"),
                "command": task.get("command"),
                "waiting_input": task.get("waiting_input") if task.get("status") == "running" else False,
                "slurm": task.get("slurm"),
            }
    return out


def _not_started(rec: dict[str, Any]) -> str:
    """A generation with no launch heartbeat yet: ``queued`` while its Slurm step waits in the
    queue (the supervisor's last ``squeue``), else ``starting``."""
    step = rec.get("slurm")
    return "queued" if isinstance(step, dict) and step.get("state") == "PENDING" else "starting"


def _recorded_row(slot: int, slot_state: str, rec: dict[str, Any]) -> SlotRow:
    """A slot whose newest generation was folded away: its record says everything."""
    status = str(rec.get("status") or "succeeded")
    attempt = rec.get("attempt") if isinstance(rec.get("attempt"), int) else None
    number = rec.get("generation") if isinstance(rec.get("generation"), int) else None
    return SlotRow(slot, slot_state, status, task=rec.get("task"), attempt=attempt, number=number,
                   started_at=json_number(rec.get("started_at")), ended_at=json_number(rec.get("ended_at")),
                   exit_code=rec.get("exit_code"), signal=rec.get("signal"), reason=rec.get("reason"),
                   command=_text(rec.get("command")))


def slot_entries(state: dict[str, Any] | None) -> dict[int, dict[str, Any]]:
    return {
        s["slot"]: s
        for s in (state or {}).get("slots") or []
        if isinstance(s, dict) and isinstance(s.get("slot"), int)
    }


LIVE = frozenset({"running", "starting", "queued"})  # queued: a Slurm step waiting for its node
# A generation of an interrupted run whose wrapper committed its exit after its supervisor was
# gone: it ended, but no record says so yet — ``resume`` records it (``status`` says the same).
UNRECORDED_END = "ended"


@dataclass(frozen=True)
class SlotRow:
    """One slot as the renderers show it: the newest generation's task and facts.

    ``status`` is a task status (``running``, ``failed``, ...) or ``starting`` (a task is
    assigned, no launch heartbeat yet), ``idle`` or ``closed`` (nothing ran in the slot yet). A
    row whose status is terminal holds only recorded facts; only a live row has a meaningful
    ``elapsed(now)``. ``number`` is the slot's generation the row shows (an internal count,
    never shown as if it were an attempt); ``command`` is there for a task whose name was
    generated (``task-N``); ``waiting`` says its worker waits for input (None: unknown).
    """

    slot: int
    slot_state: str
    status: str
    task: str | None = None
    attempt: int | None = None
    gen: GenInfo | None = None
    started_at: float | None = None
    ended_at: float | None = None
    exit_code: int | None = None
    signal: str | None = None
    reason: str | None = None
    number: int | None = None
    command: str | None = None
    waiting: bool | None = False

    @property
    def live(self) -> bool:
        return self.status in LIVE

    def elapsed(self, now: float) -> float | None:
        if self.started_at is None:
            return None
        if self.live:
            return now - self.started_at
        return None if self.ended_at is None else self.ended_at - self.started_at


def describe_slot(
    slot: int,
    gen: GenInfo | None,
    entry: dict[str, Any] | None,
    records: dict[tuple[int, int], dict[str, Any]],
    *,
    interrupted: bool = False,
) -> SlotRow:
    """Combine a slot's ``state.json`` entry, its newest generation and that generation's record.
    The newest generation on disk may be older than the slot's newest: those after it ended
    and were folded away (``generation_files.fold``), and their records are all there is.
    A generation that ended before its record says so is told by its own end while a
    supervisor goes on (the record follows within a turn), and as ``UNRECORDED_END`` in an
    ``interrupted`` run, where no record follows until a ``resume``."""
    entry = entry or {}
    slot_state = str(entry.get("state") or "idle")
    entry_gen = entry.get("generation") if isinstance(entry.get("generation"), int) else None
    busy = slot_state in ACTIVE_SLOT_STATES
    on_disk = newest = gen.gen if gen is not None else 0
    while (slot, newest + 1) in records:
        newest += 1
    if busy and ((gen is None and newest == 0) or (entry_gen is not None and entry_gen > newest)):
        # its generation is not on disk yet: starting, or running as far as state.json knows
        return SlotRow(slot, slot_state, "running" if slot_state == "running" else "starting",
                       task=entry.get("task"), attempt=entry.get("attempt"), number=entry_gen,
                       started_at=json_number(entry.get("started_at")))
    if newest > on_disk:
        return _recorded_row(slot, slot_state, records[(slot, newest)])
    if gen is None:
        return SlotRow(slot, slot_state, "closed" if slot_state == "closed" else "idle")
    rec = records.get((slot, gen.gen), {})
    task = rec.get("task")
    if task is None and entry_gen == gen.gen:
        task = entry.get("task")
    recorded = rec.get("status")
    if recorded in TERMINAL_STATUSES:
        status = str(recorded)
    elif gen.done:
        # its exit is committed but state.json has not caught up yet
        status = UNRECORDED_END if interrupted else str(own_end(gen.exit_code, gen.signal))
    else:
        status = "running" if gen.heartbeat_seen else _not_started(rec)
    if status in LIVE and slot_state == "idle":
        slot_state = "running"  # state.json lags the generation's own files
    ended_at = gen.ended_at if gen.done else None
    if status in TERMINAL_STATUSES and ended_at is None:
        ended_at = json_number(rec.get("ended_at"))
    attempt = rec.get("attempt", entry.get("attempt") if entry_gen == gen.gen else None)
    return SlotRow(
        slot,
        slot_state,
        status,
        task=task,
        attempt=attempt if isinstance(attempt, int) else None,
        gen=gen,
        started_at=gen.started_at or json_number(rec.get("started_at")),
        ended_at=ended_at,
        exit_code=gen.exit_code if gen.done else rec.get("exit_code"),
        signal=gen.signal if gen.done else rec.get("signal"),
        reason=rec.get("reason"),
        number=gen.gen,
        command=_text(rec.get("command")),
        waiting=_waiting(rec, gen, interrupted) if status in LIVE else False,
    )


def _waiting(rec: dict[str, Any], gen: GenInfo, interrupted: bool) -> bool | None:
    """Whether a live row's worker waits for input: as its record says — but with no
    supervisor (``interrupted``) that is the last word of one that is gone, weighed as
    ``status`` weighs it (``waiting.with_no_supervisor``)."""
    said: bool | None = rec.get("waiting_input", False)
    if not interrupted:
        return said
    from zellij_swarm.worker import waiting  # only for a run with no supervisor

    return waiting.with_no_supervisor(said, in_pane=rec.get("pane_id") is not None, pid=gen.pid)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None
