"""Shells: folded generations' directories kept for the run's next generations (SPEC §5.5).

Making a file is what a trivial task costs most here. Each one allocates an inode, and on a
filesystem without a journal (this project's machines) ext4 passes over every inode freed in
the last minutes to find one: with thousands of short tasks, a quarter to half a millisecond
of system time per file — against a few microseconds for a rename, a truncation or an open
of a file that exists. A headless generation made seven: its directory, ``artifacts/``,
claim, heartbeat, output, stderr and exit; folding freed them all again.

So a generation folded down to its wrapper's files (``generation_files.SHELL_FILES``: an
``exit`` sidecar, a heartbeat of the wrapper's own lines, an empty ``output.log`` and
``stderr.log``) is not removed but kept, emptied, as a *shell* in ``slots/.shells/``; the next
reservation renames a shell into place as its generation's directory (``take``), and that
wrapper opens files that exist, empty — "not yet" and "nothing", as they always read. An
empty ``artifacts/`` goes with the shell when nothing is left in the wrapper's process group
(``group_gone``: a leftover that stayed there may have its working directory in it, which no
check of the files sees) and no process a worker left lives elsewhere: a job it started in a
session of its own (``setsid``) may still write there, through its working directory or the
path in its environment — a later task's files, once the directory was that task's. Such a
process is the launcher's child once its worker has ended (the launcher is the subreaper of
what the wrappers leave), and the launcher says after each wrapper's end how many children
it has that are no wrapper (``leftovers``). Otherwise ``artifacts/`` is removed (a leftover's
later writes then reach nothing) and ``take`` makes a new one. So one inode is made per trivial task:
the claim, whose ``O_EXCL`` create is what makes a generation run at most once. A shell's
``artifacts/`` that something wrote into after its fold is set aside as ``stray-<n>``, kept.

A file is reused only when nothing can write to it again. The fold renames the directory
into ``.shells/`` under a name of its own first, so that its generation's paths reach
nothing any more, then looks again: every file still the wrapper's (plain, one link, the logs
empty, the heartbeat its two lines), and none open in any process — a write lease
(``F_SETLEASE``) is granted only on a file no other descriptor is open on, and the wrapper's
lines are emptied under it. A worker's leftover holding its stdout would otherwise carry its
output into another task's records. Anything else, and the directory goes back to its name
and is folded as before.

Shells are taken on the supervisor's loop and made on its log-commit thread: a deque of their
names between the two (its append and pop are atomic). A run whose pool keeps none
(``limit`` 0: a Slurm run, whose steps write from other hosts) folds as before. Names not
``gen-<m>`` are no generation to any reader; the run's end removes the shells (``clear``), and
those of a supervisor killed are taken by its resume, or go with the run. Removing one never
removes what a worker wrote: a directory a fold was killed in the middle of looking at may
hold a leftover's late output, which stays there; that run then keeps no more shells.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import itertools
import os
import signal
import stat
from collections.abc import Callable
from pathlib import Path

from zellij_swarm.records import generation_files, rundir
from zellij_swarm.records.generation_files import (
    ARTIFACTS,
    EXIT_SIDECAR,
    HEARTBEAT,
    OUTPUT,
    SHELL_FILES,
    STDERR,
    GenPaths,
)

SHELLS = ".shells"  # in the run's slots/
_FOLDING = "folding"  # a directory being looked at once more before it is a shell
_EMPTIED = (EXIT_SIDECAR, HEARTBEAT)  # the wrapper's lines; the logs are empty already
_CHECKED = (OUTPUT, STDERR, *_EMPTIED)  # every file of a shell, in the order they are looked at
_STRAY = "stray-"  # an artifacts/ a leftover wrote into after its shell was made (``take``)
_SHELL_NAMES = frozenset(SHELL_FILES)
_UID = os.getuid()


class ShellPool:
    def __init__(self, slots: Path, *, limit: int, leftovers: Callable[[], bool] = lambda: False) -> None:
        """``leftovers``: whether a process a worker left may live outside its wrapper's
        group (the launcher has a child that is no wrapper): no ``artifacts/`` is kept then."""
        self._dir = slots / SHELLS
        self._limit = limit  # shells kept at most (0: none); the rest are folded away
        self._leftovers = leftovers
        try:
            names = [n for n in os.listdir(self._dir) if n.isdigit()]
        except FileNotFoundError:
            names = []
        self._names = collections.deque(names)
        self._numbers = itertools.count(max(map(int, names), default=0) + 1)

    def take(self, gen: GenPaths) -> bool:
        """Put a shell in place as ``gen``'s directory, with an empty ``artifacts/`` in it (the
        shell's own, or made now): False when there is none, and the caller makes both. An
        ``artifacts/`` a leftover wrote into since its fold is moved aside (``stray-<n>``) and
        never reused. Raises OSError when ``artifacts/`` cannot be made."""
        try:
            name = self._names.popleft()
        except IndexError:
            return False
        shell = f"{self._dir}/{name}"
        try:
            os.rename(shell, gen.dir)
        except FileNotFoundError:
            if os.path.lexists(shell):  # the slot's first generation: its directory is made with it
                self._names.appendleft(name)
            return False  # (a shell removed by hand is forgotten)
        except OSError:  # the generation's directory is there: the caller's mkdir says so
            self._names.appendleft(name)
            return False
        try:
            if os.listdir(gen.artifacts):
                os.rename(gen.artifacts, f"{self._dir}/{_STRAY}{next(self._numbers)}")
                raise FileNotFoundError
        except (FileNotFoundError, NotADirectoryError):
            rundir.make_private_dir(gen.artifacts, exist_ok=False)
        return True

    def fold(self, gen: GenPaths) -> None:
        """``generation_files.fold``, keeping the directory as a shell where it can be one —
        with its ``artifacts/`` when that is empty, nothing is left in the wrapper's process
        group (``group_gone``) and no process a worker left lives elsewhere (``leftovers``)."""
        claim = generation_files.claim_or_planted(gen)  # read first: the fold removes it
        keep_artifacts = claim is not None and claim.pid is not None and group_gone(claim.pid) \
            and not self._leftovers()
        generation_files.fold(gen, keep=lambda directory, names: self._keep(directory, names, keep_artifacts))

    def clear(self) -> None:
        """Remove every shell: the run has ended."""
        try:
            names = os.listdir(self._dir)
        except FileNotFoundError:
            return
        for name in names:
            if not name.startswith(_STRAY):  # a leftover's files: never removed
                _remove(f"{self._dir}/{name}")
        self._names.clear()
        try:
            os.rmdir(self._dir)
        except OSError:
            pass

    def _keep(self, directory: Path, names: set[str], keep_artifacts: bool) -> bool:
        """Make ``directory`` (holding ``names``) a shell, with its ``artifacts/`` when that may
        go with it; False when it is no shell, and the fold goes on."""
        if len(self._names) >= self._limit or not _no_output(str(directory), names):
            return False
        folding = f"{self._dir}/{_FOLDING}"
        try:
            os.rename(directory, folding)
        except FileNotFoundError:  # the run's first shell
            try:
                rundir.make_private_dir(self._dir)
                os.rename(directory, folding)
            except OSError:
                return False
        except OSError:  # one left by a fold killed midway
            _remove(folding)
            return False
        # Renamed, nothing reaches it by its generation's path any more: what is in it now
        # stays. A write that came in between, or a file still open, makes it no shell.
        artifacts = f"{folding}/{ARTIFACTS}"
        try:
            if not (keep_artifacts and _empty_directory(artifacts)):
                with contextlib.suppress(FileNotFoundError):
                    os.rmdir(artifacts)  # the shell goes without it; the worker's files in it: no shell
            # the logs (empty already) first: a file emptied here is one whose facts the
            # log holds, should the directory go back to be folded
            if _shell_like(folding) and all(_unheld(f"{folding}/{n}", empty=n in _EMPTIED) for n in _CHECKED):
                name = str(next(self._numbers))
                os.rename(folding, f"{self._dir}/{name}")
                self._names.append(name)
                return True
        except OSError:
            pass
        try:
            os.rename(folding, directory)  # back, to be folded as before
        except OSError:
            pass  # its name is free, and only this thread moves it: not to be
        return False


def _no_output(directory: str, names: set[str]) -> bool:
    """What ``_shell_like`` looks at first: the wrapper's file names only (``names``, the
    fold's listing), and empty logs. A directory with the worker's output is never moved out
    of its generation's path, where ``logs`` reads it; the whole look is made after the move."""
    try:
        return names - {ARTIFACTS} == _SHELL_NAMES and all(
            os.lstat(f"{directory}/{log}").st_size == 0 for log in (OUTPUT, STDERR))
    except OSError:
        return False


