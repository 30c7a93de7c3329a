"""Zellij faults: without require the swarm completes with recorded warnings and every
generation ran at most once (the ledger); with require the affected tasks fail with a
``zellij_<code>`` reason and ``run`` exits 1."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import psutil
import pytest
from fakeprocs import command_line
from swarmtest import GATE, wait_until
from zellijtest import FAST, retry_after_the_supervisor_is_killed

from zellij_swarm.backends import zellij_cli

TASKS = 5
SWARM = "[swarm]\njobs = 2\n" + "".join(
    f'[[task]]\nname = "t{i}"\ncmd = "echo t{i} >> ledger.txt; sleep 0.2"\n' for i in range(TASKS))


def events(run: Path) -> list[dict]:
    return [json.loads(ln) for ln in (run / "events.jsonl").read_text().splitlines()]


def ledger(swarm) -> list[str]:
    path = swarm.cwd / "ledger.txt"
    return sorted(path.read_text().split()) if path.exists() else []


def run(swarm, env, *args):
    swarm.write("sw.toml", SWARM)
    return swarm("run", "sw.toml", "--backend", "zellij", "--ui", "live", *args, env=env, timeout=90)


# fault -> (the warning code it causes, whether it hits the first batch as well)
FAULTS = {
    "fail:run:1:boom": "pane_call_failed",
    "fail:attach:1:cannot create": "pane_call_failed",
    "hang:run": "pane_call_timeout",
}


def call_timeout(fault: str) -> str:
    """The per-call timeout (ms): short where a call hangs, so that the run goes on soon; a
    loaded machine's where one fails. A 1.5 s one timed a slow first ``run`` out before the
    fault failed it, and the warning was ``pane_call_timeout`` (the fake tier, under load)."""
    return "1500" if fault.startswith("hang:") else "60000"


@pytest.mark.parametrize("fault", list(FAULTS))
def test_fault_is_a_warning(swarm, fz, fault):
    env = fz.env("0.45.0", faults=fault, ZELLIJ_SWARM_ZELLIJ_CALL_TIMEOUT_MS=call_timeout(fault), **FAST)
    res = run(swarm, env)
    assert res.code == 0, res.stderr
    assert ledger(swarm) == sorted(f"t{i}" for i in range(TASKS))  # each exactly once
    codes = {e["code"] for e in events(swarm.latest()) if e["event"] == "warning"}
    assert codes == {FAULTS[fault]}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_fault_fails_tasks_under_require(swarm, fz, fault):
    env = fz.env("0.45.0", faults=fault, ZELLIJ_SWARM_ZELLIJ_CALL_TIMEOUT_MS=call_timeout(fault), **FAST)
    res = run(swarm, env, "--require-zellij")
    assert res.code == 1, res.stderr
    rows = swarm.tasks()
    failed = {n for n, r in rows.items() if r["status"] != "succeeded"}
    assert failed and {rows[n]["reason"] for n in failed} == {f"zellij_{FAULTS[fault]}"}
    assert set(ledger(swarm)) == {n for n in rows if n not in failed}  # failed ones never ran
    assert len(ledger(swarm)) == len(set(ledger(swarm)))


@pytest.mark.parametrize("fault", ["silent_new_pane", "init_delay_ms=1500", "fail:new-pane:1:unused"])
def test_recovered_faults(swarm, fz, fault):
    """A silent ``run`` is found by name in list-panes; a slow session start is awaited."""
    res = run(swarm, fz.env("0.45.0", faults=fault, **FAST), "--require-zellij")
    assert res.code == 0, res.stderr
    assert ledger(swarm) == sorted(f"t{i}" for i in range(TASKS))
    run_dir = swarm.latest()
    assert not [e for e in events(run_dir) if e["event"] == "warning"]
    assert all(r["pane_id"].startswith("terminal_") for r in swarm.tasks().values())


def test_heartbeat_deadline_race_runs_each_generation_once(swarm, fz):
    """A 1 ms heartbeat deadline: the supervisor and the panes race for every claim, and
    whoever loses does not run the worker."""
    env = fz.env("0.45.0", ZELLIJ_SWARM_HEARTBEAT_TIMEOUT_MS="1", ZELLIJ_SWARM_PANE_HOLD_MS="200")
    res = run(swarm, env)
    assert res.code == 0, res.stderr
    assert ledger(swarm) == sorted(f"t{i}" for i in range(TASKS))
    codes = {e["code"] for e in events(swarm.latest()) if e["event"] == "warning"}
    assert codes <= {"heartbeat_missing"}


@pytest.mark.parametrize("require", [False, True])
def test_no_zellij_on_path(swarm, fz, require):
    env = fz.env("0.45.0", **FAST)
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if "fake-zellij" not in p)
    res = run(swarm, env, *(["--require-zellij"] if require else []))
    rows = swarm.tasks()
    if require:
        assert res.code == 1
        assert {r["reason"] for r in rows.values()} == {"zellij_multiplexer_missing"}
        assert ledger(swarm) == []
    else:
        assert res.code == 0, res.stderr
        assert ledger(swarm) == sorted(f"t{i}" for i in range(TASKS))
        assert [e["code"] for e in events(swarm.latest()) if e["event"] == "warning"] == ["multiplexer_missing"]


ANCHOR_SWARM = f"""[swarm]
jobs = 2
[[task]]
name = "bad"
cmd = "exit 3"
[[task]]
name = "holder"
cmd = "touch holder.up; {GATE}"
[[task]]
name = "next"
cmd = "echo next >> ledger.txt"
after = ["holder"]
"""


def _panes_closed_by_hand(swarm, fz, *titles: str, args: tuple[str, ...] = ()) -> Path:
    """A live swarm inside session ``host`` (a client on it): once ``bad`` failed (its pane
    kept) and ``holder`` waits at the gate, the user closes the panes whose titles start with
    ``titles``; then ``next`` is backfilled. The run's directory."""
    fz.host("host", "0.45.0", client=True)
    swarm.write("sw.toml", ANCHOR_SWARM)
    proc = swarm.popen("run", "sw.toml", "--backend", "zellij", "--ui", "live", "--output", "quiet", *args,
                       env=fz.env("0.45.0", inside="host", **FAST))
    try:
        run = swarm.started()
        def panes() -> list[dict]:
            tabs = fz.session("0.45.0", "host")["tabs"]
            return [p for t in tabs if t["name"] == f"swarm:{run.name}" for p in t["panes"]]

        wait_until(lambda: any("bad · failed" in p["title"] for p in panes()), what="bad's pane kept")
        wait_until(lambda: (swarm.cwd / "holder.up").exists(), what="holder running")
        for p in panes():
            if any(t in p["title"] for t in titles):
                fz.zellij("--session", "host", "action", "close-pane", "--pane-id", p["pane_id"], version="0.45.0")
        swarm.open_gate()
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 1, err
    finally:
        proc.kill()
    return run


