"""The Zellij backend end to end, against the fake ``zellij`` at the versions of contract §0:
inside a session (our own tab) and outside (a detached session), live and compact, under
require: the right panes, heartbeats with pane ids, no warnings, the headless outcomes, the
pane lifecycle, well-formed calls only."""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
from swarmtest import clean_env, full, wait_until
from zellijtest import FAST, check_calls

from zellij_swarm.backends.base import prune_command
from zellij_swarm.backends.zellij import BIRTHS
from zellij_swarm.backends.zellij_cli import SessionRow
from zellij_swarm.config.state_dir import find as find_state_dir
from zellij_swarm.exc import BackendError
from zellij_swarm.records.rundir import RunPaths

SWARM = """
[swarm]
jobs = 2

[[task]]
name = "ok1"
cmd = "echo ok1 >> ledger.txt; echo out-ok1"

[[task]]
name = "bad"
cmd = "echo bad >> ledger.txt; exit 3"

[[task]]
name = "slow"
cmd = "echo slow >> ledger.txt; sleep 0.6"

[[task]]
name = 'q"$x ~{y}'
argv = ["sh", "-c", "echo weird >> ledger.txt; if [ -t 1 ]; then echo tty; else echo notty; fi"]

[[task]]
name = "ok2"
cmd = "echo ok2 >> ledger.txt"
"""
WEIRD = 'q"$x ~{y}'
EXPECTED = {"ok1": ("succeeded", 0), "bad": ("failed", 3), "slow": ("succeeded", 0), WEIRD: ("succeeded", 0),
            "ok2": ("succeeded", 0)}
LEDGER = ["bad", "ok1", "ok2", "slow", "weird"]
# Short holds; deadlines long enough for a loaded CI machine (they end as soon as panes show).
def events(run: Path) -> list[dict]:
    return [json.loads(ln) for ln in (run / "events.jsonl").read_text().splitlines()]


def heartbeats(run: Path) -> dict[str, dict]:
    """task name -> launch heartbeat of its generation; a headless generation's was folded
    away with its files once its outcome was logged, and the log says what it said."""
    out = {}
    every = events(run)
    ended = {(e["slot"], e["gen"]): e for e in every if e["event"] in ("worker_completed", "worker_failed")}
    for e in every:
        if e["event"] == "slot_reserved":
            hb = run / "slots" / f"slot-{e['slot']}" / f"gen-{e['gen']}" / "heartbeat.jsonl"
            if hb.exists():
                out[e["task"]] = json.loads(hb.read_text().splitlines()[0])
            else:
                out[e["task"]] = {"event": "started", "pid": ended[(e["slot"], e["gen"])]["pid"], "pane_id": None}
    return out


def output(run: Path, task: str) -> str:
    for e in events(run):
        if e["event"] == "slot_reserved" and e["task"] == task:
            return (run / "slots" / f"slot-{e['slot']}" / f"gen-{e['gen']}" / "output.log").read_text()
    raise AssertionError(task)


def check_outcomes(swarm, res) -> Path:
    assert res.code == 1, res.stderr
    assert "Traceback" not in res.stderr, res.stderr
    rows = swarm.tasks()
    assert {n: (r["status"], r["exit_code"]) for n, r in rows.items()} == EXPECTED
    assert sorted((swarm.cwd / "ledger.txt").read_text().split()) == LEDGER  # each generation ran once
    return swarm.latest()


def test_headless_reference(swarm):
    """The outcomes every Zellij run must reproduce."""
    swarm.write("sw.toml", SWARM)
    run = check_outcomes(swarm, swarm("run", "sw.toml", "--backend", "headless", env=clean_env()))
    assert output(run, WEIRD) == "notty\n"


