"""JUnit XML for CI (SPEC §8): one ``testcase`` per task.

``failed``/``timed_out`` → ``<failure>``, ``lost`` → ``<error>``, ``skipped``/``cancelled`` →
``<skipped>``. Each case carries the last 64 KB of its final attempt's output, with the
characters XML 1.0 forbids removed (worker output may be binary).

Until a run has finished, its report file holds one failing case, ``run <id> did not finish``
(``mark_unfinished``, written as the run, a ``resume`` or a ``retry`` starts): a report an
earlier run left at the same path — green, perhaps — is never read as this run's, whatever
becomes of its supervisor. The supervisor that finishes the run replaces it with the report.
"""

from __future__ import annotations

import errno
import functools
import os
import re
import stat
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from zellij_swarm import exc
from zellij_swarm.records.rundir import RunPaths, check_can_create, open_to_write, unwritable_why, write_atomic
from zellij_swarm.records.states import TaskStatus

TAIL_BYTES = 64 * 1024
# The element a task's status adds to its testcase; a succeeded one adds none.
_ELEMENT = {TaskStatus.FAILED: "failure", TaskStatus.TIMED_OUT: "failure", TaskStatus.LOST: "error",
            TaskStatus.UNKNOWN: "error", TaskStatus.SKIPPED: "skipped", TaskStatus.CANCELLED: "skipped"}


@functools.cache
def _forbidden() -> re.Pattern[str]:
    """The characters XML 1.0 forbids, compiled when a report is first written: compiled as
    the module loaded, its class of ranges cost every command 4 ms of its start-up here."""
    return re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def clean(text: str) -> str:
    return _forbidden().sub("", text)


def output_tail(path: Path, limit: int = TAIL_BYTES) -> str:
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - limit))
            data = f.read()
    except FileNotFoundError:
        return ""
    return clean(data.decode("utf-8", "replace"))


def build(run: RunPaths, snapshot: dict[str, Any]) -> bytes:
    import xml.etree.ElementTree as ET  # here, not above: a run without --junit never loads it

    tasks = snapshot["tasks"]
    elements = Counter(_ELEMENT.get(t["status"]) for t in tasks)
    suite = ET.Element("testsuite", {
        "name": clean(snapshot.get("name") or f"zellij-swarm {snapshot['run_id']}"),
        "tests": str(len(tasks)),
        "failures": str(elements["failure"]),
        "errors": str(elements["error"]),
        "skipped": str(elements["skipped"]),
        "time": f"{(snapshot['metrics'].get('wall_time_ms') or 0) / 1000:.3f}",
    })
    for t in tasks:
        case = ET.SubElement(suite, "testcase", {
            "name": clean(t["name"]), "classname": f"zellij-swarm.{snapshot['run_id']}",
            "time": f"{t['duration_s'] or 0:.3f}",
        })
        detail = ", ".join(f"{k}={t[k]}" for k in ("exit_code", "signal", "reason", "attempts") if t.get(k) is not None)
        status = t["status"]
        element = _ELEMENT.get(status)
        if element == "skipped":
            ET.SubElement(case, element, {"message": clean(f"{status}: {t.get('reason') or ''}")})
        elif element is not None:
            ET.SubElement(case, element, {"type": status, "message": clean(f"{status}: {detail}")})
        if t["slot"] is not None and t["generation"] is not None:
            gen = run.gen(t["slot"], t["generation"])
            ET.SubElement(case, "system-out").text = output_tail(gen.output)
            if errors := output_tail(gen.stderr):  # a headless or compact worker's stderr, kept apart
                ET.SubElement(case, "system-err").text = errors
    # Any encoding but "unicode" gives bytes (typeshed types a named one as Any).
    xml: bytes = ET.tostring(suite, encoding="utf-8", xml_declaration=True)
    return xml


def unfinished(run_id: str) -> bytes:
    """The report of a run that has not finished (module docstring)."""
    import xml.etree.ElementTree as ET
    suite = ET.Element("testsuite", {"name": f"zellij-swarm {run_id}", "tests": "1", "failures": "1", "errors": "0",
                                     "skipped": "0", "time": "0.000"})
    case = ET.SubElement(suite, "testcase", {"name": f"run {run_id} did not finish",
                                             "classname": f"zellij-swarm.{run_id}", "time": "0.000"})
    ET.SubElement(case, "failure", {"type": "unfinished", "message": (
        f"run {run_id} has not finished: its supervisor runs, or was stopped before the end; "
        f"`zellij-swarm resume {run_id}` finishes it and writes this report")})
    xml: bytes = ET.tostring(suite, encoding="utf-8", xml_declaration=True)
    return xml


