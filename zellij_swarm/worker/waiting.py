"""Is a live pane worker waiting for input on its terminal?

A worker in a pane has a real TTY; when it stops to ask something, the run view shows it as
``waiting for input``. The question is put to the kernel, not to the worker's output:

*What is judged.* The terminal's foreground process group (``tpgid`` of ``/proc/PID/stat``), the
processes the terminal's input goes to. In a tmux pane that group is the pane leader, the
wrapper shell and the worker (the wrapper is a non-interactive ``sh``: no job control, so the
worker stays in its group); an interactive worker that runs its own jobs moves the
foreground, and it is followed. The pane leader and the wrapper shell wait in ``wait4``, never
on the terminal, so they need no exclusion by name (a name rule would also hide a worker that
is itself ``sh`` or ``python``).

*Relays.* In a Zellij pane the worker runs under the pty relay (``_ptyrelay``; ``script``
is the same shape), which always polls the pane's terminal (and its own pty) to copy bytes
both ways: judged as it is, every worker would look like it is polling. A relay is
recognised by its shape, not its name: a member of the foreground group with a child that
leads a session of its own on another terminal. Then that inner terminal is judged instead,
recursively (a relay inside a relay), and the relay is not. The innermost terminal is the
one the worker reads.

*Finding the group's processes.* There is no index of processes by group: the kernel's
``/proc/PID/task/TID/children`` would give the descendants, but it needs
``CONFIG_PROC_CHILDREN``, which the test machine's kernel lacks. So ``scan_procs`` reads every
``/proc/*/stat`` once (measured here: ~1.2 ms for ~95 processes, ~12 µs a process); a caller
judging several panes in one tick scans once and passes the table to each ``tty_wait``. A
process that starts after the scan is seen at the next call. Members must be in the
terminal's session (the kernel's own rule for a foreground group), which keeps a stale
``tpgid`` from matching an unrelated group that reuses the id.

*Per process.* Every thread is judged (a Go or JVM program reads stdin in a thread of its
own), from ``/proc/PID/task/TID/syscall``: the syscall it is blocked in and its arguments.

- ``read``/``readv``/``pread64``/``preadv``/``preadv2`` on an fd that is the terminal:
  READING, certain (``sh`` ``read``, Python's ``input()`` without readline).
- ``poll``/``ppoll``: the ``pollfd`` array is read from ``/proc/PID/mem``;
  ``select``/``pselect6``: the read ``fd_set``; ``epoll_wait``/``epoll_pwait``/``epoll_pwait2``:
  the ``tfd:`` lines of ``/proc/PID/fdinfo/EPFD`` (exact, nested epoll sets followed). If
  the terminal is in the set, for reading, the rest of the set decides. Only the terminal,
  or the terminal with descriptors only the process itself can make ready (timerfd,
  eventfd, signalfd, inotify, files): POLLING — a readline prompt, a curses program waiting
  for a key with a timeout to repaint its clock. The terminal among sockets or pipes:
  SHARED — something else may end the wait first, and an agent CLI on Node keeps the
  terminal and its connections to the model in one epoll set whether it waits for the model
  or for the person; ``waiting_input`` asks for more (silence, or a prompt on its screen).
  If the memory cannot be read, a process that has the terminal on fd 0–2 and polls counts
  as SHARED.
- ``running``, any other syscall, or a set without the terminal: BUSY. So is a stopped
  process, and a poll restarted after a signal (``restart_syscall`` hides its arguments; the
  next look, 0.5 s later, sees the poll again).

*The input queue* needs no look of its own: a process cannot stay blocked on a terminal that
holds input for it. A read takes what has arrived (a non-canonical read waiting for more than
one byte has already copied the first), and a poll reports the terminal readable as soon as a
whole line (canonical mode) or a byte (raw mode) is there; a half-typed line is not input yet.

An fd is the terminal when ``stat`` of ``/proc/PID/task/TID/fd/N`` is a character device
with the ``tty_nr`` device number, or is ``/dev/tty`` (5, 0) of a process on that terminal.

Several members: any READING makes the group READING, else any POLLING makes it POLLING,
else any SHARED makes it SHARED, else a member that could not be read makes it UNKNOWN, else
BUSY.

*UNKNOWN* — cannot be known: the process is gone or has no terminal, no member of the
foreground group is found, the architecture is not x86_64 or aarch64 (the syscall numbers
differ; a 32-bit program on x86_64 reports i386 numbers and is misjudged — none is expected),
or ``/proc/PID/syscall`` cannot be read. That file needs ptrace access
(``PTRACE_MODE_ATTACH``): the supervisor runs as the workers' user, which is enough unless
Yama's ``kernel.yama.ptrace_scope`` is 1 or more (then only ancestors, or root, may read it; the
supervisor is not the pane's ancestor — the multiplexer server is). Here it runs as root and
the sysctl is absent. ``/proc/PID/mem`` needs as much as ``syscall`` does.

*Without the syscall file* (refused: Yama, the default on Ubuntu and Debian), what a
thread waits in is read from ``/proc/PID/task/TID/wchan`` and its open files (``fd/``,
``fdinfo/``), which need only ptrace *read* access, which Yama leaves to the same user
(``_by_wchan``): blocked in ``do_epoll_wait`` — the process's epoll sets are read as above;
in ``poll_schedule_timeout`` (poll, select) — POLLING when it has the terminal open and no
socket or pipe at all (the set can hold nothing else another process could make ready),
UNKNOWN otherwise; in ``wait_woken`` (a terminal's read, but a TCP socket's too) — READING
when it has the terminal open and no socket; anywhere else — BUSY. A kernel without symbols
says ``0``: UNKNOWN.
A worker that made itself non-dumpable (``prctl(PR_SET_DUMPABLE, 0)``, as setuid programs
are) closes them to any user but root. ``syscall_evidence`` says which of these holds, for
``doctor`` and the task's record: without it, only the worker's screen (``worker.prompts``)
and its own heartbeat line tell that it waits.

Failures are data: nothing here raises for a process that vanished or a file that could not
be read.
"""

