"""Faults a real Zellij can show, while a live swarm runs inside a session a client in tmux is
attached to: panes of the swarm closed by hand (a kept failed pane; the board too), and the
client detaching — on CI's version and before 0.44. What Zellij lists decides: a pane the
swarm opens shows in the swarm's tab (``list-panes --json``), or, when it cannot be placed
there, the rest runs headless with one warning and no pane opens anywhere else."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest
from fakeprocs import command_line
from realzellij import RealZellij
from swarmtest import GATE, full, kill_run_processes, wait_until
from zellijtest import FAST, retry_after_the_supervisor_is_killed

from zellij_swarm.backends import zellij_cli

GATE2 = "until [ -e gate2 ]; do sleep 0.02; done"
# bad fails in slot 1 (its pane kept), holder waits in slot 2, next (after holder) goes to slot 1
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
cmd = "{GATE2}; echo next >> ledger.txt"
after = ["holder"]
"""
DETACH_SWARM = f"""[swarm]
jobs = 1
[[task]]
name = "holder"
cmd = "touch holder.up; {GATE}"
[[task]]
name = "next"
cmd = "{GATE2}; echo next >> ledger.txt"
"""


def warnings(run: Path) -> list[str]:
    return [e["code"] for e in map(json.loads, (run / "events.jsonl").read_text().splitlines())
            if e["event"] == "warning"]


def listed(rz: RealZellij, tab: str) -> dict[str, str]:
    """pane id -> title of the terminal panes Zellij lists in ``tab``."""
    return {f"terminal_{p['id']}": p["title"] for p in rz.panes("host") if not p["is_plugin"] and p["tab_name"] == tab}


class LiveSwarm:
    """A live swarm inside session ``host`` (a client in tmux attached to it), in the background."""

    def __init__(self, swarm, rz: RealZellij, text: str, *args: str) -> None:
        swarm.write("sw.toml", text)
        self.swarm = swarm
        self.proc = swarm.popen("run", "sw.toml", "--backend", "zellij", "--ui", "live", "--output", "quiet", *args,
                                env=rz.env(inside="host", **FAST))
        if not wait_until(lambda: swarm.runs() or self.proc.poll() is not None, what="the run") or not swarm.runs():
            raise AssertionError(f"the run ended before it began: {self.proc.communicate()}")
        self.run = swarm.runs()[0]
        self.tab = f"swarm:{self.run.name}"

    def wait_holder(self) -> None:
        wait_until(lambda: (self.swarm.cwd / "holder.up").exists(), what="holder running")

    def finish(self, code: int) -> dict[str, dict]:
        (self.swarm.cwd / "gate2").touch()
        _, err = self.proc.communicate(timeout=60)
        assert self.proc.returncode == code, err
        return self.swarm.tasks()

    def end(self) -> None:
        for gate in ("gate", "gate2"):
            (self.swarm.cwd / gate).touch()
        self.proc.kill()
        self.proc.communicate()
        kill_run_processes(self.run.name)


def test_a_backfill_never_goes_next_to_a_kept_pane_the_user_closed(swarm, rz: RealZellij, tmux):
    """What 0.45.0 does with a ``--near-current-pane`` anchor that is gone: it prints the new
    pane's id and runs its command, but no tab lists the pane and ``close-pane`` cannot reach
    it (tests/zellij-transcripts/0.45.0/run-near-gone-pane.json). The backfill whose anchor
    would be bad's kept pane, closed by hand, goes next to a pane of ours that is there."""
    rz.host("host", tmux)
    s = LiveSwarm(swarm, rz, ANCHOR_SWARM)
    try:
        s.wait_holder()
        kept = wait_until(lambda: [p for p, t in listed(rz, s.tab).items() if "bad · failed" in t], what="bad's pane")
        rz.act("host", "close-pane", "--pane-id", kept[0])
        swarm.open_gate()
        wait_until(lambda: any(t.startswith("slot 1 · next · running") for t in listed(rz, s.tab).values()),
                   what="next's pane in the swarm's tab", interval=0.2)
        rows = s.finish(1)
        assert rows["next"]["status"] == "succeeded" and rows["next"]["pane_id"], rows["next"]
        assert warnings(s.run) == []
    finally:
        s.end()


