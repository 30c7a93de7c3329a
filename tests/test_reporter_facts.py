"""What the supervisor tells its reporter, in virtual time (tests/harness.py): each warning
the moment it is recorded (``Reporter.warning``), and the names of the tasks waiting for input
in the progress facts — the reporter reads nothing of the supervisor itself."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from harness import Harness, Work, task

from zellij_swarm.engine import snapshot
from zellij_swarm.engine.progress import ProgressFacts
from zellij_swarm.engine.supervisor import Supervisor


def test_a_warning_is_told_to_the_reporter_when_it_is_recorded_not_at_the_end():
    works = {"a": (Work(spawn_error="2 No such file or directory"),), "b": (Work(after=10.0),)}
    with Harness(works=works) as h:
        r = h.run([task("a"), task("b")])
    assert r.warnings() == ["spawn_failed"]
    [(when, code)] = r.warned
    assert code == "spawn_failed" and when < 1.0, r.warned  # b runs on until second 10


def test_the_progress_facts_name_the_tasks_waiting_for_input(monkeypatch):
    monkeypatch.setattr(snapshot, "counts_of", lambda run: {"running": len(run.live)})
    told: list[ProgressFacts] = []

    class Reporter:
        wants_progress = True

        def progress(self, facts: ProgressFacts) -> None:
            told.append(facts)

    class Task:
        def __init__(self, name: str, waiting: bool | None) -> None:
            self.name, self.waiting_input, self.started_at = name, waiting, 0.0

    class Live:
        def __init__(self, task: Task) -> None:
            self.task = task

    sup: Any = Supervisor.__new__(Supervisor)  # only what _maybe_progress reads
    sup.reporter, sup.clock, sup.wallclock = Reporter(), lambda: 10.0, lambda: 10.0
    sup._last_progress, sup.started_at, sup.jobs = 0.0, 0.0, 3
    sup.policy = SimpleNamespace(ended_count=0, ended_took=0.0)
    sup.live = {1: Live(Task("agent-6", True)), 2: Live(Task("agent-1", False)), 3: Live(Task("agent-2", True)),
                4: Live(Task("agent-3", None))}  # None: it cannot be known
    Supervisor._maybe_progress(sup)
    assert [f.waiting for f in told] == [["agent-2", "agent-6"]]



def test_a_terminal_that_cannot_erase_a_line_gets_a_line_per_task(monkeypatch):
    """``TERM=dumb`` (Emacs' shell): the progress line's ``\\r\\033[K`` came out as garbage."""
    import io

    from zellij_swarm.render.console import ConsoleReporter

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    for term, progress in (("xterm-256color", True), ("dumb", False)):
        monkeypatch.setenv("TERM", term)
        assert ConsoleReporter("progress", out=io.BytesIO(), err=Tty()).wants_progress is progress
