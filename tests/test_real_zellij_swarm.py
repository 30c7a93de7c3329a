"""A mixed swarm and the run commands against the real Zellij (CI's version), asserting on what
Zellij reports (``list-panes --json``, ``dump-layout``, ``list-sessions``, ``list-clients``) and
on the structure of the screen of a client in a private tmux at 80×24 and 200×50: the board with
its rows, slot titles in order, failed panes kept, nothing left at the end. The screens of the
mixed run are kept in ``tests/screens/real-zellij-<size>/`` (``ZSW_UPDATE_SCREENS=1`` writes
them), run ids and times normalised."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest
from realzellij import RealZellij, keep_screen, normalised_screen
from swarmtest import GATE, assert_whole_outputs, kill_run_processes, printing_swarm, run_processes, wait_until
from zellijtest import FAST

MIXED = f"""[swarm]
name = "mixed"
jobs = 2
[[task]]
name = "reader"
cmd = "read line; echo \\"got $line\\""
[[task]]
name = "gate"
cmd = "{GATE}"
[[task]]
name = "bad"
cmd = "echo 'FAIL bad'; exit 3"
[[task]]
name = "sig"
cmd = "kill -TERM $$"
[[task]]
name = "flaky"
cmd = "if [ -e flaky.once ]; then echo again; else touch flaky.once; exit 3; fi"
retries = 1
[[task]]
name = "slow"
cmd = "sleep 30"
timeout = "1s"
[[task]]
name = "ok"
cmd = "echo fine"
"""
OUTCOMES = {"reader": "succeeded", "gate": "succeeded", "bad": "failed", "sig": "failed", "flaky": "succeeded",
            "slow": "timed_out", "ok": "succeeded"}
SLOW_KEPT = "slot 1 · slow · timed out (exit 143)"  # the newest failure: the one pane --keep-failed-panes 1 keeps


def tab_panes(rz: RealZellij, session: str, tab: str) -> list[dict]:
    """The terminal panes Zellij lists in ``tab``, in the order it lists them."""
    return [p for p in rz.panes(session) if not p["is_plugin"] and p["tab_name"] == tab]


def workers(panes: list[dict]) -> list[str]:
    return [p["title"] for p in panes if p["title"].startswith("slot ")]


@pytest.mark.parametrize("size", ["80x24", "200x50"])
def test_a_mixed_swarm_in_the_real_zellij(swarm, rz: RealZellij, tmux, size):
    """Exit 0 and 3, a worker that signals itself, one reading its terminal (typed into with
    ``write-chars``), a timeout, a retry, backfill, ``--keep-failed-panes 1`` and
    ``--max-visible-panes 3``, inside a session a client in tmux is attached to."""
    cols, rows = (int(n) for n in size.split("x"))
    rz.host("host", tmux, size=size)
    swarm.write("sw.toml", MIXED)
    proc = swarm.popen("run", "sw.toml", "--backend", "zellij", "--ui", "live", "--output", "quiet",
                       "--keep-failed-panes", "1", "--max-visible-panes", "3", env=rz.env(inside="host", **FAST))
    if not wait_until(lambda: swarm.runs() or proc.poll() is not None, what="the run") or not swarm.runs():
        raise AssertionError(f"the run ended before it began: {proc.communicate()}")
    run = swarm.runs()[0]
    tab = f"swarm:{run.name}"
    most = 0

    def panes() -> list[dict]:
        nonlocal most
        listed = tab_panes(rz, "host", tab)
        most = max(most, len(workers(listed)))
        return listed

    def screen_with(*texts: str) -> str | None:
        s = tmux("capture-pane", "-p", "-t", "host")
        return s if all(t in s for t in texts) else None

    try:
        reader = wait_until(lambda: [p for p in panes() if p["title"] == "slot 1 · reader · running"],
                            what="the reader's pane", interval=0.2)[0]
        # the swarm's tab opens beside the user's, whose focus stays where it was: look at it
        wait_until(lambda: rz.zellij("--session", "host", "action", "go-to-tab-name", tab, check=False).returncode == 0
                   and screen_with("slot 1 · reader"), what="the swarm's tab")
        rz.act("host", "write-chars", "--pane-id", f"terminal_{reader['id']}", "hello\n")
        # slot 1 runs the rest while the gate holds slot 2: every one but the gate has ended
        # (by the run's records, and the panes settled: a success's title lasts only its hold)
        def settled() -> list[dict] | None:
            ended = statuses(run)
            ps = panes()
            done = ended and all(st not in ("running", "pending") for n, st in ended.items() if n != "gate")
            return ps if done and SLOW_KEPT in workers(ps) and not any("flaky" in t for t in workers(ps)) else None

        mid_panes = wait_until(settled, what="slot 1's tasks done", timeout=60, interval=0.2)
        mid = wait_until(lambda: screen_with("mixed · running", "slot 2 · gate · running"), what="the mid-run screen")
        titles = workers(mid_panes)
        assert "slot 2 · gate · running" in titles, titles
        assert [t for t in titles if "failed" in t or "timed out" in t] == [SLOW_KEPT], titles
        assert not [t for t in titles if "flaky" in t], titles  # its success closed the failed attempt's pane
        assert sum(p["title"].endswith("· board") for p in mid_panes) == 1
        layout = rz.act("host", "dump-layout", answer="layout {")
        assert f'tab name="{tab}"' in layout and "stacked=true" in layout, layout
        assert rz.clients("host") == 1
        lines = mid.splitlines()
        assert len(lines) <= rows and all(len(ln) <= cols for ln in lines), mid
        keep_screen(size, "mixed-mid.txt", normalised_screen(mid, run.name))
        swarm.open_gate()
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 1, err
        rows_ = swarm.tasks()
        assert {n: r["status"] for n, r in rows_.items()} == OUTCOMES
        assert rows_["flaky"]["attempts"] == 2 and rows_["bad"]["exit_code"] == 3
        assert (run / "slots").exists() and "got hello" in "".join(
            p.read_text() for p in run.glob("slots/slot-1/gen-*/output.log"))
        end_panes = wait_until(lambda: (ps := panes()) and len(workers(ps)) == 1 and ps, what="the panes at the end",
                               interval=0.2)
        assert workers(end_panes) == [SLOW_KEPT]
        assert most <= 3, most  # running, held and kept panes never above --max-visible-panes
        end = wait_until(lambda: screen_with("mixed · finished"), what="the board's end")
        assert "slot 1 · slow" in end and "slot 2 · gate" not in end, end
        keep_screen(size, "mixed-end.txt", normalised_screen(end, run.name))
        assert "host" in rz.session_names()
    except AssertionError:
        print(tmux("capture-pane", "-p", "-t", "host"))
        proc.kill()
        print(proc.communicate())
        print(*[e for e in events(run) if e.get("task") == "slow" or e.get("slot") == 1], sep="\n")
        raise
    finally:
        proc.kill()
        kill_run_processes(run.name)
    assert run_processes(run.name) == []


CONTROLS = f"""[swarm]
name = "controls"
jobs = 2
[[task]]
name = "a"
cmd = "{GATE}"
[[task]]
name = "b"
cmd = "{GATE}"
[[task]]
name = "c"
cmd = "echo c"
[[task]]
name = "d"
cmd = "echo d"
"""


def statuses(run: Path) -> dict[str, str]:
    """task -> status, from the run's live snapshot ({} before its first one is written)."""
    from zellij_swarm.records import snapshot_file

    try:
        return {t["name"]: t["status"] for t in snapshot_file.load(run / "state.json")["tasks"]}
    except FileNotFoundError:
        return {}


