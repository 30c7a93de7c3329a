"""Task data and paths are data on every backend (issue 10, defects 9 and 11).

A cwd, a state directory, task names and commands full of shell, tmux-format and terminal
syntax — ``'``, ``"``, ``$( )``, backticks, ``#``, ``#{…}``, ``#(…)``, ``#[…]``, spaces,
newlines, a trailing ``;``, non-ASCII, raw OSC/CSI/C1 escapes — run headless, in tmux (live and
compact, a real private server) and in the fake Zellij: every command runs with its exact
output in ``output.log``, nothing they hold is ever executed (no ``pwned`` file), and what
reaches a terminal (progress and end-of-task lines, ``status``, ``ls``, the board, pane titles)
shows the text on one line with every control made visible, while ``--json`` and the logs keep
the exact bytes.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import shlex
import shutil
import signal
import struct
import termios
from collections.abc import Callable
from pathlib import Path

import pyte
import pytest
from swarmtest import Swarm, clean_env, full, kill_run_processes, run_processes, wait_until
from tmuxtest import Tmux, outside_env
from zellijtest import FAST

from zellij_swarm.quoting import terminal_text

# Each would create the file $PWNED if a shell or tmux ever ran it.
INJECT = "$(touch ${PWNED}) `touch ${PWNED}` #(touch ${PWNED})"
CWD = f"c'{INJECT}'d \"dq\" #{{pane_id}} #[x] ##[y] #x é日本\nnl;"
# `%d %%`: tmux runs strftime over a `pipe-pane` command before it format-expands it
STATE = f"st'{INJECT}'\n#{{pane_id}} %d %%;"
ESCAPES = "\x1b]2;HACKED\x07\x1b[2J\x9b31m\x7f\rcr"
NAME = f"n'{INJECT}' \"dq\" #{{pane_id}}#[fg=red] é\nline{ESCAPES};"
PAYLOAD = f"p'{INJECT}' \"dq\" #{{pane_id}} #[fg=red] é日本\nline2;"
ARGV_NAME = "argv é #{pane_id};"
CMD = "printf '%s\\n' " + shlex.quote(PAYLOAD) + "; pwd; exit 3"
SWARM = f"""
[swarm]
jobs = 2
[[task]]
name = {json.dumps(NAME)}
cmd = {json.dumps(CMD)}
[[task]]
name = {json.dumps(ARGV_NAME)}
argv = ["printf", "%s\\n", {json.dumps(PAYLOAD)}]
"""


def nasty_swarm(tmp_path: Path) -> tuple[Swarm, dict[str, str]]:
    """A swarm whose cwd and state directory hold every character above."""
    cwd = tmp_path / CWD
    cwd.mkdir()
    s = Swarm(cwd)
    s.state_dir = cwd / STATE
    s.write("s.toml", SWARM)
    return s, {"PWNED": str(tmp_path / "pwned")}


def shown_on_one_line(text: str) -> None:
    """Terminal text: nothing but printable characters between the line breaks we put."""
    for line in text.splitlines():
        assert line.isprintable(), f"a control character reached the terminal: {line!r}"
    assert "\r" not in text


def check_run(s: Swarm, tmp_path: Path, res, *, live: bool) -> Path:
    """The outcomes, the exact outputs, nothing executed, and safe terminal text."""
    assert "Traceback" not in res.stderr, res.stderr
    assert not (tmp_path / "pwned").exists(), "text from a path, name or command was executed"
    rows = s.tasks()
    assert {n: (r["status"], r["exit_code"]) for n, r in rows.items()} == {NAME: ("failed", 3),
                                                                        ARGV_NAME: ("succeeded", 0)}
    assert res.code == 1, res.stderr
    run = s.latest()

    def output(name: str) -> str:
        r = rows[name]
        text = (run / "slots" / f"slot-{r['slot']}" / f"gen-{r['generation']}" / "output.log").read_bytes().decode()
        return text.replace("\r\n", "\n") if live else text  # a pane's terminal turns \n into \r\n

    assert output(NAME) == f"{PAYLOAD}\n{s.cwd}\n"
    assert output(ARGV_NAME) == f"{PAYLOAD}\n"
    # the end-of-task lines, and every other line the run printed
    shown_on_one_line(res.stderr)
    assert f"{terminal_text(NAME)}: failed (exit 3" in res.stderr
    # status: one line per row, the names shown safely; --json keeps them exact
    status = s("status", "--state-dir", str(s.state_dir), env=clean_env())
    assert status.code == 0, status.stderr
    shown_on_one_line(status.stdout)
    lines = status.stdout.splitlines()
    assert len(lines) == 4, lines  # the run, the table's header, then one line per task
    assert any(re.match(rf"  {re.escape(terminal_text(NAME))}\s+failed \(exit 3", ln) for ln in lines), lines
    assert any(re.match(rf"  {re.escape(terminal_text(ARGV_NAME))}\s+succeeded", ln) for ln in lines), lines
    js = json.loads(s("status", "--json", "--state-dir", str(s.state_dir), env=clean_env()).stdout)
    assert sorted(t["name"] for t in js["tasks"]) == sorted([NAME, ARGV_NAME])
    return run


def test_headless(tmp_path):
    s, extra = nasty_swarm(tmp_path)
    res = s("run", "s.toml", "--backend", "headless", "--state-dir", str(s.state_dir), env=clean_env(**extra))
    check_run(s, tmp_path, res, live=False)


def tmux_titles(t: Tmux) -> dict[str, str]:
    """pane id -> its title as the border shows it: tmux expands ``#{@zsw_title}`` once (as
    ``#{E:…}`` does here), and drawing then shows ``##[`` as ``#[``."""
    out = t("list-panes", "-a", "-F", "#{pane_id}\t#{E:@zsw_title}", check=False)
    return {p: title.replace("##[", "#[") for p, title in (ln.split("\t", 1) for ln in out.splitlines())}


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_tmux_live(tmp_path, tmux):
    s, extra = nasty_swarm(tmp_path)
    res = s("run", "s.toml", "--backend", "tmux", "--ui", "live", "--require-multiplexer",
            "--state-dir", str(s.state_dir), env=outside_env(tmux, **extra))
    try:
        run = check_run(s, tmp_path, res, live=True)
        assert run_processes(run.name) == []
    finally:
        kill_run_processes(s.latest().name)
    rows = s.tasks()
    failed = f"slot {rows[NAME]['slot']} · {terminal_text(NAME)} · failed (exit 3)"
    titles = wait_until(lambda: (t := tmux_titles(tmux)) and failed in t.values() and t, what="failed pane title")
    assert all(title.isprintable() for title in titles.values()), titles


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_tmux_compact(tmp_path, tmux):
    s, extra = nasty_swarm(tmp_path)
    res = s("run", "s.toml", "--backend", "tmux", "--ui", "compact", "--require-multiplexer",
            "--state-dir", str(s.state_dir), env=outside_env(tmux, **extra))
    try:
        run = check_run(s, tmp_path, res, live=False)
    finally:
        kill_run_processes(s.latest().name)
    # the renderers found the run in the state directory (a trailing ';' survived tmux)
    panes = {title: p for p, title in tmux_titles(tmux).items()}
    assert sorted(panes) == sorted([f"{run.name} · board", "slot 1", "slot 2"])
    wait_until(lambda: "run finished" in tmux.capture(panes["slot 1"]), what="slot view's final frame")
    wait_until(lambda: "1 failed" in tmux.capture(panes[f"{run.name} · board"]),
                       what="board's final frame")


