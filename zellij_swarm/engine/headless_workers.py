"""Headless workers, on the supervisor's side: the launcher that starts their wrappers (off
the loop's thread), the generations it was given and has started, and what happens when it
dies.

The launcher reports each start and end through its pipe (``on_readable``). Its death (EOF:
the OOM killer, a worker that killed it) is SPEC §7 ``launcher_lost``: the wrappers it had
started live on in their own sessions and are followed by pid, as ``resume`` follows adopted
ones; those it had not reported started are taken back through their claims. A new launcher
takes over — unless launchers keep dying with work given and none of it started
(``MAX_IDLE_LOSSES`` in a row: they cannot work here), when ``gave_up`` is called. A launcher
that stops answering its pings while it has work is killed and taken over the same way.
"""

from __future__ import annotations

import selectors
from collections.abc import Callable
from dataclasses import dataclass, replace

from zellij_swarm.backends.base import LaunchFailed, LaunchRequest, LaunchResult, Queued
from zellij_swarm.engine.live import LiveGen
from zellij_swarm.engine.timers import Timers
from zellij_swarm.records import generation_files
from zellij_swarm.records.task import TaskRecord
from zellij_swarm.worker import procs
from zellij_swarm.worker.launcher import (
    ANSWER_TIMEOUT,
    SCRIPT,
    Ended,
    Launcher,
    NotStarted,
    Orphaned,
    Started,
    WorkerEnded,
)

MAX_IDLE_LOSSES = 3  # launchers lost in a row, each given wrappers and none started
RECLAIM_TRIES = 100  # looks at a claim, or for a wrapper, still being written or exec'd, 10 ms apart


@dataclass(frozen=True)
class Followers:
    """What the supervisor does with what the launcher reports."""

    started: Callable[[LiveGen, int], None]  # the wrapper runs as that pid, our child
    launched: Callable[[LiveGen, LaunchResult], None]  # how a (re)start went
    ended: Callable[[LiveGen, int | None], None]  # the wrapper is gone (wait status, if known)
    follow_pid: Callable[[LiveGen], None]  # not our child any more: follow it by pidfd
    worker_ended: Callable[[LiveGen, int], None]  # the worker its killed wrapper left ended (wait status)
    worker_unreported: Callable[[LiveGen], None]  # ... and no launcher is left to tell its end
    end_tree: Callable[[LiveGen], None]  # it was ended while its start was unknown
    warn: Callable[[str, str, TaskRecord | None], None]
    gave_up: Callable[[], None]  # no launcher can be had: nothing more can start


