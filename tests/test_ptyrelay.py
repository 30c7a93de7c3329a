"""The pty relay a Zellij pane runs its worker through (zellij_swarm.worker._ptyrelay): the
worker on a terminal of its own, logged, and its exact status — whatever signal reaches the
relay. Real processes on real ptys; each test ends every process it started."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import shlex
import signal
import struct
import subprocess
import termios
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest
from swarmtest import child_named, full, in_private_mount, needs_unshare, wait_until

from zellij_swarm.worker import _ptyrelay
from zellij_swarm.worker.wrapper import PTY_RELAY


def test_the_log_turns_crlf_into_lf_even_split_between_two_reads(tmp_path: Path) -> None:
    log = _ptyrelay.Log(str(tmp_path / "out"))
    for chunk in (b"one\r", b"\ntwo\r", b"\r\n", b"lone\rcr\r"):
        log.write(chunk)
    log.close()
    assert (tmp_path / "out").read_bytes() == b"one\ntwo\r\nlone\rcr\r"


@contextmanager
def relayed(log: Path, *argv: str, rows: int = 0, cols: int = 0,
            record: Path | None = None) -> Iterator[tuple[int, int]]:
    """The relay as the session leader of an outer pty (a pane): (its pid, the outer master)."""
    pid, master = pty.fork()
    if pid == 0:
        try:
            if rows:
                fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
            os.execv(PTY_RELAY[0], [*PTY_RELAY, *(["--record", str(record)] if record else []), str(log), *argv])
        finally:
            os._exit(127)
    try:
        yield pid, master
    finally:
        with contextlib.suppress(psutil.NoSuchProcess):
            for p in psutil.Process(pid).children(recursive=True):
                with contextlib.suppress(psutil.NoSuchProcess):
                    p.kill()
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
        os.close(master)


def _status(pid: int, master: int, *, typing: bytes = b"") -> int:
    """The relay's exit code, reading the pane meanwhile (a pane nobody reads would block it)
    and, with ``typing``, typing it into the pane again and again."""
    def ended() -> int | None:
        with contextlib.suppress(BlockingIOError):
            if typing:
                os.write(master, typing)
        with contextlib.suppress(OSError):  # BlockingIOError among them
            os.read(master, 65536)
        done, status = os.waitpid(pid, os.WNOHANG)
        return os.waitstatus_to_exitcode(status) if done else None

    os.set_blocking(master, False)
    return wait_until(lambda: (code := ended()) is not None and (code,), timeout=20, what="the relay ends")[0]


def _close_pane(master: int) -> None:
    """The pane closes: the last descriptor of its master goes, and its terminal hangs up
    (``master`` then names /dev/null, which ``relayed`` closes)."""
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, master)
    os.close(devnull)


def _worker(pid: int, name: str) -> psutil.Process:
    return wait_until(lambda: child_named(pid, name), what=f"{name} runs")


def test_output_reaches_the_log_and_the_status_is_the_workers(tmp_path: Path) -> None:
    with relayed(tmp_path / "log", "/bin/sh", "-c", '[ -t 0 ] && [ -t 1 ] && echo "on a tty"; exit 3') as (pid, m):
        assert _status(pid, m) == 3
    assert (tmp_path / "log").read_text() == "on a tty\n"


@pytest.mark.parametrize("sig", ["TERM", "USR1", full("INT"), full("QUIT"), full("HUP"), full("USR2"),
                                  full("ALRM")])
def test_a_signal_sent_to_the_relay_is_passed_on_and_the_workers_death_is_its_status(tmp_path: Path,
                                                                                     sig: str) -> None:
    """script(1) exits 0 on TERM, INT, QUIT and USR1 whatever became of its command."""
    with relayed(tmp_path / "log", "sleep", "60") as (pid, m):
        _worker(pid, "sleep")
        os.kill(pid, getattr(signal, f"SIG{sig}"))
        assert _status(pid, m) == 128 + getattr(signal, f"SIG{sig}")


def test_a_worker_that_traps_the_signal_decides_its_status(tmp_path: Path) -> None:
    script = "trap 'echo trapped; exit 7' TERM; echo ready; while :; do sleep 0.05; done"
    with relayed(tmp_path / "log", "/bin/sh", "-c", script) as (pid, m):
        log = tmp_path / "log"
        wait_until(lambda: log.exists() and "ready" in log.read_text(), what="the trap is armed")
        os.kill(pid, signal.SIGTERM)
        assert _status(pid, m) == 7
    text = (tmp_path / "log").read_text()  # the group's sleep may be reported "Terminated" by sh
    assert text.startswith("ready\n") and text.endswith("trapped\n")


def test_a_background_process_holding_the_terminal_does_not_keep_the_relay(tmp_path: Path) -> None:
    marker = f"sleep 59.{os.getpid()}"
    with relayed(tmp_path / "log", "/bin/sh", "-c", f"({marker} &); echo last words") as (pid, m):
        try:
            assert _status(pid, m) == 0
        finally:
            subprocess.run(["pkill", "-f", marker], check=False)
    assert (tmp_path / "log").read_text() == "last words\n"


@pytest.mark.parametrize("writes", ["now and then", "without a pause"])
def test_a_background_process_that_keeps_writing_does_not_keep_the_relay(tmp_path: Path, writes: str) -> None:
    """Its output never falls silent for ``DRAIN``, and it ignores the hang-up: the drain held
    the relay, and the finished worker's end, for as long as it wrote (a Zellij task stayed
    ``running`` for ever). The drain now ends ``DRAIN_LIMIT`` after the worker's exit."""
    marker = f"chatty.{os.getpid()}"
    chatty = (f"(trap '' HUP; while :; do echo {marker}; sleep 0.02; done) &" if writes == "now and then"
              else f"(trap '' HUP; exec yes {marker}) &")
    with relayed(tmp_path / "log", "/bin/sh", "-c", f"{chatty} echo work-done; exit 0") as (pid, m):
        try:
            assert _status(pid, m) == 0
        finally:
            subprocess.run(["pkill", "-f", marker], check=False)
    assert "work-done\n" in (tmp_path / "log").read_text()


