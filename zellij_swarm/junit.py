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

from .rundir import RunPaths, write_atomic

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


def write(path: Path, run: RunPaths, snapshot: dict[str, Any]) -> None:
    write_atomic(path, build(run, snapshot), mode=0o644)
