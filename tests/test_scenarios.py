"""The supervisor over tables of scenarios, in virtual time (tests/harness.py).

Each case runs the real ``Supervisor`` against scripted workers, a fake launcher, watcher and
multiplexer, and checks what SPEC §5–§8 and the README say of its outcome: every task's
status, reason and attempts (and, where the case is about them, exit codes, signals and the
statuses of its attempts), the run's exit code and warnings, and the order of the events
that matter in ``events.jsonl``. Times are virtual seconds since the run started.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from harness import Harness, Launch, Message, Mux, Pane, Result, Work, play_concurrently, task

from zellij_swarm.config.swarmfile import TaskSpec

UNCHECKED: Any = object()


@dataclass(frozen=True)
class Want:
    """A task's final record."""

    status: str
    reason: str | None = None
    attempts: int = 1
    code: int | None = UNCHECKED  # its last attempt's exit code
    signal: str | None = UNCHECKED
    history: tuple[str, ...] | None = None  # the status of each attempt, in order
    ended_at: float | None = UNCHECKED  # when its last attempt ended, by its own records (run seconds)


@dataclass(frozen=True)
class Case:
    id: str
    tasks: tuple[TaskSpec, ...]
    want: Mapping[str, Want]
    order: tuple[str, ...] = ()  # event labels ("<event> <task>", "warning <code>") in this order
    exit: int = 0
    works: Mapping[str, tuple[Work, ...]] = field(default_factory=dict)
    flags: Mapping[str, Any] = field(default_factory=dict)
    messages: tuple[Message, ...] = ()
    launches: tuple[Launch, ...] = ()
    mux: Mux | None = None
    watch_fails: bool = False
    warnings: tuple[str, ...] | None = ()  # every warning code of the run, in order (None: unchecked)
    at: Mapping[str, float] = field(default_factory=dict)  # event label -> when it happened
    replies: tuple[Mapping[str, Any], ...] | None = None  # what the answers to ``messages`` hold
    mux_calls: tuple[tuple[Any, ...], ...] | None = None  # the multiplexer's calls, close excluded
    metrics: Mapping[str, Any] = field(default_factory=dict)  # what summary.json's metrics hold
    problem: str | None = None  # in a line shown whatever the output mode (the reporter's problem)
    # resume: the supervisor vanishes at ``crash_at``; ``gap`` seconds later a new one resumes
    crash_at: float | None = None
    gap: float = 0.0
    resume_messages: tuple[Message, ...] = ()
    stopped: tuple[float, float] | None = None  # the supervisor is stopped at (second, for seconds)


def play(case: Case) -> Result:
    with Harness(works=case.works, launches=case.launches, mux=case.mux, watch_fails=case.watch_fails,
                 **case.flags) as h:
        result = h.run(list(case.tasks), messages=case.messages, crash_at=case.crash_at, stopped=case.stopped)
        if case.crash_at is not None:
            assert result.exit_code is None and result.summary is None, "the supervisor should have vanished"
            result = h.resume(after=case.gap, messages=case.resume_messages)
    return result


def check(case: Case, r: Result) -> None:
    seen = {name: _seen(t, case.want[name], r.epoch) if name in case.want else str(t.status)
            for name, t in r.tasks.items()}
    assert seen == dict(case.want), "events:\n" + "\n".join(r.labels)
    # every run of a worker is a generation in its task's history: never two runs of one
    assert all(runs <= len(r.tasks[name].history) for name, runs in r.ran.items()), (r.ran, "\n".join(r.labels))
    assert r.exit_code == case.exit
    assert r.summary is not None
    assert {t["name"]: t["status"] for t in r.summary["tasks"]} == {n: w.status for n, w in case.want.items()}
    if case.warnings is not None:
        assert tuple(r.warnings()) == case.warnings
    r.assert_order(*case.order)
    for label, when in case.at.items():
        assert r.at(label) == pytest.approx(when, abs=1e-3), label
    if case.replies is not None:
        assert len(r.replies) == len(case.replies)
        for got, want in zip(r.replies, case.replies, strict=True):
            assert {k: got.get(k) for k in want} == dict(want)
    assert {k: r.summary["metrics"][k] for k in case.metrics} == dict(case.metrics)
    if case.mux_calls is not None:
        assert tuple(c for c in r.mux_calls if c[0] != "close") == case.mux_calls
    # where the panes are is on disk before any pane runs: a supervisor killed as its first panes
    # start leaves a resume that asks the multiplexer there how a pane that hung up ended
    assert all(r.place_on_disk), r.place_on_disk
    assert any(case.problem in line for line in r.problems) if case.problem else not r.problems, r.problems


def _seen(t: Any, w: Want, epoch: float) -> Want:
    """A task's record as a ``Want``, leaving unchecked what ``w`` leaves unchecked."""
    return Want(str(t.status), t.reason, t.attempts,
                UNCHECKED if w.code is UNCHECKED else t.exit_code,
                UNCHECKED if w.signal is UNCHECKED else t.signal,
                None if w.history is None else tuple(str(a.status) for a in t.history),
                UNCHECKED if w.ended_at is UNCHECKED else round(t.ended_at - epoch, 3))


A, B, C, D = task("a"), task("b"), task("c"), task("d")
BIG_BATCH = tuple(task(f"t{i}") for i in range(1, 13))  # more than ``dispatch.START_CHUNK``
RUN = ("run_started", "run_finished")
FAILS_A = ("worker_process_spawned a", "worker_failed a", "run_finished")


def works(**by_task: Work | tuple[Work, ...]) -> dict[str, tuple[Work, ...]]:
    return {k: v if isinstance(v, tuple) else (v,) for k, v in by_task.items()}


# ----- how an exit is classified (SPEC §5.5, §6, README "Outcomes") --------------------------

CLASSIFICATION: tuple[Case, ...] = (
    Case("exit-0", (A,), {"a": Want("succeeded", code=0, signal=None)},
         order=("run_started", "worker_process_spawned a", "worker_completed a", "run_finished"),
         at={"worker_completed a": 1.0}),
    Case("exit-1", (A,), {"a": Want("failed", code=1, signal=None)}, exit=1, works=works(a=Work(code=1)),
         order=("worker_failed a", "run_finished")),
    Case("exit-127-not-a-signal", (A,), {"a": Want("failed", code=127, signal=None)}, exit=1,
         works=works(a=Work(code=127)),
         order=FAILS_A),
    Case("kill-TERM-self-is-143-SIGTERM", (A,), {"a": Want("failed", code=143, signal="SIGTERM")}, exit=1,
         works=works(a=Work(code=143)),
         order=FAILS_A),
    Case("SIGKILL-is-137", (A,), {"a": Want("failed", code=137, signal="SIGKILL")}, exit=1,
         works=works(a=Work(code=137)),
         order=FAILS_A),
    Case("headless-SIGHUP-is-a-failure-not-pane_closed", (A,), {"a": Want("failed", code=129, signal="SIGHUP")},
         exit=1, works=works(a=Work(code=129)),
         order=FAILS_A),
    # its worker began, and no launcher saw it end: it ended before its wrapper was killed, or
    # with it, or after it — it may have finished (SPEC §5.7)
    Case("wrapper-killed-no-sidecar-is-unknown", (A,),
         {"a": Want("unknown", "wrapper_lost", code=None, signal="SIGKILL")},
         exit=1, works=works(a=Work(vanishes=True)), order=FAILS_A),
    Case("cwd-missing", (A,), {"a": Want("failed", "cwd_missing", code=None)}, exit=1,
         works=works(a=Work(cwd_missing=True)),
         order=FAILS_A),
    Case("spawn-failure-is-a-warning-and-failed", (A,), {"a": Want("failed", "spawn_failed", code=None)}, exit=1,
         works=works(a=Work(spawn_error="2 No such file or directory")), warnings=("spawn_failed",),
         order=("worker_launch_invoked a", "warning spawn_failed", "worker_failed a")),
)