from __future__ import annotations

import enum
import errno
import os
import platform
import stat
import struct
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

QUIET_AFTER = 3.0  # seconds of silent output before a SHARED worker counts as waiting
PROC = Path("/proc")


class TtyWait(enum.Enum):
    """What the terminal's foreground job is doing."""

    READING = "reading"  # blocked in read(2)/readv/pread on the tty: certainly waiting
    POLLING = "polling"  # in poll/select/epoll on the tty, with nothing in the set another process could wake
    SHARED = "shared"  # in poll/select/epoll on the tty among sockets or pipes: a peer may answer first
    BUSY = "busy"  # running, sleeping on something else, or polling a set without the tty
    UNKNOWN = "unknown"  # cannot be known: see the module docstring


def waiting_input(wait: TtyWait, *, silent_for: float, prompt: bool = False,
                  quiet_after: float = QUIET_AFTER) -> bool | None:
    """Whether to show the worker as waiting for input. The kernel's word weighs most: a
    blocking read of the terminal, or a poll on it that nothing but the person can end, is
    waiting however the screen repaints meanwhile (a curses clock); a process busy elsewhere
    is not, whatever its screen says. A poll on the terminal among sockets or pipes (an agent
    that may be waiting for its model) is waiting when its screen shows a prompt (``prompt``:
    ``worker.prompts``) or its output has been quiet for ``quiet_after`` seconds (default 3 s;
    a spinner keeps it from that). Without the kernel's word, the prompt alone decides; None
    when nothing can be known."""
    if wait in (TtyWait.READING, TtyWait.POLLING):
        return True
    if wait is TtyWait.SHARED:
        return prompt or silent_for >= quiet_after
    if wait is TtyWait.BUSY:
        return False
    return True if prompt else None


def syscall_evidence(pid: int, proc: Path = PROC) -> str | None:
    """Why the kernel will not say what ``pid`` waits in (None: it will): what ``doctor``
    prints and a task's record keeps, so that an unmarked worker is not read as a busy one."""
    if platform.machine() not in _SYSCALLS:
        return f"the syscall numbers of {platform.machine()} are not known here"
    try:
        _read(f"{proc}/{pid}/syscall")
    except OSError as e:
        if e.errno in (errno.EACCES, errno.EPERM):
            scope = _ptrace_scope(proc)
            return ("/proc/PID/syscall is closed to this user (ptrace access" +
                    (f"; kernel.yama.ptrace_scope is {scope})" if scope not in (None, "0") else ")"))
        return None  # gone: nothing to say about the others
    return None


