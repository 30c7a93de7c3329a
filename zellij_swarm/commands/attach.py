"""``zellij-swarm attach [RUN] [TASK]``: show a run's panes in this terminal, from anywhere.

**Where the panes are.** A run's snapshot may record its multiplexer place (``multiplexer``:
``session``, ``session_id``, ``socket`` and ``windows`` for tmux; ``session`` and ``tab`` for
Zellij), or ``run.json`` may. Every field is read defensively, and without it the place is
found the way the backends name things:

- tmux: the run's windows are named ``swarm-<run-id>`` (and ``swarm-<run-id>-N`` for
  overflow windows), on the server we are in, else tmux's default server;
- Zellij: the session the run was given (``--session``), else ``swarm-<run-id>``, else the
  live session that has a tab ``swarm:<run-id>``.

**What it does.**

- tmux, inside tmux on the run's server: ``select-window`` the run's window and
  ``select-pane`` the task's pane, then ``switch-client`` when the window is in another
  session. The terminal stays the client it is.
- tmux, outside tmux: the same selection, then ``exec tmux attach -t SESSION``, so this
  terminal becomes the client and shows that window and pane.
- Zellij, inside the run's own session: ``action go-to-tab-by-id`` with the tab id the run
  recorded (from 0.44: the tab's name may be marked ``(2 waiting)``), else ``go-to-tab-name
  swarm:<run-id>``; with a task, ``action focus-pane-id`` from 0.44.1 (contract §0, §2.18). Inside another Zellij
  session it refuses: a client inside a pane nests one Zellij in another.
- Zellij, outside: ``zellij attach SESSION`` as our child, on this terminal, its exit
  status ours. No focus action exists for a client that has not attached yet (contract
  §2.18: focus acts for an attached client), so a task's pane is named on stderr, not
  focused. A child, not an ``exec``, because Zellij 0.45 may drop a client as it connects
  (contract §6.19): ``backends.zellij_attach`` attaches it again.

**The task's pane.** Its latest attempt's own pane (live mode, and kept failed panes) while
it is open; else, while it runs in a slot shown by a ``slot-view`` pane (compact mode, tmux),
that pane; else the run's first window, with a note saying the task has no pane.

**Nothing to attach to** — a headless run, or a run whose session or windows are gone — is a
one-line error pointing at ``status`` and ``logs``, exit 1; so are no terminal to attach
(stdin and stdout must be one) and a client that would nest. An unknown run or task is a
usage error, exit 2. The calls before attaching have a timeout (tmux's through the tmux
client, ``backends.tmux_client``; Zellij's through ``external``); only the final ``attach``
has no timeout: it is the user's terminal from then on.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from zellij_swarm import exc, names, quoting
from zellij_swarm.backends import zellij_attach, zellij_cli
from zellij_swarm.backends.tmux_client import TmuxClient
from zellij_swarm.backends.zellij_cli import Zellij
from zellij_swarm.config import state_dir
from zellij_swarm.records.rundir import RunPaths, read_json

CALL_TIMEOUT = 10.0
FOCUS_PANE_ID_SINCE = (0, 44, 1)  # zellij action focus-pane-id (contract §0)


class NothingToAttach(exc.SwarmError):
    """The run has no session or window left to show (exit 1)."""


def attach(run: RunPaths, snap: dict[str, Any], task: dict[str, Any] | None, env: Mapping[str, str]) -> int:
    """Attach to ``run`` (its status ``snap``), at ``task``'s pane when one is given. Returns
    0 when this terminal's client was moved (inside a multiplexer); otherwise this terminal
    becomes the multiplexer's client (tmux: ``exec``; Zellij: a child, whose status it
    returns)."""
    recorded_backend = _run_json(run).get("backend") if not snap.get("backend") else None
    backend = snap.get("backend") or (recorded_backend.get("name") if isinstance(recorded_backend, dict) else None)
    recorded = _recorded(run, snap)
    if backend == "tmux":
        return _tmux(run, task, recorded, env)
    if backend == "zellij":
        return _zellij_attach(run, snap, task, recorded, env)
    raise NothingToAttach(f"run {run.run_id} ran headless: there is nothing to attach to; "
                          f"{_look_instead(run)}")


def _attach_command(run: RunPaths) -> str:
    return state_dir.command(run.state_dir, "attach", run.run_id)


def _look_instead(run: RunPaths) -> str:
    return (f"see its tasks with `{state_dir.command(run.state_dir, 'status', run.run_id)}` and their output with "
            f"`{state_dir.command(run.state_dir, 'logs', run.run_id)} TASK`")


def _run_json(run: RunPaths) -> dict[str, Any]:
    try:
        meta = read_json(run.run_json)
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def _recorded(run: RunPaths, snap: Mapping[str, Any]) -> dict[str, Any]:
    """The run's recorded multiplexer place (``multiplexer`` in its snapshot, else in
    ``run.json``), or ``{}``: runs recorded before it was, and backends that record none."""
    for source in (snap, _run_json(run)):
        place = source.get("multiplexer")
        if isinstance(place, dict):
            return place
    return {}


def _text(place: Mapping[str, Any], key: str) -> str | None:
    value = place.get(key)
    return value if isinstance(value, str) and value else None


def _terminal() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty()


def _exec(argv: list[str], env: Mapping[str, str]) -> NoReturn:
    """Become the multiplexer's client: this terminal is its terminal from now on."""
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvpe(argv[0], argv, dict(env))
    except OSError as e:
        raise exc.SwarmError(f"cannot run {quoting.shell_line(argv)}: {e.strerror}") from None