@pytest.mark.parametrize("require", [False, True], ids=["warn", "require"])
def test_with_every_pane_of_the_swarm_closed_the_rest_runs_headless(swarm, rz: RealZellij, tmux, require):
    """The board and the kept pane closed by hand (Zellij closes the swarm's tab with its last
    pane), slot 2 beyond ``--max-visible-panes``: no pane opens anywhere — the user's tab keeps
    its one pane, no other tab appears — and one warning says the rest runs headless (under
    require, the task fails saying why)."""
    rz.host("host", tmux)
    s = LiveSwarm(swarm, rz, ANCHOR_SWARM, "--max-visible-panes", "1", *(["--require-zellij"] if require else []))
    try:
        s.wait_holder()
        ours = wait_until(lambda: (ps := listed(rz, s.tab)) and any("bad · failed" in t for t in ps.values()) and ps,
                          what="bad's pane kept")
        for pane in ours:
            rz.act("host", "close-pane", "--pane-id", pane)
        wait_until(lambda: rz.act("host", "query-tab-names", answer="Tab #1").split("\n")[:-1] == ["Tab #1"],
                   what="the swarm's tab gone")
        swarm.open_gate()
        rows = s.finish(1)
        assert [p["tab_name"] for p in rz.panes("host") if not p["is_plugin"]] == ["Tab #1"]
        if require:
            assert (rows["next"]["status"], rows["next"]["reason"]) == ("failed", "zellij_tab_gone"), rows["next"]
        else:
            assert rows["next"]["status"] == "succeeded" and rows["next"]["pane_id"] is None, rows["next"]
            found = warnings(s.run)
            assert found.count("tab_gone") == 1 and set(found) <= {"renderer_died", "tab_gone"}, found
    finally:
        s.end()


def test_a_client_that_detaches_mid_run_changes_nothing_from_044(swarm, rz: RealZellij, tmux):
    """0.45.0 places a pane in a session no client is attached to: after the client goes,
    the backfill still opens in the swarm's tab, next to a pane of ours, and nothing is said."""
    rz.host("host", tmux)
    s = LiveSwarm(swarm, rz, DETACH_SWARM)
    try:
        s.wait_holder()
        tmux("kill-session", "-t", "host")  # the client goes; the session stays
        wait_until(lambda: rz.clients("host") == 0, what="the client gone")
        swarm.open_gate()
        wait_until(lambda: any(t.startswith("slot 1 · next · running") for t in listed(rz, s.tab).values()),
                   what="next's pane in the swarm's tab", interval=0.2)
        rows = s.finish(0)
        assert rows["next"]["pane_id"] and warnings(s.run) == []
    finally:
        s.end()


@pytest.mark.full  # scripts/zellij-matrix builds 0.43.1 and runs it
def test_a_client_that_detaches_mid_run_before_044_is_said_once(swarm, rz_pre044: RealZellij, tmux):
    """0.43.1: with its client gone, a ``run`` answers exit 0 and spawns its command in a pane
    no tab holds (tests/zellij-transcripts/0.43.1/run-after-client-detached.json). The next
    backfill finds no client: one warning, and the rest runs headless."""
    rz = rz_pre044
    rz.host("host", tmux)
    s = LiveSwarm(swarm, rz, DETACH_SWARM)
    try:
        s.wait_holder()
        tmux("kill-session", "-t", "host")
        wait_until(lambda: rz.clients("host") == 0, what="the client gone")
        swarm.open_gate()
        wait_until(lambda: "client_detached" in warnings(s.run), what="the warning")
        rows = s.finish(0)
        assert rows["holder"]["pane_id"] and rows["next"]["pane_id"] is None, rows
        assert warnings(s.run) == ["client_detached"]
    finally:
        s.end()


def test_ctrl_c_with_the_sessions_server_stopped_waits_out_no_call(swarm, rz: RealZellij, tmux):
    """The session's server stopped (SIGSTOP) while a worker runs in its pane, then Ctrl-C:
    the run ends cancelled without waiting out a call's whole time (it took 22 s: a
    close-pane's 10 s, then two looks at whether the session lives), and says that the
    server is stopped."""
    rz.host("host", tmux)
    s = LiveSwarm(swarm, rz, DETACH_SWARM)
    servers = [p for p in rz.processes() if "--server" in command_line(p)]
    try:
        s.wait_holder()
        for server in servers:
            server.suspend()
        asked = time.time()
        s.proc.send_signal(signal.SIGINT)
        _, err = s.proc.communicate(timeout=60)
        assert s.proc.returncode == 130, err
    finally:
        for server in servers:
            server.resume()
        s.end()
    evs = [json.loads(line) for line in (s.run / "events.jsonl").read_text().splitlines()]
    finished = next(e for e in evs if e["event"] == "run_finished")
    assert finished["ts"] - asked < zellij_cli.CALL_TIMEOUT, evs
    said = [e["message"] for e in evs if e["event"] == "warning" and e["code"] == "pane_call_timeout"]
    assert all("is stopped" in m for m in said), said
    assert swarm.tasks()["holder"]["status"] == "cancelled"


def test_retry_of_a_run_whose_kept_session_nobody_watches_shows_its_panes(swarm, rz: RealZellij):
    """A failed run keeps its session (its failed pane, to look at); ``retry`` with no client
    attached to it made its tab there — where 0.45.0 lists no pane of a tab made with no
    client (contract §2.17) — waited 10 s for panes it could not see, warned that the rest
    ran headless, and its worker ran in a pane nobody could find. The session, ours and
    unwatched, is made anew: the retry's pane is listed, and nothing is warned."""
    from zellij_swarm import names

    swarm.write("t.txt", "test -e flag || { touch flag; exit 3; }\n")
    res = swarm("run", "t.txt", "--backend", "zellij", "--ui", "live", "--output", "quiet", env=rz.env(**FAST))
    assert res.code == 1, res
    run = swarm.latest()
    session = names.session(run.name)
    assert session in rz.session_names()
    res = swarm("retry", run.name, "--backend", "zellij", "--output", "quiet", env=rz.env(**FAST))
    assert res.code == 0, res
    row = swarm.tasks()["task-1"]
    assert (row["status"], row["attempts"]) == ("succeeded", 2) and row["pane_id"], row
    assert warnings(run) == []


