"""Zellij: one pane per worker generation (live) or one ``slot-view`` pane per slot (compact).

Where panes go (SPEC §2): inside Zellij, a tab of our own (``new-tab --layout``) in the
caller's session unless ``here``; outside, a detached session created with the swarm layout
(a dead session of that name is deleted first, readiness is awaited, the attach command is
printed). The layout is the board on the left and the slot panes stacked on the right.

The first batch goes in as one layout: compact mode creates the tab at ``open`` with the board
and every visible ``slot-view``; live mode creates it at the first ``launch`` with the board and
that batch's worker panes. Backfill panes are single ``zellij run`` calls placed next to a
pane of ours (``--stacked`` and ``--near-current-pane``, ``--no-focus`` where the version has
them; never ``--tab-id``, see ``_placement``). Every call goes through ``zellij_cli.Zellij.call``
on the one thread the supervisor gives its backend (``offloop``), so pane operations are
serialised, never block the supervisor's loop, and nothing ever focuses a pane. The launch
heartbeat is awaited by the supervisor, outside this path.

Versions (contract §0): from 0.44 ``run`` prints the pane id (when it prints nothing, the pane
is looked up by name in ``list-panes --json``) and panes are targeted with ``--pane-id``:
titles follow state, a successful pane closes after the hold, failed ones are kept. Before
0.44 there are no ids to learn from Zellij (``PaneOpened(None)``; the heartbeat tells), panes
open with close-on-exit and a title fixed at creation, and the wrapper keeps its pane itself
(``PaneMode.hold``): it sleeps through the hold after a success and for good after a failure —
in a fresh environment, so it is not taken for a process the run left behind. Such a pane is
closed by ending that sleep. A detached session before 0.44 has no client, so ``run`` places
no pane there: live mode degrades to compact (an error under require).

Reading order: the slot stack holds slot 1 first. The first batch's layout lists its panes by
slot; a backfill pane is stacked right after (Zellij puts it there) the open worker pane of
the highest slot not above its own, so the stack stays in slot order while such a pane is
open — when none is, it follows the first open one (the contract has no way to stack before
a pane).

The end (``close``): inside the user's session, the swarm's tab (or, with ``here``, its panes)
closes unless something failed — by closing each of our panes by id (from 0.44; Zellij drops a
tab whose last pane closes when a client is attached, and a detached one when a client next
attaches). ``close-tab`` cannot name a tab (it closes the client's current one), so before
0.44 the tab stays, and ``leftover_hint`` says so. A held pane shows its last screen and
Zellij's own ``EXIT CODE`` frame (contract §3.5), which covers no line of the screen.

Live workers run on the pane's terminal through the pty relay (``worker._ptyrelay``), which
keeps them on a TTY of their own, logs to ``output.log`` as the output arrives and exits with
the worker's exact status.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zellij_swarm import names, pid_end, quoting
from zellij_swarm.backends import zellij_cli
from zellij_swarm.backends import zellij_layout as layout
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
    or_prune,
    places_of,
    prune_command,
    where_panes_are,
)
from zellij_swarm.backends.zellij_cli import Zellij
from zellij_swarm.exc import BackendError
from zellij_swarm.records import generation_files, rundir
from zellij_swarm.worker import procs
from zellij_swarm.worker.wrapper import PTY_RELAY, PaneMode

READY_TIMEOUT = 10.0  # seconds for a new session/tab to show its panes
BIRTHS = 3  # sessions made for one run, when each died as it was born (0.45.0's panic)
READY_ENV = "ZELLIJ_SWARM_ZELLIJ_READY_TIMEOUT_MS"  # overrides it (tests, slow machines)
# seconds a pane still listed running after its leader's end may take to be held (a server
# under load takes seconds; only a rare end waits for it, off the loop)
PANE_EXIT_WAIT = 5.0
FIND_TIMEOUT = 2.0  # seconds to find a pane by name when ``run`` printed no id
# ``list-panes`` asked again, this many times this far apart, before a backfill takes "no
# answer" for "the anchor is there": a busy server closes a call now and then with nothing
LIST_AGAIN, LIST_AGAIN_AFTER = 3, 0.1
TIMEOUT_ENV = "ZELLIJ_SWARM_ZELLIJ_CALL_TIMEOUT_MS"  # per-call timeout (tests, slow machines)
_PANE_GONE = ") not found"  # the end of Zellij's answer to an action on a pane it no longer has

# The worker on a TTY of its own on the pane's terminal, logged (worker._ptyrelay); a relay
# killed before its worker ended leaves its record, and the worker's session is ended before
# the exit is recorded. The relay marks the worker's end as it sees it, before its drain.
RELAY_RUNNER = quoting.shell_line(PTY_RELAY) + (
    f' --record "$_zsw_d/{generation_files.RELAY_RECORD}" --ended "$_zsw_d/{generation_files.WORKER_ENDED}"'
    ' "$_zsw_d/output.log"')
# (the worker's code, when it had ended before its relay was killed: ``_ptyrelay.end_session``;
# the record is a link whose target is no file: ``-e`` alone does not see it)
RELAY_END = (f'[ ! -h "$_zsw_d/{generation_files.RELAY_RECORD}" ] && '
             f'[ ! -e "$_zsw_d/{generation_files.RELAY_RECORD}" ] || {{ _zsw_w=$({quoting.shell_line(PTY_RELAY)} '
             f'--end "$_zsw_d/{generation_files.RELAY_RECORD}" "$_zsw_d/{generation_files.WORKER_ENDED}") && '
             '[ -n "$_zsw_w" ] && _zsw_rc=$_zsw_w; }')
_FOREVER = "2147483647"
_HOLD_EXEC_WAIT = 2.0  # seconds: between a wrapper's look for the released mark and its exec


def _pre44_hold(hold: float, run_id: str) -> str:
    """The wrapper keeps its pane (before 0.44) by a ``sleep`` in a fresh environment, so it
    is not taken for a process the run left behind — except for one marker, by which the
    end-of-run sweep ends the holds when their session is gone (``procs.hold_markers``).
    A pane the swarm closed before its wrapper came this far holds nothing (``_end_hold``)."""
    sleep = f"exec /usr/bin/env -i {quoting.shell_word(procs.HOLD_MARKER + '=' + run_id)} sleep"
    return (f'[ ! -e "$_zsw_d/{generation_files.RELEASED}" ] || exit "$_zsw_rc"; '
            f'if [ "$_zsw_rc" = 0 ]; then {sleep} {hold:.3f}; fi; '
            "printf '\\n[zellij-swarm] exit %s: this pane stays until you close it\\n' \"$_zsw_rc\"; "
            f"{sleep} {_FOREVER}")


def _sh(argv: list[str]) -> list[str]:
    """A command for a layout or ``run``: /bin/sh with everything else in args (never expanded)."""
    return ["/bin/sh", "-c", 'exec "$@"', "zellij-swarm", *argv]


@dataclass
class _Worker:
    req: LaunchRequest
    pane_id: str | None


class ZellijBackend:
    name = "zellij"
    output_copied_after_end = False  # the pane's relay writes its log before the worker's end is recorded

    def __init__(self, env: Mapping[str, str], *, close_session: bool, here: bool = False,
                 call_timeout: float | None = None) -> None:
        self.env = dict(env)
        self.close_session_at_end = close_session
        self.here = here
        if call_timeout is None:
            raw = env.get(TIMEOUT_ENV, "")
            call_timeout = int(raw) / 1000 if raw.isdigit() and int(raw) > 0 else zellij_cli.CALL_TIMEOUT
        self.z = Zellij(env, timeout=call_timeout)
        raw = env.get(READY_ENV, "")
        self.ready_timeout = int(raw) / 1000 if raw.isdigit() and int(raw) > 0 else READY_TIMEOUT
        self.mode = ""  # session (we create it) | tab (our tab in a live session) | here
        self.created_session = False
        self.attach_argv: list[str] | None = None
        self.started = False
        self.has_panes = False  # opened (``open``) or adopted: ``panes`` is there
        self.tab_id: int | None = None
        self.broken: BackendError | None = None
        self.known: set[str] = set()  # pane ids we opened
        self.open_panes: dict[str, int] = {}  # our worker panes still open, oldest first -> slot
        self.board_pane: str | None = None
        self.waiting_gens: set[object] = set()  # our generations whose workers wait for input
        self.shown_waiting = 0  # the count our tab's name shows
        self.alive = True
        self.closed = False  # close() closed the session, or our tab's panes
        self.elsewhere: list[str] = []  # a retry's: the live sessions earlier supervisors of the run left

    @property
    def inside(self) -> bool:
        """The run started in a Zellij pane of a live session (``zellij_cli.caller_session``;
        not once that session was found stale)."""
        return self.z.own is not None

    # ----- set-up ------------------------------------------------------------------------

    def open(self, ctx: RunContext) -> None:
        self.ctx = ctx
        s = ctx.settings
        self.live = s.ui == "live"
        self.panes: PaneLifecycle[_Worker] = PaneLifecycle.for_run(ctx, close=self._close, release=self._release)
        self.has_panes = True
        self.require = bool(s.require_multiplexer)
        caps = self.z.version()
        if not caps["tested"]:
            ctx.warn("zellij_untested", f"zellij {caps['version']} is outside the versions zellij-swarm is tested "
                                        "with (0.40–0.45): it runs, untested")
        own = self.z.own
        sessions = self.z.sessions()
        # One ``ls`` is no evidence of death: its probe of a busy server can fail, and the live
        # session is then not listed live (contract §2.2). Taken for dead, the user's own
        # session had the swarm run in a session of its own (the real 0.45.0, 2 runs in 97 on a
        # loaded machine); a named one would be deleted to be made anew. Asked once a name.
        live = functools.cache(lambda name: self.z.live_in(sessions, name))
        target, stale = zellij_cli.run_session(s.session, own, ctx.run_id, live)
        if stale:
            # A stale variable (a shell that outlived its session): never create a session under
            # that name behind the user's back; run as from outside, and say so.
            ctx.warn("session_missing", f"ZELLIJ_SESSION_NAME names zellij session {own!r}, which is not running; "
                                        f"the swarm runs outside it, in session {target}")
            own = self.z.own = None
        self.z.session = target
        row = sessions.get(target)
        if live(target):
            self.mode = "here" if self.here and target == own else "tab"
            if self.mode == "tab" and self._clientless():
                # A tab made in a session with no client holds no pane Zellij lists (contract
                # §2.17): its panes were waited for in vain and ran unseen. The run's own
                # session, kept by an earlier end of it (its failed panes) — a `retry` — is
                # made anew: nobody is looking at it — unless a worker of the run still runs
                # there (a `retry` of a run whose supervisor was killed adopts it: deleting
                # the session would kill it). Anyone else's is not ours to remake. Otherwise
                # the swarm runs headless, and says why.
                if target != names.session(ctx.run_id) or not self._made_way(target):
                    raise BackendError("client_detached", f"zellij {caps['version']}: no client is attached to "
                                                          f"session {target!r}, where a tab of the swarm's would "
                                                          "hold no pane Zellij lists")
                self.mode = "session"
        else:
            if row is not None:
                self._delete_dead(target)
            self.mode = "session"
        if self.live:
            why = None if caps["detached_actions"] else self._no_client(target == own, caps["version"])
            if why:
                code, msg = why[0], f"{why[1]}: live mode runs as compact"
                if self.require:
                    raise BackendError(code, msg)
                ctx.warn(code, msg)
                self.live = False
        if caps["pane_id_target"]:
            self.pane_mode_value = PaneMode("ZELLIJ_PANE_ID", "terminal_", ctx.paths.saved_env, runner=RELAY_RUNNER,
                                            after_runner=RELAY_END)
        else:
            self.pane_mode_value = PaneMode("ZELLIJ_PANE_ID", "terminal_", ctx.paths.saved_env, runner=RELAY_RUNNER,
                                            after_runner=RELAY_END, hold=_pre44_hold(s.pane_hold, ctx.run_id))
        if not self.live:
            self._start([])

    # ----- a resumed run's: the panes its run left, found again (SPEC §8 resume) ----------

    @classmethod
    def at(cls, place: Mapping[str, Any], env: Mapping[str, str], *, close_session: bool) -> ZellijBackend:
        """The backend of a resumed run whose panes are in the session (and tab) its snapshot
        recorded (``place``, as ``place()`` gave it). No call is made here (``session_alive``
        asks), and nothing is ever opened (``adopt``)."""
        backend = cls(env, close_session=close_session, here=place.get("tab") is None)
        backend.z.session = str(place["session"])
        backend.created_session = place.get("created_session") is True
        backend.mode = "session" if backend.created_session else "here" if backend.here else "tab"
        backend.started = True
        return backend

    def adopt(self, ctx: RunContext, place: Mapping[str, Any], panes: Sequence[RunPane]) -> None:
        """Find the run's panes again — from 0.44 those Zellij lists in its tab: the board, the
        slot views, its generations' by id; before, nothing lists them, and the records' are
        taken as they are — and take its generations' into the pane lifecycle: running ones
        titled ``running`` (the input watch marks them again), ended ones closed or kept as
        their outcome says. ``BackendError`` when the session, or every pane of the run, is gone."""
        self.ctx = ctx
        self.panes = PaneLifecycle.for_run(ctx, close=self._close, release=self._release)
        self.has_panes = True
        self.z.version()
        if not self.session_alive():
            raise BackendError("session_missing", f"zellij: the run's session {self.z.session!r} is gone")
        listed = self.z.list_panes() if self.z.has("list_panes") else None
        ids = {p.pane_id for p in panes}
        tabs = {id(p): names.parse(str(p.get("tab_name") or ""), [ctx.run_id]) for p in listed or []}
        ours = [p for p in listed or [] if not p.get("is_plugin") and (self.mode == "here" or (
            (tab := tabs[id(p)]) is not None and tab.kind == ":"))]
        titles = {f"terminal_{p.get('id')}": str(p.get("title")) for p in ours}
        self.known = {pane for pane, title in titles.items() if pane in ids or names.is_board_title(title, ctx.run_id)
                      or names.is_slot_view_title(title)} if listed is not None else ids
        if not self.known:
            raise _tab_gone(self.z.session)
        self.board_pane = next((pane for pane in self.known if names.is_board_title(titles.get(pane, ""), ctx.run_id)),
                               None)
        if self.mode != "here" and ours and (tab := tabs[id(ours[0])]) is not None:
            # its name may still count the waiting of the supervisor that died: none is known
            # to wait until the input watch says so again
            self.tab_id, self.shown_waiting = ours[0].get("tab_id"), tab.waiting
            if tab.waiting and self.z.has("rename_tab_by_id"):
                with contextlib.suppress(BackendError):
                    self.z.call("action", "rename-tab-by-id", str(self.tab_id), names.tab(ctx.run_id))
                    self.shown_waiting = 0
        for p in panes:
            if p.pane_id in self.known:  # (one closed by hand: its generation's end is its task's alone)
                self._adopt_pane(p, titles.get(p.pane_id))

    def _adopt_pane(self, p: RunPane, title: str | None) -> None:
        """Take a generation's pane, listed with ``title`` (None: not known), into the pane
        lifecycle: an ended one kept or closed as its outcome says, a running one followed and
        titled ``running``."""
        self.known.add(p.pane_id)
        self.panes.adopt(p.req.gen.dir, _Worker(p.req, p.pane_id), p.req.task_name, p.status)
        running = self._title(p.req, "running")
        if p.status is None:
            self.open_panes[p.pane_id] = p.req.slot
            if title is not None and title != running and self.z.has("pane_id_target"):
                self._pane_action("rename-pane", "--pane-id", p.pane_id, running)

    def take_over(self, place: Mapping[str, Any] | None, panes: Sequence[RunPane]) -> None:
        """After ``open``, for a ``retry``: what earlier supervisors of this run left in the
        session the retry's panes go to joins the run's, so that it lives on as in one run.
        Their board and slot views are stale (this supervisor has its own): closed. Their
        worker panes (``panes``, the run's generations' as its records name them, in the order
        they ended) are taken into the pane lifecycle as ``adopt`` takes a resumed run's: a
        failure kept (within ``keep_failed_panes``, the oldest closing first) until its task
        succeeds, a worker still running followed to its end and retitled. Only a pane Zellij
        lists with the title the run gave it is taken (pane ids are counted anew in a session
        made again); one the user opened stays. A session made anew for the retry holds
        nothing earlier; before 0.44 nothing lists panes, and only the wrappers' holds of the
        panes the records name can be ended. What stays in another session, ``leftover_hint``
        names."""
        others = {name for earlier in places_of(place, "zellij")
                  if isinstance(name := earlier.get("session"), str) and name != self.z.session}
        if others:
            sessions = self.z.sessions()
            self.elsewhere = sorted(name for name in others if self.z.live_in(sessions, name))
        session = place.get("session") if isinstance(place, Mapping) and place.get("backend") == "zellij" else None
        if isinstance(session, str) and session != self.z.session:
            return
        if self.mode not in ("tab", "here"):
            return  # a session of the retry's own: an earlier one of the run's name was deleted first
        if not self.z.has("list_panes"):
            for p in panes:  # their holds end by their generations' files (``_close``)
                self.panes.adopt(p.req.gen.dir, _Worker(p.req, p.pane_id), p.req.task_name, p.status)
            return
        listed = self.z.list_panes()
        if listed is None:
            return
        run_id = self.ctx.run_id
        titles = {f"terminal_{p.get('id')}": (str(p.get("title")), names.parse(str(p.get("tab_name") or ""), [run_id]))
                  for p in listed if not p.get("is_plugin")}
        for pane, (title, tab) in titles.items():
            if pane in self.known or pane == self.board_pane:
                continue
            in_ours = tab is not None and tab.kind == ":"
            if names.is_board_title(title, run_id) or (in_ours and names.is_slot_view_title(title)):
                self._pane_action("close-pane", "--pane-id", pane)
        for p in panes:
            title = titles.get(p.pane_id, ("", None))[0]
            mine = layout.title(f"slot {p.req.slot} · {p.req.task_name} · ")  # whatever its attempt and state
            if p.pane_id not in self.known and title.startswith(mine):
                self._adopt_pane(p, title)

    def _made_way(self, session: str) -> bool:
        """False when a wrapper of the run still runs in ``session`` (its server's
        descendants); else delete our live ``session`` and wait (``SETTLE``) for its server to end — it does
        after its answer (contract §2.4), and a session made under its name before then is the
        dying one: whether it did. The views it held (an earlier supervisor's board) go with it
        by our doing: their registrations are withdrawn first, and their end is no
        ``renderer_died``."""
        server = self.z.server_pid(session)
        if server is not None and procs.runs_under(server, self.ctx.paths.dir):
            return False  # a worker of the run still runs in one of its panes
        for registration in self.ctx.paths.views.glob("*.json"):
            registration.unlink(missing_ok=True)
        self._delete_dead(session)
        return server is None or pid_end.wait_end(server, zellij_cli.SETTLE)

    def _clientless(self) -> bool:
        """No client is attached to the target session (from 0.44, where a tab made there holds
        no listed pane): False when it cannot be told."""
        if not self.z.has("detached_actions"):
            return False
        return self.z.clients(self.z.call("action", "list-clients", check=False)) == 0

    def _no_client(self, own: bool, version: str) -> tuple[str, str] | None:
        """Before 0.44 ``run`` places no pane in a session without a client: why live mode
        cannot work in the target session (a warning code and its message), or None when a
        client is attached. A probe that fails says so (``pane_call_failed``) — it is not
        taken for "no client" (``live_degraded_to_compact``)."""
        no_client = ("live_degraded_to_compact",
                     f"zellij {version} places no pane in a session without a client (before 0.44)")
        if self.mode == "session":
            return no_client
        if not self.z.has("list_clients"):
            return None if own else no_client
        res = self.z.call("action", "list-clients", check=False)
        clients = self.z.clients(res)
        if clients is None:
            first = (res.stderr.strip().splitlines() or [f"exit status {res.returncode}, no answer"])[0]
            return ("pane_call_failed", f"zellij {version}: cannot tell whether a client is attached to session "
                                        f"{self.z.session!r} (action list-clients failed: {first}); before 0.44 a "
                                        "pane needs one")
        return None if clients else no_client

    def _title(self, req: LaunchRequest, state: str) -> str:
        return layout.title(req.title(state))

    def _start(self, first: list[LaunchRequest]) -> list[str | None]:
        """Create our tab (or session) with the board, the slot views (compact) or ``first``'s
        worker panes (live), in one call; returns the worker panes' ids where Zellij has them."""
        ctx = self.ctx
        board = layout.PaneSpec(names.board_title(ctx.run_id), _sh(ctx.renderer_argv("board")), focus=True)
        if self.live:
            close = not self.z.has("pane_id_target")
            slots = [layout.PaneSpec(self._title(r, "running"), r.pane_argv(), close_on_exit=close)
                     for r in sorted(first, key=lambda r: r.slot)]
        else:
            slots = [layout.PaneSpec(names.slot_view_title(n), _sh(ctx.renderer_argv("slot-view", str(n))))
                     for n in range(1, min(ctx.settings.jobs, self.panes.cap) + 1)]
        self.started = True
        if self.mode == "here":
            self.board_pane = self._run_pane(board.name, list(board.argv), close_on_exit=False)
            ids = {spec.name: self._run_pane(spec.name, list(spec.argv), close_on_exit=spec.close_on_exit)
                   for spec in slots}  # in slot order; a batch's titles are unique
            return [ids[self._title(r, "running")] for r in first] if self.live else []
        text = layout.document(board, slots, tab_name=names.tab(ctx.run_id), style="swarm")
        path = ctx.paths.dir / "layout.kdl"
        rundir.write_atomic(path, text, mode=0o600)
        deadline = time.monotonic() + self.ready_timeout
        session = self.z.session or ""
        home: int | None = None
        if self.mode == "session":
            self._create_session(session, path, deadline)
            # a client of our own, attached again if Zellij drops it as it attaches (contract §6.19)
            self.attach_argv = [sys.executable, "-m", "zellij_swarm.backends.zellij_attach", session]
        else:
            # --attach: the client stays on the swarm's tab, where new-tab takes it. Given back
            # its own tab and then sent to ours, two CLI calls whose order the server need not
            # keep (each its own connection), it once stayed on its own.
            home = None if ctx.attach else self._home_tab()
            res = self.z.call("action", "new-tab", "--layout", str(path))
            if self.z.has("pane_ids") and res.lines and res.lines[0].strip().isdigit():
                self.tab_id = int(res.lines[0])
            if self.inside and session == self.z.own:  # --attach moves this client to the swarm's tab
                self.attach_argv = ["zellij", "--session", session, "action",
                                    *(["go-to-tab-by-id", str(self.tab_id)] if self.tab_id is not None
                                      else ["go-to-tab-name", names.tab(ctx.run_id)])]
        try:
            shown = self._await_layout(board, slots, first, deadline)
            # said once the panes are there: a session that died as its layout came up left
            # the run headless, and an `attach` of it nothing to show
            ctx.notice(where_panes_are("Zellij", ctx.paths))
            return shown
        finally:
            if home is not None:
                # Zellij moves the client to a tab just made as it lays the tab out, which can
                # be after ``new-tab`` has answered (a loaded machine): once the tab's panes are
                # listed, back to the tab the user was on, as a tmux window is made beside
                # theirs. Sent at once, it once came first, and the client stayed on the
                # swarm's tab. A call that fails or hangs leaves the client there, and nothing
                # else: the tab and its panes are made, and their outcome is the layout's.
                with contextlib.suppress(BackendError):
                    self.z.call("action", "go-to-tab-by-id", str(home), check=False)

    def _await_layout(self, board: layout.PaneSpec, slots: list[layout.PaneSpec], first: list[LaunchRequest],
                      deadline: float) -> list[str | None]:
        """``_start``'s last part: the new tab's panes, once Zellij lists them."""
        if not self.z.has("list_panes"):
            return [None] * len(first)
        titles = [board.name] + [s.name for s in slots]
        try:
            found = self._await_panes(titles, deadline, {self._title(r, "running"): r for r in first if self.live})
        except BackendError as e:
            if not self.live:
                raise
            # The tab exists but its panes did not all show in time: each first-batch worker
            # is followed by its launch heartbeat, whose deadline decides between its pane and
            # headless; no pane is opened after these.
            self._break(e)
            return [None] * len(first)
        self.board_pane = found.get(board.name)
        return [found.get(self._title(r, "running")) for r in first]

    def _create_session(self, session: str, layout_file: Path, deadline: float) -> None:
        """``attach --create-background`` with our layout, until the session lives: one that
        died as it was born (``session_died``, 0.45.0's panic) is made again, up to
        ``BIRTHS`` times in all. Its panes' commands start once the session is initialised,
        which it never was; were one started all the same, its generation's claim lets only
        one wrapper run it."""
        for birth in range(1, BIRTHS + 1):
            self.z.call("attach", "--create-background", session, session=False, top=["--layout", str(layout_file)])
            self.created_session = True
            try:
                self.z.wait_live(deadline)
                return
            except BackendError as e:
                if e.code != "session_died":
                    raise
                if birth == BIRTHS:
                    raise BackendError("session_missing", f"zellij session {session!r} died as it started, "
                                                          f"{BIRTHS} times in a row") from None
                if (row := self.z.sessions().get(session)) is not None and not row.live:
                    self._delete_dead(session)  # had it left a resurrection record

    def _delete_dead(self, session: str) -> None:
        """Delete a dead session of ours: ``attach -b`` would resurrect it rather than make
        it anew with our layout (contract §6.5)."""
        self.z.call("delete-session", "--force", session, session=False, check=False)

    def _home_tab(self) -> int | None:
        """The tab of the pane zellij-swarm was started from, in its own session (0.44+): the
        user's, to give the client back once ``new-tab`` has moved it. None otherwise, or with
        no answer. (``current-tab-info`` cannot tell it: it answers for the CLI's own client.)"""
        pane = self.env.get("ZELLIJ_PANE_ID", "")
        if not (self.inside and self.z.session == self.z.own and pane.isdigit() and self.z.has("list_panes")):
            return None
        try:
            panes = self.z.list_panes() or []
        except BackendError:
            return None
        tab = next((p.get("tab_id") for p in panes if not p.get("is_plugin") and str(p.get("id")) == pane), None)
        return tab if isinstance(tab, int) else None

    def _break(self, e: BackendError) -> None:
        """No pane is opened from now on: later tasks run headless — said once, here — or,
        under require, fail with ``zellij_<code>`` as their launches fail."""
        self.broken = e
        if not self.require:
            self.ctx.warn(e.code, f"{e.message}; no more panes are opened: the rest of the swarm runs headless")

    def _await_panes(self, titles: list[str], deadline: float,
                     workers: Mapping[str, LaunchRequest]) -> dict[str, str]:
        """Poll ``list-panes --json`` until every title shows (contract §6.4); learns our tab.
        A worker pane also counts as shown once its launch heartbeat names it: one closed
        before it was listed (by its user, at once) would otherwise never show."""
        while True:
            try:
                panes = self.z.list_panes()
            except BackendError as e:
                # A session just made is listed live a little before it answers actions for
                # good: 0.45.0 says "There is no active session!" now and then meanwhile. Not
                # yet, until the deadline — unless it is no longer listed live: then it is gone.
                if e.code != "session_missing" or not self.z.session_live(self.z.session or "", settle=0) \
                        or time.monotonic() > deadline:
                    raise
                panes = None
            if panes is not None:
                mine = [p for p in panes if not p.get("is_plugin") and p.get("title") in titles
                        and (self.tab_id is None or p.get("tab_id") == self.tab_id)
                        and f"terminal_{p.get('id')}" not in self.known]
                if self.tab_id is None and self.mode != "here" and mine and (
                        self.mode == "session" or mine[0].get("tab_name") == names.tab(self.ctx.run_id)):
                    self.tab_id = mine[0].get("tab_id")  # new-tab's answer did not say it (contract §6.16)
                found = {p["title"]: f"terminal_{p['id']}" for p in mine}
                for name, req in workers.items():
                    beat = None if name in found else generation_files.launch_heartbeat(req.gen)
                    if beat and beat["pane_id"]:
                        found[name] = beat["pane_id"]
                if all(n in found for n in titles):
                    self.known.update(found.values())
                    return found
            if time.monotonic() > deadline:
                raise BackendError("pane_call_timeout", f"zellij: the swarm's panes did not appear in session "
                                                        f"{self.z.session!r} within {self.ready_timeout:g}s")
            time.sleep(0.05)

    # ----- panes -------------------------------------------------------------------------

    def _placement(self, slot: int) -> tuple[list[str], str | None]:
        """Where a backfill pane goes (contract §2.7, §3.10): its ``run`` flags and the pane
        the call is made from. ``--stacked`` stacks onto the *focused* pane — the board,
        which the layout focuses — unless the call names a pane to go next to without taking
        focus (``--near-current-pane`` from 0.44, plus ``--no-focus`` from 0.45). So from
        0.44 a new pane joins the stack of one of our open worker panes (the slot stack), or,
        when none is open, goes next to the board unstacked; never ``--tab-id``, which would
        win over the named pane and (0.44) take focus. With ``--here`` our panes sit among
        the user's own and are not stacked; the first goes next to the user's pane (the
        call keeps the caller's ``$ZELLIJ_PANE_ID``). Before 0.44 no call can name the pane
        without stacking onto the focused one: the pane is placed plainly (no stack), in the
        tab the client is on (README). The anchor keeps the stack in slot order (module
        docstring)."""
        if not self.z.has("near_current_pane"):
            return [], None
        flags = ["--near-current-pane", *(["--no-focus"] if self.z.has("no_focus") else [])]
        anchor = self._stack_anchor(slot)
        if anchor is not None and self.mode != "here":
            return ["--stacked", *flags], anchor
        if anchor is None and self.board_pane is None and self.mode != "here":
            raise _tab_gone(self.z.session)  # making room closed the last pane of ours (_anchor_exists)
        return flags, anchor or self.board_pane

    def _stack_anchor(self, slot: int) -> str | None:
        """The open worker pane a new pane of ``slot`` is stacked after: the newest one of the
        highest slot not above ``slot``, else the oldest open one."""
        best: str | None = None
        for pane, s in self.open_panes.items():  # oldest first: the newest of equals wins
            if s <= slot and (best is None or s >= self.open_panes[best]):
                best = pane
        return best or next(iter(self.open_panes), None)

    def _run_pane(self, name: str, argv: list[str], *, close_on_exit: bool, slot: int = 0) -> str | None:
        """One ``zellij run``; the new pane's id from 0.44 (``pane_id_missing`` if none)."""
        args = ["run", "--name", name]
        if close_on_exit:
            args.append("--close-on-exit")
        flags, near = self._placement(slot)
        args += flags
        res = self.z.call(*args, cmd=argv, from_pane=near)
        if not self.z.has("pane_ids"):
            return None
        pane = next((ln.strip() for ln in res.lines if zellij_cli.pane_number(ln.strip()) is not None), None)
        pane = pane or self._find_by_name(name)
        if pane is None:
            raise BackendError("pane_id_missing", f"zellij run printed no pane id and no pane {name!r} was found")
        self.known.add(pane)
        return pane

    def _find_by_name(self, name: str) -> str | None:
        """Contract §6.1: ``run`` may print nothing (the server's 1 s limit): find the new pane
        by its name in our tab; several candidates are ambiguous, and we never guess."""
        deadline = time.monotonic() + FIND_TIMEOUT
        while True:
            panes = self.z.list_panes() or []
            hits = [f"terminal_{p['id']}" for p in panes if not p.get("is_plugin") and p.get("title") == name
                    and (self.tab_id is None or p.get("tab_id") == self.tab_id)
                    and f"terminal_{p['id']}" not in self.known]
            if len(hits) == 1:
                return hits[0]
            if len(hits) > 1 or time.monotonic() > deadline:
                return None
            time.sleep(0.1)

    def shows(self, slot: int) -> bool:
        # after a break, one warning was recorded; the rest of the swarm runs headless
        return (self.live and slot <= self.panes.cap and self.alive
                and (self.broken is None or self.require))

    def pane_mode(self, slot: int) -> PaneMode | None:
        if not self.shows(slot) or not self.panes.reserve():
            return None
        why = self._no_place() if self.started and self.broken is None else None
        if why is not None:
            self._break(why)
            if not self.require:  # under require its launch fails, saying why
                self.panes.launched(1)  # the reservation is not used: no pane is opened
                return None
        return self.pane_mode_value

    def _no_place(self) -> BackendError | None:
        """Why a backfill pane cannot be placed now, or None. Before 0.44 a ``run`` in a session
        no client is attached to places no pane (contract §2.7): the real 0.43.1, its client
        gone mid-run, answers exit 0 and spawns the command in a pane no tab holds — a failed
        worker's hold would sleep there for good. So a client is looked for before each such
        backfill (a probe that fails is not taken for "no client"). From 0.44 the anchor must
        be a pane of ours that exists (``_anchor_exists``)."""
        if self.z.has("detached_actions"):
            return None if self._anchor_exists() else _tab_gone(self.z.session)
        if not self.z.has("list_clients"):
            return None
        if self.z.clients(self.z.call("action", "list-clients", check=False)) == 0:
            return BackendError("client_detached", f"zellij {self.z.caps['version']}: no client is attached to session "
                                                   f"{self.z.session!r} any more, and before 0.44 a pane needs one")
        return None

    def _anchor_exists(self) -> bool:
        """Whether a backfill pane has a pane of ours to go next to, now (from 0.44). The real
        Zellij (0.45.0) places a ``--near-current-pane`` pane whose anchor is gone nowhere: it
        prints its id and runs its command, but no tab lists it and ``close-pane`` cannot
        reach it (contract §3.10). So the panes of ours Zellij no longer lists — closed by
        the user, the board too — are forgotten before each backfill, and an anchor is only
        one it lists. With ``--here`` the caller's own pane is one too. Before 0.44 nothing
        names an anchor (``_placement``). A list that does not answer is asked again
        (``LIST_AGAIN``): taken for "the anchor is there", it sent a backfill after a gone
        pane, where its worker ran unseen (CI, a busy real 0.45.0); one that never answers
        changes nothing."""
        if not self.z.has("near_current_pane"):
            return True
        panes = self.z.list_panes()
        for _ in range(LIST_AGAIN):
            if panes is not None:
                break
            time.sleep(LIST_AGAIN_AFTER)
            panes = self.z.list_panes()
        if panes is None:
            return True
        listed = {f"terminal_{p.get('id')}" for p in panes if not p.get("is_plugin")}
        for pane in [p for p in self.open_panes if p not in listed]:
            del self.open_panes[pane]
        if self.board_pane not in listed:
            self.board_pane = None
        own = self.env.get("ZELLIJ_PANE_ID")
        here = self.mode == "here" and own is not None and f"terminal_{own}" in listed
        return bool(self.open_panes) or self.board_pane is not None or here

    def launch_seen(self) -> None:
        pass  # a pane's leader starts as Zellij opens it: nothing is held back

    def launch(self, batch: list[LaunchRequest]) -> list[PaneResult]:
        self.panes.launched(len(batch))
        if self.broken is not None:
            return [LaunchFailed(self.broken.code, str(self.broken)) for _ in batch]
        if not self.started:
            try:
                ids = self._start(batch)
            except BackendError as e:  # the session or tab could not be made
                self._break(e)
                return [LaunchFailed(e.code, str(e), unstartable=True) for _ in batch]
            for r, pane in zip(batch, ids, strict=True):
                self._opened(r, pane)
            return [PaneOpened(pane) for pane in ids]
        close = not self.z.has("pane_id_target")
        results: list[PaneResult] = []
        for r in batch:
            try:
                pane = self._run_pane(self._title(r, "running"), r.pane_argv(), close_on_exit=close,
                                      slot=r.slot)
            except BackendError as e:
                if e.code in ("pane_call_timeout", "session_missing", "tab_gone"):
                    self._break(e)  # do not hang on every later call
                results.append(LaunchFailed(e.code, str(e)))
                continue
            self._opened(r, pane)
            results.append(PaneOpened(pane))
        return results

    def _opened(self, req: LaunchRequest, pane: str | None) -> None:
        self.panes.opened(req.gen.dir, _Worker(req, pane))
        if pane is not None:
            self.open_panes[pane] = req.slot

    def ended(self, req: LaunchRequest, pane_id: str | None, status: str, label: str) -> None:
        if not self.has_panes:  # not opened yet: a retry's restore of generations that ended before it
            return
        self._mark_waiting(req, False)
        w = self.panes.pop(req.gen.dir)
        if w is None:
            if status == "succeeded":
                self.panes.succeeded(req.task_name)
            return
        w.pane_id = pane_id or w.pane_id
        if status != "cancelled" and self.z.has("pane_id_target") and w.pane_id:
            self._pane_action("rename-pane", "--pane-id", w.pane_id, self._title(req, label))
        self.panes.settle(w, status, req.task_name)  # a title that could not be set does not keep a pane open

    def waiting(self, req: LaunchRequest, pane_id: str | None, waiting: bool) -> None:
        """Only from 0.44 (``rename-pane --pane-id``): before, a pane can be renamed only by
        focusing it, which would take the user's focus — the title stays as it is."""
        if not self.has_panes:  # not opened yet: a retry's restore of generations that ended before it
            return
        w = self.panes.running.get(req.gen.dir)
        pane_id = pane_id or (w.pane_id if w else None)
        if w is None or not pane_id or not self.z.has("pane_id_target"):
            return
        self._pane_action("rename-pane", "--pane-id", pane_id,
                          self._title(req, "waiting for input" if waiting else "running"))
        self._mark_waiting(req, waiting)

    def _mark_waiting(self, req: LaunchRequest, waiting: bool) -> None:
        """Our tab's name says how many of our tasks wait for input — ``swarm:<run> (2 waiting)``
        (``names.tab``), where the user looks from any tab. It is renamed by the tab id recorded
        when the tab was made, never by name nor as the focused tab: ``rename-tab-by-id`` (from
        0.44; an unknown id is a silent no-op, contract §2.16). Before 0.44 no call names a tab,
        and with ``--here`` the tab is the user's own: it is never renamed (README). A mark is
        not worth a warning."""
        if (req.gen.dir in self.waiting_gens) == waiting:
            return
        (self.waiting_gens.add if waiting else self.waiting_gens.discard)(req.gen.dir)
        count = len(self.waiting_gens)
        if self.tab_id is None or self.mode == "here" or not self.z.has("rename_tab_by_id") \
                or count == self.shown_waiting:
            return
        try:
            self.z.call("action", "rename-tab-by-id", str(self.tab_id), names.tab(self.ctx.run_id, count))
        except BackendError:
            return
        self.shown_waiting = count

    def _pane_action(self, *args: str) -> bool:
        """An action on one of our panes (rename, close). A pane the user closed is no fault:
        the real Zellij (0.45.0) answers an action on a pane id it no longer has with exit 2
        and "Pane with id Terminal(N) not found" (contract §2.9) — the pane is forgotten,
        never again an anchor for new panes. Any other non-zero exit or no answer is a
        ``pane_call_failed`` / ``pane_call_timeout`` warning, and the pane lifecycle goes on.
        A session that is gone is not warned about pane by pane: its workers end
        ``multiplexer_lost``; nor is one that left an earlier call unanswered (``unresponsive``)
        again. Returns whether the pane is as asked (acted on, or gone)."""
        said = self.z.unresponsive
        try:
            self.z.call("action", *args)
        except BackendError as e:
            if _PANE_GONE in e.message and "--pane-id" in args:
                self.open_panes.pop(args[args.index("--pane-id") + 1], None)
                return True
            if e.code != "session_missing" and e is not said:
                self.ctx.warn(e.code, e.message)
            return False
        return True

    def _release(self, w: _Worker) -> None:
        """A held pane's time is up: close it by id from 0.44; before, the wrapper's own hold
        ends by itself and its pane closes on exit."""
        if self.z.has("pane_id_target"):
            self._close(w)

    def _close(self, w: _Worker) -> None:
        """Close a worker's pane: by id from 0.44; before, by ending the wrapper's hold."""
        if not self.z.has("pane_id_target"):
            _end_hold(w.req.gen)
        elif w.pane_id:
            self.open_panes.pop(w.pane_id, None)
            self._pane_action("close-pane", "--pane-id", w.pane_id)

    def abandon(self, pane_id: str | None, req: LaunchRequest) -> None:
        if not self.has_panes:  # not opened yet: a retry's restore of generations that ended before it
            return
        w = self.panes.pop(req.gen.dir)
        pane_id = pane_id or (w.pane_id if w else None)
        if pane_id and self.z.has("pane_id_target"):
            self.open_panes.pop(pane_id, None)
            self._pane_action("close-pane", "--pane-id", pane_id)
        # before 0.44 a late wrapper finds the claim taken and exits; close-on-exit closes it

    def session_alive(self) -> bool:
        if self.alive and self.started and self.z.session:
            self.alive = self.z.session_live(self.z.session)
        return self.alive

    def _listed_number(self, pane_id: str | None) -> int | None:
        """The number ``list-panes`` gives the terminal pane ``pane_id`` (from 0.44, where a pane
        can be named and listed); None where nothing can be asked of it."""
        number = zellij_cli.pane_number(pane_id) if pane_id is not None else None
        if number is None or not self.started or not self.z.has("pane_id_target") or not self.z.has("list_panes"):
            return None
        return number

    @staticmethod
    def _listed(panes: list[dict[str, Any]], number: int) -> dict[str, Any] | None:
        return next((p for p in panes if not p.get("is_plugin") and p.get("id") == number), None)

    def pane_listed(self, pane_id: str | None) -> bool | None:
        """From 0.44, ``list-panes`` (a held pane is listed, contract §3.5); before, nothing says."""
        if (number := self._listed_number(pane_id)) is None:
            return None
        try:
            panes = self.z.list_panes()
        except BackendError:
            return None
        return None if panes is None else self._listed(panes, number) is not None

    def pane_exited(self, pane_id: str | None) -> PaneExited | None:
        """From 0.44 Zellij holds a pane whose command ended (no close-on-exit: contract
        §3.5), ``exited``, with its exit status (none after a signal); a pane closed by hand
        is gone from ``list-panes``. One still listed running is looked at again for
        ``PANE_EXIT_WAIT``, and so is a list that did not come or failed. Before 0.44 a pane closes
        with its command, as a closed one does: nothing says."""
        if (number := self._listed_number(pane_id)) is None:
            return None
        deadline = time.monotonic() + PANE_EXIT_WAIT
        while True:
            try:
                panes = self.z.list_panes()
            except BackendError:  # a busy server's call that failed or outlasted its time: asked again
                panes = None
            if panes is not None:
                pane = self._listed(panes, number)
                if pane is None:
                    return None  # closed
                if pane.get("exited") is True:
                    status = pane.get("exit_status")
                    return PaneExited(code=status if isinstance(status, int) else None)
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.1)

    def attach_command(self) -> tuple[list[str], dict[str, str]] | None:
        if not self.attach_argv or (self.inside and self.mode == "session"):  # a client in a pane would nest
            return None
        # an action moves the client of the session we are in; a new client must not think it is inside one
        return self.attach_argv, (self.z.env if "action" in self.attach_argv else zellij_cli.scrubbed(self.z.env))

    def close(self, *, cancelled: bool, failed: bool = True) -> None:
        if not self.started or not self.session_alive():
            return
        self.panes.finish(cancelled=cancelled)
        if self.created_session:  # kept for the user to attach and look (SPEC §2)
            if self.close_session_at_end and self.z.session:
                killed = self._session_call("kill-session", self.z.session)
                self._session_call("delete-session", "--force", self.z.session)
                # closed only if it is: a kill that failed leaves the session, and the hint says so
                self.closed = killed or not self.session_alive()
        elif (self.close_session_at_end or not failed) and self.z.has("pane_id_target"):
            self._close_ours()
        else:  # kept, to look at what failed: unless the user closed every pane of ours meanwhile
            self.closed = self._ours_open() == set()

    def _ours_open(self) -> set[str] | None:
        """The panes of ours still open in the user's session; None when Zellij cannot list them."""
        if not self.z.has("list_panes"):
            return None
        try:
            panes = self.z.list_panes()
        except BackendError:
            return None
        return None if panes is None else \
            {f"terminal_{p.get('id')}" for p in panes if not p.get("is_plugin")} & self.known

    def _close_ours(self) -> None:
        """Close every pane of ours still open in the user's session (our tab goes with its
        last pane); only ours: a pane the user opened in our tab stays, and so does the tab."""
        ours = self._ours_open()
        if ours is None:
            ours = self.known
        closed = [self._pane_action("close-pane", "--pane-id", pane)
                  for pane in sorted(ours, key=lambda p: zellij_cli.pane_number(p) or 0)]
        self.closed = all(closed)  # one that would not close leaves the tab: the hint says how to close it

    def _session_call(self, *args: str) -> bool:
        """A session command at the end of the run (kill, delete): whether it went through."""
        try:
            return self.z.call(*args, session=False, check=False).returncode == 0
        except BackendError as e:
            self.ctx.warn(e.code, e.message)
            return False

    def _as_typed(self, argv: list[str]) -> str:
        """A zellij command for the user to type: with our socket directory, when not the default."""
        sock = self.env.get("ZELLIJ_SOCKET_DIR")
        return (f"ZELLIJ_SOCKET_DIR={quoting.shell_word(sock)} " if sock else "") + quoting.shell_line(argv)

    def place(self) -> dict[str, Any] | None:
        """Where the run's panes are — from ``open`` on, where they will be: the first panes
        come up with the tab (or session) and claim their generations at once, and a
        supervisor killed before it recorded the place left a resume that could not tell a
        pane closed from a session lost (it took the one for the other, and ran the task again)."""
        if not self.mode:
            return None
        # the tab's id (0.44+): found by it while its name is marked ``(2 waiting)`` (``_mark_waiting``)
        tab_id = None if self.mode == "here" else self.tab_id
        return {"backend": "zellij", "session": self.z.session, "tab": None if self.mode == "here" else
                names.tab(self.ctx.run_id), "tab_id": tab_id,
                "created_session": self.created_session or (self.mode == "session" and not self.started),
                **({EARLIER: [{"backend": "zellij", "session": s} for s in self.elsewhere]} if self.elsewhere else {})}

    def leftover_hint(self) -> str | None:
        said = [here] if (here := self._leftover_here()) is not None else []
        said += [f"the run's earlier panes stay in zellij session {session!r}: close them with "
                 f"{prune_command(self.ctx.paths)}" for session in self.elsewhere]
        return "; ".join(said) or None

    def _leftover_here(self) -> str | None:
        if not self.started or self.closed or not self.alive:
            return None
        session = self.z.session or ""
        if self.created_session:
            delete = self._as_typed(["zellij", "delete-session", "--force", session])
            return f"zellij session {session!r} stays: close it with {delete}{or_prune(self.ctx.paths)}"
        if self.mode == "here":
            return "the swarm's panes stay in this tab: close them as any pane"
        how = prune_command(self.ctx.paths) if self.z.has("list_panes") else "Zellij's tab mode (Ctrl t, x)"
        return f"tab swarm:{self.ctx.run_id} stays in zellij session {session!r}: close it with {how}"


