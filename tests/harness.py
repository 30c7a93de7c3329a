"""Drive the real ``Supervisor`` in virtual time with a fake launcher, watcher and multiplexer
and scripted workers, so that a scenario made of timeouts, retries, kill graces and crashes
runs in milliseconds.

Time. The supervisor takes its ``clock``, ``wallclock``, ``watcher``, ``selector`` and
``launcher`` from its constructor. Both clocks read one ``Clock`` that only the
``FakeSelector`` moves. The selector wraps a real epoll selector, so the supervisor's own
descriptors (its ``CallRunner`` threads, pidfds, its views watch) stay real. Each
``select(timeout)`` runs what is due in the ``World`` (the scripted happenings, one heap in
virtual time) and polls the real descriptors without waiting. While one of the supervisor's
``CallRunner`` threads is busy (a backend call, a ``/proc`` scan of the kill ladder), it waits
for them in real time and virtual time stands still. Otherwise it moves the clock to the
earlier of the supervisor's deadline and the world's next happening. The fake launcher and
watcher are real pipes that the world writes a byte into when it has something to report, so
readiness is always the kernel's and no key is invented. The outcome of a scenario therefore
does not depend on real timing.

Workers. A ``FakeWrapper`` writes the files ``wrapper.sh`` writes, in its order (SPEC §5, the
format of ``wrapper.render`` and ``generation_files``): the claim (``O_EXCL``, or restamped
when the supervisor holds it), the launch heartbeat, output and heartbeat lines, follow-ups,
the ``exit`` sidecar and the ``exited`` line. Each file is stamped with the virtual wall time,
because the supervisor reads start, end and silence from mtimes.

Pids. Pane wrappers are followed by pidfd once their heartbeat names a pid
(``follow.GenerationWatch.follow_pid``). After a launcher dies, and on a whole-run cancel, headless
ones are followed the same way. On resume, adoption checks pid, start time and command line
(``resume.wrapper_alive``). A pid that does not exist reads as "the wrapper is gone" on
every one of those paths. So every fake wrapper, headless or in a pane, is one real idle
helper process, ``/bin/sh -c 'read _' <its wrapper.sh>``. The wrapper path is in its command
line, as in a real wrapper's, so resume adopts it. The helper reads a pipe that only the
harness holds, so it also ends if the test process dies. The wrapper "exits" when the harness
SIGKILLs the helper, right after writing the sidecar as the real wrapper does, and waits for
it to end: its pidfd is then readable, as for a real one. A helper that the *supervisor*
SIGKILLs (a wrapper that never recorded its exit) is seen at the next ``select`` as a wrapper
that vanished without a sidecar. Ended helpers stay unreaped zombies until the scenario ends
(see ``FakeWrapper.reap``). A helper costs about a millisecond and keeps every pid path of
the supervisor real; with a fake pid, those paths would see every wrapper as gone.

Signals. The kill ladder's signals go through the supervisor's ``signaller``; the harness's
(``FakeSignaller``) delivers them to the scripted worker of the generation, on the
supervisor's procs thread as the real one does. A signal reaches a worker only while it runs
(its exit not yet written): then it is *sent* at that virtual moment, else it reaches
nothing, as a real one finds no process left. A worker reacts to SIGTERM as scripted: it dies
with 143 at once, traps it and exits 0, or ignores it and dies with 137 when the ladder's
SIGKILL reaches it.

Fakes. ``FakeLauncher`` has ``launcher.Launcher``'s interface and replies (``Started``,
``NotStarted``, ``Ended`` with a wait status, pings, ``lost``). It can be scripted to die,
to die on its first submission, or to stop answering. ``FakeMux`` implements the ``Backend``
protocol. Its panes run the same worker scripts, and it can fail a launch, never start a
pane's wrapper (no heartbeat), close a pane (the worker dies of SIGHUP, 129), lose the whole
session, or fail ``open``.

Running. ``Harness.run`` builds a ``RunPlan`` and runs the supervisor to its end, in a state
directory of its own. ``Harness.resume`` continues a run whose supervisor vanished at
``crash_at``, with a new supervisor built from ``resume.load`` as ``zellij-swarm resume``
does. Each returns a ``Result``: the exit code, the task records, ``events.jsonl``,
``summary.json``, the answers to inbox messages, and what the multiplexer was asked.
``play_concurrently`` runs independent scenarios a few at a time. It then checks that no
thread the runs started is alive and no process is left.
"""

from __future__ import annotations

import collections
import errno
import heapq
import itertools
import json
import math
import os
import selectors
import shlex
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import psutil

from zellij_swarm import exc
from zellij_swarm.backends.base import LaunchFailed, LaunchRequest, PaneOpened, PaneResult, RunContext
from zellij_swarm.backends.headless import HeadlessBackend
from zellij_swarm.commands.run import retry_selection
from zellij_swarm.config import settings, swarmfile
from zellij_swarm.engine import resume, stopping
from zellij_swarm.engine.live import GenPhase, LiveGen
from zellij_swarm.engine.supervisor import RunPlan, Supervisor
from zellij_swarm.records import inbox, rundir, snapshot_file
from zellij_swarm.records import log as records
from zellij_swarm.records.generation_files import GenPaths
from zellij_swarm.records.rundir import RunPaths
from zellij_swarm.watch import Change
from zellij_swarm.worker import wrapper
from zellij_swarm.worker.launcher import Ended, NotStarted, Started
from zellij_swarm.worker.wrapper import PaneMode

VIRTUAL_EPOCH = 1000.0  # the fake monotonic clock's start
WALL_HEADROOM = 60.0  # seconds the virtual wall clock starts ahead of the real one (Clock)
VIRTUAL_LIMIT = 7 * 86400.0  # a run still going after a virtual week is stuck, not slow
REAL_LIMIT = 20.0  # seconds of real time one supervisor may take
BUSY_WAIT = 0.5  # real seconds one select waits for a busy CallRunner
TERM, KILL, HUP = 143, 137, 129  # a worker's status after SIGTERM, SIGKILL, SIGHUP
_T = TypeVar("_T")


class Stuck(AssertionError):
    """The supervisor waits for something no script will ever bring."""


class SupervisorGone(BaseException):
    """Raised out of ``select`` at ``crash_at``: the supervisor vanishes mid-loop. A
    ``BaseException`` so that no ``except Exception`` on the way up can swallow it."""


