"""``resume`` follows the panes its run left (SPEC §8 ``resume``, issue 21 §3.7): the
generations it adopts in panes end there as in a live run — retitled with their outcome, a
success closed after the hold, failures kept up to ``--keep-failed-panes`` — nothing new is
opened (new generations run headless), and at the run's end what stays is what the policy
keeps. A place that is gone (the server killed) makes it headless with one warning; a pane
closed by hand is that task's end, not the run's.

The supervisor is killed (-9) while four tasks wait at their gates in panes; ``go`` lets two of
them end while no supervisor runs, ``go2`` the two others once the resumed one follows them.
What is asserted is the multiplexer's own view of the panes."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import fakeprocs
import psutil
import pytest
from swarmtest import GATE, Result, Swarm, full, kill_run_processes, run_processes, wait_until
from tmuxtest import Tmux, inside_env, outside_env
from zellijtest import FAST

from zellij_swarm import external
from zellij_swarm.engine import resume
from zellij_swarm.records import rundir

GATED = """
[swarm]
jobs = 4
[[task]]
name = "ok"
cmd = "until [ -e go ]; do sleep 0.05; done; echo ok"
[[task]]
name = "bad"
cmd = "until [ -e go ]; do sleep 0.05; done; echo bad; exit 3"
[[task]]
name = "late"
cmd = "until [ -e go2 ]; do sleep 0.05; done; echo late"
[[task]]
name = "late-bad"
cmd = "until [ -e go2 ]; do sleep 0.05; done; echo late-bad; exit 4"
[[task]]
name = "new"
cmd = "echo new"
after = ["ok"]
"""

Panes = Callable[[], dict[str, str]]  # the run's panes as the multiplexer lists them: pane id -> title


def status(swarm: Swarm, run: Path) -> dict:
    """``status --json`` of the run; no task rows before its first snapshot."""
    res = swarm("status", "--json", run.name)
    return json.loads(res.stdout) if res.code == 0 else {"tasks": []}


def waiting_pane(swarm: Swarm, run: Path) -> str | None:
    """The pane of the run's task that waits for input, once its supervisor says one does."""
    return next((t["pane_id"] for t in status(swarm, run)["tasks"] if t["pane_id"] and t["waiting_input"]), None)


def events(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]


def exits(run: Path) -> int:
    return len(list(run.glob("slots/slot-*/gen-*/exit")))


def began(run: Path) -> int:
    """Generations whose wrapper wrote its start (a task's row says ``running`` with a pane
    as soon as its pane is asked for: on a loaded machine, its wrapper may not have claimed
    its generation yet, or its pane not even be open, when a test kills the supervisor)."""
    return sum('"started"' in f.read_text() for f in run.glob("slots/slot-*/gen-*/heartbeat.jsonl"))


def stop(swarm: Swarm, proc: subprocess.Popen | None, run: Path) -> None:
    """Whatever the test came to: every gate open, the supervisor and every process of the run ended."""
    for gate in ("go", "go2"):
        (swarm.cwd / gate).touch()
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait(timeout=10)
    kill_run_processes(run.name)


def tmux_env(t: Tmux, *, inside: bool = False) -> dict[str, str]:
    """A run's environment in the private tmux server, with a launch heartbeat deadline for a
    loaded machine (a pane that misses it runs headless, and the test would see no pane)."""
    return dict((inside_env if inside else outside_env)(t), ZELLIJ_SWARM_HEARTBEAT_TIMEOUT_MS="30000")


def tmux_panes(t: Tmux) -> Panes:
    return lambda: {pane: row["title"] for pane, row in t.panes().items()}


class Killed:
    """The gated swarm run live, its supervisor killed (-9) while all four gated tasks run in
    panes (``panes``: their ids by task), ``go`` opened and their ends recorded meanwhile."""

    def __init__(self, swarm: Swarm, env: dict[str, str], args: tuple[str, ...], view: Panes) -> None:
        self.swarm, self.env, self.view = swarm, env, view
        swarm.write("s.toml", GATED)
        proc = swarm.popen("run", "s.toml", *args, "--keep-failed-panes", "1", "--output", "group", env=env)
        self.run: Path = swarm.started()
        try:
            rows = wait_until(lambda: (t := {r["name"]: r for r in status(swarm, self.run)["tasks"]}) and all(
                n in t and t[n]["status"] == "running" and t[n]["pane_id"] for n in ("ok", "bad", "late", "late-bad"))
                and t, timeout=60, what="four tasks running in panes")
            self.panes: dict[str, str] = {n: rows[n]["pane_id"] for n in ("ok", "bad", "late", "late-bad")}
            self.slots: dict[str, int] = {n: rows[n]["slot"] for n in self.panes}
            wait_until(lambda: set(self.panes.values()) <= set(view()), timeout=60, what="the panes listed")
            wait_until(lambda: began(self.run) == 4, timeout=60, what="the four workers begun")
            self.before = set(view())
        finally:
            proc.kill()
            proc.wait(timeout=10)

    def title(self, task: str, state: str) -> str:
        return f"slot {self.slots[task]} · {task} · {state}"

    def resume(self) -> subprocess.Popen:
        return self.swarm.popen("resume", self.run.name, "--output", "group", env=self.env)

    def adopted(self) -> bool:
        return any(e["event"] == "worker_adopted" for e in events(self.run))

    def close(self, proc: subprocess.Popen | None) -> None:
        stop(self.swarm, proc, self.run)


