"""The Python API as a library user calls it (issue 25 §5): typed keywords that are the settings
table and the swarm file's task keys, typed results, unknown names that say the closest one,
a blocking run() that leaves the host's signal handlers alone and turns Ctrl-C into a cancel,
and start() with a handle that talks to the run through its directory."""

from __future__ import annotations

import dataclasses
import inspect
import io
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from swarmtest import clean_env, kill_run_processes, validate, wait_until

from zellij_swarm import Run, Swarm, SwarmResult, Task, TaskResult, TaskStatus, errors, open_run
from zellij_swarm.api import SlurmResources, check_settings_keywords
from zellij_swarm.config import settings, slurm, swarmfile

# ----- the keywords are the swarm file's keys and the settings table ------------------------------


def test_task_has_every_key_a_swarm_file_task_has():
    assert {f.name for f in dataclasses.fields(Task)} == swarmfile.TASK_KEYS
    keywords = set(inspect.signature(Task).parameters) - {"unknown"}
    assert keywords == swarmfile.TASK_KEYS
    assert set(SlurmResources.__annotations__) == set(slurm.KEYS)


def test_swarm_keywords_are_the_settings_table_and_cannot_drift_from_it():
    keywords = [p.name for p in inspect.signature(Swarm).parameters.values() if p.kind is p.KEYWORD_ONLY]
    assert keywords == ["name", "groups", *(s.name for s in settings.SETTINGS)]
    check_settings_keywords(Swarm.__init__)  # what the import did
    added = (*settings.SETTINGS, dataclasses.replace(settings.SETTINGS[0], name="brand_new"))
    with pytest.raises(TypeError, match=r"missing \['brand_new'\]"):
        check_settings_keywords(Swarm.__init__, added)
    with pytest.raises(TypeError, match=r"not settings \['jobs'\]"):
        check_settings_keywords(Swarm.__init__, settings.SETTINGS[1:])

    def narrow(*, jobs: int) -> None: ...

    with pytest.raises(TypeError, match=r"keyword jobs: .* does not accept None"):
        check_settings_keywords(narrow, settings.SETTINGS[:1])
    assert "kill_grace: time between SIGTERM and SIGKILL" in (Swarm.__init__.__doc__ or "")


def test_unknown_names_say_the_closest_one():
    with pytest.raises(errors.UnknownName, match=r"unknown task key 'comand' \(did you mean 'cmd'\?\)"):
        Task(comand="make")
    with pytest.raises(errors.UnknownName, match=r"unknown setting 'job' \(did you mean 'jobs'\?\)") as caught:
        Swarm([Task("true")], job=2)
    assert isinstance(caught.value, errors.UsageError) and caught.value.name == "job"
    with pytest.raises(errors.SettingError, match=r"invalid jobs 0 \(from api\)"):
        Swarm([Task("true")], jobs=0)  # before anything runs
    with pytest.raises(errors.InputError, match=r"unknown group 'gpus' \(did you mean 'gpu'\?\)"):
        Swarm([Task("true", group="gpus")], groups={"gpu": 1}).run()
    with pytest.raises(errors.InputError, match="jobs must be an integer"):
        Swarm(groups={"gpu": 0})


# ----- a blocking run -----------------------------------------------------------------------------


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_run_returns_typed_results(here: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]):
    calls: list[str] = []  # the run may not touch the host's signal handlers
    monkeypatch.setattr(signal, "signal", lambda *a: calls.append(f"signal{a}"))
    monkeypatch.setattr(signal, "set_wakeup_fd", lambda *a, **k: calls.append("set_wakeup_fd"))
    (here / "sub").mkdir()
    result = Swarm([
        Task("echo built", name="build"),
        Task(argv=["sh", "-c", "echo try; echo broke >&2; exit 3"], name="test", after="build", retries=1),
        Task("true", name="deploy", after=["test"]),
        Task('echo "$WHO in $(basename "$PWD")"', name="env", cwd="sub", env={"WHO": "me"}, tags=["x"],
             group="small", priority=5, timeout="1m", worktree=False),
    ], jobs=2, groups={"small": 1}).run()
    assert calls == []
    assert isinstance(result, SwarmResult) and (result.ok, result.exit_code, result.state) == (False, 1, "finished")
    assert [t.name for t in result.tasks] == ["build", "test", "deploy", "env"] == [t.name for t in result]
    test = result["test"]
    assert isinstance(test, TaskResult) and result["t2"] == test
    assert (test.status, test.exit_code, test.signal, test.attempts) == (TaskStatus.FAILED, 3, None, 2)
    assert test.duration is not None and test.duration >= 0
    assert (test.output(), test.output(1), test.output(raw=True)) == ("try\n", "try\n", "try\n")
    assert test.output(stream="stderr") == "broke\n" and capfd.readouterr() == ("", ""), "the host's streams untouched"
    assert result["deploy"].status is TaskStatus.SKIPPED and result["deploy"].output() == ""
    assert result["build"].ok and result["env"].output() == "me in sub\n"
    assert result.counts == {TaskStatus.SUCCEEDED: 2, TaskStatus.FAILED: 1, TaskStatus.SKIPPED: 1}
    assert "test" in result and "nope" not in result and len(result) == 4
    with pytest.raises(KeyError, match=r"has no task 'biuld' \(did you mean 'build'\?\)"):
        result["biuld"]
    with pytest.raises(errors.UsageError, match="no attempt 3"):
        test.output(3)
    assert result.run_dir == here / ".zellij-swarm" / "runs" / result.run_id
    validate(dict(result.record), "status")


