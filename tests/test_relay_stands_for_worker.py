"""Which processes a kill must reach for the worker's end to be the kill's (``procs.is_worker_process``,
through the ladder's ``ProcessSignaller.deliver``):
a Zellij pane's pty relay stands for its worker until the worker has started — a signal that
reaches it then ends the worker it starts, or ends it with nothing run. Counted as a carrier
only, a cancel just after a pane's launch heartbeat was recorded as the worker's own death by
SIGTERM (``failed``, 143), and ``retry`` ran it again; ``test_reliability``'s stopped-server
cases met it in four runs of six."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest
from swarmtest import wait_until

from zellij_swarm.engine.stopping import ProcessSignaller
from zellij_swarm.records import generation_files
from zellij_swarm.records.generation_files import GenPaths
from zellij_swarm.worker import procs

# A process whose command line names the relay, as a relay's does (``wrapper.PTY_RELAY``).
RELAY_LIKE = "import os, sys, time\nif sys.argv[1] == 'fork': os.fork()\ntime.sleep(60)"


@pytest.fixture
def gen(tmp_path: Path) -> GenPaths:
    return GenPaths(tmp_path, 1, 1)


@pytest.fixture
def relay_like() -> Iterator[Callable[[str], list[psutil.Process]]]:
    started: list[subprocess.Popen[bytes]] = []

    def start(mode: str) -> list[psutil.Process]:
        p = subprocess.Popen([sys.executable, "-c", RELAY_LIKE, mode, "/opt/zsw/_ptyrelay.py"])
        started.append(p)
        parent = psutil.Process(p.pid)
        wait_until(lambda: procs.cmdline(p.pid)[-1:] == [b"/opt/zsw/_ptyrelay.py"]
                   and (mode != "fork" or parent.children()), what="the relay-like process")
        return [parent, *parent.children()]

    yield start
    for p in started:
        for child in psutil.Process(p.pid).children():
            child.kill()
        p.kill()
        p.wait()


# Harmless to the relay-like processes (ignored by default), and a signal all the same.
SIG = signal.SIGWINCH


def reached(gen: GenPaths, find: Callable[[], list[psutil.Process]]) -> bool:
    """Whether the ladder takes a signal sent to what ``find`` finds as sent to the worker."""
    return ProcessSignaller().deliver(gen, SIG, find).sent_at is not None


def test_a_relay_that_has_not_started_its_worker_stands_for_it(gen, relay_like):
    [relay] = relay_like("alone")
    assert reached(gen, lambda: [relay])


@pytest.mark.parametrize("record", [generation_files.RELAY_RECORD, generation_files.WORKER_ENDED])
def test_a_relay_whose_worker_started_or_ended_only_carries_its_signals(gen, relay_like, record):
    [relay] = relay_like("alone")
    (gen.dir / record).write_text("")
    assert not reached(gen, lambda: [relay])


def test_the_relay_s_fork_before_it_execs_the_worker_stands_for_it(gen, relay_like):
    relay, fork = relay_like("fork")
    (gen.dir / generation_files.RELAY_RECORD).write_text("")  # written before the fork may exec
    assert reached(gen, lambda: [relay, fork])
    assert not reached(gen, lambda: [relay])


def test_a_relay_that_starts_its_worker_while_its_processes_are_found_stands_for_it(gen, relay_like):
    """Looked at after the scan, the record written meanwhile made the relay a carrier, though
    the scan never saw the worker it had just forked: nothing reached, a death by the signal
    the relay passed on taken for the worker's own. It is looked at before the scan."""
    [relay] = relay_like("alone")

    def found_as_it_starts() -> list[psutil.Process]:
        (gen.dir / generation_files.RELAY_RECORD).write_text("")
        return [relay]

    assert reached(gen, found_as_it_starts)
