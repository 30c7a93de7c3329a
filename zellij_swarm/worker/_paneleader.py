"""The first process of a worker pane: it forwards a hang-up to the worker.

When a pane closes or its multiplexer dies, the kernel sends SIGHUP to the pane's session
leader only; every other process is left running on a dead terminal. A shell waiting for a
foreground command cannot pass the signal on, so the wrapper's first stage ``exec``s this
(same pid, still the session leader), which runs the wrapper's second stage as its child in
the same process group and, on SIGHUP (or SIGTERM) — not one the pane's own processes sent
the whole group (``hung_up``, ``from_the_pane``) — signals every descendant — also those
in sessions of their own, like the worker ``script`` runs on its own terminal: the worker
ends, the wrapper (which traps HUP) records its exit as 129, and the supervisor classifies
it (pane closed → ``cancelled``/``pane_closed``; session gone → ``lost``/``multiplexer_lost``).
(A worker the second stage forks after the hang-up never starts: it finds its terminal hung
up, ``wrapper``.)

With ``--hangup``, ``--exit`` and ``--heartbeat`` (the generation's files), the leader is also
the *subreaper* of the pane's processes: a second stage killed from outside (``kill -9``, the
OOM killer) leaves its worker running — in Zellij, the pty relay that carries it — and the
worker becomes the leader's child as the stage dies. The leader then waits for it and writes
its end as the stage would have (the hang-up mark if the terminal is gone, the exit sidecar,
the heartbeat's last line: ``Records``): the worker's own end is the generation's, never a lost
run to run again (SPEC §5.7).

Run as ``python -I -S _paneleader.py [--read-to-end] [--hangup FILE [--exit FILE --heartbeat FILE
| --killed FILE]] CMD…``: stdlib only, no site, started in a few ms. With ``--hangup``, a SIGHUP that says its terminal
hung up — the pane closed, or the whole session went: the kernel's, or the multiplexer's, never
one from the pane's own processes (``hung_up``) — first creates FILE: the evidence that tells a
closed pane from a worker that exits 129 or dies of a SIGHUP of its own (SPEC §6).

With ``--killed FILE`` (a pane that runs a Slurm step: its child is the step's ``srun``), a
child that dies of a signal the leader did not pass on itself has that signal's number written
in FILE: ``srun`` killed from outside (``kill -9``, the OOM killer), which Slurm records as a
cancel though nobody cancelled anything — and nothing else here sees it (SPEC §11).

With ``--read-to-end`` (tmux), the leader's last act is to let the multiplexer read the pane's
terminal to its end before it exits (``let_the_terminal_be_read``).

``_paneleader.py --step-env PANE_VAR CMD…`` (a pane that runs as a Slurm step) also empties
the environment for CMD itself — what the wrapper's ``env -i`` does otherwise — keeping the
pane's id as ``_ZSW_PANE`` and, in ``_ZSW_STEP``, the variables the step gave its task
(``STEP_VARIABLES``) as ``export NAME='value'`` lines quoted here, so that any value, newlines
and quotes included, reads back exactly.
"""

import os
import signal
import stat
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

# The signals that end a process by default and that someone may aim at a worker (``kill -SIG
# -- -PGID``, ``scancel --signal``): the wrapper, the pane leader and the pty relay outlive
# them, so that the worker's death by one is what is recorded (the relay passes them on).
WORKER_SIGNALS = ("SIGHUP", "SIGINT", "SIGQUIT", "SIGTERM", "SIGUSR1", "SIGUSR2", "SIGALRM")
# The leader outlives every other signal that ends a process by default, too (``outlived``):
# in a tmux pane it shares its worker's process group, so a worker's ``kill -VTALRM 0`` (or a
# signal sent to the pane's group) reaches it, and dead, it would hang up the worker's terminal,
# with nothing left to record the worker's end: a worker that handled the signal and went on to
# finish was recorded ``lost`` and run again. Not the faults a program's own bug raises
# (SEGV, BUS, FPE, ILL, ABRT): a handler that returns would only meet the fault again.
_NOT_OUTLIVED = ("SIGKILL", "SIGSTOP", "SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL", "SIGABRT",
                 # their default is not to end the process
                 "SIGCHLD", "SIGCONT", "SIGURG", "SIGWINCH", "SIGTSTP", "SIGTTIN", "SIGTTOU")
