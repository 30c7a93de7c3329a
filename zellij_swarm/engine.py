"""Running one swarm end to end: pick the backend, supervise, report. Shared by the CLI and
the Python API so both behave the same."""

from __future__ import annotations


import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import junit, swarmfile
from .backends.headless import HeadlessBackend
from .backends.select import choose
from .report import ConsoleReporter
from .settings import Resolved
from .supervisor import RunPlan, Supervisor


@dataclass(frozen=True)
class Outcome:
    exit_code: int
    run_id: str
    run_dir: Path
    summary: dict[str, Any]


def execute(
    specs: list[swarmfile.TaskSpec],
    resolved: Resolved,
    *,
    name: str | None,
    source: str,
    env: Mapping[str, str],
    json_output: bool = False,
    junit_path: str | None = None,
) -> Outcome:
    choice = choose(resolved.backend, env)
    backend = HeadlessBackend(_worker_env(env))
    mode = resolved.output or ("progress" if sys.stderr.isatty() else "group")
    reporter = ConsoleReporter(mode, out=sys.stderr.buffer if json_output else None)
    plan = RunPlan(tasks=specs, settings=resolved, name=name, source=source, env=dict(env),
                   backend_reason=choice.why)
    sup = Supervisor(plan, backend, reporter)
    code = sup.run()
    summary = sup.final_snapshot
    if junit_path:
        junit.write(Path(junit_path), sup.paths, summary)
    return Outcome(code, sup.run_id, sup.paths.dir, summary)


def _worker_env(env: Mapping[str, str]) -> dict[str, str]:
    """Headless workers: the caller's environment without pane ids (SPEC §5.2)."""
    out = {k: v for k, v in env.items() if k not in ("TMUX_PANE", "ZELLIJ_PANE_ID")}
    out.setdefault("PYTHONUNBUFFERED", "1")
    return out



