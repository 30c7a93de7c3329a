"""The terminal renderers that run inside panes: ``board`` and ``slot-view`` (SPEC §2, §8).

They only read a run directory (``state.json`` and the generation files, see ``snapshot``) and
never touch processes. Entry points for the CLI::

    run_board(run, *, once=False, out=None, **loop_options) -> int
    run_slot_view(run, slot, *, once=False, out=None, **loop_options) -> int

and the pure frame functions ``board_frame`` and ``slot_frame`` for tests. Importing this
package costs no pyte import; it loads when first used.
"""

from __future__ import annotations

from zellij_swarm.render.board import board_frame, run_board
from zellij_swarm.render.slotview import run_slot_view, slot_frame

__all__ = ["board_frame", "run_board", "run_slot_view", "slot_frame"]
