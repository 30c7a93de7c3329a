"""The launcher: a small child of the supervisor that starts headless wrappers for it.

Starting a process blocks its parent until the child has executed its program (vfork),
about a tenth of a millisecond of CPU per task here — time the supervisor's event loop would
not spend on exits and backfill. The launcher does that on the other core. Protocol: replies
are lines; requests are fields each ended by NUL (an argument may hold a newline, never a NUL):

    in:  E <count> <NAME=value>...  the environment of the wrappers started from now on
    in:  S <token> <dir> <argc> <arg>...  start argv (each of these a field); <dir>: the
                                    generation directory of a local headless wrapper, or
                                    empty (a Slurm step's srun: its wrapper is on a node)
    out: S <token> <pid>            started
         F <token> <errno> <text>   could not start
         A <pid> <worker pid>       a started wrapper died of a signal, its worker running on
                                    (told just before the wrapper's X)
         X <pid> <wait status>      a started wrapper ended (reaped here)
         O <worker pid> <status>    the worker an A named ended (reaped here)
         L <count>                  its children that are no wrapper of its own (what workers
                                    left: see below), after each reap that ended a wrapper
         U <cpu seconds> <max RSS KiB>  its own usage, last, as it exits
    in:  ?                          a ping; out: P, at once

Each wrapper starts in its own session with stdio on /dev/null, every signal at its default,
the environment of the last E and none of the launcher's own descriptors (what its caller
handed down inheritable passes through), by ``os.posix_spawn``: of the ways to start a
process from Python it costs the parent least here — subprocess.Popen twice as much, fork+exec
and os.spawnv four times; glibc's posix_spawn called through ctypes with its attributes and
environment built once costs the same (the kernel's clone and exec are the cost), and
POSIX_SPAWN_USEVFORK changes nothing (glibc always clones vfork-style). One thread does it
all: it starts every request one read brings (a whole batch) and answers them in one write,
then reaps the wrappers SIGCHLD says have ended — so a wrapper's start is always told before
its end. When its input closes (the supervisor ended or died) the launcher keeps reaping
until the last wrapper, and the last worker of a killed wrapper, has ended, then exits:
workers outlive their supervisor.

It is the *subreaper* of what it starts (``PR_SET_CHILD_SUBREAPER``): a process a worker left
behind whose parent ended — a daemon's double fork, with ``setsid`` and ``env -i`` leaving
nothing of the run on it — becomes the launcher's child rather than init's. The supervisor's
end-of-run sweep finds it so (``procs.marked``'s ``adopted_by``), and the launcher reaps it
without a word. Once the launcher has exited, what it had adopted goes on to init, as before.
While it has such a child (L), the run keeps no ``artifacts/`` for a later generation: a job
a worker started in a session of its own may still write into its own (``records.shells``).

But for one: a wrapper killed from outside (``kill -9``, the OOM killer) leaves its worker
running, and the worker — the wrapper's own child — becomes the launcher's at that moment.
Reaping the dead wrapper, the launcher names it (A): of its children in the wrapper's process
group, the one that started first (what the worker forked since started after it), and
reports its exact end (O), which is the generation's — the record its wrapper could not write.
With no supervisor left to tell (its input closed), it writes that end in the generation's
exit sidecar as the wrapper would have (``record_end``), so that a ``resume`` reads the
worker's own end: the worker of a wrapper killed with its supervisor (``pkill -9 -f`` of the
state directory's path reaches both) may finish before the resume, and nothing else saw it.

Run as ``python -I -S _launcher.py``: stdlib only, and of it only built-in modules — ``_signal``
rather than ``signal``, whose enums load ``enum`` and more: 0.8 MB of the launcher's 10 MB —
but for ``ctypes``, loaded for the one ``prctl`` Python has no call for.
"""

import _signal as signal  # type: ignore[import-not-found]  # (no stub) the module docstring says why
import os
import resource
import select
import stat  # (``os`` has loaded it)
import sys

if __package__:
    from zellij_swarm.worker._kernel import become_subreaper, children, first_started, shell_code, stat_fields
else:  # run as a script under -I, which keeps the script's own directory off sys.path
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _kernel import (  # type: ignore[import-not-found,no-redef]
        become_subreaper,
        children,
        first_started,
        shell_code,
        stat_fields,
    )