# ----- scripts ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Work:
    """What one attempt of a task does once its wrapper runs (times are virtual seconds)."""

    code: int = 0  # its exit status; 128+n for a worker that died of signal n
    after: float = 1.0  # from its start to its exit
    start_delay: float = 0.0  # headless: from submission to the launcher's start
    term: str = "dies"  # on SIGTERM: "dies" (143) | "traps" (exits 0) | "ignores" (137 at the ladder's SIGKILL)
    term_takes: float = 0.0  # how long it takes to die, or to exit 0, after SIGTERM reached it
    vanishes: bool = False  # at ``after`` the wrapper itself is SIGKILLed: no exit sidecar
    unrecorded: bool = False  # at ``after`` the wrapper exits with ``code`` but cannot write its sidecar (disk full)
    # while the state directory is full (``rundir.unwritable``, which a test patches), its wrapper
    # creates its claim but cannot write its pid into it, and exits 0 having run nothing
    claim_fails_when_full: bool = False
    # while the state directory is full, its wrapper claims the generation (its pid written) and
    # can write nothing more — no start, no exit — and ends at ``after``: it ran, nobody saw how
    silent_when_full: bool = False
    spawn_error: str | None = None  # the launcher cannot start its wrapper (NotStarted)
    cwd_missing: bool = False  # the wrapper finds no cwd: ``- cwd_missing``, status 1
    output_every: float | None = None  # prints a line this often (the idle watchdog's input)
    beat_every: float | None = None  # appends to $ZELLIJ_SWARM_HEARTBEAT this often
    followups: tuple[Mapping[str, Any], ...] = ()  # lines it leaves in followups.jsonl


@dataclass(frozen=True)
class Pane:
    """What becomes of one pane launch of a task (in launch order)."""

    fails: str | None = None  # the launch fails with this code (LaunchFailed)
    unstartable: bool = False  # ... as a backend that cannot start at all
    starts: bool = True  # False: the pane opens but its wrapper never runs (no heartbeat)
    dies_claiming: bool = False  # its wrapper dies between creating its claim and writing its pid
    delay: float = 0.0  # from the launch to its wrapper's claim and heartbeat
    # it comes up so late that the supervisor's close (``abandon``) missed it: its wrapper starts anyway
    outlives_abandon: bool = False
    closed_after: float | None = None  # the user closes the pane this long after its start
    # the user closes it as it opens, before its wrapper ran (its multiplexer lists it no more);
    # else (``starts=False``) this world's multiplexer cannot say whether it is listed
    closed_at_once: bool = False
    cancel_while_opening: bool = False  # a ``cancel`` of its task arrives while the pane opens
    # ... while the supervisor asks whether its multiplexer still lists it (``pane_listed``)
    cancel_while_listed: bool = False


@dataclass(frozen=True)
class Launch:
    """What one launcher process (in start order) does."""

    dies_after: float | None = None  # dies (SIGKILL) this long after it started
    dies_on_submit: bool = False  # dies as the first wrappers are handed to it, starting none
    # starts the first wrapper it is given, then dies before it says so (killed between its
    # spawns and its reply: a batch is answered in one write)
    dies_unreported: bool = False
    # ... and its wrapper claims the generation (restamps the supervisor's claim) this much later:
    # a wrapper spawned, its exec done, not yet at its claim when its launcher's death is read
    claim_lag: float = 0.0
    stops_after: float | None = None  # stopped (SIGSTOP) this long after it started: from then on it
    # starts, reports and answers nothing
    # it tells of a wrapper's end this long after the wrapper ended (a busy launcher, or one
    # that reaps after the supervisor's pidfd on the wrapper fired)
    reports_ends_after: float = 0.0


@dataclass(frozen=True)
class Message:
    """An inbox message sent at a virtual time, as ``zellij-swarm cancel`` / ``add`` send it."""

    at: float
    kind: str  # cancel | add
    tasks: tuple[Any, ...] = ()  # names to cancel (none: the whole run), or task mappings to add


@dataclass(frozen=True)
class Mux:
    """A fake multiplexer for a run (``FakeMux``)."""

    name: str = "zellij"
    panes: Mapping[str, tuple[Pane, ...]] = field(default_factory=dict)
    visible: int = 16  # slots 1..visible get panes
    open_error: str | None = None  # ``open`` raises BackendError with this code
    session_lost_at: float | None = None  # the whole session dies (virtual seconds into the run)
    # ... its workers dying of the server's own SIGHUP before a pane leader could leave its
    # hang-up mark (a killed tmux server signals its panes' process groups): each leader,
    # signalled too, still runs, its mark to come (``FakeWrapper.leader_to_mark``)
    lost_unmarked: bool = False
    # a whole-run cancel is sent when the supervisor first asks whether the session lives: in a
    # run without a hang-up, that is as the run ends (before its end-of-run sweep)
    cancel_while_ending: bool = False


def task(name: str, *, after: Iterable[str] = (), priority: int = 0, retries: int | None = None,
         timeout: float | None = None, idle_timeout: float | None = None) -> swarmfile.TaskSpec:
    return swarmfile.TaskSpec(name=name, cmd=f"fake {name}", after=tuple(after), priority=priority, retries=retries,
                              timeout=timeout, idle_timeout=idle_timeout)


# ----- virtual time -------------------------------------------------------------------------

class Clock:
    """Monotonic and wall time that move only when the harness moves them, together."""

    def __init__(self) -> None:
        self.now = VIRTUAL_EPOCH
        # Ahead of the real time, so virtual wall time is never behind it: resume adopts a wrapper
        # only if its (real) process started no later than its (virtually stamped) claim, and the
        # supervisor stamps some files itself with real mtimes. The real time at the start is not
        # enough: virtual time stands still while a loaded machine takes seconds to set a run up
        # and spawn its first wrapper's helper, whose claim is stamped at virtual second 0.
        self.wall_epoch = round(time.time(), 3) + WALL_HEADROOM

    def monotonic(self) -> float:
        return self.now

    def wall(self) -> float:
        return self.wall_epoch + (self.now - VIRTUAL_EPOCH)

    def elapsed(self) -> float:
        return self.now - VIRTUAL_EPOCH


