"""Golden screens (issue 14): what a person sees in tmux, compared with checked-in screens.

A fixed swarm — successes, an ``exit 3``, a task that fails once and is retried, a ``\\r``
progress bar, colour, 5,000 lines of output, an ``after`` chain — runs in compact mode inside
a session of a private tmux server, with a client attached at 80×24 and at 200×50 (a second,
outer tmux whose pane is that client's terminal). Every task waits at its own gate file, and
the test opens the gates one at a time, so each slot's tasks and each screen are the same
every run: no sleep decides anything.

At the start, mid-run and at the end, the board and slot panes are captured
(``capture-pane -p``), and so is the whole window as the client draws it (borders, titles),
from the outer pane. Screens are normalised (``normalise``: run ids, clock times, durations,
pids) and compared with ``tests/screens/<size>/<moment>.txt``; a difference shows the two
screens side by side. ``ZSW_UPDATE_SCREENS=1`` writes the screens instead:

    ZSW_UPDATE_SCREENS=1 .venv/bin/pytest tests/test_screens.py

then read ``git diff tests/screens`` before committing them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest
from swarmtest import Swarm, full, kill_run_processes, run_processes, wait_until
from tmuxtest import Tmux, outside_env

from zellij_swarm.records import snapshot_file

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None,
                                reason="tmux is not installed (scripts/setup installs it)")

SCREENS = Path(__file__).resolve().parent / "screens"
UPDATE = bool(os.environ.get("ZSW_UPDATE_SCREENS"))
CONF = "set -g status off\nset -g default-terminal screen\nset -g escape-time 0\n"


def gate(name: str) -> str:
    return f"until [ -e gates/{name} ]; do sleep 0.02; done"


# name, command, extra keys: in file order, which is also the order they queue in
TASKS: list[tuple[str, str, dict[str, object]]] = [
    ("build", f"echo compiling 12 modules; {gate('build')}; echo build ok", {}),
    ("progress", "for i in 1 2 3 4 5; do printf '\\rdownloading %s/5' $i; done; "
                 f"{gate('progress')}; printf '\\rdone\\033[K\\n'", {}),
    ("colour", "printf '\\033[1;32mPASS\\033[0m unit\\n\\033[31mFAIL\\033[0m lint (allowed)\\n'; "
               f"{gate('colour')}", {}),
    ("flaky", f"if [ -e flaky-once ]; then echo second attempt; {gate('flaky-2')}; echo recovered; "
              f"else touch flaky-once; echo first attempt; {gate('flaky-1')}; echo giving up; exit 3; fi",
     {"retries": 1}),
    ("broken", "echo checking config; echo 'error: missing key' >&2; exit 3", {}),
    ("flood", f"seq 1 5000; {gate('flood')}", {}),
    ("test-a", "echo test-a passed", {"after": ["build"]}),
    ("package", "echo packaged", {"after": ["test-a"]}),
]


def swarm_file() -> str:
    """The swarm as TOML (a JSON string is a TOML basic string)."""
    out = ['[swarm]\nname = "screens"\njobs = 4\n']
    for name, cmd, extra in TASKS:
        out.append(f"[[task]]\nname = {json.dumps(name)}\ncmd = {json.dumps(cmd)}\n"
                   + "".join(f"{key} = {json.dumps(value)}\n" for key, value in extra.items()))
    return "\n".join(out)


# ----- normalising a screen ----------------------------------------------------------------------

_RUN_ID = re.compile(r"20\d{6}(?:-\d{1,6}(?:-[0-9a-f]{1,6})?)?|2\d{0,7}(?=…)")  # whole, or clipped
_CLOCK = re.compile(r"\b\d\d:\d\d:\d\d\b")
_DATE = re.compile(r"\b\d{4}-\d\d-\d\d\b")
_PID = re.compile(r"( *)(?<![\w.])(pid \d+)( *)")
_DURATION = re.compile(r"( *)(?<![\w.])(\d+\.\d+s|\d+ms|\d+m\d\ds|\d+h\d\dm|\d+[sd])(?!\w)( *)")


def _fixed(token: str) -> Callable[[re.Match[str]], str]:
    """Replace a match of (spaces, value, spaces) by ``token``, whatever the value's width; in
    a column (two or more spaces on one side, the padding after it first) the padding takes
    up the difference, so that what follows stays where it was — a border, the next column —
    and the screen reads as captured."""
    def sub(m: re.Match[str]) -> str:
        before, value, after = m.group(1), m.group(2), m.group(3)
        delta = len(value) - len(token)
        if len(after) >= 2:
            after = " " * max(1, len(after) + delta)
        elif len(before) >= 2:
            before = " " * max(1, len(before) + delta)
        return before + token + after
    return sub


def normalise(screen: str) -> list[str]:
    """The rows of a captured screen with what changes from run to run made constant: run
    ids (masked digit by digit, so a clipped one stays clipped alike), dates, clock times,
    durations, pids. Trailing spaces go; every row stays, so a scrolled screen shows."""
    rows = []
    for line in screen.split("\n"):
        line = _RUN_ID.sub(lambda m: re.sub(r"[0-9a-f]", "R", m.group()), line)
        line = _DATE.sub("YYYY-MM-DD", line)
        line = _CLOCK.sub("HH:MM:SS", line)
        line = _PID.sub(_fixed("pid PID"), line)
        line = _DURATION.sub(_fixed("T.Ts"), line)
        rows.append(line.rstrip())
    return rows


def same(expected: list[str], actual: list[str]) -> bool:
    """Two normalised screens show the same, padding aside: a value whose width differs from
    run to run (a 5-digit pid, ``12s`` against ``0.4s``) moves the spaces around it."""
    def loose(rows: list[str]) -> list[str]:
        return [re.sub(r" {2,}", "  ", row) for row in rows]
    return loose(expected) == loose(actual)


def side_by_side(expected: list[str], actual: list[str]) -> str:
    """Two screens next to each other, a ``≠`` between rows that differ (a row only one of
    them has included)."""
    width = max([len(r) for r in expected] + [8])
    out = [f"{'expected':<{width}}   actual", f"{'-' * width}   {'-' * 8}"]
    for i in range(max(len(expected), len(actual))):
        e = expected[i] if i < len(expected) else None
        a = actual[i] if i < len(actual) else None
        differs = e is None or a is None or not same([e], [a])
        out.append(f"{e or '':<{width}} {'≠' if differs else '│'} {a or ''}")
    return "\n".join(out)


def test_normalise_same_and_side_by_side() -> None:
    assert normalise("run 20261130-141915-d3132f · 20261130-14… · 2… · ended 14:19:15 · pid 4242") == [
        "run RRRRRRRR-RRRRRR-RRRRRR · RRRRRRRR-RR… · R… · ended HH:MM:SS · pid PID"]
    assert normalise("4 slots · 1m05s · ran 0.0s · exit 3 · 5000") == ["4 slots · T.Ts · ran T.Ts · exit 3 · 5000"]
    # columns and borders stay where they were
    assert normalise("a · pid 123     │x\na · pid 12345   │x") == ["a · pid PID     │x"] * 2
    assert normalise("1 build     12s   0  ok\n2 lint     0.4s   0  ok") == [
        "1 build     T.Ts  0  ok", "2 lint     T.Ts   0  ok"]
    assert same(normalise("1 build     12s   0  ok"), normalise("1 build    0.4s   0  ok"))
    assert not same(["ran T.Ts · ended"], ["ran T.Ts· ended"])
    text = side_by_side(["same", "old"], ["same", "new", "extra", ""])
    assert text.splitlines()[2:] == ["same     │ same", "old      ≠ new", "         ≠ extra", "         ≠ "]


class Screens:
    """Captured screens against the checked-in ones: every difference is collected, and the
    test fails once at the end with all of them (or, with ZSW_UPDATE_SCREENS=1, writes them)."""

    def __init__(self, size: str) -> None:
        self.dir = SCREENS / size
        self.failures: list[str] = []

    def check(self, name: str, sections: dict[str, list[str]]) -> None:
        actual = [line for title, rows in sections.items() for line in (f"=== {title}", *rows)]
        path = self.dir / f"{name}.txt"
        if UPDATE:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("\n".join(actual) + "\n")
            return
        if not path.exists():
            self.failures.append(f"{path} is missing: ZSW_UPDATE_SCREENS=1 .venv/bin/pytest {__file__} writes it")
            return
        expected = path.read_text().removesuffix("\n").split("\n")
        if not same(expected, actual):
            self.failures.append(f"{path} differs:\n{side_by_side(expected, actual)}")

    def verdict(self) -> None:
        if self.failures:
            pytest.fail("\n\n".join(self.failures) + "\n\n(ZSW_UPDATE_SCREENS=1 to accept the new screens)",
                        pytrace=False)


# ----- tmux: a session the swarm runs inside, and a client attached to it -----------------------

@contextmanager
def attached(t: Tmux, cols: int, rows: int) -> Iterator[Callable[[], str]]:
    """The inner server's session ``host`` (status line off, our own config) with a client
    attached through an outer tmux of ``cols``×``rows``; yields a capture of that client's
    screen. The outer server is ended on the way out (the ``tmux`` fixture ends the inner)."""
    conf = t.tmpdir / "tmux.conf"
    conf.write_text(CONF)
    env = outside_env(t, LANG="C.UTF-8", LC_ALL="C.UTF-8")
    subprocess.run(["tmux", "-u", "-f", str(conf), "-S", str(t.socket), "new-session", "-d", "-s", "host",
                    "-x", str(cols), "-y", str(rows)], env=env, check=True, timeout=10)
    outer = t.tmpdir / "outer"
    client = f"exec env -u TMUX tmux -u -S {t.socket} attach -t host"
    try:
        subprocess.run(["tmux", "-u", "-f", str(conf), "-S", str(outer), "new-session", "-d", "-s", "outer",
                        "-x", str(cols), "-y", str(rows), client], env=env, check=True, timeout=10)
        wait_until(lambda: t("list-clients", "-F", "#{client_width}x#{client_height}").split() == [f"{cols}x{rows}"],
                   what="the client attached at its size")

        def screen() -> str:
            return subprocess.run(["tmux", "-S", str(outer), "capture-pane", "-p", "-t", "outer"], env=env,
                                  capture_output=True, text=True, check=True, timeout=10).stdout

        yield screen
    finally:
        subprocess.run(["tmux", "-S", str(outer), "kill-server"], capture_output=True, timeout=10)
        for p in psutil.process_iter(["cmdline"]):
            if p.info["cmdline"] and str(outer) in " ".join(p.info["cmdline"]):
                p.kill()


class Run:
    """The swarm's run as the test drives it: its tasks' state, its gates, its panes."""

    def __init__(self, swarm: Swarm, t: Tmux, proc: subprocess.Popen[str]) -> None:
        self.swarm, self.t, self.proc = swarm, t, proc
        self.dir = swarm.started()
        self.window = wait_until(self._window, what="the swarm's window")
        t("select-window", "-t", self.window)  # the client shows it
        self.panes = wait_until(self._panes, what="the board and four slot panes")

    def _window(self) -> str | None:
        for line in self.t("list-windows", "-t", "host", "-F", "#{window_id} #{window_name}").splitlines():
            wid, name = line.split(" ", 1)
            if name == f"swarm-{self.dir.name}":
                return wid
        return None

    def _panes(self) -> dict[str, str] | None:
        titles = dict(line.split(" ", 1) for line in self.t(
            "list-panes", "-t", self.window, "-F", "#{pane_id} #{@zsw_title}").splitlines())
        named = {("board" if title.endswith("· board") else title): pane for pane, title in titles.items()}
        return named if len(named) == 5 and all(named.get(f"slot {n}") for n in range(1, 5)) else None

    def tasks(self) -> dict[str, dict]:
        try:
            return {row["name"]: row for row in snapshot_file.load(self.dir / "state.json")["tasks"]}
        except (OSError, ValueError, KeyError):
            return {}

    def status(self, name: str) -> tuple[str, int] | None:
        row = self.tasks().get(name)
        return (row["status"], row["attempts"]) if row else None

    def open(self, *gates: str) -> None:
        for name in gates:
            (self.swarm.cwd / "gates" / name).touch()

    def capture(self) -> dict[str, list[str]]:
        return {title: normalise(self.t("capture-pane", "-p", "-t", pane).removesuffix("\n"))
                for title, pane in sorted(self.panes.items(), key=lambda kv: (kv[0] != "board", kv[0]))}

    def settled(self, screen: Callable[[], str], shows: Callable[[dict[str, list[str]]], bool]) -> dict:
        """The panes and the whole window once they show what ``shows`` wants and two
        captures in a row agree (no frame half painted, nothing still arriving)."""
        last: dict | None = None

        def same_twice() -> dict | None:
            nonlocal last
            now = {"panes": self.capture(), "window": normalise(screen().removesuffix("\n"))}
            stable = now == last and shows(now["panes"])
            last = now
            return now if stable else None

        return wait_until(same_twice, interval=0.15, what="screens that show the moment and hold still")


def _shows(*pairs: tuple[str, str]) -> Callable[[dict[str, list[str]]], bool]:
    return lambda panes: all(any(text in row for row in panes[title]) for title, text in pairs)


@pytest.mark.parametrize("cols,rows", [(80, 24), full(200, 50)])
def test_golden_screens(swarm, tmux, cols, rows):
    screens = Screens(f"{cols}x{rows}")
    (swarm.cwd / "gates").mkdir()
    swarm.write("s.toml", swarm_file())
    with attached(tmux, cols, rows) as screen:
        pane = tmux("display-message", "-p", "-t", "host:", "#{pane_id}").strip()
        pid = tmux("display-message", "-p", "#{pid}").strip()
        env = outside_env(tmux, TMUX=f"{tmux.socket},{pid},0", TMUX_PANE=pane, LANG="C.UTF-8", LC_ALL="C.UTF-8")
        proc = swarm.popen("run", "s.toml", "--backend", "tmux", "--ui", "compact", "--output", "quiet", env=env)
        run: Run | None = None
        try:
            run = Run(swarm, tmux, proc)
            # start: the first four tasks run, one a slot, each showing its first output
            start = run.settled(screen, _shows(("slot 1", "compiling 12 modules"), ("slot 2", "downloading 5/5"),
                                               ("slot 3", "FAIL lint (allowed)"), ("slot 4", "first attempt"),
                                               *((f"slot {n}", "heartbeat seen") for n in range(1, 5))))
            # the colour reaches the pane (the golden screens are plain text)
            coloured = tmux("capture-pane", "-p", "-e", "-t", run.panes["slot 3"])
            before_pass = next(line for line in coloured.splitlines() if "PASS" in line).split("PASS")[0]
            assert re.search(r"\x1b\[[0-9;]*32[;m]", before_pass), repr(before_pass)
            # mid-run: flaky failed once and runs again; build ok, so broken failed and flood runs
            run.open("flaky-1")
            wait_until(lambda: run.status("flaky") == ("running", 2), what="flaky's second attempt")
            run.open("build")
            wait_until(lambda: run.status("flood") == ("running", 1) and run.status("broken") == ("failed", 1),
                       what="broken failed, flood running")
            mid = run.settled(screen, _shows(("slot 1", "5000"), ("slot 4", "second attempt"),
                                             *((f"slot {n}", "heartbeat seen") for n in range(1, 5))))
            # the rest: the after chain, then every gate
            run.open("flood")
            wait_until(lambda: run.status("package") == ("succeeded", 1), what="the after chain")
            run.open("progress", "colour", "flaky-2")
            assert proc.wait(timeout=60) == 1
            wait_until(lambda: all(v["dead"] == "1" for p, v in tmux.panes().items() if p in run.panes.values()),
                       what="the renderers' final frames")
            end = run.settled(screen, lambda panes: True)
        finally:
            for name in ("build", "progress", "colour", "flaky-1", "flaky-2", "flood"):
                (swarm.cwd / "gates" / name).touch()
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)
            if run is not None:
                kill_run_processes(run.dir.name)
    assert run_processes(run.dir.name) == []
    assert {n: (r["status"], r["attempts"]) for n, r in run.tasks().items()} == {
        "build": ("succeeded", 1), "progress": ("succeeded", 1), "colour": ("succeeded", 1),
        "flaky": ("succeeded", 2), "broken": ("failed", 1), "flood": ("succeeded", 1),
        "test-a": ("succeeded", 1), "package": ("succeeded", 1)}
    for moment, shot in (("start", start), ("mid", mid), ("end", end)):
        screens.check(moment, shot["panes"])
        screens.check(f"{moment}.window", {"window": shot["window"]})
    # nothing scrolled away at the end: each slot view's first row is still its title
    for n in range(1, 5):
        assert end["panes"][f"slot {n}"][0].startswith(f"slot {n} · "), end["panes"][f"slot {n}"]
    screens.verdict()
