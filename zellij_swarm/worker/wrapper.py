"""The POSIX ``sh`` wrapper every generation runs through (SPEC §5).

The wrapper is the contract between the supervisor and a worker, whatever the backend:

1. it claims the generation (``claim`` created with O_EXCL through ``set -C``); a wrapper that
   finds the claim taken exits 0 without running anything, so a generation runs at most once.
   Started with the argument ``claimed`` it skips this: the supervisor took the claim for it
   (a pane that never reported in, run headless instead) and the wrapper only restamps the
   claim file, whose modification time is the generation's start;
   in a pane, the first stage (claim, heartbeat with the pane id, log set-up) runs with the
   multiplexer server's environment, then re-executes itself under ``env -i`` as ``restored``
   and loads the caller's saved environment — the only way to drop every server variable;
2. appends the launch heartbeat ``{"event":"started","pid":…,"pane_id":…}`` (and, in a Slurm
   step, ``"node"`` and ``"step"``, its ``job.step`` id);
3. exports the worker environment (in a pane it first restores the caller's saved
   environment, because a multiplexer pane inherits the multiplexer server's);
4. changes to the task's cwd itself and runs the command: headless (and compact), its stdout
   to ``output.log`` and its stderr to ``stderr.log``, kept apart as GNU parallel keeps them;
   in a pane both are the pane's one terminal, copied to ``output.log``;
5. writes the ``exit`` sidecar — one line, ``<code>``, or ``- cwd_missing``, or ``- spawn_failed``
   when the shell could not fork the worker's process (it then exits at once, status 2,
   running only its EXIT trap, which writes it) — as its last durable act (the commit
   marker); its modification time is the end time;
6. appends ``{"event":"exited","code":…}`` and exits with the worker's code.

Cost matters (2,000 short tasks is a real use), so the wrapper uses shell builtins only: no
``date``, ``mv``, ``tee`` or ``cat``; times come from file modification times. A shell
``cmd`` runs as ``/bin/sh -c CMD`` would (SPEC §5.4): ``$$``, ``$0`` (``sh``), ``$PPID``,
``exit``, traps and signals mean what they mean there — a command that kills ``$$`` dies by
that signal and is recorded so, and it can never signal or end the wrapper by accident. One
that is one simple command (``simple_form``) is exec'd in a subshell of the wrapper, as
bash's ``sh -c`` would exec it in its own place: that saves the exec of a shell, about 0.7 ms
of CPU a task on this project's machines — as much as the whole of a bare ``xargs``'s work;
a builtin such as ``true`` or ``echo`` runs in the wrapper itself, without even that fork
(0.2 ms). Any other gets a shell of its own. An ``argv`` task is exec'd directly. The
wrapper's own variables all start with ``_zsw_``.

Every value spliced into the script goes through ``quoting.shell_word``; the header comment holds
only generated identifiers, never a task name (a newline in a name would end a comment). The
files it writes, and what is in them, are those ``generation_files`` reads.
"""

from __future__ import annotations

import functools
import re
import shutil
import signal
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from zellij_swarm import quoting
from zellij_swarm.records import envfile, generation_files
from zellij_swarm.records.generation_files import GenPaths
from zellij_swarm.worker._paneleader import EXITED_LINE, WORKER_SIGNALS, survivable


@dataclass(frozen=True)
class WorkerIdentity:
    run_id: str
    task_name: str
    task_id: str
    slot: int
    generation: int
    attempt: int


# The pane's session leader after the first stage (see _paneleader), and the relay that gives a
# worker a terminal of its own and logs it (see _ptyrelay): this interpreter, isolated and
# without site packages, so they start in a few milliseconds.
PANE_LEADER = (sys.executable, "-I", "-S", str(Path(__file__).with_name("_paneleader.py")))
PTY_RELAY = (sys.executable, "-I", "-S", str(Path(__file__).with_name("_ptyrelay.py")))