class World:
    """The fake side of a run: the clock, the scripted happenings, the wrappers and their
    helper processes. Backend calls arrive on the supervisor's CallRunner thread, so every
    change goes through ``lock``."""

    def __init__(self, *, works: Mapping[str, tuple[Work, ...]], kill_grace: float,
                 launches: tuple[Launch, ...] = ()) -> None:
        self.lock = threading.RLock()
        self.clock = Clock()
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self.works = works
        self.kill_grace = kill_grace
        self._launches = list(launches)
        self.watcher: FakeWatcher | None = None
        self.run: RunPaths | None = None
        self.wrappers: list[FakeWrapper] = []
        self.launched: dict[Path, tuple[str, int]] = {}  # a headless generation's task name and attempt
        self.crash_at: float | None = None  # virtual seconds into the run
        self.sent: list[str] = []
        self._helper_r, self._helper_w = os.pipe2(os.O_CLOEXEC)
        self._launcher_pids = itertools.count((1 << 23) + 1)  # above the largest pid_max (2**22): nobody's

    # -- time --
    def at(self, when: float, fn: Callable[[], None]) -> None:
        """Run ``fn`` at virtual second ``when`` of the run."""
        with self.lock:
            heapq.heappush(self._heap, (VIRTUAL_EPOCH + when, next(self._seq), fn))

    def after(self, delay: float, fn: Callable[[], None]) -> None:
        self.at(self.clock.elapsed() + max(0.0, delay), fn)

    def pass_unseen(self, seconds: float) -> None:
        """From a happening: ``seconds`` go by before the supervisor's next look (it was
        stopped); what falls due meanwhile happens in this same ``fire_due``."""
        with self.lock:
            self.clock.now += seconds

    def next_due(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def fire_due(self) -> None:
        with self.lock:
            while self._heap and self._heap[0][0] <= self.clock.now:
                heapq.heappop(self._heap)[2]()

    def advance(self, seconds: float) -> None:
        """Let virtual time pass with no supervisor (between a crash and a resume)."""
        with self.lock:
            end = self.clock.now + seconds
            while (due := self.next_due()) is not None and due <= end:
                self.clock.now = max(self.clock.now, due)
                self.fire_due()
            self.clock.now = end
            self.notice()

    def notice(self) -> None:
        """What the supervisor did since the last look: a helper it SIGKILLed is a wrapper
        that vanished."""
        with self.lock:
            for w in self.wrappers:
                w.notice()

    # -- the pieces a supervisor is given --
    def new_launcher(self, env: Mapping[str, str]) -> FakeLauncher:
        with self.lock:
            return FakeLauncher(self, self._launches.pop(0) if self._launches else Launch())

    def work(self, gen: GenPaths) -> tuple[str, int, Work]:
        """The task name and attempt a wrapper was written for (its exports, SPEC §5.3), and
        that attempt's script; a task without one succeeds after a second."""
        name, attempt = self.launched.get(gen.dir) or _wrapper_exports(gen.wrapper)
        script = self.works.get(name) or (Work(),)
        return name, attempt, script[min(attempt, len(script)) - 1]

    # -- helpers: the real processes that stand for wrappers --
    def spawn_helper(self, gen: GenPaths) -> int:
        actions = [(os.POSIX_SPAWN_DUP2, self._helper_r, 0),
                   (os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0),
                   (os.POSIX_SPAWN_OPEN, 2, "/dev/null", os.O_WRONLY, 0)]
        # the generation's directory in its command line, as a headless wrapper's (resume checks it)
        return os.posix_spawn("/bin/sh", ["/bin/sh", "-c", "read _", str(gen.dir)], {}, file_actions=actions)

    def send(self, kind: str, tasks: tuple[Any, ...]) -> str:
        """An inbox message, written as the CLI writes it, and the file event it makes."""
        assert self.run is not None, "no run to send to yet"
        msg_id = inbox.send(self.run, kind, tasks=list(tasks))
        self.sent.append(msg_id)
        if self.watcher is not None:
            self.watcher.post(self.run.inbox, msg_id)
        return msg_id

    def close(self) -> None:
        """Every helper gone and reaped; the helpers' pipe closed."""
        with self.lock:
            for w in self.wrappers:
                w.reap()
            os.close(self._helper_w)
            os.close(self._helper_r)


_ARGUMENTS = 'set -- "${1-}" '  # how a pane's own wrapper sets its arguments (wrapper.render)


def _wrapper_exports(path: Path) -> tuple[str, int]:
    """Task name and attempt from a pane's own wrapper: its arguments (values ``shlex``-quoted)."""
    for line in path.read_text().splitlines():
        if line.startswith(_ARGUMENTS):
            return _identity(shlex.split(line[len(_ARGUMENTS):]))
    raise AssertionError(f"{path}: no wrapper arguments")


def _identity(words: list[str]) -> tuple[str, int]:
    """Task name and attempt from a wrapper's arguments (``wrapper.arguments``: NAME=VALUE words)."""
    exports = dict(w.split("=", 1) for w in words[3:words.index("--")])
    return exports["ZELLIJ_SWARM_TASK"], int(exports["ZELLIJ_SWARM_ATTEMPT"])


def _stamp(path: Path, wall: float) -> None:
    os.utime(path, (wall, wall))


# ----- wrappers -----------------------------------------------------------------------------

class FakeWrapper:
    """One generation's wrapper: the files ``wrapper.sh`` writes, in its order, at virtual
    times; its pid is a real helper process."""

    def __init__(self, world: World, gen: GenPaths, *, claimed: bool, pane_id: str | None = None,
                 launcher: FakeLauncher | None = None) -> None:
        self.world = world
        self.gen = gen
        self.claimed = claimed
        self.pane_id = pane_id
        self.launcher = launcher
        self.name, self.attempt, self.work = world.work(gen)
        self.pid: int | None = None
        self.exited = False  # its helper has ended (a zombie until the world closes)
        self.running = False
        self.reacting = False  # its SIGTERM has reached it
        self.ran = False  # it claimed the generation and ran its worker
        self.leader: int | None = None  # a pane leader outliving it (``leader_to_mark``)
        world.wrappers.append(self)

    def _write(self, name: str, text: str, *, append: bool = True, exclusive: bool = False,
               notify: bool = True) -> bool:
        path = self.gen.dir / name
        flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | (os.O_APPEND if append else os.O_TRUNC)
        if exclusive:
            flags |= os.O_EXCL
        try:
            fd = os.open(path, flags, 0o600)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w") as f:
            f.write(text)
        _stamp(path, self.world.clock.wall())
        if notify and self.world.watcher is not None:
            self.world.watcher.post(self.gen.dir, name)
        return True

    def spawn(self) -> None:
        """Its process, which has not claimed anything yet."""
        if self.pid is None:
            self.pid = self.world.spawn_helper(self.gen)

    def start(self) -> bool:
        """Claim, then the launch heartbeat. False when the claim was taken: a wrapper that
        finds it taken exits 0 without running anything (SPEC §5.1)."""
        self.spawn()
        if self.work.claim_fails_when_full and rundir.unwritable(self.gen.dir) and \
                self._write("claim", "", append=False, exclusive=True):
            self.running = True
            self.world.after(0.0, lambda: self._ended(0))  # ran nothing
            return True
        if not self._write("claim", f"{self.pid}\n", append=False, exclusive=not self.claimed):
            self.end_helper()
            return False
        self.running = self.ran = True
        w = self.work
        if w.silent_when_full and rundir.unwritable(self.gen.dir):
            self.world.after(w.after, lambda: self._ended(w.code << 8))
            return True
        pane = json.dumps(self.pane_id) if self.pane_id is not None else "null"
        self._write("heartbeat.jsonl", f'{{"event":"started","pid":{self.pid},"pane_id":{pane}}}\n')
        if w.cwd_missing:
            self.world.after(0.0, lambda: self.exit(1, sidecar="- cwd_missing"))
            return True
        for every, name in ((w.output_every, "output.log"), (w.beat_every, "heartbeat.jsonl")):
            if every:
                self._repeat(every, name)
        self.world.after(w.after, lambda: self.vanish(signal.SIGKILL) if w.vanishes else
                         self._ended(w.code << 8) if w.unrecorded else self.exit(w.code))
        return True

    def _repeat(self, every: float, name: str) -> None:
        def tick() -> None:
            if self.running:
                self._write(name, "alive\n" if name == "output.log" else '{"event":"alive"}\n')
                self.world.after(every, tick)
        self.world.after(every, tick)

    def notice(self) -> None:
        if self.running and self._helper_gone():  # the supervisor SIGKILLed the wrapper itself
            self.vanish(signal.SIGKILL)

    def signalled(self, sig: signal.Signals) -> bool:
        """A signal of the ladder reaches the worker; False once it has ended (nothing left
        to reach)."""
        if not self.running:
            return False
        if sig == signal.SIGKILL:
            self.world.after(0.0, lambda: self.exit(KILL))
        elif not self.reacting:
            self.reacting = True
            if self.work.term != "ignores":
                self.world.after(self.work.term_takes, lambda: self.exit(0 if self.work.term == "traps" else TERM))
        return True

    def exit(self, code: int, *, sidecar: str | None = None) -> None:
        """The worker ended with ``code``: follow-ups, the sidecar (the commit marker), the
        ``exited`` line, then the wrapper's own end."""
        if not self.running:
            return
        if self.work.followups:
            lines = "".join(json.dumps(dict(f)) + "\n" for f in self.work.followups)
            self._write("artifacts/followups.jsonl", lines, notify=False)  # a subdirectory: no event
        self._write("exit", (sidecar or str(code)) + "\n", append=False)
        self._write("heartbeat.jsonl", f'{{"event":"exited","code":{code}}}\n')
        self._ended(code << 8)

    def leader_to_mark(self) -> None:
        """Its pane's leader, which outlives its worker's end by the session's loss, the
        hang-up that reached it still to be marked: a stand-in process with the wrapper's
        command line (``procs.wrapper_process`` finds it), there until the scenario ends. (The
        helper is the second stage, which ends with its worker.) A leader gone with no mark saw
        no hang-up, and its worker's SIGHUP was its own."""
        if self.running and self.leader is None:
            self.leader = self.world.spawn_helper(self.gen)

    def hang_up(self) -> None:
        """Its pane's terminal hangs up: the pane leader leaves its mark and forwards the
        hang-up; the worker dies of it, and the wrapper records 129."""
        if self.running:
            self._write("hangup", "", append=False, notify=False)
            self.exit(HUP)

    def vanish(self, sig: int) -> None:
        """The wrapper dies without recording anything."""
        if self.running:
            self._ended(sig)

    def _ended(self, wait_status: int) -> None:
        self.running = False
        self.end_helper()
        if self.launcher is not None:
            self.launcher.reply(Ended(self.pid, wait_status))  # type: ignore[arg-type]

    def end_helper(self) -> None:
        """SIGKILL the helper and wait until it has ended, so that its pidfd is readable when
        this returns. It is not reaped (see ``reap``)."""
        self.running = False
        if self.pid is None or self.exited:
            return
        os.kill(self.pid, signal.SIGKILL)  # our unreaped child: the pid is nobody else's
        os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT)
        self.exited = True

    def _helper_gone(self) -> bool:
        if self.pid is not None and not self.exited:
            self.exited = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        return self.exited

    def reap(self) -> None:
        """The scenario is over. Until now every ended helper stayed a zombie, so that its pid
        could not be given to another process while the supervisor may still look for it: the
        virtual wall clock runs ahead of the real one, so a recycled pid's process would seem
        to have started before the wrapper ended, and the end-of-run sweep (``procs.marked``
        by session) would take it for one of the run's and end it."""
        self.end_helper()
        if self.pid is not None:
            os.waitpid(self.pid, 0)
            self.pid = None
        if self.leader is not None:
            os.kill(self.leader, signal.SIGKILL)
            os.waitpid(self.leader, 0)
            self.leader = None


