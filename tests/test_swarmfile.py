"""Swarm-file parsing and its one-line errors naming file, line and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from zellij_swarm import exc
from zellij_swarm.config import swarmfile


def parse(tmp_path: Path, text: str) -> swarmfile.SwarmInput:
    p = tmp_path / "swarm.toml"
    p.write_text(text)
    return swarmfile.load(str(p))


def test_full_task_and_defaults(tmp_path):
    (tmp_path / "sub").mkdir()
    s = parse(tmp_path, """
[swarm]
name = "n"
jobs = 2
[[task]]
cmd = "echo a"
cwd = "sub"
env = { A = "1", B = 2 }
timeout = "2s"
retries = 1
priority = 3
tags = ["x"]
[[task]]
name = "b"
argv = ["echo", "b"]
after = ["task-1"]
""")
    a, b = s.tasks
    assert (a.name, a.cmd, a.cwd, a.env, a.timeout, a.retries, a.priority, a.tags) == (
        "task-1", "echo a", str(tmp_path / "sub"), {"A": "1", "B": "2"}, 2.0, 1, 3, ("x",))
    assert (b.argv, b.after, b.retries) == (("echo", "b"), ("task-1",), None)
    assert s.name == "n" and s.file_settings["jobs"].raw == 2 and s.file_settings["jobs"].line == 4


@pytest.mark.parametrize("text, message", [
    ('[[task]]\nname = "build"\ncomand = "make"\n', 'swarm.toml:3: task \'build\': unknown key \'comand\''),
    ('[[task]]\ncmd = "a"\n[[task]]\ncmd = ""\n', "swarm.toml:4: task #2: cmd is empty"),
    ('[[task]]\nname="a"\ncmd="x"\n[[task]]\nname="a"\ncmd="y"\n', "duplicate task name 'a'"),
    ('[[task]]\nname="a"\ncmd="x"\nafter=["b"]\n', "after names unknown task 'b'"),
    ('[[task]]\nname="a"\ncmd="x"\nafter=["b"]\n[[task]]\nname="b"\ncmd="y"\nafter=["a"]\n',
     "dependency cycle: a -> b -> a"),
    ('[[task]]\nname="a"\nargv=[]\n', "swarm.toml:3: task 'a': argv is empty"),
    ('[[task]]\nname="a"\ncmd="x"\nargv=["y"]\n', "needs exactly one of cmd"),
    ('[[task]]\nname="a"\ncmd=3\n', "swarm.toml:3: task 'a': cmd must be a string"),
    ('[[task]]\nname="a"\ncmd="x"\ntimeout="forever"\n', "swarm.toml:4: task 'a': invalid timeout 'forever'"),
    ('[[task]]\nname="a"\ncmd="x"\nenv={ "A-B" = "1" }\n', "env key 'A-B'"),
    ('[[task]]\nname="a"\ncmd="x"\npriority="high"\n', "priority must be an integer"),
    ('[swarm]\njobs = 0\n', "invalid jobs 0 (from file"),
    ('[swarm]\nflavour = 1\n', "swarm.toml:2: [swarm]: unknown key 'flavour'"),
    ('[swarm]\nui = "fancy"\n', "swarm.toml:2"),
    ('[tasks]\ncmd = "x"\n', "unknown table or key 'tasks'"),
    ('[[task]\ncmd = "x"\n', "swarm.toml:1: invalid TOML"),
])
def test_bad_files(tmp_path, text, message):
    with pytest.raises(exc.UsageError) as e:
        parse(tmp_path, text)
    assert message in str(e.value)
    assert "\n" not in str(e.value) and e.value.exit_code == 2


def test_lines_file_skips_blank_and_comments(tmp_path):
    p = tmp_path / "c.txt"
    p.write_text("# header\n\necho a\n  echo b  \n")
    s = swarmfile.load(str(p))
    assert [(t.name, t.cmd, t.origin) for t in s.tasks] == [("task-1", "echo a", f"{p}:3"),
                                                             ("task-2", "echo b", f"{p}:4")]


def test_missing_and_non_utf8_files(tmp_path):
    with pytest.raises(exc.InputError, match="no such file"):
        swarmfile.load(str(tmp_path / "nope.toml"))
    p = tmp_path / "bin.txt"
    p.write_bytes(b"echo ok\necho \xff\n")
    with pytest.raises(exc.InputError, match=r"bin.txt:2: not valid UTF-8"):
        swarmfile.load(str(p))


def test_deep_dependency_chain_has_no_recursion_limit():
    tasks = [swarmfile.TaskSpec(name=f"t{i}", cmd="true", after=(f"t{i-1}",) if i else ()) for i in range(5000)]
    swarmfile.validate(tasks)  # a 5,000-deep chain is fine ...
    tasks[0] = swarmfile.TaskSpec(name="t0", cmd="true", after=("t4999",))
    with pytest.raises(exc.InputError) as e:  # ... and a cycle through all of it is found
        swarmfile.validate(tasks)
    assert str(e.value).count(" -> ") == 5000


@pytest.mark.parametrize("text, message", [
    ('[[task]]\nname = "build"\ncomand = "make"\n',
     "swarm.toml:3: task 'build': unknown key 'comand' (did you mean 'cmd'?)"),
    ('[[task]]\nname = "t"\nargs = ["x"]\n', "swarm.toml:3: task 't': unknown key 'args' (did you mean 'argv'?)"),
    ('[swarm]\njob = 2\n', "swarm.toml:2: [swarm]: unknown key 'job' (did you mean 'jobs'?)"),
    ('[swarm]\nmax-visible-panes = 2\n',
     "swarm.toml:2: [swarm]: unknown key 'max-visible-panes' (did you mean 'max_visible_panes'?)"),
    ('swarm = { jobs = 2, retry = 1 }\n', "swarm.toml:1: [swarm]: unknown key 'retry' (did you mean 'retries'?)"),
    ('task = [\n  { name = "a", cmd = "x" },\n  { name = "b", comand = "y" },\n]\n',
     "swarm.toml:3: task 'b': unknown key 'comand' (did you mean 'cmd'?)"),
    ('[[tasks]]\ncmd = "x"\n', "swarm.toml:1: unknown table or key 'tasks' (did you mean 'task'?)"),
])
def test_unknown_keys_suggest_the_closest_known_one(tmp_path, text, message):
    with pytest.raises(exc.UsageError) as e:
        parse(tmp_path, text)
    assert message in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("key", ["flavour", "threads", "x"])  # "workers" is like "worktree" now
def test_no_suggestion_for_a_key_like_no_other(tmp_path, key):
    with pytest.raises(exc.UsageError) as e:
        parse(tmp_path, f'[swarm]\n{key} = 1\n')
    assert str(e.value).endswith(f"[swarm]: unknown key {key!r}")
