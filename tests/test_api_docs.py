"""The Python API as its documentation promises it: the README's example runs as written, a
typed user script passes mypy --strict against the API (and a misused one fails where it is
misused), and the package ships its ``py.typed`` marker."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from swarmtest import kill_run_processes

from zellij_swarm.records import rundir, runlock

ROOT = Path(__file__).resolve().parent.parent


def readme_example() -> str:
    """The README's Python API example: the first ``python`` block of its section."""
    section = (ROOT / "README.md").read_text().split("## Python API\n", 1)[1]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found, "the README's Python API section has no python block"
    return found.group(1)


def test_readme_example_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]):
    monkeypatch.chdir(tmp_path)
    try:
        exec(compile(readme_example(), "README.md", "exec"), {"__name__": "readme"})
    finally:  # what the example started ends with it, whatever became of it
        for run in rundir.all_runs(tmp_path / ".zellij-swarm"):
            if (pid := runlock.holder(run)) is not None and pid > 0:
                os.kill(pid, signal.SIGKILL)
            kill_run_processes(run.run_id)
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "1 False" and printed[-2:] == ["130", "unknown setting 'job' (did you mean 'jobs'?)"]
    assert printed[-3].endswith(" running")



def test_readme_example_as_a_script_writes_nothing_to_stderr(tmp_path: Path):
    """Run as a program, as a user runs it: the supervisor ``start()`` spawns wrote runpy's
    RuntimeWarning ("found in sys.modules ... prior to execution") to the user's stderr."""
    script = tmp_path / "example.py"
    script.write_text(readme_example())
    try:
        res = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                             timeout=120)
    finally:
        for run in rundir.all_runs(tmp_path / ".zellij-swarm"):
            kill_run_processes(run.run_id)
    assert (res.returncode, res.stderr) == (0, "")
    assert res.stdout.splitlines()[-2] == "130"


USER_SCRIPT = '''
from pathlib import Path

from zellij_swarm import Run, Swarm, SwarmResult, Task, TaskResult, TaskStatus, errors, open_run


def build(names: list[str]) -> SwarmResult:
    swarm = Swarm([Task(f"make {n}", name=n, tags=["build"], retries=1, timeout="5m") for n in names],
                  jobs=4, backend="headless", halt="soon", kill_grace=1.5, state_dir=Path("/tmp/state"),
                  groups={"gpu": 1}, slurm_partition="debug", slurm_cpus=2)
    swarm.add(Task(argv=["pytest", "-x"], name="test", after=names, env={"CI": "1"}, cwd=Path("tests"),
                   group="gpu", worktree=True, slurm={"mem": "4G", "time": 30}))
    return swarm.run(output="group")


def report(result: SwarmResult) -> int:
    failed: list[TaskResult] = [t for t in result.tasks if t.status is not TaskStatus.SUCCEEDED]
    for task in failed:
        code: int | None = task.exit_code
        seconds: float | None = task.duration
        print(task.name, task.status.value, code, task.signal, task.attempts, seconds, task.output()[-200:],
              task.output(1, stream="stderr", raw=True))
    print(result["test"].ok, result.counts.get(TaskStatus.FAILED, 0), result.state, result.run_dir)
    return result.exit_code


def watch() -> None:
    run: Run = Swarm([Task("sleep 1")]).start()
    run.pause(group=None)
    run.add(Task("true", name="more"))
    run.unpause()
    print(run.status().state, run.logs("more", stream="stderr"), run.pid)
    try:
        result = open_run(run.run_id, state_dir=".zellij-swarm").wait(timeout=10.0)
    except errors.WaitTimeout:
        run.cancel()
        result = run.wait()
    print(result.ok)
'''

MISUSED_SCRIPT = '''
from zellij_swarm import Swarm, Task

Swarm([Task("true")], job=4)  # E: not a setting
Swarm([Task("true")], backend="screen")  # E: not a backend
Swarm([Task("true")], jobs="4")  # E: jobs is an int
Task("true", comand="make")  # E: not a task key
Task("true", after=[1])  # E: task names are strings
result = Swarm([Task("true")]).run()
name: int = result.tasks[0].name  # E: a name is a str
result.tasks[0].status == "succeeded" or result.ok.upper()  # E: ok is a bool
Swarm([Task("true")]).start().wait(timeout="10s")  # E: seconds are a number
result["true"].output(stream="err")  # E: stdout or stderr
'''


def test_a_typed_user_script_checks_under_mypy(tmp_path: Path, request: pytest.FixtureRequest):
    (tmp_path / "user.py").write_text(USER_SCRIPT)
    (tmp_path / "misused.py").write_text(MISUSED_SCRIPT)
    (tmp_path / "none.ini").write_text("[mypy]\n")  # not the project's settings: a user's defaults, and --strict
    store = getattr(request.config, "cache", None)  # pytest's cache, kept across runs: mypy's own is then warm
    cache = store.mkdir("mypy-api") if store is not None else tmp_path / "cache"
    # the package's own modules are checked by scripts/lint; here only what a user writes is judged
    res = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", "--cache-dir",
                          str(cache), "--config-file", str(tmp_path / "none.ini"), "user.py", "misused.py"],
                         cwd=tmp_path, env={"MYPYPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, timeout=300)
    errors = [line for line in res.stdout.splitlines() if ": error:" in line]
    assert not [e for e in errors if e.startswith("user.py")], res.stdout
    flagged = {int(e.split(":")[1]) for e in errors if e.startswith("misused.py")}
    expected = {n for n, line in enumerate(MISUSED_SCRIPT.splitlines(), 1) if "# E:" in line}
    assert flagged == expected, res.stdout


def test_the_package_ships_its_py_typed_marker(tmp_path: Path):
    """What a wheel of the package holds (setuptools' build_py, as the wheel is made): the
    marker that tells type checkers the installed package is typed (PEP 561)."""
    assert (ROOT / "zellij_swarm" / "py.typed").is_file()
    subprocess.run([sys.executable, "-c", "from setuptools import setup; setup()", "-q", "egg_info", "--egg-base",
                    str(tmp_path), "build_py", "--build-lib", str(tmp_path / "lib")],
                   cwd=ROOT, check=True, capture_output=True, timeout=120)
    built = tmp_path / "lib" / "zellij_swarm"
    assert (built / "py.typed").is_file() and (built / "schemas" / "status.schema.json").is_file()