@pytest.mark.parametrize("ui", ["live", "compact"])
@pytest.mark.parametrize("where", ["inside", "outside"])
@pytest.mark.parametrize("version", ["0.45.0", full("0.44.3")])
def test_swarm_in_zellij(swarm, fz, version, where, ui):
    inside = None
    if where == "inside":
        fz.host("host", version, client=True)  # a user in it: a tab made with no client lists no pane (0.45)
        inside = "host"
    # require through the flag for live, through the environment for compact
    require = ["--require-zellij"] if ui == "live" else []
    extra = {} if require else {"ZELLIJ_SWARM_REQUIRE_ZELLIJ": "1"}
    swarm.write("sw.toml", SWARM)
    res = swarm("run", "sw.toml", "--backend", "zellij", "--ui", ui, *require,
                env=fz.env(version, inside=inside, **FAST, **extra), timeout=60)
    run = check_outcomes(swarm, res)
    run_id = run.name
    assert [e for e in events(run) if e["event"] == "warning"] == []
    hbs = heartbeats(run)
    rows = swarm.tasks()
    session = inside or f"swarm-{run_id}"
    tab = fz.tab(version, run_id, session)
    titles = sorted(p["title"] for p in tab["panes"])
    if ui == "live":
        for name, hb in hbs.items():
            assert re.fullmatch(r"terminal_\d+", hb["pane_id"]), hb
            assert rows[name]["pane_id"] == hb["pane_id"]
        assert output(run, WEIRD) == "tty\n"  # the worker had the pane's terminal
        assert output(run, "ok1") == "out-ok1\n"  # script's header and footer are gone
        # the failed pane stays, titled; the successful ones were closed
        bad_slot = rows["bad"]["slot"]
        assert titles == sorted([f"{run_id} · board", f"slot {bad_slot} · bad · failed (exit 3)"])
        closed = {c["argv"][-1] for c in fz.calls() if c["subcommand"] == "close-pane"}
        assert closed == {hbs[n]["pane_id"] for n in EXPECTED if n != "bad"}
        # the first batch came in one layout, backfill through single run calls
        runs = [c for c in fz.calls() if c["subcommand"] == "run"]
        assert len(runs) == len(EXPECTED) - 2
        # backfill panes go next to one of our panes without focus, never by --tab-id (issue 11)
        assert all("--near-current-pane" in c["argv"] and "--tab-id" not in c["argv"] for c in runs)
        assert all(("--no-focus" in c["argv"]) == (version >= "0.45") for c in runs)
        board = next(p for p in tab["panes"] if p["title"].endswith("· board"))
        assert not board["stacked"]
    else:
        assert all(hb["pane_id"] is None for hb in hbs.values())
        assert output(run, WEIRD) == "notty\n"
        assert titles == sorted([f"{run_id} · board", "slot 1", "slot 2"])
        assert all(p["stacked"] for p in tab["panes"] if p["title"].startswith("slot"))
        assert not [c for c in fz.calls() if c["subcommand"] == "run"]
    if where == "outside":
        # where the panes are, how to see them
        assert "panes in Zellij; see them from any terminal: zellij-swarm attach" in res.stderr
        assert f"swarm-{run_id}' stays" in res.stderr  # the session kept, and how to close it
        assert fz.session(version, session)["live"]  # kept for the user (no CI, no --close-session)
    check_calls(fz.calls())


@pytest.mark.parametrize("version,where,ui", [
    ("0.43.1", "inside", "live"), ("0.43.1", "inside", "compact"), ("0.43.1", "outside", "compact"),
    full("0.41.2", "inside", "live"), ("0.41.2", "outside", "compact"),
])
def test_before_044(swarm, fz, version, where, ui):
    """No pane ids from Zellij: ids come from the heartbeat; close-on-exit panes held by the wrapper."""
    inside = None
    if where == "inside":
        fz.host("host", version, client=True)
        inside = "host"
    swarm.write("sw.toml", SWARM)
    res = swarm("run", "sw.toml", "--backend", "zellij", "--ui", ui, "--require-zellij",
                env=fz.env(version, inside=inside, **FAST), timeout=60)
    run = check_outcomes(swarm, res)
    assert [e for e in events(run) if e["event"] == "warning"] == []
    hbs = heartbeats(run)
    session = inside or f"swarm-{run.name}"
    if ui == "live":
        assert all(re.fullmatch(r"terminal_\d+", hb["pane_id"]) for hb in hbs.values()), hbs
        assert output(run, WEIRD) == "tty\n"
        # successful panes close after the hold, the failed one stays (title fixed at creation)
        bad_slot = swarm.tasks()["bad"]["slot"]
        want = sorted([f"{run.name} · board", f"slot {bad_slot} · bad · running"])
        wait_until(lambda: sorted(p["title"] for p in fz.tab(version, run.name, session)["panes"]) == want,
                   timeout=10, what="only the board and the failed pane left")
        assert not [c for c in fz.calls() if "--pane-id" in c["argv"]]
    else:
        assert all(hb["pane_id"] is None for hb in hbs.values())
        titles = sorted(p["title"] for p in fz.tab(version, run.name, session)["panes"])
        assert titles == sorted([f"{run.name} · board", "slot 1", "slot 2"])
    check_calls(fz.calls())


