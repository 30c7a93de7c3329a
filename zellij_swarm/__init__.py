"""zellij-swarm: run a swarm of worker commands in a bounded pool of slots.

Each worker gets a visible Zellij (or tmux) pane, or runs headless; every exit code is
recorded through a sidecar file and every run is recorded durably under the state dir.
``from zellij_swarm import Swarm, Task`` is the Python API (imported on first use, so the
renderers that run in panes start without loading the engine).
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from zellij_swarm.api import Swarm, SwarmResult, Task

__version__ = "0.1.0"
__all__ = ["Swarm", "SwarmResult", "Task", "__version__"]


def __getattr__(name: str) -> object:
    if name in ("Swarm", "SwarmResult", "Task"):
        from zellij_swarm import api

        return getattr(api, name)
    raise AttributeError(f"module 'zellij_swarm' has no attribute {name!r}")
