"""A worker pane whose terminal hangs up before its worker starts — in the wrapper's first
stage, or in its second, under the pane leader — runs nothing: its status is 129 and the
mark says its pane hung up (SPEC §6)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import shlex
import signal
import subprocess
import sys
import termios
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest
from swarmtest import child_named, in_private_mount, needs_unshare, wait_until

from zellij_swarm.records import envfile, generation_files, rundir
from zellij_swarm.worker import procs, wrapper


def _end(proc: subprocess.Popen) -> None:
    """Every process of ``proc``'s session, then ``proc`` itself."""
    if proc.poll() is None:
        for p in psutil.Process(proc.pid).children(recursive=True):
            p.kill()
        proc.kill()
    proc.wait(timeout=10)


def _pane_wrapper(tmp_path: Path, *, before_leader: str = "", cmd: str = "",
                  read_to_end: bool = False) -> tuple[generation_files.GenPaths, Path]:
    gen = generation_files.GenPaths(tmp_path / "gen-1", 1, 1)
    gen.dir.mkdir()
    gen.artifacts.mkdir()
    saved = tmp_path / "env"
    envfile.save(saved, {"PATH": os.environ["PATH"]})
    pane = wrapper.PaneMode("TMUX_PANE", "", saved, before_leader=before_leader, read_to_end=read_to_end)
    who = wrapper.WorkerIdentity("run-1", "t", "t1", 1, 1, 1)
    ledger = tmp_path / "ledger"
    rundir.write_new(gen.wrapper, wrapper.render(gen, who, cmd=cmd or f"echo ran >> {ledger}", argv=None,
                                                 cwd=str(tmp_path), env={}, pane=pane), mode=0o700)
    return gen, ledger


@contextmanager
def _on_its_terminal(gen: generation_files.GenPaths) -> Iterator[tuple[subprocess.Popen, int, Callable[[], None]]]:
    """The wrapper started as a pane's first process, its pty the controlling terminal;
    yields it, the pty's reading end, and the pane's closing (the kernel hangs its terminal
    up)."""
    master, slave = pty.openpty()

    def own_terminal() -> None:
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(["/bin/sh", str(gen.wrapper)], stdin=slave, stdout=slave, stderr=slave,
                            start_new_session=True, preexec_fn=own_terminal,
                            env={"TMUX_PANE": "%1", "PATH": os.environ["PATH"]})
    os.close(slave)
    closed = [False]

    def close_pane() -> None:
        os.close(master)
        closed[0] = True

    try:
        yield proc, master, close_pane
    finally:
        if not closed[0]:
            os.close(master)
        _end(proc)


def _ran_nothing(proc: subprocess.Popen, gen: generation_files.GenPaths, ledger: Path) -> None:
    assert proc.wait(timeout=30) == 129
    assert not ledger.exists()
    facts = generation_files.exit_facts(gen)
    assert facts is not None and facts.code == 129
    assert gen.dir.joinpath(generation_files.HANGUP).exists()


def test_a_pane_closed_during_its_first_stage_runs_nothing(tmp_path):
    """The hang-up comes before the pane leader exists: the leader it execs never gets it (it
    was delivered already), and the second stage finds its terminal gone."""
    go = tmp_path / "go"
    gen, ledger = _pane_wrapper(tmp_path, before_leader=f"while ! [ -e {go} ]; do sleep 0.02; done")
    with _on_its_terminal(gen) as (proc, _, close_pane):
        wait_until(gen.claim.exists, what="the first stage's claim")
        close_pane()
        go.touch()
        _ran_nothing(proc, gen, ledger)


def test_a_pane_closed_during_its_second_stage_before_its_worker_runs_nothing(tmp_path):
    """The hang-up comes while the second stage, under the pane leader, is on its way to its
    worker — held here where it writes its launch heartbeat, a FIFO until the test reads it.
    The stage is waited for until it has armed its traps: one that the hang-up reaches
    before (its shell still starting) dies of it and records nothing, its pane closed as it
    opened — the supervisor's ``pane_closed``, not this case (CI once closed it that soon)."""
    gen, ledger = _pane_wrapper(tmp_path)
    os.mkfifo(gen.heartbeat)
    with _on_its_terminal(gen) as (proc, _, close_pane):
        stage = ["/bin/sh", str(gen.wrapper), "restored"]  # once the environment's restore has exec'd it

        def armed_stage() -> bool:
            for child in psutil.Process(proc.pid).children():
                with contextlib.suppress(psutil.Error, OSError):
                    if child.cmdline() == stage and procs.catches(child, signal.SIGHUP):  # past its `trap`
                        return True
            return False

        wait_until(armed_stage, what="the second stage, its traps armed")
        close_pane()
        wait_until(gen.dir.joinpath(generation_files.HANGUP).exists, what="the pane leader's hang-up mark")
        reader = os.open(gen.heartbeat, os.O_RDONLY | os.O_NONBLOCK)  # lets a blocked write through
        try:
            _ran_nothing(proc, gen, ledger)
        finally:
            os.close(reader)


