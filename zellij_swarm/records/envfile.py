"""The caller's environment as a run saves it (``RunPaths.saved_env``, the file ``environ``,
0600), and the exec that gives it back to a worker (SPEC §5.2).

One format, written and read only here: the kernel's own, that of ``/proc/PID/environ`` —
every variable as ``NAME=VALUE`` followed by a NUL byte. A value cannot hold a NUL, so any
other byte round-trips as it is: newlines, quotes, ``$(…)``, bytes that are not UTF-8 (held
in ``os.environ`` as lone surrogates and written back as the bytes they came from), and
names that are not shell identifiers (``A-B``, ``ZZ.Z``), which no shell can ``export``.

No shell can read the file, so a worker gets it through this module run as a program
(``exec_argv``): ``python -I -S envfile.py MODE FILE CMD…`` execs ``CMD`` with

- ``restore``: the saved environment, and of the process's own only the wrapper's carriers
  (``_ZSW_PANE``, ``_ZSW_STEP``) — a pane's second stage, whose environment the pane leader
  emptied of the multiplexer server's;
- ``unexportable``: the process's own environment, plus the saved variables whose names are
  not shell identifiers — put before a worker's command when the run has any, because
  ``/bin/sh`` (dash) drops such variables from what it passes on, so the wrapper cannot;
- ``step PANE_VAR``: the saved environment, and of the process's own only the pane's variable
  (``TMUX_PANE``) — the ``srun`` of a Slurm step shown in a pane, which runs with the
  multiplexer server's environment otherwise (a server started before ``SLURM_CONF`` was set,
  or without Slurm on its ``PATH``: every step failed) and passes its own on to the step.

As a program it uses the standard library alone (no site, started in a few milliseconds),
which is why ``save`` and ``load`` import the run directory's helpers where they are used.
"""

from __future__ import annotations

import os
import re
import signal
import sys
from collections.abc import Mapping
from pathlib import Path

_SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def encode(env: Mapping[str, str]) -> bytes:
    """``env`` in the file's format; a name holding ``=`` or a NUL, or a value holding a NUL,
    cannot be in an environment at all (``ValueError``)."""
    out = bytearray()
    for name, value in sorted(env.items()):
        key, val = os.fsencode(name), os.fsencode(value)
        if not key or b"=" in key or b"\0" in key or b"\0" in val:
            raise ValueError(f"environment variable {name!r} cannot be passed to a process")
        out += key + b"=" + val + b"\0"
    return bytes(out)


def decode(data: bytes, where: Path) -> dict[str, str]:
    entries = data.split(b"\0")
    if entries.pop() != b"":  # every entry ends with a NUL: a last one without is a torn file
        raise ValueError(f"{where}: damaged environment record (its last entry is cut short)")
    env: dict[str, str] = {}
    for entry in entries:
        key, eq, value = entry.partition(b"=")
        if not eq or not key:
            raise ValueError(f"{where}: damaged environment record (an entry is not NAME=VALUE)")
        env[os.fsdecode(key)] = os.fsdecode(value)
    return env


def save(path: Path, env: Mapping[str, str]) -> None:
    from zellij_swarm.records.rundir import write_atomic

    write_atomic(path, encode(env), mode=0o600)


def load(path: Path) -> dict[str, str]:
    """The saved environment; none (``{}``) when the run never saved one. A damaged file is a
    ``DamagedRecord`` naming it (one line at the command line)."""
    from zellij_swarm.records.rundir import DamagedRecord

    try:
        return _read(path)
    except ValueError as e:
        raise DamagedRecord(str(e)) from None


def _read(path: Path) -> dict[str, str]:
    try:  # never through a symlink planted in the run directory (ELOOP)
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return {}
    with os.fdopen(fd, "rb") as f:
        return decode(f.read(), path)


def unexportable(env: Mapping[str, str]) -> dict[str, str]:
    """The variables of ``env`` no shell can carry: their names are not identifiers."""
    return {k: v for k, v in env.items() if not _SHELL_NAME.match(k)}


def exec_argv(mode: str, path: Path) -> tuple[str, ...]:
    """The words that run a command under ``mode`` (``restore``, ``unexportable``, or ``step``
    and its pane variable after these words) of the environment saved in ``path``: put them
    before the command."""
    return (sys.executable, "-I", "-S", str(Path(__file__)), mode, str(path))


def _own_environment() -> dict[str, str]:
    """This process's environment as it was started with it (``/proc/self/environ``):
    ``os.environ`` may also hold a variable Python added itself (``LC_CTYPE``, its C locale
    coercion), which must not reach the worker."""
    with open("/proc/self/environ", "rb") as f:
        entries = f.read().split(b"\0")
    return {os.fsdecode(k): os.fsdecode(v) for k, eq, v in (e.partition(b"=") for e in entries) if eq}


def main(argv: list[str]) -> int:
    mode, path, command = argv[0], Path(argv[1]), argv[2:]
    saved, own = _read(path), _own_environment()
    if mode == "restore":  # the caller's, and the wrapper's own carriers (_ZSW_PANE, _ZSW_STEP)
        env = {**saved, **{k: v for k, v in own.items() if k.startswith("_ZSW_")}}
    elif mode == "step":  # the caller's, and the pane's id (the step's leader records it)
        pane_var, command = command[0], command[1:]
        env = {**saved, **({pane_var: own[pane_var]} if pane_var in own else {})}
    else:
        env = {**unexportable(saved), **own}
    # Python ignores SIGPIPE and SIGXFSZ at start-up, and an ignored signal stays ignored
    # across exec: the worker must get them at their defaults, as from a shell.
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)
    try:
        os.execvpe(command[0], command, env)
    except OSError as e:
        # what a shell says and exits with when it cannot run a command
        sys.stderr.write(f"zellij-swarm: {command[0]}: {e.strerror}\n")
        return 127 if isinstance(e, FileNotFoundError) else 126


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
