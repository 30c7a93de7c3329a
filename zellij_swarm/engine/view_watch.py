"""The run's own view panes, and noticing when one dies (SPEC §2, §7 ``renderer_died``).

In compact mode the board and one ``slot-view`` per visible slot run in multiplexer panes for
the whole run; in live mode the board does. The swarm does not depend on them, but when one
dies — its process crashes or is killed, the user closes its pane, the whole session goes —
the run says so: one ``renderer_died`` warning per run, a ``view_gone`` event per view, and
the view's row in ``status`` turns ``gone``. The tasks are not touched.

How, the same for tmux and Zellij and with no polling of the multiplexer:

- **Registration** (renderer side). A renderer started as one of the run's panes (the
  ``--view-pane`` flag the supervisor puts in the pane's command) writes
  ``<run>/views/<name>.json`` = ``{"view", "kind", "slot", "pid", "start", "at"}`` before its
  first frame — atomically, mode 0600, through ``rundir.write_json_atomic``. ``name`` is
  ``board`` or ``slot-<n>``; ``start`` is the process's start time in clock ticks
  (``/proc/<pid>/stat``), so a reused pid is never taken for the renderer. A registration
  that cannot be written (a full state dir, already a ``state_dir_error`` of the run) leaves
  that view unfollowed; the renderer shows the run all the same. A renderer someone runs by
  hand (no ``--view-pane``) never registers: closing it is nobody's business.
- **Following** (supervisor side, ``ViewWatch``). ``views/`` is made when the run starts,
  before any pane, and watched with inotify; each registration is followed by a pidfd. Both
  live in an epoll of ``ViewWatch``'s own, whose one fd the supervisor puts in its selector;
  ``read()`` then says which views are gone (each once). A process that is gone before its
  pidfd is open (or whose start time differs) is gone too. When ``views/`` cannot be watched
  (no inotify instance or watch to be had) it is scanned every ``POLL_INTERVAL`` through the
  supervisor's timers, which wake the epoll through an eventfd; where the kernel gives no
  pidfd (``pid_end``), each scan looks for the views' processes in ``/proc`` instead, quietly
  (the generations' own followers say it once, ``pidfd_unavailable``).
- **A view that comes back.** A renderer re-run in its pane (Zellij's held pane, ENTER)
  registers again under the same name: the view is ``alive`` again with the new pid. Only
  the newest registration of a name is followed.
- **The end of the run is not a death.** Renderers end by themselves once ``state.json`` says
  the run is no longer running, which is written only after the supervisor's loop — the only
  reader of ``read()`` — has ended. A resumed run finds the registrations of the run's
  earlier life: those still alive are followed, the dead ones removed quietly (they ended
  with the interrupted run, or before it: not this supervisor's to report). ``once per run``
  is the supervisor's rule (no second ``renderer_died`` in its warnings); a resumed
  supervisor starts with no warnings, so it may say it once more. A ``retry`` follows none
  of them (``earlier=False``): its backend opens views of its own and closes the earlier
  supervisor's it finds (``take_over``) — their end is its doing, never a ``renderer_died``
  (*Decision*: closing a stale board raced the new one's registration, and was reported).

The ``views`` rows of a snapshot (``rows()``) are as the supervisor last saw them: in
``summary.json`` ``alive`` means alive when the run ended (renderers then end with it).
"""

from __future__ import annotations

import os
import selectors
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zellij_swarm import jsontext, pid_end
from zellij_swarm.config import state_dir
from zellij_swarm.records import rundir
from zellij_swarm.records.rundir import RunPaths
from zellij_swarm.watch import Inotify, Watcher

POLL_INTERVAL = 0.25  # seconds between scans of views/ when it cannot be watched
KINDS = ("board", "slot-view")
_WATCHER = object()  # epoll data: the inotify watcher of views/
_WAKE = object()  # epoll data: the eventfd a poll-fallback scan wakes us through


def view_name(kind: str, slot: int | None) -> str:
    return "board" if kind == "board" else f"slot-{slot}"


# ----- the renderer's side ------------------------------------------------------------------


@dataclass(frozen=True)
class Registration:
    """What a renderer started as one of the run's panes writes when it starts."""

    run: RunPaths
    kind: str  # "board" | "slot-view"
    slot: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS or (self.kind == "slot-view") != isinstance(self.slot, int):
            raise ValueError(f"no such view: {self.kind} {self.slot}")

    @property
    def name(self) -> str:
        return view_name(self.kind, self.slot)

    @property
    def path(self) -> Path:
        return self.run.views / f"{self.name}.json"

    def write(self, pid: int | None = None, *, now: float | None = None) -> bool:
        """Register process ``pid`` (default: this one) as this view; False when it cannot
        be (no ``views/``: the run's supervisor follows no views; or the state dir refuses)."""
        pid = os.getpid() if pid is None else pid
        record = {"view": self.name, "kind": self.kind, "slot": self.slot, "pid": pid,
                  "start": pid_end.start_ticks(pid), "at": time.time() if now is None else now}
        try:
            rundir.write_json_atomic(self.path, record)
        except OSError:
            return False
        return True


