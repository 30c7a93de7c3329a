"""The fake `zellij` CLI: argv parsing (clap-like, version gated), session commands, and the
thin client that forwards actions to the per-session server.
"""
from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
import sys
import time

from . import common
from .common import UsageError

V = common.parse_version


class Opt:
    def __init__(self, name, long=None, short=None, takes=False, since=None, until=None,
                 multi=False):
        self.name, self.long, self.short = name, long, short
        self.takes, self.since, self.until, self.multi = takes, since, until, multi

    def available(self, ver):
        if self.since is not None and ver < self.since:
            return False
        return self.until is None or ver < self.until


def O(name, long=None, short=None, takes=False, since=None, until=None, multi=False):  # noqa: E743
    return Opt(name, long, short.lstrip("-") if short else None, takes,
               V(since) if since else None, V(until) if until else None, multi)


class Exit(Exception):
    def __init__(self, code):
        self.code = code


# =============================================================================== the context

class Ctx:
    """One invocation: env, version, faults, captured output for the invocation log."""

    def __init__(self, argv):
        self.argv = list(argv)
        self.env = os.environ
        self.ver_str = common.version_string()
        self.version = V(self.ver_str)
        self.clap4 = self.version >= (0, 45, 0)
        self.faults = common.parse_faults(common.fault_text())
        self.cwd = os.getcwd()
        self.start = time.time()
        self.stdout_parts = []
        self.stderr_parts = []
        self.logged = False
        self.subcmd = None

    def out(self, text):
        if not text:
            return
        self.stdout_parts.append(text)
        sys.stdout.write(text)
        sys.stdout.flush()

    def err(self, text):
        if not text:
            return
        self.stderr_parts.append(text)
        sys.stderr.write(text)
        sys.stderr.flush()

    def exit(self, code):
        raise Exit(code)

    def log(self, code, **extra):
        if self.logged:
            return
        self.logged = True
        path = common.log_path()
        keep = ("ZELLIJ", "ZELLIJ_SESSION_NAME", "ZELLIJ_PANE_ID", "ZELLIJ_SOCKET_DIR",
                "ZELLIJ_CONFIG_DIR", "ZELLIJ_CONFIG_FILE", "FAKE_ZELLIJ_VERSION",
                "FAKE_ZELLIJ_FAULTS", "FAKE_ZELLIJ_FAULTS_FILE", "XDG_RUNTIME_DIR",
                "XDG_CACHE_HOME", "HOME", "TERM", "SHELL")
        entry = {
            "argv": self.argv,
            "subcommand": self.subcmd,
            "cwd": self.cwd,
            "env": {k: self.env[k] for k in keep if k in self.env},
            "stdout": "".join(self.stdout_parts),
            "stderr": "".join(self.stderr_parts),
            "exit": code,
            "start": self.start,
            "end": time.time(),
            "pid": os.getpid(),
            "version": self.ver_str,
        }
        entry.update(extra)
        try:
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            import fcntl
            with open(path, "a", encoding="utf-8") as fh:
                fcntl.flock(fh, fcntl.LOCK_EX)
                fh.write(json.dumps(entry, ensure_ascii=False) + "\n")
                fh.flush()
                fcntl.flock(fh, fcntl.LOCK_UN)
        except OSError:
            pass

    def hang(self):
        self.log(None, hung=True)
        while True:
            time.sleep(3600)

    # ---------------------------------------------------------------- clap-like errors
    def unexpected(self, arg, usage):
        if self.clap4:
            return f"unexpected argument '{arg}' found\n\nUsage: {usage}\n\n" \
                   "For more information, try '--help'."
        return (f"Found argument '{arg}' which wasn't expected, or isn't valid in this context"
                f"\n\nUSAGE:\n    {usage}\n\nFor more information try --help")

    def missing(self, what, usage):
        if self.clap4:
            return f"the following required arguments were not provided:\n  {what}\n\n" \
                   f"Usage: {usage}\n\nFor more information, try '--help'."
        return (f"The following required arguments were not provided:\n    {what}\n\n"
                f"USAGE:\n    {usage}\n\nFor more information try --help")

    def no_value(self, opt, usage):
        if self.clap4:
            return f"a value is required for '{opt}' but none was supplied\n\n" \
                   "For more information, try '--help'."
        return f"The argument '{opt}' requires a value but none was supplied\n\n" \
               f"USAGE:\n    {usage}\n\nFor more information try --help"

    def conflict(self, a, b, usage):
        if self.clap4:
            return f"the argument '{a}' cannot be used with '{b}'\n\nUsage: {usage}\n\n" \
                   "For more information, try '--help'."
        return f"The argument '{a}' cannot be used with '{b}'\n\nUSAGE:\n    {usage}\n\n" \
               "For more information try --help"


def parse(ctx, args, opts, usage, stop_at_positional=False):
    """Returns (values, positionals, trailing(list|None), rest)."""
    ver = ctx.version
    longs = {o.long: o for o in opts if o.long and o.available(ver)}
    shorts = {o.short: o for o in opts if o.short and o.available(ver)}
    vals, pos = {}, []
    i = 0

    def store(o, v):
        if o.multi:
            vals.setdefault(o.name, []).append(v)
        elif o.name in vals:
            if ctx.clap4:
                raise UsageError(f"the argument '{o.long or '-' + o.short}' cannot be used "
                                 f"multiple times\n\nUsage: {usage}\n\n"
                                 "For more information, try '--help'.")
            raise UsageError(f"The argument '{o.long or '-' + o.short}' was provided more than "
                             f"once, but cannot be used multiple times\n\nUSAGE:\n    {usage}\n\n"
                             "For more information try --help")
        else:
            vals[o.name] = v

    def value_ok(v):
        return not (v.startswith("-") and len(v) > 1 and not re.fullmatch(r"-\d+", v))

    while i < len(args):
        a = args[i]
        if a == "--":
            return vals, pos, args[i + 1:], []
        if a.startswith("--") and len(a) > 2:
            name, eq, v = a.partition("=")
            o = longs.get(name)
            if o is None:
                raise UsageError(ctx.unexpected(a if not eq else name, usage))
            if o.takes:
                if not eq:
                    if i + 1 >= len(args) or not value_ok(args[i + 1]):
                        raise UsageError(ctx.no_value(f"{o.long} <{o.name.upper()}>", usage))
                    i += 1
                    v = args[i]
                store(o, v)
            else:
                if eq:
                    raise UsageError(ctx.unexpected(a, usage))
                store(o, True)
        elif a.startswith("-") and len(a) > 1 and not re.fullmatch(r"-\d+", a):
            j = 1
            while j < len(a):
                c = a[j]
                o = shorts.get(c)
                if o is None:
                    raise UsageError(ctx.unexpected("-" + c, usage))
                if o.takes:
                    rest = a[j + 1:]
                    if rest:
                        v = rest[1:] if rest.startswith("=") else rest
                    else:
                        if i + 1 >= len(args) or not value_ok(args[i + 1]):
                            raise UsageError(ctx.no_value(f"-{o.short} <{o.name.upper()}>",
                                                          usage))
                        i += 1
                        v = args[i]
                    store(o, v)
                    break
                store(o, True)
                j += 1
        else:
            if stop_at_positional:
                return vals, pos, None, args[i:]
            pos.append(a)
        i += 1
    return vals, pos, None, []


