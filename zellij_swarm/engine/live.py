"""Runtime handles of a run in progress: never persisted, rebuilt from the records on resume.

``LiveGen`` is one generation in flight and how the supervisor follows it: a headless
wrapper is started and reaped by the supervisor's launcher, which reports both; a pane's
wrapper is not (its launch heartbeat and exit sidecar arrive as file events on the
generation's directory, and its pid — learned from the heartbeat — gets a ``pidfd`` only to
notice it vanishing).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from zellij_swarm.backends.base import LaunchRequest
from zellij_swarm.engine.timers import Timer
from zellij_swarm.records import generation_files
from zellij_swarm.records.generation_files import GenPaths
from zellij_swarm.records.task import TaskRecord
from zellij_swarm.worker.wrapper import PaneMode


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
    heartbeat_seen: bool = False
    watching_dir: bool = False
    timeout_armed: bool = False
    kill_reason: str | None = None  # a kill was requested, for this reason
    kill_sent_at: float | None = None  # ... and reached the worker at this wall time (stopping.Delivery)
    signalling: int = 0  # signals of the ladder sent and not yet answered: its outcome waits for them
    collect_waiting: bool = False  # its end was noticed while signals were in flight
    wait_status: int | None = None  # ... with this wait status (the launcher's), if known
    ending: bool = False  # its process tree is being ended (SIGTERM sent)
    tree_killed: bool = False  # ... and past SIGKILL
    deadlines: list[Timer] = field(default_factory=list)  # its timeout and heartbeat timers
    idle_message: str | None = None  # why the watchdog ended it
    opening: bool = False  # the backend's thread is deciding or opening its pane
    files_followed: bool = False  # its directory is watched or polled
    collected: bool = False  # its exit was read; its outcome may still wait on the multiplexer
    done: bool = False  # its end is recorded
    # The Slurm executor (engine.remote): its wrapper runs as a job step, maybe on another host
    remote: bool = False
    remote_since: float | None = None  # when it was handed to srun (monotonic)
    submitted_at: float | None = None  # ... (wall clock): its time in Slurm's queue runs from here
    job_id: str | None = None  # its step's job, once squeue has listed it
    step_running: bool = False  # squeue has seen its step run
    gone_seen: bool = False  # its step left Slurm's queue, and its sidecar had its grace
    node: str | None = None  # the Slurm node its step ran on (its launch heartbeat says)
    step: str | None = None  # its step's "job.step" id (its launch heartbeat says)

    @property
    def in_pane(self) -> bool:
        """Running (or about to run) in a pane, as opposed to headless or fallen back."""
        return self.request.pane and not self.request.claimed

    def read_step(self) -> None:
        """Where its Slurm step runs (``node``, ``step``), from its launch heartbeat once it is
        written; nothing before."""
        if self.node is None and (hb := generation_files.heartbeat_started(self.gen)) is not None:
            self.node, self.step = hb["node"], hb["step"]
