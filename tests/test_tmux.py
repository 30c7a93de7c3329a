"""The tmux backend against a real tmux server on a private socket."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fakeprocs import command_line
from swarmtest import (
    GATE,
    Swarm,
    assert_whole_outputs,
    clean_env,
    full,
    kill_run_processes,
    printing_swarm,
    run_processes,
    wait_until,
)
from tmuxtest import inside_env, outside_env

from zellij_swarm.backends.base import or_prune

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None,
                                reason="tmux is not installed (scripts/setup installs it)")

MORE_THAN_SLOTS = """
[swarm]
jobs = 3
[[task]]
name = "a"
cmd = "echo a-out"
[[task]]
name = "b"
cmd = "echo b-out; exit 3"
[[task]]
name = "c"
cmd = "sleep 0.3; echo c-out"
[[task]]
name = "d"
cmd = "echo d-out"
after = ["a"]
[[task]]
name = "e"
cmd = "echo e-out; exit 1"
retries = 1
[[task]]
name = "f"
argv = ["sh", "-c", "echo f-out"]
"""


def outcomes(swarm: Swarm) -> dict[str, tuple]:
    return {n: (r["status"], r["exit_code"], r["signal"], r["attempts"], r["reason"]) for n, r in swarm.tasks().items()}


def events(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]


def finish(swarm: Swarm, res) -> Path:
    run = swarm.latest()
    assert run_processes(run.name) == [], "a worker outlived its run"
    kill_run_processes(run.name)
    return run


@pytest.fixture(scope="module")
def headless_outcomes(tmp_path_factory) -> dict[str, tuple]:
    s = Swarm(tmp_path_factory.mktemp("headless"))
    s.write("s.toml", MORE_THAN_SLOTS)
    assert s("run", "s.toml", "--backend", "headless").code == 1
    return outcomes(s)


@pytest.mark.parametrize("where", ["outside", "inside"])
def test_live_panes_with_require(swarm, tmux, headless_outcomes, where):
    swarm.write("s.toml", MORE_THAN_SLOTS)
    env = (outside_env if where == "outside" else inside_env)(tmux)
    res = swarm("run", "s.toml", "--backend", "tmux", "--ui", "live", "--require-multiplexer", env=env)
    run = finish(swarm, res)
    assert res.code == 1, res.stderr
    assert outcomes(swarm) == headless_outcomes
    evs = events(run)
    assert [e for e in evs if e["event"] == "warning"] == []
    opened = [e for e in evs if e["event"] == "pane_opened"]
    assert len(opened) == 7  # six tasks, one retry
    seen = {(e["slot"], e["gen"]): e["pane_id"] for e in evs if e["event"] == "worker_heartbeat_seen"}
    for e in opened:
        assert e["pane_id"].startswith("%") and seen[(e["slot"], e["gen"])] == e["pane_id"]
        heartbeat_file = run / f"slots/slot-{e['slot']}/gen-{e['gen']}/heartbeat.jsonl"
        heartbeat = json.loads(heartbeat_file.read_text().splitlines()[0])
        assert heartbeat["pane_id"] == e["pane_id"]
    rows = swarm.tasks()
    assert all(r["pane_id"] and r["pane_id"].startswith("%") for n, r in rows.items() if r["attempts"])
    # failed panes stay (dead, titled failed); successful ones close after the hold
    panes = wait_until(lambda: (p := tmux.panes()) and not any(
        "· succeeded" in v["title"] for v in p.values()) and p, what="held panes closed")
    failed = sorted(v["title"] for v in panes.values() if v["dead"] == "1" and "board" not in v["title"])
    e1, e2 = rows["e"]["history"]
    assert failed == sorted([f"slot {rows['b']['slot']} · b · failed (exit 3)",
                             f"slot {e1['slot']} · e · attempt 1/2 · failed (exit 1)",
                             f"slot {e2['slot']} · e · attempt 2/2 · failed (exit 1)"])
    board = [p for p, v in panes.items() if v["title"].endswith("· board")]
    assert len(board) == 1
    # the worker's output was logged and shown in its pane
    assert swarm("logs", run.name, "b").stdout.replace("\r", "") == "b-out\n"
    b_pane = rows["b"]["pane_id"]
    assert "b-out" in tmux.capture(b_pane)
    if where == "inside":  # a dedicated window of the user's session, not a new session
        assert f"swarm-{run.name}" in tmux("list-windows", "-t", "host", "-F", "#{window_name}").split()
        assert tmux("list-sessions", "-F", "#{session_name}").split() == ["host"]


def test_compact_renderer_panes_with_require(swarm, tmux, headless_outcomes):
    swarm.write("s.toml", MORE_THAN_SLOTS)
    res = swarm("run", "s.toml", "--backend", "tmux", "--ui", "compact", "--require-multiplexer", env=outside_env(tmux))
    run = finish(swarm, res)
    assert res.code == 1, res.stderr
    assert outcomes(swarm) == headless_outcomes
    assert [e for e in events(run) if e["event"] == "warning"] == []
    panes = tmux.panes()
    titles = sorted(v["title"] for v in panes.values())
    assert titles == sorted([f"{run.name} · board", "slot 1", "slot 2", "slot 3"])
    # renderers end with the run and keep their final picture
    wait_until(lambda: all(v["dead"] == "1" for v in tmux.panes().values()), what="renderers finished")
    slot_panes = {v["title"]: p for p, v in tmux.panes().items()}
    assert "run finished" in tmux.capture(slot_panes["slot 1"])
    # in reading order, the board first; each dead view keeps its first line (nothing scrolled)
    order = tmux("list-panes", "-s", "-t", f"swarm-{run.name}", "-F", "#{@zsw_title}").splitlines()
    assert order == [f"{run.name} · board", "slot 1", "slot 2", "slot 3"]
    for n in (1, 2, 3):
        assert tmux("capture-pane", "-p", "-t", slot_panes[f"slot {n}"]).startswith(f"slot {n} · ")
    board = tmux.capture(slot_panes[f"{run.name} · board"])
    assert "4 succeeded" in board and "2 failed" in board


@pytest.mark.parametrize("where,ui", [("outside", "live"), ("inside", "compact"),
                                      full("outside", "compact"), full("inside", "live")])
def test_panes_run_whatever_the_users_shell(swarm, tmux, headless_outcomes, where, ui):
    """A service account has no SHELL and nologin as its login shell (CI's nobody); another
    user's shell is fish. tmux runs a one-word pane command through its default-shell, so the
    swarm hands it argvs: here a default-shell that runs nothing changes no outcome."""
    swarm.write("s.toml", MORE_THAN_SLOTS)
    if where == "inside":  # the user's own server, with its own default-shell
        env = inside_env(tmux)
        tmux("set-option", "-g", "default-shell", "/bin/false")
    else:  # a server the run starts: tmux takes SHELL for its default-shell
        env = outside_env(tmux, SHELL="/bin/false")
    res = swarm("run", "s.toml", "--backend", "tmux", "--ui", ui, "--require-multiplexer", env=env)
    run = finish(swarm, res)
    assert res.code == 1, res.stderr
    assert outcomes(swarm) == headless_outcomes
    assert [e for e in events(run) if e["event"] == "warning"] == []
    titles = [v["title"] for v in tmux.panes().values()]
    assert f"{run.name} · board" in titles


@pytest.mark.parametrize("rows", [30, full(12)])
def test_dead_views_keep_their_title_when_the_window_shrinks_after_the_end(swarm, tmux, rows):
    """A client of another size attaches after the end: a dead view that filled its pane
    loses rows at its bottom, never its title (the renderer left its cursor at the top)."""
    swarm.write("s.toml", '[[task]]\nname = "flood"\ncmd = "seq 500; exit 1"\n')
    res = swarm("run", "s.toml", "-j", "1", "--backend", "tmux", "--ui", "compact", "--require-multiplexer",
                env=outside_env(tmux))
    run = finish(swarm, res)
    assert res.code == 1, res.stderr
    wait_until(lambda: all(v["dead"] == "1" for v in tmux.panes().values()), what="renderers finished")
    panes = {v["title"]: p for p, v in tmux.panes().items()}
    assert tmux.capture(panes["slot 1"]).rstrip().endswith("500"), "the view filled its pane"
    tmux("resize-window", "-t", f"swarm-{run.name}:", "-y", str(rows))
    assert tmux("capture-pane", "-p", "-t", panes["slot 1"]).startswith("slot 1 · flood · failed")
    assert tmux("capture-pane", "-p", "-t", panes[f"{run.name} · board"]).startswith("swarm · finished")


def test_progress_bar_and_colour_render_as_one_line_in_slot_view(swarm, tmux):
    swarm.write("p.toml", r"""
[swarm]
jobs = 1
[[task]]
name = "bar"
cmd = 'for i in 1 2 3 4 5; do printf "\r\033[32mprogress %s/5\033[0m" $i; sleep 0.05; done; echo; echo done-line'
""")
    res = swarm("run", "p.toml", "--backend", "tmux", "--ui", "compact", "--require-multiplexer", env=outside_env(tmux))
    finish(swarm, res)
    assert res.code == 0
    pane = next(p for p, v in tmux.panes().items() if v["title"] == "slot 1")
    text = wait_until(lambda: (c := tmux.capture(pane)) and "done-line" in c and c, what="slot view final frame")
    lines = text.splitlines()
    assert sum("progress" in ln for ln in lines) == 1
    assert any(ln.strip() == "progress 5/5" for ln in lines)
    assert "\x1b" not in text and "[32m" not in text


def start_live_pane(swarm, tmux, swarm_file: str):
    """Start a one-task live swarm in tmux; wait for its pane's launch heartbeat."""
    proc = swarm.popen("run", swarm_file, "--backend", "tmux", "--ui", "live", "--require-multiplexer",
                       env=outside_env(tmux))
    run = swarm.started()
    gen = run / "slots/slot-1/gen-1"
    pane = wait_until(lambda: (gen / "heartbeat.jsonl").exists() and (lines := (
        gen / "heartbeat.jsonl").read_text().splitlines()) and json.loads(lines[0])["pane_id"], what="heartbeat")
    return proc, run, gen, pane


def test_live_worker_has_a_tty_and_output_shows_while_it_runs(swarm, tmux):
    script = ("import sys, time\\nprint('tty', sys.stdout.isatty(), flush=True)\\n"
              "for i in range(40):\\n    print('tick', i, flush=True); time.sleep(0.1)")
    swarm.write("py.toml", f"""
[[task]]
name = "py"
argv = ["python3", "-c", "{script}"]
""")
    proc, run, gen, pane = start_live_pane(swarm, tmux, "py.toml")
    try:
        screen = wait_until(lambda: (c := tmux.capture(pane)) and "tick 3" in c and c, what="live output")
        assert not (gen / "exit").exists(), "the output must show while the worker still runs"
        assert "tty True" in screen
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
        kill_run_processes(run.name)


def test_worker_title_escape_cannot_overwrite_slot_task_state(swarm, tmux):
    from zellij_swarm.backends.tmux import BORDER_FORMAT

    swarm.write("t.toml", r"""
[[task]]
name = "retitle"
cmd = 'printf "\033]2;HACKED\007\033k HACKED \033\\"; sleep 30'
""")
    proc, run, _, pane = start_live_pane(swarm, tmux, "t.toml")
    try:
        wait_until(lambda: tmux("display-message", "-p", "-t", pane, "#{pane_title}").strip() == "HACKED",
                   what="the worker's own title escape to land")
        assert tmux.panes()[pane]["title"] == "slot 1 · retitle · running"
        fmt = tmux("show-options", "-w", "-v", "-t", pane, "pane-border-format").rstrip("\n")
        assert fmt == BORDER_FORMAT and "pane_title" not in fmt  # our options only
    finally:
        swarm("cancel", run.name)
        assert proc.wait(timeout=30) == 130
        kill_run_processes(run.name)


def test_32_visible_panes_open_legibly_in_one_batch(swarm, tmux):
    swarm.write("many.txt", "sleep 1\n" * 32)
    res = swarm("run", "many.txt", "-j", "32", "--max-visible-panes", "32", "--backend", "tmux", "--ui", "live",
                "--require-multiplexer", env=outside_env(tmux))
    run = finish(swarm, res)
    assert res.code == 0, res.stderr
    evs = events(run)
    assert len([e for e in evs if e["event"] == "pane_opened"]) == 32
    assert [e for e in evs if e["event"] == "warning"] == []
    batches = [e for e in evs if e["event"] == "batch_dispatch_started"]
    assert batches[0]["size"] == 32
    assert "no space for new pane" not in res.stderr


def test_slots_beyond_the_visible_cap_run_headless_without_warning(swarm, tmux):
    swarm.write("cap.txt", "sleep 0.2\n" * 4)
    res = swarm("run", "cap.txt", "-j", "4", "--max-visible-panes", "2", "--backend", "tmux", "--ui", "live",
                "--require-multiplexer", env=outside_env(tmux))
    run = finish(swarm, res)
    assert res.code == 0
    evs = events(run)
    assert {e["slot"] for e in evs if e["event"] == "pane_opened"} == {1, 2}
    assert {e["slot"] for e in evs if e["event"] == "worker_process_spawned"} == {3, 4}
    assert [e for e in evs if e["event"] == "warning"] == []


@pytest.mark.parametrize("require", [False, True])
def test_tmux_missing_is_a_warning_or_an_error_under_require(swarm, tmp_path, require):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("sh", "sleep", "python3", "env"):
        if shutil.which(tool):
            (bin_dir / tool).symlink_to(shutil.which(tool))
    swarm.write("s.txt", "echo hi\n")
    args = ["run", "s.txt", "--backend", "tmux"] + (["--require-multiplexer"] if require else [])
    res = swarm(*args, env=clean_env(PATH=str(bin_dir)))
    rows = swarm.tasks()
    summary = swarm.summary()
    if require:
        assert res.code == 1
        assert (rows["task-1"]["status"], rows["task-1"]["reason"]) == ("cancelled", "tmux_multiplexer_missing")
        assert rows["task-1"]["attempts"] == 0
    else:
        assert res.code == 0 and rows["task-1"]["status"] == "succeeded"
        assert [w["code"] for w in summary["warnings"]] == ["multiplexer_missing"]


def test_attach_takes_the_terminal_until_the_session_closes(swarm, tmux):
    """--attach on a TTY (given here by `script`): the tmux client runs in the foreground and
    the run returns once its session closes (--close-session)."""
    if shutil.which("script") is None:
        pytest.skip("script (util-linux) is not installed")
    swarm.write("a.txt", "echo attached-run\n")
    inner = " ".join(swarm.cmd("run", "a.txt", "--backend", "tmux", "--ui", "live", "--attach", "--close-session",
                               "--pane-hold", "100ms"))
    env = outside_env(tmux, TERM="xterm")
    p = subprocess.run(["script", "-qfec", inner, "/dev/null"], cwd=swarm.cwd, env=env, capture_output=True,
                       timeout=60, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stdout[-2000:]
    assert swarm.tasks()["task-1"]["status"] == "succeeded"
    assert b"[exited]" in p.stdout  # the tmux client drew the session, then left when it closed
    assert tmux("list-sessions", check=False) == ""


def test_an_attached_run_that_ended_says_so_before_its_client_detaches(swarm, tmux):
    """--attach on a TTY, the session kept: once its tasks have ended, the run's records say
    it ended — the board the user is attached to, ``status`` and ``ls`` — while the client
    still holds the terminal; the end's report comes once it detaches. The records were
    written only after the detach: the run read as running, its tasks too, for as long as
    the user looked at it."""
    if shutil.which("script") is None:
        pytest.skip("script (util-linux) is not installed")
    swarm.write("a.txt", "echo attached-run\n[ -e ok ] || exit 3\n")
    inner = " ".join(swarm.cmd("run", "a.txt", "--backend", "tmux", "--ui", "live", "--attach", "--pane-hold",
                               "100ms", "--junit", "report.xml"))
    env = outside_env(tmux, TERM="xterm")
    p = subprocess.Popen(["script", "-qfec", inner, "/dev/null"], cwd=swarm.cwd, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        wait_until(lambda: tmux("list-clients", check=False).strip(), what="the client to attach")
        run = swarm.started()
        wait_until(lambda: json.loads(swarm("status", "--json", run.name).stdout)["state"] == "finished",
                   what="the run to say it ended")
        assert p.poll() is None, "the client still holds the terminal"
        assert [(r["status"], r["exit_code"]) for r in swarm.tasks().values()] == [("succeeded", 0), ("failed", 3)]
        assert json.loads(swarm("ls", "--json").stdout)[0]["state"] == "finished"
        report = swarm.cwd / "report.xml"
        wait_until(lambda: report.exists() and 'failures="1"' in report.read_text(), what="the run's JUnit report")
        # the run is over, and a retry may run now: its report is not overwritten at the detach
        (swarm.cwd / "ok").touch()
        assert swarm("retry", run.name, "--backend", "headless", "--output", "quiet").code == 0
        assert 'failures="0"' in report.read_text()
        for client in tmux("list-clients", "-F", "#{client_name}", check=False).split():
            tmux("detach-client", "-t", client, check=False)
        assert p.wait(timeout=60) == 1
        assert 'failures="0"' in report.read_text()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(timeout=10)


def test_attach_without_a_terminal_says_so_and_runs(swarm, tmux):
    swarm.write("a.txt", "true\n")
    res = swarm("run", "a.txt", "--backend", "tmux", "--attach", "--close-session", env=outside_env(tmux))
    assert res.code == 0
    assert "--attach needs a terminal on stdin and stdout; not attaching" in res.stderr


# ----- the backend itself, driven directly (issue 14): order, titles, kept panes, the end -------

class Driven:
    """A ``TmuxBackend`` on the private server, driven as the supervisor would: its pane
    commands are plain scripts standing in for wrappers, its timers fire when the test says."""

    def __init__(self, tmux, tmp_path: Path, *, inside: bool = False, ui: str = "live", **flags: str) -> None:
        from zellij_swarm.backends.base import RunContext
        from zellij_swarm.backends.tmux import TmuxBackend
        from zellij_swarm.config import settings
        from zellij_swarm.records.rundir import RunPaths

        self.tmux = tmux
        self.paths = RunPaths(tmp_path / "20260101-000000-abcdef")
        self.paths.dir.mkdir()
        self.timers: list = []
        self.notices: list[str] = []
        self.warnings: list[tuple[str, str]] = []
        self.env = env = (inside_env if inside else outside_env)(tmux)
        self.backend = TmuxBackend(env, inside=inside, close_session=False)
        resolved = settings.resolve({"ui": ui, **flags}, {})
        self.backend.open(RunContext(
            paths=self.paths, run_id=self.paths.run_id, settings=resolved,
            schedule=lambda delay, fn: self.timers.append(fn), warn=lambda c, m: self.warnings.append((c, m)),
            notice=self.notices.append,
            renderer_argv=lambda *args: ["sh", "-c", f"echo {' '.join(args)}; exec sleep 600"]))
        self.gens: dict[int, int] = {}

    def request(self, slot: int, task: str, script: str, *, attempt: int = 1, attempts: int = 1):
        from zellij_swarm.backends.base import LaunchRequest

        self.gens[slot] = gen = self.gens.get(slot, 0) + 1
        paths = self.paths.gen(slot, gen)
        paths.dir.mkdir(parents=True)
        paths.wrapper.write_text(script + "\n")
        return LaunchRequest(paths, slot, task, pane=True, attempt=attempt, attempts=attempts)

    def launch(self, *reqs) -> list[str]:
        for r in reqs:
            assert self.backend.pane_mode(r.slot) is not None
        results = self.backend.launch(list(reqs))
        self.backend.launch_seen()  # as the supervisor says, once it has recorded them
        assert all(r.pane_id for r in results), results
        return [r.pane_id for r in results]

    def titles(self, window: str | None = None) -> list[str]:
        """Our panes' titles in tmux's order (the order ``tiled`` lays them out in)."""
        target = ["-t", window] if window else ["-s", "-t", self.backend.session_id]
        return self.tmux("list-panes", *target, "-F", "#{@zsw_title}").splitlines()

    def dead(self, pane: str) -> None:
        wait_until(lambda: self.tmux.panes().get(pane, {}).get("dead") == "1", what=f"{pane} to end")


def test_panes_read_in_slot_order_and_live_ones_keep_a_minimum_width(tmux, tmp_path):
    """The board first, then slot 1, 2, …: a first batch out of order, a backfill of slot 2,
    and a window full at the live minimum width whose next pane overflows."""
    from zellij_swarm.backends.tmux import SESSION_SIZE, tile_capacity
    from zellij_swarm.config.settings import BY_NAME

    min_width = BY_NAME["min_pane_width"].default()
    assert min_width == 60

    d = Driven(tmux, tmp_path)
    board = f"{d.paths.run_id} · board"
    d.launch(*(d.request(slot, f"t{slot}", "exec sleep 600") for slot in (3, 1, 2)))
    assert d.titles() == [board, "slot 1 · t1 · running", "slot 2 · t2 · running", "slot 3 · t3 · running"]
    d.launch(d.request(2, "u2", "exec sleep 600"), d.request(5, "t5", "exec sleep 600"))
    assert d.titles() == [board, "slot 1 · t1 · running", "slot 2 · t2 · running", "slot 2 · u2 · running",
                          "slot 3 · t3 · running", "slot 5 · t5 · running"]
    per_window = tile_capacity(*SESSION_SIZE, min_width)
    assert per_window == 12  # 3 columns × 4 rows of 79×14 at 240×60; a 4th column would be 59 wide
    last = per_window  # six panes so far, slots 6…last: the window fills up, one more goes to the next
    d.launch(*(d.request(slot, f"t{slot}", "exec sleep 600") for slot in range(6, last + 1)))
    windows = d.tmux("list-windows", "-t", d.backend.session_id, "-F", "#{window_id}").split()
    assert len(windows) == 2
    assert len(d.titles(windows[0])) == per_window and d.titles(windows[1]) == [f"slot {last} · t{last} · running"]
    widths = [int(v["size"].split("x")[0]) for v in d.tmux.panes().values()]
    assert min(widths) >= min_width


def test_min_pane_width_is_a_setting(swarm, tmux):
    """--min-pane-width 120 in a 240-column session: the live panes do not all fit beside
    the board and overflow to a further window, every one at least 120 columns wide."""
    swarm.write("w.txt", "while [ ! -e go ]; do sleep 0.05; done\n" * 3)
    proc = swarm.popen("run", "w.txt", "-j", "3", "--backend", "tmux", "--ui", "live", "--require-multiplexer",
                       "--min-pane-width", "120", "--output", "quiet", env=outside_env(tmux))
    try:
        wait_until(lambda: len([v for v in tmux.panes().values() if v["title"].startswith("slot ")]) == 3,
                   what="three live panes")
        live = [v for v in tmux.panes().values() if v["title"].startswith("slot ")]
        assert min(int(v["size"].split("x")[0]) for v in live) >= 120
        assert len({v["window"] for v in live}) >= 2  # they do not all fit beside the board
    finally:
        (swarm.cwd / "go").touch()
        proc.wait(timeout=60)
        kill_run_processes(swarm.latest().name)


def test_kept_panes_show_their_last_lines_carry_the_attempt_and_go_when_the_task_succeeds(tmux, tmp_path):
    d = Driven(tmux, tmp_path, keep_failed_panes="8")
    first = d.request(1, "unit-2", "seq 1 50; exit 3", attempt=1, attempts=3)
    [kept] = d.launch(first)
    d.dead(kept)
    d.backend.ended(first, kept, "failed", "failed (exit 3)")
    assert d.tmux.panes()[kept]["title"] == "slot 1 · unit-2 · attempt 1/3 · failed (exit 3)"
    # more panes open and the window re-tiles: the kept pane still shows its last lines, and
    # nothing of tmux's own ("Pane is dead") pushed them up
    d.launch(*(d.request(slot, f"t{slot}", "exec sleep 600") for slot in range(2, 8)))
    # (tmux redraws a re-tiled dead pane from its history: wait for it rather than catch it blank)
    def last_line() -> list[str]:
        return [ln for ln in d.tmux("capture-pane", "-p", "-t", kept).splitlines() if ln.strip()][-1:]

    wait_until(lambda: last_line() == ["50"], what="the kept pane's last line after the re-tiling",
               seen=lambda: (d.tmux("capture-pane", "-p", "-t", kept), d.tmux.panes()))
    assert "dead" not in d.tmux.capture(kept)
    # a second attempt fails, a third succeeds: the earlier attempts' panes close
    second = d.request(8, "unit-2", "exit 3", attempt=2, attempts=3)
    [kept2] = d.launch(second)
    d.dead(kept2)
    d.backend.ended(second, kept2, "failed", "failed (exit 3)")
    assert len(d.backend.panes.kept) == 2
    third = d.request(9, "unit-2", "exit 0", attempt=3, attempts=3)
    [ok] = d.launch(third)
    d.dead(ok)
    d.backend.ended(third, ok, "succeeded", "succeeded")
    panes = d.tmux.panes()
    assert kept not in panes and kept2 not in panes and not d.backend.panes.kept
    assert panes[ok]["title"] == "slot 9 · unit-2 · attempt 3/3 · succeeded"
    # a task with one attempt has no attempt in its title
    single = d.request(2, "once", "exit 1")
    [pane] = d.launch(single)
    d.dead(pane)
    d.backend.ended(single, pane, "failed", "failed (exit 1)")
    assert d.tmux.panes()[pane]["title"] == "slot 2 · once · failed (exit 1)"


def test_a_headless_success_releases_the_kept_panes_of_earlier_attempts(tmux, tmp_path):
    d = Driven(tmux, tmp_path)
    first = d.request(1, "flaky", "exit 3", attempt=1, attempts=2)
    [kept] = d.launch(first)
    d.dead(kept)
    d.backend.ended(first, kept, "failed", "failed (exit 3)")
    d.backend.ended(d.request(1, "flaky", "true", attempt=2, attempts=2), None, "succeeded", "succeeded")
    assert kept not in d.tmux.panes()


def test_waiting_for_input_marks_a_running_pane_title_only(tmux, tmp_path):
    d = Driven(tmux, tmp_path)
    req = d.request(3, "agent-1", "exec sleep 600", attempt=2, attempts=3)
    [pane] = d.launch(req)
    d.backend.waiting(req, pane, True)
    assert d.tmux.panes()[pane]["title"] == "slot 3 · agent-1 · attempt 2/3 · waiting for input"
    d.backend.waiting(req, pane, False)
    assert d.tmux.panes()[pane]["title"] == "slot 3 · agent-1 · attempt 2/3 · running"
    d.tmux("kill-pane", "-t", pane)
    d.backend.ended(req, pane, "cancelled", "cancelled")
    d.backend.waiting(req, pane, True)  # its worker ended: nothing to mark, and no error


def test_a_dead_pane_keeps_its_whole_final_screen(tmux, tmp_path):
    """remain-on-exit-format is empty: a pane whose last screen fills every row keeps its first
    line (tmux's own "Pane is dead" line would scroll it away)."""
    d = Driven(tmux, tmp_path)
    assert "remain-on-exit-format ''" in d.tmux("show-options", "-w", "-t", d.backend.windows[0].id).splitlines()
    [pane] = d.launch(d.request(1, "full", "rows=$(stty size | cut -d' ' -f1); echo first-line; "
                                           "seq 2 $((rows - 1)); printf 'last, no newline'"))
    d.dead(pane)
    # tmux marks a pane dead when its process exits, and may read the pane's last output after
    screen = wait_until(lambda: (s := d.tmux("capture-pane", "-p", "-t", pane).rstrip("\n").splitlines())
                        and s[-1] == "last, no newline" and s, what="the pane's last output")
    assert screen[0] == "first-line", screen


@pytest.mark.parametrize("failed", [False, True])
def test_inside_tmux_the_swarm_window_closes_unless_something_failed(tmux, tmp_path, failed):
    d = Driven(tmux, tmp_path, inside=True)
    req = d.request(1, "t", "exit 0")
    [pane] = d.launch(req)
    d.dead(pane)
    d.backend.ended(req, pane, "succeeded", "succeeded")
    d.backend.close(cancelled=False, failed=failed)
    names = tmux("list-windows", "-t", "host", "-F", "#{window_name}").split()
    if not failed:
        assert f"swarm-{d.paths.run_id}" not in names
        assert d.backend.leftover_hint() is None
        return
    assert f"swarm-{d.paths.run_id}" in names
    hint = d.backend.leftover_hint()
    window = d.backend.windows[0].id
    assert hint == (f"the swarm's window stays: close with tmux -S {d.backend.socket_path} kill-window -t {window}"
                    f"{or_prune(d.paths)}")
    # typed in a terminal outside that server (after a resume from one, say): it reaches it all the same
    elsewhere = clean_env(TMUX_TMPDIR=str(tmp_path))
    subprocess.run(hint.split(": close with ")[1].split(" (or")[0], shell=True, check=True, env=elsewhere)
    assert f"swarm-{d.paths.run_id}" not in tmux("list-windows", "-t", "host", "-F", "#{window_name}").split()


def test_a_pane_closed_by_hand_is_dead_to_the_wait_for_its_log(tmux, tmp_path):
    """A generation's end waits (up to 2 s, on the backend's one thread) for its pane's death
    before its output is read. A pane closed by hand is gone — but tmux 3.3a answers a look at
    a pane that is gone with exit 0 and an empty format: each such pane held the run 2 s."""
    d = Driven(tmux, tmp_path)
    live, gone = d.launch(d.request(1, "a", "exec sleep 600"), d.request(2, "b", "exec sleep 600"))
    d.tmux("kill-pane", "-t", gone)
    assert d.backend._pane_dead(gone)
    assert not d.backend._pane_dead(live)


def test_a_task_that_ends_before_its_panes_copier_started_waits_for_the_copy(tmux, tmp_path, monkeypatch):
    """tmux starts ``pipe-pane``'s copier as a process of its own, which a loaded machine may
    run only after the pane's worker has ended (seen in CI: a task's last lines missing from
    ``--output tag``). Its pid file not there yet is no reason to read the log: the end of a
    pane this backend opened waits for its copier, and then for its copy."""
    from zellij_swarm.backends.tmux import TmuxBackend
    from zellij_swarm.worker.wrapper import PANE_LEADER
    gate = tmp_path / "copier-may-start"
    made = TmuxBackend._pipe_command
    monkeypatch.setattr(TmuxBackend, "_pipe_command", staticmethod(
        lambda log: f"while ! test -e {gate}; do sleep 0.01; done; " + made(log)))
    d = Driven(tmux, tmp_path)
    leader = " ".join(PANE_LEADER)  # as a wrapper's: it exits once tmux has read its terminal to its end
    req = d.request(1, "a", f"exec {leader} --read-to-end /bin/sh -c 'seq 1 2000; echo END'")
    (pane,) = d.launch(req)
    d.dead(pane)
    assert not req.gen.output.with_name("log-copier").exists()
    waited: list[float] = []

    def sleep(seconds: float) -> None:  # the backend's first wait lets the copier start
        if not waited:
            gate.touch()
        waited.append(seconds)
        time.sleep(seconds)

    from zellij_swarm.backends import tmux as tmux_backend
    monkeypatch.setattr(tmux_backend, "time", SimpleNamespace(monotonic=time.monotonic, sleep=sleep))
    d.backend.ended(req, pane, "succeeded", "done")
    assert waited, "the end did not wait for the copier"
    assert req.gen.output.read_bytes().endswith(b"2000\r\nEND\r\n")


@pytest.mark.parametrize("closed", ["all", "one"])
def test_the_hint_at_the_end_names_only_the_windows_still_there(tmux, tmp_path, closed):
    """A failed run inside the user's session leaves its windows, and says how to close them.
    One the user closed by hand meanwhile was named too (and its ``kill-window`` failed)."""
    d = Driven(tmux, tmp_path, inside=True, min_pane_width="200")  # one live pane a window beside the board
    reqs = [d.request(1, "a", "exit 3"), d.request(2, "b", "exit 3")]
    panes = d.launch(*reqs)
    for req, pane in zip(reqs, panes, strict=True):
        d.dead(pane)
        d.backend.ended(req, pane, "failed", "failed (exit 3)")
    first, second = d.backend.windows[0].id, d.backend.windows[-1].id
    assert first != second
    d.tmux("kill-window", "-t", second)
    if closed == "all":
        d.tmux("kill-window", "-t", first)
    d.backend.close(cancelled=False, failed=True)
    hint = d.backend.leftover_hint()
    if closed == "all":
        assert hint is None
    else:
        assert hint == (f"the swarm's window stays: close with tmux -S {d.backend.socket_path} kill-window -t {first}"
                        f"{or_prune(d.paths)}")


@pytest.mark.parametrize("gone", [False, "killed", "its last pane closed as the run ends"])
def test_a_kept_session_says_how_to_close_it(tmux, tmp_path, gone):
    """A session the run made stays for the user to look at, and the hint says how to close
    it — that session exactly: tmux takes a bare name as a prefix, and once the session was
    gone the hint's `kill-session -t proj` killed the user's `proj-old`. One whose last pane
    was closed meanwhile (tmux ended it) is not said to stay."""
    d = Driven(tmux, tmp_path)
    if gone == "killed":
        d.tmux("kill-session", "-t", d.backend.session_id)
    elif gone:  # the board closed by hand; the one worker's pane, held after its success, closes at the end
        req = d.request(1, "a", "true")
        [pane] = d.launch(req)
        d.dead(pane)
        d.backend.ended(req, pane, "succeeded", "succeeded")
        d.tmux("kill-pane", "-t", d.backend.board_pane)
    d.backend.close(cancelled=False, failed=False)  # a session we created stays for the user to look
    hint = d.backend.leftover_hint()
    if gone:
        assert hint is None
        return
    assert hint and hint.startswith(f"tmux session 'swarm-{d.paths.run_id}' stays: close it with tmux -S ")
    assert f" kill-session -t =swarm-{d.paths.run_id} " in hint, hint


def test_prune_removes_the_windows_ended_runs_left_in_the_users_session(swarm, tmux):
    swarm.write("f.txt", "exit 3\n")
    env = inside_env(tmux)
    res = swarm("run", "f.txt", "--backend", "tmux", "--ui", "live", env=env)
    run = finish(swarm, res)
    assert res.code == 1
    windows = tmux("list-windows", "-t", "host", "-F", "#{window_id} #{window_name}").splitlines()
    [ours] = [w.split()[0] for w in windows if w.endswith(f"swarm-{run.name}")]
    assert swarm("prune", "--dry-run", env=env).stdout == \
        f"would remove tmux window swarm-{run.name} ({ours}) in session host\n"
    res = swarm("prune", env=env)
    assert res.stdout == f"removed tmux window swarm-{run.name} ({ours}) in session host\n", res.stderr
    assert f"swarm-{run.name}" not in tmux("list-windows", "-t", "host", "-F", "#{window_name}")


def test_the_prune_a_kept_window_s_hint_offers_reaches_a_run_kept_in_another_state_dir(swarm, tmux, tmp_path):
    """Run with ``--state-dir`` elsewhere: the "(or zellij-swarm prune …)" its end offers names
    that directory; copied as printed, it finds the window (bare, it found nothing, exit 0)."""
    import shlex

    swarm.write("f.txt", "exit 3\n")
    env = inside_env(tmux)
    elsewhere = tmp_path / "kept records"
    res = swarm("run", "f.txt", "--backend", "tmux", "--ui", "live", "--state-dir", str(elsewhere), env=env)
    assert res.code == 1, res.stderr
    [offered] = [line.rsplit("(or ", 1)[1].removesuffix(")") for line in res.stderr.splitlines() if "(or " in line]
    words = shlex.split(offered)
    assert words[:4] == ["zellij-swarm", "prune", "--state-dir", str(elsewhere)], offered
    pruned = swarm(*words[1:], env=env)
    assert pruned.code == 0 and pruned.stdout.startswith("removed tmux window swarm-"), pruned


def test_a_batch_is_one_invocation_per_window_and_its_panes_wait_at_the_gate_until_it_was_recorded(tmux, tmp_path,
                                                                                                  monkeypatch):
    """Each pane's split, title, pipe-pane and re-tiling go in one tmux invocation; the panes'
    wrappers wait at the start gate until it has ended and the supervisor has recorded its
    panes (``launch_seen``: their leaders would take the CPU both need), and the log has the
    pane's output from its first byte."""
    import psutil

    d = Driven(tmux, tmp_path)
    calls: list[list[str]] = []
    chain = d.backend._chain

    def observed(commands, *, check=True):
        calls.append([c[0] for c in commands])
        res = chain(commands, check=check)
        opened = res.lines if calls[-1][0] == "split-window" else []
        for pane in opened:  # each of the batch's panes: held at the gate
            shell = psutil.Process(int(d.tmux("display-message", "-p", "-t", pane, "#{pane_pid}")))
            wait_until(lambda shell=shell: any(p.name() == "flock" for p in shell.children()),
                       what=f"{pane} at the gate")
            assert not list(tmp_path.glob("started-*"))
        return res

    monkeypatch.setattr(d.backend, "_chain", observed)
    reqs = []
    for slot in (1, 2, 3):
        gate = d.backend.pane_mode(slot).before_leader
        reqs.append(d.request(slot, f"t{slot}", f"{gate}; touch {tmp_path}/started-{slot}; printf 'first %s' {slot}; "
                                               "exec sleep 600"))
    panes = [r.pane_id for r in d.backend.launch(reqs)]
    assert all(panes) and calls == [["list-panes"], ["set-option"]
                                    + ["split-window", "set-option", "pipe-pane", "select-layout"] * 3 + ["run-shell"]]
    for pane in panes:  # the batch has opened; not recorded yet: still at the gate
        shell = psutil.Process(int(d.tmux("display-message", "-p", "-t", pane, "#{pane_pid}")))
        assert any(p.name() == "flock" for p in shell.children()), pane
    assert not list(tmp_path.glob("started-*"))
    d.backend.launch_seen()
    for slot, req in zip((1, 2, 3), reqs, strict=True):
        wait_until(lambda req=req, slot=slot: req.gen.output.exists() and req.gen.output.read_text() == f"first {slot}",
                   what=f"slot {slot}'s output in its log")
    assert [t.split(" · ")[-1] for t in d.titles()[1:]] == ["running"] * 3
    assert d.tmux("display-message", "-p", "-t", d.backend.windows[0].id, "#{pane_id}").strip() == d.backend.board_pane


def test_the_pane_the_user_selects_as_a_batch_opens_keeps_the_focus(tmux, tmp_path, monkeypatch):
    """A batch's panes are split in the window's active pane, then the pane that was active is
    again. That pane was read in an earlier invocation than the batch's: one the user selected
    in between lost the focus to it. It is read in the batch's own invocation."""
    d = Driven(tmux, tmp_path)
    first = d.launch(d.request(1, "t1", "exec sleep 600"))[0]
    window = d.backend.windows[0].id
    d.tmux("select-pane", "-t", d.backend.board_pane)
    panes_of = d.backend._panes_of

    def then_the_user_selects(w):
        listed = panes_of(w)
        d.tmux("select-pane", "-t", first)  # the user's click, after the look and before the batch
        return listed

    monkeypatch.setattr(d.backend, "_panes_of", then_the_user_selects)
    d.launch(d.request(2, "t2", "exec sleep 600"), d.request(3, "t3", "exec sleep 600"))
    assert d.tmux("display-message", "-p", "-t", window, "#{pane_id}").strip() == first
    assert len(d.titles(window)) == 4


def test_a_live_board_starts_once_the_first_batch_has_opened(tmux, tmp_path, monkeypatch):
    """The board is a Python process whose start takes 0.2 s of CPU: on two cores it slowed
    the first batch of 32 panes by a quarter. It now waits at the start gate until that batch's
    invocations have ended, then shows the run."""
    import psutil

    d = Driven(tmux, tmp_path)
    board = psutil.Process(int(d.tmux("display-message", "-p", "-t", d.backend.board_pane, "#{pane_pid}")))
    wait_until(lambda: any(p.name() == "flock" for p in board.children()), what="the board at the gate")
    chain = d.backend._chain

    def observed(commands, *, check=True):
        assert "board" not in d.tmux.capture(d.backend.board_pane)  # still at the gate
        return chain(commands, check=check)

    monkeypatch.setattr(d.backend, "_chain", observed)
    d.launch(d.request(1, "t", "exec sleep 600"), d.request(2, "u", "exec sleep 600"))
    wait_until(lambda: "board" in d.tmux.capture(d.backend.board_pane), what="the board shown")


def test_a_live_board_with_no_batch_to_wait_for_starts_all_the_same(tmux, tmp_path, monkeypatch):
    """A run whose first panes do not come (nothing to run yet, dispatch held): the board
    waits at the gate for BOARD_GATE_WAIT at most; the gate is let go when the run closes."""
    from zellij_swarm.backends import tmux as backend

    monkeypatch.setattr(backend, "BOARD_GATE_WAIT", 1)
    d = Driven(tmux, tmp_path)
    wait_until(lambda: "board" in d.tmux.capture(d.backend.board_pane), what="the board shown")
    assert d.backend.gate.held
    d.backend.close(cancelled=False, failed=True)
    assert not d.backend.gate.held


def test_a_gate_held_by_a_stopped_wrapper_holds_no_batch_up(tmux, tmp_path, monkeypatch):
    """A wrapper stopped while it passes the gate holds it shared: a batch waits for it a
    moment, then opens its panes without it."""
    import fcntl
    import os

    from zellij_swarm.backends import tmux as backend

    d = Driven(tmux, tmp_path)
    monkeypatch.setattr(backend, "GATE_WAIT", 0.2)
    d.launch(d.request(1, "first", "exec sleep 600"))  # its end lets the board go on
    held = os.open(d.backend.gate_path, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(held, fcntl.LOCK_SH)
        [pane] = d.launch(d.request(2, "t", "exec sleep 600"))
        assert pane in tmux.panes()
    finally:
        os.close(held)


def test_a_batch_over_three_windows_makes_each_next_window_with_the_panes_before_it(tmux, tmp_path, monkeypatch):
    """A batch that overflows into new windows made each of them in an invocation of its own
    before that window's panes: 6 tmux clients for 32 live panes, 7 ms each here. Each next
    window is now made at the end of the invocation that fills the window before it."""
    d = Driven(tmux, tmp_path, min_pane_width="200")  # one live pane a window beside the board
    calls: list[list[str]] = []
    chain, call = d.backend._chain, d.backend._tmux
    monkeypatch.setattr(d.backend, "_chain", lambda commands, **kw: calls.append([c[0] for c in commands])
                        or chain(commands, **kw))
    monkeypatch.setattr(d.backend, "_tmux", lambda *args, **kw: calls.append([args[0]]) or call(*args, **kw))
    panes = d.launch(*(d.request(slot, f"t{slot}", "exec sleep 600") for slot in range(1, 6)))
    made = [c for c in calls if c != ["list-panes"]]  # (what the board's window holds is asked first)
    opened = ["split-window", "set-option", "pipe-pane", "select-layout"]
    filled = ["kill-pane", "select-layout", "select-pane"]  # a new window's: its placeholder goes
    assert [c[c.index("split-window"):] if "split-window" in c else c for c in made] == [
        [*opened, "run-shell", "new-window"], [*opened * 2, *filled, "new-window"], [*opened * 2, *filled]], calls
    assert all(set(c[:c.index("split-window")]) == {"set-option"} for c in made[1:]), calls  # its options first
    windows = d.backend.windows
    assert len(windows) == len({w.name for w in windows}) == 3
    assert [sorted(d.backend.slot_of[p] for p in w.panes) for w in windows] == [[0, 1], [2, 3], [4, 5]]  # 0: board
    assert {p for w in windows for p in w.panes} == {d.backend.board_pane, *panes}
    for w in windows[1:]:  # the placeholder gone: the window holds the run's panes alone
        assert set(d.tmux("list-panes", "-t", w.id, "-F", "#{pane_id}").split()) == w.panes


def test_a_window_that_went_is_forgotten_and_the_next_panes_open_elsewhere(tmux, tmp_path):
    """An overflow window closes when its last pane does (or the user closes a window): the
    backend kept it as one with room, and every later pane of the run failed ("can't find
    window"). The next batch now finds it gone and opens a window of its own, under a name
    no window of the run holds."""
    d = Driven(tmux, tmp_path, min_pane_width="200")  # one live pane a window beside the board
    first = d.launch(d.request(1, "t1", "exec sleep 600"), d.request(2, "t2", "exec sleep 600"))
    overflow = d.backend.windows[-1]
    d.tmux("kill-window", "-t", overflow.id)  # as tmux does once its panes have closed
    [again] = d.launch(d.request(3, "t3", "exec sleep 600"))
    assert again in tmux.panes() and first[0] in tmux.panes()
    names_ = d.tmux("list-windows", "-t", d.backend.session_id, "-F", "#{window_name}").split()
    assert len(names_) == len(set(names_)) == len(d.backend.windows)
    d.tmux("kill-window", "-t", d.backend.windows[0].id)  # the board's too
    [later] = d.launch(d.request(4, "t4", "exec sleep 600"))
    assert later in tmux.panes() and overflow not in d.backend.windows


def test_a_batch_too_long_for_one_tmux_message_is_cut_where_a_pane_ends(tmux, tmp_path, monkeypatch):
    """32 panes of a run whose state directory is deep: their one invocation went over the
    16 KiB tmux takes from a client ("command too long") and every pane failed. The batch is
    now cut in invocations under the limit, each pane's commands whole in one of them."""
    from zellij_swarm.backends.tmux_client import MESSAGE_LIMIT, TmuxClient

    deep = tmp_path / ("d" * 200) / ("e" * 200)
    deep.mkdir(parents=True)
    d = Driven(tmux, deep, min_pane_width="20", max_visible_panes="32")
    sizes: list[int] = []
    chain = d.backend._chain

    def measured(commands, *, check=True):
        sizes.append(TmuxClient.message_size(commands))
        return chain(commands, check=check)

    monkeypatch.setattr(d.backend, "_chain", measured)
    panes = d.launch(*(d.request(slot, f"t{slot}", "exec sleep 600") for slot in range(1, 33)))
    assert len(set(panes)) == 32 and set(panes) <= set(tmux.panes())
    assert max(sizes) <= MESSAGE_LIMIT and sum(s > 4096 for s in sizes) >= 2, sizes
    assert [t.split(" · ")[0] for t in d.titles()[1:]] == [f"slot {n}" for n in range(1, 33)]


def test_panes_a_failed_batch_opened_before_it_failed_are_the_runs(tmux, tmp_path, monkeypatch):
    """A batch whose invocation failed midway (a pane it splits at closed by hand) returned a
    failure for every pane, and those it had opened, their wrappers started, were left out of
    the run's panes for good (titled running after their end). They are the run's now; only
    the rest fail."""
    from zellij_swarm.backends.base import LaunchFailed, PaneOpened

    d = Driven(tmux, tmp_path)
    [one] = d.launch(d.request(1, "t1", "exec sleep 600"))
    chain = d.backend._chain

    def cut(commands, *, check=True):
        splits = [i for i, c in enumerate(commands) if c[0] == "split-window"]
        if len(splits) == 3:  # the batch: its third split aims at a pane that is gone
            commands = [list(c) for c in commands]
            at = commands[splits[2]]
            at[at.index("-t") + 1] = "%99999"
        return chain(commands, check=check)

    monkeypatch.setattr(d.backend, "_chain", cut)
    reqs = [d.request(slot, f"t{slot}", "exec sleep 600") for slot in (2, 3, 4)]
    for r in reqs:
        assert d.backend.pane_mode(r.slot) is not None
    results = d.backend.launch(reqs)
    d.backend.launch_seen()
    opened = [r.pane_id for r in results if isinstance(r, PaneOpened)]
    assert len(opened) == 2 and sum(isinstance(r, LaunchFailed) for r in results) == 1, results
    assert set(opened) <= set(tmux.panes()) and one in tmux.panes()
    assert all(d.backend.panes.pop(p) is not None for p in opened)  # in the run's panes, as any opened one


def test_ctrl_c_with_the_tmux_server_stopped_waits_out_no_call(swarm, tmux):
    """The tmux server is stopped (SIGSTOP) while a worker runs in its pane, then the user
    presses Ctrl-C. It took 22 s: a call's whole 10 s, then two looks at whether the session
    lives that waited for a stopped server's answer. Such a server can neither answer nor
    end by itself: the run ends cancelled without waiting out a call's time, leaves the
    server as it was, and leaves no tmux client of its calls waiting on it."""
    import os
    import signal
    import time

    from zellij_swarm import pid_end
    from zellij_swarm.backends import tmux_client

    swarm.write("s.toml", f'[[task]]\nname = "holder"\ncmd = "touch holder.up; {GATE}"\n')
    proc, run, _gen, _pane = start_live_pane(swarm, tmux, "s.toml")
    server = int(tmux("display-message", "-p", "#{pid}").strip())
    try:
        wait_until(lambda: (swarm.cwd / "holder.up").exists(), what="holder running")
        os.kill(server, signal.SIGSTOP)
        asked = time.time()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        assert pid_end.stopped(server)
        # and no client of ours is left waiting on it (killed as its call was given up on)
        import psutil

        clients = [p.pid for p in psutil.process_iter(["cmdline"]) if p.pid != server
                   and any(str(tmux.socket) in a for a in p.info["cmdline"] or ())]
        assert clients == [], clients
    finally:
        os.kill(server, signal.SIGCONT)
        proc.kill()
        proc.communicate()
        kill_run_processes(run.name)
    evs = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    finished = next(e for e in evs if e["event"] == "run_finished")
    assert finished["ts"] - asked < tmux_client.CALL_TIMEOUT, evs
    assert swarm.tasks()["holder"]["status"] == "cancelled"


def test_ctrl_c_while_the_tmux_server_gives_no_answer_at_the_start_starts_no_task(swarm, tmux):
    """The user's tmux server (the swarm runs inside it) is stopped before the swarm starts,
    and the user presses Ctrl-C while its first call waits. That call was waited out (10 s),
    then the first batch started — each worker's first command ran — and only then was
    cancelled. The server's pid is in ``$TMUX``: the call is given up on once it has been
    stopped a while, and no task starts after the Ctrl-C."""
    import os
    import signal
    import time

    import psutil

    from zellij_swarm.backends import tmux_client

    env = inside_env(tmux)
    server = int(tmux("display-message", "-p", "#{pid}").strip())
    swarm.write("t.txt", "".join(f"echo started {i} >> ledger.txt; sleep 5\n" for i in range(4)))
    os.kill(server, signal.SIGSTOP)
    try:
        proc = swarm.popen("run", "t.txt", "-j", "2", "--backend", "tmux", "--ui", "live", "--output", "quiet",
                           env=env)
        try:
            swarm.started()

            def calling() -> bool:
                return any(str(tmux.socket) in command_line(p)  # ("": a call that ended meanwhile)
                           for p in psutil.Process(proc.pid).children(recursive=True))

            wait_until(calling, what="its first call to the server")
            asked = time.monotonic()
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=60)
            assert proc.returncode == 130, err
            assert time.monotonic() - asked < tmux_client.CALL_TIMEOUT
        finally:
            proc.kill()
            proc.communicate()
    finally:
        os.kill(server, signal.SIGCONT)
    assert not (swarm.cwd / "ledger.txt").exists()
    assert {(t["status"], t["reason"]) for t in swarm.tasks().values()} == {("cancelled", "cancelled_by_user")}


def test_a_server_that_gives_no_answer_is_alive_until_its_socket_refuses(tmux, tmp_path, monkeypatch):
    """A call that timed out (a busy or stopped server; every later call then fails at once)
    said the session was gone, for good: each pane worker's SIGHUP of its own was then taken
    for the multiplexer's death, recorded lost and run again. Whether the session is there is
    still asked, briefly; a server that gives no answer but holds its socket is alive; one
    whose session was killed, or that was killed, is not."""
    import os
    import signal

    from zellij_swarm import external
    from zellij_swarm.backends import tmux as tmux_backend
    from zellij_swarm.exc import BackendError

    monkeypatch.setattr(tmux_backend, "SETTLE", 1.0)
    monkeypatch.setattr(external, "PROBE_TIMEOUT", 0.3)
    d = Driven(tmux, tmp_path)
    d.launch(d.request(1, "t1", "exec sleep 600"))
    d.backend.client.unresponsive = BackendError("pane_call_timeout", "tmux has-session: no answer within 10s")
    assert d.backend.session_alive()
    server = int(tmux("display-message", "-p", "#{pid}").strip())
    os.kill(server, signal.SIGSTOP)
    try:
        assert d.backend.session_alive()  # no answer within the probe's time: its socket says it lives
    finally:
        os.kill(server, signal.SIGCONT)
    tmux("new-session", "-d", "-s", "keeper")  # the server outlives our session
    tmux("kill-session", "-t", d.backend.session_id)
    assert not d.backend.session_alive()


@pytest.mark.parametrize("output", ["group", "tag"])
def test_a_live_panes_whole_output_is_copied_and_counted_as_its_task_ends(swarm, tmux, output):
    """tmux copies a pane's output to its log through ``pipe-pane``, a process of its own that
    may not have written the last lines when the worker's end is read: the copy to stdout
    (``group``, ``tag``) and the joblog's ``Receive`` then missed the tail (9 runs in 11). Each
    task's output is read once its copy is complete: every last line is there, and ``Receive``
    is the log's size."""
    printing_swarm(swarm, 8)
    res = swarm("run", "s.toml", "--backend", "tmux", "--ui", "live", "--require-multiplexer", "--output", output,
                "--joblog", "jobs.tsv", env=outside_env(tmux))
    run = finish(swarm, res)
    assert res.code == 0, res.stderr
    assert_whole_outputs(swarm, run, res.stdout, 8)


@pytest.mark.parametrize(("version", "want"), [("3.3a", 137), ("3.2", None)])
def test_a_pane_dead_before_tmux_reaped_its_first_process_is_asked_until_it_says_how_it_ended(
        monkeypatch: pytest.MonkeyPatch, version: str, want: int | None) -> None:
    """``#{pane_dead}`` is the pane's terminal closed, which tmux can see before it has reaped
    the pane's first process: the signal was not there yet, and a pane leader's kill read
    "ended" with its signal lost (CI's tmux tier on a loaded machine; 3 runs in 15 under
    load). It is asked again until tmux has it — but a tmux with no ``pane_dead_signal``
    (before 3.3) never says more of a death by a signal."""
    answers = iter(["%7|1|||", "%7|1|||", "%7|1|9||"])
    exited, asked = _pane_exited_as_tmux_answers(monkeypatch, version, answers)
    assert exited is not None and exited.code == want
    assert asked == (3 if want else 1)


def test_a_dead_pane_whose_first_process_tmux_has_not_reaped_says_how_it_ended_from_the_kernel(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """tmux left a killed pane leader a zombie for 20 s and more on a loaded machine, its
    pane dead with no status all that time: the kernel keeps a zombie's wait status, which
    says it at once."""
    zombie = subprocess.Popen(["sleep", "60"])
    try:
        zombie.kill()
        wait_until(lambda: Path(f"/proc/{zombie.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z",
                   what="a zombie")
        exited, asked = _pane_exited_as_tmux_answers(monkeypatch, "3.3a", iter([f"%7|1|||{zombie.pid}"]))
        assert exited is not None and (exited.code, asked) == (137, 1)
    finally:
        zombie.wait()


def _pane_exited_as_tmux_answers(monkeypatch: pytest.MonkeyPatch, version: str,
                                 answers: Iterator[str]) -> tuple[Any, int]:
    """``TmuxBackend.pane_exited`` of pane ``%7`` with tmux ``version`` giving ``answers``:
    what it said, and how many times it asked."""
    from zellij_swarm.backends import tmux as tmux_backend
    from zellij_swarm.backends.tmux_client import parse_version
    from zellij_swarm.external import CmdResult

    backend = tmux_backend.TmuxBackend({}, inside=False, close_session=False)
    backend.started, backend.version = True, parse_version(version)
    asked: list[tuple[str, ...]] = []

    def tmux(*args: str, check: bool = True) -> CmdResult:
        asked.append(args)
        return CmdResult(("tmux", *args), 0, next(answers) + "\n", "")

    monkeypatch.setattr(backend, "_tmux", tmux)
    return backend.pane_exited("%7"), len(asked)


def test_the_boards_border_never_cuts_the_run_id(tmux):
    """tmux draws a pane's border label in the pane's width less 4 columns (screen-redraw.c:
    ``width = wp->sx - 4``) and cuts what is longer. At every width the board's label is its
    whole title, the whole run id, or ``board`` — and fits what tmux draws: a compact board of
    80x24 with 6 slots is 26 columns, where the id was cut to ``20261207-002950-7ef30``."""
    from zellij_swarm import names
    from zellij_swarm.backends.tmux import BORDER_FORMAT, title_text

    run_id = "20261207-002950-7ef30c"
    title = title_text(names.board_title(run_id))
    tmux("new-session", "-d", "-s", "s", "-x", "120", "-y", "10")
    pane = tmux("display-message", "-p", "-t", "s:", "#{pane_id}").strip()
    tmux("set-option", "-p", "-t", pane, "@zsw_title", title)
    tmux("set-option", "-p", "-t", pane, "@zsw_short", run_id)
    for width in range(10, 41):
        tmux("resize-window", "-t", "s:", "-x", str(width))
        assert tmux("display-message", "-p", "-t", pane, "#{pane_width}").strip() == str(width)
        label = tmux("display-message", "-p", "-t", pane, BORDER_FORMAT).rstrip("\n")
        assert label.strip() in (title, run_id, "board"), (width, label)
        assert len(label) <= width - 4 or label.strip() == "board", (width, label)


def test_a_pane_is_listed_running_or_dead_and_not_once_closed_or_its_server_gone(tmux, tmp_path):
    """What the heartbeat deadline asks of a pane that never reported: one closed by hand is
    gone (its task was cancelled, never run headless instead); one running, or dead and kept
    (``remain-on-exit``), is listed — a pane fault, run headless."""
    d = Driven(tmux, tmp_path)
    running, dead, closed = d.launch(d.request(1, "t1", "exec sleep 600"), d.request(2, "t2", "exit 3"),
                                     d.request(3, "t3", "exec sleep 600"))
    d.dead(dead)
    d.tmux("kill-pane", "-t", closed)
    assert [d.backend.pane_listed(p) for p in (running, dead, closed, None)] == [True, True, False, None]
    d.tmux("kill-server")
    assert d.backend.pane_listed(running) is False
