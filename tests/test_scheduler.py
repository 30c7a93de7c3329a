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