STEP_VARIABLES = ("SLURM", "CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "ZE_AFFINITY_MASK")


def step_environment(environ: dict[str, str], pane_var: str) -> dict[str, str]:
    import re
    import shlex  # only here: a plain pane's leader starts without them

    kept = sorted((k, v) for k, v in environ.items() if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k)
                  and (k.startswith("SLURM") or k in STEP_VARIABLES[1:]))
    return {"_ZSW_PANE": environ.get(pane_var, ""),
            "_ZSW_STEP": "".join(f"export {k}={shlex.quote(v)}\n" for k, v in kept)}


def descendants(root: int) -> list[int]:
    """Every process below ``root``, from the parent links in /proc."""
    below: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (fields := stat_fields(name)) is not None:
            below.setdefault(int(fields[1]), []).append(int(name))
    out, stack = [], [root]
    while stack:
        for pid in below.get(stack.pop(), ()):
            out.append(pid)
            stack.append(pid)
    return out


def survivable() -> list[int]:
    """Every signal that ends a process by default and that it can outlive with a handler
    that does nothing: all but those of ``_NOT_OUTLIVED`` (the real-time ones too)."""
    kept = {getattr(signal, name) for name in _NOT_OUTLIVED if hasattr(signal, name)}
    return sorted(sig for sig in signal.valid_signals() if sig not in kept)


# What Python ignores from its start (``worker_defaults`` undoes it for a worker)
_PYTHON_IGNORES = (signal.SIGPIPE, signal.SIGXFSZ)


def handled() -> list[int]:
    """The ``survivable`` signals a Python process of ours takes with a handler of its own:
    all but those Python ignores already. The pty relay passes each on to its worker."""
    return [sig for sig in survivable() if sig not in _PYTHON_IGNORES]


def outlived() -> list[int]:
    """The signals the leader takes with a handler that does nothing (``main``'s ``outlive``):
    every ``handled`` one but SIGHUP and SIGTERM (waited for: the leader passes them on)."""
    return [sig for sig in handled() if sig not in (signal.SIGHUP, signal.SIGTERM)]


def worker_defaults() -> None:
    """In a worker's process, before its exec: Python ignores SIGPIPE and SIGXFSZ; a worker
    must not."""
    for sig in _PYTHON_IGNORES:
        signal.signal(sig, signal.SIG_DFL)


SI_KERNEL = 0x80  # a signal's si_code when the kernel sent it (a terminal's hang-up), not a process


def hung_up(info: signal.struct_siginfo, leader: int, *, on_a_terminal: bool = True) -> bool:
    """Whether a SIGHUP the leader got says its terminal hung up — the pane closed, or its
    multiplexer went — rather than came from the pane's own processes (a worker's ``kill -HUP
    0`` reaches the whole group, the leader too; taken for a closed pane, that worker's own
    failure was recorded ``cancelled`` and never retried): sent by the kernel, or by a
    process outside the leader's tree (the multiplexer). Its sender gone (a worker dead of
    its own signal), the terminal itself says.

    So it does for one the pane's own processes sent (the leader started ``on_a_terminal``):
    a signal pending is not queued twice, and the kernel's hang-up that comes while the
    worker's own SIGHUP waits to be taken (a loaded machine) is one with it, its sender the
    worker's — taken for the worker's own only, the pane's closing was never passed on."""
    pane = from_the_pane(info, leader)
    if pane is None:
        return not os.isatty(0)
    return not pane or (on_a_terminal and not os.isatty(0))