@pytest.mark.parametrize("version", ["0.43.1", full("0.41.2")])
def test_before_044_outside_live_degrades(swarm, fz, version):
    swarm.write("sw.toml", SWARM)
    res = swarm("run", "sw.toml", "--backend", "zellij", "--ui", "live", env=fz.env(version, **FAST), timeout=60)
    run = check_outcomes(swarm, res)
    warnings = [e["code"] for e in events(run) if e["event"] == "warning"]
    assert warnings == ["live_degraded_to_compact"]
    titles = sorted(p["title"] for p in fz.tab(version, run.name, f"swarm-{run.name}")["panes"])
    assert titles == sorted([f"{run.name} · board", "slot 1", "slot 2"])


def test_before_044_outside_live_is_an_error_under_require(swarm, fz):
    swarm.write("sw.toml", SWARM)
    res = swarm("run", "sw.toml", "--backend", "zellij", "--ui", "live",
                env=fz.env("0.43.1", ZELLIJ_SWARM_REQUIRE_ZELLIJ="1", **FAST), timeout=60)
    assert res.code == 1, res.stderr
    rows = swarm.tasks()
    assert {r["reason"] for r in rows.values()} == {"zellij_live_degraded_to_compact"}
    assert not (swarm.cwd / "ledger.txt").exists()


def test_ui_from_the_environment_and_the_flag_overrides_it(swarm, fz):
    """ZELLIJ_SWARM_UI switches the mode with no flag; --ui wins; auto picks Zellij inside it."""
    fz.host("host", "0.45.0", client=True)  # a user in it: a tab made with no client lists no pane (0.45)
    swarm.write("two.toml", '[swarm]\njobs = 2\n[[task]]\ncmd = "true"\n[[task]]\ncmd = "true"\n')
    env = fz.env("0.45.0", inside="host", ZELLIJ_SWARM_UI="live", **FAST)
    res = swarm("run", "two.toml", env=env, timeout=60)
    assert res.code == 0, res.stderr
    run = swarm.latest()
    assert json.loads((run / "run.json").read_text())["backend"]["name"] == "zellij"
    assert all(hb["pane_id"] for hb in heartbeats(run).values())
    res = swarm("run", "two.toml", "--ui", "compact", env=env, timeout=60)
    assert res.code == 0, res.stderr
    run = swarm.latest()
    assert all(hb["pane_id"] is None for hb in heartbeats(run).values())
    # its tab had the slot views (the tab itself closes at the end: nothing failed)
    assert '"slot 1"' in (run / "layout.kdl").read_text()


# ----- the backend itself, driven directly (issue 14): titles, order, the end, prune ---------

