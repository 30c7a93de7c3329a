"""``renderer_died`` (SPEC §2, §7; issue 11 item 6): a board or slot-view pane that dies while the
run goes on — its renderer killed, its pane closed, its whole session gone — is one warning per
run, ``status`` says the view is gone, and the tasks run on unaffected. A renderer that ends
because the run ended is not a death.

``ViewWatch`` (zellij_swarm/engine/view_watch.py) first, on its own; then end to end through the CLI,
compact mode on a private tmux server and on the fake Zellij (0.45.0, 0.43.1), and live mode's
board on tmux."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest
from swarmtest import GATE, full, validate, wait_until
from tmuxtest import outside_env
from zellijtest import FAST

from zellij_swarm import pid_end
from zellij_swarm.engine import view_watch
from zellij_swarm.engine.view_watch import Registration, ViewWatch
from zellij_swarm.records.rundir import RunPaths, make_private_dir
from zellij_swarm.render.loop import Frame, Loop

# ----- ViewWatch on its own ---------------------------------------------------------------


class Schedule:
    def __init__(self) -> None:
        self.calls: list = []

    def __call__(self, delay, fn):
        self.calls.append((delay, fn))


@pytest.fixture
def run(tmp_path: Path) -> RunPaths:
    r = RunPaths(tmp_path / "run")
    make_private_dir(r.dir)
    return r


@pytest.fixture
def sleeper():
    procs: list[subprocess.Popen] = []

    def start() -> subprocess.Popen:
        p = subprocess.Popen(["sleep", "60"])
        procs.append(p)
        return p

    yield start
    for p in procs:
        p.kill()
        p.wait()


def readable(fd: int, timeout: float = 5.0) -> bool:
    return bool(select.select([fd], [], [], timeout)[0])


def read_until(w: ViewWatch, what: str) -> list:
    got: list = []

    def step():
        if readable(w.fileno(), 0.05):
            got.extend(w.read())
        return got

    return wait_until(step, timeout=5, what=what)


def test_a_registered_view_that_dies_is_reported_once(run, sleeper):
    w = ViewWatch(run, schedule=Schedule())
    try:
        assert (run.dir / "views").is_dir() and (run.dir / "views").stat().st_mode & 0o777 == 0o700
        board, slot2 = sleeper(), sleeper()
        assert Registration(run, "board").write(board.pid)
        assert Registration(run, "slot-view", 2).write(slot2.pid)
        reg = run.dir / "views" / "slot-2.json"
        assert reg.stat().st_mode & 0o777 == 0o600
        wait_until(lambda: (readable(w.fileno(), 0.05) and w.read() == [] and len(w.rows()) == 2), what="followed")
        assert [(r["view"], r["state"], r["pid"]) for r in w.rows()] == [
            ("board", "alive", board.pid), ("slot-2", "alive", slot2.pid)]
        slot2.kill()
        slot2.wait()
        gone = read_until(w, "slot-2 gone")
        assert gone == [view_watch.Gone("slot-2", "slot-view", 2, slot2.pid)]
        assert [r["state"] for r in w.rows()] == ["alive", "gone"]
        assert not readable(w.fileno(), 0.2) and w.read() == []  # said once
        for row in w.rows():
            validate({"run_id": "r", "state": "running", "settings": {}, "tasks": [], "slots": [], "metrics": {},
                      "warnings": [], "views": [row]}, "status")
    finally:
        w.close()


def test_a_reused_pid_or_a_dead_registrant_is_gone_at_once(run, sleeper):
    w = ViewWatch(run, schedule=Schedule())
    try:
        other = sleeper()
        # a registration naming a live pid whose start time is not the registrant's
        view_watch.rundir.write_json_atomic(run.dir / "views" / "board.json", {
            "view": "board", "kind": "board", "slot": None, "pid": other.pid,
            "start": pid_end.start_ticks(other.pid) + 1, "at": time.time()})
        assert read_until(w, "board gone") == [view_watch.Gone("board", "board", None, other.pid)]
    finally:
        w.close()


def test_a_view_that_comes_back_is_alive_again(run, sleeper):
    w = ViewWatch(run, schedule=Schedule())
    try:
        first = sleeper()
        Registration(run, "slot-view", 1).write(first.pid)
        wait_until(lambda: readable(w.fileno(), 0.05) and (w.read() or True) and w.rows(), what="followed")
        first.kill()
        read_until(w, "gone")
        second = sleeper()
        Registration(run, "slot-view", 1).write(second.pid)
        wait_until(lambda: (readable(w.fileno(), 0.05) and w.read() == [])
                   and w.rows()[0]["state"] == "alive" and w.rows()[0]["pid"] == second.pid, what="back")
    finally:
        w.close()


def test_registrations_of_an_earlier_life_dead_ones_dropped_live_ones_followed(run, sleeper):
    make_private_dir(run.dir / "views")
    dead = subprocess.Popen(["true"])
    dead.wait()
    live = sleeper()
    Registration(run, "slot-view", 1).write(dead.pid)
    Registration(run, "board").write(live.pid)
    w = ViewWatch(run, schedule=Schedule())
    try:
        assert not (run.dir / "views" / "slot-1.json").exists()
        assert [(r["view"], r["state"]) for r in w.rows()] == [("board", "alive")]
        live.kill()
        assert read_until(w, "board gone")[0].name == "board"
    finally:
        w.close()


def test_a_retry_follows_none_of_the_earlier_lifes_views(run, sleeper):
    """A ``retry`` closes the earlier supervisor's board and slot views it finds and opens its
    own (``take_over``). Followed, the old board's end was a ``renderer_died`` — whenever it
    was closed before its successor's registration replaced it (the tmux retry test, 1 in
    10). Its own views, registered after it began, it follows."""
    make_private_dir(run.dir / "views")
    old_board, old_slot = sleeper(), sleeper()
    Registration(run, "board").write(old_board.pid)
    Registration(run, "slot-view", 1).write(old_slot.pid)
    w = ViewWatch(run, schedule=Schedule(), earlier=False)
    try:
        assert w.rows() == []
        old_slot.kill()
        old_slot.wait()
        new_board = sleeper()
        Registration(run, "board").write(new_board.pid)
        wait_until(lambda: (readable(w.fileno(), 0.05) and w.read() == [])
                   and [(r["view"], r["pid"]) for r in w.rows()] == [("board", new_board.pid)], what="the new board")
        old_board.kill()
        old_board.wait()
        assert not readable(w.fileno(), 0.2) or w.read() == []
        new_board.kill()
        assert read_until(w, "the new board gone") == [view_watch.Gone("board", "board", None, new_board.pid)]
    finally:
        w.close()


def test_a_registrant_left_a_zombie_is_of_an_earlier_life_too(run):
    """tmux keeps a dead pane's process unreaped (remain-on-exit): a kept window's board of
    the run's earlier life is a zombie under its own pid and start time. Taken for alive,
    then seen to end at once, it gave ``retry`` a false ``renderer_died``."""
    make_private_dir(run.dir / "views")
    zombie = subprocess.Popen(["true"])
    try:
        wait_until(lambda: psutil.Process(zombie.pid).status() == psutil.STATUS_ZOMBIE, what="a zombie")
        Registration(run, "board").write(zombie.pid)
        w = ViewWatch(run, schedule=Schedule())
        try:
            assert not (run.dir / "views" / "board.json").exists()
            assert w.rows() == [] and not readable(w.fileno(), 0.2)
        finally:
            w.close()
    finally:
        zombie.wait()


def test_without_inotify_views_are_polled(run, sleeper):
    def no_inotify():
        raise OSError(24, "Too many open files")

    sched = Schedule()
    w = ViewWatch(run, schedule=sched, watcher=no_inotify)
    try:
        assert w.polling and sched.calls[0][0] == view_watch.POLL_INTERVAL
        p = sleeper()
        Registration(run, "board").write(p.pid)
        assert not readable(w.fileno(), 0.1)  # nothing tells it yet
        sched.calls.pop(0)[1]()  # the timer fires: a scan, and the next one scheduled
        assert readable(w.fileno(), 1) and w.read() == [] and w.rows()[0]["pid"] == p.pid
        assert len(sched.calls) == 1
        p.kill()
        assert read_until(w, "gone")[0].pid == p.pid
    finally:
        w.close()
    sched.calls.pop(0)[1]()
    assert sched.calls == []  # closed: no more scans


def test_a_renderer_registers_before_its_first_frame_and_only_when_asked(run):
    make_private_dir(run.dir / "views")
    seen = []

    class View:
        def frame(self, cols, rows, now, *, color, notice):
            seen.append((run.dir / "views" / "slot-3.json").exists())
            return Frame(["x"], done=True)

    with open(os.devnull, "w") as out:
        Loop(View(), out=out, size=lambda: (80, 24), handle_signals=False).run()
        assert seen == [False]
        Loop(View(), out=out, size=lambda: (80, 24), handle_signals=False,
             registration=Registration(run, "slot-view", 3)).run()
        assert seen == [False, True]
        rec = json.loads((run.dir / "views" / "slot-3.json").read_text())
        assert rec["pid"] == os.getpid() and rec["start"] == pid_end.start_ticks(os.getpid())


def test_no_views_dir_no_registration(tmp_path):
    r = RunPaths(tmp_path / "norun")
    assert Registration(r, "board").write() is False
    assert not r.dir.exists()


def test_message_names_the_views():
    gone = [view_watch.Gone("slot-3", "slot-view", 3, 11), view_watch.Gone("board", "board", None, 10),
            view_watch.Gone("slot-1", "slot-view", 1, 12)]
    text = view_watch.message(gone, "RUN")
    assert text.startswith("the board and slot views 1, 3 ended while the run goes on (renderer pid 11, 10, 12")
    assert "zellij-swarm board RUN" in text and "zellij-swarm status RUN" in text


# ----- end to end -------------------------------------------------------------------------

needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None,
                                reason="tmux is not installed (scripts/setup installs it)")

# Each task first waits (up to 10 s) until the run's views have registered, so that a slow
# machine cannot end the run before the test looks at them; then it works for ``then``: a
# moment, or until the test opens the gate — a run whose views the test kills one after another
# must still be going when the last is killed, however slow the machine (a sleep was outlasted
# under load: the run ended first, and a view that ends with its run is no death).
def swarm_file(tasks: int, then: str, views: tuple[str, ...] = ("board", "slot-1", "slot-2")) -> str:
    up = " -a ".join(f"-e $d/{v}.json" for v in views)
    wait = f"d=$ZELLIJ_SWARM_ARTIFACT_DIR/../../../../views; i=0; while [ $i -lt 200 ] && ! [ {up} ]; " \
           "do sleep 0.05; i=$((i+1)); done; "
    return "[swarm]\njobs = 2\n" + "".join(
        f"[[task]]\nname = 't{i}'\ncmd = '{wait}{then}; echo t{i}'\n" for i in range(tasks))


GATED = swarm_file(4, GATE)
SHORT = swarm_file(3, "sleep 0.4")
LIVE = swarm_file(4, GATE, views=("board",))


def renderer(run_id: str, *view: str) -> psutil.Process:
    """The renderer process of ``view`` (``board`` or ``slot-view N``) of run ``run_id``."""
    def find():
        for p in psutil.process_iter(["cmdline"]):
            cmd = p.info["cmdline"] or []
            if cmd[1:3] == ["-m", "zellij_swarm"] and cmd[3:4] == [view[0]] and run_id in cmd and \
                    cmd[cmd.index(run_id) + 1:cmd.index(run_id) + len(view)] == list(view[1:]):
                return p
        return None
    return wait_until(find, what=f"renderer {view}")


def registered(run: Path, *names: str) -> None:
    """The views registered, and the backend done opening (its first batch dispatched): a
    renderer registers as soon as its pane runs, which can be before the backend has seen
    every pane — a session killed then fails the opening, which is another test's case."""
    wait_until(lambda: all((run / "views" / f"{n}.json").exists() for n in names)
               and '"batch_dispatch_started"' in (run / "events.jsonl").read_text(), timeout=20,
               what=f"views {names} registered and the backend open")


