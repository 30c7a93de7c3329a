"""The real Zellij for the real-Zellij tier: the binary scripts/setup built (scripts/build-zellij,
versions in scripts/zellij-versions), and a private installation of it per test.

Each ``RealZellij`` has its own short ``ZELLIJ_SOCKET_DIR``, ``HOME`` and config directory
(startup tips, release notes and session serialisation off: nothing of one test shows in
another's ``list-sessions``), and shares one plugin cache per version (``XDG_CACHE_HOME``:
0.41–0.43 compile the built-in plugins into it on first start). Its teardown kills every
session of its socket dir, then every process whose environment names that socket dir, and
asserts that none is left. ``CI`` stays out of the runs' environment (``clean_env``), so local
and CI runs mean the same.

Missing binary: under ``CI=true`` the test fails (the tier is never skipped there, unless
``ZSW_NO_REAL_ZELLIJ=1``); elsewhere it is skipped, saying how to build it."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psutil
import pytest
from fakeprocs import alive, kill_all, processes_of
from swarmtest import clean_env
from tmuxtest import Tmux

REPO = Path(__file__).resolve().parent.parent
# Read at import, before the tests' environment is scrubbed of CI (conftest).
UNDER_CI = os.environ.get("CI") == "true"
NO_REAL_ZELLIJ = os.environ.get("ZSW_NO_REAL_ZELLIJ") == "1"
# Waits, as multiples of what an idle machine takes (docs/zellij-contract.md, "Provenance"):
# a session up in ~0.15 s, a CLI call in ~0.02 s; at least 5× that under CI's load.
CALL_TIMEOUT = 20.0
# An action the busy server leaves unanswered is made again (each try its own time): under
# two CPU hogs on two cores, 0.45.0 once left a list-panes without an answer for over 20 s.
ACT_TRY_TIMEOUT = 10.0
ACT_DEADLINE = 60.0
SESSION_TIMEOUT = 30.0
CONFIG = "show_startup_tips false\nshow_release_notes false\nsession_serialization false\n"


def versions() -> dict[str, str]:
    """``{"ci": "0.45.0", "pre044": "0.43.1"}`` from scripts/zellij-versions."""
    out = {}
    for line in (REPO / "scripts" / "zellij-versions").read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and not key.startswith("#"):
            out[key.strip()] = value.strip()
    return out


def cache_root() -> Path:
    base = os.environ.get("ZSW_ZELLIJ_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "zellij-swarm")
    return Path(base)


def binary(version: str) -> Path | None:
    path = cache_root() / f"zellij-{version}" / "bin" / "zellij"
    return path if os.access(path, os.X_OK) else None


def required(version: str) -> Path:
    """The binary of ``version``, or the test skips (fails under CI) saying how to build it."""
    path = binary(version)
    if path is not None:
        return path
    why = f"no real Zellij {version} built (scripts/build-zellij {version})"
    if NO_REAL_ZELLIJ:
        pytest.skip(f"{why}; ZSW_NO_REAL_ZELLIJ=1")
    if UNDER_CI:
        pytest.fail(f"{why}: under CI=true the real-Zellij tier is never skipped (ZSW_NO_REAL_ZELLIJ=1 to skip it)")
    pytest.skip(why)


class RealZellij:
    def __init__(self, version: str) -> None:
        self.version = version
        self.binary = required(version)
        self.root = Path(tempfile.mkdtemp(dir="/tmp", prefix="rz"))  # short: socket paths are limited to 107 bytes
        self.sockdir = str(self.root / "s")
        config = self.root / "config"
        for d in (self.sockdir, config, self.root / "home"):
            os.makedirs(d)
        (config / "config.kdl").write_text(CONFIG)
        plugin_cache = cache_root() / f"zellij-{version}" / "plugin-cache"
        plugin_cache.mkdir(parents=True, exist_ok=True)
        self.base = clean_env(
            PATH=f"{self.binary.parent}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
            ZELLIJ_SOCKET_DIR=self.sockdir,
            ZELLIJ_CONFIG_DIR=str(config),
            HOME=str(self.root / "home"),
            XDG_CACHE_HOME=str(plugin_cache),
            XDG_CONFIG_HOME=str(self.root / "xdg-config"),
            XDG_DATA_HOME=str(self.root / "data"),
            SHELL="/bin/sh",
            TERM="xterm-256color",
        )

    def env(self, *, inside: str | None = None, **extra: str) -> dict[str, str]:
        """The environment of ``zellij-swarm``: outside Zellij, or as if in session ``inside``."""
        env = dict(self.base)
        if inside:
            env.update(ZELLIJ="0", ZELLIJ_SESSION_NAME=inside)
        env.update(extra)
        return env

    def zellij(self, *args: str, check: bool = True, timeout: float = CALL_TIMEOUT) -> subprocess.CompletedProcess:
        p = subprocess.run([str(self.binary), *args], env=self.base, cwd=self.root, capture_output=True, text=True,
                           stdin=subprocess.DEVNULL, timeout=timeout)
        if check:
            assert p.returncode == 0, (args, p.returncode, p.stdout, p.stderr)
        return p

    def session_names(self) -> list[str]:
        """The live sessions (``list-sessions --short``; none: the server answers 1)."""
        p = self.zellij("list-sessions", "--short", "--no-formatting", check=False)
        return [ln.strip() for ln in p.stdout.splitlines() if ln.strip()]

    def host(self, name: str, tmux: Tmux | None = None, *, size: str = "200x50") -> None:
        """A session of the user's own, to run a swarm 'inside': with a client on a real
        terminal (a private tmux server's pane of ``size``), as a user has — the real Zellij
        answers some actions only with a client — or, without ``tmux``, detached."""
        if tmux is None:
            self.zellij("attach", "--create-background", name)
        else:
            cols, rows = size.split("x")
            env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.base.items())
            tmux("new-session", "-d", "-s", name, "-x", cols, "-y", rows,
                 f"env -i {env} {self.binary} attach --create {name}")
            # No action before the client's first frame: one sent while a session starts can
            # leave it listing no pane for seconds (docs/zellij-contract.md, "Provenance").
            deadline = time.monotonic() + SESSION_TIMEOUT
            while f"Zellij ({name})" not in tmux("capture-pane", "-p", "-t", name, check=False):
                assert time.monotonic() < deadline, f"the client of session {name} never drew its screen"
                time.sleep(0.05)
        deadline = time.monotonic() + SESSION_TIMEOUT
        while not self._has_terminal_pane(name):
            assert time.monotonic() < deadline, f"session {name} never came up"
            time.sleep(0.05)

    def _has_terminal_pane(self, session: str) -> bool:
        """The session answers, and has made its panes (just after it starts it lists none;
        before 0.44, which has no list-panes, its layout dump names none)."""
        if tuple(int(x) for x in self.version.split(".")) < (0, 44):
            p = self.zellij("--session", session, "action", "dump-layout", check=False)
            return p.returncode == 0 and "pane" in p.stdout
        p = self.zellij("--session", session, "action", "list-panes", "--json", check=False)
        return p.returncode == 0 and '"is_plugin": false' in p.stdout

    def act(self, session: str, *args: str, answer: str = "") -> str:
        """``zellij --session SESSION action ARGS…``'s stdout, made again until the call deadline
        while 0.45.0, busy, says "There is no active session!" of this live session (nothing was
        sent), or — with ``answer`` — until stdout starts with it: busy, it may answer nothing
        (exit 0, contract §2.0), or, a swarm's call made at the same moment, that call's answer."""
        deadline = time.monotonic() + ACT_DEADLINE
        while True:
            try:
                p = self.zellij("--session", session, "action", *args, check=False, timeout=ACT_TRY_TIMEOUT)
            except subprocess.TimeoutExpired:  # a loaded machine's server left one call unanswered
                assert time.monotonic() < deadline, f"session {session}: action {args} never answered"
                continue
            if p.returncode == 0 and p.stdout.startswith(answer):
                return p.stdout
            busy = "There is no active session" in p.stderr or p.returncode == 0
            assert busy and time.monotonic() < deadline, f"session {session}: action {args} answered {p}"
            time.sleep(0.05)

    def panes(self, session: str) -> list[dict]:
        """``list-panes --json`` (from 0.44)."""
        import json

        return json.loads(self.act(session, "list-panes", "--json", answer="["))

    def clients(self, session: str) -> int:
        """How many clients ``list-clients`` lists."""
        return len(self.act(session, "list-clients", answer="CLIENT_ID").splitlines()) - 1

    def processes(self) -> list[psutil.Process]:
        return processes_of(self.sockdir)

    def cleanup(self) -> None:
        self.zellij("kill-all-sessions", "--yes", check=False)
        kill_all(self.processes())
        deadline = time.monotonic() + 5
        while (left := [p for p in self.processes() if alive(p)]) and time.monotonic() < deadline:
            time.sleep(0.02)
        shutil.rmtree(self.root, ignore_errors=True)
        assert not left, f"real zellij processes of {self.sockdir} outlived the test: {[p.pid for p in left]}"


SCREENS = Path(__file__).resolve().parent / "screens"


def normalised_screen(screen: str, run_id: str) -> str:
    """A real client's screen with what changes from run to run (the run id, durations) made
    fixed, to keep as a fixture."""
    screen = screen.replace(run_id, "RUN")
    screen = re.sub(r"\d+(\.\d+)?(ms|s)\b", "T", screen)
    screen = re.sub(r"\d{8}-\d{6}-[0-9a-f]*…", "RUN…", screen)  # a run id a narrow title cut
    return "\n".join(line.rstrip() for line in screen.splitlines()).strip("\n") + "\n"


def keep_screen(size: str, name: str, screen: str) -> None:
    """Write ``screen`` as ``tests/screens/real-zellij-<size>/<name>`` when ZSW_UPDATE_SCREENS is set."""
    if os.environ.get("ZSW_UPDATE_SCREENS"):
        (SCREENS / f"real-zellij-{size}").mkdir(parents=True, exist_ok=True)
        (SCREENS / f"real-zellij-{size}" / name).write_text(screen)