class Driven:
    """A ``ZellijBackend`` inside the fake session ``host`` (a client attached), driven as the
    supervisor would; its worker panes run plain scripts standing in for wrappers."""

    def __init__(self, fz, tmp_path: Path, version: str, *, ui: str = "compact", **flags: str) -> None:
        from zellij_swarm.backends.base import RunContext
        from zellij_swarm.backends.zellij import ZellijBackend
        from zellij_swarm.config import settings
        from zellij_swarm.records.rundir import RunPaths

        fz.host("host", version, client=True)
        self.fz, self.version = fz, version
        self.env = fz.env(version, inside="host", **FAST)
        self.paths = RunPaths(tmp_path / "20260101-000000-abcdef")
        self.paths.dir.mkdir()
        self.warnings: list = []
        self.backend = ZellijBackend(self.env, close_session=False)
        self.backend.open(RunContext(
            paths=self.paths, run_id=self.paths.run_id, settings=settings.resolve({"ui": ui, "jobs": "2", **flags}, {}),
            schedule=lambda delay, fn: None, warn=lambda c, m: self.warnings.append((c, m)), notice=lambda text: None,
            renderer_argv=lambda *args: ["sleep", "600"]))

    def request(self, slot: int, task: str, script: str, *, attempt: int = 1, attempts: int = 1):
        from zellij_swarm.backends.base import LaunchRequest

        paths = self.paths.gen(slot, 1)
        paths.dir.mkdir(parents=True)
        paths.wrapper.write_text(script + "\n")
        return LaunchRequest(paths, slot, task, pane=True, attempt=attempt, attempts=attempts)

    def tab_titles(self) -> list[str] | None:
        """The titles of the swarm's tab, whose name may be marked (``swarm:<run> (1 waiting)``)."""
        from zellij_swarm import names

        tabs = [t for t in self.fz.session(self.version, "host")["tabs"]
                if (parsed := names.parse(t["name"], [self.paths.run_id])) is not None and parsed.kind == ":"]
        return [p["title"] for p in tabs[0]["panes"]] if tabs else None


@pytest.mark.parametrize("failed", [False, True])
def test_inside_zellij_the_swarm_tab_closes_unless_something_failed(fz, tmp_path, failed):
    from zellij_swarm.backends import leftovers

    d = Driven(fz, tmp_path, "0.44.3")
    run_id = d.paths.run_id
    assert d.tab_titles() == [f"{run_id} · board", "slot 1", "slot 2"]
    d.backend.close(cancelled=False, failed=failed)
    if not failed:
        assert d.tab_titles() is None  # its last pane closed, with a client attached: the tab went
        assert d.backend.leftover_hint() is None
        return
    assert d.tab_titles() == [f"{run_id} · board", "slot 1", "slot 2"]
    assert d.backend.leftover_hint() == (f"tab swarm:{run_id} stays in zellij session 'host': "
                                         f"close it with {prune_command(d.backend.ctx.paths)}")
    [left] = leftovers.find(d.env, [run_id, "20250101-000000-000000"]).leftovers
    assert (left.run_id, left.what) == (run_id, f"zellij tab swarm:{run_id} in session host")
    assert left.remove is not None
    left.remove()
    assert d.tab_titles() is None
    assert d.warnings == []


@pytest.mark.parametrize("version", ["0.44.3", "0.45.0"])
def test_a_tab_the_user_closed_is_not_said_to_stay(fz, tmp_path, version):
    """A failed run inside the user's session keeps its tab, and says how to close it — also
    when the user had closed every pane of ours by hand meanwhile (the tab went with them)."""
    import subprocess

    d = Driven(fz, tmp_path, version)
    for pane in sorted(d.backend.known):
        subprocess.run(["zellij", "-s", "host", "action", "close-pane", "--pane-id", pane], env=d.env, check=True,
                       capture_output=True)
    assert d.tab_titles() is None
    d.backend.close(cancelled=False, failed=True)
    assert d.backend.leftover_hint() is None


def test_a_close_at_the_end_that_fails_leaves_the_tab_and_the_hint_says_so(fz, tmp_path):
    """Issue 21 §3.6: the backend marked itself closed whatever its close calls answered, so a
    tab left behind came with no hint. Every close of a pane fails here: the tab stays, said."""
    d = Driven(fz, tmp_path, "0.45.0")
    run_id = d.paths.run_id
    d.env["FAKE_ZELLIJ_FAULTS"] = "fail:close-pane:1:boom"
    d.backend.env = d.env
    d.backend.z.env = d.env
    d.backend.close(cancelled=False, failed=False)
    assert d.tab_titles() == [f"{run_id} · board", "slot 1", "slot 2"]
    assert d.backend.leftover_hint() == (f"tab swarm:{run_id} stays in zellij session 'host': "
                                         f"close it with {prune_command(d.backend.ctx.paths)}")
    assert {c for c, _ in d.warnings} == {"pane_call_failed"}


