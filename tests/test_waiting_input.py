"""Telling a live pane worker that waits for input from one that works, from the kernel's view
of its terminal (zellij_swarm.worker.waiting). Every worker here is a real process on a real
pty, a session leader with the pty as its controlling terminal and its own foreground
group, as in a tmux pane."""

from __future__ import annotations

import os
import platform
import pty
import select
import shutil
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from swarmtest import full, wait_until

from zellij_swarm.worker import waiting
from zellij_swarm.worker.waiting import QUIET_AFTER, TtyWait, scan_procs, tty_wait, waiting_input
from zellij_swarm.worker.wrapper import PANE_LEADER, PTY_RELAY

pytestmark = pytest.mark.skipif(platform.machine() not in ("x86_64", "aarch64"), reason="syscall numbers known")

PY = sys.executable
TIMEOUT = 15.0  # for a process to start on a loaded machine; the judgement itself is immediate


def _descendants(root: int) -> list[int]:
    table = scan_procs()
    out, stack = [], [root]
    while stack:
        parent = stack.pop()
        for pid, st in table.items():
            if st.ppid == parent:
                out.append(pid)
                stack.append(pid)
    return out


@contextmanager
def on_pty(*argv: str) -> Iterator[tuple[int, int]]:
    """Run ``argv`` as the session leader of a new pty; yields (pid, master fd). Every process
    it started is killed and the leader reaped at the end."""
    pid, master = pty.fork()
    if pid == 0:
        try:
            os.environ["SHELL"] = "/bin/sh"  # script(1) runs its command with $SHELL -c
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    try:
        yield pid, master
    finally:
        for p in [*_descendants(pid), pid]:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        os.waitpid(pid, 0)
        os.close(master)


def becomes(pid: int, want: TtyWait) -> None:
    seen: list[TtyWait] = []

    def check() -> bool:
        seen.append(tty_wait(pid))
        return seen[-1] is want

    wait_until(check, timeout=TIMEOUT, what=f"{want} (last seen: {seen[-1:]})")


def stays(pid: int, want: TtyWait, looks: int = 10) -> None:
    for _ in range(looks):
        assert tty_wait(pid) is want
        assert tty_wait(pid, procs=scan_procs()) is want


def read_until(master: int, marker: bytes) -> None:
    got = bytearray()

    def arrived() -> bool:
        if select.select([master], [], [], 0.05)[0]:
            got.extend(os.read(master, 4096))
        return marker in got

    wait_until(arrived, timeout=TIMEOUT, what=f"{marker!r} on the terminal (got {bytes(got)!r})")


def in_syscall(pid: int, numbers: frozenset[int]) -> bool:
    first = Path(f"/proc/{pid}/syscall").read_text().split()[0]
    return first.lstrip("-").isdigit() and int(first) in numbers


CALLS = waiting._SYSCALLS[platform.machine()]


def test_sh_read_is_reading_and_is_cleared_once_it_reads():
    with on_pty("/bin/sh", "-c", "read x; exec sleep 60") as (pid, master):
        becomes(pid, TtyWait.READING)
        os.write(master, b"an answer\n")
        becomes(pid, TtyWait.BUSY)


def test_python_input_is_reading():
    with on_pty(PY, "-c", "input()") as (pid, _):
        becomes(pid, TtyWait.READING)


def test_readline_input_polls_the_terminal_alone_and_waits_at_once():
    pytest.importorskip("readline")
    with on_pty(PY, "-c", "import readline; input('> ')") as (pid, master):
        read_until(master, b"> ")
        becomes(pid, TtyWait.POLLING)
        stays(pid, TtyWait.POLLING)
        assert waiting_input(TtyWait.POLLING, silent_for=0.0) is True