def _in_gen_dir(name: str) -> str:
    """A file of the generation as the wrapper names it: in ``$_zsw_d``, its directory."""
    return f'"$_zsw_d/{name}"'


_CLAIM = _in_gen_dir(generation_files.CLAIM)
_HEARTBEAT = _in_gen_dir(generation_files.HEARTBEAT)
_OUTPUT = _in_gen_dir(generation_files.OUTPUT)
_STDERR = _in_gen_dir(generation_files.STDERR)
_EXIT_SIDECAR = _in_gen_dir(generation_files.EXIT_SIDECAR)
_HANGUP = _in_gen_dir(generation_files.HANGUP)
_EXITED = quoting.shell_word(EXITED_LINE.format("%s") + "\\n")  # printf's format: the pane leader writes it too

# Claiming is creating the claim file with O_EXCL (``set -C``): a wrapper that finds it taken
# leaves (exit 0). One that could not create it at all — no room, a read-only state directory —
# leaves with UNCLAIMED_EXIT: to the launcher, its parent, that status (with no claim) is the
# evidence that nothing ran. A wrapper whose claim is missing after any other status ran its
# worker, which may have removed its own records (``rm -rf`` of its generation's directory).
UNCLAIMED_EXIT = 223  # above the 128+N of the signals; a worker would also have to remove its claim
_CLAIM_OR_LEAVE = (f"set -C; {{ echo $$ >{_CLAIM}; }} 2>/dev/null || "
                   f"{{ [ -e {_CLAIM} ] && exit 0; exit {UNCLAIMED_EXIT}; }}; set +C")
# The supervisor took the claim for this wrapper ("claimed"): it writes its own pid there, or,
# when it cannot (no room), leaves as one that could not claim — an empty claim must mean that
# nothing ran.
_RESTAMP = f"{{ echo $$ >|{_CLAIM}; }} 2>/dev/null || exit {UNCLAIMED_EXIT}"
# The node a Slurm step runs on (slurmd names it; node names are plain words) and the step
# itself (job.step, numbers), else nothing.
_NODE = ('"${SLURMD_NODENAME:+,\\"node\\":\\"$SLURMD_NODENAME\\",'
         '\\"step\\":\\"${SLURM_JOB_ID-}.${SLURM_STEP_ID-}\\"}"')


def _after_worker(write: str, path: str) -> str:
    """``write >>path`` once the worker has run, unless ``path`` is there and no plain file of
    its own: a FIFO the worker made in its place would hold the wrapper in its ``open`` for
    ever, and with it the generation's end; through a symlink the wrapper would append to
    whatever file it names, or create the one a dangling link names. Skipped, the record is
    missing, or the supervisor finds something no wrapper writes there (``exit_garbled``)."""
    return f"! [ -h {path} ] && {{ [ -f {path} ] || ! [ -e {path} ]; }} && {write} >>{path}"


# The signals the wrapper outlives (``trap :``): every one that would end it but a fault of its
# own — a signal sent to the generation's whole process group (``kill -VTALRM 0`` from its
# worker, ``scancel --signal``) reaches the wrapper too, and a wrapper that died of it, maybe
# after it had reaped its worker, left no record: ``lost``, where the worker's own death by the
# signal is its end. Those aimed at workers by name, the rest by number (dash knows no name for
# the real-time ones); the worker is given each at its default (a handled signal is reset by exec).
_NAMED = {int(getattr(signal, name)): name.removeprefix("SIG") for name in WORKER_SIGNALS}
_OUTLIVED = " ".join(_NAMED.get(int(sig), str(int(sig))) for sig in survivable())

