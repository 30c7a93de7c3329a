"""Where workers run: the ``Backend`` protocol and its implementations."""

from __future__ import annotations

from zellij_swarm.backends._cmd import CmdResult
from zellij_swarm.backends._cmd import run as run_command
from zellij_swarm.backends._zellij import Zellij
from zellij_swarm.backends._zellij import detect as detect_zellij
from zellij_swarm.backends.base import (
           Backend,
           LaunchFailed,
           LaunchRequest,
           LaunchResult,
           PaneOpened,
           Queued,
           RunContext,
)
from zellij_swarm.backends.headless import HeadlessBackend

__all__ = ["Backend", "CmdResult", "HeadlessBackend", "LaunchFailed", "LaunchRequest", "LaunchResult", "PaneOpened",
           "Queued", "RunContext", "Zellij", "detect_zellij", "run_command"]