def test_a_killed_pane_leader_leaves_no_hang_up_mark_whenever_its_terminal_closes(tmp_path):
    """``kill -9`` of the pane's leader: the multiplexer closes the pane's terminal as it reaps
    its first process, and the worker dies of the hang-up. Nobody closed the pane, and its
    worker's end is its own failure (SPEC §2, "A killed pty relay"): the second stage, which
    marks a hang-up it finds before its leader has (SPEC §6), marks none once its leader is
    dead. Here the order that made 1 run in 10 (8 in 20 under load) ``cancelled
    (pane_closed)``, forced: the terminal is closed before the worker ends."""
    gate = tmp_path / "gate"
    gen, _ = _pane_wrapper(tmp_path, cmd=f"trap '' HUP; until [ -e {gate} ]; do sleep 0.02; done; "
                                         "trap - HUP; kill -HUP $$")
    with _on_its_terminal(gen) as (proc, _, close_pane):
        wait_until(lambda: child_named(proc.pid, "sleep"), what="the worker")
        proc.kill()  # the pane's first process: its leader (the first stage exec'd it)
        assert proc.wait(timeout=10) == -signal.SIGKILL
        close_pane()
        gate.touch()
        wait_until(lambda: generation_files.exit_facts(gen) is not None, what="the worker's end, recorded")
    facts = generation_files.exit_facts(gen)
    assert facts is not None and (facts.code, facts.signal) == (129, "SIGHUP")
    assert not gen.dir.joinpath(generation_files.HANGUP).exists()


@pytest.mark.parametrize("leader_lives", [True, False])
def test_a_second_stage_tells_whether_its_leader_lives(tmp_path, leader_lives):
    """What the second stage's hang-up mark rests on (``wrapper._LEADER_GONE``): a hang-up
    found while the leader, its parent, lives is marked — the leader marks it too, maybe
    later — and one found once the leader was killed is not."""
    ready, gate, answer = tmp_path / "ready", tmp_path / "gate", tmp_path / "answer"
    stage = (f": >{ready}; until [ -e {gate} ]; do sleep 0.02; done; "
             f"if {{ {wrapper._LEADER_GONE}; }}; then echo gone >{answer}; else echo lives >{answer}; fi")
    leader = subprocess.Popen(["/bin/sh", "-c", '/bin/sh -c "$1" & wait', "sh", stage])
    wait_until(ready.exists, what="the stage, started")
    if not leader_lives:
        leader.kill()
        leader.wait(timeout=10)  # dead, so the stage has its new parent before it looks (not a moment after)
    gate.touch()
    wait_until(lambda: answer.exists() and answer.read_text().endswith("\n"), what="the stage's answer")
    leader.wait(timeout=10)
    assert answer.read_text() == ("lives\n" if leader_lives else "gone\n")


def test_a_tmux_pane_leader_exits_once_its_terminal_was_read_to_its_end(tmp_path):
    """tmux closes a pane's terminal as the pane's first process exits, if it sees nothing
    left to read: a worker's last output still on its way through the kernel was lost to the
    pane's screen and log (seen under load: a log short of its last 121 bytes). tmux's panes'
    leader (``read_to_end``) closes its end and exits only once the terminal was read to its
    end and closed: here the output waits, unread, after the worker has ended — the leader
    with it — and then reads whole."""
    gen, _ = _pane_wrapper(tmp_path, cmd="head -c 8000 /dev/zero | tr '\\0' x; echo END", read_to_end=True)
    with _on_its_terminal(gen) as (proc, master, close_pane):
        wait_until(lambda: generation_files.exit_facts(gen) is not None, what="the worker's end, recorded")
        wait_until(lambda: proc.poll() is not None or not any(os.path.lexists(f"/proc/{proc.pid}/fd/{fd}")
                                                              for fd in (0, 1, 2)),
                   what="the leader's end, or its ends closed")
        assert proc.poll() is None  # its terminal unread: the leader waits
        read = []
        with contextlib.suppress(OSError):  # EIO: read to its end, the leader's own end closed
            while chunk := os.read(master, 65536):
                read.append(chunk)
        close_pane()
        assert proc.wait(timeout=30) == 0
    assert b"".join(read).endswith(b"x" * 100 + b"END\r\n")


