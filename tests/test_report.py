"""``report RUN --html FILE`` (issue 15 part 8): one self-contained page with a timeline SVG
(a lane per slot, a bar per attempt), the run's counts and the proof's figures."""

from __future__ import annotations

import json
import re
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from swarmtest import GATE, kill_run_processes, wait_until

from zellij_swarm import exc, quoting
from zellij_swarm.commands.report import COLOURS, SVG_NS, attempt_bars, render_report, timeline_svg, write_report
from zellij_swarm.records.rundir import RunPaths

NS = {"svg": SVG_NS}
HOSTILE = '<b>&amp;"q\'</svg>\n\x1b[31m\x07'
SWARM = f"""\
[swarm]
jobs = 3
retries = 1
[[task]]
name = "ok"
cmd = "true"
[[task]]
name = {json.dumps(HOSTILE)}
cmd = "exit 3"
[[task]]
name = "sig"
cmd = "kill -TERM $$"
[[task]]
name = "slow"
cmd = "sleep 30"
timeout = "0.3s"
retries = 0
"""


def svg_of(page: str) -> ET.Element:
    """The page's SVG, parsed as XML on its own."""
    start, end = page.index("<svg"), page.index("</svg>") + len("</svg>")
    return ET.fromstring(page[start:end])


def bars_of(svg: ET.Element) -> list[ET.Element]:
    return svg.findall(".//svg:rect[@class='bar']", NS)


def test_report_of_a_finished_run(swarm):
    swarm.write("s.toml", SWARM)
    res = swarm("run", "s.toml", "--backend", "headless", "--output", "quiet")
    assert res.code == 1, res.stderr
    run = RunPaths(swarm.latest())
    page = render_report(run)
    svg = svg_of(page)
    lanes = svg.findall("svg:g[@class='lane']", NS)
    assert [lane.get("data-slot") for lane in lanes] == ["1", "2", "3"]  # one lane per slot
    tasks = {quoting.terminal_text(name): t for name, t in swarm.tasks().items()}  # as the page shows names
    attempts = [(t["name"], a) for t in tasks.values() for a in t["history"]]
    bars = bars_of(svg)
    assert len(bars) == len(attempts) == 6  # ok 1, hostile 2 (retried), sig 2, slow 1
    for lane in lanes:  # each bar in the lane of the slot its attempt ran in
        for bar in bars_of(lane):
            attempt = tasks[bar.get("data-task")]["history"][int(bar.get("data-attempt")) - 1]
            assert attempt["slot"] == int(lane.get("data-slot"))
            assert bar.get("data-status") == attempt["status"]
    by_status = {}
    for bar in bars:
        by_status.setdefault(bar.get("data-status"), set()).add(bar.get("fill"))
    assert by_status == {"succeeded": {COLOURS["succeeded"]}, "failed": {COLOURS["failed"]},
                         "timed_out": {COLOURS["timed_out"]}}
    titles = {(bar.get("data-task"), bar.get("data-attempt")): bar.find("svg:title", NS).text for bar in bars}
    hostile_shown = '<b>&amp;"q\'</svg>\\n\\x1b[31m\\x07'  # as the parsed XML gives it back
    assert re.fullmatch(re.escape(hostile_shown) + r" · attempt 2 · failed, exit 3 · \d+\.\d{3} s · slot \d",
                        titles[hostile_shown, "2"])
    assert re.fullmatch(r"sig · attempt 1 · failed, SIGTERM \(exit 143\) · \d+\.\d{3} s · slot \d", titles["sig", "1"])
    assert re.fullmatch(r"slow · attempt 1 · timed out, SIGTERM \(exit 143\), reason timeout · 0\.\d{3} s · slot \d",
                        titles["slow", "1"])
    # the hostile name is data everywhere on the page: nothing of it is markup or a control
    assert "<b>" not in page and "\x1b" not in page and "\x07" not in page
    assert page.count("</svg>") == 1
    assert "&lt;b&gt;&amp;amp;&quot;q&#x27;&lt;/svg&gt;\\n\\x1b[31m\\x07" in page
    # self-contained: no URL but the SVG namespace, nothing loaded
    assert re.findall(r"https?://[^\s\"'<>]*", page) == [SVG_NS]
    assert not re.search(r"<(script|link|img|iframe)\b|@import|url\(", page)
    # the counts and the proof's figures
    assert re.search(r"<th>failed</th><td>2</td>", page) and re.search(r"<th>timed out</th><td>1</td>", page)
    assert re.search(r"<th>max concurrency</th><td>[1-3] of 3 slot\(s\)</td>", page)
    assert "<th>verdict</th><td>OK</td>" in page