def test_a_pane_gone_hangs_up_the_workers_terminal_too(tmp_path: Path) -> None:
    """The pane closed under a worker that ignores the hang-up and writes on: on the pane's own
    terminal its writes fail, and it ends (tmux); behind the relay they went to a terminal
    that still took them, and it ran on unseen in a pane that was gone. The relay now hangs
    up the worker's terminal as soon as the pane's has: the worker's next write fails."""
    script = "trap '' HUP; echo ready; while echo tick; do sleep 0.05; done; exit 5"
    with relayed(tmp_path / "log", "/bin/sh", "-c", script) as (pid, m):
        log = tmp_path / "log"
        wait_until(lambda: log.exists() and "ready" in log.read_text(), what="the worker writes")
        _close_pane(m)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 5  # its write failed: the end it gave itself


def test_a_log_that_cannot_be_written_loses_output_never_the_worker(tmp_path: Path) -> None:
    """A full state directory (``/dev/full``: every write is ENOSPC): the relay's write to the
    log raised, the relay died, and the wrapper's ``--end`` killed the still running worker
    (SPEC §5.8: running workers go on). Its status is the worker's own now."""
    with relayed(Path("/dev/full"), "/bin/sh", "-c", "echo on; sleep 0.2; echo still on; exit 3") as (pid, m):
        assert _status(pid, m) == 3


def test_a_full_state_dir_costs_the_relay_its_records_never_its_worker(tmp_path: Path) -> None:
    """A state directory filled as a pane opened: the relay's record of its worker's session
    (``--record``) could be created there but not written, the relay died of that before its
    worker began, and the pane's generation — which ran nothing — was recorded ``unknown``,
    never run again (a soak on the real Zellij: 16 tasks in 10 rounds). The record is a link
    now, whose short target needs no room: the worker runs, its status is the relay's, and
    while it runs its record names its session."""
    needs_unshare(tmp_path)
    record, ledger = tmp_path / "state/worker-session", tmp_path / "ledger"
    worker = f'readlink {record} >> {ledger}; echo "ran $$" >> {ledger}; exit 3'
    relay = shlex.join([*PTY_RELAY, "--record", str(record), str(tmp_path / "log"), "/bin/sh", "-c", worker])
    res = in_private_mount(tmp_path, "size=64k", f"head -c 1M /dev/zero > state/filler 2>/dev/null; "
                                                 f"{relay} < /dev/null; echo \"relay $?\"; ls -A state")
    lines = ledger.read_text().splitlines() if ledger.exists() else []
    assert len(lines) == 2 and lines[1].startswith("ran "), (lines, res.stdout, res.stderr)
    pid = lines[1].split()[1]
    assert lines[0] == f"{pid} {pid}", "the record names the worker's session"
    assert res.stdout.splitlines() == ["relay 3", "filler"], res  # the worker's status; no record left


