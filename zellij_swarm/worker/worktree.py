"""A worktree per agent (``worktree = true``): such a task runs in a git worktree of its own,
on a branch of its own, so that agents changing the same code never see each other's
half-done work, and each one's work ends up on a branch.

- **The base** is the ``HEAD`` commit of the repository the run starts in, resolved once when
  the run is planned (``plan_base``) and recorded in ``run.json``, so that a resumed or
  retried run makes its worktrees from the same commit even if ``HEAD`` has moved since.
  Uncommitted changes of the source checkout are not carried over (``source_changes`` says
  so, once).
- **A task's worktree** is ``<run dir>/worktrees/<task id>``, on the branch
  ``swarm/<run id>/<task name>`` (``BranchNames``). It is made at the task's first dispatch
  and every later generation of the task (a retry, a restart, ``retry``) continues in it.
- **Its worker's cwd** is the place in the worktree where it would otherwise have run: the
  task's ``cwd``, else the run's, taken relative to the repository's top.
- **Its changed-files count** (against the base: committed or not, plus untracked files) is
  taken when the task reaches its final status, for ``status`` and the board.
- **Reviewing and collecting it** (``diff``, ``collect``): ``work_diff`` shows its commits and
  its files as they are, read through a temporary index so that what the agent staged stays
  as it is; ``collect`` commits what is not committed onto the task's branch.

Every git call goes through ``external.run`` with a timeout, and every failure becomes
a ``WorktreeError`` in git's own words; dispatch turns one into a failed generation
(``worktree_failed``), planning into bad input (exit 2), ``prune`` into a line.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from zellij_swarm import exc, external, quoting
from zellij_swarm.config.settings import Resolved
from zellij_swarm.config.swarmfile import TaskSpec
from zellij_swarm.records import rundir

QUERY_TIMEOUT = 30.0  # seconds: rev-parse, status, diff (a status of a big checkout takes a while)
ADD_TIMEOUT = 300.0  # seconds: `worktree add` checks out the whole tree
LOCK_TIMEOUT = ADD_TIMEOUT  # the longest another swarm's `worktree add` may hold the repository
BRANCH_PREFIX = "swarm"
COMPONENT_MAX = 64  # characters of a task name kept in its branch name
_NOT_IN_BRANCH = re.compile(r"[^A-Za-z0-9._-]+")


class WorktreeError(exc.SwarmError):
    """A worktree that cannot be made, read or removed; the message is git's own words."""


def wanted(spec: TaskSpec, default: bool) -> bool:
    """Whether ``spec`` runs in a worktree: its own ``worktree`` key, else the run's setting."""
    return spec.worktree if spec.worktree is not None else default


@dataclass(frozen=True)
class Base:
    """What a run's worktrees are made from: the top of the source checkout and its ``HEAD``
    commit when the run started."""

    repo: str
    commit: str

    def to_record(self) -> dict[str, str]:
        """``run.json``'s ``worktree_base``."""
        return {"repo": self.repo, "commit": self.commit}

    @classmethod
    def from_record(cls, record: Mapping[str, Any] | None) -> Base | None:
        return None if record is None else cls(repo=str(record["repo"]), commit=str(record["commit"]))

    def relative(self, cwd: str) -> str | None:
        """Where ``cwd`` is in the repository (``.`` at its top), or None outside it. Both
        are made real first: a cwd reached through a symlink is still inside."""
        rel = os.path.relpath(os.path.realpath(cwd), os.path.realpath(self.repo))
        return None if rel == os.pardir or rel.startswith(os.pardir + os.sep) else rel


def plan_base(tasks: Sequence[TaskSpec], resolved: Resolved, cwd: str) -> Base | None:
    """The base of a run's worktrees, resolved now, once — or None when no task wants one.
    Bad input (exit 2), before anything runs: ``cwd`` outside a git repository, a repository
    without a commit, a worktree task whose ``cwd`` is outside the repository."""
    who = _who_wants(tasks, resolved)
    if who is None:
        return None
    try:
        top = _git(cwd, "rev-parse", "--show-toplevel", check=False)
        if top.returncode != 0:
            raise exc.UsageError(f"not a git repository: {cwd} ({who}, and worktrees are made from the repository "
                                 "the run starts in)")
        head = _git(cwd, "rev-parse", "--verify", "--quiet", "HEAD^{commit}", check=False)
    except WorktreeError as e:
        raise exc.UsageError(f"{who}: {e}") from None
    repo = top.stdout.strip()
    if head.returncode != 0:
        raise exc.UsageError(f"the git repository {repo} has no commit yet ({who}, and worktrees start from HEAD): "
                             "commit something first")
    base = Base(repo=repo, commit=head.stdout.strip())
    for spec in tasks:
        if wanted(spec, resolved.worktree) and spec.cwd is not None:
            try:
                place(base, spec.cwd)
            except WorktreeError as e:
                raise exc.InputError(f"task {spec.name!r}: {e}", path=spec.origin or None) from None
    return base