# ----- retries (SPEC §6) --------------------------------------------------------------------

RETRIES: tuple[Case, ...] = (
    Case("failed-then-succeeded", (task("a", retries=1),),
         {"a": Want("succeeded", attempts=2, code=0, history=("failed", "succeeded"))},
         works=works(a=(Work(code=1), Work())),
         order=("slot_reserved a", "worker_failed a", "task_retry a", "slot_reserved a", "worker_completed a"),
         at={"task_retry a": 1.0, "worker_completed a": 2.0}),
    Case("attempts-exhausted-last-code-wins", (task("a", retries=2),),
         {"a": Want("failed", attempts=3, code=3, history=("failed", "failed", "failed"))}, exit=1,
         works=works(a=(Work(code=1), Work(code=2), Work(code=3))),
         order=("worker_failed a", "task_retry a", "worker_failed a", "task_retry a", "worker_failed a",
                "run_finished")),
    Case("last-attempt-status-wins-timed_out", (task("a", retries=1, timeout=5),),
         {"a": Want("timed_out", "timeout", attempts=2, history=("failed", "timed_out"))}, exit=1,
         works=works(a=(Work(code=1), Work(after=60))),
         order=("worker_failed a", "task_retry a", "worker_failed a", "task_timed_out a")),
    # a worker whose end nobody saw may have finished: never run again by itself (SPEC §5.7)
    Case("unknown-is-not-retried", (task("a", retries=1),),
         {"a": Want("unknown", "wrapper_lost", attempts=1, history=("unknown",))}, exit=1,
         works=works(a=(Work(vanishes=True), Work())),
         order=("worker_failed a", "run_finished")),
    Case("timed_out-is-retried-once-its-slot-is-free", (task("a", retries=1, timeout=2),),
         {"a": Want("succeeded", attempts=2, history=("timed_out", "succeeded"))},
         works=works(a=(Work(after=60), Work())), flags={"jobs": 1},
         order=("worker_failed a", "task_retry a", "slot_released", "slot_reserved a"), at={"task_retry a": 2.0}),
    Case("task-retries-beat-the-run-setting", (task("a", retries=0), B),
         {"a": Want("failed", attempts=1), "b": Want("succeeded", attempts=2)}, exit=1,
         works=works(a=Work(code=1), b=(Work(code=1), Work())), flags={"retries": 3},
         order=("worker_failed b", "task_retry b", "worker_completed b")),
    Case("a-retry-keeps-its-rank-in-the-queue", (task("a", retries=1), B), {"a": Want("succeeded", attempts=2),
                                                                            "b": Want("succeeded")},
         works=works(a=(Work(code=1), Work())), flags={"jobs": 1},
         order=("worker_failed a", "task_retry a", "slot_reserved a", "worker_completed a", "slot_reserved b")),
)


# ----- --halt (SPEC §6, README) --------------------------------------------------------------

HALT: tuple[Case, ...] = (
    Case("soon-stops-dispatch-running-finish", (A, B, C),
         {"a": Want("failed"), "b": Want("succeeded"), "c": Want("cancelled", "halted", attempts=0)}, exit=1,
         works=works(a=Work(code=1, after=1), b=Work(after=3)), flags={"halt": "soon"}, warnings=("halted",),
         order=("worker_failed a", "warning halted", "task_cancelled c", "worker_completed b", "run_finished"),
         at={"worker_completed b": 3.0}),
    Case("now-cancels-the-running", (A, B, C),
         {"a": Want("failed"), "b": Want("cancelled", "halted", code=143),
          "c": Want("cancelled", "halted", attempts=0)},
         exit=1, works=works(a=Work(code=1, after=1), b=Work(after=30)), flags={"halt": "now"}, warnings=("halted",),
         order=("worker_failed a", "warning halted", "task_cancelled c", "worker_failed b", "task_cancelled b"),
         at={"worker_failed b": 1.0}),
    Case("acts-only-after-the-retries", (task("a", retries=1), B, C),
         {"a": Want("succeeded", attempts=2), "b": Want("succeeded"), "c": Want("succeeded")},
         works=works(a=(Work(code=1), Work())), flags={"halt": "soon"},
         order=("worker_failed a", "task_retry a", "worker_completed a", "run_finished")),
    Case("a-timeout-is-a-failure-for-good", (task("a", timeout=1), B, C),
         {"a": Want("timed_out", "timeout"), "b": Want("cancelled", "halted", code=143),
          "c": Want("cancelled", "halted", attempts=0)},
         exit=1, works=works(a=Work(after=30), b=Work(after=30)), flags={"halt": "now"}, warnings=("halted",),
         order=("task_timed_out a", "warning halted", "task_cancelled c", "worker_failed b", "task_cancelled b")),
    # an outcome nobody saw may be a success: it halts nothing (``policy``)
    Case("an-unknown-outcome-does-not-halt", (A, B, C),
         {"a": Want("unknown", "wrapper_lost"), "b": Want("succeeded"), "c": Want("succeeded")},
         exit=1, works=works(a=Work(vanishes=True), b=Work(after=3)), flags={"halt": "soon"},
         order=("worker_failed a", "worker_completed c", "worker_completed b")),
)


# ----- timeouts and the idle watchdog (SPEC §6) ----------------------------------------------

TIME_LIMITS: tuple[Case, ...] = (
    Case("timeout-fires-on-time", (task("a", timeout=3),),
         {"a": Want("timed_out", "timeout", code=143, signal="SIGTERM", ended_at=3.0)}, exit=1,
         works=works(a=Work(after=600)),
         order=("worker_process_spawned a", "worker_failed a", "task_timed_out a"), at={"worker_failed a": 3.0}),
    Case("ignored-SIGTERM-ends-at-SIGKILL-after-the-grace", (task("a", timeout=3),),
         {"a": Want("timed_out", "timeout", code=137, signal="SIGKILL")}, exit=1,
         works=works(a=Work(after=600, term="ignores")), at={"worker_failed a": 5.0},
         order=("worker_process_spawned a", "worker_failed a", "task_timed_out a")),
    Case("kill-grace-setting", (task("a", timeout=3),), {"a": Want("timed_out", "timeout", code=137)}, exit=1,
         works=works(a=Work(after=600, term="ignores")), flags={"kill_grace": 0.5}, at={"worker_failed a": 3.5},
         order=("worker_process_spawned a", "worker_failed a", "task_timed_out a")),
    Case("task-timeout-beats-the-run-setting", (task("a", timeout=2), B),
         {"a": Want("timed_out", "timeout"), "b": Want("timed_out", "timeout")}, exit=1,
         works=works(a=Work(after=600), b=Work(after=600)), flags={"timeout": 7},
         at={"task_timed_out a": 2.0, "task_timed_out b": 7.0},
         order=("task_timed_out a", "task_timed_out b")),
    Case("idle-kill", (A,), {"a": Want("timed_out", "idle_timeout", code=143)}, exit=1,
         works=works(a=Work(after=600)), flags={"idle_timeout": 2},
         order=("worker_process_spawned a", "idle_timeout a", "worker_failed a", "task_timed_out a"),
         at={"idle_timeout a": 2.5}),
    Case("idle-warn-lets-it-finish", (A,), {"a": Want("succeeded")},
         works=works(a=Work(after=10)), flags={"idle_timeout": 2, "idle_policy": "warn"}, warnings=("idle_timeout",),
         order=("idle_timeout a", "warning idle_timeout", "worker_completed a"), at={"worker_completed a": 10.0}),
    Case("output-keeps-it-alive", (A,), {"a": Want("succeeded")},
         works=works(a=Work(after=10, output_every=1)), flags={"idle_timeout": 2},
         order=("worker_process_spawned a", "worker_completed a")),
    Case("heartbeat-lines-keep-it-alive", (A,), {"a": Want("succeeded")},
         works=works(a=Work(after=10, beat_every=1.5)), flags={"idle_timeout": 2},
         order=("worker_process_spawned a", "worker_completed a")),
    Case("idle-timeout-is-retried", (task("a", retries=1, idle_timeout=1),),
         {"a": Want("succeeded", attempts=2, history=("timed_out", "succeeded"))},
         works=works(a=(Work(after=60), Work(after=3, output_every=0.5))),
         order=("idle_timeout a", "worker_failed a", "task_retry a", "worker_completed a")),
)