def test_before_044_the_tab_stays_and_the_hint_says_so(fz, tmp_path):
    from zellij_swarm.backends import leftovers

    d = Driven(fz, tmp_path, "0.43.1")
    d.backend.close(cancelled=False, failed=False)  # no pane can be closed by id
    assert d.tab_titles() is not None
    assert d.backend.leftover_hint() == (f"tab swarm:{d.paths.run_id} stays in zellij session 'host': "
                                         "close it with Zellij's tab mode (Ctrl t, x)")
    [left] = leftovers.find(d.env, [d.paths.run_id]).leftovers
    assert left.remove is None and "cannot close a tab it is not in" in left.why


@pytest.mark.parametrize("version", ["0.45.0", "0.43.1"])
def test_titles_carry_the_attempt_and_mark_a_worker_waiting_for_input(fz, tmp_path, version):
    d = Driven(fz, tmp_path, version, ui="live")
    req = d.request(1, "agent-1", "exec sleep 600", attempt=2, attempts=3)
    assert d.backend.pane_mode(1) is not None
    [opened] = d.backend.launch([req])
    running = "slot 1 · agent-1 · attempt 2/3 · running"
    wait_until(lambda: running in (d.tab_titles() or []), what="the worker's pane")
    d.backend.waiting(req, opened.pane_id, True)
    renames = [c for c in d.fz.calls() if c["subcommand"] == "rename-pane"]
    if version < "0.44":  # no pane can be renamed without focusing it: the title stays
        assert renames == [] and running in (d.tab_titles() or [])
        return
    assert "slot 1 · agent-1 · attempt 2/3 · waiting for input" in (d.tab_titles() or [])
    d.backend.waiting(req, opened.pane_id, False)
    assert running in (d.tab_titles() or [])
    check_calls(d.fz.calls())


def test_a_backfill_pane_is_stacked_after_the_newest_pane_of_the_highest_slot_not_above_its_own():
    from zellij_swarm.backends.zellij import ZellijBackend

    b = ZellijBackend({}, close_session=False)
    assert b._stack_anchor(2) is None
    b.open_panes.update({"terminal_1": 1, "terminal_2": 3, "terminal_3": 1, "terminal_4": 2})
    assert b._stack_anchor(2) == "terminal_4"
    assert b._stack_anchor(1) == "terminal_3"  # the newer pane of slot 1
    assert b._stack_anchor(5) == "terminal_2"
    b.open_panes = {"terminal_7": 4, "terminal_8": 3}
    assert b._stack_anchor(1) == "terminal_7"  # none before it: the oldest open pane


def test_prune_removes_the_tabs_ended_runs_left_in_the_users_session(swarm, fz):
    fz.host("host", "0.44.3", client=True)
    env = fz.env("0.44.3", inside="host", **FAST)
    swarm.write("f.txt", "exit 3\n")
    res = swarm("run", "f.txt", "--backend", "zellij", "--ui", "compact", env=env, timeout=60)
    assert res.code == 1, res.stderr
    run_id = swarm.latest().name
    assert fz.tab("0.44.3", run_id, "host")  # something failed: the tab stays
    res = swarm("prune", env=env)
    assert res.stdout == f"removed zellij tab swarm:{run_id} in session host\n", res.stderr
    assert [t["name"] for t in fz.session("0.44.3", "host")["tabs"] if t["name"] == f"swarm:{run_id}"] == []


def test_a_kept_session_says_how_to_delete_it_with_the_socket_directory_it_lives_in():
    from zellij_swarm.backends.zellij import ZellijBackend

    b = ZellijBackend({"ZELLIJ_SOCKET_DIR": "/tmp/my socks"}, close_session=False)
    assert b.leftover_hint() is None  # nothing was opened
    b.started, b.created_session, b.z.session = True, True, "swarm-1"
    # a run of the project's own state directory: the prune it offers needs no --state-dir
    b.ctx = SimpleNamespace(paths=RunPaths(find_state_dir(None, os.environ).path / "runs" / "20260101-000000-abcdef"))
    assert b.leftover_hint() == ("zellij session 'swarm-1' stays: close it with ZELLIJ_SOCKET_DIR='/tmp/my socks' "
                                 "zellij delete-session --force swarm-1 (or zellij-swarm prune)")