def evidence_here(proc: Path = PROC) -> str | None:
    """Why a supervisor run by this user cannot read the syscall a pane's worker waits in
    (None: it can, for workers of its own user that stay dumpable; when it cannot, ``wchan``
    and the open files still tell most) — ``doctor``'s answer, before a run.
    The supervisor is not the pane's ancestor (the multiplexer's server is), so Yama's
    ptrace_scope 1 ("only descendants") already closes it; root is let through by every scope
    but 3."""
    if platform.machine() not in _SYSCALLS:
        return f"the syscall numbers of {platform.machine()} are not known here"
    scope = _ptrace_scope(proc)
    if scope is not None and scope != "0" and (os.geteuid() != 0 or scope == "3"):
        return f"kernel.yama.ptrace_scope is {scope}: /proc/PID/syscall of a pane's worker is closed to this user"
    return None


def _ptrace_scope(proc: Path) -> str | None:
    try:
        return _read(f"{proc}/sys/kernel/yama/ptrace_scope").decode().strip()
    except OSError:
        return None


@dataclass(slots=True)
class _Watched:
    """What a poll, select or epoll set waits on, as far as the verdict goes."""

    tty: bool  # the terminal is in it
    peers: bool  # a socket or pipe in it, for reading


@dataclass(frozen=True, slots=True)
class ProcStat:
    """The fields of ``/proc/PID/stat`` this module uses, and ``procs`` (its process trees
    and the sessions ended wrappers left)."""

    state: str
    ppid: int
    pgrp: int
    session: int
    tty: int  # tty_nr: the controlling terminal's device number, 0 for none
    tpgid: int  # the controlling terminal's foreground process group, -1 for none


@dataclass(frozen=True)
class _Syscalls:
    reads: frozenset[int]
    polls: frozenset[int]  # (struct pollfd *, nfds, ...)
    selects: frozenset[int]  # (nfds, fd_set *readfds, ...)
    epolls: frozenset[int]  # (epfd, ...)


_SYSCALLS: dict[str, _Syscalls] = {
    # arch/x86/entry/syscalls/syscall_64.tbl
    "x86_64": _Syscalls(reads=frozenset({0, 17, 19, 295, 327}), polls=frozenset({7, 271}),
                        selects=frozenset({23, 270}), epolls=frozenset({232, 281, 441})),
    # include/uapi/asm-generic/unistd.h: no poll, select or epoll_wait, only their p- forms
    "aarch64": _Syscalls(reads=frozenset({63, 65, 67, 69, 286}), polls=frozenset({73}),
                         selects=frozenset({72}), epolls=frozenset({22, 441})),
}
_SYSCALLS["arm64"] = _SYSCALLS["aarch64"]

_DEV_TTY = os.makedev(5, 0)  # /dev/tty: "my controlling terminal"
_POLL_READ = 0x001 | 0x002 | 0x040  # POLLIN | POLLPRI | POLLRDNORM
_EPOLL_READ = 0x001 | 0x002 | 0x040  # EPOLLIN | EPOLLPRI | EPOLLRDNORM
_POLLFD = struct.Struct("ihh")  # int fd; short events; short revents
_MAX_POLLFDS = 4096  # a larger set is judged by its first entries
_MAX_NESTING = 3  # relays inside relays, epoll sets inside epoll sets
_GONE = (errno.ENOENT, errno.ESRCH)
# Where a thread sleeps, as /proc/PID/task/TID/wchan names it (suffixes such as .constprop.0 cut)
_WCHAN_EPOLLS = frozenset({"do_epoll_wait", "ep_poll"})
_WCHAN_POLLS = frozenset({"poll_schedule_timeout", "do_sys_poll", "do_select", "core_sys_select"})
_WCHAN_READS = frozenset({"wait_woken", "n_tty_read"})  # a terminal's read (and a TCP socket's)


def _read(path: str, size: int = 4096) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, size)
    finally:
        os.close(fd)


def _parse_stat(data: bytes) -> ProcStat | None:
    # The command name (field 2) may hold spaces and parentheses: split after the last ")".
    fields = data.rpartition(b")")[2].split(maxsplit=7)
    try:
        return ProcStat(fields[0].decode(), *(int(f) for f in fields[1:6]))
    except (IndexError, ValueError):
        return None