# =============================================================================== sessions

def live_sessions(ctx):
    """[(name, path, mtime)] of sockets that accept a connection; dead sockets are removed."""
    d = common.socket_dir(ctx.ver_str)
    out = []
    try:
        names = os.listdir(d)
    except FileNotFoundError:
        return out
    import stat as _stat
    for name in names:
        path = os.path.join(d, name)
        try:
            st = os.stat(path)
        except OSError:
            continue
        if not _stat.S_ISSOCK(st.st_mode):
            continue
        s = common.connect(path, timeout=2)
        if s is None:
            try:
                os.unlink(path)
            except OSError:
                pass
            continue
        s.close()
        out.append((name, path, st.st_mtime))
    return out


def dead_sessions(ctx, live_names):
    d = common.session_info_dir(ctx.ver_str)
    out = []
    try:
        names = os.listdir(d)
    except OSError:
        return out
    for name in names:
        if name in live_names:
            continue
        f = os.path.join(d, name, "session-layout.kdl")
        try:
            out.append((name, os.stat(f).st_mtime))
        except OSError:
            continue
    return out


def session_rows(ctx):
    """``ls``'s rows. Fault ``unprobed:NAME``: the live session NAME fails ``ls``'s probe (a
    busy server, contract §2.2) and is listed as a session with no server is."""
    live = [s for s in live_sessions(ctx) if s[0] not in ctx.faults["unprobed"]]
    names = {n for n, _, _ in live}
    rows = [(n, m, False) for n, _, m in live]
    rows += [(n, m, True) for n, m in dead_sessions(ctx, names)]
    return rows


def format_rows(ctx, rows, mode, reverse):
    now = time.time()
    rows = sorted(rows, key=lambda r: r[1], reverse=reverse)  # oldest first by default
    cur = os.environ.get("ZELLIJ_SESSION_NAME")
    out = []
    for name, mtime, dead in rows:
        if mode == "short":
            out.append(f"{name}\n")
            continue
        dur = common.humantime(int(now - mtime))
        if mode == "plain":
            suffix = "(current)" if name == cur else (
                "(EXITED - attach to resurrect)" if dead else "")
            out.append(f"{name} [Created {dur} ago] {suffix}\n")
        else:
            suffix = "(current)" if name == cur else (
                "(\x1b[31;1mEXITED\x1b[m - attach to resurrect)" if dead else "")
            out.append(f"\x1b[32;1m{name}\x1b[m [Created \x1b[35;1m{dur}\x1b[m ago] {suffix}\n")
    return "".join(out)


def resolve_session(ctx, requested):
    """§2.0. Returns the socket path of the target session or exits."""
    live = live_sessions(ctx)
    names = [n for n, _, _ in live]
    paths = {n: p for n, p, _ in live}
    if not live:
        ctx.err("There is no active session!\n")
        ctx.exit(1)
    if len(live) == 1:
        x = names[0]
        if requested is not None and requested != x:
            ctx.err(f"Session '{requested}' not found. The following sessions are active:\n{x}\n")
            ctx.exit(1)
        return paths[x]
    if requested is not None:
        if requested in paths:
            return paths[requested]
        ctx.err(f"Session '{requested}' not found. The following sessions are active:\n")
        ctx.out(format_rows(ctx, session_rows(ctx), "color", True))
        ctx.exit(0)
    envname = os.environ.get("ZELLIJ_SESSION_NAME")
    if envname:
        path = os.path.join(common.socket_dir(ctx.ver_str), envname)
        if envname in paths:
            return path
        if ctx.faults.get("no_hang"):
            ctx.err(f"fake zellij (no_hang): session '{envname}' from ZELLIJ_SESSION_NAME "
                    "is not live\n")
            ctx.exit(1)
        ctx.log(None, hung=True)
        while True:  # the real client retries the connect every 50 ms, forever
            s = common.connect(path)
            if s is not None:
                s.close()
                return path
            time.sleep(0.05)
    ctx.err("Please specify the session name to send actions to. "
            "The following sessions are active:\n")
    ctx.out(format_rows(ctx, session_rows(ctx), "color", True))
    ctx.exit(0)


def send(ctx, path, req):
    req.setdefault("faults", common.server_faults(ctx.faults))
    try:
        resp = common.request(path, req)
    except OSError:
        resp = None
    if resp is None:
        ctx.err("There is no active session!\n")
        ctx.exit(1)
    ctx.out(resp.get("stdout", ""))
    ctx.err(resp.get("stderr", ""))
    ctx.exit(resp.get("exit", 0))


def validate_name(ctx, name):
    if name is None or not name.strip():
        ctx.err("Session name cannot be empty. Please provide a specific session name.\n")
        ctx.exit(1)
    if name in (".", ".."):
        ctx.err(f"Invalid session name: {common.rust_debug_str(name)}.\n")
        ctx.exit(1)
    if "/" in name:
        ctx.err("Session name cannot contain '/'.\n")
        ctx.exit(1)


def parse_pane_ref(ctx, text):
    m = re.fullmatch(r"(terminal_|plugin_)?(\d+)", text or "")
    if not m or int(m.group(2)) > 0xFFFFFFFF:
        ctx.err(f"Malformed pane id: {text}, expecting either a bare integer (eg. 1), a terminal "
                "pane id (eg. terminal_1) or a plugin pane id (eg. plugin_1)\n")
        ctx.exit(2)
    kind = "plugin" if m.group(1) == "plugin_" else "terminal"
    return [kind, int(m.group(2))]


