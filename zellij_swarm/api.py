"""The Python API: the same engine as ``zellij-swarm run``.

    from zellij_swarm import Swarm, Task
    result = Swarm([Task("pytest tests/a"), Task(argv=["make", "b"], name="b", after=["task-1"])], jobs=4).run()
    assert result.exit_code == 0, result.summary["tasks"]

Keyword settings are the names of SPEC §3 (``jobs``, ``timeout``, ``retries``, ``halt``, …)
and rank like flags: above the environment, below a task's own key.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from zellij_swarm import exc
from zellij_swarm.config import settings, swarmfile
from zellij_swarm.engine.run import Outcome as SwarmResult
from zellij_swarm.engine.run import execute

__all__ = ["Swarm", "SwarmResult", "Task"]


@dataclass
class Task:
    cmd: str | None = None
    name: str | None = None
    argv: list[str] | None = None
    cwd: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    timeout: float | str | None = None
    retries: int | None = None
    idle_timeout: float | str | None = None
    after: list[str] = field(default_factory=list)
    priority: int = 0
    tags: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        raw = {k: v for k, v in self.__dict__.items() if v is not None}
        for key in ("env", "after", "tags"):
            if not raw.get(key):
                raw.pop(key, None)
        if not raw.get("priority"):
            raw.pop("priority", None)
        return raw


class Swarm:
    def __init__(self, tasks: Iterable[Task] = (), *, name: str | None = None, **options: object) -> None:
        unknown = set(options) - set(settings.BY_NAME)
        if unknown:
            raise exc.UsageError(f"unknown setting {sorted(unknown)[0]!r}; known: {', '.join(settings.BY_NAME)}")
        self.tasks = list(tasks)
        self.name = name
        self.options = options

    def add(self, task: Task) -> Task:
        self.tasks.append(task)
        return task

    def run(self, *, output: settings.OutputMode = "quiet", env: Mapping[str, str] | None = None) -> SwarmResult:
        env = dict(os.environ if env is None else env)
        base = Path.cwd()
        specs = [swarmfile.task_from_dict(t.as_dict(), i, "<api>", base) for i, t in enumerate(self.tasks)]
        swarmfile.validate(specs)
        resolved = settings.resolve({**self.options, "output": output}, env, flag_source="api")
        return execute(specs, resolved, name=self.name, source="<api>", env=env)
