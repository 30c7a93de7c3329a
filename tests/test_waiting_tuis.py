"""Agents that repaint while they wait (issue 24 §5), in live tmux panes, as root and as a user
who is not (``setpriv`` to nobody), with and without the kernel's word on what they wait in.

(a) A "thinking" agent: epoll over its terminal and a socket that answers after 10 s, a
    spinner repainting 10 times a second. Never marked waiting.
(b) A curses agent repainting a clock every second while it waits for a key. Marked within
    5 s of its first paint, and stays marked while no key is pressed; a key lets it end.

Both run in one swarm (two slots), so the 10 s of (a) cover the whole of (b). A worker that
made itself non-dumpable (``prctl(PR_SET_DUMPABLE, 0)``) keeps a non-root supervisor out of
its ``/proc/PID/syscall``, as Yama's ptrace_scope or another owner would: then (b) is seen by
its prompt on its screen, and the task's record says why the kernel could not tell.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest
from swarmtest import clean_env, kill_run_processes, wait_until

ANSWER_AFTER = 10.0  # the thinking agent's model answers after this long
MARKED_WITHIN = 5.0

THINKER = r'''
import os, select, socket, sys
if os.environ.get("AGENT_NODUMP"):
    import ctypes
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: closes /proc/PID/syscall to its user
model = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
ep = select.epoll()
ep.register(0, select.EPOLLIN)
ep.register(model.fileno(), select.EPOLLIN)
frames, i = "|/-\\", 0
while True:
    ready = [fd for fd, _ in ep.poll(0.1)]
    if model.fileno() in ready:
        print("\r\x1b[Kanswer:", model.recv(100).decode().strip(), flush=True)
        break
    if 0 in ready:
        os.read(0, 100)
    sys.stdout.write(f"\r\x1b[36m{frames[i % 4]}\x1b[0m Thinking... {i / 10:.1f}s")
    sys.stdout.flush()
    i += 1
'''

CLOCK = r'''
import curses, os, sys, time
if os.environ.get("AGENT_NODUMP"):
    import ctypes
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)
def main(scr):
    curses.curs_set(0)
    scr.timeout(1000)  # getch waits a second at most: the clock is repainted every second
    first = True
    while True:
        scr.addstr(0, 0, "clock " + time.strftime("%H:%M:%S"))
        scr.addstr(5, 2, sys.argv[1])
        scr.refresh()
        if first:
            with open("painted", "w") as f:
                f.write(repr(time.time()))
            first = False
        if scr.getch() != -1:
            return
curses.wrapper(main)
print("key pressed")
'''


@dataclass(frozen=True)
class As:
    user: str  # "root" or "nobody"
    nodump: bool  # the agents close their /proc/PID/syscall

    @property
    def prompt(self) -> str:
        # With the kernel's word, a clock with no prompt of any pattern's is seen all the same;
        # without it, only a prompt on its screen can tell.
        return "Proceed with the edit? [y/N]" if self.nodump else "press a key when you have read this"


@contextmanager
def model_answering_after(seconds: float) -> Iterator[int]:
    """A local 'model': answers its one connection ``seconds`` after it was made."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            if not stop.wait(seconds):
                conn.sendall(b"42\n")
            conn.close()
            return

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        t.join(timeout=5)
        server.close()


def _as(who: As, argv: list[str]) -> list[str]:
    """``argv`` as ``who``. Nobody keeps one capability, to search directories: this machine's
    Python lives under /root (mode 0700). It gives no ptrace access (CAP_SYS_PTRACE does)."""
    if who.user == "root":
        return argv
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=+dac_read_search",
            "--ambient-caps=+dac_read_search", "--", *argv]


