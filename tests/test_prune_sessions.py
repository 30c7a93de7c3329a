"""A session a run created under a name of the user's (``--session NAME``) is pruned like a
``swarm-<run-id>`` one (issue 21, item 8): the end-of-run hint says ``prune`` removes it, and
the run's record knows it created it. A session of that name the run did not create — there
before it, made again by hand after it, or used by a later run — is the user's, and stays."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from swarmtest import Swarm, kill_run_processes, run_processes, wait_until
from tmuxtest import Tmux, outside_env
from zellijtest import FAST, FakeZellij


def tmux_sessions(tmux: Tmux) -> list[str]:
    return tmux("list-sessions", "-F", "#{session_name}", check=False).split()


def zellij_sessions(fz: FakeZellij) -> set[str]:
    return {s["name"] for s in fz.state("0.45.0")["sessions"]}


def run_in(swarm: Swarm, env: dict[str, str], *args: str) -> str:
    swarm.write("t.txt", "true\n")
    res = swarm("run", "t.txt", "--output", "quiet", *args, env=env, timeout=60)
    assert res.code == 0, res.stderr
    run = swarm.latest()
    assert run_processes(run.name) == []
    kill_run_processes(run.name)
    return run.name


needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (scripts/setup does)")


@needs_tmux
def test_a_tmux_session_the_run_created_under_its_name_is_pruned(swarm: Swarm, tmux: Tmux) -> None:
    env = outside_env(tmux)
    rid = run_in(swarm, env, "--backend", "tmux", "--session", "mywork")
    assert "mywork" in tmux_sessions(tmux)  # kept for the user to look (SPEC §2)
    res = swarm("prune", "--dry-run", env=env)
    assert (res.code, res.stdout) == (0, "would remove tmux session mywork\n")
    res = swarm("prune", env=env)
    assert (res.code, res.stdout) == (0, "removed tmux session mywork\n"), res.stderr
    assert "mywork" not in tmux_sessions(tmux)
    assert swarm("prune", env=env).stdout == ""
    assert (swarm.state_dir / "runs" / rid).is_dir()  # records go by age only


@needs_tmux
def test_a_tmux_session_the_run_only_used_or_that_was_made_again_stays(swarm: Swarm, tmux: Tmux) -> None:
    env = outside_env(tmux)
    tmux("new-session", "-d", "-s", "theirs")
    run_in(swarm, env, "--backend", "tmux", "--session", "theirs")  # there before: the run used it
    run_in(swarm, env, "--backend", "tmux", "--session", "again")  # made by the run, then by the user
    tmux("kill-session", "-t", "again")
    tmux("new-session", "-d", "-s", "again")
    res = swarm("prune", env=env)
    assert "tmux session" not in res.stdout, res.stdout  # their windows of the runs go: the sessions stay
    assert {"theirs", "again"} <= set(tmux_sessions(tmux))


def test_a_zellij_session_the_run_created_under_its_name_is_pruned(swarm: Swarm, fz: FakeZellij) -> None:
    env = fz.env("0.45.0", **FAST)
    fz.host("theirs", "0.45.0")
    run_in(swarm, env, "--backend", "zellij", "--session", "theirs")  # the user's: stays
    run_in(swarm, env, "--backend", "zellij", "--session", "mywork")
    assert {"theirs", "mywork"} <= zellij_sessions(fz)
    res = swarm("prune", env=env)
    assert "removed zellij session mywork" in res.stdout.splitlines(), (res.stdout, res.stderr)
    assert "theirs" not in res.stdout
    wait_until(lambda: "mywork" not in zellij_sessions(fz), what="the session to go (it is killed, then deleted)")
    assert "theirs" in zellij_sessions(fz)


@needs_tmux
def test_a_later_run_using_the_name_owns_it(swarm: Swarm, tmux: Tmux) -> None:
    env = outside_env(tmux)
    first = run_in(swarm, env, "--backend", "tmux", "--session", "shared")  # created it
    swarm.write("w.txt", "until [ -e gate ]; do sleep 0.02; done\n")
    later = swarm.popen("run", "w.txt", "--backend", "tmux", "--session", "shared", "--output", "quiet", env=env)
    try:
        [run] = wait_until(lambda: [r for r in swarm.runs() if r.name != first], what="the later run")
        wait_until(lambda: (run / "slots/slot-1/gen-1/claim").exists(), what="its worker started")
        res = swarm("prune", env=env)
        assert "tmux session shared" not in res.stdout and "shared" in tmux_sessions(tmux), res.stdout
    finally:
        swarm.open_gate()
        later.wait(timeout=60)
        for r in swarm.runs():
            kill_run_processes(r.name)


@needs_tmux
def test_a_tmux_server_that_gives_no_answer_is_named_and_prune_exits_1(swarm: Swarm, tmux: Tmux) -> None:
    """``prune`` with the tmux server stopped printed nothing and exited 0 after its call's
    timeout: as if nothing of the ended runs were left. It says it could not look there, and
    exits 1; once the server answers, the session goes."""
    import os
    import signal

    env = outside_env(tmux)
    run_in(swarm, env, "--backend", "tmux", "--session", "mywork")
    server = int(tmux("display-message", "-p", "#{pid}").strip())
    os.kill(server, signal.SIGSTOP)
    try:
        res = swarm("prune", env=env, timeout=60)
    finally:
        os.kill(server, signal.SIGCONT)
    assert res.code == 1, res
    assert res.stdout == "could not look for what ended runs left: tmux list-windows: no answer within 10s\n", res
    assert res.stderr == ("zellij-swarm: error: a multiplexer could not be asked (above): what ended runs left in it "
                          "is still there; prune again once it can be\n"), res
    assert "mywork" in tmux_sessions(tmux)
    assert swarm("prune", env=env).stdout == "removed tmux session mywork\n"


def test_a_multiplexer_a_run_used_that_is_not_on_path_here_is_named_and_prune_exits_1(swarm: Swarm,
                                                                                    fz: FakeZellij) -> None:
    """``prune`` from a terminal whose PATH has no zellij, after a run in Zellij: it printed
    nothing and exited 0, the run's session left (an adversary, 3 in 3) — as if nothing were
    there. It says it could not look, and exits 1."""
    env = fz.env("0.45.0", **FAST)
    run_in(swarm, env, "--backend", "zellij", "--session", "mywork")
    no_zellij = {**env, "PATH": os.pathsep.join(p for p in env["PATH"].split(os.pathsep)
                                                if not (Path(p) / "zellij").exists())}
    res = swarm("prune", env=no_zellij)
    assert res.code == 1 and "zellij is not on PATH here" in res.stdout, res
    assert "mywork" in zellij_sessions(fz)
