"""Reliability round 2 (issue 10): a dead launcher, `cmd` as `sh -c`, the kill ladder, long
durations, status that tells the truth while workers run, timers, inotify faults. Each test
drives the CLI as a user would and failed on the code before its fix."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest
from fakeprocs import command_line
from swarmtest import (
    GATE,
    SAVER,
    Running,
    backend_args,
    clean_env,
    full,
    kill_run_processes,
    killed_outright,
    launcher_of,
    run_processes,
    running_worker,
    wait_until,
)
from tmuxtest import inside_env, outside_env
from zellijtest import FAST

from zellij_swarm import watch
from zellij_swarm.engine import generations
from zellij_swarm.engine.timers import Timers


def _run_dir(swarm) -> Path:
    return swarm.started()


@contextlib.contextmanager
def _interrupted(swarm, *run_args: str) -> Iterator[Path]:
    """A run whose supervisor was SIGKILLed once its first worker ran and a snapshot exists;
    every process of it is ended afterwards."""
    proc = swarm.popen("run", *run_args, "--output", "quiet")
    run = _run_dir(swarm)
    try:
        wait_until(lambda: _started(run) == 1 and (run / "state.json").exists(), what="the first worker")
        proc.kill()
        proc.wait()
        yield run
    finally:
        proc.kill()
        kill_run_processes(run.name)


def _started(run: Path) -> int:
    return len(_started_gens(run))


def _started_gens(run: Path) -> set[tuple[str, str]]:
    """Generations whose wrapper has written its launch heartbeat: on disk, or folded away
    once the generation's outcome was logged."""
    on_disk = {(p.parent.parent.name, p.parent.name) for p in run.glob("slots/slot-*/gen-*/heartbeat.jsonl")}
    try:
        lines = (run / "events.jsonl").read_text().splitlines(keepends=True)
    except FileNotFoundError:
        lines = []
    events = [json.loads(ln) for ln in lines if ln.endswith("\n")]
    ended = {(f"slot-{e['slot']}", f"gen-{e['gen']}") for e in events
             if e["event"] in ("worker_completed", "worker_failed") and e.get("started_at") is not None}
    return on_disk | ended


# ----- 1. the launcher dies --------------------------------------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGKILL, full(signal.SIGHUP), full(signal.SIGSEGV)])
def test_launcher_killed_twice_mid_run_is_replaced_and_every_task_runs_once(swarm, sig):
    names = [f"t{i}" for i in range(12)]
    swarm.write("l.txt", "".join(f"sleep 0.3; echo {n} >> ledger\n" for n in names))
    proc = swarm.popen("run", "l.txt", "-j", "3", "--output", "quiet")
    run = _run_dir(swarm)
    try:
        first = wait_until(lambda: launcher_of(proc.pid), what="the launcher")
        wait_until(lambda: _started(run) >= 2, what="workers running")
        first.send_signal(sig)
        second = wait_until(lambda: launcher_of(proc.pid, not_pid=first.pid), what="a new launcher")
        seen = _started(run)
        wait_until(lambda: _started(run) > seen, what="the new launcher starting workers")
        second.send_signal(sig)
        assert proc.wait(timeout=60) == 0, [r for r in swarm.tasks().values() if r["status"] != "succeeded"]
        assert "Traceback" not in proc.stderr.read()
        assert sorted((swarm.cwd / "ledger").read_text().split()) == sorted(names)
        summary = swarm.summary()
        assert summary["state"] == "finished"
        assert [w["code"] for w in summary["warnings"]] == ["launcher_lost", "launcher_lost"]
        assert f"killed by {sig.name}" in summary["warnings"][0]["message"]
        assert run_processes(run.name) == []
    finally:
        proc.kill()
        kill_run_processes(run.name)


def test_a_sigterm_to_every_process_of_the_run_cancels_it_and_loses_no_launcher(swarm):
    """SIGTERM to the supervisor and its launcher at once, as Slurm sends it to every process
    of a submitted swarm's job and a container's stop does: the launcher died of it first, was
    reported lost and started again as the run stopped. It ignores SIGTERM (its supervisor
    acts on it); the run is cancelled, and nothing is reported lost."""
    with _two_sleeping(swarm) as (proc, run, launcher):
        launcher.send_signal(signal.SIGTERM)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 128 + signal.SIGTERM
        summary = swarm.summary()
        assert summary["state"] == "cancelled", summary
        assert [w["code"] for w in summary["warnings"]] == ["cancelled_by_user"], summary["warnings"]
        assert {r["status"] for r in swarm.tasks().values()} == {"cancelled"}
        assert run_processes(run.name) == []


@contextlib.contextmanager
def _two_sleeping(swarm) -> Iterator[tuple[subprocess.Popen[str], Path, psutil.Process]]:
    """A headless run of 30 s sleeps at -j 2, both running: its process, its directory and
    its launcher; everything of it ended afterwards."""
    swarm.write("s.txt", "sleep 30\nsleep 30\n")
    proc = swarm.popen("run", "s.txt", "-j", "2", "--output", "quiet")
    run = _run_dir(swarm)
    try:
        wait_until(lambda: _started(run) == 2, what="both workers")
        yield proc, run, wait_until(lambda: launcher_of(proc.pid), what="the launcher")
    finally:
        proc.kill()
        kill_run_processes(run.name)


def test_task_that_kills_the_launcher_does_not_hang_the_run(swarm):
    # The wrapper's parent is the launcher: read its pid from /proc and kill it.
    swarm.write("k.txt", "read -r _ _ _ up _ < /proc/$PPID/stat; kill -9 $up; sleep 0.2; echo killer >> ledger\n"
                         "sleep 0.5; echo other >> ledger\n")
    res = swarm("run", "k.txt", "-j", "2", "--output", "quiet", timeout=60)
    assert res.code == 0, res.stderr
    assert sorted((swarm.cwd / "ledger").read_text().split()) == ["killer", "other"]
    assert [w["code"] for w in swarm.summary()["warnings"]] == ["launcher_lost"]


@pytest.mark.parametrize("stop", [signal.SIGTERM, full(signal.SIGINT)])
def test_signals_still_work_after_the_launcher_died_and_the_loop_is_idle(swarm, stop):
    with _two_sleeping(swarm) as (proc, run, launcher):
        launcher.kill()
        wait_until(lambda: launcher_of(proc.pid, not_pid=launcher.pid), what="a new launcher")
        supervisor = psutil.Process(proc.pid)
        # No busy loop: while both workers sleep, the supervisor waits. A loop spinning on the
        # dead launcher's pipe burnt a whole core (0.9 s of CPU a second).
        before, started = sum(supervisor.cpu_times()[:2]), time.monotonic()
        wait_until(lambda: time.monotonic() - started >= 1.0, what="a second of idling")
        assert sum(supervisor.cpu_times()[:2]) - before < 0.3
        proc.send_signal(stop)
        assert proc.wait(timeout=30) == {signal.SIGTERM: 143, signal.SIGINT: 130}[stop]
        assert {t["status"] for t in swarm.tasks().values()} == {"cancelled"}
        assert run_processes(run.name) == []


# ----- 2. a cmd behaves as /bin/sh -c CMD ------------------------------------------------------

SH_C = """
[swarm]
jobs = 4
[[task]]
name = "term-self"
cmd = "echo before; kill -TERM $$; echo after"
[[task]]
name = "kill-self"
cmd = "kill -9 $$"
[[task]]
name = "int-self"
cmd = "kill -INT $$"
[[task]]
name = "usr1-self"
cmd = 'kill -USR1 $$'
[[task]]
name = "dollar-zero"
cmd = 'echo "$0"; [ "$$" != "$(cat "$ZELLIJ_SWARM_ARTIFACT_DIR/../claim")" ] && echo own-pid'
[[task]]
name = "trap-exit"
cmd = "trap 'echo bye' EXIT; exit 3"
"""

SH_C_EXPECT = {  # task -> status, exit code, signal, output
    "term-self": ("failed", 143, "SIGTERM", "before\n"),
    "kill-self": ("failed", 137, "SIGKILL", ""),
    "int-self": ("failed", 130, "SIGINT", ""),
    "usr1-self": ("failed", 138, "SIGUSR1", ""),
    "dollar-zero": ("succeeded", 0, None, "sh\nown-pid\n"),
    "trap-exit": ("failed", 3, None, "bye\n"),
}


def _check_sh_c(swarm, res) -> None:
    assert res.code == 1, res.stderr
    rows = swarm.tasks()
    got = {n: (r["status"], r["exit_code"], r["signal"]) for n, r in rows.items()}
    assert got == {n: e[:3] for n, e in SH_C_EXPECT.items()}
    run_id = swarm.latest().name
    for name, (*_, output) in SH_C_EXPECT.items():
        # the wrapper's own "Terminated"/"Killed" notice never lands in the worker's output
        log = swarm("logs", run_id, name).stdout.replace("\r\n", "\n")
        assert log == output, (name, log)


def test_cmd_runs_as_sh_c_headless(swarm):
    swarm.write("c.toml", SH_C)
    _check_sh_c(swarm, swarm("run", "c.toml", "--output", "quiet"))


def test_cmd_runs_as_sh_c_in_tmux_panes(swarm, tmux):
    swarm.write("c.toml", SH_C)
    res = swarm("run", "c.toml", "--backend", "tmux", "--ui", "live", "--output", "quiet", env=outside_env(tmux))
    _check_sh_c(swarm, res)


def test_cmd_runs_as_sh_c_in_zellij_panes(swarm, fz):
    swarm.write("c.toml", SH_C)
    res = swarm("run", "c.toml", "--backend", "zellij", "--ui", "live", "--output", "quiet",
                env=fz.env("0.45.0", **FAST))
    _check_sh_c(swarm, res)


