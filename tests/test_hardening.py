"""Hardening, round 2 (issue 10, second adversarial pass): each test drives the CLI and failed
on the main before its fix. C: a run directory another user could write; F: --junit through
symlinks, FIFOs and devices; E: a non-UTF-8 environment; H/I: reserved env names in a task;
D: status's elapsed time; B/G: session names a multiplexer cannot take."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from swarmtest import backend_args, clean_env, full, kill_run_processes, run_processes, wait_until
from tmuxtest import outside_env

from zellij_swarm.records import envfile

# ----- C: a run directory is trusted only when it is private ----------------------------------

def _plant(run: Path) -> None:
    meta = json.loads((run / "run.json").read_text())
    for t in meta["tasks"]:
        if t["name"] == "b":
            t["cmd"] = "id -u > PWNED"
    (run / "run.json").write_text(json.dumps(meta))


@pytest.mark.parametrize("how", ["chown", full("chmod"), "record-only"])
def test_resume_refuses_a_run_another_user_could_write(swarm, interrupted_run, how):
    run = interrupted_run
    _plant(run)
    if how == "chown":  # the attack of the report: another user's, world-writable
        subprocess.run(["chown", "-R", "1000", str(run)], check=True)
        subprocess.run(["chmod", "-R", "a+rwX", str(run)], check=True)
        needle = f"run record {run} belongs to uid 1000, not to you"
    elif how == "chmod":
        os.chmod(run, 0o777)
        needle = f"run record {run} is writable by group or others (mode 0777)"
    else:  # the directory is private, but its run.json is not
        os.chmod(run / "run.json", 0o666)
        needle = f"run record {run / 'run.json'} is writable by group or others (mode 0666)"
    for args in (("resume", run.name), ("cancel", run.name), ("add", run.name, "--", "true")):
        res = swarm(*args)
        assert res.code == 2, (args, res)
        assert res.stderr.count("\n") == 1 and needle in res.stderr and "Traceback" not in res.stderr, (args, res)
    assert not (swarm.cwd / "PWNED").exists()
    for args in (("status", run.name), ("ls",), ("logs", run.name, "a"), ("proof", run.name)):
        res = swarm(*args)
        assert "Traceback" not in res.stderr
        warnings = [ln for ln in res.stderr.splitlines() if ln.startswith("zellij-swarm: warning: ")]
        assert len(warnings) == 1 and needle in warnings[0], (args, res.stderr)


def test_resume_refuses_a_planted_environ_or_inbox(swarm, interrupted_run):
    run = interrupted_run
    os.chmod(run / "environ", 0o622)
    res = swarm("resume", run.name)
    assert res.code == 2 and "environ is writable by group or others" in res.stderr, res
    os.chmod(run / "environ", 0o600)
    os.chown(run / "inbox", 4242, 4242)
    res = swarm("resume", run.name)
    assert res.code == 2 and "inbox belongs to uid 4242" in res.stderr, res
    os.chown(run / "inbox", os.getuid(), os.getgid())
    res = swarm("resume", run.name, "--output", "quiet")  # private again: it resumes
    assert res.code == 0, res


# ----- F: --junit writes through what is there, never replaces it ----------------------------

def _device(where: Path) -> Path:
    node = where / "mynull"
    if not node.exists():
        try:
            os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a /dev/null of our own
        except PermissionError:
            pytest.skip("cannot make a device node here")
    return node


def test_junit_into_a_device_writes_through_it(swarm):
    swarm.write("t.txt", "true\n")
    node = _device(swarm.cwd)
    res = swarm("run", "t.txt", "--output", "quiet", "--junit", str(node))
    assert res.code == 0, res
    assert stat.S_ISCHR(os.lstat(node).st_mode) and os.lstat(node).st_rdev == os.makedev(1, 3)


def test_junit_into_a_fifo_writes_through_it(swarm):
    swarm.write("t.txt", "true\n")
    fifo = swarm.cwd / "report.fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    try:
        res = swarm("run", "t.txt", "--output", "quiet", "--junit", str(fifo))
        out, _ = reader.communicate(timeout=30)
    finally:
        reader.kill()
    assert res.code == 0, res
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert out.startswith(b"<?xml") and b"<testsuite" in out


def test_junit_without_a_reader_on_its_fifo_is_a_warning(swarm):
    swarm.write("t.txt", "true\n")
    os.mkfifo(swarm.cwd / "report.fifo")
    res = swarm("run", "t.txt", "--output", "quiet", "--junit", "report.fifo", timeout=60)
    assert res.code == 0 and "warning: cannot write the JUnit report report.fifo: no process reads" in res.stderr
    assert stat.S_ISFIFO(os.lstat(swarm.cwd / "report.fifo").st_mode)


@pytest.mark.parametrize("dangling", [False, True])
def test_junit_follows_a_symlink(swarm, dangling):
    swarm.write("t.txt", "true\n")
    (swarm.cwd / "reports").mkdir()
    target = swarm.cwd / "reports" / "r.xml"
    if not dangling:
        target.write_text("old")
    os.symlink("reports/r.xml", swarm.cwd / "link.xml")
    res = swarm("run", "t.txt", "--output", "quiet", "--junit", "link.xml")
    assert res.code == 0, res
    assert (swarm.cwd / "link.xml").is_symlink()
    assert target.read_bytes().startswith(b"<?xml")


def test_junit_through_a_symlink_to_a_device(swarm):
    swarm.write("t.txt", "true\n")
    node = _device(swarm.cwd)
    os.symlink(node, swarm.cwd / "link")
    res = swarm("run", "t.txt", "--output", "quiet", "--junit", "link")
    assert res.code == 0, res
    assert (swarm.cwd / "link").is_symlink() and stat.S_ISCHR(os.lstat(node).st_mode)


def test_junit_symlink_to_a_directory_is_bad_input(swarm):
    swarm.write("t.txt", "true\n")
    (swarm.cwd / "d").mkdir()
    os.symlink("d", swarm.cwd / "link")
    res = swarm("run", "t.txt", "--junit", "link")
    assert res.code == 2 and "is a directory" in res.stderr and not swarm.runs(), res


# ----- E: the caller's environment is saved byte-exact ---------------------------------------

RAW = os.fsdecode(b"a\xffb \xfe'$(x)\n")  # not UTF-8, and shell-special


def test_a_non_utf8_environment_reaches_the_worker_byte_exact(swarm):
    swarm.write("t.txt", 'printf %s "$FOO" > got\n')
    res = swarm("run", "t.txt", "--backend", "headless", "--output", "quiet", env=clean_env(FOO=RAW))
    assert res.code == 0 and "Traceback" not in res.stderr, res
    assert (swarm.cwd / "got").read_bytes() == os.fsencode(RAW)
    assert envfile.load(swarm.latest() / "environ")["FOO"] == RAW  # the saved file gives back the very bytes


def test_a_non_utf8_environment_reaches_a_tmux_pane_byte_exact(swarm, tmux):
    import shutil

    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    swarm.write("t.txt", 'printf %s "$FOO" > got\n')
    res = swarm("run", "t.txt", "--backend", "tmux", "--ui", "live", "--require-multiplexer", "--output", "quiet",
                env=outside_env(tmux, FOO=RAW))
    assert res.code == 0, res
    assert run_processes(swarm.latest().name) == [], "a worker outlived its run"
    assert (swarm.cwd / "got").read_bytes() == os.fsencode(RAW)


@pytest.mark.parametrize("which", ["cwd", "state-dir", "junit"])
def test_a_non_utf8_path_is_bad_input_before_any_run_directory(swarm, which):
    odd = os.fsdecode(b"p\xffq")
    swarm.write("t.txt", "true\n")
    args = ["run", str(swarm.cwd / "t.txt"), "--output", "quiet"]
    cwd = swarm.cwd
    if which == "cwd":
        cwd = swarm.cwd / odd
        cwd.mkdir()
    elif which == "state-dir":
        args += ["--state-dir", odd]
    else:
        args += ["--junit", odd]
    p = subprocess.run(swarm.cmd(*args), cwd=cwd, capture_output=True, env=clean_env(), timeout=60)
    err = p.stderr.decode(errors="replace")
    assert p.returncode == 2 and err.count("\n") == 1 and "is not valid UTF-8" in err, err
    assert not (cwd / ".zellij-swarm" / "runs").exists() or not list((cwd / ".zellij-swarm" / "runs").iterdir())
    assert not (swarm.cwd / odd).exists() or which == "cwd"


# ----- H, I: a task cannot set the markers or the wrapper's variables -------------------------

def test_a_reserved_env_name_in_an_addition_is_refused(swarm):
    swarm.write("w.txt", "while [ ! -e go ]; do sleep 0.05; done\n")
    swarm.write("a.toml", '[[task]]\nname = "x"\ncmd = "sleep 60"\n[task.env]\nZELLIJ_SWARM_GENERATION = "9"\n')
    proc = swarm.popen("run", "w.txt", "--output", "quiet", "--backend", "headless")
    run = swarm.started()
    try:
        wait_until(lambda: (run / "slots/slot-1/gen-1/claim").exists(), what="the worker started")
        res = swarm("add", run.name, "a.toml")
        assert res.code == 2 and res.stderr.count("\n") == 1, res
        assert "a.toml:5: task 'x': env key 'ZELLIJ_SWARM_GENERATION' is reserved" in res.stderr
    finally:
        (swarm.cwd / "go").touch()
        proc.wait(timeout=60)
        kill_run_processes(run.name)
    assert set(swarm.tasks()) == {"task-1"}


def test_a_followup_with_a_reserved_env_name_is_an_invalid_followup(swarm):
    line = json.dumps({"name": "esc", "cmd": "sleep 60", "env": {"_zsw_d": "/tmp"}})
    swarm.write("s.toml", "[[task]]\nname = \"p\"\n"
                          f"cmd = '''echo '{line}' > \"$ZELLIJ_SWARM_ARTIFACT_DIR/followups.jsonl\"'''\n")
    res = swarm("run", "s.toml", "--output", "quiet", "--backend", "headless", timeout=60)
    assert res.code == 0, res
    summary = swarm.summary()
    assert [t["name"] for t in summary["tasks"]] == ["p"]
    warns = [w for w in summary["warnings"] if w["code"] == "invalid_followup"]
    assert len(warns) == 1 and "env key '_zsw_d' is reserved" in warns[0]["message"], summary["warnings"]


# ----- D: status shows how long a running task has run, as of now ----------------------------

def test_status_duration_of_a_running_task_grows(swarm):
    swarm.write("w.txt", "while [ ! -e go ]; do sleep 0.05; done\n")
    proc = swarm.popen("run", "w.txt", "--output", "quiet", "--backend", "headless")
    run = swarm.started()
    try:
        def started():
            snap = json.loads(swarm("status", "--json", run.name).stdout)
            return snap["tasks"] and snap["tasks"][0]["started_at"] and snap
        wait_until(started, timeout=30, what="the task started")
        time.sleep(1.5)  # nothing changes meanwhile: state.json is not rewritten
        snap = json.loads(swarm("status", "--json", run.name).stdout)
        task = snap["tasks"][0]
        assert task["status"] == "running"
        assert abs(task["duration_s"] - (time.time() - task["started_at"])) < 1.0, task
        assert task["duration_s"] >= 1.4
        text = swarm("status", run.name).stdout
        shown = float(re.search(r"\srunning \(([0-9.]+)s\)", text).group(1))
        assert shown >= 1.4, text
    finally:
        (swarm.cwd / "go").touch()
        proc.wait(timeout=60)
        kill_run_processes(run.name)


# ----- a worker that puts no plain file where its records go ----------------------------------

GEN_DIR = '"$(dirname "$ZELLIJ_SWARM_HEARTBEAT")"'


@pytest.mark.parametrize("planted, ends", [
    ('mkfifo "$ZELLIJ_SWARM_ARTIFACT_DIR/followups.jsonl"', "as_it_exited"),  # held the supervisor's open
    ('mkdir "$ZELLIJ_SWARM_ARTIFACT_DIR/followups.jsonl"', "as_it_exited"),  # an internal error
    ('rm -f "$ZELLIJ_SWARM_HEARTBEAT"; mkfifo "$ZELLIJ_SWARM_HEARTBEAT"', "as_it_exited"),  # held the wrapper
    (f'rm -f {GEN_DIR}/exit; mkfifo {GEN_DIR}/exit', "unknown"),  # held the wrapper; SIGTERM did not end it
    (f'rm -f {GEN_DIR}/exit; mkdir {GEN_DIR}/exit', "unknown"),  # an internal error, in every resume too
    (f'rm -f {GEN_DIR}/claim; mkfifo {GEN_DIR}/claim', "as_it_exited"),  # the log-commit thread died on it
    (f'rm -f {GEN_DIR}/claim; mkdir {GEN_DIR}/claim', "as_it_exited"),
    # (bound from its directory: a socket's path is at most 108 bytes)
    (f'cd {GEN_DIR} && rm -f exit && {sys.executable} -c "import socket; socket.socket(socket.AF_UNIX).bind(\'exit\')"',
     "unknown"),  # ENXIO: the supervisor died, and every resume
])
def test_a_worker_that_plants_no_plain_file_in_its_records_ends(swarm, planted, ends):
    """What a worker leaves where the wrapper or the supervisor reads or writes a record is
    never waited on, nor read as a record: the run ends, each task once, as it ended — or
    ``unknown`` (``exit_garbled``) when its exit record is what it replaced."""
    ledger = swarm.cwd / "ledger"
    swarm.write("tasks.txt", "".join(f"echo t{code} >> {ledger}; {planted}; exit {code}\n" for code in (0, 4)))
    try:
        res = swarm("run", "tasks.txt", "-j", "1", "--output", "quiet", timeout=60)
    finally:
        for run in swarm.runs():
            kill_run_processes(run.name)
    assert res.code == 1 and "Traceback" not in res.stderr, res
    assert sorted(ledger.read_text().split()) == ["t0", "t4"]
    rows = list(swarm.tasks().values())
    if ends == "unknown":
        assert [(r["status"], r["reason"]) for r in rows] == [("unknown", "exit_garbled")] * 2
    else:
        assert [(r["status"], r["exit_code"]) for r in rows] == [("succeeded", 0), ("failed", 4)]
    assert run_processes(swarm.runs()[0].name) == []


@pytest.mark.parametrize("backend", ["headless", "tmux"])
@pytest.mark.parametrize("record", ["exit", "heartbeat.jsonl"])
def test_the_wrapper_never_writes_through_a_link_the_worker_put_in_a_record_s_place(swarm, backend, record, request):
    """A worker that replaces its exit sidecar or heartbeat with a symlink: the wrapper
    appended its exit status (or its ``exited`` line) to whatever the link named — a file
    elsewhere, or one it created where a dangling link pointed. It writes nothing there; the
    task ends as it would with the link unwritten: ``unknown`` (``exit_garbled``) for its exit
    record, as it exited for its heartbeat."""
    victim, absent = swarm.cwd / "victim", swarm.cwd / "absent"
    victim.write_text("precious\n")
    swarm.write("tasks.txt", f"rm -f {GEN_DIR}/{record}; ln -s {victim} {GEN_DIR}/{record}; exit 3\n"
                             f"rm -f {GEN_DIR}/{record}; ln -s {absent} {GEN_DIR}/{record}; exit 3\n")
    args, env = backend_args(backend, request)
    try:
        res = swarm("run", "tasks.txt", "-j", "1", "--output", "quiet", *args, env=env, timeout=60)
    finally:
        for run in swarm.runs():
            kill_run_processes(run.name)
    assert res.code == 1 and "Traceback" not in res.stderr, res
    assert victim.read_text() == "precious\n" and not absent.exists()
    assert (swarm.latest() / "summary.json").exists(), (res, (swarm.latest() / "events.jsonl").read_text()[-3000:])
    rows = list(swarm.tasks().values())
    if record == "exit":
        assert [(r["status"], r["reason"]) for r in rows] == [("unknown", "exit_garbled")] * 2
    else:
        assert [(r["status"], r["exit_code"]) for r in rows] == [("failed", 3)] * 2


@pytest.mark.parametrize("log", ["output.log", "stderr.log"])
@pytest.mark.parametrize("plant", ["mkfifo", "mkdir"])
def test_a_worker_s_log_that_is_no_plain_file_is_not_copied_and_the_run_ends(swarm, log, plant):
    """In ``group`` mode the reporter copies each log when its task ends: a FIFO there held
    the supervisor in its ``open`` for ever; a directory was taken for an unwritable stdout,
    and no later task's output was copied."""
    swarm.write("tasks.txt", f"rm -f {GEN_DIR}/{log}; {plant} {GEN_DIR}/{log}; exit 1\necho after\n")
    try:
        res = swarm("run", "tasks.txt", "-j", "1", "--output", "group", timeout=60)
    finally:
        for run in swarm.runs():
            kill_run_processes(run.name)
    assert res.code == 1 and res.stdout == "after\n", res
    assert "no longer copied" not in res.stderr
    assert [r["status"] for r in swarm.tasks().values()] == ["failed", "succeeded"]
