"""One soak swarm: a private directory holding its swarm file and the ledger its tasks write,
the environment and backend flags its commands run with, and the checks every phase makes
at the end — each task's ledger line exactly once, no attempt that exited 0 recorded as
anything but succeeded, no process of the run left."""

from __future__ import annotations

import collections
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from zellij_swarm.worker import procs

ZSW = [sys.executable, "-m", "zellij_swarm"]
# tmux-windows: tmux with panes too wide for two a window, so that every batch of panes spreads
# over windows the batch makes; zellij: the real Zellij of CI's version (scripts/zellij-versions),
# as scripts/setup built it, in a private socket directory and home
BACKENDS = ("headless", "tmux", "tmux-windows", "zellij")
ROOT = Path(__file__).resolve().parent.parent
# what the real-Zellij tier's sessions start with (tests/realzellij.py): no tips, no notes, and
# no serialised sessions that a later `list-sessions` would show
ZELLIJ_CONFIG = "show_startup_tips false\nshow_release_notes false\nsession_serialization false\n"
START_DEADLINE = 30.0  # seconds for a run to write its run.json: far beyond a loaded machine's start-up


class SoakError(Exception):
    """Something a round cannot go on from (a run that never started): a violation."""


class SoakSwarm:
    def __init__(self, backend: str) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="zsw-soak-"))
        self.backend = backend
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("ZELLIJ", "TMUX")) and k != "CI"}
        self.backend_args: list[str] = []
        if backend.startswith("tmux"):  # a private tmux server, killed at the end: never the user's
            (self.dir / "tmux").mkdir()
            self.env["TMUX_TMPDIR"] = str(self.dir / "tmux")
            self.backend_args = ["--backend", "tmux", "--ui", "live", "--max-visible-panes", "8",
                                 *(["--min-pane-width", "200"] if backend == "tmux-windows" else [])]
        if backend == "zellij":
            self._private_zellij()
        self.state_dir = self.dir / ".zellij-swarm"
        self.mounted = False
        self.run_id = ""

    def _private_zellij(self) -> None:
        """The real Zellij of CI's version first on PATH (where ``scripts/build-zellij``, its one
        owner, says it is), with a home, a config and a socket directory of the soak's own: its
        sessions are never the user's, and ``close`` ends every one. The socket directory is
        short (``/tmp/zsk-…``): a session's socket path must fit 108 bytes."""
        built = subprocess.run([str(ROOT / "scripts/build-zellij"), "ci"], capture_output=True, text=True)
        if built.returncode != 0:  # (scripts/soak builds it first, through scripts/setup)
            raise SystemExit(f"soak: no real Zellij: {built.stderr.strip()}")
        binary = Path(built.stdout.strip())
        home, config = self.dir / "home", self.dir / "home/.config/zellij"
        config.mkdir(parents=True)
        (config / "config.kdl").write_text(ZELLIJ_CONFIG)
        (self.dir / "run").mkdir(mode=0o700)
        self.sockets = Path(tempfile.mkdtemp(prefix="zsk-", dir="/tmp"))
        self.env.update(PATH=f"{binary.parent}:{self.env.get('PATH', '/usr/bin:/bin')}", HOME=str(home),
                        XDG_CONFIG_HOME=str(home / ".config"), XDG_RUNTIME_DIR=str(self.dir / "run"),
                        ZELLIJ_SOCKET_DIR=str(self.sockets))
        self.backend_args = ["--backend", "zellij", "--ui", "live", "--max-visible-panes", "8"]

    def _end_zellij(self) -> None:
        """Every session of the soak's socket directory, then any process still naming it."""
        for args in (["kill-all-sessions", "-y"], ["delete-all-sessions", "-y", "--force"]):
            with contextlib.suppress(subprocess.TimeoutExpired, OSError):
                subprocess.run(["zellij", *args], env=self.env, capture_output=True, timeout=30)
        marker = f"ZELLIJ_SOCKET_DIR={self.sockets}".encode()
        left = []
        for p in psutil.process_iter():
            with contextlib.suppress(psutil.Error, OSError):
                if marker in Path(f"/proc/{p.pid}/environ").read_bytes().split(b"\0"):
                    left.append(p)
        procs.end_all(left, 1.0)
        shutil.rmtree(self.sockets, ignore_errors=True)

    def mount_state_dir(self, size: str) -> None:
        """The state directory becomes a tmpfs of ``size`` (in the soak's private mount
        namespace: no other process sees it)."""
        self.state_dir = self.dir / "state"
        self.state_dir.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=700", "tmpfs", str(self.state_dir)],
                       check=True, capture_output=True, timeout=30)
        self.mounted = True

    @property
    def run_dir(self) -> Path:
        return self.state_dir / "runs" / self.run_id

    @property
    def ledger_path(self) -> Path:
        return self.dir / "ledger"

    def write_swarm(self, commands: dict[str, str], jobs: int) -> None:
        """soak.toml: one task per name; a command holds no single quote (a TOML literal string).
        Every second task runs its command from a file of its own, ``sh tasks/NAME.sh``: one
        simple command, which the headless wrapper execs from its subshell rather than from a
        shell of its own (SPEC §5.4) — the soak goes through both ways."""
        lines = [f"[swarm]\njobs = {jobs}\n"]
        scripts = self.dir / "tasks"
        scripts.mkdir(exist_ok=True)
        for number, (name, cmd) in enumerate(commands.items()):
            if number % 2:
                (scripts / f"{name}.sh").write_text(cmd + "\n")
                cmd = f"sh tasks/{name}.sh"
            lines.append(f"[[task]]\nname = \"{name}\"\ncmd = '{cmd}'\n")
        (self.dir / "soak.toml").write_text("".join(lines))

    def start(self, *args: str, log: str, new_session: bool = False) -> subprocess.Popen[bytes]:
        """A zellij-swarm command in the swarm's directory, its stderr kept in ``log``."""
        with open(self.dir / log, "ab") as err:
            return subprocess.Popen([*ZSW, *args], cwd=self.dir, env=self.env, stdout=subprocess.DEVNULL,
                                    stderr=err, start_new_session=new_session)

    def command(self, *args: str, log: str) -> int:
        with open(self.dir / log, "ab") as err:
            return subprocess.run([*ZSW, *args], cwd=self.dir, env=self.env, stdout=subprocess.DEVNULL,
                                  stderr=err, timeout=120).returncode

    def wait_for_run(self, proc: subprocess.Popen[bytes]) -> None:
        """Sets run_id once the run has recorded what was asked (its run.json)."""
        runs = self.state_dir / "runs"
        deadline = time.monotonic() + START_DEADLINE
        while not (runs.exists() and any(r.joinpath("run.json").exists() for r in runs.iterdir())):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SoakError(f"the run never started (see {self.dir})")
            time.sleep(0.01)
        self.run_id = next(runs.iterdir()).name

    def ledger(self) -> list[str]:
        try:
            return self.ledger_path.read_text().split()
        except FileNotFoundError:
            return []

    def wait_for_ledger(self, lines: int, proc: subprocess.Popen[bytes]) -> bool:
        """Polls until the ledger holds ``lines`` lines; False if the run ended first."""
        while len(self.ledger()) < lines:
            if proc.poll() is not None:
                return False
            time.sleep(0.005)
        return True

    def summary(self) -> dict[str, Any]:
        summary: dict[str, Any] = json.loads((self.run_dir / "summary.json").read_text())
        return summary

    def event_log(self) -> tuple[list[dict[str, Any]], int]:
        """The events of the run's log, and how many of its lines do not parse (torn)."""
        events, torn = [], 0
        with open(self.run_dir / "events.jsonl", "rb") as f:
            for line in f:
                try:
                    events.append(json.loads(line))
                except ValueError:
                    torn += 1
        return events, torn

    def events(self) -> collections.Counter[str]:
        """How many times each event is in the run's event log."""
        return collections.Counter(e["event"] for e in self.event_log()[0])

    def left(self) -> list[psutil.Process]:
        return procs.marked(procs.run_markers(self.run_id)) if self.run_id else []

    def close(self, *, keep: bool) -> None:
        """Ends what is left of the run and its tmux server; removes the directory unless kept.
        A mounted state dir goes with the namespace, so a kept one is copied out first (and
        ``run_dir`` then names the copy)."""
        if self.run_id:
            procs.end_all(self.left(), 1.0)
        if self.backend.startswith("tmux"):
            subprocess.run(["tmux", "kill-server"], env=self.env, capture_output=True, timeout=30)
        if self.backend == "zellij":
            self._end_zellij()
        if self.mounted:
            mount = self.state_dir
            if keep:
                self.state_dir = self.dir / "state-kept"
                subprocess.run(["cp", "-a", str(mount), str(self.state_dir)], capture_output=True, timeout=60)
            if subprocess.run(["umount", str(mount)], capture_output=True, timeout=30).returncode != 0:
                subprocess.run(["umount", "-l", str(mount)], capture_output=True, timeout=30)
            self.mounted = False
        if not keep:
            shutil.rmtree(self.dir, ignore_errors=True)


