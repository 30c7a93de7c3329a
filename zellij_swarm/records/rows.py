"""The typed shape of a task's row — in ``state.json``, ``summary.json``, ``status --json``
and the Python API — written by ``TaskRecord.row`` and read by every renderer and command.

The JSON schemas in ``zellij_swarm/schemas/`` are the published contract; these types are
the same contract for the code, so that a key misspelled by a reader, or one a writer adds
without a schema, fails ``mypy`` or ``tests/test_rows.py`` (which compares each type's keys,
and which of them are required, with its schema). A row read from a file is only as good as
the file: readers of records an older version or a torn write left still look before they
trust a value.
"""


from typing import Any, NotRequired, TypedDict


class WarningRow(TypedDict):
    code: str
    message: str
    task: str | None


class AttemptRow(TypedDict):
    attempt: int
    slot: int | None
    generation: int | None
    status: str
    exit_code: int | None
    signal: str | None
    reason: str | None
    started_at: float | None
    ended_at: float | None
    pid: int | None
    pane_id: str | None
    slurm: NotRequired[dict[str, Any]]  # a Slurm step's: where it ran (node, job) and queued_s


class OptionalFields(TypedDict, total=False):
    """What a task's row carries only when there is something to say."""

    command: str  # the command of a task whose name was generated (task-N)
    group: str | None
    worktree: dict[str, Any]  # the git worktree it runs in: path, branch, base, changed_files
    slurm: dict[str, Any]  # its Slurm step: job, state, reason, node, queued_s
    waiting_evidence: str  # why waiting for input cannot be seen, when it cannot
    # an interrupted run's running task's exit, committed since its supervisor went: added by
    # ``status`` when it reads the run, never written in a record
    exited: dict[str, Any]


class TaskRow(TypedDict):
    name: str
    id: str
    status: str
    exit_code: int | None
    signal: str | None
    attempts: int
    slot: int | None
    generation: int | None
    pid: int | None
    pane_id: str | None
    started_at: float | None
    ended_at: float | None
    duration_s: float | None
    reason: str | None
    warnings: list[WarningRow]
    history: NotRequired[list[AttemptRow]]  # every run writes it; a row of an older run may lack it
    waiting_input: NotRequired[bool | None]  # while it runs; None: it cannot be known
    # and those of ``OptionalFields``:
    command: NotRequired[str]
    group: NotRequired[str | None]
    worktree: NotRequired[dict[str, Any]]
    slurm: NotRequired[dict[str, Any]]
    waiting_evidence: NotRequired[str]
    exited: NotRequired[dict[str, Any]]


class Snapshot(TypedDict):
    """A run's snapshot: ``state.json`` and ``summary.json`` as ``snapshot_file.load`` gives
    them (their rows merged in), and ``status --json``."""

    run_id: str
    state: str
    settings: dict[str, Any]
    tasks: list[TaskRow]
    slots: list[dict[str, Any]]
    metrics: dict[str, Any]
    warnings: list[WarningRow]
    name: NotRequired[str | None]
    backend: NotRequired[str]
    jobs: NotRequired[int]
    started_at: NotRequired[float]
    ended_at: NotRequired[float | None]
    updated_at: NotRequired[float]
    counts: NotRequired[dict[str, int]]
    paused: NotRequired[dict[str, Any]]
    groups: NotRequired[list[dict[str, Any]]]
    slurm_allocation: NotRequired[dict[str, Any]]
    multiplexer: NotRequired[dict[str, Any] | None]
    views: NotRequired[list[dict[str, Any]]]
    usage: NotRequired[dict[str, Any] | None]
    rows: NotRequired[dict[str, Any] | None]  # in the file: the rows file it covers (``load`` merges them in)
