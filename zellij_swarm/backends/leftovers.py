"""What ended runs left in the multiplexers, found by name, and how to remove it (``prune``).

A run names what it opens after its id (``names``): tmux sessions and windows
``swarm-<run-id>`` (a window beyond the first ``swarm-<run-id>-N``), Zellij sessions
``swarm-<run-id>`` and tabs ``swarm:<run-id>``, a window or tab marked while tasks wait
``swarm-<run-id> (2 waiting)``. A tmux window is known first by its ``@zsw_run`` option, which
no rename changes; a window without it (an older run's), and every Zellij session and tab, by
its name. A run's records need not say where its panes went, and a run that ended long ago
is found all the same. A session a run created under a
name of the user's (``--session NAME``) is known from its record instead (``NamedSession``):
it is removed only while it is the one the run created (tmux: the same session id). Sessions
are found on the tmux server and in the Zellij socket directory the caller's environment
points at.

A Zellij tab is removed by closing its panes by id (``list-panes --json`` gives each pane's
tab name, from 0.44): ``close-tab`` only closes the client's current tab (contract §2.16).
Before 0.44 such a tab is reported, not removed. Every call has a timeout (tmux's through the
tmux client, Zellij's through ``external``); a multiplexer that is missing, or has no server,
has nothing to prune; one that does not answer is said to (``Found.unanswered``), for ``prune``
to say that it could not look there — not that there was nothing.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from zellij_swarm import names
from zellij_swarm.backends.tmux_client import TmuxClient
from zellij_swarm.backends.zellij_cli import Zellij
from zellij_swarm.exc import BackendError

CALL_TIMEOUT = 10.0


@dataclass(frozen=True)
class Leftover:
    run_id: str
    what: str  # "tmux window swarm-… (@3) in session work", for the user
    remove: Callable[[], None] | None  # None: it cannot be removed from here (``why``)
    why: str = ""


@dataclass(frozen=True)
class NamedSession:
    """A session a run created under a name it was given, as its record says."""

    run_id: str
    backend: str  # "tmux" or "zellij"
    name: str
    tmux_id: str | None = None  # tmux's ``$N``: a session made again under the name is not the run's


@dataclass
class Found:
    leftovers: list[Leftover]  # sessions first
    unanswered: list[str]  # "tmux list-windows: no answer within 10s": where nothing could be looked at


def find(env: Mapping[str, str], run_ids: Collection[str], named: Collection[NamedSession] = (),
         expected: Collection[str] = ()) -> Found:
    """Every session, window and tab of the runs ``run_ids``, and the ``named`` sessions.
    ``expected``: the multiplexers the runs recorded panes in — one missing here is said to
    have gone unlooked at (``unanswered``), not taken to hold nothing."""
    ids = set(run_ids)
    found = Found([], [])
    if ids or named:
        by_name = {(n.backend, n.name): n for n in named}
        found.leftovers = _tmux(env, ids, by_name, found.unanswered) + _zellij(env, ids, by_name, found.unanswered)
    for name in sorted(expected):
        if name in ("tmux", "zellij") and not shutil.which(name, path=env.get("PATH")):
            found.unanswered.append(f"{name} is not on PATH here: what the runs left in it was not looked for")
    return found


def _run_of(name: str, kind: str, ids: set[str]) -> str | None:
    """The run id a name was made from (``swarm-<id>``, ``swarm-<id>-N``, ``swarm:<id>``, marked
    or not), if one of ``ids``; ``kind``: ``-`` or ``:``."""
    parsed = names.parse(name, ids)
    return parsed.run_id if parsed is not None and parsed.kind == kind else None


def _tmux(env: Mapping[str, str], ids: set[str], named: Mapping[tuple[str, str], NamedSession],
          unanswered: list[str]) -> list[Leftover]:
    tmux = TmuxClient(env, timeout=CALL_TIMEOUT)
    if tmux.binary is None:
        return []
    try:
        rows = tmux.windows()  # none without a server: nothing of ours
    except BackendError as e:
        unanswered.append(e.message)
        return []
    sessions: dict[str, Leftover] = {}
    windows: list[Leftover] = []
    for w in rows:
        if (run := _own_session(w.session_name, ids, named.get(("tmux", w.session_name)), w.session_id)) is not None:
            sessions.setdefault(w.session_id, Leftover(run, f"tmux session {w.session_name}",
                                                       partial(_quiet, tmux, "kill-session", "-t", w.session_id)))
        elif (run := _window_run(w.run, w.name, ids)) is not None:
            windows.append(Leftover(run, f"tmux window {w.name} ({w.id}) in session {w.session_name}",
                                    partial(_quiet, tmux, "kill-window", "-t", w.id)))
    return [*sessions.values(), *windows]


def _window_run(option: str, name: str, ids: set[str]) -> str | None:
    """The run of ``ids`` a tmux window belongs to: its ``@zsw_run`` option says, else (a window
    an older run made) its name."""
    if option:
        return option if option in ids else None
    return _run_of(name, "-", ids)


def _own_session(name: str, ids: set[str], named: NamedSession | None, tmux_id: str | None = None) -> str | None:
    """The run that created the session ``name``, if one of ``ids`` did (``swarm-<id>``) or it is ``named``."""
    if (run := _run_of(name, "-", ids)) is not None and name == names.session(run):
        return run
    if named is not None and named.tmux_id in (None, tmux_id):
        return named.run_id
    return None


def _zellij(env: Mapping[str, str], ids: set[str], named: Mapping[tuple[str, str], NamedSession],
            unanswered: list[str]) -> list[Leftover]:
    if not shutil.which("zellij", path=env.get("PATH")):
        return []
    z = Zellij(env, timeout=CALL_TIMEOUT)
    try:
        z.version()
        sessions = z.sessions()
    except BackendError as e:
        unanswered.append(e.message)
        return []
    out: list[Leftover] = []
    live: list[str] = []
    for name, row in sessions.items():
        if (run := _own_session(name, ids, named.get(("zellij", name)))) is not None:
            out.append(Leftover(run, f"zellij session {name}", partial(_delete_session, env, name)))
        elif row.live:
            live.append(name)
    for session in live:
        out += _zellij_tabs(env, z.caps, session, ids, unanswered)
    return out


def _zellij_tabs(env: Mapping[str, str], caps: dict[str, Any], session: str, ids: set[str],
                 unanswered: list[str]) -> list[Leftover]:
    """Our tabs in one live session: removable (their panes closed by id) from 0.44. (A client
    of its own: one session that gives no answer is no reason not to ask the next.)"""
    out: list[Leftover] = []
    z = Zellij(env, timeout=CALL_TIMEOUT)
    z.caps, z.session = caps, session
    try:
        if not z.has("list_panes"):
            res = z.call("action", "query-tab-names", check=False)
            tabs = {_run_of(t, ":", ids) for t in res.lines} - {None}
            return [Leftover(run, f"zellij tab swarm:{run} in session {session}", None,
                             f"zellij {z.caps['version']} cannot close a tab it is not in: close it in Zellij")
                    for run in sorted(r for r in tabs if r)]
        panes = z.list_panes()
    except BackendError as e:
        unanswered.append(f"zellij session {session}: {e.message}")
        return []
    if panes is None:
        unanswered.append(f"zellij session {session}: list-panes gave no answer")
        return []
    by_run: dict[str, list[str]] = {}
    for p in panes:
        run = _run_of(str(p.get("tab_name") or ""), ":", ids)
        if run is not None and not p.get("is_plugin"):
            by_run.setdefault(run, []).append(f"terminal_{p.get('id')}")
    for run, pane_ids in by_run.items():
        out.append(Leftover(run, f"zellij tab swarm:{run} in session {session}",
                            partial(_close_panes, env, session, tuple(pane_ids))))
    return out


def _delete_session(env: Mapping[str, str], name: str) -> None:
    try:
        Zellij(env, timeout=CALL_TIMEOUT).call("delete-session", "--force", name, session=False, check=False)
    except BackendError:
        pass


def _close_panes(env: Mapping[str, str], session: str, panes: tuple[str, ...]) -> None:
    z = Zellij(env, timeout=CALL_TIMEOUT)
    z.session = session
    for pane in panes:
        try:
            z.call("action", "close-pane", "--pane-id", pane, check=False)
        except BackendError:
            return


def _quiet(tmux: TmuxClient, *args: str) -> None:
    try:
        tmux.call(*args, check=False)
    except BackendError:
        pass