class FakeSignaller:
    """The ladder's signals (``stopping.Signaller``) as the scripted workers take them."""

    def __init__(self, world: World) -> None:
        self.world = world

    def deliver(self, gen: GenPaths, sig: signal.Signals | None,
                find: Callable[[], list[psutil.Process]]) -> stopping.Delivery:
        with self.world.lock:
            if sig is None:
                return stopping.Delivery([], None)
            at = self.now()
            reached = [w for w in self.world.wrappers if w.gen.dir == gen.dir and w.signalled(sig)]
            # a worker that traps the signal has a handler for it (procs.catches); one that
            # ignores it, or dies of it, has none
            return stopping.Delivery([], at if reached else None, any(w.work.term == "traps" for w in reached))

    def now(self) -> float:
        return self.world.clock.wall()


# ----- the launcher -------------------------------------------------------------------------

class _Pipe:
    """A real descriptor that is readable exactly while something is waiting to be read."""

    def __init__(self) -> None:
        self.r, self.w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    def wake(self) -> None:
        if self.w >= 0:
            os.write(self.w, b"\0")

    def drain(self) -> None:
        try:
            while os.read(self.r, 4096):
                pass
        except (BlockingIOError, OSError):
            pass

    def close(self) -> None:
        for fd in (self.r, self.w):
            if fd >= 0:
                os.close(fd)
        self.r = self.w = -1


_PING = object()