def from_the_multiplexer(info: signal.struct_siginfo) -> bool:
    """Whether a SIGHUP from outside the pane is its terminal's hang-up: sent by the kernel,
    or by a process above the leader (the multiplexer's server, which closes the pane) — or
    its terminal is gone anyway. Not one a user sent the pane's processes from another
    terminal (``kill -HUP -- -PGID``), the terminal alive: the worker's end by it is its own,
    as headless (*Decision*, SPEC §6: tmux recorded it ``cancelled (pane_closed)``)."""
    if info.si_code == SI_KERNEL or info.si_pid <= 0 or not os.isatty(0):
        return True
    pid = os.getppid()
    while pid > 1:
        if pid == info.si_pid:
            return True
        fields = stat_fields(pid)
        pid = int(fields[1]) if fields is not None else 0
    return False


def from_the_pane(info: signal.struct_siginfo, leader: int) -> bool | None:
    """Whether a signal the leader got was sent by one of the pane's own processes (its tree,
    or its session — also one orphaned, or a zombie): one sent to the whole group, the leader
    with it. The kernel's (a terminal's hang-up) is not. None when its sender is gone, and
    nothing says (a ``/bin/kill -TERM 0`` the worker ran, reaped already)."""
    if info.si_code == SI_KERNEL or info.si_pid <= 0:
        return False
    if info.si_pid in descendants(leader):
        return True
    seen = session_of(info.si_pid)
    return None if seen is None else seen[0] == os.getsid(0)


def session_of(pid: int | str) -> tuple[int, bool] | None:
    """A process's session id, and whether it is a zombie (ended, not yet reaped); None when
    it is gone."""
    fields = stat_fields(pid)
    return (int(fields[3]), fields[0] == b"Z") if fields is not None else None


def reap_others(keep: set[int]) -> None:
    """Reap the children that ended but ``keep``: what a worker left and this process adopted."""
    for pid in children():
        if pid not in keep:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass


READ_TO_END_WAIT = 2.0  # seconds the leader waits, at most, for the multiplexer to read its terminal to its end


def let_the_terminal_be_read(wait: float, leader: int) -> None:
    """Close the terminal and wait, at most ``wait`` seconds, until the multiplexer has read
    it to its end, before the leader exits.

    tmux (3.3a, and its master since) closes a pane's terminal as soon as the pane's first
    process has exited, if nothing it can see is left to read: a worker's last output can be
    in the kernel then, on its way to the terminal's reading end (a pty's buffer, moved on
    by a kernel thread), and is lost — to the pane's screen and to its ``pipe-pane`` log (seen
    under load: a log that ended 121 bytes, or 6.8 KB, short of its worker's output). A read
    that finds the terminal closed at its other end reports its end only once that buffer is
    through: with the leader's ends closed, tmux reads to that end, closes the terminal, and
    the kernel's hang-up of its session says so to the leader.

    No wait where no such end can come: the terminal hung up already (the pane closed, its
    server went: the hang-up was the leader's while its worker ran), or a process the worker
    left still holds it open — tmux then reads it as it always did."""
    if not os.isatty(0):
        return
    tty = os.fstat(0).st_rdev
    for fd in (0, 1, 2):
        try:
            os.close(fd)
        except OSError:
            pass
    if not holds_the_terminal(descendants(leader), tty):
        signal.sigtimedwait([signal.SIGHUP], wait)  # (blocked, as it has been since the start)


def holds_the_terminal(pids: list[int], tty: int) -> bool:
    """Whether one of ``pids`` has the terminal device ``tty`` open."""
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:  # gone, or a zombie
            continue
        for fd in fds:
            try:
                if os.stat(f"/proc/{pid}/fd/{fd}").st_rdev == tty:
                    return True
            except OSError:
                continue
    return False