@pytest.mark.parametrize("sig,backend", [
    ("USR1", "headless"), ("ALRM", "tmux"), ("QUIT", "zellij-0.45.0"),
    full("USR2", "headless"), full("HUP", "headless"), full("TERM", "headless"), full("INT", "headless"),
    full("USR1", "tmux"), full("TERM", "tmux"), full("USR2", "zellij-0.43.1"), full("HUP", "zellij-0.40.1"),
])
def test_a_signal_sent_to_the_whole_group_is_the_workers_death(swarm, sig, backend, request):
    """``kill -SIG -- -PGID`` reaches the wrapper (and a pane's leader) too: they outlive every
    signal aimed at the worker, so the record is always the worker's death by it, never a race
    between the worker's end and the wrapper's."""
    swarm.write("s.toml", '[[task]]\nname = "target"\ncmd = "sleep 60"\n')
    args, env = backend_args(backend, request)
    with Running(swarm, "s.toml", "--output", "quiet", *args, env=env) as r:
        assert r.run is not None
        leader = running_worker(r.run, "sleep")
        os.killpg(os.getpgid(leader), getattr(signal, f"SIG{sig}"))
        assert r.proc.wait(timeout=60) == 1
    row = swarm.tasks()["target"]
    number = getattr(signal, f"SIG{sig}")
    assert (row["status"], row["exit_code"], row["signal"], row["attempts"]) == ("failed", 128 + number, f"SIG{sig}", 1)


def handled_group_signal(swarm, request, backend: str, sig: str, group: Callable[[int], int]) -> None:
    """A worker that handles ``sig`` (a name, or a number) is sent it through the process
    group ``group`` names (given the launch heartbeat's pid): it goes on and finishes, and
    its own end is the task's — once."""
    number = int(sig) if sig.isdigit() else getattr(signal, f"SIG{sig}")
    swarm.write("s.toml", '[[task]]\nname = "target"\nretries = 1\n'
                          f'cmd = "trap \'echo caught >> ledger\' {number}; echo started >> ledger; '
                          'while [ ! -e go ]; do sleep 0.05; done; echo done >> ledger"\n')
    args, env = backend_args(backend, request)
    with Running(swarm, "s.toml", "--output", "quiet", *args, env=env) as r:
        assert r.run is not None
        leader = running_worker(r.run, "sleep")
        wait_until(lambda: "started" in (swarm.cwd / "ledger").read_text(), what="the worker's trap set")
        os.killpg(group(leader), number)
        wait_until(lambda: "caught" in (swarm.cwd / "ledger").read_text(), what="the worker to handle it")
        (swarm.cwd / "go").touch()
        assert r.proc.wait(timeout=60) == 0, swarm.tasks()["target"]
    row = swarm.tasks()["target"]
    assert (row["status"], row["exit_code"], row["attempts"]) == ("succeeded", 0, 1)
    assert (swarm.cwd / "ledger").read_text().split() == ["started", "caught", "done"]


@pytest.mark.parametrize("sig,backend", [
    ("VTALRM", "tmux"), ("PROF", "headless"), ("XCPU", "zellij-0.45.0"),
    full("XCPU", "tmux"), full("SYS", "tmux"), full("IO", "tmux"), full("VTALRM", "headless"),
])
def test_a_signal_outside_the_worker_signals_sent_to_the_whole_group_leaves_the_worker_s_own_end(
        swarm, sig, backend, request):
    """A signal outside the ones aimed at workers (VTALRM, XCPU, SYS, …) sent to the worker's
    whole group, as its own ``kill -SIG 0`` would reach it: the wrapper's (headless), the
    pane's (tmux: its leader too), its own terminal's (Zellij's relay). In a tmux pane such a
    signal also reached the pane's leader, which died of it: the worker's terminal hung up
    and nothing recorded its end (``lost``), and the task ran again. (The wrapper died of it
    too, before it outlived every such signal: its worker, followed on, was the end.)"""
    def workers_group(leader: int) -> int:
        worker = next(p for p in psutil.Process(leader).children(recursive=True)
                      if "echo started" in command_line(p) and "_ptyrelay" not in command_line(p))
        return os.getpgid(worker.pid)

    handled_group_signal(swarm, request, backend, sig, workers_group)


@pytest.mark.parametrize("sig,backend", [
    ("PROF", "zellij-0.45.0"), ("40", "zellij-0.45.0"), full("VTALRM", "real-zellij"), full("PROF", "tmux"),
])
def test_a_signal_sent_to_the_pane_s_group_reaches_a_worker_on_a_terminal_of_its_own(swarm, sig, backend, request):
    """In a Zellij pane the worker runs in a session of its own, on the relay's terminal; the
    relay is in the pane's process group. A signal sent to that group (``kill -SIG -- -PGID``)
    that is no worker signal ended the relay, which passed on only those — and its end killed
    the worker, which never heard it: ``failed (SIGPROF)``, and run again. The relay passes
    every such signal on: the worker that handles it goes on, and its own end is the task's."""
    handled_group_signal(swarm, request, backend, sig, os.getpgid)  # the pane leader's group: the pane's


# a signal that ends a process by default and is no worker signal, and a real-time one
GROUP_KILLS = ("VTALRM", "PROF", "XCPU", "PWR", "SYS", "34")


@pytest.mark.parametrize("backend", ["headless", "tmux", full("zellij-0.45.0")])
def test_a_worker_that_kills_its_own_group_with_any_signal_failed_by_it(swarm, backend, request):
    """A worker whose ``kill -SIG 0`` ends itself — the wrapper in its group was sent the
    signal too. A wrapper that died of it (it outlived only the signals aimed at workers by
    name), often after it had reaped its worker, left no record: the task was ``lost
    (no_exit_record)``, 5 in 6 headless. It outlives every signal but its own faults now: the
    worker's death by the signal is recorded, ``failed`` with its code, once."""
    swarm.write("g.toml", "[swarm]\njobs = 6\n" + "".join(
        f'[[task]]\nname = "s{sig}"\ncmd = "echo ran >> {sig}.mark; sleep 0.2; kill -{sig} 0; echo on >> {sig}.mark"\n'
        for sig in GROUP_KILLS))
    args, env = backend_args(backend, request)
    res = swarm("run", "g.toml", "--output", "quiet", *args, env=env)
    assert res.code == 1, res.stderr
    rows = swarm.tasks()
    for sig in GROUP_KILLS:
        number = int(sig) if sig.isdigit() else getattr(signal, f"SIG{sig}")
        row = rows[f"s{sig}"]
        assert (row["status"], row.get("reason"), row["exit_code"], row["attempts"]) == \
            ("failed", None, 128 + number, 1), (sig, row)
        assert (swarm.cwd / f"{sig}.mark").read_text() == "ran\n"


@pytest.mark.parametrize("backend", ["zellij-0.45.0", full("tmux"), full("zellij-0.44.3")])
def test_a_killed_pane_leader_leaves_no_worker_behind(swarm, backend, request):
    """``kill -9`` of the process the launch heartbeat names in a pane, its leader: the
    wrapper's second stage lives on and records the hang-up, as for a closed pane. The worker
    is ended before its slot runs the next task, and nothing is left for the end-of-run
    sweep. (A headless wrapper's worker runs on: the tests below.)"""
    swarm.write("s.toml", '[swarm]\njobs = 1\n[[task]]\nname = "a"\ncmd = "sleep 30; echo late >> ledger"\n'
                          '[[task]]\nname = "b"\ncmd = "true"\n')
    args, env = backend_args(backend, request)
    with Running(swarm, "s.toml", "--output", "quiet", *args, env=env) as r:
        assert r.run is not None
        psutil.Process(running_worker(r.run, "sleep")).kill()
        assert r.proc.wait(timeout=60) == 1
        assert run_processes(r.run.name) == []
    rows = swarm.tasks()
    # A pane leader killed from outside saw no hang-up: the worker's death by the SIGHUP that
    # follows is its own failure, whether the multiplexer closed the pane's terminal before the
    # second stage looked at it or after (the test below)
    assert (rows["a"]["status"], rows["a"]["reason"], rows["a"]["signal"]) == ("failed", None, "SIGHUP")
    assert rows["b"]["status"] == "succeeded"
    assert swarm.summary()["warnings"] == [], "no process_left_behind"
    assert not (swarm.cwd / "ledger").exists()


def test_a_killed_tmux_pane_leader_is_its_workers_failure_though_tmux_closed_the_terminal_first(swarm, tmux):
    """tmux closes a pane's terminal as it reaps the pane's first process, its leader: after a
    ``kill -9`` of the leader the second stage could find its terminal hung up before it
    recorded its worker's death by the hang-up, and marked it so — ``cancelled
    (pane_closed)``, its retries forfeited, though nobody closed the pane (1 run in 10; 8 in
    20 beside two busy loops). Here that order, forced: the worker outlives the hang-up until
    tmux says the pane is dead, then dies of a SIGHUP. Its failure, retried (SPEC §2)."""
    swarm.write("s.toml", '[swarm]\njobs = 1\n[[task]]\nname = "a"\nretries = 1\n'
                          'cmd = "trap \'\' HUP; until [ -e go ]; do sleep 0.02; done; trap - HUP; kill -HUP $$"\n')
    with Running(swarm, "s.toml", "--output", "quiet", "--backend", "tmux", "--ui", "live",
                 "--require-multiplexer", env=outside_env(tmux)) as r:
        assert r.run is not None
        leader = running_worker(r.run, "sleep")
        beat = json.loads((r.run / "slots/slot-1/gen-1/heartbeat.jsonl").read_text().splitlines()[0])
        os.kill(leader, signal.SIGKILL)
        wait_until(lambda: tmux("display-message", "-p", "-t", beat["pane_id"], "#{pane_dead}").strip() == "1",
                   what="tmux to close the pane's terminal")
        (swarm.cwd / "go").touch()
        assert r.proc.wait(timeout=30) == 1
    row = swarm.tasks()["a"]
    assert (row["status"], row["reason"], row["signal"], row["attempts"]) == ("failed", None, "SIGHUP", 2)


