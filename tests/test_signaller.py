"""The ladder's real signaller (engine/stopping.py ``ProcessSignaller``) against real
processes: a signal counts as sent to a generation when it reached a running process of the
worker's own, whatever passes it on first."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from pathlib import Path

import psutil
from swarmtest import wait_until

from zellij_swarm.engine.stopping import ProcessSignaller
from zellij_swarm.records.generation_files import GenPaths
from zellij_swarm.worker import procs


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


def test_the_end_of_run_sweep_looks_up_only_the_wrapper_sessions_a_process_is_in_now() -> None:
    """The sweep finds a worker's leftover by its wrapper's session (a child not yet exec'd
    has no markers): the sessions of the run's attempts some process is in now, with when each
    wrapper ended — not a mapping of every attempt of the run."""
    from zellij_swarm.config.swarmfile import TaskSpec
    from zellij_swarm.engine.stopping import wrapper_sessions
    from zellij_swarm.records.states import TaskStatus
    from zellij_swarm.records.task import Attempt, TaskRecord

    leftover = subprocess.Popen(["sleep", "60"], start_new_session=True)  # a session of its own: sid = its pid
    try:
        gone = subprocess.Popen(["true"], start_new_session=True)
        gone.wait()
        tasks = []
        for n, pid in enumerate((leftover.pid, gone.pid, None), 1):
            task = TaskRecord(spec=TaskSpec(name=f"t{n}", cmd="true"), id=f"t{n}", order=n, timeout=None, retries=0,
                              idle_timeout=None)
            task.history = (Attempt(1, n, 1, TaskStatus.SUCCEEDED, 0, None, None, 1.0, 2.0 + n, pid, None),)
            tasks.append(task)
        assert wrapper_sessions(tasks) == {leftover.pid: 3.0}
    finally:
        leftover.kill()
        leftover.wait()