def events(run: Path) -> list[dict]:
    return [json.loads(ln) for ln in (run / "events.jsonl").read_text().splitlines()]


def _started(swarm, env: dict[str, str]) -> tuple[subprocess.Popen, Path]:
    """The CONTROLS swarm started outside Zellij, a and b running. Nothing is asked of the
    session while it starts (an action then can leave it silent for seconds, tests/realzellij.py):
    its workers' heartbeats say it is up. (A session whose server panicked as it was born —
    0.45.0's lib.rs:1454, now and then — the swarm makes again itself.)"""
    before = set(swarm.runs())
    proc = swarm.popen("run", "sw.toml", "--backend", "zellij", "--ui", "live", "--output", "quiet", env=env)
    started = wait_until(lambda: set(swarm.runs()) - before or proc.poll() is not None, what="the run")
    if started is True or not set(swarm.runs()) - before:
        raise AssertionError(f"the run ended before it began: {proc.communicate()}")
    [run] = set(swarm.runs()) - before
    wait_until(lambda: (run / "events.jsonl").exists() and {e["task"] for e in events(run)
                                                          if e["event"] == "worker_heartbeat_seen"} >= {"a", "b"},
               what="a and b running in their panes")
    assert not [e for e in events(run) if e["event"] == "warning"], events(run)
    return proc, run


