"""Who needs me, from anywhere in tmux (issue 24 §4): the run's window found by its ``@zsw_run``
option, renamed ``swarm-<run> (2 waiting)`` while two agents wait, its bell flag set once per
new wait, ``wait --for-input`` printing the attach commands, and the marked window still found
by ``prune``'s search. Seen as the user sees it: a tmux client at 80×24 (a client of the
swarm's server, running in a pane of a second server, whose screen is read with
``capture-pane``), status bar included."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from swarmtest import kill_run_processes, wait_until
from tmuxtest import Tmux, outside_env, private_tmux

from zellij_swarm import names
from zellij_swarm.backends import leftovers

SCREENS = Path(__file__).parent / "screens" / "80x24"


def windows(tmux: Tmux) -> dict[str, dict[str, str]]:
    out = tmux("list-windows", "-t", "host", "-F",
               f"#{{window_id}}\t#{{window_name}}\t#{{{names.RUN_OPTION}}}\t#{{window_bell_flag}}")
    return {w[0]: {"name": w[1], "run": w[2], "bell": w[3]} for w in (line.split("\t") for line in out.splitlines())}


def test_names_are_built_and_read_back_marked_or_not() -> None:
    run = "20261201-190000-123456"  # a hex part all digits: never read as an overflow number
    assert names.window(run) == f"swarm-{run}" and names.tab(run) == f"swarm:{run}"
    for name, overflow, waiting in ((names.window(run), None, 0), (names.window(run, 2), 2, 0),
                                    (names.window(run, waiting=2), None, 2), (names.window(run, 3, 1), 3, 1),
                                    (names.tab(run, 4), None, 4)):
        parsed = names.parse(name)
        assert parsed is not None and (parsed.run_id, parsed.overflow, parsed.waiting) == (run, overflow, waiting)
    assert names.parse(f"swarm-{run}", ["other"]) is None and names.parse("my-swarm-x") is None
    assert names.parse("swarm-run-7", ["run-7"]).run_id == "run-7"  # type: ignore[union-attr]


def test_a_board_is_known_by_its_title_and_by_the_title_older_runs_gave_it() -> None:
    """The run id leads the board's title, so a narrow border cuts the rest, never the id; a
    resume still knows the board of a run started when the title began ``zellij-swarm``."""
    run = "20261206-181146-7c1f2a"
    assert names.board_title(run).startswith(run)
    assert names.is_board_title(names.board_title(run), run)
    assert names.is_board_title(f"zellij-swarm {run} · board", run)
    assert not names.is_board_title(names.board_title(run), "20261206-181146-000000")
    assert not names.is_board_title("slot 1", run)


def test_two_waiting_agents_mark_the_runs_window_in_the_status_bar(swarm, tmux: Tmux) -> None:
    tmux("new-session", "-d", "-s", "host", "-x", "80", "-y", "24")
    pane = tmux("display-message", "-p", "-t", "host:", "#{pane_id}").strip()
    pid = tmux("display-message", "-p", "#{pid}").strip()
    env = outside_env(tmux, TMUX=f"{tmux.socket},{pid},0", TMUX_PANE=pane)
    swarm.write("s.toml", "".join(f"[[task]]\nname = \"agent-{i}\"\ncmd = 'read answer; echo \"got $answer\"'\n"
                                  for i in (1, 2)))
    with private_tmux() as outer:
        outer("new-session", "-d", "-s", "view", "-x", "80", "-y", "24",
              f"tmux -S {tmux.socket} attach -t host")
        outer("set-option", "-g", "status", "off")
        proc = swarm.popen("run", "s.toml", "-j", "2", "--backend", "tmux", "--ui", "live", "--min-pane-width", "20",
                           "--output", "quiet", env=env)
        run = None
        try:
            run = swarm.started().name
            ours = wait_until(lambda: [w for w in windows(tmux).values() if w["run"] == run], what="the run's window")
            assert ours[0]["name"] == f"swarm-{run}"
            marked = f"swarm-{run} (2 waiting)"
            wait_until(lambda: any(w["name"] == marked for w in windows(tmux).values()), timeout=20,
                       what="the window marked with 2 waiting")
            # the BEL rung after a rename reaches tmux through the board's terminal a moment later
            wait_until(lambda: [w["bell"] for w in windows(tmux).values() if w["name"] == marked] == ["1"],
                       timeout=10, what="the bell flag of a new wait")
            screen = wait_until(lambda: (s := outer("capture-pane", "-p", "-t", "view")) and marked in s and s,
                                what="the mark in the client's status bar")
            if os.environ.get("ZSW_UPDATE_SCREENS"):  # kept for people to read, as the other screens are
                (SCREENS / "tmux-two-waiting.txt").write_text(screen)
            assert marked in screen.rstrip("\n").splitlines()[-1]
            # wait --for-input says how to show each of them
            said = swarm("wait", "--for-input", env=env)
            assert said.code == 0 and sorted(said.stdout.splitlines()) == \
                ["zellij-swarm attach agent-1", "zellij-swarm attach agent-2"]
            # prune's search finds the marked window (the run is still going: nothing is removed)
            found = leftovers.find(env, [run]).leftovers
            assert any(f"swarm-{run} (2 waiting)" in left.what for left in found), found
            # one answered: one waiting
            panes = {line.split("\t")[1]: line.split("\t")[0] for line in tmux(
                "list-panes", "-a", "-F", "#{pane_id}\t#{@zsw_title}").splitlines()}
            agent_1 = next(p for title, p in panes.items() if "· agent-1 ·" in title)
            tmux("send-keys", "-t", agent_1, "-l", "yes")
            tmux("send-keys", "-t", agent_1, "Enter")
            wait_until(lambda: any(w["name"] == f"swarm-{run} (1 waiting)" for w in windows(tmux).values()),
                       timeout=20, what="the mark down to 1 waiting")
            agent_2 = next(p for title, p in panes.items() if "· agent-2 ·" in title)
            tmux("send-keys", "-t", agent_2, "-l", "yes")
            tmux("send-keys", "-t", agent_2, "Enter")
            assert proc.wait(timeout=30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
            if run is not None:
                kill_run_processes(run)


@pytest.mark.parametrize("waiting", [0, 2])
def test_a_window_is_found_by_its_option_whatever_its_name(tmux: Tmux, waiting: int) -> None:
    """A window the user renamed, or one the marks renamed, is the run's by its option; a
    window of another run, or an older one named like ours but without the option, by name."""
    env = outside_env(tmux)
    tmux("new-session", "-d", "-s", "host", "-x", "80", "-y", "24")
    made = tmux("new-window", "-d", "-P", "-F", "#{window_id}", "-t", "host:", "-n",
                names.marked("renamed by the user", waiting)).strip()
    tmux("set-option", "-w", "-t", made, names.RUN_OPTION, "run-a")
    old = tmux("new-window", "-d", "-P", "-F", "#{window_id}", "-t", "host:", "-n", "swarm-run-b-2").strip()
    found = {left.run_id: left.what for left in leftovers.find(env, ["run-a", "run-b"]).leftovers}
    assert found == {"run-a": f"tmux window {names.marked('renamed by the user', waiting)} ({made}) in session host",
                     "run-b": f"tmux window swarm-run-b-2 ({old}) in session host"}


def test_attach_without_a_record_of_the_windows_finds_the_marked_ones_first_window_first(tmux: Tmux) -> None:
    from zellij_swarm.backends.tmux_client import TmuxClient
    from zellij_swarm.commands import attach

    env = outside_env(tmux)
    tmux("new-session", "-d", "-s", "host", "-x", "80", "-y", "24")
    run = "20261201-190000-abcdef"
    made = {}
    for name, option in ((names.window(run, 2, waiting=1), run), (names.window(run, waiting=3), run),
                         (names.window(run, 3), ""), ("swarm-other", "other")):
        made[name] = tmux("new-window", "-d", "-P", "-F", "#{window_id}", "-t", "host:", "-n", name).strip()
        if option:
            tmux("set-option", "-w", "-t", made[name], names.RUN_OPTION, option)

    found = [w.id for w in attach._tmux_windows(TmuxClient(env), run, {})]
    assert found[0] == made[names.window(run, waiting=3)]
    assert sorted(found[1:]) == sorted([made[names.window(run, 2, waiting=1)], made[names.window(run, 3)]])


def test_wait_for_input_on_an_ended_run_says_none_waits(swarm) -> None:
    swarm.write("t.txt", "true\n")
    assert swarm("run", "t.txt", "--backend", "headless").code == 0
    res = swarm("wait", "--for-input")
    assert res.code == 1 and res.stdout == ""
    assert res.stderr == f"zellij-swarm: run {swarm.latest().name} is finished; no task waits for input\n"
    assert swarm("wait").code == 2


def test_wait_for_input_new_counts_only_a_wait_that_begins_after_it(monkeypatch, tmp_path) -> None:
    from zellij_swarm.commands import wait
    from zellij_swarm.records.rundir import RunPaths, runs_root

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ZELLIJ_SWARM_STATE_DIR", raising=False)
    run = RunPaths(runs_root(tmp_path / ".zellij-swarm") / "r")  # where the rule looks: no --state-dir

    def snap(*waiting: tuple[str, int]) -> dict[str, object]:
        return {"run_id": "r", "state": "running", "tasks": [
            {"name": n, "id": f"t-{n}", "generation": g, "status": "running", "waiting_input": True, "pane_id": f"%{g}"}
            for n, g in waiting]}

    looks = iter([snap(("a", 1)), snap(("a", 1)), snap(), snap(("b", 1)), snap(("a", 2), ("b", 1))])
    monkeypatch.setattr(wait, "load_status", lambda run, rows: next(looks))
    said: list[str] = []
    assert wait.for_input(run, latest=True, new=True, say=said.append, sleep=lambda s: None) == 0
    assert said == ["zellij-swarm attach b"]
    said.clear()
    assert wait.for_input(run, latest=False, say=said.append, sleep=lambda s: None) == 0
    assert said == ["zellij-swarm attach r a", "zellij-swarm attach r b"]