def _before_its_start(run: Path, act: Callable[[int], None], gen: int = 1) -> None:
    """``act`` on slot 1's pane of generation ``gen``: its first process — its first stage, or
    the leader it becomes (the claim's pid) — stopped as soon as its claim is written, with
    what it had started, none of it having written its start yet; then all of it goes on."""
    def claimed() -> int | None:
        for claim in run.glob(f"slots/slot-1/gen-{gen}/claim"):
            text = claim.read_text().strip()
            if text:
                return int(text)
        return None

    pid = wait_until(claimed, interval=0.0005, what="the pane's claim")
    os.kill(pid, signal.SIGSTOP)
    below = psutil.Process(pid).children(recursive=True)
    for p in below:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.suspend()
    beat = run / f"slots/slot-1/gen-{gen}/heartbeat.jsonl"
    assert not (beat.exists() and '"started"' in beat.read_text()), "stopped too late: its start is written"
    act(pid)
    for p in below:  # (the kernel's SIGHUP at the leader's end reaches them as they go on)
        with contextlib.suppress(psutil.NoSuchProcess):
            p.resume()
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGCONT)


@pytest.mark.parametrize("backend", ["tmux", "real-zellij"])
def test_a_pane_leader_killed_before_its_worker_started_runs_it_again(swarm, backend, request):
    """``kill -9`` of a pane's first process before its wrapper wrote its start (its first
    ~50 ms): nobody closed the pane — tmux keeps it dead, Zellij held — but with no start and
    no record it was taken for a pane closed as it opened: ``cancelled (pane_closed)``, never
    run (tmux 5 runs in 8, Zellij 3 in 4, at that moment). Nothing ran, and nothing of it can
    start the worker any more: the task runs again, its attempt not spent, once."""
    ledger = swarm.cwd / "ledger"
    swarm.write("s.toml", f'[swarm]\njobs = 1\n[[task]]\nname = "a"\ncmd = "echo ran >> {ledger}"\n')
    args, env = backend_args(backend, request)
    with Running(swarm, "s.toml", "--output", "quiet", *args, "--require-multiplexer", env=env) as r:
        assert r.run is not None
        _before_its_start(r.run, lambda pid: os.kill(pid, signal.SIGKILL))
        code = r.proc.wait(timeout=60)
    row = swarm.tasks()["a"]
    assert (code, row["status"], row["attempts"], row["generation"]) == (0, "succeeded", 1, 2), (row, swarm.summary())
    assert ledger.read_text() == "ran\n"
    assert [w["code"] for w in swarm.summary()["warnings"]] == ["pane_leader_killed"]


def test_pane_leaders_killed_again_and_again_before_the_start_end_in_a_failure(swarm, tmux):
    """Something that kills every new pane's first process (an OOM killer on a starved
    machine): each time nothing ran, and each time the task ran again without using an
    attempt — for ever, the run never ending. After ``FREE_RUNS`` such
    re-runs, the next one is its attempt's failure, with the signal the leader died of."""
    ledger = swarm.cwd / "ledger"
    swarm.write("s.toml", f'[swarm]\njobs = 1\n[[task]]\nname = "a"\ncmd = "echo ran >> {ledger}"\n')
    kills = generations.FREE_RUNS + 1
    with Running(swarm, "s.toml", "--output", "quiet", "--backend", "tmux", "--ui", "live",
                 "--require-multiplexer", env=outside_env(tmux)) as r:
        assert r.run is not None
        for gen in range(1, kills + 1):
            _before_its_start(r.run, lambda pid: os.kill(pid, signal.SIGKILL), gen)
        assert r.proc.wait(timeout=60) == 1
    row = swarm.tasks()["a"]
    assert (row["status"], row["signal"], row["attempts"], row["generation"]) == ("failed", "SIGKILL", 1, kills), row
    assert not ledger.exists()
    assert [w["code"] for w in swarm.summary()["warnings"]] == ["pane_leader_killed"] * kills


def test_a_tmux_pane_closed_by_hand_before_its_worker_started_is_still_cancelled(swarm, tmux):
    """The neighbour: the same moment, but the pane closed (``kill-pane``): it is gone, and
    nothing ran — ``cancelled (pane_closed)``, as before."""
    ledger = swarm.cwd / "ledger"
    swarm.write("s.toml", f'[swarm]\njobs = 1\n[[task]]\nname = "a"\ncmd = "echo ran >> {ledger}"\n')
    with Running(swarm, "s.toml", "--output", "quiet", "--backend", "tmux", "--ui", "live",
                 "--require-multiplexer", env=outside_env(tmux)) as r:
        assert r.run is not None
        def close(_pid: int) -> None:
            pane = next(p for p, row in tmux.panes().items() if "· a ·" in row["title"])
            tmux("kill-pane", "-t", pane)

        _before_its_start(r.run, close)
        assert r.proc.wait(timeout=60) == 1
    row = swarm.tasks()["a"]
    assert (row["status"], row["reason"], row["attempts"]) == ("cancelled", "pane_closed", 1), row
    assert not ledger.exists()


def _worker_at_a_gate(swarm, *, trap: str, last: str, retries: int) -> Path:
    """``s.toml``: slot 1 runs task ``a`` (``trap`` first), which writes ``start`` to the
    ledger it returns, waits at the gate ``go``, writes ``done`` and ends with ``last``; then ``b``."""
    ledger = swarm.cwd / "ledger"
    swarm.write("s.toml", f'[swarm]\njobs = 1\nkill_grace = "1s"\n[[task]]\nname = "a"\nretries = {retries}\n'
                          f'cmd = "{trap}echo start >> {ledger}; until [ -e go ]; do sleep 0.02; done; '
                          f'echo done >> {ledger}; {last}"\n[[task]]\nname = "b"\ncmd = "true"\n')
    return ledger


def _logged(run: Path, code: str) -> bool:
    return f'"code":"{code}"' in (run / "events.jsonl").read_text()


@pytest.mark.parametrize("trap, last, want", [
    ("", "exit 0", ("succeeded", None, 0, None)),
    ("trap '' TERM; ", "exit 0", ("succeeded", None, 0, None)),
    full("", "exit 3", ("failed", None, 3, None)),
    ("", "kill -USR1 $$", ("failed", None, 128 + signal.SIGUSR1, "SIGUSR1")),
])
def test_a_headless_wrapper_killed_from_outside_leaves_its_worker_to_finish_as_it_does(swarm, trap, last, want):
    """``kill -9`` of a headless wrapper (the OOM killer, a stray kill) while its worker runs:
    the task was recorded ``lost`` at once and its worker sent the ladder — one that ignored
    SIGTERM finished within the grace all the same, and the task ran again (its retries, or
    ``retry``): finished work run twice. The worker runs on now, nothing of ours ends it, and
    its own end, which the launcher — its new parent — saw, is the task's: run once."""
    ledger = _worker_at_a_gate(swarm, trap=trap, last=last, retries=0 if want[0] == "failed" else 2)
    with Running(swarm, "s.toml", "--output", "quiet") as r:
        assert r.run is not None
        psutil.Process(running_worker(r.run, "sleep")).kill()
        wait_until(lambda: _logged(r.run, "wrapper_lost"), what="the killed wrapper noticed")
        assert ledger.read_text().split() == ["start"]
        (swarm.cwd / "go").touch()
        assert r.proc.wait(timeout=60) == (0 if want[0] == "succeeded" else 1)
        assert run_processes(r.run.name) == []
    row = swarm.tasks()["a"]
    assert (row["status"], row["reason"], row["exit_code"], row["signal"], row["attempts"]) == (*want, 1), row
    assert ledger.read_text().split() == ["start", "done"]
    assert '"event":"kill_sent"' not in (swarm.latest() / "events.jsonl").read_text()
    assert swarm.tasks()["b"]["status"] == "succeeded"
    if want[0] == "succeeded":  # finished work: not run again
        res = swarm("retry", swarm.latest().name)
        assert res.code == 2 and "nothing to retry" in res.stderr, res
        assert ledger.read_text().split() == ["start", "done"]


@pytest.mark.parametrize("how", ["cancel", "timeout", full("restart"), full("SIGINT")])
def test_a_kill_of_a_task_whose_wrapper_was_killed_ends_it(swarm, how):
    """The worker a killed wrapper left, ended by a kill of ours: the task ran on as
    ``running`` for ever, and the supervisor no longer heeded SIGTERM, in 2 runs of 3 — its
    worker's end came while the kill's signal was on its way, and the answer put the
    generation back to waiting for an end that had come. The kill's outcome, once."""
    ledger = swarm.cwd / "ledger"
    limit = 'timeout = "2s"\n' if how == "timeout" else ""
    swarm.write("s.toml", f'[[task]]\nname = "a"\n{limit}'
                          f'cmd = "echo start >> {ledger}; sleep 30; echo done >> {ledger}"\n')
    with Running(swarm, "s.toml", "--output", "quiet") as r:
        assert r.run is not None
        psutil.Process(running_worker(r.run, "sleep")).kill()
        wait_until(lambda: _logged(r.run, "wrapper_lost"), what="the killed wrapper noticed")
        if how in ("cancel", "restart"):
            assert swarm(how, r.run.name, "a").code == 0
            if how == "restart":
                wait_until(lambda: ledger.read_text().split() == ["start", "start"], what="the restart")
                swarm("cancel", r.run.name, "a")
        elif how == "SIGINT":
            r.proc.send_signal(signal.SIGINT)
        assert r.proc.wait(timeout=60) == (130 if how == "SIGINT" else 1)  # a task cancelled: not the run
        assert run_processes(r.run.name) == []
    row = swarm.tasks()["a"]
    want = ("timed_out", "timeout") if how == "timeout" else ("cancelled", "cancelled_by_user")
    assert (row["status"], row["reason"]) == want, row
    assert "done" not in ledger.read_text().split()
    assert [w["code"] for w in swarm.summary()["warnings"]].count("wrapper_lost") == 1