# =============================================================================== layouts

def load_layout(ctx, spec=None, text=None, *, exit_code, for_new_tab=False):
    from . import layout as L
    path = None
    if text is None:
        try:
            path, text = L.load_layout_file(spec, ctx.cwd, os.environ)
        except OSError as e:
            if for_new_tab:
                ctx.err(f"Failed to load layout: {e}\n")
            else:
                ctx.err(f"Error: Failed to load layout: {e}\n")
            ctx.exit(exit_code)
    try:
        return L.parse_layout(text, env=os.environ, version=ctx.version, caller_cwd=ctx.cwd)
    except L.LayoutError as e:
        ctx.err(L.report(str(e), path))
        ctx.exit(exit_code)


# =============================================================================== commands

TOP_OPTS = [
    O("session", "--session", "-s", True),
    O("layout", "--layout", "-l", True),
    O("new_session_with_layout", "--new-session-with-layout", "-n", True, since="0.41.0"),
    O("layout_string", "--layout-string", None, True, since="0.44.1"),
    O("config", "--config", "-c", True),
    O("config_dir", "--config-dir", None, True),
    O("data_dir", "--data-dir", None, True),
    O("max_panes", "--max-panes", None, True),
    O("debug", "--debug", "-d"),
    O("server", "--server", None, True),
    O("version", "--version", "-V"),
    O("help", "--help", "-h"),
]

ALIASES = {"ls": "list-sessions", "a": "attach", "k": "kill-session", "d": "delete-session",
           "ka": "kill-all-sessions", "da": "delete-all-sessions", "r": "run", "ac": "action",
           "e": "edit"}

HELP = """zellij (fake) {ver}
A TEST DOUBLE of the Zellij CLI (scripts/fake-zellij). It models the CLI contract of
docs/zellij-contract.md: sessions, panes running real processes on PTYs,
layouts (KDL v1), list/dump/write actions, version gating via FAKE_ZELLIJ_VERSION.
It does NOT model: rendering, pane frames, real geometry/resizing, plugin behaviour,
interactive clients, the web server, subscribe/watch, exact resurrection geometry.

USAGE:
    zellij [OPTIONS] [SUBCOMMAND]
"""


def main(argv):
    ctx = Ctx(argv)
    code = 0
    try:
        dispatch(ctx, argv)
    except UsageError as e:
        ctx.err(f"error: {e}\n")
        code = 2
    except Exit as e:
        code = e.code
    except BrokenPipeError:
        code = 1
    ctx.log(code)
    sys.stdout.flush()
    os._exit(code if code is not None else 0)


def check_faults(ctx, *names):
    for n in names:
        if n is None:
            continue
        if n in ctx.faults["hang"]:
            ctx.hang()
        if n in ctx.faults["fail"]:
            rc, text = ctx.faults["fail"][n]
            ctx.err(text + ("\n" if text and not text.endswith("\n") else ""))
            ctx.exit(rc)


def dispatch(ctx, argv):
    top_usage = "zellij [OPTIONS] [SUBCOMMAND]"
    top, _, _, rest = parse(ctx, argv, TOP_OPTS, top_usage, stop_at_positional=True)
    if top.get("server"):
        from .server import run_server
        run_server(top["server"])
        return
    if top.get("help"):
        ctx.out(HELP.format(ver=ctx.ver_str))
        ctx.exit(0)
    if top.get("version"):
        check_faults(ctx, "--version", "version")
        ctx.out(f"zellij {ctx.ver_str}\n")
        ctx.exit(0)
    # side effect of every invocation: the session_info dir exists
    try:
        os.makedirs(common.session_info_dir(ctx.ver_str), exist_ok=True)
    except OSError:
        pass
    if top.get("session") is not None:
        check_session_len(ctx, top["session"])
    if sum(1 for k in ("layout", "new_session_with_layout", "layout_string") if k in top) > 1:
        raise UsageError(ctx.conflict("--layout", "--new-session-with-layout", top_usage))
    if not rest:
        return no_subcommand(ctx, top)
    sub = ALIASES.get(rest[0], rest[0])
    args = rest[1:]
    ctx.subcmd = sub
    handlers = {
        "list-sessions": cmd_list_sessions, "attach": cmd_attach, "kill-session": cmd_kill,
        "delete-session": cmd_delete, "kill-all-sessions": cmd_kill_all,
        "delete-all-sessions": cmd_delete_all, "run": cmd_run, "action": cmd_action,
        "__fake-state": cmd_fake_state, "__fake-attach": cmd_fake_attach,
        "__fake-detach": cmd_fake_detach, "__fake-crash": cmd_fake_crash,
    }
    if sub not in handlers:
        check_faults(ctx, sub)
        known = {"setup", "options", "edit", "convert-config", "convert-layout",
                 "convert-theme", "plugin", "web", "subscribe", "watch", "help"}
        if sub in known:
            raise UsageError(f"fake zellij: the subcommand '{sub}' is not modelled by the fake")
        if ctx.clap4:
            raise UsageError(f"unrecognized subcommand '{rest[0]}'\n\nUsage: {top_usage}\n\n"
                             "For more information, try '--help'.")
        raise UsageError(f"Found argument '{rest[0]}' which wasn't expected, or isn't valid in "
                         f"this context\n\nUSAGE:\n    {top_usage}\n\nFor more information try "
                         "--help")
    if sub != "action":
        check_faults(ctx, sub, rest[0])
    handlers[sub](ctx, top, args)


def check_session_len(ctx, name):
    path = os.path.join(common.socket_dir(ctx.ver_str), name)
    if len(path.encode()) >= common.SOCK_MAX:
        # upstream (cli.rs validate_session, 0.40–0.45): SOCK_MAX.saturating_sub(len of the
        # whole socket path).saturating_sub(1) — always 0 once the path is too long
        avail = max(0, max(0, common.SOCK_MAX - len(path.encode())) - 1)
        if ctx.clap4:
            raise UsageError(f"invalid value '{name}' for '--session <SESSION>': session name must "
                             f"be less than {avail} characters\n\n"
                             "For more information, try '--help'.")
        raise UsageError(f"Invalid value \"{name}\" for '--session <SESSION>': session name must "
                         f"be less than {avail} characters\n\nFor more information try --help")


