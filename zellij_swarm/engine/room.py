"""A full or read-only state directory (SPEC §5.8): no new task starts — none is turned
into a failure for it — until there is room again, and running ones go on. Whoever notices
first says so (the supervisor's own writes, a generation's files, a wrapper's missing
records): one ``state_dir_error`` warning a run, one line to the user each time it fills,
and the directory is looked at again every ``ROOM_RECHECK`` seconds. With nothing running
and no room for ``FULL_GIVE_UP`` seconds the run stops, interrupted and resumable as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from zellij_swarm.config import state_dir
from zellij_swarm.engine.timers import Timers
from zellij_swarm.records import rundir
from zellij_swarm.records.log import EventLog
from zellij_swarm.records.task import TaskRecord

ROOM_RECHECK = 1.0  # seconds: how often a full state directory is looked at again
FULL_GIVE_UP = 60.0  # seconds with nothing running and still no room: the run ends interrupted


class StateDirRoom:
    def __init__(self, *, run_id: str, run_dir: Path, state_dir: Path, events: EventLog, timers: Timers,
                 clock: Callable[[], float], wallclock: Callable[[], float],
                 warn: Callable[[str, str, TaskRecord | None], None], problem: Callable[[str], None],
                 busy: Callable[[], bool], give_up: Callable[[], None]) -> None:
        """``problem`` is a line shown whatever the output mode; ``busy`` says whether
        anything still runs or is being stopped; ``give_up`` interrupts the run."""
        self._run_id = run_id
        self._run_dir = run_dir
        self._state_dir = state_dir
        self._events = events
        self._timers = timers
        self._clock = clock
        self._wallclock = wallclock
        self._warn = warn
        self._problem = problem
        self._busy = busy
        self._give_up = give_up
        self.full = False  # no new task starts until the state dir has room again
        self.full_seen_at: float | None = None  # when it was last found full (wall clock)
        self._warned = False  # the run's one state_dir_error warning was given
        self._room_said = False  # the user was told it filled and had room again
        self._idle_full_since: float | None = None  # when the last worker ended while it was full

    def records_failed(self, error: OSError | None) -> None:
        """The run's own records (its event log, its snapshot) could not be written."""
        if error is not None:
            self.unwritable(f"cannot write the run's records in {self._run_dir}: {error.strerror}; "
                            "outcomes are still tracked in memory", None)

    def unwritable(self, message: str, task: TaskRecord | None) -> None:
        """The state directory cannot be written: one ``state_dir_error`` warning a run;
        no new task starts until it can be again."""
        if not self._warned:
            self._warned = True
            self._warn("state_dir_error", message, task)
        if self.full:
            return
        self.full = True
        self.full_seen_at = self._wallclock()
        if not self._room_said:  # the first time; a disk that fills again is in the event log
            self._problem(f"warning: the state directory {self._state_dir} is full or cannot be written: "
                          "no new task starts until it has room again")
        self._events.emit("dispatch_held", reason="state_dir_full", why=message)
        self._timers.after(ROOM_RECHECK, self._look_for_room)

    def _look_for_room(self) -> None:
        if not self.full:
            return
        self._events.flush()  # the log goes first: it is whole again once there is room
        if rundir.has_room(self._run_dir) and self._events.error is None:
            self.full = False
            self._idle_full_since = None
            if not self._room_said:
                self._room_said = True
                self._problem(f"the state directory {self._state_dir} has room again: new tasks start")
            self._events.emit("dispatch_resumed", reason="state_dir_full")
            return
        if self._busy():
            self._idle_full_since = None
        elif self._idle_full_since is None:
            self._idle_full_since = self._clock()
        elif self._clock() - self._idle_full_since >= FULL_GIVE_UP:
            # Nothing runs and nothing can start: the run stops here, resumable as it is.
            self._problem(f"error: the state directory {self._state_dir} has had no room for "
                          f"{FULL_GIVE_UP:g}s: run {self._run_id} is interrupted; "
                          f"`{state_dir.command(self._state_dir, 'resume', self._run_id)}` "
                          "goes on once there is room")
            self._give_up()
            return
        self._timers.after(ROOM_RECHECK, self._look_for_room)
