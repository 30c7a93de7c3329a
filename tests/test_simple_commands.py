"""A simple command run by the headless wrapper without a shell of its own
(``wrapper.simple_form``): exec'd from its subshell, one exec cheaper, or a builtin in the
wrapper itself, not even a fork — and otherwise what ``/bin/sh -c CMD`` gives: the same
status, output, process tree and environment."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from swarmtest import kill_run_processes, wait_until

from zellij_swarm.records import generation_files as gf
from zellij_swarm.records.rundir import RunPaths
from zellij_swarm.worker import procs, wrapper

SUB, HERE = wrapper.IN_SUBSHELL, wrapper.IN_WRAPPER


@pytest.mark.parametrize("cmd,form", [
    ("sleep 1", (SUB, "exec sleep 1")),
    ('claude -p "fix the bug (see #3); then test it"', (SUB, 'exec claude -p "fix the bug (see #3); then test it"')),
    ('"my prog" x', (SUB, 'exec "my prog" x')),
    ("find . -name x", (SUB, "exec find . -name x")),
    ("a'b c'd e", (SUB, "exec a'b c'd e")), ("sleep\t1", (SUB, "exec sleep\t1")),
    # builtins that could end or change the wrapper: as they are, in the subshell
    ("exit 3", (SUB, "exit 3")), ("exec sleep 3", (SUB, "exec sleep 3")), ("kill -TERM 0", (SUB, "kill -TERM 0")),
    ("printf -v x y", (SUB, "printf -v x y")),
    # builtins that start nothing and change nothing: in the wrapper itself
    ("true", (HERE, "true")), ("'true'", (HERE, "'true'")), (":", (HERE, ":")), ("false", (HERE, "false")),
    ("echo 'costs $5'", (HERE, "echo 'costs $5'")),  # a $ a single quote keeps
    ("test -f x", (HERE, "test -f x")), ("[ -d x ]", (HERE, "[ -d x ]")),
    # what a shell of its own would show differently, or runs below a shell that waits
    ("echo $$", None), ('echo "$0"', None), ("echo `pwd`", None), ("echo a\\ b", None),
    (". ./env.sh", None), ("cd -", None), ("set", None), ("times", None), ("command ls", None),
    ("eval ls", None), ("FOO=1 make", None), ("-c ls", None), ("ec?o hi", None),
    ("make; make install", None), ("a && b", None), ("a | b", None), ("make > log", None), ("true > log", None),
    ("(make)", None), ("{ make; }", None), ("make &", None), ("if true", None), ("a\nb", None),
    ('"unclosed', None), ("x 'unclosed", None), ('"" x', None), ("", None), ("  ", None),
])
def test_which_commands_run_without_a_shell_of_their_own(cmd, form):
    assert wrapper.simple_form(cmd) == form


def generation(run: RunPaths, number: int, cmd: str, *, headless: bool, cwd: Path) -> tuple[gf.GenPaths, int]:
    """One generation of ``cmd`` through the run's wrapper as the launcher starts it (in a
    directory made here, or before by the caller): it and its wrapper's status."""
    gen = run.gen(1, number)
    gen.dir.mkdir(parents=True, exist_ok=True)
    gen.artifacts.mkdir(exist_ok=True)
    who = wrapper.WorkerIdentity("r", "t", "t1", 1, number, 1)
    args = wrapper.arguments(gen, who, cmd=cmd, argv=None, cwd=str(cwd), env={}, headless=headless)
    assert (args[2] != wrapper.IN_SHELL) == (headless and wrapper.simple_form(cmd) is not None)
    status = subprocess.run(wrapper.headless_argv(run.worker_script, args), timeout=30, stderr=subprocess.DEVNULL,
                            start_new_session=True).returncode  # `kill 0` reaches no one but the generation
    return gen, status


def through_wrapper(run: RunPaths, number: int, cmd: str, *, headless: bool, cwd: Path) -> tuple[int, str, str]:
    """``generation``'s status, output and stderr, with the generation's pid (the claim's)
    written as ``WRAPPER``."""
    gen, status = generation(run, number, cmd, headless=headless, cwd=cwd)
    pid = gf.wrapper_pid(gen)
    out, err = (p.read_text().replace(str(pid), "WRAPPER") for p in (gen.output, gen.stderr))
    return status, out, err


PROBE = f"{sys.executable} -c " + '"import os; print(os.getppid()); print(os.environ.get(\'ZELLIJ_SWARM_RUN_ID\'))"'