def place(base: Base, cwd: str) -> str:
    """Where ``cwd`` is in the repository, relative to its top; a ``WorktreeError`` outside it."""
    rel = base.relative(cwd)
    if rel is None:
        raise WorktreeError(f"cwd {cwd} is outside the git repository {base.repo}: a task with a worktree runs "
                            "in it, so its cwd must be a place in the repository")
    return rel


def _who_wants(tasks: Sequence[TaskSpec], resolved: Resolved) -> str | None:
    """Why the run needs a base, for messages: the setting, or the first task asking."""
    if resolved.worktree and any(spec.worktree is not False for spec in tasks):
        return f"worktree is on (from {resolved.sources['worktree']})"
    asking = next((spec for spec in tasks if spec.worktree), None)
    return None if asking is None else f"task {asking.name!r} has worktree = true"


def source_changes(base: Base) -> str | None:
    """The warning a run starting with uncommitted changes in its source checkout gets
    (``worktree_base``): its worktrees start from the commit, without them."""
    try:
        dirty = uncommitted(base.repo)
    except WorktreeError as e:
        return f"cannot tell whether {base.repo} has uncommitted changes: {e}"
    if not dirty:
        return None
    return (f"the checkout {base.repo} has uncommitted changes ({_count(dirty, 'file')}, untracked ones included): "
            f"worktrees start from its HEAD commit {base.commit[:12]} and do not have them")


# ----- branch names ----------------------------------------------------------------------


def branch_component(name: str, task_id: str) -> str:
    """A task name as one component of a branch name: every run of characters outside
    ``[A-Za-z0-9._-]`` becomes ``-``, runs of ``-`` and of ``.`` become one, at most
    ``COMPONENT_MAX`` characters are kept, then a leading ``.``/``-`` and a trailing ``.``,
    ``-`` or ``.lock`` go (``git check-ref-format`` forbids them); nothing left: the task id.

    >>> branch_component("fix: the bug!", "t3"), branch_component("../.lock", "t4"), branch_component("..", "t5")
    ('fix-the-bug', 'lock', 't5')
    """
    text = re.sub(r"\.{2,}", ".", re.sub(r"-{2,}", "-", _NOT_IN_BRANCH.sub("-", name)))[:COMPONENT_MAX]
    text = text.lstrip(".-")
    while (trimmed := text.removesuffix(".lock").rstrip(".-")) != text:
        text = trimmed
    return text or task_id


class BranchNames:
    """Each worktree task's branch, ``swarm/<run id>/<component>``. Tasks take their names in
    id order; one whose component an earlier task took gets its id appended
    (``fix-bug-t7``), so that names stay the same while tasks are added to the run, and a
    resumed run gives the same ones. A name depends only on the tasks before it: the tasks
    are walked once over the run (``walked``: how far), not once per name."""

    def __init__(self, run_id: str) -> None:
        self._prefix = f"{BRANCH_PREFIX}/{run_id}/"
        self._given: dict[str, str] = {}  # task id -> component
        self._taken: set[str] = set()
        self.walked = 0  # the order of the last task walked: every worktree task up to it is named

    def given(self, task_id: str) -> bool:
        return task_id in self._given

    def of(self, task_id: str, tasks: Iterable[tuple[str, str | None]]) -> str:
        """The branch of ``task_id``; ``tasks``: the tasks after ``walked`` (earlier ones are
        passed over) as (id ``t<order>``, name — None for one without a worktree), in id order,
        up to ``task_id`` at least."""
        if task_id not in self._given:
            for tid, name in tasks:
                order = int(tid[1:])
                if order <= self.walked:
                    continue
                self.walked = order
                if name is not None:
                    component = branch_component(name, tid)
                    while component in self._taken:
                        component = f"{component}-{tid}"
                    self._given[tid] = component
                    self._taken.add(component)
                if tid == task_id:
                    break
        return self._prefix + self._given[task_id]


# The run's tasks from an order on, as (id, spec) in id order, those it let go of left out
# (``records.task_table.TaskTable.specs``)
TasksFrom = Callable[[int], Iterable[tuple[str, TaskSpec]]]


# ----- a run's worktrees -------------------------------------------------------------------