@pytest.fixture
def workdir() -> Iterator[Path]:
    """A directory nobody can use too (pytest's tmp_path is root's alone)."""
    d = Path(tempfile.mkdtemp(prefix="zwt", dir="/tmp"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def events(run: Path, name: str) -> list[dict[str, Any]]:
    try:
        text = (run / "events.jsonl").read_text()
    except OSError:
        return []
    return [e for e in map(json.loads, text.splitlines()) if e.get("event") == name]


def _what_the_run_shows(run: Path, socket_path: Path) -> str:
    """What a failed wait reports: the run's events and its panes' screens."""
    tmux = ["tmux", "-S", str(socket_path)]
    panes = subprocess.run([*tmux, "list-panes", "-a", "-F", "#{pane_id}"], capture_output=True, text=True,
                           timeout=10).stdout.split()
    screens = [subprocess.run([*tmux, "capture-pane", "-p", "-t", pane], capture_output=True, text=True,
                              timeout=10).stdout.rstrip() for pane in panes]
    log = run / "events.jsonl"
    return "events:\n" + (log.read_text()[-4000:] if log.exists() else "(none)") + "\nscreens:\n" + \
        "\n----\n".join(screens)


def waits(run: Path, task: str) -> list[tuple[float, bool | None]]:
    return [(e["ts"], e["waiting"]) for e in events(run, "worker_waiting_input") if e["task"] == task]


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="runs as root and as nobody")
# nobody with ptrace access judges as root does (no Yama here): CI runs root and nobody without it
@pytest.mark.parametrize("who", [pytest.param(As("root", nodump=False), id="root"),
                                 pytest.param(As("nobody", nodump=False), id="nobody", marks=pytest.mark.full),
                                 pytest.param(As("nobody", nodump=True), id="nobody-without-ptrace")])
def test_a_thinking_agent_is_never_waiting_a_clock_waiting_for_a_key_is(workdir: Path, who: As) -> None:
    (workdir / "thinker.py").write_text(THINKER)
    (workdir / "clock.py").write_text(CLOCK)
    tmpdir = workdir / "tmux"
    tmpdir.mkdir()
    (tmpdir / f"tmux-{65534 if who.user == 'nobody' else 0}").mkdir(mode=0o700)
    if who.user == "nobody":
        for path in (workdir, tmpdir, *tmpdir.iterdir(), *workdir.glob("*.py")):
            os.chown(path, 65534, 65534)
    socket_path = next(tmpdir.iterdir()) / "default"
    env = clean_env(TMUX_TMPDIR=str(tmpdir), HOME=str(workdir), TERM="xterm-256color",
                    ZELLIJ_SWARM_PANE_HOLD_MS="300", **({"AGENT_NODUMP": "1"} if who.nodump else {}))
    run: Path | None = None
    proc: subprocess.Popen[str] | None = None
    with model_answering_after(ANSWER_AFTER) as port:
        swarm_file = workdir / "s.toml"
        swarm_file.write_text(
            f"[[task]]\nname = \"thinker\"\ncmd = '{sys.executable} thinker.py {port}'\n"
            f"[[task]]\nname = \"clock\"\ncmd = '''{sys.executable} clock.py \"{who.prompt}\"'''\n")
        if who.user == "nobody":
            os.chown(swarm_file, 65534, 65534)
        proc = subprocess.Popen(_as(who, [sys.executable, "-m", "zellij_swarm", "run", "s.toml", "-j", "2",
                                          "--backend", "tmux", "--ui", "live", "--require-multiplexer",
                                          "--output", "quiet"]),
                                cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            runs = workdir / ".zellij-swarm" / "runs"
            run = wait_until(lambda: runs.exists() and next((p for p in runs.iterdir()
                                                              if not p.name.startswith(".")), None),
                             timeout=20, what="the run's directory")
            try:
                painted = wait_until(lambda: ((workdir / "painted").exists() and (workdir / "painted").read_text())
                                     or proc.poll() is not None, timeout=60, what="the clock's first paint")
            except AssertionError as e:
                raise AssertionError(f"{e}\n{_what_the_run_shows(run, socket_path)}") from None
            assert isinstance(painted, str), f"the run ended first: {proc.communicate(timeout=30)}"
            marked = wait_until(lambda: next((ts for ts, w in waits(run, "clock") if w), None),
                                timeout=MARKED_WITHIN + 5, what="the clock marked waiting")
            assert marked - float(painted) < MARKED_WITHIN
            # It stays marked through several repaints of its clock, until its model answers
            # the thinker: never marked meanwhile.
            wait_until(lambda: time.time() - marked > 4.0, timeout=10, what="four repaints of the clock")
            assert [w for _, w in waits(run, "clock")] == [True]
            tmux = ["tmux", "-S", str(socket_path)]
            panes = subprocess.run([*tmux, "list-panes", "-a", "-F", "#{pane_id} #{@zsw_title}"],
                                   capture_output=True, text=True, timeout=10).stdout.splitlines()
            clock_pane = next(line.split()[0] for line in panes if "· clock ·" in line)
            assert "waiting for input" in next(line for line in panes if "· clock ·" in line)
            if who.nodump:
                row = next(t for t in json.loads(subprocess.run(
                    [sys.executable, "-m", "zellij_swarm", "status", "--json"], cwd=workdir, env=env,
                    capture_output=True, text=True, timeout=30).stdout)["tasks"] if t["name"] == "clock")
                assert "closed to this user" in row["waiting_evidence"]
            subprocess.run([*tmux, "send-keys", "-t", clock_pane, "x"], timeout=10, check=True)
            assert proc.wait(timeout=ANSWER_AFTER + 30) == 0, proc.stderr.read() if proc.stderr else ""
            assert all(w is not True for _, w in waits(run, "thinker")), waits(run, "thinker")
            for task, said in (("thinker", "answer: 42"), ("clock", "key pressed")):
                out = subprocess.run([sys.executable, "-m", "zellij_swarm", "logs", run.name, task], cwd=workdir,
                                     env=env, capture_output=True, text=True, timeout=30).stdout
                assert said in out
        finally:
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
            if run is not None:
                kill_run_processes(run.name)
            subprocess.run(["tmux", "-S", str(socket_path), "kill-server"], capture_output=True, timeout=10)
            for p in psutil.process_iter(["cmdline"]):
                if p.info["cmdline"] and str(tmpdir) in " ".join(p.info["cmdline"]):
                    p.kill()