def left_unfinished(path: Path, run_id: str) -> bool:
    """``path`` still holds run ``run_id``'s ``unfinished`` report (its supervisor ended
    before it replaced it), and nothing since has written another there."""
    try:  # (never blocked on a FIFO: only a regular file is ever marked unfinished)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return False
    with os.fdopen(fd, "rb") as f:
        try:
            return stat.S_ISREG(os.fstat(fd).st_mode) and f.read(len(unfinished(run_id)) + 1) == unfinished(run_id)
        except OSError:
            return False


def _where(path: Path) -> tuple[str, Path]:
    """How the report reaches ``path`` — the one rule for ``check_writable`` and ``write``:

    - ``"replace"``, at a file name: nothing there, or a regular file: written next to it and
      renamed over it (no reader sees half a report). A symlink is followed first: the file it
      points to (or would create) is the one replaced, in its own directory; the link stays.
    - ``"through"``, at ``path`` itself: anything else that is not a directory — a character
      device (``/dev/null``, a terminal), a FIFO, a pipe (``/dev/fd/N``) — is opened and written,
      never replaced by a regular file.
    - ``"directory"``: refused.
    """
    try:
        st = os.stat(path)  # follows symlinks
    except FileNotFoundError:
        return "replace", Path(os.path.realpath(path))  # a dangling link creates its target
    except OSError:
        return "replace", path  # check_can_create / write_atomic say what is wrong
    if stat.S_ISDIR(st.st_mode):
        return "directory", path
    if stat.S_ISREG(st.st_mode):
        return "replace", Path(os.path.realpath(path))
    return "through", path


def check_writable(path: Path) -> None:
    """Refuse (exit 2) before the run a report path that ``write`` could not write at its
    end: a directory, or a place where no file can be created."""
    how, target = _where(path)
    if how == "directory":
        raise exc.UsageError(f"--junit {path}: is a directory, expected a file name")
    if how == "through":
        return  # a device or a FIFO: opened at the end (a FIFO may get its reader only then)
    try:
        check_can_create(target.parent)
    except OSError as e:
        raise exc.UsageError(f"--junit {path}: cannot create a file in {target.parent}: {e.strerror}") from None


def write(path: Path, run: RunPaths, snapshot: dict[str, Any]) -> str | None:
    """Write the report; returns a one-line warning instead if that fails (the directory went
    away, the disk filled, a FIFO has no reader): the run is over and its outcome stands."""
    return _put(path, run, lambda: build(run, snapshot))


def mark_unfinished(path: Path, run: RunPaths) -> str | None:
    """Replace the report file with ``unfinished``; a one-line warning if that fails — and
    then the file an earlier run left there is removed, so that it cannot pass for this run's.
    A device, FIFO or pipe gets one report only, at the end: nothing is left in it to go stale."""
    how, target = _where(path)
    if how == "through":
        return None
    problem = _put(path, run, lambda: unfinished(run.run_id))
    if problem is not None and how == "replace":
        # Not replaced (a full disk has no room for the new file): the report an earlier run
        # left there must not pass for this run's. Removing it needs no room.
        try:
            if stat.S_ISREG(os.lstat(target).st_mode):
                os.unlink(target)
                problem += "; removed the report an earlier run left there"
        except OSError:
            pass
    return problem


def _put(path: Path, run: RunPaths, report: Callable[[], bytes]) -> str | None:
    try:
        how, target = _where(path)
        if how == "directory":
            raise IsADirectoryError(errno.EISDIR, "Is a directory")
        data = report()
        if how == "through":
            _write_through(target, data)
        else:
            write_atomic(target, data, mode=0o644)
    except OSError as e:
        return f"cannot write the JUnit report {path}: {unwritable_why(e)}; the run's records are in {run.dir}"
    return None


def _write_through(path: Path, data: bytes) -> None:
    """Write into what is at ``path`` (a device, a FIFO, a pipe) without replacing it. A FIFO
    nobody reads fails at once rather than hanging the end of the run (``open_to_write``)."""
    fd = open_to_write(path, os.O_NOCTTY)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