def no_subcommand(ctx, top):
    layout_flag = top.get("layout") or top.get("layout_string")
    target = top.get("session") or os.environ.get("ZELLIJ_SESSION_NAME")
    if layout_flag and ctx.version >= (0, 41, 0) and target:
        return layout_into_session(ctx, top)
    raise UsageError("fake zellij: starting an interactive session is not modelled "
                     "(use `attach --create-background NAME`)")


def layout_into_session(ctx, top):
    """≥0.41 `zellij [-s S] --layout FILE [attach …]`: add the layout's tabs to S."""
    check_faults(ctx, "new-tab")
    path = resolve_session(ctx, top.get("session"))
    if top.get("layout_string"):
        lay = load_layout(ctx, text=top["layout_string"], exit_code=2, for_new_tab=True)
    else:
        lay = load_layout(ctx, top["layout"], exit_code=2, for_new_tab=True)
    send(ctx, path, {"op": "action", "action": "new-tab", "opts": {"layout": lay},
                     "caller_pane": caller_pane(ctx)})


def caller_pane(ctx):
    v = os.environ.get("ZELLIJ_PANE_ID")
    if v and v.isdigit():
        return ["terminal", int(v)]
    return None


# ------------------------------------------------------------------------- list-sessions
def cmd_list_sessions(ctx, top, args):
    usage = "zellij list-sessions [OPTIONS]"
    o, pos, trailing, _ = parse(ctx, args, [
        O("no_formatting", "--no-formatting", "-n"), O("short", "--short", "-s"),
        O("reverse", "--reverse", "-r", since="0.40.0"), O("help", "--help", "-h")], usage)
    if pos or trailing is not None:
        raise UsageError(ctx.unexpected((pos or ["--"])[0], usage))
    d = common.socket_dir(ctx.ver_str)
    if os.path.exists(d) and not os.access(d, os.R_OK):
        ctx.err("Error occurred: PermissionDenied\n")
        ctx.exit(1)
    rows = session_rows(ctx)
    if not rows:
        ctx.err("No active zellij sessions found.\n")
        ctx.exit(1)
    mode = "short" if o.get("short") else ("plain" if o.get("no_formatting") else "color")
    ctx.out(format_rows(ctx, rows, mode, bool(o.get("reverse"))))
    ctx.exit(0)


# ------------------------------------------------------------------------- attach
DISCONNECT = """
Your zellij client lost connection to the zellij server.

As a safety measure, you have been disconnected from the current zellij session.
However, the session should still exist and none of your data should be lost.

This usually means that your terminal didn't process server messages quick
enough. Maybe your system is currently under high load, or your terminal
isn't performant enough.

There are a few things you can try now:
    - Reattach to your previous session and see if it works out better this
      time: `zellij attach {name}`
    - Try using a faster (maybe GPU-accelerated) terminal emulator
"""


def _dropped_as_it_attached(ctx, name):
    """Fault ``drop_attach=N``: the first N interactive attaches are dropped by the server as
    they connect, as the real 0.45.0 drops a client given the id of a CLI client whose second
    ``RemoveClient`` is still queued (docs/zellij-contract.md §6.19). Like the real client it
    logs the Disconnect reason to ``$TMPDIR/zellij-UID/zellij-log/zellij.log``, prints it and
    exits 0."""
    limit = ctx.faults.get("drop_attach")
    if not isinstance(limit, int) or limit <= 0:
        return False
    counter = os.path.join(common.state_root(), "dropped_attaches")
    try:
        with open(counter, encoding="utf-8") as fh:
            dropped = int(fh.read() or 0)
    except (OSError, ValueError):
        dropped = 0
    if dropped >= limit:
        return False
    os.makedirs(common.state_root(), exist_ok=True)
    with open(counter, "w", encoding="utf-8") as fh:
        fh.write(str(dropped + 1))
    words = DISCONNECT.format(name=name)
    log_dir = os.path.join(os.environ.get("TMPDIR") or "/tmp", f"zellij-{os.getuid()}", "zellij-log")
    os.makedirs(log_dir, exist_ok=True)
    with open(os.path.join(log_dir, "zellij.log"), "a", encoding="utf-8") as fh:
        fh.write("INFO   |zellij_client            | fake [main      ] lib.rs:1616: " + words)
    ctx.out(words)
    return True


def cmd_attach(ctx, top, args):
    usage = "zellij attach [OPTIONS] [SESSION_NAME] [SUBCOMMAND]"
    o, pos, trailing, _ = parse(ctx, args, [
        O("create", "--create", "-c"), O("create_background", "--create-background", "-b"),
        O("force_run_commands", "--force-run-commands", "-f"), O("index", "--index", None, True),
        O("help", "--help", "-h")], usage)
    if len(pos) > 1 or trailing:
        raise UsageError(ctx.unexpected((pos[1:] or trailing)[0], usage))
    name = pos[0] if pos else None
    envname = os.environ.get("ZELLIJ_SESSION_NAME")
    if top.get("layout") and ctx.version >= (0, 41, 0) and (top.get("session") or envname):
        # the ZELLIJ_SESSION_NAME / --session quirk: becomes "add a tab", attach is ignored
        return layout_into_session(ctx, top)
    if not o.get("create_background") and name is not None and _dropped_as_it_attached(ctx, name):
        ctx.exit(0)
    if not o.get("create_background"):
        raise UsageError("fake zellij: interactive attach is not modelled "
                         "(use --create-background, or __fake-attach for a simulated client)")
    if name is None:
        live = live_sessions(ctx)
        if len(live) == 1:
            ctx.err("Session already exists\n")
            ctx.exit(1)
        if len(live) >= 2:
            ctx.err("Please specify the session to attach to, either by using the full name or "
                    "a unique prefix.\nThe following sessions are active:\n")
            ctx.out(format_rows(ctx, session_rows(ctx), "color", True))
            ctx.exit(0)
        name = "-".join(random.choice(w) for w in (
            ["brave", "calm", "eager", "fuzzy", "jolly", "quiet"],
            ["otter", "falcon", "badger", "heron", "lynx", "newt"]))
    validate_name(ctx, name)
    if envname is not None and envname == name:
        ctx.err("thread 'main' panicked at src/commands.rs:\nYou are trying to attach to the "
                f"current session (\"{name}\"). This is not supported.\nnote: run with "
                "`RUST_BACKTRACE=1` environment variable to display a backtrace\n")
        ctx.exit(101)
    sockdir = common.socket_dir(ctx.ver_str)
    path = os.path.join(sockdir, name)
    live_names = [n for n, _, _ in live_sessions(ctx)]
    if name in live_names:
        ctx.err("Session already exists\n")
        ctx.exit(1)
    if len(path.encode()) >= common.SOCK_MAX:
        ctx.err(f"Error: the IPC socket path is too long ({len(path.encode())} bytes, the limit "
                f"is {common.SOCK_MAX - 1}): {path}\nHint: set ZELLIJ_SOCKET_DIR to a shorter "
                "directory or use a shorter session name\n")
        ctx.exit(1)
    record = None
    info = os.path.join(common.session_info_dir(ctx.ver_str), name)
    if os.path.exists(os.path.join(info, "session-layout.kdl")):
        try:
            with open(os.path.join(info, "fake-session.json")) as fh:
                record = json.load(fh)
        except (OSError, ValueError):
            record = {"tabs": []}
    layout = None
    if record is None:
        if top.get("layout_string") is not None:
            layout = load_layout(ctx, text=top["layout_string"], exit_code=1)
        elif top.get("new_session_with_layout") or top.get("layout"):
            layout = load_layout(ctx, top.get("new_session_with_layout") or top.get("layout"),
                                 exit_code=1)
        else:
            layout = load_layout(ctx, "default", exit_code=1)
    start_server(ctx, name, path)
    req = {"op": "setup", "layout": layout, "resurrect": record,
           "force_run": bool(o.get("force_run_commands")),
           "faults": common.server_faults(ctx.faults)}
    resp = common.request(path, req, timeout=30)
    if resp is None:
        ctx.err("fake zellij: the new server did not answer\n")
        ctx.exit(1)
    ctx.err(resp.get("stderr", ""))
    ctx.exit(resp.get("exit", 0))


