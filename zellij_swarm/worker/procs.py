"""Finding and ending a worker's whole process tree.

A generation's processes are the wrapper's descendants plus every process whose environment
carries the generation's markers (``ZELLIJ_SWARM_RUN_ID``, ``_SLOT``, ``_GENERATION``): that
also catches grandchildren that started their own session and were re-parented away — a
daemon a worker left behind. The wrapper itself exports the markers from inside the shell,
so its own ``/proc/<pid>/environ`` does not carry them and it is never matched by them.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from zellij_swarm.records import generation_files
from zellij_swarm.records.generation_files import GenPaths
from zellij_swarm.worker import waiting
from zellij_swarm.worker._kernel import shell_code, stat_fields
from zellij_swarm.worker._paneleader import WORKER_SIGNALS

if TYPE_CHECKING:
    import psutil

# psutil is imported where a process is found, not above: loading it (datetime, its C
# modules: 1.3 MB resident) in every supervisor weighed on runs that never find one.

START_SLACK = 0.05  # seconds: process start times are rounded to clock ticks


def _environ_has(pid: int, needles: tuple[bytes, ...]) -> bool | None:
    """Whether the process's environment holds every needle; None when it reads empty, as
    it does for the instant a process is in the middle of an exec."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read()
    except OSError:
        return False
    if not env:
        return None
    entries = env.split(b"\0")
    return all(n in entries for n in needles)


def leaderless_sessions() -> set[int]:
    """The sessions processes there are in now (but us) whose leader — the process whose pid
    is the session's id — is gone: what an ended session leader left behind. A session whose
    leader lives is that process's, whatever once ended under the same pid; a zombie leads
    nothing (its pid cannot be taken while it waits to be reaped)."""
    me = os.getpid()
    stats = waiting.scan_procs()
    living = {pid for pid, st in stats.items() if st.state != "Z"}
    return {st.session for pid, st in stats.items() if pid != me and st.session not in living}


def marked(needles: tuple[bytes, ...], sessions: Mapping[int, float] | None = None, *,
           adopted_by: int | None = None) -> list[psutil.Process]:
    """Processes (not us) whose environment holds every ``NAME=value`` in ``needles``, or
    that are in one of ``sessions`` (wrapper pid -> when that wrapper ended) and started
    before its session's wrapper ended: a child forked but not yet exec'd shows its
    parent's original environment, without the markers the wrapper exported. The start
    time check keeps a later session that reuses the pid out. With ``adopted_by`` (a live
    launcher of ours, once every wrapper it started has ended) also its children: orphans it
    adopted as their subreaper, whatever their environment (``_launcher``)."""
    me = os.getpid()
    ended = sessions or {}
    out = []
    pids = [int(name) for name in os.listdir("/proc") if name.isdigit() and int(name) != me]
    unsure: list[int] = []  # mid-exec at the first look: looked at once more, after the scan
    for again, batch in ((False, pids), (True, unsure)):
        for pid in batch:
            st = waiting.read_stat(pid) if ended or adopted_by is not None else None
            session_ended = ended.get(st.session) if st is not None else None
            if adopted_by is not None and st is not None and st.ppid == adopted_by:
                has: bool | None = True
            else:
                has = _environ_has(pid, needles)
            if has is None and not again:
                unsure.append(pid)
                continue
            if not (has or session_ended is not None):
                continue
            import psutil

            try:
                proc = psutil.Process(pid)
                if proc.status() == psutil.STATUS_ZOMBIE:  # already ended, waiting to be reaped
                    continue
                if session_ended is not None and not has and proc.create_time() > session_ended + START_SLACK:
                    continue
                out.append(proc)
            except psutil.NoSuchProcess:
                continue
    return out


def run_markers(run_id: str) -> tuple[bytes, ...]:
    return (f"ZELLIJ_SWARM_RUN_ID={run_id}".encode(),)


HOLD_MARKER = "ZELLIJ_SWARM_HOLD"  # the only variable of a pane's hold (Zellij before 0.44)


def hold_markers(run_id: str) -> tuple[bytes, ...]:
    return (f"{HOLD_MARKER}={run_id}".encode(),)


def generation_markers(run_id: str, slot: int, gen: int) -> tuple[bytes, ...]:
    return (*run_markers(run_id), f"ZELLIJ_SWARM_SLOT={slot}".encode(), f"ZELLIJ_SWARM_GENERATION={gen}".encode())


