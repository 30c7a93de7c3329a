"""``logs -f`` follows an attempt until it ends — not until the supervisor does (issue 22,
item 13). The wrapper records the attempt's end without a supervisor, so while it lives the
following goes on; when the supervisor is gone and the attempt can no longer end (its wrapper
is gone too) ``logs -f`` says the run is interrupted and exits 1."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
from collections.abc import Iterator

import psutil
from swarmtest import Running, clean_env, launcher_of, run_processes, wait_until

WORKER = 'echo one; until [ -e go ]; do sleep 0.02; done; echo two'
# the first gate opens once the supervisor is gone; the second once ``logs`` has shown "two"
TWO_GATES = WORKER + '; until [ -e go2 ]; do sleep 0.02; done; echo three'


def _kill_everything(r: Running) -> None:
    """SIGKILL the supervisor and its launcher (which would record the end of a killed
    wrapper's worker), the generation's wrapper (first: one that outlived its worker even for a
    moment would record the worker's end), then every process of the run."""
    from zellij_swarm.records.rundir import RunPaths
    from zellij_swarm.worker import procs

    launcher = wait_until(lambda: launcher_of(r.proc.pid), what="the launcher")
    r.killed()
    launcher.kill()
    run = r.run
    wrapper = procs.wrapper_process(RunPaths(run).gen(1, 1))
    assert wrapper is not None
    os.kill(wrapper, signal.SIGKILL)
    for p in procs.marked(procs.run_markers(run.name)):
        with contextlib.suppress(psutil.NoSuchProcess):  # it may end between the scan and the kill
            p.kill()
    wait_until(lambda: run_processes(run.name) == [], what="the run's processes gone")


def _readable(pipe) -> bool:
    return bool(select.select([pipe], [], [], 0)[0])


def _output(run) -> bytes:
    path = run / "slots/slot-1/gen-1/output.log"
    return path.read_bytes() if path.exists() else b""


@contextlib.contextmanager
def following(swarm, toml: str, task: str, *, shown: str) -> Iterator[tuple[Running, subprocess.Popen[bytes]]]:
    """A headless run of ``toml`` whose first worker has printed its first line, and
    ``logs -f`` of ``task`` once it has shown something on ``shown`` (stdout or stderr)."""
    swarm.write("t.toml", toml)
    with Running(swarm, "t.toml", "--backend", "headless", "--output", "quiet", settle=0) as r:
        wait_until(lambda: b"one" in _output(r.run), what="the worker's first line")
        logs = subprocess.Popen(swarm.cmd("logs", r.run.name, task, "-f"), cwd=swarm.cwd, env=clean_env(),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            wait_until(lambda: _readable(getattr(logs, shown)), what=f"logs showed something on {shown}")
            yield r, logs
        finally:
            logs.kill()
            logs.wait()


def test_following_outlives_the_supervisor_while_the_worker_writes(swarm):
    with following(swarm, f'[[task]]\nname = "w"\ncmd = "{TWO_GATES}"\n', "w", shown="stdout") as (r, logs):
        r.killed()
        (swarm.cwd / "go").touch()  # the worker goes on without its supervisor
        shown = logs.stdout.read(len(b"one\ntwo\n"))
        (swarm.cwd / "go2").touch()
        out, err = logs.communicate(timeout=60)
    assert logs.returncode == 0 and shown + out == b"one\ntwo\nthree\n", (shown, out, err)


def test_following_an_attempt_that_can_no_longer_end_says_the_run_is_interrupted(swarm):
    with following(swarm, f'[[task]]\nname = "w"\ncmd = "{WORKER}"\n', "w", shown="stdout") as (r, logs):
        _kill_everything(r)  # the wrapper and its worker too: no exit is ever written
        out, err = logs.communicate(timeout=60)
    assert logs.returncode == 1 and out == b"one\n", (out, err)
    lines = err.decode().splitlines()
    assert len(lines) == 1 and "interrupted" in lines[0] and f"zellij-swarm resume {r.run.name}" in lines[0], err


def test_following_a_pending_task_of_a_run_that_was_interrupted(swarm):
    toml = f'[swarm]\njobs = 1\n[[task]]\nname = "w"\ncmd = "{WORKER}"\n[[task]]\nname = "later"\ncmd = "echo later"\n'
    with following(swarm, toml, "later", shown="stderr") as (r, logs):
        _kill_everything(r)
        out, err = logs.communicate(timeout=60)
    assert logs.returncode == 1 and out == b"", (out, err)
    lines = err.decode().splitlines()
    assert lines[0].endswith("is pending; waiting for it to start") and len(lines) == 2, err
    assert "interrupted" in lines[1] and f"zellij-swarm resume {r.run.name}" in lines[1], err


def test_an_attempt_whose_wrapper_wrote_its_exit_while_the_status_was_read_is_over(tmp_path, monkeypatch):
    """The exit is looked for first, then the run's status is read (slow on a big run), then
    the wrapper: one that wrote its exit and ended in between was said to be cut off (`logs -f`
    printed every line, then "interrupted" and exit 1). Its exit is looked for again."""
    from zellij_swarm.commands import logs
    from zellij_swarm.records.rundir import RunPaths
    from zellij_swarm.records.states import RunState

    run = RunPaths(tmp_path / "run")
    gen = run.gen(1, 1)
    gen.dir.mkdir(parents=True)

    def status_while_the_wrapper_ends(*_args, **_kwargs):
        gen.exit_sidecar.write_text("0\n")  # meanwhile the wrapper records its exit and is gone
        return {"state": RunState.INTERRUPTED, "tasks": []}

    monkeypatch.setattr(logs.views, "load_status", status_while_the_wrapper_ends)
    monkeypatch.setattr(logs.procs, "wrapper_process", lambda _gen: None)
    assert logs._AttemptEnd(run, gen, "t1").look() == "over"