def start_server(ctx, name, path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.exists(path):
        try:
            os.unlink(path)  # a socket that refused connections
        except OSError:
            pass
    env = dict(os.environ)
    env["ZELLIJ"] = "0"
    env["ZELLIJ_SESSION_NAME"] = name
    env.pop("ZELLIJ_PANE_ID", None)
    entry = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                         "fake_zellij.py")
    started = subprocess.run([sys.executable, entry, "--server", path], env=env, cwd=ctx.cwd,
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, close_fds=True)
    if started.returncode == common.SERVER_DIED_OF_ITS_ENVIRONMENT:
        return  # as the real CLI: exit 0, no session
    deadline = time.time() + 15
    while time.time() < deadline:  # the real CLI retries the connect every 50 ms
        s = common.connect(path)
        if s is not None:
            s.close()
            return
        time.sleep(0.05)
    ctx.err("fake zellij: the server did not start\n")
    ctx.exit(1)


# ------------------------------------------------------------------------- kill / delete
def similar(name, candidates):
    import difflib
    best = difflib.get_close_matches(name, candidates, n=1, cutoff=0.8)
    return best[0] if best else None


def cmd_kill(ctx, top, args):
    usage = "zellij kill-session [TARGET_SESSION]"
    _, pos, _, _ = parse(ctx, args, [O("help", "--help", "-h")], usage)
    if len(pos) > 1:
        raise UsageError(ctx.unexpected(pos[1], usage))
    if not pos:
        ctx.out("Please specify the session name to kill.\n")
        ctx.exit(1)
    name = pos[0]
    live = {n: p for n, p, _ in live_sessions(ctx)}
    if name not in live:
        ctx.out(f"No session named {common.rust_debug_str(name)} found.\n")
        s = similar(name, list(live))
        if s:
            ctx.out(f"  help: Did you mean `{s}`?\n")
        ctx.exit(1)
    kill_request(ctx, live[name])
    ctx.exit(0)


def kill_request(ctx, path):
    """KillSession: the server answers at once and exits asynchronously (§2.4)."""
    faults = common.server_faults(ctx.faults)
    try:
        common.request(path, {"op": "kill", "faults": faults}, timeout=10)
    except OSError:
        pass


def cmd_delete(ctx, top, args):
    usage = "zellij delete-session [OPTIONS] [TARGET_SESSION]"
    o, pos, _, _ = parse(ctx, args, [O("force", "--force", "-f"),
                                     O("help", "--help", "-h")], usage)
    if len(pos) > 1:
        raise UsageError(ctx.unexpected(pos[1], usage))
    if not pos:
        ctx.out("Please specify the session name to delete.\n")
        ctx.exit(1)
    name = pos[0]
    if ctx.version >= (0, 44, 0):
        validate_name(ctx, name)
    live = {n: p for n, p, _ in live_sessions(ctx)}
    q = common.rust_debug_str(name)
    if name in live:
        if not o.get("force"):
            ctx.out(f"A session by the name {q} exists and is active, use --force to delete it.\n")
            ctx.exit(1)
        ctx.out(f"A session by the name {q} exists and is active, but will be force killed and "
                "deleted.\n")
        kill_request(ctx, live[name])
    info = os.path.join(common.session_info_dir(ctx.ver_str), name)
    if not os.path.isdir(info) or name in (".", "..", ""):
        ctx.err(f"Session: {q} not found.\n")
        ctx.exit(2)
    shutil.rmtree(info, ignore_errors=True)
    ctx.out(f"Session: {q} successfully deleted.\n")
    ctx.exit(0)


def cmd_kill_all(ctx, top, args):
    usage = "zellij kill-all-sessions [OPTIONS]"
    o, pos, _, _ = parse(ctx, args, [O("yes", "--yes", "-y"),
                                     O("help", "--help", "-h")], usage)
    if pos:
        raise UsageError(ctx.unexpected(pos[0], usage))
    live = live_sessions(ctx)
    if not live:
        ctx.err("No active zellij sessions found.\n")
        ctx.exit(1)
    if not o.get("yes"):
        ctx.out("WARNING: this action will kill all sessions.\n")
        if not sys.stdin.isatty():
            ctx.out("Abort.\n")
            ctx.exit(1)
        answer = sys.stdin.readline().strip().lower()
        if answer not in ("y", "yes"):
            ctx.out("Abort.\n")
            ctx.exit(1)
    for _, path, _ in live:
        kill_request(ctx, path)
    ctx.exit(0)