def test_retry_of_an_interrupted_run_keeps_the_session_its_workers_still_run_in(swarm, rz: RealZellij):
    """The supervisor of a live run made outside Zellij (its own session, no client) is
    killed while two workers run in their panes; ``retry`` then adopted them — and made the
    run's session anew (nobody watched it), which killed them: ``cancelled (pane_closed)``,
    their work never done (7 times in 7). A session where a worker of the run still runs is
    never made anew: the adopted workers finish there, once, and what the retry runs goes
    headless, saying why."""
    run, retried = retry_after_the_supervisor_is_killed(swarm, rz.env(**FAST))
    assert retried.returncode == 0, retried.stderr
    rows = swarm.tasks()
    assert {name: (t["status"], t["attempts"]) for name, t in rows.items()} == {
        "task-1": ("succeeded", 2), "task-2": ("succeeded", 1), "task-3": ("succeeded", 1)}, rows
    assert sorted((swarm.cwd / "ledger.txt").read_text().split()) == ["task-2", "task-3"]
    assert warnings(run) == ["client_detached"]


def test_a_session_nobody_watches_that_is_not_the_runs_own_is_not_waited_on(swarm, rz: RealZellij):
    """``--session NAME``: a live session with no client, not the run's to make anew. A tab
    of the swarm's there would hold no pane 0.45.0 lists: the run goes headless at once,
    saying why once, and the session keeps its one tab."""
    rz.host("theirs")  # detached: no client
    swarm.write("t.txt", "echo ran >> ledger.txt\n")
    res = swarm("run", "t.txt", "--backend", "zellij", "--ui", "live", "--session", "theirs", "--output", "quiet",
                env=rz.env(**FAST), timeout=60)
    assert res.code == 0, res
    run = swarm.latest()
    assert warnings(run) == ["client_detached"]
    [row] = swarm.tasks().values()
    assert (row["status"], row["pane_id"]) == ("succeeded", None), row
    assert (swarm.cwd / "ledger.txt").read_text() == "ran\n"
    assert rz.act("theirs", "query-tab-names", answer="Tab #1").split("\n")[:-1] == ["Tab #1"]


@pytest.mark.parametrize("which", ["rz", full("rz_pre044")])
def test_a_session_whose_socket_path_would_be_too_long_is_refused_before_anything(swarm, which, request):
    """Zellij refuses to make a session whose socket's path is over 107 bytes, as `attach`
    makes it: the run went on headless with a warning cut at its colon, or, with
    --require-zellij, cancelled every task (exit 1). A `--session` (or ZELLIJ_SWARM_SESSION)
    too long for the socket directory, or a ZELLIJ_SOCKET_DIR too long for the run's own
    session, is bad input: one line, exit 2, no run; one byte shorter runs. Before 0.44 the
    sockets are in a directory named for the version (contract §1)."""
    rz: RealZellij = request.getfixturevalue(which)
    sockets = f"{rz.sockdir}/{'contract_version_1' if which == 'rz' else rz.version}"
    swarm.write("t.txt", "echo hi\n")
    room = zellij_cli.SOCKET_PATH_MAX - len(f"{sockets}/")
    for name, extra in (("x" * (room + 1), ()), ("y" * (room + 1), ("--require-zellij",))):
        res = swarm("run", "t.txt", "--backend", "zellij", "--session", name, *extra, env=rz.env(), timeout=60)
        assert res.code == 2 and res.stderr.count("\n") == 1, res
        assert res.stderr.startswith(f"zellij-swarm: error: invalid session '{name}' (from flag --session): "
                                     "expected a shorter name, or a shorter ZELLIJ_SOCKET_DIR: "
                                     f"zellij {rz.version} would make its socket {sockets}/{name} (108 bytes), "
                                     "over the 107 "), res
    long_dir = f"{rz.sockdir}/{'d' * 70}"
    res = swarm("run", "t.txt", "--backend", "zellij", env=rz.env(ZELLIJ_SOCKET_DIR=long_dir), timeout=60)
    assert res.code == 2 and res.stderr.count("\n") == 1 and "set a shorter ZELLIJ_SOCKET_DIR" in res.stderr, res
    assert not swarm.runs() and not [n for n in rz.session_names() if n[0] in "xy" or n.startswith("swarm-")]
    fits = "z" * room
    res = swarm("run", "t.txt", "--backend", "zellij", "--session", fits, "--output", "quiet", env=rz.env(), timeout=60)
    assert res.code == 0 and fits in rz.session_names(), res
    res = swarm("retry", swarm.latest().name, "task-1", "--session", fits + "z", env=rz.env(), timeout=60)
    assert res.code == 2 and "expected a shorter name" in res.stderr, res