def events(run: Path) -> list[dict]:
    return [json.loads(ln) for ln in (run / "events.jsonl").read_text().splitlines()]


def status_json(swarm, run: Path) -> dict:
    res = swarm("status", run.name, "--json")
    assert res.code == 0, res.stderr
    snap = json.loads(res.stdout)
    validate(snap, "status")
    return snap


def gone_views(snap: dict) -> set[str]:
    return {v["view"] for v in snap.get("views", []) if v["state"] == "gone"}


def start(swarm, env, ui: str = "compact", text: str = GATED, backend: str = "tmux"):
    swarm.write("s.toml", text)
    proc = swarm.popen("run", "s.toml", "--backend", backend, "--ui", ui, env=env)
    run = swarm.started()
    return proc, run


def ended(swarm, proc, run: Path) -> dict:
    swarm.open_gate()
    _, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    summary = swarm.summary(run)
    assert {t["status"] for t in summary["tasks"]} == {"succeeded"}
    return summary


def died(run: Path) -> list[dict]:
    return [e for e in events(run) if e["event"] == "warning" and e["code"] == "renderer_died"]


@needs_tmux
def test_tmux_compact_killed_renderer_and_closed_board_pane(swarm, tmux):
    proc, run = start(swarm, outside_env(tmux))
    try:
        registered(run, "board", "slot-1", "slot-2")
        os.kill(renderer(run.name, "slot-view", "1").pid, signal.SIGKILL)
        snap = wait_until(lambda: (s := status_json(swarm, run)) and "slot-1" in gone_views(s) and s, what="gone")
        assert snap["state"] == "running"
        assert [w["code"] for w in snap["warnings"]] == ["renderer_died"]
        text = swarm("status", run.name).stdout
        assert "view: slot view 1 gone (renderer_died)" in text
        # the user closes the board's pane: gone too, and still one warning
        board = next(p for p, v in tmux.panes().items() if v["title"].endswith("· board"))
        tmux("kill-pane", "-t", board)
        wait_until(lambda: gone_views(status_json(swarm, run)) == {"slot-1", "board"}, what="board gone")
        summary = ended(swarm, proc, run)
    finally:
        swarm.open_gate()  # a failed test's workers end too
        proc.kill()
    assert len(died(run)) == 1 and died(run)[0]["message"].startswith("slot view 1 ended")
    assert [w["code"] for w in summary["warnings"]] == ["renderer_died"]
    assert gone_views(summary) == {"slot-1", "board"}
    assert {e["view"] for e in events(run) if e["event"] == "view_gone"} == {"slot-1", "board"}
    assert "view: the board and slot view 1 gone" in swarm("status", run.name).stdout


