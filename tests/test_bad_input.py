"""The bad-input table (issues 7 and 10): every row states its expected outcome and asserts it —
no traceback, and no damage to other runs in the same state directory."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import NamedTuple

import pytest
from swarmtest import clean_env, run_processes


class Case(NamedTuple):
    test_id: str
    files: dict[str, str | bytes]
    args: tuple[str, ...]
    expect: str  # "usage" (exit 2, one line naming the problem) or "notice" (exit 0)
    needle: str
    env: Mapping[str, str] = {}
    stdin: str | None = None
    prepare: Callable[[Path], None] | None = None  # changes the working directory before the command


def _chmod(mode: int, where: str) -> Callable[[Path], None]:
    return lambda cwd: os.chmod(cwd / where, mode)


def _chown_to_another_user(where: str) -> Callable[[Path], None]:
    return lambda cwd: os.chown(cwd / where, 4242, 4242)  # the tests run as root, who may give a file away


def _in_the_other_run(fn: Callable[[Path], None], record: str = "") -> Callable[[Path], None]:
    """Applies ``fn`` to the other run's directory (or one of its records); the cases name that
    run by the prefix "2" of its id (it is the only run, and its id starts with the year)."""
    return lambda cwd: [fn(d / record if record else d) for d in (cwd / ".zellij-swarm/runs").iterdir()]


T = '[[task]]\nname = "ok"\ncmd = "true"\n'
MALFORMED = [
    Case("toml-syntax", {"s.toml": "[[task]\ncmd = 1\n"}, ("run", "s.toml"), "usage", "s.toml:1: invalid TOML"),
    Case("unknown-task-key", {"s.toml": '[[task]]\nname = "b"\ncomand = "x"\n'}, ("run", "s.toml"), "usage",
         "s.toml:3: task 'b': unknown key 'comand'"),
    Case("unknown-swarm-key", {"s.toml": "[swarm]\nworkers = 3\n" + T}, ("run", "s.toml"), "usage",
         "[swarm]: unknown key 'workers'"),
    Case("unknown-table", {"s.toml": "[jobs]\nx = 1\n"}, ("run", "s.toml"), "usage", "unknown table or key 'jobs'"),
    Case("cmd-wrong-type", {"s.toml": '[[task]]\nname = "b"\ncmd = 3\n'}, ("run", "s.toml"), "usage",
         "cmd must be a string"),
    Case("retries-wrong-type", {"s.toml": '[[task]]\nname = "b"\ncmd = "x"\nretries = "two"\n'}, ("run", "s.toml"),
         "usage", "invalid retries 'two'"),
    Case("after-cycle",
         {"s.toml": '[[task]]\nname="a"\ncmd="x"\nafter=["b"]\n[[task]]\nname="b"\ncmd="y"\nafter=["a"]\n'},
         ("run", "s.toml"), "usage", "dependency cycle: a -> b -> a"),
    Case("after-unknown", {"s.toml": '[[task]]\nname="a"\ncmd="x"\nafter=["zz"]\n'}, ("run", "s.toml"), "usage",
         "after names unknown task 'zz'"),
    Case("duplicate-names", {"s.toml": T + T}, ("run", "s.toml"), "usage", "duplicate task name 'ok'"),
    Case("empty-cmd", {"s.toml": '[[task]]\nname="a"\ncmd="  "\n'}, ("run", "s.toml"), "usage", "cmd is empty"),
    Case("empty-argv", {"s.toml": '[[task]]\nname="a"\nargv=[]\n'}, ("run", "s.toml"), "usage", "argv is empty"),
    Case("env-bad-key", {"s.toml": '[[task]]\nname="a"\ncmd="x"\nenv={"A B"="1"}\n'}, ("run", "s.toml"), "usage",
         "env key 'A B'"),
    Case("env-float", {"s.toml": '[[task]]\nname="a"\ncmd="x"\nenv={X=1.5e3}\n'}, ("run", "s.toml"), "usage",
         "s.toml:4: task 'a': env key 'X' is a TOML float, not a string: quote it (unquoted it would reach the "
         "worker as '1500.0', not as written)"),
    Case("env-datetime", {"s.toml": '[[task]]\nname="a"\ncmd="x"\nenv={X=1979-05-27T07:32:00Z}\n'}, ("run", "s.toml"),
         "usage", "env key 'X' is a TOML datetime, not a string"),
    Case("jobs-0", {"s.toml": T}, ("run", "s.toml", "-j", "0"), "usage", "invalid jobs '0' (from flag --jobs)"),
    Case("jobs-5000", {"s.toml": T}, ("run", "s.toml", "-j", "5000"), "usage", "expected an integer 1–1024"),
    Case("jobs-env-text", {"s.toml": T}, ("run", "s.toml"), "usage", "(from env ZELLIJ_SWARM_JOBS)",
         env={"ZELLIJ_SWARM_JOBS": "eight"}),
    Case("heartbeat-env-text", {"s.toml": T}, ("run", "s.toml"), "usage", "ZELLIJ_SWARM_HEARTBEAT_TIMEOUT_MS",
         env={"ZELLIJ_SWARM_HEARTBEAT_TIMEOUT_MS": "soon"}),
    Case("ui-unknown", {"s.toml": T}, ("run", "s.toml", "--ui", "fancy"), "usage", "expected one of live|compact"),
    Case("ui-unknown-env", {"s.toml": T}, ("run", "s.toml"), "usage", "(from env ZELLIJ_SWARM_UI)",
         env={"ZELLIJ_SWARM_UI": "huge"}),
    Case("backend-unknown", {"s.toml": T}, ("run", "s.toml", "--backend", "screen"), "usage", "invalid backend"),
    Case("duration-bad", {"s.toml": T}, ("run", "s.toml", "--timeout", "10 minutes"), "usage", "invalid timeout"),
    Case("file-not-utf8", {"s.txt": b"echo \xff\xfe\n"}, ("run", "s.txt"), "usage", "s.txt:1: not valid UTF-8"),
    Case("file-missing", {}, ("run", "nope.toml"), "usage", "nope.toml: no such file"),
    Case("unknown-run-status", {}, ("status", "no-such-run"), "usage", "no run 'no-such-run'"),
    Case("unknown-run-logs", {}, ("logs", "no-such-run", "x"), "usage", "no run 'no-such-run'"),
    Case("empty-input", {"s.txt": "\n# only a comment\n"}, ("run", "s.txt"), "notice", "s.txt: no tasks to run"),
    Case("stdin-closes-at-once", {}, ("run", "-"), "notice", "<stdin>: no tasks to run", stdin=""),
    # issue 10
    Case("junit-missing-dir", {"s.toml": T}, ("run", "s.toml", "--junit", "no/such/dir/r.xml"), "usage",
         "--junit no/such/dir/r.xml: cannot create a file in "),
    Case("junit-is-a-dir", {"s.toml": T}, ("run", "s.toml", "--junit", "."), "usage", "is a directory"),
    Case("add-flags-with-a-file", {"a.toml": T}, ("add", "some-run", "--name", "x", "a.toml"), "usage",
         "--name, --after and --priority describe a -- CMD task"),
    Case("state-dir-is-a-file", {"s.toml": T, "f": ""}, ("run", "s.toml", "--state-dir", "f"), "usage",
         "/f is not a directory"),
    Case("state-dir-world-writable", {"s.toml": T}, ("run", "s.toml"), "usage",
         "is writable by group or others (mode 0777)", prepare=_chmod(0o777, ".zellij-swarm")),
    Case("runs-group-writable", {"s.toml": T}, ("run", "s.toml"), "usage",
         "runs is writable by group or others (mode 0770)", prepare=_chmod(0o770, ".zellij-swarm/runs")),
    Case("state-dir-of-another-user", {"s.toml": T}, ("run", "s.toml"), "usage", "belongs to uid 4242, not to you",
         prepare=_chown_to_another_user(".zellij-swarm")),
    Case("runs-of-another-user", {}, ("resume", "x"), "usage", "runs belongs to uid 4242",
         prepare=_chown_to_another_user(".zellij-swarm/runs")),
    Case("require-flags-conflict", {"s.toml": T}, ("run", "s.toml", "--require-multiplexer", "--no-require-zellij"),
         "usage", "--require-multiplexer and --no-require-zellij conflict"),
    Case("four-colons-first", {"args.txt": "a\n"}, ("run", "echo {}", "::::", "args.txt"), "usage",
         ":::: is not supported: give arguments after :::"),
    Case("logs-stdout-and-stderr", {}, ("logs", "r", "t", "--stdout", "--stderr"), "usage",
         "--stdout and --stderr conflict"),
    Case("proof-nan-speedup", {}, ("proof", "--min-speedup", "nan"), "usage", "'nan' is not a finite number"),
    Case("proof-inf-span", {}, ("proof", "--max-launch-span", "inf"), "usage", "'inf' is not a finite number"),
    Case("here-with-headless", {"s.toml": T}, ("run", "s.toml", "--here", "--backend", "headless"), "usage",
         "--here conflicts with backend 'headless' (from flag --backend)"),
    # issue 10, second pass (tests/test_hardening.py has the attacks these rows stand for)
    Case("run-record-world-writable", {}, ("resume", "2"), "usage",
         "run.json is writable by group or others (mode 0666)",
         prepare=_in_the_other_run(lambda p: os.chmod(p, 0o666), "run.json")),
    Case("run-dir-of-another-user", {}, ("cancel", "2"), "usage", "belongs to uid 4242, not to you",
         prepare=_in_the_other_run(lambda p: os.chown(p, 4242, 4242))),
    Case("run-inbox-group-writable", {}, ("add", "2", "--", "true"), "usage", "inbox is writable by group or others",
         prepare=_in_the_other_run(lambda p: os.chmod(p, 0o770), "inbox")),
    Case("env-reserved-marker", {"s.toml": '[[task]]\nname="a"\ncmd="x"\n[task.env]\nZELLIJ_SWARM_RUN_ID="r"\n'},
         ("run", "s.toml"), "usage", "s.toml:5: task 'a': env key 'ZELLIJ_SWARM_RUN_ID' is reserved"),
    Case("env-reserved-slot-inline", {"s.toml": '[[task]]\nname="a"\ncmd="x"\nenv={ZELLIJ_SWARM_SLOT="9"}\n'},
         ("run", "s.toml"), "usage", "s.toml:4: task 'a': env key 'ZELLIJ_SWARM_SLOT' is reserved"),
    Case("env-reserved-wrapper-var", {"s.toml": '[[task]]\nname="a"\ncmd="x"\nenv.ZELLIJ_SWARM_GENERATION="1"\n'
                                                 'env._zsw_d="/tmp"\n'},
         ("run", "s.toml"), "usage", "s.toml:4: task 'a': env key 'ZELLIJ_SWARM_GENERATION' is reserved"),
    Case("env-reserved-zsw", {"s.toml": '[[task]]\nname="a"\ncmd="x"\nenv={_zsw_d="/tmp"}\n'},
         ("run", "s.toml"), "usage", "s.toml:4: task 'a': env key '_zsw_d' is reserved"),
    Case("session-starts-with-dash", {"s.toml": T}, ("run", "s.toml", "--session=-x"), "usage",
         "invalid session '-x' (from flag --session): expected a session name that does not start with '-'"),
    Case("session-dash-in-file", {"s.toml": '[swarm]\nsession = "--help"\n' + T}, ("run", "s.toml"), "usage",
         "invalid session '--help' (from file s.toml:2)"),
    Case("session-empty-env", {"s.toml": T}, ("run", "s.toml"), "usage", "(from env ZELLIJ_SWARM_SESSION)",
         env={"ZELLIJ_SWARM_SESSION": " "}),
    Case("session-tmux-colon", {"s.toml": T}, ("run", "s.toml", "--backend", "tmux", "--session", "a:b"), "usage",
         "invalid session 'a:b' (from flag --session): expected a tmux session name without ':'"),
    Case("session-tmux-dot-env", {"s.toml": T}, ("run", "s.toml", "--backend", "tmux"), "usage",
         "invalid session 'a.b' (from env ZELLIJ_SWARM_SESSION): expected a tmux session name without '.'",
         env={"ZELLIJ_SWARM_SESSION": "a.b"}),
    *(Case(f"session-tmux-starts-{name}", {"s.toml": T}, ("run", "s.toml", "--backend", "tmux", "--session", session),
           "usage", f"invalid session {session!r} (from flag --session): expected a tmux session name that does not "
                    f"start with {session[0]!r}")
      for name, session in (("pane-id", "%1"), ("session-id", "$0"), ("window-id", "@1"), ("exact", "=x"))),
    # Zellij refuses these names itself (zellij-utils 0.45.0 validate_session_name): `attach` failed
    # mid-run, and the run went headless with a warning (or, required, cancelled every task)
    Case("session-zellij-slash", {"s.toml": T}, ("run", "s.toml", "--backend", "zellij", "--session", "team/x"),
         "usage", "invalid session 'team/x' (from flag --session): expected a zellij session name without '/'"),
    *(Case(f"session-zellij-{name}", {"s.toml": T}, ("run", "s.toml", "--backend", "zellij"), "usage",
           f"invalid session {session!r} (from env ZELLIJ_SWARM_SESSION): expected a zellij session name other "
           f"than '.' or '..'", env={"ZELLIJ_SWARM_SESSION": session})
      for name, session in (("dot", "."), ("dotdot", ".."))),
    Case("state-dir-not-utf8", {"s.toml": T}, ("run", "s.toml", "--state-dir", os.fsdecode(b"s\xff")), "usage",
         "is not valid UTF-8"),
    Case("junit-not-utf8", {"s.toml": T}, ("run", "s.toml", "--junit", os.fsdecode(b"j\xff.xml")), "usage",
         "--junit 'j\\udcff.xml' is not valid UTF-8"),
    Case("junit-symlink-to-a-dir", {"s.toml": T}, ("run", "s.toml", "--junit", "link"), "usage", "is a directory",
         prepare=lambda cwd: os.symlink(".zellij-swarm", cwd / "link")),
    Case("here-with-headless-env", {"s.toml": T}, ("run", "s.toml", "--here"), "usage",
         "(from env ZELLIJ_SWARM_BACKEND)", env={"ZELLIJ_SWARM_BACKEND": "headless"}),
    # an adversary's pass at the last stop's code: each an internal error, exit 1, or taken as it was not meant
    Case("toml-nested-too-deeply", {"s.toml": T + "tags = " + "[" * 500 + "]" * 500 + "\n"}, ("run", "s.toml"),
         "usage", "s.toml: invalid TOML: arrays or tables nested too deeply"),
    Case("cwd-of-no-such-user", {"s.toml": T + 'cwd = "~nosuchuser/x"\n'}, ("run", "s.toml"), "usage",
         "s.toml:4: task 'ok': cwd '~nosuchuser/x': no such user's home directory to expand"),
    Case("waiting-pattern-a-list", {"s.toml": T + 'waiting_pattern = ["(", "x"]\n'}, ("run", "s.toml"), "usage",
         "s.toml:4: task 'ok': waiting_pattern must be a single value, not a list"),
    Case("timeout-a-table", {"s.toml": T + "timeout = {a = 1}\n"}, ("run", "s.toml"), "usage",
         "task 'ok': timeout must be a single value, not a table"),
    Case("slurm-not-a-table", {"s.toml": T + "slurm = 1.5\n"}, ("run", "s.toml"), "usage", "task 'ok': slurm: "),
    Case("layout-of-no-such-run", {}, ("layout", "--run", "nosuch"), "usage", "no run 'nosuch'"),
    Case("name-empty", {"s.toml": T}, ("run", "s.toml", "--name", ""), "usage",
         "--name '': a run's name must be non-empty UTF-8 text"),
    Case("session-a-toml-bool", {"s.toml": "[swarm]\nsession = true\n" + T}, ("run", "s.toml"), "usage",
         "invalid session true (from file s.toml:2): expected a non-empty single-line name, as a string (not a bool)"),
    Case("jobs-a-toml-date", {"s.toml": "[swarm]\njobs = 1979-05-27\n" + T}, ("run", "s.toml"), "usage",
         "invalid jobs 1979-05-27 (from file s.toml:2)"),  # as written, not datetime.date(1979, 5, 27)
    Case("waiting-pattern-a-toml-float", {"s.toml": "[swarm]\nwaiting_pattern = 1.5\n" + T}, ("run", "s.toml"),
         "usage", "expected a regular expression, as a string (not a float)"),
    Case("layout-run-an-option", {}, ("layout", "--run=--version"), "usage", "no run '--version'"),
    # an adversary's pass (helper 52): no line, or not naming what was wrong
    Case("swarm-key-as-a-table", {"s.toml": "[swarm.jobs]\na = 1\n" + T}, ("run", "s.toml"), "usage",
         "invalid jobs (a table) (from file s.toml:1): expected a single value"),
    Case("swarm-key-as-a-table-after-swarm", {"s.toml": "[swarm]\nname = \"n\"\n[swarm.jobs]\na = 1\n" + T},
         ("run", "s.toml"), "usage", "invalid jobs (a table) (from file s.toml:3)"),
    Case("swarm-dotted-key", {"s.toml": 'swarm.jobs = "x"\n' + T}, ("run", "s.toml"), "usage",
         "invalid jobs 'x' (from file s.toml:1)"),
    Case("task-array-of-strings", {"s.toml": '# the tasks\n\ntask = ["x"]\n'}, ("run", "s.toml"), "usage",
         "s.toml:3: task #1 must be a table"),
    Case("env-value-with-nul", {"s.toml": T + 'env = {A = "x\\u0000y"}\n'}, ("run", "s.toml"), "usage",
         "s.toml:4: task 'ok': env key 'A': its value contains a NUL byte"),
    Case("env-value-an-array", {"s.toml": T + 'env = {A = ["x"]}\n'}, ("run", "s.toml"), "usage",
         "s.toml:4: task 'ok': env key 'A' must be a string, not a list"),
    Case("cwd-with-nul", {"s.toml": T + 'cwd = "x\\u0000y"\n'}, ("run", "s.toml"), "usage",
         "s.toml:4: task 'ok': cwd contains a NUL byte"),
    Case("layout-run-not-utf8", {}, ("layout", "--run", os.fsdecode(b"r\xff")), "usage",
         "--run 'r\\udcff' is not valid UTF-8"),
]


@pytest.fixture
def other_run(swarm):
    """A finished run already in the state directory: no bad input may damage it."""
    swarm.write("other.txt", "echo other\n")
    assert swarm("run", "other.txt").code == 0
    run = swarm.latest()
    return run, (run / "summary.json").read_bytes()


@pytest.mark.parametrize("case", MALFORMED, ids=[c.test_id for c in MALFORMED])
def test_malformed_input(swarm, other_run, case):
    for name, content in case.files.items():
        (swarm.cwd / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    if case.prepare:
        case.prepare(swarm.cwd)
    res = swarm(*case.args, env=clean_env(**case.env), input=case.stdin)
    assert "Traceback" not in res.stderr
    if case.expect == "usage":
        assert res.code == 2, res
        assert res.stderr.count("\n") == 1 and res.stderr.startswith("zellij-swarm: error: "), res.stderr
    else:
        assert res.code == 0 and res.stderr.count("\n") == 1
    assert case.needle in res.stderr
    run, summary = other_run
    assert swarm.runs() == [run] and (run / "summary.json").read_bytes() == summary


def test_a_stdin_open_for_writing_only_is_one_line(swarm, tmp_path):
    """``run - 0>>file``: the first read of the input failed (EBADF) as an internal error."""
    for args in (("run", "-"), ("run", "--template", "echo {}", "-")):
        with open(tmp_path / "w.txt", "ab") as stdin:
            p = subprocess.run(swarm.cmd(*args), cwd=swarm.cwd, stdin=stdin, capture_output=True, text=True,
                               env=clean_env(), timeout=60)
        assert (p.returncode, p.stderr) == (2, "zellij-swarm: error: cannot read <stdin>: Bad file descriptor\n")


def test_a_fifo_nobody_reads_is_refused_at_once_not_waited_on(swarm, other_run):
    """``--joblog FIFO`` and ``report --html FIFO`` with no reader blocked in their open for
    ever (``--junit`` said so at once already)."""
    os.mkfifo(swarm.cwd / "jl.fifo")
    swarm.write("t.txt", "true\n")
    res = swarm("run", "t.txt", "--joblog", "jl.fifo", timeout=30)
    assert (res.code, res.stderr) == (2, "zellij-swarm: error: --joblog jl.fifo: cannot write it: no process reads "
                                         "that FIFO\n")
    res = swarm("report", other_run[0].name, "--html", "jl.fifo", timeout=30)
    assert (res.code, res.stderr) == (2, "zellij-swarm: error: --html jl.fifo: cannot write it: no process reads "
                                         "that FIFO\n")


@pytest.mark.parametrize("option, record", [("--joblog", "events.jsonl"), ("--junit", "run.json"),
                                             ("--joblog", "+state.json"), ("report", "events.jsonl")])
def test_a_report_file_among_the_run_records_is_refused(swarm, option, record):
    """``--joblog``, ``--junit`` and ``report --html`` pointed into the state directory's
    ``runs/`` replaced a run's own record (its event log, its run.json): the run could be
    neither resumed nor retried. Refused (exit 2), the records as they were."""
    swarm.write("t.txt", "true\n")
    assert swarm("run", "t.txt", "--output", "quiet").code == 0
    run = swarm.latest()
    target = f"{'+' if record.startswith('+') else ''}{run / record.removeprefix('+')}"
    kept = (run / record.removeprefix("+")).read_bytes()
    if option == "report":
        res = swarm("report", run.name, "--html", target)
    else:
        res = swarm("run", "t.txt", option, target, "--output", "quiet")
    assert res.code == 2 and res.stderr.count("\n") == 1 and "among the run records of" in res.stderr, res
    assert (run / record.removeprefix("+")).read_bytes() == kept
    assert len(swarm.runs()) == 1


@pytest.mark.parametrize("session", ["a:b", "%1"])
def test_retry_refuses_a_session_name_as_run_does(swarm, session):
    """``retry --backend tmux --session 'a:b'`` made a session ``a_b`` (tmux's own rewrite),
    where ``run`` refuses the name: one line, exit 2, nothing run."""
    swarm.write("f.txt", "echo ran >> ledger; exit 3\n")
    assert swarm("run", "f.txt", "--backend", "headless", "--output", "quiet").code == 1
    res = swarm("retry", swarm.latest().name, "--backend", "tmux", "--session", session)
    assert res.code == 2 and len(res.stderr.splitlines()) == 1, res
    assert f"invalid session {session!r} (from flag --session)" in res.stderr, res
    assert (swarm.cwd / "ledger").read_text() == "ran\n"


def test_add_and_cancel_on_a_finished_run(swarm, other_run):
    run, _ = other_run
    for args in (("add", run.name, "--", "true"), ("cancel", run.name)):
        res = swarm(*args)
        assert res.code == 2 and "is finished" in res.stderr and res.stderr.count("\n") == 1


HOSTILE_NAMES = ["it's \"quoted\"", "new\nline", "$(touch INJECTED)", "`touch INJECTED2`", "~/home $HOME ${PATH}",
                 'kdl { } ; "\\" /- #', "tab\tand unicode ✓"]


def test_hostile_names_run_verbatim_and_inject_nothing(swarm):
    tasks = "".join(f"[[task]]\nname = {json.dumps(n)}\ncmd = 'printf \"%s\" \"$ZELLIJ_SWARM_TASK\"'\n"
                    for n in HOSTILE_NAMES)
    swarm.write("h.toml", tasks)
    res = swarm("run", "h.toml", "--output", "quiet")
    assert res.code == 0, res.stderr
    rows = swarm.tasks()
    assert sorted(rows) == sorted(HOSTILE_NAMES)
    run = swarm.latest()
    for name, row in rows.items():
        out = (run / f"slots/slot-{row['slot']}/gen-{row['generation']}/output.log").read_text()
        assert out == name
    assert not list(swarm.cwd.rglob("INJECTED*"))


def test_a_name_longer_than_a_file_name_is_a_task_not_a_crash(swarm):
    """The commands that take ``[RUN] TASK`` look for a run by their first argument: one
    longer than a file name can be (255 bytes) is no run, and is taken as the task's name —
    or, naming nothing, is refused in one line. It was a traceback (ENAMETOOLONG)."""
    long = "x" * 300
    swarm.write("l.toml", f'[[task]]\nname = "{long}"\ncmd = "echo out"\n')
    assert swarm("run", "l.toml", "--output", "quiet").code == 0
    res = swarm("logs", long)
    assert (res.code, res.stdout) == (0, "out\n"), res.stderr
    for args in (("logs", "y" * 300), ("status", "y" * 300), ("cancel", "y" * 300), ("restart", "y" * 300),
                 ("logs", "nul\x01" * 60)):
        res = swarm(*args)
        assert res.code == 2 and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr, (args, res.stderr)


def test_non_utf8_and_200mb_output(swarm):
    swarm.write("o.toml", """
[[task]]
name = "binary"
cmd = "printf 'ok \\\\377\\\\376 bytes\\\\n'"
[[task]]
name = "huge"
cmd = "head -c 200000000 /dev/zero"
""")
    res = swarm("run", "o.toml", "--output", "quiet", "--junit", "r.xml")
    assert res.code == 0, res.stderr
    run = swarm.latest()
    rows = swarm.tasks()
    binary = run / f"slots/slot-{rows['binary']['slot']}/gen-1/output.log"
    assert binary.read_bytes() == b"ok \xff\xfe bytes\n"
    assert (run / f"slots/slot-{rows['huge']['slot']}/gen-1/output.log").stat().st_size == 200_000_000
    import xml.etree.ElementTree as ET

    ET.parse(swarm.cwd / "r.xml")  # forbidden characters were stripped: it parses
    logs = subprocess.run(swarm.cmd("logs", run.name, "binary"), cwd=swarm.cwd, capture_output=True, env=clean_env())
    assert logs.stdout == b"ok \xff\xfe bytes\n"


def test_missing_cwd_fails_only_that_task(swarm):
    swarm.write("c.toml", '[[task]]\nname="lost"\ncmd="true"\ncwd="no/such/dir"\n[[task]]\nname="fine"\ncmd="true"\n')
    res = swarm("run", "c.toml")
    rows = swarm.tasks()
    assert res.code == 1
    assert (rows["lost"]["status"], rows["lost"]["reason"]) == ("failed", "cwd_missing")
    assert rows["fine"]["status"] == "succeeded"


@pytest.mark.parametrize("command", [("run", "--", "true"), ("status",), ("ls",)])
def test_a_removed_working_directory_is_one_line(swarm, tmp_path, command):
    """Started in a directory that was removed (``os.getcwd`` fails): an internal error, and
    its traceback file, for every command."""
    gone = tmp_path / "gone"
    gone.mkdir()
    script = f'cd {gone} && rmdir {gone} && exec "$@"'
    res = subprocess.run(["sh", "-c", script, "sh", *swarm.cmd(*command)], env=clean_env(), capture_output=True,
                         text=True, timeout=60)
    assert (res.returncode, res.stderr) == (
        2, "zellij-swarm: error: the current directory no longer exists (it was removed): cd to one that does\n")


def test_two_runs_at_once_in_one_state_dir(swarm):
    swarm.write("a.txt", "sleep 0.5; echo a\n" * 4)
    procs = [swarm.popen("run", "a.txt", "-j", "2", "--output", "quiet") for _ in range(2)]
    assert [p.wait(timeout=60) for p in procs] == [0, 0]
    runs = swarm.runs()
    assert len(runs) == 2 and all(swarm.summary(r)["state"] == "finished" for r in runs)
    assert all(run_processes(r.name) == [] for r in runs)
