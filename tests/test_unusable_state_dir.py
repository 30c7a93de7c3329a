"""A state directory that cannot be made is bad input named in one line, exit 2 (issue 22,
item 11): under a dangling symbolic link, or where the kernel lets no directory be made
(/proc), making it recursed until ``RecursionError``."""

from __future__ import annotations

import os

import pytest


@pytest.mark.parametrize("where", ["link", "link/state", "link/state/deeper", "/proc/zsw-nothing/state"])
def test_a_state_dir_that_cannot_be_made_is_one_line(swarm, where):
    os.symlink("/nonexistent-zsw/target", swarm.cwd / "link")
    swarm.write("t.txt", "true\n")
    state = where if where.startswith("/") else str(swarm.cwd / where)
    res = swarm("run", "t.txt", "--state-dir", state, "--output", "quiet")
    assert res.code == 2 and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr, res
    assert res.stderr.startswith(f"zellij-swarm: error: cannot use state directory {state}: "), res.stderr
    if where.startswith("/proc"):
        assert "no directory can be made in /proc" in res.stderr, res.stderr
    else:
        assert (f"{swarm.cwd / 'link'} is a symbolic link to /nonexistent-zsw/target, which does not exist"
                in res.stderr), res.stderr
