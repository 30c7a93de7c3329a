"""``zellij-swarm submit FILE [sbatch options]``: a swarm that survives logout (SPEC §11.2).

The supervisor itself runs as a Slurm batch job (``sbatch``), headless, its workers Slurm
steps of that job: the job is the swarm's allocation, sized as ``--slurm-alloc`` sizes one
(min(jobs, tasks) tasks with the table's resources; sbatch options given here win), which the
run's end leaves to Slurm to end with the batch script. Tasks ``add``ed later share it.

The run's id is chosen here, when the job is submitted, and handed to the job: the login node
can name the run at once, and a job that Slurm requeues (a node failure, a preemption,
``scontrol requeue``) finds its own run and resumes it instead of starting over: the steps of
its earlier run ended with it (Slurm ends a job's steps when it requeues it), and the tasks
they ran are ``lost (executor_lost)`` and run again without using an attempt. From the login
node, on the shared state directory, ``status``, ``logs``, ``proof`` and ``report`` work as for
any run (its inbox is polled: inotify does not see what another host writes); whether it is
still supervised is judged by the supervisor's liveness stamp (``runlock``), as the kernel lock
cannot be seen across hosts.

What runs in the job is ``zellij-swarm submit --in-job RUN FILE``. The job's own ``SLURM_*``
variables are kept from the supervisor's steps (``SLURM_CONF`` excepted): the executor names
the job itself (``srun --jobid=JOB --exact``), and ``srun`` would read the job's sizes as its own
options. The job's
output (the run's group output) goes to ``<state-dir>/batch/<run-id>.out``.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from zellij_swarm import exc, external
from zellij_swarm.config import settings, swarmfile
from zellij_swarm.config import slurm as slurm_config
from zellij_swarm.config import state_dir as state_dir_
from zellij_swarm.engine import remote
from zellij_swarm.engine.supervisor import new_run_id
from zellij_swarm.records import inbox, rundir
from zellij_swarm.worker import slurm_nodes
from zellij_swarm.worker.slurm import CALL_TIMEOUT, Slurm

SUBMITTED = "submit"  # the source of the settings submit sets (run.json records it)
KEPT = frozenset({"SLURM_CONF"})  # the SLURM_* variables the job's steps get from it


def _load(file: str, state_dir: Path, env: Mapping[str, str]) -> tuple[swarmfile.SwarmInput, settings.Resolved]:
    """The swarm and its settings, as the job will run them: headless, each task a Slurm
    step, in ``state_dir`` (the one ``submit`` was given or found) unless the file names one."""
    source = swarmfile.load(file)
    if not source.tasks:
        raise exc.UsageError(f"{source.source}: no tasks to run")
    resolved = settings.resolve({"backend": "headless", "executor": "slurm"}, env, source.file_settings,
                                flag_source=SUBMITTED)
    if resolved.sources["state_dir"] == "default":
        resolved = settings.resolve({"backend": "headless", "executor": "slurm", "state_dir": str(state_dir)}, env,
                                    source.file_settings, flag_source=SUBMITTED)
    return source, resolved


def submit(file: str, sbatch_options: list[str], *, state_dir: Path, env: Mapping[str, str]) -> str:
    """Check the swarm as ``run`` would (its file, its settings, what it asks of the cluster),
    then submit the job; returns the line to print. ``exc.UsageError`` (exit 2) before
    anything is submitted."""
    path = Path(file).resolve()
    source, resolved = _load(str(path), state_dir, env)
    cluster = Slurm(env)
    remote.preflight(cluster, resolved.slurm, source.tasks)
    sized_by_user = any(o.startswith(("--ntasks", "-n")) for o in sbatch_options)  # (sbatch takes the last)
    slurm_nodes.preflight(cluster, resolved.slurm, source.tasks,
                          allocation=None if sized_by_user else min(resolved.jobs, len(source.tasks)))
    run_id = new_run_id(time.time())
    where = Path(resolved.state_dir).absolute()  # the job starts in --chdir, but says where it is by path
    rundir.prepare_state_dir(where)
    batch = where / "batch"
    rundir.make_private_dir(batch)
    script = batch / f"{run_id}.sh"
    argv = [sys.executable, "-m", "zellij_swarm", "submit", "--in-job", run_id, "--state-dir", str(where), str(path)]
    rundir.write_atomic(script, f"#!/bin/sh\nexec {shlex.join(argv)}\n", mode=0o700)
    # ours first, the user's after: sbatch takes the last of an option given twice
    # the job is the swarm's allocation: as many tasks at once as may run, each with the table's
    # resources (as --slurm-alloc's salloc); the supervisor is its batch step
    size = [f"--ntasks={min(resolved.jobs, len(source.tasks))}", *slurm_config.allocation_options(resolved.slurm)]
    res = external.run(["sbatch", "--parsable", f"--job-name=zsw.{run_id}.supervisor", f"--output={batch}/{run_id}.out",
                    f"--chdir={os.getcwd()}", "--requeue", *size, *sbatch_options, str(script)],
                   timeout=CALL_TIMEOUT, env=env, check=False, faults=external.EXECUTOR)
    job = res.stdout.strip().split(";")[0]
    if res.returncode != 0 or not job.isdigit():
        script.unlink(missing_ok=True)
        # what it refused, not only its closing "Try sbatch --help" (an unknown option comes before it)
        lines = [line.strip() for line in res.stderr.splitlines() if line.strip() and "--help" not in line]
        said = "; ".join(lines) or (res.stderr.strip().splitlines() or [f"exit {res.returncode}"])[-1]
        raise exc.UsageError(f"submit: sbatch did not take the job: {said}")
    follow = state_dir_.command(where, "status", run_id)
    return f"zellij-swarm: run {run_id} submitted as Slurm job {job}; follow it with `{follow}` " \
           f"(its output: {batch}/{run_id}.out)"


def in_job(run_id: str, file: str, *, state_dir: Path, env: Mapping[str, str]) -> int:
    """The batch job's part: the run under its given id, or — the job was requeued, and its
    run exists — that run resumed. Returns the run's exit code."""
    from zellij_swarm.commands.run import execute, resume

    source, resolved = _load(file, state_dir, env)
    run = rundir.RunPaths(rundir.runs_root(Path(resolved.state_dir)) / run_id)
    if rundir.has_record(run.summary):
        print(f"zellij-swarm: run {run_id} has finished: nothing to do", file=sys.stderr)
        return 0
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, _: _on_signal(run, env, signum))
    if rundir.has_record(run.run_json):
        print(f"zellij-swarm: job {env.get('SLURM_JOB_ID')} runs again (restart {env.get('SLURM_RESTART_COUNT', '?')}):"
              f" resuming run {run_id}", file=sys.stderr)
        return resume(run, output=None, handle_signals=False).exit_code
    steps_env = {name: value for name, value in env.items() if not name.startswith("SLURM_") or name in KEPT}
    return execute(source.tasks, resolved, name=source.name, source=source.source, env=steps_env,
                   groups=source.groups, run_id=run_id, slurm_job=env.get("SLURM_JOB_ID"),
                   handle_signals=False).exit_code