@dataclass
class Worktree:
    """One task's worktree, and what ``status`` says of it."""

    path: Path
    branch: str | None  # None: its HEAD is detached (the agent checked out a commit)
    base: Base
    changed_files: int | None = None
    _counted: bool = field(default=False, repr=False)

    def workdir(self, cwd: str) -> str:
        """Where a worker that would have run in ``cwd`` (in the source checkout) runs."""
        return os.path.normpath(self.path / place(self.base, cwd))

    def new_attempt(self) -> None:
        """Another generation works in it: its count is taken again when the task ends."""
        self.changed_files, self._counted = None, False

    def row(self, *, final: bool) -> dict[str, Any]:
        """``{"path", "branch", "base", "changed_files"}``; the count is taken the first time
        the row of the ended task is made (when it is frozen): about 10 ms of git, once per
        task, so that ``status`` reads records and never runs git."""
        if final and not self._counted:
            self.changed_files, self._counted = changed_files(self.path, self.base.commit), True
        return {"path": str(self.path), "branch": self.branch, "base": self.base.commit,
                "changed_files": self.changed_files}


def worktrees_dir(run_dir: Path) -> Path:
    return run_dir / "worktrees"


class Worktrees:
    """The worktrees of one run: made at dispatch, one per task, reused by its later
    generations. Made on the supervisor's loop: ``git worktree add`` takes 50–200 ms (more
    in a big repository), once per task — for agents that run minutes, not for 2,000
    one-second shards."""

    def __init__(self, base: Base | None, *, run_dir: Path, run_id: str, default: bool) -> None:
        self.base = base  # None: no task wanted a worktree when the run started
        self.default = default
        self._dir = worktrees_dir(run_dir)
        self._names = BranchNames(run_id)
        self._made: dict[str, Worktree] = {}

    def wanted(self, spec: TaskSpec) -> bool:
        return wanted(spec, self.default)

    def path(self, task_id: str) -> Path:
        return self._dir / task_id

    def refusal(self, spec: TaskSpec, *, cwd: str) -> str | None:
        """Why ``spec``, added to the running swarm, could never have the worktree it wants
        (None: it can, or wants none) — said to ``add`` at once, not as a failure of every
        attempt of the task."""
        if not self.wanted(spec):
            return None
        if self.base is None:
            return (f"task {spec.name!r} wants a worktree, and the run has no base commit for worktrees: none of its "
                    "tasks wanted one when it started (start a run with --worktree for that)")
        try:
            place(self.base, spec.cwd or cwd)
        except WorktreeError as e:
            return f"task {spec.name!r}: {e}"
        return None

    def ready(self, task_id: str, spec: TaskSpec, *, cwd: str, tasks: TasksFrom) -> Worktree:
        """The worktree a new generation of ``task_id`` runs in: made from the base on the
        task's first generation, the same one afterwards (also one made by an earlier
        supervisor of the run). ``cwd``: the run's; ``tasks``: the run's tasks from an order
        on, for its branch name (``TasksFrom``)."""
        if self.base is None:
            raise WorktreeError("the run has no base commit for worktrees: none of its tasks wanted one when it "
                                "started (start a run with --worktree for that)")
        place(self.base, spec.cwd or cwd)  # a cwd outside the repository fails before anything is made
        wt = self._made.get(task_id)
        if wt is None or not (wt.path / ".git").exists():  # (an earlier attempt may have removed it)
            wt = self.existing(task_id)
        if wt is None:
            wt = self._add(self.base, self.path(task_id), self._branch(task_id, tasks))
        wt.new_attempt()
        self._made[task_id] = wt
        return wt

    def name_before_letting_go(self, task_id: str, spec: TaskSpec, tasks: TasksFrom) -> None:
        """The run lets go of ``task_id``'s record (it ended; ``records.task.EndedTasks``): a
        worktree task not named yet (it never ran: skipped, cancelled) is named now, so that
        the later tasks' names still count it, as a retry or a resume, which hold every task,
        will (``tasks``: as for ``ready``)."""
        if self.base is not None and self.wanted(spec) and not self._names.given(task_id):
            self._branch(task_id, tasks)

    def _branch(self, task_id: str, tasks: TasksFrom) -> str:
        return self._names.of(task_id, ((tid, s.name if self.wanted(s) else None)
                                        for tid, s in tasks(self._names.walked + 1)))

    def existing(self, task_id: str) -> Worktree | None:
        """The worktree of ``task_id`` if an earlier generation made it (for ``resume``)."""
        if self.base is None:  # the run makes no worktrees: asked for each of its tasks, answered at once
            return None
        path = self.path(task_id)
        if not (path / ".git").exists():
            return None
        return Worktree(path, current_branch(path), self.base)

    def _add(self, base: Base, path: Path, branch: str) -> Worktree:
        try:
            rundir.make_private_dir(path.parent)
        except OSError as e:
            raise WorktreeError(f"cannot create {path.parent}: {e.strerror}") from None
        with _repository_locked(base.repo):
            if not path.exists():
                # A worktree its task removed (``rm -rf`` of its directory) stays registered:
                # git refuses to add one there again ("missing but already registered"), and
                # its branch counts as checked out there. That registration alone goes.
                _git(base.repo, "worktree", "remove", "--force", str(path), check=False)
            # The branch exists when the run was pruned and then retried: the work goes on from it.
            has_branch = _git(base.repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}",
                              check=False).returncode == 0
            where = [str(path), branch] if has_branch else ["-b", branch, str(path), base.commit]
            _git(base.repo, "worktree", "add", "--quiet", *where, timeout=ADD_TIMEOUT)
        return Worktree(path, branch, base)


