"""A worker on a terminal of its own, its output logged: how a Zellij pane runs its worker
(Zellij has nothing like tmux's ``pipe-pane``).

Run as ``python -I -S _ptyrelay.py [--record FILE] [--ended FILE] LOG CMD…``: stdlib only, no
site, started in a few ms.

CMD runs as the session leader of a new pty, so it sees a TTY. What it writes is copied to
this process's stdout (the pane) and appended to LOG, with the terminal's CRLF turned back
into LF. Keystrokes on our stdin go to it, our own terminal in raw mode so that the pty's
line discipline (Ctrl-C included) is the only one that applies; the inner terminal starts
with the pane's settings and follows its size.

The exit status is CMD's, exactly: its code, or 128+N for a death by signal N. That is why
this replaces ``script -qfec``, which exits 0 when it is itself sent TERM, INT, QUIT or USR1
(and 134 on ALRM), whatever became of its command. A signal aimed at the worker that reaches
the relay — ``kill -SIG -- -PGID`` of the pane's group, ``scancel --signal`` of a step, the
pane leader passing on a hang-up — is passed on to CMD's process group, and the relay waits:
the worker's fate is the record.

With ``--ended FILE``, the relay creates FILE the moment CMD has exited: its time is the
worker's end, which the drain below may precede by up to ``DRAIN_LIMIT`` — the wrapper's
record of the exit comes after it, and a kill (a time limit, a cancel) that reached only a
background process meanwhile must not read as the worker's end.

Once CMD has exited, what it left in the pty is drained and the relay exits, even while a
background process still holds the terminal (the kernel hangs it up: its session leader is
gone); the drain ends at the pty's end of file, after ``DRAIN`` seconds without output, or
``DRAIN_LIMIT`` seconds after CMD's exit, whatever a background process still writes.

When the pane's own terminal has hung up (a write to it fails: the pane closed), the relay
hangs up CMD's terminal too, by closing its side, and waits for CMD: what the worker sees is
then what a worker on the pane's terminal sees — its writes fail, and a worker that ignores
the hang-up but writes cannot run on unseen in a pane that is gone.

A relay killed outright (SIGKILL, the OOM killer) cannot pass anything on, and its worker, a
session leader on a terminal of its own, may ignore the hang-up the terminal's end sends it:
it would run on unrecorded while its slot runs the next task. So with ``--record FILE`` the
relay writes the worker's pid and session to FILE before the worker starts (the forked child
waits for it) — a link whose target holds them, which a full disk still takes
(``write_record``) — and removes FILE once it has the worker's status. FILE left behind means the
relay died first: ``_ptyrelay.py --end FILE ENDED``, which the wrapper runs before it
records the exit, kills every process of that session, and every process they started
(one that ``setsid``s is the worker's work too), and waits until they are gone — and
says the worker's code when the relay had marked its end (``--ended``): a relay killed in its
drain is no death of the worker's. A session's id is
never reused while a process of it lives, so nothing else is killed.
"""

from __future__ import annotations

import errno
import fcntl
import os
import select
import signal
import sys
import termios
import time

if __package__:
    from zellij_swarm.worker._kernel import shell_code, stat_fields
    from zellij_swarm.worker._paneleader import handled, worker_defaults
else:  # run as a script under -I, which keeps the script's own directory off sys.path
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _kernel import shell_code, stat_fields  # type: ignore[import-not-found,no-redef]
    from _paneleader import handled, worker_defaults  # type: ignore[import-not-found,no-redef]

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs 20 ms of the relay's start
    from typing import Any

DRAIN = 0.2  # seconds of silence after the worker's exit before a held-open pty is given up
DRAIN_LIMIT = 2.0  # seconds after the worker's exit the drain lasts at most: a background
# process that keeps writing (and ignores the hang-up) would hold it, and the worker's end, for
# ever; what the worker itself left is at most the pty's buffer, copied in far less
CHUNK = 65536
END_WAIT = 10.0  # seconds ``--end`` waits for a killed session's processes to be gone


class Log:
    """LOG, appended to as output arrives, with CRLF as LF. A ``\\r`` that ends one chunk is
    held until the next shows whether it was half of a CRLF split between two reads."""

    def __init__(self, path: str) -> None:
        try:
            self.fd: int | None = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError:
            self.fd = None
        self.held = b""

    def write(self, chunk: bytes) -> None:
        data, self.held = self.held + chunk, b""
        if data.endswith(b"\r"):
            data, self.held = data[:-1], b"\r"
        self._append(data.replace(b"\r\n", b"\n"))

    def close(self) -> None:
        self._append(self.held)
        if self.fd is not None:
            os.close(self.fd)

    def _append(self, data: bytes) -> None:
        """A full disk, or a log that cannot be had, loses from the log what it cannot hold —
        never the worker (SPEC §5.8: running workers go on): the pane still shows it all, and
        the log takes what comes once there is room again. (Uncaught, ENOSPC ended the relay,
        and the wrapper's ``--end`` then killed the worker.)"""
        if self.fd is None:
            return
        try:
            write_all(self.fd, data)
        except OSError:
            pass


