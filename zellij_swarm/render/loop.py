"""The redraw loop shared by ``board`` and ``slot-view``.

A view turns the run directory into a ``Frame`` (lines that fit the terminal, whether the run
has ended, and which paths to watch). The loop paints frames in place and redraws when:

- a watched path changes (``watch.follow``: non-recursive inotify watches on the few
  directories the view names, so a pane never spends inotify watches on the whole run
  history); the watcher is restarted when the view's paths change (a new generation appeared);
- a second passed (the watcher's tick), so elapsed times tick;
- the terminal was resized (SIGWINCH wakes the watcher through ``wake``).

At most ``max_rate`` (10) frames a second. Painting never resets the terminal: each changed line
is written at its row (cursor address + text + erase to end of line), then the rest of the
screen is erased, all in one write, so nothing flickers.

It ends with exit code 0 when the run ends (the final frame stays on screen) and on SIGINT,
SIGTERM or SIGHUP (quietly, no traceback). If the system's file-watch limit is reached it falls
back to polling every second and shows a one-line notice in the frame.

A renderer started as one of the run's own panes is given a ``registration``
(``view_watch.Registration``): it registers before its first frame, so the run's supervisor
can follow it and record ``renderer_died`` if it dies while the run goes on. It never
unregisters: ending because the run ended is not a death, and the supervisor no longer
looks by then.

The watcher, the clock and ``sleep`` are parameters so tests can drive the loop without real
time.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO, TYPE_CHECKING, Any, Protocol

from zellij_swarm.render.text import width as text_width
from zellij_swarm.watch import Wake, follow

if TYPE_CHECKING:
    from zellij_swarm.engine.view_watch import Registration

POLL_INTERVAL = 1.0
MAX_RATE = 10.0
Watcher = Callable[[Sequence[Path], Wake], Iterable[object]]
"""``watcher(paths, wake)`` yields once per batch of changes (or per tick, possibly empty) and
ends when ``wake`` is set."""

_SGR = re.compile(r"\x1b\[[0-9;]*m")
_SignalHandler = Callable[[int, FrameType | None], object] | int | None


@dataclass
class Frame:
    lines: list[str]
    done: bool = False
    watch: tuple[Path, ...] = field(default_factory=tuple)


class View(Protocol):
    def frame(self, cols: int, rows: int, now: float, *, color: bool, notice: str | None) -> Frame: ...


def poll_watcher(paths: Sequence[Path], wake: Wake, interval: float = POLL_INTERVAL) -> Iterator[None]:
    """The fallback: one tick per ``interval`` until ``wake`` is set."""
    while not wake.wait(interval):
        yield None


def is_watch_limit(error: BaseException) -> bool:
    """Whether a watcher error means the system's inotify watch (ENOSPC) or instance (EMFILE,
    ENFILE) limit was hit."""
    return isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EMFILE, errno.ENFILE)


def use_color(out: IO[str]) -> bool:
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return out.isatty()
    except (AttributeError, ValueError):
        return False


def terminal_size(out: IO[str]) -> tuple[int, int]:
    """The size of the terminal ``out`` writes to (asked of the tty first: COLUMNS may be stale)."""
    try:
        size = os.get_terminal_size(out.fileno())
    except (AttributeError, ValueError, OSError):
        size = shutil.get_terminal_size((80, 24))
    return max(size.columns, 1), max(size.lines, 1)


class _Painter:
    """Paints frames in place: only changed lines, no clear-screen, one write per frame."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out
        self.prev: list[str] = []
        self.rows = 0
        self.started = False

    def write(self, data: str) -> None:
        self.out.write(data)
        self.out.flush()

    def paint(self, lines: list[str], cols: int, rows: int, *, full: bool) -> None:
        lines = lines[:rows]
        if full or rows != self.rows:
            self.prev = []
        parts = [] if self.started else ["\x1b[?25l"]
        self.started = True
        for i, line in enumerate(lines):
            if i < len(self.prev) and self.prev[i] == line:
                continue
            parts.append(f"\x1b[{i + 1};1H{line}")
            # A line exactly as wide as the terminal leaves the cursor in the pending-wrap state,
            # where erase-to-end-of-line would eat the last character; it needs no erase anyway.
            if text_width(_SGR.sub("", line)) < cols:
                parts.append("\x1b[K")
        if len(lines) < rows and (not self.prev or len(self.prev) > len(lines)):
            parts.append(f"\x1b[{len(lines) + 1};1H\x1b[J")
        self.prev, self.rows = lines, rows
        if parts:
            self.write("".join(parts))

    def leave(self, *, in_pane: bool = False) -> None:
        """Cursor visible again; the picture stays. In a terminal the cursor goes below the
        picture, for the shell's prompt (scrolling by a line if the picture fills every row).
        In a pane of the run's own, which stays on screen as it is once we exit (a dead tmux
        pane), it goes to the top left: nothing scrolls, and if the pane is made smaller
        later, tmux cuts the rows below the cursor — the picture's end, never its title."""
        if not self.started:
            return
        if in_pane:
            self.write("\x1b[1;1H\x1b[?25h")
            return
        used = len(self.prev)
        while used and not _SGR.sub("", self.prev[used - 1]).strip():
            used -= 1
        if used >= self.rows:
            self.write(f"\x1b[{self.rows};1H\r\n\x1b[?25h")
        else:
            self.write(f"\x1b[{used + 1};1H\x1b[?25h")


