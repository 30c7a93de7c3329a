"""The Python API: the same engine as ``zellij-swarm run``, for a program that drives swarms.

    from zellij_swarm import Swarm, Task
    result = Swarm([Task("make", name="build"), Task(argv=["pytest", "-x"], name="test", after=["build"])],
                   jobs=4, retries=1).run()
    if not result.ok:
        print(result["test"].status, result["test"].output())

``Swarm`` takes every setting of SPEC §3 as a typed keyword (the settings table, checked at
import: a setting without its keyword, or the reverse, fails), ranked like a flag: above the
environment, below a task's own key. ``Task`` takes every key of a ``[[task]]`` table. A name
that does not exist is an ``errors.UnknownName`` saying the closest one (and, under mypy, a
type error). ``run()`` blocks and returns a ``SwarmResult``; ``start()`` starts the run's
supervisor as a process of its own and returns a ``Run`` handle once the run has begun.

``run()`` installs no signal handler: the run is supervised on a thread of this process, and
the host program keeps its own. Ctrl-C (``KeyboardInterrupt``), or any exception that
interrupts the wait, cancels the run through its control inbox — the workers end through the
usual ladder, SIGTERM then SIGKILL after ``kill_grace`` — and is raised again once the run has
ended (a second Ctrl-C meanwhile does not cut that short: the ladder is bounded).
"""

from __future__ import annotations

import contextlib
import inspect
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, fields, replace
from pathlib import Path
from types import UnionType
from typing import Any, Literal, Never, TypedDict, Union, get_args, get_origin, get_type_hints

from zellij_swarm import errors, exc
from zellij_swarm.api import _supervisor_process
from zellij_swarm.api.results import RunState, RunStatus, RunWarning, SwarmResult, TaskResult
from zellij_swarm.api.run_handle import Run, open_run
from zellij_swarm.commands import control
from zellij_swarm.commands.run import Outcome, execute
from zellij_swarm.config import settings, swarmfile
from zellij_swarm.config.settings import BackendName, ExecutorName, HaltMode, IdlePolicy, OutputMode, UiMode
from zellij_swarm.config.state_dir import current_directory
from zellij_swarm.config.state_dir import find as find_state_dir
from zellij_swarm.records.rundir import RunPaths
from zellij_swarm.records.states import TaskStatus

__all__ = ["Run", "RunState", "RunStatus", "RunWarning", "SlurmResources", "Swarm", "SwarmResult", "Task",
           "TaskResult", "TaskStatus", "open_run"]

SOURCE = settings.API_SOURCE
CANCEL_ANSWER = 30.0  # seconds: how long an interrupted run() waits for its supervisor to take the cancel


class SlurmResources(TypedDict, total=False):
    """A task's own Slurm resources (SPEC §11), over the run's ``slurm_*`` settings."""

    partition: str
    cpus: int
    mem: str | int
    gres: str
    time: str | int
    constraint: str
    account: str
    qos: str
    extra: str | Sequence[str]