# The heartbeat's last line, the wrapper's (``wrapper``: its printf, ``%s`` for the code) or ours
EXITED_LINE = '{{"event":"exited","code":{}}}'


# The pty relay's files in the generation's directory (``generation_files``: stdlib only here).
RELAY_RECORD = "worker-session"
WORKER_ENDED = "worker-ended"


class Records:
    """The generation's files the second stage writes as its worker ends, given by it
    (``--hangup``, ``--exit``, ``--heartbeat``): for a worker whose second stage was killed.
    (A plain class: ``typing`` and ``dataclasses`` would cost a pane's start milliseconds.)"""

    def __init__(self, hangup: str, exit: str, heartbeat: str) -> None:
        self.hangup, self.exit, self.heartbeat = hangup, exit, heartbeat

    def written(self) -> bool:
        """The second stage wrote its worker's end (its exit sidecar)."""
        try:
            return os.lstat(self.exit).st_size > 0
        except OSError:
            return False

    def relay_ended(self, status: int) -> int:
        """``status``, the end of the orphan followed, when it is a pty relay (Zellij) killed
        before it had its worker's status — its record of the worker's session is left
        (``RELAY_RECORD``): the worker, on a terminal of its own, may ignore the hang-up and
        run on. Its session is ended first, as the second stage's ``--end`` would have
        (``_ptyrelay.end_worker_session``), and the status is the worker's own when the relay
        had marked its end. Any other end is ``status``."""
        where = os.path.dirname(self.exit)
        record = os.path.join(where, RELAY_RECORD)
        if not os.path.lexists(record):
            return status
        if __package__:
            from zellij_swarm.worker._ptyrelay import end_worker_session
        else:
            from _ptyrelay import end_worker_session  # type: ignore[import-not-found,no-redef]
        code = end_worker_session(record, os.path.join(where, WORKER_ENDED))
        return status if code is None else code << 8

    def write_end(self, status: int) -> None:
        """Write the worker's end as the second stage would have — the hang-up mark when the
        terminal is gone, the exit sidecar, the heartbeat's last line — for the worker of a
        second stage that was killed from outside: its own end is the generation's."""
        code = shell_code(status)
        if not os.isatty(0) and not os.path.lexists(self.hangup):
            _append(self.hangup, "")
        _append(self.exit, f"{code}\n")
        _append(self.heartbeat, EXITED_LINE.format(code) + "\n")