def follow_through(swarm: Swarm, killed: Killed, *, retitled: bool) -> str:
    """Resume a ``Killed`` run with ``go`` open: the panes of its ended tasks settle as their
    ends say (``retitled``: the multiplexer can rename a pane), then ``go2`` ends the rest under
    the resumed supervisor. Returns its stderr, having asserted what every multiplexer shows."""
    run, panes, view = killed.run, killed.panes, killed.view
    (swarm.cwd / "go").touch()
    wait_until(lambda: exits(run) == 2, what="ok and bad ended while no supervisor ran")
    proc = killed.resume()
    try:
        wait_until(killed.adopted, timeout=60, what="the resumed supervisor adopted the late ones")
        # the success that ended meanwhile closes; the failure is kept, retitled with its exit
        bad = killed.title("bad", "failed (exit 3)" if retitled else "running")
        wait_until(lambda: panes["ok"] not in view() and view().get(panes["bad"]) == bad, timeout=60,
                   what=f"ok's pane closed, bad's titled {bad!r}: {view()}")
        (swarm.cwd / "go2").touch()
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 1, err
    finally:
        killed.close(proc)
    rows = swarm.tasks(run)
    assert {n: r["status"] for n, r in rows.items()} == {
        "ok": "succeeded", "bad": "failed", "late": "succeeded", "late-bad": "failed", "new": "succeeded"}
    assert rows["new"]["pane_id"] is None, "a new generation of a resumed run runs headless"
    # --keep-failed-panes 1: late-bad's failure closed bad's kept pane; late's success closed after the hold
    late_bad = killed.title("late-bad", "failed (exit 4)" if retitled else "running")
    left = wait_until(lambda: (v := view()) and panes["late"] not in v and panes["bad"] not in v and v,
                      timeout=60, what="the held and the surplus kept panes closed")
    assert left.get(panes["late-bad"]) == late_bad, left
    assert set(left) <= killed.before, "nothing new was opened"
    assert "bad: failed (exit 3" in err and f"— zellij-swarm logs {run.name} bad" in err, err
    assert run_processes(run.name) == []
    return err


# ----- tmux: a real server on a private socket ---------------------------------------------------

tmux_needed = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (scripts/setup)")


@tmux_needed
def test_tmux_resume_settles_the_adopted_panes(swarm, tmux):
    env = tmux_env(tmux)
    view = tmux_panes(tmux)
    killed = Killed(swarm, env, ("--backend", "tmux", "--ui", "live"), view)
    err = follow_through(swarm, killed, retitled=True)
    board = [title for title in view().values() if title.endswith("· board")]
    assert board == [f"{killed.run.name} · board"]
    assert set(view()) == {next(p for p, t in view().items() if t.endswith("· board")), killed.panes["late-bad"]}
    # the session the run created stays, and the end says how to close it
    assert f"tmux session 'swarm-{killed.run.name}' stays: close it with" in err, err
    assert "warning" not in err, err


@pytest.mark.parametrize("backend,place", [
    pytest.param("tmux", "recorded", marks=tmux_needed), ("zellij-0.45.0", "recorded"), ("zellij-0.45.0", "none"),
    pytest.param("tmux", "none", marks=[tmux_needed, pytest.mark.full]),
])
def test_resume_after_the_session_was_killed_runs_headless_with_one_warning(swarm, backend, place, request):
    """The session went, and took its panes' workers with it: they are lost (not cancelled)
    and run again headless, without using an attempt. So they are when the run recorded no
    place for its panes (``place`` none: its supervisor went before it wrote one — a Zellij
    run's tab is made with its first panes): they were taken for panes closed by hand,
    ``cancelled``, and never ran again."""
    if backend == "tmux":
        t = request.getfixturevalue("tmux")
        env, args, view, kill = tmux_env(t), ("--backend", "tmux"), tmux_panes(t), lambda run: t("kill-server")
    else:
        fz = request.getfixturevalue("fz")
        env, args, view = fz.env("0.45.0", **FAST), ("--backend", "zellij"), fake_panes(swarm, fz, "0.45.0")
        kill = lambda run: fz.zellij("kill-session", f"swarm-{run.name}", version="0.45.0")  # noqa: E731
    killed = Killed(swarm, env, (*args, "--ui", "live"), view)
    if place == "none":
        state = killed.run / "state.json"
        state.write_text(json.dumps({k: v for k, v in json.loads(state.read_text()).items() if k != "multiplexer"}))
    kill(killed.run)
    wait_until(lambda: exits(killed.run) == 4, what="the four workers hung up")
    (swarm.cwd / "go").touch()
    (swarm.cwd / "go2").touch()
    proc = killed.resume()
    try:
        _, err = proc.communicate(timeout=120)
    finally:
        killed.close(proc)
    assert proc.returncode == 1, err
    rows = swarm.tasks(killed.run)
    assert {n: (r["status"], r["attempts"]) for n, r in rows.items()} == {
        "ok": ("succeeded", 1), "bad": ("failed", 1), "late": ("succeeded", 1), "late-bad": ("failed", 1),
        "new": ("succeeded", 1)}
    assert all(r["pane_id"] is None for r in rows.values()), "all ran again headless"
    lost = [a["reason"] for r in rows.values() for a in r["history"] if a["status"] == "lost"]
    assert lost == ["multiplexer_lost"] * 4
    said = [ln for ln in err.splitlines() if "session_missing" in ln]
    assert len(said) == (place == "recorded") and all("headless" in line for line in said), err
    assert run_processes(killed.run.name) == []


@pytest.mark.parametrize("backend", [pytest.param("tmux", marks=tmux_needed), "zellij-0.45.0"])
def test_a_session_made_before_the_run_recorded_its_place_is_said_to_stay_after_resume(swarm, backend, request):
    """A supervisor killed as it made its session, before its snapshot named it: ``resume``
    runs the rest headless (nothing names the session) — and said nothing of the session,
    which stayed with its board (an adversary, 3 in 3 on the real 0.45). Its end says that
    it stays, and the command that closes it, which does."""
    if backend == "tmux":
        t = request.getfixturevalue("tmux")
        env, args = tmux_env(t), ("--backend", "tmux")
        sessions = lambda: t("list-sessions", "-F", "#S", check=False).split()  # noqa: E731
    else:
        fz = request.getfixturevalue("fz")
        env, args = fz.env("0.45.0", **FAST), ("--backend", "zellij")
        sessions = lambda: [  # noqa: E731
            line.split()[0] for line in fz.zellij("list-sessions", "-n", version="0.45.0", check=False).stdout
            .splitlines() if line.strip() and "EXITED" not in line]
    swarm.write("s.txt", f"{GATE}\n")
    proc = swarm.popen("run", "s.txt", *args, "--ui", "compact", env=env)
    run = swarm.started()
    try:
        swarm.wait_counts(run, running=1)
        proc.kill()
        proc.wait(timeout=10)
        state = run / "state.json"
        state.write_text(json.dumps({k: v for k, v in json.loads(state.read_text()).items() if k != "multiplexer"}))
        assert f"swarm-{run.name}" in sessions()
        swarm.open_gate()
        res = swarm("resume", run.name, env=env)
        assert res.code == 0, res.stderr
        assert f"session swarm-{run.name}, opened before the run was interrupted, stays: close it with " \
               "zellij-swarm prune" in res.stderr, res.stderr
        assert swarm("prune", env=env).code == 0
        wait_until(lambda: f"swarm-{run.name}" not in sessions(), what="the session closed by prune")
    finally:
        proc.kill()
        kill_run_processes(run.name)