# ----- dependencies, priority, backfill (SPEC §6) --------------------------------------------

SCHEDULING: tuple[Case, ...] = (
    Case("after-waits-for-success", (A, task("b", after=["a"])), {"a": Want("succeeded"), "b": Want("succeeded")},
         works=works(a=Work(after=2)), order=("worker_completed a", "slot_reserved b"), at={"slot_reserved b": 2.0}),
    Case("after-a-failure-skips-transitively", (A, task("b", after=["a"]), task("c", after=["b"]), D),
         {"a": Want("failed"), "b": Want("skipped", "dependency_failed", attempts=0),
          "c": Want("skipped", "dependency_failed", attempts=0), "d": Want("succeeded")},
         exit=1, works=works(a=Work(code=1)), order=("worker_failed a", "task_skipped b", "task_skipped c")),
    Case("after-a-cancelled-task-is-skipped", (A, task("b", after=["a"])),
         {"a": Want("cancelled", "cancelled_by_user"), "b": Want("skipped", "dependency_failed", attempts=0)},
         exit=1, works=works(a=Work(after=30)), messages=(Message(1, "cancel", ("a",)),),
         order=("inbox_consumed", "worker_failed a", "task_cancelled a", "task_skipped b")),
    Case("priority-then-file-order", (task("low"), task("high", priority=5), task("mid", priority=2),
                                      task("mid2", priority=2)),
         {n: Want("succeeded") for n in ("low", "high", "mid", "mid2")}, flags={"jobs": 1},
         order=("slot_reserved high", "slot_reserved mid", "slot_reserved mid2", "slot_reserved low")),
    Case("backfill-in-the-same-instant", (A, B, C), {n: Want("succeeded") for n in "abc"},
         works=works(a=Work(after=1), b=Work(after=5)),
         order=("slot_reserved a", "slot_reserved b", "batch_dispatch_completed", "worker_completed a",
                "slot_reserved c", "backfill c", "worker_process_spawned c"),
         at={"worker_completed a": 1.0, "backfill c": 1.0, "worker_process_spawned c": 1.0},
         metrics={"wall_time_ms": 5000.0, "active_slot_time_ms": 7000.0, "utilization": 0.7, "backfill_count": 1,
                  "batch_dispatch_count": 1, "largest_batch_size": 2, "first_batch_launch_span_ms": 0.0,
                  "refill_latency_ms": {"p50": 0.0, "p95": 0.0, "count": 1}}),
    Case("no-tasks", (), {}, order=RUN),
    Case("one-batch-for-every-free-slot", (A, B, C, D), {n: Want("succeeded") for n in "abcd"}, flags={"jobs": 4},
         order=("batch_dispatch_started", "worker_launch_invoked a", "worker_launch_invoked d",
                "batch_dispatch_completed", "worker_process_spawned a")),
    # a batch larger than a start chunk starts its first members while the rest are reserved;
    # it is still one batch of all of them, to the counts and to the first batch's readers
    Case("a-large-batch-starts-as-it-is-reserved", BIG_BATCH, {t.name: Want("succeeded") for t in BIG_BATCH},
         flags={"jobs": len(BIG_BATCH)},
         order=("slot_reserved t1", "worker_launch_invoked t1", "slot_reserved t12", "batch_dispatch_started",
                "worker_launch_invoked t12", "batch_dispatch_completed"),
         metrics={"batch_dispatch_count": 1, "largest_batch_size": 12, "first_batch_launch_span_ms": 0.0}),
)


# ----- cancel through the inbox, and its races (SPEC §8, README) ------------------------------

