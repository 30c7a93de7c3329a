"""What a run makes besides its own records — its JUnit report (``--junit``), its joblog
(``--joblog``) — and whether it closes its session at the end (``--close-session``): recorded
in the run's directory as ``outputs.json`` before any task runs, so that the supervisor that
finishes the run, ``resume`` or ``retry``, completes them as the one that started it would
have (SPEC §8).

Paths are recorded absolute (``resume`` may run from another directory), not resolved: a
symlink is followed when the report is written, as at the first end.
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from zellij_swarm import exc
from zellij_swarm.records.rundir import RunPaths, read_json, runs_root, write_json_atomic

FILE = "outputs.json"


def require_names(**paths: str | None) -> None:
    """Refuse (exit 2) a report file given an empty name — ``--junit ''``, ``--joblog ''`` (or
    ``+``), ``--html ''`` (keyword: the option, ``junit_path`` for ``--junit``): no file to
    write, and as a ``Path`` it would read as ``.``, a directory never named."""
    for option, value in paths.items():
        if value is not None and not value.removeprefix("+" if option == "joblog_path" else ""):
            raise exc.UsageError(f"--{option.removesuffix('_path')}: an empty file name; name the file to write")


def require_outside_records(state_dir: Path, **paths: str | None) -> None:
    """Refuse (exit 2) a report file that would be written among the run records of
    ``state_dir`` (keywords as for ``require_names``): ``--joblog …/runs/R/events.jsonl``
    replaced a run's event log, and the run could be neither resumed nor retried."""
    records = os.path.realpath(runs_root(state_dir))
    for option, value in paths.items():
        if value is None:
            continue
        target = os.path.realpath(value.removeprefix("+" if option == "joblog_path" else ""))
        if os.path.commonpath([records, target]) == records:
            raise exc.UsageError(f"--{option.removesuffix('_path')} {value}: that is among the run records of "
                                 f"{state_dir}; write it elsewhere")


def require_apart(junit_path: str | None, joblog_path: str | None) -> None:
    """Refuse (exit 2) a JUnit report and a joblog named as one regular file (or one to be
    made): the joblog is written as tasks end, and the report, renamed over it at the end,
    took its place — the joblog lost without a word. A device (``/dev/null``) takes both."""
    if junit_path is None or joblog_path is None:
        return
    junit, joblog = (os.path.realpath(p) for p in (junit_path, joblog_path.removeprefix("+")))
    if junit != joblog:
        return
    try:
        if not stat.S_ISREG(os.stat(junit).st_mode):
            return
    except OSError:
        pass  # not there yet: both would make it
    raise exc.UsageError(f"--junit {junit_path} and --joblog {joblog_path} are one file: each needs a file of its own")


def require_not_input(inputs: list[str], **paths: str | None) -> None:
    """Refuse (exit 2) a report file (keywords as for ``require_names``) that is one of the
    run's ``inputs`` (its swarm file, its arguments' file): it was truncated, or replaced,
    as the run started — the user's file overwritten by a report."""
    for name in inputs:
        try:
            st = os.stat(name)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode):
            continue  # a FIFO, /dev/stdin: nothing kept to lose
        for option, value in paths.items():
            if value is None:
                continue
            target = value.removeprefix("+" if option == "joblog_path" else "")
            with contextlib.suppress(OSError):
                if os.path.samefile(target, name):
                    raise exc.UsageError(f"--{option.removesuffix('_path')} {value}: that is the run's input file "
                                         f"{name}; write it elsewhere")


@dataclass(frozen=True)
class Outputs:
    junit: Path | None = None
    joblog: Path | None = None  # the file itself: ``+FILE`` is recorded as FILE
    close_session: bool = False

    @classmethod
    def of_options(cls, *, junit: str | None, joblog: str | None, close_session: bool) -> Outputs:
        return cls(junit=None if junit is None else Path(os.path.abspath(junit)),
                   joblog=None if joblog is None else Path(os.path.abspath(joblog.removeprefix("+"))),
                   close_session=close_session)

    def save(self, run: RunPaths) -> None:
        write_json_atomic(run.dir / FILE, {"junit": _text(self.junit), "joblog": _text(self.joblog),
                                           "close_session": self.close_session})

    @classmethod
    def load(cls, run: RunPaths) -> Outputs:
        """A run's outputs; none for a run recorded before they were (or that had none)."""
        try:
            rec = read_json(run.dir / FILE)
        except FileNotFoundError:
            return cls()
        junit, joblog = rec.get("junit"), rec.get("joblog")
        return cls(junit=Path(junit) if isinstance(junit, str) else None,
                   joblog=Path(joblog) if isinstance(joblog, str) else None,
                   close_session=rec.get("close_session") is True)


def _text(path: Path | None) -> str | None:
    return None if path is None else str(path)