@dataclass(init=False)
class Task:
    """One task: the keys of a swarm file's ``[[task]]`` table (SPEC §4), one field each —
    exactly one of ``cmd`` (a shell string) or ``argv`` (run directly); ``after`` names tasks
    it runs after; its own ``timeout``, ``retries``, … (``settings.TASK_OVERRIDABLE``) win
    over the run's settings. Values are checked when the swarm runs, as a swarm file's are."""

    cmd: str | None
    name: str | None
    argv: Sequence[str] | None
    cwd: str | os.PathLike[str] | None
    env: Mapping[str, str]
    timeout: float | str | None
    retries: int | None
    idle_timeout: float | str | None
    after: str | Sequence[str]
    priority: int
    tags: Sequence[str]
    group: str | None
    worktree: bool | None
    waiting_pattern: str | None
    slurm: SlurmResources

    def __init__(self, cmd: str | None = None, name: str | None = None, *, argv: Sequence[str] | None = None,
                 cwd: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None,
                 timeout: float | str | None = None, retries: int | None = None,
                 idle_timeout: float | str | None = None, after: str | Sequence[str] = (), priority: int = 0,
                 tags: Sequence[str] = (), group: str | None = None, worktree: bool | None = None,
                 waiting_pattern: str | None = None, slurm: SlurmResources | None = None, **unknown: Never) -> None:
        if unknown:
            raise errors.UnknownName("task key", next(iter(unknown)), swarmfile.TASK_KEYS)
        label = f"task {name!r}" if isinstance(name, str) else "a task"
        if cwd is not None and (not isinstance(cwd, str | os.PathLike) or not os.fspath(cwd)):
            raise errors.InputError(f"{label}: cwd must be a non-empty path, not {_what(cwd)}", path=SOURCE)
        self.cmd, self.name, self.cwd = cmd, name, cwd
        self.argv = None if argv is None else _listed(label, "argv", argv)
        for key, value in (("env", env), ("slurm", slurm)):
            if value is not None and not isinstance(value, Mapping):
                raise errors.InputError(f"{label}: {key} must be a mapping of names to "
                                        f"{'strings' if key == 'env' else 'values'}, not a {type(value).__name__}",
                                        path=SOURCE)
        if slurm is not None and (bad := next((k for k in slurm if not isinstance(k, str)), None)) is not None:
            raise errors.InputError(f"{label}: slurm keys are names, not {_what(bad)}", path=SOURCE)
        self.env = dict(env or {})
        self.timeout, self.retries, self.idle_timeout = timeout, retries, idle_timeout
        # (one name is a list of one: an empty one is checked as a swarm file's, not dropped)
        self.after = [after] if isinstance(after, str) else _listed(label, "after", after)
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise errors.InputError(f"{label}: priority must be an integer, not {_what(priority)}", path=SOURCE)
        self.priority, self.tags, self.group, self.worktree = priority, _listed(label, "tags", tags), group, worktree
        self.waiting_pattern = waiting_pattern
        self.slurm = SlurmResources(**slurm) if slurm else SlurmResources()

    def as_dict(self) -> dict[str, object]:
        """The keys that are set, as a ``[[task]]`` table would hold them."""
        raw: dict[str, object] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None or (f.name in ("env", "after", "tags", "slurm", "priority") and not value):
                continue
            if f.name == "cwd":
                value = os.fspath(value)
            elif f.name in ("argv", "tags", "after") and not isinstance(value, str):
                value = list(value)
            elif f.name in ("env", "slurm"):
                value = dict(value)
            raw[f.name] = value
        return raw

    def as_record(self, base: Path) -> dict[str, object]:
        """``as_dict`` with a relative ``cwd`` made absolute from ``base`` (the caller's working
        directory, as a swarm file's is from the file's)."""
        raw = self.as_dict()
        if isinstance(raw.get("cwd"), str):
            with contextlib.suppress(RuntimeError):  # ~user of no such user: the task's check says so
                raw["cwd"] = str(base / Path(str(raw["cwd"])).expanduser())
        return raw


def _what(value: object) -> str:
    """A wrong value as an error names it: ``''``, or ``a int``."""
    return repr(value) if isinstance(value, str) else f"a {type(value).__name__}"