def test_a_version_above_the_tested_range_runs_with_one_warning_and_doctor_says_where_zellij_is(swarm, fz):
    swarm.write("a.toml", '[[task]]\nname = "a"\ncmd = "echo a"\n')
    res = swarm("run", "a.toml", "--backend", "zellij", "--close-session", env=fz.env("0.46.0", **FAST))
    assert res.code == 0, res.stderr
    assert [w["code"] for w in swarm.summary()["warnings"]] == ["zellij_untested"]
    doctor = swarm("doctor", env=fz.env("0.46.0")).stdout.splitlines()[1]
    assert doctor.startswith("zellij: 0.46.0 at ") and "(the tests' fake zellij)" in doctor
    assert "untested version" in doctor
    doctor = swarm("doctor", env=fz.env("0.44.3")).stdout.splitlines()[1]
    assert "untested" not in doctor and "fake" in doctor


@pytest.mark.parametrize("version", ["0.43.1", full("0.41.2")])
def test_before_044_panes_the_swarm_means_to_close_are_closed(swarm, fz, version):
    """Before 0.44 a pane closes when its wrapper's hold (a ``sleep``, the pane leader's
    child) ends: with --keep-failed-panes 0 the failed pane goes too, and no hold is left."""
    from zellij_swarm.worker import procs

    fz.host("host", version, client=True)
    swarm.write("sw.toml", SWARM)
    res = swarm("run", "sw.toml", "--backend", "zellij", "--ui", "live", "--keep-failed-panes", "0",
                env=fz.env(version, inside="host", **FAST), timeout=60)
    run = check_outcomes(swarm, res)
    titles = wait_until(lambda: (t := [p["title"] for p in fz.tab(version, run.name, "host")["panes"]]) and
                        len(t) == 1 and t, what="every worker pane closed")
    assert titles == [f"{run.name} · board"]
    assert procs.marked(procs.hold_markers(run.name)) == []


@pytest.mark.parametrize("reached", [False, True], ids=["before-its-hold", "in-its-hold"])
def test_before_044_a_failed_pane_closed_before_its_wrapper_reached_its_hold_holds_nothing(tmp_path, reached):
    """The exit is recorded before the wrapper reaches its hold: on a loaded machine the swarm
    closed such a pane (``--keep-failed-panes 0``) while no hold ran yet, and its wrapper then
    held it for good. The swarm's close marks the generation released; a wrapper that has not
    looked yet holds nothing, and one already holding has its sleep ended."""
    import subprocess
    import threading

    from zellij_swarm.backends.zellij import _end_hold, _pre44_hold
    from zellij_swarm.records import generation_files

    gen = generation_files.GenPaths(tmp_path / "gen-1", 1, 1)
    gen.dir.mkdir()
    go = tmp_path / "go"
    # the wrapper's second stage, a child of its pane leader: its worker failed (exit recorded),
    # and it is held up on its way to the hold until the test says go
    stage = (f'_zsw_d={gen.dir}; _zsw_rc=3; while [ ! -e {go} ]; do sleep 0.01; done; '
             + _pre44_hold(0.2, "run-x"))
    leader = subprocess.Popen(["sh", "-c", 'sh -c "$1"; exit 0', "leader", stage])
    try:
        gen.heartbeat.write_text(json.dumps({"event": "started", "pid": leader.pid}) + "\n")
        gen.exit_sidecar.write_text("3\n")
        if reached:
            go.touch()
            wait_until(lambda: any(Path(f"/proc/{c}/cmdline").read_bytes().startswith(b"sleep")
                                   for c in _children(leader.pid)), what="the hold's sleep")
            _end_hold(gen)
        else:
            closing = threading.Thread(target=_end_hold, args=(gen,))
            closing.start()
            wait_until(lambda: gen.released.exists(), what="the released mark")
            go.touch()
            closing.join(timeout=30)
            assert not closing.is_alive()
        assert leader.wait(timeout=30) == 0
    finally:
        for child in _children(leader.pid):
            subprocess.run(["kill", str(child)], check=False)
        leader.kill()
        leader.wait()


