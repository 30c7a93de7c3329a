"""zellij-swarm: run a swarm of worker commands in a bounded pool of slots.

Each worker gets a visible Zellij (or tmux) pane, or runs headless; every exit code is
recorded through a sidecar file and every run is recorded durably under the state dir.
``from zellij_swarm import Swarm, Task`` is the Python API (``api``; imported on first use, so
the renderers that run in panes start without loading the engine); its exceptions are in
``zellij_swarm.errors``.
"""

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from zellij_swarm import errors
    from zellij_swarm.api import (
        Run,
        RunState,
        RunStatus,
        RunWarning,
        SlurmResources,
        Swarm,
        SwarmResult,
        Task,
        TaskResult,
        TaskStatus,
        open_run,
    )

__version__ = "0.1.0"
__all__ = ["Run", "RunState", "RunStatus", "RunWarning", "SlurmResources", "Swarm", "SwarmResult", "Task",
           "TaskResult", "TaskStatus", "__version__", "errors", "open_run"]


def __getattr__(name: str) -> object:
    if name == "errors":
        return importlib.import_module("zellij_swarm.errors")
    if name in __all__:
        return getattr(importlib.import_module("zellij_swarm.api"), name)
    raise AttributeError(f"module 'zellij_swarm' has no attribute {name!r}")