def _on_signal(run: rundir.RunPaths, env: Mapping[str, str], signum: int) -> None:
    """SIGTERM in the job: Slurm ends it (``scancel`` of the job, its time limit) — the run is
    cancelled, through its inbox, as ``cancel RUN`` does — or requeues it: then the run stays
    as it is, interrupted, for the job's next start to resume (leaving at once, as a kill
    would: what is recorded is recorded; the workers' ``srun``s go with the job)."""
    if _requeued(env):
        os._exit(128 + signum)
    if not rundir.has_record(run.summary):
        inbox.send(run, "cancel")


def _requeued(env: Mapping[str, str]) -> bool:
    """Whether Slurm is requeueing this job: it counts the restart before it signals the job
    (``Restarts`` above the ``SLURM_RESTART_COUNT`` this run of it started with). When Slurm
    cannot say, the run is left resumable: that loses nothing."""
    try:
        res = external.run(["scontrol", "--oneliner", "show", "job", env.get("SLURM_JOB_ID", "")], timeout=CALL_TIMEOUT,
                       env=env, check=False, faults=external.EXECUTOR)
    except exc.BackendError:
        return True
    m = re.search(r"\bRestarts=(\d+)", res.stdout)
    return m is None or int(m.group(1)) > int(env.get("SLURM_RESTART_COUNT") or 0)