def _shell_like(directory: str) -> bool:
    """The directory holds the wrapper's files and nothing else: plain files of one link each
    (never a link to a file elsewhere, which emptying would reach), the logs empty, the
    heartbeat the wrapper's own lines; and an ``artifacts/``, which its caller has just found
    empty and private or removed."""
    try:
        with os.scandir(directory) as entries:
            files = {e.name: e.stat(follow_symlinks=False) for e in entries}
    except OSError:
        return False
    files.pop(ARTIFACTS, None)
    if files.keys() != _SHELL_NAMES:
        return False
    if any(not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 for st in files.values()):
        return False
    return (files[OUTPUT].st_size == files[STDERR].st_size == 0
            and generation_files.wrapper_heartbeat(f"{directory}/{HEARTBEAT}"))


def _empty_directory(path: str) -> bool:
    """A real directory (no link to one elsewhere), private as it was made (a worker may have
    changed its mode: the next one is given a private directory), with nothing in it."""
    try:
        st = os.lstat(path)
        return (stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == _UID
                and not os.listdir(path))
    except OSError:
        return False


def group_gone(pgid: int) -> bool:
    """No process is left in the process group ``pgid``: a headless wrapper's, which the
    launcher starts as a session leader. A leftover of the worker that stayed in it may have
    its working directory in ``artifacts/``, which no check of the files sees; one that left
    it made a session of its own, as a daemon does — and a daemon changes its directory to
    ``/``. A pid some other group now has makes it look not gone: never wrongly reused."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # there, and not ours to signal
        return False
    return False


def _unheld(path: str, *, empty: bool) -> bool:
    """No other process has the file open — a write lease is granted only on a file no other
    descriptor is open on — and, with ``empty``, it was emptied under that lease, so nothing
    opened it in between. False when that cannot be told (no leases on this filesystem).

    A lease's break (an open by someone else while it is held) is told by SIGURG, ignored
    unless handled, not by the default SIGIO, which ends a process: an open in that
    microsecond ended the supervisor, or a program running a swarm through the Python API,
    with "I/O possible"."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        fcntl.fcntl(fd, fcntl.F_SETSIG, signal.SIGURG)
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)  # EAGAIN: open elsewhere; EINVAL: no leases
        try:
            if empty:
                os.ftruncate(fd, 0)
        finally:
            fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _remove(directory: str) -> None:
    """A shell, or what a fold killed midway left: the wrapper's files and an empty
    ``artifacts/``, then the directory — a log or heartbeat with something of the worker's in
    it, or an ``artifacts/`` with anything, stays, and the directory with it."""
    for name in SHELL_FILES:
        path = f"{directory}/{name}"
        try:
            if name == EXIT_SIDECAR or os.lstat(path).st_size == 0 or (
                    name == HEARTBEAT and generation_files.wrapper_heartbeat(path)):
                os.unlink(path)
        except OSError:
            pass
    for empty in (f"{directory}/{ARTIFACTS}", directory):
        try:
            os.rmdir(empty)
        except OSError:
            pass