CANCEL: tuple[Case, ...] = (
    Case("pending-task", (A, B), {"a": Want("succeeded"), "b": Want("cancelled", "cancelled_by_user", attempts=0)},
         exit=1, works=works(a=Work(after=3)), flags={"jobs": 1}, messages=(Message(1, "cancel", ("b",)),),
         replies=({"ok": True, "cancelled": ["b"]},),
         order=("task_cancelled b", "inbox_consumed", "worker_completed a")),
    Case("running-task", (A, B), {"a": Want("cancelled", "cancelled_by_user", code=143), "b": Want("succeeded")},
         exit=1, works=works(a=Work(after=30), b=Work(after=5)), messages=(Message(1, "cancel", ("a",)),),
         replies=({"ok": True, "cancelled": ["a"]},),
         order=("inbox_consumed", "worker_failed a", "task_cancelled a", "worker_completed b"),
         at={"worker_failed a": 1.0}),
    Case("while-its-wrapper-starts", (A,), {"a": Want("cancelled", "cancelled_by_user", code=143)}, exit=1,
         works=works(a=Work(start_delay=2, after=30)), messages=(Message(1, "cancel", ("a",)),),
         replies=({"ok": True, "cancelled": ["a"]},),
         order=("worker_launch_invoked a", "inbox_consumed", "worker_process_spawned a", "worker_failed a"),
         at={"worker_process_spawned a": 2.0, "worker_failed a": 2.0}),
    Case("after-its-exit", (A, B), {"a": Want("succeeded"), "b": Want("succeeded")},
         works=works(a=Work(after=1), b=Work(after=5)), messages=(Message(2, "cancel", ("a",)),),
         replies=({"ok": False, "cancelled": [], "already_ended": ["a"]},),
         order=("worker_completed a", "inbox_consumed", "worker_completed b")),
    Case("the-whole-run", (A, B, C),
         {"a": Want("cancelled", "cancelled_by_user", code=143), "b": Want("cancelled", "cancelled_by_user", code=143),
          "c": Want("cancelled", "cancelled_by_user", attempts=0)},
         exit=130, works=works(a=Work(after=30), b=Work(after=30)), messages=(Message(1, "cancel"),),
         replies=({"ok": True, "cancelled": ["the whole run"]},),
         order=("task_cancelled c", "inbox_consumed", "worker_failed a", "task_cancelled a", "run_finished")),
    Case("the-whole-run-while-a-wrapper-starts", (A,), {"a": Want("cancelled", "cancelled_by_user", code=143)},
         exit=130, works=works(a=Work(start_delay=2, after=30)), messages=(Message(1, "cancel"),),
         order=("inbox_consumed", "worker_process_spawned a", "worker_failed a", "run_finished"),
         at={"worker_failed a": 2.0}),
    Case("a-worker-that-ignores-SIGTERM", (A,), {"a": Want("cancelled", "cancelled_by_user", code=137)}, exit=1,
         works=works(a=Work(after=30, term="ignores")), messages=(Message(1, "cancel", ("a",)),),
         at={"worker_failed a": 3.0},
         order=("inbox_consumed", "worker_failed a", "task_cancelled a")),
    Case("while-the-run-ends", (A,), {"a": Want("succeeded")}, mux=Mux(cancel_while_ending=True),
         replies=({"ok": False},), order=("worker_completed a", "inbox_consumed", "run_finished")),
    # read in the turn its last worker exits by itself: the cancel ended nothing, the run
    # finished (it was: "cancelled", exit 130, and its Zellij tab kept as a cancelled run's)
    Case("the-whole-run-as-its-last-worker-exits", (A, B), {"a": Want("succeeded"), "b": Want("succeeded")},
         works=works(a=Work(after=1), b=Work(after=2)), messages=(Message(2, "cancel"),), mux=Mux(),
         replies=({"ok": False, "cancelled": [], "already_ended": ["every task"],
                   "error": "nothing to cancel: every task already ended"},),
         order=("worker_completed a", "inbox_consumed", "worker_completed b", "run_finished")),
    Case("the-whole-run-as-its-last-worker-fails", (A,), {"a": Want("failed", code=3)}, exit=1,
         works=works(a=Work(after=1, code=3)), messages=(Message(1, "cancel"),),
         replies=({"ok": False, "cancelled": [], "already_ended": ["every task"]},),
         order=("inbox_consumed", "worker_failed a", "run_finished")),
    # ... a task cancelled before it by a cancel of its own: the whole-run stop still ended nothing
    Case("the-whole-run-as-its-last-worker-exits-after-a-task-cancel", (A, B),
         {"a": Want("cancelled", "cancelled_by_user", code=143), "b": Want("succeeded")}, exit=1,
         works=works(a=Work(after=30), b=Work(after=2)), messages=(Message(1, "cancel", ("a",)), Message(2, "cancel")),
         replies=({"ok": True, "cancelled": ["a"]}, {"ok": False, "cancelled": [], "already_ended": ["every task"]}),
         order=("task_cancelled a", "inbox_consumed", "worker_completed b", "run_finished")),
    Case("cancelled-is-never-retried", (task("a", retries=3),), {"a": Want("cancelled", "cancelled_by_user")}, exit=1,
         works=works(a=Work(after=30)), messages=(Message(1, "cancel", ("a",)),),
         order=("inbox_consumed", "worker_failed a", "task_cancelled a", "run_finished")),
    # a message naming what is no task's name (``Run.cancel(None)`` posted one): the supervisor
    # died of it, its run left interrupted and a's success unrecorded
    Case("names-that-are-not-strings", (A,), {"a": Want("succeeded")},
         works=works(a=Work(after=3)),
         messages=(Message(1, "cancel", (None,)), Message(1.5, "restart", (5,)), Message(2, "cancel", (["a"],))),
         replies=({"ok": False, "error": "cancel: tasks must be a list of task names (strings), not [None]"},
                  {"ok": False, "error": "restart: tasks must be a list of task names (strings), not [5]"},
                  {"ok": False, "error": "cancel: tasks must be a list of task names (strings), not [['a']]"}),
         warnings=("invalid_message",) * 3),
)


# ----- a kill against a worker's own end (SPEC §5.7, the outcome rule) ---------------------------
# A kill changes an outcome only when its first signal reached the worker and the worker ended
# at or after that moment. A message sent at the second a worker exits is read in the same turn
# as its exit (the message is scheduled first): the kill is requested, then the exit collected.

