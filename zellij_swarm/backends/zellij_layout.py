"""Zellij layouts (KDL v1) for a swarm, emitted with ``ckdl`` — never by string pasting.

Zellij parses layouts with a KDL v1 parser (contract §4.1), so every document goes through
``quoting.kdl_text`` (``ckdl``'s emitter with ``version=1``, parsed back before it is
returned). The rules of contract §4.3 that a generator could break are kept by construction:
one root ``layout``, an explicit ``tab`` node (a layout without one gets a startup popup
pane, §6.10), ``args`` only with a ``command``, no properties mixed with nested panes, stacks
never vertical and never nested, sizes as ``"N%"`` strings. No pane has a ``cwd`` and no
``command`` holds anything Zellij would expand (``$VAR``, ``~``): names, task text and paths
only ever appear in ``name`` and ``args``, which Zellij takes verbatim; names are shown on a
terminal, so they pass through ``quoting.terminal_text``.

Styles (``document``; ``STYLE_HELP`` says the same to users):

- ``swarm``: the board on the left (40 %), slot panes stacked on the right;
- ``grid``: the board and the slot panes in a grid of ⌈√(n+1)⌉ columns;
- ``compact``: the board on top, slot panes stacked below it, Zellij's compact bar at the
  bottom.

``generate`` is what ``zellij-swarm layout`` prints: the board and one ``slot-view`` pane per
slot, whatever the run's UI (a live worker's own pane is opened by the run, in its tab; a
layout can only hold renderers). Zellij looks a pane's command up in its *server's* ``PATH``
and resolves relative paths against the server's cwd (contract §6.9), so the renderers run
this interpreter (``sys.executable -m zellij_swarm``) and the caller gives an absolute state
directory. The shipped ``layouts/*.kdl`` (``shipped``) cannot know either: they run
``zellij-swarm`` from the server's ``PATH`` and say so in a comment at their top.
"""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from zellij_swarm import names, quoting

if TYPE_CHECKING:
    import ckdl

STYLE_HELP = {
    "swarm": "the board left, slot views stacked right",
    "grid": "the board and the slot views in a grid",
    "compact": "the board on top, slot views stacked below it and Zellij's compact bar",
}
STYLES = tuple(STYLE_HELP)
UIS = ("live", "compact")
_EXPANDED = re.compile(r"[$~]")


@dataclass(frozen=True)
class PaneSpec:
    """One command pane: ``name`` is its title; ``argv[0]`` becomes ``command`` (must need no
    expansion), the rest ``args``."""

    name: str
    argv: Sequence[str]
    close_on_exit: bool = False
    focus: bool = False
    extra: dict[str, object] = field(default_factory=dict)


def title(text: str) -> str:
    """A pane or tab name as Zellij shows it: on one line, with no escape reaching the terminal."""
    return quoting.terminal_text(text)


def _node(name: str, *args: object, props: dict[str, object] | None = None,
          children: Sequence[ckdl.Node] = ()) -> ckdl.Node:
    import ckdl  # here: the CLI imports this module for its help text (quoting.kdl_text says why)

    return ckdl.Node(None, name, *args, properties=dict(props or {}), children=list(children))


def _pane(spec: PaneSpec) -> ckdl.Node:
    command, *args = spec.argv
    if _EXPANDED.search(command):
        raise ValueError(f"layout command {command!r} would be expanded by Zellij; run it through /bin/sh args")
    props: dict[str, object] = {"name": title(spec.name), "command": command}
    if spec.focus:
        props["focus"] = True
    if spec.close_on_exit:
        props["close_on_exit"] = True
    props.update(spec.extra)
    return _node("pane", props=props, children=[_node("args", *args)] if args else [])


def _container(children: list[ckdl.Node], **props: object) -> ckdl.Node:
    return _node("pane", props=props, children=children)