def cmd_delete_all(ctx, top, args):
    usage = "zellij delete-all-sessions [OPTIONS]"
    o, pos, _, _ = parse(ctx, args, [O("yes", "--yes", "-y"), O("force", "--force", "-f"),
                                     O("help", "--help", "-h")], usage)
    if pos:
        raise UsageError(ctx.unexpected(pos[0], usage))
    live = live_sessions(ctx)
    dead = dead_sessions(ctx, {n for n, _, _ in live})
    targets = [n for n, _ in dead] + ([n for n, _, _ in live] if o.get("force") else [])
    if not targets:
        ctx.err("No resurrectable sessions found.\n")
        ctx.exit(1)
    if not o.get("yes"):
        ctx.out("WARNING: this action will delete all resurrectable sessions.\n")
        if not sys.stdin.isatty() or sys.stdin.readline().strip().lower() not in ("y", "yes"):
            ctx.out("Abort.\n")
            ctx.exit(1)
    if o.get("force"):
        for _, path, _ in live:
            kill_request(ctx, path)
    for n in targets:
        shutil.rmtree(os.path.join(common.session_info_dir(ctx.ver_str), n), ignore_errors=True)
    ctx.exit(0)


# ------------------------------------------------------------------------- run / new-pane
def pane_opts(is_run):
    opts = [
        O("direction", "--direction", "-d", True),
        O("cwd", "--cwd", None, True),
        O("floating", "--floating", "-f"),
        O("x", "--x", "-x", True), O("y", "--y", "-y", True),
        O("width", "--width", None, True), O("height", "--height", None, True),
        O("pinned", "--pinned", None, True, since="0.42.0"),
        O("in_place", "--in-place", "-i"),
        O("close_replaced_pane", "--close-replaced-pane", None, since="0.44.0"),
        O("name", "--name", "-n", True),
        O("close_on_exit", "--close-on-exit", "-c"),
        O("start_suspended", "--start-suspended", "-s"),
        O("stacked", "--stacked", None, since="0.43.0"),
        O("block_until_exit_success", "--block-until-exit-success", None, since="0.44.0"),
        O("block_until_exit_failure", "--block-until-exit-failure", None, since="0.44.0"),
        O("block_until_exit", "--block-until-exit", None, since="0.44.0"),
        O("near_current_pane", "--near-current-pane", None, since="0.44.0"),
        O("tab_id", "--tab-id", None, True, since="0.44.1"),
        O("no_focus", "--no-focus", None, since="0.45.0"),
        O("help", "--help", "-h"),
    ]
    if is_run:
        opts += [O("blocking", "--blocking", None, since="0.44.0"),
                 O("borderless", "--borderless", "-b", True, since="0.44.0")]
    else:
        opts += [O("blocking", "--blocking", "-b", since="0.44.0"),
                 O("borderless", "--borderless", None, True, since="0.44.0"),
                 O("plugin", "--plugin", "-p", True),
                 O("configuration", "--configuration", None, True),
                 O("skip_plugin_cache", "--skip-plugin-cache"),
                 O("pane_id", "--pane-id", None, True, since="0.45.0")]
    return opts


def build_pane_request(ctx, o, command, usage, is_run):
    if o.get("direction") is not None:
        if o["direction"] not in ("right", "left", "up", "down"):
            raise UsageError(f"Invalid value \"{o['direction']}\" for '--direction <DIRECTION>'")
        for other in ("floating", "in_place", "stacked"):
            if o.get(other):
                raise UsageError(ctx.conflict("--direction <DIRECTION>",
                                              "--" + other.replace("_", "-"), usage))
    for k in ("pinned", "borderless"):
        if o.get(k) is not None and o[k] not in ("true", "false"):
            raise UsageError(f"Invalid value \"{o[k]}\" for '--{k} <{k.upper()}>'")
    if not command and not o.get("plugin"):
        for k in ("close_on_exit", "start_suspended"):
            if o.get(k):
                raise UsageError(ctx.missing("<COMMAND>...", usage))
    if o.get("pane_id") is not None and not o.get("in_place"):
        raise UsageError(ctx.missing("--in-place", usage))
    if o.get("tab_id") is not None and not str(o["tab_id"]).isdigit():
        raise UsageError(f"Invalid value \"{o['tab_id']}\" for '--tab-id <TAB_ID>'")
    cwd = o.get("cwd")
    if cwd is not None and not os.path.isabs(cwd):
        cwd = os.path.join(ctx.cwd, cwd)
    if cwd is None and is_run:
        cwd = ctx.cwd
    block = None
    if o.get("blocking"):
        block = "close"
    elif o.get("block_until_exit_success"):
        block = "success"
    elif o.get("block_until_exit_failure"):
        block = "failure"
    elif o.get("block_until_exit"):
        block = "exit"
    opts = {k: o.get(k) for k in (
        "name", "floating", "close_on_exit", "start_suspended", "stacked", "in_place",
        "close_replaced_pane", "x", "y", "width", "height", "borderless", "no_focus",
        "plugin", "direction", "near_current_pane")}
    opts.update({"command": command or None, "cwd": cwd, "block": block,
                 "tab_id": int(o["tab_id"]) if o.get("tab_id") is not None else None})
    if o.get("pane_id") is not None:
        opts["replace_pane_id"] = parse_pane_ref(ctx, o["pane_id"])
    return opts


def cmd_run(ctx, top, args):
    usage = "zellij run [OPTIONS] [--] <COMMAND>..."
    o, pos, trailing, _ = parse(ctx, args, pane_opts(True), usage)
    if o.get("help"):
        ctx.out(f"zellij-run (fake)\n\nUSAGE:\n    {usage}\n")
        ctx.exit(0)
    if pos:
        raise UsageError(ctx.unexpected(pos[0], usage))
    if not trailing:
        raise UsageError(ctx.missing("<COMMAND>...", usage))
    opts = build_pane_request(ctx, o, trailing, usage, True)
    path = resolve_session(ctx, top.get("session"))
    send(ctx, path, {"op": "action", "action": "new-pane", "opts": opts,
                     "caller_pane": caller_pane(ctx)})


# ------------------------------------------------------------------------- action
PID = lambda since="0.44.0": O("pane_id", "--pane-id", "-p", True, since=since)  # noqa: E731

KEYS = {"enter": b"\r", "esc": b"\x1b", "escape": b"\x1b", "tab": b"\t", "space": b" ",
        "backspace": b"\x7f", "up": b"\x1b[A", "down": b"\x1b[B", "right": b"\x1b[C",
        "left": b"\x1b[D"}


