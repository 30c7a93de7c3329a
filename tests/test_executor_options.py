"""The Slurm executor's options that need no cluster (issue 23 §8, §10, §11): free-form ``srun``
options (``slurm.extra``, ``--slurm-extra``) and what they may not say, Slurm time limits, the
flags' help, ``doctor``'s settings, a Slurm table under the local executor, and the reading of
the nodes' facts that refuses a request no node can grant (``worker.slurm_nodes``). The same
against a real cluster: tests/test_slurm_config.py."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from swarmtest import Swarm, clean_env

from zellij_swarm import cli, exc
from zellij_swarm.commands import doctor
from zellij_swarm.config import settings, slurm
from zellij_swarm.engine import remote
from zellij_swarm.records import generation_files, rundir
from zellij_swarm.worker import slurm_nodes


@pytest.mark.parametrize("words", [
    "--ntasks=2", "--ntasks 2", "-n2", "-n 2", ["-n", "2"], "--nodes=2", "-N2", "-N 2", "--nodes=1-2", "-N1-3",
])
def test_extra_options_asking_for_more_than_one_task_or_node_are_refused(words: object) -> None:
    with pytest.raises(slurm.Invalid, match="one task on one node per step"):
        slurm.parse_table({"extra": words})


@pytest.mark.parametrize(("words", "error"), [
    ("--job-name=x", "--job-name is its own"), ("-J x", "--job-name is its own"), ("-Jx", "--job-name is its own"),
    ("--pty", "--pty is its own"), ("--output=o.log", "--output is its own"), ("-o o.log", "--output is its own"),
    ("--error=e", "--error is its own"), ("--export=NONE", "--export is its own"),
    ("-c 4", r"slurm.cpus \(--slurm-cpus\) sets it"), ("--mem=4G", r"slurm.mem \(--slurm-mem\) sets it"),
    ("--ntas=2", "written in full"), ("--job=x", "written in full"),
    ("foo", "'foo' would be srun's command"), ("--exclusive hostname", "'hostname' after '--exclusive'"),
    ("-l hostname", "'hostname' after '-l'"), ("'--exclusive", "cannot split it"), ([], "srun options"),
    ([1], "srun options"),
])
def test_extra_options_the_executor_or_the_table_owns_are_refused(words: object, error: str) -> None:
    with pytest.raises(slurm.Invalid, match=error):
        slurm.parse_table({"extra": words})


def test_extra_options_go_after_the_tables_and_a_tasks_own_win() -> None:
    table = slurm.parse_table({"cpus": 2, "extra": ["--exclusive", "--cpu-bind=cores", "-w", "n1", "--ntasks=1"]})
    assert table["extra"] == "--exclusive --cpu-bind=cores -w n1 --ntasks=1"
    assert slurm.srun_options(table) == ["--cpus-per-task=2", "--exclusive", "--cpu-bind=cores", "-w", "n1",
                                         "--ntasks=1"]
    assert slurm.allocation_options(table) == ["--cpus-per-task=2"]  # salloc refuses srun's own options
    assert slurm.parse_table({"extra": "--comment='two words'"})["extra"] == "'--comment=two words'"
    resolved = settings.resolve({"slurm_extra": "--exclusive"}, {})
    assert resolved.slurm == {"extra": "--exclusive"}
    assert settings.Resolved.from_record(resolved.as_record()).slurm_extra == "--exclusive"


@pytest.mark.parametrize(("text", "ok"), [
    ("1:99", False), ("1:59", True), ("1:60:00", False), ("2:59:59", True), ("1-24", False), ("1-23:59:59", True),
    ("1-0:60", False), ("120", True),
])
def test_a_time_limit_has_minutes_and_seconds_below_60(text: str, ok: bool) -> None:
    if ok:
        assert slurm.parse_table({"time": text}) == {"time": text}
    else:
        with pytest.raises(slurm.Invalid, match=r"slurm\.time"):
            slurm.parse_table({"time": text})


@pytest.mark.parametrize(("key", "text"), [("time", "٣٠"), ("time", "٣٠m"), ("cpus", "٤"), ("cpus", "1_0")])
def test_a_slurm_number_is_ascii_digits_as_written(key: str, text: str) -> None:
    """Python's int() and the regular expressions' ``\\d`` take other scripts' digits (and int()
    ``1_0``): such a time went to srun as written, ``--time=٣٠``."""
    with pytest.raises(slurm.Invalid, match=rf"slurm\.{key}"):
        slurm.parse_table({key: text})


def test_slurm_flags_show_what_their_value_is() -> None:
    text = CliRunner().invoke(cli.cli, ["run", "--help"], terminal_width=200).output
    shown = {line.split()[0]: line.split()[1] for line in text.splitlines() if line.strip().startswith("--slurm-")
             and not line.strip().startswith("--slurm-alloc")}
    assert shown.items() >= {"--slurm-partition": "NAME[,NAME]", "--slurm-cpus": "N", "--slurm-mem": "SIZE",
                             "--slurm-gres": "GRES", "--slurm-time": "TIME", "--slurm-constraint": "FEATURES",
                             "--slurm-account": "NAME", "--slurm-qos": "NAME", "--slurm-extra": "'OPTIONS'"}.items()
    assert "MODE" not in shown.values()


def test_doctor_with_the_slurm_executor_lists_it() -> None:
    info = doctor.report(clean_env(), {"executor": "slurm"})
    assert info["settings"]["executor"]["value"] == "slurm"
    assert info["settings"]["executor"]["source"] == "flag --executor"
    assert doctor.report(clean_env(), {"executor": None})["settings"]["executor"]["value"] == "local"


def test_a_slurm_table_with_the_local_executor_is_a_warning(swarm: Swarm) -> None:
    swarm.write("s.toml", '[swarm]\nslurm = { cpus = 2 }\n[[task]]\nname = "a"\ncmd = "true"\n'
                          'slurm = { mem = "1G" }\n[[task]]\nname = "b"\ncmd = "true"\n')
    res = swarm("run", "s.toml", "--backend", "headless", "--output", "quiet")
    assert res.code == 0, res.stderr
    [line] = res.stderr.splitlines()
    assert line.startswith("zellij-swarm: warning: slurm_cpus (file ") and "the slurm table of task 'a'" in line
    assert "ignored, as the executor is local" in line
    assert slurm.ignored({}, []) is None


SINFO = ["n1|gpu|8|4096|avx,intel|gpu:a100:2(S:0-1),mps:100", "n1|debug*|8|4096|avx,intel|gpu:a100:2(S:0-1),mps:100",
         "n2|debug*|16|8192|amd|(null)"]


@pytest.mark.parametrize(("wanted", "problem"), [
    ({"cpus": 16}, None), ({"cpus": 17}, "cpus=17 (the most a node has: 16)"),
    ({"mem": "8G"}, None), ({"mem": "8193"}, "mem=8193 (the most a node has: 8192M)"),
    ({"mem": "9G", "cpus": 32}, "cpus=32 (the most a node has: 16) and mem=9G (the most a node has: 8192M)"),
    ({"cpus": 16, "mem": "8G"}, None), ({"cpus": 16, "gres": "gpu:1"}, "cpus=16 and gres=gpu:1 on one node"),
    ({"gres": "gpu:2"}, None), ({"gres": "gpu:a100:2,mps:50"}, None),
    ({"gres": "gpu:v100:1"}, "gres=gpu:v100:1 (nodes have: gpu, gpu:a100, mps)"),
    ({"constraint": "avx&intel"}, None), ({"constraint": "[amd|intel]"}, None), ({"constraint": "(avx&amd)|amd"}, None),
    ({"constraint": "avx&amd"}, "constraint=avx&amd (node features: amd, avx, intel)"),
    ({"constraint": "arm,avx"}, None),  # a doubt (',') never refuses: read as the looser or
    ({"constraint": "avx&("}, None),  # a form not read here is Slurm's to judge
])
def test_what_no_node_has_is_named(wanted: dict[str, object], problem: str | None) -> None:
    nodes, default = slurm_nodes.parse_sinfo(SINFO)
    assert default == "debug" and {n.name: n.partitions for n in nodes} == {"n1": {"gpu", "debug"}, "n2": {"debug"}}
    assert slurm_nodes.shortfall(slurm.parse_table(wanted), nodes) == problem


def test_a_partition_is_judged_by_its_own_nodes() -> None:
    nodes, default = slurm_nodes.parse_sinfo(SINFO)
    assert slurm_nodes._verdict({"partition": "gpu", "cpus": 16}, nodes, default) == \
        "cpus=16 (the most a node has: 8): no node of partition gpu has it"
    assert slurm_nodes._verdict({"partition": "gpu,debug", "cpus": 16}, nodes, default) is None
    assert slurm_nodes._verdict({"cpus": 16}, nodes, default) is None  # the default partition: debug


def test_an_allocation_larger_than_its_partition_is_named() -> None:
    """``--slurm-alloc`` asks for min(jobs, tasks) tasks at once in one allocation: more CPUs
    than its partition's nodes have in all, and Slurm queues it for ever (PartitionConfig)."""
    nodes, default = slurm_nodes.parse_sinfo(SINFO)  # debug: n1 (8) and n2 (16)
    assert slurm_nodes._allocation_shortfall({"cpus": 8}, 4, nodes, default) == (
        "the swarm's allocation asks for 32 CPUs (4 tasks at once × cpus=8); the nodes of partition debug have 24 "
        "in all: -j 3 at most")
    assert slurm_nodes._allocation_shortfall({"cpus": 8}, 3, nodes, default) is None
    assert slurm_nodes._allocation_shortfall({}, 25, nodes, default) is not None  # one CPU a task when not said
    assert slurm_nodes._allocation_shortfall({"partition": "gpu"}, 9, nodes, default) is not None  # n1 alone
    assert slurm_nodes._allocation_shortfall({"cpus": 32}, 1, nodes, default) is None  # the tasks' own check says it


