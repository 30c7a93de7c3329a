"""The ``zellij-swarm`` command: thin click commands over the engine and the run records.

Errors are printed once, as one line (``zellij-swarm: error: …``), with the exit codes of
SPEC §8: 2 for bad input or usage, 1 for other failures. No traceback for anything we
anticipated.
"""

from __future__ import annotations

import difflib
import errno
import io
import json
import math
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn, TypeVar, get_args

import click

from zellij_swarm import __version__, exc, quoting, streams
from zellij_swarm.backends.zellij_layout import STYLE_HELP, generate
from zellij_swarm.commands import control
from zellij_swarm.commands import status as views
from zellij_swarm.config import settings, swarmfile, template
from zellij_swarm.config.state_dir import StateDir, flag_for
from zellij_swarm.config.state_dir import command as state_command
from zellij_swarm.config.state_dir import find as find_state_dir
from zellij_swarm.config.stream import InputStream, read_ahead
from zellij_swarm.records import rundir
from zellij_swarm.records.rundir import RunPaths, find_run
from zellij_swarm.records.states import UNSUCCESSFUL_STATUSES, RunState

_SHORT = {"jobs": "-j"}
_Command = TypeVar("_Command", bound=Callable[..., object])


def _setting_options(fn: _Command) -> _Command:
    """One option per setting of SPEC §3, generated from the settings table."""
    for spec in reversed(settings.SETTINGS):
        env = " / ".join(spec.envs)
        help_text = f"{spec.help} [env: {env}]"
        if spec.name == "require_multiplexer":
            fn = click.option("--require-zellij/--no-require-zellij", "require_zellij", default=None,
                              help="alias of --require-multiplexer (both, with opposite values: an error)")(fn)
            fn = click.option("--require-multiplexer/--no-require-multiplexer", default=None, help=help_text)(fn)
            continue
        if spec.parse is settings.parse_bool:  # every boolean flag has a --no- form (SPEC §3)
            fn = click.option(f"{spec.flag}/--no-{spec.flag.removeprefix('--')}", spec.name, default=None,
                              help=help_text)(fn)
            continue
        names = [spec.flag] + ([_SHORT[spec.name]] if spec.name in _SHORT else [])
        fn = click.option(*names, spec.name, default=None, metavar=_metavar(spec), help=help_text)(fn)
    return fn


def _metavar(spec: settings.Setting) -> str:
    return spec.metavar or {"jobs": "N", "keep_failed_panes": "N", "max_visible_panes": "N", "retries": "N",
                            "session": "NAME", "state_dir": "DIR"}.get(
        spec.name, "DURATION" if spec.parse is settings.parse_duration else "MODE")


def _state_dir_option(fn: _Command) -> _Command:
    return click.option("--state-dir", default=None, metavar="DIR",
                        help="where run records live [env: ZELLIJ_SWARM_STATE_DIR; default: the nearest "
                             ".zellij-swarm here or above, up to the git top level]")(fn)


def _found_state_dir(flag: str | None) -> StateDir:
    """The state directory by the one rule of ``config.state_dir``; a candidate owned by
    someone else that the walk skipped is said once."""
    found = find_state_dir(flag, os.environ)
    if found.skipped is not None:
        click.echo(f"zellij-swarm: warning: {found.skipped}", err=True)
    return found


def _state_dir(flag: str | None, *, writing: bool = False) -> Path:
    """The state directory a command works in (``_checked``)."""
    return _checked(_found_state_dir(flag), writing=writing)


def _checked(found: StateDir, *, writing: bool) -> Path:
    """The state directory found, as a command may use it: one that is no directory is bad
    input; one another user could have written (``rundir.untrusted``) is refused to commands
    that change a run or run its commands (``resume``, ``cancel``, ``add``, ``prune``), and
    commands that only read get a warning."""
    path = found.path
    if os.path.exists(path) and not os.path.isdir(path):  # bad input, said once: no warning first
        raise exc.UsageError(f"state directory {path} (from {found.source}) is not a directory")
    if writing:
        rundir.require_trusted(path)
    elif problem := rundir.untrusted(path):
        click.echo(f"zellij-swarm: warning: {problem}", err=True)
    return path


def _runs_under(flag: str | None, *, writing: bool = False) -> tuple[Path, list[RunPaths]]:
    """The state directory and its runs, newest first; none is a usage error that says where
    the state directory was looked for and how to point elsewhere."""
    found = _found_state_dir(flag)
    path = _checked(found, writing=writing)
    runs = rundir.all_runs(path)
    if not runs:
        raise exc.UsageError(found.no_runs())
    return path, runs


def _line_width() -> int | None:
    """The terminal's width when stdout is one — a listing's lines are cut to it, never
    wrapped — else None (piped: whole)."""
    return shutil.get_terminal_size().columns if sys.stdout.isatty() else None


def _find_run(flag: str | None, run_id: str | None, *, writing: bool = False) -> RunPaths:
    """The run a command acts on (none named: the newest), under the same trust rule as its
    state directory: a run directory or record another user could have written
    (``rundir.untrusted_run``) is refused to ``resume``, ``cancel`` and ``add``, and read with
    one warning by the other commands."""
    if run_id is None:
        run = _runs_under(flag, writing=writing)[1][0]
    else:
        found = _found_state_dir(flag)
        run = find_run(_checked(found, writing=writing), run_id, found=found)
    return _trusted(run, writing=writing)


def _trusted(run: RunPaths, *, writing: bool) -> RunPaths:
    if writing:
        rundir.require_trusted_run(run)
    elif problem := rundir.untrusted_run(run):
        click.echo(f"zellij-swarm: warning: {problem}", err=True)
    return run


# Which runs a command that acts may take by default (SPEC §8.3): it takes one only when exactly
# one qualifies; a read-only command takes the newest run.
_QUALIFIES: dict[str, tuple[str, Callable[[RunPaths, dict[str, Any]], bool]]] = {
    "retry": ("ended with tasks that did not succeed",
              lambda _, s: s["state"] != RunState.RUNNING and any(v for k, v in (s.get("counts") or {}).items()
                                                            if k in UNSUCCESSFUL_STATUSES)),
    "resume": ("interrupted", lambda _, s: s["state"] == RunState.INTERRUPTED),
    "collect": ("holding worktrees", lambda run, _: _holds_worktrees(run)),  # its tasks' work, to commit
    **{command: ("running", lambda _, s: s["state"] == RunState.RUNNING)
       for command in ("cancel", "restart", "pause", "unpause", "add")},
}


