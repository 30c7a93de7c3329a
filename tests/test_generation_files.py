"""A generation's files (generation_files): each one written and read back, the bytes on disk
as runs have always written them, and files that are empty, torn or garbled reading as absent
or as a clear value — never as an exception."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from swarmtest import wait_until

from zellij_swarm.records import generation_files as gf
from zellij_swarm.records import rundir
from zellij_swarm.records.rundir import RunPaths
from zellij_swarm.worker import wrapper

T0 = 1_800_000_000.0


@pytest.fixture
def run(tmp_path: Path) -> RunPaths:
    return RunPaths(tmp_path / "runs" / "20260511T101500-abcd")


@pytest.fixture
def gen(run: RunPaths) -> gf.GenPaths:
    paths = run.gen(2, 3)
    paths.dir.mkdir(parents=True)
    return paths


def stamp(path: Path, at: float) -> None:
    os.utime(path, (at, at))


def test_the_names_are_the_files_runs_have(run: RunPaths) -> None:
    paths = run.gen(2, 3)
    assert paths.dir == run.dir / "slots" / "slot-2" / "gen-3"
    assert {p.name for p in (paths.wrapper, paths.claim, paths.heartbeat, paths.output, paths.exit_sidecar,
                             paths.exit_record, paths.kill, paths.artifacts)} == \
        {"wrapper.sh", "claim", "heartbeat.jsonl", "output.log", "exit", "exit.json", "kill", "artifacts"}


# ----- written, then read back ------------------------------------------------------------

def test_wrapper_header_round_trip(gen: gf.GenPaths) -> None:
    assert gf.read_wrapper_header(gen) is None
    who = wrapper.WorkerIdentity("20260511T101500-abcd", "name\nwith a newline", "t17", 2, 3, 4)
    rundir.write_new(gen.wrapper, wrapper.render(gen, who, cmd="true", argv=None, cwd="/", env={}), mode=0o700)
    assert gf.read_wrapper_header(gen) == ("t17", 4)


def test_supervisor_claim_round_trip(gen: gf.GenPaths) -> None:
    assert gf.read_claim(gen) is None and gf.claim_owner(gen) is None and gf.started_at(gen) is None
    assert gf.take_claim(gen) is True
    assert gf.take_claim(gen) is False
    assert gen.claim.read_bytes() == b"supervisor\n"
    claim = gf.read_claim(gen)
    assert claim is not None and claim.by_supervisor and claim.pid is None
    assert claim.at == gf.started_at(gen) == os.stat(gen.claim).st_mtime
    assert gf.claim_owner(gen) == gf.SUPERVISOR and gf.wrapper_pid(gen) is None


def test_the_supervisor_claim_appears_whole_and_leaves_no_draft(gen: gf.GenPaths) -> None:
    # A claim never exists empty on the supervisor's side: one killed midway leaves a draft
    # beside it, which the next claim overwrites, and never an empty claim.
    (gen.dir / gf.CLAIM_DRAFT).write_bytes(b"left by a killed supervisor")
    assert gf.take_claim(gen) is True
    assert sorted(p.name for p in gen.dir.iterdir()) == ["claim"]
    assert gen.claim.read_bytes() == b"supervisor\n"


def test_a_symlink_where_the_claim_goes_is_a_claim_and_never_followed(gen: gf.GenPaths, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    gen.claim.symlink_to(target)
    assert gf.take_claim(gen) is False
    assert not target.exists()


@pytest.mark.parametrize(("data", "taken"), [(b"", True), (b"garbled", True), (b"123\n", False),
                                             (b"supervisor\n", False), (None, False)])
def test_only_a_claim_naming_no_owner_is_taken_over(gen: gf.GenPaths, data: bytes | None, taken: bool) -> None:
    if data is not None:
        gen.claim.write_bytes(data)
    assert gf.take_unwritten_claim(gen) is taken
    assert gen.claim.exists() is (data is not None)
    if taken:
        assert gen.claim.read_bytes() == b"supervisor\n"
        assert sorted(p.name for p in gen.dir.iterdir()) == ["claim"]


def test_an_abandoned_claim_is_taken_only_when_no_process_runs_its_wrapper(gen: gf.GenPaths) -> None:
    from zellij_swarm.worker import procs

    gen.claim.write_bytes(b"")
    # a headless wrapper has its generation's directory as an argument; a pane's, its wrapper file
    for arg in (gen.dir, gen.wrapper):
        writer = subprocess.Popen(["sh", "-c", "read _", str(arg)], stdin=subprocess.PIPE)
        try:  # found once it has exec'd (a wrapper creates its claim after that)
            wait_until(lambda: procs.wrapper_process(gen) == writer.pid, what="the writer's exec")  # noqa: B023
            assert procs.take_abandoned_claim(gen) is False
        finally:
            writer.communicate(b"\n", timeout=10)
    assert procs.wrapper_process(gen) is None
    assert procs.take_abandoned_claim(gen) is True
    assert gf.read_claim(gen).by_supervisor  # type: ignore[union-attr]


def test_exit_record_round_trip(gen: gf.GenPaths) -> None:
    gen.claim.write_text("4242\n")
    stamp(gen.claim, T0)
    assert gf.exit_facts(gen) is None
    gen.exit_sidecar.write_text("143\n")
    stamp(gen.exit_sidecar, T0 + 2)
    rec = gf.exit_facts(gen)
    assert rec == gf.ExitRecord(143, "SIGTERM", T0, T0 + 2, 4242)
    assert gf.exit_facts(gen) == rec and gf.read_exit_record(gen) is None  # no exit.json: the log has it
    assert gf.ended_at(gen) == (T0 + 2, False)


def test_missing_exit_record_round_trip(gen: gf.GenPaths) -> None:
    gen.claim.write_text("4242\n")
    stamp(gen.claim, T0)
    rec = gf.record_missing_exit(gen, reason="no_exit_record", code=None, signal="SIGKILL", ended_at=T0 + 5)
    assert gf.read_exit_record(gen) == rec == gf.ExitRecord(None, "SIGKILL", T0, T0 + 5, 4242, "no_exit_record")
    assert gf.exit_facts(gen) == rec
    assert gf.ended_at(gen) == (T0 + 5, True)  # only the supervisor's record says so


def test_kill_reason_round_trip(gen: gf.GenPaths) -> None:
    assert gf.kill_reason(gen) is None
    gf.write_kill_reason(gen, "idle_timeout")
    assert gen.kill.read_bytes() == b"idle_timeout\n"
    assert gf.kill_reason(gen) == "idle_timeout"


def test_a_wrapper_writes_what_the_readers_read(gen: gf.GenPaths) -> None:
    """The shell template and the readers agree on every name and line, through a real run."""
    who = wrapper.WorkerIdentity("r", "t", "t1", 2, 3, 1)
    rundir.write_new(gen.wrapper, wrapper.render(gen, who, cmd="echo out; exit 3", argv=None, cwd="/", env={}),
                     mode=0o700)
    proc = subprocess.run(["/bin/sh", str(gen.wrapper)], timeout=30)
    assert proc.returncode == 3
    claim = gf.read_claim(gen)
    assert claim is not None and claim.pid is not None and gen.claim.read_bytes() == f"{claim.pid}\n".encode()
    assert gf.heartbeat_started(gen) == {"pid": claim.pid, "pane_id": None, "node": None, "step": None}
    assert gen.heartbeat.read_text().splitlines() == [
        json.dumps({"event": "started", "pid": claim.pid, "pane_id": None}, separators=(",", ":")),
        '{"event":"exited","code":3}']
    assert gen.exit_sidecar.read_bytes() == b"3\n" and gf.read_sidecar(gen) == (3, None)
    assert gen.output.read_bytes() == b"out\n"
    rec = gf.exit_facts(gen)
    assert rec is not None and (rec.code, rec.pid, rec.started_at) == (3, claim.pid, claim.at)
    info = gf.read_gen(gen)  # the renderers read the sidecar, as the supervisor does
    assert info.done and info.heartbeat_seen and info.exit_code == 3 and info.ended_at == rec.ended_at


# ----- empty, torn and garbled files ------------------------------------------------------

def test_a_zero_length_sidecar_is_absent(gen: gf.GenPaths) -> None:
    gen.exit_sidecar.write_bytes(b"")
    assert gf.read_sidecar(gen) is None and gf.exit_facts(gen) is None and gf.ended_at(gen) is None
    assert not gen.exit_record.exists()


def test_a_zero_length_exit_record_is_absent(gen: gf.GenPaths) -> None:
    gen.exit_record.write_bytes(b"")
    assert gf.read_exit_record(gen) is None and gf.ended_at(gen) is None and not gf.read_gen(gen).done
    gen.exit_sidecar.write_text("0\n")
    assert gf.exit_facts(gen).code == 0  # read from the sidecar


@pytest.mark.parametrize("data, expected", [
    (b"1", None),  # torn: the printf has not finished
    (b"- cwd_missing\n", (None, "cwd_missing")),
    (b"--5\n", (None, gf.EXIT_GARBLED)),  # what no wrapper writes: a reason of ours, never its text
    (b"abc def\n", (None, gf.EXIT_GARBLED)),
    (b"\xff\xfe\n", (None, gf.EXIT_GARBLED)),
    (b"\n", (None, gf.EXIT_GARBLED)),
])
def test_garbled_sidecars(gen: gf.GenPaths, data: bytes, expected: tuple | None) -> None:
    gen.exit_sidecar.write_bytes(data)
    assert gf.read_sidecar(gen) == expected


@pytest.mark.parametrize("data", [b'{"code": 0, "sig', b"[1, 2]\n", b"\xff\xfe\n", b"null\n", b'"text"\n'])
def test_a_garbled_exit_record_is_absent(gen: gf.GenPaths, data: bytes) -> None:
    gen.exit_record.write_bytes(data)
    assert gf.read_exit_record(gen) is None and gf.ended_at(gen) is None
    assert not gf.read_gen(gen).done


def test_exit_record_fields_of_the_wrong_type_read_as_none(gen: gf.GenPaths) -> None:
    gen.exit_record.write_text(json.dumps({"code": "3", "signal": 9, "started_at": True, "ended_at": "later",
                                           "pid": 1.5, "reason": ["x"]}))
    assert gf.read_exit_record(gen) == gf.ExitRecord(None, None, None, None, None, None)


@pytest.mark.parametrize("data", [
    b'{"event":"started","pid":1',  # torn
    b"not json\n",
    b"[1]\n",
    b'{"event":"exited","code":0}\n',
    b"\xff\xfe\n",
    b"",
])
def test_a_garbled_launch_heartbeat_is_absent(gen: gf.GenPaths, data: bytes) -> None:
    gen.heartbeat.write_bytes(data)
    assert gf.heartbeat_started(gen) is None
    assert not gf.read_gen(gen).heartbeat_seen


def test_launch_heartbeat_fields_of_the_wrong_type_read_as_none(gen: gf.GenPaths) -> None:
    gen.heartbeat.write_text('{"event":"started","pid":"12","pane_id":7}\n')
    assert gf.heartbeat_started(gen) == {"pid": None, "pane_id": None, "node": None, "step": None}


@pytest.mark.parametrize("data, owner, pid", [
    (b"", None, None),  # created, the pid not written yet
    (b"123\n", "123", 123),
    (b"12x\n", "12x", None),
    (b"\xff\xfe\n", "\ufffd\ufffd", None),
])
def test_garbled_claims_are_claims_without_a_pid(gen: gf.GenPaths, data: bytes, owner: str | None,
                                                 pid: int | None) -> None:
    gen.claim.write_bytes(data)
    claim = gf.read_claim(gen)
    assert claim is not None and (claim.owner, claim.pid, claim.by_supervisor) == (owner, pid, False)
    assert gf.take_claim(gen) is False


def test_garbled_wrapper_and_kill_files(gen: gf.GenPaths) -> None:
    gen.wrapper.write_bytes(b"#!/bin/sh\n\xff\n")
    assert gf.read_wrapper_header(gen) is None
    gen.kill.write_bytes(b"\xfftimeout\n")
    assert gf.kill_reason(gen) == "\ufffdtimeout"
    gen.kill.write_bytes(b"\n")
    assert gf.kill_reason(gen) is None


@pytest.mark.parametrize("plant", ["symlink", "directory"])
def test_a_launch_heartbeat_its_worker_replaced_is_none_to_a_run_in_progress(gen: gf.GenPaths, tmp_path: Path,
                                                                           plant: str) -> None:
    """A tmux worker that put a symlink in its heartbeat's place once stopped its supervisor
    (UnsafeRecord from the follow of its files), the run left interrupted, when the look at
    the heartbeat came after it (2 runs in 18). The run reads no heartbeat there and goes on;
    resume and proof still report such a record (``heartbeat_started`` raises)."""
    victim = tmp_path / "victim"
    victim.write_text('{"event":"started","pid":1,"pane_id":"%1"}\n')
    if plant == "symlink":
        gen.heartbeat.symlink_to(victim)
    else:
        gen.heartbeat.mkdir()
    assert gf.launch_heartbeat(gen) is None
    with pytest.raises(OSError):
        gf.heartbeat_started(gen)


def test_unreadable_files_raise_but_the_renderers_show_what_they_can(gen: gf.GenPaths) -> None:
    """A directory where a file belongs is not a value: the proof and resume report it. The
    renderers read on."""
    gen.claim.write_text("4242\n")
    stamp(gen.claim, T0)
    gen.heartbeat.mkdir()
    gen.exit_record.mkdir()
    with pytest.raises(OSError):
        gf.heartbeat_started(gen)
    info = gf.read_gen(gen)
    assert (info.started_at, info.done, info.heartbeat_seen) == (T0, False, False)
    gen.claim.unlink()
    gen.claim.mkdir()
    with pytest.raises(OSError):
        gf.read_claim(gen)


# ----- a run directory written before generation_files ------------------------------------

def write_old_generation(paths: gf.GenPaths) -> None:
    """A finished generation exactly as earlier versions wrote it, byte for byte."""
    paths.dir.mkdir(parents=True)
    (paths.dir / "artifacts").mkdir()
    (paths.dir / "wrapper.sh").write_text(
        "# zellij-swarm generation wrapper: run 20260511T101500-abcd, task id t9, slot 1, generation 2, "
        "attempt 2 (generated; do not edit)\n_zsw_d='/somewhere'\n")
    (paths.dir / "claim").write_text("31337\n")
    stamp(paths.dir / "claim", T0)
    (paths.dir / "heartbeat.jsonl").write_text('{"event":"started","pid":31337,"pane_id":"terminal_7"}\n'
                                               '{"event":"exited","code":1}\n')
    (paths.dir / "output.log").write_text("boom\n")
    (paths.dir / "kill").write_text("timeout\n")
    (paths.dir / "exit").write_text("143\n")
    stamp(paths.dir / "exit", T0 + 9)
    (paths.dir / "exit.json").write_text(f'{{"code":143,"signal":"SIGTERM","started_at":{T0},"ended_at":{T0 + 9},'
                                         f'"pid":31337}}\n')


def test_an_old_run_directory_still_reads(run: RunPaths) -> None:
    old = run.gen(1, 2)
    write_old_generation(old)
    assert [g.gen for g in run.generations(1)] == [2]
    assert gf.read_wrapper_header(old) == ("t9", 2)
    claim = gf.read_claim(old)
    assert claim is not None and (claim.at, claim.pid) == (T0, 31337)
    assert gf.heartbeat_started(old) == {"pid": 31337, "pane_id": "terminal_7", "node": None, "step": None}
    assert gf.read_sidecar(old) == (143, None)
    expected = gf.ExitRecord(143, "SIGTERM", T0, T0 + 9, 31337)
    before = old.exit_record.read_bytes()
    assert gf.read_exit_record(old) == gf.exit_facts(old) == expected
    assert old.exit_record.read_bytes() == before  # read, never rewritten
    assert gf.kill_reason(old) == "timeout"
    assert gf.ended_at(old) == (T0 + 9, False)
    info = gf.GenReader(run).newest(1)
    assert info is not None and info.paths == old
    assert (info.started_at, info.ended_at, info.exit_code, info.signal, info.pid, info.done, info.heartbeat_seen) == \
        (T0, T0 + 9, 143, "SIGTERM", 31337, True, True)


# ----- the renderers' cached reading ------------------------------------------------------

def test_gen_reader_follows_the_newest_generation_and_keeps_final_facts(run: RunPaths) -> None:
    reader = gf.GenReader(run)
    assert reader.newest(1) is None  # no slot directory yet
    first = run.gen(1, 1)
    first.dir.mkdir(parents=True)
    info = reader.newest(1)
    assert info is not None and info.paths == first and not info.heartbeat_seen and info.started_at is None
    first.claim.write_text("77\n")
    stamp(first.claim, T0)
    first.heartbeat.write_text('{"event":"started","pid":77,"pane_id":null}\n')
    info = reader.newest(1)
    assert (info.started_at, info.heartbeat_seen, info.pid, info.done) == (T0, True, 77, False)
    first.heartbeat.write_text("rewritten\n")  # seen once is seen: never read again
    assert reader.newest(1).heartbeat_seen
    gf.record_missing_exit(first, reason="no_exit_record", code=None, signal=None, ended_at=T0 + 1)
    done = reader.newest(1)
    assert done.done and done.ended_at == T0 + 1
    first.exit_record.unlink()
    assert reader.newest(1) is done  # a finished generation's facts are final
    second = run.gen(1, 2)
    second.dir.mkdir()
    info = reader.newest(1)
    assert info is not None and info.paths == second and not info.done


# ----- folding ------------------------------------------------------------------------------

def test_folding_a_trivial_generation_leaves_nothing(run: RunPaths, gen: gf.GenPaths) -> None:
    who = wrapper.WorkerIdentity("r", "t", "t1", 2, 3, 1)
    run.dir.mkdir(parents=True, exist_ok=True)
    run.worker_script.write_text(wrapper.run_script("r"))
    args = wrapper.arguments(gen, who, cmd="true", argv=None, cwd="/", env={})
    assert subprocess.run(wrapper.headless_argv(run.worker_script, args), timeout=30).returncode == 0
    assert {p.name for p in gen.dir.iterdir()} == {"claim", "heartbeat.jsonl", "output.log", "stderr.log", "exit"}
    gen.artifacts.mkdir()
    gf.fold(gen)
    assert not gen.dir.exists()


@pytest.mark.parametrize("keeps", ["output.log", "heartbeat.jsonl", "artifacts", "executor.log"])
def test_folding_keeps_what_the_worker_wrote(gen: gf.GenPaths, keeps: str) -> None:
    """Output, heartbeat lines of the worker's own, the artifacts it made and what srun said
    stay; the claim, sidecar, records and kill reason go (the event log has them), the claim
    first, and so do empty logs (a headless Slurm step always opens its executor log)."""
    gen.claim.write_text("4242\n")
    gen.exit_sidecar.write_text("0\n")
    gen.exit_record.write_text("{}\n")
    gen.kill.write_text("timeout\n")
    gen.heartbeat.write_text('{"event":"started","pid":4242,"pane_id":null}\n{"event":"exited","code":0}\n')
    gen.output.write_bytes(b"")
    executor_log = gen.dir / gf.EXECUTOR_LOG
    executor_log.write_bytes(b"")
    gen.artifacts.mkdir()
    if keeps == "executor.log":
        executor_log.write_text("srun: error: n1: task 0: Exited with exit code 3\n")
    elif keeps == "output.log":
        gen.output.write_text("hello\n")
    elif keeps == "heartbeat.jsonl":
        gen.heartbeat.write_text('{"event":"started","pid":4242,"pane_id":null}\n{"event":"progress"}\n'
                                 '{"event":"exited","code":0}\n')
    else:
        (gen.artifacts / "result.txt").write_text("42\n")
    gf.fold(gen)
    assert {p.name for p in gen.dir.iterdir()} == {keeps}


def test_the_run_wrapper_and_a_panes_own_wrapper_run_the_same_way(run: RunPaths, tmp_path: Path) -> None:
    """One template: the run's worker.sh with arguments, and a generation's own wrapper.sh
    with them inside, give a worker the same argv, environment, cwd and records."""
    run.dir.mkdir(parents=True)
    run.worker_script.write_text(wrapper.run_script("r"))
    hostile = ["a b", "$HOME", "'q'", '"d"', "new\nline", "--", "-x", "*", ""]
    results = []
    for n, own in enumerate((False, True), 1):
        gen = run.gen(1, n)
        gen.dir.mkdir(parents=True)
        who = wrapper.WorkerIdentity("r", "t\n'x'", "t1", 1, n, 1)
        what = dict(cmd=None, argv=("python3", "-c", "import os, sys, json; print(json.dumps([sys.argv[1:], "
                                    "os.getcwd(), os.environ['K'], os.environ['ZELLIJ_SWARM_TASK']]))", *hostile),
                    cwd=str(tmp_path), env={"K": "v -- $x\n"})
        if own:
            gen.wrapper.write_text(wrapper.render(gen, who, **what))  # type: ignore[arg-type]
            argv: tuple[str, ...] = ("/bin/sh", str(gen.wrapper))
        else:
            argv = wrapper.headless_argv(run.worker_script, wrapper.arguments(gen, who, **what))  # type: ignore[arg-type]
        assert subprocess.run(argv, timeout=30).returncode == 0
        results.append(json.loads(gen.output.read_text()))
    assert results[0] == results[1] == [hostile, str(tmp_path), "v -- $x\n", "t\n'x'"]


def test_a_kill_is_recorded_in_no_directory_that_is_gone(gen):
    """Every writer of a kill — the supervisor's ladder, a ``cancel`` with no supervisor, a
    resume's — may come after the generation's directory went (folded once a resume collected
    it, or removed by its worker): nothing is recorded, and nothing made in its place; a
    directory that is there takes the record."""
    gf.write_kill_reason(gen, "cancelled_by_user", sent_at=10.0)
    assert gf.kill_reason(gen) == "cancelled_by_user" and gf.kill_sent_at(gen) == 10.0
    for name in os.listdir(gen.dir):
        os.unlink(gen.dir / name)
    os.rmdir(gen.dir)
    gf.write_kill_reason(gen, "cancelled_by_user", sent_at=11.0)
    assert not gen.dir.exists()