OUTCOME_RULE: tuple[Case, ...] = (
    Case("exit-0-then-cancel-requested-then-collected", (A, B),
         {"a": Want("succeeded", code=0), "b": Want("cancelled", "cancelled_by_user", code=143)}, exit=130,
         works=works(a=Work(after=1), b=Work(after=30)), messages=(Message(1, "cancel"),),
         order=("inbox_consumed", "worker_completed a", "kill_sent b", "worker_failed b", "run_finished")),
    # ... and the answer says so: held until the generation ended, which tells whether the kill did it
    Case("exit-1-then-cancel-of-the-task", (A,), {"a": Want("failed", code=1)}, exit=1,
         works=works(a=Work(after=1, code=1)), messages=(Message(1, "cancel", ("a",)),),
         replies=({"ok": False, "cancelled": [],
                   "already_ended": ["a (failed before the cancel reached it; not run again)"]},),
         order=("inbox_consumed", "worker_failed a", "run_finished")),
    # A task asked to cancel never runs again, however its generation ends: one that failed on
    # its own (before the signal, or ignoring it) keeps its failure, and its retries go unused
    # (it was: retried, and run again in full after the cancel).
    Case("exit-1-then-cancel-of-a-task-with-retries", (task("a", retries=2),),
         {"a": Want("failed", code=1, attempts=1)}, exit=1, works=works(a=Work(after=1, code=1)),
         messages=(Message(1, "cancel", ("a",)),),
         replies=({"ok": False, "cancelled": [],
                   "already_ended": ["a (failed before the cancel reached it; not run again)"]},),
         order=("inbox_consumed", "worker_failed a", "run_finished")),
    Case("TERM-ignored-then-exit-3-on-its-own-after-a-cancel", (task("a", retries=2),),
         {"a": Want("failed", code=3, attempts=1)}, exit=1, flags={"kill_grace": 5},
         works=works(a=Work(after=3, code=3, term="ignores")), messages=(Message(1.5, "cancel", ("a",)),),
         replies=({"ok": False, "cancelled": [],
                   "already_ended": ["a (failed on its own, not of the cancel's signal; not run again)"]},),
         order=("inbox_consumed", "kill_sent a", "worker_failed a", "run_finished")),
    Case("TERM-ignored-then-exit-3-on-its-own-after-a-restart", (task("a", retries=2),),
         {"a": Want("succeeded", code=0, attempts=2)}, flags={"kill_grace": 5},
         works=works(a=(Work(after=3, code=3, term="ignores"), Work(after=1))),
         messages=(Message(1.5, "restart", ("a",)),),
         replies=({"ok": False, "restarted": [],
                   "not_running": ["a (failed on its own, not of the restart's signal; retried)"]},),
         order=("inbox_consumed", "kill_sent a", "worker_failed a", "task_retry a", "worker_completed a")),
    Case("exit-0-then-cancel-of-the-task", (A, B),
         {"a": Want("succeeded", code=0), "b": Want("cancelled", "cancelled_by_user", code=143)}, exit=1,
         works=works(a=Work(after=1), b=Work(after=30)), messages=(Message(1, "cancel", ("a", "b")),),
         replies=({"ok": True, "cancelled": ["b"], "already_ended": ["a (succeeded before the cancel reached it)"]},),
         order=("inbox_consumed", "worker_completed a", "kill_sent b", "worker_failed b", "task_cancelled b")),
    Case("TERM-sent-trapped-exit-0", (A,), {"a": Want("cancelled", "cancelled_by_user", code=0, signal=None)},
         exit=130, works=works(a=Work(after=30, term="traps")), messages=(Message(1, "cancel"),),
         order=("inbox_consumed", "kill_sent a", "worker_failed a", "task_cancelled a"),
         at={"kill_sent a": 1.0}),
    # The signal reached a worker that has no handler for it (ignoring it stands for one already
    # inside exit(), or whose shell goes on past a killed child): its exit 0 after it is its own.
    Case("TERM-sent-unheard-then-exit-0-on-its-own", (A,), {"a": Want("succeeded", code=0)},
         exit=130, works=works(a=Work(after=2, term="ignores")), messages=(Message(1, "cancel"),),
         replies=({"ok": True, "cancelled": ["the whole run"]},),
         order=("inbox_consumed", "kill_sent a", "worker_completed a", "run_finished"),
         at={"kill_sent a": 1.0, "worker_completed a": 2.0}),
    Case("TERM-sent-unheard-then-exit-1-on-its-own", (A,), {"a": Want("failed", code=1)},
         exit=130, works=works(a=Work(after=2, code=1, term="ignores")), messages=(Message(1, "cancel"),),
         order=("inbox_consumed", "kill_sent a", "worker_failed a", "run_finished")),
    Case("TERM-sent-trapped-exit-0-at-its-timeout", (task("a", timeout=3),),
         {"a": Want("timed_out", "timeout", code=0)}, exit=1, works=works(a=Work(after=30, term="traps")),
         order=("kill_sent a", "worker_failed a", "task_timed_out a")),
    Case("exit-0-at-its-timeout", (task("a", timeout=3),), {"a": Want("succeeded", code=0)},
         works=works(a=Work(after=3))),
    Case("halt-now-as-another-exits-0", (A, B), {"a": Want("failed", code=1), "b": Want("succeeded", code=0)}, exit=1,
         works=works(a=Work(after=1, code=1), b=Work(after=1)), flags={"halt": "now"}, warnings=("halted",)),
    Case("restart-requested-as-it-exits-0", (A,), {"a": Want("succeeded", code=0)},
         works=works(a=Work(after=1)), messages=(Message(1, "restart", ("a",)),),
         replies=({"ok": False, "restarted": [], "not_running": ["a (succeeded before the restart reached it)"]},)),
    Case("restart-that-reaches-the-worker", (A,), {"a": Want("succeeded", code=0, attempts=2)},
         works=works(a=(Work(after=30), Work(after=1))), messages=(Message(1, "restart", ("a",)),),
         replies=({"ok": True, "restarted": ["a"], "not_running": []},)),
    # a restart while a time limit's ladder ends the worker: the limit's kill goes on, and
    # the answer says so (it said "restarted")
    Case("restart-while-a-timeout-ends-the-worker", (task("a", timeout=1, retries=2),),
         {"a": Want("succeeded", code=0, attempts=2)},
         works=works(a=(Work(after=30, term_takes=2), Work(after=0.5))), messages=(Message(2, "restart", ("a",)),),
         replies=({"ok": False, "restarted": [], "not_running": ["a (timed_out meanwhile; retried)"]},),
         order=("kill_sent a", "inbox_consumed", "worker_failed a", "task_retry a", "worker_completed a")),
    # a worker slow to die (a long kill grace): the answer comes before the CLI stops waiting
    Case("restart-of-a-worker-slow-to-die-is-answered-in-time", (A,), {"a": Want("succeeded", code=0, attempts=2)},
         works=works(a=(Work(after=600, term="ignores"), Work(after=1))), flags={"kill_grace": 60},
         messages=(Message(1, "restart", ("a",)),),
         replies=({"ok": True, "restarted": ["a"], "not_running": [], "still_ending": ["a"]},)),
    # a cancel while the ladder of a restart, or of a timeout with retries left, is still at
    # work takes its place: the task ends cancelled and is not run again (it was: the cancel
    # was dropped, the reply said "cancelled")
    Case("cancel-while-a-restart-ends-the-worker", (A,), {"a": Want("cancelled", "cancelled_by_user", code=143)},
         exit=1, works=works(a=Work(after=30, term_takes=2)),
         messages=(Message(1, "restart", ("a",)), Message(2, "cancel", ("a",))),
         replies=({"ok": False, "restarted": [], "not_running": ["a (cancelled meanwhile)"]},
                  {"ok": True, "cancelled": ["a"]}),
         order=("kill_sent a", "inbox_consumed", "worker_failed a", "task_cancelled a")),
    # a stop of the whole run runs nothing again anyway: the kill under way keeps its reason
    Case("halt-while-a-timeout-ends-the-worker", (task("a", timeout=1, retries=2), B),
         {"a": Want("timed_out", "timeout", code=143), "b": Want("failed", code=1)}, exit=1,
         works=works(a=Work(after=30, term_takes=2), b=Work(after=1.5, code=1)), flags={"halt": "now"},
         warnings=("halted",), order=("kill_sent a", "worker_failed b", "worker_failed a", "task_timed_out a")),
    Case("cancel-while-a-timeout-ends-the-worker", (task("a", timeout=1, retries=2),),
         {"a": Want("cancelled", "cancelled_by_user", code=143)}, exit=1,
         works=works(a=Work(after=30, term_takes=2)), messages=(Message(2, "cancel", ("a",)),),
         replies=({"ok": True, "cancelled": ["a"]},),
         order=("kill_sent a", "inbox_consumed", "worker_failed a", "task_cancelled a")),
    Case("stopped-supervisor-wakes-after-the-limit", (task("a", timeout=4),), {"a": Want("succeeded", code=0)},
         works=works(a=Work(after=2)), stopped=(1, 5)),
    Case("stopped-supervisor-wakes-after-a-failure", (task("a", timeout=4),), {"a": Want("failed", code=3)},
         exit=1, works=works(a=Work(after=2, code=3)), stopped=(1, 5)),
    Case("stopped-supervisor-still-times-out-a-worker-over-its-limit", (task("a", timeout=4),),
         {"a": Want("timed_out", "timeout", code=143)}, exit=1, works=works(a=Work(after=30)), stopped=(1, 5),
         at={"kill_sent a": 6.0}),
    Case("a-kill-sent-before-the-crash-decides-after-resume", (A,),
         {"a": Want("cancelled", "cancelled_by_user", code=0)}, exit=1,
         works=works(a=Work(after=30, term="traps", term_takes=1)), messages=(Message(1, "cancel", ("a",)),),
         crash_at=1.5, gap=1, order=("kill_sent a", "run_resumed", "worker_failed a", "task_cancelled a")),
    Case("a-task-cancelled-before-it-started-stays-cancelled-after-resume", (A,),
         {"a": Want("cancelled", "cancelled_by_user", attempts=0)}, exit=1,
         works=works(a=Work(after=30, start_delay=3)), messages=(Message(1, "cancel", ("a",)),),
         crash_at=1.5, gap=1, order=("inbox_consumed", "run_resumed", "run_finished")),
)


# ----- panes and their faults (SPEC §2 "Require-multiplexer", §6 SIGHUP) ----------------------

REQUIRE = {"require_multiplexer": True}

