"""The terminal renderers that run inside panes: ``board`` and ``slot-view`` (SPEC §2, §8).

They only read a run directory (``state.json`` and the generation files, see ``snapshot``) and
never touch processes. Entry points for the CLI::

    render.board.run_board(run, *, once=False, out=None, **loop_options) -> int
    render.slotview.run_slot_view(run, slot, *, once=False, out=None, **loop_options) -> int

and the pure frame functions ``board_frame`` and ``slot_frame`` for tests. The package
imports nothing itself: ``status`` and the console reporter (``render.console``) do not pay
for the renderers, nor a renderer for pyte before it is first used.
"""
