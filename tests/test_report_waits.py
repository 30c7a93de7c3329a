"""The HTML report (issue 24 §7): time spent waiting for input hatched on each bar, the failed
tasks listed under the timeline, and a failure of 0 seconds visible in a long run."""

from __future__ import annotations

import re

from test_report import NS, bars_of, svg_of

from zellij_swarm.commands.report import Bar, failed_rows, render_report, timeline_svg, waiting_spans
from zellij_swarm.records.rundir import RunPaths

SWARM = """
[[task]]
name = "asks"
cmd = '''echo '{"event":"waiting_input"}' >> "$ZELLIJ_SWARM_HEARTBEAT"; sleep 1.5; echo answered'''
[[task]]
name = "breaks"
cmd = "echo no; exit 3"
[[task]]
cmd = "exit 4"
"""


def test_a_report_hatches_the_wait_and_lists_the_failures(swarm) -> None:
    swarm.write("s.toml", SWARM)
    assert swarm("run", "s.toml", "--backend", "headless", "-j", "3", "--output", "quiet").code == 1
    page = render_report(RunPaths(swarm.latest()))
    svg = svg_of(page)
    [hatch] = svg.findall(".//svg:path[@class='waiting']", NS)
    assert hatch.get("data-task") == "asks"
    # the 1.5 s wait as the supervisor saw it: from when it read the waiting line to when it
    # read the answer, each late by what a loaded machine makes it (0.9 s was seen under load)
    waited = re.fullmatch(r"asks · waiting for input · (\d+\.\d) s", hatch.find("svg:title", NS).text)
    assert waited is not None and 0 < float(waited[1]) <= 2.5, hatch.find("svg:title", NS).text
    [bar] = [b for b in bars_of(svg) if b.get("data-task") == "asks"]
    xs = [float(v) for v in re.findall(r"[ML]([\d.]+) ", hatch.get("d"))]
    left, width = float(bar.get("x")), float(bar.get("width"))
    # on its own bar; every figure is printed to 0.01, rounded on its own (its ends: x and x + width)
    assert xs and left - 0.02 <= min(xs) and max(xs) <= left + width + 0.02
    failed = re.search(r"<h2>Failed tasks \(2\)</h2>(.*?)</table>", page, re.S)
    assert failed is not None
    rows = re.findall(r"<tr><td>(.*?)</td><td>(.*?)</td><td>(.*?)</td><td>(.*?)</td></tr>", failed.group(1))
    assert [(r[0], r[1], r[3]) for r in rows] == [("breaks", "3", "echo no; exit 3"), ("task-3", "4", "exit 4")]
    assert all(re.fullmatch(r"\d+\.\d{3} s", r[2]) for r in rows)


def test_no_failure_no_list() -> None:
    assert failed_rows([{"name": "ok", "status": "succeeded"}], {}) == []
    assert failed_rows([{"name": "slow", "status": "timed_out", "exit_code": 143, "signal": "SIGTERM",
                         "duration_s": 2.0}], {"slow": "sleep 9"}) == [("slow", "timed out (SIGTERM)", "2.000 s",
                                                                           "sleep 9")]


def test_a_failure_of_no_time_in_a_long_run_stays_visible() -> None:
    """An hour-long timeline: a 0-second failure is 4 units wide and drawn over the attempt
    that started in its slot the same moment."""
    bars = [Bar("long", 1, 1, 1, 0.0, 3600.0, "succeeded", 0, None, None),
            Bar("zero", 1, 2, 1, 100.0, 100.0, "failed", 3, None, None),
            Bar("next", 1, 2, 2, 100.0, 1000.0, "succeeded", 0, None, None)]
    svg = svg_of(f"<html>{timeline_svg(bars, 2, 0.0, 3600.0)}</html>")
    lane = [b.get("data-task") for b in bars_of(svg) if b.get("data-task") in ("zero", "next")]
    assert lane == ["next", "zero"]  # drawn last: on top
    [zero] = [b for b in bars_of(svg) if b.get("data-task") == "zero"]
    assert float(zero.get("width")) >= 4.0


def test_a_wait_still_open_at_the_end_lasts_to_the_end_of_its_bar() -> None:
    bars = [Bar("a", 1, 1, 1, 0.0, 10.0, "running", None, None, None)]
    events = [{"event": "worker_waiting_input", "slot": 1, "gen": 1, "ts": 2.0, "waiting": True},
              {"event": "worker_waiting_input", "slot": 1, "gen": 1, "ts": 3.0, "waiting": None},
              {"event": "worker_waiting_input", "slot": 1, "gen": 1, "ts": 6.0, "waiting": True}]
    assert waiting_spans(events, bars) == {(1, 1): [(2.0, 3.0), (6.0, 10.0)]}