def test_a_backfill_never_goes_next_to_a_kept_pane_the_user_closed(swarm, fz):
    """The backfill's anchor would be bad's kept pane (slot 1), which the user closed: the
    real Zellij places a pane anchored on a pane that is gone nowhere (its worker runs unseen,
    close-pane cannot reach it). It goes next to a pane of ours that is there."""
    run = _panes_closed_by_hand(swarm, fz, "bad · failed")
    rows = swarm.tasks()
    assert rows["next"]["status"] == "succeeded" and rows["next"]["pane_id"], rows["next"]
    assert fz.session("0.45.0", "host")["orphan_panes"] == []
    assert [e for e in events(run) if e["event"] == "warning"] == []
    assert ledger(swarm) == ["next"]


@pytest.mark.parametrize("require", [False, True], ids=["warn", "require"])
def test_with_every_pane_of_the_swarm_closed_the_rest_runs_headless_with_one_warning(swarm, fz, require):
    """The board and the kept pane closed by hand (slot 2 beyond --max-visible-panes runs
    headless): no pane of ours is left to place one next to. No pane opens anywhere — not in
    the user's tab, not unplaced — and one warning says the rest runs headless; under require
    the task fails saying why."""
    run = _panes_closed_by_hand(swarm, fz, "bad · failed", "· board",
                                        args=("--max-visible-panes", "1", *(["--require-zellij"] if require else [])))
    rows = swarm.tasks()
    session = fz.session("0.45.0", "host")
    assert session["orphan_panes"] == []
    assert [t["name"] for t in session["tabs"]] == ["Tab #1"]
    assert [p["pane_id"] for p in session["tabs"][0]["panes"] if p["kind"] == "terminal"] == ["terminal_0"]
    warnings = [e["code"] for e in events(run) if e["event"] == "warning"]
    if require:
        assert (rows["next"]["status"], rows["next"]["reason"]) == ("failed", "zellij_tab_gone"), rows["next"]
        assert ledger(swarm) == []
    else:
        # said once; the board's renderer, closed with it, may be seen to die before the run ends
        assert warnings.count("tab_gone") == 1 and set(warnings) <= {"renderer_died", "tab_gone"}, warnings
        assert rows["next"]["status"] == "succeeded" and rows["next"]["pane_id"] is None, rows["next"]
        assert ledger(swarm) == ["next"]