def test_attach_pause_restart_cancel_prune_and_close_session_in_the_real_zellij(swarm, rz: RealZellij, tmux):
    """A swarm outside Zellij (it makes session swarm-<run>): ``attach`` from a terminal of
    80×24 makes it a client of that session, showing the board and the slots; ``pause`` holds
    the waiting tasks; ``restart`` gives a task a new pane (the old one closes); ``cancel`` ends
    the run; the session stays for the user, until ``prune`` removes it. A run with
    ``--close-session`` leaves no session."""
    env = rz.env(**FAST)
    swarm.write("sw.toml", CONTROLS)
    proc, run = _started(swarm, env)
    session = f"swarm-{run.name}"
    try:
        first = wait_until(lambda: (ps := {p["title"]: p["id"] for p in rz.panes(session) if not p["is_plugin"]})
                           and {"slot 1 · a · running", "slot 2 · b · running"} <= set(ps) and ps,
                           what="the first panes", interval=0.2)
        # attach: this terminal becomes a client of the run's session
        shell_env = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        # An attach that ended leaves its last words and status on the screen, which a
        # failure prints (it once timed out here, under load, with nothing left to show why).
        attach = f"env -i {shell_env} {shlex.join(swarm.cmd('attach', run.name))}"
        tmux("new-session", "-d", "-s", "att", "-x", "80", "-y", "24", "-c", str(swarm.cwd),
             f"{attach}; echo \"[attach exited: $?]\"; exec sleep 600")
        wait_until(lambda: rz.clients(session) == 1, what="attach's client", interval=0.2)
        screen = wait_until(lambda: (s := tmux("capture-pane", "-p", "-t", "att")) and "controls · running" in s
                            and "slot 1 · a" in s and s, what="the attached screen")
        assert "slot 2 · b" in screen, screen
        assert swarm("pause", run.name, env=env).code == 0
        wait_until(lambda: any(e["event"] == "paused" for e in events(run)), what="paused")
        assert swarm("restart", run.name, "a", env=env).code == 0

        def a_again() -> list[int]:
            assert statuses(run).get("a") != "failed", "the restart's kill is the task's end, not its failure"
            return [i for t, i in {p["title"]: p["id"] for p in rz.panes(session) if not p["is_plugin"]}.items()
                    if t.startswith("slot 1 · a") and i != first["slot 1 · a · running"]]

        again = wait_until(a_again, what="a's new pane", interval=0.2)
        assert first["slot 1 · a · running"] not in [p["id"] for p in rz.panes(session)], again  # the old one closed
        swarm.open_gate()
        wait_until(lambda: {statuses(run).get(n) for n in ("a", "b")} == {"succeeded"}, what="a and b done")
        assert {statuses(run)[n] for n in ("c", "d")} == {"pending"}  # paused: not handed out
        assert swarm("cancel", run.name, env=env).code == 0
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        assert {statuses(run)[n] for n in ("c", "d")} == {"cancelled"}
        assert session in rz.session_names()  # kept for the user to look at
        assert rz.act(session, "query-tab-names", answer=f"swarm:{run.name}")
        res = swarm("prune", env=env)
        assert res.code == 0, res.stderr
        wait_until(lambda: session not in rz.session_names(), what="prune removed the session")
        # --close-session: nothing of the run is left in Zellij at its end
        swarm.write("one.toml", '[[task]]\nname = "one"\ncmd = "echo one"\n')
        res = swarm("run", "one.toml", "--backend", "zellij", "--ui", "live", "--close-session", env=env)
        assert res.code == 0, res.stderr
        assert f"swarm-{swarm.latest().name}" not in rz.session_names()
    except AssertionError:
        print(tmux("capture-pane", "-p", "-t", "att", check=False))
        raise
    finally:
        proc.kill()
        proc.communicate()
        kill_run_processes(run.name)