@pytest.mark.parametrize("how,backend", [
    ("cancel", "zellij-0.45.0"), ("cancel", "real-zellij"), full("timeout", "zellij-0.45.0"),
    full("cancel", "zellij-0.44.3"),
    full("cancel", "tmux"), full("cancel", "headless"),
])
def test_a_kill_s_sigterm_reaches_the_worker_once(swarm, how, backend, request):
    """The ladder sends one SIGTERM: an agent that saves its work on it saves once, to the
    end. In a Zellij pane the worker runs under the pty relay, which passes every signal on
    to it: sent to the worker and to its relay, it came twice (1 ms apart), and the second
    began the save again and cut the first one short."""
    swarm.write("saver.py", SAVER)
    limit = 'timeout = "1s"\n' if how == "timeout" else ""
    swarm.write("s.toml", f'[[task]]\nname = "a"\n{limit}argv = ["{sys.executable}", "saver.py"]\n')
    args, env = backend_args(backend, request)
    with Running(swarm, "s.toml", "--output", "quiet", "--kill-grace", "5s", *args, env=env) as r:
        assert r.run is not None
        wait_until(lambda: (swarm.cwd / "ledger").exists(), what="the worker to start")
        if how == "cancel":
            assert swarm("cancel", r.run.name, "a").code == 0
        assert r.proc.wait(timeout=60) == 1
    assert (swarm.cwd / "ledger").read_text().split() == ["start", "save-begin", "save-end"]
    row = swarm.tasks()["a"]
    assert (row["status"], row["exit_code"]) == ("cancelled" if how == "cancel" else "timed_out", 0), row


TRAPPER = """\
#!/bin/sh
echo start >> "$1"
trap 'echo TERM >> "$1"; sleep 0.5; echo saved >> "$1"; exit 0' TERM
while :; do sleep 0.1; done
"""


SELF_TERM = """\
import os, signal, subprocess, sys, time
def heard(signum, frame):
    with open("ledger", "a") as f: f.write("TERM\\n")
signal.signal(signal.SIGTERM, heard)
if sys.argv[1] == "itself":
    os.kill(0, signal.SIGTERM)
else:  # a process of its own that sends it and is gone (reaped) before the leader looks
    subprocess.run(["/bin/kill", "-TERM", "0"])
time.sleep(0.5)
sys.exit(0)
"""


@pytest.mark.parametrize("sender,backend", [("itself", "tmux"), ("a child", "tmux"), full("itself", "zellij-0.45.0"),
                                            full("a child", "headless")])
def test_a_sigterm_a_worker_sends_its_own_group_reaches_it_once(swarm, sender, backend, request):
    """``kill -TERM 0`` from a worker in a tmux pane reaches the pane's leader too, which
    passed it on to every process below it: the worker heard it twice — also when a short-
    lived process of the worker's sent it, gone by the time the leader looked."""
    swarm.write("self_term.py", SELF_TERM)
    swarm.write("s.toml", f'[[task]]\nname = "a"\nargv = ["{sys.executable}", "self_term.py", "{sender}"]\n')
    args, env = backend_args(backend, request)
    res = swarm("run", "s.toml", "--output", "quiet", *args, env=env)
    assert res.code == 0, res.stderr
    assert (swarm.cwd / "ledger").read_text() == "TERM\n"


@pytest.mark.parametrize("backend", ["tmux", "zellij-0.45.0", "real-zellij", full("headless"), full("zellij-0.43.1"),
                                     full("real-zellij-pre044")])
def test_a_pane_s_command_that_saves_on_sigterm_is_not_cut_short(swarm, backend, request):
    """A pane's ``cmd`` runs under ``sh -c``, and dash keeps a shell waiting there: a cancel's
    SIGTERM ended that shell at once, the wrapper recorded 143, and the pane's terminal hung
    up the worker in the middle of its save. A command that names a program is exec'd by
    that shell now: the save ends, and the outcome is the worker's (exit 0, cancelled)."""
    os.chmod(swarm.write("trapper.sh", TRAPPER), 0o755)
    ledger = swarm.cwd / "ledger"
    swarm.write("s.toml", f'[[task]]\nname = "a"\ncmd = "./trapper.sh {ledger}"\n')
    args, env = backend_args(backend, request)
    with Running(swarm, "s.toml", "--output", "quiet", "--kill-grace", "5s", *args, env=env) as r:
        assert r.run is not None
        wait_until(lambda: ledger.exists(), what="the worker to start")
        assert swarm("cancel", r.run.name, "a").code == 0
        assert r.proc.wait(timeout=60) == 1
    assert ledger.read_text().split() == ["start", "TERM", "saved"]
    row = swarm.tasks()["a"]
    assert (row["status"], row["exit_code"]) == ("cancelled", 0), row


def test_a_worker_that_left_its_wrapper_s_group_is_followed_when_its_wrapper_is_killed(swarm):
    """``exec setsid …``: the launcher names no worker in the wrapper's group, and the task
    was recorded ``lost`` at once, its worker killed and run again. The worker still carries
    its generation's markers: it is followed to its end, which nobody sees — ``unknown``."""
    ledger = _worker_at_a_gate(swarm, trap="exec setsid sh -c '", last="exit 0'", retries=2)
    with Running(swarm, "s.toml", "--output", "quiet") as r:
        assert r.run is not None
        wrapper = wait_until(lambda: _wrapper_of(r.run), what="the wrapper")
        wait_until(lambda: ledger.exists() and ledger.read_text() == "start\n", what="the worker")
        psutil.Process(wrapper).kill()
        wait_until(lambda: _logged(r.run, "wrapper_lost"), what="the killed wrapper noticed")
        (swarm.cwd / "go").touch()
        assert r.proc.wait(timeout=60) == 1
        assert run_processes(r.run.name) == []
    row = swarm.tasks()["a"]
    assert (row["status"], row["reason"], row["attempts"]) == ("unknown", "wrapper_lost", 1), row
    assert ledger.read_text().split() == ["start", "done"]


def _wrapper_of(run: Path) -> int | None:
    """The pid of slot 1's first headless wrapper, once its launch heartbeat names it."""
    for line in (run / "slots/slot-1/gen-1/heartbeat.jsonl").read_text().splitlines() \
            if (run / "slots/slot-1/gen-1/heartbeat.jsonl").exists() else []:
        if '"started"' in line:
            return int(json.loads(line)["pid"])
    return None


@pytest.mark.parametrize("lost, claim", [("supervisor and launcher", "kept"), full("launcher", "kept"),
                                         ("supervisor and launcher", "emptied"),
                                         full("supervisor and launcher", "removed")])
def test_a_wrapper_killed_with_no_launcher_to_see_its_worker_end_is_unknown_and_not_run_again(swarm, lost, claim):
    """The same kill where no launcher is left to reap the worker: its supervisor and launcher
    were killed first (``resume`` then finds the wrapper gone), or its launcher (a new one
    does not know the worker). The worker is followed to its end, which nobody sees:
    ``unknown`` (``wrapper_lost``) — it may have finished, and pushed — never run again by
    itself; ``retry`` leaves it out and says so. With its claim emptied meanwhile, ``resume``
    took it for the claim of a wrapper killed before it wrote its pid (before it ran
    anything), and ran the task again beside the first worker (an adversary, 2 in 2): the
    wrapper wrote its start, after its pid, so it ran. With its claim removed, the worker was
    not followed but recorded at once (``records_removed``), and the run's end killed it
    (2 in 2)."""
    ledger = _worker_at_a_gate(swarm, trap="", last="exit 0", retries=2)
    with Running(swarm, "s.toml", "--output", "quiet") as r:
        assert r.run is not None
        wrapper = psutil.Process(running_worker(r.run, "sleep"))
        launcher = wait_until(lambda: launcher_of(r.proc.pid), what="the launcher")
        if lost == "launcher":
            launcher.kill()
            wait_until(lambda: _logged(r.run, "launcher_lost"), what="the launcher's loss noticed")
        else:
            r.killed()
            launcher.kill()
        killed_outright(wrapper)
        claim_file = r.run / "slots/slot-1/gen-1/claim"
        if claim == "emptied":
            claim_file.write_text("")
        elif claim == "removed":
            claim_file.unlink()
        if lost == "launcher":
            wait_until(lambda: _logged(r.run, "wrapper_lost"), what="the killed wrapper noticed")
            (swarm.cwd / "go").touch()
            assert r.proc.wait(timeout=60) == 1
        else:
            resumed = swarm.popen("resume", r.run.name, "--output", "quiet")
            try:
                wait_until(lambda: _logged(r.run, "wrapper_lost"), what="the killed wrapper noticed")
                assert ledger.read_text().split() == ["start"]
                (swarm.cwd / "go").touch()
                assert resumed.wait(timeout=60) == 1
            finally:
                resumed.kill()
        assert run_processes(r.run.name) == []
    row = swarm.tasks()["a"]
    reason = "records_removed" if claim == "removed" else "wrapper_lost"
    assert (row["status"], row["reason"], row["attempts"]) == ("unknown", reason, 1), row
    assert ledger.read_text().split() == ["start", "done"]
    res = swarm("retry")
    assert "unknown" in res.stderr and ledger.read_text().split() == ["start", "done"], res


