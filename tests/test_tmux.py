"""The tmux backend against a real tmux server on a private socket."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from swarmtest import Swarm, clean_env, kill_run_processes, run_processes, wait_until
from tmuxtest import inside_env, outside_env

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
        "· ok" in v["title"] for v in p.values()) and p, what="held panes closed")
    failed = sorted(v["title"] for v in panes.values() if v["dead"] == "1" and "board" not in v["title"])
    e1, e2 = rows["e"]["history"]
    assert failed == sorted([f"slot {rows['b']['slot']} · b · failed (exit 3)",
                             f"slot {e1['slot']} · e · failed (exit 1)", f"slot {e2['slot']} · e · failed (exit 1)"])
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
    assert titles == sorted([f"zellij-swarm {run.name} · board", "slot 1", "slot 2", "slot 3"])
    # renderers end with the run and keep their final picture
    wait_until(lambda: all(v["dead"] == "1" for v in tmux.panes().values()), what="renderers finished")
    slot_panes = {v["title"]: p for p, v in tmux.panes().items()}
    assert "run finished" in tmux.capture(slot_panes["slot 1"])
    board = tmux.capture(slot_panes[f"zellij-swarm {run.name} · board"])
    assert "succeeded 4" in board and "failed 2" in board


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
    run = wait_until(lambda: swarm.runs() and swarm.runs()[0], what="run dir")
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
        assert fmt == " #{@zsw_title} "
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


def test_attach_without_a_terminal_says_so_and_runs(swarm, tmux):
    swarm.write("a.txt", "true\n")
    res = swarm("run", "a.txt", "--backend", "tmux", "--attach", "--close-session", env=outside_env(tmux))
    assert res.code == 0
    assert "--attach needs a terminal on stdin and stdout; not attaching" in res.stderr