@tmux_needed
def test_tmux_a_pane_closed_by_hand_before_resume_is_that_task_alone(swarm, tmux):
    env = tmux_env(tmux)
    view = tmux_panes(tmux)
    killed = Killed(swarm, env, ("--backend", "tmux", "--ui", "live"), view)
    tmux("kill-pane", "-t", killed.panes["late"])
    proc = None
    try:
        # (a deadline: a CI machine under load once took past 30 s)
        wait_until(lambda: exits(killed.run) == 1, timeout=60, what="late's end recorded")
        proc = killed.resume()
        wait_until(killed.adopted, timeout=60, what="the others adopted")
        (swarm.cwd / "go").touch()
        wait_until(lambda: view().get(killed.panes["bad"]) == killed.title("bad", "failed (exit 3)"),
                   timeout=60, what="bad ended under the resumed supervisor")
        (swarm.cwd / "go2").touch()
        _, err = proc.communicate(timeout=120)
    finally:
        killed.close(proc)
    assert proc.returncode == 1, err
    rows = swarm.tasks(killed.run)
    assert (rows["late"]["status"], rows["late"]["reason"]) == ("cancelled", "pane_closed")
    assert "warning" not in err, err
    left = view()
    assert killed.panes["late"] not in left and killed.panes["ok"] not in left and killed.panes["bad"] not in left
    assert left[killed.panes["late-bad"]] == killed.title("late-bad", "failed (exit 4)")


@tmux_needed
def test_tmux_a_task_answered_while_no_supervisor_runs_is_no_longer_said_to_wait(swarm, tmux):
    """A task the supervisor last saw waiting, answered by hand after the supervisor was
    killed: ``status``, ``status --waiting`` and ``wait --for-input`` still said it waited —
    the last word of a supervisor that is gone (an adversary, 2 in 2). The kernel is asked
    again: waiting while it reads, not once it is busy."""
    swarm.write("w.toml", '[swarm]\njobs = 1\n[[task]]\nname = "ask"\n'
                          "cmd = 'read a; until [ -e go ]; do sleep 0.05; done'\n")
    env = tmux_env(tmux)
    proc = swarm.popen("run", "w.toml", "--backend", "tmux", "--ui", "live", "--output", "quiet", env=env)
    run = swarm.started()

    def waits() -> object:
        [row] = json.loads(swarm("status", run.name, "--json", env=env).stdout)["tasks"]
        return row["waiting_input"]

    try:
        pane = wait_until(lambda: waiting_pane(swarm, run), timeout=60, what="ask waiting in its pane")
        proc.kill()
        proc.wait(timeout=10)
        assert waits() is True
        assert "waiting for input" in swarm("board", run.name, "--once", env=env).stdout
        tmux("send-keys", "-t", pane, "x", "Enter")
        wait_until(lambda: waits() is False, timeout=30, what="the answered task no longer waiting")
        assert "nothing watches" in swarm("status", run.name, "--waiting", env=env).stdout
        assert "waiting for input" not in swarm("board", run.name, "--once", env=env).stdout
    finally:
        (swarm.cwd / "go").touch()
        stop(swarm, None, run)


@tmux_needed
def test_tmux_an_adopted_pane_is_marked_waiting_and_unmarked(swarm, tmux):
    """The resumed supervisor marks an adopted worker waiting for input (its title and its
    window's name) and takes the mark away when it reads."""
    swarm.write("w.toml", '[swarm]\njobs = 1\n[[task]]\nname = "ask"\n'
                          "cmd = 'read a; until [ -e go ]; do sleep 0.05; done; read b; echo $a$b'\n")
    env = tmux_env(tmux)
    proc = swarm.popen("run", "w.toml", "--backend", "tmux", "--ui", "live", "--output", "group", env=env)
    run = swarm.started()
    window = f"swarm-{run.name}"

    def shown() -> tuple[str, list[str]]:
        return tmux_panes(tmux)().get(pane, ""), tmux("list-windows", "-a", "-F", "#{window_name}").splitlines()

    def marks_since_resume() -> list[bool]:
        evs = events(run)
        resumed = max(i for i, e in enumerate(evs) if e["event"] == "run_resumed")
        return [e["waiting"] for e in evs[resumed:] if e["event"] == "worker_waiting_input"]

    try:
        pane = wait_until(lambda: waiting_pane(swarm, run), timeout=60, what="ask waiting in its pane")
        proc.kill()
        proc.wait(timeout=10)
        proc = swarm.popen("resume", run.name, "--output", "group", env=env)
        wait_until(lambda: any(e["event"] == "run_resumed" for e in events(run)) and marks_since_resume() == [True],
                   timeout=60, what="the resumed supervisor saw it waiting")
        waiting = ("slot 1 · ask · waiting for input", [f"{window} (1 waiting)"])
        wait_until(lambda: shown() == waiting, timeout=60, what=f"marked waiting: {shown()}")
        tmux("send-keys", "-t", pane, "x", "Enter")
        wait_until(lambda: shown() == ("slot 1 · ask · running", [window]), timeout=60,
                   what=f"the mark taken away: {shown()}")
        (swarm.cwd / "go").touch()
        wait_until(lambda: shown() == waiting, timeout=60, what=f"marked waiting again: {shown()}")
        tmux("send-keys", "-t", pane, "y", "Enter")
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    finally:
        stop(swarm, proc, run)
    assert swarm.tasks(run)["ask"]["status"] == "succeeded"
    wait_until(lambda: pane not in tmux_panes(tmux)(), timeout=60, what="its pane closed after the hold")