@contextlib.contextmanager
def _repository_locked(repo: str) -> Iterator[None]:
    """Hold the repository while a worktree is added. git takes lock files of its own for
    it (the new branch, ``worktrees/<name>``) and fails at once, rather than wait, when
    another git holds one: two swarms adding worktrees to one repository take turns here.
    The lock is an ``flock`` on the repository's git directory itself, so that nothing is
    written into the repository for it."""
    common = _common_dir(repo)
    fd = os.open(common, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if not rundir.flock_within(fd, LOCK_TIMEOUT, every=0.05):
            raise WorktreeError(f"{common} stayed locked by another swarm adding a worktree for {LOCK_TIMEOUT:g}s")
        yield
    finally:
        os.close(fd)  # releases the lock


# ----- reading and removing ----------------------------------------------------------------


def made(run_dir: Path) -> list[Path]:
    """The worktrees a run made (its ``worktrees/<task id>`` directories), in id order."""
    try:
        names = os.listdir(worktrees_dir(run_dir))
    except FileNotFoundError:
        return []
    return [worktrees_dir(run_dir) / n for n in sorted(names, key=_id_order) if not n.startswith(".")]


def _id_order(name: str) -> tuple[int, str]:
    digits = name[1:]
    return (int(digits), name) if digits.isdigit() else (0, name)


def not_a_worktree(path: Path) -> str | None:
    """Why the worktree at ``path`` cannot be used any more, else None: gone (``prune``
    removes it), or its directory there without its ``.git`` (taken apart by hand)."""
    if (path / ".git").exists():
        return None
    return "no longer a git worktree (no .git in it)" if path.is_dir() else "gone (pruned)"


def current_branch(path: Path) -> str | None:
    """The branch checked out in the worktree ``path``; None when its HEAD is detached."""
    out = _git(path, "symbolic-ref", "--quiet", "--short", "HEAD", check=False)
    return out.stdout.strip() if out.returncode == 0 else None


def changed_files(path: Path, base: str) -> int | None:
    """How many files of the worktree ``path`` differ from ``base``: changed by its commits
    or not yet committed, plus untracked ones (not ignored ones); None when git cannot say."""
    try:
        differ = _git(path, "diff", "--name-only", "--no-renames", "-z", base, "--", env=_reading_env(), names=True)
        untracked = _git(path, "ls-files", "--others", "--exclude-standard", "-z", env=_reading_env(), names=True)
    except WorktreeError:
        return None
    return len({*_nul_list(differ.stdout), *_nul_list(untracked.stdout)})


@dataclass(frozen=True)
class Removed:
    branch: str | None  # the branch its HEAD was on, else the task's own (``remove``)
    commits: int | None  # commits on it beyond the base (None: unknown)
    branch_deleted: bool  # it held none of them: nothing of the task's is lost with it
    detached: bool = False  # its HEAD was on no branch


def _not_through_a_link(path: Path) -> None:
    """Refuse a worktree the run made that is now a symbolic link (moved elsewhere, a link
    left in its place; or planted): git would remove what it points to, outside the run."""
    if os.path.islink(path):
        raise WorktreeError(f"it is a symbolic link (to {quoting.terminal_text(os.readlink(path))}), not the "
                            "directory the run made; look, then remove it by hand")


def _no_checkout() -> WorktreeError:
    return WorktreeError("its .git file is gone (its task removed it): git cannot tell what it holds; look, "
                         "then prune --force removes the directory")


def remove(path: Path, *, base: str | None, force: bool, task_branch: str | None = None) -> Removed:
    """Remove the worktree ``path`` (with ``force``, uncommitted work and all). Its branch
    holds the task's commits and is kept — unless it has none beyond ``base``, when it is
    deleted too (only if it still points at ``base``: ``update-ref`` checks). A detached HEAD
    is on no branch: then ``task_branch``, the one the task was given, is that branch.

    A worktree whose ``.git`` file its task removed is no git checkout any more (git cannot
    say what it holds): with ``force`` its directory goes, and the repository forgets it at
    its next ``git worktree prune``; without, a ``WorktreeError`` says so."""
    _not_through_a_link(path)
    if not os.path.lexists(path / ".git"):
        if not force:
            raise _no_checkout()
        shutil.rmtree(path)
        return Removed(task_branch, None, False)
    common = _common_dir(path)
    on = current_branch(path)
    branch = on or task_branch
    commits = None
    if branch is not None and base is not None:
        counted = _git(path, "rev-list", "--count", f"{base}..refs/heads/{branch}", check=False)
        commits = int(counted.stdout) if counted.returncode == 0 and counted.stdout.strip().isdigit() else None
    # git removes a worktree holding a submodule only when forced: the caller has looked at
    # what the submodules hold (``unsaved``), as at what the worktree holds
    _git(path, "worktree", "remove", *(["--force"] if force or submodules(path) else []), str(path))
    return Removed(branch, commits, _drop_empty_branch(common, branch, base, commits), detached=on is None)


def forget(where: str, *, base: Base, branch: str | None, task_branch: str | None) -> Removed:
    """Forget the worktree at ``where`` (as the repository records it: ``missing_records``), whose
    directory is gone — deleted or moved by hand, not by ``remove``. Until then its branch
    stays checked out there for git (no other worktree may check it out), and only ``git
    worktree prune`` would forget it — with every such worktree of the repository: this
    forgets the run's one alone (``git worktree remove --force`` of the missing path). Its
    ``branch`` (the one checked out there; None, detached: ``task_branch``, the task's own)
    goes as ``remove``'s does."""
    common = _common_dir(base.repo)
    name = branch or task_branch
    counted = _git(common, "rev-list", "--count", f"{base.commit}..refs/heads/{name}", check=False) if name else None
    commits = int(counted.stdout) if counted and counted.returncode == 0 and counted.stdout.strip().isdigit() else None
    _git(base.repo, "worktree", "remove", "--force", where)
    return Removed(name, commits, _drop_empty_branch(common, name, base.commit, commits), detached=branch is None)


def missing_records(base: Base) -> dict[str, str | None]:
    """Every worktree the repository of ``base`` records whose directory is gone, unless it is
    locked (``git worktree lock``: on a drive not mounted, say): its path as git has it
    (``as_recorded``) -> the branch checked out there (None: a detached HEAD). Empty when git
    cannot be asked."""
    try:
        listed = _git(base.repo, "worktree", "list", "--porcelain", "-z", names=True).stdout
    except WorktreeError:
        return {}
    out: dict[str, str | None] = {}
    for entry in listed.split("\0\0"):
        fields = dict(field.partition(" ")[::2] for field in entry.split("\0") if field)
        if "worktree" in fields and "locked" not in fields and not os.path.lexists(fields["worktree"]):
            out[fields["worktree"]] = fields["branch"].removeprefix("refs/heads/") if "branch" in fields else None
    return out


def as_recorded(path: Path) -> str:
    """``path`` as git records a worktree there: its directory's real path (which may be gone)."""
    return os.path.join(os.path.realpath(path.parent), path.name)


def _drop_empty_branch(common: Path, branch: str | None, base: str | None, commits: int | None) -> bool:
    """Delete the task's ``branch`` when it holds no commit beyond ``base`` and still points
    there (``update-ref`` checks): nothing of the task's is lost with it. Whether it was."""
    if branch is None or base is None or commits != 0 or not branch.startswith(f"{BRANCH_PREFIX}/"):
        return False
    return _git(common, "update-ref", "-d", f"refs/heads/{branch}", base, check=False).returncode == 0


# ----- git ---------------------------------------------------------------------------------


def _git(where: str | Path, *args: str, timeout: float = QUERY_TIMEOUT, check: bool = True,
         env: Mapping[str, str] | None = None, names: bool = False) -> external.CmdResult:
    """``git -C where ARGS…`` with a timeout; a failure is a ``WorktreeError`` in git's words.
    ``names``: its output lists file names (``-z``), read as the bytes they are (a ``\r`` or a
    byte that is not UTF-8 in a name is kept, ``external.run``'s ``exact``)."""
    try:
        return external.run(["git", "-C", str(where), *args], timeout=timeout, check=check, env=env, exact=names)
    except exc.BackendError as e:
        raise WorktreeError(f"git {args[0]}: {_why(e, timeout)}") from None


def _why(e: exc.BackendError, timeout: float) -> str:
    if e.code == "multiplexer_missing":
        return "git is not installed (not found on PATH)"
    if e.code == "pane_call_timeout":
        return f"no answer within {timeout:g}s"
    lines = [ln.strip() for ln in e.stderr.splitlines() if ln.strip()]
    return lines[0].removeprefix("fatal: ").removeprefix("error: ") if lines else e.message


def _reading_env() -> dict[str, str]:
    """For git calls that only read: without the optional index lock a ``status`` takes to
    refresh the index, which could make an agent's own ``git commit`` fail meanwhile."""
    return {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}


def uncommitted(where: str | Path) -> list[str]:
    """The files of the checkout ``where`` whose changes are not committed (untracked ones
    included, ignored ones not)."""
    return [path for _, path in _status(where, ignored=False)]


@dataclass(frozen=True)
class Unsaved:
    """What removing a worktree would lose beyond its branch (``unsaved``)."""

    uncommitted: list[str]  # files whose changes are not committed, untracked ones included
    ignored: list[str]  # what git ignores: files, and whole directories (``node_modules/``)
    ignored_files: int  # the files in ``ignored``, and their size in bytes (links not followed)
    ignored_bytes: int
    stray_commits: int  # commits its HEAD reaches that no ref does: a detached HEAD's, a rebase's under way
    head: str  # its HEAD commit

    @property
    def work(self) -> bool:
        """Removing it would lose work that is not in ignored files."""
        return bool(self.uncommitted or self.stray_commits)


# Refs of one worktree of its own (gitrepository-layout): they go with it, so they save nothing.
_PER_WORKTREE_REFS = ("refs/bisect/*", "refs/worktree/*", "refs/rewritten/*")


def unsaved(path: Path) -> Unsaved:
    """What the worktree ``path`` holds that removing it would lose: uncommitted and ignored
    files, and commits reachable from its HEAD alone. A branch (or tag, or any other ref of the
    repository) reaching a commit keeps it; ``--ignore-missing``: a HEAD on a branch without a
    commit yet (``checkout --orphan``) reaches none."""
    _not_through_a_link(path)
    if not os.path.lexists(path / ".git"):  # git would answer for the checkout around it
        raise _no_checkout()
    held = _unsaved_in(path)
    for sub in submodules(path):  # each its own checkout: its files and commits are looked at too
        inner = _unsaved_in(path / sub)
        held = replace(held, uncommitted=[*held.uncommitted, *(f"{sub}/{name}" for name in inner.uncommitted)],
                       ignored=[*held.ignored, *(f"{sub}/{name}" for name in inner.ignored)],
                       ignored_files=held.ignored_files + inner.ignored_files,
                       ignored_bytes=held.ignored_bytes + inner.ignored_bytes,
                       stray_commits=held.stray_commits + inner.stray_commits)
    return held


def _unsaved_in(path: Path) -> Unsaved:
    """``unsaved`` of one checkout, its submodules left out."""
    entries = _status(path, ignored=True)
    ignored = [p for mark, p in entries if mark == "!!"]
    stray = _git(path, "rev-list", "--count", "--ignore-missing", "HEAD", "--not",
                 *(f"--exclude={ref}" for ref in _PER_WORKTREE_REFS), "--glob=refs/*", env=_reading_env())
    head = _git(path, "rev-parse", "--verify", "--quiet", "HEAD", check=False).stdout.strip()
    files, size = _disk_use(path, ignored)
    return Unsaved([p for mark, p in entries if mark != "!!"], ignored, files, size, int(stray.stdout.strip() or 0),
                   head)


def submodules(path: Path) -> list[str]:
    """The initialised submodules of the checkout ``path``, nested ones too, by their paths
    in it (none when git cannot list them)."""
    if not os.path.lexists(path / ".gitmodules"):
        return []
    listed = _git(path, "submodule", "foreach", "--quiet", "--recursive", 'printf "%s\\0" "$displaypath"',
                  check=False, env=_reading_env(), names=True)
    return _nul_list(listed.stdout) if listed.returncode == 0 else []


def _disk_use(top: Path, names: Iterable[str]) -> tuple[int, int]:
    """How many files ``names`` (relative to ``top``; a directory: every file under it) hold,
    and their size. Links are counted, never followed; a name that is gone counts as nothing."""
    files = size = 0
    for name in names:
        try:
            st = os.lstat(top / name)
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode):
            files, size = files + 1, size + st.st_size
            continue
        for where, dirs, leaves in os.walk(top / name):
            for leaf in (*leaves, *(d for d in dirs if os.path.islink(os.path.join(where, d)))):
                try:
                    files, size = files + 1, size + os.lstat(os.path.join(where, leaf)).st_size
                except OSError:
                    pass
    return files, size