def _holds_worktrees(run: RunPaths) -> bool:
    from zellij_swarm.worker.worktree import worktrees_dir

    try:
        with os.scandir(worktrees_dir(run.dir)) as entries:
            return any(True for _ in entries)
    except OSError:
        return False


def _acting_run(flag: str | None, command: str, run_id: str | None, *, not_a_run: str | None = None) -> RunPaths:
    """The run an acting command works on: the one named, else the only run that qualifies
    for ``command`` (``_QUALIFIES``); none or several is a usage error naming the candidates —
    and ``not_a_run``, the argument that named no run, when there was one."""
    if run_id is not None:
        return _find_run(flag, run_id, writing=True)
    what, qualifies = _QUALIFIES[command]
    path, runs = _runs_under(flag, writing=True)
    unreadable: list[str] = []
    candidates = [run for run, snap in views.statuses(runs, unreadable, rows=False) if qualifies(run, snap)]
    if len(candidates) == 1:
        return _trusted(candidates[0], writing=True)
    given = f"no run {not_a_run!r} under {path}, and " if not_a_run is not None else ""
    if not candidates and not_a_run is not None and (newest := _newest_with_task(runs, not_a_run)) is not None:
        # a task of a run that has ended, not a missing run
        state = views.load_status(newest, rows=False)["state"]
        given = f"{not_a_run!r} is a task of run {newest.run_id}, which is {state}, and "
    if not candidates:
        where = "none" if given else f"no run under {path}"
        if unreadable:  # it may be one of them
            more = f", and {len(unreadable) - 1} more run(s) cannot" if len(unreadable) > 1 else ""
            what = f"{what} ({unreadable[0]}{more})"
        raise exc.UsageError(f"{given}{where} is {what}: name the RUN to {command} ({state_command(path, 'ls')} lists "
                             "them)")
    shown = ", ".join(r.run_id for r in candidates[:5]) + (", …" if len(candidates) > 5 else "")
    raise exc.UsageError(f"{given}{len(candidates)} runs are {what} ({shown}): name the RUN to {command}")


def _run_then(flag: str | None, command: str, args: tuple[str, ...]) -> tuple[RunPaths, tuple[str, ...]]:
    """``[RUN] REST...``: the first argument is the run when it names one (its id, or a unique
    prefix of it that is not a task of the run the command would take by default: a task
    never hides behind a run); otherwise the run is the default (``_acting_run``) and every
    argument is the command's."""
    if args:
        try:
            named = find_run(_state_dir(flag, writing=True), args[0])
        except exc.RunNotFound:
            named = None
        except exc.UsageError:  # a prefix of several runs: said as such, unless it is a task's name
            if not _has_task(_default_or_none(flag, command), args[0]):
                raise
            named = None
        if named is not None and named.run_id != args[0] and _has_task(_default_or_none(flag, command), args[0]):
            named = None  # a prefix of a run id that is also a task's name: the task wins
        if named is not None:
            return _trusted(named, writing=True), args[1:]
    return _acting_run(flag, command, None, not_a_run=args[0] if args else None), args


def _newest_with_task(runs: list[RunPaths], key: str) -> RunPaths | None:
    """The newest of ``runs`` (newest first) if it has a task named (or with the id) ``key``:
    a command given a task of a run that has ended says so, not "no run of that name"."""
    try:
        return runs[0] if runs and _has_task(runs[0], key) else None
    except views.READ_ERRORS:
        return None


def _default_or_none(flag: str | None, command: str) -> RunPaths | None:
    try:
        return _acting_run(flag, command, None)
    except exc.UsageError:
        return None


def _has_task(run: RunPaths | None, key: str) -> bool:
    return run is not None and any(key in (t["name"], t["id"]) for t in views.load_status(run)["tasks"])


class _ReaderGone(Exception):
    """Our standard output's reader went (``logs | head``). Not an ``OSError``: click ends
    any command with an ``EPIPE`` with status 1, as if it had failed; a shell's pipeline
    expects what a command killed by SIGPIPE gives, 141."""


class _Commands(click.Group):
    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except BrokenPipeError as e:
            raise _ReaderGone from e


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="zellij-swarm")
def cli() -> None:
    """Run a swarm of worker commands in a bounded pool of slots, one pane per worker.

    Workers run in Zellij or tmux panes, or headless (in CI); every exit code is captured
    and every run is recorded under the state directory: --state-dir, else
    $ZELLIJ_SWARM_STATE_DIR, else the nearest .zellij-swarm here or above (up to the git top
    level), else one at the git top level or here.
    """