# What the relay passes on to its worker's group: every signal that ends a process by default
# but a fault (``handled``) — the relay sits in the pane's process group, the worker in a
# session of its own: a ``kill -PROF -- -PGID`` of the pane's group ended a relay that took
# only the worker signals, and its ``--end`` then killed a worker the signal never reached
# (recorded ``failed (SIGPROF)``, and retried).
RELAYED = handled()


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def start(argv: list[str], outer: list[Any] | None, size: bytes | None,
          record: str | None) -> tuple[int, int, set[int]]:
    """Fork CMD on a new pty: (its pid, the master's fd, the signal mask to restore once the
    pid is known — the worker's signals are blocked until then). With ``record``, CMD starts
    only once its pid and session are in that file; a relay killed before then starts nothing."""
    master, slave = os.openpty()
    if outer is not None:
        termios.tcsetattr(slave, termios.TCSANOW, outer)
    if size is not None:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, size)
    go_r, go_w = os.pipe()
    # A signal aimed at the worker while it is being started (the pane closed at once) must
    # not be lost: blocked across the fork, then the parent's handler passes it on to the
    # child, which holds it, at its default, until it execs — and dies of it then.
    held = signal.pthread_sigmask(signal.SIG_BLOCK, RELAYED)
    pid = os.fork()
    if pid == 0:
        try:
            for signum in RELAYED:
                signal.signal(signum, signal.SIG_DFL)
            os.close(master)
            os.close(go_w)
            os.login_tty(slave)  # a session of its own: its id is this pid
            if os.read(go_r, 1) != b"1":
                os._exit(127)  # the relay is gone
            os.close(go_r)
            worker_defaults()
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
            os.execvp(argv[0], argv)
        except OSError as e:
            os.write(2, f"zellij-swarm: cannot run {argv[0]}: {e.strerror}\n".encode())
        finally:
            os._exit(127)
    os.close(slave)
    os.close(go_r)
    if record is not None:
        write_record(record, pid)
    os.write(go_w, b"1")
    os.close(go_w)
    return pid, master, held


def write_record(record: str, worker: int) -> None:
    """The record of the worker's session (its pid: it leads the session) for ``--end``: a
    symbolic link whose target holds it, made whole at once. So short a target lives in the
    link's inode (ext4, tmpfs), so no data block is needed: a state directory filled while
    the pane opened still takes it — a file made there stays empty, and the relay died of
    that before its worker began, recorded ``unknown`` as if it had run (a real Zellij, a
    soak, 16 tasks in 10 rounds). Failing that, a file, as before; failing both, the worker
    runs without a record — a full disk costs records, never the worker (SPEC §5.8) — and
    only a relay then killed outright would leave it unended."""
    text = f"{worker} {worker}"
    try:
        os.symlink(text, record)
        return
    except OSError:
        pass
    draft = f"{record}.draft"
    try:
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            write_all(fd, f"{text}\n".encode())
        finally:
            os.close(fd)
        os.rename(draft, record)
    except OSError:
        try:
            os.unlink(draft)
        except OSError:
            pass