def _status(where: str | Path, *, ignored: bool) -> list[tuple[str, str]]:
    """``git status`` of the checkout ``where``: (its two-letter mark, path) per file that is
    not committed, untracked ones each; with ``ignored``, ignored ones too (mark ``!!``), a
    directory ignored as a whole as one, its name ending in ``/``."""
    out = _git(where, "status", "--porcelain=v1", "-z", "--untracked-files=all",
               *(["--ignored=matching"] if ignored else []), env=_reading_env(), names=True)
    found: list[tuple[str, str]] = []
    entries = iter(_nul_list(out.stdout))
    for entry in entries:
        found.append((entry[:2], entry[3:]))
        if entry[0] in "RC":  # a rename or copy: its source path follows as an entry of its own
            next(entries, None)
    return found


def _common_dir(where: str | Path) -> Path:
    """The repository's own git directory (shared by all its worktrees); git says it
    relative to ``where`` unless it is elsewhere."""
    return Path(where) / _git(where, "rev-parse", "--git-common-dir").stdout.strip()


def _nul_list(text: str) -> list[str]:
    return [item for item in text.split("\0") if item]


def _count(items: Sequence[object], noun: str) -> str:
    return f"{len(items)} {noun}{'' if len(items) == 1 else 's'}"


# ----- reviewing and collecting a task's work ----------------------------------------------