def test_keys_reach_the_worker_through_its_own_line_discipline(tmp_path: Path) -> None:
    """Text typed ahead, before the relay runs, is read by the worker (making the pane raw
    must not flush it); Ctrl-C is the worker's SIGINT (the pane is raw)."""
    with relayed(tmp_path / "log", "/bin/sh", "-c", 'read line; echo "got:$line"; exec sleep 60') as (pid, m):
        os.write(m, b"hello\r")
        _worker(pid, "sleep")
        os.write(m, b"\x03")
        assert _status(pid, m) == 128 + signal.SIGINT
    assert "got:hello\n" in (tmp_path / "log").read_text()


def test_the_inner_terminal_has_the_panes_size(tmp_path: Path) -> None:
    with relayed(tmp_path / "log", "stty", "size", rows=31, cols=97) as (pid, m):
        assert _status(pid, m) == 0
    assert (tmp_path / "log").read_text() == "31 97\n"


def test_a_worker_that_removes_the_directory_of_its_record_still_gives_its_status(tmp_path: Path) -> None:
    """The relay's record of its worker's session, in a generation's directory the worker
    removed: its status is still the worker's, not Python's 120 for an uncaught error."""
    gen = tmp_path / "gen"
    gen.mkdir()
    with relayed(tmp_path / "log", "sh", "-c", f"rm -r {gen}; exit 3", record=gen / "worker-session") as (pid, master):
        assert _status(pid, master) == 3


def test_a_command_that_cannot_run_is_127_with_a_reason(tmp_path: Path) -> None:
    with relayed(tmp_path / "log", str(tmp_path / "missing")) as (pid, m):
        assert _status(pid, m) == 127
    assert "cannot run" in (tmp_path / "log").read_text()


def test_keys_the_worker_never_reads_do_not_stop_its_output(tmp_path: Path) -> None:
    """Typing (or a paste) into a pane whose worker reads nothing fills the worker's input; the
    relay drops the rest, as a terminal does, and goes on copying output. Blocked on the
    keys, it would stop reading the output, and the worker would wait on that forever."""
    with relayed(tmp_path / "log", "/bin/sh", "-c", "stty raw -echo; sleep 0.5; seq 1 20000") as (pid, m):
        code = _status(pid, m, typing=b"x" * 4096)
    assert code == 0 and (tmp_path / "log").read_text().endswith("\n19999\n20000\n")


def test_the_inner_terminal_follows_the_pane_when_it_is_resized(tmp_path: Path) -> None:
    go = tmp_path / "go"
    with relayed(tmp_path / "log", "/bin/sh", "-c", f"while [ ! -e '{go}' ]; do sleep 0.02; done; stty size",
                 rows=24, cols=80) as (pid, m):
        _worker(pid, "sh")
        fcntl.ioctl(m, termios.TIOCSWINSZ, struct.pack("HHHH", 41, 123, 0, 0))  # the kernel sends SIGWINCH
        wait_until(lambda: _inner_size(pid) == (41, 123), what="the inner terminal is resized")
        go.touch()
        assert _status(pid, m) == 0
    assert (tmp_path / "log").read_text() == "41 123\n"


def _inner_size(pid: int) -> tuple[int, int] | None:
    """The size of the worker's terminal, read through its stdin."""
    try:
        worker = _worker(pid, "sh")
        tty = os.open(f"/proc/{worker.pid}/fd/0", os.O_RDONLY | os.O_NOCTTY)
        try:
            rows, cols, _, _ = struct.unpack("HHHH", fcntl.ioctl(tty, termios.TIOCGWINSZ, b"\0" * 8))
        finally:
            os.close(tty)
        return rows, cols
    except (OSError, psutil.NoSuchProcess):
        return None


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM])
def test_a_signal_that_comes_while_the_worker_is_being_started_still_ends_it(tmp_path: Path, sig) -> None:
    """A pane closed the moment it opened: the relay gets the hang-up while it forks its
    worker (before its pid is known, or before the worker has its own session). The worker
    must die of it, not run on to the end. The signal is sent at once, and then after each
    step of a short start-up, so that one of them lands in that window."""
    for attempt in range(8):
        with relayed(tmp_path / f"log{attempt}", "sh", "-c", "sleep 5") as (pid, master):
            wait_until(lambda: _catches(pid, sig), interval=0, what="the relay's handler")  # the fork is next
            for _ in range(attempt):  # a few more steps of its start-up
                os.sched_yield()
            os.kill(pid, sig)
            drain = os.fork()
            if drain == 0:  # read the outer terminal so the relay never blocks writing to it
                with contextlib.suppress(OSError):
                    while os.read(master, 4096):
                        pass
                os._exit(0)
            try:
                _, status = os.waitpid(pid, 0)
            finally:
                os.kill(drain, signal.SIGKILL)
                os.waitpid(drain, 0)
            assert os.waitstatus_to_exitcode(status) in (128 + sig, -sig), f"attempt {attempt}: {status}"


