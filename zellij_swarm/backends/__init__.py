"""Where workers run: the ``Backend`` protocol and its implementations."""

from __future__ import annotations

from .base import Backend, LaunchFailed, LaunchRequest, LaunchResult, PaneOpened, Queued, RunContext
from .headless import HeadlessBackend

__all__ = ["Backend", "HeadlessBackend", "LaunchFailed", "LaunchRequest", "LaunchResult", "PaneOpened", "Queued",
           "RunContext"]