FALLBACK_NAME = "zellij-swarm"  # who commits when the repository names no one
FALLBACK_EMAIL = "zellij-swarm@localhost"


@contextlib.contextmanager
def _whole_index(path: Path) -> Iterator[tuple[dict[str, str], list[str]]]:
    """An environment whose index holds the worktree as it is — commits, changes and untracked
    files, ignored ones left out — in a temporary index file: the worktree's own index, and
    what the agent staged in it, stay as they are. With it, the paths git could not add (a
    repository the task made and never committed in: "'sub/' does not have a commit checked
    out"), each shown safe for a terminal: the rest is read all the same, and the reader says
    what was left out. They are what the index still lacks (``ls-files --others``, whole names
    NUL-ended), not git's messages, which print a name as it is — a newline in it would cut it."""
    import tempfile  # here: only a worktree's review needs it, and every run imports this module

    fd, index = tempfile.mkstemp(prefix="zsw-index-")
    os.close(fd)
    os.unlink(index)  # git makes it: an empty file is not an index
    env = {**_reading_env(), "GIT_INDEX_FILE": index}
    try:
        _git(path, "read-tree", "HEAD", env=env, check=False)  # a head to start from: unchanged files cost nothing
        added = _git(path, "add", "--all", "--ignore-errors", "--", ".", env=env, timeout=ADD_TIMEOUT, check=False)
        left_out: list[str] = []
        if added.returncode != 0:
            said = [line.strip() for line in added.stderr.splitlines() if line.strip()]
            left_out = [quoting.terminal_text(name) for name in _nul_list(_git(
                path, "ls-files", "-z", "--others", "--exclude-standard", "--directory", "--", ".", env=env,
                names=True).stdout)]
            if not left_out or any(line.startswith("fatal: ") for line in said):
                first = (said or [f"exit status {added.returncode}"])[0]
                raise WorktreeError(f"git add: {first.removeprefix('fatal: ')}")
        yield env, left_out
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(index)