@pytest.mark.parametrize("version,ui", [("0.45.0", "live"), full("0.45.0", "compact"), ("0.43.1", "live")])
def test_zellij(tmp_path, fz, version, ui):
    s, extra = nasty_swarm(tmp_path)
    inside = None
    if version < "0.44":  # before 0.44, panes are placed only where a client is attached
        fz.host("host", version, client=True)
        inside = "host"
    res = s("run", "s.toml", "--backend", "zellij", "--ui", ui, "--require-zellij", "--state-dir", str(s.state_dir),
            env=fz.env(version, inside=inside, **FAST, **extra), timeout=60)
    try:
        run = check_run(s, tmp_path, res, live=ui == "live")
    finally:
        kill_run_processes(s.latest().name)
    session = inside or f"swarm-{run.name}"
    if ui == "live":
        rows = s.tasks()
        state = "failed (exit 3)" if version >= "0.44" else "running"  # before 0.44 a title is fixed at creation
        want = f"slot {rows[NAME]['slot']} · {terminal_text(NAME)} · {state}"
        titles = wait_until(lambda: (t := [p["title"] for p in fz.tab(version, run.name, session)["panes"]])
                            and want in t and t, what="the failed pane, titled")
    else:
        titles = [p["title"] for p in fz.tab(version, run.name, session)["panes"]]
        assert sorted(titles) == sorted([f"{run.name} · board", "slot 1", "slot 2"])
    assert all(t.isprintable() for t in titles), titles