class FakeLauncher:
    """``launcher.Launcher`` in virtual time: starts ``FakeWrapper``s and reports them."""

    def __init__(self, world: World, script: Launch) -> None:
        self.world = world
        self.script = script
        self._pipe = _Pipe()
        self._replies: list[Any] = []
        self.pid = next(world._launcher_pids)  # nobody's: no process is its child (the sweep looks)
        self.lost = False
        self.dead = False
        self.killed = False
        self.submitted = self.started = 0
        self.ping_unanswered = False
        self.usage: dict[str, float] | None = None  # a real launcher says, as it exits
        self.adopted = 0  # a fake wrapper leaves no process behind
        self.stopped = False
        if script.dies_after is not None:
            world.after(script.dies_after, self.die)
        if script.stops_after is not None:
            world.after(script.stops_after, self._stop)

    def _stop(self) -> None:
        self.stopped = True

    def fileno(self) -> int:
        return self._pipe.r

    def reply(self, item: Any) -> None:
        if isinstance(item, Ended) and self.script.reports_ends_after:
            self.world.after(self.script.reports_ends_after, lambda: self._reply(item))
            return
        self._reply(item)

    def _reply(self, item: Any) -> None:
        if not (self.dead or self.stopped) and self._pipe.w >= 0:
            self._replies.append(item)
            self._pipe.wake()

    def die(self) -> None:
        if not self.dead:
            self.dead = True
            self._pipe.wake()  # its reply pipe reads end-of-file

    def submit(self, requests: list[tuple[str, str, tuple[str, ...]]]) -> None:
        with self.world.lock:
            if self.dead:
                return
            self.submitted += len(requests)
            if self.script.dies_on_submit:
                self.world.after(0.0, self.die)
                return
            if self.stopped:
                return
            for token, _, argv in requests:
                # the run's worker.sh with MODE and the generation's arguments, or a pane's own
                # wrapper.sh [MODE]
                mode, args = wrapper.start_parts(argv)
                claimed = mode == "claimed"
                directory = Path(args[0]) if args else Path(argv[1]).parent
                gen = GenPaths(directory, _number(directory.parent.name), _number(directory.name))
                if args:
                    self.world.launched[gen.dir] = _identity(list(args))
                work = self.world.work(gen)[2]
                self.world.after(work.start_delay, lambda t=token, g=gen, c=claimed, w=work: self._start(t, g, c, w))

    def _start(self, token: str, gen: GenPaths, claimed: bool, work: Work) -> None:
        if self.dead or self.stopped:
            return  # a wrapper it had not started yet: never started
        if work.spawn_error is not None:
            self.reply(NotStarted(token, work.spawn_error))
            return
        w = FakeWrapper(self.world, gen, claimed=claimed, launcher=self)
        if self.script.claim_lag:
            w.spawn()
            self.world.after(self.script.claim_lag, w.start)
            self.die()
            return
        ran = w.start()
        if self.script.dies_unreported:
            self.die()
            return
        self.reply(Started(token, w.pid))  # type: ignore[arg-type]
        if not ran:
            self.reply(Ended(w.pid, 0))  # type: ignore[arg-type]

    def read(self) -> list[Any]:
        with self.world.lock:
            self._pipe.drain()
            out, self._replies = self._replies, []
            replies = []
            for item in out:
                if item is _PING:
                    self.ping_unanswered = False
                    continue
                if isinstance(item, Started):
                    self.started += 1
                replies.append(item)
            if self.dead:
                self.lost = True
            return replies

    def ping(self) -> None:
        if self.lost:
            return
        self.ping_unanswered = True
        self.reply(_PING)

    def kill(self) -> None:
        self.killed = True
        with self.world.lock:
            self.die()

    def end_status(self) -> str:
        self._pipe.close()
        return "did not answer for 5s and was killed" if self.killed else "killed by SIGKILL"

    def close(self, *, wait: bool) -> None:
        """Its supervisor is done with it: nothing is reported any more, but what was handed
        to it still starts (a real launcher reads its requests to the end of its pipe)."""
        self._pipe.close()


def _number(name: str) -> int:
    return int(name.rsplit("-", 1)[1])


# ----- the watcher --------------------------------------------------------------------------

class FakeWatcher:
    """The ``Watcher`` protocol: reports the files the fakes and the harness write into the
    watched directories (what inotify's COMPLETED mask reports of a real wrapper)."""

    def __init__(self, *, fails: bool = False) -> None:
        self._pipe = _Pipe()
        self._lock = threading.Lock()  # a pane's cancel is posted from the backend's thread
        self._watched: set[Path] = set()
        self._pending: list[Change] = []
        self.fails = fails  # no watch can be added (ENOSPC): the supervisor must poll

    def fileno(self) -> int:
        return self._pipe.r

    def add(self, directory: Path) -> None:
        if self.fails:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(directory))
        self._watched.add(Path(directory))

    def remove(self, directory: Path) -> None:
        self._watched.discard(Path(directory))

    def post(self, directory: Path, name: str) -> None:
        with self._lock:
            if Path(directory) in self._watched:
                self._pending.append(Change(Path(directory), name))
                self._pipe.wake()

    def read(self) -> list[Change]:
        with self._lock:
            self._pipe.drain()
            out, self._pending = self._pending, []
            return out

    def close(self) -> None:
        self._pipe.close()


# ----- the selector -------------------------------------------------------------------------

class FakeSelector(selectors.BaseSelector):
    """A real selector whose waiting is virtual (see the module docstring)."""

    def __init__(self, world: World, busy: Callable[[], bool]) -> None:
        self._real = selectors.DefaultSelector()
        self.world = world
        self._busy = busy
        self._real_deadline = time.monotonic() + REAL_LIMIT

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._real.unregister(fileobj)

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return self._real.get_map()

    def close(self) -> None:
        self._real.close()

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        world = self.world
        if time.monotonic() > self._real_deadline:
            raise Stuck(f"the supervisor took more than {REAL_LIMIT}s of real time")
        world.notice()
        world.fire_due()
        if ready := self._real.select(0):
            return ready
        if self._busy():  # a thread's answer is coming: real time, virtual time stands still
            return self._real.select(BUSY_WAIT)
        with world.lock:
            now = world.clock.now
            target = now + (timeout if timeout is not None else math.inf)
            if (due := world.next_due()) is not None:
                target = min(target, due)
            if world.crash_at is not None and target >= VIRTUAL_EPOCH + world.crash_at:
                world.clock.now = max(now, VIRTUAL_EPOCH + world.crash_at)
                world.crash_at = None
                raise SupervisorGone()
            if target - VIRTUAL_EPOCH > VIRTUAL_LIMIT:
                raise Stuck(f"nothing left to happen at virtual {now - VIRTUAL_EPOCH:.3f}s "
                            f"(the supervisor would wait {timeout}s)")
            world.clock.now = max(now, target)
            world.fire_due()
        return self._real.select(0)


