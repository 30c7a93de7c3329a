"""The launcher (worker/_launcher.py) through its supervisor-side handle (worker/launcher.py),
against real processes: what every wrapper it starts gets (its own session, stdio on
/dev/null, every signal at its default, no descriptor of the launcher's, the launcher's
environment), the exact wait status it reports, its replies to a batch, and how it ends."""

from __future__ import annotations

import os
import select
import shlex
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest
from swarmtest import wait_until

from zellij_swarm.worker.launcher import Ended, Launcher, NotStarted, Orphaned, Reply, Started, WorkerEnded

ENV = {"PATH": "/usr/bin:/bin", "LAUNCHER_TEST": "a value with spaces"}


@pytest.fixture
def launcher() -> Iterator[Launcher]:
    handle = Launcher(ENV)
    yield handle
    for pid in _alive_children(handle.pid):
        os.kill(pid, signal.SIGKILL)
    handle.close(wait=True)


@pytest.fixture
def said(launcher: Launcher) -> Replies:
    return Replies(launcher)


def _alive_children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


class Replies:
    """What a launcher said, taken in order: each ``take`` waits for as many as it wants."""

    def __init__(self, handle: Launcher) -> None:
        self.handle = handle
        self.backlog: list[Reply] = []

    def take(self, want: int, *, timeout: float = 30.0) -> list[Reply]:
        def enough() -> bool:
            if select.select([self.handle.fileno()], [], [], 0.05)[0]:
                self.backlog.extend(self.handle.read())
            return len(self.backlog) >= want or self.handle.lost
        wait_until(enough, timeout=timeout, interval=0, what=f"{want} replies from the launcher")
        taken, self.backlog = self.backlog[:want], self.backlog[want:]
        return taken

    def start(self, *argv: str) -> int:
        self.handle.submit([("t", "", argv)])
        (reply,) = self.take(1)
        assert isinstance(reply, Started), reply
        return reply.pid

    def ended(self, pid: int) -> int:
        (reply,) = self.take(1)
        assert isinstance(reply, Ended) and reply.pid == pid, reply
        return reply.status


def at_eof(handle: Launcher) -> bool:
    handle.read()
    return handle.lost


def _inheritable(fd: int) -> bool:
    try:
        return os.get_inheritable(fd)
    except OSError:  # the listing's own descriptor, closed since
        return False


def status_field(pid: int, name: str) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key == name:
            return value.strip()
    raise AssertionError(f"no {name} in /proc/{pid}/status")


