"""``zellij-swarm submit`` against the real local cluster (issue 23 §7): the supervisor as a
batch job, under the run id printed when it was submitted, followed from here; a job Slurm
requeues resumes its own run — nothing runs twice — and nothing of the run is left in the queue.
(The liveness stamp another host judges the run by: tests/test_liveness_stamp.py.)"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from swarmtest import GATE, Swarm, clean_env, wait_until


def queue(env: dict[str, str]) -> list[str]:
    out = subprocess.run(["squeue", "--noheader", "--format=%i %j %T"], env=env, capture_output=True, text=True,
                         timeout=30).stdout
    return [line for line in out.splitlines() if line.strip()]


def of_run(env: dict[str, str], run_id: str, job: str) -> list[str]:
    """What Slurm still lists of one run: its batch job and its steps (a test before this one
    may have left its own ending jobs: a step that ended while its controller was stopped
    stays COMPLETING a minute)."""
    return [q for q in queue(env) if q.split()[0] == job or f"zsw.{run_id}." in q]


def submitted(swarm: Swarm, env: dict[str, str], *args: str) -> tuple[str, str, Path]:
    """Submit; the job id, the run id and the run's directory (not there until the job runs)."""
    res = swarm("submit", *args, env=env)
    assert res.code == 0, res.stderr
    m = re.search(r"run (\S+) submitted as Slurm job (\d+)", res.stdout)
    assert m is not None, res.stdout
    return m[2], m[1], swarm.cwd / ".zellij-swarm" / "runs" / m[1]


def job_state(env: dict[str, str], job: str) -> tuple[str | None, int]:
    """A job's state and how many times Slurm has started it again (None, 0: Slurm did not
    answer, or does not know it)."""
    out = subprocess.run(["scontrol", "--oneliner", "show", "job", job], env=env, capture_output=True, text=True,
                         timeout=30).stdout
    state, restarts = re.search(r"\bJobState=(\S+)", out), re.search(r"\bRestarts=(\d+)", out)
    return (state[1] if state else None), (int(restarts[1]) if restarts else 0)


def ended(env: dict[str, str], job: str, run_dir: Path) -> None:
    # (a deadline, not a wait: a requeued job's resume, its steps started again by srun, once
    # took past 60 s on a CI machine whose host took a third of its CPU)
    wait_until(lambda: (run_dir / "summary.json").exists(), timeout=150, what="the run's summary")
    wait_until(lambda: not [q for q in queue(env) if q.split()[0] == job], timeout=60, what="the job's end")


def test_a_submitted_swarm_runs_in_a_batch_job_under_the_id_it_was_given(swarm: Swarm,
                                                                         cluster: dict[str, str]) -> None:
    env = clean_env(**cluster)
    swarm.write("s.toml", '[swarm]\njobs = 3\n[[task]]\nname = "ok"\ncmd = "echo job=$SLURM_JOB_ID"\n'
                          '[[task]]\nname = "three"\ncmd = "exit 3"\n')
    before = queue(env)
    res = swarm("submit", "s.toml", "--time=5", env=clean_env(ZELLIJ_SWARM_SLURM_CPUS="64", **cluster))
    assert res.code == 2 and "cpus=64" in res.stderr, res.stderr
    assert not set(queue(env)) - set(before), "checked before sbatch"
    # an option sbatch refuses: its word of which, not only its "Try sbatch --help"
    refused = swarm("submit", "s.toml", "--no-such-sbatch-option", env=env)
    assert refused.code == 2 and "--no-such-sbatch-option" in refused.stderr, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    job, run_id, run_dir = submitted(swarm, env, "s.toml", "--time=5")
    ended(env, job, run_dir)
    status = json.loads(swarm("status", run_id, "--json", env=env).stdout)
    assert status["state"] == "finished"
    assert {t["name"]: t["status"] for t in status["tasks"]} == {"ok": "succeeded", "three": "failed"}
    # a step of the batch job itself: the job is the swarm's allocation, asked with its size
    assert swarm("logs", run_id, "ok").stdout.strip() == f"job={job}"
    out = (swarm.cwd / ".zellij-swarm" / "batch" / f"{run_id}.out").read_text()
    assert "CANCELLED" not in out, out  # the run never cancels its own job: it ends with its script
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["settings"]["executor"] == {"value": "slurm", "source": "submit"}
    assert not (run_dir / "alive.json").exists() and of_run(env, run_id, job) == []


