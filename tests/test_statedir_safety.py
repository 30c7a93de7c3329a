"""A state directory another user could write is not trusted (issue 10, defects 10 and 14):
the rule ssh applies to ``~/.ssh``. Whatever the umask, every directory zellij-swarm creates
is 0700; a state dir or ``runs/`` owned by another user, or writable by group or others, is
refused by every command that changes a run or runs its commands, and read with a warning."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys

import pytest
from swarmtest import clean_env, kill_run_processes, wait_until


def _with_umask(mask: int, fn):
    old = os.umask(mask)
    try:
        return fn()
    finally:
        os.umask(old)


@pytest.mark.parametrize("mask", [0o000, 0o002, 0o277])
def test_every_directory_is_private_whatever_the_umask(swarm, mask):
    # each keeps something of its own, so its generation's directory outlives folding
    swarm.write("w.txt", 'while [ ! -e go ]; do sleep 0.05; done; echo kept > "$ZELLIJ_SWARM_ARTIFACT_DIR/x"\n')
    swarm.write("more.txt", "echo kept\n")
    # subprocesses inherit the umask of the process that starts them
    proc = _with_umask(mask, lambda: swarm.popen("run", "w.txt", "-j", "1", "--output", "quiet"))
    run = swarm.started()
    try:
        wait_until(lambda: (run / "slots/slot-1/gen-1/claim").exists(), what="the worker started")
        added = _with_umask(mask, lambda: swarm("add", run.name, "more.txt"))  # creates inbox/replies
        assert added.code == 0, added.stderr
        (swarm.cwd / "go").touch()
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
        kill_run_processes(run.name)
    dirs = [swarm.state_dir] + [p for p in swarm.state_dir.rglob("*") if p.is_dir()]
    names = {p.relative_to(run).as_posix() for p in dirs if p.is_relative_to(run)}
    assert {"inbox", "inbox/consumed", "inbox/replies", "slots/slot-1/gen-1/artifacts", "slots/slot-1/gen-2"} <= names
    modes = {p.relative_to(swarm.cwd).as_posix(): oct(stat.S_IMODE(p.stat().st_mode)) for p in dirs}
    assert set(modes.values()) == {"0o700"}, modes


def test_a_missing_state_dir_and_its_parents_are_created_private(swarm):
    swarm.write("t.txt", "true\n")
    res = _with_umask(0o000, lambda: swarm("run", "t.txt", "--state-dir", "a/b/state"))
    assert res.code == 0, res.stderr
    for d in ("a", "a/b", "a/b/state", "a/b/state/runs"):
        assert stat.S_IMODE((swarm.cwd / d).stat().st_mode) == 0o700, d


@pytest.fixture
def unsafe_run(swarm):
    """A running swarm whose state directory then becomes writable by others."""
    swarm.write("w.txt", "while [ ! -e go ]; do sleep 0.05; done\n")
    proc = swarm.popen("run", "w.txt", "--output", "quiet")
    run = swarm.started()
    try:
        wait_until(lambda: (run / "slots/slot-1/gen-1/claim").exists(), what="the worker started")
        os.chmod(swarm.state_dir, 0o777)
        yield run
    finally:
        (swarm.cwd / "go").touch()
        proc.wait(timeout=60)
        kill_run_processes(run.name)


def test_writers_refuse_and_readers_warn(swarm, unsafe_run):
    run = unsafe_run.name
    why = f"state directory {swarm.state_dir} is writable by group or others (mode 0777)"
    for args in (("cancel", run), ("add", run, "--", "true"), ("resume", run), ("prune", "--older-than", "1ms")):
        res = swarm(*args)
        assert (res.code, res.stderr) == (2, f"zellij-swarm: error: {why}: another user could change its run "
                                              f"records; make it private: chmod 700 {swarm.state_dir}\n"), args
    for args in (("status", run), ("ls",), ("logs", run, "task-1"), ("proof", run)):
        res = swarm(*args)
        assert res.code in (0, 1) and res.stderr.startswith(f"zellij-swarm: warning: {why}"), (args, res)
        assert "Traceback" not in res.stderr
    assert "running" in swarm("status", run).stdout  # nothing was cancelled


def test_a_read_only_state_dir_is_bad_input(tmp_path):
    if shutil.which("unshare") is None:
        pytest.skip("unshare is not installed")
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (tmp_path / "t.txt").write_text("echo never >> ledger\n")
    script = (f"mount -t tmpfs -o ro,mode=700 tmpfs {state} && "
              f"{sys.executable} -m zellij_swarm run --state-dir state t.txt")
    res = subprocess.run(["unshare", "-m", "sh", "-c", script], cwd=tmp_path, capture_output=True, text=True,
                         env=clean_env(), timeout=120)
    if "mount:" in res.stderr:
        pytest.skip(f"no private mount namespace here: {res.stderr.strip()}")
    assert (res.returncode, res.stderr) == (
        2, f"zellij-swarm: error: cannot use state directory {state}: Read-only file system\n")
    assert not (tmp_path / "ledger").exists()


def test_threads_of_one_program_write_the_same_record_at_once(tmp_path):
    """``write_atomic`` named its temp file by the pid alone: threads of one program, each
    starting a run in a new state dir (its ``.gitignore``), failed with "File exists"."""
    import threading

    from zellij_swarm.records import rundir

    target = tmp_path / ".gitignore"
    start = threading.Barrier(4)
    failed: list[BaseException] = []

    def write() -> None:
        start.wait()
        for _ in range(300):
            try:
                rundir.write_atomic(target, "*\n")
            except OSError as e:
                failed.append(e)

    threads = [threading.Thread(target=write) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failed == [] and target.read_text() == "*\n"
    assert [p.name for p in tmp_path.iterdir()] == [".gitignore"]
