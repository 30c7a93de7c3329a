"""What a run writes besides its records — ``--junit``, ``--joblog`` — survives a killed
supervisor (issue 22.4): the run records them, ``resume`` and ``retry`` complete them, and a
report from an earlier run never passes for this one's while it has not finished."""

from __future__ import annotations

import os
import signal
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from swarmtest import GATE, Running, wait_until

GREEN = '<?xml version="1.0"?><testsuite name="old" tests="1" failures="0"><testcase name="x"/></testsuite>'


def cases(report: Path) -> dict[str, str | None]:
    """Each testcase's name and the element that says it did not pass (None: it passed)."""
    suite = ET.parse(report).getroot()
    return {c.get("name", ""): next((e.tag for e in c if e.tag in ("failure", "error", "skipped")), None)
            for c in suite.iter("testcase")}


def joblog_lines(path: Path) -> list[list[str]]:
    lines = path.read_text().splitlines()
    assert lines[0].startswith("Seq\t"), lines
    return [line.split("\t") for line in lines[1:]]


@pytest.mark.parametrize("option", ["--junit", "--joblog"])
def test_an_empty_report_path_is_a_usage_error(swarm, option):
    swarm.write("t.txt", "true\n")
    res = swarm("run", "t.txt", option, "")
    assert res.code == 2, res.stderr
    assert res.stderr.strip().splitlines() == [f"zellij-swarm: error: {option}: an empty file name; "
                                               "name the file to write"]
    assert swarm.runs() == []


def test_an_empty_report_html_path_is_named_as_given(swarm):
    """``report --html ''`` said ``--html .: is a directory``: a name never given."""
    swarm.write("t.txt", "true\n")
    assert swarm("run", "t.txt", "--output", "quiet").code == 0
    res = swarm("report", "--html", "")
    assert (res.code, res.stderr) == (2, "zellij-swarm: error: --html: an empty file name; name the file to write\n")


def test_resume_completes_the_junit_report_and_the_joblog(swarm):
    """kill -9 of the supervisor while a task runs: the stale green report is already gone (the
    run says it has not finished), and ``resume`` writes the whole report and the rest of the
    joblog — each task's line once."""
    (swarm.cwd / "r.xml").write_text(GREEN)
    swarm.write("t.txt", f"echo quick\n{GATE}; echo a\n{GATE}; exit 3\n")
    with Running(swarm, "t.txt", "-j", "2", "--output", "quiet", "--junit", "r.xml", "--joblog", "jl",
                 settle=0) as r:
        assert r.run is not None
        wait_until(lambda: len(joblog_lines(swarm.cwd / "jl")) == 1, what="the quick task's joblog line")
        wait_until(lambda: (r.run / "slots/slot-1/gen-2/claim").exists()
                   or (r.run / "slots/slot-2/gen-2/claim").exists(), what="the third task started")
        assert cases(swarm.cwd / "r.xml") == {f"run {r.run.name} did not finish": "failure"}
        r.killed()
        assert cases(swarm.cwd / "r.xml") == {f"run {r.run.name} did not finish": "failure"}
        swarm.open_gate()
        res = swarm("resume", r.run.name, "--output", "quiet")
        assert res.code == 1, res.stderr
    assert cases(swarm.cwd / "r.xml") == {"task-1": None, "task-2": None, "task-3": "failure"}
    lines = joblog_lines(swarm.cwd / "jl")
    assert sorted((int(f[0]), f[6], f[8]) for f in lines) == [
        (1, "0", "echo quick"), (2, "0", f"{GATE}; echo a"), (3, "3", f"{GATE}; exit 3")]


def test_retry_rewrites_the_report_and_appends_to_the_joblog(swarm):
    (swarm.cwd / "r.xml").write_text(GREEN)
    swarm.write("t.txt", "echo fine\n[ -e fixed ]\n")
    res = swarm("run", "t.txt", "--output", "quiet", "--junit", "r.xml", "--joblog", "jl")
    assert res.code == 1, res.stderr
    assert cases(swarm.cwd / "r.xml") == {"task-1": None, "task-2": "failure"}
    (swarm.cwd / "fixed").touch()
    run = swarm.latest().name
    res = swarm("retry", run, "--output", "quiet")
    assert res.code == 0, res.stderr
    assert cases(swarm.cwd / "r.xml") == {"task-1": None, "task-2": None}
    # parallel --resume-failed's rule: the retried task's new line comes after its old one (the
    # first run's two lines are in the order its tasks ended)
    lines = [(f[0], f[6]) for f in joblog_lines(swarm.cwd / "jl")]
    assert sorted(lines[:2]) == [("1", "0"), ("2", "1")] and lines[2:] == [("2", "0")]