PANES: tuple[Case, ...] = (
    Case("pane-success", (A,), {"a": Want("succeeded", code=0)}, mux=Mux(), works=works(a=Work(after=2)),
         order=("worker_launch_invoked a", "pane_opened a", "worker_heartbeat_seen a", "worker_completed a"),
         mux_calls=(("launch", "a"), ("ended", "a", "succeeded", "succeeded"))),
    Case("pane-failure-is-kept-with-its-code", (A,), {"a": Want("failed", code=3)}, exit=1, mux=Mux(),
         works=works(a=Work(code=3)), mux_calls=(("launch", "a"), ("ended", "a", "failed", "failed (exit 3)")),
         order=("pane_opened a", "worker_heartbeat_seen a", "worker_failed a")),
    Case("heartbeat-missing-falls-back-headless", (A,), {"a": Want("succeeded")}, warnings=("heartbeat_missing",),
         mux=Mux(panes={"a": (Pane(starts=False),)}),
         order=("pane_opened a", "heartbeat_missing a", "warning heartbeat_missing", "worker_process_spawned a",
                "worker_completed a"),
         at={"heartbeat_missing a": 1.0, "worker_completed a": 2.0},
         mux_calls=(("launch", "a"), ("pane_listed", "fake_1"), ("abandon", "fake_1"))),
    # A pane closed by hand as it opened, its first stage dead of the hang-up before it could
    # claim anything: at the heartbeat deadline it is gone. Nothing ran, and it is not run
    # headless now: that ran in full a task its user had just cancelled (CI, tmux, once).
    *(Case(f"pane-closed-before-its-claim-is-cancelled-never-run-headless{suffix}", (A,),
           {"a": Want("cancelled", "pane_closed", code=None)}, exit=1, flags=flags,
           mux=Mux(panes={"a": (Pane(starts=False, closed_at_once=True),)}),
           order=("pane_opened a", "task_cancelled a"), at={"task_cancelled a": 1.0},
           mux_calls=(("launch", "a"), ("pane_listed", "fake_1"), ("ended", "a", "cancelled", "cancelled")))
      for suffix, flags in (("", {}), ("-under-require", REQUIRE))),
    # ... and its task cancelled while the supervisor asks whether its pane is still listed:
    # nothing ran, the cancel is the end, and nothing is run headless, listed or not
    *(Case(f"cancel-while-an-unreported-pane-is-looked-for-{how}", (A,),
           {"a": Want("cancelled", "cancelled_by_user", code=None)}, exit=1,
           mux=Mux(panes={"a": (Pane(starts=False, closed_at_once=closed, cancel_while_listed=True),)}),
           order=("pane_opened a", "inbox_consumed", "task_cancelled a"),
           mux_calls=(("launch", "a"), ("pane_listed", "fake_1"),
                      ("ended", "a", "cancelled", "cancelled") if closed else ("abandon", "fake_1")))
      for how, closed in (("closed", True), ("still-listed", False))),
    # The pane closed as its wrapper created its claim: nothing ran, and nothing will.
    Case("pane-gone-before-its-claim-named-it-falls-back-headless", (A,), {"a": Want("succeeded")},
         warnings=("heartbeat_missing",), mux=Mux(panes={"a": (Pane(dies_claiming=True),)}),
         order=("pane_opened a", "heartbeat_missing a", "worker_process_spawned a", "worker_completed a"),
         at={"heartbeat_missing a": 1.0}),
    Case("heartbeat-missing-under-require-fails", (A,), {"a": Want("failed", "zellij_heartbeat_missing", code=None)},
         exit=1, flags=REQUIRE, mux=Mux(panes={"a": (Pane(starts=False),)}), warnings=(),
         order=("heartbeat_missing a", "worker_failed a")),
    Case("pane-call-failed-falls-back-headless", (A,), {"a": Want("succeeded")}, warnings=("pane_call_failed",),
         mux=Mux(panes={"a": (Pane(fails="pane_call_failed"),)}),
         order=("worker_launch_invoked a", "warning pane_call_failed", "worker_process_spawned a")),
    Case("pane-call-failed-under-require-fails", (A, B),
         {"a": Want("failed", "zellij_pane_call_failed", code=None), "b": Want("succeeded")}, exit=1, flags=REQUIRE,
         mux=Mux(panes={"a": (Pane(fails="pane_call_failed"),)}),
         order=("worker_launch_invoked a", "worker_failed a", "worker_completed b")),
    Case("unstartable-under-require-fails-the-run", (A, B),
         {"a": Want("cancelled", "zellij_session_missing", attempts=0),
          "b": Want("cancelled", "zellij_session_missing", attempts=0)},
         exit=1, flags=REQUIRE, mux=Mux(panes={"a": (Pane(fails="session_missing", unstartable=True),),
                                               "b": (Pane(fails="session_missing", unstartable=True),)}),
         warnings=("session_missing",), order=("warning session_missing", "run_failed"),
         problem="required (--require-multiplexer), so no task runs"),
    Case("open-fails-runs-headless", (A,), {"a": Want("succeeded")}, mux=Mux(open_error="session_missing"),
         warnings=("session_missing",), order=("warning session_missing", "worker_process_spawned a"), mux_calls=()),
    Case("open-fails-under-require-no-task-runs", (A, B),
         {"a": Want("cancelled", "zellij_session_missing", attempts=0),
          "b": Want("cancelled", "zellij_session_missing", attempts=0)},
         exit=1, flags=REQUIRE, mux=Mux(open_error="session_missing"), warnings=("session_missing",),
         order=("warning session_missing", "run_failed", "task_cancelled a", "task_cancelled b", "run_finished"),
         mux_calls=(), problem="cannot create the session"),
    Case("pane-closed-is-cancelled-not-retried", (task("a", retries=2),),
         {"a": Want("cancelled", "pane_closed", code=129, signal="SIGHUP")}, exit=1,
         mux=Mux(panes={"a": (Pane(closed_after=2),)}), works=works(a=Work(after=30)),
         order=("worker_heartbeat_seen a", "worker_failed a", "task_cancelled a"), at={"worker_failed a": 2.0}),
    Case("exit-129-in-a-pane-is-its-failure-and-retried", (task("a", retries=1),),
         {"a": Want("succeeded", attempts=2, history=("failed", "succeeded"))},
         mux=Mux(), works=works(a=(Work(after=1, code=129), Work(after=1))),
         order=("worker_failed a", "task_retry a", "worker_completed a")),
    Case("own-SIGHUP-in-a-pane-is-its-failure", (A,), {"a": Want("failed", code=129, signal="SIGHUP")}, exit=1,
         mux=Mux(), works=works(a=Work(after=1, code=129)), order=("worker_failed a", "run_finished")),
    Case("session-lost-reruns-headless-without-an-attempt", (A, B),
         {"a": Want("succeeded", history=("lost", "succeeded")), "b": Want("succeeded", history=("lost", "succeeded"))},
         mux=Mux(session_lost_at=2), works=works(a=Work(after=30), b=Work(after=30)),
         warnings=("multiplexer_lost", "pane_call_failed", "pane_call_failed"),
         order=("worker_heartbeat_seen a", "worker_failed a", "task_retry a", "slot_reserved a",
                "warning pane_call_failed", "worker_process_spawned a", "worker_completed a"),
         at={"worker_failed a": 2.0, "worker_completed a": 32.0}),
    Case("session-lost-before-any-hang-up-mark-is-still-lost-and-rerun", (A, B),
         {"a": Want("succeeded", history=("lost", "succeeded")), "b": Want("succeeded", history=("lost", "succeeded"))},
         mux=Mux(session_lost_at=2, lost_unmarked=True), works=works(a=Work(after=30), b=Work(after=30)),
         warnings=("multiplexer_lost", "pane_call_failed", "pane_call_failed"),
         at={"worker_failed a": 2.0, "worker_completed a": 32.0}),
    Case("cancel-while-the-pane-opens", (A,), {"a": Want("cancelled", "cancelled_by_user", code=None)}, exit=1,
         mux=Mux(panes={"a": (Pane(delay=0.5, cancel_while_opening=True),)}),
         order=("worker_launch_invoked a", "inbox_consumed", "pane_opened a", "worker_failed a"),
         mux_calls=(("launch", "a"), ("abandon", "fake_1"), ("ended", "a", "cancelled", "cancelled"))),
    Case("cancel-a-pane-worker", (A,), {"a": Want("cancelled", "cancelled_by_user", code=143)}, exit=1, mux=Mux(),
         works=works(a=Work(after=30)), messages=(Message(1, "cancel", ("a",)),),
         mux_calls=(("launch", "a"), ("ended", "a", "cancelled", "cancelled (exit 143)")),
         order=("worker_heartbeat_seen a", "inbox_consumed", "worker_failed a", "task_cancelled a")),
    Case("a-retry-gets-a-new-pane", (task("a", retries=1),), {"a": Want("succeeded", attempts=2)}, mux=Mux(),
         works=works(a=(Work(code=1), Work())),
         mux_calls=(("launch", "a"), ("ended", "a", "failed", "failed (exit 1)"), ("launch", "a"),
                    ("ended", "a", "succeeded", "succeeded")),
         order=("pane_opened a", "worker_failed a", "task_retry a", "pane_opened a", "worker_completed a")),
    Case("slots-past-the-visible-cap-run-headless", (A, B), {"a": Want("succeeded"), "b": Want("succeeded")},
         mux=Mux(visible=1), mux_calls=(("launch", "a"), ("ended", "a", "succeeded", "succeeded")),
         order=("slot_reserved a", "slot_reserved b", "pane_opened a", "worker_completed a")),
    # the first batch is every slot reserved in the first pass: a pane that opens late
    # counts in its launch span, as proof reads the log (it left it out: proof disagreed)
    Case("a-first-batch-of-panes-and-headless-slots-is-one", (A, B, C), {n: Want("succeeded") for n in "abc"},
         flags={"jobs": 3}, mux=Mux(visible=1, panes={"a": (Pane(delay=0.5),)}),
         order=("slot_reserved a", "slot_reserved c", "batch_dispatch_started", "worker_launch_invoked c",
                "batch_dispatch_completed", "pane_opened a"),
         metrics={"first_batch_launch_span_ms": 500.0, "batch_dispatch_count": 1, "largest_batch_size": 2}),
    Case("no-inotify-watch-polls", (A,), {"a": Want("succeeded")}, mux=Mux(), watch_fails=True,
         warnings=("watch_failed", "watch_failed"), works=works(a=Work(after=2)),
         order=("warning watch_failed", "pane_opened a", "worker_heartbeat_seen a", "worker_completed a")),
)


