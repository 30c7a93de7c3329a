"""The generation wrapper: claim exclusivity, hostile names, exit records."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from zellij_swarm.records import generation_files, rundir
from zellij_swarm.worker import wrapper

HOSTILE = "na'me\"\n$(touch PWNED)`touch PWNED2`~$HOME {}[];|&"


def make(tmp_path: Path, **kw) -> generation_files.GenPaths:
    gen = generation_files.GenPaths(tmp_path / "gen-1", 1, 1)
    gen.dir.mkdir()
    gen.artifacts.mkdir()
    args = dict(cmd="echo \"$ZELLIJ_SWARM_TASK\"", argv=None, cwd=str(tmp_path), env={})
    args.update(kw)
    who = wrapper.WorkerIdentity("run-1", HOSTILE, "t1", 1, 1, 1)
    rundir.write_new(gen.wrapper, wrapper.render(gen, who, **args), mode=0o700)
    return gen


def sh(gen: generation_files.GenPaths, *extra: str) -> int:
    return subprocess.run(["/bin/sh", str(gen.wrapper), *extra], cwd=gen.dir, timeout=30).returncode


def test_hostile_name_reaches_the_worker_verbatim_and_injects_nothing(tmp_path):
    gen = make(tmp_path)
    assert sh(gen) == 0
    assert gen.output.read_text() == HOSTILE + "\n"
    assert not list(tmp_path.rglob("PWNED*"))
    assert "PWNED" not in gen.wrapper.read_text().splitlines()[0]


def test_a_generation_runs_at_most_once(tmp_path):
    gen = make(tmp_path, cmd="echo ran >> " + str(tmp_path / "ledger"))
    assert sh(gen) == 0
    assert sh(gen) == 0  # claim taken: exits without running
    assert (tmp_path / "ledger").read_text() == "ran\n"
    assert len(gen.heartbeat.read_text().splitlines()) == 2


def test_supervisor_claim_blocks_the_wrapper_unless_handed_over(tmp_path):
    gen = make(tmp_path, cmd="echo ran")
    assert generation_files.take_claim(gen) is True
    assert generation_files.take_claim(gen) is False
    assert sh(gen) == 0 and not gen.output.exists()
    assert sh(gen, "claimed") == 0 and gen.output.read_text() == "ran\n"
    assert generation_files.wrapper_pid(gen) is not None


def test_exit_record_codes_signals_and_times(tmp_path):
    gen = make(tmp_path, cmd=None, argv=("sh", "-c", "kill -TERM $$"))
    assert sh(gen) == 143
    rec = generation_files.exit_facts(gen)
    assert (rec.code, rec.signal) == (143, "SIGTERM")
    assert rec.started_at <= rec.ended_at and rec.pid == generation_files.wrapper_pid(gen)
    assert not gen.exit_record.exists()  # the record goes to the event log, not to a file
    assert json.loads(gen.heartbeat.read_text().splitlines()[-1]) == {"event": "exited", "code": 143}


def test_partial_sidecar_is_not_a_record(tmp_path):
    gen = make(tmp_path)
    gen.exit_sidecar.write_text("1")  # no newline yet: still being written
    assert generation_files.exit_facts(gen) is None
    gen.exit_sidecar.write_text("1\n")
    assert generation_files.exit_facts(gen).code == 1


def test_missing_cwd_is_recorded_not_run(tmp_path):
    gen = make(tmp_path, cwd=str(tmp_path / "nope"))
    assert sh(gen) == 1
    rec = generation_files.exit_facts(gen)
    assert (rec.code, rec.reason) == (None, "cwd_missing")
    assert "cwd does not exist" in gen.output.read_text()


def test_a_worker_the_shell_cannot_fork_is_recorded_as_never_started(tmp_path):
    """No process to be had (RLIMIT_NPROC, a full process table): the shell's "Cannot fork"
    ends the wrapper on the spot, status 2, with no exit record — read as the worker's own
    exit 2 (and as a state directory that could not be written). Its EXIT trap, armed around
    the fork only, records ``- spawn_failed``: the worker never started."""
    import os
    import resource
    import shutil
    import tempfile

    root = Path(tempfile.mkdtemp(dir="/tmp"))  # a place another user can reach (tmp_path is private)
    try:
        root.chmod(0o755)
        gen = make(root, cmd="echo ran >> " + str(root / "ledger"))
        nobody = 65534

        def no_more_processes() -> None:
            if os.getuid() == 0:  # root's processes are never counted against it
                os.setgroups([])
                os.setgid(nobody)
                os.setuid(nobody)
            resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))

        if os.getuid() == 0:
            for path in (gen.dir, gen.artifacts, gen.wrapper):
                os.chown(path, nobody, nobody)
        res = subprocess.run(["/bin/sh", str(gen.wrapper)], cwd=gen.dir, timeout=30, preexec_fn=no_more_processes,
                             capture_output=True, text=True)
        assert res.returncode == 2 and "fork" in res.stderr.lower(), res
        assert not (root / "ledger").exists()
        rec = generation_files.exit_facts(gen)
        assert (rec.code, rec.reason) == (None, "spawn_failed")
        # a wrapper that forked records its worker's status, the trap disarmed: its own exit 2 is that
        gen = make(tmp_path, cmd="exit 2")
        assert sh(gen) == 2 and generation_files.read_sidecar(gen) == (2, None)
    finally:
        shutil.rmtree(root)


def test_a_cwd_that_is_a_file_is_said_to_be_one_it_cannot_enter(tmp_path):
    """``cwd`` naming a file was reported "cwd does not exist": it does."""
    (tmp_path / "a-file").write_text("")
    gen = make(tmp_path, cwd=str(tmp_path / "a-file"))
    assert sh(gen) == 1
    assert generation_files.exit_facts(gen).reason == "cwd_missing"  # no directory there to run in
    assert gen.output.read_text() == (f"zellij-swarm: cannot enter cwd (not a directory, or no permission): "
                                      f"{tmp_path / 'a-file'}\n")


def test_the_relay_s_mark_of_the_worker_s_end_counts_only_where_a_relay_may_have_run(tmp_path):
    """A pane's worker under the pty relay ended when the relay marked it (``worker-ended``),
    which may be before its wrapper's sidecar; a generation never written for a pane had no
    relay, and the supervisor does not look for a mark (``relayed=False``)."""
    gen = make(tmp_path)
    assert sh(gen) == 0
    ended = generation_files.exit_facts(gen).ended_at
    mark = gen.dir / generation_files.WORKER_ENDED
    mark.touch()
    os.utime(mark, (ended - 5, ended - 5))
    assert generation_files.exit_facts(gen).ended_at == ended - 5
    assert generation_files.exit_facts(gen, relayed=False).ended_at == ended