# ----- the supervisor's side ----------------------------------------------------------------


@dataclass(frozen=True)
class Gone:
    """A view whose renderer ended while the run went on."""

    name: str
    kind: str
    slot: int | None
    pid: int


@dataclass
class _View:
    name: str
    kind: str
    slot: int | None
    pid: int
    start: int | None
    registered_at: float
    pidfd: int | None = None
    polled: bool = False  # followed by a look at /proc on each scan: the kernel gives no pidfd
    gone_at: float | None = None

    def row(self) -> dict[str, Any]:
        return {"view": self.name, "kind": self.kind, "slot": self.slot, "pid": self.pid,
                "state": "alive" if self.gone_at is None else "gone",
                "registered_at": self.registered_at, "gone_at": self.gone_at}


class ViewWatch:
    """Follows the run's registered view panes; see the module docstring.

    ``fileno()`` goes in the supervisor's selector; when it is readable, ``read()`` returns
    the views found gone since the last call (each once). ``rows()`` is the ``views`` part of
    the run's snapshot. ``schedule(delay, fn)`` (the supervisor's timers) is used only when
    ``views/`` cannot be watched; ``watcher`` and ``clock`` are injectable for tests.
    """

    def __init__(self, run: RunPaths, *, schedule: Callable[[float, Callable[[], None]], object],
                 watcher: Callable[[], Watcher] = Inotify, clock: Callable[[], float] = time.time,
                 earlier: bool = True) -> None:
        """``earlier``: follow the registrations of the run's earlier life still alive (a
        resumed run's views go on); False for a ``retry``'s, which are never followed."""
        self.dir = run.views
        self.clock = clock
        self._schedule = schedule
        self._views: dict[str, _View] = {}
        self._earlier = earlier
        # with ``earlier`` False: (pid, start) of the registrations found as it began
        self._not_followed: set[tuple[int, int | None]] = set()
        self._sel = selectors.DefaultSelector()
        self._wake = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._sel.register(self._wake, selectors.EVENT_READ, _WAKE)
        self._watcher: Watcher | None = None
        self.polling = False
        self.closed = False
        try:
            rundir.make_private_dir(self.dir)
        except OSError:
            return  # a state dir that refuses views/ refuses every registration too
        try:
            self._watcher = watcher()
            self._watcher.add(self.dir)
            self._sel.register(self._watcher.fileno(), selectors.EVENT_READ, _WATCHER)
        except OSError:
            if self._watcher is not None:
                self._watcher.close()
                self._watcher = None
            self.polling = True
            self._schedule(POLL_INTERVAL, self._poll)
        self._scan([], startup=True)

    def fileno(self) -> int:
        return self._sel.fileno()

    def read(self) -> list[Gone]:
        """The views found gone since the last call; never blocks."""
        gone: list[Gone] = []
        rescan = False
        for key, _ in self._sel.select(0):
            if key.data is _WATCHER:
                assert self._watcher is not None  # registered only once there is one
                self._watcher.read()
                rescan = True
            elif key.data is _WAKE:
                try:
                    os.eventfd_read(self._wake)
                except BlockingIOError:
                    pass
                rescan = True
            else:
                self._ended(key.data, gone)
        if rescan:
            self._scan(gone)
        return gone

    def rows(self) -> list[dict[str, Any]]:
        """Every view registered during this supervisor's life: board first, then slots."""
        order = sorted(self._views.values(), key=lambda v: (v.kind != "board", v.slot or 0))
        return [v.row() for v in order]

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for v in self._views.values():
            self._unfollow(v)
        if self._watcher is not None:
            self._watcher.close()
        self._sel.close()
        os.close(self._wake)

    # ----- inside ------------------------------------------------------------------------

    def _poll(self) -> None:
        if not self.closed:
            os.eventfd_write(self._wake, 1)
            self._schedule(POLL_INTERVAL, self._poll)

    def _scan(self, gone: list[Gone], *, startup: bool = False) -> None:
        """Look at every registration in ``views/``; follow the new ones."""
        for view in list(self._views.values()):  # (one withdrawn leaves it)
            if view.polled and pid_end.ended(view.pid, view.start):
                self._ended(view, gone)
        try:
            names = sorted(os.listdir(self.dir))
        except OSError:
            return
        for file in names:
            if file.startswith(".") or not file.endswith(".json"):
                continue  # a registration being written (rundir's temp files start with a dot)
            reg = _read(self.dir / file)
            if reg is None or reg.name != file[:-len(".json")] or (reg.pid, reg.start) in self._not_followed:
                continue
            if startup and not self._earlier:
                self._not_followed.add((reg.pid, reg.start))
                continue
            cur = self._views.get(reg.name)
            if cur is not None and (cur.pid, cur.start) == (reg.pid, reg.start):
                continue
            if cur is not None:
                self._unfollow(cur)  # superseded: the newest registration of a view counts
            alive = self._follow(reg)
            if not alive and startup:
                (self.dir / file).unlink(missing_ok=True)  # from the run's earlier life, ended with it
                continue
            self._views[reg.name] = reg
            if not alive:
                self._gone(reg, gone)

    def _follow(self, view: _View) -> bool:
        """Follow the view's process — by a pidfd, or where the kernel gives none by a look
        at /proc on each scan (every ``POLL_INTERVAL``); False when it is gone (or its pid
        names another process now, or it is a zombie: checked after opening, so the pidfd is
        the registrant's)."""
        try:
            fd = pid_end.open_pidfd(view.pid)
        except pid_end.PidfdUnavailable:
            if pid_end.ended(view.pid, view.start):
                return False
            view.polled = True
            if not self.polling:
                self.polling = True
                self._schedule(POLL_INTERVAL, self._poll)
            return True
        if fd is None:
            return False
        if pid_end.ended(view.pid, view.start):  # a zombie (tmux keeps a dead pane's), or another process now
            os.close(fd)
            return False
        view.pidfd = fd
        self._sel.register(fd, selectors.EVENT_READ, view)
        return True

    def _ended(self, view: _View, gone: list[Gone]) -> None:
        self._unfollow(view)
        if not (self.dir / f"{view.name}.json").exists():
            # its registration was withdrawn: let go of on purpose (the backend made the
            # session it was in anew), no death of a view of the run
            del self._views[view.name]
            return
        self._gone(view, gone)

    def _gone(self, view: _View, gone: list[Gone]) -> None:
        view.gone_at = self.clock()
        gone.append(Gone(view.name, view.kind, view.slot, view.pid))

    def _unfollow(self, view: _View) -> None:
        view.polled = False
        if view.pidfd is not None:
            self._sel.unregister(view.pidfd)
            os.close(view.pidfd)
            view.pidfd = None