# ----- the multiplexer ----------------------------------------------------------------------

class FakeMux:
    """The ``Backend`` protocol with panes whose wrappers are ``FakeWrapper``s."""

    def __init__(self, world: World, spec: Mux) -> None:
        self.world = world
        self.spec = spec
        self.name = spec.name
        self.output_copied_after_end = False
        self._scripts = {k: list(v) for k, v in spec.panes.items()}
        self._ids = itertools.count(1)
        self.session_up = True
        self._ending_sent = False
        self.calls: list[tuple[Any, ...]] = []  # what it was asked, in order: ("ended", task, status, label)…
        self.closed_failed: bool | None = None  # what close() was told: did anything not succeed
        self.ctx: RunContext | None = None
        self.place_on_disk: list[bool] = []  # at each launch: was the run's snapshot naming where the panes are?
        self.closed_panes: set[str] = set()
        self._cancelled_when_listed: dict[str, str] = {}  # pane id -> task its pane_listed cancels

    def open(self, ctx: RunContext) -> None:
        self.ctx = ctx
        if self.spec.open_error is not None:
            raise exc.BackendError(self.spec.open_error, f"cannot create the session ({self.spec.open_error})")
        if self.spec.session_lost_at is not None:
            self.world.at(self.spec.session_lost_at, self._lose_session)

    def shows(self, slot: int) -> bool:
        return slot <= self.spec.visible

    def pane_mode(self, slot: int) -> PaneMode | None:
        assert self.ctx is not None
        return PaneMode("FAKE_PANE", "fake_", self.ctx.paths.saved_env)

    def launch(self, batch: list[LaunchRequest]) -> list[PaneResult]:
        return [self._launch(req) for req in batch]

    def launch_seen(self) -> None:
        pass

    def _launch(self, req: LaunchRequest) -> PaneResult:
        with self.world.lock:
            self.calls.append(("launch", req.task_name))
            assert self.ctx is not None
            state = json.loads(self.ctx.paths.state.read_text()) if self.ctx.paths.state.exists() else {}
            self.place_on_disk.append(state.get("multiplexer") == self.place())
            if not self.session_up:
                return LaunchFailed("pane_call_failed", f"{self.name}: no session")
            script = self._scripts.get(req.task_name)
            pane = script.pop(0) if script else Pane()
            if pane.fails is not None:
                return LaunchFailed(pane.fails, f"{self.name}: {pane.fails}", unstartable=pane.unstartable)
            pane_id = f"fake_{next(self._ids)}"
            if pane.cancel_while_listed:
                self._cancelled_when_listed[pane_id] = req.task_name
            if pane.closed_at_once:
                self.closed_panes.add(pane_id)
            elif pane.dies_claiming:
                self.world.after(pane.delay, req.gen.claim.touch)
            elif pane.starts:
                self.world.after(pane.delay, lambda: self._start(req, pane_id, pane))
            if pane.cancel_while_opening:
                msg = self.world.send("cancel", (req.task_name,))
        if pane.cancel_while_opening:
            self._wait_consumed(msg)
        return PaneOpened(pane_id)

    def _wait_consumed(self, msg_id: str) -> None:
        """Hold the launch (as a slow multiplexer call would) until the supervisor has applied
        the cancel that arrived meanwhile."""
        assert self.world.run is not None
        deadline = time.monotonic() + 10.0
        while not (self.world.run.consumed / msg_id).exists():
            if time.monotonic() > deadline:
                raise Stuck("the cancel sent while a pane opened was never applied")
            time.sleep(0.001)

    def _start(self, req: LaunchRequest, pane_id: str, pane: Pane) -> None:
        if not self.session_up or (("abandon", pane_id) in self.calls and not pane.outlives_abandon):
            return  # its pane is gone before its wrapper ran
        w = FakeWrapper(self.world, req.gen, claimed=False, pane_id=pane_id)
        started = w.start()
        if started and self.spec.lost_unmarked:
            w.leader_to_mark()  # there from the pane's start, as a leader is
        if started and pane.closed_after is not None:
            self.world.after(pane.closed_after, w.hang_up)

    def _lose_session(self) -> None:
        self.session_up = False
        for w in self.world.wrappers:
            if w.pane_id is None:
                continue
            w.exit(HUP) if self.spec.lost_unmarked else w.hang_up()  # (its leader lives on: ``_start``)

    def ended(self, req: LaunchRequest, pane_id: str | None, status: str, label: str) -> None:
        with self.world.lock:
            self.calls.append(("ended", req.task_name, status, label))

    def waiting(self, req: LaunchRequest, pane_id: str | None, waiting: bool) -> None:
        with self.world.lock:
            self.calls.append(("waiting", req.task_name, waiting))

    def abandon(self, pane_id: str | None, req: LaunchRequest) -> None:
        with self.world.lock:
            self.calls.append(("abandon", pane_id))

    def session_alive(self) -> bool:
        if self.spec.cancel_while_ending and not self._ending_sent:
            self._ending_sent = True
            self.world.send("cancel", ())
        return self.session_up

    def pane_listed(self, pane_id: str | None) -> bool | None:
        with self.world.lock:
            self.calls.append(("pane_listed", pane_id))
            listed = False if pane_id in self.closed_panes or not self.session_up else None
            task = self._cancelled_when_listed.pop(pane_id or "", None)
            msg = self.world.send("cancel", (task,)) if task is not None else None
        if msg is not None:
            self._wait_consumed(msg)
        return listed

    def pane_exited(self, pane_id: str | None) -> None:
        return None  # a pane of this world closes with its wrapper: nothing stays listed

    def attach_command(self) -> tuple[list[str], dict[str, str]] | None:
        return None

    def close(self, *, cancelled: bool, failed: bool = True) -> None:
        with self.world.lock:
            self.calls.append(("close", cancelled))
            self.closed_failed = failed

    def leftover_hint(self) -> str | None:
        return None

    def place(self) -> dict[str, Any] | None:
        return {"backend": "fake", "session": self.name}  # no multiplexer a resume knows: headless


# ----- running a scenario -------------------------------------------------------------------