def generation_tree(wrapper_pid: int | None, needles: tuple[bytes, ...]) -> list[psutil.Process]:
    """The worker processes of a generation, wrapper excluded."""
    import psutil

    found: dict[int, psutil.Process] = {}
    if wrapper_pid:
        try:
            for p in psutil.Process(wrapper_pid).children(recursive=True):
                found[p.pid] = p
        except psutil.NoSuchProcess:
            pass
    for p in marked(needles):
        found.setdefault(p.pid, p)
    found.pop(wrapper_pid or -1, None)
    return list(found.values())


def send(procs: list[psutil.Process], sig: signal.Signals) -> list[psutil.Process]:
    """Signal each process still alive; returns those that were signalled."""
    if not procs:
        return []  # nothing found: psutil stays unloaded
    import psutil

    hit = []
    for p in procs:
        try:
            p.send_signal(sig)
            hit.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied, ProcessLookupError):
            continue
    return hit


# A pane's pty relay (worker/_ptyrelay.py) runs between the wrapper and the worker: it only
# passes signals on, and outlives its worker by the moment it takes to report the status.
_RELAY = b"_ptyrelay.py"
_LEADER = b"_paneleader.py"


_PF_EXITING = 0x4  # the kernel's flag on a process inside exit(): its end is decided


def running(p: psutil.Process) -> bool:
    """``p`` exists and has not begun to end: not a zombie, nor inside ``exit()`` — a worker
    that called it on its own is not a zombie until its exit is done, and a signal that
    reaches it meanwhile is delivered, yet changes nothing (CI saw such a worker, ended 0 on
    its own, recorded cancelled). One ``/proc/<pid>/stat`` read."""
    fields = stat_fields(p.pid)
    return fields is not None and fields[0] not in (b"Z", b"X", b"x") and not int(fields[6]) & _PF_EXITING


# The handlers a wrapper holds (its ``trap :``), which a fork of it holds until it drops them
_WRAPPER_TRAPS = sum(1 << (int(getattr(signal, name)) - 1) for name in WORKER_SIGNALS)


def state(pid: int) -> str | None:
    """The process's state as the kernel has it (``R``, ``S``: sleeping, ``D``, ``Z``…); None
    when it is gone, or not ours to read."""
    fields = stat_fields(pid)
    return fields[0].decode("ascii", "replace") if fields else None