@pytest.mark.parametrize("backend", ["headless", full("tmux-compact")])
def test_a_worker_that_outlived_its_wrapper_and_ended_while_no_supervisor_ran_is_unknown(swarm, backend, request):
    """``kill -9`` of a headless wrapper, seen by its supervisor (a ``wrapper_lost`` warning:
    its worker runs on), then of the supervisor and its launcher; the worker finishes while
    nothing runs. ``resume`` found the wrapper gone and nothing of it left, and recorded it
    ``lost (no_exit_record)``: a plain ``retry`` ran the finished work again (an adversary, 5
    in 5 headless, 1 in 1 compact). The log says the worker outlived its wrapper: its end,
    which nobody saw, is ``unknown`` (``wrapper_lost``), never run again by itself."""
    ledger = _worker_at_a_gate(swarm, trap="", last="exit 0", retries=2)
    env = inside_env(request.getfixturevalue("tmux")) if backend == "tmux-compact" else None
    flags = ("--backend", "tmux", "--ui", "compact") if backend == "tmux-compact" else ()
    with Running(swarm, "s.toml", "--output", "quiet", *flags, env=env) as r:
        assert r.run is not None
        wrapper = psutil.Process(running_worker(r.run, "sleep"))
        launcher = wait_until(lambda: launcher_of(r.proc.pid), what="the launcher")
        wrapper.kill()
        wait_until(lambda: _logged(r.run, "wrapper_lost"), what="the killed wrapper noticed")
        r.killed()
        launcher.kill()
        (swarm.cwd / "go").touch()
        wait_until(lambda: ledger.read_text().split() == ["start", "done"], what="the worker's end")
        wait_until(lambda: run_processes(r.run.name) == [], what="nothing of the run left")
        assert swarm("resume", r.run.name, "--output", "quiet", env=env).code == 1
    row = swarm.tasks()["a"]
    assert (row["status"], row["reason"], row["attempts"]) == ("unknown", "wrapper_lost", 1), row
    res = swarm("retry", env=env)
    assert "unknown" in res.stderr and ledger.read_text().split() == ["start", "done"], res


@pytest.mark.parametrize("launcher_too", [False, True], ids=["launcher-lives", "launcher-killed"])
def test_a_worker_whose_wrapper_died_with_its_supervisor_and_that_finished_before_resume_runs_once(
        swarm, launcher_too):
    """``kill -9`` of the supervisor and of a headless wrapper (``pkill -9 -f`` of the state
    directory's path reaches both) before the supervisor saw the wrapper die; the worker
    finishes while no supervisor runs. ``resume`` found the wrapper gone with nothing of it
    left and recorded ``lost (no_exit_record)``, and ran the finished work again (an
    adversary: 5 in 5, in every order of the kills). The launcher, left alone, stays while
    the worker runs and records its end as the wrapper would have: ``succeeded``. Killed too,
    nobody saw the end: ``unknown`` (``wrapper_lost``), never run again by itself."""
    ledger = _worker_at_a_gate(swarm, trap="", last="exit 0", retries=2)
    with Running(swarm, "s.toml", "--output", "quiet") as r:
        assert r.run is not None
        wrapper = psutil.Process(running_worker(r.run, "sleep"))
        launcher = wait_until(lambda: launcher_of(r.proc.pid), what="the launcher")
        r.killed()
        if launcher_too:
            launcher.kill()
        killed_outright(wrapper)
        (swarm.cwd / "go").touch()
        wait_until(lambda: ledger.read_text().split() == ["start", "done"], what="the worker's end")
        wait_until(lambda: run_processes(r.run.name) == [] and not launcher.is_running(),
                   what="nothing of the run left")
        assert swarm("resume", r.run.name, "--output", "quiet").code == (1 if launcher_too else 0)
    row = swarm.tasks()["a"]
    want = ("unknown", "wrapper_lost", None) if launcher_too else ("succeeded", None, 0)
    assert (row["status"], row["reason"], row["exit_code"], row["attempts"]) == (*want, 1), row
    assert swarm.tasks()["b"]["status"] == "succeeded"
    swarm("retry")
    assert ledger.read_text().split() == ["start", "done"]


def test_a_resumed_run_takes_the_launcher_s_word_for_a_worker_that_left_a_daemon(swarm):
    """``kill -9`` of the supervisor and a wrapper, then ``resume`` at once, while the worker
    runs on; it ends, leaving a daemon. The resumed supervisor followed what carries the
    generation's markers — the daemon too — and the run did not end while the daemon ran,
    though the launcher had written the worker's end (an adversary, 2 in 2; older than the
    launcher's record). That record is the worker's end: ``succeeded``, once."""
    ledger = _worker_at_a_gate(swarm, trap="", last="sleep 1000 & exit 0", retries=2)
    with Running(swarm, "s.toml", "--output", "quiet") as r:
        assert r.run is not None
        wrapper = psutil.Process(running_worker(r.run, "sleep"))
        r.killed()
        wrapper.kill()
        resumed = swarm.popen("resume", r.run.name, "--output", "quiet")
        try:
            wait_until(lambda: _logged(r.run, "wrapper_lost"), what="the killed wrapper noticed")
            (swarm.cwd / "go").touch()
            assert resumed.wait(timeout=60) == 0
        finally:
            resumed.kill()
        wait_until(lambda: run_processes(r.run.name) == [], what="nothing of the run left")
    row = swarm.tasks()["a"]
    assert (row["status"], row["exit_code"], row["attempts"]) == ("succeeded", 0, 1), row
    assert ledger.read_text().split() == ["start", "done"]


def _lose_session(backend: str, request: pytest.FixtureRequest, run: Path) -> None:
    """The run's session gone from under it: the tmux server killed, the Zellij session."""
    if backend == "tmux":
        request.getfixturevalue("tmux")("kill-server")
    else:
        request.getfixturevalue("rz").zellij("kill-session", f"swarm-{run.name}")


def _leader_and_wrapper(run: Path, ledger: Path) -> tuple[psutil.Process, psutil.Process]:
    """Once ``_worker_at_a_gate``'s worker runs in its pane: the pane's leader, and the
    wrapper's second stage (the leader's child)."""
    leader = psutil.Process(running_worker(run, "sleep"))
    wait_until(lambda: ledger.exists() and ledger.read_text() == "start\n", what="the worker")
    return leader, next(p for p in leader.children() if "restored" in command_line(p))


@pytest.mark.parametrize("backend,supervisor", [
    ("tmux", "lives"), ("tmux", "killed"), ("real-zellij", "lives"), full("real-zellij", "killed"),
])
def test_a_pane_s_leader_and_wrapper_killed_leave_a_worker_that_runs_on_to_be_followed(
        swarm, backend, supervisor, request):
    """``kill -9`` of a pane's leader and of its wrapper's second stage (and of the supervisor,
    then ``resume``) while the worker ignores the hang-up and runs on: nothing records its
    end. The task was ``lost (no_exit_record)`` at once, the worker sent the ladder's SIGTERM,
    and the task ran again (an adversary, 4 in 4 tmux, 3 in 3 Zellij). Nobody closed the pane
    (no hang-up mark): as headless, the worker is followed to its end, never killed nor run
    again by itself (SPEC §5.7). In tmux nobody sees that end: ``unknown (wrapper_lost)``. In
    Zellij the worker's pty relay lives on and reaps it: its own end, ``succeeded`` — it was
    ``unknown`` too, though the relay had marked the worker's code."""
    ledger = _worker_at_a_gate(swarm, trap="trap '' HUP; ", last="exit 0", retries=2)
    args, env = backend_args(backend, request)
    with Running(swarm, "s.toml", "--output", "quiet", *args, env=env) as r:
        assert r.run is not None
        leader, stage = _leader_and_wrapper(r.run, ledger)
        if supervisor == "killed":
            r.killed()
        leader.kill()
        stage.kill()
        resumed = swarm.popen("resume", r.run.name, "--output", "quiet", env=env) if supervisor == "killed" else None
        try:
            wait_until(lambda: _logged(r.run, "wrapper_lost"), what="the killed wrapper noticed")
            assert ledger.read_text().split() == ["start"]  # (a ladder sent at any time: ``kill_sent`` below)
            (swarm.cwd / "go").touch()
            assert (resumed or r.proc).wait(timeout=60) == (0 if backend == "real-zellij" else 1)
        finally:
            if resumed is not None:
                resumed.kill()
        assert run_processes(r.run.name) == []
    row = swarm.tasks()["a"]
    seen = ("succeeded", None, 0) if backend == "real-zellij" else ("unknown", "wrapper_lost", None)
    assert (row["status"], row["reason"], row["exit_code"], row["attempts"]) == (*seen, 1), row
    assert ledger.read_text().split() == ["start", "done"]
    assert '"event":"kill_sent"' not in (r.run / "events.jsonl").read_text()
    assert swarm.tasks()["b"]["status"] == "succeeded"


@pytest.mark.parametrize("last, relay, want", [
    ("exit 3", "lives", ("failed", None, 3, ["start", "done", "start", "done"])),
    full("exit 0", "killed", ("unknown", "wrapper_lost", None, ["start", "done"])),
])
def test_a_zellij_pane_s_worker_left_by_its_killed_leader_and_wrapper_ends_as_its_relay_saw(
        swarm, rz, last, relay, want):
    """The neighbours in Zellij: the relay's mark is the worker's own end whatever it is — a
    failure of its own is the attempt's, and runs again by its retries — and a relay killed
    with the leader and wrapper saw nothing: ``unknown (wrapper_lost)``, never run again."""
    ledger = _worker_at_a_gate(swarm, trap="trap '' HUP; ", last=last, retries=1)
    with Running(swarm, "s.toml", "--output", "quiet", "--backend", "zellij", "--ui", "live",
                 env=rz.env(**FAST)) as r:
        assert r.run is not None
        leader, stage = _leader_and_wrapper(r.run, ledger)
        relays = [p for p in stage.children() if "_ptyrelay" in command_line(p)]
        assert len(relays) == 1, [command_line(p) for p in stage.children()]
        leader.kill()
        stage.kill()
        if relay == "killed":
            relays[0].kill()
        wait_until(lambda: _logged(r.run, "wrapper_lost"), what="the killed wrapper noticed")
        (swarm.cwd / "go").touch()
        wait_until(lambda: ledger.read_text().split() == want[3], what="the worker's runs")
        r.proc.wait(timeout=60)
        (swarm.cwd / "go").unlink()
        assert run_processes(r.run.name) == []
    row = swarm.tasks()["a"]
    assert (row["status"], row["reason"], row["history"][0]["exit_code"]) == want[:3], row
    assert ledger.read_text().split() == want[3]
    assert '"event":"kill_sent"' not in (r.run / "events.jsonl").read_text()


