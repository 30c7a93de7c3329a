"""The paths a worker is given exist when it starts (SPEC §5.3): its heartbeat file, holding
the launch heartbeat, and its artifacts directory, empty and private. That holds whether its
generation's directory was made for it or is a folded one kept for reuse (a shell), and
whether the worker before it in the slot left files in its own artifacts or not."""

from __future__ import annotations

import os
import shutil

import pytest
from swarmtest import Swarm, kill_run_processes, run_processes
from tmuxtest import outside_env

# What each worker finds, written to seen/<its task id> in the run's cwd (never to its output:
# a generation that printed keeps its directory, and only one that did not becomes a shell): the
# artifacts directory's mode and owner once every check passed, after a line naming each check
# that failed. Then one worker in three leaves a file in its artifacts, and one in three a quiet
# process behind it for a moment (its generation's directory is then kept without artifacts/,
# which a later generation's reservation makes anew).
CHECKS = (
    '{ { [ -f "$ZELLIJ_SWARM_HEARTBEAT" ] || echo no-heartbeat; } && '
    '{ head -n 1 "$ZELLIJ_SWARM_HEARTBEAT" | grep -q \'"event":"started"\' || echo no-launch-line; } && '
    '{ [ -d "$ZELLIJ_SWARM_ARTIFACT_DIR" ] || echo no-artifact-dir; } && '
    '{ [ -z "$(ls -A "$ZELLIJ_SWARM_ARTIFACT_DIR")" ] || echo artifact-dir-not-empty; } && '
    'stat -c %a:%u "$ZELLIJ_SWARM_ARTIFACT_DIR"; } > "seen/$ZELLIJ_SWARM_TASK_ID"'
)


def tasks(count: int) -> str:
    after = ["", '; echo left > "$ZELLIJ_SWARM_ARTIFACT_DIR/left"', "; sleep 0.3 </dev/null >/dev/null 2>&1 &"]
    return "".join(f"{CHECKS}{after[i % 3]}\n" for i in range(count))


def check_every_worker(swarm: Swarm, count: int) -> None:
    rows = swarm.tasks()
    assert [r["status"] for r in rows.values()] == ["succeeded"] * count
    seen = {p.name: p.read_text().split() for p in (swarm.cwd / "seen").iterdir()}
    assert seen == {f"t{i}": [f"700:{os.getuid()}"] for i in range(1, count + 1)}


def test_headless_workers_find_their_paths_made_shell_or_not(swarm: Swarm) -> None:
    count = 40  # at -j 2, most generations after the first of each slot run in a shell
    (swarm.cwd / "seen").mkdir()
    swarm.write("t.txt", tasks(count))
    res = swarm("run", "t.txt", "-j", "2", "--backend", "headless")
    try:
        assert res.code == 0, res.stderr
        check_every_worker(swarm, count)
    finally:
        kill_run_processes(swarm.latest().name)  # the last quiet processes, if still there


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (scripts/setup installs it)")
def test_pane_workers_find_their_paths(swarm: Swarm, tmux) -> None:
    count = 6
    (swarm.cwd / "seen").mkdir()
    swarm.write("t.txt", tasks(count))
    res = swarm("run", "t.txt", "-j", "2", "--backend", "tmux", "--ui", "live", "--require-multiplexer",
                env=outside_env(tmux))
    run = swarm.latest()
    try:
        assert res.code == 0, res.stderr
        check_every_worker(swarm, count)
    finally:
        assert run_processes(run.name) == [], "a worker outlived its run"
        kill_run_processes(run.name)