def test_waiting_agents_mark_the_swarms_tab_in_the_real_zellij(swarm, rz: RealZellij, tmux):
    """Two agents wait for input inside a session a client is attached to: the swarm's tab is
    renamed ``swarm:<run> (2 waiting)`` by its id, ``(1 waiting)`` once one is answered — what
    the user sees in the tab bar, whichever tab they are on."""
    from zellij_swarm import names

    rz.host("host", tmux, size="200x50")
    swarm.write("a.toml", "".join(f"[[task]]\nname = \"agent-{i}\"\ncmd = 'read answer; echo \"got $answer\"'\n"
                                  for i in (1, 2)))
    proc = swarm.popen("run", "a.toml", "-j", "2", "--backend", "zellij", "--ui", "live", "--output", "quiet",
                       env=rz.env(inside="host", **FAST))
    if not wait_until(lambda: swarm.runs() or proc.poll() is not None, what="the run") or not swarm.runs():
        raise AssertionError(f"the run ended before it began: {proc.communicate()}")
    run = swarm.runs()[0]
    try:
        def tabs() -> list[str]:
            return rz.act("host", "query-tab-names", answer="Tab #1").splitlines()

        wait_until(lambda: names.tab(run.name, 2) in tabs(), timeout=30, interval=0.2, what="the tab marked")
        # the user's own tab shows the tab bar (the swarm's tab is the run's layout, bars left out)
        rz.act("host", "go-to-tab", "1")
        wait_until(lambda: f"{run.name} (2 waiting)" in tmux("capture-pane", "-p", "-t", "host").splitlines()[0],
                   what="the mark in the tab bar")
        agent_1 = next(p["id"] for p in rz.panes("host") if "· agent-1 ·" in p["title"])
        rz.act("host", "write-chars", "--pane-id", f"terminal_{agent_1}", "yes\n")
        wait_until(lambda: names.tab(run.name, 1) in tabs(), timeout=30, interval=0.2, what="the mark down to 1")
        agent_2 = next(p["id"] for p in rz.panes("host") if "· agent-2 ·" in p["title"])
        rz.act("host", "write-chars", "--pane-id", f"terminal_{agent_2}", "yes\n")
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    finally:
        proc.kill()
        proc.communicate()
        kill_run_processes(run.name)


def test_a_live_panes_whole_output_is_copied_and_counted_as_its_task_ends_in_the_real_zellij(swarm, rz: RealZellij):
    """The tmux case's neighbour (test_tmux): in Zellij the pane's relay writes the log before
    the worker's end is recorded, so every last line is in the copy to stdout and in the
    joblog's count."""
    printing_swarm(swarm, 6)
    res = swarm("run", "s.toml", "--backend", "zellij", "--ui", "live", "--require-multiplexer", "--close-session",
                "--output", "tag", "--joblog", "jobs.tsv", env=rz.env(**FAST))
    run = swarm.latest()
    kill_run_processes(run.name)
    assert res.code == 0, res.stderr
    assert_whole_outputs(swarm, run, res.stdout, 6)
