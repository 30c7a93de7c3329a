"""The CLI as a user meets it: one-line errors, exit codes, help, the API twin."""

from __future__ import annotations

import json

import pytest
from swarmtest import clean_env, validate

from zellij_swarm import Swarm, Task


@pytest.mark.parametrize("args, needle", [
    (["run", "nope.toml"], "nope.toml: no such file"),
    (["run", "good.txt", "-j", "0"], "invalid jobs '0' (from flag --jobs)"),
    (["run", "good.txt", "-j", "5000"], "expected an integer 1–1024"),
    (["run", "good.txt", "-j", "1_0"], "invalid jobs '1_0' (from flag --jobs)"),  # Python's int() takes them
    (["run", "good.txt", "--retries", "١"], "invalid retries '١' (from flag --retries)"),
    (["run", "good.txt", "--timeout", "٣٠"], "invalid timeout '٣٠' (from flag --timeout)"),
    (["run", "good.txt", "--ui", "fancy"], "invalid ui 'fancy'"),
    (["run", "good.txt", "--bogus"], "No such option '--bogus'"),
    (["run"], "Missing argument 'FILE'"),
    (["run", ""], "an empty file name: name a swarm file (or - for standard input)"),
    (["run", "good.txt", "--junit", "/proc/version"], "--junit /proc/version: cannot create a file in /proc"),
    (["status", "nope"], "no run 'nope' under"),
    (["status", "nope"], "a swarm ran in, or give --state-dir DIR (or set ZELLIJ_SWARM_STATE_DIR)"),
    (["status", "--state-dir", "elsewhere", "nope"], "no run 'nope' under"),
    (["status", "--state-dir", "elsewhere", "nope"], "elsewhere (from flag --state-dir)"),
    (["logs", "nope", "t"], "no run 'nope'"),
    (["cancel", "nope"], ": looked for .zellij-swarm in"),
    (["logs"], "no runs under"),
    (["logs", "a", "b", "c"], "logs takes [RUN] [TASK], not 3 arguments"),
    (["attach"], "no runs under"),
    (["attach", "nope", "t"], "no run 'nope'"),
    (["frobnicate"], "No such command 'frobnicate'"),
    (["add", "--prio", "3", "--", "true"], "No such option: --prio (did you mean --priority?)"),
    (["add", "--bogus", "--", "true"], "No such option: --bogus"),
    (["submit", "--bogus", "good.txt"], "No such option: --bogus (sbatch's options go after FILE)"),
])
def test_bad_usage_is_one_line_and_exit_2(swarm, args, needle):
    swarm.write("good.txt", "true\n")
    res = swarm(*args)
    assert res.code == 2, res
    assert res.stderr.count("\n") == 1 and res.stderr.startswith("zellij-swarm: error: "), res.stderr
    assert needle in res.stderr
    assert swarm.runs() == []


def test_env_setting_errors_name_the_variable(swarm):
    swarm.write("good.txt", "true\n")
    res = swarm("run", "good.txt", env=clean_env(ZELLIJ_SWARM_JOBS="lots"))
    assert res.code == 2 and "(from env ZELLIJ_SWARM_JOBS)" in res.stderr


def test_help_explains(swarm):
    res = swarm("run", "--help")
    assert res.code == 0
    for word in ("--jobs", "ZELLIJ_SWARM_JOBS", "--halt", "--junit", "Exit codes"):
        assert word in res.stdout


def test_the_top_help_names_the_state_directory_rule_the_commands_follow(swarm):
    """``zellij-swarm --help`` said runs are recorded under ``./.zellij-swarm`` "by default":
    from a subdirectory every command uses the nearest one above (or the git top level's)."""
    res = swarm("--help")
    assert res.code == 0 and "./.zellij-swarm by default" not in res.stdout, res.stdout
    assert "the nearest .zellij-swarm here or above" in " ".join(res.stdout.split()), res.stdout


def test_status_of_unknown_task_in_logs(swarm):
    swarm.write("a.txt", "true\n")
    swarm("run", "a.txt")
    res = swarm("logs", swarm.latest().name, "ghost")
    assert res.code == 2 and "has no task 'ghost'" in res.stderr


def test_status_all_adds_idle_slots(swarm):
    swarm.write("a.txt", "true\n")
    swarm("run", "a.txt", "-j", "3")
    default = json.loads(swarm("status", "--json").stdout)
    everything = json.loads(swarm("status", "--json", "--all").stdout)
    validate(default, "status")
    assert default["slots"] == [] and [s["state"] for s in everything["slots"]] == ["closed"] * 3
    assert "run " in swarm("status").stdout