def read_record(record: str) -> bytes | None:
    """What ``write_record`` left at ``record`` (a link's target, or a file's text: a relay of
    an earlier version, or a filesystem without links); None when there is none. A link is
    read, never followed."""
    try:
        return os.fsencode(os.readlink(record))
    except FileNotFoundError:
        return None
    except OSError:  # EINVAL: no link
        pass
    try:
        with open(record, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def end_session(record: str, ended: str | None = None) -> None:
    """``--end`` (``end_worker_session``), the worker's code printed when it is known."""
    code = end_worker_session(record, ended)
    if code is not None:
        write_all(1, b"%d\n" % code)  # (the relay exits by ``os._exit``: nothing buffered)


def end_worker_session(record: str, ended: str | None = None) -> int | None:
    """``--end``: kill every process of the session ``record`` names and what they started
    (``worker_processes``), wait (up to
    ``END_WAIT``) until none runs, then remove the record — and print the worker's code when
    the relay had reaped it (``worker_code``): the relay was killed while it drained its
    terminal, and its own death is not the worker's (a Zellij pane's worker that exited 0 was
    recorded 137 and ran again)."""
    try:
        text = read_record(record)
        if text is None:
            return None
        session = int(text.split()[1])
    except (OSError, ValueError, IndexError):
        session = 0  # garbled: nothing is known to end
    code = worker_code(ended) if ended is not None else None
    deadline = time.monotonic() + END_WAIT
    known: dict[int, bytes] = {}
    while session > 1:
        alive = worker_processes(session, known)
        if not alive or time.monotonic() > deadline:
            break
        # Stopped first, so that none forks a process the kill would miss (a child that
        # setsid()s, orphaned by its parent's death, leaves the tree): stopped until the
        # tree is whole, then killed all at once.
        while True:
            _signal(alive, signal.SIGSTOP)
            more = [pid for pid in worker_processes(session, known) if pid not in alive]
            if not more:
                break
            alive += more
        _signal(alive, signal.SIGKILL)
        time.sleep(0.01)
    os.unlink(record)
    return code


def worker_processes(session: int, known: dict[int, bytes]) -> list[int]:
    """The live processes of the worker's ``session`` and every process they started, in
    whatever session it is now (``setsid``: a worker's work is its work wherever it runs),
    and those ``known`` from an earlier look (pid: start time, so a reused pid is not one),
    which an ancestor's death may have cut from the tree. Each found is added to ``known``."""
    procs: dict[int, list[bytes]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (fields := stat_fields(name)) is not None and fields[0] != b"Z":
            procs[int(name)] = fields
    found = {pid for pid, fields in procs.items() if int(fields[3]) == session}
    found |= {pid for pid, start in known.items() if pid in procs and procs[pid][19] == start}
    started: dict[int, list[int]] = {}
    for pid, fields in procs.items():
        started.setdefault(int(fields[1]), []).append(pid)
    todo = list(found)
    while todo:
        for child in started.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    found.discard(os.getpid())
    for pid in found:
        known[pid] = procs[pid][19]
    return sorted(found)


def _signal(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def worker_code(ended: str) -> int | None:
    """The worker's code, as its relay marked it having reaped it (``ended``): None when it
    did not (the relay was killed before). Not a zombie's, read from the kernel: the relay's
    death hangs the worker's terminal up, and a worker that ended by that, in the moment
    before ``--end`` looks — one that exits 0 on SIGHUP — was cut short (an adversary's, 4 in
    4, recorded ``succeeded``); nor does a process's state say that it ended (a main thread
    that exited shows Z while its other threads run). So a relay killed in the moment
    between its worker's exit and its wait is the worker's death, as before."""
    try:
        fd = os.open(ended, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            code = os.read(fd, 16).strip()
        finally:
            os.close(fd)
    except OSError:
        return None
    return int(code) if code.isdigit() else None


def mark_ended(path: str, code: int) -> None:
    """A worker's end, as a file's time, and its code in it (a full disk, or its directory
    gone, leaves none: the wrapper's record of the exit then stands alone)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return
    try:
        os.write(fd, b"%d\n" % code)
    except OSError:
        pass
    finally:
        os.close(fd)


def relay(master: int, child: int, log: Log, stdin_open: bool, ended: str | None = None) -> int:
    """Copy both ways until CMD has exited and its output is drained: CMD's wait status.
    ``ended`` is created as CMD's exit is seen."""
    wake_r, wake_w = os.pipe()
    # Never blocked on the worker's input: keys typed while it reads nothing would stop its
    # output from being copied, and it would wait on that output forever.
    for fd in (wake_r, wake_w, master):
        os.set_blocking(fd, False)
    signal.set_wakeup_fd(wake_w)
    screen = True  # the pane's terminal still takes output
    status: int | None = None
    quiet_until = given_up_at = 0.0
    while True:
        if status is None:
            pid, st = os.waitpid(child, os.WNOHANG)
            if pid:
                status, quiet_until = st, time.monotonic() + DRAIN
                given_up_at = time.monotonic() + DRAIN_LIMIT
                if ended is not None:  # should the relay be killed in its drain: ``end_session``
                    mark_ended(ended, shell_code(st))
        watched = [master, wake_r] + ([0] if stdin_open else [])
        timeout = None if status is None else max(0.0, min(quiet_until, given_up_at) - time.monotonic())
        ready = select.select(watched, [], [], timeout)[0]
        if status is not None and (not ready or time.monotonic() >= given_up_at):
            return status
        if wake_r in ready:
            try:
                os.read(wake_r, CHUNK)
            except BlockingIOError:
                pass
        if 0 in ready:
            try:
                keys = os.read(0, CHUNK)
            except OSError:
                keys = b""
            if keys:
                try:
                    write_all(master, keys)
                except OSError:  # full (the worker reads nothing): dropped, as a terminal does
                    pass
            else:
                stdin_open = False
        if master in ready:
            try:
                data = os.read(master, CHUNK)
            except BlockingIOError:
                continue
            except OSError as e:  # EIO: every process has closed the terminal
                if e.errno != errno.EIO:
                    raise
                data = b""
            if not data:
                return status if status is not None else _reaped(child, ended)
            log.write(data)
            if screen:
                try:
                    write_all(1, data)
                except OSError as e:
                    if e.errno == errno.EIO:  # the pane's terminal hung up: so does the worker's
                        os.close(master)
                        signal.set_wakeup_fd(-1)  # nothing reads it any more
                        return status if status is not None else _reaped(child, ended)
                    screen = False
            if status is not None:
                quiet_until = time.monotonic() + DRAIN


def _reaped(child: int, ended: str | None) -> int:
    """Wait for CMD, whose terminal is gone, and mark its end: its wait status."""
    status = os.waitpid(child, 0)[1]
    if ended is not None:
        mark_ended(ended, shell_code(status))
    return status


def raw(attrs: list[Any]) -> list[Any]:
    """``attrs`` made raw, as cfmakeraw(3) does."""
    mode = list(attrs)
    mode[0] &= ~(termios.IGNBRK | termios.BRKINT | termios.PARMRK | termios.ISTRIP | termios.INLCR
                 | termios.IGNCR | termios.ICRNL | termios.IXON)
    mode[1] &= ~termios.OPOST
    mode[2] = (mode[2] & ~(termios.CSIZE | termios.PARENB)) | termios.CS8
    mode[3] &= ~(termios.ECHO | termios.ECHONL | termios.ICANON | termios.ISIG | termios.IEXTEN)
    mode[6] = list(mode[6])
    mode[6][termios.VMIN], mode[6][termios.VTIME] = 1, 0
    return mode


def main(argv: list[str]) -> int:
    if argv[:1] == ["--end"] and len(argv) in (2, 3):
        end_session(*argv[1:])
        return 0
    record = ended = None
    if argv[:1] == ["--record"]:
        record, argv = argv[1], argv[2:]
    if argv[:1] == ["--ended"]:
        ended, argv = argv[1], argv[2:]
    if len(argv) < 2:
        sys.stderr.write("usage: _ptyrelay.py [--record FILE] [--ended FILE] LOG CMD... | "
                         "_ptyrelay.py --end FILE [ENDED]\n")
        return 2
    log = Log(argv[0])
    on_tty = os.isatty(0)
    try:
        outer = termios.tcgetattr(0) if on_tty else None
        size = fcntl.ioctl(0, termios.TIOCGWINSZ, b"\0" * 8) if on_tty else None
    except (termios.error, OSError):
        # The pane's terminal hung up as the relay started (the pane was closed at once):
        # nothing runs, and the end is the hang-up's, as the worker's would have been. (An
        # uncaught error here was exit 120: Python's, its traceback unwritable on a dead pane.)
        log.close()
        return 128 + signal.SIGHUP
    child = 0
    early: list[int] = []  # signals that came before the worker was forked: passed on once it is

    def forward(signum: int, _frame: object) -> None:
        if not child:  # 0 until forked
            early.append(signum)
            return
        try:
            os.killpg(child, signum)
        except OSError:  # its own session not made yet: it holds the signal until its exec
            try:
                os.kill(child, signum)
            except OSError:
                pass

    def resize(_signum: int, _frame: object) -> None:
        try:
            fcntl.ioctl(master, termios.TIOCSWINSZ, fcntl.ioctl(0, termios.TIOCGWINSZ, b"\0" * 8))
        except OSError:
            pass

    for signum in RELAYED:
        signal.signal(signum, forward)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so the wakeup fd sees it
    child, master, held = start(argv[1:], outer, size, record)
    signal.pthread_sigmask(signal.SIG_SETMASK, held)  # what came meanwhile is passed on now
    for signum in early:
        forward(signum, None)
    if outer is not None:
        signal.signal(signal.SIGWINCH, resize)
        try:
            termios.tcsetattr(0, termios.TCSANOW, raw(outer))  # not FLUSH: keys typed ahead are the worker's
        except termios.error:
            # The pane hung up since its settings were read, its worker already started: the
            # hang-up is passed on to the worker, whose death is the status, as at any later
            # moment. (Uncaught, this was exit 120 with the worker orphaned.)
            outer = None
    try:
        status = relay(master, child, log, stdin_open=on_tty, ended=ended)
    finally:
        if outer is not None:
            try:
                termios.tcsetattr(0, termios.TCSANOW, outer)  # never waits on a pane nobody reads
            except termios.error:
                pass
        log.close()
    if record is not None:
        try:
            os.unlink(record)  # the worker's status is known: nothing of it is left to end
        except FileNotFoundError:  # its directory removed by the worker: the status still is its
            pass
    return shell_code(status)


if __name__ == "__main__":
    # Exit with the worker's status, not the interpreter's: flushing the standard streams at
    # exit on a pane that is gone fails, and Python then exits 120 (seen with a Zellij server
    # SIGKILLed under its panes).
    status = main(sys.argv[1:])
    os._exit(status)
