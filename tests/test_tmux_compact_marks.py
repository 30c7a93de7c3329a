"""A compact worker that waits for input marks the run's tmux window too (issue 24 §4): it
has no pane, so it says it waits through its heartbeat (``{"event":"waiting_input"}``), and the
window the user looks at is renamed ``swarm-<run> (1 waiting)`` with its bell flag set; its
end takes the mark away while the rest of the run goes on."""

from __future__ import annotations

from swarmtest import kill_run_processes, wait_until
from tmuxtest import Tmux, outside_env

from zellij_swarm import names


def _windows(tmux: Tmux) -> dict[str, tuple[str, str]]:
    """Each window of the user's session named by its run option: (name, bell flag)."""
    out = tmux("list-windows", "-t", "host", "-F",
               f"#{{{names.RUN_OPTION}}}\t#{{window_name}}\t#{{window_bell_flag}}")
    return {w[0]: (w[1], w[2]) for w in (line.split("\t") for line in out.splitlines()) if w[0]}


def test_a_compact_worker_waiting_for_input_marks_the_runs_window(swarm, tmux: Tmux) -> None:
    tmux("new-session", "-d", "-s", "host", "-x", "80", "-y", "24")
    pane = tmux("display-message", "-p", "-t", "host:", "#{pane_id}").strip()
    pid = tmux("display-message", "-p", "#{pid}").strip()
    env = outside_env(tmux, TMUX=f"{tmux.socket},{pid},0", TMUX_PANE=pane)
    asks = "printf '{\"event\":\"waiting_input\"}\\n' >> \"$ZELLIJ_SWARM_HEARTBEAT\"; " \
           "until [ -e answered ]; do sleep 0.05; done"
    swarm.write("s.toml", f"[[task]]\nname = \"asks\"\ncmd = '''{asks}'''\n"
                          "[[task]]\nname = \"works\"\ncmd = 'until [ -e done ]; do sleep 0.05; done'\n")
    proc = swarm.popen("run", "s.toml", "-j", "2", "--backend", "tmux", "--ui", "compact", "--output", "quiet",
                       env=env)
    run = None
    try:
        run = swarm.started().name
        wait_until(lambda: _windows(tmux).get(run, ("", ""))[0] == f"swarm-{run} (1 waiting)", timeout=20,
                   what="the run's window marked 1 waiting")
        # the BEL rung after the rename reaches tmux through the board's terminal a moment later
        wait_until(lambda: _windows(tmux)[run][1] == "1", timeout=10, what="the bell flag of a new wait")
        (swarm.cwd / "answered").touch()  # it ends; the other runs on
        wait_until(lambda: _windows(tmux).get(run, ("", ""))[0] == f"swarm-{run}", timeout=20,
                   what="the mark gone with the waiting worker's end")
        assert proc.poll() is None, "the run goes on: 'works' waits for its file"
        (swarm.cwd / "done").touch()
        assert proc.wait(timeout=30) == 0
    finally:
        for name in ("answered", "done"):
            (swarm.cwd / name).touch()
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        if run is not None:
            kill_run_processes(run)
