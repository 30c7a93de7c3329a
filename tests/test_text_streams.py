"""The command line called in-process with stdout and stderr replaced by text streams that have
no ``buffer`` (``io.StringIO`` under ``contextlib.redirect_stdout``), as a program embedding
``zellij_swarm.cli.main`` or a test does: every command's output still arrives, as text.
``status --json`` wrote its pieces to ``sys.stdout.buffer`` and died there with an internal
error."""
from __future__ import annotations

import contextlib
import io
import json
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
    for piece in (b"t\xc3", b"\xa9 \xff\n"):
        writer.write(piece)
    assert text.getvalue() == "té \ufffd\n"


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
