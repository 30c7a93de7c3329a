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


@pytest.mark.parametrize("how", ["flag", "env", "file"])
@pytest.mark.parametrize("where", ["a-file", "/proc/1"])
def test_a_refused_state_dir_leaves_the_joblog_and_junit_report_as_they_were(swarm, how, where):
    """The state directory is checked before the run's own outputs are written: refused (exit
    2), the joblog had been cut to its header and the JUnit report said a run that never was
    "did not finish"."""
    from swarmtest import clean_env

    swarm.write("a-file", "mine\n")
    swarm.write("jobs.tsv", "precious joblog\n")
    swarm.write("report.xml", "precious report\n")
    state = where if where.startswith("/") else str(swarm.cwd / where)
    swarm.write("t.toml", (f'[swarm]\nstate_dir = "{state}"\n' if how == "file" else "") + '[[task]]\ncmd = "true"\n')
    flags = ("--state-dir", state) if how == "flag" else ()
    env = clean_env(ZELLIJ_SWARM_STATE_DIR=state) if how == "env" else None
    res = swarm("run", "t.toml", *flags, "--joblog", "jobs.tsv", "--junit", "report.xml", "--output", "quiet",
                env=env)
    assert res.code == 2 and res.stderr.count("\n") == 1 and state in res.stderr, res
    assert (swarm.cwd / "jobs.tsv").read_text() == "precious joblog\n"
    assert (swarm.cwd / "report.xml").read_text() == "precious report\n"
    assert (swarm.cwd / "a-file").read_text() == "mine\n"
