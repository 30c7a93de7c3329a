"""The tests' fork server (tests/zygote.py) answers as running the command the ordinary way
does: the same exit status, the same output, in the test's directory, environment, umask and
standard input — else every test that uses ``Swarm`` checks something a user never sees."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from swarmtest import FORK_SERVER, Result, Swarm, clean_env, kill_run_processes

pytestmark = pytest.mark.skipif(bool(os.environ.get("ZSW_TEST_EXEC")), reason="ZSW_TEST_EXEC=1: no fork server")

CASES = {
    "version": (("--version",), {}, None),
    "unknown command": (("frobnicate",), {}, None),
    "a variable of the test's": (("run", "-", "--output", "group"), {"MARK": "m$1 ✓"}, 'echo "$MARK"\n'),
    "a bad setting": (("run", "-", "-j", "lots"), {}, "true\n"),
    "a bad setting from the environment": (("run", "-"), {"ZELLIJ_SWARM_JOBS": "lots"}, "true\n"),
    "stdin, CR and CRLF line ends, a failure": (("run", "-", "--output", "group"), {},
                                                 "printf 'a\\r\\nb\\rc\\n'\nexit 3\n"),
    "a name that is not UTF-8": (("status", os.fsdecode(b"r\xff")), {}, None),
}


def _exec(swarm: Swarm, args: tuple[str, ...], env: dict[str, str], stdin: str | None) -> Result:
    p = subprocess.run([sys.executable, "-m", "zellij_swarm", *args], cwd=swarm.cwd, input=stdin,
                       capture_output=True, text=True, env=env, timeout=60, errors="replace")
    return Result(p.returncode, p.stdout, p.stderr)


def _forked(swarm: Swarm, args: tuple[str, ...], env: dict[str, str], stdin: str | None) -> Result:
    forked = FORK_SERVER.run(args, swarm.cwd, env, stdin, 60)
    assert forked is not None, "the fork server declined a plain environment"
    return Result(*forked)


def _comparable(res: Result, swarm: Swarm) -> Result:
    """Run ids and times differ between two runs; what is left must not."""

    def plain(text: str) -> str:
        text = re.sub(r"\d{8}-\d{6}-[0-9a-f]{6}", "RUN", text.replace(str(swarm.cwd), "CWD"))
        return re.sub(r"\d+\.\d+s", "Ts", text)

    return Result(res.code, plain(res.stdout), "\n".join(sorted(plain(res.stderr).splitlines())))


@pytest.mark.parametrize("case", CASES)
def test_a_forked_run_answers_as_an_executed_one(tmp_path, case):
    args, extra, stdin = CASES[case]
    results = []
    for way in (_exec, _forked):
        swarm = Swarm(tmp_path / way.__name__)
        swarm.cwd.mkdir()
        results.append(_comparable(way(swarm, args, clean_env(**extra), stdin), swarm))
    assert results[0] == results[1]


def test_a_forked_run_has_the_tests_directory_umask_and_environment(tmp_path):
    swarm = Swarm(tmp_path)
    old = os.umask(0o077)
    try:
        res = _forked(swarm, ("run", "--output", "quiet", "-"), clean_env(MARK="m$1 ✓"),
                      'pwd > where; echo "$MARK" >> where; touch made\n')
    finally:
        os.umask(old)
    assert res.code == 0, res
    assert (tmp_path / "where").read_text() == f"{tmp_path}\nm$1 ✓\n"
    assert (tmp_path / "made").stat().st_mode & 0o777 == 0o600


def test_a_forked_run_past_its_timeout_is_killed_and_said_so(tmp_path):
    swarm = Swarm(tmp_path)
    with pytest.raises(subprocess.TimeoutExpired):
        FORK_SERVER.run(("run", "--output", "quiet", "-"), tmp_path, clean_env(), "sleep 30\n", 1.0)
    # the run's supervisor was killed as subprocess.run kills its child; its worker, if it got
    # that far in the second it had (a loaded machine may not), is the test's to end
    for run in swarm.runs():
        kill_run_processes(run.name)


@pytest.mark.parametrize("variable", ["PYTHONIOENCODING", "LC_ALL", "ZELLIJ_SWARM_RUN_ID"])
def test_what_a_fork_cannot_give_is_left_to_an_executed_run(tmp_path, variable):
    """What Python reads only as it starts cannot be given to a forked process, and its
    /proc/PID/environ, where the command finds a run's processes by their markers, is the
    server's."""
    assert FORK_SERVER.run(("--version",), tmp_path, clean_env(), None, 60) is not None
    assert FORK_SERVER.run(("--version",), tmp_path, clean_env(**{variable: "C"}), None, 60) is None