def _catches(pid: int, sig: signal.Signals) -> bool:
    """Whether ``pid`` has a handler for ``sig`` (its /proc status's SigCgt mask)."""
    with open(f"/proc/{pid}/status") as f:
        caught = next(int(line.split()[1], 16) for line in f if line.startswith("SigCgt:"))
    return bool(caught >> (sig - 1) & 1)


def test_a_pane_closed_as_the_relay_starts_runs_nothing_and_ends_by_the_hang_up(tmp_path, monkeypatch):
    """The pane's terminal hung up before the relay read its settings: that error went
    uncaught, and Python exited 120 (its traceback unwritable on the dead pane) — recorded as
    the worker's own failure, not the closed pane it was (a real-Zellij test, once, in CI)."""
    import errno
    import signal
    import termios

    from zellij_swarm.worker import _ptyrelay

    def hung_up(_fd):
        raise termios.error(errno.EIO, "Input/output error")

    monkeypatch.setattr(_ptyrelay.os, "isatty", lambda _fd: True)
    monkeypatch.setattr(_ptyrelay.termios, "tcgetattr", hung_up)
    ran = tmp_path / "ran"
    assert _ptyrelay.main([str(tmp_path / "log"), "touch", str(ran)]) == 128 + signal.SIGHUP
    assert not ran.exists()


_HANG_UP_AFTER_START = """
import os, sys, termios, time
sys.path.insert(0, {relay_dir!r})
import _ptyrelay

started = _ptyrelay.start

def start(*args):
    got = started(*args)  # the worker runs; the relay has not made the pane raw yet
    os.write({told}, b"started")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:  # until the test has closed the pane
        try:
            termios.tcgetattr(0)
        except termios.error:
            break
        time.sleep(0.01)
    return got

_ptyrelay.start = start
os._exit(_ptyrelay.main(sys.argv[1:]))
"""


def test_a_pane_closed_while_the_worker_starts_ends_it_by_the_hang_up(tmp_path: Path) -> None:
    """The pane hung up after the relay read its settings and started the worker, before it
    made the pane raw: that ``tcsetattr`` failed uncaught, Python exited 120 on the dead pane,
    and the worker ran on, orphaned; the task was recorded ``failed (exit 120)`` where the
    pane had been closed (the fake Zellij 0.44.3, in CI under load). The worker dies of the
    hang-up and its death is the status."""
    told_r, told_w = os.pipe()
    script = tmp_path / "relay.py"
    script.write_text(_HANG_UP_AFTER_START.format(relay_dir=str(Path(_ptyrelay.__file__).parent), told=told_w))
    pid, master = pty.fork()
    if pid == 0:
        try:
            os.close(told_r)
            os.set_inheritable(told_w, True)
            os.execv(PTY_RELAY[0], [PTY_RELAY[0], "-I", "-S", str(script), str(tmp_path / "log"),
                                    "sh", "-c", f"echo $$ > {tmp_path}/worker; exec sleep 30"])
        finally:
            os._exit(127)
    os.close(told_w)
    worker = None
    try:
        assert os.read(told_r, 16) == b"started"
        worker = int(wait_until(lambda: (tmp_path / "worker").exists() and (tmp_path / "worker").read_text().strip(),
                                what="the worker's pid"))
        os.close(master)  # the pane closes: its terminal hangs up
        master = -1
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 128 + signal.SIGHUP
        assert not psutil.pid_exists(worker)
    finally:
        os.close(told_r)
        if master >= 0:
            os.close(master)
        for stray in (pid, worker):
            with contextlib.suppress(ProcessLookupError, TypeError, ChildProcessError):
                os.kill(stray, signal.SIGKILL)  # type: ignore[arg-type]
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
