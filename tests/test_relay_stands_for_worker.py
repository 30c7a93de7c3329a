"""Which processes a kill must reach for the worker's end to be the kill's (``procs.is_worker_process``):
a Zellij pane's pty relay stands for its worker until the worker has started — a signal that
reaches it then ends the worker it starts, or ends it with nothing run. Counted as a carrier
only, a cancel just after a pane's launch heartbeat was recorded as the worker's own death by
SIGTERM (``failed``, 143), and ``retry`` ran it again; ``test_reliability``'s stopped-server
cases met it in four runs of six."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest
from swarmtest import wait_until

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


def test_a_relay_that_has_not_started_its_worker_stands_for_it(gen, relay_like):
    [relay] = relay_like("alone")
    assert procs.is_worker_process(relay, gen)


@pytest.mark.parametrize("record", [generation_files.RELAY_RECORD, generation_files.WORKER_ENDED])
def test_a_relay_whose_worker_started_or_ended_only_carries_its_signals(gen, relay_like, record):
    [relay] = relay_like("alone")
    (gen.dir / record).write_text("")
    assert not procs.is_worker_process(relay, gen)


def test_the_relay_s_fork_before_it_execs_the_worker_stands_for_it(gen, relay_like):
    relay, fork = relay_like("fork")
    (gen.dir / generation_files.RELAY_RECORD).write_text("")  # written before the fork may exec
    assert procs.is_worker_process(fork, gen)
    assert not procs.is_worker_process(relay, gen)