STDIO = [
    (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
    (os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0),
    (os.POSIX_SPAWN_OPEN, 2, "/dev/null", os.O_WRONLY, 0),
]
DEFAULTS = frozenset(signal.valid_signals()) - {signal.SIGKILL, signal.SIGSTOP}


class Wrappers:
    """The wrappers this launcher starts and reaps, and the requests it is reading."""

    def __init__(self) -> None:
        self.env: dict[bytes, bytes] = {}
        self.running: set[int] = set()  # the wrappers started and not reaped yet
        self.orphans: set[int] = set()  # workers of killed wrappers (A), not reaped yet
        # wrapper pid -> (start time, pid, wait status) of what of its group this launcher
        # adopted and reaped while the wrapper lived (``worker_of``)
        self.reaped: dict[int, list[tuple[int, int, int]]] = {}
        self.pending: list[bytes] = []  # fields of a request not complete yet
        self.partial = b""  # a field not complete yet
        self.dirs: dict[int, bytes] = {}  # running wrapper pid -> its generation directory, if local
        self.orphan_dirs: dict[int, tuple[bytes, int]] = {}  # worker pid -> (directory, its wrapper's pid)
        self.supervised = True  # the supervisor reads the replies; False once its requests ended

    def take(self, chunk: bytes) -> list[bytes]:
        """Start what the requests in ``chunk`` ask for; the replies to them."""
        *done, self.partial = (self.partial + chunk).split(b"\0")
        fields = self.pending + done
        out = []
        at = 0
        while at < len(fields):
            kind = fields[at]
            if kind == b"?":  # are you there? (a stopped or stuck launcher does not answer)
                out.append(b"P\n")
                at += 1
                continue
            head = 4 if kind == b"S" else 2  # S <token> <dir> <argc> | E <count>
            if len(fields) < at + head:
                break
            end = at + head + int(fields[at + head - 1])
            if len(fields) < end:
                break
            if kind == b"E":  # built once, for every wrapper until the next
                self.env = dict(item.partition(b"=")[::2] for item in fields[at + head:end])
            else:
                out.append(self.start(fields[at + 1], fields[at + head:end], fields[at + 2]))
            at = end
        self.pending = fields[at:]
        return out

    def start(self, token: bytes, argv: list[bytes], directory: bytes = b"") -> bytes:
        try:
            pid = os.posix_spawn(argv[0], argv, self.env, file_actions=STDIO, setsid=True,
                                 setsigdef=DEFAULTS, setsigmask=())
        except OSError as e:
            return b"F %s %d %s\n" % (token, e.errno or 0, (e.strerror or "").encode())
        self.running.add(pid)
        if directory:
            self.dirs[pid] = directory
        return b"S %s %d\n" % (token, pid)

    def reap(self) -> list[bytes]:
        """The ends of the wrappers that have ended, reaped — and of what this launcher had
        adopted (``become_subreaper``), reaped and not reported, but for a killed wrapper's
        worker (``worker_of``). Each child is looked at before it is reaped: the worker of a
        wrapper killed with its whole group may be reaped before its wrapper, and is its
        worker all the same."""
        out = []
        while True:
            try:
                peeked = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:  # no child at all
                break
            if peeked is None:
                break
            pid = peeked.si_pid
            adopted = pid not in self.running and pid not in self.orphans
            fields = stat_fields(pid) if adopted else None  # read while it is a zombie
            _, status = os.waitpid(pid, 0)
            if pid in self.running:
                self.running.discard(pid)
                out += self.wrapper_ended(pid, status)
            elif pid in self.orphans:
                self.orphans.discard(pid)
                self.worker_ended(pid, status)
                out.append(b"O %d %d\n" % (pid, status))
            elif fields is not None and int(fields[2]) in self.running:  # of a live wrapper's group
                self.reaped.setdefault(int(fields[2]), []).append((int(fields[19]), pid, status))
        if any(line.startswith(b"X ") for line in out):
            out.append(b"L %d\n" % sum(pid not in self.running for pid in children()))
        return out

    def wrapper_ended(self, pid: int, status: int) -> list[bytes]:
        reaped = self.reaped.pop(pid, [])
        directory = self.dirs.pop(pid, None)
        if not os.WIFSIGNALED(status):
            return [b"X %d %d\n" % (pid, status)]
        worker = self.worker_of(pid, reaped)
        if worker is None:
            return [b"X %d %d\n" % (pid, status)]
        _, worker_pid, worker_status = worker
        said = [b"A %d %d\n" % (pid, worker_pid), b"X %d %d\n" % (pid, status)]
        if directory is not None:
            self.orphan_dirs[worker_pid] = (directory, pid)
        if worker_status is None:
            self.orphans.add(worker_pid)
            return said
        self.worker_ended(worker_pid, worker_status)
        return [*said, b"O %d %d\n" % (worker_pid, worker_status)]

    def worker_ended(self, worker: int, status: int) -> None:
        """A killed wrapper's worker ended: with no supervisor to tell, its end is written
        where its wrapper would have written it (``record_end``)."""
        directory, wrapper = self.orphan_dirs.pop(worker, (None, 0))
        if directory is not None and not self.supervised:
            record_end(directory, wrapper, status)

    def worker_of(self, wrapper: int, reaped: list[tuple[int, int, int]]) -> tuple[int, int, int | None] | None:
        """The worker a wrapper killed from outside left — its own child, this launcher's
        since that moment: of the processes of the wrapper's group that became this
        launcher's (``reaped`` already, or children now), the first started (what the worker
        forked since started after it). (start time, pid, wait status or None while it
        runs); None when there is none: it ended with its wrapper, or made a group of its
        own."""
        ours = [pid for pid in children() if pid not in self.running and pid not in self.orphans]
        live = first_started(ours, lambda fields: int(fields[2]) == wrapper)
        return min([*reaped, *([(*live, None)] if live else [])], default=None)


def record_end(directory: bytes, wrapper: int, status: int) -> None:
    """Write a worker's end (its wait ``status``) in its generation's exit sidecar, as its
    wrapper (pid ``wrapper``, killed) would have: its code, 128 + n for a death by signal n.
    Only while the claim is still that wrapper's — a generation that was folded has none, and
    its directory may be another's by now — and the sidecar empty (a shell's is there,
    emptied), and never through a link. Any failure leaves the end unrecorded, as before."""
    try:
        claim = os.open(directory + b"/claim", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            if os.read(claim, 64).strip() != b"%d" % wrapper:
                return
        finally:
            os.close(claim)
        fd = os.open(directory + b"/exit", os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
                     | os.O_CLOEXEC, 0o644)
        try:
            st = os.fstat(fd)
            if stat.S_ISREG(st.st_mode) and st.st_size == 0:
                os.write(fd, b"%d\n" % shell_code(status))
        finally:
            os.close(fd)
    except OSError:
        pass


def send(fd: int, lines: list[bytes]) -> None:
    """Replies, in one write (the supervisor wakes once for all of them)."""
    view = memoryview(b"".join(lines))
    try:
        while view:
            view = view[os.write(fd, view):]
    except BrokenPipeError:
        pass  # the supervisor is gone; keep reaping


def main() -> None:
    become_subreaper()
    requests, replies = sys.stdin.fileno(), sys.stdout.fileno()
    wrappers = Wrappers()
    # SIGCHLD wakes the loop through a pipe: no thread, no lock between starting and reaping
    woken, wake = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake, warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    poller = select.poll()
    poller.register(requests, select.POLLIN)
    poller.register(woken, select.POLLIN)
    reading = True
    while reading or wrappers.running or wrappers.orphans:
        lines = []
        ready = {fd for fd, _ in poller.poll()}
        if requests in ready:
            if chunk := os.read(requests, 65536):
                lines += wrappers.take(chunk)
            else:
                poller.unregister(requests)
                reading = wrappers.supervised = False
        if woken in ready:
            os.read(woken, 4096)  # one byte per SIGCHLD; any left over wakes the next poll
            lines += wrappers.reap()
        if lines:
            send(replies, lines)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    send(replies, [b"U %.6f %d\n" % (usage.ru_utime + usage.ru_stime, peak_rss_kib(usage.ru_maxrss))])


def peak_rss_kib(fallback: int) -> int:
    """This process's own peak RSS (KiB), ``fallback`` where /proc cannot say. Not
    ``ru_maxrss``: an exec keeps the larger of the old and new images' peaks, and a process
    started by vfork (posix_spawn, Python's subprocess) had its parent's whole image as its
    old one — the launcher the supervisor's, the supervisor whatever started it (a bench
    holding 60 MB made a 35 MB supervisor report 59). Also the supervisor's (engine.supervisor):
    it lives here because the launcher runs without the package."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return fallback


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    # A SIGTERM sent to every process of a run (Slurm ending a submitted swarm's job, a
    # container stopping, `pkill -TERM`) is its supervisor's to act on; this helper ends with
    # its requests pipe. Dying of it first, it was reported lost and started again as the run
    # stopped. (Its wrappers get every signal at its default: ``DEFAULTS``.)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    main()