@pytest.mark.parametrize("cmd", [
    "true", "false", "exit 7", "echo hi there", 'printf "%s|%s" a b', "kill -TERM 0", "kill -9 0",
    "sleep 0.01", "sh -c 'exit 5'", "zsw-no-such-command --flag", "./not-executable", "./a-directory",
    "./no-shebang one two",  # exec'd, a file with no #! line is run by /bin/sh, as `sh -c` runs it
    "exec sleep 0.01", "echo 'a $literal'", '"sh" -c "echo quoted name"',
    # in the wrapper itself
    ": any words", "echo a*", "test 1 -eq x", "[ -d a-directory ]", "[ -f nothing-there ]", "echo # a comment",
])
def test_a_simple_command_does_without_a_shell_what_it_does_in_one_of_its_own(run, tmp_path, cmd):
    (tmp_path / "not-executable").write_text("true\n")
    (tmp_path / "no-shebang").write_text('echo "$# from $0"; exit 4\n')
    (tmp_path / "no-shebang").chmod(0o755)
    (tmp_path / "a-directory").mkdir()
    own = through_wrapper(run, 1, cmd, headless=False, cwd=tmp_path)
    sub = through_wrapper(run, 2, cmd, headless=True, cwd=tmp_path)
    # the one difference: the shell's own messages name the builtin that ran the command (a
    # pane's own shell execs a program too: SPEC §5.4)
    assert sub[:2] == own[:2] and sub[2].replace("exec: ", "") == own[2].replace("exec: ", ""), (own, sub)
    for *_, err in (own, sub):
        assert str(run.dir) not in err  # $0 is `sh`, never the run's wrapper path


def test_a_builtin_whose_log_cannot_be_opened_fails_and_the_wrapper_records_it(run, tmp_path):
    """``command eval``: a redirection that fails does not end the wrapper (``eval`` is a
    special builtin), so the exit is recorded, with the status a shell of its own gives."""
    statuses = []
    for number, headless in ((1, False), (2, True)):
        run.gen(1, number).output.mkdir(parents=True)  # where the log would be
        gen, status = generation(run, number, "echo hi", headless=headless, cwd=tmp_path)
        statuses.append((status, gf.read_sidecar(gen)))
    assert statuses[0] == statuses[1] and statuses[0][0] == 2, statuses


def test_a_simple_command_is_the_wrappers_child_with_the_markers_on_it(run, tmp_path):
    """Exec'd in the subshell's place, as bash's ``sh -c`` execs a simple command: the
    wrapper is its parent (dash's ``sh -c`` keeps a shell between them), and the run's
    markers are in its environment, where ``procs`` finds a generation's processes."""
    assert through_wrapper(run, 1, PROBE, headless=True, cwd=tmp_path) == (0, "WRAPPER\nr\n", "")


def test_a_fork_of_the_wrapper_is_not_the_wrapper(tmp_path):
    """A subshell the wrapper forked has its command line: it is the worker's, not the wrapper
    — ``wrapper_process`` names the wrapper, and the ladder counts the fork as the worker's."""
    gen = gf.GenPaths(tmp_path / "slot-1" / "gen-1", 1, 1)
    gen.dir.mkdir(parents=True)
    go = tmp_path / "go"
    script = f"( until [ -e {go} ]; do sleep 0.01; done ); true"
    parent = subprocess.Popen(["/bin/sh", "-c", script, "sh", str(gen.dir)], start_new_session=True)
    try:
        fork = wait_until(lambda: next(iter(procs.children(parent.pid)), None), what="the subshell")
        assert procs.cmdline(fork) == procs.cmdline(parent.pid)
        assert procs.wrapper_process(gen) == parent.pid
        assert procs.is_wrapper(gen, parent.pid, procs.cmdline(parent.pid))
        assert not procs.is_wrapper(gen, fork, procs.cmdline(fork))
    finally:
        go.touch()
        try:
            parent.wait(timeout=10)
        finally:
            if parent.poll() is None:
                os.killpg(parent.pid, signal.SIGKILL)
                parent.wait()


AGENT = """import signal, sys, time
def save(*_):
    open("saved", "w").write("yes")
    sys.exit(0)
signal.signal(signal.SIGTERM, save)
open("ready", "w").write("yes")
time.sleep(60)
"""


def test_a_simple_command_that_saves_on_sigterm_keeps_its_own_code(swarm):
    """Cancelled, an agent that handles SIGTERM saves and exits 0: with no shell waiting
    between it and the wrapper, that 0 is what is recorded (dash's ``sh -c`` died of the
    signal first, and its 143 was). The status is the cancel's all the same."""
    swarm.write("agent.py", AGENT)
    swarm.write("s.toml", f'[[task]]\nname = "agent"\ncmd = "{sys.executable} agent.py"\n')
    proc = swarm.popen("run", "s.toml", "--output", "quiet")
    run_id = swarm.started().name
    try:
        wait_until(lambda: (swarm.cwd / "ready").exists(), what="the agent's handler in place")
        assert swarm("cancel", run_id).code == 0
        assert proc.wait(timeout=30) == 130
    finally:
        kill_run_processes(run_id)
    row = swarm.tasks()["agent"]
    assert (row["status"], row["reason"]) == ("cancelled", "cancelled_by_user")
    assert (row["exit_code"], row["signal"]) == (0, None)
    assert (swarm.cwd / "saved").read_text() == "yes"