# The pane's second stage's leader is dead: the stage's parent is no longer the process that
# started it (``$PPID``, the leader; the kernel gives an orphan to a subreaper or init as the
# leader exits, before the multiplexer hears of the exit and closes the pane's terminal). Its
# parent read from ``/proc`` (field 4 of ``stat``, after the command name's ``)``); unreadable,
# the leader is taken to live.
_LEADER_GONE = ('{ read -r _zsw_st </proc/$$/stat; } 2>/dev/null && _zsw_st="${_zsw_st##*) }" '
                '&& _zsw_st="${_zsw_st#* }" && [ "${_zsw_st%% *}" != "$PPID" ]')

_HEADLESS_HEARTBEAT = f'printf \'{{"event":"started","pid":%s,"pane_id":null%s}}\\n\' $$ {_NODE} >>{_HEARTBEAT}'


@dataclass(frozen=True)
class PaneMode:
    """How a generation that runs in a multiplexer pane differs from a headless one."""

    pane_var: str  # set by the multiplexer for this very pane: TMUX_PANE, ZELLIJ_PANE_ID
    pane_prefix: str  # recorded pane id = prefix + value ("terminal_" for Zellij, "" for "%12")
    saved_env: Path  # the caller's environment (records.envfile)
    # Shell run in the first stage, before the pane leader starts (tmux: wait at the gate the
    # backend holds until the invocation that opened the pane has ended).
    before_leader: str = ""
    # How the worker runs on the pane's terminal, when not directly: shell words put before
    # its command (Zellij: ``PTY_RELAY``, which keeps the worker on a TTY and logs it). The
    # status they exit with is recorded as the worker's.
    runner: str = ""
    # Shell run once the runner has returned, before the exit is recorded: it ends what a
    # runner killed outright left running (Zellij: the relay's ``--end``).
    after_runner: str = ""
    # Shell run in the pane after the exit is recorded (a pane that must outlive its worker).
    hold: str = ""
    # The pane runs as a Slurm step (engine.remote): what the step gave its task — SLURM_* and
    # the devices it was bound to — survives the second stage's restore of the caller's
    # environment. Never otherwise: a multiplexer server's SLURM_* are stale.
    step_env: bool = False
    # The multiplexer may close the pane's terminal before it has read the worker's last
    # output (tmux): the pane leader lets it read to the end before it exits (``_paneleader``)
    # — not a step's, whose terminal is srun's, never closed before the leader exits.
    read_to_end: bool = False


# A command the run's headless wrapper may run without a shell of its own (``simple_form``) is
# one simple command: words, quotes and blanks only. Outside single quotes no parameter or
# command substitution (``$$``, ``$0``, ``$PPID`` and the positional parameters would be the
# wrapper's) and no escape; outside any quotes no list, pipeline, group or redirection; no
# newline at all (a multi-line command's errors are counted in lines).
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_QUOTE_CHARS = re.compile("['\"]")
_FIRST_WORD = re.compile(r"[ \t]*((?:[^ \t'\"]|'[^']*'|\"[^\"]*\")*)")  # the shell's blanks: space, tab
_SUBSTITUTION = re.compile(r"[$`\\]")
_SHELL_SYNTAX = re.compile(r"[;&|()<>{}]")
# Builtins that start no process, end at once and change nothing of the shell they run in:
# run in the wrapper's own shell, as ``sh -c true`` runs ``true`` — no fork at all.
_INSTANT_BUILTINS = frozenset({":", "true", "false", "echo", "test", "["})
# Builtins that end at once and show nothing of the shell they run in, but would end or change
# the wrapper's own (bash's ``printf -v`` sets a variable): ``eval``'d as they are in its subshell.
_PURE_BUILTINS = frozenset({"printf", "exit", "exec", "kill"})
# Every other builtin and reserved word of dash and bash (a ``/bin/sh`` may be either): these
# need a shell of their own — ``cd -``, ``set`` or ``times`` would show the wrapper's, ``.``
# sources a file, ``command`` and ``eval`` run a command below a shell that waits.
_SHELL_WORDS = frozenset({
    ".", "alias", "bg", "bind", "break", "builtin", "caller", "cd", "chdir", "command", "compgen",
    "complete", "compopt", "continue", "declare", "dirs", "disown", "enable", "eval", "export", "fc", "fg",
    "getopts", "hash", "help", "history", "jobs", "let", "local", "logout", "mapfile", "popd", "pushd",
    "pwd", "read", "readarray", "readonly", "return", "set", "shift", "shopt", "source", "suspend", "times",
    "trap", "type", "typeset", "ulimit", "umask", "unalias", "unset", "wait", "!", "{", "}", "[[", "]]",
    "case", "coproc", "do", "done", "elif", "else", "esac", "fi", "for", "function", "if", "in", "select",
    "then", "time", "until", "while",
})
# The wrapper's kinds of a command (its fourth argument), and how it runs each.
IN_SHELL = "sh"  # ``/bin/sh -c CMD``: a shell of its own
EXECED = "argv"  # exec'd as it is (an argv task, or a command under envfile's exec)
IN_SUBSHELL = "eval"  # one simple command, ``eval``'d in a subshell of the wrapper
IN_WRAPPER = "builtin"  # one builtin, ``command eval``'d in the wrapper's own shell


