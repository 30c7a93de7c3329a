"""Which state directory a command works in: one rule for every command, ``run`` included
(SPEC §3.1).

1. ``--state-dir DIR``;
2. ``$ZELLIJ_SWARM_STATE_DIR``;
3. the nearest ``.zellij-swarm`` in the current directory or one of its ancestors. The walk
   stops after the git top level (the directory holding ``.git``), ``$HOME``, or the last
   directory before a filesystem boundary: a state directory never comes from another
   repository, another user's home or another mount;
4. failing that, ``.zellij-swarm`` at the git top level (inside a repository) or in the
   current directory — where ``run`` creates it.

So ``status`` from ``src/`` or from a new tmux window in the project finds the run ``run``
started at the top. A candidate not owned by the current user is skipped, with one warning:
another user's records are never read by accident. The git top level is found by looking
for ``.git`` (a directory, or the file of a worktree), not by running git: every command
does this first.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from zellij_swarm import exc, quoting

NAME = ".zellij-swarm"
ENV = "ZELLIJ_SWARM_STATE_DIR"


@dataclass(frozen=True)
class StateDir:
    """The state directory found, and how: ``source`` is ``flag --state-dir``, ``env
    ZELLIJ_SWARM_STATE_DIR``, ``found`` (an existing one, by the walk) or ``default`` (none
    found: where a run would create it). ``looked`` are the directories the walk checked, in
    order; ``skipped`` the warning about a candidate owned by someone else, if any."""

    path: Path
    source: str
    looked: tuple[Path, ...] = ()
    skipped: str | None = None

    @property
    def explicit(self) -> bool:
        return self.source not in ("found", "default")

    def no_runs(self, run_id: str | None = None) -> str:
        """The one-line error of a command that found no run (or none named ``run_id``): where
        it looked and how to point it elsewhere."""
        what = f"no run {run_id!r}" if run_id is not None else "no runs"
        if self.explicit:
            return f"{what} under {self.path} (from {self.source})"
        where = ", ".join(str(d) for d in self.looked) or str(self.path.parent)
        return (f"{what} under {self.path}: looked for {NAME} in {where}; run from the project a swarm ran in, "
                f"or give --state-dir DIR (or set {ENV})")


def current_directory() -> Path:
    """The current directory, or the one-line error every command and the API give when it
    has been removed (``os.getcwd`` raises a bare ``FileNotFoundError`` naming no path)."""
    try:
        return Path(os.getcwd())
    except FileNotFoundError:
        raise exc.UsageError("the current directory no longer exists (it was removed): cd to one that does") from None


def find(flag: str | None, env: Mapping[str, str], cwd: Path | None = None) -> StateDir:
    """The state directory by the rule above."""
    here = Path(os.path.abspath(cwd if cwd is not None else current_directory()))
    if flag:
        return StateDir(_absolute(Path(flag), here), "flag --state-dir")
    if env.get(ENV):
        return StateDir(_absolute(Path(env[ENV]), here), f"env {ENV}")
    home = env.get("HOME")
    # as given and as resolved: the walk goes up the real directories (getcwd's), and a $HOME
    # reached through a symlink is never one of them as given
    homes = {Path(os.path.abspath(home)), Path(os.path.realpath(home))} if home else set()
    looked: list[Path] = []
    skipped: str | None = None
    skipped_path: Path | None = None
    top: Path | None = None
    me = os.geteuid()
    directory = here
    while True:
        looked.append(directory)
        candidate = directory / NAME
        try:
            st = os.stat(candidate)
        except OSError:
            st = None
        if st is not None and os.path.isdir(candidate):
            if st.st_uid == me:
                return StateDir(candidate, "found", tuple(looked), skipped)
            if skipped is None:
                skipped_path = candidate
                skipped = (f"skipped {candidate}: it belongs to uid {st.st_uid}, not to you (uid {me}); "
                           f"give --state-dir DIR to use another")
        if os.path.lexists(directory / ".git"):
            top = directory
            break
        parent = directory.parent
        if directory in homes or parent == directory or not _same_filesystem(directory, parent):
            break
        directory = parent
    fallback = (top or here) / NAME
    if skipped is not None and skipped_path == fallback:
        skipped = None  # it is where one would be made: using it is refused there, with the reason
    return StateDir(fallback, "default", tuple(looked), skipped)


def _absolute(path: Path, cwd: Path) -> Path:
    return Path(os.path.abspath(cwd / path.expanduser()))


def _same_filesystem(a: Path, b: Path) -> bool:
    try:
        return os.stat(a).st_dev == os.stat(b).st_dev
    except OSError:
        return False


def flag_for(path: Path, env: Mapping[str, str], cwd: Path | None = None) -> str:
    """What a command line a hint offers needs to reach the state directory ``path`` from here:
    ``--state-dir PATH`` (a shell word, with its space before it), or nothing when the rule
    above finds it anyway (this project's own, ``$ZELLIJ_SWARM_STATE_DIR``). A hint of a run
    started with ``--state-dir`` elsewhere, copied as printed, found no run (exit 2)."""
    import shlex  # only hints need it

    found = find(None, env, cwd).path
    if os.path.realpath(found) == os.path.realpath(path):
        return ""
    return f" --state-dir {shlex.quote(str(path))}"


def command(path: Path | None, name: str, *words: str) -> str:
    """Our command ``name`` (with any options: ``"status --all"``) and its positional
    ``words`` as a hint offers it: with ``--state-dir`` when the rule would not find the state
    directory ``path`` from here (``flag_for``; no ``path``: none), so that it reaches the run
    when copied as printed."""
    where = "" if path is None else flag_for(path, os.environ)
    return f"zellij-swarm {name}{where} {quoting.positional_line(words)}".rstrip()
