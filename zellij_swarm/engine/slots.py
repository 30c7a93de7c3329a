"""The run's slots: each one's state and generation count, and the pool of free ones.

The one place a slot's state changes, always through ``states.transition``: a slot is
reserved for a task (its next generation numbered), runs it, may be held ``stopping`` while
the tree of a generation that was ended is still going away, and is given back to the pool
— the smallest free slot is handed out first, so slots map to stable pane places.
"""

from __future__ import annotations

from zellij_swarm.engine.scheduler import SlotPool
from zellij_swarm.records.states import SlotState, transition


class Slots:
    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
        self._pool = SlotPool(jobs)
        self._state = {s: SlotState.IDLE for s in range(1, jobs + 1)}
        self._generations: dict[int, int] = {}

    def state(self, slot: int) -> SlotState:
        return self._state[slot]

    @property
    def free_count(self) -> int:
        return self._pool.free_count

    def reserve(self) -> tuple[int, int]:
        """Take the smallest free slot for a new generation: (slot, generation number)."""
        slot = self._pool.take()
        assert slot is not None, "reserve() without a free slot"
        self._move(slot, SlotState.RESERVED)
        generation = self._generations[slot] = self._generations.get(slot, 0) + 1
        return slot, generation

    def running(self, slot: int) -> None:
        """Its generation's worker runs (said again on a fallback: nothing changes)."""
        if self._state[slot] == SlotState.RESERVED:
            self._move(slot, SlotState.RUNNING)

    def stopping(self, slot: int) -> None:
        self._move(slot, SlotState.STOPPING)

    def free(self, slot: int) -> None:
        """The slot runs nothing any more: idle, and the pool may hand it out again."""
        self._move(slot, SlotState.IDLE)
        self._pool.give_back(slot)

    def close(self) -> None:
        """No slot is handed out any more (halt, cancel, shutdown)."""
        self._pool.close()

    def seen(self, slot: int, generation: int) -> None:
        """Resume: a generation the records show; the next one of its slot numbers after it."""
        self._generations[slot] = max(self._generations.get(slot, 0), generation)

    def adopt(self, slot: int) -> None:
        """Resume: a worker that outlived its supervisor runs in this slot."""
        self._pool.take_slot(slot)
        self._state[slot] = SlotState.RUNNING

    def _move(self, slot: int, to: SlotState) -> None:
        self._state[slot] = transition(f"slot {slot}", self._state[slot], to)
