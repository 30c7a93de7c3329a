"""Shells: a folded generation's directory kept for the run's next generation (records.shells)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from swarmtest import kill_run_processes, wait_until

from zellij_swarm.records import generation_files as gf
from zellij_swarm.records.rundir import RunPaths, make_private_dir
from zellij_swarm.records.shells import SHELLS, ShellPool
from zellij_swarm.worker import wrapper


@pytest.fixture
def pool(run: RunPaths) -> ShellPool:
    return ShellPool(run.slots, limit=4)


def start(run: RunPaths, pool: ShellPool, slot: int, number: int) -> gf.GenPaths:
    """Reserve a generation as the dispatcher does: a shell, or a directory made anew."""
    gen = run.gen(slot, number)
    if not pool.take(gen):  # a shell comes with its artifacts/
        gen.dir.mkdir(parents=True)
        make_private_dir(gen.artifacts)
    return gen


def run_wrapper(run: RunPaths, gen: gf.GenPaths, cmd: str = "true") -> int:
    """One generation through the run's wrapper, as the launcher starts it: its status."""
    who = wrapper.WorkerIdentity("r", "t", "t1", gen.slot, gen.gen, 1)
    args = wrapper.arguments(gen, who, cmd=cmd, argv=None, cwd="/", env={})
    return subprocess.run(wrapper.headless_argv(run.worker_script, args), timeout=30).returncode


def shells(run: RunPaths) -> dict[str, dict[str, int]]:
    root = run.slots / SHELLS
    return {d.name: {f.name: f.stat().st_size for f in d.iterdir()} for d in root.iterdir()} if root.exists() else {}


def test_a_trivial_generation_is_kept_as_a_shell_which_the_next_one_runs_in(run: RunPaths, pool: ShellPool) -> None:
    """Folded, a trivial generation's directory is kept as a shell, every file empty, its
    artifacts/ too; the next generation (of any slot) takes it and reads as one nothing has
    happened to yet, then as its own once its wrapper ran, in the same inodes: no file or
    directory made anew but the claim."""
    gen = start(run, pool, 2, 3)
    assert run_wrapper(run, gen) == 0
    inodes = {name: os.stat(gen.dir / name).st_ino for name in (*gf.SHELL_FILES, gf.ARTIFACTS)}
    pool.fold(gen)
    assert not gen.dir.exists()
    [shell] = shells(run).values()
    assert {k: v for k, v in shell.items() if k != gf.ARTIFACTS} == {"exit": 0, "heartbeat.jsonl": 0, "output.log": 0,
                                                                     "stderr.log": 0}
    assert gf.ARTIFACTS in shell and not any((run.slots / SHELLS).glob(f"*/{gf.ARTIFACTS}/*"))
    start(run, pool, 1, 1)  # the other slot's first generation: made anew, its slot directory with it
    nxt = start(run, pool, 2, 4)
    assert shells(run) == {} and {name: os.stat(nxt.dir / name).st_ino for name in inodes} == inodes
    assert gf.exit_facts(nxt) is None and gf.ended_at(nxt) is None and gf.heartbeat_started(nxt) is None
    assert gf.read_claim(nxt) is None and not gf.read_gen(nxt).done
    assert run_wrapper(run, nxt, "echo hello; exit 3") == 3
    facts = gf.exit_facts(nxt)
    assert facts is not None and facts.code == 3 and nxt.output.read_text() == "hello\n"
    assert gf.heartbeat_started(nxt)["pid"] == facts.pid
    pool.fold(nxt)  # it printed: kept as a generation, not a shell
    assert {p.name for p in nxt.dir.iterdir()} == {"output.log"} and shells(run) == {}


def test_the_run_end_removes_its_shells_and_a_resume_takes_them_up(run: RunPaths, pool: ShellPool) -> None:
    for number in (1, 2):
        gen = start(run, pool, 1, number)
        run_wrapper(run, gen)
    for number in (1, 2):
        pool.fold(run.gen(1, number))
    assert len(shells(run)) == 2
    resumed = ShellPool(run.slots, limit=4)  # a supervisor killed, then resumed: its shells are there
    third = start(run, resumed, 1, 3)
    assert len(shells(run)) == 1 and not (third.dir / "claim").exists()
    resumed.clear()
    assert sorted(p.name for p in run.slot_dir(1).iterdir()) == ["gen-3"] and not (run.slots / SHELLS).exists()


