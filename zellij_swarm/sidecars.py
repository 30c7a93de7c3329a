"""The old home of the exit sidecar and claim functions, now in ``generation_files``.

It exists only until the supervisor's files (supervisor, pane_follow, cancellation, restore,
snapshot, model, backends/zellij) import ``generation_files`` directly; then it goes.
"""

from .generation_files import (
    ExitRecord,
    claim_owner,
    collect_exit,
    heartbeat_started,
    read_sidecar,
    record_missing_exit,
    started_at,
    take_claim,
    wrapper_pid,
)

__all__ = [
    "ExitRecord",
    "claim_owner",
    "collect_exit",
    "heartbeat_started",
    "read_sidecar",
    "record_missing_exit",
    "started_at",
    "take_claim",
    "wrapper_pid",
]