def _note(text: str) -> None:
    print(f"zellij-swarm: {quoting.terminal_text(text)}", file=sys.stderr)


# ----- tmux -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Window:
    session_id: str
    session_name: str
    id: str


def _tmux(run: RunPaths, task: dict[str, Any] | None, recorded: Mapping[str, Any], env: Mapping[str, str]) -> int:
    inside = env.get("TMUX", "").split(",")[0] or None
    server = _text(recorded, "socket") or inside  # None: tmux's default server
    client = TmuxClient(env, server, timeout=CALL_TIMEOUT)
    try:
        return _tmux_attach(run, task, recorded, env, client, inside)
    except exc.BackendError as e:
        raise exc.SwarmError(f"run {run.run_id} is shown in tmux, but {e}") from None


def _tmux_attach(run: RunPaths, task: dict[str, Any] | None, recorded: Mapping[str, Any], env: Mapping[str, str],
                 tmux: TmuxClient, inside: str | None) -> int:
    server = tmux.socket
    windows = _tmux_windows(tmux, run.run_id, recorded)
    if not windows:
        on = f"the tmux server at {server}" if server else "tmux's default server"
        raise NothingToAttach(f"run {run.run_id}'s tmux windows are gone from {on} (its session ended or was "
                              f"closed): there is nothing to attach to; {_look_instead(run)}")
    window, pane = _tmux_target(tmux, windows, task)
    same_server = inside is not None and (server is None or os.path.realpath(server) == os.path.realpath(inside))
    if inside is not None and not same_server:
        raise exc.SwarmError(f"run {run.run_id} is on another tmux server ({server}) than the one you are in: from "
                             f"a terminal outside tmux run `{_attach_command(run)}`, or "
                             f"`tmux -S {server} attach -t {window.session_name}`")
    if not same_server and not _terminal():
        shown = [*tmux.attach_argv(window.session_id)[:-1], window.session_name]
        raise exc.SwarmError(f"attaching needs a terminal on stdin and stdout; from one, run: "
                             f"{quoting.shell_line(shown)}")
    tmux.call("select-window", "-t", window.id)
    if pane is not None:
        tmux.call("select-pane", "-t", pane)
    if same_server:
        here = env.get("TMUX_PANE")
        current = tmux.call("display-message", "-p", *(["-t", here] if here else []), "#{session_id}").stdout.strip()
        if current != window.session_id:
            tmux.call("switch-client", "-t", window.session_id)
        return 0
    _exec(tmux.attach_argv(window.session_id), env)


def _tmux_windows(tmux: TmuxClient, run_id: str, recorded: Mapping[str, Any]) -> list[_Window]:
    """The run's windows still open, its first (the board's) first: those recorded, else those
    whose ``@zsw_run`` option names the run, else (an older run's) those named ``swarm-<run-id>``
    and ``swarm-<run-id>-N``, marked or not (``names``). None when no server answers."""
    rows = tmux.windows()
    ids = recorded.get("windows")
    if isinstance(ids, list) and ids and all(isinstance(i, str) for i in ids):
        by_id = {r.id: r for r in rows}
        return [_Window(by_id[i].session_id, by_id[i].session_name, i) for i in ids if i in by_id]
    parsed = {r.id: names.parse(r.name, [run_id]) for r in rows}
    mine = [r for r in rows if r.run == run_id or (not r.run and parsed[r.id] is not None)]
    # stable: the first window, then the overflow ones in order
    mine.sort(key=lambda r: (p := parsed[r.id]) is not None and p.overflow is not None)
    return [_Window(r.session_id, r.session_name, r.id) for r in mine]


