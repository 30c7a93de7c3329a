"""The redraw loop: painting in place, ending with the run, signals, file events, fallback."""

from __future__ import annotations

import errno
import io
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pyte
import pytest

from zellij_swarm.records.rundir import RunPaths, write_json_atomic
from zellij_swarm.render.board import BoardView, run_board
from zellij_swarm.render.loop import Frame, Loop
from zellij_swarm.render.slotview import SlotView, run_slot_view
from zellij_swarm.watch import follow

NOW = 1_800_000_000.0


def make_run(root: Path, *, output: bytes = b"hello\n") -> RunPaths:
    """One slot running one task, in the shapes the supervisor writes."""
    run = RunPaths(root / "runs" / "20260511T101500-loop")
    gen = run.gen(1, 1)
    gen.dir.mkdir(parents=True)
    write_json_atomic(run.run_json, {"started_at": NOW - 60})
    gen.claim.write_bytes(b"")
    os.utime(gen.claim, (NOW - 10, NOW - 10))
    gen.heartbeat.write_text('{"event":"started","pid":4242,"pane_id":null}\n')
    gen.output.write_bytes(output)
    set_state(run, "running")
    return run


def set_state(run: RunPaths, run_state: str) -> None:
    task = {"name": "job", "id": "t1", "status": "running", "exit_code": None, "signal": None, "attempts": 1,
            "slot": 1, "generation": 1, "pid": 4242, "pane_id": None, "started_at": NOW - 10, "ended_at": None,
            "duration_s": None, "reason": None, "warnings": [],
            "history": [{"attempt": 1, "slot": 1, "generation": 1, "status": "running", "exit_code": None,
                         "signal": None, "reason": None, "started_at": NOW - 10, "ended_at": None, "pid": 4242,
                         "pane_id": None}]}
    write_json_atomic(run.state, {
        "run_id": run.run_id, "name": "loop", "state": run_state, "backend": "headless", "jobs": 2,
        "started_at": NOW - 60, "ended_at": None if run_state == "running" else NOW, "updated_at": NOW,
        "settings": {}, "counts": {"pending": 0, "running": 1, "succeeded": 0, "failed": 0, "timed_out": 0,
                                   "cancelled": 0, "skipped": 0, "lost": 0},
        "tasks": [task],
        "slots": [{"slot": 1, "state": "running", "task": "job", "task_id": "t1", "generation": 1, "attempt": 1,
                   "started_at": NOW - 10, "pane_id": None},
                  {"slot": 2, "state": "idle", "task": None, "task_id": None, "generation": None, "attempt": None,
                   "started_at": None, "pane_id": None}],
        "metrics": {}, "warnings": []})


class FakeClock:
    def __init__(self) -> None:
        self.t = NOW
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.t += seconds


def screen_of(painted: str, cols: int = 80, rows: int = 24) -> list[str]:
    """What a terminal shows after receiving ``painted``."""
    screen = pyte.Screen(cols, rows)
    pyte.Stream(screen).feed(painted)
    return [line.rstrip() for line in screen.display]