@tmux_needed
@pytest.mark.parametrize("ui", ["live", full("compact")])
def test_tmux_resume_inside_the_users_session_closes_the_swarms_window_when_all_succeeded(swarm, tmux, ui):
    """Never the user's own session: the swarm's window goes, as at a live run's end."""
    swarm.write("ok.toml", '[swarm]\njobs = 2\n[[task]]\nname = "a"\ncmd = "until [ -e go ]; do sleep 0.05; done"\n'
                           '[[task]]\nname = "b"\ncmd = "until [ -e go2 ]; do sleep 0.05; done"\n')
    env = tmux_env(tmux, inside=True)
    proc = swarm.popen("run", "ok.toml", "--backend", "tmux", "--ui", ui, "--output", "group", env=env)
    run = swarm.started()
    try:
        wait_until(lambda: [t["status"] for t in status(swarm, run)["tasks"]] == ["running", "running"],
                   timeout=60, what="both running")
        wait_until(lambda: f"swarm-{run.name}" in tmux("list-windows", "-a", "-F", "#{window_name}"), what="window")
        wait_until(lambda: began(run) == 2, timeout=60, what="both workers begun")
        proc.kill()
        proc.wait(timeout=10)
        (swarm.cwd / "go").touch()
        try:  # a loaded CI machine once took over 30 s here; the wait ends as soon as it is written
            wait_until(lambda: exits(run) == 1, timeout=60, what="a ended while no supervisor ran")
        except AssertionError as late:  # what the generations and the panes held then: the cause, next time
            files = sorted(str(f.relative_to(run)) for f in run.glob("slots/slot-*/gen-*/*"))
            panes = tmux("list-panes", "-a", "-F", "#{pane_id} #{pane_dead} #{pane_current_command}", check=False)
            raise AssertionError(f"{late}; the generations' files: {files}; the panes: {panes!r}") from None
        proc = swarm.popen("resume", run.name, "--output", "group", env=env)
        wait_until(lambda: any(e["event"] == "worker_adopted" for e in events(run)), timeout=60, what="b adopted")
        (swarm.cwd / "go2").touch()
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    finally:
        stop(swarm, proc, run)
    windows = tmux("list-windows", "-a", "-F", "#{session_name} #{window_name}").splitlines()
    assert len(windows) == 1 and windows[0].startswith("host ") and "swarm" not in windows[0], windows
    assert "stays" not in err, err


# ----- retry: a new supervisor takes over what the run's earlier one left ------------------------

FLAKY = """
[swarm]
jobs = 3
[[task]]
name = "flaky"
cmd = "test -e flaked || { touch flaked; echo flaky; exit 3; }"
[[task]]
name = "bad"
cmd = "echo bad; exit 4"
[[task]]
name = "ok"
cmd = "echo ok"
"""


def boards(panes: dict[str, str]) -> list[str]:
    return [pane for pane, title in panes.items() if title.endswith("· board")]


def retried_flaky(swarm: Swarm, args: tuple[str, ...], env: dict[str, str],
                  panes: Callable[[Path], dict[str, str]]) -> tuple[Path, str, Result]:
    """FLAKY run live with ``args``, flaky's and bad's failed panes kept beside its board, then
    retried: flaky now succeeds, and its earlier attempt's kept pane closes, as within one run;
    bad fails again, and both its panes are kept (within --keep-failed-panes: room for the three
    failures, whichever of flaky's and bad's ends comes first); the earlier supervisor's board,
    stale, makes way for the retry's. ``panes(run)``: the run's panes and their titles. The
    run, bad's earlier pane and the retry's result."""
    swarm.write("s.toml", FLAKY)
    res = swarm("run", "s.toml", *args, "--ui", "live", "--keep-failed-panes", "2", "--output", "group", env=env)
    run = swarm.latest()
    try:
        assert res.code == 1, res.stderr
        first = swarm.tasks(run)
        kept = {n: first[n]["pane_id"] for n in ("flaky", "bad")}
        before = wait_until(lambda: (v := panes(run)) and set(kept.values()) <= set(v) and v, timeout=60,
                            what="the kept panes listed")
        assert len(boards(before)) == 1, before
        res = swarm("retry", run.name, "--keep-failed-panes", "3", "--output", "group", env=env)
    finally:
        kill_run_processes(run.name)
    assert res.code == 1, res.stderr
    rows = swarm.tasks(run)
    assert (rows["flaky"]["status"], rows["bad"]["status"]) == ("succeeded", "failed")
    left = wait_until(lambda: (v := panes(run)) and rows["flaky"]["pane_id"] not in v and v, timeout=60,
                      what="the retried success's pane closed after its hold")
    assert kept["flaky"] not in left, f"the kept pane of flaky's failed attempt stayed: {left}"
    assert len(boards(left)) == 1 and boards(left) != boards(before), f"the earlier board stayed: {left}"
    assert set(left) == {*boards(left), kept["bad"], rows["bad"]["pane_id"]}, left
    assert left[kept["bad"]].endswith("bad · failed (exit 4)"), left
    assert "warning" not in res.stderr, res.stderr
    assert run_processes(run.name) == []
    return run, kept["bad"], res


@tmux_needed
def test_tmux_a_retry_closes_the_kept_panes_of_a_task_that_now_succeeds_and_the_stale_board(swarm, tmux):
    """``retried_flaky`` in tmux: the retry's window is in a session of its own."""
    view = tmux_panes(tmux)
    run, _, res = retried_flaky(swarm, ("--backend", "tmux"), tmux_env(tmux), lambda run: view())
    assert f"tmux session 'swarm-{run.name}' stays" in res.stderr, res.stderr


