"""The pidfd a followed generation holds (``engine.follow``): one at a time, never left
registered once it has fired."""

from __future__ import annotations

import selectors
import subprocess
import sys
from pathlib import Path

from zellij_swarm.backends.base import LaunchRequest
from zellij_swarm.config.swarmfile import TaskSpec
from zellij_swarm.engine.follow import GenerationWatch, Seen
from zellij_swarm.engine.live import LiveGen
from zellij_swarm.engine.timers import Timers
from zellij_swarm.records.generation_files import GenPaths
from zellij_swarm.records.task import TaskRecord


def test_following_another_pid_of_a_generation_lets_the_first_go(tmp_path: Path) -> None:
    """A generation followed by one pid, then by another (the worker its wrapper left, the
    second stage of a pane whose leader died): the first pid's descriptor stayed registered
    beside the second, and once its process ended it woke every select for nothing."""
    sel = selectors.DefaultSelector()
    ended: list[LiveGen] = []
    watch = GenerationWatch(watcher=None, selector=sel, timers=Timers(lambda: 0.0),  # type: ignore[arg-type]
                            seen=Seen(heartbeat=lambda lg, hb: None, ended=ended.append, warn=lambda *a: None))
    gen = GenPaths(tmp_path / "slot-1" / "gen-1", 1, 1)
    task = TaskRecord(spec=TaskSpec(name="t", cmd="true"), id="t1", order=1, timeout=None, retries=0, idle_timeout=None)
    lg = LiveGen(task, gen, LaunchRequest(gen, 1, "t"), backfill=False)
    first, second = (subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
                     for _ in range(2))
    try:
        lg.pid = first.pid
        watch.follow_pid(lg)
        watch.follow_pid(lg, second.pid)
        assert [key.fd for key in sel.get_map().values()] == [lg.pidfd]
        first.communicate(b"")  # it ends: nothing is woken by it
        assert sel.select(timeout=0.2) == []
        second.communicate(b"")
        [(key, _)] = sel.select(timeout=5)
        key.data()
        assert ended == [lg] and lg.pidfd is None and not sel.get_map()
    finally:
        for p in (first, second):
            p.kill()
            p.wait()
        sel.close()
