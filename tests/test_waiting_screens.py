"""Each default ``waiting_pattern`` against a rendered screen of the prompt it claims to match
(issue 24 §5 (d)), and screens none may match.

The recordings in tests/screens/prompts/ are what a program wrote to its terminal, as a
pane's ``output.log`` keeps it: colours, in-place redraws, an Ink TUI erasing its spinner to
draw a dialog. They are rendered as the input watch renders them (``worker.screen`` at the
pane's size, here 80×24) before the patterns look.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from zellij_swarm.backends.base import LaunchRequest
from zellij_swarm.config import settings
from zellij_swarm.config.swarmfile import TaskSpec
from zellij_swarm.engine import input_watch
from zellij_swarm.engine.live import LiveGen
from zellij_swarm.engine.timers import Timers
from zellij_swarm.exc import SettingError
from zellij_swarm.records.generation_files import GenPaths
from zellij_swarm.records.task import TaskRecord
from zellij_swarm.worker import prompts, waiting
from zellij_swarm.worker.screen import TailScreen
from zellij_swarm.worker.waiting import TtyWait

SCREENS = Path(__file__).parent / "screens" / "prompts"

# Which recorded screen shows each default's prompt.
CLAIMS = {
    "Proceed?": "proceed.bin",
    "[y/N]": "y-n-brackets.bin",
    "(y/N)": "y-n-parens.bin",
    "(Y)es/(N)o": "aider.bin",
    "Do you want to": "claude-code.bin",
    "Would you like to": "codex.bin",
    "Press Enter": "press-enter.bin",
}


def rendered(name: str) -> list[str]:
    return TailScreen().render(SCREENS / name, 80, 24)


def test_every_default_is_claimed() -> None:
    assert set(CLAIMS) == set(prompts.DEFAULT_PATTERNS)


@pytest.mark.parametrize("default", CLAIMS)
def test_a_default_matches_the_screen_of_its_prompt(default: str) -> None:
    screen = rendered(CLAIMS[default])
    assert prompts.asks(screen, prompts.compiled(prompts.DEFAULT_PATTERNS[default])), "\n".join(screen)
    assert prompts.asks(screen, prompts.compiled(None))


@pytest.mark.parametrize("name", ["no-spinner.bin", "no-answered.bin", "no-dialog-erased.bin"])
def test_no_default_matches_a_screen_that_asks_nothing(name: str) -> None:
    screen = rendered(name)
    assert any(line.strip() for line in screen)
    assert not prompts.asks(screen, prompts.compiled(None)), "\n".join(screen)


def test_the_raw_bytes_would_have_lied() -> None:
    """The erased dialog is still in the bytes: only the rendered screen says it is gone."""
    raw = (SCREENS / "no-dialog-erased.bin").read_bytes().decode()
    assert prompts.compiled(None).search(raw)  # type: ignore[union-attr]


def test_a_pattern_of_ones_own_replaces_the_defaults_and_empty_looks_for_nothing() -> None:
    screen = rendered("claude-code.bin")
    assert not prompts.asks(screen, prompts.compiled(r"Approve\?"))
    assert prompts.asks(screen, prompts.compiled(r"make this edit"))
    assert prompts.compiled("") is None and not prompts.asks(screen, None)


def test_a_bad_pattern_is_a_setting_error_naming_where() -> None:
    with pytest.raises(SettingError, match="waiting_pattern"):
        settings.parse_as("waiting_pattern", "Proceed? [y/N", "file s.toml:3")


def _watch_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, screen: str, *, task_pattern: str | None,
               run_pattern: str | None, closed: str | None) -> tuple[list[bool | None], TaskRecord]:
    """One input watch over one pane worker whose screen is ``screen`` and whose processes the
    kernel will not show (``closed``: why) or shows polling among sockets (None)."""
    run = tmp_path / "run"
    gen = GenPaths(run / "slots" / "slot-1" / "gen-1", 1, 1)
    gen.dir.mkdir(parents=True)
    gen.output.write_text(screen)
    wait = TtyWait.UNKNOWN if closed else TtyWait.SHARED
    monkeypatch.setattr(input_watch.waiting, "look", lambda pid, procs: waiting.Look(wait, closed))
    monkeypatch.setattr(input_watch.waiting, "scan_procs", lambda: {})
    now = [0.0]
    timers = Timers(lambda: now[0])
    seen: list[bool | None] = []
    # output written "now": never silent long enough for the quiet rule
    watch = input_watch.InputWatch(timers, lambda: gen.output.stat().st_mtime, lambda lg, v: seen.append(v),
                                   run_pattern=run_pattern)
    task = TaskRecord(spec=TaskSpec(name="agent", cmd="agent", waiting_pattern=task_pattern), id="t1", order=1,
                      timeout=None, retries=0, idle_timeout=None)
    lg = LiveGen(task, gen, LaunchRequest(gen, 1, "agent", pane=True), backfill=False, pid=os.getpid())
    watch.register(lg)
    for _ in range(3):
        now[0] += input_watch.TICK
        timers.run_due()
    watch.unregister(lg)
    return seen, task


@pytest.mark.parametrize("closed", [None, "/proc/PID/syscall is closed to this user (ptrace access)"])
def test_the_input_watch_marks_a_worker_whose_screen_asks(tmp_path, monkeypatch, closed) -> None:
    seen, task = _watch_one(tmp_path, monkeypatch, "working...\nApply the patch? [y/N] ", task_pattern=None,
                            run_pattern=None, closed=closed)
    assert seen == [True]
    assert task.waiting_evidence == closed
    assert (task.optional_fields.get("waiting_evidence")) == closed


def test_the_tasks_pattern_wins_over_the_runs_and_the_runs_over_the_defaults(tmp_path, monkeypatch) -> None:
    closed = "closed"
    asks = "Apply the patch? [y/N] "
    assert _watch_one(tmp_path / "1", monkeypatch, asks, task_pattern=None, run_pattern="", closed=closed)[0] \
        == [None]
    assert _watch_one(tmp_path / "2", monkeypatch, "Approve? ", task_pattern=None, run_pattern="Approve",
                      closed=closed)[0] == [True]
    assert _watch_one(tmp_path / "3", monkeypatch, asks, task_pattern="Approve", run_pattern=None,
                      closed=closed)[0] == [None]


def test_the_runs_waiting_pattern_reaches_its_input_watch(tmp_path) -> None:
    """The run-wide ``waiting_pattern`` (flag, environment, swarm file: settings) is the one the
    supervisor's input watch looks for, for a task with none of its own."""
    from zellij_swarm.backends.headless import HeadlessBackend
    from zellij_swarm.engine.supervisor import RunPlan, Supervisor
    from zellij_swarm.render.console import ConsoleReporter

    resolved = settings.resolve({"waiting_pattern": "Approve\\?", "state_dir": str(tmp_path), "output": "quiet"}, {})
    plan = RunPlan(tasks=[TaskSpec(name="agent", cmd="agent")], settings=resolved, cwd=str(tmp_path), env={},
                   argv=["test"])
    sup = Supervisor(plan, HeadlessBackend(), ConsoleReporter("quiet"), handle_signals=False)
    gen = GenPaths(tmp_path / "gen-1", 1, 1)
    task = TaskRecord(spec=TaskSpec(name="agent", cmd="agent"), id="t1", order=1, timeout=None, retries=0,
                      idle_timeout=None)
    lg = LiveGen(task, gen, LaunchRequest(gen, 1, "agent", pane=True), backfill=False, pid=os.getpid())
    assert sup.input_watch._pattern(lg) == "Approve\\?"