@pytest.mark.parametrize("backend,session", [("tmux", "lives"), ("real-zellij", "lives"), ("tmux", "killed"),
                                             full("real-zellij", "killed")])
def test_a_pane_s_worker_left_by_its_killed_leader_and_wrapper_that_ended_before_resume_runs_once(
        swarm, backend, session, request):
    """The neighbour with nothing left for ``resume`` to follow: ``kill -9`` of the supervisor,
    the pane's leader and its wrapper; the worker, which ignored the hang-up, finishes while no
    supervisor runs. ``resume`` recorded it ``lost (no_exit_record)`` and ran the finished work
    again (an adversary: 2 in 2, tmux and Zellij) — though in Zellij its pty relay had marked
    its code. Its end, as a followed one's: the relay's mark in Zellij (``succeeded``), in tmux
    nobody saw it — ``unknown (wrapper_lost)``, never run again by itself (SPEC §5.7). So too
    when the session was killed after the worker's end, before ``resume``: it was ``lost
    (multiplexer_lost)`` and ran again (an adversary, tmux 2 in 2) — the leader killed with no
    mark had hung up the worker's terminal already, and the session's end took nothing from it."""
    ledger = _worker_at_a_gate(swarm, trap="trap '' HUP; ", last="exit 0", retries=2)
    args, env = backend_args(backend, request)
    with Running(swarm, "s.toml", "--output", "quiet", *args, env=env) as r:
        assert r.run is not None
        leader, stage = _leader_and_wrapper(r.run, ledger)
        r.killed()
        killed_outright(leader)
        killed_outright(stage)
        (swarm.cwd / "go").touch()
        wait_until(lambda: ledger.read_text().split() == ["start", "done"], what="the worker's end")
        wait_until(lambda: run_processes(r.run.name) == [], what="nothing of the run left")
        if session == "killed":
            _lose_session(backend, request, r.run)
        assert swarm("resume", r.run.name, "--output", "quiet", env=env).code == (0 if backend == "real-zellij" else 1)
        assert run_processes(r.run.name) == []
    row = swarm.tasks()["a"]
    seen = ("succeeded", None, 0) if backend == "real-zellij" else ("unknown", "wrapper_lost", None)
    assert (row["status"], row["reason"], row["exit_code"], row["attempts"]) == (*seen, 1), row
    assert ledger.read_text().split() == ["start", "done"]
    assert swarm.tasks()["b"]["status"] == "succeeded"


def test_a_cancel_ends_the_worker_a_pane_s_killed_leader_and_wrapper_left(swarm, tmux):
    """The neighbour: the worker followed after its pane's leader and wrapper were killed is
    ended by a kill of ours as any is — the kill's outcome, not run again."""
    ledger = _worker_at_a_gate(swarm, trap="trap '' HUP; ", last="exit 0", retries=2)
    with Running(swarm, "s.toml", "--output", "quiet", "--backend", "tmux", "--ui", "live",
                 env=outside_env(tmux)) as r:
        assert r.run is not None
        leader, stage = _leader_and_wrapper(r.run, ledger)
        leader.kill()
        stage.kill()
        wait_until(lambda: _logged(r.run, "wrapper_lost"), what="the killed wrapper noticed")
        assert swarm("cancel", r.run.name, "a").code == 0
        assert r.proc.wait(timeout=60) == 1
        assert run_processes(r.run.name) == []
    row = swarm.tasks()["a"]
    assert (row["status"], row["reason"], row["attempts"]) == ("cancelled", "cancelled_by_user", 1), row
    assert ledger.read_text().split() == ["start"]


@pytest.mark.parametrize("backend,supervisor", [("tmux", "killed"), ("tmux", "alive"), ("real-zellij", "killed")])
def test_a_pane_s_worker_left_by_its_killed_leader_and_wrapper_is_followed_whatever_became_of_its_session(
        swarm, backend, supervisor, request):
    """The neighbour: the pane's leader and wrapper killed (the supervisor too, or not), then
    the whole tmux server, while the worker, which ignores the hang-up, runs on. A live
    supervisor that was following it went on following it; a ``resume`` found the session
    gone and took it for the session's loss — ``multiplexer_lost``: the worker ended, the task
    run again (an adversary, tmux and Zellij). Its leader was dead before the session could
    take anything from it (no hang-up mark): it is followed to its end, which nobody sees in
    tmux — ``unknown (wrapper_lost)``, run once; Zellij's pty relay sees it: ``succeeded``."""
    ledger = _worker_at_a_gate(swarm, trap="trap '' HUP; ", last="exit 0", retries=0)
    args, env = backend_args(backend, request)
    with Running(swarm, "s.toml", "--output", "quiet", *args, env=env) as r:
        assert r.run is not None
        leader, stage = _leader_and_wrapper(r.run, ledger)
        if supervisor == "killed":
            r.killed()
        killed_outright(leader)
        killed_outright(stage)
        if supervisor == "alive":
            wait_until(lambda: _logged(r.run, "wrapper_lost"), what="the killed wrapper noticed")
        _lose_session(backend, request, r.run)
        resumed = swarm.popen("resume", r.run.name, "--output", "quiet", env=env) if supervisor == "killed" else None
        want = ("unknown", "wrapper_lost") if backend == "tmux" else ("succeeded", None)
        try:
            if resumed is not None:
                wait_until(lambda: _logged(r.run, "wrapper_lost"), what="the worker followed")
            assert ledger.read_text().split() == ["start"]  # not ended, not run again
            (swarm.cwd / "go").touch()
            assert (resumed or r.proc).wait(timeout=60) == (1 if want[0] == "unknown" else 0)
        finally:
            if resumed is not None:
                resumed.kill()
        assert run_processes(r.run.name) == []
    row = swarm.tasks()["a"]
    assert (row["status"], row["reason"], row["attempts"]) == (*want, 1), row
    assert [h["status"] for h in row["history"]] == [want[0]], row
    assert ledger.read_text().split() == ["start", "done"]


# ----- 3. the kill ladder reaches every process of the generation ------------------------------


def _stubborn(marker: str, *, how: str) -> str:
    """Slot 1 runs a task whose child ignores SIGTERM (and SIGHUP), then a second task."""
    limit = {"timeout": 'timeout = "1s"\n', "idle": 'idle_timeout = "1s"\n'}.get(how, "")
    # the marker is the child shell's $0; it stays the parent of the sleep, which inherits
    # the ignored signals
    child = f"sh -c 'trap \\\"\\\" TERM HUP; sleep 47; :' {marker} & wait"
    return (f'[swarm]\njobs = 1\n[[task]]\nname = "stubborn"\ncmd = "{child}"\n{limit}'
            '[[task]]\nname = "second"\ncmd = "sleep 2"\n')


def _marked_alive(marker: str) -> list[int]:
    out = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if marker in (p.info["cmdline"] or []) and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p.pid)
        except psutil.NoSuchProcess:
            continue
    return out


def _end_everything(proc: subprocess.Popen, run: Path, marker: str) -> None:
    """Test hygiene: the supervisor, the run's processes and the marked ones it may have lost."""
    proc.kill()
    kill_run_processes(run.name)
    for pid in _marked_alive(marker):
        os.kill(pid, signal.SIGKILL)


def _second_started(run: Path) -> bool:
    return ("slot-1", "gen-2") in _started_gens(run)


def _check_ladder(swarm, proc, run: Path, marker: str, status: str, reason: str, code: int = 1) -> None:
    wait_until(lambda: _second_started(run), timeout=20, what="the second task in slot 1")
    # never more workers than slots: the first generation's tree is gone before the next starts
    assert _marked_alive(marker) == []
    assert proc.wait(timeout=60) == code, proc.stderr.read()
    rows = swarm.tasks()
    assert (rows["stubborn"]["status"], rows["stubborn"]["reason"]) == (status, reason)
    assert rows["second"]["status"] == "succeeded"
    assert "process_left_behind" not in json.dumps(swarm.summary()["warnings"])


@pytest.mark.parametrize("how,backend", [("timeout", "headless"), full("idle", "headless"), full("timeout", "tmux"),
                                         full("timeout", "zellij-0.45.0"), ("idle", "zellij-0.40.1")])
def test_time_limit_kills_a_term_ignoring_grandchild_before_the_slot_is_reused(swarm, how, backend, request):
    marker = f"zsw-ladder-{os.getpid()}-{how}-{backend}"
    swarm.write("s.toml", _stubborn(marker, how=how))
    args, env = backend_args(backend, request)
    proc = swarm.popen("run", "s.toml", "--output", "quiet", *args, env=env)
    run = _run_dir(swarm)
    try:
        _check_ladder(swarm, proc, run, marker, "timed_out", {"timeout": "timeout", "idle": "idle_timeout"}[how])
    finally:
        _end_everything(proc, run, marker)


def test_cancelled_task_with_term_ignoring_grandchild_is_ended_whole(swarm):
    marker = f"zsw-ladder-{os.getpid()}-cancel"
    swarm.write("s.toml", _stubborn(marker, how="cancel"))
    proc = swarm.popen("run", "s.toml", "--output", "quiet")
    run = _run_dir(swarm)
    try:
        wait_until(lambda: _marked_alive(marker), what="the stubborn child")
        assert swarm("cancel", run.name, "stubborn").code == 0
        _check_ladder(swarm, proc, run, marker, "cancelled", "cancelled_by_user")
    finally:
        _end_everything(proc, run, marker)


def test_closed_pane_with_term_and_hup_ignoring_grandchild_is_ended_whole(swarm, tmux):
    marker = f"zsw-ladder-{os.getpid()}-pane"
    swarm.write("s.toml", _stubborn(marker, how="pane"))
    proc = swarm.popen("run", "s.toml", "--backend", "tmux", "--ui", "live", "--output", "quiet",
                       env=outside_env(tmux))
    run = _run_dir(swarm)
    try:
        wait_until(lambda: _marked_alive(marker), what="the stubborn child")
        hb = json.loads((run / "slots/slot-1/gen-1/heartbeat.jsonl").read_text().splitlines()[0])
        tmux("kill-pane", "-t", hb["pane_id"])
        _check_ladder(swarm, proc, run, marker, "cancelled", "pane_closed")
    finally:
        _end_everything(proc, run, marker)