def test_a_run_and_a_handle_find_the_state_directory_as_the_commands_do(here: Path,
                                                                        monkeypatch: pytest.MonkeyPatch):
    """SPEC §3.1's one rule, for the API too: from a subdirectory of a repository, the run
    goes to the ``.zellij-swarm`` at its top (where ``zellij-swarm run`` would put it, and
    ``status`` looks), and ``open_run`` finds it there — not a new ``./.zellij-swarm``."""
    monkeypatch.delenv("ZELLIJ_SWARM_STATE_DIR", raising=False)
    (here / ".git").mkdir()
    (here / "src" / "deep").mkdir(parents=True)
    monkeypatch.chdir(here / "src" / "deep")
    result = Swarm([Task("true", name="t")]).run()
    assert result.run_dir == here / ".zellij-swarm" / "runs" / result.run_id
    assert not (here / "src" / "deep" / ".zellij-swarm").exists()
    monkeypatch.chdir(here / "src")
    assert open_run(result.run_id).run_dir == result.run_dir
    with pytest.raises(errors.RunNotFound, match=r"no run 'nope' under .*: looked for \.zellij-swarm in .*--state-dir"):
        open_run("nope")
    monkeypatch.setenv("ZELLIJ_SWARM_STATE_DIR", str(here / "elsewhere"))
    with pytest.raises(errors.RunNotFound, match=r"elsewhere \(from env ZELLIJ_SWARM_STATE_DIR\)"):
        open_run(result.run_id)


def test_summary_is_kept_for_one_release_deprecated(here: Path):
    result = Swarm([Task("exit 4", name="u")]).run()
    with pytest.warns(DeprecationWarning, match="result.tasks"):
        summary = result.summary
    assert summary == result.record and summary["tasks"][0]["exit_code"] == 4