class Loop:
    """Runs one view until the run ends or a signal asks it to stop; see the module docstring."""

    def __init__(
        self,
        view: View,
        *,
        out: IO[str],
        watcher: Watcher | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        size: Callable[[], tuple[int, int]] | None = None,
        color: bool | None = None,
        max_rate: float = MAX_RATE,
        poll_interval: float = POLL_INTERVAL,
        handle_signals: bool = True,
        registration: Registration | None = None,
    ) -> None:
        self.view = view
        self.out = out
        self.watcher: Watcher = watcher or follow
        self.polling = False
        self.clock = clock
        self.sleep = sleep
        self.size = size or (lambda: terminal_size(out))
        self.color = use_color(out) if color is None else color
        self.min_interval = 1.0 / max_rate
        self.poll_interval = poll_interval
        self.handle_signals = handle_signals
        self.registration = registration
        self.notice: str | None = None
        self.wake = Wake()  # set by the signal handlers
        self.stopping = False
        self.resized = False
        self.frames = 0
        self.watch_error: BaseException | None = None
        self._painter = _Painter(out)
        self._last_draw = float("-inf")

    # -- signals -------------------------------------------------------------------------------

    def _on_stop(self, signum: int, _frame: FrameType | None) -> None:
        self.stopping = True
        self.wake.set()

    def _on_winch(self, signum: int, _frame: FrameType | None) -> None:
        self.resized = True
        self.wake.set()

    def _install(self) -> dict[signal.Signals, _SignalHandler]:
        if not self.handle_signals or threading.current_thread() is not threading.main_thread():
            return {}
        saved: dict[signal.Signals, _SignalHandler] = {}
        for sig, handler in (
            (signal.SIGINT, self._on_stop),
            (signal.SIGTERM, self._on_stop),
            (signal.SIGHUP, self._on_stop),
            (signal.SIGWINCH, self._on_winch),
        ):
            saved[sig] = signal.signal(sig, handler)
        return saved

    # -- drawing -------------------------------------------------------------------------------

    def draw(self, *, full: bool = False) -> Frame:
        now = self.clock()
        wait = self._last_draw + self.min_interval - now
        if wait > 0:
            self.sleep(wait)
            now = self.clock()
        cols, rows = self.size()
        frame = self.view.frame(cols, rows, now, color=self.color, notice=self.notice)
        self._painter.paint(frame.lines, cols, rows, full=full)
        self._last_draw = now
        self.frames += 1
        return frame

    def once(self) -> int:
        cols, rows = self.size()
        frame = self.view.frame(cols, rows, self.clock(), color=self.color, notice=None)
        try:
            self.out.write("".join(line + "\n" for line in frame.lines))
            self.out.flush()
        except BrokenPipeError:  # ``board --once | head -1``
            _silence_stdout(self.out)
        return 0

    def run(self) -> int:
        saved = self._install()
        if self.registration is not None:
            self.registration.write()  # False: unfollowed, shown all the same (view_watch)
        try:
            try:
                self._run()
            finally:
                self._painter.leave(in_pane=self.registration is not None)
        except (BrokenPipeError, OSError) as e:
            # The pane or the pipe went away under us: nothing left to show, and nothing to say.
            if not isinstance(e, BrokenPipeError) and e.errno not in (errno.EIO, errno.EPIPE, errno.EBADF):
                raise
            _silence_stdout(self.out)
        except KeyboardInterrupt:
            pass
        finally:
            for sig, handler in saved.items():
                signal.signal(sig, handler)
        return 0

    def _ticks(self, paths: tuple[Path, ...]) -> Generator[None, None, None]:
        """The watcher's wake-ups. A watcher error ends them and is kept in ``watch_error``;
        errors of the consumer (a closed terminal) are never mistaken for watcher errors."""
        self.watch_error = None
        changes: Iterator[object] | None = None
        try:
            changes = iter(self.watcher(paths, self.wake))
            for _ in changes:
                yield
        except (OSError, RuntimeError) as e:
            self.watch_error = e
        finally:
            close = getattr(changes, "close", None)
            if close is not None:
                close()

    def _run(self) -> None:
        frame = self.draw(full=True)
        failures = 0
        while not (frame.done or self.stopping):
            paths = frame.watch
            self.wake.clear()
            ticks = self._ticks(paths)
            try:
                for _ in ticks:
                    if self.stopping:
                        return
                    full, self.resized = self.resized, False
                    frame = self.draw(full=full)
                    failures = 0
                    if frame.done or frame.watch != paths:
                        break
                else:
                    # The watcher ended: woken for a resize or a stop, or it failed.
                    if self.stopping:
                        return
                    error = self.watch_error
                    if error is not None or not self.wake.is_set():
                        failures += 1
                        if self.polling and error is not None:
                            raise error
                        if error is not None and is_watch_limit(error):
                            self._fall_back("file-watch limit reached")
                        elif failures >= 3 and not self.polling:
                            self._fall_back(f"file watching failed ({error or 'watcher stopped'})")
                    full, self.resized = self.resized, False
                    frame = self.draw(full=full or error is not None)
            finally:
                ticks.close()

    def _fall_back(self, why: str) -> None:
        self.notice = f"warning: {why}; polling every {self.poll_interval:g} s"
        interval = self.poll_interval
        self.watcher = lambda paths, wake: poll_watcher(paths, wake, interval)
        self.polling = True


def _silence_stdout(out: IO[str]) -> None:
    """After EPIPE/EIO, point stdout at /dev/null so interpreter shutdown does not complain."""
    if out is sys.stdout:
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except OSError:
            pass


def run_view(
    view: View,
    *,
    once: bool = False,
    out: IO[str] | None = None,
    **options: Any,
) -> int:
    """Show ``view``: one frame with ``once``, else the redraw loop until the run ends."""
    loop = Loop(view, out=out or sys.stdout, **options)
    return loop.once() if once else loop.run()
