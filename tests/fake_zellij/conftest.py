"""Fixtures for the fake zellij's own tests.

Every test gets a private, short ZELLIJ_SOCKET_DIR (Unix socket paths are limited to 107 bytes),
a private HOME/XDG dirs and an invocation log; at teardown every server and pane process that
belongs to that socket dir is killed (found through psutil by its environment).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest
from fakeprocs import kill_all, processes_of

REPO = Path(__file__).resolve().parents[2]
FAKE_DIR = REPO / "scripts" / "fake-zellij"
VERSIONS = ["0.40.1", "0.41.2", "0.43.1", "0.44.3", "0.45.0"]
SCRUB_PREFIXES = ("ZELLIJ", "TMUX", "ZELLIJ_SWARM_", "FAKE_ZELLIJ")
SCRUB_EXACT = {"CI"}


def scrubbed_env() -> dict:
    return {k: v for k, v in os.environ.items()
            if not k.startswith(SCRUB_PREFIXES) and k not in SCRUB_EXACT}


class Result:
    def __init__(self, cp: subprocess.CompletedProcess):
        self.rc = cp.returncode
        self.stdout_b = cp.stdout
        self.stderr_b = cp.stderr
        self.out = cp.stdout.decode("utf-8", "replace")
        self.err = cp.stderr.decode("utf-8", "replace")

    def __repr__(self):
        return f"Result(rc={self.rc}, out={self.out!r}, err={self.err!r})"


class Fake:
    def __init__(self, root: Path, sockdir: str):
        self.root = root
        self.sockdir = sockdir
        self.home = root / "home"
        self.home.mkdir()
        self.log = root / "invocations.jsonl"
        env = scrubbed_env()
        env.update({
            "PATH": f"{FAKE_DIR}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}",
            "ZELLIJ_SOCKET_DIR": sockdir,
            "HOME": str(self.home),
            "XDG_CACHE_HOME": str(root / "cache"),
            "XDG_CONFIG_HOME": str(root / "config"),
            "XDG_RUNTIME_DIR": str(root / "run"),
            "FAKE_ZELLIJ_LOG": str(self.log),
            "FAKE_ZELLIJ_PYTHON": sys.executable,
            "SHELL": "/bin/sh",
        })
        self.env = env

    def environ(self, version=None, faults=None, **extra) -> dict:
        env = dict(self.env)
        if version:
            env["FAKE_ZELLIJ_VERSION"] = version
        if faults:
            env["FAKE_ZELLIJ_FAULTS"] = faults
        for k, v in extra.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = v
        return env

    def run(self, *args, version=None, faults=None, timeout=15, cwd=None, env=None,
            **extra) -> Result:
        e = env if env is not None else self.environ(version, faults, **extra)
        cp = subprocess.run(["zellij", *args], env=e, cwd=cwd or str(self.root),
                            stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
        return Result(cp)

    def popen(self, *args, version=None, faults=None, **extra) -> subprocess.Popen:
        return subprocess.Popen(["zellij", *args], env=self.environ(version, faults, **extra),
                                cwd=str(self.root), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def create(self, name, *top, version=None, **kw) -> Result:
        r = self.run(*top, "attach", "--create-background", name, version=version, **kw)
        assert r.rc == 0, r
        return r

    def state(self, name=None, version=None) -> dict:
        r = self.run("__fake-state", *([name] if name else []), version=version)
        assert r.rc == 0, r
        return json.loads(r.out)

    def session(self, name, version=None) -> dict:
        st = self.state(name, version=version)
        assert st["sessions"], st
        return st["sessions"][0]

    def panes(self, name, version=None) -> list[dict]:
        return [p for t in self.session(name, version)["tabs"] for p in t["panes"]]

    def pane(self, name, label, version=None) -> dict | None:
        for p in self.panes(name, version):
            if p["pane_id"] == label:
                return p
        return None

    def wait_for(self, fn, timeout=10.0, interval=0.03, what="condition"):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            last = fn()
            if last:
                return last
            time.sleep(interval)
        raise AssertionError(f"timed out waiting for {what}; last={last!r}")

    def wait_file(self, path, timeout=10.0):
        p = Path(path)
        return self.wait_for(lambda: p.exists() and p.stat().st_size > 0 and p.read_text(),
                             timeout, what=f"file {path}")

    def log_entries(self) -> list[dict]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]

    def processes(self) -> list[psutil.Process]:
        return processes_of(self.sockdir, sessions_only=True)

    def cleanup(self):
        kill_all(self.processes())


@pytest.fixture
def fake():
    root = Path(tempfile.mkdtemp(dir="/tmp", prefix="fz"))
    sockdir = str(root / "s")
    os.mkdir(sockdir)
    f = Fake(root, sockdir)
    try:
        yield f
    finally:
        f.cleanup()
        shutil.rmtree(root, ignore_errors=True)


# 0.41.2 changes nothing the versions around it do not cover: a neighbour (scripts/test-full)
@pytest.fixture(params=[v if v != "0.41.2" else pytest.param(v, marks=pytest.mark.full) for v in VERSIONS])
def version(request):
    return request.param