def key_bytes(ctx, spec):
    words = spec.split()
    if not words:
        raise UsageError(f"Invalid key: {spec!r}")
    *mods, key = words
    mods = [m.lower() for m in mods]
    if key.lower() in KEYS:
        data = KEYS[key.lower()]
    elif len(key) == 1:
        data = key.encode()
    else:
        raise UsageError(f"Invalid key: {spec!r}")
    if "ctrl" in mods and len(key) == 1 and key.isalpha():
        data = bytes([ord(key.lower()) - 96])
    if "alt" in mods:
        data = b"\x1b" + data
    return data


ACTIONS = {
    # name: (opts, positionals [(name, required, multi)], trailing, since)
    "new-pane": (None, [], "optional", None),
    "close-pane": ([PID()], [], None, None),
    "rename-pane": ([PID()], [("name", True, False)], None, None),
    "undo-rename-pane": ([PID()], [], None, None),
    "write-chars": ([PID()], [("chars", True, False)], "positional", None),
    "write": ([PID()], [("bytes", True, True)], "positional", None),
    "paste": ([PID()], [("text", True, False)], "positional", "0.44.0"),
    "send-keys": ([PID()], [("keys", True, True)], "positional", "0.44.0"),
    "dump-screen": (None, [], None, None),
    "dump-layout": ([], [], None, None),
    "list-clients": ([], [], None, "0.40.1"),
    "list-panes": ([O("tab", "--tab", "-t"), O("command", "--command", "-c"),
                    O("state", "--state", "-s"), O("geometry", "--geometry", "-g"),
                    O("all", "--all", "-a"), O("json", "--json", "-j")], [], None, "0.44.0"),
    "list-tabs": ([O("state", "--state", "-s"), O("dimensions", "--dimensions", "-d"),
                   O("panes", "--panes", "-p"), O("layout", "--layout", "-l"),
                   O("all", "--all", "-a"), O("json", "--json", "-j")], [], None, "0.44.0"),
    "current-tab-info": ([O("json", "--json", "-j")], [], None, "0.44.0"),
    "query-tab-names": ([], [], None, None),
    "new-tab": (None, [], None, None),
    "close-tab": ([], [], None, None),
    "rename-tab": ([], [("name", True, False)], None, None),
    "rename-tab-by-id": ([], [("id", True, False), ("name", True, False)], None, "0.44.0"),
    "go-to-tab-name": ([O("create", "--create", "-c")], [("name", True, False)], None, None),
    "go-to-tab": ([], [("index", True, False)], None, None),
    "go-to-tab-by-id": ([], [("id", True, False)], None, "0.44.0"),
    "focus-next-pane": ([], [], None, None),
    "focus-previous-pane": ([], [], None, None),
    "move-focus": ([], [("direction", True, False)], None, None),
    "move-focus-or-tab": ([], [("direction", True, False)], None, None),
    "focus-pane-id": ([], [("pane", True, False)], None, "0.44.1"),
    "stack-panes": ([], [], "required", "0.42.0"),
    "toggle-floating-panes": ([], [], None, None),
    "toggle-fullscreen": ([PID()], [], None, None),
    "rename-session": ([], [("name", True, False)], None, None),
}


def cmd_action(ctx, top, args):
    usage_top = "zellij action <SUBCOMMAND>"
    if not args or args[0] in ("-h", "--help", "help"):
        if args:
            ctx.out(f"zellij-action (fake)\n\nUSAGE:\n    {usage_top}\n")
            ctx.exit(0)
        raise UsageError(ctx.missing("<SUBCOMMAND>", usage_top))
    name = args[0]
    args = args[1:]
    ctx.subcmd = name
    spec = ACTIONS.get(name)
    if spec is None or (spec[3] is not None and ctx.version < V(spec[3])):
        check_faults(ctx, name, "action")
        if ctx.clap4:
            raise UsageError(f"unrecognized subcommand '{name}'\n\nUsage: {usage_top}\n\n"
                             "For more information, try '--help'.")
        raise UsageError(f"The subcommand '{name}' wasn't recognized\n\nUSAGE:\n    {usage_top}"
                         "\n\nFor more information try --help")
    check_faults(ctx, name, "action")
    usage = f"zellij action {name} [OPTIONS]"
    opts, positionals, trailing_kind, _ = spec
    if name == "new-pane":
        o, pos, trailing, _ = parse(ctx, args, pane_opts(False), usage)
        if pos:
            raise UsageError(ctx.unexpected(pos[0], usage))
        req_opts = build_pane_request(ctx, o, trailing or None, usage, False)
        return action_send(ctx, top, name, req_opts)
    if name == "dump-screen":
        if ctx.version >= (0, 44, 0):
            o, pos, trailing, _ = parse(ctx, args, [
                O("path", "--path", None, True), O("full", "--full", "-f"), PID(),
                O("ansi", "--ansi", "-a"), O("help", "--help", "-h")], usage)
            if pos or trailing is not None:
                raise UsageError(ctx.unexpected((pos or ["--"])[0], usage))
        else:
            o, pos, trailing, _ = parse(ctx, args, [O("full", "--full", "-f"),
                                                    O("help", "--help", "-h")], usage)
            if not pos:
                raise UsageError(ctx.missing("<PATH>", "zellij action dump-screen [OPTIONS] "
                                                       "<PATH>"))
            if len(pos) > 1:
                raise UsageError(ctx.unexpected(pos[1], usage))
            o["path"] = pos[0]
        return action_send(ctx, top, name, o)
    if name == "new-tab":
        o, pos, trailing, _ = parse(ctx, args, [
            O("layout", "--layout", "-l", True), O("layout_dir", "--layout-dir", None, True),
            O("name", "--name", "-n", True), O("cwd", "--cwd", "-c", True),
            O("layout_string", "--layout-string", None, True, since="0.44.1"),
            O("help", "--help", "-h")], usage)
        if pos:
            raise UsageError(ctx.unexpected(pos[0], usage))
        if trailing is not None and ctx.version < (0, 44, 0):
            raise UsageError(ctx.unexpected("--", usage))
        if o.get("cwd") and not o.get("layout") and ctx.version < (0, 43, 0):
            raise UsageError(ctx.missing("--layout <LAYOUT>", usage))
        if o.get("layout") and o.get("layout_string"):
            raise UsageError(ctx.conflict("--layout", "--layout-string", usage))
        cwd = o.get("cwd")
        if cwd is not None and not os.path.isabs(cwd):
            cwd = os.path.join(ctx.cwd, cwd)
        path = resolve_session(ctx, top.get("session"))
        layout = None
        if o.get("layout"):
            layout = load_layout(ctx, o["layout"], exit_code=2, for_new_tab=True)
        elif o.get("layout_string"):
            layout = load_layout(ctx, text=o["layout_string"], exit_code=2, for_new_tab=True)
        req_opts = {"layout": layout, "name": o.get("name"), "cwd": cwd,
                    "command": trailing or None}
        return send(ctx, path, {"op": "action", "action": name, "opts": req_opts,
                                "caller_pane": caller_pane(ctx)})
    all_opts = [*opts, O("help", "--help", "-h")]
    o, pos, trailing, _ = parse(ctx, args, all_opts, usage)
    if o.get("help"):
        ctx.out(f"zellij-action-{name} (fake)\n\nUSAGE:\n    {usage}\n")
        ctx.exit(0)
    if trailing is not None:
        if trailing_kind == "positional":
            pos = pos + trailing
        elif trailing_kind is None:
            raise UsageError(ctx.unexpected("--", usage))
    if name == "stack-panes":
        if not trailing:
            raise UsageError(ctx.missing("<PANE_IDS>...", usage))
        o["pane_ids"] = [parse_pane_ref(ctx, t) for t in trailing]
        return action_send(ctx, top, name, o)
    values = {}
    for i, (pname, required, multi) in enumerate(positionals):
        if multi:
            values[pname] = pos[i:]
            if required and not values[pname]:
                raise UsageError(ctx.missing(f"<{pname.upper()}>...", usage))
            pos = pos[:i]
            break
        if i < len(pos):
            values[pname] = pos[i]
        elif required:
            raise UsageError(ctx.missing(f"<{pname.upper()}>", usage))
    extra = pos[len(positionals):] if positionals and not positionals[-1][2] else (
        pos if not positionals else [])
    if extra:
        raise UsageError(ctx.unexpected(extra[0], usage))
    o.update(values)
    if name == "write":
        try:
            o["bytes"] = [int(b) for b in o["bytes"]]
            if any(b < 0 or b > 255 for b in o["bytes"]):
                raise ValueError
        except ValueError:
            raise UsageError("Invalid value for '<BYTES>...': invalid digit found in string") from None
    if name == "send-keys":
        o["bytes"] = list(b"".join(key_bytes(ctx, k) for k in o["keys"]))
    if name in ("move-focus", "move-focus-or-tab") and o["direction"] not in ("right", "left", "up", "down"):
        raise UsageError(f"Invalid value \"{o['direction']}\" for '<DIRECTION>'")
    if name == "focus-pane-id":
        o["_pane"] = o.pop("pane")
    return action_send(ctx, top, name, o)