@needs_tmux
def test_tmux_compact_session_killed(swarm, tmux):
    proc, run = start(swarm, outside_env(tmux))
    try:
        registered(run, "board", "slot-1", "slot-2")
        tmux("kill-session", "-t", f"swarm-{run.name}")
        wait_until(lambda: gone_views(status_json(swarm, run)) == {"board", "slot-1", "slot-2"}, what="views gone")
        summary = ended(swarm, proc, run)
    finally:
        swarm.open_gate()  # a failed test's workers end too
        proc.kill()
    assert len(died(run)) == 1 and [w["code"] for w in summary["warnings"]] == ["renderer_died"]
    assert gone_views(summary) == {"board", "slot-1", "slot-2"}


@needs_tmux
def test_tmux_live_board_killed(swarm, tmux):
    proc, run = start(swarm, outside_env(tmux), ui="live", text=LIVE)
    try:
        registered(run, "board")
        renderer(run.name, "board").terminate()
        wait_until(lambda: gone_views(status_json(swarm, run)) == {"board"}, what="board gone")
        summary = ended(swarm, proc, run)
    finally:
        swarm.open_gate()  # a failed test's workers end too
        proc.kill()
    assert len(died(run)) == 1 and gone_views(summary) == {"board"}
    assert [v["view"] for v in summary["views"]] == ["board"]