def simple_form(cmd: str) -> tuple[str, str] | None:
    """How the run's headless wrapper runs ``cmd`` as ``/bin/sh -c CMD`` would, without the exec
    of a shell: ``(kind, text)``, or None when ``cmd`` needs a shell of its own.

    - One simple command naming a program is exec'd from a subshell of the wrapper
      (``IN_SUBSHELL``, ``exec CMD``), as bash's ``sh -c`` execs it in its own place: the
      wrapper is its parent, and a signal sent to the generation's process group reaches the
      command with no shell between that could die of it first and be recorded in its stead
      (dash's ``sh -c`` keeps one waiting). The shell's own error messages name the builtin
      that ran it: ``sh: 1: exec: nosuch: not found``.
    - A builtin that ends at once and could end or change the wrapper (``exit 3``, ``kill``)
      is ``eval``'d as it is in that subshell, which ends with it.
    - One that starts no process and changes nothing (``true``, ``echo hi``, ``test -f x``)
      runs in the wrapper itself (``IN_WRAPPER``), as ``sh -c`` runs it in its own: not even
      a fork.

    Anything else — a list, a pipeline, a substitution, any other builtin or reserved word, an
    assignment — gets a shell of its own."""
    if "\n" in cmd or "\r" in cmd:
        return None
    substituted = False

    def unquoted(m: re.Match[str]) -> str:
        nonlocal substituted
        substituted = substituted or (m[0][0] == '"' and _SUBSTITUTION.search(m[0]) is not None)
        return "_"

    bare = _QUOTED.sub(unquoted, cmd)
    # (a quote left over is an unclosed one: the shell's syntax error, from a shell of its own)
    if substituted or _SUBSTITUTION.search(bare) or _SHELL_SYNTAX.search(bare) or _QUOTE_CHARS.search(bare):
        return None
    name = _QUOTE_CHARS.sub("", _FIRST_WORD.match(cmd)[1])  # type: ignore[index]  # (it matches any text)
    if not name:
        return None
    if name in _INSTANT_BUILTINS:
        return IN_WRAPPER, cmd
    if name in _PURE_BUILTINS:
        return IN_SUBSHELL, cmd
    # (a name starting with ``-`` would be an option of bash's ``exec``, ``-c`` or ``-a``)
    if name in _SHELL_WORDS or "=" in name or name.startswith("-") or any(c in name for c in "*?["):
        return None
    return IN_SUBSHELL, "exec " + cmd