def test_follow_ups_run_names_and_views_show_escapes_safely(swarm):
    """Defect 11: names with raw OSC/CSI/C1/DEL/CR (a task's, a follow-up's, the run's
    ``--name`` with a newline) reach no terminal raw: not the end-of-task lines, ``status``,
    ``ls``, the board or a slot view; ``--output tag`` prefixes too. Outputs stay byte-exact."""
    followup = json.dumps({"name": f"fu{ESCAPES}", "cmd": "printf 'fu-out\\n'"})
    cmd = ("printf '\\033]0;RAW\\007 out\\n'; printf '%s\\n' " + shlex.quote(followup)
           + ' >> "$ZELLIJ_SWARM_ARTIFACT_DIR/followups.jsonl"')
    swarm.write("e.toml", f"[[task]]\nname = {json.dumps('t' + ESCAPES)}\ncmd = {json.dumps(cmd)}\n")
    res = swarm("run", "e.toml", "--backend", "headless", "--name", "two\nlines\x1b[31m", "--output", "tag")
    assert res.code == 0, res.stderr
    shown_on_one_line(res.stderr)
    assert f"t{terminal_text(ESCAPES)}: succeeded" in res.stderr
    assert f"fu{terminal_text(ESCAPES)}: succeeded" in res.stderr
    # --output tag: the prefix is shown safely, the task's own bytes follow unchanged
    assert f"[t{terminal_text(ESCAPES)}] \x1b]0;RAW\x07 out\n" in res.stdout
    assert f"[fu{terminal_text(ESCAPES)}] fu-out\n" in res.stdout
    run = swarm.latest()
    assert swarm("logs", run.name, f"t{ESCAPES}").stdout == "\x1b]0;RAW\x07 out\n"
    status = swarm("status").stdout
    shown_on_one_line(status)
    lines = status.splitlines()
    assert lines[0].startswith(f"run {run.name} (two\\nlines\\x1b[31m): finished"), lines
    assert len(lines) == 4, lines  # the run, the table's header, its two tasks
    assert {t["name"] for t in json.loads(swarm("status", "--json").stdout)["tasks"]} == {f"t{ESCAPES}", f"fu{ESCAPES}"}
    shown_on_one_line(swarm("ls").stdout)
    for view in (["board", run.name, "--once"], ["slot-view", run.name, "1", "--once"]):
        frame = swarm(*view).stdout
        assert "\x07" not in frame and "\x9b" not in frame and "\x7f" not in frame and "\x1b]" not in frame, frame
        assert "\\x1b]2;HACKED\\x07" in frame, frame


def test_error_messages_show_task_data_safely(swarm):
    """Defect 11: an error that quotes a file name or task data is still one printable line."""
    bad = f"bad{ESCAPES}\n.toml"
    swarm.write(bad, "[[task]]\nname = 'x'\ncmd = 1\n")
    res = swarm("run", bad, "--backend", "headless")
    assert res.code == 2, res.stderr
    assert res.stderr.count("\n") == 1 and res.stderr.startswith("zellij-swarm: error: "), res.stderr
    shown_on_one_line(res.stderr)
    assert terminal_text(bad) in res.stderr


