"""The ladder's real signaller (engine/stopping.py ``ProcessSignaller``) against real
processes: a signal counts as sent to a generation when it reached a running process of the
worker's own, whatever passes it on first."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from swarmtest import wait_until

from zellij_swarm.engine.stopping import ProcessSignaller
from zellij_swarm.records.generation_files import GenPaths
from zellij_swarm.worker import procs
from zellij_swarm.worker._paneleader import WORKER_SIGNALS


class ForwardingRelay(psutil.Process):
    """A pane's pty relay as the ladder meets it at its worst: the moment it gets a signal it
    passes it on to its worker and reaps it (the real relay does both within a few ms)."""

    def __init__(self, pid: int, worker: subprocess.Popen[bytes]) -> None:
        super().__init__(pid)
        self.worker = worker

    def send_signal(self, sig: int) -> None:
        super().send_signal(sig)
        self.worker.send_signal(sig)
        self.worker.wait()


def test_a_worker_behind_a_relay_that_reaps_it_first_still_counts_as_reached(tmp_path: Path) -> None:
    script = tmp_path / "_ptyrelay.py"  # the relay is known by its program's name
    script.write_text("import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(60)\n")
    relay = subprocess.Popen([sys.executable, str(script)])
    worker = subprocess.Popen(["sleep", "60"])
    try:
        found = [ForwardingRelay(relay.pid, worker), psutil.Process(worker.pid)]  # parents first, as a tree lists them
        delivery = ProcessSignaller().deliver(GenPaths(tmp_path / "gen-1", 1, 1), signal.SIGTERM, lambda: found)
        assert delivery.sent_at is not None, "the worker was ended by this signal: it was sent"
        assert worker.wait(timeout=5) == -signal.SIGTERM
    finally:
        for p in (relay, worker):
            p.kill()
            p.wait()


def test_a_process_whose_name_holds_a_parenthesis_is_read_right(tmp_path) -> None:
    """``procs.running`` reads /proc/<pid>/stat after the name: one holding ") R 1 2" is
    running, then, killed and not yet reaped, a zombie."""
    odd = tmp_path / "x) R 1 2"
    shutil.copy("/bin/sleep", odd)
    p = subprocess.Popen([str(odd), "30"])
    try:
        assert procs.running(psutil.Process(p.pid))
        p.kill()
        wait_until(lambda: not procs.running(psutil.Process(p.pid)), what="the zombie")
    finally:
        p.kill()
        p.wait()


def _leftover_in_a_session_of_its_own() -> tuple[int, int]:
    """A wrapper's leftover, as the sweep meets it: a process in a session whose leader (the
    wrapper, whose pid is the session's id) has ended. (session id, the leftover's pid)"""
    leftover = int(subprocess.run(["sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!"], start_new_session=True,
                                  capture_output=True, text=True, check=True, timeout=10).stdout)
    return os.getsid(leftover), leftover


def test_the_end_of_run_sweep_looks_up_only_the_wrapper_sessions_a_process_is_in_now() -> None:
    """The sweep finds a worker's leftover by its headless wrapper's session (a child not
    yet exec'd has no markers): the sessions of the run's attempts some process is in now,
    with when each wrapper ended — not a mapping of every attempt of the run — and never a
    pane's."""
    from zellij_swarm.config.swarmfile import TaskSpec
    from zellij_swarm.engine.stopping import wrapper_sessions
    from zellij_swarm.records.states import TaskStatus
    from zellij_swarm.records.task import Attempt, EndedTasks, TaskRecord, wrapper_ends

    session, leftover = _leftover_in_a_session_of_its_own()
    pane_session = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        gone = subprocess.Popen(["true"], start_new_session=True)
        gone.wait()
        tasks = []
        # one whose session is empty; one with no pid; a headless wrapper whose session a
        # process is in; a pane's, whose session (its multiplexer's) holds its pane leader
        for n, (pid, pane) in enumerate(((gone.pid, None), (None, None), (session, None),
                                         (pane_session.pid, "terminal_3")), 1):
            task = TaskRecord(spec=TaskSpec(name=f"t{n}", cmd="true"), id=f"t{n}", order=n, timeout=None, retries=0,
                              idle_timeout=None, status=TaskStatus.SUCCEEDED)
            task.history = (Attempt(1, n, 1, TaskStatus.SUCCEEDED, 0, None, None, 1.0, 2.0 + n, pid, pane),)
            tasks.append(task)
        assert wrapper_sessions(wrapper_ends(tasks)) == {session: 5.0}
        # the same, the last two kept as ended tasks (their records let go)
        ended = EndedTasks()
        for task in tasks[2:]:
            ended.add(task)
        assert wrapper_sessions([*wrapper_ends(tasks[:2]), *ended.wrapper_ends()]) == {session: 5.0}
    finally:
        os.kill(leftover, signal.SIGKILL)
        pane_session.kill()
        pane_session.wait()


def test_a_session_whose_leader_lives_is_not_a_wrapper_s_whatever_its_id() -> None:
    """A wrapper the sweep knows of has ended, so a session led by a live process under its
    pid is somebody else's: the pid came round again (a run resumed after its wrappers died
    unseen records their end as when it noticed, after that session began). Swept, it
    killed a stranger's processes: never looked at, by session or start time."""
    from zellij_swarm.engine.stopping import wrapper_sessions

    stranger = subprocess.Popen(["sleep", "60"], start_new_session=True)  # leads its session
    session, leftover = _leftover_in_a_session_of_its_own()
    try:
        noticed = time.time() + 5  # "ended" after both began, as a resumed run records it
        sessions = wrapper_sessions([(stranger.pid, noticed), (session, noticed)])
        assert sessions == {session: noticed}
        found = {p.pid for p in procs.marked((b"ZSW_TEST_NO_SUCH_MARKER=1",), sessions)}
        assert leftover in found and stranger.pid not in found
    finally:
        os.kill(leftover, signal.SIGKILL)
        stranger.kill()
        stranger.wait()


def test_a_process_in_an_ended_wrappers_session_that_started_before_it_ended_is_a_leftover() -> None:
    """``procs.marked`` by session: a process without the run's markers (a child forked, not
    yet exec'd) that started before its session's wrapper ended is the run's; one that
    started after it ended (a later session reusing the pid) is not."""
    import time

    left = subprocess.Popen(["env", "-i", "OTHER=1", "sleep", "60"], start_new_session=True)
    later = subprocess.Popen(["env", "-i", "OTHER=1", "sleep", "60"], start_new_session=True)
    try:
        for p in (left, later):  # exec'd: its environment is the one it runs with
            wait_until(lambda p=p: b"PATH=" not in Path(f"/proc/{p.pid}/environ").read_bytes(), what="env -i")
        found = procs.marked(procs.run_markers("run-x"), {left.pid: time.time() + 60, later.pid: 0.0})
        assert [p.pid for p in found] == [left.pid]
    finally:
        for p in (left, later):
            p.kill()
            p.wait()


def test_the_wrapper_s_own_traps_in_a_fork_not_yet_the_worker_are_no_handler_of_the_worker_s(tmp_path: Path) -> None:
    """A fork of the wrapper holds its ``trap :`` of every worker signal until the subshell
    drops them; a SIGTERM that came then was lost, and the worker ran to its end — recorded
    ``cancelled`` (caught) and run again by ``retry`` (a tmux soak). A subshell with a trap of
    its own still hears it. (Each subshell here stays a fork: the command line of its parent.)"""
    ready = tmp_path / "ready"
    traps = " ".join(name.removeprefix("SIG") for name in WORKER_SIGNALS)
    held = subprocess.Popen(["sh", "-c", f"( trap : {traps}; touch {ready}-held; while :; do sleep 0.05; done ); :"])
    own = subprocess.Popen(["sh", "-c", f"( trap 'exit 0' TERM; touch {ready}-own; while :; do sleep 0.05; done ); :"])
    try:
        wait_until(lambda: Path(f"{ready}-held").exists() and Path(f"{ready}-own").exists(), what="the traps set")
        forks = {name: next(c for c in psutil.Process(parent.pid).children() if c.cmdline() == parent.args)
                 for name, parent in (("held", held), ("own", own))}
        held_fork = forks["held"]
        assert not procs.catches(held_fork, signal.SIGTERM), (  # (seen once under load: what it was)
            Path(f"/proc/{held_fork.pid}/status").read_text(), held_fork.cmdline(), held_fork.ppid(), held.args)
        assert procs.catches(forks["own"], signal.SIGTERM)
    finally:
        for p in (held, own):
            for c in psutil.Process(p.pid).children(recursive=True):
                with contextlib.suppress(psutil.NoSuchProcess):  # a ``sleep 0.05`` that ended meanwhile
                    c.kill()
            p.kill()
            p.wait()


def test_a_signal_counts_as_caught_only_when_the_workers_own_process_has_a_handler_for_it(tmp_path: Path) -> None:
    """The outcome rule reads a normal exit after the kill as the kill's doing only then
    (engine.outcome.ended_by_kill): a shell with no trap cannot exit 0 on hearing SIGTERM. The
    worker's own process is the wrapper's child; a child the worker left in the background,
    reparented at its end, that traps the signal says nothing of the worker's exit (a shell
    that wrote its last line and exited 0 was recorded ``cancelled`` for its child's trap)."""
    gen = GenPaths(tmp_path / "gen-1", 1, 1)
    ready, left_ready = tmp_path / "ready", tmp_path / "left-ready"
    trap = "trap 'exit 0' TERM; touch {}; while :; do sleep 0.05; done"
    # a wrapper stand-in (its command line names the generation) whose child is the worker
    wrapper = subprocess.Popen(["sh", "-c", 'sh -c "$1"; :', "sh", trap.format(ready), str(gen.dir)])
    left = subprocess.Popen(["sh", "-c", trap.format(left_ready)])  # a leftover: no wrapper above it
    plain = subprocess.Popen(["sleep", "60"])
    shell = subprocess.Popen(["sh", "-c", "sleep 60; true"])  # a task's shell, no trap (the soak's t0168)
    try:
        wait_until(lambda: ready.exists() and left_ready.exists(), what="the traps set")
        [worker] = psutil.Process(wrapper.pid).children()
        assert procs.is_worker_top(worker, gen) and not procs.is_worker_top(psutil.Process(left.pid), gen)
        assert procs.catches(worker, signal.SIGTERM)
        assert not procs.catches(psutil.Process(plain.pid), signal.SIGTERM)
        assert not procs.catches(psutil.Process(shell.pid), signal.SIGTERM)
        unheard = ProcessSignaller().deliver(gen, signal.SIGTERM, lambda: [psutil.Process(plain.pid)])
        assert unheard.sent_at is not None and not unheard.caught
        assert plain.wait(timeout=5) == -signal.SIGTERM
        leftover = ProcessSignaller().deliver(gen, signal.SIGTERM, lambda: [psutil.Process(left.pid)])
        assert leftover.sent_at is not None and not leftover.caught
        assert left.wait(timeout=5) == 0
        heard = ProcessSignaller().deliver(gen, signal.SIGTERM, lambda: [worker])
        assert heard.sent_at is not None and heard.caught
        assert wrapper.wait(timeout=5) == 0
    finally:
        for p in (wrapper, left, plain, shell):
            if p.poll() is None:
                p.kill()
                p.wait()
        for p in psutil.Process().children(recursive=True):  # the worker, should its wrapper be gone
            if str(ready) in " ".join(p.cmdline()):
                p.kill()


def test_a_zombie_leader_leads_nothing_and_an_unseen_end_is_not_swept_by_session() -> None:
    """A wrapper not reaped yet (its parent, an init that does not reap, has not waited for it)
    is a zombie, whose pid nobody can take: its session is what it left, swept as such. An
    attempt whose end nobody saw (no exit code: a wrapper gone without a record, its end the
    moment it was noticed) gives no bound on when its session's processes began: a stranger's
    session that took its pid meanwhile, leaderless as a daemon's is, would be swept."""
    from zellij_swarm.config.swarmfile import TaskSpec
    from zellij_swarm.engine.stopping import wrapper_sessions
    from zellij_swarm.records.states import TaskStatus
    from zellij_swarm.records.task import Attempt, EndedTasks, TaskRecord, wrapper_ends

    leader = subprocess.Popen(["sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!"], start_new_session=True,
                              stdout=subprocess.PIPE, text=True)  # not waited for: a zombie once it exits
    assert leader.stdout is not None
    leftover = int(leader.stdout.readline())
    stranger, stranger_leftover = _leftover_in_a_session_of_its_own()
    try:
        wait_until(lambda: psutil.Process(leader.pid).status() == psutil.STATUS_ZOMBIE, what="the zombie leader")
        tasks = []
        for n, (pid, code) in enumerate(((leader.pid, 0), (stranger, None)), 1):
            task = TaskRecord(spec=TaskSpec(name=f"t{n}", cmd="true"), id=f"t{n}", order=n, timeout=None, retries=0,
                              idle_timeout=None, status=TaskStatus.LOST)
            task.history = (Attempt(1, n, 1, TaskStatus.LOST, code, None, None, 1.0, time.time() + 5, pid, None),)
            tasks.append(task)
        assert list(wrapper_sessions(wrapper_ends(tasks))) == [leader.pid]
        ended = EndedTasks()
        for task in tasks:
            ended.add(task)
        assert list(wrapper_sessions(ended.wrapper_ends())) == [leader.pid]
    finally:
        for pid in (leftover, stranger_leftover):
            os.kill(pid, signal.SIGKILL)
        leader.wait()


@pytest.mark.parametrize("directory", ["gen-1", "gen 1\n\udcff"], ids=["plain", "hostile"])
def test_the_node_side_term_of_a_slurm_step_says_whether_it_reached_the_worker_and_was_caught(
        tmp_path: Path, directory: str) -> None:
    """``engine.step_signal``, which the supervisor runs on a Slurm step's node: the wrapper the
    launch heartbeat names (its command line names the generation's directory), the worker
    below it signalled, and one line back — ``sent <time> uncaught`` for a worker with no
    handler, ``caught`` for one with, ``none`` once nothing of it runs. A heartbeat whose pid
    is now another process (the wrapper ended, the number reused) leads to nothing."""
    from zellij_swarm.engine import step_signal

    gen = GenPaths(tmp_path / directory, 3, 1)  # (a name that is no UTF-8, too)
    gen.dir.mkdir()
    ready = tmp_path / "ready"

    def wrapper(worker: str) -> subprocess.Popen[bytes]:  # a stand-in wrapper: its argv names gen.dir
        ready.unlink(missing_ok=True)
        p = subprocess.Popen(["sh", "-c", f"sh -c {worker!r}; :", "sh", str(gen.dir)], start_new_session=True)
        gen.heartbeat.write_text(f'{{"event":"started","pid":{p.pid},"pane_id":null}}\n')
        wait_until(ready.exists, what="the worker started")
        return p

    plain = wrapper(f"touch {ready}; sleep 60")
    trapping = wrapper(f"trap 'exit 0' TERM; touch {ready}; while :; do sleep 0.05; done")
    try:
        gen.heartbeat.write_text(f'{{"event":"started","pid":{os.getpid()},"pane_id":null}}\n')  # not its wrapper
        assert step_signal.terminate("run-x", gen) == step_signal.NOTHING_RAN and plain.poll() is None
        for p, heard in ((plain, "uncaught"), (trapping, "caught")):
            gen.heartbeat.write_text(f'{{"event":"started","pid":{p.pid},"pane_id":null}}\n')
            line = step_signal.terminate("run-x", gen)
            assert step_signal.parse(line) is not None and line.endswith(f" {heard}"), line
            assert p.wait(timeout=10) == 0  # the stand-in goes on to its end, as a wrapper does
        assert step_signal.terminate("run-x", gen) == step_signal.NOTHING_RAN
    finally:
        for p in (plain, trapping):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


@pytest.mark.parametrize("said, sent_at", [("", 2.0), ("srun: error: step has completed\n", 2.0), (None, 1.0)],
                         ids=["nothing", "an-error", "no-answer"])
def test_a_step_s_terminate_is_as_late_as_the_helper_leaves_it(tmp_path: Path, said: str | None, sent_at: float):
    """A Slurm step's SIGTERM: the helper on the node (``step_signal``) said nothing of having
    sent it — the worker had just ended, its step with it, and the helper's ``srun`` failed —
    and ``scancel --signal=TERM`` went instead, stamped with the moment taken before the
    helper was asked: the worker's own exit 0 in between was recorded cancelled, and ``retry``
    ran it again (an adversary, 3 cancels in 6). The signal counts from when it is sent; only
    a helper that gave no answer in its time (it may have sent and hung) leaves the earlier
    moment."""
    from zellij_swarm.engine import remote
    from zellij_swarm.exc import BackendError

    moments = iter([1.0, 2.0, 3.0])
    signalled: list[tuple[str, str]] = []

    class Cluster:
        def run_beside(self, job_id: str, node: str, argv: object, *, timeout: float | None = None) -> str:
            if said is None:
                raise BackendError("executor_call_timeout", "srun --overlap: no answer within 5s")
            return said

        def signal(self, step_id: str, sig: str, *, name: str | None = None) -> None:
            signalled.append((step_id, sig))

    gen = GenPaths(tmp_path / "gen-1", 1, 1)
    assert remote.term_step(Cluster(), "run-x", gen, "7", ("n1", "7.0"), lambda: next(moments)) == (sent_at, True)
    assert signalled == [("7", "TERM")]