def arguments(gen: GenPaths, who: WorkerIdentity, *, cmd: str | None, argv: tuple[str, ...] | None, cwd: str,
              env: Mapping[str, str], unexportable_env: Path | None = None,
              headless: bool = False) -> tuple[str, ...]:
    """What one generation is, as the wrapper's arguments after its mode:
    ``GEN-DIR CWD KIND NAME=VALUE... -- COMMAND...``, KIND ``IN_SHELL`` (one word),
    ``EXECED``, or one of ``simple_form``'s (one word): these only with ``headless``, for the
    run's headless wrapper — a pane's runs every ``cmd`` in a shell of its own, which execs
    one that names a program (``exec CMD``). With
    ``unexportable_env`` (the run's saved environment, when it has variables no shell can
    carry) the command runs under ``envfile``'s exec, which adds them back, and a ``cmd`` under
    ``name_keeping_shell``."""
    exports = {
        "ZELLIJ_SWARM_RUN_ID": who.run_id,
        "ZELLIJ_SWARM_TASK": who.task_name,
        "ZELLIJ_SWARM_TASK_ID": who.task_id,
        "ZELLIJ_SWARM_SLOT": str(who.slot),
        "ZELLIJ_SWARM_GENERATION": str(who.generation),
        "ZELLIJ_SWARM_ATTEMPT": str(who.attempt),
        "ZELLIJ_SWARM_HEARTBEAT": generation_files.plain(gen, generation_files.HEARTBEAT),
        "ZELLIJ_SWARM_ARTIFACT_DIR": generation_files.plain(gen, generation_files.ARTIFACTS),
        **env,
    }
    command = argv if argv is not None else (cmd or ":",)
    kind = EXECED if argv is not None else IN_SHELL
    if unexportable_env is not None:
        shell = (*name_keeping_shell(), cmd or ":", "sh") if argv is None else ()
        command, kind = (*envfile.exec_argv("unexportable", unexportable_env), *shell, *(argv or ())), EXECED
    elif kind == IN_SHELL and (form := simple_form(command[0])) is not None:
        if headless:
            kind, text = form
            command = (text,)
        elif form[1].startswith("exec "):
            # A pane's command runs under a shell of its own (``sh -c``): one that names a
            # program is exec'd by it at once, so that no shell stays waiting between the
            # worker and a signal (dash keeps one): a cancel's SIGTERM ended that shell first,
            # the wrapper recorded 143, and the pane's terminal hung up a worker that trapped
            # SIGTERM in the middle of its save.
            command = (form[1],)
    return (str(gen.dir), cwd, kind, *(f"{k}={v}" for k, v in exports.items()), "--", *command)


@functools.cache
def name_keeping_shell() -> tuple[str, ...]:
    """The words that run a ``cmd`` (``WORDS CMD sh``) in a run whose environment holds
    variables whose names are not shell identifiers: bash in its POSIX mode, which passes them
    on to what the command starts, as the caller passed them (dash, this project's
    ``/bin/sh``, drops them) — else ``/bin/sh``, with that limit (SPEC §5.3, *Decision*)."""
    bash = shutil.which("bash")
    return (bash, "--posix", "-c") if bash else ("/bin/sh", "-c")


def run_script(run_id: str) -> str:
    """The run's one headless wrapper (``RunPaths.worker_script``), started per generation by
    ``headless_argv`` with ``arguments`` (``headless``)."""
    return "\n".join([generation_files.worker_script_header(run_id), *_body(None)]) + "\n"


def headless_argv(script: Path, args: tuple[str, ...]) -> tuple[str, ...]:
    """``/bin/sh -c '. worker.sh' sh MODE ARGUMENTS...`` (MODE ``claimed`` or empty): sourced, so
    that ``$0`` is ``sh``, as a ``/bin/sh -c`` worker's is — the shell's error messages about an
    ``eval``'d command start with ``$0``, which is no place for the run's path."""
    return (*_SOURCED, ". " + quoting.shell_word(str(script)), "sh", "", *args)


_SOURCED = ("/bin/sh", "-c")


