"""Pure scheduler selection and the state transition table."""

from __future__ import annotations

import pytest

from zellij_swarm.engine.scheduler import ReadyQueue, SlotPool
from zellij_swarm.records.states import InvalidTransition, SlotState, TaskStatus, transition


def test_smallest_free_slot_first():
    pool = SlotPool(4)
    assert [pool.take() for _ in range(4)] == [1, 2, 3, 4]
    assert pool.take() is None
    pool.give_back(3)
    pool.give_back(1)
    assert pool.take() == 1 and pool.take() == 3
    pool.give_back(2)
    pool.close()
    assert pool.take() is None and pool.free_count == 0


def test_priority_then_order_and_dependencies():
    q = ReadyQueue()
    q.add("a", after=[], priority=0, order=1)
    q.add("b", after=["a"], priority=9, order=2)
    q.add("c", after=[], priority=1, order=3)
    q.add("d", after=[], priority=1, order=4)
    assert [q.pop(), q.pop(), q.pop()] == ["c", "d", "a"]
    assert q.pop() is None
    assert q.finished("a", succeeded=True) == (["b"], [])
    assert q.pop() == "b"


def test_failure_skips_dependents_transitively():
    q = ReadyQueue()
    q.add("a", after=[], priority=0, order=1)
    q.add("b", after=["a"], priority=0, order=2)
    q.add("c", after=["b"], priority=0, order=3)
    q.add("d", after=[], priority=0, order=4)
    q.pop()
    assert q.finished("a", succeeded=False) == ([], ["b", "c"])
    assert q.add("e", after=["a"], priority=0, order=5) == ["e"]
    assert q.drain() == ["d"] and len(q) == 0


def test_discard_and_requeue():
    q = ReadyQueue()
    for i, name in enumerate("xyz"):
        q.add(name, after=[], priority=0, order=i)
    q.discard("y")
    first = q.pop()
    q.requeue(first)
    assert [q.pop(), q.pop(), q.pop()] == ["x", "z", None]


def test_transitions():
    assert transition("t", TaskStatus.PENDING, TaskStatus.RUNNING) is TaskStatus.RUNNING
    assert transition("t", TaskStatus.RUNNING, TaskStatus.PENDING) is TaskStatus.PENDING  # a retry
    for terminal in (s for s in TaskStatus if s.terminal):
        with pytest.raises(InvalidTransition):
            transition("t", terminal, TaskStatus.RUNNING)
    with pytest.raises(InvalidTransition):
        transition("t", TaskStatus.PENDING, TaskStatus.SUCCEEDED)
    with pytest.raises(InvalidTransition):
        transition("s", SlotState.IDLE, SlotState.RUNNING)
    assert {s for s in TaskStatus if s.retryable} == {TaskStatus.FAILED, TaskStatus.TIMED_OUT, TaskStatus.LOST}


def test_a_full_group_never_holds_back_the_ready_tasks_of_others() -> None:
    q = ReadyQueue({"gpu": 2})
    for n in range(1, 5):
        q.add(f"g{n}", after=[], priority=10, order=n, group="gpu")  # the gpu tasks rank first
    for n in range(5, 8):
        q.add(f"c{n}", after=[], priority=0, order=n)
    out = [q.pop() for _ in range(5)]
    assert out == ["g1", "g2", "c5", "c6", "c7"]  # two gpu at most, then the rest in order
    assert q.pop() is None and not q.has_ready() and len(q) == 2
    q.requeue("g1")  # a retry: back, and first of its group again
    assert q.pop() == "g1"
    q.finished("g2", succeeded=True)
    assert q.pop() == "g3" and q.out_in("gpu") == 2


def test_pause_stops_handing_out_a_group_or_everything_and_unpause_goes_on() -> None:
    q = ReadyQueue({"gpu": 4})
    q.add("g", after=[], priority=0, order=1, group="gpu")
    q.add("c", after=[], priority=0, order=2)
    q.pause("gpu")
    assert q.paused == (False, ["gpu"]) and q.pop() == "c" and q.pop() is None
    q.pause()
    q.unpause("gpu")
    assert q.pop() is None and q.paused == (True, [])
    q.unpause()
    assert q.pop() == "g" and q.paused == (False, [])


def test_a_task_handed_out_before_a_resume_counts_against_its_group() -> None:
    q = ReadyQueue({"gpu": 1})
    q.handed_out("g1", priority=0, order=1, group="gpu")
    q.add("g2", after=[], priority=0, order=2, group="gpu")
    assert q.pop() is None
    q.finished("g1", succeeded=False)
    assert q.pop() == "g2"


def test_a_finished_task_leaves_nothing_of_its_rank_behind() -> None:
    """A task in its final status never goes back in the queue: a run of 100,000 tasks does
    not keep 100,000 ranks. Its outcome stays, for the dependents added later."""
    q = ReadyQueue({"g": 1})
    q.add("a", after=[], priority=5, order=1, group="g")
    q.add("b", after=["a"], priority=0, order=2)
    q.add("c", after=["b"], priority=2, order=3, group="g")
    assert q.pop() == "a" and "a" in q
    assert q.finished("a", succeeded=False) == ([], ["b", "c"])
    assert "a" not in q and "b" not in q and "c" not in q
    assert (q._order, q._priority, q._group) == ({}, {}, {})
    assert q.add("d", after=["a"], priority=0, order=4) == ["d"]
    assert q.add("e", after=["b"], priority=0, order=5) == ["e"]
    q.add("f", after=[], priority=0, order=6, group="g")
    assert q.pop() == "f"  # the group's one place is free again