# ----- 4. any duration a user can write works --------------------------------------------------


def _long_durations(swarm, where: str) -> tuple[str, ...]:
    """Three tasks (one slow) with time limits far beyond what the selector can wait for
    (about 24.8 days); returns the extra flags."""
    head, task_keys, args = "", "", ()
    if where == "flag":
        args = ("--timeout", "25d")
    elif where == "idle-flag":
        args = ("--idle-timeout", "30d")
    elif where == "file":
        head = '[swarm]\ntimeout = "1000h"\n'
    else:
        task_keys = 'timeout = 1e300\n'
    swarm.write("d.toml", head + '[[task]]\nname = "slow"\ncmd = "sleep 1; echo slow >> ledger"\n' + task_keys
                + '[[task]]\nname = "quick"\ncmd = "echo quick >> ledger"\n' + task_keys
                + '[[task]]\nname = "later"\ncmd = "sleep 0.5; echo later >> ledger"\n' + task_keys)
    return args


@pytest.mark.parametrize("where", ["flag", full("idle-flag"), full("file"), "task"])
def test_very_long_durations_run(swarm, where):
    args = _long_durations(swarm, where)
    res = swarm("run", "d.toml", "-j", "2", "--output", "quiet", *args, timeout=60)
    assert res.code == 0, res.stderr
    assert sorted((swarm.cwd / "ledger").read_text().split()) == ["later", "quick", "slow"]


@pytest.mark.parametrize("where", [full("flag"), full("idle-flag"), "file", full("task")])
def test_very_long_durations_resume(swarm, where):
    args = _long_durations(swarm, where)
    # the supervisor dies with tasks still to dispatch; resume takes its settings
    with _interrupted(swarm, "d.toml", "-j", "1", *args) as run:
        res = swarm("resume", run.name, "--output", "quiet", timeout=60)
        assert res.code == 0, res.stderr
        assert sorted((swarm.cwd / "ledger").read_text().split()) == ["later", "quick", "slow"]
        assert swarm.summary()["state"] == "finished"


# ----- 12. state.json follows the workers ------------------------------------------------------


@pytest.mark.parametrize("backend", ["headless", full("tmux"), "zellij-0.44.3"])
def test_status_shows_a_running_worker_within_the_snapshot_interval(swarm, backend, request):
    swarm.write("s.txt", "sleep 30\n")
    args, env = backend_args(backend, request)
    proc = swarm.popen("run", "s.txt", "--output", "quiet", *args, env=env)
    run = _run_dir(swarm)
    try:
        said: list[str] = []

        def running_row():
            res = swarm("status", run.name, "--json")
            said[:] = [f"exit {res.code}: {res.stdout[-2000:]}{res.stderr[-2000:]}"]
            snap = json.loads(res.stdout) if res.code == 0 else None
            task = snap and snap["tasks"] and snap["tasks"][0]
            # (a reader before the first snapshot sees the rows file's rows and no slot yet)
            return (task and task["pid"] and task["started_at"] and snap["slots"]
                    and snap["slots"][0]["state"] == "running" and snap)

        # the deadline is wait_until's own: a loaded machine's first worker can take seconds
        # to start; once it has, the row shows it within the snapshot interval
        try:
            snap = wait_until(running_row, what="a running row in status --json")
        except AssertionError as e:
            raise AssertionError(f"{e}; status said {said}") from None
        assert snap["updated_at"] >= snap["tasks"][0]["started_at"]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 143
    finally:
        proc.kill()
        kill_run_processes(run.name)


# ----- 14. timers, inotify overflow, watches that cannot be added ------------------------------


def test_cancelled_timers_hold_nothing():
    clock = [0.0]
    timers = Timers(lambda: clock[0])
    fired = []
    handles = [timers.after(3600, lambda i=i: fired.append(i)) for i in range(10_000)]
    keep = timers.after(5, lambda: fired.append("kept"))
    for h in handles:
        timers.cancel(h)
    assert len(timers) == 1 and len(timers._heap) < 200  # the closures are gone, not just skipped
    assert timers.due_in() == 5
    clock[0] = 4000
    timers.run_due()
    assert fired == ["kept"] and keep.fn is None


def test_ended_generations_leave_no_timers(swarm):
    """A run of many tasks with a timeout ends with no timer of an ended generation left."""
    swarm.write("t.txt", "true\n" * 300)
    code = ("import sys; from zellij_swarm.engine import supervisor as s\n"
            "orig = s.Supervisor._finish\n"
            "def finish(self):\n"
            "    print('timers', len(self.timers), file=sys.stderr)\n"
            "    return orig(self)\n"
            "s.Supervisor._finish = finish\n"
            "from zellij_swarm.cli import main; main(sys.argv[1:])\n")
    p = subprocess.run([sys.executable, "-c", code, "run", "t.txt", "-j", "8",
                        "--timeout", "1h", "--output", "quiet"], cwd=swarm.cwd, env=clean_env(),
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    left = int(p.stderr.split("timers ", 1)[1].split()[0])
    assert left <= 1, p.stderr  # at most the launcher's watch; one per task (300) before


def test_inotify_queue_overflow_reports_every_watched_directory():
    dirs = {1: Path("/a"), 2: Path("/b")}
    event = struct.pack("iIII", 1, watch.IN_CLOSE_WRITE, 0, 8) + b"exit\0\0\0\0"
    overflow = struct.pack("iIII", -1, watch.IN_Q_OVERFLOW, 0, 0)
    assert watch.changes(event, dirs) == [watch.Change(Path("/a"), "exit")]
    assert sorted(c.dir for c in watch.changes(overflow, dirs)) == [Path("/a"), Path("/b")]


def _userns_available() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-Ur", "sh", "-c", "echo 1 > /proc/sys/user/max_inotify_watches"],
                           capture_output=True)
    return probe.returncode == 0


@pytest.mark.skipif(not _userns_available(), reason="no user namespace with its own inotify limits here")
@pytest.mark.parametrize("limit", [0, full(1)])
def test_no_inotify_watches_left_polls_instead_of_crashing(swarm, tmux, limit):
    """In a user namespace whose inotify watch limit is 0 (not even the inbox) or 1 (the
    inbox only), every other watch fails with ENOSPC: the run polls and finishes."""
    swarm.write("t.txt", "sleep 0.3; echo a\necho b\nexit 3\n")
    zsw = " ".join(swarm.cmd("run", "t.txt", "-j", "2", "--backend", "tmux", "--ui", "live", "--output", "quiet"))
    p = subprocess.run(["unshare", "-Ur", "sh", "-c",
                        f"echo {limit} > /proc/sys/user/max_inotify_watches && exec {zsw}"],
                       cwd=swarm.cwd, env=outside_env(tmux), capture_output=True, text=True, timeout=120,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 1, p.stderr
    assert "Traceback" not in p.stderr and "internal error" not in p.stderr
    summary = swarm.summary()
    assert summary["state"] == "finished"
    assert [t["status"] for t in summary["tasks"]] == ["succeeded", "succeeded", "failed"]
    assert "watch_failed" in {w["code"] for w in summary["warnings"]}


def test_an_adopted_worker_keeps_what_is_left_of_its_timeout(swarm):
    """A resumed run still ends a worker at its timeout, counted from the worker's start."""
    swarm.write("t.toml", '[[task]]\nname = "long"\ncmd = "sleep 60"\ntimeout = "3s"\n')
    with _interrupted(swarm, "t.toml") as run:
        started = time.monotonic()
        res = swarm("resume", run.name, "--output", "quiet", timeout=60)
        assert res.code == 1, res.stderr
        row = swarm.tasks()["long"]
        assert (row["status"], row["reason"]) == ("timed_out", "timeout")
        assert time.monotonic() - started < 30  # not the 60 s the worker would have slept
        assert run_processes(run.name) == []


# ----- 14. cancel is answered, also while the run ends -----------------------------------------


def test_cancel_says_what_it_cancelled(swarm):
    swarm.write("c.txt", "sleep 30\necho later\n")
    proc = swarm.popen("run", "c.txt", "-j", "1", "--output", "quiet")
    run = _run_dir(swarm)
    try:
        wait_until(lambda: _started(run) == 1, what="the first worker")
        res = swarm("cancel", run.name, "task-2")
        assert res.code == 0 and "cancelled in run" in res.stderr and "task-2" in res.stderr, res.stderr
        res = swarm("cancel", run.name, "task-2")
        assert res.code == 1 and "nothing to cancel: task-2 already ended" in res.stderr, res.stderr
        assert swarm("cancel", run.name, "t1").code == 0  # a task id works as well as its name
        assert proc.wait(timeout=30) == 1
        assert {t["status"] for t in swarm.tasks().values()} == {"cancelled"}
    finally:
        proc.kill()
        kill_run_processes(run.name)


def test_cancel_during_the_end_of_run_sweep_is_answered_not_dropped(swarm):
    # The worker leaves a daemon that ignores SIGTERM: the end-of-run sweep waits the kill
    # grace (long here, so the test cannot miss the window) before its SIGKILL, and a cancel
    # sent meanwhile must get an answer.
    marker = f"zsw-sweep-{os.getpid()}"
    daemon = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
              "open(\"ready\", \"w\"); time.sleep(60)")
    # one process, and the task ends only once it ignores SIGTERM
    swarm.write("d.txt", f"setsid {sys.executable} -c '{daemon}' {marker} & until [ -e ready ]; do sleep 0.01; done\n")
    proc = swarm.popen("run", "d.txt", "--output", "quiet", "--kill-grace", "45s")
    run = _run_dir(swarm)
    try:
        events = run / "events.jsonl"
        wait_until(lambda: events.exists() and '"process_left_behind"' in events.read_text(), timeout=20,
                   what="the end-of-run sweep")
        assert _marked_alive(marker), "the daemon ignores SIGTERM: alive until the grace ends"
        cancel = swarm.popen("cancel", run.name)
        try:
            wait_until(lambda: list((run / "inbox").glob("*.json")) or cancel.poll() is not None,
                       what="the cancel message in the inbox")
            assert proc.poll() is None  # still in the sweep's grace
            for pid in _marked_alive(marker):
                os.kill(pid, signal.SIGKILL)  # the sweep sees it gone and the run ends
            assert cancel.wait(timeout=30) == 1
            err = cancel.stderr.read()
            assert "already ended" in err and "nothing" in err, err
        finally:
            cancel.kill()
        assert proc.wait(timeout=30) == 0
        assert swarm.summary()["state"] == "finished"
        assert not list((run / "inbox").glob("*.json"))  # nothing left unread
        assert _marked_alive(marker) == []
    finally:
        _end_everything(proc, run, marker)