def read_stat(pid: int, proc: Path = PROC) -> ProcStat | None:
    try:
        return _parse_stat(_read(f"{proc}/{pid}/stat"))
    except OSError:
        return None


def scan_procs(proc: Path = PROC) -> dict[int, ProcStat]:
    """Every process's stat, read once: what ``tty_wait`` finds the foreground group in."""
    table: dict[int, ProcStat] = {}
    try:
        entries = os.listdir(proc)
    except OSError:
        return table
    for name in entries:
        if name.isdigit() and (st := read_stat(int(name), proc)) is not None:
            table[int(name)] = st
    return table


@dataclass(frozen=True, slots=True)
class Look:
    """A verdict, and why the kernel would not show a syscall (``syscall_evidence``'s words)
    when a process's could not be read for lack of access: the verdict is then ``wchan``'s,
    or UNKNOWN."""

    wait: TtyWait
    closed: str | None = None


def tty_wait(pid: int, *, proc: Path = PROC, procs: Mapping[int, ProcStat] | None = None) -> TtyWait:
    """What the foreground job of ``pid``'s terminal is doing. ``pid``: any process on the
    terminal (the supervisor passes the pane leader's). ``procs``: a ``scan_procs`` table to
    share between the panes of one tick; scanned here when not given. ``proc``: the /proc
    to read (tests point it elsewhere)."""
    return look(pid, proc=proc, procs=procs).wait


def waits_now(pid: int, *, proc: Path = PROC) -> bool | None:
    """Whether the worker on ``pid``'s terminal waits for input now, as far as the kernel
    alone says — for a reader with no supervisor's watch (no screen, no silence measured): a
    read of the terminal, or a poll of it alone, waits; busy elsewhere, not; a poll among
    sockets or pipes, or what cannot be seen: None."""
    return {TtyWait.READING: True, TtyWait.POLLING: True, TtyWait.BUSY: False}.get(tty_wait(pid, proc=proc))


def with_no_supervisor(said: bool | None, *, in_pane: bool, pid: int | None) -> bool | None:
    """Whether a running worker of a run with no supervisor waits for input, its supervisor
    having last said ``said``: one it saw waiting in a pane may have been answered since —
    the kernel is asked again (``waits_now``); one that said itself that it waits (its
    heartbeat) is taken at its word; one it did not see waiting, or whose wrapper (``pid``)
    is not known, may wait since with nothing watching: unknown."""
    if not said or pid is None:
        return None
    return waits_now(pid) if in_pane else said


def look(pid: int, *, proc: Path = PROC, procs: Mapping[int, ProcStat] | None = None) -> Look:
    """``tty_wait``, with why it is UNKNOWN when access was refused."""
    calls = _SYSCALLS.get(platform.machine())
    top = read_stat(pid, proc)
    if calls is None:
        return Look(TtyWait.UNKNOWN, syscall_evidence(pid, proc))
    if top is None or top.tty == 0 or top.tpgid <= 0 or top.state in "ZX":
        return Look(TtyWait.UNKNOWN)
    table = procs if procs is not None else scan_procs(proc)
    judge = _Judge(str(proc), table, calls)
    wait = judge.terminal(top.tty, top.tpgid, top.session, 0)
    if judge.refused is None:
        return Look(wait)
    closed = syscall_evidence(judge.refused, proc)
    if closed is not None and wait is not TtyWait.UNKNOWN:
        closed += "; judged from /proc/PID/wchan and the open files instead"
    return Look(wait, closed)


_RANK = (TtyWait.READING, TtyWait.POLLING, TtyWait.SHARED, TtyWait.UNKNOWN, TtyWait.BUSY)


def _strongest(verdicts: Iterable[TtyWait]) -> TtyWait | None:
    """The verdict that speaks for a group: READING, else POLLING, else SHARED, else UNKNOWN,
    else BUSY."""
    found = set(verdicts)
    return next((v for v in _RANK if v in found), None)


