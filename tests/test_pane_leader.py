"""A worker pane's first processes when its terminal hangs up around its worker's start: the
pane leader hangs up whatever starts below it after the hang-up, and a pane wrapper whose
terminal is gone before its worker starts runs nothing (SPEC §6)."""

from __future__ import annotations

import fcntl
import os
import pty
import signal
import subprocess
import termios

import psutil
from swarmtest import wait_until

from zellij_swarm.records import envfile, generation_files, rundir
from zellij_swarm.worker import wrapper
from zellij_swarm.worker.wrapper import PANE_LEADER

GATE = 'while ! [ -e "$GO" ]; do sleep 0.02; done'


def _end(proc: subprocess.Popen) -> None:
    """Every process of ``proc``'s session, then ``proc`` itself."""
    if proc.poll() is None:
        for p in psutil.Process(proc.pid).children(recursive=True):
            p.kill()
        proc.kill()
    proc.wait(timeout=10)


def test_a_process_started_after_the_hang_up_is_hung_up_too(tmp_path):
    """The second stage starts its worker after the pane closed (the hang-up came between its
    launch heartbeat and its worker): the worker dies of the hang-up, and the pane ends."""
    hangup, rc = tmp_path / "hangup", tmp_path / "rc"
    stage = f'trap : HUP; {GATE}; sleep 1000; echo $? > "$RC"'
    proc = subprocess.Popen([*PANE_LEADER, "--hangup", str(hangup), "/bin/sh", "-c", stage],
                            env={**os.environ, "GO": str(tmp_path / "go"), "RC": str(rc)}, start_new_session=True)
    try:
        wait_until(lambda: psutil.Process(proc.pid).children(), what="the second stage")
        os.kill(proc.pid, signal.SIGHUP)
        wait_until(hangup.exists, what="the hang-up mark")
        (tmp_path / "go").touch()  # now its worker starts
        assert proc.wait(timeout=30) == 0
        assert rc.read_text() == "129\n"
    finally:
        _end(proc)


def test_a_pane_whose_terminal_hung_up_before_its_worker_started_runs_nothing(tmp_path):
    """The pane closed while its wrapper's first stage ran: the leader it execs never gets the
    (already delivered) hang-up, and the second stage finds its terminal gone: no worker runs,
    its status is 129 and the mark says its pane hung up."""
    gen = generation_files.GenPaths(tmp_path / "gen-1", 1, 1)
    gen.dir.mkdir()
    gen.artifacts.mkdir()
    saved = tmp_path / "env"
    envfile.save(saved, {"PATH": os.environ["PATH"]})
    gate = f'while ! [ -e {tmp_path / "go"} ]; do sleep 0.02; done'
    pane = wrapper.PaneMode("TMUX_PANE", "", saved, before_leader=gate)
    who = wrapper.WorkerIdentity("run-1", "t", "t1", 1, 1, 1)
    ledger = tmp_path / "ledger"
    rundir.write_new(gen.wrapper, wrapper.render(gen, who, cmd=f"echo ran >> {ledger}", argv=None, cwd=str(tmp_path),
                                                 env={}, pane=pane), mode=0o700)
    master, slave = pty.openpty()

    def own_terminal() -> None:  # the pane's terminal is the wrapper's controlling one
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(["/bin/sh", str(gen.wrapper)], stdin=slave, stdout=slave, stderr=slave,
                            start_new_session=True, preexec_fn=own_terminal, env={"TMUX_PANE": "%1",
                                                                                   "PATH": os.environ["PATH"]})
    os.close(slave)
    try:
        wait_until(gen.claim.exists, what="the first stage's claim")
        os.close(master)  # the pane closes: the kernel hangs its terminal up
        master = -1
        (tmp_path / "go").touch()
        assert proc.wait(timeout=30) == 129
        assert not ledger.exists()
        assert generation_files.read_sidecar(gen) is not None
        assert generation_files.exit_facts(gen).code == 129
        assert gen.dir.joinpath(generation_files.HANGUP).exists()
    finally:
        if master != -1:
            os.close(master)
        _end(proc)
