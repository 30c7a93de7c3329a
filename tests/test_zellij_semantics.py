"""Zellij semantics round 2 (issue 11): every fault the backend meets is recorded by name —
failed pane actions, a failing client probe, a stale ``ZELLIJ_SESSION_NAME`` — and the pane
lifecycle still settles. Against the fake zellij (scripts/fake-zellij) at the versions where
each applies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from swarmtest import full, kill_run_processes, wait_until
from zellijtest import FAST

SWARM = ('[swarm]\njobs = 2\n[[task]]\nname = "ok1"\ncmd = "echo ok1"\n[[task]]\nname = "bad"\ncmd = "exit 3"\n'
         '[[task]]\nname = "ok2"\ncmd = "sleep 0.3; echo ok2"\n[[task]]\nname = "ok3"\ncmd = "echo ok3"\n')


def warnings(run: Path) -> list[dict]:
    return [e for e in map(json.loads, (run / "events.jsonl").read_text().splitlines()) if e["event"] == "warning"]


def run_swarm(swarm, env, *args):
    swarm.write("sw.toml", SWARM)
    return swarm("run", "sw.toml", "--backend", "zellij", *args, env=env, timeout=90)


@pytest.mark.parametrize("version,action", [("0.45.0", "rename-pane"), ("0.44.3", "close-pane"),
                                            full("0.44.3", "rename-pane"), full("0.45.0", "close-pane")])
def test_a_failing_pane_action_is_a_warning_and_the_lifecycle_settles(swarm, fz, version, action):
    env = fz.env(version, faults=f"fail:{action}:1:boom", **FAST)
    res = run_swarm(swarm, env, "--ui", "live")
    assert res.code == 1, res.stderr  # "bad" exits 3; nothing else fails
    assert {n: r["status"] for n, r in swarm.tasks().items()} == {
        "ok1": "succeeded", "bad": "failed", "ok2": "succeeded", "ok3": "succeeded"}
    found = warnings(swarm.latest())
    assert found and {w["code"] for w in found} == {"pane_call_failed"}
    assert all(f"action {action}: boom" in w["message"] for w in found), found
    calls = [c for c in fz.calls() if c["subcommand"] == "close-pane"]
    # the lifecycle went on: every successful pane was still closed after its hold (the
    # rename failing did not skip that), and the close that failed was tried
    assert len(calls) >= 3, calls


@pytest.mark.parametrize("version,require", [("0.43.1", False), full("0.43.1", True), full("0.41.2", False),
                                             ("0.40.1", True)])
def test_a_failing_client_probe_is_named_not_taken_for_no_client(swarm, fz, version, require):
    fz.host("host", version, client=True)
    env = fz.env(version, inside="host", faults="fail:list-clients:1:probe failed", **FAST)
    res = run_swarm(swarm, env, "--ui", "live", *(["--require-zellij"] if require else []))
    if require:
        assert res.code == 1, res.stderr
        assert {r["reason"] for r in swarm.tasks().values()} == {"zellij_pane_call_failed"}
        assert "list-clients failed: probe failed" in res.stderr, res.stderr
    else:
        assert res.code == 1, res.stderr
        [w] = [w for w in warnings(swarm.latest()) if w["code"] != "renderer_died"]
        assert w["code"] == "pane_call_failed"
        assert "cannot tell whether a client is attached" in w["message"]
        assert "list-clients failed: probe failed" in w["message"]
        assert "without a client" not in w["message"]


@pytest.mark.parametrize("version", [full("0.40.1"), full("0.41.2"), "0.43.1", full("0.44.3"), "0.45.0"])
def test_a_stale_session_name_is_said_and_the_swarm_runs_outside(swarm, fz, version):
    env = fz.env(version, inside="gone-long-ago", **FAST)
    res = run_swarm(swarm, env, "--ui", "compact")
    assert res.code == 1, res.stderr
    run = swarm.latest()
    [w] = warnings(run)
    assert w["code"] == "session_missing" and "gone-long-ago" in w["message"], w
    sessions = fz.zellij("list-sessions", "--no-formatting", version=version, check=False).stdout
    assert "gone-long-ago" not in sessions  # never created under the stale name
    assert f"swarm-{run.name}" in sessions


@pytest.mark.parametrize("version,ui,named", [("0.45.0", "live", False), full("0.44.3", "compact", False),
                                              ("0.43.1", "compact", True), full("0.45.0", "live", True)])
def test_a_live_session_that_ls_leaves_out_is_neither_a_stale_name_nor_made_anew(swarm, fz, version, ui, named):
    """``ls`` lists a session live only when its server answers a probe, which a busy server
    can fail (contract §2.2): the real 0.45.0 left out the session a swarm was started from,
    and the swarm ran in a session of its own, under a warning that the user's was not
    running. Inside it (``named``: named with ``--session`` from outside) the swarm's tab is
    made in it all the same, and nothing is deleted or created."""
    fz.host("host", version, client=True)
    faults = "unprobed:host"
    env = fz.env(version, faults=faults, **FAST) if named else fz.env(version, inside="host", faults=faults, **FAST)
    before = len(fz.calls())
    res = run_swarm(swarm, env, "--ui", ui, *(["--session", "host"] if named else []))
    assert res.code == 1, res.stderr  # "bad" exits 3; nothing else fails
    assert [w["code"] for w in warnings(swarm.latest()) if w["code"] == "session_missing"] == []
    calls = fz.calls()[before:]  # the swarm's
    assert [c["argv"] for c in calls if c["subcommand"] in ("delete-session", "kill-session", "attach")] == []
    [made] = [c for c in calls if c["subcommand"] == "new-tab"]
    assert made["argv"][made["argv"].index("--session") + 1] == "host" and made["exit"] == 0, made
    assert {s["name"] for s in fz.state(version)["sessions"]} == {"host"}


def test_timeout_messages_name_the_action(swarm, fz):
    # long enough for the calls that answer (making the session) on a loaded machine
    env = fz.env("0.45.0", faults="hang:rename-pane", ZELLIJ_SWARM_ZELLIJ_CALL_TIMEOUT_MS="3000", **FAST)
    swarm.write("one.toml", '[[task]]\nname = "bad"\ncmd = "exit 3"\n')  # each retitle hangs its 3 s
    res = swarm("run", "one.toml", "--backend", "zellij", "--ui", "live", env=env, timeout=90)
    assert res.code == 1, res.stderr
    found = warnings(swarm.latest())
    assert found and {w["code"] for w in found} == {"pane_call_timeout"}
    assert all(w["message"].startswith("zellij action rename-pane: no answer within") for w in found), found


# ----- 1. backfill panes join the slot stack, never the board ----------------------------------

BACKFILL = ('[swarm]\njobs = 2\n'
            '[[task]]\nname = "first-bad"\ncmd = "exit 3"\n'
            '[[task]]\nname = "first-ok"\ncmd = "sleep 0.5"\n'
            '[[task]]\nname = "late-bad"\ncmd = "exit 4"\n'
            '[[task]]\nname = "late-ok"\ncmd = "sleep 0.2"\n'
            '[[task]]\nname = "last-bad"\ncmd = "exit 5"\n')


@pytest.mark.parametrize("version,where", [("0.45.0", "outside"), full("0.45.0", "inside"), full("0.44.3", "outside"),
                                           ("0.44.3", "inside"), ("0.43.1", "inside")])
def test_backfill_panes_keep_the_board_whole_and_the_focus_where_it_was(swarm, fz, version, where):
    inside = None
    if where == "inside":
        fz.host("host", version, client=True)
        inside = "host"
    swarm.write("b.toml", BACKFILL)
    res = swarm("run", "b.toml", "--backend", "zellij", "--ui", "live", env=fz.env(version, inside=inside, **FAST),
                timeout=90)
    assert res.code == 1, res.stderr
    run = swarm.latest()
    assert [w for w in warnings(run)] == []
    tab = fz.tab(version, run.name, inside or f"swarm-{run.name}")
    board = next(p for p in tab["panes"] if p["title"].endswith("· board"))
    kept = [p for p in tab["panes"] if "-bad ·" in p["title"]]  # failed panes are kept
    assert len(kept) == 3, tab["panes"]
    assert not board["stacked"]  # the layout "board left, slots right" holds after backfill
    if version >= "0.44":
        assert all(p["stacked"] for p in kept)  # the backfill panes joined the slot stack
        assert board["focused"]  # nothing took the focus from the pane the layout gave it
    runs = [c for c in fz.calls() if c["subcommand"] == "run"]
    assert runs and all("--tab-id" not in c["argv"] for c in runs)
    if version < "0.44":  # no focus-free way to name a pane: placed plainly, never stacked on the board
        assert all("--stacked" not in c["argv"] for c in runs)


# ----- 2. every switch to headless is said, once -----------------------------------------------

SLOW = ('[swarm]\njobs = 2\n' + "".join(f'[[task]]\nname = "t{i}"\ncmd = "sleep 0.3; echo t{i} >> ledger"\n'
                                        for i in range(6)))


@pytest.mark.parametrize("version,require", [full("0.45.0", False), ("0.45.0", True), full("0.44.3", False)])
def test_first_panes_too_slow_is_said_once_and_they_still_settle(swarm, fz, version, require):
    """The session's panes show only after the backend stopped waiting for them: the first
    batch still runs in its panes (their heartbeats arrive in time) and settles; the rest of
    the swarm goes headless with one warning — or, under require, fails by name."""
    env = fz.env(version, faults="init_delay_ms=4000", ZELLIJ_SWARM_ZELLIJ_READY_TIMEOUT_MS="1500",
                 ZELLIJ_SWARM_HEARTBEAT_TIMEOUT_MS="12000", ZELLIJ_SWARM_PANE_HOLD_MS="200")
    swarm.write("s.toml", SLOW)
    res = swarm("run", "s.toml", "--backend", "zellij", "--ui", "live",
                *(["--require-zellij"] if require else []), env=env, timeout=90)
    rows = swarm.tasks()
    in_panes = {n for n, r in rows.items() if r["pane_id"]}
    assert len(in_panes) == 2, rows  # the first batch ran in its (late) panes
    found = warnings(swarm.latest())
    if require:
        assert res.code == 1, res.stderr
        assert found == []
        assert {rows[n]["reason"] for n in rows if n not in in_panes} == {"zellij_pane_call_timeout"}
    else:
        assert res.code == 0, res.stderr
        assert [w["code"] for w in found] == ["pane_call_timeout"], found
        assert "rest of the swarm runs headless" in found[0]["message"]
        assert sorted((swarm.cwd / "ledger").read_text().split()) == [f"t{i}" for i in range(6)]
    # the late panes were retitled when their workers ended: none is left saying "running"
    renames = [c for c in fz.calls() if c["subcommand"] == "rename-pane"]
    assert {c["argv"][-1].split(" · ")[1] for c in renames} >= in_panes, renames


# ----- 7. under require, live mode fails at start as compact does ------------------------------


_ATTACH, _NEW_TAB = "fail:attach:1:cannot create", "fail:new-tab:1:no tab for you"


@pytest.mark.parametrize("ui,version,where,fault", [
    ("live", "0.45.0", "outside", _ATTACH), ("live", "0.45.0", "inside", _NEW_TAB),
    ("live", "0.43.1", "inside", _NEW_TAB), ("compact", "0.44.3", "outside", _ATTACH),
    full("compact", "0.45.0", "outside", _ATTACH), full("compact", "0.45.0", "inside", _NEW_TAB),
    full("live", "0.44.3", "outside", _ATTACH), full("compact", "0.43.1", "inside", _NEW_TAB)])
def test_required_backend_that_cannot_start_fails_the_run_before_any_task(swarm, fz, ui, version, where, fault):
    inside = None
    if where == "inside":
        fz.host("host", version, client=True)
        inside = "host"
    env = fz.env(version, inside=inside, faults=fault, **FAST)
    swarm.write("s.toml", SLOW)
    res = swarm("run", "s.toml", "--backend", "zellij", "--ui", ui, "--require-zellij", env=env, timeout=90)
    assert res.code == 1, res.stderr
    rows = swarm.tasks()
    assert {(r["status"], r["reason"], r["attempts"]) for r in rows.values()} == {
        ("cancelled", "zellij_pane_call_failed", 0)}, rows
    assert not (swarm.cwd / "ledger").exists()  # nothing ran
    assert fault.split(":")[3] in res.stderr  # the user is told why


# ----- 5. when the session dies, nothing the run started remains -------------------------------

LONG = ('[swarm]\njobs = 3\n' + "".join(f'[[task]]\nname = "t{i}"\ncmd = "{cmd}"\n' for i, cmd in enumerate(
    ["exit 3", "sleep 4", "sleep 4", "sleep 4", "exit 4"])))


def _run_leftovers(run: Path) -> list[str]:
    """Processes carrying the run's id, or started from one of its generation directories."""
    import psutil

    marker = f"ZELLIJ_SWARM_RUN_ID={run.name}".encode()
    out = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            if p.status() == psutil.STATUS_ZOMBIE:
                continue
            with open(f"/proc/{p.pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
            if marker in env or any(str(run) in a for a in p.info["cmdline"] or []):
                out.append(f"{p.pid} {' '.join(p.info['cmdline'] or [])}")
        except (psutil.Error, OSError):
            continue
    return out


@pytest.mark.parametrize("version,how", [("0.40.1", "crash"), full("0.41.2", "kill-session"), full("0.43.1", "crash"),
                                         ("0.44.3", "kill-session"), full("0.45.0", "crash")])
def test_nothing_is_left_running_when_the_session_dies(swarm, fz, version, how):
    from swarmtest import kill_run_processes, wait_until

    fz.host("host", version, client=True)
    env = fz.env(version, inside="host", ZELLIJ_SWARM_PANE_HOLD_MS="100", ZELLIJ_SWARM_HEARTBEAT_TIMEOUT_MS="10000")
    swarm.write("l.toml", LONG)
    proc = swarm.popen("run", "l.toml", "--backend", "zellij", "--ui", "live", "--output", "quiet", env=env)
    run = swarm.started()
    try:
        # the failed first task's pane is held (before 0.44 by a sleep in it), the others run
        wait_until(lambda: len(list(run.glob("slots/slot-*/gen-*/heartbeat.jsonl"))) >= 4, timeout=30,
                   what="panes started")
        if how == "crash":
            fz.zellij("__fake-crash", "host", version=version)
        else:
            fz.zellij("kill-session", "host", version=version)
        proc.wait(timeout=90)
        wait_until(lambda: not _run_leftovers(run), timeout=15, what=f"no leftovers: {_run_leftovers(run)}")
    finally:
        proc.kill()
        kill_run_processes(run.name)


def _zellij(fz, env: dict[str, str]):
    from zellij_swarm.backends.zellij_cli import Zellij

    z = Zellij(env, timeout=5)
    z.version()
    z.session = "host"
    return z


def test_an_empty_answer_is_no_answer_not_no_panes_nor_no_client(fz):
    """The real 0.45.0, busy, now and then closes an action at once with nothing printed and
    exit 0: ``list-panes`` so answered is not "no pane" (every anchor would be forgotten), nor
    is ``list-clients`` "no client" (before 0.44 the rest would go headless)."""
    fz.host("host", "0.45.0")
    z = _zellij(fz, fz.env("0.45.0", faults="fail:list-panes:0:,fail:list-clients:0:"))
    assert z.list_panes() is None
    assert z.clients(z.call("action", "list-clients", check=False)) is None
    z = _zellij(fz, fz.env("0.45.0"))
    assert z.list_panes() and z.clients(z.call("action", "list-clients", check=False)) == 0
    fz.zellij("__fake-attach", "host", version="0.45.0")
    assert z.clients(z.call("action", "list-clients", check=False)) == 1


def test_no_active_session_from_a_session_listed_live_is_asked_again(fz, tmp_path):
    """The real 0.45.0 answered a ``run`` in the middle of a swarm with "There is no active
    session!" (exit 1), its session listed live before and after: the CLI's probe of the
    sockets failed, nothing was sent. The call is made again; a session that is not listed
    live is missing at once."""
    fz.host("host", "0.45.0")
    shim = tmp_path / "bin"
    shim.mkdir()
    count = tmp_path / "refused"
    fake = str(fz.base["PATH"]).split(":")[0]
    (shim / "zellij").write_text(  # refuses the first two actions, as the busy real one did
        f"#!/bin/sh\ncase \"$*\" in *query-tab-names*) n=$(cat {count} 2>/dev/null || echo 0)\n"
        f"  if [ \"$n\" -lt 2 ]; then echo $((n + 1)) > {count}; echo 'There is no active session!' >&2; exit 1; fi;;\n"
        f"esac\nexec {fake}/zellij \"$@\"\n")
    (shim / "zellij").chmod(0o755)
    env = fz.env("0.45.0")
    env["PATH"] = f"{shim}:{env['PATH']}"
    z = _zellij(fz, env)
    assert z.call("action", "query-tab-names").stdout.strip() == "Tab #1"
    assert count.read_text().strip() == "2"
    z.session = "gone"
    from zellij_swarm.exc import BackendError

    with pytest.raises(BackendError) as e:
        z.call("action", "query-tab-names")
    assert e.value.code == "session_missing"


AGENTS = "".join(f"[[task]]\nname = \"agent-{i}\"\ncmd = 'read answer; echo \"got $answer\"'\n" for i in (1, 2))


@pytest.mark.parametrize("version", ["0.45.0", "0.43.1"])
def test_waiting_agents_mark_the_swarms_tab_by_its_id_from_044(swarm, fz, version):
    """Two agents wait for input: from 0.44 the swarm's tab, found by the id it was given
    when made, is renamed ``swarm:<run> (2 waiting)``, then ``(1 waiting)`` once one is
    answered (``rename-tab-by-id``); before 0.44 no call names a tab, and none is renamed."""
    from zellij_swarm import names

    fz.host("host", version, client=True)
    swarm.write("a.toml", AGENTS)
    proc = swarm.popen("run", "a.toml", "-j", "2", "--backend", "zellij", "--ui", "live", "--output", "quiet",
                       env=fz.env(version, inside="host", **FAST))
    try:
        run = swarm.started().name

        def tabs() -> list[str]:
            return [t["name"] for t in fz.session(version, "host")["tabs"]]

        def agent_pane(i: int) -> str:
            return next(p["pane_id"] for t in fz.session(version, "host")["tabs"] for p in t["panes"]
                        if f"· agent-{i} ·" in p["title"])

        if version >= "0.44":
            wait_until(lambda: names.tab(run, 2) in tabs(), timeout=20, what="the tab marked 2 waiting")
            # attach, from the user's own tab, finds the marked tab by its id
            fz.zellij("--session", "host", "action", "go-to-tab", "1", version=version)
            said = swarm("attach", run, env=fz.env(version, inside="host"))
            assert said.code == 0, said.stderr
            session = fz.session(version, "host")
            ours = next(t["id"] for t in session["tabs"] if t["name"] == names.tab(run, 2))
            assert [c["tab_id"] for c in session["clients"]] == [ours]
            fz.zellij("--session", "host", "action", "write-chars", "--pane-id", agent_pane(1), "yes\n",
                      version=version)
            wait_until(lambda: names.tab(run, 1) in tabs(), timeout=20, what="the mark down to 1")
            fz.zellij("--session", "host", "action", "write-chars", "--pane-id", agent_pane(2), "yes\n",
                      version=version)
        else:
            def waiting() -> int:
                log = swarm.runs()[0] / "events.jsonl"
                lines = log.read_text().splitlines() if log.exists() else []
                return len([e for e in map(json.loads, lines) if e["event"] == "worker_waiting_input" and e["waiting"]])

            wait_until(lambda: waiting() == 2, timeout=20, what="both agents waiting")
            assert tabs() == ["Tab #1", names.tab(run)]
            assert not [c for c in fz.calls() if c["subcommand"] in ("rename-tab", "rename-tab-by-id")]
            return
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        renames = [c["argv"][4:] for c in fz.calls() if c["subcommand"] in ("rename-tab", "rename-tab-by-id")]
        assert [r[1] for r in renames] == [names.tab(run, 1), names.tab(run, 2), names.tab(run, 1), names.tab(run)]
        assert not [c for c in fz.calls() if c["subcommand"] == "rename-tab"]  # never the focused tab
    finally:
        proc.kill()
        proc.communicate()
        if swarm.runs():
            kill_run_processes(swarm.runs()[0].name)


@pytest.mark.parametrize("version", ["0.45.0", full("0.43.1")])
def test_a_stale_session_name_hides_no_socket_path_too_long_for_the_runs_own_session(swarm, fz, version):
    """A stale ZELLIJ_SESSION_NAME (a shell that outlived its session) sends the swarm to a
    session of its own. The check of the socket path before the run took the stale name for
    the session the run would use and passed a socket directory too long for the run's own:
    the run went on, and headless. It is refused as from outside: one line, exit 2, no run."""
    long_dir = Path(fz.sockdir) / ("d" * 70)
    long_dir.mkdir()
    env = fz.env(version, inside="gone-long-ago", ZELLIJ_SOCKET_DIR=str(long_dir), **FAST)
    res = run_swarm(swarm, env)
    assert res.code == 2 and res.stderr.count("\n") == 1 and "set a shorter ZELLIJ_SOCKET_DIR" in res.stderr, res
    assert not swarm.runs()
