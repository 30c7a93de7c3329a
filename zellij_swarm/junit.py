"""JUnit XML for CI (SPEC §8): one ``testcase`` per task.

``failed``/``timed_out`` → ``<failure>``, ``lost`` → ``<error>``, ``skipped``/``cancelled`` →
``<skipped>``. Each case carries the last 64 KB of its final attempt's output, with the
characters XML 1.0 forbids removed (worker output may be binary).
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from . import exc
from .rundir import RunPaths, check_can_create, write_atomic

TAIL_BYTES = 64 * 1024
_FORBIDDEN = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def clean(text: str) -> str:
    return _FORBIDDEN.sub("", text)


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
    tasks = snapshot["tasks"]
    count = lambda *states: sum(1 for t in tasks if t["status"] in states)  # noqa: E731
    suite = ET.Element("testsuite", {
        "name": clean(snapshot.get("name") or f"zellij-swarm {snapshot['run_id']}"),
        "tests": str(len(tasks)),
        "failures": str(count("failed", "timed_out")),
        "errors": str(count("lost")),
        "skipped": str(count("skipped", "cancelled")),
        "time": f"{(snapshot['metrics'].get('wall_time_ms') or 0) / 1000:.3f}",
    })
    for t in tasks:
        case = ET.SubElement(suite, "testcase", {
            "name": clean(t["name"]), "classname": f"zellij-swarm.{snapshot['run_id']}",
            "time": f"{t['duration_s'] or 0:.3f}",
        })
        detail = ", ".join(f"{k}={t[k]}" for k in ("exit_code", "signal", "reason", "attempts") if t.get(k) is not None)
        status = t["status"]
        if status in ("failed", "timed_out"):
            ET.SubElement(case, "failure", {"type": status, "message": clean(f"{status}: {detail}")})
        elif status == "lost":
            ET.SubElement(case, "error", {"type": status, "message": clean(f"lost: {detail}")})
        elif status in ("skipped", "cancelled"):
            ET.SubElement(case, "skipped", {"message": clean(f"{status}: {t.get('reason') or ''}")})
        if t["slot"] is not None and t["generation"] is not None:
            out = ET.SubElement(case, "system-out")
            out.text = output_tail(run.gen(t["slot"], t["generation"]).output)
    return ET.tostring(suite, encoding="utf-8", xml_declaration=True)


def check_writable(path: Path) -> None:
    """Refuse (exit 2) before the run a report path that ``write`` could not write at its
    end: a directory, or a place where no file can be created."""
    if path.is_dir():
        raise exc.UsageError(f"--junit {path}: is a directory, expected a file name")
    try:
        check_can_create(path.parent)
    except OSError as e:
        raise exc.UsageError(f"--junit {path}: cannot write a file there: {e.strerror}") from None


def write(path: Path, run: RunPaths, snapshot: dict[str, Any]) -> str | None:
    """Write the report; returns a one-line warning instead if that fails (the directory went
    away, the disk filled): the run is over and its outcome stands either way."""
    try:
        write_atomic(path, build(run, snapshot), mode=0o644)
    except OSError as e:
        return f"cannot write the JUnit report {path}: {e.strerror}; the run's records are in {run.dir}"
    return None