TRICKY = ["plain", "ends;", "ends\\;", ";", ";;", "a ; b", "#{pane_id}", "#(touch ${PWNED})", "##", "#", "a#",
          "#[fg=red]x", "##[bold]", "#[#{pane_id}]", "'\"$(x)`y`", "é日本", "-dash"]


def drawn(t: Tmux, target: str, cols: int, rows: int, ready: Callable[[list[str]], bool]) -> list[str]:
    """The screen a client attached to ``target`` draws (borders included, read through pyte),
    once ``ready`` accepts it and no more output is pending."""
    pid, fd = pty.fork()
    if pid == 0:
        os.execvpe("tmux", ["tmux", "-S", str(t.socket), "attach", "-t", target], {**os.environ, "TERM": "xterm"})
    screen = pyte.Screen(cols, rows)
    stream = pyte.ByteStream(screen)
    try:
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

        def settled() -> list[str] | None:
            if select.select([fd], [], [], 0.1)[0]:
                stream.feed(os.read(fd, 65536))
                return None
            return screen.display if ready(screen.display) else None

        return wait_until(settled, what="the client's screen")
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(fd)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_tmux_reads_back_what_the_encoders_give_it(tmp_path, tmux):
    """Against the real tmux: an encoded argument arrives unchanged (also before a ``;``
    separator), encoded format text expands to itself, an encoded title draws as itself, and
    nothing runs."""
    from zellij_swarm.quoting import tmux_arg, tmux_drawn, tmux_expanded, tmux_time_expanded

    pwned = tmp_path / "pwned"
    tmux("-f", "/dev/null", "new-session", "-d", "-s", "q", "-x", "200", "-y", "10", "sleep 60", ";",
         "set-environment", "-g", "PWNED", str(pwned), ";", "set-option", "-g", "status", "off", ";",
         "set-option", "-w", "-t", "q:", "pane-border-status", "top", ";",
         "split-window", "-d", "-t", "q:", "sleep 60")
    for text in TRICKY:
        tmux("set-option", "-p", "-t", "q:", "@v", tmux_arg(text), ";", "set-option", "-p", "-t", "q:", "@w", "x")
        assert tmux("show-options", "-p", "-v", "-t", "q:", "@v")[:-1] == text
        assert tmux("display-message", "-p", "-t", "q:", "--", tmux_arg(tmux_expanded(text)))[:-1] == text
    for text in [*TRICKY, "%d", "%%", "100%", "a%Yb#{pane_id}%"]:
        # display-message, like pipe-pane, runs strftime over its text first
        assert tmux("display-message", "-p", "-t", "q:", "--", tmux_arg(tmux_time_expanded(text)))[:-1] == text
    # every title on one border line, separated by |
    tmux("set-option", "-w", "-t", "q:", "pane-border-format",
         "<" + "|".join(f"#{{@t{i}}}" for i in range(len(TRICKY))) + ">", ";",
         *[a for i, text in enumerate(TRICKY) for a in ("set-option", "-p", "-t", "q:.0", f"@t{i}",
                                                        tmux_arg(tmux_drawn(text)), ";")][:-1])
    screen = drawn(tmux, "q", 200, 10, lambda lines: any("<" in ln and ">" in ln for ln in lines))
    border = next(ln for ln in screen if "<" in ln)
    assert border[border.index("<") + 1:border.rindex(">")].split("|") == TRICKY
    assert not pwned.exists()


@pytest.mark.parametrize("raw,shown", [
    ("plain é 日本 👨‍👩‍👧 back\\slash", "plain é 日本 👨‍👩‍👧 back\\slash"),
    ("a\nb\rc\td", "a\\nb\\rc\\td"),
    ("\x1b]2;title\x07\x1b[2J", "\\x1b]2;title\\x07\\x1b[2J"),
    ("\x00\x7f\x9b\x85", "\\x00\\x7f\\x9b\\x85"),
    ("rlo\u202eevil\u2066\u2028", "rlo\\u202eevil\\u2066\\u2028"),
    ("lone \udc80", "lone \\udc80"),
])
def test_terminal_text_makes_every_control_visible(raw, shown):
    assert terminal_text(raw) == shown