def test_a_run_killed_before_its_end_leaves_a_failing_report(swarm):
    """Nothing resumes it: whoever reads the report sees a run that did not finish."""
    (swarm.cwd / "r.xml").write_text(GREEN)
    swarm.write("t.txt", f"{GATE}\n")
    with Running(swarm, "t.txt", "--output", "quiet", "--junit", "r.xml", settle=0) as r:
        assert r.run is not None
        wait_until(lambda: (r.run / "slots/slot-1/gen-1/claim").exists(), what="the worker started")
        r.proc.send_signal(signal.SIGKILL)
        r.proc.wait(timeout=10)
    suite = ET.parse(swarm.cwd / "r.xml").getroot()
    assert (suite.get("tests"), suite.get("failures")) == ("1", "1")
    failure = suite.find("testcase/failure")
    assert failure is not None and f"zellij-swarm resume {r.run.name}" in (failure.get("message") or "")


def test_the_log_hint_of_a_task_that_ended_while_no_supervisor_ran_names_the_run(swarm):
    """Issue 21.7: such a task's end is taken as ``resume`` starts, before it says which run."""
    swarm.write("t.txt", f"{GATE}; exit 3\n")
    with Running(swarm, "t.txt", "--output", "quiet", settle=0) as r:
        assert r.run is not None
        wait_until(lambda: (r.run / "slots/slot-1/gen-1/claim").exists(), what="the worker started")
        r.killed()
        swarm.open_gate()
        wait_until(lambda: (r.run / "slots/slot-1/gen-1/exit").exists(), what="the worker's exit")
        res = swarm("resume", r.run.name, "--output", "group")
    assert res.code == 1, res.stderr
    assert "task-1: failed (exit 3" in res.stderr and f"zellij-swarm logs {r.run.name} task-1" in res.stderr


def test_a_continued_joblog_never_writes_a_line_it_already_holds(tmp_path):
    """A supervisor killed after writing a task's line, before its event log held the outcome:
    the resumed one ends the task again, and the line stays one."""
    from test_joblog import row

    from zellij_swarm.records.joblog import JobLog

    first = JobLog(tmp_path / "jl")
    assert first.task_finished(row(1, "succeeded", code=0, start=10.0, end=11.0), "echo a") is None
    first.close()
    again = JobLog.continued(tmp_path / "jl")
    assert again.task_finished(row(1, "succeeded", code=0, start=10.0, end=11.0), "echo a") is None
    assert again.task_finished(row(1, "succeeded", code=0, start=20.0, end=21.0), "echo a") is None  # a retry's
    again.close()
    assert [f[2] for f in joblog_lines(tmp_path / "jl")] == ["10.000", "20.000"]


@pytest.mark.parametrize("backend", ["tmux", "zellij-0.45.0"])
def test_resume_closes_the_session_a_close_session_run_created(swarm, backend, request):
    from swarmtest import backend_args

    from zellij_swarm.backends import leftovers

    swarm.write("t.txt", f"{GATE}\n")
    args, env = backend_args(backend, request)
    assert env is not None
    with Running(swarm, "t.txt", "--output", "quiet", "--close-session", *args, env=env, settle=0) as r:
        assert r.run is not None
        wait_until(lambda: (r.run / "slots/slot-1/gen-1/heartbeat.jsonl").exists(), what="the worker's pane")
        wait_until(lambda: leftovers.find(env, [r.run.name]).leftovers, what="the run's session")
        r.killed()
        swarm.open_gate()
        res = swarm("resume", r.run.name, "--output", "quiet", env=env)
        assert res.code == 0, res.stderr
        # kill-session returns before the session's server is gone
        wait_until(lambda: not leftovers.find(env, [r.run.name]).leftovers, what="the run's session to go")