def document(board: PaneSpec | None, slots: Sequence[PaneSpec], *, tab_name: str, style: str = "swarm") -> str:
    """The KDL v1 text of one tab: ``board`` and ``slots`` placed per ``style``."""
    if style not in STYLES:
        raise ValueError(f"unknown layout style {style!r} (expected {', '.join(STYLES)})")
    nodes: list[ckdl.Node] = []
    slot_nodes = [_pane(s) for s in slots]
    board_node = _pane(board) if board else None
    if style == "grid":
        cells = ([board_node] if board_node else []) + slot_nodes
        ncols = max(1, math.ceil(math.sqrt(len(cells))))
        rows = max(1, math.ceil(len(cells) / ncols))
        columns = [cells[i:i + rows] for i in range(0, len(cells), rows)]
        nodes.append(_container([_container(col) if len(col) > 1 else col[0] for col in columns],
                                split_direction="vertical") if len(columns) > 1 else
                     (_container(columns[0]) if columns and len(columns[0]) > 1 else columns[0][0]))
    else:
        stack = _container(slot_nodes, stacked=True) if slot_nodes else None
        if style == "swarm":
            if board_node is not None and stack is not None:
                board_node.properties["size"] = "40%"
                nodes.append(_container([board_node, stack], split_direction="vertical"))
            else:
                nodes.append(board_node or stack)
        else:
            if board_node is not None:
                if stack is not None:
                    board_node.properties["size"] = "30%"
                nodes.append(board_node)
            if stack is not None:
                nodes.append(stack)
            nodes.append(_node("pane", props={"size": 1, "borderless": True},
                               children=[_node("plugin", props={"location": "zellij:compact-bar"})]))
    tab = _node("tab", props={"name": title(tab_name), "focus": True}, children=nodes)
    return quoting.kdl_text(_node("layout", children=[tab]))


def this_program() -> list[str]:
    """How a pane runs this zellij-swarm wherever the Zellij server was started: this
    interpreter by absolute path (a venv's ``python`` finds its packages from its own path)."""
    return [os.path.abspath(sys.executable), "-m", "zellij_swarm"]


def verbatim(argv: Sequence[str]) -> list[str]:
    """``argv`` as a layout pane's command: as it is, or — when Zellij would expand its first
    word (``$``, ``~``) — through ``/bin/sh``, whose arguments Zellij passes verbatim."""
    return ["/bin/sh", "-c", 'exec "$@"', "zellij-swarm", *argv] if _EXPANDED.search(argv[0]) else list(argv)


def generate(jobs: int, ui: str = "compact", style: str = "swarm", *, run: str | None = None,
             state_dir: str | None = None, program: Sequence[str] | None = None) -> str:
    """The layout ``zellij-swarm layout --jobs N --ui UI --style S`` prints: the board and a
    ``slot-view`` pane for each of ``jobs`` slots, placed per ``style``. The same for both
    ``ui``s: a layout can only hold renderers (a live worker's own pane is the run's to open).

    The renderers run ``program`` (default ``this_program()``) with the run id (default: the
    latest run) and ``--state-dir`` when given — pass it absolute: a pane starts in the Zellij
    server's cwd."""
    if ui not in UIS:
        raise ValueError(f"unknown ui {ui!r} (expected live or compact)")
    if not 1 <= jobs <= 1024:
        raise ValueError("jobs must be 1–1024")
    prefix = list(program) if program is not None else this_program()

    def argv(command: str, *args: str) -> list[str]:
        out = [*prefix, command, *([run] if run else []), *args]
        return verbatim(out + (["--state-dir", state_dir] if state_dir else []))

    board = PaneSpec("board", argv("board"), focus=True)
    slots = [PaneSpec(names.slot_view_title(n), argv("slot-view", str(n))) for n in range(1, jobs + 1)]
    return document(board, slots, tab_name="swarm", style=style)


_SHIPPED = {"swarm.kdl": (4, "swarm"), "grid.kdl": (6, "grid"), "compact.kdl": (4, "compact")}


def shipped() -> dict[str, str]:
    """The files of ``layouts/`` and the text each must hold (checked by a test): the layout
    with a bare ``zellij-swarm``, under a note saying what that needs and what to do instead."""
    out = {}
    for name, (jobs, style) in _SHIPPED.items():
        note = (f"zellij-swarm: {STYLE_HELP[style]}, {jobs} slots.\n"
                "The panes run `zellij-swarm` found on the PATH of the Zellij server (the PATH of the\n"
                "shell that started the session) and follow the latest run under ./.zellij-swarm in\n"
                "the server's working directory. If zellij-swarm is in a virtualenv that session did\n"
                "not have on its PATH, print this layout with absolute paths instead:\n"
                f"    zellij-swarm layout -j {jobs} --style {style} > swarm.kdl\n")
        out[name] = "".join(f"// {ln}\n" for ln in note.splitlines()) + generate(
            jobs, style=style, program=["zellij-swarm"])
    return out