def test_a_bad_extra_in_a_task_table_names_the_file_and_key(swarm: Swarm) -> None:
    swarm.write("s.toml", '[[task]]\nname = "a"\ncmd = "true"\nslurm = { extra = ["-n", "4"] }\n')
    res = swarm("run", "s.toml", "--backend", "headless", "--executor", "slurm")
    assert res.code == 2 and res.stderr.count("\n") == 1, res.stderr
    assert "s.toml" in res.stderr and "slurm.extra" in res.stderr and "one task on one node" in res.stderr
    assert not swarm.runs()
    with pytest.raises(exc.SettingError, match="slurm_extra"):
        settings.resolve({}, {"ZELLIJ_SWARM_SLURM_EXTRA": "--jobid=4"})


@pytest.mark.parametrize(("said", "refused"), [
    # srun's own words on this project's cluster (Slurm 22.05), measured
    ("srun: error: Unable to allocate resources: Invalid node name specified\n", True),
    ("srun: error: invalid partition specified: nope\n"
     "srun: error: Unable to allocate resources: Invalid partition name specified\n", True),
    ("srun: error: Unable to create step for job 11: Requested node configuration is not available\n", True),
    ("srun: error: Invalid generic resource (gres) specification\n", True),
    # a job was made, queued and then let go: not refused, it was listed (and may be again)
    ("srun: job 3 queued and waiting for resources\nsrun: Job allocation 3 has been revoked\n", False),
    # the step ran: its end is its sidecar's, which may show late
    ("srun: error: n1: task 0: Exited with exit code 3\n", False),
    ("", False),
])
def test_an_srun_slurm_refused_is_told_by_its_words(tmp_path, said: str, refused: bool) -> None:
    """A step whose srun Slurm refused outright can never start: its slot is not held for the
    time a step may take to be listed, or its sidecar to show (it was, 13 s in a pane)."""
    gen = rundir.RunPaths(tmp_path).gen(1, 1)
    gen.dir.mkdir(parents=True)
    (gen.dir / generation_files.EXECUTOR_LOG).write_text(said)
    assert remote.srun_refused(gen) is refused