def work_diff(path: Path, base: str, *, stat: bool = False) -> str:
    """What the worktree ``path`` changed against ``base``: its commits (one line each), then
    the diff of its files as they are now (committed or not, untracked included, ignored
    ones not) — or, with ``stat``, git's ``--stat`` of it."""
    commits = _git(path, "log", "--oneline", "--no-decorate", f"{base}..HEAD", "--", env=_reading_env()).stdout
    with _whole_index(path) as (env, left_out):
        diff = _git(path, "diff", "--cached", "--no-color", *(["--stat"] if stat else []), base, env=env,
                    timeout=ADD_TIMEOUT).stdout
    text = commits + ("\n" if commits and diff else "") + diff
    return text + "".join(f"not in the diff: {name} (git cannot add it)\n" for name in left_out)


def branch_diff(repo: str, base: str, branch: str, *, stat: bool = False) -> str:
    """``work_diff`` of a task whose worktree is gone: what its branch holds."""
    ref = f"refs/heads/{branch}"
    commits = _git(repo, "log", "--oneline", "--no-decorate", f"{base}..{ref}", "--", env=_reading_env()).stdout
    diff = _git(repo, "diff", "--no-color", *(["--stat"] if stat else []), base, ref, "--", env=_reading_env(),
                timeout=ADD_TIMEOUT).stdout
    return commits + ("\n" if commits and diff else "") + diff


def work_summary(path: Path, base: str) -> str:
    """One line: ``3 files changed, 10 insertions(+), 2 deletions(-); 2 commits``."""
    with _whole_index(path) as (env, left_out):
        short = _git(path, "diff", "--cached", "--shortstat", base, env=env, timeout=ADD_TIMEOUT).stdout.strip()
    count = _git(path, "rev-list", "--count", f"{base}..HEAD", env=_reading_env()).stdout.strip()
    commits = int(count) if count.isdigit() else 0
    return ((short or "no change") + (f"; {_count(range(commits), 'commit')}" if commits else "")
            + (f"; {_count(left_out, 'path')} git cannot add" if left_out else ""))


