"""What a person sees of a live swarm in the real Zellij at 80×24: a client in a private tmux
attached to the session the swarm runs in, read with ``capture-pane`` mid-run and at the end.
Structure, not bytes: the board with its title and counters, each slot's pane titled
``slot N · task · …`` (at 80×24 Zellij stacks them: every title shows, the newest pane open),
the failed pane kept at the end. The screens of one run are kept in
``tests/screens/real-zellij-80x24/`` (``ZSW_UPDATE_SCREENS=1`` writes them), with run ids and
times normalised."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from realzellij import RealZellij, keep_screen, normalised_screen
from swarmtest import GATE, kill_run_processes, wait_until
from zellijtest import FAST

SCREENS = Path(__file__).resolve().parent / "screens" / "real-zellij-80x24"
SWARM = f"""[swarm]
name = "screens"
jobs = 2
[[task]]
name = "agent"
cmd = "echo thinking; {GATE}; echo done"
[[task]]
name = "lint"
cmd = "echo 'FAIL lint'; exit 3"
[[task]]
name = "unit"
cmd = "echo 'PASS unit'"
"""


def test_a_live_swarm_at_80x24_in_the_real_zellij(swarm, rz: RealZellij, tmux):
    rz.host("host", tmux, size="80x24")
    swarm.write("sw.toml", SWARM)
    proc = swarm.popen("run", "sw.toml", "--backend", "zellij", "--ui", "live", "--output", "quiet",
                       env=rz.env(inside="host", **FAST))
    run = swarm.started()
    try:
        def screen_with(*texts: str) -> str | None:
            s = tmux("capture-pane", "-p", "-t", "host")
            return s if all(t in s for t in texts) else None

        # the swarm's tab opens beside the user's, whose focus stays where it was: look at it
        wait_until(lambda: rz.zellij("--session", "host", "action", "go-to-tab-name", f"swarm:{run.name}",
                                     check=False).returncode == 0 and screen_with("slot 1"), what="the swarm's tab")
        # 80×24 stacks the slots' panes: each title shows, the newest pane open
        mid = wait_until(lambda: screen_with("slot 1 · agent · running", "slot 2 · lint · failed (exit 3)",
                                             "1 succeeded"), what="both slots' panes titled", timeout=15)
        assert "screens · running · 2 slots" in mid, mid  # the board's title line
        assert run.name in mid.splitlines()[0], mid  # its border's title, its run id whole (it was cut mid-id)
        assert "1 failed · 1 running" in mid, mid
        keep_screen("80x24", "mid.txt", normalised_screen(mid, run.name))
        swarm.open_gate()
        assert proc.wait(timeout=60) == 1
        end = wait_until(lambda: screen_with("finished"), what="the board's end")
        assert "screens · finished" in end and "1 failed" in end, end
        assert re.search(r"slot \d · lint · failed", end), end  # the failed pane is kept (its title cut at 80)
        assert "slot 1 · agent" not in end  # succeeded panes closed
        keep_screen("80x24", "end.txt", normalised_screen(end, run.name))
    except AssertionError:
        print(tmux("capture-pane", "-p", "-t", "host"))
        raise
    finally:
        proc.kill()
        kill_run_processes(run.name)


@pytest.mark.parametrize("name", ["mid.txt", "end.txt"])
def test_the_kept_real_screens_show_what_the_test_checks(name):
    """The screens kept from a real run are the ones the live test accepts (they fit 80×24)."""
    screen = (SCREENS / name).read_text()
    lines = screen.splitlines()
    assert len(lines) <= 24 and all(len(line) <= 80 for line in lines)
    assert ("screens · running · 2 slots" if name == "mid.txt" else "screens · finished") in screen
    assert "slot 2 · lint · failed" in screen
