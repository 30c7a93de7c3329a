"""Arguments like xargs and GNU parallel (issue 15): ``run 'cmd {}' ::: ARGS`` and
``run -0 --template 'cmd {}' -``.

The expected values in the tables were read from GNU parallel 20221122's own ``--dry-run``
output; where ``parallel`` is installed, the tests also compare with it live — the text of
the commands, and the argv each command receives — and skip only that comparison without it.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from swarmtest import clean_env, full

from zellij_swarm import exc, quoting
from zellij_swarm.cli import main
from zellij_swarm.config import template

PARALLEL = shutil.which("parallel")
needs_parallel = pytest.mark.skipif(PARALLEL is None, reason="GNU parallel is not installed: nothing to compare with")

# name: its {}, {.}, {/}, {//} and {/.} as parallel gives them (Perl regexes and
# File::Basename, not os.path: {.} of .bashrc is empty, {//} of a.txt is ".").
PARTS = {
    "a.txt": ("a.txt", "a", "a.txt", ".", "a"),
    ".bashrc": (".bashrc", "", ".bashrc", ".", ""),
    "a/": ("a/", "a/", "", ".", ""),
    "dir.d/file": ("dir.d/file", "dir.d/file", "file", "dir.d", "file"),
    "": ("", "", "", ".", ""),
    "/": ("/", "/", "", "/", ""),
    "a.b.c": ("a.b.c", "a.b", "a.b.c", ".", "a.b"),
    "a.b/c": ("a.b/c", "a.b/c", "c", "a.b", "c"),
    "/a": ("/a", "/a", "a", "/", "a"),
    "a//": ("a//", "a//", "", ".", ""),
    "a//b": ("a//b", "a//b", "b", "a", "b"),
    "..": ("..", ".", "..", ".", "."),
    ".": (".", "", ".", ".", ""),
    "a.": ("a.", "a", "a.", ".", "a"),
    "a.t\nx": ("a.t\nx", "a", "a.t\nx", ".", "a"),  # [^/.]* crosses a newline
    "d\n/f.x": ("d\n/f.x", "d\n/f", "d\nf.x", "d\n", "d\nf"),  # Perl's "." does not
}

# value: parallel's Q() of it (single quotes unless every character is in [-_.+a-zA-Z0-9/]).
QUOTED = {
    "a_b-c.d/e+f": "a_b-c.d/e+f",
    "-n": "-n",
    "": "''",
    "a b": "'a b'",
    "it's": "'it'\"'\"'s'",
    "'": "\"'\"",
    "''": "\"'\"''\"'\"",
    "'a'": "\"'\"'a'\"'\"",
    "é": "'é'",
    "a=b": "'a=b'",
    "a:b": "'a:b'",
    "~": "'~'",
    "$HOME": "'$HOME'",
    "a\nb": "'a\nb'",
}

# File names no shell may take apart or expand: each must reach the command as one argument.
HOSTILE = [
    "a b", "it's", 'say "hi"', "$HOME", "`id`", "$(id)", "a\nb", "t\tb", "*", "a;b", "a&b|c", "<in>", "(x)",
    "back\\slash", "-n", "--help", "é日本.txt", "", ".bashrc", "a/", "a.txt", "dir.d/file", "d\n/f.x", "trail\n",
    "..", "/", "x.tar.gz", "'", "\"'\"",
]
ALL_PARTS = "{} {.} {/} {//} {/.}"
# Appends its argv (after {#}) as one JSON line to argv-{#}.json in its working directory.
RECORDER = (f"{shlex.quote(sys.executable)} -c 'import json, sys; "
            "open(\"argv-\" + sys.argv[1] + \".json\", \"a\").write(json.dumps(sys.argv[2:]) + chr(10))' {#} ")


def expand(text: str, *arguments: str, number: int = 1) -> str:
    return template.command(template.parse(text, len(arguments)), arguments, number)


@pytest.mark.parametrize("name", PARTS)
def test_replacement_strings_cut_a_path_as_parallel_does(name):
    # A first word holding a replacement string inserts values as they are: the raw parts.
    assert tuple(expand("{}|{.}|{/}|{//}|{/.}", name).split("|")) == PARTS[name]


@pytest.mark.parametrize("value", QUOTED)
def test_values_are_quoted_as_parallel_quotes_them(value):
    assert quoting.parallel_word(value) == QUOTED[value]
    assert expand("echo {}", value) == f"echo {QUOTED[value]}"


@pytest.mark.parametrize("text, arguments, command", [
    ("echo", ["a b"], "echo 'a b'"),  # no replacement string: the argument is appended
    ("echo {#}", ["a"], "echo 7"),  # {#} is one: nothing is appended
    ("{}", ["ls -l"], "ls -l"),  # the argument is the command: not quoted
    ("x{}y {}", ["a b"], "xa by a b"),  # in the first word anywhere
    ("X={} echo", ["a b"], "X='a b' echo"),  # "=" ends the first word
    ("echo x{}y", ["a b"], "echo x'a b'y"),
    ("echo {} {.}", ["a.x", "1.y"], "echo a.x 1.y a 1"),  # plain forms: every source's, in order
    ("echo {2} {1} {1.} {2 /} {-1} {-2.} {1/.}", ["a.x", "d/2.z"], "echo d/2.z a.x a 2.z d/2.z a a"),
    ("echo {01}", ["a"], "echo a"),
    ("echo { } {+1} {1 }", ["a"], "echo { } {+1} a"),  # only the last is a replacement string
])
def test_templates_expand_as_parallel_expands_them(text, arguments, command):
    assert expand(text, *arguments, number=7) == command


def test_the_slot_is_read_where_the_task_runs_even_inside_quotes():
    command = expand("echo '{%}' x{%}y \"$0\" {}", "it's")
    assert command == 'eval "echo \'${ZELLIJ_SWARM_SLOT}\' x${ZELLIJ_SWARM_SLOT}y \\"\\$0\\" \'it\'\\"\'\\"\'s\'"'
    out = subprocess.run(["sh", "-c", command], env={**os.environ, "ZELLIJ_SWARM_SLOT": "3"}, capture_output=True,
                         text=True, check=True).stdout
    assert out == "3 x3y sh it's\n"


def test_several_sources_make_every_combination_last_fastest():
    source = template.load(["echo"], ["a", "b", ":::", "1", "2 3"], None, null=False)
    assert [(t.name, t.cmd) for t in source.tasks] == [
        ("task-1", "echo a 1"), ("task-2", "echo a '2 3'"), ("task-3", "echo b 1"), ("task-4", "echo b '2 3'")]


def test_without_a_template_each_argument_is_a_command():
    assert [t.cmd for t in template.load([], ["echo a", "ls"], None, null=False).tasks] == ["echo a", "ls"]


@pytest.mark.parametrize("data, null, arguments", [
    (b"a\n\n #c\n  sp  \nd\r\ne", False, ["a", "", " #c", "  sp  ", "d\r", "e"]),  # lines as they are
    (b"a\n", False, ["a"]),  # a final newline ends the last argument
    (b"\n", False, [""]),
    (b"", False, []),
    (b"a\0\0b\nc\0", True, ["a", "", "b\nc"]),
    (b"a\0b", True, ["a", "b"]),
    (b"\0", True, [""]),
    (b"", True, []),
])
def test_arguments_are_read_as_parallel_reads_them(tmp_path, data, null, arguments):
    (tmp_path / "args").write_bytes(data)
    source = template.load([str(tmp_path / "args")], None, "echo", null=null)
    assert [t.cmd for t in source.tasks] == [f"echo {quoting.parallel_word(a)}" for a in arguments]


@needs_parallel
def test_commands_are_the_text_parallel_writes(tmp_path):
    names = [*PARTS, *HOSTILE]
    cases = [
        (f"echo {ALL_PARTS}", [names]),
        ("echo", [names]),  # the argument appended
        ("{} x{}y", [["echo a", "b c"]]),  # the arguments are the command: not quoted
        ("{} {}", [["echo a"], ["b c"]]),
        ("X={} echo {#}", [["a b"]]),
        ("echo {2} {1.} {-1/} {} {/.}", [names[:6], names[-6:]]),
    ]
    for text, sources in cases:
        tasks = template.swarm_input(template.parse(text, len(sources)), sources, "<test>").tasks
        ours = "".join(t.cmd + "\n" for t in tasks)
        groups = [word for source in sources for word in (":::", *source)]
        assert ours == _parallel(tmp_path, "-0", "--dry-run", text, *groups), text


@pytest.mark.parametrize("case, args", [
    ("template-without-value", ("--template",)),
    ("template-without-arguments", ("--template", "echo {}")),
    ("empty-template", ("--template", " ", "-")),
    ("separator-empty", ("echo", ":::")),
    ("second-separator-empty", ("echo", ":::", "a", ":::")),
    ("null-with-separator", ("-0", "echo", ":::", "a")),
    ("null-without-template", ("-0", "-")),
    ("two-templates", ("--template", "echo", "printf", ":::", "a")),
    ("position-beyond", ("echo {3}", ":::", "a", ":::", "b")),
    ("arguments-from-files", ("echo", ":::", "a", "::::", "f")),
    ("perl-expression", ("echo {= s/a/b/ =}", ":::", "a")),
    ("counter-with-position", ("echo {1#}", ":::", "a")),
    ("two-files", ("a.txt", "b.txt")),
])
def test_bad_template_input_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys, case, args):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as ended:
        main(["run", "--backend", "headless", *args])  # in this process: each case costs no interpreter
    err = capsys.readouterr().err
    assert ended.value.code == 2 and err.count("\n") == 1 and err.startswith("zellij-swarm: error: "), err
    assert not (tmp_path / ".zellij-swarm").exists()


def test_no_arguments_run_nothing_as_parallel_does(swarm):
    res = swarm("run", "--backend", "headless", "-0", "--template", "false", "-", input="")
    assert res.code == 0 and res.stderr == "zellij-swarm: <stdin>: no tasks to run\n" and swarm.runs() == []


def test_every_name_reaches_the_command_as_parallel_passes_it(swarm, tmp_path):
    res = swarm("run", "--backend", "headless", "-j", "4", "--output", "quiet", RECORDER + ALL_PARTS, ":::", *HOSTILE)
    assert res.code == 0, res
    ours = _argv_records(swarm.cwd, len(HOSTILE))
    assert [argv[0] for argv in ours] == HOSTILE
    assert all(tuple(argv) == PARTS[argv[0]] for argv in ours if argv[0] in PARTS)
    if PARALLEL is not None:
        _parallel(tmp_path / "parallel", "-0", RECORDER + ALL_PARTS, ":::", *HOSTILE)
        assert ours == _argv_records(tmp_path / "parallel", len(HOSTILE)), "parallel's commands got other arguments"


@pytest.mark.parametrize("null", [True, full(False)])
def test_arguments_from_stdin_reach_the_command_as_parallel_passes_them(swarm, tmp_path, null):
    names = HOSTILE if null else [n for n in HOSTILE if "\n" not in n]
    data = "".join(n + ("\0" if null else "\n") for n in names)
    res = swarm("run", "--backend", "headless", "-j", "4", "--output", "quiet", *(["-0"] if null else []),
                "--template", RECORDER + ALL_PARTS, "-", input=data)
    assert res.code == 0, res
    ours = _argv_records(swarm.cwd, len(names))
    assert [argv[0] for argv in ours] == names
    if PARALLEL is not None:
        _parallel(tmp_path / "parallel", *(["-0"] if null else []), RECORDER + ALL_PARTS, input=data)
        assert ours == _argv_records(tmp_path / "parallel", len(names)), "parallel's commands got other arguments"


def test_number_and_slot_are_the_tasks_own(swarm):
    """{#} is the task's number in input order (task-N), {%} the slot it ran in (1..jobs)."""
    res = swarm("run", "--backend", "headless", "-j", "3", "--output", "quiet",
                "sleep 0.2; echo {%} > seen-{#}-{}", ":::", *"abcdefg")
    assert res.code == 0, res
    tasks = swarm.tasks()
    assert sorted(tasks) == [f"task-{n}" for n in range(1, 8)]
    for n, letter in enumerate("abcdefg", 1):
        row = tasks[f"task-{n}"]
        assert row["status"] == "succeeded" and row["attempts"] == 1, row
        assert (swarm.cwd / f"seen-{n}-{letter}").read_text() == f"{row['slot']}\n"
        assert 1 <= row["slot"] <= 3
    assert len({t["slot"] for t in tasks.values()}) > 1  # the slot is per task, not one value for all


def test_options_after_the_separator_are_arguments(swarm):
    res = swarm("run", "--backend", "headless", "--output", "group", "echo", ":::", "-j", "--", "--help")
    assert res.code == 0 and sorted(res.stdout.split()) == ["--", "--help", "-j"], res


def test_a_template_is_checked_before_its_arguments_are_read(tmp_path):
    with pytest.raises(exc.UsageError, match="the template is empty"):
        template.load([str(tmp_path / "missing")], None, " ", null=False)
    with pytest.raises(exc.UsageError, match=r"\{2\} in the template names input source 2, but there is only 1"):
        template.load([str(tmp_path / "missing")], None, "echo {2}", null=False)


def _argv_records(cwd: Path, count: int) -> list[list[str]]:
    """Each task's recorded argv, by task number; each task must have run exactly once."""
    records = []
    for number in range(1, count + 1):
        lines = (cwd / f"argv-{number}.json").read_text().splitlines()
        assert len(lines) == 1, f"task {number} ran {len(lines)} times"
        records.append(json.loads(lines[0]))
    return records


def _parallel(cwd: Path, *args: str, input: str | None = None) -> str:
    """GNU parallel's stdout (in input order), run through /bin/sh as our workers are, in ``cwd``."""
    assert PARALLEL is not None
    cwd.mkdir(exist_ok=True)
    env = clean_env(PARALLEL_SHELL="/bin/sh", PARALLEL_HOME=str(cwd / ".parallel"), HOME=str(cwd))
    return subprocess.run([PARALLEL, "--will-cite", "--keep-order", "-j", "4", *args], cwd=cwd, env=env, input=input,
                          capture_output=True, text=True, check=True, timeout=60).stdout