def test_loop_paints_in_place_rate_limits_and_ends_with_the_run(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    clock = FakeClock()

    def watcher(paths: Any, wake: threading.Event) -> Iterator[set[Any]]:
        assert run.dir in paths and run.gen(1, 1).dir in paths
        for i in range(20):  # a burst of changes arriving 10 ms apart
            with open(run.gen(1, 1).output, "ab") as f:
                f.write(b"\rstep %d" % i)
            clock.t += 0.01
            yield {("modified", "output.log")}
        clock.t += 1.0  # a quiet second: the elapsed time ticks
        yield set()
        set_state(run, "finished")
        yield {("modified", "state.json")}
        raise AssertionError("the loop should have ended with the run")

    out = io.StringIO()
    rc = run_board(run, out=out, watcher=watcher, clock=clock, sleep=clock.sleep, size=lambda: (80, 24),
                   color=False, handle_signals=False)
    painted = out.getvalue()
    assert rc == 0
    assert painted.startswith("\x1b[?25l") and painted.endswith("\x1b[?25h")
    assert "\x1b[2J" not in painted and "\x1bc" not in painted  # never a full clear or reset
    # At most 10 frames a second: every frame that followed another within 100 ms (the 20 of the
    # burst, and the last, right after the tick) waited out the rest of those 100 ms.
    assert len(clock.slept) == 21 and all(0.08 < s <= 0.1 for s in clock.slept)
    shown = screen_of(painted)
    assert shown[0].startswith("loop · finished · 2 slots · ") and shown[0].endswith("20260511T101500-loop")
    assert shown[2].startswith("# state")
    assert shown[3].startswith("1 running   job") and shown[3].endswith("step 19")
    assert shown[4] == "2 idle"
    assert all(line == "" for line in shown[5:])


def test_loop_repaints_only_changed_lines(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    clock = FakeClock()
    chunks: list[str] = []

    class Out(io.StringIO):
        def flush(self) -> None:
            chunks.append(self.getvalue()[sum(map(len, chunks)):])

    def watcher(paths: Any, wake: threading.Event) -> Iterator[set[Any]]:
        clock.t += 1.0
        yield set()  # only the elapsed time changed
        set_state(run, "finished")
        yield {("modified", "state.json")}

    run_slot_view(run, 1, out=Out(), watcher=watcher, clock=clock, sleep=clock.sleep, size=lambda: (60, 10),
                  color=False, handle_signals=False)
    tick = chunks[1]
    assert tick.count("\x1b[") == 2 and tick.startswith("\x1b[2;1Helapsed 11s")  # one line + its erase


def test_watcher_follows_the_slot_to_a_new_generation(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    clock = FakeClock()
    watched: list[tuple[Path, ...]] = []

    def watcher(paths: Any, wake: threading.Event) -> Iterator[set[Any]]:
        watched.append(tuple(paths))
        if len(watched) == 1:
            gen2 = run.gen(1, 2)
            gen2.dir.mkdir()
            gen2.claim.write_bytes(b"")
            gen2.output.write_bytes(b"second generation\n")
            yield {("added", str(gen2.dir))}
            raise AssertionError("the watcher should have been restarted on the new paths")
        set_state(run, "finished")
        yield {("modified", "state.json")}

    out = io.StringIO()
    run_slot_view(run, 1, out=out, watcher=watcher, clock=clock, sleep=clock.sleep, size=lambda: (60, 10),
                  color=False, handle_signals=False)
    assert run.gen(1, 1).dir in watched[0] and run.gen(1, 2).dir in watched[1]
    assert run.gen(1, 1).dir not in watched[1]
    assert screen_of(out.getvalue(), 60, 10)[3] == "second generation"


def test_resize_repaints_everything_at_the_new_size(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    size = [80, 24]
    clock = FakeClock()
    out = io.StringIO()
    woken = []

    def watcher(paths: Any, wake: threading.Event) -> Iterator[set[Any]]:
        if not woken:
            size[:] = [40, 8]
            os.kill(os.getpid(), signal.SIGWINCH)  # the handler sets ``wake``, as the watcher sees it
            deadline = time.monotonic() + 5
            while not wake.is_set() and time.monotonic() < deadline:
                time.sleep(0.001)
            woken.append(wake.is_set())
            return
        set_state(run, "finished")
        yield {("modified", "state.json")}

    loop = Loop(SlotView(run, 1), out=out, watcher=watcher, clock=clock, sleep=clock.sleep,
                size=lambda: (size[0], size[1]), color=False)
    before = signal.getsignal(signal.SIGWINCH)
    assert loop.run() == 0
    assert woken == [True]
    assert signal.getsignal(signal.SIGWINCH) is before  # handlers restored
    shown = screen_of(out.getvalue(), 40, 8)
    assert shown[0] == "slot 1 · job · running · attempt 1"
    assert shown[2].startswith("── output ─") and shown[2].endswith("run finished ──")
    assert shown[3] == "hello"


def test_watch_limit_falls_back_to_polling_with_a_notice(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    calls = []

    def limited(paths: Any, wake: threading.Event) -> Iterator[set[Any]]:
        calls.append(paths)
        raise OSError(errno.ENOSPC, "No space left on device", str(run.dir))  # inotify_add_watch at the limit
        yield set()

    class FlipAfter:
        """Finish the run once the loop has drawn a few polled frames."""

        def __init__(self) -> None:
            self.view, self.frames = BoardView(run), 0

        def frame(self, *args: Any, **kwargs: Any) -> Frame:
            self.frames += 1
            if self.frames == 4:
                set_state(run, "finished")
            return self.view.frame(*args, **kwargs)

    out = io.StringIO()
    loop = Loop(FlipAfter(), out=out, watcher=limited, poll_interval=0.01, size=lambda: (80, 24), color=False,
                handle_signals=False)
    assert loop.run() == 0
    assert len(calls) == 1 and loop.polling
    assert screen_of(out.getvalue())[5] == "warning: file-watch limit reached; polling every 0.01 s"


def _until(condition: Any, seconds: float, act: Any) -> bool:
    """Repeat ``act`` until ``condition()`` holds or ``seconds`` pass; every act is a real file change."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        act()
        time.sleep(0.05)
    return condition()


def test_real_file_events_redraw_and_end_the_loop(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    out = io.StringIO()
    # A one-minute tick: only a real file event can wake this loop within the deadline.
    loop = Loop(SlotView(run, 1), out=out, watcher=partial(follow, tick=60),
                size=lambda: (60, 12), color=False, handle_signals=False)
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    try:
        def append() -> None:
            with open(run.gen(1, 1).output, "ab") as f:
                f.write(b"more output\n")

        assert _until(lambda: "more output" in out.getvalue(), 10, append)
        assert _until(lambda: not thread.is_alive(), 10, lambda: set_state(run, "finished"))
    finally:
        loop._on_stop(signal.SIGTERM, None)
        thread.join(5)
    assert not thread.is_alive()
    assert screen_of(out.getvalue(), 60, 12)[2].endswith("run finished ──")


def test_once_prints_a_single_plain_frame(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    out = io.StringIO()
    assert run_board(run, once=True, out=out, size=lambda: (80, 24), clock=lambda: NOW) == 0
    text = out.getvalue()
    assert "\x1b" not in text and text.count("\n") == 5
    assert text.splitlines()[2].startswith("# state")
    assert text.splitlines()[3].startswith("1 running   job")


_CHILD = """
import sys
from pathlib import Path
from zellij_swarm.render.board import run_board
from zellij_swarm.render.slotview import run_slot_view
from zellij_swarm.records.rundir import RunPaths
run = RunPaths(Path(sys.argv[1]))
raise SystemExit(run_board(run) if sys.argv[2] == "board" else run_slot_view(run, 1))
"""


@pytest.fixture
def renderer(tmp_path: Path) -> Iterator[Any]:
    """Start a renderer process on a fresh run; every process started is killed at the end."""
    procs: list[subprocess.Popen[bytes]] = []
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZELLIJ", "TMUX", "CI"))}

    def start(kind: str) -> tuple[RunPaths, subprocess.Popen[bytes], bytes]:
        run = make_run(tmp_path / kind, output=b"\x1b[32mready\x1b[0m\n")
        proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(run.dir), kind], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env)
        procs.append(proc)
        seen = b""
        deadline = time.monotonic() + 10
        assert proc.stdout is not None
        while b"job" not in seen and time.monotonic() < deadline:  # the first frame is on screen
            if select.select([proc.stdout], [], [], 0.1)[0]:
                seen += os.read(proc.stdout.fileno(), 65536)
        assert b"job" in seen, seen
        return run, proc, seen

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(5)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGHUP, signal.SIGTERM], ids=lambda s: s.name)
@pytest.mark.parametrize("kind", ["board", "slot"])
def test_signals_end_the_renderer_quietly(renderer: Any, kind: str, sig: signal.Signals) -> None:
    _run, proc, _ = renderer(kind)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=5)
    assert proc.returncode == 0
    assert stderr == b""  # no traceback
    assert stdout.endswith(b"\x1b[?25h")


def test_renderer_process_ends_when_the_run_finishes(renderer: Any) -> None:
    run, proc, _ = renderer("board")
    set_state(run, "finished")
    stdout, stderr = proc.communicate(timeout=10)
    assert proc.returncode == 0 and stderr == b""
    assert b"finished" in stdout and stdout.endswith(b"\x1b[?25h")


@pytest.mark.parametrize("in_pane", [False, True])
def test_a_full_picture_scrolls_on_leaving_only_outside_a_pane_of_the_run(in_pane: bool) -> None:
    """A terminal gets a line for the shell's prompt; a pane of the run's own, which stays on
    screen as it is (a dead tmux pane), keeps its first line, and parks the cursor at the
    top: a pane made smaller later loses its last rows, not its title."""
    from zellij_swarm.render.loop import _Painter

    out = io.StringIO()
    painter = _Painter(out)
    painter.paint([f"line {n}" for n in range(1, 7)], 20, 6, full=True)
    painter.leave(in_pane=in_pane)
    screen = pyte.Screen(20, 6)
    pyte.Stream(screen).feed(out.getvalue())
    assert (screen.display[0].rstrip() == "line 1") is in_pane
    if in_pane:
        assert (screen.cursor.y, screen.cursor.x) == (0, 0)


def test_a_signal_handler_can_set_the_wake_while_its_own_thread_holds_it() -> None:
    """The renderers' stop and resize handlers set ``wake`` in the main thread, maybe while that
    thread is inside ``clear``/``wait`` holding its lock; a ``threading.Event`` then waits for
    itself forever (a board renderer was left running so). In a child, with a deadline."""
    code = ("import os, signal\n"
            "from zellij_swarm import watch\n"
            "wake = watch.Wake()\n"
            "signal.signal(signal.SIGHUP, lambda *_: wake.set())\n"
            "with wake._cond:\n"
            "    os.kill(os.getpid(), signal.SIGHUP)\n"
            "print(wake.is_set())\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=20)
    assert (done.returncode, done.stdout) == (0, "True\n"), done.stderr