# ----- the launcher dying or stopping (SPEC §7 ``launcher_lost``) -----------------------------

LAUNCHER: tuple[Case, ...] = (
    Case("dies-while-its-worker-runs", (A, B), {"a": Want("succeeded"), "b": Want("succeeded")}, flags={"jobs": 1},
         launches=(Launch(dies_after=1),), works=works(a=Work(after=3)), warnings=("launcher_lost",),
         order=("worker_process_spawned a", "warning launcher_lost", "worker_completed a", "slot_reserved b"),
         at={"worker_completed a": 3.0}),
    Case("dies-before-starting-its-wrapper", (A,), {"a": Want("succeeded")},
         launches=(Launch(dies_on_submit=True),), warnings=("launcher_lost",),
         order=("worker_launch_invoked a", "warning launcher_lost", "worker_process_spawned a", "worker_completed a")),
    Case("a-stopped-launcher-is-killed-and-replaced", (A,), {"a": Want("succeeded")},
         launches=(Launch(stops_after=0),), warnings=("launcher_lost",),
         order=("worker_launch_invoked a", "warning launcher_lost", "worker_process_spawned a"),
         at={"warning launcher_lost": 10.0, "worker_completed a": 11.0}),
    Case("a-stopped-launcher's-worker-is-still-followed", (A, B), {"a": Want("succeeded"), "b": Want("succeeded")},
         flags={"jobs": 1}, launches=(Launch(stops_after=1),), works=works(a=Work(after=20)),
         warnings=("launcher_lost",),
         order=("worker_process_spawned a", "warning launcher_lost", "worker_completed a", "slot_reserved b"),
         at={"warning launcher_lost": 10.0, "worker_completed a": 20.0}),
    # Killed after it started its wrapper and before its reply (a batch is answered in one
    # write): it did start work, its claim says so — three such in a row are no reason to stop
    # (the soak's launcher kills under load once stopped a run: "no more tasks are started").
    Case("launchers-killed-before-they-said-they-started-a-wrapper-are-replaced", (A, B, C, D),
         {n: Want("succeeded") for n in "abcd"}, flags={"jobs": 1},
         launches=(Launch(dies_unreported=True),) * 3, warnings=("launcher_lost",) * 3),
    # The second launcher is given the generation claimed (the first died on it) and dies
    # after spawning its wrapper, before that wrapper restamped the supervisor's claim: the
    # claim still says "supervisor", which read as "never ran" — a third launcher ran it again
    # beside the second's wrapper (the tmux soak's launcher kills: one task's line twice).
    Case("a-claimed-start-whose-launcher-died-before-its-wrapper-claimed-runs-once", (A,),
         {"a": Want("succeeded")}, launches=(Launch(dies_on_submit=True), Launch(claim_lag=0.5)),
         warnings=("launcher_lost",) * 2),
    Case("three-dead-launchers-stop-dispatch", (A, B),
         {"a": Want("cancelled", "launcher_lost", attempts=0), "b": Want("cancelled", "launcher_lost", attempts=0)},
         exit=1, flags={"jobs": 1}, launches=(Launch(dies_on_submit=True),) * 3,
         warnings=("launcher_lost",) * 3,
         # (a's end may come after b's: its last launcher may have spawned it claimed, and while
         # some process on the machine is in its exec, that is looked at again)
         order=("warning launcher_lost", "warning launcher_lost", "warning launcher_lost", "task_cancelled b")),
)


# ----- additions: ``add`` and follow-ups (SPEC §6 "Additions") --------------------------------

ADDITIONS: tuple[Case, ...] = (
    Case("add-with-after", (A,), {"a": Want("succeeded"), "late": Want("succeeded")},
         works=works(a=Work(after=3)),
         messages=(Message(1, "add", ({"name": "late", "cmd": "x", "after": ["a"]},)),),
         replies=({"ok": True, "added": ["late"]},),
         order=("task_added late", "inbox_consumed", "worker_completed a", "slot_reserved late"),
         at={"slot_reserved late": 3.0}),
    Case("add-while-halting-is-refused", (A, B), {"a": Want("failed"), "b": Want("succeeded")}, exit=1,
         works=works(a=Work(code=1), b=Work(after=5)), flags={"halt": "soon"}, warnings=("halted",),
         messages=(Message(2, "add", ({"name": "x", "cmd": "x"},)),), replies=({"ok": False},),
         order=("worker_failed a", "warning halted", "inbox_consumed", "worker_completed b")),
    Case("an-invalid-followup-is-a-warning", (A,), {"a": Want("succeeded")},
         works=works(a=Work(followups=({"name": "y"},))), warnings=("invalid_followup",),
         order=("followups_consumed a", "warning invalid_followup")),
    Case("followups-run-once-across-retries", (task("a", retries=1),),
         {"a": Want("succeeded", attempts=2), "a/followup-1": Want("succeeded")},
         works=works(a=(Work(code=1, followups=({"cmd": "more"},)), Work(followups=({"cmd": "more"},)))),
         order=("followups_consumed a", "task_added a/followup-1", "task_retry a", "followups_consumed a")),
)