def _listed(label: str, key: str, value: object) -> list[str]:
    """A task's list keyword as a list; an input error, as a swarm file's, for what is none."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise errors.InputError(f"{label}: {key} must be a list of strings, not a {type(value).__name__}", path=SOURCE)
    return list(value)  # (its items are checked as a swarm file's are, when the swarm runs)


@dataclass(frozen=True)
class _Plan:
    """A swarm checked and resolved, ready to run: what ``run`` and ``start`` hand the engine."""

    specs: list[swarmfile.TaskSpec]
    resolved: settings.Resolved
    env: dict[str, str]
    name: str | None
    groups: dict[str, int]


class Swarm:
    """Tasks and settings; ``run()`` runs them, ``start()`` starts them. Settings not given
    come from the environment (``ZELLIJ_SWARM_JOBS``, …) or their defaults, as for
    ``zellij-swarm run``; ``output`` defaults to ``quiet``: nothing of the tasks is printed,
    only the end's one line counting warnings, when there were any (``SwarmResult.warnings``
    holds them). ``groups``: ``[group.NAME] jobs = N`` tables, as ``{"gpu": 2}``."""

    def __init__(
        self,
        tasks: Iterable[Task] = (),
        *,
        name: str | None = None,
        groups: Mapping[str, int] | None = None,
        jobs: int | None = None,
        backend: BackendName | None = None,
        ui: UiMode | None = None,
        require_multiplexer: bool | None = None,
        heartbeat_timeout: float | str | None = None,
        pane_hold: float | str | None = None,
        keep_failed_panes: int | None = None,
        max_visible_panes: int | None = None,
        min_pane_width: int | None = None,
        session: str | None = None,
        state_dir: str | os.PathLike[str] | None = None,
        timeout: float | str | None = None,
        retries: int | None = None,
        idle_timeout: float | str | None = None,
        waiting_pattern: str | None = None,
        idle_policy: IdlePolicy | None = None,
        output: OutputMode | None = None,
        kill_grace: float | str | None = None,
        halt: HaltMode | None = None,
        worktree: bool | None = None,
        executor: ExecutorName | None = None,
        slurm_alloc: bool | None = None,
        slurm_alloc_wait: float | str | None = None,
        slurm_max_queue: float | str | None = None,
        slurm_partition: str | None = None,
        slurm_cpus: int | None = None,
        slurm_mem: str | int | None = None,
        slurm_gres: str | None = None,
        slurm_time: str | int | None = None,
        slurm_constraint: str | None = None,
        slurm_account: str | None = None,
        slurm_qos: str | None = None,
        slurm_extra: str | Sequence[str] | None = None,
        **unknown: Never,
    ) -> None:
        given = dict(locals())  # first: the parameters, and nothing else yet
        if unknown:
            raise errors.UnknownName("setting", next(iter(unknown)), [*settings.BY_NAME, *_NOT_SETTINGS])
        self.options: dict[str, object] = {key: value for key, value in given.items()
                                           if key in settings.BY_NAME and value is not None}
        settings.resolve(self.options, {}, flag_source="api")  # a bad value fails here, not when it runs
        if isinstance(tasks, (str, Task, Mapping)) or not isinstance(tasks, Iterable):
            raise errors.InputError(f"tasks must be a list of Task, not a {type(tasks).__name__}", path=SOURCE)
        self.tasks = list(tasks)
        if name is not None and not swarmfile.is_run_name(name):
            raise errors.UsageError(f"name must be a non-empty string of UTF-8 text, not {name!r}")
        self.name = name
        if groups is not None and not isinstance(groups, Mapping):
            raise errors.InputError(f"groups must be a mapping of group names to jobs, as {{'gpu': 2}}, not a "
                                    f"{type(groups).__name__}", path=SOURCE)
        self.groups = _checked_groups(groups or {})

    def add(self, task: Task) -> Task:
        self.tasks.append(task)
        return task

    def run(self, *, output: OutputMode | None = None, env: Mapping[str, str] | None = None) -> SwarmResult:
        """Run the swarm to its end, here, and return its result (never raises for a task
        that failed: that is its status). ``output`` for this run, over the swarm's; ``env``:
        the environment it sees (default: this process's)."""
        return _InThread(self._plan(output, env)).result()

    def start(self, *, output: OutputMode | None = None, env: Mapping[str, str] | None = None) -> Run:
        """Start the swarm's supervisor as a process of its own (in a session of its own, as
        ``zellij-swarm run`` runs one) and return a handle on its run once the run has
        begun. The run goes on whatever becomes of this program; its workers' output and the
        run's messages go where this program's stdout and stderr go."""
        plan = self._plan(output, env)
        process, run_dir = _supervisor_process.spawn(
            _supervisor_process.plan_record(plan.specs, plan.resolved, name=plan.name, groups=plan.groups,
                                            source=SOURCE),
            env=plan.env)
        return Run(RunPaths(run_dir), process=process)

    def _plan(self, output: OutputMode | None, env: Mapping[str, str] | None) -> _Plan:
        """The tasks checked (as a swarm file's are: errors raised before anything runs) and
        the settings resolved: given here > environment > default (``quiet`` output)."""
        environment = dict(os.environ) if env is None else _checked_environment(env)
        base = current_directory()
        specs = []
        for index, task in enumerate(self.tasks):
            if not isinstance(task, Task):
                raise exc.InputError(f"task #{index + 1} is a {type(task).__name__}, not a Task", path=SOURCE)
            specs.append(swarmfile.task_from_dict(task.as_record(base), index, SOURCE, base))
        swarmfile.validate(specs, groups=self.groups)
        options = {**self.options, **({"output": output} if output is not None else {})}
        resolved = settings.resolve(options, environment, flag_source="api")
        if resolved.sources["state_dir"] == "default":  # given nowhere: found by the commands' one rule
            resolved = replace(resolved, state_dir=str(find_state_dir(None, environment).path))
        if resolved.sources["output"] == "default":
            resolved = replace(resolved, output="quiet", sources={**resolved.sources, "output": "default (api)"})
        return _Plan(specs, resolved, environment, self.name, self.groups)


_NOT_SETTINGS = ("name", "groups")  # Swarm's keywords that are not settings


def _checked_environment(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` as a process's environment can hold it — each name a non-empty string without
    ``=`` or NUL, each value a string without NUL, both bytes the OS takes — or an
    ``InputError`` before anything is made (the launcher's ``posix_spawn`` raised a bare
    ``TypeError`` or ``ValueError``, a run directory already made)."""
    if not isinstance(env, Mapping):
        raise errors.InputError(f"env must be a mapping of names to strings, not a {type(env).__name__}", path=SOURCE)
    for name, value in env.items():
        if not isinstance(name, str) or not name or "=" in name or "\0" in name or _unencodable(name):
            raise errors.InputError(f"env: {name!r} is not a name an environment can hold", path=SOURCE)
        if not isinstance(value, str) or "\0" in value or _unencodable(value):
            raise errors.InputError(f"env: the value of {name} must be a string without NUL, not {value!r}",
                                    path=SOURCE)
    return dict(env)


def _unencodable(text: str) -> bool:
    try:
        os.fsencode(text)
    except UnicodeEncodeError:
        return True
    return False


def _checked_groups(groups: Mapping[str, int]) -> dict[str, int]:
    """``groups`` checked as a swarm file's ``[group.NAME]`` tables are."""
    return swarmfile._groups({name: {"jobs": jobs} for name, jobs in groups.items()}, SOURCE, [])


class _InThread:
    """One run supervised on a thread of this process, so that the host's main thread —
    where signals arrive — keeps its own handlers, and is where Ctrl-C interrupts ``run()``."""

    def __init__(self, plan: _Plan) -> None:
        self._plan = plan
        self._outcome: Future[Outcome] = Future()  # the run's, or what it raised
        self._changed = threading.Condition()
        self._run: RunPaths | None = None  # once its directory exists and its inbox is watched
        self._outcome.add_done_callback(lambda _: self._notify())
        self._thread = threading.Thread(target=self._supervise, name="zellij-swarm supervisor")
        # A Ctrl-C can land inside ``Thread.start``, the thread begun or not: whichever of the
        # two takes this lock first decides — the thread runs, and the caller cancels it; or
        # the caller has given up, and the thread runs nothing.
        self._start_lock = threading.Lock()
        self._began = False
        self._abandoned = False

    def result(self) -> SwarmResult:
        try:
            self._thread.start()
            outcome = self._outcome.result()  # raises what the run raised
        except BaseException:
            with self._start_lock:
                self._abandoned = True
                began = self._began
            if began:
                if not self._outcome.done():  # interrupted while it runs
                    _uninterrupted(self._cancel_and_wait)
                self._thread.join()
            raise
        self._thread.join()
        return SwarmResult(outcome.exit_code, outcome.run_dir, outcome.snapshot)

    def _supervise(self) -> None:
        with self._start_lock:
            if self._abandoned:
                return  # interrupted as it started: nothing runs
            self._began = True
        plan = self._plan
        try:
            # a copy: a run empties the list of tasks it is given (RunPlan.tasks)
            outcome = execute(list(plan.specs), plan.resolved, name=plan.name, source=SOURCE, env=plan.env,
                              groups=plan.groups, handle_signals=False, on_started=self._started)
            self._outcome.set_result(outcome)
        except BaseException as e:  # raised again in the caller's thread
            self._outcome.set_exception(e)

    def _started(self, run: RunPaths) -> None:
        self._run = run
        self._notify()

    def _notify(self) -> None:
        with self._changed:
            self._changed.notify_all()

    def _cancel_and_wait(self) -> None:
        """Cancel the run, as ``zellij-swarm cancel`` does, once it can hear it (or it ended
        first), and wait for its end."""
        with self._changed:
            self._changed.wait_for(lambda: self._run is not None or self._outcome.done())
        if self._run is not None and not self._outcome.done():
            try:
                control.ask(self._run, "cancel", timeout=CANCEL_ANSWER, tasks=[])
            except exc.SwarmError:
                pass  # it ended before it took the cancel: nothing left to stop
        self._outcome.exception()  # waits for its end
        self._thread.join()


def _uninterrupted(step: Callable[[], None]) -> None:
    """Run ``step`` to its end, starting it again when a Ctrl-C cuts it short."""
    while True:
        try:
            step()
            return
        except KeyboardInterrupt:
            continue


def _members(hint: object) -> set[object]:
    """The types (and ``Literal`` values) a type hint admits, flattened."""
    origin = get_origin(hint)
    if origin is Union or origin is UnionType:
        return set().union(*(_members(arg) for arg in get_args(hint)))
    if origin is Literal:
        return {("literal", value) for value in get_args(hint)}
    return {hint}


def check_settings_keywords(function: Callable[..., Any], table: Sequence[settings.Setting] = settings.SETTINGS,
                            resolved: type = settings.Resolved) -> None:
    """``function``'s keywords after ``_NOT_SETTINGS`` are the settings of ``table``, in its
    order, each accepting ``None`` (not given) and every value the setting's ``resolved``
    field can hold. A ``TypeError`` names what differs: raised at import for ``Swarm``."""
    keywords = [p.name for p in inspect.signature(function).parameters.values()
                if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name not in _NOT_SETTINGS]
    names = [s.name for s in table]
    if keywords != names:
        missing, extra = sorted(set(names) - set(keywords)), sorted(set(keywords) - set(names))
        raise TypeError(f"{function.__qualname__}'s keywords differ from the settings table: "
                        f"missing {missing}, not settings {extra}" if missing or extra else
                        f"{function.__qualname__}'s keywords are not in the settings table's order")
    hints, fields_ = get_type_hints(function), get_type_hints(resolved)
    for name in names:
        accepted = _members(hints[name])
        if type(None) not in accepted or not _members(fields_[name]) <= accepted:
            raise TypeError(f"{function.__qualname__}: keyword {name}: {hints[name]} does not accept None and every "
                            f"value of the setting ({fields_[name]})")


check_settings_keywords(Swarm.__init__)
Swarm.__init__.__doc__ = "Settings (SPEC §3; each ranks like a flag):\n\n" + "\n".join(
    f"{s.name}: {s.help}" for s in settings.SETTINGS)
