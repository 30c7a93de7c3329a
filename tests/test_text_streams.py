"""The command line called in-process with stdout and stderr replaced by text streams that have
no ``buffer`` (``io.StringIO`` under ``contextlib.redirect_stdout``), as a program embedding
``zellij_swarm.cli.main`` or a test does: every command's output still arrives, as text.
``status --json`` wrote its pieces to ``sys.stdout.buffer`` and died there with an internal
error. And a run whose stdout or stderr nobody reads any more (``| head``, a full disk) goes on
to its end."""
from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from zellij_swarm import streams
from zellij_swarm.cli import main


def call(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code: int | str | None = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(argv)
        except SystemExit as e:
            code = e.code
    assert isinstance(code, int)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def ended_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    state = tmp_path_factory.mktemp("state")
    subprocess.run([sys.executable, "-m", "zellij_swarm", "run", "-j", "2", "--backend", "headless",
                    "--output", "quiet", "--state-dir", str(state), "-"],
                   input=b"echo one\nprintf 't\\303\\251\\n'; exit 3\n", check=False, timeout=60)
    return state


def test_status_json_is_written_as_text(ended_run: Path) -> None:
    code, out, err = call(["status", "--json", "--state-dir", str(ended_run)])
    assert (code, err) == (0, "")
    doc = json.loads(out)
    assert [(t["name"], t["status"]) for t in doc["tasks"]] == [("task-1", "succeeded"), ("task-2", "failed")]


def test_status_and_logs_are_written_as_text(ended_run: Path) -> None:
    code, out, _ = call(["status", "--state-dir", str(ended_run)])
    assert code == 0 and "task-2" in out and "failed" in out
    assert call(["logs", "task-2", "--state-dir", str(ended_run)]) == (0, "té\n", "")


def test_a_run_s_worker_output_reaches_a_text_stdout(tmp_path: Path) -> None:
    commands = tmp_path / "commands.txt"
    commands.write_text("echo one\n")
    code, out, err = call(["run", "-j", "1", "--backend", "headless", "--output", "group",
                           "--state-dir", str(tmp_path / "s"), str(commands)])
    assert (code, out) == (0, "one\n"), err


def test_a_character_split_between_writes_is_kept_whole() -> None:
    text = io.StringIO()
    writer = streams.bytes_out(text)
    for piece in (b"t\xc3", b"\xa9 \xff\n", b"\xe2\x82"):
        writer.write(piece)
    assert text.getvalue() == "té \ufffd\n"
    writer.flush()  # the end of what was copied: the half character is not coming
    assert text.getvalue() == "té \ufffd\n\ufffd"


def test_a_real_stream_gets_the_bytes_after_its_text() -> None:
    raw = io.BytesIO()
    text = io.TextIOWrapper(raw, encoding="utf-8")
    text.write("first ")
    streams.bytes_out(text).write(b"\xff then")
    assert raw.getvalue() == b"first \xff then"


def test_a_stdin_without_a_descriptor_is_the_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``run -`` with ``sys.stdin`` an ``io.StringIO``: its text is the input (it was refused:
    "cannot read standard input")."""
    monkeypatch.setattr(sys, "stdin", io.StringIO("echo a\necho b\n"))
    code, out, err = call(["run", "-", "-j", "1", "--backend", "headless", "--output", "group",
                           "--state-dir", str(tmp_path)])
    assert (code, out) == (0, "a\nb\n"), err


def test_a_closed_stdin_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    closed = io.StringIO()
    closed.close()
    monkeypatch.setattr(sys, "stdin", closed)
    code, _, err = call(["run", "-", "--backend", "headless", "--state-dir", str(tmp_path)])
    assert code == 2 and err.startswith("zellij-swarm: error: cannot read standard input: "), err


def zsw(state: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "zellij_swarm", "run", "-j", "2", "--backend", "headless", "--state-dir", str(state),
            *args]


def statuses(state: Path) -> list[str]:
    code, out, err = call(["status", "--json", "--state-dir", str(state)])
    assert code == 0, err
    return [t["status"] for t in json.loads(out)["tasks"]]


@pytest.mark.parametrize("both", [False, True], ids=["stdout", "stdout-and-stderr"])
def test_a_reader_that_goes_away_ends_the_copying_not_the_run(tmp_path: Path, both: bool) -> None:
    """``run … | head -1`` (``2>&1 | head -1``): the first write to the closed pipe killed the
    supervisor — the run left "interrupted", its tasks "running" for ever. Now the output is
    given up, said once on stderr (when it is still read), and the run ends as its tasks do."""
    proc = subprocess.Popen(zsw(tmp_path, ":::", "seq 1 100000", "sleep 1; echo done"),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT if both else subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.readline()
    proc.stdout.close()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0
    if not both:
        assert b"warning: the workers' output is no longer copied to stdout (Broken pipe)" in err, err
    assert statuses(tmp_path) == ["succeeded", "succeeded"]


def test_a_full_disk_under_stdout_ends_the_copying_not_the_run(tmp_path: Path) -> None:
    with open("/dev/full", "wb") as full:
        res = subprocess.run(zsw(tmp_path, ":::", "seq 1 1000", "echo two"), stdout=full, stderr=subprocess.PIPE,
                             timeout=60)
    assert res.returncode == 0
    assert b"no longer copied to stdout (No space left on device)" in res.stderr
    assert statuses(tmp_path) == ["succeeded", "succeeded"]


@pytest.mark.parametrize("closed", [">&-", "2>&-", "<&- >&- 2>&-"])
def test_a_run_started_with_its_standard_streams_closed_runs(tmp_path: Path, closed: str) -> None:
    """``run … >&-``: Python gives a closed stdout as None, and the reporter died on it (an
    internal error, the run left "interrupted" with its tasks "running"). The process now puts
    /dev/null in place of each closed one first, before any file of a run can take its
    descriptor."""
    argv = " ".join(f"'{a}'" for a in zsw(tmp_path, ":::", "echo one", "echo two >&2"))
    res = subprocess.run(["sh", "-c", f"exec {argv} {closed}"], capture_output=True, timeout=60)
    assert res.returncode == 0, res
    assert statuses(tmp_path) == ["succeeded", "succeeded"]
    assert call(["logs", "task-1", "--state-dir", str(tmp_path)])[1] == "one\n"


@pytest.mark.parametrize("command", [("status",), ("status", "--json"), ("ls",), ("proof",), ("run", "--help")])
def test_a_full_stdout_is_one_line_for_every_command(ended_run: Path, command: tuple[str, ...]) -> None:
    """``status >/dev/full``: click.echo's ENOSPC was an internal error with a crash report."""
    with open("/dev/full", "wb") as full:
        res = subprocess.run([sys.executable, "-m", "zellij_swarm", *command, "--state-dir", str(ended_run)],
                             stdout=full, stderr=subprocess.PIPE, text=True, timeout=60)
    assert (res.returncode, res.stderr) == (1, "zellij-swarm: error: cannot write: No space left on device\n")


@pytest.mark.parametrize("command", [("status", "--all"), ("logs",), ("logs", "task-1"), ("proof",)])
def test_a_reader_that_goes_ends_the_command_as_sigpipe_would(ended_run: Path, command: tuple[str, ...]) -> None:
    """``logs TASK | head -1``: click ends a command whose write met EPIPE with status 1 — to a
    pipeline, a failure. A reader that went is what SIGPIPE tells a shell: 141, nothing said."""
    read, write = os.pipe()
    os.close(read)  # the reader is gone before anything is written
    try:
        res = subprocess.run([sys.executable, "-m", "zellij_swarm", *command, "--state-dir", str(ended_run)],
                             stdout=write, stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write)
    assert (res.returncode, res.stderr) == (141, "")


def test_a_state_directory_that_cannot_be_written_is_one_line(ended_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``retry`` on a read-only (or full) state directory: its lock could not be taken, an
    internal error. The machine's errors name what could not be written."""
    from zellij_swarm.records import runlock

    def read_only(lock: runlock.RunLock) -> None:
        raise OSError(30, "Read-only file system", str(ended_run / "lock"))

    monkeypatch.setattr(runlock.RunLock, "acquire", read_only)
    code, _, err = call(["retry", "--state-dir", str(ended_run)])
    assert (code, err) == (1, f"zellij-swarm: error: {ended_run / 'lock'}: Read-only file system\n")


def test_a_stdout_that_cannot_encode_a_name_gets_it_escaped(tmp_path: Path) -> None:
    """``PYTHONIOENCODING=latin-1 zellij-swarm status`` on a task named ``ü😀``: a
    UnicodeEncodeError, an internal error."""
    (tmp_path / "s.toml").write_text('[[task]]\nname = "ü😀"\ncmd = "true"\n')
    subprocess.run(zsw(tmp_path / "state", "--output", "quiet", str(tmp_path / "s.toml")), check=True, timeout=60)
    res = subprocess.run([sys.executable, "-m", "zellij_swarm", "status", "--state-dir", str(tmp_path / "state")],
                         capture_output=True, timeout=60, env={**os.environ, "PYTHONIOENCODING": "latin-1"})
    assert (res.returncode, res.stderr) == (0, b"")
    assert "ü\\U0001f600".encode("latin-1") in res.stdout


def test_a_full_disk_elsewhere_is_not_blamed_on_the_output(ended_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An ENOSPC with no file named (a record's write) is one line, not an internal error,
    and does not claim it was stdout that failed."""
    from zellij_swarm.commands import status as views

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(views, "show_status", full)
    assert call(["status", "--state-dir", str(ended_run)]) == (1, "", "zellij-swarm: error: cannot write: No space "
                                                                    "left on device\n")


def test_an_attach_hint_for_a_task_named_like_an_option_runs_as_printed() -> None:
    from zellij_swarm.commands.status import show_command

    pane = {"pane_id": "%3"}
    assert show_command({"run_id": "r1"}, {"name": "-x", "id": "t1", **pane}, latest=False) == (
        "zellij-swarm attach -- r1 -x")
    assert show_command({"run_id": "r1"}, {"name": "b", "id": "t2", **pane}, latest=True) == "zellij-swarm attach b"
    # no pane (headless): nothing to attach to, its output shows what it asked
    assert show_command({"run_id": "r1"}, {"name": "-x", "id": "t1", "pane_id": None}, latest=False) == (
        "zellij-swarm logs --follow -- r1 -x")


def test_a_hint_names_by_its_id_a_task_whose_name_a_terminal_shows_escaped(swarm) -> None:
    """A task named with an escape or a newline: the hint, shown escaped, named no task when
    typed (``logs RUN '\\x1b[31mred'``: "has no task"). It names the task by its id, which
    works as printed."""
    swarm.write("s.toml", '[[task]]\nname = "\\u001b[31mred"\ncmd = "exit 3"\n'
                          '[[task]]\nname = "a\\nb"\ncmd = "exit 4"\n')
    res = swarm("run", "s.toml", "--backend", "headless", "--output", "group")
    assert res.code == 1
    run = swarm.latest().name
    hints = [line.split(" — ", 1)[1] for line in res.stderr.splitlines() if " — zellij-swarm logs" in line]
    assert sorted(hints) == [f"zellij-swarm logs {run} t1", f"zellij-swarm logs {run} t2"], res.stderr
    for hint in hints:
        assert swarm(*hint.split()[1:]).code == 0


@pytest.mark.parametrize("how", [(), ("--template", "true {}")])
def test_an_endless_file_is_refused_not_read_into_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          how: tuple[str, ...]) -> None:
    """``run /dev/zero``: read whole, a MemoryError (an internal error) or all the memory there is."""
    from zellij_swarm.config import swarmfile

    monkeypatch.setattr(swarmfile, "MAX_FILE_BYTES", 1 << 16)
    code, _, err = call(["run", *how, "/dev/zero", "--backend", "headless", "--state-dir", str(tmp_path)])
    assert code == 2 and err.startswith("zellij-swarm: error: /dev/zero: larger than 65,536 bytes, expected"), err
