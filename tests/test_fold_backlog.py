"""Dispatch waits while folding is behind (``supervisor.FOLD_BACKLOG``): a run of trivial tasks
ends generations faster than its log-commit thread folds them, and what it has not folded is
held in memory and on disk — a run of 100,000 once left 22,000 waiting."""

from __future__ import annotations

import threading
import time

import pytest
from harness import Harness, Work, task

from zellij_swarm.engine import supervisor
from zellij_swarm.records.shells import ShellPool

BOUND = 2
JOBS = 2
HELD = 1.0  # virtual seconds the first folds are held for


def test_nothing_more_is_dispatched_while_more_generations_wait_to_be_folded_than_the_bound(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(supervisor, "FOLD_BACKLOG", BOUND)
    names = [f"t{i}" for i in range(40)]
    with Harness(works={n: (Work(after=0.01),) for n in names}, jobs=JOBS) as h:
        clock = h.world.clock
        window: dict[str, float] = {}
        fold = ShellPool.fold

        def held_fold(pool: ShellPool, gen: object) -> None:
            """The first folds wait for HELD virtual seconds, while the loop's clock moves on
            — or for a few real seconds, should the loop wait for them (when every task has
            ended: it waits for the folds before its summary)."""
            start = window.setdefault("start", clock.elapsed())
            deadline = time.monotonic() + 5
            while "end" not in window and clock.elapsed() < start + HELD and time.monotonic() < deadline:
                time.sleep(0.001)
            window.setdefault("end", clock.elapsed())
            fold(pool, gen)  # type: ignore[arg-type]

        monkeypatch.setattr(ShellPool, "fold", held_fold)
        r = h.run([task(n) for n in names])
    assert r.exit_code == 0 and {str(t.status) for t in r.tasks.values()} == {"succeeded"}
    # every task takes 10 ms: unheld, all 40 would start in the held second
    start, end = (r.epoch + window[k] for k in ("start", "end"))
    started = [e for e in r.events if e["event"] == "worker_launch_invoked" and start < e["ts"] < end]
    assert len(started) <= BOUND + 2 * JOBS, f"{len(started)} started while {BOUND} were the most to wait for a fold"
    assert len(started) < len(names) - 10


@pytest.mark.parametrize("sync_fails", [False, True], ids=["folded", "sync-failed"])
def test_the_backlog_counts_what_is_handed_over_until_it_is_folded_or_given_up(tmp_path, sync_fails: bool) -> None:
    """A generation leaves the backlog once folded — or once its sync failed, which folds
    nothing (its files stay): a full disk never holds dispatch for good."""
    from swarmtest import wait_until

    from zellij_swarm.records.folding import LogCommit
    from zellij_swarm.records.generation_files import GenPaths

    log = tmp_path / "events.jsonl"
    log.write_text("")
    gate, folded = threading.Event(), []

    def sync(fd: int) -> None:
        gate.wait(30)
        if sync_fails:
            raise OSError(28, "No space left on device")

    commit = LogCommit(log, sync=sync, fold=folded.append)
    gens = [GenPaths(tmp_path / f"gen-{n}", 1, n) for n in range(1, 4)]
    commit.submit(gens)
    assert commit.backlog == 3
    gate.set()
    wait_until(lambda: commit.backlog == 0, what="the backlog emptied")
    commit.close()
    assert folded == ([] if sync_fails else gens)


def test_a_fold_that_raises_ends_the_run_as_an_internal_error_does_not_hang_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug in a fold, on the log-commit thread, ended that thread: what it had not folded
    stayed in the backlog, dispatch waited on it, and the run hung (a harness scenario, when
    the fake launcher lacked what the shell pool asked of it). The loop raises it instead, as
    any internal error: its workers run on, and ``resume`` takes them up."""
    monkeypatch.setattr(supervisor, "FOLD_BACKLOG", BOUND)

    def broken_fold(pool: ShellPool, gen: object) -> None:
        raise RuntimeError("a fold's bug")

    monkeypatch.setattr(ShellPool, "fold", broken_fold)
    names = [f"t{i}" for i in range(10)]
    with Harness(works={n: (Work(after=0.01),) for n in names}, jobs=JOBS) as h, \
            pytest.raises(RuntimeError, match="a fold's bug"):
        h.run([task(n) for n in names])