DETACH_SWARM = f"""[swarm]
jobs = 1
[[task]]
name = "holder"
cmd = "touch holder.up; {GATE}"
[[task]]
name = "ok"
cmd = "echo ok >> ledger.txt"
[[task]]
name = "bad"
cmd = "echo bad >> ledger.txt; exit 3"
"""


@pytest.mark.parametrize("version", ["0.43.1", "0.42.0"])
def test_a_client_that_detaches_mid_run_before_044_is_said_once_and_the_rest_runs_headless(swarm, fz, version):
    """Before 0.44 a ``run`` in a session no client is attached to places no pane, yet its
    command runs (an unplaced pane; a failed worker's hold would sleep there for good). The
    client goes while the first task runs: the next backfill finds no client, says so once,
    and every later task runs headless — no pane outside any tab."""
    fz.host("host", version, client=True)
    swarm.write("sw.toml", DETACH_SWARM)
    proc = swarm.popen("run", "sw.toml", "--backend", "zellij", "--ui", "live", "--output", "quiet",
                       env=fz.env(version, inside="host", **FAST))
    try:
        wait_until(lambda: (swarm.cwd / "holder.up").exists(), what="holder running")
        fz.zellij("__fake-detach", "host", version=version)
        swarm.open_gate()
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 1, err
    finally:
        proc.kill()
    rows = swarm.tasks()
    assert rows["holder"]["pane_id"] and rows["ok"]["pane_id"] is None and rows["bad"]["pane_id"] is None, rows
    assert (rows["ok"]["status"], rows["bad"]["status"]) == ("succeeded", "failed")
    assert fz.session(version, "host")["orphan_panes"] == []
    assert [e["code"] for e in events(swarm.latest()) if e["event"] == "warning"] == ["client_detached"]
    assert ledger(swarm) == ["bad", "ok"]


@pytest.mark.parametrize("version", ["0.45.0", "0.43.1"])
def test_ctrl_c_with_the_sessions_server_stopped_waits_out_no_call(swarm, fz, version):
    """The session's server is stopped (SIGSTOP) while a worker runs in its pane, then the
    user presses Ctrl-C. No call to a stopped server can be answered, and it cannot end by
    itself: the run ends cancelled without waiting out a call's whole time (each one cost
    10 s, and each look at whether the session lives 6 s more), says that the server is
    stopped, and leaves the server as it was."""
    fz.host("host", version, client=True)
    swarm.write("sw.toml", DETACH_SWARM)
    proc = swarm.popen("run", "sw.toml", "--backend", "zellij", "--ui", "live", "--output", "quiet",
                       env=fz.env(version, inside="host", **FAST))
    servers = [p for p in fz.processes() if "--server" in command_line(p)]
    try:
        wait_until(lambda: (swarm.cwd / "holder.up").exists(), what="holder running")
        for server in servers:
            server.suspend()
        asked = time.time()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        assert all(server.status() == psutil.STATUS_STOPPED for server in servers)
    finally:
        for server in servers:
            server.resume()
        proc.kill()
        proc.communicate()
    evs = events(swarm.latest())
    finished = next(e for e in evs if e["event"] == "run_finished")
    assert finished["ts"] - asked < zellij_cli.CALL_TIMEOUT, evs
    said = [e["message"] for e in evs if e["event"] == "warning" and e["code"] == "pane_call_timeout"]
    assert all("is stopped" in m for m in said), said
    assert swarm.tasks()["holder"]["status"] == "cancelled"


def test_ctrl_c_while_the_session_gives_no_answer_at_the_start_starts_no_task(swarm, fz):
    """The session's server is stopped before the swarm starts in it, and the user presses
    Ctrl-C while the first batch's panes are asked for: once the call was given up on, the
    batch was started headless — each worker's first command ran — and only then cancelled.
    No task starts after a Ctrl-C: every one is cancelled, none ran."""
    fz.host("host", "0.45.0", client=True)
    swarm.write("t.txt", "".join(f"echo started {i} >> ledger.txt; sleep 5\n" for i in range(4)))
    servers = [p for p in fz.processes() if "--server" in command_line(p)]
    for server in servers:
        server.suspend()
    try:
        proc = swarm.popen("run", "t.txt", "-j", "2", "--backend", "zellij", "--ui", "live", "--output", "quiet",
                           env=fz.env("0.45.0", inside="host", **FAST))
        try:
            run = swarm.started()
            def calling() -> bool:
                return any("host" in command_line(p).split(" ")  # ("": a call that ended meanwhile)
                           for p in psutil.Process(proc.pid).children(recursive=True))

            wait_until(calling, what="its first call to the session")
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=60)
            assert proc.returncode == 130, err
        finally:
            proc.kill()
            proc.communicate()
    finally:
        for server in servers:
            server.resume()
    assert not (swarm.cwd / "ledger.txt").exists()
    assert {(t["status"], t["reason"]) for t in swarm.tasks().values()} == {("cancelled", "cancelled_by_user")}
    assert not [e for e in events(run) if e["event"] == "worker_process_spawned"]