@needs_tmux
def test_tmux_normal_run_has_no_renderer_died(swarm, tmux):
    proc, run = start(swarm, outside_env(tmux), text=SHORT)
    try:
        summary = ended(swarm, proc, run)
    finally:
        swarm.open_gate()  # a failed test's workers end too
        proc.kill()
    assert summary["warnings"] == []
    assert [(v["view"], v["state"]) for v in summary["views"]] == [
        ("board", "alive"), ("slot-1", "alive"), ("slot-2", "alive")]
    # the renderers end with the run, by themselves, and that is not a death
    wait_until(lambda: all(v["dead"] == "1" for v in tmux.panes().values()), what="renderers finished")
    assert "view:" not in swarm("status", run.name).stdout


ZELLIJ_VERSIONS = ["0.45.0", full("0.43.1")]


@pytest.mark.parametrize("version", ZELLIJ_VERSIONS)
def test_zellij_compact_killed_renderer(swarm, fz, version):
    proc, run = start(swarm, fz.env(version, **FAST), backend="zellij")
    try:
        registered(run, "board", "slot-1", "slot-2")
        os.kill(renderer(run.name, "slot-view", "2").pid, signal.SIGKILL)
        wait_until(lambda: gone_views(status_json(swarm, run)) == {"slot-2"}, what="gone")
        assert "view: slot view 2 gone" in swarm("status", run.name).stdout
        summary = ended(swarm, proc, run)
    finally:
        swarm.open_gate()  # a failed test's workers end too
        proc.kill()
    assert len(died(run)) == 1
    assert [w["code"] for w in summary["warnings"]] == ["renderer_died"]
    assert gone_views(summary) == {"slot-2"}