def _children(pid: int) -> list[int]:
    import psutil

    try:
        return [c.pid for c in psutil.Process(pid).children()]
    except psutil.NoSuchProcess:
        return []


@pytest.mark.parametrize("version,ui", [("0.45.0", "live"), ("0.43.1", "compact"), full("0.44.3", "compact")])
def test_a_session_that_dies_as_it_is_born_is_made_again(swarm, fz, version, ui):
    """The real 0.45.0's server now and then panics as the session ``attach -b`` asked for
    starts (contract, Provenance): the run makes it again and runs in its panes, each task
    once, with nothing to warn of."""
    swarm.write("sw.toml", SWARM)
    res = swarm("run", "sw.toml", "--backend", "zellij", "--ui", ui, "--require-zellij",
                env=fz.env(version, FAKE_ZELLIJ_FAULTS=f"birth_panics={BIRTHS - 1}", **FAST), timeout=60)
    run = check_outcomes(swarm, res)
    assert [e for e in events(run) if e["event"] == "warning"] == []
    made = [c for c in fz.calls() if c["subcommand"] == "attach"]
    assert len(made) == BIRTHS
    assert fz.session(version, f"swarm-{run.name}")["live"]
    titles = [p["title"] for p in fz.tab(version, run.name, f"swarm-{run.name}")["panes"]]
    assert f"{run.name} · board" in titles


@pytest.mark.parametrize("require", [False, True])
def test_a_session_that_dies_at_every_birth_is_missing(swarm, fz, require):
    """Dead at each of its ``BIRTHS``: ``session_missing`` at once (no wait for its panes),
    saying so; the tasks run headless, or, under require, none runs."""
    swarm.write("sw.toml", SWARM)
    res = swarm("run", "sw.toml", "--backend", "zellij", "--ui", "live", *(["--require-zellij"] if require else []),
                env=fz.env("0.45.0", FAKE_ZELLIJ_FAULTS=f"birth_panics={BIRTHS}", **FAST), timeout=60)
    assert "Traceback" not in res.stderr, res.stderr
    assert len([c for c in fz.calls() if c["subcommand"] == "attach"]) == BIRTHS
    run = swarm.latest()
    if require:
        assert res.code == 1, res.stderr
        assert {r["reason"] for r in swarm.tasks().values()} == {"zellij_session_missing"}
        assert not (swarm.cwd / "ledger.txt").exists()
    else:
        check_outcomes(swarm, res)
        warnings = [e for e in events(run) if e["event"] == "warning"]
        # said for the run, then for each task of the first batch, which its pane never ran
        assert {w["code"] for w in warnings} == {"session_missing"}, warnings
        assert all(f"died as it started, {BIRTHS} times in a row" in w["message"] for w in warnings)


def _waiting_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ls: Callable[[Path], dict]) -> None:
    """``wait_live`` for session ``s`` of a 0.45.0 whose socket directory is ``tmp_path``'s,
    each ``ls`` answered by ``ls(socket)``."""
    from zellij_swarm.backends import zellij_cli

    z = zellij_cli.Zellij({"ZELLIJ_SOCKET_DIR": str(tmp_path)})
    z.caps, z.session = zellij_cli.capabilities("0.45.0"), "s"
    sock = tmp_path / "contract_version_1" / "s"
    monkeypatch.setattr(z, "sessions", lambda: ls(sock))
    z.wait_live(time.monotonic() + 0.5)


def test_a_socket_seen_then_gone_is_a_session_that_died(tmp_path, monkeypatch):
    (tmp_path / "contract_version_1").mkdir()
    (tmp_path / "contract_version_1" / "s").touch()  # left by the server that died
    with pytest.raises(BackendError) as e:
        _waiting_for(tmp_path, monkeypatch, lambda sock: sock.unlink(missing_ok=True) or {})  # ls removes it
    assert e.value.code == "session_died"