def _mode_at(argv: tuple[str, ...]) -> int:
    """Where a wrapper's start (``headless_argv``'s, or a pane's own ``/bin/sh wrapper.sh
    [MODE]``) has its mode: after ``$0``, or after the pane's wrapper file."""
    return 4 if argv[:2] == _SOURCED else 2


def start_parts(argv: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    """A wrapper's start as its mode (``""`` for none) and the generation's arguments that
    follow it (``arguments``; none in a pane's own wrapper, which holds them)."""
    at = _mode_at(argv)
    return (argv[at] if len(argv) > at else ""), argv[at + 1:]


def claimed_argv(argv: tuple[str, ...]) -> tuple[str, ...]:
    """A wrapper's start in the mode ``claimed``: the supervisor holds the claim."""
    at = _mode_at(argv)
    return (*argv[:at], "claimed", *argv[at + 1:])


def render(
    gen: GenPaths,
    who: WorkerIdentity,
    *,
    cmd: str | None,
    argv: tuple[str, ...] | None,
    cwd: str,
    env: Mapping[str, str],
    pane: PaneMode | None = None,
    unexportable_env: Path | None = None,
) -> str:
    """A wrapper of one generation's own, with its arguments inside: what a pane runs (a
    multiplexer's command line has a size limit, and the pane's second stage runs the file
    again), started as ``/bin/sh wrapper.sh [MODE]``."""
    q = quoting.shell_word
    lines = [
        generation_files.wrapper_header(who.run_id, who.task_id, who.slot, who.generation, who.attempt),
        'set -- "${1-}" ' + " ".join(q(a) for a in arguments(gen, who, cmd=cmd, argv=argv, cwd=cwd, env=env,
                                                                  unexportable_env=unexportable_env)),
    ]
    return "\n".join(lines + _body(pane)) + "\n"


def _body(pane: PaneMode | None) -> list[str]:
    """The wrapper's steps, the same for every generation: what differs comes in ``$@``."""
    lines = [
        '_zsw_mode=$1 _zsw_d=$2 _zsw_cwd=$3 _zsw_kind=$4',
        "shift 4",
        # Outlive every signal aimed at the worker — also one sent to its whole process group
        # or Slurm step, which reaches the wrapper too — so the record is always the worker's
        # death by it, never a race between the two. ``trap :`` (not ``trap ''``): a handled
        # signal is reset to its default for the worker, an ignored one would be inherited.
        "trap : " + _OUTLIVED,
        *(_pane_stages(pane) if pane else _headless_stage()),
        'while [ "$1" != -- ]; do export "$1"; shift; done; shift',
        f'[ "$_zsw_kind" = {IN_SHELL} ] && set -- /bin/sh -c "$1" sh',
    ]

    def run(redirects: str, runner: str = "", guard: str = "") -> str:
        # The redirections sit inside the subshell, which execs the worker: the shell reports
        # a worker's death by signal ("Terminated") on its own stderr, with whatever
        # redirections it applied itself still in place — never into the worker's output.
        return f'( {guard}exec {runner}"$@" {redirects} )'

    # Headless, the worker's stdout and stderr go to their logs; in a pane they stay on the
    # pane's terminal (the worker sees a TTY) and the first stage's log set-up copies it.
    redirect = f">>{_OUTPUT} 2>>{_STDERR}"
    # ``simple_form``'s kinds. In the subshell (``exec CMD``, or a builtin that ends at once):
    # its traps are reset, so the worker's signals are at their defaults and the EXIT trap
    # below is not its; its positional parameters are emptied, as ``sh -c CMD sh`` has none;
    # its output goes to the logs before, as an exec'd worker's does. In the wrapper itself, a
    # builtin that starts no process: ``command`` keeps a log it cannot open from ending the
    # wrapper (``eval`` is a special builtin), its status 2 then, as the subshell's would be.
    launch = (f'  if [ "$_zsw_kind" = {IN_SUBSHELL} ]; then '
              f'( exec {redirect}; _zsw_cmd=$1; set --; eval "$_zsw_cmd" ); '
              f'elif [ "$_zsw_kind" = {IN_WRAPPER} ]; then command eval "$1" {redirect}; '
              f'else {run(redirect)}; fi')
    if pane:
        # The wrapper's own stderr (where the shell reports a worker's death by signal)
        # must not reach the pane, or pipe-pane would log it as the worker's output.
        # A pane whose terminal hung up before its worker started (closed as it opened) runs
        # nothing: its status is a hang-up's, 129, and the mark below says whose. The look is
        # made in the subshell that becomes the worker: one that exists when the pane leader
        # passes the hang-up on dies of it (a subshell's traps are reset), one forked after
        # finds the terminal hung up already — no moment in between starts a worker unseen.
        # Nor does one whose leader is dead (killed outright): Zellij keeps the terminal of a
        # pane whose first process ended (held), and a worker started there after the
        # supervisor found the leader dead with no start written would run beside the
        # generation that runs its task again (SPEC §2). (Not a Slurm step's: its leader is on
        # the node, and such a generation is never run again so.)
        leader_lives = "" if pane.step_env else f" && ! {{ {_LEADER_GONE}; }}"
        in_pane = run("2>&3 3>&-", pane.runner + " " if pane.runner else "",
                      guard=f"[ -t 0 ] && ! [ -e {_HANGUP} ]{leader_lives} || exit 129; ")
        launch = (f'  if [ -n "$_zsw_headless" ]; then {run("</dev/null " + redirect)}; '
                  f'else exec 3>&2 2>/dev/null; {in_pane}; fi')
    # A shell that cannot fork (no process to be had) exits on the spot, status 2 — what a
    # worker's own exit 2 reads as — with nothing written but by an EXIT trap: armed only
    # around the fork, it says the worker never started.
    unforked = _after_worker("printf '%s\\n' '- spawn_failed'", _EXIT_SIDECAR)
    lines += [
        'if cd -- "$_zsw_cwd" 2>/dev/null; then',
        f"  trap {quoting.shell_word(unforked)} EXIT",
        launch,
        "  _zsw_rc=$?; trap - EXIT",
        *([f"  {pane.after_runner}"] if pane and pane.after_runner else []),
        # A pane's terminal that hung up (the pane closed, the session went) is marked before
        # the exit is recorded: the kernel's SIGHUP reaches the worker as soon as the pane
        # leader's, which marks it too but may come second (SPEC §6). A mark the leader made
        # is left as it is: its time is the hang-up's, which the outcome compares with the end.
        # (nor made through a dangling link the worker left there: ``_after_worker``)
        # Not in the leader's place once it is dead (``kill -9``): nobody closed the pane —
        # the multiplexer closes a pane's terminal as its first process, the leader, exits,
        # and the worker's end by that hang-up is its own failure, as when a Zellij pane's pty
        # relay is killed (SPEC §2): unmarked, whichever of the close and this look came first.
        *([f'  [ -n "$_zsw_headless" ] || [ -t 0 ] || [ -e {_HANGUP} ] || [ -h {_HANGUP} ] || '
           f'{{ {_LEADER_GONE}; }} || : >{_HANGUP}']
          if pane else []),
        # Appended, not written with ``>``: the sidecar is absent or empty here (a shell's is
        # emptied by its fold), so the line is the same — but ext4 allocates the blocks of a
        # file truncated on open as it is closed (auto_da_alloc), and the next fold's emptying
        # must then free them: 1.6 ms a task of the commit thread's wall on this project's
        # machines (``discard``), 0.1 ms appended.
        "  " + _after_worker("printf '%s\\n' \"$_zsw_rc\"", _EXIT_SIDECAR),
        "else",
        # (the reason stays cwd_missing: there is no directory there this worker can run in)
        "  if [ -e \"$_zsw_cwd\" ]; then _zsw_why='cannot enter cwd (not a directory, or no permission)'; "
        "else _zsw_why='cwd does not exist'; fi",
        f"  printf 'zellij-swarm: %s: %s\\n' \"$_zsw_why\" \"$_zsw_cwd\" >>{_OUTPUT}",
        "  _zsw_rc=1",
        f"  printf '%s\\n' '- cwd_missing' >>{_EXIT_SIDECAR}",
        "fi",
        _after_worker(f'printf {_EXITED} "$_zsw_rc"', _HEARTBEAT) + " || :",
        *([f'[ -n "$_zsw_headless" ] || {{ {pane.hold}; }}'] if pane and pane.hold else []),
        'exit "$_zsw_rc"',
    ]
    return lines


def _headless_stage() -> list[str]:
    return [
        f'if [ "$_zsw_mode" = claimed ]; then {_RESTAMP}',
        f"else {_CLAIM_OR_LEAVE}",
        "fi",
        # The wrapper's own stdout/stderr stay out of the log (the shell reports a worker's
        # death by signal there); only the worker's output goes to its logs.
        "exec </dev/null",
        _HEADLESS_HEARTBEAT,
    ]


def _pane_stages(pane: PaneMode) -> list[str]:
    q = quoting.shell_word
    leader = (" ".join(q(a) for a in PANE_LEADER) + (" --read-to-end" if pane.read_to_end and not pane.step_env else "")
              + f" --hangup {_HANGUP} --exit {_EXIT_SIDECAR} --heartbeat {_HEARTBEAT}")
    # the pane leader empties the environment for the second stage (a step's own variables
    # kept), which starts with the caller's saved one restored under them
    leader = (f"{leader} --step-env {pane.pane_var}" if pane.step_env
              else f'/usr/bin/env -i _ZSW_PANE="${{{pane.pane_var}-}}" {leader}')
    restore = " ".join(q(a) for a in envfile.exec_argv("restore", pane.saved_env))
    return [
        "_zsw_headless=",
        "case $_zsw_mode in",
        "claimed)  # the supervisor took the claim: run headless, as its own child",
        f"  {_RESTAMP}; _zsw_headless=1",
        f"  {_HEADLESS_HEARTBEAT} ;;",
        "restored)  # second stage in the pane: the caller's environment comes back",
        # The launch heartbeat comes from here, once the traps above are armed; its pid is
        # the pane leader's (this stage's parent), which claimed the generation.
        '  case $_ZSW_PANE in ""|*[!A-Za-z0-9_%]*) _zsw_pj=null ;;',
        f'    *) _zsw_pj="\\"{pane.pane_prefix}$_ZSW_PANE\\"" ;; esac',
        *(['  eval "$_ZSW_STEP"'] if pane.step_env else []),  # its node, for the heartbeat
        # Not once its leader is dead (killed outright while this stage was starting): no
        # worker will start (the guard at its fork), and a start written now made the
        # supervisor, which had found the leader dead with no start, take the generation for
        # one whose worker began (``unknown``, not run again) — nothing had run.
        *([] if pane.step_env else [f"  if {_LEADER_GONE}; then exit 129; fi"]),
        f'  printf \'{{"event":"started","pid":%s,"pane_id":%s%s}}\\n\' "$PPID" "$_zsw_pj" {_NODE} >>{_HEARTBEAT}',
        *(['  eval "$_ZSW_STEP"; unset _ZSW_STEP'] if pane.step_env else []),  # over the caller's
        f'  export {pane.pane_var}="$_ZSW_PANE"; unset _ZSW_PANE ;;',
        "*)  # first stage in the pane, with the multiplexer server's environment",
        f"  {_CLAIM_OR_LEAVE}",
        *([f"  {pane.before_leader}"] if pane.before_leader else []),
        f"  exec {leader} {restore} /bin/sh \"$0\" restored ;;",
        "esac",
    ]