def test_a_requeued_job_resumes_its_own_run_and_runs_nothing_twice(swarm: Swarm, cluster: dict[str, str]) -> None:
    env = clean_env(**cluster)
    # the second wave waits at a gate: it is running, whatever the machine's load, when the job
    # is requeued (with a sleep, a loaded CI machine requeued it after every task had ended)
    swarm.write("r.toml", "[swarm]\njobs = 3\n" + "".join(
        f'[[task]]\nname = "w{i}"\ncmd = \'echo w{i} >> started; {"sleep 0.2" if i < 3 else GATE}; '
        f'echo w{i} >> ledger\'\n' for i in range(6)))
    job, run_id, run_dir = submitted(swarm, env, "r.toml")
    ledger, started = swarm.cwd / "ledger", swarm.cwd / "started"
    wait_until(lambda: started.exists() and len(started.read_text().split()) >= 4, timeout=60,
               what="a task of the second wave running")
    subprocess.run(["scontrol", "requeue", job], env=env, check=True, timeout=30)

    seen: list[tuple[str | None, int]] = []

    def running_again() -> bool:
        """Whether Slurm runs the job's second start: read from ``scontrol show job``, its
        state and ``Restarts``, after it was seen pending. (A look at ``squeue`` that did not
        say PENDING was taken for the start — a failed call prints nothing — and a CI run then
        waited past its deadline for a job that never ran again.) While it pends, its start
        is asked for at once: Slurm holds a requeued job back (its ``BeginTime``, set after
        it shows PENDING, over an earlier ``StartTime=now``)."""
        state, restarts = job_state(env, job)
        pended = any(was == "PENDING" for was, _ in seen)
        seen.append((state, restarts))
        if state == "PENDING":
            # not checked: it may have started since the look (Slurm then refuses the update)
            subprocess.run(["scontrol", "update", f"jobid={job}", "StartTime=now"], env=env, capture_output=True,
                           timeout=30)
            return False
        if not pended or state in (None, "REQUEUED") or restarts < 1:
            return False  # still being requeued, or no answer
        # once it pended, any state but these is an end without a second run: said now
        assert state in ("CONFIGURING", "RUNNING", "COMPLETING", "COMPLETED"), f"the requeued job: {seen}"
        return True

    try:
        wait_until(running_again, timeout=90, interval=1.0, what="the requeued job started again")
    except AssertionError as late:
        raise AssertionError(f"{late}; its states and restarts as seen: {seen}") from None
    swarm.open_gate()
    ended(env, job, run_dir)
    out = (swarm.cwd / ".zellij-swarm" / "batch" / f"{run_id}.out").read_text()
    assert f"resuming run {run_id}" in out, out
    done = ledger.read_text().split()
    assert len(done) == len(set(done)), done  # nothing ran twice
    rows = {t["name"]: (t["status"], t.get("reason")) for t in json.loads(
        swarm("status", run_id, "--json", env=env).stdout)["tasks"]}
    # the tasks running when Slurm requeued the job went with it: lost (executor_lost), and run
    # again without using an attempt (retries 0)
    assert sorted(done) == [f"w{i}" for i in range(6)], done
    assert all(status == "succeeded" for status, _ in rows.values()), rows
    history = {t["name"]: [(a["status"], a.get("reason")) for a in t["history"]] for t in json.loads(
        swarm("status", run_id, "--json", env=env).stdout)["tasks"]}
    requeued = {name for name, h in history.items() if len(h) > 1}
    assert requeued and all(history[name] == [("lost", "executor_lost"), ("succeeded", None)]
                            for name in requeued), history
    assert [p.name for p in (swarm.cwd / ".zellij-swarm" / "runs").iterdir()] == [run_id]
    assert of_run(env, run_id, job) == []


def test_a_submitted_job_cancelled_by_scancel_ends_its_tasks_cancelled_with_no_lost_attempt(
        swarm: Swarm, cluster: dict[str, str]) -> None:
    """``scancel`` of a submitted swarm's job: Slurm ends its steps and signals the
    supervisor at once. The steps it ended were read first as lost with the job
    (``executor_lost``, as for a requeue), then the run's cancel came: the tasks ended
    ``cancelled``, but each showed a ``lost`` attempt, no attempt used and a warning that its
    launcher was lost. The job was cancelled, and so was the work in it: nothing else."""
    env = clean_env(**cluster)
    swarm.write("c.toml", "[swarm]\njobs = 2\n" + "".join(
        f'[[task]]\nname = "c{i}"\ncmd = \'echo c{i} >> started; {GATE}; echo c{i} >> ledger\'\n' for i in range(3)))
    job, run_id, run_dir = submitted(swarm, env, "c.toml")
    started = swarm.cwd / "started"
    wait_until(lambda: started.exists() and len(started.read_text().split()) == 2, timeout=60,
               what="two tasks running")
    subprocess.run(["scancel", job], env=env, check=True, timeout=30)
    ended(env, job, run_dir)
    tasks = {t["name"]: t for t in json.loads(swarm("status", run_id, "--json", env=env).stdout)["tasks"]}
    ran = set(started.read_text().split())
    assert not (swarm.cwd / "ledger").exists()
    for name, t in tasks.items():
        history = [(a["status"], a.get("reason")) for a in t["history"]]
        assert t["status"] == "cancelled", (name, t)
        if name in ran:
            assert t["attempts"] == 1 and [s for s, _ in history] == ["cancelled"], (name, history)
        else:
            assert t["attempts"] == 0 and history == [], (name, history)
    warnings = json.loads(swarm("status", run_id, "--json", env=env).stdout)["warnings"]
    assert not [w for w in warnings if w.get("code") in ("launcher_lost", "executor_lost")], warnings
    assert of_run(env, run_id, job) == []
