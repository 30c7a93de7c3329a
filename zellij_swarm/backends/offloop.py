"""The supervisor's handle on a backend: every backend method that may call the multiplexer
runs on one ``CallRunner`` thread, in order, and its result comes back to the loop.

A ``zellij`` or ``tmux`` call can take its whole timeout; made on the loop, it would hold
up every headless exit and backfill behind it. Here the backend object lives on the
runner's thread: only that thread calls its methods, so its state needs no lock. What it
gives the supervisor (a timer, a warning, a notice) is passed back onto the loop through
``RunContext``'s callables, which this module wraps. Two methods are called on the loop,
neither making a call: ``shows(slot)``, whether a slot may get a pane at all, read from the
backend's settings and flags; and ``launch_seen``, which lets go of what the backend held
back for a batch (it guards what it touches).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from zellij_swarm.backends.base import Backend, LaunchFailed, LaunchRequest, PaneExited, PaneResult, RunContext
from zellij_swarm.calls import CallRunner, Done
from zellij_swarm.records.generation_files import GenPaths
from zellij_swarm.worker.wrapper import PaneMode

CLOSE_TIMEOUT = 30.0  # seconds the end of a run waits for the backend's last calls


class OffLoopBackend:
    def __init__(self, backend: Backend, runner: CallRunner) -> None:
        self.backend = backend
        self.runner = runner
        # a generation's directory -> what reads its output, waiting for its pane's ``ended``
        self._copying: dict[Path, list[Callable[[], None]]] = {}

    @property
    def name(self) -> str:
        return self.backend.name

    def context(self, ctx: RunContext, *, schedule: Callable[[float, Callable[[], None]], object]) -> RunContext:
        """``ctx`` for the backend's own thread: its timers fire on the loop and then run
        their call back on the runner; its warnings and notices are made on the loop."""
        runner = self.runner

        def schedule_from_runner(delay: float, fn: Callable[[], None]) -> None:
            def arm() -> None:
                schedule(delay, lambda: runner.submit(fn))

            runner.to_loop(arm)

        return replace(
            ctx,
            schedule=schedule_from_runner,
            warn=lambda code, message: runner.to_loop(lambda: ctx.warn(code, message)),
            notice=lambda text: runner.to_loop(lambda: ctx.notice(text)),
        )

    def open(self, ctx: RunContext) -> None:
        """Before the loop starts: on the caller's thread, once the runner has done what it
        was given (a resume's replay tells the backend of panes that ended before it): the
        backend lives on one thread at a time."""
        self.runner.wait_idle(CLOSE_TIMEOUT)
        self.backend.open(ctx)

    def shows(self, slot: int) -> bool:
        return self.backend.shows(slot)

    def pane_modes(self, slots: list[int], then: Callable[[list[PaneMode | None]], None]) -> None:
        """How each slot's next generation runs: its pane, or ``None`` (headless). A backend
        that fails to say runs them headless."""
        def decided(done: Done[list[PaneMode | None]]) -> None:
            then(done.value if done.value is not None else [None] * len(slots))

        self.runner.submit(lambda: [self.backend.pane_mode(s) for s in slots], decided)

    def launch(self, batch: list[LaunchRequest], then: Callable[[list[PaneResult]], None]) -> None:
        """Open the batch's panes; ``then`` records them on the loop, and then the backend is
        told so (``Backend.launch_seen``) there too: not behind the calls queued for its thread
        meanwhile — a pane's end may wait seconds for its log — which would hold the batch's
        panes at their start."""
        def launched(done: Done[list[PaneResult]]) -> None:
            try:
                if done.value is not None:
                    then(done.value)
                else:
                    then([LaunchFailed("pane_call_failed", f"{self.name}: {done.error}") for _ in batch])
            finally:
                self.backend.launch_seen()

        self.runner.submit(lambda: self.backend.launch(batch), launched)

    def ended(self, req: LaunchRequest, pane_id: str | None, status: str, label: str) -> None:
        if pane_id is None or not self.backend.output_copied_after_end:
            self.runner.submit(lambda: self.backend.ended(req, pane_id, status, label))
            return
        gen = req.gen.dir
        self._copying[gen] = []
        self.runner.submit(lambda: self.backend.ended(req, pane_id, status, label),
                           lambda done: self._copied(gen))

    def after_output(self, gen: GenPaths | None, read: Callable[[], None]) -> None:
        """``read`` (what reads the output of ``gen``'s generation as it ends: its copy to
        stdout, the joblog's count), once that output is whole in its log: at once, unless its
        pane's copy is still being waited for (``output_copied_after_end``), then on the loop
        as soon as it is."""
        waiting = self._copying.get(gen.dir) if gen is not None else None
        if waiting is None:
            read()
        else:
            waiting.append(read)

    def outputs_now(self) -> None:
        """Read every output still waited for, as it is (a supervisor that leaves before its
        backend's calls end)."""
        for gen in list(self._copying):
            self._copied(gen)

    def _copied(self, gen: Path) -> None:
        for read in self._copying.pop(gen, []):
            read()

    def waiting(self, req: LaunchRequest, pane_id: str | None, waiting: bool) -> None:
        self.runner.submit(lambda: self.backend.waiting(req, pane_id, waiting))

    def abandon(self, pane_id: str | None, req: LaunchRequest) -> None:
        self.runner.submit(lambda: self.backend.abandon(pane_id, req))

    def session_alive(self, then: Callable[[bool], None]) -> None:
        self.runner.submit(self.backend.session_alive, lambda done: then(bool(done.value)))

    def pane_listed(self, pane_id: str | None, then: Callable[[bool | None], None]) -> None:
        self.runner.submit(lambda: self.backend.pane_listed(pane_id), lambda done: then(done.value))

    def session_and_pane(self, pane_id: str | None, then: Callable[[bool, PaneExited | None], None]) -> None:
        """``session_alive``, and while the session is, whether the pane ``pane_id`` is still
        listed with its first process ended (``Backend.pane_exited``): one turn of the runner."""
        def ask() -> tuple[bool, PaneExited | None]:
            alive = self.backend.session_alive()
            return alive, self.backend.pane_exited(pane_id) if alive else None

        self.runner.submit(ask, lambda done: then(*(done.value or (False, None))))

    def session_alive_now(self) -> bool:
        """At the end of the run, when the loop has nothing else to do: wait for the answer."""
        answer: list[bool] = []
        self.session_alive(answer.append)
        self.runner.wait_idle(CLOSE_TIMEOUT)
        return bool(answer and answer[0])

    def attach_command(self) -> tuple[list[str], dict[str, str]] | None:
        return self.backend.attach_command()

    def close(self, *, cancelled: bool, failed: bool = True) -> None:
        """The run is over: the backend's last calls, waited for (up to ``CLOSE_TIMEOUT``)."""
        errors: list[BaseException | None] = []
        self.runner.submit(lambda: self.backend.close(cancelled=cancelled, failed=failed),
                           lambda done: errors.append(done.error))
        self.runner.wait_idle(CLOSE_TIMEOUT)
        if errors and errors[0] is not None:
            raise errors[0]

    def place(self) -> dict[str, Any] | None:
        """Read from the backend's state (a list of window ids at most: no call)."""
        return self.backend.place()

    def leftover_hint(self) -> str | None:
        """After ``close`` (which waited for the runner): read from the backend's state."""
        return self.backend.leftover_hint()
