"""The processes of one fake ``zellij`` installation, and ending them: shared by the fake's
own tests and the Zellij backend's. A fake server, pane or client names its socket dir in
its environment (``ZELLIJ_SOCKET_DIR``), which is how they are found."""

from __future__ import annotations

import os
import signal
import time

import psutil


def alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def command_line(proc: psutil.Process) -> str:
    """Its command line, or "" once it is gone: a client found a moment ago may have exited."""
    try:
        return " ".join(proc.cmdline())
    except psutil.Error:
        return ""


def processes_of(sockdir: str, *, sessions_only: bool = False) -> list[psutil.Process]:
    """Live processes of the installation at ``sockdir``; ``sessions_only``: servers and
    panes (they carry ``ZELLIJ_SESSION_NAME``), not CLI clients."""
    found = []
    me = os.getpid()
    for proc in psutil.process_iter(["pid"]):
        if proc.pid == me:
            continue
        try:
            env = proc.environ()
        except (psutil.Error, OSError):
            continue
        if env.get("ZELLIJ_SOCKET_DIR") == sockdir and (not sessions_only or "ZELLIJ_SESSION_NAME" in env) \
                and alive(proc):
            found.append(proc)
    return found


def kill_all(procs: list[psutil.Process], timeout: float = 5.0) -> None:
    """SIGKILL each and wait, with a deadline, until none is alive."""
    for p in procs:
        try:
            p.send_signal(signal.SIGKILL)
        except psutil.Error:
            pass
    deadline = time.monotonic() + timeout
    while any(alive(p) for p in procs) and time.monotonic() < deadline:
        time.sleep(0.01)