def test_shells_are_kept_up_to_the_limit(run: RunPaths) -> None:
    pool = ShellPool(run.slots, limit=1)
    gens = [start(run, pool, 1, n) for n in (1, 2)]
    for gen in gens:
        run_wrapper(run, gen)
        pool.fold(gen)
    assert len(shells(run)) == 1 and not any(g.dir.exists() for g in gens)


@pytest.mark.parametrize("held", gf.SHELL_FILES)
def test_a_file_open_in_another_process_is_never_reused(run: RunPaths, pool: ShellPool, held: str) -> None:
    """A worker's leftover that still holds its output (a daemon it started, with its stdout)
    writes there later: reused, that would land in another task's records. The directory is
    folded away as before instead, and what the leftover writes goes nowhere a reader looks."""
    gen = start(run, pool, 1, 1)
    run_wrapper(run, gen)
    path = gen.dir / held
    holder = subprocess.Popen(["sh", "-c", 'exec 3>>"$1"; read _; echo late >&3', "sh", str(path)],
                              stdin=subprocess.PIPE)
    try:
        wait_until(lambda: any(os.path.realpath(f"/proc/{holder.pid}/fd/{fd}") == str(path)
                               for fd in os.listdir(f"/proc/{holder.pid}/fd")), what="the holder's descriptor")
        pool.fold(gen)
        assert not gen.dir.exists() and shells(run) == {}
    finally:
        holder.communicate(b"\n", timeout=30)
    assert list(run.slot_dir(1).iterdir()) == []


# Run in a process of its own: the fold's write lease on each file, broken by an open from
# elsewhere while it is held. Before, the break's SIGIO ended the process ("I/O possible").
_FOLD_BROKEN_INTO = """
import fcntl, os, subprocess, sys, time
from pathlib import Path
from zellij_swarm.records.rundir import RunPaths
from zellij_swarm.records.shells import ShellPool

control, openers = fcntl.fcntl, []

def let_go_once_opened_elsewhere(fd, cmd, arg=0):
    if (cmd, arg) == (fcntl.F_SETLEASE, fcntl.F_UNLCK):  # the lease is held: now an open from elsewhere
        opener = subprocess.Popen(["sh", "-c", f"exec 3>>/proc/{os.getpid()}/fd/{fd}"])
        openers.append(opener)
        deadline = time.monotonic() + 30
        while "break_lease" not in Path(f"/proc/{opener.pid}/wchan").read_text():  # held up by the lease
            assert opener.poll() is None and time.monotonic() < deadline, "the opener was never held up"
            time.sleep(0.005)
    return control(fd, cmd, arg)

fcntl.fcntl = let_go_once_opened_elsewhere
ShellPool(Path(sys.argv[1]) / "slots", limit=4).fold(RunPaths(Path(sys.argv[1])).gen(1, 1))
assert len(openers) == 4 and [o.wait(timeout=30) for o in openers] == [0] * 4, openers
"""


def test_an_open_from_elsewhere_while_the_fold_holds_its_lease_ends_no_process(run: RunPaths, pool: ShellPool) -> None:
    """The fold empties the wrapper's lines under a write lease. Another process opening the
    file then breaks the lease, which the kernel tells the holder with a signal: SIGIO by
    default, which ends the supervisor (or a program running a swarm through the Python API,
    whose log-commit thread it is). The opener waits until the lease is let go."""
    gen = start(run, pool, 1, 1)
    run_wrapper(run, gen)
    done = subprocess.run([sys.executable, "-c", _FOLD_BROKEN_INTO, str(run.dir)], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})
    assert done.returncode == 0, (done.returncode, done.stderr)


@pytest.mark.parametrize("planted", ["symlink", "hard link"])
def test_a_file_the_worker_linked_elsewhere_is_never_reused(run: RunPaths, pool: ShellPool, tmp_path: Path,
                                                            planted: str) -> None:
    """Emptying a shell's files must never reach a file outside the run: a worker that made
    its heartbeat a link to a file of its own keeps the directory from becoming a shell."""
    gen = start(run, pool, 1, 1)
    run_wrapper(run, gen)
    mine = tmp_path / "mine"
    mine.write_text('{"event":"started","pid":1,"pane_id":null}\n')
    gen.heartbeat.unlink()
    if planted == "symlink":
        gen.heartbeat.symlink_to(mine)
    else:
        os.link(mine, gen.heartbeat)
    pool.fold(gen)
    assert shells(run) == {}
    assert mine.read_text() == '{"event":"started","pid":1,"pane_id":null}\n'