def _reaped_second_stage(proc: subprocess.Popen, gen: generation_files.GenPaths) -> None:
    """Wait until the pane leader has reaped its second stage (``wrapper.sh restored``), which
    recorded its worker's end: from then on the leader only ends."""
    def reaped() -> bool:
        if generation_files.exit_facts(gen) is None:
            return False
        for child in psutil.Process(proc.pid).children():
            with contextlib.suppress(psutil.Error):
                if child.status() == psutil.STATUS_ZOMBIE or child.cmdline()[-1:] == ["restored"]:
                    return False
        return True

    wait_until(reaped, what="the second stage, reaped")


def _ends_waiting_for_no_read(proc: subprocess.Popen) -> None:
    """Follow a leader whose second stage was reaped to its end: it is never seen waiting for
    its terminal's read to the end (a hang-up, in ``sigtimedwait``), which cannot come."""
    def ended() -> bool:
        if proc.poll() is not None:
            return True
        with contextlib.suppress(OSError):
            assert not Path(f"/proc/{proc.pid}/wchan").read_text().startswith("do_sigtimedwait"), \
                "the leader waits for a read to its terminal's end that cannot come"
        return False

    wait_until(ended, interval=0.002, what="the leader's end")


def test_a_tmux_pane_leader_whose_terminal_hung_up_waits_for_no_read(tmp_path):
    """The pane closed (or its server went) while the worker ran: the hang-up was the
    leader's already, and no other comes — the leader outlived the run by 2 s, unseen."""
    gen, _ = _pane_wrapper(tmp_path, cmd="exec sleep 30", read_to_end=True)
    with _on_its_terminal(gen) as (proc, _, close_pane):
        wait_until(lambda: child_named(proc.pid, "sleep"), what="the worker")
        close_pane()
        _reaped_second_stage(proc, gen)
        _ends_waiting_for_no_read(proc)
    assert proc.returncode == 129


def test_a_tmux_pane_leader_whose_terminal_a_leftover_holds_waits_for_no_read(tmp_path):
    """A worker that left a process on the terminal (``sleep 30 &``): tmux cannot read to an
    end that process holds off, and each such task held its slot 2 s longer."""
    gen, _ = _pane_wrapper(tmp_path, cmd="sleep 30 & echo left", read_to_end=True)
    with _on_its_terminal(gen) as (proc, _, _):
        _reaped_second_stage(proc, gen)
        left = psutil.Process(proc.pid).children()
        try:
            _ends_waiting_for_no_read(proc)
        finally:
            for p in left:
                with contextlib.suppress(psutil.Error):
                    p.kill()
    assert proc.returncode == 0


def test_a_slurm_steps_pane_leader_does_not_wait_for_a_read_to_its_end(tmp_path):
    """A pane that runs a Slurm step: its leader's terminal is srun's, which is not closed
    before the leader exits — a wait for that read would only wait out its bound."""
    saved = tmp_path / "env"
    envfile.save(saved, {"PATH": os.environ["PATH"]})
    gen = generation_files.GenPaths(tmp_path / "gen-1", 1, 1)
    who = wrapper.WorkerIdentity("run-1", "t", "t1", 1, 1, 1)
    for step_env, waits in ((False, True), (True, False)):
        pane = wrapper.PaneMode("TMUX_PANE", "", saved, read_to_end=True, step_env=step_env)
        script = wrapper.render(gen, who, cmd="true", argv=None, cwd=str(tmp_path), env={}, pane=pane)
        assert ("--read-to-end" in script) is waits, step_env


def test_a_worker_that_ended_with_its_second_stage_is_recorded_not_waited_for_for_ever(tmp_path):
    """A signal sent to a tmux pane's group (``kill -XCPU 0``, which the leader outlives and
    the wrapper does not) can end the worker and the wrapper's second stage together: the
    worker, a zombie, becomes the leader's child as the stage dies, and the kernel's two
    SIGCHLDs are one. The leader took the worker to follow and waited for a SIGCHLD that had
    come: for ever, its task ``running``. Here the worker (the stage's first child) has ended
    unreaped when the stage is killed: its end is recorded, and the leader exits."""
    files = {name: tmp_path / name for name in ("hangup", "exit", "heartbeat")}
    stage = ("sleep 0.1 & exec " + sys.executable +
             " -c 'import os, time; time.sleep(1); os.kill(os.getpid(), 9)'")
    leader = subprocess.Popen([*wrapper.PANE_LEADER, *(a for name, path in files.items()
                                                       for a in (f"--{name}", str(path))), "/bin/sh", "-c", stage],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True)
    try:
        assert leader.wait(timeout=30) == 0
    finally:
        _end(leader)
    assert files["exit"].read_text() == "0\n"
    assert files["heartbeat"].read_text() == '{"event":"exited","code":0}\n'


