"""The ``Backend`` protocol: the one seam between the scheduler and a multiplexer.

The supervisor reserves slots and writes each generation's wrapper; a backend only starts
wrappers and manages what the user sees. Exits are always learned from the wrapper's exit
record, never from the multiplexer, so a backend has no say in outcomes. A launch that goes
wrong is data (``LaunchFailed`` with a SPEC §7 code), not an exception: the supervisor
decides between a warning plus headless fallback and a failure under require.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ..rundir import GenPaths


@dataclass(frozen=True)
class LaunchRequest:
    gen: GenPaths
    slot: int
    task_name: str
    claimed: bool = False  # the supervisor holds the claim; the wrapper must not take it


@dataclass(frozen=True)
class Spawned:
    """The wrapper is the supervisor's own child; its exit is watched through ``pidfd``."""

    pid: int


@dataclass(frozen=True)
class LaunchFailed:
    code: str  # SPEC §7 vocabulary: spawn_failed, pane_call_failed, ...
    message: str


LaunchResult = Spawned | LaunchFailed


@runtime_checkable
class Backend(Protocol):
    name: str

    def launch(self, batch: list[LaunchRequest]) -> list[LaunchResult]:
        """Start every wrapper of a batch, as few round trips as the backend allows."""
        ...

    def close(self) -> None:
        """The run is over: release what the backend holds."""
        ...
