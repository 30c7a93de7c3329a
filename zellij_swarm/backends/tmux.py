"""tmux: one pane per worker (live) or one renderer pane per slot (compact).

Where panes go: inside tmux, a dedicated window of the current session; outside, a detached
session created with an explicit size (tmux 3.3a's default 80×24 cannot split more than a
few panes) whose attach command is printed. A board pane anchors the first window. Panes are
laid out ``tiled``; a window takes panes while every tile stays legible — a live worker's at
least ``min_pane_width`` columns wide (a setting, default 60), a renderer's ``MIN_TILE`` (20×3) — and panes
beyond that overflow into further windows, up to ``max_visible_panes``.

Reading order: ``tiled`` lays panes out by their index, row by row from the top left
(``tiled_grid``), so a window's panes are kept in slot order — the board first, then slot 1, 2, … (a slot's older,
kept panes before its newer ones). ``split-window`` puts its pane right after the pane it
splits, or right before it with ``-b``: a new pane is split before the first pane of a later
slot, or after the window's last pane; a batch's appended panes are split in reverse, so
that they end up in order.

The final screen: a dead pane (``remain-on-exit``) keeps its last screen as it was —
``remain-on-exit-format`` is empty, so tmux adds no "Pane is dead" line, which would
scroll a renderer's first line (the board's counters, a slot view's title) out of sight. At
the end of a run inside the user's own session, the swarm's windows close unless something
failed (``close``); what stays, and how to close it, is ``leftover_hint``.

Finding and marking the run's windows: each window carries the window option ``@zsw_run``
(``names.RUN_OPTION``) with the run's id, set when it is made, so that ``attach``, ``prune``
and the leftover hints find it whatever its name says. While tasks wait for input, a window
is renamed: the first, the run's, ``swarm-<run-id> (2 waiting)`` with all the run's waiting
tasks, an overflow window with those of its own panes (``names``), back to its name when none
waits; each new wait rings the bell in the board's pane (a BEL written to its
terminal), which sets the window's bell flag in the status bar of a client looking elsewhere
— the board's, not the worker's, so that the worker's output and idle clock stay its own.

Titles live in a pane user option (``@zsw_title``, and the board's shorter ``@zsw_short``,
its run id alone, then ``board``, for a border too narrow: never an id cut) shown by
``pane-border-format`` (``BORDER_FORMAT``): a worker
printing its own title escape changes ``pane_title``, which we never display, so it cannot
overwrite slot, task and state. Live output reaches ``output.log`` through ``pipe-pane``,
set up in the invocation that opens the pane, so the worker keeps the pane's TTY. The copy is a
process of tmux's, which may not have written a worker's last lines when the worker's end is
read; so a generation's end waits for it (``_log_copied``) before its output is read — copied
to stdout (``--output group``), counted in the joblog.

Every tmux call goes through the one tmux client (``tmux_client.TmuxClient``, a timeout and
typed errors on every call): what makes and changes panes and windows through its ``chain``,
one tmux invocation for many commands — a batch of panes is one invocation per window it goes
to (commands chained with ``;``: each pane's split, title, ``pipe-pane`` and the re-tiling,
and last the next window the batch needs), after one that reads the first window's pane
order, which libtmux cannot batch
— and what finds things (a resumed run's windows, whether a session is there) and the version,
checked once when the run opens its panes, through libtmux. Every argument is encoded for
tmux's parser on the way (``quoting.tmux_arg``), and text tmux format-expands — the
``pipe-pane`` command, new session and window names — for its formats
(``quoting.tmux_expanded``), and titles for the border that draws them (``quoting.tmux_drawn``).
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zellij_swarm import external, names, quoting
from zellij_swarm.backends._lifecycle import PaneLifecycle
from zellij_swarm.backends.base import (
    EARLIER,
    LaunchFailed,
    LaunchRequest,
    PaneExited,
    PaneOpened,
    PaneResult,
    RunContext,
    RunPane,
    alive_unless_gone,
    or_prune,
    places_of,
    where_panes_are,
)
from zellij_swarm.backends.tmux_client import MESSAGE_LIMIT, WORKS_SINCE, TmuxClient, TmuxVersion
from zellij_swarm.exc import BackendError
from zellij_swarm.records import generation_files, rundir
from zellij_swarm.worker import procs
from zellij_swarm.worker.wrapper import PaneMode

SETTLE = 5.0  # seconds a server that gives no answer may take to close its socket (``_session_there``)
GATE_WAIT = 1.0  # seconds a batch waits to hold the panes' start gate, else opens without it
PANE_DEAD_WAIT = 5.0  # seconds a pane still listed alive after its leader's end may take to be marked dead
# seconds a dead pane may take to say how its first process ended: tmux sees the terminal closed
# before it reaps the process, which took up to 8 s on a loaded 2-core machine (off the loop)
PANE_STATUS_WAIT = 20.0
LOG_COPY_WAIT = 2.0  # seconds a generation's end waits for its pane's output to reach its log, at most
# tmux closes a pane's terminal once its first process has ended and nothing is left to read
# at that moment, though the kernel may still hold the last output: a pane's first process
# lets it read to the end first (``_paneleader.let_the_terminal_be_read``; SPEC §2)
READ_TO_END = True
BOARD_GATE_WAIT = 2  # seconds a live run's board waits at the gate for the first batch, at most
FOCUS_OPTION = "@zsw_focus"  # a window's: the pane the user had selected as a batch began there
SESSION_SIZE = (240, 60)  # columns, rows of a detached session we create
MIN_TILE = (20, 3)  # smallest legible tile: columns, rows of content (a renderer fits any width)
# A pane's border shows its ``@zsw_title``; where that does not fit and the pane has a shorter
# one (the board's: its run id), that, and where neither fits, ``board``: tmux would
# cut the title at the border's end, and a run id cut short names no run. A label fits when it
# and its two spaces take at most the pane's width less 4: tmux draws it in that much
# (screen-redraw.c, ``width = wp->sx - 4``) — so a title of n columns needs a pane of n + 6.
BORDER_FORMAT = (" #{?#{&&:#{@zsw_short},#{e|<:#{pane_width},#{e|+:#{n:@zsw_title},6}}},"
                 "#{?#{e|<:#{pane_width},#{e|+:#{n:@zsw_short},6}},board,#{@zsw_short}},#{@zsw_title}} ")


def title_text(text: str) -> str:
    """A pane title as ``pane-border-format`` shows it: safe for the terminal, and no ``#``
    that tmux would read as a style or a format."""
    return quoting.tmux_drawn(quoting.terminal_text(text))


def tiled_grid(n: int) -> tuple[int, int]:
    """The columns and rows tmux's ``tiled`` layout gives ``n`` panes (layout-set.c: rows grow
    first, so 5 panes are 2 columns × 3 rows, the last pane of a short row widened)."""
    rows = cols = 1
    while rows * cols < n:
        rows += 1
        if rows * cols < n:
            cols += 1
    return cols, rows


def tile_capacity(width: int, height: int, min_width: int = MIN_TILE[0]) -> int:
    """How many panes a ``tiled`` window of this size holds with every tile at least
    ``min_width`` columns and ``MIN_TILE[1]`` rows of content."""
    best = 1
    for n in range(1, 1025):
        cols, rows = tiled_grid(n)
        # tiles share a border column between them; each has a title line (pane-border-status)
        if (width - (cols - 1)) // cols < min_width or (height - rows) // rows < MIN_TILE[1]:
            break
        best = n
    return best


@dataclass(frozen=True)
class _NewPane:
    slot: int
    argv: list[str]
    title: str
    log: Path | None = None  # a worker's: its output copied there (``pipe-pane``)


def _pieces(blocks: list[tuple[int | None, list[list[str]]]]) -> Iterator[list[tuple[int | None, list[list[str]]]]]:
    """``blocks`` (a pane's commands, which must go in one invocation) in as few consecutive
    invocations as tmux's message limit allows: a batch of panes whose paths are long (a deep
    state directory) would be refused whole."""
    piece: list[tuple[int | None, list[list[str]]]] = []
    size = 0
    for block in blocks:
        grown = TmuxClient.message_size(block[1]) + 2
        if piece and size + grown > MESSAGE_LIMIT:
            yield piece
            piece, size = [], 0
        piece.append(block)
        size += grown
    if piece:
        yield piece


@dataclass
class _Window:
    id: str
    name: str  # as made: ``swarm-<run-id>`` or ``swarm-<run-id>-N``
    capacity: int
    panes: set[str] = field(default_factory=set)
    placeholder: str | None = None  # an overflow window's first pane, until real panes arrive
    setup: list[list[str]] = field(default_factory=list)  # its options, sent with its first panes
    shown_waiting: int = 0  # the count its name shows
    # An earlier supervisor's window of the run, taken over by a ``retry`` (``take_over``): its
    # ``panes`` are the run's generations' only, closed one by one — never the window, where a
    # pane the user opened keeps it — and it may be in another session of the server.
    taken_from: str | None = None  # that session's id


class _StartGate:
    """The hold on the start gate (``TmuxBackend.gate_path``), a descriptor with an exclusive
    ``flock``: taken on the backend's thread, let go there or on the supervisor's loop
    (``launch_seen``) — under a lock, as a descriptor closed twice could close a file another
    thread opened meanwhile under its number."""

    def __init__(self) -> None:
        self._fd: int | None = None
        self._lock = threading.Lock()

    @property
    def held(self) -> bool:
        return self._fd is not None

    def hold(self, path: Path) -> bool:
        """Hold the gate at ``path``, unless it is held already; False when it cannot be had
        within ``GATE_WAIT`` (a wrapper stopped at it, holding it shared): without it the
        batch's panes only start sooner. (Called on the backend's thread only.)"""
        if self._fd is not None:
            return True
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        except OSError:
            return False
        # (a wrapper passing the gate holds it for the start of a `true`: looked at every 5 ms)
        if not rundir.flock_within(fd, GATE_WAIT, every=0.005):
            os.close(fd)
            return False
        with self._lock:
            self._fd = fd
        return True

    def release(self) -> None:
        """Let what waits at the gate go on: a batch's panes, the board."""
        with self._lock:
            fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def _closing(windows: Sequence[_Window]) -> list[list[str]]:
    """The tmux commands that close ``windows``: a window of the run's own whole, one taken
    over from an earlier supervisor pane by pane (a pane the user opened there keeps it)."""
    return [args for w in windows for args in (
        [["kill-pane", "-t", pane] for pane in sorted(w.panes)] if w.taken_from is not None
        else [["kill-window", "-t", w.id]])]


