"""``run --joblog FILE`` (issue 15 part 6): GNU parallel's joblog format, read back by GNU
parallel itself where it is installed."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from zellij_swarm import exc
from zellij_swarm.records.joblog import HEADER, JobLine, JobLog, exit_columns

needs_parallel = pytest.mark.skipif(shutil.which("parallel") is None,
                                    reason="GNU parallel is not installed: nothing to read the joblog back with")


def row(n: int, status: str, *, code: int | None = None, signal: str | None = None, start: float = 1000.0,
        end: float = 1001.25, attempts: int = 1) -> dict[str, Any]:
    """A terminal task row (``status --json``) whose final attempt ended so."""
    history = [{"attempt": a, "slot": 1, "generation": a, "status": status if a == attempts else "failed",
                "exit_code": code if a == attempts else 1, "signal": signal if a == attempts else None,
                "reason": None, "started_at": start if a == attempts else start - 10, "ended_at": end,
                "pid": 100 + a, "pane_id": None} for a in range(1, attempts + 1)]
    return {"name": f"task-{n}", "id": f"t{n}", "status": status, "exit_code": code, "signal": signal,
            "attempts": attempts, "started_at": start, "ended_at": end, "history": history}


def parallel_retry_failed(joblog: Path, home: Path) -> str:
    """The commands ``parallel --retry-failed`` would run again, one a line (``--dry-run``)."""
    argv = ["parallel", "--will-cite", "--keep-order", "--retry-failed", "--joblog", str(joblog), "--dry-run"]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=60, env={**os.environ, "HOME": str(home)})
    assert res.returncode == 0, res.stderr
    return res.stdout


@pytest.mark.parametrize(("status", "code", "signal", "columns"), [
    ("succeeded", 0, None, (0, 0)),
    ("failed", 3, None, (3, 0)),
    ("failed", 143, "SIGTERM", (0, 15)),  # death by signal: parallel's "0, 15" (`kill -TERM $$`)
    ("failed", 137, "SIGKILL", (0, 9)),
    ("failed", 168, "SIG40", (0, 40)),  # a real-time signal Python has no name for
    ("timed_out", 143, "SIGTERM", (-1, 15)),  # killed by us: parallel's --timeout writes -1, 15
    ("timed_out", 2, None, (2, 0)),  # a worker that caught the signal and exited with its own code
    ("cancelled", 143, "SIGTERM", (-1, 15)),
    ("cancelled", None, None, (-1, 0)),
    ("lost", None, None, (-1, 0)),  # vanished without an exit record
    ("failed", None, None, (-1, 0)),  # could not start (spawn_failed): never "0 0"
])
def test_exit_columns_are_what_parallel_writes(status, code, signal, columns):
    assert exit_columns(status, code, signal) == columns


def test_a_line_is_formatted_exactly_as_parallel_formats_it():
    line = JobLine.of_row(row(12, "failed", code=3, start=1796051483.3284, end=1796051484.5339), "make -C 'a b'")
    assert line is not None
    # Starttime %.3f, JobRuntime truncated to ms in %10.3f, Host ":", Send/Receive 0
    assert line.line() == "12\t:\t1796051483.328\t     1.205\t0\t0\t3\t0\tmake -C 'a b'\n"


def test_the_final_attempt_is_the_line_and_newlines_in_a_command_become_nul():
    line = JobLine.of_row(row(2, "succeeded", code=0, start=50.0, end=52.0, attempts=3), "printf 'a\nb'")
    assert line is not None
    assert line.line() == "2\t:\t50.000\t     2.000\t0\t0\t0\t0\tprintf 'a\0b'\n"


@pytest.mark.parametrize("status", ["skipped", "cancelled"])
def test_a_task_that_never_started_writes_no_line(tmp_path, status):
    joblog = JobLog(tmp_path / "jl")
    never = {"name": "b", "id": "t2", "status": status, "exit_code": None, "signal": None, "history": []}
    assert joblog.task_finished(never, "echo b") is None
    joblog.close()
    assert (tmp_path / "jl").read_text() == HEADER


def test_file_is_truncated_and_plus_file_appends_with_one_header(tmp_path):
    path = tmp_path / "jl"
    path.write_text("old run\n")
    first = JobLog.from_option(str(path))
    first.task_finished(row(1, "succeeded", code=0), "true")
    first.close()
    assert path.read_text().startswith(HEADER + "1\t:\t")
    again = JobLog.from_option(f"+{path}")
    again.task_finished(row(2, "failed", code=1), "false")
    again.close()
    lines = path.read_text().splitlines()
    assert [ln.split("\t")[0] for ln in lines] == ["Seq", "1", "2"]
    fresh = tmp_path / "new"
    JobLog.from_option(f"+{fresh}").close()  # a new file gets the header too (parallel's +FILE would not)
    assert fresh.read_text() == HEADER


@pytest.mark.parametrize("where", ["missing/jl", "."])
def test_a_joblog_that_cannot_be_opened_is_a_usage_error(tmp_path, where):
    with pytest.raises(exc.UsageError, match=r"^--joblog .*: cannot write it: "):
        JobLog(tmp_path / where)


def test_a_write_that_fails_mid_run_is_one_warning_then_the_joblog_stops(tmp_path):
    r, w = os.pipe()
    try:
        joblog = JobLog(Path(f"/dev/fd/{w}"))
        assert os.read(r, 1000).decode() == HEADER
        os.close(r)  # the reader went away: the next write fails (EPIPE)
        warning = joblog.task_finished(row(1, "failed", code=2), "false")
        assert warning == (f"cannot write the joblog /dev/fd/{w}: Broken pipe; "
                           "it stops at the tasks before 'task-1'")
        assert joblog.task_finished(row(2, "failed", code=2), "false") is None  # said once
        joblog.close()
    finally:
        os.close(w)


@needs_parallel
def test_parallel_retry_failed_reads_back_exactly_the_failed_commands(tmp_path):
    joblog = JobLog(tmp_path / "jl")
    outcomes = [row(1, "succeeded", code=0), row(2, "failed", code=3), row(3, "failed", code=143, signal="SIGTERM"),
                row(4, "timed_out", code=143, signal="SIGTERM"), row(5, "succeeded", code=0, attempts=2),
                row(6, "lost"), row(7, "cancelled", code=143, signal="SIGTERM"), row(8, "failed", code=1)]
    commands = ["true", "exit 3", "kill -TERM $$", "sleep 9", "echo 'x\ty'", "sh -c 'echo lost'", "sleep 8",
                "printf 'two\nlines'"]
    for r, c in zip(reversed(outcomes), reversed(commands), strict=True):  # any order of ending
        assert joblog.task_finished(r, c) is None
    joblog.close()
    assert parallel_retry_failed(tmp_path / "jl", tmp_path) == (
        "exit 3\nkill -TERM $$\nsleep 9\nsh -c 'echo lost'\nsleep 8\nprintf 'two\nlines'\n")


# ----- end to end, through `run --joblog` ---------------------------------------------------

SWARM = """\
[swarm]
jobs = 2
retries = 1
[[task]]
name = "ok"
cmd = "true"
[[task]]
name = "three"
cmd = "exit 3"
[[task]]
name = "flaky"
cmd = "if [ -e once ]; then exit 0; fi; touch once; exit 1"
[[task]]
name = "sig"
cmd = "kill -TERM $$"
[[task]]
name = "argv"
argv = ["sh", "-c", "exit 4", "it's"]
[[task]]
name = "never"
cmd = "echo never"
after = ["three"]
"""


def test_run_joblog_is_read_back_by_gnu_parallel(swarm):
    swarm.write("s.toml", SWARM)
    res = swarm("run", "s.toml", "--backend", "headless", "--output", "quiet", "--joblog", "jl")
    assert res.code == 1, res.stderr
    lines = (swarm.cwd / "jl").read_text().splitlines()
    assert lines[0] + "\n" == HEADER
    by_seq = {int(ln.split("\t")[0]): ln.split("\t") for ln in lines[1:]}
    assert sorted(by_seq) == [1, 2, 3, 4, 5]  # one line per task that ran; "never" was skipped
    assert [by_seq[n][6:8] for n in (1, 2, 3, 4, 5)] == [["0", "0"], ["3", "0"], ["0", "0"], ["0", "15"], ["4", "0"]]
    argv_command = shlex.join(["sh", "-c", "exit 4", "it's"])
    assert by_seq[5][8] == argv_command  # an argv task, shell-joined
    tasks = swarm.tasks()
    assert float(by_seq[3][2]) == pytest.approx(tasks["flaky"]["history"][-1]["started_at"], abs=1e-3)
    if shutil.which("parallel"):
        assert parallel_retry_failed(swarm.cwd / "jl", swarm.cwd) == f"exit 3\nkill -TERM $$\n{argv_command}\n"


def test_run_joblog_that_cannot_be_written_is_exit_2_before_anything_runs(swarm):
    swarm.write("s.toml", '[[task]]\nname = "t"\ncmd = "touch ran"\n')
    res = swarm("run", "s.toml", "--backend", "headless", "--output", "quiet", "--joblog", "no/such/dir/jl")
    assert res.code == 2
    assert res.stderr == "zellij-swarm: error: --joblog no/such/dir/jl: cannot write it: No such file or directory\n"
    assert not (swarm.cwd / "ran").exists()
