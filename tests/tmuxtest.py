"""Helpers for the tmux backend tests: a private tmux server (``TMUX_TMPDIR`` points tmux's
default socket into a short temp dir), its panes, and the environments of a run outside and
inside a tmux session. The ``tmux`` fixture in conftest.py starts and ends one per test.

The test talks to its server through the project's own tmux client (libtmux under a
deadline, ``zellij_swarm.backends.tmux_client``). Not libtmux's pytest plugin: its ``server``
fixture names a socket (``-L``) in the real tmux directory, where a run outside tmux looks
for the default one; ours is the default socket of a private ``TMUX_TMPDIR``, so that a run
finds it as it would find the user's, and nothing of the user's is ever touched."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from swarmtest import clean_env

from zellij_swarm import external
from zellij_swarm.backends.tmux_client import TmuxClient
from zellij_swarm.exc import BackendError


@dataclass
class Tmux:
    tmpdir: Path
    socket: Path
    client: TmuxClient = field(init=False)

    def __post_init__(self) -> None:
        self.client = TmuxClient(clean_env(), str(self.socket), timeout=10)

    def __call__(self, *args: str, check: bool = True) -> str:
        if args[:1] == ("capture-pane",):  # a screen's blank last rows are part of it: libtmux drops them
            res = external.run(["tmux", "-S", str(self.socket), *args], timeout=10, env=self.client.env, check=False)
        else:
            res = self.client.argv(args, check=False)  # as tmux's argv: a ";" word separates commands
        if check and res.returncode != 0:
            raise AssertionError(f"tmux {args}: {res.stderr}")
        return res.stdout

    def panes(self) -> dict[str, dict[str, str]]:
        out = self("list-panes", "-a", "-F", "#{pane_id}\t#{pane_dead}\t#{pane_dead_status}\t#{@zsw_title}\t"
                   "#{window_name}\t#{pane_width}x#{pane_height}", check=False)
        rows = {}
        for line in out.splitlines():
            pid, dead, status, title, window, size = line.split("\t")
            rows[pid] = {"dead": dead, "status": status, "title": title, "window": window, "size": size}
        return rows

    def capture(self, pane: str) -> str:
        return self("capture-pane", "-p", "-J", "-S", "-", "-t", pane)

    def server_pids(self) -> list[int]:
        return [p.pid for p in psutil.process_iter(["cmdline"])
                if p.info["cmdline"] and "tmux" in p.info["cmdline"][0]
                and str(self.socket) in " ".join(p.info["cmdline"])]


def outside_env(t: Tmux, **extra: str) -> dict[str, str]:
    return clean_env(TMUX_TMPDIR=str(t.tmpdir), ZELLIJ_SWARM_PANE_HOLD_MS="300",
                     ZELLIJ_SWARM_HEARTBEAT_TIMEOUT_MS="5000", **extra)


def inside_env(t: Tmux, **extra: str) -> dict[str, str]:
    """As if run from a pane of a tmux session the user is in."""
    t("new-session", "-d", "-s", "host", "-x", "200", "-y", "50")
    pane = t("display-message", "-p", "-t", "host:", "#{pane_id}").strip()
    pid = t("display-message", "-p", "#{pid}").strip()
    return outside_env(t, TMUX=f"{t.socket},{pid},0", TMUX_PANE=pane, **extra)


@contextmanager
def private_tmux() -> Iterator[Tmux]:
    """A private tmux server, killed (and every process of it) on the way out."""
    tmpdir = Path(tempfile.mkdtemp(prefix="zt", dir="/tmp"))
    t = Tmux(tmpdir, tmpdir / f"tmux-{os.getuid()}" / "default")
    t.socket.parent.mkdir(mode=0o700)
    try:
        yield t
    finally:
        try:
            t("kill-server", check=False)
        except BackendError:
            pass  # it does not answer: killed below
        for pid in t.server_pids():
            try:
                psutil.Process(pid).kill()
            except psutil.NoSuchProcess:  # it ended between the listing and the kill
                pass
        shutil.rmtree(tmpdir, ignore_errors=True)