@dataclass
class Round:
    """One round of a phase (cancel, disk-full): what it did and what went wrong."""

    number: int
    moment: str
    missed: bool = False  # the run ended before the fault reached it: the round proved nothing
    problems: list[str] = field(default_factory=list)
    facts: str = ""
    tally: collections.Counter[str] = field(default_factory=collections.Counter)  # summed over the phase

    @property
    def ok(self) -> bool:
        return not self.problems

    @contextlib.contextmanager
    def watching(self, swarm: SoakSwarm, proc: subprocess.Popen[bytes]) -> Iterator[None]:
        """The round's body, around the run ``proc`` it started: a failure of the soak's own
        steps is the round's problem; the soak itself stopped (SIGTERM, Ctrl-C) closes what
        the round started; the run never outlives its round."""
        try:
            yield
        except (SoakError, OSError, ValueError, subprocess.TimeoutExpired) as e:
            self.problems.append(f"the round could not go on: {e}")
        except BaseException:
            swarm.close(keep=False)
            raise
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def recorded_wrong(summary: dict[str, Any]) -> list[str]:
    """Attempts that exited 0 (no signal) but are recorded as anything but succeeded: a soak
    task traps nothing, so an exit 0 means it ran to its end."""
    return [f"{t['name']} attempt {h['attempt']} exited 0 but is recorded {h['status']}"
            for t in summary["tasks"] for h in t.get("history") or []
            if h["exit_code"] == 0 and h["signal"] is None and h["status"] != "succeeded"]


def ledger_problems(ledger: Iterable[str], expected: Iterable[str]) -> tuple[list[str], list[str], list[str]]:
    """(written twice or more, never written, written but not expected)."""
    counts = collections.Counter(ledger)
    wanted = set(expected)
    return (sorted(n for n, c in counts.items() if c > 1 and n in wanted), sorted(wanted - set(counts)),
            sorted(set(counts) - wanted))
