"""The life of worker panes in live mode (SPEC §2), shared by the tmux and Zellij backends.

A generation's pane runs while its worker runs. When the exit is recorded, a successful
pane is held for ``pane_hold`` and then released; a failed one is kept on screen, up to
``keep_failed_panes`` (the oldest kept pane closes first); a cancelled one closes at once.
When a task later succeeds, the kept panes of its earlier attempts close: the success is what
there is to read, and they stop counting against ``keep_failed_panes``.
Running, held and kept panes all count toward ``max_visible_panes``: before a new pane
would exceed it, the oldest kept (then held) pane makes room; if none can, the generation
runs headless. The backend says how to close and release a pane (``P`` is its own record
of one) and retitles it itself. A resumed run takes the panes its run left into the same
lifecycle (``adopt``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from zellij_swarm.backends.base import RunContext

P = TypeVar("P")


class PaneLifecycle(Generic[P]):
    def __init__(self, *, cap: int, keep_failed: int, hold: float,
                 schedule: Callable[[float, Callable[[], None]], object], close: Callable[[P], None],
                 release: Callable[[P], None] | None = None) -> None:
        self.cap = cap
        self.keep_failed = keep_failed
        self.hold = hold
        self._schedule = schedule
        self._close = close
        self._release = release or close
        self.running: dict[Hashable, P] = {}
        self.held: deque[P] = deque()
        self.kept: deque[tuple[str, P]] = deque()  # (task name, pane), oldest first
        self.reserved = 0

    @classmethod
    def for_run(cls, ctx: RunContext, *, close: Callable[[P], None],
                release: Callable[[P], None] | None = None) -> PaneLifecycle[P]:
        s = ctx.settings
        return cls(cap=s.max_visible_panes, keep_failed=s.keep_failed_panes, hold=s.pane_hold,
                   schedule=ctx.schedule, close=close, release=release)

    def visible(self) -> int:
        return len(self.running) + len(self.held) + len(self.kept) + self.reserved

    def reserve(self) -> bool:
        """Room for one more pane, closing the oldest kept or held ones if need be."""
        while self.visible() >= self.cap and (self.kept or self.held):
            self._close(self.kept.popleft()[1] if self.kept else self.held.popleft())
        if self.visible() >= self.cap:
            return False
        self.reserved += 1
        return True

    def launched(self, count: int) -> None:
        """``count`` reservations became launch attempts (``opened`` follows for each pane)."""
        self.reserved -= count

    def opened(self, key: Hashable, pane: P) -> None:
        self.running[key] = pane

    def pop(self, key: Hashable) -> P | None:
        return self.running.pop(key, None)

    def settle(self, pane: P, status: str, task: str) -> None:
        """A popped pane's generation of ``task`` ended with ``status``."""
        if status == "cancelled":
            self._close(pane)
        elif status == "succeeded":
            self.succeeded(task)
            self.held.append(pane)
            self._schedule(self.hold, lambda: self._release_held(pane))
        else:
            self.kept.append((task, pane))
            while len(self.kept) > self.keep_failed:
                self._close(self.kept.popleft()[1])

    def adopt(self, key: Hashable, pane: P, task: str, status: str | None) -> None:
        """A pane a resumed run finds its generation of ``task`` in: running (``status`` None:
        no outcome recorded yet; ``settle`` follows), or settled as its recorded outcome says —
        a success without a hold (its supervisor's hold died with it, and the success is no
        longer news). Adopted in the order the generations ended, so that the oldest kept
        pane is the first to close."""
        if status is None:
            self.running[key] = pane
        elif status == "succeeded":
            self.succeeded(task)
            self._release(pane)
        else:
            self.settle(pane, status, task)

    def succeeded(self, task: str) -> None:
        """``task`` succeeded (in a pane or not): its earlier attempts' kept panes close."""
        earlier = [pane for name, pane in self.kept if name == task]
        if earlier:
            self.kept = deque(k for k in self.kept if k[0] != task)
            for pane in earlier:
                self._close(pane)

    def _release_held(self, pane: P) -> None:
        if pane in self.held:
            self.held.remove(pane)
            self._release(pane)

    def finish(self, *, cancelled: bool) -> None:
        """The run is over: held panes go now, and worker panes too if it was cancelled;
        kept ones stay for the user to read."""
        for pane in list(self.held) + (list(self.running.values()) if cancelled else []):
            self._release(pane)
        self.held.clear()