class QuietReporter:
    """The ``Reporter`` protocol, recording instead of printing."""

    wants_progress = False

    def __init__(self, world: World) -> None:
        self.world = world
        self.problems: list[str] = []  # what every output mode shows, --output quiet included
        self.warned: list[tuple[float, str]] = []  # (virtual second of the run, code) of each warning told

    def started(self, run: RunPaths, total: int) -> None:
        self.world.run = run

    def warning(self, w: dict[str, Any]) -> None:
        self.warned.append((self.world.clock.elapsed(), w["code"]))

    def notice(self, text: str) -> None:
        pass

    def problem(self, text: str) -> None:
        self.problems.append(text)

    def task_ended(self, task: Any, gen: GenPaths | None) -> None:
        pass

    def running_headless(self) -> None:
        pass

    def progress(self, counts: dict[str, int], now: float) -> None:
        pass

    def finished(self, snapshot: dict[str, Any], exit_code: int) -> None:
        pass


class EveryGeneration(dict[int, LiveGen]):
    """The supervisor's generations in flight, by slot, remembering every one it ever had:
    each move of theirs went through ``LiveGen.move``, which raises on one its table forbids,
    so a scenario that makes an illegal move fails; ``check_ended`` asserts that every
    generation of a run that returned went all the way to ``done``."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[LiveGen] = []

    def __setitem__(self, slot: int, lg: LiveGen) -> None:
        self.seen.append(lg)
        super().__setitem__(slot, lg)

    def check_ended(self) -> None:
        for lg in self.seen:
            assert lg.phase is GenPhase.DONE, f"{lg.task.name} gen {lg.gen.gen}: left {lg.phase} ({lg.history})"


@dataclass
class Result:
    exit_code: int | None  # None: the supervisor vanished (``crash_at``)
    tasks: dict[str, Any]  # name -> the supervisor's TaskRecord (status, reason, attempts, history…)
    events: list[dict[str, Any]]
    summary: dict[str, Any] | None
    replies: list[dict[str, Any]]  # the answers to the inbox messages, in sending order
    mux_calls: list[tuple[Any, ...]]
    problems: list[str]  # the lines the reporter was asked to show whatever the output mode
    epoch: float  # the run's virtual wall time zero
    warned: list[tuple[float, str]] = field(default_factory=list)  # the reporter's warnings: (when told, code)
    generations: list[LiveGen] = field(default_factory=list)  # every generation the supervisor had in flight
    let_go: list[str] = field(default_factory=list)  # the ended tasks whose records it let go of, in that order
    made: list[str] = field(default_factory=list)  # the tasks whose records it made (TaskTable), in that order
    ran: dict[str, int] = field(default_factory=dict)  # task name -> how many of its wrappers ran its worker
    # at each pane launch: whether the run's snapshot named where its panes are (``place``)
    place_on_disk: list[bool] = field(default_factory=list)

    @property
    def labels(self) -> list[str]:
        """Each event as ``"<event> <task>"`` (``"warning <code>"`` for a warning)."""
        out = []
        for e in self.events:
            what = e.get("code") if e["event"] == "warning" else e.get("task")
            out.append(f"{e['event']} {what}" if what else e["event"])
        return out

    def warnings(self, task: str | None = None) -> list[str]:
        return [e["code"] for e in self.events if e["event"] == "warning" and (task is None or e.get("task") == task)]

    def at(self, label: str) -> float:
        """When the first event with ``label`` happened, in virtual seconds of the run."""
        for lab, e in zip(self.labels, self.events, strict=True):
            if lab == label:
                return round(e["ts"] - self.epoch, 3)
        raise AssertionError(f"no event {label!r} in {self.labels}")

    def assert_order(self, *labels: str) -> None:
        """``labels`` occur in this order (other events may come between)."""
        seen = self.labels
        pos = 0
        for lab in labels:
            try:
                pos = seen.index(lab, pos) + 1
            except ValueError:
                raise AssertionError(f"{lab!r} missing after position {pos} (wanted in order {list(labels)}):\n"
                                     + "\n".join(seen)) from None


class Harness:
    """One state directory and one ``World``: a run, and the resumes of that run. A context
    manager: leaving it ends every helper process (a crashed run's wrappers outlive their
    supervisor, as real ones do, until then)."""

    def __init__(self, *, works: Mapping[str, tuple[Work, ...]] | None = None,
                 launches: tuple[Launch, ...] = (), mux: Mux | None = None, watch_fails: bool = False,
                 **flags: Any) -> None:
        self.state_dir = state_dir = _scratch_dir()
        self.flags = {"jobs": 2, "backend": mux.name if mux else "headless", "output": "quiet",
                      "state_dir": str(state_dir), "heartbeat_timeout": 1.0, **flags}
        self.resolved = settings.resolve(self.flags, {})
        self.world = World(works=works or {}, kill_grace=self.resolved.kill_grace, launches=launches)
        self.mux_spec = mux
        self.watch_fails = watch_fails
        self.mux: FakeMux | None = None

    def __enter__(self) -> Harness:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.world.close()
        shutil.rmtree(self.state_dir, ignore_errors=True)

    def run(self, tasks: list[swarmfile.TaskSpec], *, messages: tuple[Message, ...] = (),
            crash_at: float | None = None, stopped: tuple[float, float] | None = None,
            slurm_job: str | None = None) -> Result:
        """Run ``tasks`` to the end, or until virtual second ``crash_at``, when the supervisor
        vanishes (its records stay as its last loop turn left them; its workers run on).
        ``stopped=(at, seconds)``: the supervisor is stopped (SIGSTOP, Ctrl-Z) at virtual second
        ``at`` for ``seconds``: the world goes on, and it sees all that happened at once."""
        plan = RunPlan(tasks=tasks, settings=self.resolved, cwd=str(self.state_dir), env={}, argv=["harness"],
                       slurm_job=slurm_job)  # ``slurm_job``: the supervisor runs in that batch job (``submit``)
        self.mux = FakeMux(self.world, self.mux_spec) if self.mux_spec else None
        self._send(messages, since=0.0)
        if stopped is not None:
            self.world.at(stopped[0], lambda: self.world.pass_unseen(stopped[1]))
        return self._supervise(plan, self.mux or HeadlessBackend(), crash_at)

    def resume(self, *, after: float = 0.0, messages: tuple[Message, ...] = ()) -> Result:
        """Let ``after`` virtual seconds pass without a supervisor, then resume the run as
        ``zellij-swarm resume`` does (``engine.resume``: new generations headless)."""
        run = self.world.run
        assert run is not None
        self.world.advance(after)
        rec = _load_when_unlocked(run)
        plan = RunPlan(tasks=[], settings=resume.resolved_settings(rec.meta), name=rec.meta.get("name"),
                       source=rec.meta.get("source", ""), cwd=rec.meta["cwd"], env=rec.env, argv=["harness"],
                       resume=rec, run_dir=run.dir)
        self._send(messages, since=self.world.clock.elapsed())
        return self._supervise(plan, HeadlessBackend(), None)

    def retry(self, names: tuple[str, ...] = (), *, crash_at: float | None = None) -> Result:
        """``zellij-swarm retry`` of the ended run: the tasks it would run again (or ``names``),
        in the same run record, headless (until virtual second ``crash_at`` of it, as ``run``)."""
        run = self.world.run
        assert run is not None
        rec = resume.load(run, ended=True)
        rec.retry = retry_selection(snapshot_file.load(run.summary), rec.specs, list(names), run.run_id)
        plan = RunPlan(tasks=[], settings=resume.resolved_settings(rec.meta), name=rec.meta.get("name"),
                       source=rec.meta.get("source", ""), cwd=rec.meta["cwd"], env=rec.env, argv=["harness"],
                       resume=rec, run_dir=run.dir, retrying=True)
        return self._supervise(plan, HeadlessBackend(), None if crash_at is None else
                               self.world.clock.elapsed() + crash_at)

    def _send(self, messages: tuple[Message, ...], *, since: float) -> None:
        for m in messages:
            self.world.at(since + m.at, lambda m=m: self.world.send(m.kind, m.tasks))

    def _supervise(self, plan: RunPlan, backend: Any, crash_at: float | None) -> Result:
        world = self.world
        world.crash_at = crash_at
        world.watcher = FakeWatcher(fails=self.watch_fails)
        reporter = QuietReporter(world)

        def busy() -> bool:
            # Called only once run() has made its CallRunners; a rename must fail here, loudly.
            return bool(sup.calls.busy or sup.proc_calls.busy)

        sup = Supervisor(plan, backend, reporter, clock=world.clock.monotonic, wallclock=world.clock.wall,
                         watcher=world.watcher, selector=lambda: FakeSelector(world, busy),
                         launcher=world.new_launcher, signaller=FakeSignaller(world), handle_signals=False)
        sup.live = generations = EveryGeneration()
        # the records of the tasks that ended, which the supervisor lets go of (EndedTasks)
        ended: dict[str, Any] = {}
        let_go = sup.ended.add

        def keep(task: Any) -> Any:
            ended[task.name] = task
            let_go(task)

        sup.ended.add = keep  # type: ignore[method-assign]
        made: list[str] = []
        make = sup.tasks._make

        def make_noted(order: int, spec: Any) -> Any:
            made.append(spec.name)
            return make(order, spec)

        sup.tasks._make = make_noted
        code: int | None = None
        try:
            code = sup.run()
        except SupervisorGone:
            pass
        if code is not None:
            generations.check_ended()
        assert world.run is not None
        events = records.read_events(world.run.events)
        summary = snapshot_file.load(world.run.summary) if world.run.summary.exists() else None
        sup.tasks._make = make  # what is made from here on is made for the result, not by the run
        tasks = sorted([*ended.values(), *sup.tasks.values()], key=lambda t: t.order)
        return Result(code, {t.name: t for t in tasks}, events, summary, self._replies(),
                      list(self.mux.calls) if self.mux else [], reporter.problems, world.clock.wall_epoch,
                      reporter.warned, generations.seen, list(ended), made,
                      dict(collections.Counter(w.name for w in world.wrappers if w.ran)),
                      list(self.mux.place_on_disk) if self.mux else [])

    def _replies(self) -> list[dict[str, Any]]:
        run = self.world.run
        assert run is not None
        out = []
        for msg_id in self.world.sent:
            path = run.replies / msg_id
            out.append(json.loads(path.read_text()) if path.exists() else {})
        return out


def _load_when_unlocked(run: RunPaths) -> resume.Recovered:
    """``resume.load``, once the vanished supervisor's run lock is free. Its descriptor is
    closed, but a helper that another run of ``play_concurrently`` is spawning at that very
    moment holds a copy of every descriptor between its fork and its exec (close-on-exec
    closes it only then): one process hosting several supervisors, which a real one never does."""
    deadline = time.monotonic() + 2.0
    while True:
        try:
            return resume.load(run)
        except exc.RunBusy:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.001)


def _scratch_dir() -> Path:
    """A private state directory, in memory when there is one: the supervisor fsyncs
    ``run.json``, ``summary.json`` and every ``exit.json``, several milliseconds each on a
    disk, and nothing a scenario checks depends on the medium. Not pytest's ``tmp_path``:
    the first use of its base directory in a session deletes old sessions' directories, which
    other suites on the machine can fill with enough files to take seconds."""
    shm = Path("/dev/shm")
    where = shm if shm.is_dir() and os.access(shm, os.W_OK) else None
    return Path(tempfile.mkdtemp(prefix="zsw-harness-", dir=where))


def play_concurrently(plays: list[Callable[[], _T]], *, workers: int = 3) -> list[_T | BaseException]:
    """Run independent scenarios a few at a time, each as it would run alone; returns each
    one's result, or what it raised. Virtual time makes every run deterministic whatever the
    real timing, and much of a run's real time is waiting (the supervisor's ``/proc`` scans and
    thread hand-offs, the kernel tearing down its inotify watch): overlapping runs hides it.
    Afterwards no thread any run started is alive and no helper process is left."""
    before = set(threading.enumerate())
    # a process another test of this worker has not reaped yet is not one the runs left
    children_before = {p.pid for p in psutil.Process().children(recursive=True)}

    def attempt(play: Callable[[], _T]) -> _T | BaseException:
        try:
            return play()
        except BaseException as e:
            return e

    with ThreadPoolExecutor(workers, thread_name_prefix="harness") as pool:
        results = list(pool.map(attempt, plays))
    deadline = time.monotonic() + 5.0
    while (left := [t for t in threading.enumerate() if t not in before and t.is_alive()]):
        if time.monotonic() > deadline:
            raise AssertionError(f"threads left behind by the runs: {sorted(t.name for t in left)}")
        time.sleep(0.005)
    while children := [p for p in psutil.Process().children(recursive=True) if p.pid not in children_before]:
        if time.monotonic() > deadline:
            raise AssertionError(f"processes left behind by the runs: {[p.pid for p in children]}")
        time.sleep(0.005)
    return results