def test_a_report_that_cannot_be_marked_unfinished_is_not_left_from_an_earlier_run(tmp_path, monkeypatch):
    """A full disk refuses the "did not finish" report a run writes as it starts (a new file
    renamed over the old): a green report an earlier run left there survived, and passed for
    this run's whatever became of it (an adversary: a failing run on a full tmpfs, 2 in 2).
    Removing a file needs no room: the earlier report goes, and the warning says so."""
    import errno

    from zellij_swarm.commands import junit
    from zellij_swarm.records.rundir import RunPaths

    report = tmp_path / "r.xml"
    report.write_text('<testsuite name="earlier" tests="1" failures="0"><testcase name="t"/></testsuite>')

    def full(*_args, **_kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(junit, "write_atomic", full)
    problem = junit.mark_unfinished(report, RunPaths(tmp_path / "state/runs/R"))
    assert problem is not None and "No space left on device" in problem
    assert "removed the report" in problem
    assert not report.exists()


def test_a_report_that_cannot_be_marked_unfinished_and_never_was_there_is_only_a_warning(tmp_path, monkeypatch):
    import errno

    from zellij_swarm.commands import junit
    from zellij_swarm.records.rundir import RunPaths

    def full(*_args, **_kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(junit, "write_atomic", full)
    problem = junit.mark_unfinished(tmp_path / "r.xml", RunPaths(tmp_path / "state/runs/R"))
    assert problem is not None and "removed" not in problem


def test_resume_writes_the_report_of_a_run_killed_between_its_end_and_its_report(swarm):
    """A supervisor killed after it recorded the run's end (``summary.json``) and before it
    wrote the JUnit report left the "did not finish" report, which says to resume the run —
    and ``resume`` said the run had finished, nothing to resume: the report could never be
    written (an adversary, ``kill -9`` as ``summary.json`` appeared: 5 in 6). ``resume``
    writes it from the run's summary, and exits as the run did."""
    from zellij_swarm.commands import junit

    swarm.write("t.txt", "true\nexit 3\n")
    res = swarm("run", "t.txt", "--output", "quiet", "--junit", "r.xml")
    assert res.code == 1, res.stderr
    [run] = swarm.runs()
    report = swarm.cwd / "r.xml"
    report.write_bytes(junit.unfinished(run.name))  # what the killed supervisor left there
    res = swarm("resume", run.name, "--output", "quiet")
    assert res.code == 1, res.stderr
    assert res.stderr == (f"zellij-swarm: run {run.name} had finished; wrote its JUnit report {report}, which its "
                          "supervisor, ended before it, had left unwritten\n")
    assert cases(report) == {"task-1": None, "task-2": "failure"}


def test_resume_leaves_a_finished_run_s_report_that_is_not_its_unfinished_one(swarm):
    swarm.write("t.txt", "true\n")
    assert swarm("run", "t.txt", "--output", "quiet", "--junit", "r.xml").code == 0
    [run] = swarm.runs()
    (swarm.cwd / "r.xml").write_text(GREEN)  # a later run's, written there since
    res = swarm("resume", run.name, "--output", "quiet")
    assert res.code == 2 and "has finished; nothing to resume" in res.stderr
    assert (swarm.cwd / "r.xml").read_text() == GREEN



def test_a_report_written_by_resume_exits_as_the_run_did_without_its_last_event(swarm):
    """Killed just after the summary, before the ``run_finished`` event: the summary says."""
    from zellij_swarm.commands import junit

    swarm.write("t.txt", "true\n")
    assert swarm("run", "t.txt", "--output", "quiet", "--junit", "r.xml").code == 0
    [run] = swarm.runs()
    events = run / "events.jsonl"
    events.write_text("".join(line + "\n" for line in events.read_text().splitlines()
                              if '"event":"run_finished"' not in line))
    (swarm.cwd / "r.xml").write_bytes(junit.unfinished(run.name))
    res = swarm("resume", run.name, "--output", "quiet")
    assert res.code == 0, res.stderr
    assert cases(swarm.cwd / "r.xml") == {"task-1": None}


@pytest.mark.parametrize("joblog", ["r.out", "./r.out", "+r.out", "link"])
def test_a_junit_report_and_a_joblog_in_one_file_is_a_usage_error(swarm, joblog):
    """``--junit r.out --joblog r.out``: the joblog was written as tasks ended, then the report
    was renamed over it — the joblog lost without a word, exit 0 (an adversary, 2 in 2)."""
    swarm.write("t.txt", "true\n")
    (swarm.cwd / "link").symlink_to("r.out")
    res = swarm("run", "t.txt", "--junit", "r.out", "--joblog", joblog)
    assert res.code == 2, res.stderr
    assert res.stderr.strip().splitlines() == [f"zellij-swarm: error: --junit r.out and --joblog {joblog} are one "
                                               "file: each needs a file of its own"]
    assert swarm.runs() == []


def test_a_junit_report_and_a_joblog_may_both_go_to_a_device(swarm):
    swarm.write("t.txt", "true\n")
    assert swarm("run", "t.txt", "--junit", "/dev/null", "--joblog", "/dev/null").code == 0


@pytest.mark.parametrize("option", ["--junit", "--joblog", "+--joblog"])
@pytest.mark.parametrize("template", [False, True])
def test_a_report_file_that_is_the_run_s_input_is_a_usage_error(swarm, option, template):
    """``run tasks.txt --joblog tasks.txt`` (or ``--junit``, or ``--template T args.txt``):
    the user's file was truncated as the run started and holds a joblog now, exit 0 (an
    adversary, 2 in 2 each)."""
    swarm.write("tasks.txt", "true\n")
    plus = "+" if option.startswith("+") else ""
    args = ("--template", "echo {}", "tasks.txt") if template else ("tasks.txt",)
    res = swarm("run", *args, option.removeprefix("+"), f"{plus}./tasks.txt")
    assert res.code == 2, res.stderr
    assert res.stderr.strip().splitlines() == [f"zellij-swarm: error: {option.removeprefix('+')} {plus}./tasks.txt: "
                                               "that is the run's input file tasks.txt; write it elsewhere"]
    assert (swarm.cwd / "tasks.txt").read_text() == "true\n" and swarm.runs() == []


def test_resume_of_a_finished_run_whose_report_went_to_a_fifo_does_not_wait_on_it(swarm):
    """Whether the report is still this run's unfinished one is never asked of a FIFO: opened
    to be read, it would wait for a writer for ever."""
    swarm.write("t.txt", "true\n")
    fifo = swarm.cwd / "r.fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.DEVNULL)
    try:
        assert swarm("run", "t.txt", "--output", "quiet", "--junit", str(fifo)).code == 0
    finally:
        reader.wait(timeout=30)
    [run] = swarm.runs()
    res = swarm("resume", run.name, "--output", "quiet")
    assert res.code == 2 and "has finished; nothing to resume" in res.stderr
