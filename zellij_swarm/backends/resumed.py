"""A resumed run's backend (SPEC §8 ``resume``): its new generations run headless, and the
panes its run left are followed where they are.

The run's snapshot recorded where its panes are (``Backend.place``: the tmux server's socket,
session and windows; the Zellij session and tab). The live backend of that multiplexer is
made again at that place (``TmuxBackend.at``, ``ZellijBackend.at``) and, when the supervisor
opens its backend, takes the panes of the run's generations into its own pane lifecycle
(``adopt``) — nothing is opened: an adopted generation that ends is retitled with its outcome
and its pane held, kept or closed as in a live run (``--keep-failed-panes``,
``--max-visible-panes``), a waiting one marked, and at the run's end its window or tab closes,
or stays, as a live run's would (``--close-session``, ``CI``). A place that is gone (the
server killed, every window or pane closed) or a multiplexer that cannot be run leaves the
run headless with one warning.

Before its backend is opened, a resumed supervisor already records the ends that happened
while no supervisor ran (``engine.resume.restore``), and tells the backend of them from its
backend thread while its own thread opens it. So every method holds one lock, and the ends
told before ``open`` wait for it (``_told``) and are settled right after the panes are
adopted. Whether the session is alive is answered at any time: it decides between a pane
closed and a session lost for a wrapper that hung up meanwhile.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from zellij_swarm.backends import leftovers
from zellij_swarm.backends.base import (
    Backend,
    LaunchRequest,
    PaneExited,
    PaneResult,
    RunContext,
    RunPane,
    prune_command,
)
from zellij_swarm.backends.headless import HeadlessBackend
from zellij_swarm.exc import BackendError
from zellij_swarm.worker.wrapper import PaneMode


class Reattached(Backend, Protocol):
    """A live backend made again at a run's recorded place."""

    def adopt(self, ctx: RunContext, place: Mapping[str, Any], panes: Sequence[RunPane]) -> None:
        ...


def backend_for(place: Any, env: Mapping[str, str], panes: Sequence[RunPane], *, close_session: bool) -> Backend:
    """The backend of a resumed run whose snapshot recorded ``place`` (None, or a place of no
    multiplexer we know: headless). ``env`` is the run's own (its multiplexer's socket
    directory and binary), ``panes`` its generations' panes, adopted in this order."""
    if not isinstance(place, Mapping):
        return Unplaced(env)
    where = ("socket", "session_id", "session")
    if place.get("backend") == "tmux" and all(isinstance(place.get(key), str) for key in where):
        from zellij_swarm.backends.tmux import TmuxBackend

        return ResumedBackend(TmuxBackend.at(place, env, close_session=close_session), place, panes)
    if place.get("backend") == "zellij" and isinstance(place.get("session"), str):
        from zellij_swarm.backends.zellij import ZellijBackend

        return ResumedBackend(ZellijBackend.at(place, env, close_session=close_session), place, panes)
    return Unplaced(env)


class Unplaced(HeadlessBackend):
    """A resumed run whose snapshot recorded no place for its panes (none it knows): a headless
    run's, or one whose supervisor went before it wrote one — a Zellij run's tab is made with
    its first panes, which claim their generations at once. Such panes cannot be found, so
    they are taken as gone with their session, as when a recorded place is gone: a pane's
    generation that ended without its record is ``multiplexer_lost`` and runs again
    headless, no attempt spent (taken for closed, it was ``cancelled (pane_closed)`` and
    never ran). A headless run has no pane generation: nothing asks it."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self._env = dict(env)
        self._ctx: RunContext | None = None

    def open(self, ctx: RunContext) -> None:
        self._ctx = ctx

    def session_alive(self) -> bool:
        return False

    def leftover_hint(self) -> str | None:
        """What the run opened before its supervisor went without saying where (its session,
        made as it started: a supervisor killed then) stays, found by the run's name in its
        own multiplexers (``leftovers``): said, with the command that closes it."""
        ctx = self._ctx
        if ctx is None or ctx.settings.backend == "headless":
            return None
        found = leftovers.find(self._env, [ctx.run_id]).leftovers
        if not found:
            return None
        return f"{found[0].what}, opened before the run was interrupted, stays: close it with " \
               f"{prune_command(ctx.paths)}"


class _ToldOnceOpen:
    """What the supervisor tells of the run's earlier panes (an end, a wait, a pane let go)
    before the backend is open — the ends ``restore`` recorded, told from its backend thread
    while its own thread opens the backend — waits for ``open`` (``_told``), and is told to the
    live backend once it has taken those panes on; after that, at once. One lock holds it all."""

    live: Backend

    def __init__(self) -> None:
        self._opened = False
        self._told: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    def _following(self) -> bool:
        """The live backend follows the run's panes (what is told to it is not dropped)."""
        return True

    def _opening(self) -> list[Callable[[], None]]:
        """Open from now on (called under the lock): what was told before, to be told now."""
        self._opened = True
        told, self._told = self._told, []
        return told

    def _follow(self, call: Callable[[], None]) -> None:
        with self._lock:
            if not self._opened:
                self._told.append(call)
            elif self._following():
                call()

    def ended(self, req: LaunchRequest, pane_id: str | None, status: str, label: str) -> None:
        self._follow(lambda: self.live.ended(req, pane_id, status, label))

    def waiting(self, req: LaunchRequest, pane_id: str | None, waiting: bool) -> None:
        self._follow(lambda: self.live.waiting(req, pane_id, waiting))

    def abandon(self, pane_id: str | None, req: LaunchRequest) -> None:
        self._follow(lambda: self.live.abandon(pane_id, req))