def test_ctrl_c_cancels_the_run_through_the_ladder_then_is_raised(here: Path, request: pytest.FixtureRequest):
    """Ctrl-C in run() (a KeyboardInterrupt on the main thread: run() installs no handler) ends
    the workers as `cancel` does — a worker that ignores SIGTERM gets SIGKILL after the grace —
    waits for the run's end, and is raised again."""
    # Python's own Ctrl-C, as in a program run from a terminal: pytest started in the background
    # by a shell without job control inherits SIGINT ignored, and then no KeyboardInterrupt comes
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        request.addfinalizer(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    seen: dict[str, object] = {}

    def interrupt() -> None:
        seen["pid"] = int(wait_until(lambda: (here / "started").exists() and (here / "started").read_text(),
                                     what="the worker to start"))
        seen["handlers"] = {s: signal.getsignal(s) for s in before}
        os.kill(os.getpid(), signal.SIGINT)

    ctrl_c = threading.Thread(target=interrupt)
    ctrl_c.start()
    with pytest.raises(KeyboardInterrupt):
        Swarm([Task("trap '' TERM; echo $$ > started; sleep 60", name="stubborn"),
               Task("true", name="later", after=["stubborn"])], kill_grace=0.2).run()
    ctrl_c.join()
    assert seen["handlers"] == before == {s: signal.getsignal(s) for s in before}
    assert not [t for t in threading.enumerate() if t.name == "zellij-swarm supervisor"], "the run had ended"
    [run_id] = os.listdir(here / ".zellij-swarm" / "runs")
    result = open_run(run_id).wait(timeout=5)
    assert (result.state, result.exit_code) == ("cancelled", 130)
    stubborn = result["stubborn"]
    assert (stubborn.status, stubborn.reason, stubborn.signal) == (TaskStatus.CANCELLED, "cancelled_by_user", "SIGKILL")
    assert result["later"].status is TaskStatus.CANCELLED
    with pytest.raises(ProcessLookupError):
        os.kill(int(str(seen["pid"])), 0)


@pytest.mark.parametrize("when", ["before", "after"])
def test_ctrl_c_as_run_starts_its_thread_cancels_what_began(tmp_path: Path, when: str):
    """A Ctrl-C that lands inside the supervisor thread's start — the thread begun ("after")
    or not ("before") — is raised once the run that began is cancelled and ended; one that
    never began runs nothing. It was raised at once while the run went on to its end, and the
    program could not exit until it had."""
    script = (
        "import sys, threading, time\n"
        "from zellij_swarm import Swarm, Task\n"
        "start = threading.Thread.start\n"
        "def interrupted(self):\n"
        "    if self.name == 'zellij-swarm supervisor':\n"
        "        if sys.argv[1] == 'after':\n"
        "            start(self)\n"
        "        raise KeyboardInterrupt\n"
        "    start(self)\n"
        "threading.Thread.start = interrupted\n"
        "try:\n"
        "    Swarm([Task(f'echo began >> {sys.argv[2]}/ledger; sleep 30; echo done >> {sys.argv[2]}/ledger', "
        "name='t')], state_dir=sys.argv[2] + '/s', backend='headless', kill_grace=0.2).run()\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted')\n")
    out = subprocess.run([sys.executable, "-c", script, when, str(tmp_path)], capture_output=True, text=True,
                         timeout=25, env=clean_env(), cwd=tmp_path)
    assert out.stdout == "interrupted\n" and out.returncode == 0, out.stderr
    ledger = tmp_path / "ledger"
    assert "done" not in (ledger.read_text() if ledger.exists() else "")
    runs = list((tmp_path / "s" / "runs").glob("*")) if (tmp_path / "s" / "runs").exists() else []
    if when == "after":  # it began: its run was cancelled (its directory is made before a cancel is sent)
        [run] = runs
        kill_run_processes(run.name)
        assert open_run(run.name, state_dir=tmp_path / "s").wait(timeout=5).state == "cancelled"
    else:
        assert not runs and not ledger.exists(), "nothing began"


# ----- start() and the handle ---------------------------------------------------------------------


def test_wait_takes_no_nan_and_an_endless_timeout_as_none(here: Path):
    """``Run.wait(timeout=nan)`` waited for ever from one handle and raised a bare ValueError
    from another; ``inf`` or 1e300 a bare OverflowError. NaN is refused as any bad timeout is;
    a timeout longer than any clock counts is no limit, as None."""
    run = Swarm([Task("true", name="a")]).start()
    again = open_run(run.run_id)
    for handle in (run, again):
        with pytest.raises(errors.UsageError, match="timeout must be a number"):
            handle.wait(timeout=float("nan"))
    for handle in (run, again):
        for endless in (float("inf"), 1e300, 10**30):
            assert handle.wait(timeout=endless).exit_code == 0


def test_start_returns_a_handle_that_works_through_the_run_directory(here: Path):
    swarm = Swarm([Task("echo early", name="early"),
                   Task("while [ ! -e go ]; do sleep 0.02; done; echo gate", name="gated")], jobs=2)
    run = swarm.start()
    try:
        assert isinstance(run, Run) and run.pid is not None
        assert os.getsid(run.pid) == run.pid != os.getsid(0), "its own session: the host's Ctrl-C does not reach it"
        status = run.status()
        assert status.state == "running" and [t.name for t in status.tasks] == ["early", "gated"]
        same = open_run(run.run_id, state_dir=here / ".zellij-swarm")
        assert same.run_dir == run.run_dir and same.pid == run.pid
        wait_until(lambda: run.status()["early"].ok, what="early to end")
        assert run.logs("early") == "early\n"
        with pytest.raises(errors.UnknownTask, match=r"has no task 'eraly' \(did you mean 'early'\?\)"):
            run.cancel("eraly")  # as ``logs`` says it, and ``result["biuld"]``
        with pytest.raises(errors.WaitTimeout):
            run.wait(timeout=0.1)
        run.pause()
        run.add(Task("echo added", name="added", after=["early"]))
        added = wait_until(lambda: "added" in (now := run.status()) and now, what="the snapshot to show it")
        assert added["added"].status is TaskStatus.PENDING and added.record["paused"]["run"]  # paused: it waits
        run.unpause()
        wait_until(lambda: run.status()["added"].ok, what="the added task to run")
        run.cancel()
        result = run.wait(timeout=30)
        assert (result.state, result.exit_code, result["gated"].status) == ("cancelled", 130, TaskStatus.CANCELLED)
        assert same.wait(timeout=5).exit_code == 130  # a run started elsewhere: its recorded exit code
        with pytest.raises(errors.RunNotActive):
            run.cancel()
    finally:
        if run.pid is not None:
            os.killpg(run.pid, signal.SIGKILL)
        kill_run_processes(run.run_id)
        run.wait(timeout=30)  # its supervisor collected


@pytest.mark.parametrize("tasks, code", [(["exit 3"], 1), (["true"], 0)])
def test_a_host_that_ignores_sigchld_is_told_the_run_s_own_exit_code(here: Path, tasks: list[str], code: int):
    """A host that sets SIGCHLD to SIG_IGN (a daemon's way to leave no zombies): the kernel
    reaps the supervisor, Popen.wait gets ECHILD and says 0, and wait() returned exit code 0
    and ``ok`` for a run whose task failed."""
    previous = signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:
        result = Swarm([Task(cmd, name=f"t{i}") for i, cmd in enumerate(tasks)]).start().wait(timeout=60)
    finally:
        signal.signal(signal.SIGCHLD, previous)
    assert (result.exit_code, result.ok) == (code, code == 0)


def test_a_handle_let_go_while_its_run_goes_on_warns_nothing_and_leaves_no_zombie(tmp_path: Path):
    """The run outlives the program that started it, but a handle let go of while it ran (or
    held at the program's exit) said "ResourceWarning: subprocess N is still running" — an
    error in a test suite run with ``-W error`` — and the supervisor, once ended, stayed a
    zombie until the program exited. Whoever holds the handle, the supervisor is reaped."""
    script = (
        "import gc, os, sys, time\n"
        "from zellij_swarm import Swarm, Task\n"
        "def started():\n"
        "    run = Swarm([Task('while [ ! -e go ]; do sleep 0.02; done', name='gated')], backend='headless').start()\n"
        "    return run.run_id, run.pid\n"
        "run_id, pid = started()\n"
        "gc.collect()\n"
        "open('go', 'w').close()\n"
        "deadline = time.monotonic() + 20\n"
        "while os.path.exists(f'/proc/{pid}') and time.monotonic() < deadline:\n"
        "    time.sleep(0.02)\n"
        "print(run_id, 'zombie' if os.path.exists(f'/proc/{pid}') else 'reaped', flush=True)\n"
        "kept = Swarm([Task('sleep 0.3', name='kept')], backend='headless').start()\n"
        "print(kept.run_id)\n")
    out = subprocess.run([sys.executable, "-X", "dev", "-c", script], capture_output=True, text=True, timeout=40,
                         env=clean_env(), cwd=tmp_path)
    runs = out.stdout.split()
    try:
        assert out.returncode == 0 and runs[1] == "reaped", (out.stdout, out.stderr)
        assert "ResourceWarning" not in out.stderr, out.stderr
        assert open_run(runs[2], state_dir=tmp_path / ".zellij-swarm").wait(timeout=20).exit_code == 0
    finally:
        for run_id in runs[::2]:
            kill_run_processes(run_id)


@pytest.mark.parametrize("option", [{"timeout": -1}, {"retries": "x"}, {"idle_timeout": "soon"}])
def test_a_task_s_bad_setting_names_the_api_as_its_source(here: Path, option):
    """A task's setting from the API was said to come "from file <api>:None"."""
    with pytest.raises(errors.InputError, match=r"\(from api\)") as refused:
        Swarm([Task("true", **option)]).run()
    assert "None" not in str(refused.value) and "file" not in str(refused.value)
    assert not (here / ".zellij-swarm").exists()


WRONG = [  # an adversary's pass: each raised AttributeError, TypeError or UnicodeEncodeError from inside
    (lambda: Swarm(None), errors.InputError, "tasks must be a list of Task, not a NoneType"),
    (lambda: Swarm(Task("true")), errors.InputError, "not a Task"),
    (lambda: Swarm([Task("true")], groups=["g"]), errors.InputError, "groups must be a mapping"),
    (lambda: Swarm([Task("true")], groups={5: 1}), errors.InputError, "group name 5"),
    (lambda: Swarm([Task("true")], name=5), errors.UsageError, "name must be a non-empty string"),
    (lambda: Swarm([Task("true")], name="\udcff"), errors.UsageError, "UTF-8"),
    (lambda: Task("true", env=5), errors.InputError, "env must be a mapping"),
    (lambda: Task("true", tags=5), errors.InputError, "tags must be a list of strings"),
    (lambda: Task("true", after=5), errors.InputError, "after must be a list of strings"),
    (lambda: Swarm([Task("echo \udcff")]).run(), errors.InputError, "cmd holds 'echo \\udcff', which is not valid"),
    (lambda: Swarm([Task("true", env={"A": "\udcff"})]).run(), errors.InputError, "not valid UTF-8"),
    (lambda: Swarm([Task("true", env={1: "x"})]).run(), errors.InputError, "env key 1"),
    (lambda: Swarm([Task("true", env={"A": None})]).run(), errors.InputError, "env key 'A' is None, not a string"),
    (lambda: Swarm([Task("true", env={"A": "x\0y"})]).run(), errors.InputError, "its value contains a NUL byte"),
    (lambda: Swarm([Task("true", cwd="x\0y")]).run(), errors.InputError, "cwd contains a NUL byte"),
    (lambda: Swarm([Task("pwd", cwd="~nosuchuser/x")]).run(), errors.InputError, "no such user's home"),
    (lambda: Swarm([Task("true", waiting_pattern=["("])]).run(), errors.InputError,
     "waiting_pattern must be a single value"),
    # the run's own environment: posix_spawn's TypeError / ValueError, a run directory made
    (lambda: Swarm([Task("true")]).run(env={"X": 1}), errors.InputError, "the value of X must be a string"),
    (lambda: Swarm([Task("true")]).run(env={"X": "a\0b"}), errors.InputError, "the value of X must be a string"),
    (lambda: Swarm([Task("true")]).run(env={"X=Y": "a"}), errors.InputError, "'X=Y' is not a name"),
    (lambda: Swarm([Task("true")]).run(env={"": "a"}), errors.InputError, "'' is not a name"),
    (lambda: Swarm([Task("true")]).run(env={"X": "\ud800"}), errors.InputError, "the value of X"),
    (lambda: Swarm([Task("true")]).start(env={"X": 1}), errors.InputError, "the value of X must be a string"),
    (lambda: Swarm([Task("true")]).start(env=["X"]), errors.InputError, "env must be a mapping"),
    # a second adversary's pass: raw TypeError and AttributeError, or a value taken as it was not meant
    (lambda: Swarm([Task(argv=5)]).run(), errors.InputError, "argv must be a list of strings, not a int"),
    (lambda: Task(argv="ls -l"), errors.InputError, "argv must be a list of strings, not a str"),
    (lambda: Task(argv={"A": None}), errors.InputError, "argv must be a list of strings, not a dict"),
    (lambda: Swarm([Task("pwd", cwd=5)]).run(), errors.InputError, "cwd must be a non-empty path, not a int"),
    (lambda: Task("pwd", cwd=""), errors.InputError, "cwd must be a non-empty path, not ''"),
    (lambda: Task("true", slurm="gpu"), errors.InputError, "slurm must be a mapping of names to values, not a str"),
    (lambda: Task("true", slurm=[]), errors.InputError, "slurm must be a mapping of names to values, not a list"),
    (lambda: Task("true", slurm={1: "x"}), errors.InputError, "slurm keys are names, not a int"),
    (lambda: Task("true", priority=[]), errors.InputError, "priority must be an integer, not a list"),
    (lambda: Swarm([Task("true", after="")]).run(), errors.InputError, "after names unknown task ''"),  # as a file's
    (lambda: open_run(5), errors.UsageError, "run_id must be a run id (a string), not a int"),
    (lambda: open_run(["x"]), errors.UsageError, "run_id must be a run id (a string), not a list"),
    (lambda: open_run("x", state_dir=5), errors.UsageError, "state_dir must be a path, not a int"),
    (lambda: Swarm([Task("true")], slurm_constraint=(1,)), errors.SettingError, "invalid slurm_constraint (1,)"),
    (lambda: Swarm([Task("true")], slurm_qos=float("nan")), errors.SettingError, "invalid slurm_qos nan"),
]


@pytest.mark.parametrize("call, error, message", WRONG, ids=range(len(WRONG)))
def test_a_wrong_value_is_a_typed_error_and_nothing_is_made(here: Path, call, error, message):
    with pytest.raises(error, match=re.escape(message)):
        call()
    assert not (here / ".zellij-swarm").exists()


def test_a_run_handle_refuses_what_is_not_a_task_or_a_time(here: Path):
    run = Swarm([Task("until [ -e go ]; do sleep 0.02; done")]).start()
    try:
        with pytest.raises(errors.InputError, match="task #1 is a str, not a Task"):
            run.add("echo x")
        with pytest.raises(errors.UsageError, match="timeout must be a number of seconds"):
            run.wait("abc")
        for bad in (None, 5, ["a"], b"a"):  # None was posted, and ended the supervisor; the others raised bare
            with pytest.raises(errors.UsageError, match=r"cancel: task #1 is a \w+, not a task's name \(a str\)"):
                run.cancel(bad)  # type: ignore[arg-type]
        with pytest.raises(errors.UsageError, match=r"pause: group must be a group's name \(a str\) or None"):
            run.pause(["g"])  # type: ignore[arg-type]
        assert run.status().state == "running"
        with pytest.raises(errors.RunNotFound):
            open_run("")  # a prefix of every run id: it gave the only run, this one
    finally:
        (here / "go").touch()
        assert run.wait(timeout=60).exit_code == 0
        kill_run_processes(run.run_id)


def test_start_refuses_what_cannot_run(here: Path):
    with pytest.raises(errors.InputError, match="after names unknown task 'nope'"):
        Swarm([Task("true", after=["nope"])]).start()  # checked here: nothing started
    assert not (here / ".zellij-swarm").exists()
    with pytest.raises(errors.UsageError, match="worktree") as refused:
        Swarm([Task("true")], worktree=True).start()  # the supervisor's refusal: not a git repository
    with pytest.raises(errors.UsageError, match=re.escape(str(refused.value))):
        Swarm([Task("true")], worktree=True).run()  # run()'s, raised on the caller's thread
    with pytest.raises(errors.RunStartError, match="exited with status 1 before its run began") as crashed:
        Swarm([Task("true")]).start(env={"PYTHONHOME": str(here / "nowhere")})  # a Python that cannot start
    assert crashed.value.exit_code == 1
    with pytest.raises(errors.RunNotFound):
        open_run("nope", state_dir=here)


def test_a_current_directory_removed_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The commands say so in one line (exit 2); the API raised a bare FileNotFoundError
    naming no path, from run(), start() and open_run() alike."""
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    swarm = Swarm([Task("true", name="a")], state_dir=tmp_path / "state")
    for call in (swarm.run, swarm.start, lambda: open_run("x")):
        with pytest.raises(errors.UsageError, match=r"^the current directory no longer exists \(it was removed\)"):
            call()
    assert not (tmp_path / "state").exists()


@pytest.mark.parametrize("stdout", ["none", "closed"])
def test_run_with_no_stdout_to_copy_to_ends_as_its_tasks_do(tmp_path, monkeypatch, stdout):
    """``output="group"`` with ``sys.stdout`` None (``pythonw``) or closed: the reporter's copy
    raised out of the supervisor's loop, the run was left interrupted with ``a`` running and
    ``b`` never run."""
    closed = io.StringIO()
    closed.close()
    monkeypatch.setattr(sys, "stdout", None if stdout == "none" else closed)
    ledger = tmp_path / "ledger"
    result = Swarm([Task(f"echo a >> {ledger}; echo hi", name="a"), Task(f"echo b >> {ledger}", name="b",
                                                                          after=["a"])],
                   output="group", backend="headless", state_dir=tmp_path / "state").run()
    assert (result.exit_code, [t.status for t in result.tasks]) == (0, [TaskStatus.SUCCEEDED] * 2)
    assert ledger.read_text() == "a\nb\n"


def test_a_lookup_by_something_else_than_a_name_is_said(tmp_path):
    result = Swarm([Task("echo hi", name="a")], backend="headless", state_dir=tmp_path).run()
    with pytest.raises(TypeError, match="looked up by its name or id"):
        result[0]  # type: ignore[index]
    with pytest.raises(errors.UnknownName, match=r"unknown stream 'err'.*'stderr'"):
        result["a"].output(stream="err")  # type: ignore[arg-type]
