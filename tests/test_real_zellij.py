"""The Zellij backend against the real Zellij (scripts/setup builds CI's version; see
tests/realzellij.py): the same swarm as tests/test_zellij_backend.py, outside a session (the
swarm creates one) and inside one, live and compact, require on and off — asserting on what
Zellij itself reports (``list-panes --json``, ``list-sessions``), never on our fake."""

from __future__ import annotations

import re

import pytest
from realzellij import RealZellij
from swarmtest import kill_run_processes, run_processes
from test_zellij_backend import EXPECTED, SWARM, WEIRD, check_outcomes, heartbeats, output
from zellijtest import FAST


def swarm_panes(rz: RealZellij, session: str, run_id: str) -> list[dict]:
    """The terminal panes of the swarm's tab (``swarm:<run>``; outside, its session's only tab)."""
    panes = [p for p in rz.panes(session) if not p["is_plugin"]]
    tabs = {p["tab_name"] for p in panes}
    tab = f"swarm:{run_id}" if f"swarm:{run_id}" in tabs else next(iter(tabs))
    return [p for p in panes if p["tab_name"] == tab]


@pytest.mark.parametrize("require", [True, False], ids=["require", "no-require"])
@pytest.mark.parametrize("ui", ["live", "compact"])
@pytest.mark.parametrize("where", ["inside", "outside"])
def test_a_swarm_in_the_real_zellij(swarm, rz, tmux, where, ui, require):
    inside = None
    if where == "inside":  # started from a shell of a session a user is attached to
        rz.host("host", tmux)
        inside = "host"
    swarm.write("sw.toml", SWARM)
    res = swarm("run", "sw.toml", "--backend", "zellij", "--ui", ui, *(["--require-zellij"] if require else []),
                env=rz.env(inside=inside, **FAST), timeout=120)
    try:
        run = check_outcomes(swarm, res)
        run_id = run.name
        assert swarm.summary()["warnings"] == [], res.stderr
        hbs = heartbeats(run)
        rows = swarm.tasks()
        session = inside or f"swarm-{run_id}"
        assert session in rz.session_names()
        titles = sorted(p["title"] for p in swarm_panes(rz, session, run_id))
        if ui == "live":
            for name, hb in hbs.items():
                assert re.fullmatch(r"terminal_\d+", hb["pane_id"]), hb
                assert rows[name]["pane_id"] == hb["pane_id"]
            assert output(run, WEIRD) == "tty\n"  # the worker had the pane's terminal
            assert output(run, "ok1") == "out-ok1\n"
            bad_slot = rows["bad"]["slot"]
            assert titles == sorted([f"{run_id} · board", f"slot {bad_slot} · bad · failed (exit 3)"])
        else:
            assert all(hb["pane_id"] is None for hb in hbs.values())
            assert output(run, WEIRD) == "notty\n"
            assert titles == sorted([f"{run_id} · board", "slot 1", "slot 2"])
        if where == "outside":
            # where the panes are, how to see them
            assert "panes in Zellij; see them from any terminal: zellij-swarm attach" in res.stderr
            assert f"swarm-{run_id}' stays" in res.stderr  # the session kept, and how to close it
        assert set(EXPECTED) == set(rows)
    finally:
        kill_run_processes(swarm.latest().name)
    assert run_processes(run_id) == []


@pytest.mark.parametrize("ui", ["live", "compact"])
@pytest.mark.full  # scripts/zellij-matrix builds 0.43.1 and runs it
def test_a_swarm_in_the_real_zellij_before_044(swarm, rz_pre044, tmux, ui):
    """The path before 0.44 (no pane ids from Zellij, no list-panes): inside a session a
    client is attached to, the same outcomes, the live panes named by their heartbeats."""
    rz_pre044.host("host", tmux)
    swarm.write("sw.toml", SWARM)
    res = swarm("run", "sw.toml", "--backend", "zellij", "--ui", ui, "--require-zellij",
                env=rz_pre044.env(inside="host", **FAST), timeout=120)
    try:
        run = check_outcomes(swarm, res)
        assert swarm.summary()["warnings"] == [], res.stderr
        hbs = heartbeats(run)
        if ui == "live":
            assert all(re.fullmatch(r"terminal_\d+", hb["pane_id"]) for hb in hbs.values()), hbs
            assert output(run, WEIRD) == "tty\n"
        else:
            assert output(run, WEIRD) == "notty\n"
    finally:
        kill_run_processes(swarm.latest().name)
