"""Where workers run: the ``Backend`` protocol and its implementations."""

from __future__ import annotations

from ._cmd import CmdResult
from ._cmd import run as run_command
from ._zellij import Zellij
from ._zellij import detect as detect_zellij
from .base import Backend, LaunchFailed, LaunchRequest, LaunchResult, PaneOpened, Queued, RunContext
from .headless import HeadlessBackend

__all__ = ["Backend", "CmdResult", "HeadlessBackend", "LaunchFailed", "LaunchRequest", "LaunchResult", "PaneOpened",
           "Queued", "RunContext", "Zellij", "detect_zellij", "run_command"]