class ResumedBackend(_ToldOnceOpen):
    live: Reattached

    def __init__(self, live: Reattached, place: Mapping[str, Any], panes: Sequence[RunPane]) -> None:
        super().__init__()
        self.name = live.name  # "headless" once its panes are found gone
        self.output_copied_after_end = live.output_copied_after_end
        self.live = live
        self.recorded = dict(place)
        self.panes = list(panes)
        self.following = False  # open adopted the run's panes: the live backend's lifecycle is theirs
        self.headless = HeadlessBackend()

    def _following(self) -> bool:
        return self.following

    def open(self, ctx: RunContext) -> None:
        with self._lock:
            told = self._opening()
            try:
                self.live.adopt(ctx, self.recorded, self.panes)
                self.following = True
            except BackendError as e:
                self.name = "headless"
                ctx.warn(e.code, f"{e.message}; the run goes on headless, its panes no longer followed")
            if self.following:
                for call in told:
                    call()

    def shows(self, slot: int) -> bool:
        return False  # SPEC §8: new generations of a resumed run run headless

    def pane_mode(self, slot: int) -> PaneMode | None:
        return None

    def launch(self, batch: list[LaunchRequest]) -> list[PaneResult]:
        return self.headless.launch(batch)

    def launch_seen(self) -> None:
        self.headless.launch_seen()

    def session_alive(self) -> bool:
        with self._lock:
            return self.live.session_alive()

    def pane_listed(self, pane_id: str | None) -> bool | None:
        with self._lock:
            return self.live.pane_listed(pane_id) if self.following else None

    def pane_exited(self, pane_id: str | None) -> PaneExited | None:
        with self._lock:
            return self.live.pane_exited(pane_id) if self.following else None

    def attach_command(self) -> tuple[list[str], dict[str, str]] | None:
        return None  # a resumed run has no --attach

    def close(self, *, cancelled: bool, failed: bool = True) -> None:
        self._follow(lambda: self.live.close(cancelled=cancelled, failed=failed))

    def place(self) -> dict[str, Any] | None:
        """As recorded, also when the panes are no longer followed: a later ``resume``,
        ``attach`` or ``prune`` looks there."""
        return dict(self.recorded)

    def leftover_hint(self) -> str | None:
        return self.live.leftover_hint() if self.following else None


@runtime_checkable
class TakesOver(Backend, Protocol):
    """A live backend that can take on, once open, what earlier supervisors of its run left."""

    def take_over(self, place: Mapping[str, Any] | None, panes: Sequence[RunPane]) -> None:
        ...


class RetriedBackend(_ToldOnceOpen):
    """A ``retry``'s backend (SPEC §8 ``retry``): its new generations run in panes it opens as a
    new run's do, and once it is open it takes over what the run's earlier supervisors left in
    the same multiplexer (``take_over``): their stale boards and slot views close; their kept
    failed panes stay within ``--keep-failed-panes`` and close when their task succeeds; the
    panes of workers still running (a retry of a run whose supervisor was killed adopts them)
    are followed to their ends and retitled. What the supervisor tells of those panes before
    the backend is open (the ends ``restore`` recorded) waits for it, as a resumed run's does."""

    live: TakesOver

    def __init__(self, live: TakesOver, place: Any, panes: Sequence[RunPane]) -> None:
        super().__init__()
        self.live = live
        self.name = live.name
        self.output_copied_after_end = live.output_copied_after_end
        self.recorded = dict(place) if isinstance(place, Mapping) else None
        self.panes = list(panes)

    def open(self, ctx: RunContext) -> None:
        with self._lock:
            told = self._opening()
            self.live.open(ctx)  # one that fails leaves the run headless: nothing to follow
            try:
                self.live.take_over(self.recorded, self.panes)
            except BackendError:
                pass  # what the earlier supervisors left is gone, or cannot be listed: as a new run
            for call in told:
                call()

    def shows(self, slot: int) -> bool:
        return self.live.shows(slot)

    def pane_mode(self, slot: int) -> PaneMode | None:
        return self.live.pane_mode(slot)

    def launch(self, batch: list[LaunchRequest]) -> list[PaneResult]:
        return self.live.launch(batch)

    def launch_seen(self) -> None:
        self.live.launch_seen()

    def session_alive(self) -> bool:
        return self.live.session_alive()

    def pane_listed(self, pane_id: str | None) -> bool | None:
        return self.live.pane_listed(pane_id)

    def pane_exited(self, pane_id: str | None) -> PaneExited | None:
        return self.live.pane_exited(pane_id)

    def attach_command(self) -> tuple[list[str], dict[str, str]] | None:
        return self.live.attach_command()

    def close(self, *, cancelled: bool, failed: bool = True) -> None:
        self.live.close(cancelled=cancelled, failed=failed)

    def place(self) -> dict[str, Any] | None:
        return self.live.place()

    def leftover_hint(self) -> str | None:
        return self.live.leftover_hint()