@tmux_needed
@pytest.mark.parametrize("retried_from", ["inside", "outside, CI", "outside"])
def test_tmux_a_retry_closes_the_runs_panes_of_an_earlier_window_never_the_users(swarm, tmux, retried_from):
    """The run, started in the user's session, left its window there with flaky's and bad's
    failed panes; the user opened a shell beside them. Retried from the same session, every
    task now succeeding, the retry killed that window whole, the user's shell with it (an
    adversary). Retried from outside under CI (its own session, closed at its end), bad failing
    again, it closed its session and neither closed the earlier window's panes nor named them.
    A retry closes the run's panes of a window it took over one by one, wherever it is; what
    it leaves there, its notice names."""
    inside = tmux_env(tmux, inside=True)
    swarm.write("s.toml", FLAKY.replace('cmd = "echo bad; exit 4"', 'cmd = "test -e fixed || exit 4"'))
    res = swarm("run", "s.toml", "--ui", "live", "--keep-failed-panes", "2", "--output", "group", env=inside)
    run = swarm.latest()
    try:
        assert res.code == 1, res.stderr
        first = swarm.tasks(run)
        window = tmux("display-message", "-p", "-t", first["bad"]["pane_id"], "#{window_id}").strip()
        shell = tmux("split-window", "-d", "-P", "-F", "#{pane_id}", "-t", window, "sleep 600").strip()
        if retried_from == "inside":
            (swarm.cwd / "fixed").touch()
            res = swarm("retry", run.name, "--output", "group", env=inside)
        else:
            ci = {"CI": "true"} if "CI" in retried_from else {}
            # room for the three failures, whichever of flaky's and bad's ends comes first
            res = swarm("retry", run.name, "--backend", "tmux", "--keep-failed-panes", "3", "--output", "group",
                        env=dict(tmux_env(tmux), **ci))
    finally:
        kill_run_processes(run.name)
    assert res.code == (0 if retried_from == "inside" else 1), res.stderr
    if retried_from == "outside":  # bad's kept panes stay, its earlier one in the user's session: named
        close = f"the run's earlier panes in another session stay: close with tmux -S {tmux.socket} kill-pane -t "
        assert close + first["bad"]["pane_id"] in res.stderr, res.stderr
        assert shell in tmux_panes(tmux)()
        tmux("kill-session", "-t", f"=swarm-{run.name}")
        return
    left = wait_until(lambda: (v := tmux_panes(tmux)()) and first["flaky"]["pane_id"] not in v
                      and first["bad"]["pane_id"] not in v and v, timeout=60, what="the run's earlier panes closed")
    assert shell in left, f"the user's shell was closed: {left}"
    assert tmux("display-message", "-p", "-t", shell, "#{window_id}").strip() == window
    assert all(not title for pane, title in left.items() if pane != shell), left  # no pane of the run stays
    assert "stays" not in res.stderr, res.stderr


@tmux_needed
def test_tmux_every_retry_names_the_runs_windows_left_in_another_server(swarm, tmux):
    """The run was started inside another tmux server than its retries' (the user's own,
    on a socket of its own). The first retry named the windows it left there; the second
    knew only the place the first recorded — its own — and named nothing (an adversary)."""
    other = tmux.tmpdir / "other"
    external.run(["tmux", "-S", str(other), "new-session", "-d", "-s", "u2", "-x", "200", "-y", "50"],
                 timeout=10, env=tmux.client.env)
    try:
        pid = external.run(["tmux", "-S", str(other), "display-message", "-p", "#{pid}"], timeout=10,
                           env=tmux.client.env).stdout.strip()
        inside = dict(tmux_env(tmux), TMUX=f"{other},{pid},0", TMUX_PANE="%0")
        swarm.write("t.txt", "exit 3\necho fine\n")
        res = swarm("run", "t.txt", "--ui", "live", "--output", "group", env=inside)
        run = swarm.latest()
        assert res.code == 1, res.stderr
        try:
            for _ in range(2):
                res = swarm("retry", run.name, "--backend", "tmux", "--output", "group", env=tmux_env(tmux))
                assert res.code == 1, res.stderr
                assert f"the run's earlier window stays in another tmux server: close with tmux -S {other} " \
                       "kill-window -t @" in res.stderr, res.stderr
        finally:
            kill_run_processes(run.name)
    finally:
        external.run(["tmux", "-S", str(other), "kill-server"], timeout=10, env=tmux.client.env, check=False)


@tmux_needed
def test_tmux_a_retry_of_an_interrupted_run_retitles_and_settles_the_panes_it_adopts(swarm, tmux):
    """The supervisor was killed with four tasks running in panes; ok and bad ended while
    none ran. ``retry bad`` follows the run's panes as ``resume`` would, and runs bad again
    in a pane of its own: ok's pane closes, bad's failure is retitled, then closed by its
    retry's failure (--keep-failed-panes 1, the oldest first); late and late-bad, adopted, are
    retitled with their outcomes as they end — none stays titled ``running``."""
    env = tmux_env(tmux)
    view = tmux_panes(tmux)
    killed = Killed(swarm, env, ("--backend", "tmux", "--ui", "live"), view)
    run, panes = killed.run, killed.panes
    proc = None
    try:
        (swarm.cwd / "go").touch()
        wait_until(lambda: exits(run) == 2, timeout=60, what="ok and bad ended while no supervisor ran")
        proc = swarm.popen("retry", run.name, "bad", "--output", "group", env=env)
        wait_until(killed.adopted, timeout=60, what="the retry adopted the late ones")
        wait_until(lambda: panes["ok"] not in view() and panes["bad"] not in view(), timeout=60,
                   what=f"ok's pane closed, bad's closed by its retry's failure: {view()}")
        (swarm.cwd / "go2").touch()
        _, err = proc.communicate(timeout=120)
    finally:
        killed.close(proc)
    assert proc.returncode == 1, err
    rows = swarm.tasks(run)
    assert {n: r["status"] for n, r in rows.items()} == {
        "ok": "succeeded", "bad": "failed", "late": "succeeded", "late-bad": "failed", "new": "succeeded"}
    left = wait_until(lambda: (v := view()) and panes["late"] not in v and v, timeout=60,
                      what="late's pane closed after its hold")
    assert not [t for t in left.values() if t.endswith("running")], f"a pane still titled running: {left}"
    # --keep-failed-panes 1: late-bad's failure, the newest, is the one kept
    assert left.get(panes["late-bad"]) == killed.title("late-bad", "failed (exit 4)"), left
    assert len(boards(left)) == 1 and len(left) == 2, left
    assert run_processes(run.name) == []


# ----- Zellij: the fake (0.45.0 with pane ids, 0.43.1 without), then the real 0.45.0 ------------

def fake_panes(swarm: Swarm, fz, version: str, session: str | None = None) -> Panes:
    """The panes of the swarm's run's tab, in ``session`` (default: the run's own)."""
    def view() -> dict[str, str]:
        runs = swarm.runs()
        if not runs:
            return {}
        try:
            tab = fz.tab(version, runs[0].name, session or f"swarm-{runs[0].name}")
        except AssertionError:  # the tab went with its last pane, or its session
            return {}
        return {p["pane_id"]: p["title"] for p in tab["panes"]}
    return view