@pytest.mark.parametrize("left", ["output", "heartbeat line", "artifact", "another file"])
def test_what_the_worker_left_keeps_its_generation(run: RunPaths, pool: ShellPool, left: str) -> None:
    gen = start(run, pool, 1, 1)
    cmd = {"output": "echo out", "heartbeat line": 'echo \'{"event":"progress"}\' >>"$ZELLIJ_SWARM_HEARTBEAT"',
           "artifact": 'echo 42 >"$ZELLIJ_SWARM_ARTIFACT_DIR/result"',
           "another file": 'echo x >"$(dirname "$ZELLIJ_SWARM_HEARTBEAT")/mine"'}[left]
    assert run_wrapper(run, gen, cmd) == 0
    pool.fold(gen)
    assert gen.dir.exists() and shells(run) == {}


def test_a_generation_that_never_ran_in_a_shell_is_discarded_whole(run: RunPaths, pool: ShellPool) -> None:
    gen = start(run, pool, 1, 1)
    run_wrapper(run, gen)
    pool.fold(gen)
    nxt = start(run, pool, 1, 2)
    assert gf.discard_unstarted(nxt) and not nxt.dir.exists()


def test_a_fold_killed_while_it_made_a_shell_leaves_nothing_in_the_way(run: RunPaths, pool: ShellPool) -> None:
    """A supervisor killed with a directory half made a shell (``folding``): the next fold
    clears it away and folds as before; the one after keeps its shell again."""
    (run.slots / SHELLS / "folding").mkdir(parents=True)
    (run.slots / SHELLS / "folding" / "exit").write_text("0\n")
    gens = [start(run, pool, 1, n) for n in (1, 2)]
    for gen in gens:
        run_wrapper(run, gen)
        pool.fold(gen)
    assert not any(g.dir.exists() for g in gens) and len(shells(run)) == 1


def test_a_pool_that_keeps_none_folds_as_before(run: RunPaths) -> None:
    """A Slurm run keeps no shells (its steps write from other hosts): its generations fold away."""
    pool = ShellPool(run.slots, limit=0)
    gen = start(run, pool, 1, 1)
    run_wrapper(run, gen)
    pool.fold(gen)
    assert not gen.dir.exists() and shells(run) == {} and not pool.take(run.gen(1, 2))


def test_a_leftovers_late_output_in_a_half_looked_at_directory_is_never_removed(
        run: RunPaths, pool: ShellPool) -> None:
    """A supervisor killed while its fold looked at a directory, as a worker's leftover wrote
    to it: neither the next fold nor the run's end removes that output."""
    stale = run.slots / SHELLS / "folding"
    stale.mkdir(parents=True)
    for name in gf.SHELL_FILES:
        (stale / name).write_bytes(b"")
    (stale / "output.log").write_text("late\n")
    gen = start(run, pool, 1, 1)
    run_wrapper(run, gen)
    pool.fold(gen)
    assert not gen.dir.exists() and (stale / "output.log").read_text() == "late\n"
    pool.clear()
    assert sorted(p.name for p in stale.iterdir()) == ["output.log"]


@pytest.mark.parametrize("leftover", [None, "in its group", "chmod 755", "chmod 500", "a link"])
def test_an_artifacts_directory_is_kept_only_when_nothing_is_left_in_the_wrappers_group(
        run: RunPaths, pool: ShellPool, leftover: str | None) -> None:
    """The launcher starts each wrapper as a session leader. A leftover of its worker that
    stayed in that group may have its working directory in artifacts/, which no check of the
    files sees: the shell is kept without it, and the next generation gets one of its own —
    as it does when the worker changed the directory's mode (it must be private, writable)."""
    gen = start(run, pool, 1, 1)
    who = wrapper.WorkerIdentity("r", "t", "t1", gen.slot, gen.gen, 1)
    elsewhere = run.dir / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    cmd = {None: "true", "in its group": f"cd {gen.artifacts} && sleep 30 >/dev/null 2>&1 &",
           "a link": f"rmdir {gen.artifacts} && ln -s {elsewhere} {gen.artifacts}"}.get(
        leftover, f"{leftover} {gen.artifacts}")
    args = wrapper.arguments(gen, who, cmd=cmd, argv=None, cwd="/", env={})
    lead = subprocess.Popen(wrapper.headless_argv(run.worker_script, args), start_new_session=True)
    try:
        assert lead.wait(timeout=30) == 0
        # the directory, if kept, keeps this modification time (an inode number is no identity:
        # one just freed is given to the next directory made)
        if not gen.artifacts.is_symlink():
            os.utime(gen.artifacts, (1, 1))
        pool.fold(gen)
        nxt = start(run, pool, 1, 2)
        assert shells(run) == {}, "a shell, if one was kept, was taken"
        assert (os.stat(nxt.artifacts).st_mtime == 1) is (leftover is None)
        assert list(nxt.artifacts.iterdir()) == [] and nxt.artifacts.stat().st_mode & 0o777 == 0o700
        assert not nxt.artifacts.is_symlink() and elsewhere.is_dir() and list(elsewhere.iterdir()) == []
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(lead.pid, signal.SIGKILL)