def test_a_socket_never_seen_decides_nothing_and_a_live_one_is_waited_for(tmp_path, monkeypatch):
    """A socket directory laid out otherwise than we know: the deadline decides, as before;
    a socket that stays is a session coming up."""
    (tmp_path / "contract_version_1").mkdir()  # the directory is there, our socket never was
    with pytest.raises(BackendError) as e:
        _waiting_for(tmp_path, monkeypatch, lambda sock: {})
    assert e.value.code == "session_missing"
    (tmp_path / "contract_version_1" / "s").touch()
    looks = iter([{}, {}, {"s": SessionRow("s", True)}])
    _waiting_for(tmp_path, monkeypatch, lambda sock: next(looks))


def test_an_ls_with_no_answer_while_the_session_comes_up_is_asked_again(tmp_path, monkeypatch):
    """``ls`` that gives no answer (a timeout, an exit of its own) as our session comes up: the
    session is waited for, as when it is not listed yet; raised at once, it sent the whole
    swarm headless (a fault test, written a moment too early, found it)."""
    (tmp_path / "contract_version_1").mkdir()
    (tmp_path / "contract_version_1" / "s").touch()

    def no_answer() -> dict:
        raise BackendError("pane_call_failed", "zellij list-sessions: exit 2")

    looks = iter([no_answer, no_answer, lambda: {"s": SessionRow("s", True)}])
    _waiting_for(tmp_path, monkeypatch, lambda sock: next(looks)())
    with pytest.raises(BackendError) as e:  # one that never answers: the deadline says so, and why
        _waiting_for(tmp_path, monkeypatch, lambda sock: no_answer())
    assert e.value.code == "session_missing"
    assert "zellij ls gave no answer: zellij list-sessions: exit 2" in str(e.value)


@pytest.mark.parametrize("answers", [2, 4], ids=["answers-on-the-third-ask", "never-answers"])
def test_a_list_of_panes_that_does_not_answer_is_asked_again_before_a_backfill_trusts_its_anchor(
        monkeypatch: pytest.MonkeyPatch, answers: int) -> None:
    """Every pane of ours closed, and the busy server's ``list-panes`` closes with nothing now
    and then: asked again, its answer (no pane of ours) sends the rest headless; taken for
    "the anchor is there", a backfill went after a gone pane, its worker unseen. One that
    never answers is asked a bounded number of times and changes nothing."""
    from zellij_swarm.backends import zellij
    from zellij_swarm.backends.zellij import ZellijBackend

    b = ZellijBackend({}, close_session=False)
    b.open_panes, b.board_pane = {"terminal_1": 1}, "terminal_0"
    asked: list[int] = []

    def list_panes() -> list[dict[str, object]] | None:
        asked.append(1)
        return None if len(asked) <= answers else [{"id": 5, "is_plugin": False}]

    monkeypatch.setattr(b.z, "has", lambda cap: True)
    monkeypatch.setattr(b.z, "list_panes", list_panes)
    monkeypatch.setattr(zellij, "LIST_AGAIN_AFTER", 0.0)
    if answers < 1 + zellij.LIST_AGAIN:
        assert b._anchor_exists() is False and b.open_panes == {} and b.board_pane is None
    else:
        assert b._anchor_exists() is True and b.open_panes == {"terminal_1": 1}
    assert len(asked) == min(answers + 1, 1 + zellij.LIST_AGAIN)


@pytest.mark.parametrize(("version", "says"), [("0.44.3", True), ("0.45.0", True), ("0.43.1", False)])
def test_a_pane_closed_by_hand_is_not_listed_where_zellij_can_list_panes(fz, tmp_path, version, says):
    """What the heartbeat deadline asks of a pane that never reported: from 0.44 ``list-panes``
    says whether it is still there; before, nothing says (None: a pane fault, as it always was)."""
    import subprocess

    d = Driven(fz, tmp_path, version, ui="live")
    kept, closed = (opened.pane_id for opened in d.backend.launch([d.request(1, "t1", "exec sleep 600"),
                                                                   d.request(2, "t2", "exec sleep 600")]))
    if closed is not None:  # (before 0.44 only the launch heartbeat names a pane)
        subprocess.run(["zellij", "-s", "host", "action", "close-pane", "--pane-id", closed], env=d.env, check=True,
                       capture_output=True)
    listed = [d.backend.pane_listed(p) for p in (kept, closed)]
    assert listed == ([True, False] if says else [None, None])