# ----- resume a run whose supervisor vanished (SPEC §8 ``resume``) ----------------------------

RESUME: tuple[Case, ...] = (
    Case("adopts-a-running-worker", (A, B), {"a": Want("succeeded"), "b": Want("succeeded")}, flags={"jobs": 1},
         works=works(a=Work(after=10)), crash_at=2, gap=3,
         order=("worker_process_spawned a", "run_resumed", "worker_adopted a", "worker_completed a",
                "slot_reserved b", "worker_completed b"),
         at={"worker_completed a": 10.0}),
    Case("records-an-exit-that-happened-meanwhile", (A,), {"a": Want("succeeded", code=0, ended_at=3.0)},
         works=works(a=Work(after=3)), crash_at=2, gap=5,
         order=("run_resumed", "worker_adopted a", "worker_completed a"), at={"worker_completed a": 7.0}),
    # its wrapper killed while no supervisor ran, nothing of it left: it may have finished
    Case("a-vanished-worker-is-unknown", (A,), {"a": Want("unknown", "wrapper_lost", code=None)}, exit=1,
         works=works(a=Work(after=3, vanishes=True)), crash_at=2, gap=5, order=("run_resumed", "worker_failed a")),
    Case("a-vanished-worker-is-unknown-and-not-retried", (task("a", retries=1),),
         {"a": Want("unknown", "wrapper_lost", attempts=1, history=("unknown",))}, exit=1,
         works=works(a=(Work(after=3, vanishes=True), Work())), crash_at=2, gap=5,
         order=("run_resumed", "worker_failed a", "run_finished")),
    Case("an-adopted-worker-that-fails-is-retried", (task("a", retries=1),),
         {"a": Want("succeeded", attempts=2, history=("failed", "succeeded"))},
         works=works(a=(Work(after=10, code=1), Work())), crash_at=2, gap=1,
         order=("worker_adopted a", "worker_failed a", "task_retry a", "worker_completed a")),
    Case("a-kill-begun-before-the-crash-is-finished", (task("a", timeout=3),),
         {"a": Want("timed_out", "timeout", code=137)}, exit=1, works=works(a=Work(after=600, term="ignores")),
         crash_at=4, gap=0.5, order=("run_resumed", "worker_adopted a", "worker_failed a", "task_timed_out a"),
         at={"worker_failed a": 5.0}),
    Case("a-pane-worker-is-adopted-in-its-pane", (A, B), {"a": Want("succeeded"), "b": Want("succeeded")},
         flags={"jobs": 1}, mux=Mux(), works=works(a=Work(after=10)), crash_at=2, gap=1,
         order=("pane_opened a", "run_resumed", "worker_adopted a", "worker_completed a", "worker_process_spawned b")),
    Case("an-adopted-worker's-dependent-runs-after-it", (A, task("b", after=["a"])),
         {"a": Want("succeeded"), "b": Want("succeeded")}, works=works(a=Work(after=10)), crash_at=2, gap=1,
         order=("worker_adopted a", "worker_completed a", "slot_reserved b"), at={"slot_reserved b": 10.0}),
    # The tasks that never ran go back into the queue as the run held them, packed: their
    # priorities, and their dependencies on a task after them; one skipped before the crash stays so
    Case("a-resumed-queue-keeps-its-order-and-what-its-tasks-wait-for",
         (task("f", priority=9), task("x", after=["f"]), task("low"), task("high", priority=5),
          task("y", after=["z"]), task("z")),
         {"f": Want("failed", code=1), "x": Want("skipped", "dependency_failed", attempts=0), "low": Want("succeeded"),
          "high": Want("succeeded"), "y": Want("succeeded"), "z": Want("succeeded")}, exit=1, flags={"jobs": 1},
         works=works(f=Work(after=1, code=1), high=Work(after=1)), crash_at=1.5, gap=1,
         order=("worker_failed f", "task_skipped x", "slot_reserved high", "run_resumed", "worker_completed high",
                "slot_reserved low", "slot_reserved z", "slot_reserved y")),
    Case("an-unclaimed-generation-runs-as-a-new-one", (A,), {"a": Want("succeeded", attempts=1)},
         works=works(a=Work(start_delay=4)), crash_at=2, gap=1,
         order=("worker_launch_invoked a", "run_resumed", "slot_reserved a", "worker_process_spawned a",
                "worker_completed a")),
    Case("adopted-worker-keeps-what-is-left-of-its-timeout", (task("a", timeout=10),),
         {"a": Want("timed_out", "timeout", code=143)}, exit=1, works=works(a=Work(after=600)), crash_at=4, gap=2,
         at={"worker_failed a": 10.0},
         order=("run_resumed", "worker_adopted a", "worker_failed a", "task_timed_out a")),
    Case("a-cancel-sent-while-no-supervisor-ran", (A, B),
         {"a": Want("succeeded"), "b": Want("cancelled", "cancelled_by_user", attempts=0)}, exit=1, flags={"jobs": 1},
         works=works(a=Work(after=10)), crash_at=2, gap=1, messages=(Message(2.5, "cancel", ("b",)),),
         order=("run_resumed", "task_cancelled b", "inbox_consumed", "worker_completed a")),
)


TABLES = {"classification": CLASSIFICATION, "retries": RETRIES, "halt": HALT, "time-limits": TIME_LIMITS,
          "scheduling": SCHEDULING, "cancel": CANCEL, "outcome-rule": OUTCOME_RULE, "panes": PANES,
          "launcher": LAUNCHER, "additions": ADDITIONS, "resume": RESUME}


@pytest.fixture(scope="module")
def played(request: pytest.FixtureRequest) -> dict[int, Any]:
    """Every case of this module the session selected, played ahead a few at a time
    (``play_concurrently``), by case object; each test then checks its own, so the first
    test's duration is the whole module's. Under pytest-xdist the cases are already spread
    over processes, and each is played by its own test."""
    if hasattr(request.config, "workerinput"):
        return {}
    selected = [item.callspec.params["case"] for item in request.session.items
                if item.module is request.module and hasattr(item, "callspec")]
    results = play_concurrently([functools.partial(play, case) for case in selected])
    return {id(case): result for case, result in zip(selected, results, strict=True)}


@pytest.mark.parametrize("case", [
    pytest.param(case, id=f"{table}/{case.id}")
    for table, cases in TABLES.items() for case in cases])
def test_scenario(case: Case, played: dict[int, Any]) -> None:
    [result] = [played[id(case)]] if id(case) in played else play_concurrently([functools.partial(play, case)])
    if isinstance(result, BaseException):
        raise result
    check(case, result)


def test_a_stop_that_ended_nothing_leaves_the_run_finished_and_its_session_closed_as_a_success() -> None:
    """The whole-run cancel of the table's case, read in the turn b exits: the run's state is
    what its tasks say, and the multiplexer is closed as for a run that succeeded."""
    [case] = [c for c in CANCEL if c.id == "the-whole-run-as-its-last-worker-exits"]
    r = play(case)
    assert r.summary is not None and r.summary["state"] == "finished", r.summary
    assert [c for c in r.mux_calls if c[0] == "close"] == [("close", False)], r.mux_calls