class _RunCommand(click.Command):
    """``run``'s parsing: everything after the first ``:::`` is an argument of the template,
    even ``-j`` or ``--``, as in GNU parallel; only what comes before it can be an option."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if template.SEPARATOR in args:
            at = args.index(template.SEPARATOR)
            ctx.meta[template.SEPARATOR] = args[at + 1:]
            args = args[:at]
        return super().parse_args(ctx, args)


@cli.command(cls=_RunCommand, context_settings={"ignore_unknown_options": False})
@click.argument("words", nargs=-1, metavar="FILE | TEMPLATE ::: ARG...")
@_setting_options
@click.option("--name", default=None, help="a name for this run (also [swarm] name)")
@click.option("--json", "json_output", is_flag=True, help="print the run summary as JSON on stdout")
@click.option("--junit", "junit_path", default=None, metavar="FILE", help="write a JUnit XML report")
@click.option("--joblog", "joblog_path", default=None, metavar="FILE",
              help="write a GNU parallel joblog, a line per task as it ends (+FILE appends)")
@click.option("--close-session", is_flag=True,
              help="close the multiplexer session zellij-swarm created, at the end (default: keep it unless CI=true)")
@click.option("--here", is_flag=True,
              help="Zellij: open the panes in the current tab, not a tab of their own (an error with --backend "
                   "tmux|headless; with auto it applies when Zellij is picked)")
@click.option("--attach", is_flag=True,
              help="outside a multiplexer: attach to the session zellij-swarm creates, in the foreground (needs a TTY)")
@click.option("--template", "template_text", default=None, metavar="TEMPLATE",
              help="run TEMPLATE once per argument in FILE (- for stdin), one per line")
@click.option("-0", "--null", is_flag=True, help="--template: the arguments are NUL-separated (find -print0)")
def run(words: tuple[str, ...], template_text: str | None, null: bool, name: str | None,
        json_output: bool, junit_path: str | None, joblog_path: str | None, close_session: bool, here: bool,
        attach: bool, require_multiplexer: bool | None, require_zellij: bool | None, **flags: object) -> None:
    """Run a swarm from FILE: a TOML swarm file (*.toml), or one shell command per line
    (blank and # lines skipped); - reads commands from stdin.

    Or run TEMPLATE once per argument, as GNU parallel does: TEMPLATE ::: ARG... (several
    ::: groups: every combination), or --template TEMPLATE FILE. In TEMPLATE, {} is the
    argument, {.} it without extension, {/} its basename, {//} its dirname, {/.} its basename
    without extension, {#} the task's number, {%} its slot; {1}, {2.}... those of one ::: group.
    Arguments are shell-quoted; without any {...} the argument is appended.

    \b
    Exit codes: 0 all tasks succeeded; 1 some task did not; 2 bad input;
    130 Ctrl-C or cancel; 143 SIGTERM; 129 SIGHUP (workers keep running).
    """
    from zellij_swarm.commands.run import execute
    from zellij_swarm.records.outputs import require_not_input

    flags["require_multiplexer"] = _one_require_flag(require_multiplexer, require_zellij)
    if name is not None and not swarmfile.is_run_name(name):
        raise exc.UsageError(f"--name {name!r}: a run's name must be non-empty UTF-8 text")
    ctx = click.get_current_context()
    after_separator = ctx.meta.get(template.SEPARATOR)
    stream = None
    if words == ("-",) and after_separator is None and (template_text is not None or not null):
        # from stdin: the run starts at the first task; the rest is read as it comes (SPEC §4.6)
        # the template is checked before anything is read
        parsed = None if template_text is None else template.parse(template_text, 1)
        fd = _stdin_descriptor()
        stream = InputStream.of_lines(fd) if parsed is None else InputStream.of_arguments(fd, parsed, null=null)
        source = swarmfile.SwarmInput(stream.first(read_ahead(1)), {}, None, stream.source)
    elif after_separator is not None or template_text is not None or null:
        source = template.load(words, after_separator, template_text, null=null)
    elif len(words) == 1:
        source = swarmfile.load(words[0])
    elif not words:
        raise click.MissingParameter(ctx=ctx, param_type="argument", param_hint="'FILE'")
    else:
        template.refuse_unsupported(words)
        raise exc.UsageError(f"run takes one FILE, not {len(words)} arguments (a template takes its arguments "
                             "after :::, or from --template TEMPLATE FILE)")
    if stream is None and after_separator is None:  # words name the input: a swarm file, or the arguments' file
        require_not_input(list(words), junit_path=junit_path, joblog_path=joblog_path)
    resolved = settings.resolve(flags, os.environ, source.file_settings)
    if resolved.sources["state_dir"] == "default":  # no flag, variable or file setting: the one rule finds it
        resolved = replace(resolved, state_dir=str(_found_state_dir(None).path))
    if here and resolved.backend in ("tmux", "headless"):
        raise exc.UsageError(f"--here conflicts with backend {resolved.backend!r} "
                             f"(from {resolved.sources['backend']}): --here places Zellij panes; drop one of them")
    if not source.tasks:
        click.echo(f"zellij-swarm: {source.source}: no tasks to run", err=True)
        return
    outcome = execute(source.tasks, resolved, name=name or source.name, source=source.source, env=os.environ,
                      json_output=json_output, junit_path=junit_path, joblog_path=joblog_path,
                      close_session=close_session, here=here, attach=attach, groups=source.groups, stream=stream)
    if json_output:
        click.echo(views.snapshot_json(outcome.summary))
    sys.exit(outcome.exit_code)


def _stdin_descriptor() -> int:
    """The descriptor the input is read from as it comes. A stdin without one (``io.StringIO``
    given by a program that calls ``main``) holds all its text already: it is read whole into
    a file in memory, read from there the same way."""
    try:
        return sys.stdin.fileno()
    except io.UnsupportedOperation:
        pass
    except (OSError, ValueError) as e:  # closed
        raise exc.UsageError(f"cannot read standard input: {e}") from None
    try:
        data = streams.read_bytes(sys.stdin)
    except (OSError, ValueError) as e:
        raise exc.UsageError(f"cannot read standard input: {e}") from None
    fd = os.memfd_create("zellij-swarm-stdin", os.MFD_CLOEXEC)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _one_require_flag(require_multiplexer: bool | None, require_zellij: bool | None) -> bool | None:
    """``--require-zellij`` is an alias of ``--require-multiplexer``: both given with opposite
    values is a contradiction, not a precedence question."""
    if None not in (require_multiplexer, require_zellij) and require_multiplexer != require_zellij:
        def flag(name: str, on: bool | None) -> str:
            return f"--{'' if on else 'no-'}require-{name}"

        raise exc.UsageError(f"{flag('multiplexer', require_multiplexer)} and {flag('zellij', require_zellij)} "
                             "conflict: they are one setting; give one of them")
    return require_multiplexer if require_multiplexer is not None else require_zellij


@cli.command()
@click.argument("run_id", required=False, metavar="[RUN]")
@click.option("--json", "json_output", is_flag=True, help="machine-readable output")
@click.option("--all", "show_all", is_flag=True,
              help="every task (a run of over 100 lists its running and failed ones), and idle and closed slots")
@click.option("--group", default=None, metavar="GROUP", help="only the tasks of this [group.NAME]")
@click.option("--tag", "tags", multiple=True, metavar="TAG", help="only the tasks with this tag (repeatable: any)")
@click.option("--waiting", is_flag=True, help="only the tasks waiting for input, each with the command that shows it")
@_state_dir_option
def status(run_id: str | None, json_output: bool, show_all: bool, group: str | None, tags: tuple[str, ...],
           waiting: bool, state_dir: str | None) -> None:
    """Tasks and slots of a run (default: the latest); --group and --tag show some tasks only.
    On a terminal every line fits its width (cut, never wrapped)."""
    run = _find_run(state_dir, run_id)
    width = _line_width()
    shown = views.show_status(run, json_output=json_output, show_all=show_all, group=group, tags=tags,
                              waiting=waiting, latest=run_id is None, width=None if json_output else width)
    if isinstance(shown, str):
        click.echo(shown)
    else:  # a big document, in pieces
        streams.bytes_out(sys.stdout).writelines(shown)


@cli.command(name="ls")
@click.option("--json", "json_output", is_flag=True, help="machine-readable output")
@_state_dir_option
def ls_(json_output: bool, state_dir: str | None) -> None:
    """Runs under the state directory, newest first. On a terminal every line fits its width
    (cut, never wrapped): ``--json`` has every count."""
    path = _state_dir(state_dir)
    problems = [p for run in rundir.all_runs(path) if (p := rundir.untrusted_run(run))]
    rows, unreadable = views.ls_rows(path)
    for said in (problems, unreadable):
        if said:
            more = f" (and {len(said) - 1} more run(s) like it)" if len(said) > 1 else ""
            click.echo(f"zellij-swarm: warning: {said[0]}{more}", err=True)
    width = _line_width()
    click.echo(json.dumps(rows, indent=1) if json_output else views.format_ls(rows, unreadable=len(unreadable),
                                                                             width=width))


def _run_and_task(state_dir: str | None, args: tuple[str, ...], command: str) -> tuple[RunPaths, dict[str, Any],
                                                                                        str | None]:
    """``[RUN] [TASK]`` of ``logs`` and ``attach``: the run, its status, and the task named.
    One argument is a task of the latest run — or a run (an id or a unique prefix of one), but
    only when no task of the latest run has that name or id: a task never hides behind a run."""
    if len(args) > 2:
        raise exc.UsageError(f"{command} takes [RUN] [TASK], not {len(args)} arguments")
    if len(args) == 2:
        run = _find_run(state_dir, args[0])
        return run, views.load_status(run), args[1]
    latest = _find_run(state_dir, None)
    snap = views.load_status(latest)
    if not args:
        return latest, snap, None
    if any(args[0] in (t["name"], t["id"]) for t in snap["tasks"]):
        return latest, snap, args[0]
    try:
        run = _find_run(state_dir, args[0])
    except exc.RunNotFound:
        raise exc.UnknownTask(latest.run_id, args[0], (t["name"] for t in snap["tasks"]),
                              also=", and no run id starts with it") from None
    return run, (snap if run == latest else views.load_status(run)), None


@cli.command()
@click.argument("args", nargs=-1, metavar="[RUN] [TASK]")
@click.option("-f", "--follow", is_flag=True,
              help="keep printing new output until the task's attempt ends; a task still pending is waited for "
                   "(until it starts, or ends without starting)")
@click.option("--attempt", type=click.IntRange(min=1), default=None, help="which attempt (default: the latest)")
@click.option("--raw", is_flag=True, help="the output as stored, byte for byte (a pane's CRLF line ends included)")
@click.option("--tag", "tags", multiple=True, metavar="TAG", help="without TASK: list only the tasks with this tag")
@click.option("--stdout", "only_stdout", is_flag=True, help="only the worker's stdout")
@click.option("--stderr", "only_stderr", is_flag=True, help="only the worker's stderr (headless and compact workers)")
@_state_dir_option
def logs(args: tuple[str, ...], follow: bool, attempt: int | None, raw: bool, tags: tuple[str, ...],
         only_stdout: bool, only_stderr: bool, state_dir: str | None) -> None:
    """The output of TASK (a name or id) in RUN (default: the latest run): the worker's stdout
    on stdout, its stderr on stderr (a pane's one terminal: both on stdout); without TASK,
    the run's tasks (--tag: those with the tag). A terminal's CRLF line ends are shown as LF
    (--raw: as stored)."""
    from zellij_swarm.commands.logs import show, task_list

    if only_stdout and only_stderr:
        raise exc.UsageError("--stdout and --stderr conflict: give one of them (neither: both streams)")
    stream = "stdout" if only_stdout else "stderr" if only_stderr else None
    run, snap, task = _run_and_task(state_dir, args, "logs")
    if task is not None:
        if tags:
            raise exc.UsageError("--tag lists tasks: give it without a TASK")
        sys.exit(show(run, task, attempt=attempt, follow=follow, raw=raw, snap=snap, stream=stream or "both"))
    if follow or attempt is not None or stream:
        given = "-f" if follow else "--attempt" if attempt is not None else f"--{stream}"
        raise exc.UsageError(f"{given} needs a task: zellij-swarm logs [RUN] TASK")
    if tags:
        chosen = set(views.chosen_tasks(run, group=None, tags=tags))
        snap = {**snap, "tasks": [t for t in snap["tasks"] if t["name"] in chosen]}
    click.echo("\n".join(task_list(run, snap, width=_line_width())))
    if snap["tasks"]:  # the run as the user named it (none: the latest), and a task of it as the example
        example = quoting.positional_line([*args, quoting.task_word(snap["tasks"][0]["name"], snap["tasks"][0]["id"])])
        show_one = f"zellij-swarm logs{flag_for(run.state_dir, os.environ)} {example}"
        click.echo(quoting.terminal_text(f"zellij-swarm: show a task's output with: {show_one}"), err=True)


@cli.command()
@click.argument("args", nargs=-1, metavar="[RUN] [TASK]")
@_state_dir_option
def attach(args: tuple[str, ...], state_dir: str | None) -> None:
    """Show a run's panes in this terminal (default: the latest run), at TASK's pane if given.
    Inside tmux or Zellij it moves your client to the run's window or tab; outside, this
    terminal becomes a client of the run's session. A headless run has nothing to attach to."""
    from zellij_swarm.commands.attach import attach as attach_run

    run, snap, task = _run_and_task(state_dir, args, "attach")
    sys.exit(attach_run(run, snap, views.find_task(snap, task) if task is not None else None, os.environ))


@cli.command(name="wait")
@click.argument("run_id", required=False, metavar="[RUN]")
@click.option("--for-input", "for_input", is_flag=True, help="wait until a task waits for input (required)")
@click.option("--new", is_flag=True, help="only a wait that begins after this command starts")
@_state_dir_option
def wait_(run_id: str | None, for_input: bool, new: bool, state_dir: str | None) -> None:
    """Block until a task of a run (default: the latest) waits for input, then print the
    command that shows it, one line per waiting task: wire it to any notifier. Exit 1 when the
    run ends with none waiting."""
    from zellij_swarm.commands import wait

    if not for_input:
        raise exc.UsageError("wait: say what to wait for: --for-input")
    sys.exit(wait.for_input(_find_run(state_dir, run_id), latest=run_id is None, new=new))


@cli.command()
@click.argument("args", nargs=-1, metavar="[RUN] [TASK]")
@click.option("--stat", is_flag=True, help="git's --stat of the task's changes")
@_state_dir_option
def diff(args: tuple[str, ...], stat: bool, state_dir: str | None) -> None:
    """What a worktree task changed against the commit it started from (default: the latest
    run): its commits, then the diff of its files as they are, untracked ones included.
    Without TASK: one line per worktree task of the run."""
    from zellij_swarm.commands import diff as review

    run, snap, task = _run_and_task(state_dir, args, "diff")
    click.echo(review.show(run, snap, views.find_task(snap, task) if task is not None else None, stat=stat,
                           width=_line_width()), nl=False)


@cli.command()
@click.argument("args", nargs=-1, required=True, metavar="[RUN] TASK...")
@click.option("--verify", is_flag=True, help="run the repository's commit hooks (default: none runs)")
@_state_dir_option
def collect(args: tuple[str, ...], verify: bool, state_dir: str | None) -> None:
    """Commit what worktree tasks left uncommitted onto their branches (ignored files left
    out), ready to merge or push; prints each commit id. A running task is refused. RUN may
    be left out only when exactly one run qualifies."""
    from zellij_swarm.commands import collect as collecting

    run, tasks = _run_then(state_dir, "collect", args)
    if not tasks:
        raise exc.UsageError("collect: name the TASK(s) whose work to commit")
    for line in collecting.collect(run, views.load_status(run), tasks, verify=verify):
        click.echo(line)


@cli.command()
@click.argument("run_id", required=False, metavar="[RUN]")
@click.option("--output", type=click.Choice(get_args(settings.OutputMode)), default=None,
              help="output mode (default: the run's own)")
@click.option("--json", "json_output", is_flag=True, help="print the run summary as JSON on stdout")
@_state_dir_option
def resume(run_id: str, output: settings.OutputMode | None, json_output: bool, state_dir: str | None) -> None:
    """Continue an interrupted run (its supervisor died or was detached): adopt workers still
    running, record exits that happened meanwhile, run what is left — no generation twice.
    Without RUN: the one interrupted run (several: name one)."""
    from zellij_swarm.commands.run import resume as resume_run

    outcome = resume_run(_acting_run(state_dir, "resume", run_id), output=output, json_output=json_output)
    if json_output:
        click.echo(views.snapshot_json(outcome.summary))
    sys.exit(outcome.exit_code)


@cli.command()
@click.argument("args", nargs=-1, metavar="[RUN] [TASK]...")
@click.option("--group", default=None, metavar="GROUP", help="the tasks of this [group.NAME]")
@click.option("--tag", "tags", multiple=True, metavar="TAG", help="the tasks with this tag (repeatable: any of them)")
@_state_dir_option
def cancel(args: tuple[str, ...], group: str | None, tags: tuple[str, ...], state_dir: str | None) -> None:
    """Cancel a running swarm, or only the named TASKS of it (or those of --group / --tag).
    Without RUN: the one running run (several: name one)."""
    run, tasks = _run_then(state_dir, "cancel", args)
    click.echo(control.cancel(run, tasks, group=group, tags=tags), err=True)


@cli.command()
@click.argument("args", nargs=-1, metavar="[RUN] [TASK]...")
@click.option("--failed", is_flag=True, help="the tasks that did not succeed (what RUN alone retries)")
@click.option("--unknown", is_flag=True,
              help="also the tasks whose outcome is unknown (they ran, and may have finished)")
@click.option("--json", "json_output", is_flag=True, help="print the run summary as JSON on stdout")
@_setting_options
def retry(args: tuple[str, ...], failed: bool, unknown: bool, json_output: bool,
          require_multiplexer: bool | None, require_zellij: bool | None, **flags: object) -> None:
    """Run again, in the same run record, the tasks of a finished or interrupted run that did
    not succeed (failed, timed out, cancelled, lost) and those skipped because of them — or
    the named TASKS. A task whose outcome is unknown (its exit could not be recorded) runs
    again only when named or with --unknown. New attempts, with their retries given anew;
    history kept; the run's recorded settings, unless given here. A running run: exit 2
    (use restart). Without RUN: the one ended run with tasks that did not succeed (several:
    name one).

    \b
    Exit codes: as run's: 0 every task of the run succeeded; 1 some did not; 2 bad input."""
    from zellij_swarm.commands.run import retry as retry_run

    state_dir = flags.pop("state_dir", None)  # where the run is: not a setting a retry can change
    run, tasks = _run_then(state_dir if isinstance(state_dir, str) else None, "retry", args)
    if failed and tasks:
        raise exc.UsageError("--failed retries the tasks that did not succeed; give it or TASKS, not both")
    flags["require_multiplexer"] = _one_require_flag(require_multiplexer, require_zellij)
    outcome = retry_run(run, list(tasks), flags=flags, env=os.environ, json_output=json_output, unknown=unknown)
    if json_output:
        click.echo(views.snapshot_json(outcome.summary))
    sys.exit(outcome.exit_code)


@cli.command()
@click.argument("args", nargs=-1, required=True, metavar="[RUN] TASK...")
@_state_dir_option
def restart(args: tuple[str, ...], state_dir: str | None) -> None:
    """End the running TASKS' workers (as a cancel would) and start each again at once, even
    in a paused run: a new attempt, which does not count against its retries. Without RUN:
    the one running run (several: name one)."""
    run, tasks = _run_then(state_dir, "restart", args)
    if not tasks:
        raise exc.UsageError(f"restart needs the TASK(s) to run again: zellij-swarm restart {run.run_id} TASK...")
    click.echo(control.restart(run, tasks), err=True)


@cli.command()
@click.argument("run_id", required=False, metavar="[RUN]")
@click.option("--group", default=None, metavar="GROUP", help="only the tasks of this [group.NAME]")
@_state_dir_option
def pause(run_id: str | None, group: str | None, state_dir: str | None) -> None:
    """Start no new task of a running swarm (or of one group of it) until `unpause`; the
    running ones go on. A paused run stays paused when it is resumed. Without RUN: the one
    running run (several: name one)."""
    click.echo(control.set_paused(_acting_run(state_dir, "pause", run_id), group, paused=True), err=True)


@cli.command()
@click.argument("run_id", required=False, metavar="[RUN]")
@click.option("--group", default=None, metavar="GROUP", help="only this group (a paused run stays paused)")
@_state_dir_option
def unpause(run_id: str | None, group: str | None, state_dir: str | None) -> None:
    """Start new tasks again, after `pause`: of the whole run (and every group), or of one group.
    Without RUN: the one running run (several: name one)."""
    click.echo(control.set_paused(_acting_run(state_dir, "unpause", run_id), group, paused=False), err=True)


@cli.command(context_settings={"ignore_unknown_options": True})
@click.argument("args", nargs=-1, required=True, metavar="[RUN] FILE | [RUN] -- CMD...")
@click.option("--name", default=None,
              help="-- CMD: the task's name (default: task-<n>; added-<n> while the run reads stdin)")
@click.option("--after", multiple=True, metavar="TASK", help="-- CMD: run after TASK succeeded (repeatable)")
@click.option("--priority", type=int, default=None, help="-- CMD: higher runs first (default 0)")
@_state_dir_option
@click.pass_context
def add(ctx: click.Context, args: tuple[str, ...], name: str | None, after: tuple[str, ...],
        priority: int | None, state_dir: str | None) -> None:
    """Add tasks to a running swarm: the tasks of FILE (a swarm file or one command per
    line), or one task that runs CMD... directly (after --). Either may run after tasks
    already in the run, those added while it runs included. Without RUN: the one running
    run (several: name one)."""
    raw_args = (ctx.obj or {}).get("argv") or sys.argv[1:]
    command = len(raw_args) - raw_args.index("--") - 1 if "--" in raw_args else 0  # the words after --
    # unknown options are let through for CMD's sake (after --) only: before it, one is an error
    if (unknown := next((a for a in args[:len(args) - command] if a.startswith("-") and a != "-"), None)):
        raise _no_such_option(ctx, unknown)
    describe_a_command = name is not None or after or priority is not None
    if not command and len(args) <= 2 and describe_a_command:  # [RUN] FILE: checked before the run is looked for
        raise exc.UsageError("--name, --after and --priority describe a -- CMD task; a FILE gives its own keys")
    if command:
        before = args[:len(args) - command]
        if len(before) > 1:
            raise exc.UsageError(f"add takes [RUN] before --, not {len(before)} arguments")
        run = _acting_run(state_dir, "add", before[0] if before else None)
        what = args[len(args) - command:]
    else:
        run, what = _run_then(state_dir, "add", args)
        if not what:
            raise exc.UsageError(f"add needs a FILE or -- CMD: zellij-swarm add {run.run_id} FILE")
    from_file = len(what) == 1 and not command
    if from_file and describe_a_command:
        raise exc.UsageError("--name, --after and --priority describe a -- CMD task; a FILE gives its own keys")
    if from_file:
        click.echo(control.add(run, file=what[0]), err=True)
    else:
        task: dict[str, Any] = {"argv": list(what), "name": name, "after": list(after), "priority": priority}
        click.echo(control.add(run, tasks=[{k: v for k, v in task.items() if v not in (None, [])}]), err=True)


def _no_such_option(ctx: click.Context, word: str, hint: str = "") -> exc.UsageError:
    """The error of a command that lets unknown options through (for a command's own words) for
    one given where no such word belongs: as click says it, with the closest option."""
    known = [o for p in ctx.command.params for o in p.opts if o.startswith("--")]
    near = difflib.get_close_matches(word.split("=")[0], known, n=1)
    return exc.UsageError(f"No such option: {word}" + (f" (did you mean {near[0]}?)" if near else "")
                          + (f" ({hint})" if hint else ""))


class _FiniteFloat(click.FloatRange):
    """A number ≥ ``min``: ``nan`` and ``inf`` are no bound a run can be held to."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


@cli.command()
@click.argument("run_id", required=False, metavar="[RUN]")
@click.option("--json", "json_output", is_flag=True, help="machine-readable output")
@click.option("--min-concurrency", type=click.IntRange(min=1), default=None,
              help="fail below this many workers at once")
@click.option("--min-speedup", type=_FiniteFloat(min=0), default=None, help="fail below this speed-up")
@click.option("--max-launch-span", type=_FiniteFloat(min=0), default=None, metavar="MS",
              help="fail if the first batch took longer than this to start")
@_state_dir_option
def proof(run_id: str | None, json_output: bool, min_concurrency: int | None, min_speedup: float | None,
          max_launch_span: float | None, state_dir: str | None) -> None:
    """Prove a run's parallelism from OS evidence (the wrappers' pids and file times): max
    concurrency, speed-up, first-batch launch span, and a check against the scheduler's own
    metrics. Always fails if concurrency ever exceeded the slot count; thresholds are opt-in.
    Exit 0 when the proof holds, 1 when it does not. Default RUN: the newest."""
    from zellij_swarm.commands.proof import format_proof, prove

    report = prove(_find_run(state_dir, run_id), min_concurrency=min_concurrency,
                   min_speedup=min_speedup, max_launch_span_ms=max_launch_span)
    click.echo(json.dumps(report, indent=1) if json_output else format_proof(report, width=_line_width()))
    sys.exit(0 if report["ok"] else 1)


@cli.command()
@click.argument("run_id", required=False, metavar="[RUN]")
@click.option("--html", "html_path", required=True, metavar="FILE", help="write the page to FILE")
@_state_dir_option
def report(run_id: str | None, html_path: str, state_dir: str | None) -> None:
    """Write one self-contained HTML page of a run: a timeline with a lane per slot and a bar
    per attempt, coloured by outcome, the run's counts and its proof of parallelism. A running
    run shows what has happened so far. Default RUN: the newest."""
    from zellij_swarm.commands.report import write_report
    from zellij_swarm.records.outputs import require_names, require_outside_records

    require_names(html_path=html_path)
    run = _find_run(state_dir, run_id)
    require_outside_records(run.dir.parent.parent, html_path=html_path)
    write_report(run, Path(html_path))


_VIEW_PANE_HELP = "(used by run) this is one of the run's own panes: register it, so its end is noticed"


@cli.command()
@click.argument("run_id", required=False, metavar="[RUN]")
@click.option("--once", is_flag=True, help="print one frame and exit")
@click.option("--view-pane", is_flag=True, hidden=True, help=_VIEW_PANE_HELP)
@_state_dir_option
def board(run_id: str | None, once: bool, view_pane: bool, state_dir: str | None) -> None:
    """One line per slot and the run's counters, redrawn as the run goes on (the pane that
    anchors a swarm's layout; works in any terminal)."""
    from zellij_swarm.engine.view_watch import Registration
    from zellij_swarm.render.board import run_board

    run = _find_run(state_dir, run_id)
    sys.exit(run_board(run, once=once, registration=Registration(run, "board") if view_pane else None))


@cli.command(name="slot-view")
@click.argument("args", nargs=-1, required=True, metavar="[RUN] SLOT")
@click.option("--once", is_flag=True, help="print one frame and exit")
@click.option("--view-pane", is_flag=True, hidden=True, help=_VIEW_PANE_HELP)
@_state_dir_option
def slot_view(args: tuple[str, ...], once: bool, view_pane: bool, state_dir: str | None) -> None:
    """One slot: its task, state, times and the tail of its output, following the slot
    across generations (the pane of a slot in compact mode)."""
    from zellij_swarm.render.slotview import run_slot_view

    if len(args) > 2:
        raise exc.UsageError("slot-view takes [RUN] SLOT")
    run_id, slot = (None, args[0]) if len(args) == 1 else args
    if not slot.isdigit() or int(slot) < 1:
        raise exc.UsageError(f"slot must be a number >= 1, not {slot!r}")
    from zellij_swarm.engine.view_watch import Registration

    run = _find_run(state_dir, run_id)
    registration = Registration(run, "slot-view", int(slot)) if view_pane else None
    sys.exit(run_slot_view(run, int(slot), once=once, registration=registration))


@cli.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.argument("file", metavar="FILE")
@click.argument("sbatch_options", nargs=-1, type=click.UNPROCESSED, metavar="[SBATCH OPTIONS]")
@click.option("--in-job", "in_job", default=None, hidden=True, help="the batch job's part: run RUN")
@_state_dir_option
@click.pass_context
def submit(ctx: click.Context, file: str, sbatch_options: tuple[str, ...], in_job: str | None,
           state_dir: str | None) -> None:
    """Run the swarm FILE as a Slurm batch job, which survives logout: the supervisor runs in
    the job, headless, every task a Slurm step. The run's id is printed now; follow it from
    here with status, logs, proof and report (the state directory must be shared with the
    nodes). A job Slurm requeues resumes its own run. Options after FILE go to sbatch
    (--time=2:00:00 --partition=long ...)."""
    from zellij_swarm.commands import submit as submitting

    if file.startswith("-") and file != "-" and not os.path.lexists(file):  # an option where FILE goes
        raise _no_such_option(ctx, file, "sbatch's options go after FILE")
    where = _state_dir(state_dir, writing=True)
    if in_job is not None:
        sys.exit(submitting.in_job(in_job, file, state_dir=where, env=os.environ))
    click.echo(submitting.submit(file, list(sbatch_options), state_dir=where, env=os.environ))


@cli.command()
@click.option("--json", "json_output", is_flag=True, help="machine-readable output")
@click.option("--executor", type=click.Choice(get_args(settings.ExecutorName)), default=None,
              help="slurm: also check the cluster — version, partitions, nodes — and that a step on every node "
                   "can write into the state directory this machine reads (exit 1 if not)")
@_state_dir_option
def doctor(json_output: bool, executor: str | None, state_dir: str | None) -> None:
    """What `auto` would pick and why, Zellij and tmux versions and capabilities, and the
    settings this environment resolves to (with their sources)."""
    from zellij_swarm.commands.doctor import format_report, format_slurm, report, slurm_report

    info = report(os.environ, {"executor": executor})
    lines = format_report(info, os.environ)
    if executor == "slurm":
        info["slurm"] = slurm_report(os.environ, _state_dir(state_dir, writing=True))
        lines += format_slurm(info["slurm"])
    click.echo(json.dumps(info, indent=1) if json_output else "\n".join(lines))
    if executor == "slurm" and not info["slurm"]["ok"]:
        sys.exit(1)


@cli.command()
@click.option("-j", "--jobs", type=click.IntRange(1, 1024), default=4, show_default=True, help="slot views")
@click.option("--ui", type=click.Choice(get_args(settings.UiMode)), default="compact", show_default=True,
              help="the UI of the run it shows; the layout is the same for both: a live worker's own pane is "
                   "in the run's tab, its slot view shows it here")
@click.option("--style", type=click.Choice(list(STYLE_HELP)), default="swarm", show_default=True,
              help="; ".join(f"{k}: {v}" for k, v in STYLE_HELP.items()))
@click.option("--run", "run_id", default=None, help="the run the renderers follow (default: the latest)")
@_state_dir_option
def layout(jobs: int, ui: str, style: str, run_id: str | None, state_dir: str | None) -> None:
    """Print a Zellij (KDL v1) layout that shows a swarm: the board and a slot view per slot.
    Its panes run this Python and read this state directory by absolute path, so it works
    whatever the Zellij server's PATH and cwd:
    `zellij-swarm layout -j 8 > swarm.kdl && zellij --layout swarm.kdl`."""
    directory = str(_state_dir(state_dir))
    for what, value in (("--run", run_id or ""), ("the state directory", directory)):
        swarmfile.require_utf8(what, value, "a layout is text")
    if run_id is not None:  # a run that is there (by its id, or a unique prefix): its panes name it whole
        run_id = find_run(Path(directory), run_id).run_id
    click.echo(generate(jobs, ui, style, run=run_id, state_dir=directory), nl=False)


@cli.command()
@click.option("--older-than", default="7d", show_default=True, metavar="DURATION",
              help="remove the records of ended runs older than this (0: every ended run)")
@click.option("--dry-run", is_flag=True, help="say what would be removed, remove nothing")
@click.option("--force", is_flag=True, help="also remove worktrees holding uncommitted work (it is lost)")
@click.option("--drop-ignored", is_flag=True, help="also remove worktrees whose only leftovers are files git ignores")
@_state_dir_option
def prune(older_than: str, dry_run: bool, force: bool, drop_ignored: bool, state_dir: str | None) -> None:
    """Remove what ended runs left in tmux and Zellij — their swarm-<run-id> sessions (and those
    they created under a --session name), windows and tabs — their git worktrees (not their
    branches with commits), and the records of ended runs older than --older-than. Running
    runs are never touched; a worktree holding uncommitted work, commits on no branch or files
    git ignores is kept (exit 1) unless --force (--drop-ignored: unless all it holds is ignored).
    A tmux or Zellij server that gives no answer is named, and prune exits 1."""
    from zellij_swarm.commands.prune import prune as do_prune

    try:
        age = settings.parse_duration(older_than, zero=True)  # 0: every ended run
    except ValueError as e:
        raise exc.UsageError(f"invalid --older-than {older_than!r}: expected {e}") from None
    kept = unanswered = 0
    for line in do_prune(_state_dir(state_dir, writing=True), os.environ, older_than=age, dry_run=dry_run,
                         force=force, drop_ignored=drop_ignored):
        click.echo(line.text)
        kept += line.kept_work
        unanswered += line.unanswered
    if kept and not dry_run:
        raise exc.SwarmError(f"kept {kept} worktree{'' if kept == 1 else 's'} of ended runs (above) so as not to "
                             "lose work; save it as its line says, or prune --force to discard it")
    if unanswered:
        raise exc.SwarmError("a multiplexer could not be asked (above): what ended runs left in it is still there; "
                             "prune again once it can be")


def main(argv: list[str] | None = None) -> None:
    """Entry point: run click without its own error printing, and print every error as one line."""
    if not sys.platform.startswith("linux"):  # inotify, pidfds, /proc, OFD locks: SPEC §1
        _fail(f"zellij-swarm needs Linux (this is {sys.platform})", 2)
    streams.open_standard_descriptors()
    streams.replace_unencodable()
    try:
        os.getcwd()  # every command finds its state directory from it; a run's tasks run in it
    except FileNotFoundError:
        _fail("the current directory no longer exists (it was removed): cd to one that does", 2)
    try:
        cli.main(args=argv, prog_name="zellij-swarm", standalone_mode=False,
                 obj={"argv": argv if argv is not None else sys.argv[1:]})
    except click.exceptions.NoArgsIsHelpError as e:
        click.echo(e.ctx.get_help() if e.ctx else str(e), err=True)
        sys.exit(2)
    except click.UsageError as e:
        hint = f" (see: zellij-swarm {e.ctx.info_name} --help)" if e.ctx and e.ctx.info_name != "zellij-swarm" else ""
        _fail(f"{e.format_message()}{hint}", 2)
    except click.exceptions.Abort:
        _fail("aborted", 130)
    except exc.SwarmError as e:
        _fail(str(e), e.exit_code)
    except KeyboardInterrupt:
        _fail("interrupted", 130)
    except (BrokenPipeError, _ReaderGone):
        sys.stderr.close()
        os._exit(141)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except OSError as e:
        if e.errno not in _ENVIRONMENT_ERRNOS:
            _crash_report(e)
        # the machine's, not ours: a full or read-only disk, one not ours, stdout on
        # /dev/full — one line, naming the file when the error does
        if e.filename is not None:
            _fail(f"{e.filename}: {e.strerror or e}", 1)
        try:
            sys.stdout.flush()
        except OSError:  # stdout itself: what it holds goes nowhere, not again at exit
            streams.discard_unwritten(sys.stdout)
        _fail(f"cannot write: {e.strerror or e}", 1)  # stdout, or a record whose error names no file
    except Exception as e:
        _crash_report(e)


# OSErrors that say what the machine is like, not what is wrong with this program
_ENVIRONMENT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO, errno.EACCES, errno.EPERM})


def _crash_report(e: BaseException) -> NoReturn:
    """A bug: one line for the user, the traceback kept for a report (exits)."""
    import tempfile
    import traceback

    fd, path = tempfile.mkstemp(prefix="zellij-swarm-crash-", suffix=".txt")
    with os.fdopen(fd, "w") as f:
        traceback.print_exc(file=f)
    _fail(f"internal error: {type(e).__name__}: {e} (traceback in {path}; running workers, if any, "
          "keep running: see `zellij-swarm status`, `resume`)", 1)


def _fail(message: str, code: int) -> NoReturn:
    click.echo(f"zellij-swarm: error: {quoting.terminal_text(message) if message else 'failed'}", err=True)
    sys.exit(code)
