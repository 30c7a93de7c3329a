"""Nothing slow on the supervisor's loop: a multiplexer call that hangs holds up only the
panes waiting on it — headless workers' exits are recorded and their slots refilled while it
hangs. Against the fake zellij, whose ``hang`` fault makes a call never answer."""

from __future__ import annotations

import json

from zellijtest import FAST

QUICK = 30  # headless tasks that must all run while one pane call hangs


def test_headless_workers_run_on_while_a_zellij_call_hangs(swarm, fz):
    # Slot 1 shows a pane, slot 2 is past the visible cap (headless). The pane's worker ends at
    # once and retitling its pane hangs for the call's whole timeout; every other task runs
    # headless in slot 2 meanwhile, one after the other.
    tasks = "".join(f'[[task]]\nname = "q{i}"\ncmd = "true"\n' for i in range(QUICK))
    swarm.write("s.toml", f'[swarm]\njobs = 2\nmax_visible_panes = 1\n[[task]]\nname = "pane"\ncmd = "true"\n{tasks}')
    env = fz.env("0.45.0", faults="hang:rename-pane", ZELLIJ_SWARM_ZELLIJ_CALL_TIMEOUT_MS="10000", **FAST)
    res = swarm("run", "s.toml", "--backend", "zellij", "--ui", "live", env=env, timeout=120)
    assert res.code == 0, res.stderr
    events = [json.loads(line) for line in (swarm.latest() / "events.jsonl").read_text().splitlines()]
    # the first retitle's; a task that waited in slot 1 runs in the pane after it, and its own
    # retitle may hang too before the run ends
    timeout = next(e for e in events if e["event"] == "warning" and e["code"] == "pane_call_timeout")
    assert timeout["message"].startswith("zellij action rename-pane: no answer within")
    hung_at = next(e["ts"] for e in events if e["event"] == "worker_completed" and e["task"] == "pane")
    during = [e for e in events if e["event"] == "worker_completed" and e["slot"] == 2 and e["ts"] < timeout["ts"]]
    # all but the task that waits in slot 1 for the backend's thread ran before the call gave up
    assert len(during) >= QUICK - 1, (len(during), hung_at, timeout["ts"])
    assert all(t["status"] == "succeeded" for t in swarm.tasks().values())