@pytest.mark.parametrize("version", ["0.45.0", full("0.44.3")])
def test_zellij_resume_settles_the_adopted_panes(swarm, fz, version):
    env, view = fz.env(version, **FAST), fake_panes(swarm, fz, version)
    killed = Killed(swarm, env, ("--backend", "zellij", "--ui", "live"), view)
    before = len([c for c in fz.calls() if c["subcommand"] in ("run", "new-pane", "new-tab")])
    follow_through(swarm, killed, retitled=True)
    assert len([c for c in fz.calls() if c["subcommand"] in ("run", "new-pane", "new-tab")]) == before
    assert sorted(view().values()) == sorted([f"{killed.run.name} · board",
                                              killed.title("late-bad", "failed (exit 4)")])


def test_zellij_before_044_resume_ends_the_holds_the_policy_lets_go(swarm, fz):
    """Before 0.44 a pane keeps the title it was made with and is held by its wrapper: a
    success's hold ends by itself, a surplus failure's is ended by the resumed supervisor."""
    version = "0.43.1"
    fz.host("host", version, client=True)
    env, view = fz.env(version, inside="host", **FAST), fake_panes(swarm, fz, version, "host")
    killed = Killed(swarm, env, ("--backend", "zellij", "--ui", "live"), view)
    follow_through(swarm, killed, retitled=False)
    assert sorted(view().values()) == sorted([f"{killed.run.name} · board",
                                              killed.title("late-bad", "running")])


def test_real_zellij_resume_settles_the_adopted_panes(swarm, rz):
    env = rz.env(**FAST)

    def view() -> dict[str, str]:
        runs = swarm.runs()
        if not runs or f"swarm-{runs[0].name}" not in rz.session_names():
            return {}
        return {f"terminal_{p['id']}": p["title"] for p in rz.panes(f"swarm-{runs[0].name}")
                if not p["is_plugin"] and p.get("tab_name") == f"swarm:{runs[0].name}"}

    killed = Killed(swarm, env, ("--backend", "zellij", "--ui", "live"), view)
    follow_through(swarm, killed, retitled=True)
    assert sorted(view().values()) == sorted([f"{killed.run.name} · board",
                                              killed.title("late-bad", "failed (exit 4)")])


@pytest.mark.parametrize("version", ["0.45.0", full("0.44.3")])
def test_zellij_a_retry_closes_the_kept_panes_of_a_task_that_now_succeeds_and_the_stale_board(swarm, fz, version):
    """``retried_flaky`` in the fake Zellij, from the user's session: the retry makes a tab of
    its own, bad's earlier failure stays in the earlier tab."""
    fz.host("host", version, client=True)

    def panes(run: Path) -> dict[str, str]:
        return {p["pane_id"]: p["title"] for t in fz.session(version, "host")["tabs"]
                if t["name"].startswith(f"swarm:{run.name}") for p in t["panes"]}

    retried_flaky(swarm, ("--backend", "zellij"), fz.env(version, inside="host", **FAST), panes)


def test_real_zellij_a_retry_closes_the_kept_panes_of_a_task_that_now_succeeds_and_the_stale_board(swarm, rz, tmux):
    """``retried_flaky`` against the real Zellij: in the user's session (a client on a tmux
    pane), the retry's tab beside the run's."""
    rz.host("host", tmux)

    def panes(run: Path) -> dict[str, str]:
        return {f"terminal_{p['id']}": p["title"] for p in rz.panes("host")
                if not p["is_plugin"] and str(p.get("tab_name")).startswith(f"swarm:{run.name}")}

    retried_flaky(swarm, ("--backend", "zellij"), rz.env(inside="host", **FAST), panes)


# ----- in process: the lifecycle of adopted panes, and a resumed backend's order of calls --------

def test_adopted_panes_settle_as_their_recorded_outcomes_say():
    """Adopted in the order their generations ended: a success closes at once (its hold died
    with its supervisor) and lets its task's earlier failures go; failures are kept up to
    keep_failed, the oldest closing first; a running one waits for its end."""
    from zellij_swarm.backends._lifecycle import PaneLifecycle

    closed: list[str] = []
    life: PaneLifecycle[str] = PaneLifecycle(cap=16, keep_failed=2, hold=5.0, schedule=lambda d, f: None,
                                             close=closed.append)
    for pane, task, status in [("%1", "a", "failed"), ("%2", "b", "failed"), ("%3", "a", "succeeded"),
                               ("%4", "c", "failed"), ("%5", "d", "failed"), ("%6", "e", "cancelled"),
                               ("%7", "f", None)]:
        life.adopt(pane, pane, task, status)
    assert closed == ["%1", "%3", "%2", "%6"]
    assert [pane for _, pane in life.kept] == ["%4", "%5"] and life.running == {"%7": "%7"}


class _Live:
    """A stand-in live backend: what it was asked, in order."""

    name = "tmux"
    output_copied_after_end = False

    def __init__(self, gone: Exception | None = None) -> None:
        self.calls: list[tuple] = []
        self.gone = gone

    def adopt(self, ctx, place, panes) -> None:
        self.calls.append(("adopt", [p.pane_id for p in panes]))
        if self.gone is not None:
            raise self.gone

    def ended(self, req, pane_id, status, label) -> None:
        self.calls.append(("ended", pane_id, status))

    def session_alive(self) -> bool:
        self.calls.append(("session_alive",))
        return self.gone is None

    def close(self, *, cancelled: bool, failed: bool = True) -> None:
        self.calls.append(("close", cancelled, failed))

    def leftover_hint(self) -> str | None:
        return "the window stays"


def _resumed(tmp_path: Path, live: _Live):
    from zellij_swarm.backends.base import LaunchRequest, RunContext, RunPane
    from zellij_swarm.backends.resumed import ResumedBackend
    from zellij_swarm.config import settings
    from zellij_swarm.records.rundir import RunPaths

    paths = RunPaths(tmp_path / "20260101-000000-abcdef")
    req = LaunchRequest(paths.gen(1, 1), 1, "a", pane=True)
    warnings: list[tuple[str, str]] = []
    ctx = RunContext(paths=paths, run_id=paths.run_id, settings=settings.resolve({"ui": "live"}, {}),
                     schedule=lambda d, f: None, warn=lambda c, m: warnings.append((c, m)), notice=lambda t: None,
                     renderer_argv=lambda *a: [])
    backend = ResumedBackend(live, {"backend": "tmux", "socket": "/s", "session": "s", "session_id": "$0"},
                             [RunPane(req, "%1", None)])
    return backend, req, ctx, warnings


