"""A mechanism the kernel does not give us is a warning and a slower path, never a crash
(issue 22, item 10): ``pidfd_open`` failing with anything but ESRCH (a kernel before 5.3, a
seccomp filter: EPERM, ENOSYS) and no inotify instance to be had (EMFILE: 128 per user by
default, and every renderer takes one). Injected in the in-process harness, and in real
processes through a ``sitecustomize`` on the test's PYTHONPATH (tests only)."""

from __future__ import annotations

import ctypes
import errno
import os
import select
import selectors
import subprocess
import sys
from pathlib import Path

import pytest
from harness import Harness, Mux, Work, task
from swarmtest import clean_env, kill_run_processes, run_processes, wait_until
from tmuxtest import outside_env

from zellij_swarm import watch
from zellij_swarm.engine import view_watch
from zellij_swarm.records.rundir import RunPaths

PIDFD_ERRORS = (errno.ENOSYS, errno.EPERM)


def refuse_pidfd(monkeypatch: pytest.MonkeyPatch, err: int) -> None:
    def pidfd_open(pid: int, flags: int = 0) -> int:
        raise OSError(err, os.strerror(err))

    monkeypatch.setattr(os, "pidfd_open", pidfd_open)


class _NoInotify:
    """A libc whose inotify_init1 fails as the kernel does past the instance limit."""

    def inotify_init1(self, flags: int) -> int:
        ctypes.set_errno(errno.EMFILE)
        return -1


@pytest.mark.parametrize("err", PIDFD_ERRORS)
def test_a_vanished_pane_wrapper_is_noticed_without_pidfd(monkeypatch, err):
    """The pane's wrapper is followed by its pid: without pidfd, /proc is looked at instead.
    (Killed after its worker began, nothing of it left, no hang-up mark: its end nobody saw,
    ``unknown (wrapper_lost)`` — SPEC §5.7.)"""
    refuse_pidfd(monkeypatch, err)
    with Harness(works={"a": (Work(after=2, vanishes=True),), "b": (Work(after=3),)}, mux=Mux()) as h:
        r = h.run([task("a"), task("b")])
    assert {n: (str(t.status), t.reason) for n, t in r.tasks.items()} == {
        "a": ("unknown", "wrapper_lost"), "b": ("succeeded", None)}
    assert r.warnings() == ["pidfd_unavailable"]  # once, for every pid followed
    assert r.at("worker_failed a") == pytest.approx(2.0, abs=0.3)  # within a poll interval


def test_a_headless_wrapper_whose_launcher_died_is_followed_without_pidfd(monkeypatch):
    refuse_pidfd(monkeypatch, errno.ENOSYS)
    from harness import Launch

    with Harness(works={"a": (Work(after=3),)}, launches=(Launch(dies_after=1),)) as h:
        r = h.run([task("a")])
    assert str(r.tasks["a"].status) == "succeeded"
    assert sorted(r.warnings()) == ["launcher_lost", "pidfd_unavailable"]


def _registered_renderer(tmp_path: Path) -> tuple[RunPaths, subprocess.Popen[bytes]]:
    run = RunPaths(tmp_path / "run")
    run.views.mkdir(parents=True)
    proc = subprocess.Popen(["sleep", "60"])
    view_watch.Registration(run, "board").write(proc.pid)
    return run, proc


@pytest.mark.parametrize("err", PIDFD_ERRORS)
def test_a_live_renderer_is_not_taken_for_dead_without_pidfd(monkeypatch, tmp_path, err):
    """Before: every view read as gone at once (a false ``renderer_died``)."""
    refuse_pidfd(monkeypatch, err)
    run, proc = _registered_renderer(tmp_path)
    polls: list[object] = []
    views = view_watch.ViewWatch(run, schedule=lambda delay, fn: polls.append(fn))
    try:
        assert views.read() == [] and views.rows()[0]["state"] == "alive"
        assert polls, "without pidfd the views are looked at on the timer"
        proc.kill()
        proc.wait()
        polls.pop()()  # the timer fires: the scan sees the renderer gone
        sel = selectors.DefaultSelector()
        sel.register(views.fileno(), selectors.EVENT_READ)
        assert sel.select(5)
        assert [g.name for g in views.read()] == ["board"]
        sel.close()
    finally:
        views.close()
        proc.kill()
        proc.wait()