def action_send(ctx, top, name, opts):
    path = resolve_session(ctx, top.get("session"))
    req = {"op": "action", "action": name, "opts": opts, "caller_pane": caller_pane(ctx)}
    # conversion errors happen after the session was resolved, before anything is sent
    if opts.get("pane_id") is not None:
        req["pane_id"] = parse_pane_ref(ctx, opts.pop("pane_id"))
    if opts.get("_pane") is not None:
        req["pane_id"] = parse_pane_ref(ctx, opts.pop("_pane"))
    send(ctx, path, req)


# ------------------------------------------------------------------------- test helpers
def session_path_or_exit(ctx, name):
    path = os.path.join(common.socket_dir(ctx.ver_str), name)
    s = common.connect(path)
    if s is None:
        ctx.err(f"fake zellij: no live session named {name!r}\n")
        ctx.exit(1)
    s.close()
    return path


def cmd_fake_state(ctx, top, args):
    """TEST HELPER (not Zellij): JSON state of live sessions (or of NAME) + dead names."""
    live = live_sessions(ctx)
    want = args[0] if args else None
    sessions = []
    for name, path, _ in sorted(live, key=lambda r: r[2]):
        if want is not None and name != want:
            continue
        try:
            resp = common.request(path, {"op": "state"}, timeout=10)
        except (BrokenPipeError, ConnectionResetError):  # it is going away (killed): no longer live
            continue
        if resp and resp.get("exit", 0) == 0:
            sessions.append(json.loads(resp["stdout"]))
    dead = sorted(n for n, _ in dead_sessions(ctx, {n for n, _, _ in live}))
    if want is not None and not sessions and want not in dead:
        ctx.err(f"fake zellij: no session named {want!r}\n")
        ctx.exit(1)
    out = {"version": ctx.ver_str, "socket_dir": common.socket_dir(ctx.ver_str),
           "state_dir": common.state_root(), "sessions": sessions,
           "dead_sessions": [n for n in dead if want is None or n == want]}
    ctx.out(json.dumps(out, indent=2) + "\n")
    ctx.exit(0)


def cmd_fake_attach(ctx, top, args):
    """TEST HELPER: register a simulated attached client; prints its client id."""
    name = args[0] if args else top.get("session")
    if not name:
        raise UsageError("__fake-attach needs a session name")
    path = session_path_or_exit(ctx, name)
    send(ctx, path, {"op": "attach_client"})


def cmd_fake_detach(ctx, top, args):
    """TEST HELPER: remove a simulated client (the given id, else the oldest one)."""
    name = args[0] if args else top.get("session")
    if not name:
        raise UsageError("__fake-detach needs a session name")
    cid = int(args[1]) if len(args) > 1 else None
    path = session_path_or_exit(ctx, name)
    send(ctx, path, {"op": "detach_client", "client": cid})


def cmd_fake_crash(ctx, top, args):
    """TEST HELPER: the server of NAME dies at once (SIGKILL), as in a crash: no reply, no
    cleanup; its socket file stays (refusing connections), its PTYs hang up. Returns when the
    server process is gone; prints its pid."""
    name = args[0] if args else top.get("session")
    if not name:
        raise UsageError("__fake-crash needs a session name")
    path = session_path_or_exit(ctx, name)
    resp = common.request(path, {"op": "state"}, timeout=10)
    pid = json.loads(resp["stdout"])["server_pid"] if resp else None
    if not isinstance(pid, int):
        ctx.err("fake zellij: no server pid\n")
        ctx.exit(1)
    import signal
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and common.pid_alive(pid):
        time.sleep(0.01)
    if common.pid_alive(pid):
        ctx.err(f"fake zellij: server {pid} did not die\n")
        ctx.exit(1)
    ctx.out(f"{pid}\n")
    ctx.exit(0)
