"""Who needs a person (SPEC §9): which running workers wait for input on their terminal.

One shared timer, running only while workers run, looks at each of them every ``TICK``:

- A worker can say it itself: a ``{"event":"waiting_input"}`` line in its heartbeat file. It
  counts until the worker writes anything after it (output, another heartbeat line).
- A worker in a live pane is judged from its terminal (``worker.waiting``) and its screen
  (``worker.prompts``): waiting when the terminal's foreground job is blocked reading it or
  polls it with nothing else that could wake it, however it repaints meanwhile; when it
  polls the terminal among sockets or pipes, only once its screen shows a prompt
  (``waiting_pattern``) or its output has been silent for ``waiting.QUIET_AFTER`` seconds;
  when the system does not let us look (no ptrace access), when its screen shows a prompt,
  else unknown (``None``) — and the task's record says why (``waiting_evidence``).
- Marking is at once; unmarking takes two looks in a row (one ``TICK`` more): a look that
  catches a waiting program repainting its screen does not unmark it.
- A worker without a terminal (headless, compact: its stdin is ``/dev/null``) cannot wait
  for a person, unless it says so.

A tick costs one ``stat`` of the heartbeat and one of the output per worker, the heartbeat's
tail only when it grew, and, while any worker runs in a live pane, one pass over
``/proc/*/stat`` (a few ms) plus a few small ``/proc`` reads per live pane; a pane's screen
is rendered (its output's new bytes fed to pyte) only when the kernel's word is not enough.
"""

from __future__ import annotations

import fcntl
import os
import re
import struct
import termios
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from zellij_swarm import jsontext
from zellij_swarm.engine.live import LiveGen
from zellij_swarm.engine.timers import Timer, Timers
from zellij_swarm.records.rundir import open_record
from zellij_swarm.worker import prompts, waiting
from zellij_swarm.worker.screen import TailScreen

TICK = 0.5  # seconds: a waiting worker is shown within two ticks, well inside 2 s
_TAIL = 4096  # bytes of a grown heartbeat read for its last line
_SAYS_WAITING = "waiting_input"
_SCREEN = (80, 24)  # columns, rows a pane's screen is rendered at when its terminal's size cannot be read
_WINSIZE = struct.Struct("HHHH")


@dataclass
class _Watched:
    lg: LiveGen
    heartbeat_size: int = 0
    said_waiting_at: float | None = None  # mtime of its heartbeat when it last said it waits
    pattern: re.Pattern[str] | None = None  # what on its screen says it waits (worker.prompts)
    screen: TailScreen = field(default_factory=TailScreen)
    asked: tuple[tuple[int, int, int, int], bool] | None = None  # (output size, mtime, cols, rows), prompt seen
    verdict: bool | None = False
    doubted_once: bool = False  # the last look unmarked or could not tell: one such look changes nothing
    looked: bool = False  # a look was taken since it was registered