@pytest.mark.parametrize("version", ["0.45.0", "0.44.3"])
def test_retry_of_a_run_whose_kept_session_nobody_watches_shows_its_panes(swarm, fz, version):
    """As against the real 0.45.0 (tests/test_real_zellij_faults.py): ``retry`` made its tab in
    the run's kept session with no client, where no pane of it is listed; the session, ours
    and unwatched, is made anew."""
    from zellij_swarm import names

    swarm.write("t.txt", "test -e flag || { touch flag; exit 3; }\n")
    res = swarm("run", "t.txt", "--backend", "zellij", "--ui", "live", "--output", "quiet", env=fz.env(version, **FAST))
    assert res.code == 1, res
    run = swarm.latest()
    assert names.session(run.name) in {s["name"] for s in fz.state(version)["sessions"]}
    res = swarm("retry", run.name, "--backend", "zellij", "--output", "quiet", env=fz.env(version, **FAST))
    assert res.code == 0, res
    row = swarm.tasks()["task-1"]
    assert (row["status"], row["attempts"]) == ("succeeded", 2) and row["pane_id"], row
    assert [e["code"] for e in events(run) if e["event"] == "warning"] == []


@pytest.mark.parametrize("version", ["0.45.0", "0.44.3"])
def test_retry_of_an_interrupted_run_keeps_the_session_its_workers_still_run_in(swarm, fz, version):
    """As against the real 0.45.0 (tests/test_real_zellij_faults.py): the supervisor killed
    while two workers run in the run's own session, which no client watches; ``retry``
    adopted them and made the session anew, killing them (``cancelled (pane_closed)``). A
    session where a worker of the run still runs is never made anew."""
    run, retried = retry_after_the_supervisor_is_killed(swarm, fz.env(version, **FAST))
    assert retried.returncode == 0, retried.stderr
    rows = swarm.tasks()
    assert {name: (t["status"], t["attempts"]) for name, t in rows.items()} == {
        "task-1": ("succeeded", 2), "task-2": ("succeeded", 1), "task-3": ("succeeded", 1)}, rows
    assert ledger(swarm) == ["task-2", "task-3"]
    assert [e["code"] for e in events(run) if e["event"] == "warning"] == ["client_detached"]


def test_a_session_of_someone_else_s_that_nobody_watches_is_not_waited_on(swarm, fz):
    """``--session NAME`` names a live session that no client is attached to, and that is not
    the run's own to make anew: a tab made there would hold no pane 0.45.0 lists. The run
    waited 10 s for panes it could not see, and ran its worker in one nobody could find. It
    runs headless at once and says why, once; the session is left as it was."""
    fz.host("theirs", "0.45.0")
    swarm.write("t.txt", "echo ran >> ledger.txt\n")
    res = swarm("run", "t.txt", "--backend", "zellij", "--ui", "live", "--session", "theirs", "--output", "quiet",
                env=fz.env("0.45.0", **FAST), timeout=60)
    assert res.code == 0, res
    run = swarm.latest()
    said = [e for e in events(run) if e["event"] == "warning"]
    assert [e["code"] for e in said] == ["client_detached"], said
    assert "no client is attached to session 'theirs'" in said[0]["message"]
    [row] = swarm.tasks().values()
    assert (row["status"], row["pane_id"]) == ("succeeded", None), row
    assert ledger(swarm) == ["ran"]
    assert [t["name"] for t in fz.session("0.45.0", "theirs")["tabs"]] == ["Tab #1"]


def test_a_compact_session_whose_panes_never_show_runs_headless_and_says_no_pane_is_there(swarm, fz):
    """The session comes up but its panes are never listed (it died as its layout came up,
    or the listing fails): the compact run goes on headless, with its warning — and never
    said first that its panes are in Zellij, to be seen with an `attach` that finds none."""
    env = fz.env("0.45.0", faults="fail:list-panes:1:boom", **FAST)
    swarm.write("sw.toml", SWARM)
    res = swarm("run", "sw.toml", "--backend", "zellij", "--ui", "compact", env=env, timeout=90)
    assert res.code == 0, res.stderr
    assert ledger(swarm) == sorted(f"t{i}" for i in range(TASKS))
    assert "running headless" in res.stderr and "panes in Zellij" not in res.stderr, res.stderr
