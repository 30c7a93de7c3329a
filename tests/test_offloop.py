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


def test_a_batch_s_panes_are_let_go_once_recorded_not_behind_calls_queued_meanwhile(tmp_path):
    """tmux holds a batch's panes at its start gate until the supervisor has recorded them
    (``launch_seen``). Told through the backend's thread, that waited behind whatever was queued
    there after the batch — a pane's end waits up to 2 s for its log, a dead pane's status up
    to 20 s — and the batch's workers with it. It is told on the loop, right after the record."""
    import threading
    import time

    from zellij_swarm.backends.base import LaunchRequest, PaneOpened
    from zellij_swarm.backends.offloop import OffLoopBackend
    from zellij_swarm.calls import CallRunner
    from zellij_swarm.records import rundir

    release = threading.Event()
    said: list[str] = []

    class Backend:
        name = "slow"
        output_copied_after_end = False

        def launch(self, batch):
            return [PaneOpened(f"%{i}") for i, _ in enumerate(batch)]

        def ended(self, req, pane_id, status, label):
            release.wait(30)  # a slow call, queued after the batch

        def launch_seen(self):
            said.append(f"seen on {threading.current_thread().name}")

    runner = CallRunner("test backend")
    try:
        backend = OffLoopBackend(Backend(), runner)  # type: ignore[arg-type]
        req = LaunchRequest(rundir.RunPaths(tmp_path).gen(1, 1), 1, "t", pane=True)
        backend.launch([req], lambda results: said.append(f"recorded {[r.pane_id for r in results]}"))
        backend.ended(req, "%9", "succeeded", "succeeded")
        deadline = time.monotonic() + 10
        while not said and time.monotonic() < deadline:  # the loop's turns, until the batch is recorded
            runner.drain()
            time.sleep(0.005)
        assert said == ["recorded ['%0']", f"seen on {threading.current_thread().name}"]
    finally:
        release.set()
        runner.close()