def _command_line(socket: str, commands: list[list[str]]) -> str:
    """``commands`` as one line a person types in any terminal (not only one inside this
    server: its socket named), separated by tmux's ``;``."""
    words = ["tmux", "-S", socket]
    for i, args in enumerate(commands):
        words += ([";"] if i else []) + args
    return quoting.shell_line(words)


class TmuxBackend:
    name = "tmux"

    # a worker's output reaches its log after its end (``_log_copied``, in ``ended``)
    output_copied_after_end = True

    def __init__(self, env: Mapping[str, str], *, inside: bool, close_session: bool) -> None:
        self.env = dict(env)
        self.inside = inside
        self.close_session_at_end = close_session
        self.socket: str | None = None  # the server's socket inside tmux; else tmux's default
        self.started = False  # the server was reached
        self.has_panes = False  # opened (``open``) or adopted: ``panes`` is there
        self.session_id = ""
        self.session_name = ""
        self.created_session = False
        self.attach_argv: list[str] | None = None
        self.windows: list[_Window] = []
        self.slot_of: dict[str, int] = {}  # our panes' slots (the board's is 0), for their order
        self.socket_path = ""
        self.alive = True
        self.closed = False  # close() closed the session or the windows
        self.client = TmuxClient(self.env)  # its socket: set once known (open, at)
        self.version = TmuxVersion("", None)  # the server's tmux, asked by open()
        self.waiting_panes: set[str] = set()  # running workers' panes that wait for input
        self.board_pane = ""
        self.gate = _StartGate()  # held from ``open`` (or ``launch``) to ``launch_seen``
        self.piped_panes: set[str] = set()  # panes opened here (their copiers started by tmux), till they end
        self.elsewhere: list[tuple[str, list[str]]] = []  # a retry's: the run's windows in other servers

    # ----- set-up ------------------------------------------------------------------------

    def open(self, ctx: RunContext) -> None:
        self.ctx = ctx
        s = ctx.settings
        self.live = s.ui == "live"
        self.panes: PaneLifecycle[str] = PaneLifecycle.for_run(ctx, close=self._kill_pane)
        self.has_panes = True
        if self.inside:
            self.socket = self.client.socket = self.env.get("TMUX", "").split(",")[0] or None
        self.version = self._checked_version(ctx)
        # No ``start-server`` first: a server with no session exits at once, and a
        # ``new-session`` racing that exit fails ("server exited unexpectedly"); new-session
        # starts its own server, and the other calls need one that already runs.
        self.started = True
        name = names.window(ctx.run_id)
        # Every pane command goes to tmux as its argv, never as one line: tmux runs a one-word
        # command through the user's default-shell, which may be nologin (a service account
        # with no SHELL), fish or anything else; an argv it executes itself.
        board = ctx.renderer_argv("board")
        # A live board's start (a Python process: 0.2 s of CPU) would take what the first
        # batch's invocations need: it waits at the start gate, held until that batch has
        # opened — or BOARD_GATE_WAIT, when no batch comes (nothing to run, dispatch held).
        if self.live and self.gate.hold(self.gate_path):
            board = ["/bin/sh", "-c", f'{self._at_gate(BOARD_GATE_WAIT)}; exec "$@"', "sh", *board]
        try:
            self._open_session(ctx, name, board)
        except BaseException:
            self.gate.release()
            raise

    def _open_session(self, ctx: RunContext, name: str, board: list[str]) -> None:
        """``open``'s work: the session (or the user's), the first window with the board."""
        s = ctx.settings
        if self.inside and not s.session:
            pane = self.env.get("TMUX_PANE", "")
            self.session_id = self._answer("display-message", "-p", "-t", pane, "#{session_id}")[0]
            window = self._answer("new-window", "-d", "-P", "-F", "#{window_id}", "-t", f"{self.session_id}:",
                                "-n", quoting.tmux_expanded(name), *board)[0]
        elif s.session and self._has_session(s.session):
            self.session_id = s.session
            window = self._answer("new-window", "-d", "-P", "-F", "#{window_id}", "-t", f"{s.session}:",
                                "-n", quoting.tmux_expanded(name), *board)[0]
        else:
            session = s.session or name
            # Panes need no cwd (wrappers change to their task's cwd themselves, renderers take
            # absolute paths), and ours may hold anything, a newline included: the session
            # starts at /.
            try:
                self.session_id, window = self._answer(
                    "new-session", "-d", "-P", "-F", "#{session_id} #{window_id}", "-s",
                    quoting.tmux_expanded(session), "-n", quoting.tmux_expanded(name), "-x", str(SESSION_SIZE[0]),
                    "-y", str(SESSION_SIZE[1]), "-c", "/", *board, fields=2)
            except BackendError as e:
                # A retry finds the session this run made at its start and left at its end (as
                # sessions stay): its new panes go there, in a window of their own.
                if s.session or "duplicate session" not in e.message or not self._has_session(name):
                    raise
                self.session_id = self._answer("display-message", "-p", "-t", f"={name}:", "#{session_id}")[0]
                window = self._answer("new-window", "-d", "-P", "-F", "#{window_id}", "-t", f"{self.session_id}:",
                                    "-n", quoting.tmux_expanded(name), *board)[0]
            self.created_session = True  # (the run's own, found again: as if made now)
        self.session_name = self._answer("display-message", "-p", "-t", self.session_id, "#{session_name}")[0]
        self._add_window(window, name)
        self.board_pane = board_pane = self._answer("display-message", "-p", "-t", window, "#{pane_id}")[0]
        self._set_titles({board_pane: names.board_title(ctx.run_id)})
        self._tmux("set-option", "-p", "-t", board_pane, "@zsw_short", title_text(ctx.run_id))
        self.windows[0].panes.add(board_pane)
        self.slot_of[board_pane] = 0
        # the server's pid too: a call it leaves unanswered is given up on once it is stopped
        pid, self.socket_path = self._answer("display-message", "-p", "#{pid} #{socket_path}", fields=2)
        socket = self.socket_path
        self.client.server_pid = int(pid) if pid.isdigit() else None
        if self.inside:  # --attach moves this client to the swarm's window (in whichever session it is)
            self.attach_argv = ["tmux", "-S", socket, "switch-client", "-t", window]
        elif self.created_session:
            self.attach_argv = ["tmux", "-S", socket, "attach", "-t", self.session_name]
        ctx.notice(where_panes_are("tmux", ctx.paths))
        if not self.live:
            self._open_renderers(min(ctx.settings.jobs, self.panes.cap))

    # ----- a resumed run's: the windows its run left, found again (SPEC §8 resume) ----------

    @classmethod
    def at(cls, place: Mapping[str, Any], env: Mapping[str, str], *, close_session: bool) -> TmuxBackend:
        """The backend of a resumed run whose panes are where its snapshot recorded them
        (``place``, as ``place()`` gave it): its server's socket and its session. No call is made
        here (``session_alive`` asks the server), and nothing is ever opened (``adopt``)."""
        backend = cls(env, inside=False, close_session=close_session)
        backend.socket = backend.socket_path = backend.client.socket = str(place["socket"])
        backend.session_id, backend.session_name = str(place["session_id"]), str(place["session"])
        backend.created_session = place.get("created_session") is True
        backend.started = True
        return backend

    def adopt(self, ctx: RunContext, place: Mapping[str, Any], panes: Sequence[RunPane]) -> None:
        """Find the run's windows again (those of ``place`` that still carry its ``@zsw_run``)
        and take the panes of its generations they hold into the pane lifecycle: running ones
        titled ``running`` and no window marked waiting (the input watch marks them again),
        ended ones closed or kept as their outcome says. ``BackendError`` when the session or
        every window is gone."""
        self.ctx = ctx
        self.live = ctx.settings.ui == "live"
        self.panes = PaneLifecycle.for_run(ctx, close=self._kill_pane)
        self.has_panes = True
        # asked here, not by session_alive(), so that a tmux that cannot be run says so itself
        if not self.client.has_session(self.session_id):
            self.alive = False
            raise BackendError("session_missing", f"tmux: the run's session {self.session_name!r} is gone")
        for i, window in enumerate(str(w) for w in place.get("windows") or []):
            rows = self.client.panes(window)
            if not rows or rows[0].run != ctx.run_id:
                continue  # closed, or another window under a recycled id (a new server)
            shown = names.parse(rows[0].window_name, [ctx.run_id])
            overflow = shown.overflow if shown else i + 1 if i else None  # a name the user changed: by place
            w = _Window(window, names.window(ctx.run_id, overflow), capacity=0,
                        panes={row.id for row in rows}, shown_waiting=shown.waiting if shown else 0)
            self.windows.append(w)
            self.board_pane = self.board_pane or next((row.id for row in rows if row.short), "")
        if not self.windows:
            raise BackendError("tab_gone", f"tmux: the run's windows in session {self.session_name!r} are gone")
        self._adopt_panes(panes, set().union(*(w.panes for w in self.windows)))
        try:
            self._show_waiting()
        except BackendError:
            pass  # a mark is not worth a warning; a server that is gone is noticed elsewhere

    def _adopt_panes(self, panes: Sequence[RunPane], listed: set[str]) -> None:
        """Take the generations' panes of ``panes`` that tmux still lists (``listed``) into
        the pane lifecycle: an ended one kept or closed as its outcome says, a running one
        followed and titled ``running``."""
        running = {}
        for p in panes:
            if p.pane_id in listed:
                self.panes.adopt(p.pane_id, p.pane_id, p.req.task_name, p.status)
                if p.status is None:
                    running[p.pane_id] = p.req.title("running")
        try:
            self._set_titles(running)
        except BackendError:
            pass  # a title is not worth a warning; a server that is gone is noticed elsewhere

    # ----- a retry's: what earlier supervisors of the run left beside its new window ---------

    def take_over(self, place: Mapping[str, Any] | None, panes: Sequence[RunPane]) -> None:
        """After ``open``, for a ``retry``: the windows earlier supervisors of this run left in
        this server (their ``@zsw_run`` names it; a run id is never another run's) join the
        run's, so that what they hold lives on as in one run. Their boards and slot views are
        stale (this supervisor has its own): closed. Their worker panes (``panes``, the run's
        generations' as its records name them, in the order they ended) are taken into the
        pane lifecycle as ``adopt`` takes a resumed run's: a failure kept (within
        ``keep_failed_panes``, the oldest closing first) until its task succeeds, a worker
        still running followed to its end and retitled. A pane of no generation of the run
        (the user's) stays as it is. Windows left in another server (``place``'s socket, not
        this one's) cannot be reached from here: ``leftover_hint`` names them."""
        ours = {w.id for w in self.windows}
        rows = [row for row in self.client.panes() or [] if row.run == self.ctx.run_id and row.window_id not in ours]
        sessions = {w.id: w.session_id for w in self.client.windows()}
        generations = {p.pane_id: p for p in panes}
        stale: list[str] = []
        windows: dict[str, _Window] = {}
        for row in rows:
            w = windows.get(row.window_id)
            if w is None:
                shown = names.parse(row.window_name, [self.ctx.run_id])
                w = windows[row.window_id] = _Window(
                    row.window_id, names.window(self.ctx.run_id, shown.overflow if shown else None), capacity=0,
                    shown_waiting=shown.waiting if shown else 0, taken_from=sessions.get(row.window_id, ""))
            if row.short or (row.id not in generations and names.is_slot_view_title(row.title)):
                stale.append(row.id)  # an earlier supervisor's board or slot view
            elif row.id in generations:
                w.panes.add(row.id)  # (any other pane there is the user's: never touched)
        self.windows += [w for w in windows.values() if w.panes]
        for pane in stale:
            self._kill_pane(pane)
        self._adopt_panes(panes, set().union(*(w.panes for w in windows.values())))
        self.elsewhere = self._left_elsewhere(place)

    def _left_elsewhere(self, place: Mapping[str, Any] | None) -> list[tuple[str, list[str]]]:
        """The windows of this run earlier supervisors left in other tmux servers (the recorded
        ``place``, and the earlier places it carries) that are still there: each server's
        socket and their ids."""
        found: dict[str, tuple[str, list[str]]] = {os.path.realpath(self.socket_path): ("", [])}
        for earlier in places_of(place, "tmux"):
            socket = earlier.get("socket")
            if not isinstance(socket, str) or not socket or os.path.realpath(socket) in found:
                continue
            try:
                there = [row.id for row in TmuxClient(self.env, socket).windows() if row.run == self.ctx.run_id]
            except BackendError:
                continue
            found[os.path.realpath(socket)] = (socket, there)
        return [(socket, there) for socket, there in found.values() if there]

    def _add_window(self, window_id: str, name: str, size: tuple[int, int] | None = None) -> _Window:
        """Take the window ``window_id`` on: its options set now, or (its ``size`` given: an
        overflow window, made for panes) in the invocation that opens its first panes."""
        if size is None:
            width, height = (int(v) for v in self._answer("display-message", "-p", "-t", window_id,
                                                          "#{window_width} #{window_height}", fields=2))
        else:
            width, height = size
        options = [("pane-border-status", "top"), ("pane-border-format", BORDER_FORMAT),
                   ("remain-on-exit", "on"), ("automatic-rename", "off"), ("allow-rename", "off"),
                   (names.RUN_OPTION, self.ctx.run_id)]
        commands = [["set-option", "-w", "-t", window_id, key, value] for key, value in options]
        if self.version.has_remain_on_exit_format:  # else tmux prints its fixed "Pane is dead" line
            commands.append(["set-option", "-w", "-t", window_id, "remain-on-exit-format", ""])
        if size is None:
            self._chain(commands)
        # A live worker is never made narrower than min_pane_width: agents, compilers and test
        # runners wrap or cut their output below it; panes that would be go to another window.
        min_width = self.ctx.settings.min_pane_width if self.live else MIN_TILE[0]
        w = _Window(window_id, name, tile_capacity(width, height, min_width), setup=[] if size is None else commands)
        self.windows.append(w)
        return w

    def _has_session(self, name: str) -> bool:
        return self.client.has_session(f"={name}")

    def _checked_version(self, ctx: RunContext) -> TmuxVersion:
        """The tmux this run uses, asked once: too old to work (``BackendError``), or old
        enough for one warning."""
        version = self.client.version()
        if version.too_old:
            need = ".".join(map(str, WORKS_SINCE))
            raise BackendError("multiplexer_too_old", f"tmux {version.text} is too old: zellij-swarm needs tmux "
                                                      f"{need} or later (its pane titles are pane options)")
        if version.untested_old:
            ctx.warn("tmux_untested", f"tmux {version.text} is older than 3.2 (zellij-swarm is tested with tmux 3.3): "
                                      "it runs, untested, and a pane that ended shows tmux's \"Pane is dead\" line")
        return version

    def _open_renderers(self, count: int) -> None:
        """Compact mode: one ``slot-view`` pane per visible slot, for the whole run."""
        _, failed = self._split([_NewPane(slot, self.ctx.renderer_argv("slot-view", str(slot)),
                                          names.slot_view_title(slot))
                                 for slot in range(1, count + 1)])
        if failed is not None:
            raise failed

    # ----- panes -------------------------------------------------------------------------

    def _window_with_room(self, besides: _Window | None = None) -> _Window | None:
        """A window of the run's (other than ``besides``) with room for a pane, if any."""
        return next((w for w in self.windows if w is not besides and len(w.panes) < w.capacity), None)

    def _new_window(self) -> tuple[str, list[str]]:
        """The name of an overflow window, one no window of the run holds, and the command that
        makes it with a placeholder pane; that prints what ``_took_window`` reads."""
        taken = {w.name for w in self.windows}
        name = next(n for k in itertools.count(len(self.windows) + 1) if (n := names.window(self.ctx.run_id, k))
                    not in taken)
        return name, ["new-window", "-d", "-P", "-F", "#{window_id} #{pane_id} #{window_width} #{window_height}",
                      "-t", f"{self.session_id}:", "-n", quoting.tmux_expanded(name), "sleep", "2147483647"]

    def _took_window(self, name: str, printed: str) -> _Window | None:
        """The overflow window ``name`` made by ``_new_window``'s command, from what it printed
        (the line that starts with its ``@`` id); None when it printed none."""
        line = next((ln for ln in printed.splitlines() if ln.startswith("@")), None)
        words = line.split() if line else []
        if len(words) != 4:
            return None
        wid, placeholder, width, height = words
        w = self._add_window(wid, name, (int(width), int(height)))
        w.placeholder = placeholder
        return w

    def _panes_of(self, w: _Window) -> list[list[str]] | None:
        """``w``'s panes in tmux's order, each ``[pane id, "1" if active]``; None when the
        window is gone — tmux closes one whose last pane closed, or the user closed it."""
        try:
            return [ln.split() for ln in self._tmux("list-panes", "-t", w.id, "-F", "#{pane_id} #{pane_active}").lines]
        except BackendError:
            # the session's windows (a session that is gone raises: nothing is to be opened)
            if w.id in self._tmux("list-windows", "-t", self.session_id, "-F", "#{window_id}").lines:
                raise
            return None

    def _forget(self, w: _Window) -> None:
        """A window that is gone: never asked for room again (its panes went with it)."""
        self.windows.remove(w)
        for pane in w.panes:
            self.slot_of.pop(pane, None)

    def _split(self, items: list[_NewPane]) -> tuple[list[str | None], BackendError | None]:
        """Open one pane per item, in slot order (module docstring), with two tmux
        invocations per window touched (one that reads its panes' order, or the one that made
        it), the second opening the window's panes whole — each pane's title and log set right
        after its split — cut in more where tmux's message limit needs it; returns the pane
        id of each item, and the error that stopped the rest if one did (a pane a failed
        invocation opened before it failed is there, its wrapper started: its id is given).

        A ``split-window`` without ``-d`` makes its pane the current one for the commands
        that follow it in the same invocation, so those set its title and its ``pipe-pane``
        without its id, and (tmux reads a pane's output only between invocations) the log
        has all of it; then the pane that was active is again."""
        opened: dict[int, str] = {}  # index in items -> pane id
        pending = list(range(len(items)))
        try:
            while pending:
                if (w := self._window_with_room()) is None:
                    name, command = self._new_window()
                    w = self._took_window(name, self._tmux(*command).stdout)
                    if w is None:
                        raise BackendError("pane_call_failed", "tmux new-window: no answer (its server or "
                                                               "session gone?)")
                # a window just made holds its placeholder; else tmux's own order, not ours: the
                # user may have closed or moved panes meanwhile, or the window
                listed = [[w.placeholder or "", "1"]] if w.setup else self._panes_of(w)
                if listed is None:
                    self._forget(w)
                    continue
                group = pending[:w.capacity - len(w.panes)]
                pending = pending[len(group):]
                # the panes that go further need a window no window has room for: made in the
                # same invocation as this window's panes (one tmux client less, 7 ms here)
                more = bool(pending) and self._window_with_room(besides=w) is None
                self._open_in(w, listed, [(i, items[i]) for i in group], opened, new_window=more)
        except BackendError as e:
            return [opened.get(i) for i in range(len(items))], e
        return [opened[i] for i in range(len(items))], None

    def _open_in(self, w: _Window, listed: list[list[str]], group: list[tuple[int, _NewPane]],
                 opened: dict[int, str], *, new_window: bool = False) -> None:
        """``_split``'s work in one window: the panes of ``group`` opened in ``w`` (whose panes
        are ``listed``), each recorded in ``opened`` as tmux says it opened it — and, with
        ``new_window``, an overflow window made after them (taken on by ``_took_window``)."""
        order = [pane for pane, _ in listed]
        active = next((pane for pane, on in listed if on == "1"), None)
        blocks: list[tuple[int | None, list[list[str]]]] = [(None, w.setup)] if w.setup else []
        blocks_made_window = bool(w.setup)  # (its only pane, the placeholder, goes in it)
        w.setup = []
        appended: list[tuple[int, _NewPane]] = []
        for i, item in sorted(group, key=lambda member: member[1].slot):
            later = next((p for p in order if self.slot_of.get(p, 0) > item.slot), None)
            if later is None:
                appended.append((i, item))
                continue
            blocks.append((i, self._split_commands(item, w, "-b", "-t", later)))
        for i, item in reversed(appended):  # each right after the last pane: the first one last
            blocks.append((i, self._split_commands(item, w, "-t", order[-1])))
        tail = []
        if w.placeholder:
            tail += [["kill-pane", "-t", w.placeholder], ["select-layout", "-t", w.id, "tiled"]]
            active = None if active == w.placeholder else active
            w.placeholder = None
        if active and not blocks_made_window and self.version.runs_tmux_commands:
            # The pane the user has selected as the batch begins, read in its own invocation
            # (``active`` was read in an earlier one: a pane selected in between lost the focus)
            blocks.insert(0, (None, [["set-option", "-F", "-w", "-t", w.id, FOCUS_OPTION, "#{pane_id}"]]))
            tail.append(["run-shell", "-C", "-t", w.id, f"select-pane -t #{{{FOCUS_OPTION}}}"])
        else:
            tail.append(["select-pane", "-t", active or f"{w.id}.{{top-left}}"])
        blocks.append((None, tail))
        made = self._new_window() if new_window else None
        if made is not None:
            blocks.append((None, [made[1]]))
        for piece in _pieces(blocks):
            commands = [c for _, block in piece for c in block]
            placed = [i for i, _ in piece if i is not None]
            failed: BackendError | None = None
            try:
                printed = self._chain(commands).stdout
            except BackendError as e:
                printed, failed = e.stdout, e
            ids = [ln for ln in printed.splitlines() if ln.startswith("%")]
            if len(ids) > len(placed) or (failed is None and len(ids) != len(placed)):
                raise BackendError("pane_id_missing",
                                   f"tmux split-window printed {len(ids)} pane ids for {len(placed)} panes")
            for i, pane in zip(placed, ids, strict=False):  # those opened before a failure, too
                w.panes.add(pane)
                self.slot_of[pane] = next(item.slot for j, item in group if j == i)
                opened[i] = pane
            if failed is not None:
                raise failed
        if made is not None:  # the last command of the last invocation
            self._took_window(made[0], printed)

    def _split_commands(self, item: _NewPane, w: _Window, *where: str) -> list[list[str]]:
        """The commands that open ``item``'s pane in ``w`` (split at ``where``) and set it up."""
        return [["split-window", *where, "-P", "-F", "#{pane_id}", *item.argv],
                ["set-option", "-p", "@zsw_title", title_text(item.title)],
                *([["pipe-pane", self._pipe_command(item.log)]] if item.log is not None else []),
                ["select-layout", "-t", w.id, "tiled"]]

    def _set_titles(self, titles: Mapping[str, str]) -> None:
        if titles:
            self._chain([["set-option", "-p", "-t", pane, "@zsw_title", title_text(text)]
                         for pane, text in titles.items()])

    def _kill_pane(self, pane: str) -> None:
        for w in self.windows:
            w.panes.discard(pane)
        self.slot_of.pop(pane, None)
        try:
            self._tmux("kill-pane", "-t", pane)
        except BackendError:
            pass  # already gone: the user closed it, or the window went with it

    def shows(self, slot: int) -> bool:
        return self.live and self.alive and slot <= self.panes.cap

    def pane_mode(self, slot: int) -> PaneMode | None:
        if not self.shows(slot) or not self.panes.reserve():
            return None
        return PaneMode("TMUX_PANE", "", self.ctx.paths.saved_env, before_leader=self._at_gate(),
                        read_to_end=READ_TO_END)

    def _at_gate(self, at_most: float | None = None) -> str:
        """Shell that waits at the start gate (``gate_path``) until ``launch`` lets it go — for
        ``at_most`` seconds, when given. Without ``flock`` (or on a filesystem without it) it
        goes on at once: only sooner."""
        bound = f"-w {at_most:g} " if at_most is not None else ""
        return f"flock -s {bound}{quoting.shell_word(str(self.gate_path))} true 2>/dev/null"

    @property
    def gate_path(self) -> Path:
        """The start gate of a batch's panes: ``launch`` holds it (``flock``, exclusive) while
        it opens them and until the supervisor has recorded them (``launch_seen``), and each
        pane's wrapper waits for it (shared) before it starts its pane leader — a Python
        process, whose start would take the CPU the tmux invocations still opening the batch
        need (two cores: 32 of them made a batch take twice as long), and then the
        supervisor's. A live run's board waits there too, once: ``open`` holds the gate until
        the first batch has opened. A lock, not a FIFO: it cannot be missed by a pane that
        reaches it late, and it is released by the kernel if the supervisor dies holding it."""
        return self.ctx.paths.dir / "panes.gate"

    @staticmethod
    def _pipe_command(log: Path) -> str:
        """The ``pipe-pane`` command that copies a pane's output to ``log``, its pid written
        beside it once its output is ``log`` (``LOG_COPIER``: ``_log_copied`` waits for it, and
        reads a pid whose output is not ``log`` as a copier that has ended). tmux runs strftime
        over it, format-expands it, then runs it with ``sh -c``: the paths are encoded for that
        shell, then for tmux."""
        copier = quoting.shell_word(str(log.with_name(generation_files.LOG_COPIER)))
        return quoting.tmux_time_expanded(f"exec >>{quoting.shell_word(str(log))}; echo $$ >{copier}; exec cat")

    def _log_copied(self, pane: str, log: Path, *, piped: bool) -> None:
        """Wait until everything the pane's worker wrote is in ``log`` (at most ``LOG_COPY_WAIT``).

        tmux marks a pane dead only once it has read its terminal empty and sent its pipe all
        it had (``window_pane_destroy_ready``); but it keeps the pipe of a dead pane
        (``remain-on-exit``) open, and refuses to close it ("target pane has exited"), so the
        copier never sees its input end while the pane stays. The copy is complete when the
        pane is dead (or gone) and the copier has read its socket empty and sleeps on it — or
        has ended, the pane gone. The copier is a process tmux starts beside the pane, which a
        loaded machine may run only after the worker has ended: a pane this backend ``piped``
        waits for its copier's pid. One adopted with no copier (a run of an earlier version)
        has nothing to wait for."""
        deadline = time.monotonic() + LOG_COPY_WAIT
        copier_file = log.with_name(generation_files.LOG_COPIER)
        while True:
            try:
                copier = int(copier_file.read_bytes().strip())
                break
            except (OSError, ValueError):  # not there yet, or its pid half written
                if not piped or time.monotonic() >= deadline:
                    return
                time.sleep(0.002)
        while not self._pane_dead(pane) and time.monotonic() < deadline:
            time.sleep(0.005)  # (each look is a tmux call)
        while not _copied(copier, log) and time.monotonic() < deadline:
            time.sleep(0.002)

    def _pane_dead(self, pane: str) -> bool:
        """Whether the pane's worker has ended and tmux has read all of its output: the pane
        is dead, or gone. (tmux 3.3a's ``display-message -t`` of a pane that is gone exits 0,
        printing its format for no pane: the pane's id in it tells.)"""
        res = self._tmux("display-message", "-p", "-t", pane, "#{pane_id} #{pane_dead}", check=False)
        return res.returncode != 0 or res.lines[:1] != [f"{pane} 0"]

    def pane_listed(self, pane_id: str | None) -> bool | None:
        """tmux names a pane it lists (a dead one too: ``remain-on-exit``); for one it does not,
        3.3a prints the format with no pane in it, and a server that is gone says so."""
        if pane_id is None or not self.started:
            return None
        try:
            res = self._tmux("display-message", "-p", "-t", pane_id, "#{pane_id}|", check=False)
        except BackendError:  # no answer in time: a busy server says nothing either way
            return None
        return res.returncode == 0 and res.lines[:1] == [f"{pane_id}|"]

    def pane_exited(self, pane_id: str | None) -> PaneExited | None:
        """tmux keeps a pane whose first process ended (``remain-on-exit``), dead — its
        terminal closed: ``#{pane_dead}`` is tmux's descriptor of it closed — with how that
        process ended; a pane closed by hand (``kill-pane``) is gone. One still listed alive
        is looked at again for ``PANE_DEAD_WAIT``, and one dead with no status yet for
        ``PANE_STATUS_WAIT``: dead is its terminal closed (format.c: ``fd == -1``), how its
        first process ended is there once tmux has reaped it (``PANE_STATUSREADY``), which
        can come seconds later."""
        if pane_id is None or not self.started:
            return None
        deadline = time.monotonic() + PANE_DEAD_WAIT
        awaiting_status = False
        while True:
            try:
                res = self._tmux("display-message", "-p", "-t", pane_id,
                                 "#{pane_id}|#{pane_dead}|#{pane_dead_signal}|#{pane_dead_status}|#{pane_pid}",
                                 check=False)
                row = res.lines[0].split("|") if res.returncode == 0 and res.lines else []
            except BackendError:  # no answer in time (a busy server): asked again
                row = None
            if row is not None and (len(row) != 5 or row[0] != pane_id):
                return None  # gone (tmux 3.3a prints the format for no pane, exit 0)
            if row is not None and row[1] == "1":
                _, _, number, status, pid = row  # (no ``pane_dead_signal`` before 3.3: the status only)
                if number.isdigit():
                    return PaneExited(code=128 + int(number))
                if status.isdigit():
                    return PaneExited(code=int(status))
                # Dead before reaped: a leader's kill read "ended", its signal lost — tmux left
                # it a zombie for 20 s and more on a loaded machine (3 runs in 15). The kernel
                # has its status; and a tmux with no signal format never says more.
                code = procs.zombie_code(int(pid)) if pid.isdigit() else None
                if code is not None:
                    return PaneExited(code=code)
                if not self.version.has_dead_signal:
                    return PaneExited(code=None)
                if not awaiting_status:
                    awaiting_status, deadline = True, time.monotonic() + PANE_STATUS_WAIT
                elif time.monotonic() >= deadline:
                    return PaneExited(code=None)
            elif time.monotonic() >= deadline:
                return None
            time.sleep(0.05)

    def launch(self, batch: list[LaunchRequest]) -> list[PaneResult]:
        """The batch's panes, their leaders held at the start gate until ``launch_seen``
        (or a failure here)."""
        self.panes.launched(len(batch))
        self.gate.hold(self.gate_path)
        try:
            opened, failed = self._split([_NewPane(r.slot, r.pane_argv(read_to_end=READ_TO_END), r.title("running"),
                                                   r.gen.output) for r in batch])
        except BaseException:
            self.gate.release()
            raise
        results: list[PaneResult] = []
        for pane in opened:
            if pane is None:
                assert failed is not None
                results.append(LaunchFailed(failed.code, str(failed)))
            else:  # opened, before or after a failure of the rest: the run's, as any other
                self.panes.opened(pane, pane)
                self.piped_panes.add(pane)
                results.append(PaneOpened(pane))
        return results

    def launch_seen(self) -> None:
        self.gate.release()  # (on the supervisor's loop: ``_StartGate`` has its lock)

    def ended(self, req: LaunchRequest, pane_id: str | None, status: str, label: str) -> None:
        if not self.has_panes:  # not opened yet: a retry's restore of generations that ended before it
            return
        if pane_id in self.waiting_panes:
            self._mark_waiting(pane_id, False)
        pane = self.panes.pop(pane_id) if pane_id is not None else None
        if pane is None:
            if status == "succeeded":
                self.panes.succeeded(req.task_name)
            return
        piped = pane in self.piped_panes
        self.piped_panes.discard(pane)
        self._log_copied(pane, req.gen.output, piped=piped)
        if status != "cancelled":
            try:
                self._set_titles({pane: req.title(label)})
            except BackendError:
                return
        self.panes.settle(pane, status, req.task_name)

    def waiting(self, req: LaunchRequest, pane_id: str | None, waiting: bool) -> None:
        if not self.has_panes:  # not opened yet: a retry's restore of generations that ended before it
            return
        if pane_id is None:  # a compact or headless worker: the run's window counts it, it has no title
            self._mark_waiting(str(req.gen.dir), waiting)
            return
        if pane_id not in self.panes.running:
            return  # its worker ended: the title says how
        try:
            self._set_titles({pane_id: req.title("waiting for input" if waiting else "running")})
        except BackendError:
            pass  # a title is not worth a warning; a server that is gone is noticed elsewhere
        self._mark_waiting(pane_id, waiting)

    def _mark_waiting(self, pane_id: str, waiting: bool) -> None:
        """Rename the windows to show how many tasks wait — the first window, the run's, all of
        the run's; an overflow window its own — and ring on a new wait."""
        if (pane_id in self.waiting_panes) == waiting:
            return
        (self.waiting_panes.add if waiting else self.waiting_panes.discard)(pane_id)
        try:
            self._show_waiting()
            if waiting:
                self._ring()
        except BackendError:
            pass  # a mark is not worth a warning; a server that is gone is noticed elsewhere

    def _show_waiting(self) -> None:
        """Each window's name with the count it should show, where it shows another."""
        for i, w in enumerate(self.windows):
            count = len(self.waiting_panes) if i == 0 else len(w.panes & self.waiting_panes)
            if count != w.shown_waiting:
                self._tmux("rename-window", "-t", w.id, quoting.tmux_expanded(names.marked(w.name, count)))
                w.shown_waiting = count

    def _ring(self) -> None:
        """A BEL on the board's terminal: tmux sets the bell flag of its window."""
        tty = self._answer("display-message", "-p", "-t", self.board_pane, "#{pane_tty}")[0]
        try:
            fd = os.open(tty, os.O_WRONLY | os.O_NOCTTY | os.O_NONBLOCK)
        except OSError:
            return
        try:
            os.write(fd, b"\a")
        except OSError:
            pass  # its output is full: the name still says it
        finally:
            os.close(fd)

    def abandon(self, pane_id: str | None, req: LaunchRequest) -> None:
        if not self.has_panes:  # not opened yet: a retry's restore of generations that ended before it
            return
        if pane_id is not None:
            if pane_id in self.waiting_panes:
                self._mark_waiting(pane_id, False)
            self.panes.pop(pane_id)
            self._kill_pane(pane_id)

    def session_alive(self) -> bool:
        if self.alive and self.started:
            self.alive = self._session_there()
        return self.alive

    def _session_there(self) -> bool:
        """Whether the run's session is there, false only on evidence: tmux says it is not,
        or its server's socket refuses connections. A server that gives no answer but holds
        its socket is asked again until ``SETTLE`` has passed (one that is dying closes it
        within), then counts as there: taken for gone, its panes' workers would be recorded
        lost and run again."""
        def answer() -> bool | None:
            try:
                return self.client.has_session(self.session_id)
            except BackendError:  # no answer
                return None

        return alive_unless_gone(answer, lambda: not self.client.listening(), settle=SETTLE, every=0.1,
                                 server=self.client.server_pid)

    def attach_command(self) -> tuple[list[str], dict[str, str]] | None:
        return (self.attach_argv, self.env) if self.attach_argv else None

    def close(self, *, cancelled: bool, failed: bool = True) -> None:
        self.gate.release()
        if not self.started or not self.session_alive():
            return
        self.panes.finish(cancelled=cancelled)
        if self.created_session:  # kept for the user to attach and look (SPEC §2)
            if self.close_session_at_end:
                self._tmux("kill-session", "-t", self.session_id, check=False)
                self._close([w for w in self.windows if w.taken_from not in (None, self.session_id)])
                self.closed = True
            elif not self.client.has_session(self.session_id):
                self.closed = True  # its last pane closed (the others by hand): tmux ended it, nothing stays
        elif self.close_session_at_end or not failed:  # the user's session: leave nothing behind
            self._close(self.windows)
            self.closed = True
        # kept, to look at what failed: those the user closed meanwhile are not named as staying
        if not self.closed:
            there = set(self._tmux("list-windows", "-a", "-F", "#{window_id}", check=False).lines)
            for w in [w for w in self.windows if w.id not in there]:
                self._forget(w)

    def _close(self, windows: Sequence[_Window]) -> None:
        """Close ``windows``: the run's own whole, a taken-over one's panes of the run (one call
        each: in a chain, one already gone would stop the rest)."""
        for args in _closing(windows):
            self._tmux(*args, check=False)

    def place(self) -> dict[str, Any] | None:
        if not self.started or not self.windows:
            return None
        return {"backend": "tmux", "socket": self.socket_path, "session": self.session_name,
                "session_id": self.session_id, "windows": [w.id for w in self.windows],
                "created_session": self.created_session,
                **({EARLIER: [{"backend": "tmux", "socket": socket, "windows": there}
                              for socket, there in self.elsewhere]} if self.elsewhere else {})}

    def leftover_hint(self) -> str | None:
        said = [here] if (here := self._leftover_here()) is not None else []
        for socket, windows in self.elsewhere:
            kill = _command_line(socket, [["kill-window", "-t", window] for window in windows])
            what = "window stays" if len(windows) == 1 else "windows stay"
            said.append(f"the run's earlier {what} in another tmux server: close with {kill}")
        return "; ".join(said) or None

    def _leftover_here(self) -> str | None:
        if not self.started or self.closed or not self.alive or not self.windows:
            return None
        # tmux closed those whose panes all closed
        staying = [w for w in self.windows if w.panes and (not self.created_session or w.taken_from
                                                               not in (None, self.session_id))]
        said = []
        if self.created_session:
            # "=": that very name — tmux takes a bare one as a prefix, and killed `proj-old` for `proj`
            kill = ["tmux", "-S", self.socket_path, "kill-session", "-t", f"={self.session_name}"]
            said.append(f"tmux session {self.session_name!r} stays: close it with {quoting.shell_line(kill)}")
        if staying:
            windows = "window stays" if len(staying) == 1 else "windows stay"
            what = "the run's earlier panes in another session stay" if self.created_session else \
                f"the swarm's {windows}"
            said.append(f"{what}: close with {_command_line(self.socket_path, _closing(staying))}")
        return f"{'; '.join(said)}{or_prune(self.ctx.paths)}" if said else None

    def _tmux(self, *args: str, check: bool = True) -> external.CmdResult:
        return self._chain([args], check=check)

    def _answer(self, *args: str, fields: int = 1) -> list[str]:
        """What a tmux command that prints one line (``-P``, ``display-message -p``) printed:
        the line, or its ``fields`` words (the last one the rest of the line). A server or
        session that went meanwhile can leave it empty: ``pane_call_failed``, not an
        IndexError in the middle of opening the run's window."""
        lines = self._tmux(*args).lines
        words = lines[0].split(None, fields - 1) if lines else []
        if len(words) != fields:
            raise BackendError("pane_call_failed", f"tmux {args[0]}: no answer (its server or session gone?)")
        return words if fields > 1 else [lines[0]]

    def _chain(self, commands: Sequence[Sequence[str]], *, check: bool = True) -> external.CmdResult:
        assert self.started
        return self.client.chain(commands, check=check)


def _copied(copier: int, log: Path) -> bool:
    """Whether the copier ``copier`` (``pipe-pane``'s ``cat``) has written to ``log`` all that
    tmux gave it, once tmux has given it all (the pane is dead): it sleeps — blocked reading
    its socket empty, as cat writes what it read before it reads again (data arriving wakes it
    at once; a write to a file does not sleep interruptibly) — or it is no longer that copier
    (ended, its pid another's)."""
    try:
        if not os.path.samestat(os.stat(f"/proc/{copier}/fd/1"), os.stat(log)):
            return True
    except OSError:
        return True
    return procs.state(copier) in (None, "S")
