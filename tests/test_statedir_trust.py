"""What another user could plant in a run directory is never trusted nor followed (issue 22,
item 8). ``slots/`` and each slot directory are held to the rule ``inbox/`` is (yours, writable
by nobody else, not a symlink), and each generation directory too for the commands that act on
a run; every record and log inside a run is opened without following a symlink; a garbled
exit sidecar is a named reason of ours, never its text; a state directory under a parent
anyone may write without the sticky bit is refused (ssh's rule for the path above ``~/.ssh``)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from swarmtest import Swarm, wait_until

from zellij_swarm.records import generation_files
from zellij_swarm.records.rundir import RunPaths, UnsafeRecord, read_json


def ended_first_task(swarm: Swarm, run: Path) -> Path:
    """The interrupted run's first generation, once its wrapper has committed its exit."""
    gen = run / "slots/slot-1/gen-1"
    wait_until(lambda: (gen / "exit").is_file() and (gen / "exit").read_bytes().endswith(b"\n"), what="its exit")
    return gen


@pytest.mark.parametrize("where, mode", [("slots", 0o770), ("slots", 0o707), ("slots/slot-1", 0o777),
                                         ("slots/slot-1/gen-1", 0o770)])
def test_resume_refuses_a_run_whose_slots_others_could_write(swarm: Swarm, interrupted_run: Path, where: str,
                                                              mode: int) -> None:
    ended_first_task(swarm, interrupted_run)
    path = interrupted_run / where
    os.chmod(path, mode)
    res = swarm("resume", interrupted_run.name)
    assert (res.code, res.stderr) == (2, f"zellij-swarm: error: run record {path} is writable by group or others "
                                         f"(mode {mode:04o}): another user could change what this run runs; check "
                                         f"it, then make it private: chmod -R go-w {interrupted_run}\n")
    status = swarm("status", interrupted_run.name)
    if where == "slots/slot-1/gen-1":  # a reader does not look at every generation: 10,000 of them
        assert "warning" not in status.stderr
    else:
        assert status.stderr.startswith(f"zellij-swarm: warning: run record {path} is writable by group or others")


def test_resume_refuses_a_slot_directory_that_is_a_symlink(swarm: Swarm, interrupted_run: Path,
                                                           tmp_path: Path) -> None:
    ended_first_task(swarm, interrupted_run)
    planted = tmp_path / "elsewhere"
    planted.mkdir(mode=0o700)
    (interrupted_run / "slots/slot-2").symlink_to(planted)
    res = swarm("resume", interrupted_run.name)
    assert res.code == 2
    assert res.stderr.startswith(f"zellij-swarm: error: run record {interrupted_run}/slots/slot-2 is a symbolic link")


@pytest.mark.parametrize("plant", ["symlink", "garbled"])
def test_a_planted_exit_sidecar_is_neither_followed_nor_taken_as_a_reason(swarm: Swarm, interrupted_run: Path,
                                                                           tmp_path: Path, plant: str) -> None:
    gen = ended_first_task(swarm, interrupted_run)
    victim = tmp_path / "victim"
    victim.write_text("- precious words\n")
    os.utime(victim, (1, 1))  # long before the task started: its time would give a negative duration
    (gen / "exit").unlink()
    if plant == "symlink":
        (gen / "exit").symlink_to(victim)
    else:
        (gen / "exit").write_text("- precious words\n")
    res = swarm("resume", interrupted_run.name)
    assert res.code == 1, res.stderr
    row = swarm.tasks(interrupted_run)["a"]
    assert (row["status"], row["reason"], row["exit_code"]) == ("unknown", "exit_garbled", None)
    assert victim.read_text() == "- precious words\n" and victim.stat().st_mtime == 1
    assert "precious" not in (interrupted_run / "events.jsonl").read_text()
    assert swarm.tasks(interrupted_run)["b"]["status"] == "succeeded"