def _tab_gone(session: str | None) -> BackendError:
    return BackendError("tab_gone", f"zellij: every pane of the swarm in session {session!r} was closed "
                                    "(its tab is gone)")


def _end_hold(gen: generation_files.GenPaths) -> None:
    """Before 0.44: end the ``sleep`` a wrapper holds its pane with; the pane leader then
    exits and close-on-exit closes the pane. The launch heartbeat names the pane leader; its
    hold is the leader's child, the wrapper's second stage that exec'd into that sleep.

    The exit is recorded before the wrapper reaches its hold, so the swarm may close a pane
    whose wrapper has not: the ``released`` mark tells that wrapper to hold nothing. One that
    looked for the mark just before it was made is in the instant before its ``exec``: once
    its exit is recorded, its sleep is waited for, briefly (a loaded machine once left such a
    pane open for good). A wrapper whose worker still runs comes to the mark later."""
    with contextlib.suppress(OSError):  # a generation's directory that is gone has no wrapper left
        gen.released.touch()
    hb = generation_files.launch_heartbeat(gen)
    pid = hb.get("pid") if hb else None
    if not isinstance(pid, int):
        return
    deadline = time.monotonic() + _HOLD_EXEC_WAIT
    while True:
        stages = procs.children(pid)
        holds = [child for child in stages if os.path.basename((procs.cmdline(child) or [b""])[0]) == b"sleep"]
        for child in holds:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGTERM)
        if holds or not stages or not gen.exit_sidecar.exists() or time.monotonic() > deadline:
            return
        time.sleep(0.01)
