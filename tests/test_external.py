"""``external.run``, the one way an external command runs: its timeout, and ``give_up``, which
ends the wait for an answer that can no longer come (the real Zellij's CLI whose server was
killed mid-call spins until it is killed: docs/zellij-contract.md §2.0)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import psutil
import pytest
from swarmtest import wait_until

from zellij_swarm import external
from zellij_swarm.exc import BackendError


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def test_a_command_given_up_on_is_killed_and_its_error_raised(tmp_path: Path):
    pidfile = tmp_path / "pid"
    asked = []

    def give_up() -> BackendError | None:
        asked.append(1)
        return BackendError("session_missing", "gone") if len(asked) >= 2 and pidfile.exists() else None

    with pytest.raises(BackendError) as caught:
        external.run(["sh", "-c", f"echo $$ > {pidfile}; exec sleep 30"], timeout=60, give_up=give_up)
    assert (caught.value.code, caught.value.message) == ("session_missing", "gone")
    assert len(asked) >= 2
    pid = int(pidfile.read_text())
    assert not psutil.pid_exists(pid)  # killed and reaped, not left spinning


def test_without_an_answer_the_timeout_says_what_the_command_had_said(tmp_path: Path):
    with pytest.raises(BackendError) as caught:
        external.run(["sh", "-c", "echo 'still trying' >&2; exec sleep 30"], timeout=0.5,
                     give_up=lambda: None)
    assert caught.value.code == "pane_call_timeout"
    assert caught.value.message.endswith(": no answer within 0.5s (it said: still trying)"), caught.value.message


def test_a_process_the_command_left_holding_its_pipes_does_not_hold_the_timeout(tmp_path: Path):
    """The command is killed and reaped; its pipes are not read to their end, which a child
    it started keeps open."""
    pidfile = tmp_path / "pid"
    try:
        with pytest.raises(BackendError) as caught:
            external.run(["sh", "-c", f"sleep 30 & echo $! > {pidfile}; exec sleep 30"], timeout=0.5)
        assert caught.value.code == "pane_call_timeout"
        child = int(wait_until(lambda: pidfile.exists() and pidfile.read_text().strip(), what="the child's pid"))
        assert psutil.pid_exists(child)  # it was there, holding the pipes, all along
    finally:
        if pidfile.exists() and pidfile.read_text().strip():
            _kill(int(pidfile.read_text()))


def test_a_command_that_answers_while_give_up_says_nothing_gives_its_answer():
    res = external.run(["sh", "-c", "echo out; echo err >&2; exit 3"], timeout=10, check=False, give_up=lambda: None)
    assert (res.returncode, res.stdout, res.stderr) == (3, "out\n", "err\n")


def test_a_server_stopped_is_given_up_on_only_once_stopped_for_the_probes_time(monkeypatch):
    """``StoppedServer``: nothing while the server runs; a stop shorter than PROBE_TIMEOUT is
    waited through (a continue starts the count again); a longer one is the call's timeout,
    naming the stopped server."""
    import subprocess

    now = [100.0]
    monkeypatch.setattr(external.time, "monotonic", lambda: now[0])
    server = subprocess.Popen(["sleep", "60"])
    try:
        give_up = external.StoppedServer(["zellij", "action", "close-pane"], "the server", lambda: server.pid)
        assert give_up() is None
        server.send_signal(signal.SIGSTOP)
        wait_until(lambda: psutil.Process(server.pid).status() == psutil.STATUS_STOPPED, what="stopped")
        assert give_up() is None
        now[0] += external.PROBE_TIMEOUT / 2
        assert give_up() is None
        server.send_signal(signal.SIGCONT)
        wait_until(lambda: psutil.Process(server.pid).status() != psutil.STATUS_STOPPED, what="continued")
        assert give_up() is None
        server.send_signal(signal.SIGSTOP)
        wait_until(lambda: psutil.Process(server.pid).status() == psutil.STATUS_STOPPED, what="stopped again")
        now[0] += external.PROBE_TIMEOUT / 2
        assert give_up() is None  # counted from this stop, not the first
        now[0] += external.PROBE_TIMEOUT
        said = give_up()
        assert isinstance(said, BackendError) and said.code == "pane_call_timeout"
        assert said.message == f"zellij action close-pane: no answer: the server (pid {server.pid}) is stopped"
        assert external.StoppedServer(["tmux"], "the server", lambda: None)() is None
    finally:
        server.kill()
        server.wait()


def test_a_failure_is_told_by_the_line_that_says_what_went_wrong(tmp_path: Path):
    """A command's error is its stderr's first line — but a Python script that crashed (the
    fake Zellij without a module it needs) says "Traceback (most recent call last):" first,
    which told the user nothing (an adversary's pane_call_failed warning): its last line."""
    crash = tmp_path / "crash"
    crash.write_text("#!/bin/sh\nprintf 'Traceback (most recent call last):\\n  File \"x\", line 1\\n"
                     "ModuleNotFoundError: No module named ckdl\\n' >&2\nexit 1\n")
    crash.chmod(0o755)
    with pytest.raises(BackendError) as failed:
        external.run([str(crash)], timeout=10, faults=external.MULTIPLEXER)
    assert str(failed.value).endswith(": ModuleNotFoundError: No module named ckdl"), failed.value
    assert external.what_it_said("\n  sh: 1: x: not found\nmore\n") == "sh: 1: x: not found"
    assert external.what_it_said("") == ""
    said = "Error: the IPC socket path is too long (111 bytes, max 107):\n  /tmp/s/contract_version_1/a\n\nThis is"
    assert external.what_it_said(said) == \
        "Error: the IPC socket path is too long (111 bytes, max 107): /tmp/s/contract_version_1/a"