def _read(path: Path) -> _View | None:
    """A registration, or None when it is not one (absent, empty, damaged, foreign)."""
    try:
        rec = jsontext.loads(path.read_bytes() or b"null")
        kind, slot, pid = rec["kind"], rec.get("slot"), rec["pid"]
        start, at = rec.get("start"), rec.get("at")
    except (OSError, ValueError, TypeError, KeyError):
        return None
    if kind not in KINDS or not isinstance(pid, int) or pid <= 0 or isinstance(pid, bool):
        return None
    if kind == "slot-view" and not (isinstance(slot, int) and slot >= 1):
        return None
    if start is not None and not isinstance(start, int):
        return None
    return _View(view_name(kind, slot), kind, slot if kind == "slot-view" else None, pid, start,
                 float(at) if isinstance(at, (int, float)) else 0.0)


def describe(names: Iterable[str]) -> str:
    """``board``, ``slot-1``… as words: "the board and slot views 1, 3"."""
    names = list(names)
    slots = sorted(int(n.split("-", 1)[1]) for n in names if n.startswith("slot-"))
    parts = ["the board"] if "board" in names else []
    if slots:
        parts.append(("slot view " if len(slots) == 1 else "slot views ") + ", ".join(map(str, slots)))
    return " and ".join(parts) or "no view"


def message(gone: list[Gone], run_id: str, where: Path | None = None) -> str:
    """The text of the run's one ``renderer_died`` warning: the views found gone first (a
    session that ends takes the others with it a moment later; ``status`` lists them all)."""
    what = describe(g.name for g in gone)
    pids = ", ".join(str(g.pid) for g in gone)
    return (f"{what} ended while the run goes on (renderer pid {pids}: its pane was closed, its process "
            f"killed or its session ended); the tasks keep running. `{state_dir.command(where, 'status', run_id)}` "
            f"lists the views gone; `{state_dir.command(where, 'board', run_id)}` shows the run in any terminal")
