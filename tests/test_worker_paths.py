"""The paths a worker is given exist when it starts (SPEC §5.3): its heartbeat file, holding
the launch heartbeat, and its artifacts directory, empty and private. That holds whether its
generation's directory was made for it or is a folded one kept for reuse (a shell), and
whether the worker before it in the slot left files in its own artifacts or not."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from swarmtest import Swarm, kill_run_processes, run_processes
from tmuxtest import outside_env
from zellijtest import FAST

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


def run_and_check(swarm: Swarm, count: int, *run_args: str, env: dict[str, str] | None = None) -> Path:
    """Run ``count`` of ``tasks`` with ``run_args``: every worker found its paths, and no
    process of the run is left once it ended (the quiet ones it ended itself). Returns the run."""
    (swarm.cwd / "seen").mkdir()
    swarm.write("t.txt", tasks(count))
    res = swarm("run", "t.txt", *run_args, env=env, timeout=120)
    run = swarm.latest()
    try:
        assert res.code == 0, res.stderr
        assert [r["status"] for r in swarm.tasks().values()] == ["succeeded"] * count
        seen = {p.name: p.read_text().split() for p in (swarm.cwd / "seen").iterdir()}
        assert seen == {f"t{i}": [f"700:{os.getuid()}"] for i in range(1, count + 1)}
        assert run_processes(run.name) == [], "a process of the run outlived it"
    finally:
        kill_run_processes(run.name)
    return run


def test_headless_workers_find_their_paths_made_shell_or_not(swarm: Swarm) -> None:
    # at -j 2, most generations after the first of each slot run in a shell
    run_and_check(swarm, 40, "-j", "2", "--backend", "headless")


@pytest.mark.parametrize("where", ["tmux", "zellij", "real-zellij"])
def test_pane_workers_find_their_paths(swarm: Swarm, where: str, request: pytest.FixtureRequest) -> None:
    """In panes (never shells), on tmux, the fake Zellij (fake tier) and the real one."""
    if where == "tmux":
        if shutil.which("tmux") is None:
            pytest.skip("tmux is not installed (scripts/setup installs it)")
        env = outside_env(request.getfixturevalue("tmux"))
    elif where == "zellij":
        env = request.getfixturevalue("fz").env("0.45.0", **FAST)
    else:
        env = request.getfixturevalue("rz").env(**FAST)
    backend = where.removeprefix("real-")
    run_and_check(swarm, 6, "-j", "2", "--backend", backend, "--ui", "live", "--require-multiplexer", env=env)