EVENT_LOOPS = {  # each registers its fds, says "ready", then waits on them forever
    "epoll": "e = select.epoll()\nfor fd in fds: e.register(fd, select.EPOLLIN)\nprint('ready', flush=True)\ne.poll()",
    "nested epoll": ("inner = select.epoll()\nfor fd in fds: inner.register(fd, select.EPOLLIN)\n"
                     "e = select.epoll(); e.register(inner.fileno(), select.EPOLLIN)\n"
                     "print('ready', flush=True)\ne.poll()"),
    "poll": "p = select.poll()\nfor fd in fds: p.register(fd, select.POLLIN)\nprint('ready', flush=True)\np.poll()",
    "select": "print('ready', flush=True)\nselect.select(fds, [], [])",
}
WAITS = CALLS.epolls | CALLS.polls | CALLS.selects


# What else a loop on its terminal waits on decides: a socket (or pipe) another process may
# make ready first, or an eventfd (or timer) only it wakes itself.
BESIDE_THE_TTY = {"a socket": ("import socket\na, b = socket.socketpair()\nf = a.fileno()", TtyWait.SHARED),
                  "its own eventfd": ("import os\nf = os.eventfd(0)", TtyWait.POLLING)}


@pytest.mark.parametrize("beside", BESIDE_THE_TTY)
@pytest.mark.parametrize("loop", EVENT_LOOPS)
def test_an_event_loop_on_stdin_and_something_else(loop, beside):
    setup, verdict = BESIDE_THE_TTY[beside]
    program = f"import select\n{setup}\nfds = [f, 0]\n{EVENT_LOOPS[loop]}"
    with on_pty(PY, "-c", program) as (pid, master):
        read_until(master, b"ready")
        becomes(pid, verdict)
        stays(pid, verdict)


@pytest.mark.parametrize("loop", EVENT_LOOPS)
def test_an_event_loop_on_a_socket_without_the_tty_is_never_waiting(loop):
    program = f"import select, socket\na, b = socket.socketpair()\nfds = [a.fileno()]\n{EVENT_LOOPS[loop]}"
    with on_pty(PY, "-c", program) as (pid, master):
        read_until(master, b"ready")
        wait_until(lambda: in_syscall(pid, WAITS), timeout=TIMEOUT, what="the loop to wait")
        stays(pid, TtyWait.BUSY)
        assert waiting_input(tty_wait(pid), silent_for=3600.0) is False


def test_a_busy_loop_is_busy():
    with on_pty("/bin/sh", "-c", "while :; do :; done") as (pid, _):
        becomes(pid, TtyWait.BUSY)
        stays(pid, TtyWait.BUSY)


def test_the_foreground_group_counts_not_the_shell_judged():
    with on_pty("/bin/sh", "-c", f"'{PY}' -c 'input()'; echo done") as (pid, master):
        becomes(pid, TtyWait.READING)
        os.write(master, b"\n")
        read_until(master, b"done")


@pytest.mark.parametrize(("worker", "verdict"), [(f"'{PY}' -c 'input()'", TtyWait.READING),
                                                  ("while :; do :; done", TtyWait.BUSY)])
def test_the_pane_leader_and_the_wrapper_shell_are_not_waiting(worker, verdict):
    """A tmux pane: pane leader -> wrapper sh -> worker, all in one group; both wait in wait4."""
    with on_pty(*PANE_LEADER, "/bin/sh", "-c", worker) as (pid, _):
        wait_until(lambda: _descendants(pid), timeout=TIMEOUT, what="the worker to start")
        becomes(pid, verdict)
        stays(pid, verdict)


@pytest.mark.parametrize(("worker", "verdict"), [(f"'{PY}' -c 'input()'", TtyWait.READING),
                                                  ("while :; do :; done", TtyWait.BUSY)])
def test_the_pty_relay_is_a_relay_its_inner_terminal_is_judged(worker, verdict, tmp_path):
    """A Zellij pane: the relay always polls the pane's terminal; the worker is on its pty."""
    relay = " ".join(f"'{w}'" for w in PTY_RELAY)
    with on_pty(*PANE_LEADER, "/bin/sh", "-c", f"{relay} {tmp_path}/log /bin/sh -c \"{worker}\"") as (pid, _):
        wait_until(lambda: len(_descendants(pid)) >= 3, timeout=TIMEOUT, what="the relay's worker to start")
        becomes(pid, verdict)
        stays(pid, verdict)