def test_what_a_leftover_wrote_into_a_shells_artifacts_is_set_aside_never_reused(
        run: RunPaths, pool: ShellPool) -> None:
    """A leftover that left the wrapper's group (not seen at the fold) writes into the shell's
    artifacts/ afterwards: the generation that takes the shell gets an empty one of its own,
    and what was written stays, the run's end included."""
    gen = start(run, pool, 1, 1)
    assert run_wrapper(run, gen) == 0
    pool.fold(gen)
    [late] = (run.slots / SHELLS).glob(f"*/{gf.ARTIFACTS}")
    (late / "late.txt").write_text("from an earlier generation\n")
    nxt = start(run, pool, 1, 2)
    assert list(nxt.artifacts.iterdir()) == []
    pool.clear()
    [stray] = (run.slots / SHELLS).glob("stray-*")
    assert (stray / "late.txt").read_text() == "from an earlier generation\n"


def test_the_wrapper_appends_to_a_shells_files_and_never_truncates_them(run: RunPaths, pool: ShellPool) -> None:
    """A shell's files are emptied by its fold, so the wrapper appends to them (``>>``): a file
    truncated on open and written is given its blocks as it is closed on ext4 (auto_da_alloc),
    and the next fold's emptying then frees them — with ``discard``, 1.6 ms a task. Each file
    is made append-only (``chattr +a``), on which an open that truncates fails."""
    gen = start(run, pool, 1, 1)
    assert run_wrapper(run, gen) == 0
    pool.fold(gen)
    nxt = start(run, pool, 1, 2)
    files = [str(nxt.dir / name) for name in gf.SHELL_FILES]
    if subprocess.run(["chattr", "+a", *files], capture_output=True).returncode != 0:
        pytest.skip("chattr +a is not allowed here (not root, or not ext4)")
    try:
        assert run_wrapper(run, nxt, "echo out; echo err >&2; exit 4") == 4
        facts = gf.exit_facts(nxt)
        assert facts is not None and facts.code == 4 and facts.pid == gf.heartbeat_started(nxt)["pid"]
        assert (nxt.output.read_text(), nxt.stderr.read_text()) == ("out\n", "err\n")
    finally:
        subprocess.run(["chattr", "-a", *files], check=True)


def test_a_generation_never_gets_the_artifacts_of_one_whose_leftover_left_its_group(swarm) -> None:
    """A worker's background job in a session of its own (``setsid``, Python's
    ``start_new_session``), its directory not changed to ``/``, writes into its generation's
    artifacts/ after the worker ended. That directory went with its shell to a later task:
    the job's files (follow-ups among them) became that task's — an adversary's find, 3 of 3.
    Such a job is the launcher's child once the worker has ended (the subreaper of what the
    wrappers leave): while it has one, no artifacts/ goes with a shell."""
    # (it writes once its generation has been folded, a few tens of milliseconds after its end)
    job = (f"setsid sh -c 'cd \"$ZELLIJ_SWARM_ARTIFACT_DIR\" && sleep 0.3 && "
           f"until [ -e {swarm.cwd}/stop ]; do echo x >> leak 2>/dev/null; sleep 0.02; done' "
           "</dev/null >/dev/null 2>&1 &")
    later = "".join(f'[[task]]\nname = "b{i}"\ncmd = "sleep 0.2; ls -A \\"$ZELLIJ_SWARM_ARTIFACT_DIR\\" > saw.b{i}"\n'
                    for i in range(6))
    swarm.write("s.toml", f"[[task]]\nname = \"a\"\ncmd = '''{job}'''\n{later}")
    try:
        res = swarm("run", "s.toml", "-j", "1", "--backend", "headless", "--output", "quiet")
        assert res.code == 0, res
        saw = {i: (swarm.cwd / f"saw.b{i}").read_text() for i in range(6)}
        assert saw == dict.fromkeys(range(6), ""), saw
    finally:
        (swarm.cwd / "stop").touch()
        kill_run_processes(swarm.latest().name)