class InputWatch:
    def __init__(self, timers: Timers, wallclock: Callable[[], float],
                 changed: Callable[[LiveGen, bool | None], None], *, run_pattern: str | None = None) -> None:
        self._timers = timers
        self._now = wallclock
        self._changed = changed
        self._watched: dict[int, _Watched] = {}  # by slot: one generation runs in a slot at a time
        self._run_pattern = run_pattern  # the run-wide waiting_pattern (settings)
        self._tick_timer: Timer | None = None  # only while a worker is watched: none left behind

    def register(self, lg: LiveGen) -> None:
        """Follow a worker that runs (from its start, or its adoption by ``resume``)."""
        if lg.gen.slot not in self._watched or self._watched[lg.gen.slot].lg is not lg:
            self._watched[lg.gen.slot] = _Watched(lg, pattern=prompts.compiled(self._pattern(lg)))
        if self._tick_timer is None:
            self._tick_timer = self._timers.after(TICK, self._tick)

    def looked_at(self, lg: LiveGen) -> bool:
        """Whether it is known if ``lg`` waits for input: a look at it was taken (within a ``TICK`` of its
        registration), or it is not looked at (a Slurm step's)."""
        w = self._watched.get(lg.gen.slot)
        return w is None or w.lg is not lg or w.looked

    def unregister(self, lg: LiveGen) -> None:
        w = self._watched.get(lg.gen.slot)
        if w is not None and w.lg is lg:
            del self._watched[lg.gen.slot]
        if not self._watched and self._tick_timer is not None:
            self._timers.cancel(self._tick_timer)
            self._tick_timer = None

    def _tick(self) -> None:
        self._tick_timer = None
        # one pass over /proc/*/stat a tick, shared by every live pane
        procs = waiting.scan_procs() if any(w.lg.in_pane for w in self._watched.values()) else {}
        for w in list(self._watched.values()):
            verdict = self._judge(w, procs)
            w.looked = True
            doubt = (w.verdict is True and verdict is not True) or (verdict is None and w.verdict is not None)
            if doubt and not w.doubted_once:
                # a waiting program caught repainting, or a process that ended between two
                # reads of /proc: look again
                w.doubted_once = True
                continue
            w.doubted_once = False
            if verdict != w.verdict:
                w.verdict = verdict
                self._changed(w.lg, verdict)
        if self._watched:
            self._tick_timer = self._timers.after(TICK, self._tick)

    def _judge(self, w: _Watched, procs: Mapping[int, waiting.ProcStat]) -> bool | None:
        lg = w.lg
        if lg.done or lg.collected:
            return False
        output_at = max((t for t in (_mtime(lg.gen.output), _mtime(lg.gen.stderr)) if t is not None), default=None)
        if self._says_waiting(w) and (output_at is None or w.said_waiting_at is None
                                      or output_at <= w.said_waiting_at):
            return True
        if not lg.in_pane:
            return False
        if lg.pid is None:
            return False  # its wrapper has not said who it is yet: its worker has not started
        look = waiting.look(lg.pid, procs=procs)
        if look.wait is not waiting.TtyWait.UNKNOWN or look.closed is not None:
            lg.task.waiting_evidence = look.closed  # why the kernel will not say, while it will not
        silent_for = self._now() - max(output_at or 0.0, _mtime(lg.gen.heartbeat) or 0.0)
        prompt = False
        if look.wait in (waiting.TtyWait.SHARED, waiting.TtyWait.UNKNOWN):  # the screen has a say
            prompt = self._asks(w, lg.pid)
        return waiting.waiting_input(look.wait, silent_for=silent_for, prompt=prompt)

    def _asks(self, w: _Watched, pid: int) -> bool:
        """Whether its screen shows a prompt; rendered again only when its output or its size
        changed."""
        try:
            st = os.stat(w.lg.gen.output)
        except OSError:
            return False
        cols, rows = _screen_size(pid)
        key = (st.st_size, st.st_mtime_ns, cols, rows)
        if w.asked is None or w.asked[0] != key:
            w.asked = key, prompts.asks(w.screen.render(w.lg.gen.output, cols, rows), w.pattern)
        return w.asked[1]

    def _pattern(self, lg: LiveGen) -> str | None:
        """The task's own ``waiting_pattern``, else the run's."""
        return lg.task.spec.waiting_pattern if lg.task.spec.waiting_pattern is not None else self._run_pattern

    def _says_waiting(self, w: _Watched) -> bool:
        """Whether the worker's last heartbeat line says it waits for input (read only when
        the heartbeat grew since the last look)."""
        path = w.lg.gen.heartbeat
        try:
            st = os.stat(path)
        except OSError:
            return False
        if st.st_size != w.heartbeat_size:
            w.heartbeat_size = st.st_size
            w.said_waiting_at = st.st_mtime if _last_event(path, st.st_size) == _SAYS_WAITING else None
        return w.said_waiting_at is not None


def _last_event(path: Path, size: int) -> str | None:
    try:
        with os.fdopen(open_record(path), "rb") as f:  # a FIFO a worker put there would hold us
            f.seek(max(0, size - _TAIL))
            lines = f.read(_TAIL).splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        if line.strip():
            try:
                record = jsontext.loads(line)
            except ValueError:
                return None
            event = record.get("event") if isinstance(record, dict) else None
            return event if isinstance(event, str) else None
    return None


def _screen_size(pid: int) -> tuple[int, int]:
    """The columns and rows of the terminal of ``pid`` (its pane's wrapper: fd 0 is the pane)."""
    try:
        fd = os.open(f"/proc/{pid}/fd/0", os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK)
    except OSError:
        return _SCREEN
    try:
        rows, cols, _, _ = _WINSIZE.unpack(fcntl.ioctl(fd, termios.TIOCGWINSZ, bytes(_WINSIZE.size)))
    except OSError:
        return _SCREEN
    finally:
        os.close(fd)
    return (cols, rows) if cols and rows else _SCREEN


def _mtime(path: Path) -> float | None:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None