def test_a_pane_closed_while_the_workers_own_hang_up_waits_to_be_taken_is_passed_on(tmp_path):
    """A worker traps its own ``kill -HUP 0`` (which reaches the leader too) and goes on; its
    pane closes before the leader has taken that SIGHUP (a loaded machine: here the leader is
    stopped meanwhile). A signal pending is not queued twice: the kernel's hang-up is one with
    the worker's, its sender the worker — taken for the worker's own only, the pane's closing
    was never passed on (the worker was never told) nor marked. The terminal says it hung up."""
    gate, ledger = tmp_path / "gate", tmp_path / "ledger"  # (the ledger _pane_wrapper names)
    gen, _ = _pane_wrapper(tmp_path, cmd=(
        f"trap 'echo hup >> {ledger}' HUP; echo ready >> {ledger}; "
        f"until [ -e {gate} ]; do sleep 0.02; done; kill -HUP 0; echo on >> {ledger}; "
        f"until [ -e {gate}.end ]; do sleep 0.02; done; echo end >> {ledger}"))
    with _on_its_terminal(gen) as (proc, _, close_pane):
        wait_until(lambda: ledger.exists() and "ready" in ledger.read_text().split(), what="the worker")
        # the pane's first process became the leader (the wrapper's stages exec into it): its
        # session's leader, whose the kernel's hang-up is (its children come and go: not scanned)
        leader = psutil.Process(proc.pid)
        assert any("_paneleader" in a for a in leader.cmdline()), leader.cmdline()
        leader.suspend()
        try:
            wait_until(lambda: leader.status() == psutil.STATUS_STOPPED, what="the leader stopped")
            gate.touch()
            wait_until(lambda: "on" in ledger.read_text().split(), what="the worker's own hang-up, trapped")
            close_pane()
        finally:
            leader.resume()
        wait_until(lambda: ledger.read_text().split().count("hup") == 2, what="the pane's hang-up passed on",
                   seen=lambda: ledger.read_text().split())
        assert gen.dir.joinpath(generation_files.HANGUP).exists()
        Path(f"{gate}.end").touch()
        assert proc.wait(timeout=30) == 0
    assert ledger.read_text().split() == ["ready", "hup", "on", "hup", "end"]


def test_a_slurm_steps_pane_leader_records_its_sruns_death_by_a_signal_it_did_not_send(tmp_path):
    """In a pane, a step's ``srun`` is the leader's child: its ``kill -9`` from outside is no
    cancel, though Slurm records one, and nothing else here sees it (it was `cancelled
    (executor_cancelled)`). The leader writes the signal (``--killed``) — not for an exit,
    nor for a signal it passed on itself (a closed pane's hang-up: the mark says that)."""
    def led(cmd: str, *, term: bool = False) -> tuple[int, Path]:
        killed = tmp_path / f"killed-{len(list(tmp_path.iterdir()))}"
        ready = tmp_path / "ready"
        ready.unlink(missing_ok=True)
        leader = subprocess.Popen([*wrapper.PANE_LEADER, "--hangup", str(tmp_path / "hangup"), "--killed", str(killed),
                                   "/bin/sh", "-c", cmd.replace("READY", f": > {ready}")],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True)
        try:
            if term:  # from outside, to the leader alone: passed on to its child
                wait_until(ready.exists, what="the child")
                leader.send_signal(signal.SIGTERM)
            return leader.wait(timeout=30), killed
        finally:
            _end(leader)

    code, killed = led("kill -9 $$")
    assert code == 128 + signal.SIGKILL and killed.read_text() == f"{signal.SIGKILL}\n"
    code, killed = led("kill -TERM $$")
    assert code == 128 + signal.SIGTERM and killed.read_text() == f"{signal.SIGTERM}\n"
    code, killed = led("exit 3")
    assert code == 3 and not killed.exists()
    code, killed = led("READY; exec sleep 30", term=True)  # the leader's own passing on
    assert code == 128 + signal.SIGTERM and not killed.exists()
    assert not (tmp_path / "hangup").exists()


def test_a_full_disk_costs_the_pane_leader_its_records_never_its_end(tmp_path):
    """The leader writes what killed its child from outside (``--killed``) before the pane can
    close; on a state directory with no room that write raised, and the leader died of it
    (Python's exit 1) in place of giving the child's end (138: SIGUSR1). Records are lost,
    as the wrapper's ``printf`` loses them; the end is the child's."""
    needs_unshare(tmp_path)
    leader = shlex.join([*wrapper.PANE_LEADER, "--killed", "state/killed", "/bin/sh", "-c", "kill -USR1 $$"])
    res = in_private_mount(tmp_path, "size=64k", f"head -c 1M /dev/zero > state/filler 2>/dev/null; "
                                                 f"{leader} < /dev/null; echo \"leader $?\"")
    assert res.stdout.splitlines() == [f"leader {128 + signal.SIGUSR1}"], res
