"""Helpers for the Zellij backend tests: the fake ``zellij`` (scripts/fake-zellij) first on
PATH with a private short socket dir, an invocation log, and a teardown that kills every fake
server and pane process of that socket dir (found through their environment, as the fake's
own tests do) and checks none survived."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
from fakeprocs import alive, kill_all, processes_of
from swarmtest import GATE, Swarm, clean_env, kill_run_processes, wait_until

REPO = Path(__file__).resolve().parent.parent
FAKE_DIR = REPO / "scripts" / "fake-zellij"
# Deadlines for a loaded CI machine: a fake Zellij session can take seconds to start there.
FAST = {"ZELLIJ_SWARM_HEARTBEAT_TIMEOUT_MS": "10000", "ZELLIJ_SWARM_PANE_HOLD_MS": "200",
        "ZELLIJ_SWARM_ZELLIJ_READY_TIMEOUT_MS": "30000"}


def _pid_alive(pid: int) -> bool:
    try:
        return alive(psutil.Process(pid))
    except psutil.Error:
        return False


class FakeZellij:
    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(dir="/tmp", prefix="zs"))
        self.sockdir = str(self.root / "s")
        os.mkdir(self.sockdir)
        self.log = self.root / "invocations.jsonl"
        (self.root / "home").mkdir()
        self.versions: set[str] = set()
        self.base = clean_env(
            PATH=f"{FAKE_DIR}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
            ZELLIJ_SOCKET_DIR=self.sockdir,
            HOME=str(self.root / "home"),
            XDG_CACHE_HOME=str(self.root / "cache"),
            XDG_CONFIG_HOME=str(self.root / "config"),
            XDG_RUNTIME_DIR=str(self.root / "run"),
            FAKE_ZELLIJ_LOG=str(self.log),
            FAKE_ZELLIJ_PYTHON=sys.executable,
            FAKE_ZELLIJ_SERIALIZE="0",
            SHELL="/bin/sh",
        )
        self.base = {k: v for k, v in self.base.items() if not k.startswith("FAKE_ZELLIJ_") or k in (
            "FAKE_ZELLIJ_LOG", "FAKE_ZELLIJ_PYTHON", "FAKE_ZELLIJ_SERIALIZE")}

    def env(self, version: str, *, faults: str = "", inside: str | None = None, **extra: str) -> dict[str, str]:
        """The environment of ``zellij-swarm run``: outside Zellij, or inside session ``inside``."""
        self.versions.add(version)
        env = dict(self.base, FAKE_ZELLIJ_VERSION=version)
        if faults:
            env["FAKE_ZELLIJ_FAULTS"] = faults
        if inside:
            env.update(ZELLIJ="0", ZELLIJ_SESSION_NAME=inside)
        env.update(extra)
        return env

    def zellij(self, *args: str, version: str, check: bool = True) -> subprocess.CompletedProcess:
        p = subprocess.run(["zellij", *args], env=self.env(version), cwd=self.root, capture_output=True, text=True,
                           stdin=subprocess.DEVNULL, timeout=20)
        if check:
            assert p.returncode == 0, (args, p.returncode, p.stdout, p.stderr)
        return p

    def host(self, name: str, version: str, *, client: bool = False) -> None:
        """A session the swarm runs 'inside' (a shell pane, as a user's session has)."""
        self.zellij("attach", "--create-background", name, version=version)
        if client:
            self.zellij("__fake-attach", name, version=version)

    def shell(self, name: str, version: str) -> dict[str, Any]:
        """The shell pane of ``host``'s session ``name`` (``list-panes --json``'s row): where
        the user types, its id their ``$ZELLIJ_PANE_ID``."""
        [pane] = [p for p in json.loads(self.zellij("--session", name, "action", "list-panes", "--json",
                                                    version=version).stdout) if not p["is_plugin"]]
        return pane

    def state(self, version: str) -> dict[str, Any]:
        return json.loads(self.zellij("__fake-state", version=version).stdout)

    def session(self, version: str, name: str | None = None) -> dict[str, Any]:
        sessions = [s for s in self.state(version)["sessions"] if name is None or s["name"] == name]
        assert sessions, f"no session {name}"
        return sessions[0]

    def tab(self, version: str, run_id: str, session: str | None = None) -> dict[str, Any]:
        for t in self.session(version, session)["tabs"]:
            if t["name"] == f"swarm:{run_id}":
                return t
        raise AssertionError(f"no tab swarm:{run_id}")

    def calls(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(ln) for ln in self.log.read_text().splitlines() if ln.strip()]

    def processes(self) -> list[psutil.Process]:
        return processes_of(self.sockdir)

    def pane_pids(self) -> list[int]:
        pids = []
        for v in self.versions:
            try:
                st = self.state(v)
            except Exception:
                continue
            for s in st["sessions"]:
                pids += [p["pid"] for t in s["tabs"] for p in t["panes"] if p.get("pid")]
                pids += [p["pid"] for p in s.get("orphan_panes", []) if p.get("pid")]
        return pids

    def cleanup(self) -> None:
        pane_pids = self.pane_pids()
        kill_all(self.processes())
        hung_up = time.monotonic() + 2  # the PTY hang-up ends what the servers hosted
        while time.monotonic() < hung_up and any(_pid_alive(pid) for pid in pane_pids):
            time.sleep(0.02)
        left = [p.pid for p in self.processes()]
        for pid in pane_pids:  # a pane process with an empty environment (a held pane's sleep)
            try:
                p = psutil.Process(pid)
                if alive(p):
                    left.append(pid)
                    p.kill()
            except psutil.Error:
                pass
        shutil.rmtree(self.root, ignore_errors=True)
        assert not left, f"fake zellij processes outlived the test: {left}"


def check_calls(calls: list[dict[str, Any]]) -> None:
    """Contract §2.0/§6.3: long flags only, --session before the subcommand (never for the
    session commands), -- before every command, and no call that hung or was not understood."""
    assert calls, "no zellij call was logged"
    for c in calls:
        argv = c["argv"]
        if argv[:1] == ["__fake-state"] or argv[:1] in (["__fake-attach"], ["__fake-detach"]):
            continue
        head = argv[:argv.index("--")] if "--" in argv else argv
        assert not [a for a in head if a.startswith("-") and not a.startswith("--")], f"short flag in {argv}"
        if "--session" in head:
            assert head.index("--session") == 0, f"--session not first in {argv}"
        sub = c["subcommand"]
        if sub in ("run", "new-pane"):
            assert "--" in argv, f"no -- before the command in {argv}"
        if sub in ("attach", "list-sessions", "delete-session", "kill-session"):
            assert "--session" not in head, argv
        if sub not in ("list-sessions", "attach", "delete-session", "kill-session", None):
            assert "--session" in head, f"no --session in {argv}"
        assert c.get("exit") in (0, 1) or (sub == "delete-session" and c.get("exit") == 2), c
        assert "error:" not in c.get("stderr", ""), c


def retry_after_the_supervisor_is_killed(swarm: Swarm,
                                         env: dict[str, str]) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """A live run made outside Zellij (its own session, no client) with one task failed and
    two running in their panes; its supervisor killed; then ``retry`` of it, the two let go
    once the retried task has ended. The run, and the retry's exit and stderr."""
    swarm.write("t.txt", "test -e flag || { touch flag; exit 3; }\n"
                         + f'{GATE}; echo "$ZELLIJ_SWARM_TASK" >> ledger.txt\n' * 2)
    proc = swarm.popen("run", "t.txt", "-j", "3", "--backend", "zellij", "--ui", "live", "--output", "quiet", env=env)
    run = swarm.started()

    def shown() -> dict[str, str]:
        return {t["name"]: t["status"] for t in json.loads(swarm("status", "--json", run.name).stdout)["tasks"]}

    try:
        wait_until(lambda: shown() == {"task-1": "failed", "task-2": "running", "task-3": "running"}, timeout=60,
                   what="one task failed, two running in their panes")
        proc.kill()
        proc.communicate(timeout=30)
        retry = swarm.popen("retry", run.name, "--backend", "zellij", "--output", "quiet", env=env)
        wait_until(lambda: shown().get("task-1") == "succeeded", timeout=60, what="the retried task's end")
        swarm.open_gate()
        out, err = retry.communicate(timeout=60)
        return run, subprocess.CompletedProcess(retry.args, retry.returncode, out, err)
    finally:
        swarm.open_gate()
        kill_run_processes(run.name)
