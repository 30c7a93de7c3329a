"""``run --attach`` inside a session of the real Zellij (issue 24 item 1): the user's client is
moved to the swarm's tab, and the run says what it says without the flag. What the user sees is
read from the client's screen (a private tmux, 200×50); without ``--attach`` the client is
given back the user's own tab, which Zellij's ``new-tab`` takes it from."""

from __future__ import annotations

import json
import subprocess

import pytest
from realzellij import RealZellij
from swarmtest import GATE, kill_run_processes, run_processes, wait_until
from zellijtest import FAST

TASKS = f'[[task]]\nname = "waits"\ncmd = "{GATE}"\n[[task]]\nname = "bad"\ncmd = "echo FAIL; exit 3"\n'


def clients_by_tab(rz: RealZellij) -> object:
    """Each tab's id, name and the clients on it (``list-tabs --json``), or why it could not
    be read: said when a wait for the client fails, and never in its place."""
    try:
        return [(t["tab_id"], t["name"], t["other_focused_clients"])
                for t in json.loads(rz.act("host", "list-tabs", "--json", answer="["))]
    except (AssertionError, OSError, ValueError, KeyError, subprocess.SubprocessError) as e:
        return f"unreadable: {e}"


def last_events(run, count: int = 12) -> list[str]:
    try:
        return (run / "events.jsonl").read_text(errors="replace").splitlines()[-count:]
    except OSError as e:
        return [f"unreadable: {e}"]


@pytest.mark.parametrize("attach", [True, False], ids=["attach", "no-attach"])
def test_run_attach_inside_the_real_zellij_moves_the_client_to_the_swarms_tab(swarm, rz: RealZellij, tmux,
                                                                               attach: bool) -> None:
    rz.host("host", tmux)
    own = next(p["id"] for p in rz.panes("host") if not p["is_plugin"])  # the user's shell: where they type it
    swarm.write("t.toml", TASKS)
    proc = swarm.popen("run", "t.toml", "-j", "2", "--backend", "zellij", "--ui", "live",
                       *(["--attach"] if attach else []), env=rz.env(inside="host", ZELLIJ_PANE_ID=str(own), **FAST))
    if not wait_until(lambda: swarm.runs() or proc.poll() is not None, what="the run") or not swarm.runs():
        raise AssertionError(f"the run ended before it began: {proc.communicate()}")
    run = swarm.runs()[0]
    board = f"{run.name} · board"
    try:
        titles: list[str] = []

        def board_listed() -> bool:
            titles[:] = [p["title"] for p in rz.panes("host")]
            return board in titles or proc.poll() is not None

        try:
            wait_until(board_listed, timeout=60, interval=0.2, what="the swarm's board")
        except AssertionError as late:  # what the session and the run held then: the cause, next time
            tabs = clients_by_tab(rz)
            proc.kill()
            raise AssertionError(f"{late}; the session's panes: {titles}; the tabs: {tabs}; the run's last "
                                 f"events: {last_events(run)}; its stderr: {proc.communicate()[1][-1500:]}") from None
        assert board in titles, f"the run ended first: {proc.communicate()}"
        if attach:
            try:
                wait_until(lambda: board in tmux("capture-pane", "-p", "-t", "host"), timeout=30, interval=0.2,
                           what="the client on the swarm's tab")
            except AssertionError as late:  # where the client is: the cause, next time
                raise AssertionError(f"{late}; the tabs' clients: {clients_by_tab(rz)}; "
                                     f"the screen: {tmux('capture-pane', '-p', '-t', 'host')[:400]!r}") from None
        swarm.open_gate()
        _, err = proc.communicate(timeout=90)
        assert proc.returncode == 1, err
        # the output is the default one, --attach or not: the run, the failure, where to read it
        assert f"zellij-swarm: run {run.name}: 2 task(s)" in err
        assert "bad: failed (exit 3" in err and "finished in" in err
        screen = tmux("capture-pane", "-p", "-t", "host")
        assert ("slot " in screen and "· bad · failed (exit 3)" in screen) == attach, screen
    finally:
        proc.kill()
        proc.communicate()
        kill_run_processes(run.name)
    assert run_processes(run.name) == []