@pytest.mark.skipif(shutil.which("script") is None, reason="needs script(1)")
@pytest.mark.parametrize(("worker", "verdict"), [(f"'{PY}' -c 'input()'", TtyWait.READING),
                                                  full("while :; do :; done", TtyWait.BUSY)])
def test_script_is_a_relay_its_inner_terminal_is_judged(worker, verdict):
    """Any relay is known by its shape: script(1) polls the pane's terminal too."""
    with on_pty(*PANE_LEADER, "/bin/sh", "-c", f"script -qfec \"{worker}\" /dev/null") as (pid, _):
        wait_until(lambda: len(_descendants(pid)) >= 3, timeout=TIMEOUT, what="script's worker to start")
        becomes(pid, verdict)
        stays(pid, verdict)


def test_a_gone_process_is_unknown():
    with on_pty("/bin/sh", "-c", "exit 0") as (pid, _):
        pass
    assert tty_wait(pid) is TtyWait.UNKNOWN
    assert waiting_input(tty_wait(pid), silent_for=60.0) is None


def test_a_process_without_a_terminal_is_unknown():
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            signal.pause()
        finally:
            os._exit(0)
    try:
        wait_until(lambda: waiting.read_stat(pid) and waiting.read_stat(pid).session == pid, timeout=TIMEOUT)
        assert tty_wait(pid) is TtyWait.UNKNOWN
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def test_an_unreadable_syscall_file_is_unknown(tmp_path):
    """A /proc whose ``syscall`` cannot be read (here a directory: EISDIR)."""
    (tmp_path / "50" / "task" / "50" / "syscall").mkdir(parents=True)
    (tmp_path / "50" / "stat").write_text("50 (sh) S 1 50 50 34816 50 4194560 0 0 0 0\n")
    assert tty_wait(50, proc=tmp_path) is TtyWait.UNKNOWN
    (tmp_path / "50" / "task" / "50" / "syscall").rmdir()
    (tmp_path / "50" / "task" / "50" / "syscall").write_text("running\n")
    assert tty_wait(50, proc=tmp_path) is TtyWait.BUSY


@pytest.mark.skipif(os.geteuid() != 0, reason="drops from root to nobody")
def test_without_ptrace_access_it_is_unknown():
    """Another user's process (or Yama's ptrace_scope) keeps /proc/PID/syscall closed: EACCES."""
    with on_pty("/bin/sh", "-c", "read x") as (pid, _):
        becomes(pid, TtyWait.READING)
        r, w = os.pipe()
        child = os.fork()
        if child == 0:
            try:
                os.setgid(65534)
                os.setuid(65534)
                look = waiting.look(pid)
                os.write(w, f"{look.wait.value} {look.closed}".encode())
            finally:
                os._exit(0)
        os.close(w)
        os.waitpid(child, 0)
        with os.fdopen(r, "rb") as f:
            assert f.read() == b"unknown /proc/PID/syscall is closed to this user (ptrace access)"


@pytest.mark.parametrize(("wait", "silent_for", "expected"), [
    (TtyWait.READING, 0.0, True),
    (TtyWait.POLLING, 0.0, True),
    (TtyWait.SHARED, 0.0, False),
    (TtyWait.SHARED, QUIET_AFTER - 0.1, False),
    (TtyWait.SHARED, QUIET_AFTER, True),
    (TtyWait.BUSY, 3600.0, False),
    (TtyWait.UNKNOWN, 3600.0, None),
])
def test_waiting_input(wait, silent_for, expected):
    assert waiting_input(wait, silent_for=silent_for) is expected


def test_a_quiet_after_of_ones_own():
    assert waiting_input(TtyWait.SHARED, silent_for=1.0, quiet_after=0.5) is True
    assert waiting_input(TtyWait.SHARED, silent_for=1.0, quiet_after=2.0) is False