class HeadlessWorkers:
    def __init__(self, env: dict[str, str], *, selector: selectors.BaseSelector, timers: Timers,
                 new_launcher: Callable[[dict[str, str]], Launcher], followers: Followers) -> None:
        self._env = env
        self._sel = selector
        self._timers = timers
        self._new_launcher = new_launcher
        self._on = followers
        self.launcher = self._open()
        self.queued: dict[str, LiveGen] = {}  # launcher token -> generation waiting to start
        self.children: dict[int, LiveGen] = {}  # wrapper pid -> generation the launcher started
        self.orphans: dict[int, LiveGen] = {}  # worker pid -> generation whose wrapper was killed (Orphaned)
        self._lost_idle = 0  # launchers lost in a row, given work and none of it started
        self._launcher_lost = False  # one was: what it had adopted went to init, unseen
        self._timers.after(ANSWER_TIMEOUT, self._watch)

    def start(self, requests: list[LaunchRequest]) -> list[LaunchResult]:
        """Hand wrappers to the launcher; each start and end comes back through its pipe."""
        if self.launcher.lost:
            return [LaunchFailed("launcher_lost", "no launcher to start the wrapper: it died and could not be "
                                                  "restarted") for _ in requests]
        tokens = [f"{r.slot}.{r.gen.gen}" for r in requests]
        if requests:
            # (a Slurm step's srun, its ``prefix``, runs its wrapper on a node: no directory here)
            self.launcher.submit([(t, "" if r.prefix else str(r.gen.dir), r.headless_argv())
                                  for t, r in zip(tokens, requests, strict=True)])
        return [Queued(t) for t in tokens]

    def live_launcher(self) -> int | None:
        """The launcher's pid while it lives and every wrapper it started has ended (reported
        so, or followed to its end by pidfd): its live children are then what it adopted
        (``_launcher``'s subreaper). None otherwise — a launcher lost may have a stranger's
        pid by now. (One that dies during the sweep stays our unreaped child, its pid nobody
        else's, and what it had adopted goes to init: no stranger's child is taken for ours.)"""
        if self.launcher.lost or self.launcher.killed or self.queued or self.orphans or \
                any(not lg.done for lg in self.children.values()):
            return None
        return self.launcher.pid

    def leftovers_alive(self) -> bool:
        """Whether a process a worker left may live, outside its wrapper's group: the
        launcher, the subreaper of what the wrappers leave, last said it had a child that is
        no wrapper — or a launcher was lost, whose adopted processes went to init, unseen."""
        return self._launcher_lost or self.launcher.adopted > 0

    def wait_for(self, token: str, lg: LiveGen) -> None:
        """``lg`` was queued under ``token``: its start is reported later."""
        self.queued[token] = lg

    def on_readable(self) -> None:
        for reply in self.launcher.read():
            if isinstance(reply, Started) and (lg := self.queued.pop(reply.token, None)) is not None:
                self.children[reply.pid] = lg
                lg.child = True
                self._on.started(lg, reply.pid)
            elif isinstance(reply, NotStarted) and (lg := self.queued.pop(reply.token, None)) is not None:
                self._on.launched(lg, LaunchFailed("spawn_failed", f"cannot start the wrapper: {reply.message}"))
            elif isinstance(reply, Orphaned) and (lg := self.children.get(reply.pid)) is not None and not lg.done:
                lg.worker_pid = reply.worker  # told before its wrapper's end
                self.orphans[reply.worker] = lg
            elif isinstance(reply, Ended) and (lg := self.children.pop(reply.pid, None)) is not None and not lg.done:
                self._on.ended(lg, reply.status)
            elif isinstance(reply, WorkerEnded) and (lg := self.orphans.pop(reply.worker, None)) is not None \
                    and not lg.done:
                self._on.worker_ended(lg, reply.status)
        if self.launcher.lost:
            self._lost()

    def follow_all(self) -> None:
        """Shutdown: the launcher may be stopped or stuck, so every worker it started is
        followed by pidfd as well — the run ends when they do."""
        for lg in list(self.children.values()):
            if lg.pidfd is None and not lg.done:
                self._on.follow_pid(lg)
        for lg in list(self.orphans.values()):  # the killed wrappers' workers: looked for as well
            if not lg.done:
                self._on.worker_unreported(lg)

    def close(self, *, wait: bool) -> None:
        self.launcher.close(wait=wait)

    def _open(self) -> Launcher:
        launcher = self._new_launcher(self._env)
        self._sel.register(launcher.fileno(), selectors.EVENT_READ, self.on_readable)
        return launcher

    def _watch(self) -> None:
        """Every ANSWER_TIMEOUT while the launcher has wrappers to start or to report on, it
        must have answered the last ping: one that has not is stopped or stuck."""
        launcher = self.launcher
        if not launcher.lost and (self.children or self.queued):
            if launcher.ping_unanswered:
                launcher.kill()
            else:
                launcher.ping()
        self._timers.after(ANSWER_TIMEOUT, self._watch)

    def _lost(self) -> None:
        old = self.launcher
        self._launcher_lost = True
        self._sel.unregister(old.fileno())
        how = old.end_status()
        # it started nothing: it said so of none, and no wrapper it was given has claimed its
        # generation (a batch is answered in one write: one killed before it, after its spawns,
        # said nothing of wrappers that run)
        idle = old.submitted and not old.started and not any(
            generation_files.claimed_by_wrapper(lg.gen) for lg in self.queued.values())
        self._lost_idle = self._lost_idle + 1 if idle else 0
        restart = self._lost_idle < MAX_IDLE_LOSSES
        if restart:
            try:
                self.launcher = self._open()
            except OSError as e:
                how += f", and a new one could not start ({e.strerror})"
                restart = False
        self._on.warn("launcher_lost", f"the worker launcher (pid {old.pid}) {how}; "
                      + ("started a new one" if restart else "no more tasks are started"), None)
        started, self.children = self.children, {}
        queued, self.queued = self.queued, {}
        for lg in started.values():
            lg.child = False
            self._on.follow_pid(lg)
        orphans, self.orphans = self.orphans, {}  # the killed wrappers' workers: no launcher tells their ends
        for lg in orphans.values():
            if not lg.done:
                self._on.worker_unreported(lg)
        for lg in queued.values():
            self._reclaim(lg, tries=RECLAIM_TRIES)
        if not restart:
            self._on.gave_up()

    def _reclaim(self, lg: LiveGen, *, tries: int) -> None:
        """A generation handed to a launcher that died before saying whether it started it:
        its claim tells. Unclaimed (or held by this supervisor, or by a wrapper gone before it
        wrote its pid) it never ran — start it again, claimed; claimed by a pid, its wrapper
        runs — follow it. A claim this supervisor holds and had handed on (a start, claimed,
        to a launcher that died too) tells nothing: a process that runs its wrapper does."""
        if lg.collected:
            return
        owner = generation_files.claim_owner(lg.gen)
        if owner is None and procs.claim_for_supervisor(lg.gen):
            owner = generation_files.SUPERVISOR
        elif owner == generation_files.SUPERVISOR and lg.request.claimed:
            # Handed on claimed to the dead launcher: a wrapper it spawned runs without looking
            # at the claim, which it has not restamped yet — it runs, and is followed. Its
            # launcher is dead, so such a wrapper exists now or never will; but one still in
            # its exec shows no command line of its own yet: looked for again, 10 ms apart,
            # while some process was in that state before the look (``procs.execing``; after
            # it, one that finished its exec meanwhile would be missed by both).
            execing = procs.execing(SCRIPT)
            if (pid := procs.wrapper_process(lg.gen)) is not None:
                owner = str(pid)
            elif tries > 0 and execing:
                self._timers.after(0.01, lambda: self._reclaim(lg, tries=tries - 1))
                return
        if owner == generation_files.SUPERVISOR:
            lg.request = replace(lg.request, claimed=True)
            [result] = self.start([lg.request])
            self._on.launched(lg, result)
        elif owner is not None and owner.isdigit():
            lg.pid = lg.task.pid = int(owner)
            lg.started()
            self._on.follow_pid(lg)
            if lg.kill_reason is not None and not lg.collected:  # ended while its start was unknown
                self._on.end_tree(lg)
        elif tries > 0:  # the wrapper created its claim and is writing its pid into it
            self._timers.after(0.01, lambda: self._reclaim(lg, tries=tries - 1))
        else:
            self._on.ended(lg, None)
