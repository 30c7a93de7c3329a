"""The one way an external command runs — a multiplexer's, or Slurm's for the Slurm executor:
with a timeout, and with every failure turned into a ``BackendError`` whose code is the SPEC §7
vocabulary (``multiplexer_missing``, ``pane_call_timeout``, ``pane_call_failed``; for Slurm
``executor_missing``, ``executor_call_timeout``, ``executor_call_failed``) and which carries the
command's stderr."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from zellij_swarm.exc import BackendError


@dataclass(frozen=True)
class CmdResult:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def lines(self) -> list[str]:
        return [ln for ln in self.stdout.splitlines() if ln]


@dataclass(frozen=True)
class Faults:
    """The codes a command's failures get, by kind of command."""

    missing: str
    timeout: str
    failed: str


MULTIPLEXER = Faults("multiplexer_missing", "pane_call_timeout", "pane_call_failed")
EXECUTOR = Faults("executor_missing", "executor_call_timeout", "executor_call_failed")  # srun, squeue, scancel…


def run(argv: Sequence[str], *, timeout: float, env: Mapping[str, str] | None = None, check: bool = True,
        faults: Faults = MULTIPLEXER) -> CmdResult:
    """Run ``argv``; raise ``BackendError`` (with a code of ``faults``) when it cannot start,
    times out, or (``check``) fails."""
    what = f"{argv[0]} {_subcommand(argv)}".strip()
    try:
        p = subprocess.run(list(argv), capture_output=True, text=True, errors="replace", timeout=timeout,
                           env=dict(env) if env is not None else None, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise BackendError(faults.missing, f"{argv[0]}: not found on PATH") from None
    except subprocess.TimeoutExpired as e:
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        said = err.strip().splitlines()
        raise BackendError(faults.timeout, f"{what}: no answer within {timeout:g}s"
                           + (f" (it said: {said[0].strip()})" if said else ""), stderr=err) from None
    result = CmdResult(tuple(argv), p.returncode, p.stdout, p.stderr)
    if check and p.returncode != 0:
        first = (p.stderr.strip().splitlines() or [f"exit status {p.returncode}"])[0]
        first = first.removeprefix(f"{os.path.basename(argv[0])}: ")  # said once, by us
        raise BackendError(faults.failed, f"{what}: {first}", stderr=p.stderr, stdout=p.stdout)
    return result


def _subcommand(argv: Sequence[str]) -> str:
    """The subcommand, for messages: the first word that is not an option or an option's
    value, with the action it names for ``zellij action X`` ("action rename-pane")."""
    words: list[str] = []
    skip = False
    for word in argv[1:]:
        if word == "--":
            break
        if skip:
            skip = False
        elif word in ("-S", "-L", "-f", "--session", "-s"):
            skip = True
        elif not word.startswith("-"):
            words.append(word)
            if word != "action" or len(words) == 2:
                break
    return " ".join(words)