def catches(p: psutil.Process, sig: signal.Signals) -> bool:
    """``p`` has a handler of its own for ``sig`` (``SigCgt`` in ``/proc/<pid>/status``): only
    then can it hear the signal and still exit normally (an agent that traps SIGTERM, saves
    and exits 0). True when that cannot be read: it may have.

    Not the wrapper's own, held by a fork of it that has not become the worker yet (it has
    every one of them, and its parent's command line): a subshell drops them as it starts,
    and a signal that came while it held them is lost, never heard — its worker runs to its
    own end (a tmux soak saw one, a pane's fallback to headless starting as a Ctrl-C came,
    recorded ``cancelled`` and run again by ``retry``)."""
    try:
        with open(f"/proc/{p.pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"SigCgt:"):
                    caught = int(line.split()[1], 16)
                    break
            else:
                return True
    except (OSError, ValueError, IndexError):
        return True
    if caught & _WRAPPER_TRAPS == _WRAPPER_TRAPS and _unexeced_fork(p.pid, cmdline(p.pid)):
        return False
    return bool(caught >> (int(sig) - 1) & 1)


def is_worker_top(p: psutil.Process, gen: GenPaths) -> bool:
    """Whether ``p``, a process of ``gen``'s worker (``is_worker_process``), is the one whose
    end its wrapper records: a child of the wrapper (a headless one, a pane's second stage) or
    of the pty relay that carries it — or the relay itself, standing for a worker it has not
    started. Not a process the worker left in the background, reparented at the worker's end
    to the launcher, init or the pane leader — which runs the wrapper, and adopts what its
    processes leave."""
    fields = stat_fields(p.pid)
    if fields is None:
        return False
    parent = int(fields[1])
    argv = cmdline(parent)
    return _runs_relay(argv) or (is_wrapper(gen, parent, argv) and not _runs_leader(argv))


def _runs_leader(argv: list[bytes]) -> bool:
    return any(arg.endswith(_LEADER) for arg in argv)


def is_worker_process(p: psutil.Process, gen: GenPaths, *, relay_started: bool) -> bool:
    """Whether ``p`` is a running process of ``gen``'s worker's own (``running``) — not the
    generation's wrapper (a pane's second stage runs below the pane leader, and outlives its
    worker by the moment it takes to record its exit) and not the pty relay that carries a
    pane's worker once that worker has started (``relay_started``, looked at before ``p``
    was found: ``_relay_stands_for_worker``)."""
    if not running(p):
        return False
    argv = cmdline(p.pid)
    if is_wrapper(gen, p.pid, argv):
        return False
    return _relay_stands_for_worker(p.pid, argv, relay_started) if _runs_relay(argv) else True


def is_relay(p: psutil.Process) -> bool:
    """Whether ``p`` is a pty relay (``_ptyrelay.py``): it passes every signal it outlives on
    to the worker it carries."""
    return _runs_relay(cmdline(p.pid))


def _runs_relay(argv: list[bytes]) -> bool:
    return any(arg.endswith(_RELAY) for arg in argv)


def relay_started(gen: GenPaths) -> bool:
    """Whether ``gen``'s pty relay has started its worker: its record of the worker
    (``RELAY_RECORD``, written just before the worker's exec) or the worker's end
    (``WORKER_ENDED``) exists."""
    return any(os.path.lexists(gen.dir / name)
               for name in (generation_files.RELAY_RECORD, generation_files.WORKER_ENDED))


def _relay_stands_for_worker(pid: int, argv: list[bytes], started: bool) -> bool:
    """Whether the pty relay process ``pid`` (command line ``argv``) stands for its worker: a
    signal that reaches it ends the worker. So does the relay's fork until it execs the
    worker (the signal, blocked until then, ends it). So does the relay before it has started
    its worker (not ``started``): it passes a signal that came meanwhile on to the worker it
    starts, or, still starting itself, dies of it with nothing run. Counted as the carrier
    only, a cancel just after a pane's launch heartbeat was recorded as the worker's own death
    by SIGTERM: ``failed``, 143. ``started`` must be looked at before the relay's processes
    are found: looked at after, a relay that forked and wrote its record in between would be
    taken for a carrier while the scan never saw its worker. Once the worker has started, the
    relay only carries signals: the worker itself is reached or not."""
    return _unexeced_fork(pid, argv) or not started


def coarse_wallclock() -> float:
    """The wall clock as file modification times read it: the kernel stamps files with its
    coarse clock (a tick behind the precise one on many systems), so a moment taken with it
    before something happens is never later than the mtime of a file written after."""
    return time.clock_gettime(_CLOCK_REALTIME_COARSE)


_CLOCK_REALTIME_COARSE = getattr(time, "CLOCK_REALTIME_COARSE", 5)  # Linux's id; the module may not name it


def children(pid: int) -> list[int]:
    """``pid``'s children (none once it is gone)."""
    import psutil

    try:
        return [c.pid for c in psutil.Process(pid).children()]
    except psutil.NoSuchProcess:
        return []


def cmdline(pid: int) -> list[bytes]:
    """``pid``'s arguments as /proc has them (none once it is gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")[:-1]
    except OSError:
        return []


def runs_under(ancestor: int, run_dir: Path) -> bool:
    """Whether a wrapper of the run whose directory is ``run_dir`` runs below ``ancestor`` (a
    multiplexer's server, whose panes' processes are its descendants): a command line with a
    path in the run's directory — a pane's wrapper file, its pane leader's files."""
    import psutil

    inside = os.fsencode(str(run_dir)) + b"/"
    try:
        below = psutil.Process(ancestor).children(recursive=True)
    except psutil.NoSuchProcess:
        return False
    return any(arg.startswith(inside) for p in below for arg in cmdline(p.pid))


def runs_wrapper(gen: GenPaths, argv: list[bytes]) -> bool:
    """A command line that runs ``gen``'s wrapper: it has the generation's wrapper file (a
    pane's, before and after its pane leader's exec) or its directory (a headless one's
    argument) as an argument — the ``srun`` that runs it as a Slurm step too."""
    return not {os.fsencode(str(gen.wrapper)), os.fsencode(str(gen.dir))}.isdisjoint(argv)


def is_wrapper(gen: GenPaths, pid: int, argv: list[bytes]) -> bool:
    """Whether ``pid``, whose command line is ``argv``, is ``gen``'s wrapper: it runs it
    (``runs_wrapper``) and is no fork of it. A subshell the wrapper forked has its command
    line until it execs the worker — or, for a builtin the wrapper ``eval``s (SPEC §5.4),
    until it ends: either way it is the worker's, never the wrapper to follow or spare."""
    return runs_wrapper(gen, argv) and not _unexeced_fork(pid, argv)


def _unexeced_fork(pid: int, argv: list[bytes]) -> bool:
    """Whether ``pid`` (command line ``argv``) is a fork that has not exec'd yet: it has its
    parent's command line. (Unknown, its parent gone: no.)"""
    st = waiting.read_stat(pid)
    return st is not None and cmdline(st.ppid) == argv


def wrapper_process(gen: GenPaths) -> int | None:
    """The pid of a live process that is ``gen``'s wrapper (``is_wrapper``). For the rare
    claim that names no pid, or step Slurm does not list: one scan of every process's
    command line."""
    me = os.getpid()
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != me and is_wrapper(gen, int(name), cmdline(int(name))) and alive(int(name)):
            return int(name)
    return None


def wrapper_processes(gens: Iterable[GenPaths], *, leaders: bool = True) -> set[Path]:
    """The directories of those of ``gens`` whose wrapper runs here (``is_wrapper``, alive):
    one scan of every process's command line for all of them. ``leaders`` False: a pane's
    leader, which runs the wrapper and outlives its second stage, does not count."""
    wanted = list(gens)
    found: set[Path] = set()
    if not wanted:
        return found
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        argv = cmdline(int(name))
        for gen in wanted:
            if gen.dir not in found and is_wrapper(gen, int(name), argv) and (leaders or not _runs_leader(argv)) \
                    and alive(int(name)):
                found.add(gen.dir)
    return found


_PF_KTHREAD = 0x00200000  # a kernel thread, in /proc/PID/stat's flags: it never has a command line


def execing(spawner: str) -> bool:
    """Whether some process may be between its spawn and its new command line, which then
    shows no program yet: one with no command line (its exec under way — the kernel lets a
    vfork parent go on before it sets the new program's arguments), or an orphan that still
    has ``spawner``'s (its spawner killed while the child was still in the vfork). Zombies
    and kernel threads have none either, and are no such process."""
    me = os.getpid()
    script = os.fsencode(spawner)
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        argv = cmdline(int(name))
        if argv and script not in argv:
            continue
        if (fields := stat_fields(name)) is None:
            continue
        try:
            state, ppid, flags = fields[0], int(fields[1]), int(fields[6])
        except (ValueError, IndexError):
            continue
        if state in (b"Z", b"X") or flags & _PF_KTHREAD:
            continue
        if not argv or ppid == 1:
            return True
    return False


def claim_for_supervisor(gen: GenPaths) -> bool:
    """Take ``gen``'s claim for the supervisor: a free one, or one a wrapper died in before it
    wrote its pid (``take_abandoned_claim``). False when a wrapper owns it."""
    return generation_files.take_claim(gen) or take_abandoned_claim(gen)


def take_abandoned_claim(gen: GenPaths) -> bool:
    """Take over, for the supervisor, a claim whose wrapper died between creating it and
    writing its pid into it — before it ran anything. Call it once the claim is known to
    exist (a ``take_claim`` that failed): its creator was then running, so a live one is
    found by the scan. False when it names an owner or its wrapper still runs."""
    claim = generation_files.claim_or_planted(gen)
    if claim is None or not claim.unwritten or wrapper_process(gen) is not None:
        return False
    return generation_files.take_unwritten_claim(gen)


def zombie_code(pid: int) -> int | None:
    """How ``pid`` ended, as a shell says it (128 + N for a signal N), if it has ended and its
    parent has not reaped it yet (a zombie): the kernel keeps its wait status in
    /proc/PID/stat's ``exit_code`` (Linux 3.5). Not yet reaped, its pid is nobody else's.
    None: alive, gone, or not to be read."""
    fields = stat_fields(pid)
    if fields is None or fields[0] != b"Z" or len(fields) < 50:
        return None
    return shell_code(int(fields[49]))  # field 52 of the line, the 50th after "pid (name)"


def alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _wait_gone(procs: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Wait until each process has ended; a zombie has (its parent may be slow to reap an
    orphan). Returns those still running at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        left = [p for p in procs if alive(p.pid)]
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.01)


def end_all(procs: list[psutil.Process], grace: float, *, termed: bool = False) -> list[psutil.Process]:
    """SIGTERM (unless the caller has sent it: ``termed``), wait up to ``grace``, SIGKILL the
    rest (blocking; for shutdown paths)."""
    if not termed:
        send(procs, signal.SIGTERM)
    survivors = _wait_gone(procs, grace)
    send(survivors, signal.SIGKILL)
    return _wait_gone(survivors, grace)
