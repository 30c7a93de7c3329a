"""The names a run gives what it opens in a multiplexer, built and read back in one place.

- tmux: the session (when the run makes one) and the first window ``swarm-<run-id>``, an
  overflow window ``swarm-<run-id>-N``; while tasks wait for input a window is renamed
  ``swarm-<run-id> (2 waiting)``. A window is found by its ``@zsw_run`` option (``RUN_OPTION``,
  set when it is made), not by its name, which the marks change and the user may; the name
  is read only for windows of runs that set no option.
- Zellij: the session ``swarm-<run-id>``, the tab ``swarm:<run-id>``, which may be renamed
  ``swarm:<run-id> (2 waiting)`` the same way.

Run ids are ``YYYYMMDD-HHMMSS-xxxxxx`` (``engine.supervisor.new_run_id``): they hold neither
a space nor a ``(``, so what follows the id is never part of it.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

PREFIX = "swarm"
RUN_OPTION = "@zsw_run"  # the tmux window option that names the run a window belongs to

# A run id of ``new_run_id``'s shape first (its hex part may be all digits: never an overflow
# number), else any word, the shortest that leaves an overflow number and a mark.
_NAME = re.compile(r"swarm([-:])(?P<run>\d{8}-\d{6}-[0-9a-f]{6}|[^\s()]+?)(?:-(?P<n>\d+))?"
                   r"(?: \((?P<waiting>\d+) waiting\))?\Z")


@dataclass(frozen=True)
class Parsed:
    run_id: str
    kind: str  # "-": a session or tmux window; ":": a Zellij tab
    overflow: int | None  # N of ``swarm-<run>-N``
    waiting: int  # the count of a marked name, 0 for an unmarked one


def session(run_id: str) -> str:
    return f"{PREFIX}-{run_id}"


def window(run_id: str, overflow: int | None = None, waiting: int = 0) -> str:
    """A tmux window's name: the first (``overflow`` None) or the Nth, marked when tasks wait."""
    base = session(run_id) + (f"-{overflow}" if overflow is not None else "")
    return marked(base, waiting)


def tab(run_id: str, waiting: int = 0) -> str:
    return marked(f"{PREFIX}:{run_id}", waiting)


def board_title(run_id: str) -> str:
    """The title of a run's board pane (tmux, Zellij): how a later supervisor of the run knows
    it. The run id first: a border too narrow for the title cuts its end — at 80 columns
    Zellij gives the board of the ``swarm`` style 30 — and the id stays whole (it was
    ``zellij-swarm RUN · board``, cut mid-id)."""
    return f"{run_id} · board"


def is_board_title(title: str, run_id: str) -> bool:
    """Whether ``title`` is the board's of ``run_id`` — also as a run started before the title
    changed named it, which a resume by this version still recognises."""
    return title in (board_title(run_id), f"zellij-swarm {run_id} · board")


def slot_view_title(slot: int) -> str:
    """The title of a compact run's slot-view pane."""
    return f"slot {slot}"


def is_slot_view_title(title: str) -> bool:
    """Whether ``title`` is a slot-view pane's (``slot_view_title``)."""
    return _SLOT_VIEW.fullmatch(title) is not None


_SLOT_VIEW = re.compile(r"slot \d+")


def marked(name: str, waiting: int) -> str:
    """``name`` with the count of its waiting tasks, or as it is when none waits."""
    return f"{name} ({waiting} waiting)" if waiting else name


def parse(name: str, run_ids: Collection[str] | None = None) -> Parsed | None:
    """What a session, window or tab name says, if it is one of ours: marked or not, an
    overflow window or not. With ``run_ids``, only names of those runs; a run id that itself
    ends in ``-N`` is read whole when it is one of them."""
    m = _NAME.match(name)
    if m is None:
        return None
    run, n = m["run"], m["n"]
    if run_ids is not None:
        if n is not None and f"{run}-{n}" in run_ids:
            run, n = f"{run}-{n}", None
        elif run not in run_ids:
            return None
    return Parsed(run, m.group(1), int(n) if n is not None else None, int(m["waiting"] or 0))
