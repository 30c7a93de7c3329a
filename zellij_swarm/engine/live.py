"""Runtime handles of a run in progress: never persisted, rebuilt from the records on resume.

``LiveGen`` is one generation in flight and how the supervisor follows it: a headless
wrapper is started and reaped by the supervisor's launcher, which reports both; a pane's
wrapper is not (its launch heartbeat and exit sidecar arrive as file events on the
generation's directory, and its pid — learned from the heartbeat — gets a ``pidfd`` only to
notice it vanishing).

A generation's life is three small state machines, each moved only by ``LiveGen.move``,
which checks the move against ``GEN_TRANSITIONS`` (an illegal one raises, as a task's or a
slot's does) and keeps it in ``history``:

``GenPhase`` — how far its wrapper has come::

    RESERVED ──> OPENING ──> LAUNCHED ──> STARTED ──> END_SEEN ──> COLLECTED ──> DONE
       │            └────────────┴──────────┴────────────┴─────────────┘          ▲
       └──────────────────────────── (every phase but DONE) ─────────────────────┘
                                           STARTED, END_SEEN ──> ORPHANED ──> (the ends)

  (a pane's wrapper may report its start or its end before the backend reports its launch:
  OPENING goes straight to STARTED, END_SEEN or COLLECTED; a generation that never ran, or
  was ended by taking its claim, goes to DONE from where it was). ORPHANED: its headless
  wrapper was killed from outside while its worker ran, and the worker runs on; its end,
  not the wrapper's, is the generation's (``Generations.collect``).

``KillState`` — whether it is being ended on purpose::

    NONE ──> REQUESTED ──> SENT        (and NONE ──> SENT: the ladder of an ended worker's
                                        left-over tree reached one of its processes)

  REQUESTED: a kill was asked for (``kill_reason``) and is carried out as soon as it can be
  (a pane still opening, a headless one not started yet: when it starts). SENT: its first
  signal reached the worker at ``kill_sent_at``. The outcome rule (``engine.outcome``)
  compares that moment with the worker's own end: a worker that ended before keeps its own
  outcome, whatever was requested.

``Ladder`` — the signals that end its process tree: ``NONE ──> TERM ──> KILL`` (SIGTERM, then
  SIGKILL after the grace).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from zellij_swarm.backends.base import LaunchRequest
from zellij_swarm.engine.timers import Timer
from zellij_swarm.records import generation_files
from zellij_swarm.records.generation_files import GenPaths
from zellij_swarm.records.states import InvalidTransition
from zellij_swarm.records.task import TaskRecord
from zellij_swarm.worker.wrapper import PaneMode


class GenPhase(enum.StrEnum):
    RESERVED = "reserved"  # its slot is reserved and its files are being written: nothing runs
    OPENING = "opening"  # the backend's thread decides whether, and opens, its pane
    LAUNCHED = "launched"  # handed to its launcher, its pane or srun: its wrapper may start any moment
    STARTED = "started"  # its wrapper is known to run (spawned, its launch heartbeat, srun's child)
    END_SEEN = "end_seen"  # its end was seen while signals of its ladder were in flight: read once answered
    ORPHANED = "orphaned"  # its wrapper was killed from outside; its worker runs on, and its end is awaited
    COLLECTED = "collected"  # its exit was read: its outcome may still wait on the multiplexer or Slurm
    DONE = "done"  # its end is recorded and the supervisor has let it go


class KillState(enum.StrEnum):
    NONE = "none"
    REQUESTED = "requested"  # asked for, for ``kill_reason``; carried out as soon as it can be
    SENT = "sent"  # its first signal reached the worker, at ``kill_sent_at``


class Ladder(enum.StrEnum):
    NONE = "none"
    TERM = "term"  # SIGTERM sent to its tree (or to its Slurm step)
    KILL = "kill"  # past SIGKILL: what is left of its tree was forked since


_ENDS = frozenset({GenPhase.END_SEEN, GenPhase.COLLECTED, GenPhase.DONE})
# One table per machine: members of different StrEnums with one value ("none") are equal.
GEN_TRANSITIONS: Final[dict[type[enum.StrEnum], dict[Any, frozenset[Any]]]] = {
    GenPhase: {
        GenPhase.RESERVED: frozenset({GenPhase.OPENING, GenPhase.LAUNCHED, GenPhase.DONE}),
        GenPhase.OPENING: frozenset({GenPhase.LAUNCHED, GenPhase.STARTED}) | _ENDS,
        GenPhase.LAUNCHED: frozenset({GenPhase.LAUNCHED, GenPhase.STARTED}) | _ENDS,
        GenPhase.STARTED: _ENDS | {GenPhase.ORPHANED},
        GenPhase.END_SEEN: _ENDS | {GenPhase.ORPHANED},
        GenPhase.ORPHANED: _ENDS,
        GenPhase.COLLECTED: frozenset({GenPhase.DONE}),
        GenPhase.DONE: frozenset(),
    },
    KillState: {
        KillState.NONE: frozenset({KillState.REQUESTED, KillState.SENT}),
        KillState.REQUESTED: frozenset({KillState.SENT}),
        KillState.SENT: frozenset(),
    },
    Ladder: {
        Ladder.NONE: frozenset({Ladder.TERM}),
        Ladder.TERM: frozenset({Ladder.KILL}),
        Ladder.KILL: frozenset({Ladder.KILL}),  # a slot held after SIGKILL signals its tree's newcomers again
    },
}

_E = TypeVar("_E", GenPhase, KillState, Ladder)


@dataclass
class LiveGen:
    task: TaskRecord
    gen: GenPaths
    request: LaunchRequest
    backfill: bool
    pane: PaneMode | None = None  # how its wrapper is written when it runs in a pane
    pid: int | None = None
    pidfd: int | None = None
    child: bool = False  # the launcher started it (headless) and reports its end
    pane_id: str | None = None
    phase: GenPhase = GenPhase.RESERVED
    heartbeat_seen: bool = False  # its launch heartbeat was read (a step's srun child: none to read here)
    watching_dir: bool = False
    timeout_armed: bool = False
    limits_from: float | None = None  # wall-clock time its limits count from, by the supervisor's clock
    kill_reason: str | None = None  # a kill was requested, for this reason
    kill_sent_at: float | None = None  # ... and reached the worker at this wall time (stopping.Delivery)
    kill_caught: bool | None = None  # ... a process of it with a handler for it (None: not known, as before)
    signalling: int = 0  # signals of the ladder sent and not yet answered: its outcome waits for them
    wait_status: int | None = None  # its end's wait status (the launcher's), kept while its end waits
    # ORPHANED: the worker the launcher adopted as its wrapper died, and that worker's end
    worker_pid: int | None = None
    worker_status: int | None = None  # its exact wait status, as the launcher reaped it
    worker_over: bool = False  # it has ended (its status told, or nothing of it is left to see)
    deadlines: list[Timer] = field(default_factory=list)  # its timeout and heartbeat timers
    idle_message: str | None = None  # why the watchdog ended it
    files_followed: bool = False  # its directory is watched or polled
    # The Slurm executor (engine.remote): its wrapper runs as a job step, maybe on another host
    remote: bool = False
    remote_since: float | None = None  # when it was handed to srun (monotonic)
    submitted_at: float | None = None  # ... (wall clock): its time in Slurm's queue runs from here
    job_id: str | None = None  # its step's job, once squeue has listed it
    step_running: bool = False  # squeue has seen its step run
    withheld: bool = False  # its claim was taken as its --slurm-max-queue fell due: it never runs
    unlisted_since: float | None = None  # squeue listed its step, then no longer did, from then (monotonic)
    forgotten: bool = False  # its queued step was forgotten by Slurm and withdrawn: it runs again
    # Slurm ended its job for another step of the run that held its id (``SlurmExecutor.explain``)
    id_issued_again: bool = False
    allocation: str | None = None  # the run's allocation (--slurm-alloc) its step was given
    allocation_ended: bool = False  # ... which ended, not by the run
    gone_seen: bool = False  # its step left Slurm's queue, and its sidecar had its grace
    # its job is listed and no srun of it is left here, and Slurm lists no step of it in the
    # job, from then (monotonic): its work is over, and its job empty (``SlurmExecutor._steps_seen``)
    stepless_since: float | None = None
    step_left_job: bool = False  # ... seen twice: collected as gone, its empty job cancelled once it is
    node: str | None = None  # the Slurm node its step ran on (its launch heartbeat says)
    step: str | None = None  # its step's "job.step" id (its launch heartbeat says)
    kill: KillState = field(init=False)
    ladder: Ladder = field(default=Ladder.NONE, init=False)
    history: list[tuple[str, str]] = field(default_factory=list, init=False)  # (from, to), every move

    def __post_init__(self) -> None:
        # a resumed run's generation carries what its first supervisor recorded of a kill
        self.kill = (KillState.SENT if self.kill_sent_at is not None else
                     KillState.REQUESTED if self.kill_reason is not None else KillState.NONE)

    def move(self, dst: _E) -> None:
        """The one way a generation changes state: ``dst`` is a ``GenPhase``, ``KillState`` or
        ``Ladder``; a move its table does not allow raises ``InvalidTransition``."""
        src: enum.StrEnum = (self.phase if isinstance(dst, GenPhase) else
                             self.kill if isinstance(dst, KillState) else self.ladder)
        if dst not in GEN_TRANSITIONS[type(dst)][src]:
            raise InvalidTransition(f"generation {self.gen.slot}/{self.gen.gen} of task {self.task.name!r}",
                                    src, dst)
        self.history.append((src, dst))
        if isinstance(dst, GenPhase):
            self.phase = dst
        elif isinstance(dst, KillState):
            self.kill = dst
        else:
            self.ladder = dst

    def request_kill(self, reason: str) -> None:
        self.kill_reason = reason
        self.move(KillState.REQUESTED)

    def kill_reached_worker(self, at: float, caught: bool) -> None:
        self.kill_sent_at, self.kill_caught = at, caught
        self.move(KillState.SENT)

    def launched(self) -> None:
        """Its launch was reported: handed to the launcher, or its pane opened (a wrapper
        that reported its start first stays where it is)."""
        if self.phase in (GenPhase.RESERVED, GenPhase.OPENING, GenPhase.LAUNCHED):
            self.move(GenPhase.LAUNCHED)

    def started(self) -> None:
        """Its wrapper is known to run."""
        if self.phase in (GenPhase.RESERVED, GenPhase.OPENING, GenPhase.LAUNCHED):
            self.move(GenPhase.STARTED)

    @property
    def opening(self) -> bool:
        return self.phase is GenPhase.OPENING

    @property
    def collected(self) -> bool:
        """Its exit was read (or it is over without one)."""
        return self.phase in (GenPhase.COLLECTED, GenPhase.DONE)

    @property
    def done(self) -> bool:
        return self.phase is GenPhase.DONE

    @property
    def outlived_its_wrapper(self) -> bool:
        """It was ORPHANED: its wrapper is gone, and its pid may be another process's now."""
        return any(dst is GenPhase.ORPHANED for _, dst in self.history)

    @property
    def ending(self) -> bool:
        """The ladder has begun ending its process tree."""
        return self.ladder is not Ladder.NONE

    @property
    def in_pane(self) -> bool:
        """Running (or about to run) in a pane, as opposed to headless or fallen back."""
        return self.request.pane and not self.request.claimed

    def read_step(self) -> None:
        """Where its Slurm step runs (``node``, ``step``), from its launch heartbeat once it is
        written; nothing before."""
        if self.node is None and (hb := generation_files.launch_heartbeat(self.gen)) is not None:
            self.node, self.step = hb["node"], hb["step"]