@dataclass(frozen=True)
class Collected:
    commit: str  # the commit the task's branch is at now
    committed: bool  # False: there was nothing to commit
    identity: str  # "Name <email>", and whether it is the fallback
    fallback: bool
    moved: str | None  # the branch moved to the commit (a detached HEAD's task branch)
    on: str | None  # the branch the commit is on: the worktree's own (the agent may have switched), or ``moved``


def collect_refusal(path: Path, branch: str | None) -> str | None:
    """Why ``collect`` must not commit what the worktree ``path`` holds (None: it may), as
    ``git commit`` would refuse, or as a commit would lose work: paths a merge left unmerged
    (their conflict markers would be committed as the task's work), a path git cannot add (a
    repository the task made and never committed in), or a detached HEAD that
    does not contain the task's ``branch`` (moving the branch there would leave its commits
    on no branch)."""
    unmerged = sorted(set(_nul_list(_git(path, "diff", "--name-only", "--diff-filter=U", "-z", names=True).stdout)))
    if unmerged:
        shown = ", ".join(unmerged[:3]) + (f" and {len(unmerged) - 3} more" if len(unmerged) > 3 else "")
        return f"has unresolved merge conflicts ({shown}): resolve them (git add), then collect again"
    with _whole_index(path) as (_, left_out):
        if left_out:
            more = f" and {_count(left_out[1:], 'more path')}" if len(left_out) > 1 else ""
            return (f"holds what git cannot add ({left_out[0]}{more}): commit in it, or remove it, "
                    "then collect again")
    if branch is None or current_branch(path) is not None:
        return None
    tip = _git(path, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}", check=False).stdout.strip()
    if tip and _git(path, "merge-base", "--is-ancestor", tip, "HEAD", check=False).returncode != 0:
        return (f"is on a detached HEAD that does not contain the task's branch {branch}: moving the branch there "
                "would leave its commits on no branch; check out (or merge) the branch in the worktree, then collect")
    return None


def collect(path: Path, *, branch: str | None, message: str, verify: bool) -> Collected:
    """Commit everything the worktree ``path`` holds that is not committed (untracked files
    included, ignored ones not) onto its branch. A detached HEAD is committed on and
    ``branch``, the task's, moved to the new commit (or to the commit the agent made there, when
    nothing is left to commit). The repository's identity commits, else
    ``FALLBACK_NAME``; no hook runs unless ``verify``."""
    identity = _identity(path)
    env = dict(os.environ)
    if identity is None:
        env.update(GIT_AUTHOR_NAME=FALLBACK_NAME, GIT_AUTHOR_EMAIL=FALLBACK_EMAIL,
                   GIT_COMMITTER_NAME=FALLBACK_NAME, GIT_COMMITTER_EMAIL=FALLBACK_EMAIL)
    if not verify:  # no hook at all, post-commit ones included (--no-verify skips only two)
        env.update(GIT_CONFIG_COUNT="1", GIT_CONFIG_KEY_0="core.hooksPath", GIT_CONFIG_VALUE_0=os.devnull)
    _git(path, "add", "--all", "--", ".", timeout=ADD_TIMEOUT, env=env)
    staged = _git(path, "diff", "--cached", "--quiet", check=False).returncode != 0
    if staged:
        try:
            _git(path, "commit", "--quiet", *([] if verify else ["--no-verify"]), "-m", message, timeout=ADD_TIMEOUT,
                 env=env)
        except WorktreeError as e:
            if verify:  # the hooks ran: most likely one of them said no
                raise WorktreeError(f"{e} (--verify ran the repository's commit hooks: one refused the commit?); "
                                    "the changes stay staged in the worktree") from None
            raise
    head = _git(path, "rev-parse", "HEAD").stdout.strip()
    moved = None
    on = current_branch(path)
    if on is None and branch is not None:  # a detached HEAD: committed now, or by the agent (it contains the branch)
        ref = f"refs/heads/{branch}"
        if _git(path, "rev-parse", "--verify", "--quiet", ref, check=False).stdout.strip() != head:
            _git(path, "update-ref", "-m", "zellij-swarm collect", ref, head)
            moved = branch
    who = identity or f"{FALLBACK_NAME} <{FALLBACK_EMAIL}>"
    return Collected(head, staged, who, identity is None, moved, on or moved)


def _identity(path: Path) -> str | None:
    """``Name <email>`` as the repository's configuration (or git's environment variables)
    names its committer; None when it names no one."""
    name = os.environ.get("GIT_COMMITTER_NAME") or _config(path, "user.name")
    email = os.environ.get("GIT_COMMITTER_EMAIL") or _config(path, "user.email")
    return f"{name} <{email}>" if name and email else None


def _config(path: Path, key: str) -> str | None:
    out = _git(path, "config", "--get", key, check=False)
    return out.stdout.strip() or None if out.returncode == 0 else None