def _tmux_target(tmux: TmuxClient, windows: list[_Window], task: dict[str, Any] | None) -> tuple[_Window, str | None]:
    """The window to show and the pane to select in it (None: leave the window's own)."""
    if task is None:
        return windows[0], None
    by_window = {w.id: w for w in windows}
    panes = {p.id: (by_window[p.window_id], p.title) for p in tmux.panes() or [] if p.window_id in by_window}
    own = task.get("pane_id")
    if isinstance(own, str) and own in panes:
        return panes[own][0], own
    if task.get("status") == "running" and task.get("slot") is not None:
        view = next((pid for pid, (_, title) in panes.items() if title == f"slot {task['slot']}"), None)
        if view is not None:
            return panes[view][0], view
    _note(f"task {task['name']} has no pane open ({task['status']}); showing the run's window")
    return windows[0], None


# ----- Zellij ---------------------------------------------------------------------------------


def _zellij_attach(run: RunPaths, snap: Mapping[str, Any], task: dict[str, Any] | None,
                   recorded: Mapping[str, Any], env: Mapping[str, str]) -> int:
    z = Zellij(env, timeout=CALL_TIMEOUT)
    try:
        caps = z.version()
        session = _zellij_session(z, run.run_id, snap, recorded)
    except exc.BackendError as e:
        raise exc.SwarmError(f"run {run.run_id} is shown in Zellij, but {e}") from None
    if session is None:
        raise NothingToAttach(f"run {run.run_id}'s zellij session is gone (it ended, or was closed): there is "
                              f"nothing to attach to; {_look_instead(run)}")
    tab = _text(recorded, "tab") or names.tab(run.run_id)
    pane = task.get("pane_id") if task is not None else None
    own = zellij_cli.caller_session(env)
    version = zellij_cli.parse_version(f"zellij {caps['version']}")
    if task is not None and isinstance(pane, str) and version is not None and version >= (0, 44, 0):
        z.session = session
        if not _zellij_pane_open(z, pane):  # its pane closed (its hold ended, closed by hand)
            _note(f"task {task['name']} has no pane open ({task['status']}); showing the run's tab")
            pane = None
    if own == session:  # our own client: move it (calls keep our session and pane variables)
        z.session = session
        tab_id = recorded.get("tab_id")
        if isinstance(tab_id, int) and version is not None and version >= (0, 44, 0):
            z.call("action", "go-to-tab-by-id", str(tab_id))  # its name may be marked "(2 waiting)"
        else:
            z.call("action", "go-to-tab-name", tab)
        if isinstance(pane, str) and version is not None and version >= FOCUS_PANE_ID_SINCE:
            z.call("action", "focus-pane-id", pane)
        return 0
    if own is not None:
        raise exc.SwarmError(f"run {run.run_id} is in zellij session {session!r}, not in {own!r} where you are: "
                             f"from a terminal outside Zellij run `{_attach_command(run)}` "
                             f"(or `zellij attach {session}`)")
    argv = ["zellij", "attach", session]
    if not _terminal():
        raise exc.SwarmError(f"attaching needs a terminal on stdin and stdout; from one, run: "
                             f"{quoting.shell_line(argv)}")
    if task is not None and (isinstance(pane, str) or task.get("pane_id") is None):
        where = f"pane {pane}" if isinstance(pane, str) else "no pane of its own"
        _note(f"task {task['name']} is {where} in tab {tab} (Zellij can focus a pane only once you are attached)")
    return zellij_attach.attach(session, zellij_cli.scrubbed(env))


def _zellij_pane_open(z: Zellij, pane: str) -> bool:
    """Whether the session still has the terminal pane ``pane`` (``terminal_7``); a server that
    gives no list in time is taken at its word later (the focus fails, or does not)."""
    try:
        listed = z.list_panes()
    except exc.BackendError:
        return True
    return listed is None or any(not p.get("is_plugin") and f"terminal_{p.get('id')}" == pane for p in listed)


def _zellij_session(z: Zellij, run_id: str, snap: Mapping[str, Any], recorded: Mapping[str, Any]) -> str | None:
    """The run's zellij session if it is live: the one recorded, else the one the run was
    given, else ``swarm-<run-id>``, else a live session with the tab ``swarm:<run-id>``."""
    rows = z.sessions()
    live = [name for name, row in rows.items() if row.live]
    named = _text(recorded, "session")
    if named is None:
        setting = (snap.get("settings") or {}).get("session") or {}
        named = setting.get("value") if isinstance(setting.get("value"), str) else None
    if named is not None:
        return named if z.live_in(rows, named) else None
    if z.live_in(rows, names.session(run_id)):
        return names.session(run_id)
    for name in live:
        z.session = name
        if names.tab(run_id) in z.call("action", "query-tab-names", check=False).lines:
            return name
    return None
