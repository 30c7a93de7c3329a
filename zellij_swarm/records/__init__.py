"""The run directory and everything written in it: its layout and atomic writes (``rundir``),
a generation's files (``generation_files``), the event log and snapshots (``log``), the run
lock, the control inbox, and the vocabulary they are written in (``states``, ``task``)."""