@pytest.mark.parametrize(("wait", "expected"), [(TtyWait.SHARED, True), (TtyWait.UNKNOWN, True),
                                                (TtyWait.BUSY, False), (TtyWait.POLLING, True)])
def test_a_prompt_on_the_screen_weighs_less_than_the_kernel(wait, expected):
    assert waiting_input(wait, silent_for=0.0, prompt=True) is expected


@pytest.mark.parametrize(("scope", "euid", "closed"), [(None, 1000, False), ("0", 1000, False), ("1", 1000, True),
                                                       ("1", 0, False), ("3", 0, True)])
def test_doctor_says_when_the_kernel_will_not_tell(tmp_path, monkeypatch, scope, euid, closed):
    """Yama's ptrace_scope 1 lets a process read only its descendants' syscall files; the
    supervisor is not a pane's ancestor. Root passes every scope but 3."""
    if scope is not None:
        (tmp_path / "sys" / "kernel" / "yama").mkdir(parents=True)
        (tmp_path / "sys" / "kernel" / "yama" / "ptrace_scope").write_text(scope + "\n")
    monkeypatch.setattr(waiting.os, "geteuid", lambda: euid)
    said = waiting.evidence_here(tmp_path)
    assert (said is not None) is closed
    if closed:
        assert f"ptrace_scope is {scope}" in said


WITHOUT_SYSCALLS = {  # as Yama's ptrace_scope 1 leaves it: wchan and the open files, not the syscall
    "input()": (f"exec '{PY}' -c 'input()'", TtyWait.READING),
    "sh read": ("read x", TtyWait.READING),
    "readline": (f"exec '{PY}' -c 'import readline; input(\"> \")'", TtyWait.POLLING),
    "select on the tty": (f"exec '{PY}' -c 'import select; select.select([0], [], [], 60)'", TtyWait.POLLING),
    "epoll, tty and socket": (f"exec '{PY}' -c 'import select, socket; a, b = socket.socketpair(); e = select.epoll(); "
                              "e.register(0, 1); e.register(a.fileno(), 1); e.poll()'", TtyWait.SHARED),
    "epoll, socket only": (f"exec '{PY}' -c 'import select, socket; a, b = socket.socketpair(); e = select.epoll(); "
                           "e.register(a.fileno(), 1); e.poll()'", TtyWait.BUSY),
    "select, a socket open": (f"exec '{PY}' -c 'import select, socket; a, b = socket.socketpair(); "
                              "select.select([0], [], [], 60)'", TtyWait.UNKNOWN),
    "sleep": ("exec sleep 60", TtyWait.BUSY),
}


@pytest.mark.parametrize("case", WITHOUT_SYSCALLS)
def test_without_the_syscall_file_wchan_and_the_open_files_tell(case, monkeypatch):
    worker, verdict = WITHOUT_SYSCALLS[case]
    real_read = waiting._read

    def refused(path: str, size: int = 4096) -> bytes:
        if path.endswith("/syscall"):
            raise PermissionError(13, "Permission denied", path)
        return real_read(path, size)

    # as in a pane: nothing open but the terminal (this test's process holds pipes of its own)
    closed_fds = "import os, sys; os.closerange(3, 65536); os.execv('/bin/sh', ['sh', '-c', sys.argv[1]])"
    with on_pty(PY, "-c", closed_fds, worker) as (pid, _):
        wait_until(lambda: waiting.read_stat(pid) and waiting.read_stat(pid).state == "S"
                   and Path(f"/proc/{pid}/wchan").read_text() not in ("", "0", "do_wait"), timeout=TIMEOUT)
        monkeypatch.setattr(waiting, "_read", refused)
        becomes(pid, verdict)
        stays(pid, verdict)
        look = waiting.look(pid)
        assert look.closed is not None and "closed to this user" in look.closed
        if verdict is not TtyWait.UNKNOWN:
            assert look.closed.endswith("judged from /proc/PID/wchan and the open files instead")