@pytest.mark.parametrize("version", ZELLIJ_VERSIONS)
def test_zellij_compact_session_killed(swarm, fz, version):
    proc, run = start(swarm, fz.env(version, **FAST), backend="zellij")
    try:
        registered(run, "board", "slot-1", "slot-2")
        fz.zellij("kill-session", f"swarm-{run.name}", version=version)
        wait_until(lambda: gone_views(status_json(swarm, run)) == {"board", "slot-1", "slot-2"}, what="views gone")
        summary = ended(swarm, proc, run)
    finally:
        swarm.open_gate()  # a failed test's workers end too
        proc.kill()
    assert len(died(run)) == 1 and [w["code"] for w in summary["warnings"]] == ["renderer_died"], summary["warnings"]
    assert gone_views(summary) == {"board", "slot-1", "slot-2"}


@pytest.mark.parametrize("version", ZELLIJ_VERSIONS)
def test_zellij_compact_normal_run_has_no_renderer_died(swarm, fz, version):
    proc, run = start(swarm, fz.env(version, **FAST), text=SHORT, backend="zellij")
    try:
        summary = ended(swarm, proc, run)
    finally:
        swarm.open_gate()  # a failed test's workers end too
        proc.kill()
    assert summary["warnings"] == []
    assert [(v["view"], v["state"]) for v in summary["views"]] == [
        ("board", "alive"), ("slot-1", "alive"), ("slot-2", "alive")]


def test_a_view_whose_registration_was_withdrawn_ends_unreported(run, sleeper):
    """A backend that makes its session anew (a ``retry`` of a run whose kept Zellij session
    nobody watched) withdraws the registrations of the views it held, then ends them: their
    end is its doing, no ``renderer_died``."""
    make_private_dir(run.dir / "views")
    board = sleeper()
    assert Registration(run, "board").write(board.pid)
    w = ViewWatch(run, schedule=Schedule())
    try:
        assert [r["view"] for r in w.rows()] == ["board"]
        (run.dir / "views" / "board.json").unlink()
        board.kill()
        board.wait()
        got: list = []

        def let_go() -> bool:
            got.extend(w.read())
            return w.rows() == []

        wait_until(let_go, what="the board let go of")
        assert got == []
    finally:
        w.close()