def _append(path: str, text: str) -> None:
    """Append as the wrapper does (``wrapper._after_worker``): never through a link, never to
    what is not a plain file — and, as the wrapper's ``printf``, a write a full disk refuses is
    lost, not the leader: it raised, and the leader died with its worker's end unreaped."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError:
        return
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            os.write(fd, text.encode())
    except OSError:
        pass
    finally:
        os.close(fd)


def main(argv: list[str]) -> int:
    env = None
    records: dict[str, str] = {}  # --hangup, --exit, --heartbeat: the generation's files
    read_to_end = argv[:1] == ["--read-to-end"]
    argv = argv[read_to_end:]
    killed = None  # --killed: where a child's death by a signal not passed on is written
    while argv[:1] in (["--step-env"], ["--hangup"], ["--exit"], ["--heartbeat"], ["--killed"]):
        if argv[0] == "--step-env":
            env = step_environment(dict(os.environ), argv[1])
        elif argv[0] == "--killed":
            killed = argv[1]
        else:
            records[argv[0]] = argv[1]
        argv = argv[2:]
    hangup = records.get("--hangup")
    ends = Records(hangup, records["--exit"], records["--heartbeat"]) if len(records) == 3 and hangup else None

    leader = os.getpid()
    on_a_terminal = os.isatty(0)
    if ends is not None:
        become_subreaper()

    def outlive(_signum: int, _frame: object) -> None:
        """Ctrl-C, Ctrl-\\ and a signal sent to the whole group or step reach the worker by
        themselves; the leader stays (a handler, not SIG_IGN, which the worker would inherit)."""

    for sig in outlived():
        signal.signal(sig, outlive)
    # A hang-up and a TERM are taken with who sent them (``sigwaitinfo``): blocked from here,
    # in the child too until its exec — one that comes meanwhile ends it there, nothing run.
    waited = {signal.SIGHUP, signal.SIGTERM, signal.SIGCHLD}
    before = signal.pthread_sigmask(signal.SIG_BLOCK, waited)
    child = os.fork()
    if child == 0:
        worker_defaults()
        try:
            signal.pthread_sigmask(signal.SIG_SETMASK, before)
            if env is None:
                os.execv(argv[0], argv)
            os.execve(argv[0], argv, env)
        finally:
            os._exit(127)
    passed_on: set[int] = set()
    closed_seen = False  # the multiplexer's hang-up came (the pane closed, or its session went)
    worker = None  # the worker its second stage left running, killed from outside
    while True:
        info = signal.sigwaitinfo(waited)
        if info.si_signo == signal.SIGCHLD:
            if worker is None:
                try:
                    if os.waitid(os.P_PID, child, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
                        reap_others({child})
                        continue
                except ChildProcessError:
                    return 0
                # Looked for before the second stage is reaped: the worker it started, now this
                # process's child, and what the worker forked since, which started after it.
                orphan = first_started(pid for pid in children() if pid != child)
                _, status = os.waitpid(child, 0)
                if killed is not None and os.WIFSIGNALED(status) and os.WTERMSIG(status) not in passed_on:
                    _append(killed, f"{os.WTERMSIG(status)}\n")  # killed from outside: before the pane can close
                if orphan is None or not os.WIFSIGNALED(status) or ends is None or ends.written():
                    break
                # Looked at at once, below: it may have ended already — killed with its second
                # stage by a signal sent to the group, a zombie: its SIGCHLD was one with the
                # stage's, and none comes.
                worker = orphan[1]
            done, worker_status = os.waitpid(worker, os.WNOHANG)
            if done:
                status = worker_status
                if ends is not None:  # (always: a worker is followed only where its end can be written)
                    status = ends.relay_ended(status)
                    ends.write_end(status)
                break
            reap_others({worker})
            continue
        if info.si_signo == signal.SIGHUP and not hung_up(info, leader, on_a_terminal=on_a_terminal):
            continue  # the pane's own (``kill -HUP 0``): it reached whom its sender meant, the leader too
        if info.si_signo == signal.SIGTERM and from_the_pane(info, leader) is not False:
            # the same (``kill -TERM 0``): passed on, the worker heard it twice. A sender gone
            # is taken for the pane's: one outside that aimed at the group reached it already,
            # and one that aimed at the leader alone has no one left to answer
            continue
        # The multiplexer's hang-up, the first time it comes: marked before the worker can end
        # and its exit be recorded, and passed on — also when a user's SIGHUP from another
        # terminal was passed on before, and when the wrapper's second stage, finding the
        # terminal gone, made the mark first. Taken for the one passed on already, the close
        # was marked only at the worker's end, which then read as the close's (a worker that
        # ignored both and failed later: ``cancelled (pane_closed)``), and a worker that had
        # outlived the user's SIGHUP never heard it and ran on with no pane, its run never ending.
        closed = info.si_signo == signal.SIGHUP and not closed_seen and from_the_multiplexer(info)
        if closed:
            closed_seen = True
            if hangup is not None:
                try:
                    os.close(os.open(hangup, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                                     0o600))
                except OSError:
                    pass
        if info.si_signo in passed_on and not closed:  # once each: the tree was signalled already
            continue
        passed_on.add(info.si_signo)
        for pid in descendants(leader):
            try:
                os.kill(pid, info.si_signo)
            except OSError:
                pass
    if read_to_end:
        let_the_terminal_be_read(READ_TO_END_WAIT, leader)
    return shell_code(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