def test_no_inotify_instance_makes_a_watcher_whose_watches_fail(monkeypatch, tmp_path):
    """Every user of an Inotify already polls a directory it cannot watch."""
    monkeypatch.setattr(watch, "_libc", lambda: _NoInotify())
    w = watch.Inotify()
    try:
        with pytest.raises(OSError) as caught:
            w.add(tmp_path)
        assert caught.value.errno == errno.EMFILE and "inotify" in str(caught.value)
        assert w.read() == [] and select.select([w], [], [], 0) == ([], [], [])  # an fd that never wakes
    finally:
        w.close()


# ----- real processes: the failures injected through a sitecustomize of the test's own --------

INJECT = """
import ctypes, errno, os
import zellij_swarm.watch as _w

def _no_pidfd(pid, flags=0):
    raise OSError(errno.EPERM, os.strerror(errno.EPERM))

class _NoInotify:
    def inotify_init1(self, flags):
        ctypes.set_errno(errno.EMFILE)
        return -1

os.pidfd_open = _no_pidfd
_w._libc = lambda: _NoInotify()
"""


@pytest.fixture
def injected(tmp_path: Path) -> dict[str, str]:
    d = tmp_path / "inject"
    d.mkdir()
    (d / "sitecustomize.py").write_text(INJECT)
    return {"PYTHONPATH": str(d)}


def test_a_real_tmux_run_without_pidfd_or_inotify(swarm, tmux, injected):
    swarm.write("t.toml", '[swarm]\njobs = 2\n' + "".join(
        f'[[task]]\nname = "t{i}"\ncmd = "echo {i}"\n' for i in range(4)))
    res = swarm("run", "t.toml", "--backend", "tmux", "--ui", "live", "--require-multiplexer", "--output", "quiet",
                "--json", env=outside_env(tmux, **injected))
    try:
        assert res.code == 0 and "Traceback" not in res.stderr, res
        codes = [w["code"] for w in swarm.summary()["warnings"]]
        assert codes.count("pidfd_unavailable") == 1 and "watch_failed" in codes, codes
    finally:
        kill_run_processes(swarm.latest().name)
    assert run_processes(swarm.latest().name) == []


def test_logs_follow_without_inotify(swarm, injected):
    swarm.write("t.toml", '[[task]]\nname = "w"\ncmd = "echo one; until [ -e go ]; do sleep 0.02; done; echo two"\n')
    run = swarm.popen("run", "t.toml", "--backend", "headless", "--output", "quiet")
    try:
        wait_until(lambda: swarm.runs() and (swarm.runs()[0] / "slots/slot-1/gen-1/output.log").exists(),
                   what="the worker's log")
        follow = subprocess.Popen(swarm.cmd("logs", "w", "-f"), cwd=swarm.cwd, env=clean_env(**injected),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        wait_until(lambda: select.select([follow.stderr], [], [], 0)[0], what="logs says it cannot watch")
        (swarm.cwd / "go").touch()
        out, err = follow.communicate(timeout=60)
        assert follow.returncode == 0 and out == b"one\ntwo\n", (out, err)
        assert err.count(b"\n") == 1 and b"no inotify instance" in err and b"looking every" in err, err
    finally:
        (swarm.cwd / "go").touch()
        run.wait(timeout=60)


def test_not_linux_is_one_line(swarm):
    res = subprocess.run([sys.executable, "-c", "import sys; sys.platform = 'darwin'; "
                          "from zellij_swarm.cli import main; sys.exit(main(['status']))"],
                         capture_output=True, text=True, timeout=60, cwd=swarm.cwd, env=clean_env())
    assert res.returncode == 2 and res.stderr == "zellij-swarm: error: zellij-swarm needs Linux (this is darwin)\n", res


def test_a_directory_renamed_and_watched_under_its_new_name_stays_watched(tmp_path):
    """A generation's directory kept as a shell (records.shells) comes back as another
    generation's: inotify gives the same inode the same watch. Watching the new name takes it
    over, so that letting go of the old name leaves the new one watched."""
    notify = watch.Inotify()
    try:
        first, second = tmp_path / "gen-1", tmp_path / "gen-2"
        first.mkdir()
        notify.add(first)
        first.rename(second)
        notify.add(second)
        notify.remove(first)
        (second / "exit").write_text("0\n")
        assert wait_until(lambda: watch.Change(second, "exit") in notify.read(), timeout=10)
    finally:
        notify.close()