class _Judge:
    def __init__(self, proc: str, table: Mapping[int, ProcStat], calls: _Syscalls) -> None:
        self.proc = proc
        self.table = table
        self.calls = calls
        self.refused: int | None = None  # a process whose syscall file access was refused for

    def terminal(self, tty: int, tpgid: int, session: int, depth: int) -> TtyWait:
        members = [p for p, st in self.table.items()
                   if st.pgrp == tpgid and st.session == session and st.state not in "ZX"]
        inner = next(self._relayed(members, tty), None) if depth < _MAX_NESTING else None
        if inner is not None:
            st = self.table[inner]
            return self.terminal(st.tty, st.tpgid, inner, depth + 1)
        return _strongest(self.process(p, tty) for p in members) or TtyWait.UNKNOWN

    def _relayed(self, members: list[int], tty: int) -> Iterator[int]:
        """Sessions that members lead on another terminal: ``script``'s child on its pty."""
        parents = set(members)
        for p, st in self.table.items():
            if st.ppid in parents and st.session == p and st.tty not in (0, tty) and st.tpgid > 0:
                yield p

    def process(self, pid: int, tty: int) -> TtyWait:
        st = self.table[pid]
        if st.state in "Tt":  # stopped: it reads nothing until continued
            return TtyWait.BUSY
        try:
            tids = os.listdir(f"{self.proc}/{pid}/task")
        except OSError as e:
            return TtyWait.BUSY if e.errno in _GONE else TtyWait.UNKNOWN
        return _strongest(self.thread(f"{self.proc}/{pid}/task/{t}", st, tty) for t in tids) or TtyWait.BUSY

    def thread(self, task: str, st: ProcStat, tty: int) -> TtyWait:
        try:
            words = _read(f"{task}/syscall").split()
        except OSError as e:
            if e.errno in (errno.EACCES, errno.EPERM):
                self.refused = int(task.rsplit("/", 3)[-3])
                return self._by_wchan(task, st, tty)
            return TtyWait.BUSY if e.errno in _GONE else TtyWait.UNKNOWN
        try:  # "NR ARG1..ARG6 SP PC" (NR decimal, the rest hex), "-1 SP PC", or "running"
            nr, args = int(words[0]), [int(w, 16) for w in words[1:7]]
        except (IndexError, ValueError):
            return TtyWait.BUSY
        if nr in self.calls.reads:
            return TtyWait.READING if self._is_tty(task, args[0], st, tty) else TtyWait.BUSY
        watched: _Watched | None
        if nr in self.calls.polls:
            watched = self._poll_watches(task, args[0], args[1], st, tty)
        elif nr in self.calls.selects:
            watched = self._select_watches(task, args[0], args[1], st, tty)
        elif nr in self.calls.epolls:
            watched = self._epoll_watches(task, args[0], st, tty, 0)
        else:
            return TtyWait.BUSY
        if watched is None:  # the set could not be read: the terminal on a standard fd will do
            watched = _Watched(tty=any(self._is_tty(task, fd, st, tty) for fd in (0, 1, 2)), peers=True)
        if not watched.tty:
            return TtyWait.BUSY
        return TtyWait.SHARED if watched.peers else TtyWait.POLLING

    def _by_wchan(self, task: str, st: ProcStat, tty: int) -> TtyWait:
        """What a thread whose syscall file is closed waits in, from its ``wchan`` and the
        files it has open (module docstring)."""
        try:
            wchan = _read(f"{task}/wchan").decode(errors="replace").split(".")[0]
            fds = [int(fd) for fd in os.listdir(f"{task}/fd")]
        except (OSError, ValueError) as e:
            return TtyWait.BUSY if isinstance(e, OSError) and e.errno in _GONE else TtyWait.UNKNOWN
        if wchan in ("", "0"):  # running, or a kernel that does not say
            return TtyWait.UNKNOWN
        if wchan in _WCHAN_EPOLLS:
            watched = _Watched(tty=False, peers=False)
            for fd in fds:
                inner = self._epoll_watches(task, fd, st, tty, 0) if self._is_epoll(task, fd) else None
                if inner is not None:
                    watched.tty, watched.peers = watched.tty or inner.tty, watched.peers or inner.peers
            if not watched.tty:
                return TtyWait.BUSY
            return TtyWait.SHARED if watched.peers else TtyWait.POLLING
        if wchan not in _WCHAN_POLLS and wchan not in _WCHAN_READS:
            return TtyWait.BUSY
        if not any(self._is_tty(task, fd, st, tty) for fd in fds):
            return TtyWait.BUSY
        if wchan in _WCHAN_READS:
            return TtyWait.UNKNOWN if any(self._socket(task, fd) for fd in fds) else TtyWait.READING
        return TtyWait.UNKNOWN if any(self._peer(task, fd) for fd in fds) else TtyWait.POLLING

    def _socket(self, task: str, fd: int) -> bool:
        try:
            return stat.S_ISSOCK(os.stat(f"{task}/fd/{fd}").st_mode)
        except OSError:
            return False

    def _peer(self, task: str, fd: int) -> bool:
        """A socket or a pipe: another process may make it ready before the person does."""
        try:
            mode = os.stat(f"{task}/fd/{fd}").st_mode
        except OSError:
            return False
        return stat.S_ISSOCK(mode) or stat.S_ISFIFO(mode)

    def _is_tty(self, task: str, fd: int, st: ProcStat, tty: int) -> bool:
        try:
            s = os.stat(f"{task}/fd/{fd}")
        except OSError:
            return False
        if not stat.S_ISCHR(s.st_mode):
            return False
        return s.st_rdev == tty or (s.st_rdev == _DEV_TTY and st.tty == tty)

    def _memory(self, task: str, address: int, size: int) -> bytes | None:
        try:
            fd = os.open(f"{task}/mem", os.O_RDONLY)
        except OSError:
            return None
        try:
            data = os.pread(fd, size, address)
        except (OSError, OverflowError):
            return None
        finally:
            os.close(fd)
        return data if len(data) == size else None

    def _set_of(self, task: str, fds: Iterable[int], st: ProcStat, tty: int) -> _Watched:
        watched = _Watched(tty=False, peers=False)
        for fd in fds:
            if self._is_tty(task, fd, st, tty):
                watched.tty = True
            elif not watched.peers and self._peer(task, fd):
                watched.peers = True
        return watched

    def _poll_watches(self, task: str, address: int, nfds: int, st: ProcStat, tty: int) -> _Watched | None:
        nfds = min(nfds, _MAX_POLLFDS)
        data = self._memory(task, address, nfds * _POLLFD.size) if nfds else b""
        if data is None:
            return None
        return self._set_of(task, (fd for fd, events, _ in _POLLFD.iter_unpack(data)
                                   if fd >= 0 and events & _POLL_READ), st, tty)

    def _select_watches(self, task: str, nfds: int, readfds: int, st: ProcStat, tty: int) -> _Watched | None:
        if not readfds or not nfds:
            return _Watched(tty=False, peers=False)
        nfds = min(nfds, _MAX_POLLFDS)
        data = self._memory(task, readfds, (nfds + 63) // 64 * 8)  # an array of 64-bit longs
        if data is None:
            return None
        bits = int.from_bytes(data, "little")  # fd N is bit N on little-endian x86_64 and aarch64
        return self._set_of(task, (fd for fd in range(nfds) if bits >> fd & 1), st, tty)

    def _epoll_watches(self, task: str, epfd: int, st: ProcStat, tty: int, depth: int) -> _Watched | None:
        try:
            info = _read(f"{task}/fdinfo/{epfd}", 1 << 16)
        except OSError:
            return None
        watched = _Watched(tty=False, peers=False)
        for line in info.splitlines():
            # "tfd:        0 events:       19 data: ... pos:0 ino:3 sdev:18"
            words = line.split()
            if len(words) < 4 or words[0] != b"tfd:" or words[2] != b"events:":
                continue
            try:
                fd, events = int(words[1]), int(words[3], 16)
            except ValueError:
                continue
            if not events & _EPOLL_READ:
                continue
            if depth < _MAX_NESTING and self._is_epoll(task, fd):  # an epoll set inside this one
                inner = self._epoll_watches(task, fd, st, tty, depth + 1)
                if inner is not None:
                    watched.tty = watched.tty or inner.tty
                    watched.peers = watched.peers or inner.peers
                continue
            found = self._set_of(task, (fd,), st, tty)
            watched.tty = watched.tty or found.tty
            watched.peers = watched.peers or found.peers
        return watched

    def _is_epoll(self, task: str, fd: int) -> bool:
        try:
            return os.readlink(f"{task}/fd/{fd}") == "anon_inode:[eventpoll]"
        except OSError:
            return False
