"""The caller's environment, saved in one byte-exact format (``records.envfile``) and given
back to every worker whatever its backend (issue 22, items 9 and 14): values holding newlines,
quotes, ``$(…)`` and bytes that are not UTF-8; names a shell cannot export (``A-B``, ``ZZ.Z``),
which /bin/sh (dash) drops from its environment, so they reach the worker through an exec that
is not a shell's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from swarmtest import backend_args, clean_env, kill_run_processes, run_processes

from zellij_swarm.records import envfile
from zellij_swarm.records.rundir import DamagedRecord

# not UTF-8, shell-special, a newline, an unclosed quote: every way the old format broke
ODD_VALUE = os.fsdecode(b"a\xffb \xfe'$(touch pwned)\n\"`x` \\ it's")
ODD_NAMES = {"A-B": "dash", "ZZ.Z": "dot\nnewline", "1ST": "digit first", "N\xe9": "accent"}
SAVED = {"FOO": ODD_VALUE, "EMPTY": "", "EQ": "a=b=c", **ODD_NAMES}

# An argv task (no shell in between) that writes the environment it got, NUL-separated.
DUMP = f'argv = ["{sys.executable}", "-c", "import os; open(\'got\', \'wb\').write(b\'\\\\0\'.join(os.fsencode(k) + b\'=\' + os.fsencode(v) for k, v in os.environ.items()))"]'  # noqa: E501


def got_env(cwd: Path) -> dict[str, str]:
    data = (cwd / "got").read_bytes()
    return {os.fsdecode(k): os.fsdecode(v) for k, _, v in (e.partition(b"=") for e in data.split(b"\0"))}


def test_the_format_round_trips_any_bytes(tmp_path):
    path = tmp_path / "environ"
    envfile.save(path, SAVED)
    assert envfile.load(path) == SAVED
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert envfile.load(tmp_path / "missing") == {}


def test_a_damaged_file_is_a_named_error(tmp_path):
    path = tmp_path / "environ"
    path.write_bytes(b"A=1\0no-equals-sign\0")
    with pytest.raises(DamagedRecord, match=f"{path}: damaged environment record"):
        envfile.load(path)


def test_the_exec_gives_a_real_process_the_saved_bytes(tmp_path):
    """``restore``: the saved environment and the wrapper's ``_ZSW_`` carriers, nothing else
    (not the ``LC_CTYPE`` Python's locale coercion adds); ``unexportable``: only the saved
    variables a shell cannot carry are added to the process's own."""
    path = tmp_path / "environ"
    envfile.save(path, SAVED)
    dump = ["/usr/bin/env", "-0"]
    restored = subprocess.run([*envfile.exec_argv("restore", path), *dump], env={"_ZSW_PANE": "%1", "OWN": "1"},
                              capture_output=True, timeout=30, check=True)
    assert envfile.decode(restored.stdout, path) == {**SAVED, "_ZSW_PANE": "%1"}
    added = subprocess.run([*envfile.exec_argv("unexportable", path), *dump], env={"OWN": "1"},
                           capture_output=True, timeout=30, check=True)
    assert envfile.decode(added.stdout, path) == {**ODD_NAMES, "OWN": "1"}


def test_the_exec_keeps_a_missing_command_a_127_and_sigpipe_default(tmp_path):
    path = tmp_path / "environ"
    envfile.save(path, {})
    missing = subprocess.run([*envfile.exec_argv("restore", path), "no-such-command-zsw"], env={"PATH": "/usr/bin"},
                             capture_output=True, text=True, timeout=30)
    assert missing.returncode == 127 and "no-such-command-zsw" in missing.stderr, missing
    handler = subprocess.run([*envfile.exec_argv("restore", path), "/bin/sh", "-c",
                              "grep SigIgn /proc/self/status"], capture_output=True, text=True, timeout=30)
    ignored = int(handler.stdout.split()[1], 16)
    assert not ignored & (1 << (13 - 1)), "SIGPIPE must reach the worker at its default"


# A shell command that does the same through a program the shell starts (coreutils' env).
DUMP_FROM_SHELL = 'cmd = "env -0 > got"'


# (the real Zellij: a session started with a variable that is not UTF-8 died as it started)
@pytest.mark.parametrize("backend", ["headless", "tmux", "zellij-0.45.0", "real-zellij"])
@pytest.mark.parametrize("dump", [DUMP, DUMP_FROM_SHELL], ids=["argv", "cmd"])
def test_every_variable_reaches_the_worker_byte_exact(swarm, request, backend, dump):
    flags, env = backend_args(backend, request)
    swarm.write("t.toml", f'[[task]]\nname = "dump"\n{dump}\n')
    res = swarm("run", "t.toml", *flags, "--require-multiplexer", "--output", "quiet",
                env={**(env or clean_env()), **SAVED})
    try:
        assert res.code == 0 and "Traceback" not in res.stderr, res
        got = got_env(swarm.cwd)
        assert {k: got.get(k) for k in SAVED} == SAVED
        assert not (swarm.cwd / "pwned").exists()
        if backend == "headless":  # the variables the headless backend scrubs stay scrubbed
            assert "TMUX_PANE" not in got and "ZELLIJ_PANE_ID" not in got
    finally:
        kill_run_processes(swarm.latest().name)
    assert run_processes(swarm.latest().name) == []


def test_retry_and_resume_read_back_a_newline_in_a_value(swarm, interrupted_run):
    """The report's crash: ``ValueError: No closing quotation`` from ``resume`` and ``retry``."""
    run = interrupted_run
    envfile.save(run / "environ", SAVED)  # as a run with this environment saved it
    res = swarm("resume", run.name, "--output", "quiet")
    assert res.code == 0 and "Traceback" not in res.stderr, res
    swarm.write("t.toml", f'[[task]]\nname = "dump"\n{DUMP}\n')
    first = swarm("run", "t.toml", "--output", "quiet", env={**clean_env(), **SAVED, "FAIL": "1"})
    assert first.code == 0, first
    (swarm.cwd / "got").unlink()
    again = swarm("retry", swarm.latest().name, "dump", "--output", "quiet", env=clean_env())
    assert again.code == 0 and "Traceback" not in again.stderr, again
    got = got_env(swarm.cwd)
    assert {k: got.get(k) for k in SAVED} == SAVED  # the run's own environment, not retry's
    assert json.loads(swarm("status", "--json", swarm.latest().name).stdout)["tasks"][0]["attempts"] == 2
