"""What a Slurm run asks of the cluster, against the real local one (issue 23 §8, §10): requests
no node can grant are refused before the run, naming the task and what no node has; free-form
``srun`` options reach the step, a task's over the run's; a step Slurm refuses to launch keeps
Slurm's words. (The parsing alone, without a cluster: tests/test_executor_options.py.)"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from swarmtest import Swarm, clean_env


@pytest.mark.parametrize(("flags", "said"), [
    (("--slurm-cpus", "64"), "every task (2) asks for cpus=64 (the most a node has: 8): no node of partition debug"),
    (("--slurm-mem", "9G"), "mem=9G (the most a node has: 4096M)"),
    (("--slurm-gres", "gpu:1"), "gres=gpu:1 (nodes have: none)"),
    (("--slurm-constraint", "avx512"), "constraint=avx512 (node features: none)"),
])
def test_a_request_no_node_can_grant_is_refused_before_the_run(swarm: Swarm, cluster: dict[str, str],
                                                               flags: tuple[str, ...], said: str) -> None:
    res = swarm("run", "--executor", "slurm", "--backend", "headless", *flags, "true {}", ":::", "a", "b",
                env=clean_env(**cluster))
    assert res.code == 2 and res.stderr.count("\n") == 1 and said in res.stderr, res.stderr
    assert not swarm.runs()


def test_an_allocation_the_partition_can_never_grant_is_refused_before_the_run(swarm: Swarm,
                                                                              cluster: dict[str, str]) -> None:
    """Each task fits a node, but ``--slurm-alloc`` asks for them all at once: Slurm left such
    an allocation queued for ever (PartitionConfig), and the run waited with it."""
    args = ("run", "--executor", "slurm", "--backend", "headless", "--slurm-alloc", "--slurm-cpus", "4", "-j", "6",
            "true {}", ":::", *"abcdef")
    res = swarm(*args, env=clean_env(**cluster))
    assert res.code == 2 and res.stderr.count("\n") == 1, res.stderr
    assert "the swarm's allocation asks for 24 CPUs (6 tasks at once × cpus=4)" in res.stderr, res.stderr
    assert "have 16 in all: -j 4 at most" in res.stderr, res.stderr
    assert not swarm.runs()


def test_extra_options_reach_the_step_and_a_launch_failure_keeps_slurms_words(swarm: Swarm,
                                                                             cluster: dict[str, str]) -> None:
    swarm.write("x.toml", "[swarm]\njobs = 4\n"
                + "".join(f'[[task]]\nname = "r{i}"\ncmd = "echo on=$SLURMD_NODENAME"\n' for i in range(2))
                + '[[task]]\nname = "own"\ncmd = "echo on=$SLURMD_NODENAME"\nslurm = { extra = ["--nodelist=n1"] }\n'
                  '[[task]]\nname = "nowhere"\ncmd = "true"\nslurm = { extra = "--nodelist=nosuch" }\n'
                  '[[task]]\nname = "big"\ncmd = "true"\nslurm = { cpus = 64 }\n')
    env = clean_env(**cluster)
    res = swarm("run", "x.toml", "--executor", "slurm", "--backend", "headless", env=env)
    assert res.code == 2 and "task 'big' asks for cpus=64" in res.stderr and not swarm.runs(), res.stderr
    swarm.write("x.toml", swarm.cwd.joinpath("x.toml").read_text().replace("cpus = 64", "cpus = 8"))
    res = swarm("run", "x.toml", "--executor", "slurm", "--backend", "headless", "--slurm-extra=--nodelist=n2",
                "--json", env=env)
    assert res.code == 1, res.stderr
    refused = "srun: error: Unable to allocate resources: Invalid node name specified"
    assert refused in res.stderr  # said as it happens
    assert refused in swarm("logs", "nowhere").stderr  # and kept with its attempt
    tasks = {t["name"]: t for t in json.loads(res.stdout)["tasks"]}
    logs = {name: swarm("logs", name).stdout.strip() for name in ("r0", "r1", "own")}
    assert logs == {"r0": "on=n2", "r1": "on=n2", "own": "on=n1"}
    assert tasks["big"]["status"] == "succeeded"
    assert (tasks["nowhere"]["status"], tasks["nowhere"]["reason"]) == ("failed", "executor_failed")
    [warning] = [w for w in json.loads(res.stdout)["warnings"] if w["task"] == "nowhere"]
    assert refused in warning["message"]


def test_doctor_says_once_that_accounting_is_not_configured(swarm: Swarm, cluster: dict[str, str]) -> None:
    env = clean_env(**cluster)
    info = json.loads(swarm("doctor", "--executor", "slurm", "--json", env=env).stdout)["slurm"]
    assert info["accounting"] == {"available": False, "why": "Slurm accounting storage is disabled"}
    text = swarm("doctor", "--executor", "slurm", env=env).stdout
    assert text.count("accounting: not configured (Slurm accounting storage is disabled)") == 1, text
    assert "executor = slurm  (flag --executor)" in text


def test_srun_only_extra_options_stay_out_of_the_allocation(swarm: Swarm, cluster: dict[str, str]) -> None:
    """``--slurm-alloc``: salloc is asked with the table's options alone; the ``extra`` words
    are srun's (salloc refuses ``--cpu-bind``) and reach each step."""
    res = swarm("run", "--executor", "slurm", "--backend", "headless", "--slurm-alloc", "--slurm-extra=--cpu-bind=none",
                "--output", "quiet", "echo on=$SLURMD_NODENAME", ":::", "a", "b", env=clean_env(**cluster))
    assert res.code == 0, res.stderr + (swarm.latest() / "salloc.log").read_text()
    assert "--cpu-bind" not in (swarm.latest() / "salloc.log").read_text()
    assert all(t["status"] == "succeeded" for t in swarm.tasks().values())


def test_a_live_panes_srun_lines_go_to_the_executor_log_not_the_workers_output(swarm: Swarm, cluster: dict[str, str],
                                                                              tmp_path: Path) -> None:
    """In a live pane srun runs with ``--pty``: the worker's output still reaches the pane (a
    terminal on the node), and srun's own lines (``task 0: Exited with exit code 3`` here) are
    the step's executor log, shown apart by ``logs`` on stderr — never mixed into the worker's
    output."""
    (tmp_path / "tm").mkdir()
    env = clean_env(TMUX_TMPDIR=str(tmp_path / "tm"), ZELLIJ_SWARM_PANE_HOLD_MS="100", **cluster)
    try:
        res = swarm("run", "--backend", "tmux", "--ui", "live", "--executor", "slurm", "--output", "quiet",
                    "[ -t 1 ] && echo tty-yes; exit 3", ":::", "a", env=env)
        assert res.code == 1, res.stderr
        logs = swarm("logs", swarm.latest().name, "task-1")
        assert "tty-yes" in logs.stdout and "srun:" not in logs.stdout, logs.stdout
        assert "Exited with exit code 3" in logs.stderr, logs.stderr
        assert swarm.tasks()["task-1"]["exit_code"] == 3
    finally:
        subprocess.run(["tmux", "kill-server"], env=env, capture_output=True, timeout=30)
