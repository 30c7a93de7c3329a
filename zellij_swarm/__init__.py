"""zellij-swarm: run a swarm of worker commands in a bounded pool of slots.

Each worker gets a visible Zellij (or tmux) pane, or runs headless; every exit code is
recorded through a sidecar file and every run is recorded durably under the state dir.
"""

__version__ = "0.1.0"

from .api import Swarm, SwarmResult, Task  # noqa: E402

__all__ = ["Swarm", "SwarmResult", "Task", "__version__"]