def test_doctor_reports_headless_outside_multiplexers(swarm):
    res = swarm("doctor", "--json")
    info = json.loads(res.stdout)
    assert info["backend"]["name"] == "headless" and info["settings"]["jobs"]["source"] == "default"


def test_python_api_matches_cli(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = Swarm([Task("echo hi", name="a"), Task(argv=["sh", "-c", "exit 5"], name="b", after=["a"]),
                    Task("true", name="c", after=["b"])], jobs=2, retries=1).run()
    assert result.exit_code == 1 and not result.ok
    rows = {t["name"]: t for t in result.record["tasks"]}
    validate(dict(result.record), "status")
    assert (rows["a"]["status"], rows["b"]["exit_code"], rows["b"]["attempts"], rows["c"]["status"]) == (
        "succeeded", 5, 2, "skipped")
    assert (result.run_dir / "summary.json").exists()


def test_python_api_rejects_bad_input():
    from zellij_swarm import exc

    with pytest.raises(exc.UsageError, match="unknown setting 'job'"):
        Swarm([Task("true")], job=2)
    with pytest.raises(exc.UsageError, match="cmd is empty"):
        Swarm([Task("  ")]).run()


def test_prune_removes_old_ended_runs_but_never_running_ones(swarm):
    swarm.write("a.txt", "true\n")
    swarm("run", "a.txt")
    ended = swarm.latest()
    proc = swarm.popen("run", "-", "--output", "quiet")  # stdin closed at once: no tasks, no run
    proc.wait(timeout=30)
    swarm.write("slow.txt", "sleep 30\n")
    live = swarm.popen("run", "slow.txt", "--output", "quiet")
    from swarmtest import kill_run_processes, wait_until

    running = wait_until(lambda: [r for r in swarm.runs() if r != ended], what="second run")[0]
    try:
        wait_until(lambda: (running / "slots/slot-1/gen-1/claim").exists(), what="worker")
        dry = swarm("prune", "--older-than", "0", "--dry-run")  # 0: every ended run (it was refused)
        assert dry.code == 0 and dry.stdout == f"would remove run {ended.name} ({ended})\n"
        assert ended.exists()
        res = swarm("prune", "--older-than", "1ms")
        assert res.stdout == f"removed run {ended.name} ({ended})\n"
        assert not ended.exists() and running.exists()
        assert swarm("prune", "--older-than", "eventually").code == 2
        assert swarm("prune", "--older-than", "-1s").code == 2
    finally:
        swarm("cancel", running.name)
        live.wait(timeout=30)
        kill_run_processes(running.name)


def test_prune_beside_another_prune_skips_a_run_the_other_removed(swarm):
    """Two ``prune --older-than 0`` at once (every ended run is both one's target): the one that
    came second to a run's directory crashed (``internal error: FileNotFoundError``, exit 1;
    an adversary, 2 in 2). A run the other removed is gone: nothing to do, no line for it."""
    import shutil

    from zellij_swarm.commands.prune import _prune

    swarm.write("a.txt", "true\n")
    for _ in range(2):
        assert swarm("run", "a.txt", "--output", "quiet").code == 0
    runs = swarm.runs()
    assert len(runs) == 2
    lines = []
    for line in _prune(runs[0].parent.parent, {}, older_than=0.0, dry_run=False, force=False, drop_ignored=False):
        lines.append(line.text)
        for other in runs:
            if other.exists() and other.name not in line.text:
                shutil.rmtree(other)  # the other prune's
    assert len(lines) == 1 and lines[0].startswith("removed run "), lines
    assert not any(run.exists() for run in runs)


def test_layout_prints_valid_kdl(swarm):
    import ckdl

    res = swarm("layout", "-j", "3", "--ui", "compact")
    assert res.code == 0
    doc = ckdl.parse(res.stdout, version=1)
    assert doc.nodes[0].name == "layout"
    assert res.stdout.count('"slot-view"') == 3


def test_junit_that_cannot_be_written_at_the_end_is_a_warning(swarm):
    """Issue 10, defect 5: checked before the run (see the bad-input table); if it still fails
    at the end (here a task removes its directory) the run's own exit code stands."""
    (swarm.cwd / "out").mkdir()
    swarm.write("j.toml", '[[task]]\nname = "t"\ncmd = "rm -r out; exit 3"\n')
    res = swarm("run", "j.toml", "--junit", "out/r.xml", "--output", "quiet")
    assert res.code == 1
    assert res.stderr == (f"zellij-swarm: warning: cannot write the JUnit report out/r.xml: No such file or directory; "
                          f"the run's records are in {swarm.latest()}\n")
    assert swarm.tasks()["t"]["exit_code"] == 3


def test_logs_follow_waits_for_a_pending_task(swarm):
    """Issue 10, defect 14: ``logs -f`` on a task still waiting for a slot waits for it to
    start, then follows it to its end."""
    import subprocess
    import threading

    from swarmtest import kill_run_processes, wait_until

    swarm.write("p.toml", '[[task]]\nname = "a"\ncmd = "while [ ! -e go ]; do sleep 0.05; done"\n'
                          '[[task]]\nname = "b"\ncmd = "echo from-b; sleep 0.2; echo end-b"\n')
    proc = swarm.popen("run", "p.toml", "-j", "1", "--output", "quiet")
    run = swarm.started()
    wait_until(lambda: (run / "slots/slot-1/gen-1/claim").exists() and (run / "state.json").exists(),
               what="task a started")
    logs = subprocess.Popen(swarm.cmd("logs", "-f", run.name, "b"), cwd=swarm.cwd, env=clean_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        said: list[str] = []
        reader = threading.Thread(target=lambda: said.append(logs.stderr.readline()), daemon=True)
        reader.start()
        reader.join(timeout=30)
        assert said == ["zellij-swarm: task 'b' is pending; waiting for it to start\n"]
        (swarm.cwd / "go").touch()
        out, _ = logs.communicate(timeout=60)
        assert (logs.returncode, out) == (0, "from-b\nend-b\n")
        assert proc.wait(timeout=60) == 0
    finally:
        logs.kill()
        proc.kill()
        kill_run_processes(run.name)


def test_status_json_puts_each_row_on_a_line_and_reads_back_exactly():
    """--json of 100,000 tasks goes through the C encoder row by row: still one JSON document,
    equal to the snapshot, whatever the rows hold (a nested "tasks" key is not the top one)."""
    from zellij_swarm.commands.status import snapshot_json

    snap = {"run_id": "r", "tasks": [{"name": 'a\n"b\u2028', "id": "t1", "history": [{"tasks": []}]},
                                     {"name": "\udcff", "id": "t2"}],
            "slots": [{"tasks": []}], "settings": {"tasks": {"value": []}}}
    text = snapshot_json(snap)
    assert json.loads(text) == snap
    assert text.count("\n  {\"name\"") == 2 and snapshot_json({"tasks": []}) == json.dumps({"tasks": []}, indent=1)


def test_status_columns_line_up_whatever_the_names_hold():
    """Each column starts at the same display column on every line: a wide character takes
    two, a combining mark none, and a tab or escape is shown escaped (``\\t``), which is what
    is measured. A name wider than the first column's cap pushes its own line only."""
    from zellij_swarm.commands.status import NAME_COLUMN_MAX, table
    from zellij_swarm.render.text import width

    names = ["plain", "ü😀名前", "e\u0301cole", "tab\there", "esc\x1b[31m", "x" * (NAME_COLUMN_MAX + 5)]
    lines = table(("TASK", "STATUS", "NOTE"), [(n, "succeeded", "note") for n in names])
    header, *rows = lines
    at = width(header[:header.index("STATUS")])
    for name, line in zip(names, rows, strict=True):
        assert line.isprintable(), line
        before = line[:line.index("succeeded")]
        if len(name) <= NAME_COLUMN_MAX:
            assert width(before) == at, line
        else:  # whole, and two spaces after it
            assert before == f"  {name}  ", line


def test_a_name_too_long_for_its_column_has_a_line_of_its_own_on_a_terminal():
    """On a terminal (``width``), where every line is cut to it, a name over the first
    column's cap is on a line of its own, whole, and its row's other cells on the next line,
    under their columns: the cut takes none of them. The column is as wide as the names that
    fit it."""
    from zellij_swarm.commands.status import NAME_COLUMN_MAX, fit, table
    from zellij_swarm.render.text import width

    long_names = ["x" * (NAME_COLUMN_MAX + 1), "名" * (NAME_COLUMN_MAX // 2 + 1)]
    rows = [(n, "failed (exit 1, 0.0s)", "1", "3", "note") for n in ["short", *long_names]]
    lines = [fit(line, 80) for line in table(("TASK", "STATUS", "ATTEMPTS", "SLOT", "NOTE"), rows, width=80)]
    header, short, *pushed = lines
    assert header.split() == ["TASK", "STATUS", "ATTEMPTS", "SLOT", "NOTE"] and width(header) < 80
    at = header.index("STATUS")
    assert short.index("failed") == at
    assert pushed == [f"  {long_names[0]}", f"{'':{at}}failed (exit 1, 0.0s)  1         3     note",
                      f"  {long_names[1]}", f"{'':{at}}failed (exit 1, 0.0s)  1         3     note"]
    # not on a terminal: one line per row, for grep and awk
    assert len(table(("TASK", "STATUS", "ATTEMPTS", "SLOT", "NOTE"), rows)) == 4