def test_a_wrapper_runs_in_its_own_session_on_dev_null_with_default_signals_and_no_inherited_fd(said):
    pid = said.start("/bin/sleep", "60")
    # the start is told once the exec has replaced the launcher's image, a moment before the
    # kernel has closed the launcher's descriptors and set the new environment up: the
    # environment read back is the sign that it has finished
    wait_until(lambda: Path(f"/proc/{pid}/environ").read_bytes(), what="the wrapper's exec to finish")
    assert os.getsid(pid) == pid and os.getpgid(pid) == pid
    # the launcher's own pipes stay behind; what the caller handed down inheritable passes
    # through, as it does to the supervisor (GNU make's jobserver, for one)
    handed_down = {fd: os.readlink(f"/proc/self/fd/{fd}") for fd in map(int, os.listdir("/proc/self/fd"))
                   if fd > 2 and _inheritable(fd)}
    expected = {0: "/dev/null", 1: "/dev/null", 2: "/dev/null", **handed_down}
    seen: list[dict[int, str]] = []

    def descriptors() -> bool:
        try:
            seen.append({int(fd): os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")})
        except FileNotFoundError:  # one closed between the listing and its reading
            return False
        return seen[-1] == expected

    # the new image's dynamic loader holds the C library open for a moment as it starts: a
    # descriptor the wrapper inherited would stay
    try:
        wait_until(descriptors, what="the wrapper's descriptors")
    except AssertionError:
        assert seen[-1] == expected  # what stayed
    # the launcher ignores SIGPIPE and handles SIGCHLD: neither reaches the wrapper (signals
    # the C library keeps for itself, 32 and 33, are not ours to reset: the caller's pass)
    ours = sum(1 << (s - 1) for s in signal.valid_signals())
    for field in ("SigIgn", "SigCgt", "SigBlk"):
        assert int(status_field(pid, field), 16) & ours == 0, field
    environ = dict(e.split("=", 1) for e in Path(f"/proc/{pid}/environ").read_text().split("\0") if e)
    assert environ == ENV
    os.kill(pid, signal.SIGTERM)
    status = said.ended(pid)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM


@pytest.mark.parametrize(("script", "code"), [("exit 0", 0), ("exit 3", 3), ("exit 255", 255)])
def test_the_wait_status_reported_is_the_wrappers_exact_one(said, script, code):
    pid = said.start("/bin/sh", "-c", script)
    status = said.ended(pid)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == code


def test_a_wrapper_killed_by_a_signal_is_reported_with_that_signal(said):
    pid = said.start("/bin/sh", "-c", "kill -USR1 $$")
    status = said.ended(pid)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGUSR1


def _killed_wrapper(said: Replies, tmp_path: Path, worker: str,
                    ready: Callable[[int], bool] = lambda _pid: True) -> tuple[int, int]:
    """A wrapper that starts ``worker`` as its child (in its process group, as the run's
    wrapper does), writes the child's pid, and waits: killed by SIGKILL once the worker runs
    and is ``ready``. Returns (the wrapper's pid, the worker's)."""
    child = tmp_path / "child"
    pid = said.start("/bin/sh", "-c", f'sh -c {shlex.quote(worker)} & echo $! > {child}; wait')
    worker_pid: int = wait_until(lambda: child.exists() and child.read_text().strip().isdigit()
                                 and int(child.read_text()), what="the worker's pid")
    wait_until(lambda: ready(worker_pid), what="the worker ready")
    os.kill(pid, signal.SIGKILL)
    return pid, worker_pid


def test_a_killed_wrapper_s_worker_runs_on_and_its_exact_end_is_told(said, tmp_path):
    """The worker outlives its wrapper, killed from outside: named (A) before the wrapper's
    end, then its own end (O), exact — the record its wrapper could not write."""
    gate = tmp_path / "gate"
    pid, worker = _killed_wrapper(said, tmp_path, f"trap '' TERM; until [ -e {gate} ]; do sleep 0.01; done; exit 7")
    orphaned, ended = said.take(2)
    assert orphaned == Orphaned(pid, worker)
    assert isinstance(ended, Ended) and ended.pid == pid and os.WTERMSIG(ended.status) == signal.SIGKILL
    assert psutil.Process(worker).status() != psutil.STATUS_ZOMBIE  # it runs on
    gate.touch()
    (told,) = said.take(1)
    assert isinstance(told, WorkerEnded) and told.worker == worker and os.WEXITSTATUS(told.status) == 7


def test_a_wrapper_killed_with_its_whole_group_tells_its_worker_s_death_by_that_signal(said):
    """Both die of the one ``kill -9 -PGID``: the worker, which became the launcher's as its
    wrapper died, is its worker all the same — whichever of the two is reaped first."""
    group = said.start("/bin/sh", "-c", "sleep 60 & wait")
    wait_until(lambda: _alive_children(group), what="the sleep")
    [worker] = _alive_children(group)
    os.killpg(group, signal.SIGKILL)
    orphaned, ended, told = said.take(3)
    assert orphaned == Orphaned(group, worker) and isinstance(ended, Ended) and ended.pid == group
    assert isinstance(told, WorkerEnded) and told.worker == worker and os.WTERMSIG(told.status) == signal.SIGKILL


def test_no_worker_is_named_when_it_left_the_wrapper_s_group(said, tmp_path):
    """A worker in a session of its own is no longer the generation's to follow: the
    wrapper's end alone is told (and the run's end-of-run sweep finds the worker)."""
    pid, worker = _killed_wrapper(said, tmp_path, "exec setsid sleep 60", ready=lambda p: os.getsid(p) == p)
    try:
        (ended,) = said.take(1)
        assert isinstance(ended, Ended) and ended.pid == pid
    finally:
        os.kill(worker, signal.SIGKILL)


def test_a_wrapper_that_cannot_start_is_reported_with_its_error(launcher, said):
    """The error's text, as the task's warning shows it — not its number before it
    ("cannot start the wrapper: 7 Argument list too long")."""
    launcher.submit([("missing", "", ("/nonexistent/wrapper",))])
    (reply,) = said.take(1)
    assert isinstance(reply, NotStarted) and reply.token == "missing"
    assert reply.message == "No such file or directory", reply.message


def test_arguments_reach_the_wrapper_byte_for_byte(said, tmp_path):
    out = tmp_path / "out"
    odd = "a line\nand another\udcff with an undecodable byte"  # no NUL: the protocol's separator
    pid = said.start("/bin/sh", "-c", 'printf %s "$1" > "$2"', "sh", odd, str(out))
    assert said.ended(pid) == 0
    assert out.read_bytes() == b"a line\nand another\xff with an undecodable byte"


def test_a_batch_is_started_at_once_and_its_starts_come_back_in_one_reply(launcher, said):
    """One write of requests (under PIPE_BUF: read whole) is answered by one write: the
    supervisor wakes once for the batch, not once per wrapper."""
    launcher.submit([(f"b{i}", "", ("/bin/sh", "-c", "exit 0")) for i in range(20)])
    select.select([launcher.fileno()], [], [], 30)
    first = launcher.read()
    assert [r.token for r in first if isinstance(r, Started)] == [f"b{i}" for i in range(20)]
    rest = said.take(20 - sum(isinstance(r, Ended) for r in first))
    assert launcher.started == 20 and not any(isinstance(r, Started) for r in rest)


def test_a_ping_is_answered(launcher, said):
    launcher.ping()
    wait_until(lambda: select.select([launcher.fileno()], [], [], 0.05)[0] and not launcher.read()
               and not launcher.ping_unanswered, what="the ping's answer")


def test_with_its_input_closed_it_reaps_its_last_wrapper_then_exits_saying_its_usage(launcher, said, tmp_path):
    """The supervisor gone (its end of the pipe closed): wrappers still running finish and
    are reaped; only then does the launcher exit, its CPU and peak RSS its last words."""
    go = tmp_path / "go"
    pid = said.start("/bin/sh", "-c", 'while [ ! -e "$1" ]; do sleep 0.01; done', "sh", str(go))
    os.close(launcher._req_w)  # what the supervisor's death does to it
    launcher._req_w = -1
    assert os.waitpid(launcher.pid, os.WNOHANG) == (0, 0)  # still there for its wrapper
    go.touch()
    status = said.ended(pid)
    assert status == 0
    wait_until(lambda: at_eof(launcher), what="the launcher's end of file")
    assert launcher.usage is not None and launcher.usage["cpu_s"] > 0 and launcher.usage["peak_rss_mb"] > 0
    assert os.waitstatus_to_exitcode(os.waitpid(launcher.pid, 0)[1]) == 0


def test_a_killed_launcher_reads_as_lost_and_its_wrapper_lives_on(launcher, said):
    pid = said.start("/bin/sleep", "60")
    os.kill(launcher.pid, signal.SIGKILL)
    wait_until(lambda: at_eof(launcher), what="the launcher's end of file")
    assert launcher.end_status() == "killed by SIGKILL"
    pidfd = os.pidfd_open(pid)
    try:
        assert not select.select([pidfd], [], [], 0)[0]  # its own session: the kill did not reach it
        os.kill(pid, signal.SIGKILL)
        assert select.select([pidfd], [], [], 30)[0]
    finally:
        os.close(pidfd)


def test_an_orphan_a_wrapper_left_is_adopted_and_reaped_unreported(said, launcher, tmp_path):
    """The launcher is its wrappers' subreaper: a process left behind by a double fork becomes
    its child, not init's — the end-of-run sweep finds it so — and its end is reaped without a
    reply: only the wrappers the launcher started are reported."""
    pidfile = tmp_path / "orphan.pid"
    pid = said.start("/bin/sh", "-c", f"(setsid env -i sh -c 'echo $$ >\"$0\"; exec sleep 60' {pidfile} &); exit 0")
    assert os.WEXITSTATUS(said.ended(pid)) == 0
    wait_until(lambda: pidfile.exists() and pidfile.read_text().strip(), what="the orphan's pid")
    orphan = int(pidfile.read_text())
    wait_until(lambda: status_field(orphan, "PPid") == str(launcher.pid), what="the orphan adopted by the launcher")
    os.kill(orphan, signal.SIGKILL)
    wait_until(lambda: orphan not in _alive_children(launcher.pid), what="the orphan reaped by the launcher")
    pid = said.start("/bin/sh", "-c", "exit 4")  # the next reply is this wrapper's start, then its end
    assert os.WEXITSTATUS(said.ended(pid)) == 4


def test_a_killed_wrapper_s_worker_end_is_recorded_only_where_its_wrapper_would_have(tmp_path):
    """``record_end`` writes the end of a killed wrapper's worker (with no supervisor to tell)
    as the wrapper would have, a code — only while the claim is still that wrapper's (a folded
    generation's is gone, its directory maybe another's), into an empty sidecar (a shell's),
    and never through a link."""
    from zellij_swarm.worker._launcher import record_end

    gen = tmp_path / "gen-1"
    gen.mkdir()
    (gen / "claim").write_text("4242\n")
    record_end(bytes(gen), 4242, signal.SIGKILL)  # a wait status: death by SIGKILL
    assert (gen / "exit").read_text() == "137\n"
    record_end(bytes(gen), 4242, 0)  # one end only
    assert (gen / "exit").read_text() == "137\n"

    (gen / "exit").write_text("")  # a shell's, emptied
    record_end(bytes(gen), 4242, 3 << 8)
    assert (gen / "exit").read_text() == "3\n"

    (gen / "exit").unlink()
    record_end(bytes(gen), 4343, 0)  # the claim is another wrapper's
    assert not (gen / "exit").exists()
    (gen / "claim").unlink()
    record_end(bytes(gen), 4242, 0)  # folded: no claim
    assert not (gen / "exit").exists()

    (gen / "claim").write_text("4242\n")
    victim = tmp_path / "victim"
    victim.write_text("")
    (gen / "exit").symlink_to(victim)
    record_end(bytes(gen), 4242, 0)
    assert victim.read_text() == ""
