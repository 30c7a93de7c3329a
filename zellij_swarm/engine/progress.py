"""What the progress line of ``run`` shows (``render.console.progress_line``), as the
supervisor gathers it: from counters it keeps, never a pass over every task."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ProgressFacts:
    """What the progress line shows, gathered by the supervisor without a pass over every task."""

    counts: dict[str, int]  # tasks by status (the total grows with ``add`` and follow-ups)
    elapsed: float  # seconds since the run started
    jobs: int
    mean_duration: float | None  # of the tasks that ended so far, for the ETA
    running: list[tuple[str, float]]  # (task name, seconds it has run) of each running worker
    waiting: list[str]  # the names of the tasks whose workers wait for input, sorted
