"""The ``Backend`` protocol: the one seam between the scheduler and a multiplexer.

The supervisor reserves slots and writes each generation's wrapper; a backend starts
wrappers and manages what the user sees. Exits are always learned from the wrapper's exit
record, never from the multiplexer, so a backend has no say in outcomes. A launch that goes
wrong is data (``LaunchFailed`` with a SPEC §7 code), not an exception: the supervisor
decides between a warning plus headless fallback and a failure under require.

A backend is asked only about panes: a generation whose slot it does not show, or whose
``pane_mode`` is ``None`` (compact mode, beyond the visible cap, a fallback), runs headless
through the supervisor's own launcher. A pane launch ends in one of two ways:

- ``PaneOpened(pane_id)``: the wrapper runs in a pane; the supervisor waits for its launch
  heartbeat (with a deadline) and its exit sidecar through file events.
- ``LaunchFailed(code, message)``.

The supervisor calls a backend only from one thread of its own (``offloop``), never from
its event loop: every method but ``shows`` may take a multiplexer call's full timeout.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from zellij_swarm import pid_end
from zellij_swarm.config import state_dir
from zellij_swarm.config.settings import Resolved
from zellij_swarm.records import generation_files
from zellij_swarm.records.generation_files import GenPaths
from zellij_swarm.records.rundir import RunPaths
from zellij_swarm.worker import wrapper
from zellij_swarm.worker.wrapper import PaneMode


def prune_command(paths: RunPaths) -> str:
    """``zellij-swarm prune`` as a hint offers it: with the run's state directory where the
    rule would not find it from here (``state_dir.flag_for``), so that it finds the run."""
    return state_dir.command(paths.state_dir, "prune")


EARLIER = "earlier"  # in a retry's place: where earlier supervisors' panes stay that it could not close


def places_of(place: Any, backend: str) -> list[Mapping[str, Any]]:
    """A run's recorded ``place`` (``Backend.place``) and the earlier places it carries — what
    earlier supervisors left where a retry's panes did not go (another tmux server, another
    Zellij session), kept in each later one's place so that a second retry still names them —
    those of ``backend``."""
    if not isinstance(place, Mapping):
        return []
    earlier = place.get(EARLIER)
    return [p for p in [place, *(earlier if isinstance(earlier, list) else [])]
            if isinstance(p, Mapping) and p.get("backend") == backend]


def or_prune(paths: RunPaths) -> str:
    """The end of a hint that says how to close what a run left."""
    return f" (or {prune_command(paths)})"


def where_panes_are(multiplexer: str, paths: RunPaths) -> str:
    """The line that says where a run's panes are: short enough for 80 columns after
    ``zellij-swarm: `` (with the project's own state directory), and naming the one command
    that shows them from any terminal (it finds the run's window or tab)."""
    return f"panes in {multiplexer}; see them from any terminal: {state_dir.command(paths.state_dir, 'attach')}"


@dataclass(frozen=True)
class LaunchRequest:
    gen: GenPaths
    slot: int
    task_name: str
    pane: bool = False  # the wrapper was written for a pane (PaneMode)
    claimed: bool = False  # the supervisor holds the claim: run it headless, as its child
    # How the generation starts: ``/bin/sh <its wrapper.sh>`` (a pane's), or the run's
    # ``worker.sh`` with the generation's arguments after an empty mode (``wrapper``).
    argv: tuple[str, ...] = ()
    attempt: int = 1  # which attempt of the task this generation is
    attempts: int = 1  # how many attempts the task may have (1 + retries)
    # What runs the wrapper somewhere else (the Slurm executor's srun), before ``argv``.
    prefix: tuple[str, ...] = ()

    def title(self, state: str) -> str:
        """A worker pane's title: ``slot 6 · unit-2 · attempt 2/3 · failed (exit 3)``; the
        attempt only when the task may have more than one, where it tells a kept failed
        pane from a later attempt's."""
        attempt = f"attempt {self.attempt}/{self.attempts} · " if self.attempts > 1 else ""
        return f"slot {self.slot} · {self.task_name} · {attempt}{state}"

    def headless_argv(self) -> tuple[str, ...]:
        """``argv`` as the launcher starts it: with the mode ``claimed`` when the supervisor
        holds the claim (the wrapper's first argument either way)."""
        return (*self.prefix, *(wrapper.claimed_argv(self.argv) if self.claimed else self.argv))

    def pane_argv(self, *, read_to_end: bool = False) -> list[str]:
        """What a pane runs: the generation's own wrapper, through the executor's prefix.

        A Slurm step's ``srun``, which would be the pane's first process, runs under a pane
        leader here that marks its terminal's hang-up (``--hangup``): a pane closed by hand
        ends ``srun``, and Slurm then kills the step's processes with SIGKILL, before any
        hang-up reaches the wrapper's own leader on the node, and nothing there records an
        end. With the mark, such a step is ``cancelled (pane_closed)``, as a local pane's is,
        not ``lost`` and run again. The leader also writes ``srun``'s death by a signal it
        did not pass on (``--killed``): a ``kill -9`` from outside, which Slurm records as a
        cancel, and which is none. With ``read_to_end`` (tmux: ``PaneMode.read_to_end``) the
        leader also lets the pane's terminal be read to its end before it exits: tmux closes
        a terminal whose first process ended once nothing is left to read *now*, and the
        kernel may still hold the last output ``srun`` wrote (SPEC §2). The wrapper's own
        leader, on the node, can do neither: its terminal is ``srun``'s there."""
        argv = [*self.prefix, "/bin/sh", str(self.gen.wrapper)]
        if not self.prefix:
            return argv
        return [*wrapper.PANE_LEADER, *(["--read-to-end"] if read_to_end else []),
                "--hangup", str(self.gen.dir / generation_files.HANGUP),
                "--killed", str(self.gen.dir / generation_files.EXECUTOR_KILLED), *argv]


@dataclass(frozen=True)
class RunPane:
    """A pane one of a run's generations ran in, as its records say (its launch heartbeat
    names it): what a resumed run finds again (``backends.resumed``)."""

    req: LaunchRequest
    pane_id: str
    # The outcome the run recorded before it was resumed; None while none is (the generation
    # runs, or ended while no supervisor ran: the resumed one records it and says ``ended``).
    status: str | None


@dataclass(frozen=True)
class Queued:
    token: str


@dataclass(frozen=True)
class PaneOpened:
    pane_id: str | None  # None when the multiplexer cannot say (learned from the heartbeat)


@dataclass(frozen=True)
class LaunchFailed:
    code: str  # SPEC §7 vocabulary: spawn_failed, pane_call_failed, ...
    message: str
    # The backend could not start at all (its session or tab could not be made at the first
    # launch): under require the run fails as when ``open`` fails — no task runs.
    unstartable: bool = False


@dataclass(frozen=True)
class PaneExited:
    """A pane its multiplexer still lists, its first process (the pane's leader) ended: tmux's
    dead pane (``remain-on-exit``), Zellij's held one. Nobody closed it — a pane closed by hand
    is gone. ``code``: how that process ended, as a shell says it (a death by a signal is
    128 + its number), when the multiplexer says (Zellij gives no code for a death by one)."""

    code: int | None = None

    def says(self) -> str:
        sig = generation_files.signal_name(self.code)
        return f"died of {sig}" if sig else f"exited {self.code}" if self.code is not None else "ended"


PaneResult = PaneOpened | LaunchFailed
LaunchResult = Queued | PaneOpened | LaunchFailed


@dataclass(frozen=True)
class RunContext:
    """What a backend may use of the run: its files, settings and the supervisor's timers."""

    paths: RunPaths
    run_id: str
    settings: Resolved
    schedule: Callable[[float, Callable[[], None]], object]
    warn: Callable[[str, str], None]
    notice: Callable[[str], None]  # one line for the user (where the panes are, how to attach)
    renderer_argv: Callable[..., list[str]]  # renderer_argv("board") / ("slot-view", "3")
    attach: bool = False  # ``--attach``: the user is taken to the panes (``attach_command``), not left where they are


@runtime_checkable
class Backend(Protocol):
    name: str
    # True when a pane's output may reach its log after its worker's end is recorded (tmux's
    # ``pipe-pane`` copies it in a process of its own): ``ended`` returns once it has, and what
    # reads a generation's output as it ends waits for that (``OffLoopBackend.after_output``)
    output_copied_after_end: bool

    def open(self, ctx: RunContext) -> None:
        """Prepare the session/window and the board; raise ``BackendError`` if impossible."""
        ...

    def shows(self, slot: int) -> bool:
        """Whether a generation of ``slot`` may run in a pane at all. Answered on the
        supervisor's loop: from settings and flags only, never a multiplexer call."""
        ...

    def pane_mode(self, slot: int) -> PaneMode | None:
        """How the next generation of a shown ``slot`` runs: in a pane (its ``PaneMode``,
        a pane place now reserved for it) or headless (``None``)."""
        ...

    def launch(self, batch: list[LaunchRequest]) -> list[PaneResult]:
        """Open a pane for every wrapper of a batch (each got a ``PaneMode``), in as few
        round trips as the backend allows."""
        ...

    def launch_seen(self) -> None:
        """The supervisor has recorded what the last ``launch`` opened: what the backend held
        back until then may go on (tmux's start gate: 32 pane leaders starting at once took
        the CPU the supervisor needed to record their panes, 30 ms and more on two cores).
        Called on the supervisor's loop, not the backend's thread: no multiplexer call, and
        what it touches guarded."""
        ...

    def ended(self, req: LaunchRequest, pane_id: str | None, status: str, label: str) -> None:
        """A generation's exit is recorded (``status`` is its task status for this attempt):
        apply the pane lifecycle — hold then close, close now, or keep. A success also
        closes the kept panes of the task's earlier, failed attempts (they no longer count
        against ``keep_failed_panes``); so call it for a headless success too (``pane_id``
        None), for a task whose earlier attempts had panes."""
        ...

    def waiting(self, req: LaunchRequest, pane_id: str | None, waiting: bool) -> None:
        """Mark a live pane's title as waiting for input (``slot 3 · agent-1 · waiting for
        input``) or clear the mark; nothing when the pane's worker has ended."""
        ...

    def abandon(self, pane_id: str | None, req: LaunchRequest) -> None:
        """A pane that never reported in: close it (its wrapper will find the claim taken)."""
        ...

    def session_alive(self) -> bool:
        ...

    def pane_listed(self, pane_id: str | None) -> bool | None:
        """Whether the multiplexer still lists the pane ``pane_id``, running or with its first
        process ended: asked of a pane that sent no launch heartbeat in time. False when it is
        gone (closed by hand, or its window or session went), None when the multiplexer cannot
        say (no answer, a version that cannot list panes, no pane id)."""
        ...

    def pane_exited(self, pane_id: str | None) -> PaneExited | None:
        """Whether the pane ``pane_id`` is still listed with its first process ended
        (``PaneExited``): asked only of a pane generation that left no exit record, no start
        and no hang-up mark. None when the pane is gone (closed), still running, or the
        multiplexer cannot say."""
        ...

    def attach_command(self) -> tuple[list[str], dict[str, str]] | None:
        """How to attach to the session this backend created (argv, environment), once it exists."""
        ...

    def close(self, *, cancelled: bool, failed: bool = True) -> None:
        """The run is over: close worker panes as SPEC §2 says, release what is held. Inside
        the user's own session, the swarm's window or tab closes too unless ``failed`` (some
        task did not succeed, or the run was cancelled: what stays is worth reading), or
        whatever happened with ``--close-session``."""
        ...

    def place(self) -> dict[str, Any] | None:
        """Where the run's panes are, for ``attach`` from any terminal (the snapshot's
        ``multiplexer``): tmux ``{"backend", "socket", "session", "session_id", "windows",
        "created_session"}``, Zellij ``{"backend", "session", "tab", "created_session"}``;
        None headless or before ``open``. From state only, no call."""
        ...

    def leftover_hint(self) -> str | None:
        """After ``close``: what of the swarm stays on screen and how to close it (one line for
        the end-of-run notice), or None when nothing stays. From state only, no call."""
        ...


def alive_unless_gone(answer: Callable[[], bool | None], gone: Callable[[], bool], *, settle: float,
                      every: float, server: int | None = None) -> bool:
    """Whether a multiplexer's session is alive, false only on evidence of its death — taken
    for dead, its panes' workers would be recorded lost and run again. ``answer``: what the
    multiplexer says (None: no answer, or none to trust); ``gone``: what its server's remains
    say (its process, its socket). With neither, asked again every ``every`` seconds until
    ``settle`` has passed (a server that is going goes well within it), then alive. A
    ``server`` (its pid, when known) that is stopped is alive at once: it can neither answer
    nor end by itself, and each answer asked of it would wait out its time."""
    if server is not None and pid_end.stopped(server):
        return True
    deadline = time.monotonic() + settle
    while True:
        said = answer()
        if said is not None:
            return said
        if gone():
            return False
        if time.monotonic() >= deadline:
            return True
        time.sleep(every)