@pytest.mark.parametrize("raw, parsed", [(b"0\n", (0, None)), (b"137\n", (137, None)), (b"- cwd_missing\n",
                                         (None, "cwd_missing")), (b"- precious\n", (None, "exit_garbled")),
                                         (b"hello world\n", (None, "exit_garbled")), (b"12 extra\n",
                                         (None, "exit_garbled")), (b"\xff\n", (None, "exit_garbled")),
                                         (b"1", None), (b"", None)])
def test_an_exit_sidecar_is_read_strictly(tmp_path: Path, raw: bytes, parsed: tuple[int | None, str | None] | None
                                          ) -> None:
    gen = RunPaths(tmp_path).gen(1, 1)
    gen.dir.mkdir(parents=True)
    gen.exit_sidecar.write_bytes(raw)
    assert generation_files.read_sidecar(gen) == parsed


def test_records_are_read_without_following_a_symlink(tmp_path: Path) -> None:
    gen = RunPaths(tmp_path).gen(1, 1)
    gen.dir.mkdir(parents=True)
    victim = tmp_path / "victim.json"
    victim.write_text('{"code": 0}\n')
    for name in ("claim", "heartbeat.jsonl", "wrapper.sh", "exit.json"):
        (gen.dir / name).symlink_to(victim)
    for read in (generation_files.read_claim, generation_files.heartbeat_started,
                 generation_files.read_wrapper_header):
        with pytest.raises(UnsafeRecord, match=f"{gen.dir}/.* is a symbolic link"):
            read(gen)
    with pytest.raises(UnsafeRecord):
        read_json(gen.exit_record)
    assert issubclass(UnsafeRecord, OSError)  # readers that skip an unreadable record skip it too


@pytest.mark.parametrize("size", [0, 3, 200_000])
def test_a_record_is_read_whole_or_up_to_its_limit(tmp_path: Path, size: int) -> None:
    """``read_record`` reads with ``os.read`` (no file object): all of it, or at most a limit,
    across several reads for a large one."""
    from zellij_swarm.records.rundir import read_record

    data = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    (tmp_path / "r").write_bytes(data)
    for limit in (-1, 0, 1, 3, 4, 65_536, 65_537, 300_000):
        assert read_record(tmp_path / "r", limit) == (data if limit < 0 else data[:limit]), limit
    with pytest.raises(FileNotFoundError):
        read_record(tmp_path / "none")


def test_logs_does_not_follow_a_symlinked_output_log(swarm: Swarm, tmp_path: Path) -> None:
    swarm.write("t.txt", "echo mine\n")
    assert swarm("run", "t.txt", "--output", "quiet").code == 0
    run = swarm.latest()
    log = run / "slots/slot-1/gen-1/output.log"
    secret = tmp_path / "secret"
    secret.write_text("someone else's\n")
    log.unlink()
    log.symlink_to(secret)
    res = swarm("logs", run.name, "task-1")
    assert res.code == 1 and "someone else's" not in res.stdout
    assert res.stderr == (f"zellij-swarm: error: {log} is a symbolic link: a run's records are never read through "
                          f"one (another user could have planted it); remove it, or the run ({run})\n")


@pytest.mark.parametrize("mode, refused", [(0o777, True), (0o773, True), (0o1777, False), (0o775, False)])
def test_a_state_dir_under_a_parent_anyone_may_write_is_refused(swarm: Swarm, mode: int, refused: bool) -> None:
    parent = swarm.cwd / "shared"
    parent.mkdir()
    os.chmod(parent, mode)
    swarm.write("t.txt", "true\n")
    res = swarm("run", "t.txt", "--output", "quiet", "--state-dir", "shared/state")
    if not refused:
        assert res.code == 0, res.stderr
        return
    assert (res.code, res.stderr) == (
        2, f"zellij-swarm: error: state directory {parent}/state is in {parent}, which anyone may write (mode "
           f"{stat.S_IMODE(mode):04o}, no sticky bit): another user could put a state directory of theirs in "
           f"its place; use a --state-dir elsewhere\n")
    assert not (parent / "state").exists()