def test_ends_told_before_the_backend_opens_are_settled_once_its_panes_are_adopted(tmp_path):
    """resume records the ends that happened while no supervisor ran before it opens its
    backend: they wait for the adoption; whether the session lives is answered at once."""
    live = _Live()
    backend, req, ctx, warnings = _resumed(tmp_path, live)
    backend.ended(req, "%1", "succeeded", "succeeded")
    assert backend.session_alive() is True
    assert live.calls == [("session_alive",)]
    backend.open(ctx)
    assert live.calls[1:] == [("adopt", ["%1"]), ("ended", "%1", "succeeded")]
    assert backend.shows(1) is False and backend.pane_mode(1) is None  # new generations run headless
    backend.close(cancelled=False, failed=False)
    assert live.calls[-1] == ("close", False, False) and backend.leftover_hint() == "the window stays"
    assert backend.name == "tmux" and warnings == []


def test_a_place_found_gone_leaves_the_run_headless_with_one_warning(tmp_path):
    from zellij_swarm.exc import BackendError

    live = _Live(gone=BackendError("session_missing", "tmux: the run's session 's' is gone"))
    backend, req, ctx, warnings = _resumed(tmp_path, live)
    backend.ended(req, "%1", "failed", "failed (exit 3)")
    backend.open(ctx)
    backend.close(cancelled=False)
    assert live.calls == [("adopt", ["%1"])]  # nothing more is asked of a place that is gone
    assert warnings == [("session_missing", "tmux: the run's session 's' is gone; the run goes on headless, its "
                                            "panes no longer followed")]
    assert backend.name == "headless" and backend.leftover_hint() is None
    assert backend.session_alive() is False
    assert backend.place() == {"backend": "tmux", "socket": "/s", "session": "s", "session_id": "$0"}


def test_the_end_of_run_line_names_the_run_whose_logs_it_means():
    """A resumed run is not always the newest, which ``logs TASK`` would take."""
    import io

    from zellij_swarm.render.console import ConsoleReporter

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    err = Terminal()
    reporter = ConsoleReporter("progress", out=io.BytesIO(), err=err, run_id="20260101-000000-abcdef")
    reporter.finished({"run_id": "20260101-000000-abcdef", "state": "finished", "counts": {"succeeded": 2},
                       "metrics": {"wall_time_ms": 1500}}, 0)
    # (too wide for a terminal that says no width, taken for 80 columns: the command on a line of its own)
    assert err.getvalue().splitlines()[-2:] == \
        ["zellij-swarm: read any task's output with:", "  zellij-swarm logs 20260101-000000-abcdef TASK"]


def test_zellij_an_adopted_pane_is_marked_waiting_and_unmarked(swarm, fz):
    """From 0.44: the resumed supervisor renames an adopted worker's pane (and the swarm's
    tab) while it waits for input, and takes the mark away when it reads."""
    version = "0.45.0"
    swarm.write("w.toml", '[swarm]\njobs = 1\n[[task]]\nname = "ask"\n'
                          "cmd = 'read a; until [ -e go ]; do sleep 0.05; done; read b; echo $a$b'\n")
    env = fz.env(version, **FAST)
    proc = swarm.popen("run", "w.toml", "--backend", "zellij", "--ui", "live", "--output", "group", env=env)
    run = swarm.started()
    session = f"swarm-{run.name}"

    def shown() -> tuple[str, str]:
        tabs = [t for t in fz.session(version, session)["tabs"] if t["name"].startswith(f"swarm:{run.name}")]
        return next(p["title"] for p in tabs[0]["panes"] if p["pane_id"] == pane), tabs[0]["name"]

    def typed(text: str) -> None:
        fz.zellij("--session", session, "action", "write-chars", "--pane-id", pane, text, version=version)

    try:
        pane = wait_until(lambda: waiting_pane(swarm, run), timeout=60, what="ask waiting in its pane")
        wait_until(lambda: shown()[1] == f"swarm:{run.name} (1 waiting)", what="the tab marked")
        proc.kill()
        proc.wait(timeout=10)
        proc = swarm.popen("resume", run.name, "--output", "group", env=env)
        waiting = ("slot 1 · ask · waiting for input", f"swarm:{run.name} (1 waiting)")
        wait_until(lambda: any(e["event"] == "run_resumed" for e in events(run)) and shown() == waiting, timeout=60,
                   what=f"marked waiting: {shown()}")
        typed("x\n")
        wait_until(lambda: shown() == ("slot 1 · ask · running", f"swarm:{run.name}"), timeout=60,
                   what=f"the mark taken away: {shown()}")
        (swarm.cwd / "go").touch()
        wait_until(lambda: shown() == waiting, timeout=60, what=f"marked waiting again: {shown()}")
        typed("y\n")
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    finally:
        stop(swarm, proc, run)
    assert swarm.tasks(run)["ask"]["status"] == "succeeded"


@pytest.mark.parametrize("backend", ["tmux", "zellij"])
def test_a_multiplexer_that_cannot_be_run_is_said_as_such(tmp_path, backend):
    """The run's place cannot be looked at: the warning says the multiplexer is missing, not
    that its session is gone."""
    from zellij_swarm.backends.base import RunContext
    from zellij_swarm.backends.resumed import backend_for
    from zellij_swarm.config import settings
    from zellij_swarm.records.rundir import RunPaths

    paths = RunPaths(tmp_path / "20260101-000000-abcdef")
    warnings: list[tuple[str, str]] = []
    ctx = RunContext(paths=paths, run_id=paths.run_id, settings=settings.resolve({"ui": "live"}, {}),
                     schedule=lambda d, f: None, warn=lambda c, m: warnings.append((c, m)), notice=lambda t: None,
                     renderer_argv=lambda *a: [])
    place = {"backend": backend, "socket": "/nowhere/default", "session": "swarm-x", "session_id": "$0",
             "windows": ["@1"], "tab": "swarm:x", "created_session": True}
    resumed = backend_for(place, {"PATH": str(tmp_path)}, [], close_session=False)
    resumed.open(ctx)
    assert [code for code, _ in warnings] == ["multiplexer_missing"] and resumed.name == "headless"


