"""The one tmux client (``zellij_swarm.backends.tmux_client``): libtmux only when tmux is
talked to, every libtmux call under a deadline, the rows it reads, and the version rules."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from swarmtest import clean_env
from test_tmux import Driven
from tmuxtest import Tmux, outside_env

from zellij_swarm import names
from zellij_swarm.backends.tmux_client import TmuxClient, parse_version
from zellij_swarm.exc import BackendError


def test_the_command_line_and_every_command_import_without_libtmux() -> None:
    """libtmux costs ~0.1 s of CPU to import: a command that never talks to tmux never pays it."""
    probe = ("import sys, pkgutil, importlib, zellij_swarm.cli, zellij_swarm.commands as c\n"
             "for m in pkgutil.iter_modules(c.__path__): importlib.import_module(f'zellij_swarm.commands.{m.name}')\n"
             "import zellij_swarm.backends.tmux, zellij_swarm.backends.leftovers\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] == 'libtmux'))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, env=clean_env())
    assert (out.returncode, out.stdout, out.stderr) == (0, "[]\n", "")


@pytest.mark.parametrize(("text", "number", "tested", "old", "too_old", "format_option"), [
    ("3.3a", (3, 3), True, False, False, True),
    ("3.4", (3, 4), False, False, False, True),
    ("3.2a", (3, 2), False, False, False, False),  # runs quietly; a dead pane says "Pane is dead"
    ("3.1c", (3, 1), False, True, False, False),
    ("2.9a", (2, 9), False, False, True, False),
    ("next-3.6", (3, 6), False, False, False, True),
    ("master", None, False, False, False, True),
])
def test_what_a_version_can_do(text: str, number: tuple[int, int] | None, tested: bool, old: bool, too_old: bool,
                               format_option: bool) -> None:
    v = parse_version(text)
    assert (v.number, v.tested, v.untested_old, v.too_old, v.has_remain_on_exit_format) == (
        number, tested, old, too_old, format_option)


def test_windows_and_panes_are_read_with_the_run_they_belong_to(tmux: Tmux) -> None:
    client = TmuxClient(outside_env(tmux))
    assert (client.windows(), client.panes(), client.running()) == ([], None, False)  # no server yet
    tmux("new-session", "-d", "-s", "host", "-x", "80", "-y", "24")
    made = tmux("new-window", "-d", "-P", "-F", "#{window_id}", "-t", "host:", "-n", "swarm-r1 (2 waiting)").strip()
    tmux("set-option", "-w", "-t", made, names.RUN_OPTION, "r1")
    pane = tmux("display-message", "-p", "-t", made, "#{pane_id}").strip()
    tmux("set-option", "-p", "-t", pane, "@zsw_title", "slot 1 · a\tb · running")
    rows = {w.id: w for w in client.windows()}
    assert rows[made].run == "r1" and rows[made].name == "swarm-r1 (2 waiting)"
    assert rows[made].session_name == "host" and len(rows) == 2 and {w.run for w in rows.values()} == {"r1", ""}
    [row] = client.panes(made) or []
    assert (row.id, row.window_id, row.run, row.title, row.short) == (pane, made, "r1", "slot 1 · a\tb · running", "")
    assert client.has_session("=host") and not client.has_session("=other")
    assert client.running()


def test_a_server_that_does_not_answer_costs_one_deadline_and_leaves_no_client_behind(tmux: Tmux, monkeypatch) -> None:
    # psutil's wall-clock start of a process rests on a boot time rounded to the second: on one
    # machine 0.8 s early, so that no client counted as started by the call, and none was killed
    monkeypatch.setattr(psutil.Process, "create_time", lambda self: 0.0)
    tmux("new-session", "-d", "-s", "host")
    server = int(tmux("display-message", "-p", "#{pid}").strip())
    client = TmuxClient(outside_env(tmux), timeout=0.5)
    os.kill(server, signal.SIGSTOP)
    try:
        began = time.monotonic()
        with pytest.raises(BackendError) as e:
            client.windows()
        assert e.value.code == "pane_call_timeout" and "no answer within 0.5s" in str(e.value)
        assert time.monotonic() - began < 3
        # (a client's name is "tmux: client": its command line says what it is)
        def talks_to_it(p: psutil.Process) -> bool:
            argv = p.as_dict(["cmdline"])["cmdline"] or ()  # none: a killed one not reaped yet
            return str(tmux.socket) in " ".join(argv)

        assert [p.pid for p in psutil.Process().children() if talks_to_it(p)] == []
        began = time.monotonic()
        with pytest.raises(BackendError):  # never waited on again
            client.windows()
        assert time.monotonic() - began < 0.2
        # but whether a session is there is asked again, briefly: never assumed
        with pytest.raises(BackendError) as e:
            client.has_session("=host")
        assert e.value.code == "pane_call_timeout"
        assert [p for p in psutil.Process().children() if p.name() == "tmux"] == []
    finally:
        os.kill(server, signal.SIGCONT)


def test_no_tmux_on_path_is_multiplexer_missing(tmp_path: Path) -> None:
    client = TmuxClient(clean_env(PATH=str(tmp_path)))
    for call in (client.version, client.windows):
        with pytest.raises(BackendError) as e:
            call()
        assert e.value.code == "multiplexer_missing"


def fake_tmux(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, version: str) -> None:
    """A ``tmux`` first on PATH that says it is ``version`` and is the real one otherwise."""
    real = subprocess.run(["sh", "-c", "command -v tmux"], capture_output=True, text=True, check=True).stdout.strip()
    bin_dir = tmp_path / f"bin-{version}"
    bin_dir.mkdir()
    (bin_dir / "tmux").write_text(f'#!/bin/sh\n[ "$1" = -V ] && {{ echo "tmux {version}"; exit 0; }}\n'
                                  f'exec {real} "$@"\n')
    (bin_dir / "tmux").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")


def test_a_tmux_too_old_to_work_is_said_before_anything_is_opened(tmux: Tmux, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    fake_tmux(monkeypatch, tmp_path, "2.9a")
    with pytest.raises(BackendError) as e:
        Driven(tmux, tmp_path)
    assert e.value.code == "multiplexer_too_old"
    assert str(e.value) == "tmux 2.9a is too old: zellij-swarm needs tmux 3.0 or later (its pane titles are pane " \
                           "options)"
    assert tmux("list-sessions", check=False) == ""  # no session made


def test_an_old_tmux_runs_with_one_warning_and_no_format_it_lacks(tmux: Tmux, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    fake_tmux(monkeypatch, tmp_path, "3.1c")
    d = Driven(tmux, tmp_path)
    assert [code for code, _ in d.warnings] == ["tmux_untested"]
    assert d.warnings[0][1].startswith("tmux 3.1c is older than 3.2 (zellij-swarm is tested with tmux 3.3)")
    window = d.backend.windows[0].id
    local = tmux("show-options", "-w", "-t", window)  # the window's own options, those the backend set
    assert "remain-on-exit on" in local and "remain-on-exit-format" not in local  # 3.1 has no such option


@pytest.mark.parametrize(("version", "said"), [
    ("3.3a", "tmux: tmux 3.3a (tested)"),
    ("3.4", "tmux: tmux 3.4 (untested: zellij-swarm is tested with tmux 3.3; it runs)"),
    ("3.1c", "tmux: tmux 3.1c (untested: zellij-swarm is tested with tmux 3.3; it runs, and a pane that ended "
             "shows tmux's \"Pane is dead\" line)"),
    ("2.9a", "tmux: tmux 2.9a (too old: zellij-swarm needs tmux 3.0 or later)"),
])
def test_doctor_says_whether_the_tmux_found_is_the_tested_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              version: str, said: str) -> None:
    from zellij_swarm.commands import doctor

    fake_tmux(monkeypatch, tmp_path, version)
    env = clean_env()
    info = doctor.report(env)
    assert info["tmux"]["version"] == f"tmux {version}"
    assert said in doctor.format_report(info, env)


def test_an_install_without_libtmux_says_so_in_one_line(tmp_path: Path) -> None:
    """libtmux is a declared dependency; an interpreter that cannot import it (a venv made by
    hand) is told as a missing tmux is — one line naming the package and the interpreter, and
    the run goes on headless, or under ``--require-multiplexer`` runs nothing — never as an
    internal error at the first tmux call. The backend's name is said once."""
    probe = ("import sys\n"
             "class NoLibtmux:\n"
             "    def find_spec(self, name, path=None, target=None):\n"
             "        if name.split('.')[0] == 'libtmux': raise ModuleNotFoundError(name)\n"
             "sys.meta_path.insert(0, NoLibtmux())\n"
             "from zellij_swarm import cli\n"
             "cli.main(sys.argv[1:])\n")
    (tmp_path / "tasks").write_text(f"echo x >>{tmp_path}/ran\n")
    env = clean_env(TMUX_TMPDIR=str(tmp_path))
    env.pop("TMUX", None)
    said = f"tmux: the Python package libtmux cannot be imported by {sys.executable}"
    for required, code, runs in ((True, 1, ""), (False, 0, "x\n")):
        argv = ["run", "--backend", "tmux", "--state-dir", str(tmp_path / "s"), str(tmp_path / "tasks")]
        out = subprocess.run([sys.executable, "-c", probe, *argv, *(["--require-multiplexer"] * required)],
                             capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
        warning = [line for line in out.stderr.splitlines() if "warning [multiplexer_missing]" in line]
        assert len(warning) == 1 and f"] {said} (" in warning[0], out.stderr
        assert "internal error" not in out.stderr and out.returncode == code, out.stderr
        assert (tmp_path / "ran").read_text() == runs if runs else not (tmp_path / "ran").exists()
    doctor = subprocess.run([sys.executable, "-c", probe, "doctor"], capture_output=True, text=True, timeout=60,
                            env=env, cwd=tmp_path)  # (it said "tmux: not found", tmux being there)
    assert f"tmux: not usable: the Python package libtmux cannot be imported by {sys.executable}" in doctor.stdout, \
        doctor.stdout + doctor.stderr


@pytest.mark.parametrize("silent", ["#{session_name}", "#{window_width} #{window_height}", "#{pid} #{socket_path}"])
def test_a_tmux_answer_left_empty_as_the_window_opens_is_a_fault_not_a_crash(tmp_path: Path, silent: str) -> None:
    """A server or session that goes as the run opens its window (killed by hand, in the
    moment) can leave a `display-message -p` with nothing printed: an IndexError or a
    ValueError, an internal error, where it is a tmux fault — said, and the run headless."""
    real = subprocess.run(["sh", "-c", "command -v tmux"], capture_output=True, text=True, check=True).stdout.strip()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "tmux").write_text(f'#!/bin/sh\nfor a; do [ "$a" = {shlex.quote(silent)} ] && exit 0; done\n'
                                  f'exec {real} "$@"\n')
    (bin_dir / "tmux").chmod(0o755)
    (tmp_path / "t.txt").write_text(f"echo x >> {tmp_path}/ran\n")
    env = clean_env(TMUX_TMPDIR=str(tmp_path), PATH=f"{bin_dir}:{os.environ['PATH']}")
    env.pop("TMUX", None)
    try:
        out = subprocess.run([sys.executable, "-m", "zellij_swarm", "run", "--backend", "tmux", "--ui", "live",
                              "--state-dir", str(tmp_path / "s"), str(tmp_path / "t.txt")],
                             capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    finally:
        subprocess.run([real, "kill-server"], env=env, capture_output=True, timeout=30)
    assert "internal error" not in out.stderr and out.returncode == 0, out.stderr
    assert "warning [pane_call_failed] tmux: tmux display-message: no answer" in out.stderr, out.stderr
    assert (tmp_path / "ran").read_text() == "x\n"