def test_every_outcome_has_its_colour_and_a_running_attempt_ends_now():
    now = 1000.0
    history = [{"attempt": i + 1, "slot": 1, "status": s, "exit_code": None, "signal": None, "reason": None,
                "started_at": 900.0 + i, "ended_at": 900.5 + i} for i, s in enumerate(COLOURS) if s != "running"]
    rows = [{"name": "x", "status": "lost", "attempts": len(history), "slot": 1, "started_at": 900.0,
             "history": history},
            {"name": "r", "status": "running", "attempts": 2, "slot": 2, "started_at": 990.0,
             "history": [{"attempt": 1, "slot": 2, "status": "failed", "exit_code": 1, "signal": None,
                          "reason": None, "started_at": 980.0, "ended_at": 985.0}]}]
    bars = attempt_bars(rows, now)
    assert [(b.task, b.attempt, b.status) for b in bars][-2:] == [("r", 1, "failed"), ("r", 2, "running")]
    assert bars[-1].end == now
    svg = ET.fromstring(timeline_svg(bars, 2, 900.0, now))
    assert {b.get("data-status"): b.get("fill") for b in bars_of(svg)} == COLOURS
    running = next(b for b in bars_of(svg) if b.get("data-status") == "running")
    assert running.find("svg:title", NS).text == "r · attempt 2 · running · 10.000 s so far · slot 2"
    assert float(running.get("x")) + float(running.get("width")) == pytest.approx(1160 - 20, abs=0.01)


def test_report_of_a_running_run_shows_what_there_is_so_far(swarm):
    swarm.write("s.toml", f'[swarm]\njobs = 2\n[[task]]\nname = "held"\ncmd = "{GATE}"\n'
                          '[[task]]\nname = "quick"\ncmd = "true"\n')
    proc = swarm.popen("run", "s.toml", "--backend", "headless", "--output", "quiet")
    try:
        run_dir = swarm.started()
        run = RunPaths(run_dir)

        def quick_done_held_running() -> str | None:
            try:
                page = render_report(run)
            except (exc.SwarmError, FileNotFoundError):
                return None  # the run's first records are still being written
            statuses = [b.get("data-status") for b in bars_of(svg_of(page))]
            return page if sorted(statuses) == ["running", "succeeded"] else None

        page = wait_until(quick_done_held_running, what="a report with one ended and one running attempt")
        assert "running · " in page and COLOURS["running"] in page
        out = swarm.cwd / "report.html"
        write_report(run, out, now=time.time())
        assert svg_of(out.read_text(encoding="utf-8")) is not None
    finally:
        swarm.open_gate()
        proc.wait(timeout=60)
        kill_run_processes(run_dir.name)
    assert proc.returncode == 0


def test_report_into_a_directory_is_a_usage_error(tmp_path):
    with pytest.raises(exc.UsageError, match="is a directory"):
        write_report(RunPaths(tmp_path / "no-run"), tmp_path)


def test_report_command_writes_the_page(swarm):
    swarm.write("s.toml", '[[task]]\nname = "t"\ncmd = "exit 2"\n')
    swarm("run", "s.toml", "--backend", "headless", "--output", "quiet")
    run_id = swarm.latest().name
    res = swarm("report", run_id, "--html", "r.html")
    assert res.code == 0, res.stderr
    assert len(bars_of(svg_of(Path(swarm.cwd / "r.html").read_text(encoding="utf-8")))) == 1
    bad = swarm("report", "no-such-run", "--html", "r.html")
    assert bad.code == 2 and bad.stderr.startswith("zellij-swarm: error: no run 'no-such-run'")