# ----- 13. the progress line counts what was added ---------------------------------------------


def test_progress_line_counts_tasks_added_while_running(swarm):
    import pty
    import re
    import threading

    # the first task runs until the test has added both tasks: a gate, not a guess at timing
    swarm.write("p.txt", f"{GATE}\ntrue\n")
    master, slave = pty.openpty()
    proc = subprocess.Popen(swarm.cmd("run", "p.txt", "-j", "1"), cwd=swarm.cwd, env=clean_env(),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    chunks: list[bytes] = []

    def read() -> None:
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    run = _run_dir(swarm)
    try:
        wait_until(lambda: _started(run) == 1, what="the first worker")
        for name in ("extra-1", "extra-2"):
            assert swarm("add", run.name, "--name", name, "--", "true").code == 0
        wait_until(lambda: re.search(rb"\d+/4 done", b"".join(chunks)), what="the progress line counting both")
        swarm.open_gate()
        assert proc.wait(timeout=60) == 0
        reader.join(timeout=10)
        lines = [(int(d), int(t)) for d, t in re.findall(rb"(-?\d+)/(\d+) done", b"".join(chunks))]
        assert lines, b"".join(chunks)
        assert all(0 <= done <= total for done, total in lines), lines
        assert max(total for _, total in lines) == 4, lines
    finally:
        proc.kill()
        os.close(master)
        kill_run_processes(run.name)


def test_when_the_multiplexer_dies_a_hangup_ignoring_worker_is_ended_too(swarm, tmux):
    """The session is gone for every pane: the worker that ignores SIGHUP (and SIGTERM) does
    not run on unseen holding its slot — it goes through the ladder and re-runs headless."""
    swarm.write("m.toml", '[swarm]\njobs = 2\n[[task]]\nname = "a"\ncmd = "sleep 3; echo a >> ledger"\n'
                          '[[task]]\nname = "b"\ncmd = "trap \\"\\" HUP TERM INT; sleep 4; echo b >> ledger"\n')
    proc = swarm.popen("run", "m.toml", "--backend", "tmux", "--ui", "live", "--output", "quiet", env=outside_env(tmux))
    run = _run_dir(swarm)
    try:
        wait_until(lambda: _started(run) == 2, what="both panes")
        tmux("kill-server")
        assert proc.wait(timeout=60) == 0, proc.stderr.read()
        assert sorted((swarm.cwd / "ledger").read_text().split()) == ["a", "b"]
        rows = swarm.tasks()
        for name in ("a", "b"):
            first, last = rows[name]["history"][0], rows[name]["history"][-1]
            assert (first["status"], first["reason"]) == ("lost", "multiplexer_lost"), rows[name]
            assert last["status"] == "succeeded" and last["pane_id"] is None
        assert run_processes(run.name) == []
    finally:
        proc.kill()
        kill_run_processes(run.name)


def test_a_stopped_launcher_is_replaced_and_every_task_runs_once(swarm):
    names = [f"t{i}" for i in range(10)]
    swarm.write("l.txt", "".join(f"sleep 0.3; echo {n} >> ledger\n" for n in names))
    proc = swarm.popen("run", "l.txt", "-j", "3", "--output", "quiet")
    run = _run_dir(swarm)
    launcher = wait_until(lambda: launcher_of(proc.pid), what="the launcher")
    try:
        wait_until(lambda: _started(run) >= 2, what="workers running")
        launcher.suspend()  # SIGSTOP: alive, silent
        assert proc.wait(timeout=60) == 0, proc.stderr.read()
        assert sorted((swarm.cwd / "ledger").read_text().split()) == sorted(names)
        [w] = swarm.summary()["warnings"]
        assert w["code"] == "launcher_lost" and "did not answer" in w["message"], w
        assert run_processes(run.name) == []
    finally:
        proc.kill()
        if launcher.is_running():
            launcher.kill()  # SIGKILL ends a stopped process too
        kill_run_processes(run.name)


@pytest.mark.parametrize("stop", [full(signal.SIGTERM), signal.SIGINT])
def test_signals_work_while_the_launcher_is_stopped(swarm, stop):
    swarm.write("s.txt", "sleep 30\nsleep 30\n")
    proc = swarm.popen("run", "s.txt", "-j", "2", "--output", "quiet")
    run = _run_dir(swarm)
    launcher = None
    try:
        wait_until(lambda: _started(run) == 2, what="both workers")
        launcher = wait_until(lambda: launcher_of(proc.pid), what="the launcher")
        launcher.suspend()
        proc.send_signal(stop)
        assert proc.wait(timeout=30) == {signal.SIGTERM: 143, signal.SIGINT: 130}[stop]
        assert {t["status"] for t in swarm.tasks().values()} == {"cancelled"}
        assert run_processes(run.name) == []
    finally:
        proc.kill()
        if launcher is not None and launcher.is_running():
            launcher.kill()
        kill_run_processes(run.name)


def test_an_adopted_worker_keeps_its_silence_toward_the_idle_timeout(swarm):
    """The silence before a resume counts: a worker silent for longer than its idle_timeout
    when it is adopted is ended at once, not idle_timeout later."""
    swarm.write("t.toml", '[[task]]\nname = "quiet"\ncmd = "sleep 60"\nidle_timeout = "4s"\n')
    with _interrupted(swarm, "t.toml") as run:
        hb = run / "slots/slot-1/gen-1/heartbeat.jsonl"
        wait_until(lambda: time.time() - hb.stat().st_mtime > 5, timeout=15, what="5 s of silence")
        res = swarm("resume", run.name, "--output", "quiet", timeout=60)
        assert res.code == 1, res.stderr
        assert (swarm.tasks()["quiet"]["status"], swarm.tasks()["quiet"]["reason"]) == ("timed_out", "idle_timeout")
        [idle] = [e for e in map(json.loads, (run / "events.jsonl").read_text().splitlines())
                  if e["event"] == "idle_timeout"]
        assert idle["silence_s"] > 5  # the silence before the resume counted


def test_sigterm_ends_the_run_soon_while_the_tmux_server_is_stopped(swarm, tmux):
    """A stopped tmux server answers nothing: after the first call that times out, no other
    call waits on it, so SIGTERM ends the run after one timeout, not one per pane."""
    swarm.write("s.txt", "sleep 30\nsleep 30\nsleep 30\n")
    proc = swarm.popen("run", "s.txt", "-j", "3", "--backend", "tmux", "--ui", "live", "--output", "quiet",
                       env=outside_env(tmux))
    run = _run_dir(swarm)
    servers = []
    try:
        wait_until(lambda: _started(run) == 3, what="three panes")
        servers = [psutil.Process(pid) for pid in tmux.server_pids()]
        for server in servers:
            server.suspend()
        proc.send_signal(signal.SIGTERM)
        # one call timeout (10 s) and the kill ladder; every pane costing one would be 30 s more
        assert proc.wait(timeout=25) == 143
        assert {t["status"] for t in swarm.tasks().values()} == {"cancelled"}
    finally:
        for server in servers:
            server.resume()
        proc.kill()
        kill_run_processes(run.name)


@pytest.mark.parametrize("zellij", ["zellij-0.45.0", "real-zellij"])
def test_sigterm_while_the_zellij_server_is_stopped_cancels_every_task_and_waits_once(swarm, zellij, request):
    """The Zellij neighbour of the tmux case above. A stopped server answers nothing, and its
    process runs (so it is never given up on as gone): after the first call that got no
    answer, no other call to the session waits on it — closing three panes took three
    timeouts. And SIGTERM comes just after the panes' launch heartbeats, where a pane's
    relay may not have started its worker yet: that worker's death by the cancel's SIGTERM
    was recorded as its own (``failed``, 143) in four runs of six."""
    swarm.write("s.txt", "sleep 30\nsleep 30\nsleep 30\n")
    z = request.getfixturevalue("rz" if zellij == "real-zellij" else "fz")
    env = z.env(**FAST) if zellij == "real-zellij" else z.env("0.45.0", **FAST)
    proc = swarm.popen("run", "s.txt", "-j", "3", "--backend", "zellij", "--ui", "live", "--output", "quiet", env=env)
    run = _run_dir(swarm)
    servers = []
    try:
        wait_until(lambda: _started(run) == 3, what="three panes")
        servers = [p for p in z.processes() if "--server" in command_line(p)]
        for server in servers:
            server.suspend()
        proc.send_signal(signal.SIGTERM)
        # the real one then also waits on `ls` (session_alive) at the run's end: 30 s in all
        assert proc.wait(timeout=60) == 143
        rows = swarm.tasks().values()
        assert {(t["status"], t["reason"]) for t in rows} == {("cancelled", "cancelled_by_user")}, rows
        timeouts = [w for w in swarm.summary()["warnings"] if w["code"] == "pane_call_timeout"]
        assert len(timeouts) <= 1, timeouts  # said once, waited once
    finally:
        for server in servers:
            server.resume()
        proc.kill()
        kill_run_processes(run.name)