@tmux_needed
def test_tmux_a_pane_whose_session_went_before_its_worker_began_runs_again_after_resume(swarm, tmux):
    """A pane's generation claimed, its worker not begun (no launch heartbeat), its session
    gone while no supervisor ran: ``resume`` took it for a headless generation, ``lost
    (no_exit_record)``, and never ran it (an adversary, 6 runs in 8). It is a pane's (its own
    wrapper), lost with its session: it runs again headless, no attempt spent, once.
    Here the test holds the panes' start gate, so the second pane's first stage waits there,
    claimed, until it is killed with the session."""
    env = tmux_env(tmux)
    swarm.write("g.toml", "[swarm]\njobs = 1\n"
                          '[[task]]\nname = "first"\ncmd = "until [ -e go ]; do sleep 0.02; done"\n'
                          '[[task]]\nname = "second"\ncmd = "echo ran >> ledger"\n')
    proc = swarm.popen("run", "g.toml", "--backend", "tmux", "--ui", "live", "--output", "quiet", env=env)
    run = swarm.started()
    gate = None
    try:
        wait_until(lambda: began(run) == 1, what="the first worker")
        gate = os.open(run / "panes.gate", os.O_RDWR)
        wait_until(lambda: _locked(gate), what="the start gate, between two batches")
        (swarm.cwd / "go").touch()
        second = run / "slots/slot-1/gen-2"
        wait_until(lambda: (second / "claim").exists() and (second / "claim").read_text().strip(),
                   what="the second pane's claim")
        proc.kill()
        proc.wait(timeout=10)
        stage = int((second / "claim").read_text())
        psutil.Process(stage).send_signal(signal.SIGKILL)  # the pane's first stage, waiting at the gate
        tmux("kill-server")
        os.close(gate)
        gate = None
        assert not (second / "heartbeat.jsonl").exists() or not (second / "heartbeat.jsonl").read_text()
        res = swarm("resume", run.name, env=env)
        assert res.code == 0, res.stderr
        row = swarm.tasks(run)["second"]
        assert (row["status"], row["attempts"], row["pane_id"]) == ("succeeded", 1, None), row
        assert [a["reason"] for a in row["history"]] == ["multiplexer_lost", None]
        assert (swarm.cwd / "ledger").read_text() == "ran\n"
    finally:
        if gate is not None:
            os.close(gate)
        stop(swarm, proc, run)


def _locked(fd: int) -> bool:
    """The lock on ``fd`` taken, exclusive, now (False: someone holds it)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


@pytest.mark.parametrize("wrapper,launch,in_pane", [
    (True, None, True),  # a pane's, its worker never began
    (True, {"pane_id": "%3"}, True),
    (True, {"pane_id": None}, False),  # a pane's generation run headless instead
    (False, None, False),  # a headless one that never began
    (False, {"pane_id": None}, False),
])
def test_a_generation_is_a_pane_s_by_its_launch_or_else_by_its_own_wrapper(tmp_path, wrapper, launch, in_pane):
    gen = rundir.RunPaths(tmp_path).gen(1, 2)
    gen.dir.mkdir(parents=True)
    if wrapper:
        gen.wrapper.write_text("# a pane's own wrapper\n")
    assert resume.pane_generation(gen, launch) is in_pane


@pytest.mark.parametrize("backend", [pytest.param("tmux", marks=tmux_needed), "real-zellij"])
@pytest.mark.parametrize("how", ["exit 129", "kill -HUP $$"])
def test_a_worker_s_own_sighup_before_its_session_went_is_its_failure_after_resume(swarm, backend, how, request):
    """A pane's worker that exited 129 (or died of a SIGHUP it sent itself) while no supervisor
    ran, its pane's leader gone with no hang-up mark, its session killed only after that:
    ``resume`` found the session gone and took the death for the session's, ``lost
    (multiplexer_lost)``, and ran the task again — its work done twice, its retries 0 (an
    adversary, 3 runs in 3 in tmux, 1 in 1 in the real Zellij 0.45). A leader marks a hang-up
    that comes while its second stage lives: one gone without a mark saw none, and the SIGHUP
    was the worker's own."""
    if backend == "tmux":
        t = request.getfixturevalue("tmux")
        env, args, kill = tmux_env(t), ("--backend", "tmux"), lambda run: t("kill-server")
    else:
        rz = request.getfixturevalue("rz")
        env, args = rz.env(**FAST), ("--backend", "zellij")
        kill = lambda run: rz.zellij("kill-session", f"swarm-{run.name}")  # noqa: E731
    swarm.write("h.toml", '[[task]]\nname = "h"\n'
                          f'cmd = "until [ -e go ]; do sleep 0.02; done; echo h >> ledger; {how}"\n')
    proc = swarm.popen("run", "h.toml", *args, "--ui", "live", "--output", "quiet", env=env)
    run = swarm.started()
    try:
        wait_until(lambda: began(run) == 1, timeout=60, what="the worker begun in its pane")
        proc.kill()
        proc.wait(timeout=10)
        gen = run / "slots/slot-1/gen-1"
        started = json.loads((gen / "heartbeat.jsonl").read_text().splitlines()[0])
        assert started["pane_id"]
        leader = psutil.Process(started["pid"])  # (alive: its worker waits for ``go``)
        (swarm.cwd / "go").touch()
        wait_until(lambda: exits(run) == 1, what="the worker's end recorded")
        # (not pid_exists, then status: CI saw it reaped between the two)
        wait_until(lambda: not fakeprocs.alive(leader), what="the pane's leader gone")
        assert not (gen / "hangup").exists()
        kill(run)
        res = swarm("resume", run.name, "--output", "quiet", env=env)
        assert res.code == 1, res.stderr
        row = swarm.tasks(run)["h"]
        assert [(a["status"], a["reason"], a["exit_code"]) for a in row["history"]] == [("failed", None, 129)], row
        assert (swarm.cwd / "ledger").read_text() == "h\n", "run once"
    finally:
        stop(swarm, proc, run)
