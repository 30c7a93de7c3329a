"""The per-session fake zellij server: `zellij --server <socket path>`.

Single-threaded event loop: one request at a time (serialised), panes are real processes on
PTYs, output goes into a tiny screen model (for dump-screen) and a per-pane log file.
"""
from __future__ import annotations

import fcntl
import json
import os
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import termios
import time

from . import common, dump, tiling
from .screen import Screen

NON_SELECTABLE = {"zellij:tab-bar", "zellij:status-bar", "zellij:compact-bar"}
HELD_HINT = "<ENTER> re-run, <ESC> drop to shell, <Ctrl-c> exit"
SUSPENDED_HINT = "<ENTER> run, <ESC> drop to shell, <Ctrl-c> exit"
NOT_FOUND_2 = ("If you were including arguments as part of the command, try including them as "
               "'args' instead.")


def _set_ctty():  # preexec of pane children (runs after setsid)
    # the server ignores SIGHUP; an ignored signal survives exec, so restore the default
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Pane:
    def __init__(self, kind, pid_num):
        self.kind = kind  # "terminal" | "plugin"
        self.id = pid_num
        self.tab = None
        self.name = None  # explicit name (--name / layout / rename)
        self.orig_name = None
        self.argv = None  # command pane argv, None for shell/plugin panes
        self.shell_argv = None
        self.cwd = None
        self.close_on_exit = False
        self.state = "running"  # suspended | running | held | plugin
        self.proc = None
        self.master = None
        self.exited = False
        self.exit_status = None
        self.screen = None
        self.plugin_url = None
        self.floating = False
        self.suppressed = False
        self.borderless = False
        self.size = None
        self.fx = self.fy = self.fw = self.fh = None
        self.geom = (0, 0, 1, 1)  # x, y, rows, cols
        self.waiters = []  # (conn, mode)
        self.log_path = None
        self.replaced = None  # pane suppressed by an --in-place pane
        self.orphan = False
        self.created = time.time()

    @property
    def selectable(self):
        return not (self.kind == "plugin" and self.plugin_url in NON_SELECTABLE)

    @property
    def label(self):
        return f"{self.kind}_{self.id}"

    def command_string(self):
        return " ".join(self.argv) if self.argv else None

    def title(self, position):
        """position: index of the pane among the terminal panes of its tab."""
        if self.name is not None:
            return self.name
        if self.kind == "plugin":
            return self.plugin_url or "plugin"
        if self.argv:
            return self.command_string()
        if self.screen is not None and self.screen.title:
            return self.screen.title
        return f"Pane #{position + 1}"

    def content_geom(self):
        x, y, rows, cols = self.geom
        if self.borderless:
            return (x, y, rows, cols)
        return (x + 1, y + 1, max(1, rows - 2), max(1, cols - 2))


class Tab:
    def __init__(self, tid, name):
        self.id = tid
        self.name = name
        self.panes: list[Pane] = []
        self.focused: Pane | None = None
        self.root: tiling.Node | None = None  # the tiled panes' tree (floating ones are not in it)
        self.laying_out = False  # made by new-tab, its layout not applied yet: no pane listed


class Server:
    def __init__(self, sock_path: str):
        self.sock_path = sock_path
        self.name = os.path.basename(sock_path)
        self.env = dict(os.environ)
        self.env["ZELLIJ"] = "0"
        self.cwd = os.getcwd()
        self.ver_str = common.version_string(self.env)
        self.version = common.parse_version(self.ver_str)
        self.tabs: list[Tab] = []
        self.orphans: list[Pane] = []
        self.next_tid = 0
        self.next_plugin = 0
        self.clients: list[dict] = []
        self.next_client = 1
        self.active_tab = None  # id of the tab a detached session would show (dump-layout focus)
        self.dying = False  # kill-session answered, the server has not exited yet (§2.4)
        self.cols, self.rows = 50, 50
        size = self.env.get("FAKE_ZELLIJ_SIZE")
        if size and "x" in size:
            try:
                self.cols, self.rows = (int(v) for v in size.split("x", 1))
            except ValueError:
                pass
        self.init_until = 0.0
        self.setup_done = False
        self.deferred = []  # (time, fn)
        self.zombies = []
        self.done = False
        self.created = time.time()
        self.state_dir = os.path.join(common.state_root(self.env), self.name)
        self.sel = selectors.DefaultSelector()

    # ================================================================== plumbing
    def serve(self):
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.sock_path)
        self.listener.listen(64)
        self.listener.setblocking(False)
        self.sel.register(self.listener, selectors.EVENT_READ, ("listen", None))
        rfd, wfd = os.pipe()
        os.set_blocking(rfd, False)
        os.set_blocking(wfd, False)
        signal.set_wakeup_fd(wfd)
        signal.signal(signal.SIGCHLD, lambda *a: None)
        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGINT, self._on_term)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        self.sel.register(rfd, selectors.EVENT_READ, ("wakeup", None))
        self.wakeup_r = rfd
        while not self.done:
            timeout = 0.5
            if self.deferred:
                timeout = max(0.0, min(timeout, min(t for t, _ in self.deferred) - time.time()))
            for key, _ in self.sel.select(timeout):
                kind, obj = key.data
                if kind == "listen":
                    self._accept()
                elif kind == "wakeup":
                    try:
                        while os.read(rfd, 4096):
                            pass
                    except BlockingIOError:
                        pass
                elif kind == "conn":
                    self._read_conn(key.fileobj, obj)
                elif kind == "pty":
                    self._read_pty(obj)
                if self.done:
                    break
            if self.done:
                break
            self._reap()
            self._run_deferred()
        self._shutdown_now()

    def _on_term(self, *a):
        # a real server escalates when it gets SIGINT/SIGTERM itself
        for p in self.all_panes():
            if p.proc is not None and p.proc.poll() is None:
                try:
                    os.killpg(p.proc.pid, signal.SIGHUP)
                except OSError:
                    pass
        self.done = True

    def _accept(self):
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        conn.setblocking(False)
        self.sel.register(conn, selectors.EVENT_READ, ("conn", {"buf": b""}))

    def _read_conn(self, conn, st):
        try:
            data = conn.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.sel.unregister(conn)
            conn.close()
            return
        st["buf"] += data
        if not st["buf"].endswith(b"\n"):
            return
        self.sel.unregister(conn)
        try:
            req = json.loads(st["buf"])
        except ValueError:
            conn.close()
            return
        self.handle(conn, req)

    def reply(self, conn, stdout="", stderr="", exit=0, **extra):
        msg = {"stdout": stdout, "stderr": stderr, "exit": exit}
        msg.update(extra)
        try:
            conn.setblocking(True)
            conn.settimeout(5)
            common.send_msg(conn, msg)
        except OSError:
            pass
        try:
            conn.close()
        except OSError:
            pass

    def defer(self, delay, fn):
        self.deferred.append((time.time() + delay, fn))

    def _run_deferred(self):
        now = time.time()
        due = [d for d in self.deferred if d[0] <= now]
        if not due:
            return
        self.deferred = [d for d in self.deferred if d[0] > now]
        for _, fn in due:
            fn()

    # ================================================================== requests
    def handle(self, conn, req):
        op = req.get("op")
        if op == "ping":
            return self.reply(conn)
        if op == "setup":
            return self.op_setup(conn, req)
        if op == "kill":
            return self.op_kill(conn, req)
        if self.dying and op != "state":
            # a killed server that has not exited yet: it takes the connection, does nothing
            return self.reply(conn)
        if op == "state":
            return self.reply(conn, stdout=json.dumps(self.state()))
        if op == "attach_client":
            cid = self.next_client
            self.next_client += 1
            tab = self.tabs[0] if self.tabs else None
            self.clients.append({"id": cid, "tab": tab.id if tab else None})
            self.reply(conn, stdout=f"{cid}\n")
            self.after_change()
            return
        if op == "detach_client":
            cid = req.get("client")
            before = len(self.clients)
            if cid is None:
                self.clients = self.clients[1:]
            else:
                self.clients = [c for c in self.clients if c["id"] != cid]
            return self.reply(conn, exit=0 if len(self.clients) < before else 1,
                              stderr="" if len(self.clients) < before else "no such client\n")
        if op == "action":
            return self.op_action(conn, req)
        return self.reply(conn, stderr=f"fake zellij server: unknown op {op!r}\n", exit=2)

    def op_setup(self, conn, req):
        if self.setup_done:
            return self.reply(conn, stderr="Session already exists\n", exit=1)
        self.setup_done = True
        faults = req.get("faults") or {}
        delay = (faults.get("init_delay_ms") or 0) / 1000.0
        self.init_until = time.time() + delay
        self.reply(conn)
        if self._panics_at_birth(faults.get("birth_panics") or 0):
            os._exit(101)  # as 0.45.0's lib.rs:1454: the socket stays behind, refusing
        layout = req.get("layout")
        resurrect = req.get("resurrect")
        force_run = bool(req.get("force_run"))

        def build():
            if resurrect is not None:
                self.build_from_record(resurrect, force_run)
            else:
                self.build_tabs(layout, initial=True)
            self.after_change()

        if delay > 0:
            self.defer(delay, build)
        else:
            build()

    def _panics_at_birth(self, how_many: int) -> bool:
        """``birth_panics=N``: the first N sessions made under this state dir die as they
        are born (each counted in ``birth-panics``)."""
        if how_many <= 0:
            return False
        counter = os.path.join(common.state_root(self.env), "birth-panics")
        try:
            with open(counter) as fh:
                done = int(fh.read() or 0)
        except (OSError, ValueError):
            done = 0
        if done >= how_many:
            return False
        os.makedirs(os.path.dirname(counter), exist_ok=True)
        with open(counter, "w") as fh:
            fh.write(str(done + 1))
        return True

    def op_kill(self, conn, req):
        """KillSession (§2.4): the CLI gets its answer at once; the server lingers
        ``kill_delay_ms`` (default ``common.DEFAULT_KILL_DELAY_MS``) — still listed, still
        accepting connections, doing nothing — then closes its PTYs, removes its socket, exits.
        ``kill_delay_ms=0``: the socket goes before the answer (exits synchronously)."""
        faults = req.get("faults") or {}
        delay = faults.get("kill_delay_ms", common.DEFAULT_KILL_DELAY_MS)
        delay = delay / 1000.0 if isinstance(delay, int) else common.DEFAULT_KILL_DELAY_MS / 1000
        if delay <= 0:
            self._unlink_socket()
            self.reply(conn)
            self.done = True
            return
        self.reply(conn)
        if not self.dying:
            self.dying = True
            self.defer(delay, self._die)

    def _die(self):
        self.done = True

    def op_action(self, conn, req):
        name = req["action"]
        faults = req.get("faults") or {}
        if time.time() < self.init_until:
            if self.version >= (0, 44, 0):
                if name == "list-panes" and req["opts"].get("json"):
                    # the screen answers before it has built the layout's tabs (verified on 0.45.0)
                    return self.reply(conn, stdout="[]\n")
                return self.reply(conn)
            # <0.44: the CLI waits for a later unblock; the action itself is dropped
            return self.defer(self.init_until - time.time(), lambda: self.reply(conn))
        start = time.time()
        delay = (faults.get("action_delay_ms") or 0) / 1000.0
        if delay > 0:
            time.sleep(delay)
            self._reap()
        handler = getattr(self, "act_" + name.replace("-", "_"), None)
        if handler is None:
            return self.reply(conn, stderr=f"fake zellij: action {name} is not modelled\n", exit=2)
        try:
            result = handler(req, conn)
        except BrokenPipeError:
            result = None
        if result is None:  # deferred reply (blocking run)
            return
        elapsed = time.time() - start
        if self.version >= (0, 44, 0) and elapsed > 1.0:
            result = {"stderr": "Timeout listing panes\n", "exit": 2} if name == "list-panes" else {}
        self.reply(conn, **result)
        self.after_change()

    # ================================================================== model helpers
    def all_panes(self):
        for t in self.tabs:
            yield from t.panes
        yield from self.orphans

    def find_pane(self, ref):
        if ref is None:
            return None
        kind, num = ref
        for p in self.all_panes():
            if p.kind == kind and p.id == num and not p.orphan:
                return p
        return None

    def find_tab(self, tid):
        for t in self.tabs:
            if t.id == tid:
                return t
        return None

    @staticmethod
    def term_index(p):
        if p.tab is None:
            return 0
        terms = [q for q in p.tab.panes if q.kind == "terminal"]
        return terms.index(p) if p in terms else 0

    def position(self, tab):
        return self.tabs.index(tab)

    def client_tab(self):
        if not self.clients:
            return None
        c = self.clients[-1]
        t = self.find_tab(c["tab"]) if c["tab"] is not None else None
        if t is None and self.tabs:
            t = self.tabs[0]
            c["tab"] = t.id
        return t

    def active_tab_id(self):
        t = self.client_tab()
        if t is None:
            t = self.find_tab(self.active_tab) if self.active_tab is not None else None
        if t is None and self.tabs:
            t = self.tabs[0]
        return t.id if t is not None else None

    def focused_pane(self):
        t = self.client_tab()
        if t is None:
            return None
        if t.focused is None or t.focused not in t.panes:
            sel = [p for p in t.panes if p.selectable and not p.suppressed]
            t.focused = sel[0] if sel else None
        return t.focused

    def alloc_terminal_id(self):
        if self.version >= (0, 44, 0):
            n = self.next_tid
            self.next_tid += 1
            return n
        live = [p.id for p in self.all_panes() if p.kind == "terminal"]
        return max(live) + 1 if live else 0

    def alloc_plugin_id(self):
        n = self.next_plugin
        self.next_plugin += 1
        return n

    def pane_env(self, pane):
        env = dict(self.env)
        env["ZELLIJ"] = "0"
        env["ZELLIJ_SESSION_NAME"] = self.name
        env["ZELLIJ_PANE_ID"] = str(pane.id)
        return env

    def default_shell(self):
        return self.env.get("SHELL") or "/bin/sh"

    # ================================================================== geometry
    def relayout(self, tab):
        tiling.place(tab.root, 0, 0, self.rows, self.cols)
        for p in tab.panes:
            if not p.floating:
                continue
            w = self._dim(p.fw, self.cols, self.cols // 2)
            h = self._dim(p.fh, self.rows, self.rows // 2)
            x = self._dim(p.fx, self.cols, self.cols // 4)
            yy = self._dim(p.fy, self.rows, self.rows // 4)
            p.geom = (x, yy, h, w)
        for p in tab.panes:
            _, _, rows, cols = p.content_geom()
            if p.screen is not None:
                p.screen.resize(cols, rows)
            if p.master is not None:
                try:
                    fcntl.ioctl(p.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
                except OSError:
                    pass

    @staticmethod
    def _dim(v, total, default):
        if v is None:
            return default
        s = str(v)
        try:
            if s.endswith("%"):
                return max(1, total * int(s[:-1]) // 100)
            return max(1, int(s))
        except ValueError:
            return default

    # ================================================================== pane processes
    def resolve_command(self, cmd, cwd):
        if os.path.isabs(cmd):
            return cmd if os.path.exists(cmd) else None
        if cwd and os.path.exists(os.path.join(cwd, cmd)):
            return cmd
        if not cwd and os.path.exists(cmd):
            return cmd
        if "/" not in cmd:
            for d in (self.env.get("PATH") or "").split(os.pathsep):
                if d and os.path.exists(os.path.join(d, cmd)):
                    return cmd
        return None

    def start_process(self, pane, argv):
        """Runs argv in the pane; False if the command was not found."""
        cwd = pane.cwd if pane.cwd and os.path.isdir(pane.cwd) else self.cwd
        if self.resolve_command(argv[0], pane.cwd) is None:
            return False
        _, _, rows, cols = pane.content_geom()
        master, slave = os.openpty()
        try:
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
            exe_argv = list(argv)
            if not os.path.isabs(argv[0]) and "/" in argv[0]:
                exe_argv[0] = os.path.join(cwd, argv[0])
            try:
                proc = subprocess.Popen(
                    exe_argv, cwd=cwd, env=self.pane_env(pane), stdin=slave, stdout=slave,
                    stderr=slave, start_new_session=True, preexec_fn=_set_ctty, close_fds=True)
            except OSError:
                os.close(master)
                return False
        finally:
            os.close(slave)
        os.set_blocking(master, False)
        pane.proc = proc
        pane.master = master
        pane.state = "running"
        pane.exited = False
        pane.exit_status = None
        self.sel.register(master, selectors.EVENT_READ, ("pty", pane))
        return True

    def launch(self, pane):
        """Start (or re-run) a terminal pane's command / shell."""
        argv = pane.argv or pane.shell_argv or [self.default_shell()]
        if not self.start_process(pane, argv):
            pane.screen.write_text(f"Command not found: {argv[0]}\n{NOT_FOUND_2}\n")
            self.on_exit(pane, 2)

    def _read_pty(self, pane):
        try:
            data = os.read(pane.master, 65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            try:
                self.sel.unregister(pane.master)
            except (KeyError, ValueError):
                pass
            return
        self._record(pane, data)

    def _record(self, pane, data):
        pane.screen.feed(data)
        if pane.log_path:
            try:
                with open(pane.log_path, "ab") as fh:
                    fh.write(data)
            except OSError:
                pass

    def _close_master(self, pane):
        if pane.master is None:
            return
        try:
            self.sel.unregister(pane.master)
        except (KeyError, ValueError):
            pass
        try:
            os.close(pane.master)
        except OSError:
            pass
        pane.master = None

    def _drain(self, pane):
        if pane.master is None:
            return
        while True:
            try:
                data = os.read(pane.master, 65536)
            except OSError:
                break
            if not data:
                break
            self._record(pane, data)

    def _reap(self):
        for p in list(self.all_panes()):
            if p.proc is not None and p.state == "running":
                rc = p.proc.poll()
                if rc is not None:
                    self._drain(p)
                    self._close_master(p)
                    p.proc = None
                    self.on_exit(p, rc if rc >= 0 else None)
        for z in list(self.zombies):
            if z.poll() is not None:
                self.zombies.remove(z)

    def on_exit(self, pane, status):
        pane.exited = True
        pane.exit_status = status
        pane.state = "held"
        for conn, mode in list(pane.waiters):
            if (mode == "exit" or (mode == "success" and status == 0)
                    or (mode == "failure" and status not in (0,))):
                pane.waiters.remove((conn, mode))
                self.reply(conn, exit=status if status is not None else 0)
        if pane.close_on_exit:
            self.remove_pane(pane)
        self.after_change()

    def kill_pane_process(self, pane):
        if pane.proc is not None and pane.proc.poll() is None:
            try:
                os.kill(pane.proc.pid, signal.SIGHUP)
            except OSError:
                pass
            self.zombies.append(pane.proc)
        self._drain(pane)
        self._close_master(pane)
        pane.proc = None

    def remove_pane(self, pane):
        self.kill_pane_process(pane)
        status = pane.exit_status
        for conn, _ in pane.waiters:
            self.reply(conn, exit=status if status is not None else 0)
        pane.waiters = []
        if pane.orphan:
            if pane in self.orphans:
                self.orphans.remove(pane)
            return
        tab = pane.tab
        if tab is None or pane not in tab.panes:
            return
        tab.panes.remove(pane)
        neighbour = None
        if pane.replaced is not None and pane.replaced in tab.panes:
            pane.replaced.suppressed = False
            tiling.replace_pane(tab.root, pane, pane.replaced)
            neighbour = pane.replaced
        elif not pane.floating:
            tab.root, neighbour = tiling.remove(tab.root, pane)
        if tab.focused is pane:
            if neighbour is None or not neighbour.selectable:
                sel = [p for p in tab.panes if p.selectable and not p.suppressed]
                neighbour = sel[-1] if sel else None
            self.set_focus(tab, neighbour)
        self.relayout(tab)
        self.check_tabs()

    def check_tabs(self):
        """Closes empty tabs / ends the session (§2.9, with the ≥0.44 erratum)."""
        if self.done:
            return
        if self.version < (0, 44, 0) or self.clients:
            for tab in list(self.tabs):
                if not any(p.selectable for p in tab.panes):
                    self.tabs.remove(tab)
            if not self.tabs:
                self.end_session()

    def end_session(self):
        self._unlink_socket()
        self.done = True

    # ================================================================== focus and placement
    def set_focus(self, tab, pane):
        """``pane`` becomes its tab's focused pane; a stacked pane is expanded (§3.10)."""
        tab.focused = pane
        node = tiling.find(tab.root, pane) if pane is not None else None
        if node is not None and node.parent is not None and node.parent.kind == "stack":
            node.parent.expanded = pane

    def tiled_anchor(self, tab, pane=None):
        """The tiled pane a stacked/directional pane goes next to: ``pane``, else the tab's
        focused pane (its first selectable tiled pane when a floating one has focus)."""
        for cand in (pane, tab.focused):
            if cand is not None and cand.tab is tab and tiling.find(tab.root, cand) is not None:
                return cand
        return next((n.pane for n in tiling.leaves(tab.root) if n.pane.selectable), None)

    def _place(self, tab, pane, place):
        """Puts a new pane in its tab's tree: ``place`` is "defer" (a layout builds the tree),
        ("add",), ("stack", anchor, expand), ("split", anchor, direction)."""
        if pane.floating or place == "defer":
            return
        kind = place[0] if place else "add"
        anchor = self.tiled_anchor(tab, place[1]) if kind in ("stack", "split") else None
        if anchor is None:
            tab.root = tiling.add(tab.root, pane)
        elif kind == "stack":
            tab.root = tiling.stack_onto(tab.root, anchor, pane, expand=place[2])
        else:
            tab.root = tiling.split(tab.root, anchor, pane, place[2])

    # ================================================================== building panes
    def new_terminal(self, tab, spec, focus=True, place=None):
        pane = Pane("terminal", self.alloc_terminal_id())
        pane.name = spec.get("name")
        pane.orig_name = pane.name
        pane.argv = list(spec["argv"]) if spec.get("argv") else None
        pane.cwd = spec.get("cwd")
        pane.close_on_exit = bool(spec.get("close_on_exit"))
        pane.floating = bool(spec.get("floating"))
        pane.borderless = bool(spec.get("borderless"))
        pane.size = spec.get("size")
        pane.fx, pane.fy = spec.get("x"), spec.get("y")
        pane.fw, pane.fh = spec.get("width"), spec.get("height")
        pane.screen = Screen(self.cols, self.rows)
        os.makedirs(self.state_dir, exist_ok=True)
        pane.log_path = os.path.join(self.state_dir, f"pane-{pane.id}.log")
        try:
            open(pane.log_path, "wb").close()
        except OSError:
            pane.log_path = None
        if tab is None:
            pane.orphan = True
            self.orphans.append(pane)
        else:
            pane.tab = tab
            tab.panes.append(pane)
            self._place(tab, pane, place)
            if focus or tab.focused is None:
                self.set_focus(tab, pane)
            self.relayout(tab)
        if spec.get("start_suspended") and pane.argv:
            pane.state = "suspended"
            pane.screen.write_text(f"Waiting to run: {pane.command_string()}\n{SUSPENDED_HINT}\n")
        else:
            self.launch(pane)
        return pane

    def new_plugin(self, tab, spec, focus=False, place=None):
        pane = Pane("plugin", self.alloc_plugin_id())
        pane.plugin_url = spec.get("plugin_url")
        pane.name = spec.get("name")
        pane.orig_name = pane.name
        pane.state = "plugin"
        pane.floating = bool(spec.get("floating"))
        pane.borderless = bool(spec.get("borderless"))
        pane.size = spec.get("size")
        pane.fx, pane.fy = spec.get("x"), spec.get("y")
        pane.fw, pane.fh = spec.get("width"), spec.get("height")
        pane.tab = tab
        tab.panes.append(pane)
        self._place(tab, pane, place)
        if focus and pane.selectable:
            self.set_focus(tab, pane)
        self.relayout(tab)
        return pane

    def new_tab(self, name=None):
        tid = max((t.id for t in self.tabs), default=-1) + 1
        tab = Tab(tid, name or f"Tab #{tid + 1}")
        self.tabs.append(tab)
        return tab

    def build_tabs(self, layout, initial=False, tab_name=None, cwd=None):
        created = []
        focus_tab = None
        for i, tspec in enumerate(layout["tabs"]):
            name = tspec.get("name")
            if tab_name and i == 0:
                name = tab_name
            tab = self.new_tab(name)
            created.append(tab)
            focused = None
            tiled = []
            for spec in tspec["panes"] + tspec["floating"]:
                spec = dict(spec)
                if cwd and not spec.get("cwd"):
                    spec["cwd"] = cwd
                elif cwd and not os.path.isabs(spec["cwd"]):
                    spec["cwd"] = os.path.join(cwd, spec["cwd"])
                if spec.get("plugin_url"):
                    p = self.new_plugin(tab, spec, place="defer")
                else:
                    p = self.new_terminal(tab, spec, focus=False, place="defer")
                if not p.floating:
                    tiled.append(p)
                if spec.get("focus") or (focused is None and p.selectable and not p.floating):
                    focused = p
            tree = tspec.get("tree") or {"split": "horizontal", "children": [
                {"leaf": i} for i in range(len(tiled))]}
            tab.root = tiling.from_spec(tree, tiled)
            self.set_focus(tab, focused)
            if tspec.get("focus"):
                focus_tab = tab
            self.relayout(tab)
        if initial and not layout.get("explicit_tabs") and self.version >= (0, 41, 0) and created:
            url = "zellij:about" if self.version >= (0, 42, 0) else "zellij:configuration"
            self.new_plugin(created[0], {"plugin_url": url, "floating": True}, focus=True)
        target = focus_tab or (created[0] if created else None)
        if target is not None and (initial or self.clients):
            self.active_tab = target.id
        for c in self.clients:
            if target is not None:
                c["tab"] = target.id
        return created

    def build_from_record(self, record, force_run):
        layout = {"explicit_tabs": True, "tabs": []}
        for t in record.get("tabs", []):
            panes = []
            for p in t.get("panes", []):
                p = dict(p)
                if p.get("argv") and not force_run:
                    p["start_suspended"] = True
                panes.append(p)
            layout["tabs"].append({"name": t.get("name"), "focus": bool(t.get("focus")),
                                   "panes": [p for p in panes if not p.get("floating")],
                                   "floating": [p for p in panes if p.get("floating")],
                                   "tree": t.get("tree")})
        self.build_tabs(layout)

    # ================================================================== persistence
    def after_change(self):
        if self.done:
            return
        if self.version >= (0, 44, 0) and self.clients:
            self.check_tabs()
            if self.done:
                return
        self.serialize()

    def record(self):
        tabs = []
        for t in self.tabs:
            panes = []
            order = [n.pane for n in tiling.leaves(t.root)] + [p for p in t.panes if p.floating]
            for p in order:
                panes.append({
                    "name": p.name, "argv": p.argv, "cwd": p.cwd, "close_on_exit": p.close_on_exit,
                    "floating": p.floating, "plugin_url": p.plugin_url, "borderless": p.borderless,
                    "size": p.size, "focus": p is t.focused,
                    "x": p.fx, "y": p.fy, "width": p.fw, "height": p.fh,
                })
            tree = tiling.to_spec(t.root, order.index) if t.root is not None else None
            tabs.append({"name": t.name, "panes": panes, "tree": tree,
                         "focus": t.id == self.active_tab_id()})
        return {"name": self.name, "tabs": tabs}

    def serialize(self):
        if self.dying or self.env.get("FAKE_ZELLIJ_SERIALIZE", "1") == "0":
            return
        if not any(t.panes for t in self.tabs):
            return
        d = os.path.join(common.session_info_dir(self.ver_str, self.env), self.name)
        try:
            os.makedirs(d, exist_ok=True)
            rec = self.record()
            tmp = os.path.join(d, ".fake-session.json.tmp")
            with open(tmp, "w") as fh:
                json.dump(rec, fh)
            os.replace(tmp, os.path.join(d, "fake-session.json"))
            with open(os.path.join(d, "session-layout.kdl"), "w") as fh:
                fh.write(dump.layout_kdl(self))
        except OSError:
            pass

    # ================================================================== shutdown
    def _unlink_socket(self):
        try:
            if os.path.exists(self.sock_path):
                os.unlink(self.sock_path)
        except OSError:
            pass

    def _shutdown_now(self):
        self._unlink_socket()
        for p in list(self.all_panes()):
            for conn, _ in p.waiters:
                self.reply(conn)
            p.waiters = []
            # the PTY masters close: the kernel hangs up the pane terminals (SIGHUP)
            self._close_master(p)
        # actions still deferred are dropped: the server exits after this
        try:
            self.listener.close()
        except OSError:
            pass

    # ================================================================== state dump
    def pane_state(self, p, position):
        return {
            "id": p.id, "pane_id": p.label, "kind": p.kind,
            "tab_id": p.tab.id if p.tab is not None and not p.orphan else None,
            "name": p.name, "title": p.title(position), "command": p.argv,
            "cwd": p.cwd, "state": p.state,
            "pid": p.proc.pid if p.proc is not None else None,
            "exited": p.exited, "exit_status": p.exit_status,
            "held": p.state in ("held", "suspended"),
            "close_on_exit": p.close_on_exit, "floating": p.floating,
            "stacked": p.tab is not None and tiling.in_stack(p.tab.root, p),
            "expanded": p.tab is not None and self._expanded(p),
            "suppressed": p.suppressed, "selectable": p.selectable, "plugin_url": p.plugin_url,
            "focused": p is (p.tab.focused if p.tab is not None else None),
            "geometry": dict(zip(("x", "y", "rows", "cols"), p.geom, strict=True)),
            "log": p.log_path,
            "env_added": {"ZELLIJ": "0", "ZELLIJ_SESSION_NAME": self.name,
                          "ZELLIJ_PANE_ID": str(p.id)} if p.kind == "terminal" else None,
        }

    @staticmethod
    def _collapsed(p):
        """A stack member that is not the expanded one: ``list-panes`` calls it suppressed
        (verified on 0.45.0)."""
        node = tiling.find(p.tab.root, p) if p.tab is not None else None
        return node is not None and node.parent is not None and node.parent.kind == "stack" \
            and node.parent.expanded is not p

    @staticmethod
    def _expanded(p):
        node = tiling.find(p.tab.root, p)
        return node is not None and node.parent is not None and node.parent.kind == "stack" \
            and node.parent.expanded is p

    def state(self):
        tabs = []
        for pos, t in enumerate(self.tabs):
            tabs.append({
                "id": t.id, "position": pos, "name": t.name,
                "focused_pane": t.focused.label if t.focused is not None else None,
                "panes": [self.pane_state(p, self.term_index(p)) for p in t.panes],
            })
        return {
            "name": self.name, "live": True, "server_pid": os.getpid(), "version": self.ver_str,
            "socket": self.sock_path, "cwd": self.cwd, "created_at": self.created,
            "size": {"cols": self.cols, "rows": self.rows},
            "initialising": time.time() < self.init_until, "dying": self.dying,
            "clients": [{"id": c["id"], "tab_id": c["tab"]} for c in self.clients],
            "tabs": tabs,
            "orphan_panes": [self.pane_state(p, 0) for p in self.orphans],
            "zombie_pids": [z.pid for z in self.zombies],
        }

    # ================================================================== actions
    def _target_pane(self, req):
        """--pane-id if given (None when unknown), else the focused pane (None if detached)."""
        ref = req.get("pane_id")
        if ref is not None:
            return self.find_pane(tuple(ref))
        return self.focused_pane()

    def route_new_pane(self, req):
        """(tab, anchor, focus) for a new pane, per version (§2.7, §3.10, route.rs):
        ``--tab-id`` → that tab's focused pane; ``--near-current-pane``/``--no-focus`` (and,
        before 0.44, ``--stacked`` alone) with a ``$ZELLIJ_PANE_ID`` of this session → next to
        that pane, without focus; else the client's tab (≥0.44: the first tab when detached;
        <0.44: no tab, the pane is not placed) and its focused pane. ``anchor`` None = the
        tab's focused pane; ``focus``: the new pane takes its tab's focus."""
        o = req["opts"]
        ver44 = self.version >= (0, 44, 0)
        caller = self.find_pane(tuple(req["caller_pane"])) if req.get("caller_pane") else None
        if caller is not None and (caller.tab is None or caller.orphan):
            caller = None
        if o.get("tab_id") is not None:
            return self.find_tab(int(o["tab_id"])), None, not o.get("no_focus")
        near = o.get("near_current_pane") or o.get("no_focus") or (
            not ver44 and o.get("stacked"))
        if near and caller is not None:
            return caller.tab, caller, False
        if near and ver44 and req.get("caller_pane"):
            # 0.45.0 (verified): a $ZELLIJ_PANE_ID naming a pane that is gone places the pane
            # nowhere — its id is printed, its command runs, no tab lists it and close-pane
            # cannot reach it
            return None, None, False
        tab = self.client_tab() if self.clients else None
        if tab is None and ver44:
            # no client: the first tab, and the focus stays where it was (0.45.0, verified
            # after the client detached)
            return (self.tabs[0] if self.tabs else self.new_tab()), None, False
        return tab, None, not o.get("no_focus")

    def act_new_pane(self, req, conn):
        o = req["opts"]
        ver44 = self.version >= (0, 44, 0)
        tab, anchor, focus = self.route_new_pane(req)
        if tab is None and o.get("tab_id") is not None:
            return {"stderr": f"Tab with id {o['tab_id']} not found\n", "exit": 2}
        if o.get("plugin"):
            if tab is None:
                return {}
            url = o["plugin"]
            p = self.new_plugin(tab, {"plugin_url": url, "floating": o.get("floating")},
                                focus=focus, place=("add",))
            out = f"{p.label}\n" if ver44 and not req.get("faults", {}).get("silent_new_pane") else ""
            return {"stdout": out}
        spec = {
            "name": o.get("name"), "argv": o.get("command") or None, "cwd": o.get("cwd"),
            "close_on_exit": o.get("close_on_exit"), "start_suspended": o.get("start_suspended"),
            "floating": o.get("floating"),
            "borderless": str(o.get("borderless")).lower() == "true",
            "x": o.get("x"), "y": o.get("y"), "width": o.get("width"), "height": o.get("height"),
        }
        if not spec["argv"]:
            spec["argv"] = None
        replaced = None
        if o.get("in_place") and tab is not None:
            ref = o.get("replace_pane_id") or req.get("caller_pane")
            replaced = self.find_pane(tuple(ref)) if ref else None
            if replaced is None:
                replaced = tab.focused
            if replaced is not None and replaced.tab is not None:
                tab = replaced.tab
        if replaced is not None:
            place = "defer"
        elif o.get("stacked"):
            place = ("stack", anchor, focus)
        elif o.get("direction"):
            place = ("split", anchor, o["direction"])
        else:
            place = ("add",)
        pane = self.new_terminal(tab, spec, focus=focus, place=place)
        if replaced is not None and not pane.orphan:
            if not pane.floating:
                tiling.replace_pane(tab.root, replaced, pane)
            self.set_focus(tab, pane)
            if o.get("close_replaced_pane"):
                self.remove_pane(replaced)
            else:
                replaced.suppressed = True
                pane.replaced = replaced
            self.relayout(tab)
        if pane.orphan:
            return {"stdout": f"{pane.label}\n"} if ver44 and not req.get("faults", {}).get("silent_new_pane") else {}
        block = o.get("block")
        if block and ver44:
            if block != "close" and pane.state == "held" and pane.exited and (
                    block == "exit" or (block == "success" and pane.exit_status == 0)
                    or (block == "failure" and pane.exit_status != 0)):
                return {"exit": pane.exit_status if pane.exit_status is not None else 0}
            if pane.tab is None or pane not in pane.tab.panes:  # already closed (close-on-exit)
                return {"exit": pane.exit_status if pane.exit_status is not None else 0}
            pane.waiters.append((conn, block))
            self.after_change()
            return None
        if ver44 and not req.get("faults", {}).get("silent_new_pane"):
            return {"stdout": f"{pane.label}\n"}
        return {}

    def act_close_pane(self, req, conn):
        p = self._target_pane(req)
        if p is not None:
            self.remove_pane(p)
        return {}

    def act_rename_pane(self, req, conn):
        p = self._target_pane(req)
        if p is not None:
            p.name = req["opts"]["name"]
        elif req.get("pane_id") is not None:  # unlike close-pane, an unknown id is an error (0.45.0)
            kind, num = req["pane_id"]
            return {"stderr": f"Pane with id {kind.capitalize()}({num}) not found\n", "exit": 2}
        return {}

    def act_undo_rename_pane(self, req, conn):
        p = self._target_pane(req)
        if p is not None:
            p.name = p.orig_name
        return {}

    def _send_input(self, p, data: bytes):
        if p.kind != "terminal":
            return
        if p.state in ("held", "suspended"):
            if data in (b"\r", b"\n", b" "):
                self.launch(p)
            elif data == b"\x1b":
                p.argv = None
                p.shell_argv = [self.default_shell()]
                self.launch(p)
            elif data == b"\x03":
                self.remove_pane(p)
            return
        if p.master is None:
            return
        deadline = time.time() + 2
        while data and time.time() < deadline:
            try:
                n = os.write(p.master, data)
                data = data[n:]
            except BlockingIOError:
                time.sleep(0.005)
            except OSError:
                break

    def act_write_chars(self, req, conn):
        p = self._target_pane(req)
        if p is not None:
            self._send_input(p, req["opts"]["chars"].encode("utf-8", "surrogateescape"))
        return {}

    def act_write(self, req, conn):
        p = self._target_pane(req)
        if p is not None:
            self._send_input(p, bytes(req["opts"]["bytes"]))
        return {}

    def act_paste(self, req, conn):
        p = self._target_pane(req)
        if p is not None:
            self._send_input(p, b"\x1b[200~" + req["opts"]["text"].encode() + b"\x1b[201~")
        return {}

    def act_send_keys(self, req, conn):
        p = self._target_pane(req)
        if p is not None:
            self._send_input(p, bytes(req["opts"]["bytes"]))
        return {}

    def act_dump_screen(self, req, conn):
        o = req["opts"]
        p = self._target_pane(req)
        text = p.screen.dump(full=bool(o.get("full"))) if p is not None and p.screen else ""
        path = o.get("path")
        if path:
            if p is None and self.version < (0, 44, 0):
                return {}
            full = path if os.path.isabs(path) else os.path.join(self.cwd, path)
            try:
                with open(full, "w", encoding="utf-8") as fh:
                    fh.write(text)
            except OSError as e:
                return {"stderr": f"Failed to write to file: {e}\n", "exit": 2}
            return {}
        return {"stdout": text + "\n"}

    def act_dump_layout(self, req, conn):
        return {"stdout": dump.layout_kdl(self)}

    def act_list_clients(self, req, conn):
        out = ["CLIENT_ID ZELLIJ_PANE_ID RUNNING_COMMAND"]
        for c in self.clients:
            t = self.find_tab(c["tab"])
            p = t.focused if t is not None else None
            label = p.label if p is not None else "N/A"
            cmd = (p.command_string() if p is not None else None) or "N/A"
            out.append("{:<9} {:<14} {:<15}".format(c["id"], label, cmd))
        return {"stdout": "\n".join(out) + "\n"}

    def _foreground(self, p):
        if p.master is None:
            return None, None
        try:
            pgrp = os.tcgetpgrp(p.master)
            with open(f"/proc/{pgrp}/cmdline", "rb") as fh:
                cmd = " ".join(a.decode(errors="replace") for a in fh.read().split(b"\0") if a)
            cwd = os.readlink(f"/proc/{pgrp}/cwd")
            return cmd, cwd
        except OSError:
            return None, None

    def pane_info(self, p, tab, pos, index, with_proc):
        x, y, rows, cols = p.geom
        cx, cy, crows, ccols = p.content_geom()
        # each tab's focused pane, with or without a client (verified on 0.45.0)
        focused = tab.focused is p
        info = {
            "id": p.id,
            "is_plugin": p.kind == "plugin",
            "is_focused": focused,
            "is_fullscreen": False,
            "is_floating": p.floating,
            "is_suppressed": p.suppressed or self._collapsed(p),
            "title": p.title(index),
            "exited": p.exited,
            "exit_status": p.exit_status,
            "is_held": p.state in ("held", "suspended"),
            "pane_x": x,
            "pane_content_x": cx,
            "pane_y": y,
            "pane_content_y": cy,
            "pane_rows": rows,
            "pane_content_rows": crows,
            "pane_columns": cols,
            "pane_content_columns": ccols,
            "cursor_coordinates_in_pane": p.screen.cursor() if p.screen is not None else None,
            "terminal_command": p.command_string() if p.kind == "terminal" else None,
            "plugin_url": p.plugin_url if p.kind == "plugin" else None,
            "is_selectable": p.selectable,
            "index_in_pane_group": {},
            "default_fg": None,
            "default_bg": None,
            "tab_id": tab.id,
            "tab_position": pos,
            "tab_name": tab.name,
        }
        if with_proc and p.kind == "terminal":
            cmd, cwd = self._foreground(p)
            if cmd is not None:
                info["pane_command"] = cmd
            if cwd is not None:
                info["pane_cwd"] = cwd
        return info

    def act_list_panes(self, req, conn):
        o = req["opts"]
        rows = []
        for pos, tab in enumerate(self.tabs):
            panes = [] if tab.laying_out else list(enumerate(tab.panes))
            panes.sort(key=lambda ip: (0 if ip[1].kind == "plugin" else 1, ip[1].id))
            for _, p in panes:
                if not p.selectable and not o.get("all"):
                    continue
                rows.append(self.pane_info(p, tab, pos, self.term_index(p), bool(o.get("json"))))
        if o.get("json"):
            return {"stdout": json.dumps(rows, indent=2, ensure_ascii=False) + "\n"}
        allc = bool(o.get("all"))
        header = []
        if o.get("tab") or allc:
            header += ["TAB_ID", "TAB_POS", "TAB_NAME"]
        header += ["PANE_ID", "TYPE", "TITLE"]
        if o.get("command") or allc:
            header += ["COMMAND", "CWD"]
        if o.get("state") or allc:
            header += ["FOCUSED", "FLOATING", "EXITED"]
        if o.get("geometry") or allc:
            header += ["X", "Y", "ROWS", "COLS"]
        lines = ["  ".join(header)]
        for r in rows:
            cols = []
            if o.get("tab") or allc:
                cols += [str(r["tab_id"]), str(r["tab_position"]), r["tab_name"]]
            label = ("plugin_" if r["is_plugin"] else "terminal_") + str(r["id"])
            cols += [label, "plugin" if r["is_plugin"] else "terminal", r["title"]]
            if o.get("command") or allc:
                p = self.find_pane(("plugin" if r["is_plugin"] else "terminal", r["id"]))
                cmd, cwd = self._foreground(p) if p is not None else (None, None)
                cols += [cmd or r["terminal_command"] or r["plugin_url"] or "-", cwd or "-"]
            if o.get("state") or allc:
                cols += [str(r["is_focused"]).lower(), str(r["is_floating"]).lower(),
                         str(r["exited"]).lower()]
            if o.get("geometry") or allc:
                cols += [str(r["pane_x"]), str(r["pane_y"]), str(r["pane_rows"]),
                         str(r["pane_columns"])]
            lines.append("  ".join(cols))
        return {"stdout": "\n".join(lines) + "\n"}

    def act_list_tabs(self, req, conn):
        o = req["opts"]
        active = self.client_tab()
        if o.get("json"):
            out = []
            for pos, t in enumerate(self.tabs):
                out.append({
                    "position": pos, "name": t.name, "active": t is active,
                    "panes_to_hide": 0, "is_fullscreen_active": False,
                    "is_sync_panes_active": False, "are_floating_panes_visible": any(
                        p.floating for p in t.panes),
                    "other_focused_clients": [], "active_swap_layout_name": None,
                    "is_swap_layout_dirty": False, "viewport_rows": self.rows,
                    "viewport_columns": self.cols, "display_area_rows": self.rows,
                    "display_area_columns": self.cols,
                    "selectable_tiled_panes_count": sum(
                        1 for p in t.panes if p.selectable and not p.floating),
                    "selectable_floating_panes_count": sum(
                        1 for p in t.panes if p.selectable and p.floating),
                    "tab_id": t.id,
                })
            return {"stdout": json.dumps(out, indent=2, ensure_ascii=False) + "\n"}
        lines = ["TAB_ID  POSITION  NAME"]
        for pos, t in enumerate(self.tabs):
            lines.append(f"{t.id}  {pos}  {t.name}")
        return {"stdout": "\n".join(lines) + "\n"}

    def act_current_tab_info(self, req, conn):
        t = self.client_tab()
        if t is None:
            return {"stderr": "No active tab found for current client\n", "exit": 2}
        pos = self.position(t)
        if req["opts"].get("json"):
            return {"stdout": json.dumps({"name": t.name, "id": t.id, "position": pos},
                                         indent=2) + "\n"}
        return {"stdout": f"name: {t.name}\nid: {t.id}\nposition: {pos}\n"}

    def act_query_tab_names(self, req, conn):
        if not self.tabs:
            return {}
        return {"stdout": "".join(f"{t.name}\n" for t in self.tabs)}

    def act_new_tab(self, req, conn):
        o = req["opts"]
        layout = o.get("layout")
        before = {id(c): c.get("tab") for c in self.clients}
        if layout is None:
            spec = {"argv": o.get("command") or None, "cwd": o.get("cwd")}
            layout = {"explicit_tabs": True,
                      "tabs": [{"name": None, "focus": True, "panes": [spec], "floating": []}]}
            created = self.build_tabs(layout, tab_name=o.get("name"))
            delay = None
        else:
            created = self.build_tabs(layout, tab_name=o.get("name"), cwd=o.get("cwd"))
            delay = (req.get("faults") or {}).get("layout_delay_ms")
        if created and o.get("layout") is not None and not self.clients and self.version >= (0, 45, 0):
            # With no client the tab is made and its commands run, but it holds no pane:
            # list-panes (--all too) and dump-layout show it empty, and stay so when a client
            # attaches later (0.45.0, verified: docs/zellij-contract.md §2.17).
            for t in created:
                t.laying_out = True
        elif created and delay:
            # The real server answers new-tab with the tab's id, then lays the tab out once
            # the pty thread has started its panes (Screen::apply_layout): only then are its
            # panes listed and the clients moved to it (docs/zellij-contract.md §2.17). A
            # go-to-tab-by-id sent meanwhile is undone by that move.
            for c in self.clients:
                c["tab"] = before[id(c)]
            for t in created:
                t.laying_out = True
            self.defer(delay / 1000.0, lambda: self._laid_out(created))
        elif created:
            for c in self.clients:
                c["tab"] = created[0].id
        if self.version >= (0, 44, 0):
            return {"stdout": "".join(f"{t.id}\n" for t in created)}
        return {}

    def _laid_out(self, created):
        """``layout_delay_ms``'s second half: the tabs' panes listed, the clients moved."""
        live = [t for t in created if t in self.tabs]
        for t in live:
            t.laying_out = False
        if live:
            for c in self.clients:
                c["tab"] = live[0].id
        self.after_change()

    def _active_or_first_tab(self):
        """The client's tab; with no client, the first on 0.44 (as read from its source) —
        on 0.45.0 none (verified: ``close-tab`` does nothing, ``rename-tab`` refuses)."""
        t = self.client_tab()
        if t is None and (0, 44, 0) <= self.version < (0, 45, 0) and self.tabs:
            t = self.tabs[0]
        return t

    def act_close_tab(self, req, conn):
        t = self._active_or_first_tab()
        if t is None:
            return {}  # no client: nothing closed, exit 0 (0.45.0, verified)
        for p in list(t.panes):
            self.kill_pane_process(p)
        self.tabs.remove(t)
        if not self.tabs:
            self.end_session()
        return {}

    def act_rename_tab(self, req, conn):
        t = self._active_or_first_tab()
        if t is None and self.version >= (0, 45, 0):
            return {"stderr": "Cannot rename the focused tab: no client is attached to this session. Target a tab "
                              "explicitly with --tab-id.\n", "exit": 2}  # (0.45.0, verified)
        if t is not None:
            t.name = req["opts"]["name"]
        return {}

    def act_rename_tab_by_id(self, req, conn):
        """An unknown id is a silent no-op, exit 0 (0.45.0, verified); no client needed."""
        o = req["opts"]
        t = self.find_tab(int(o["id"])) if str(o["id"]).isdigit() else None
        if t is not None:
            t.name = o["name"]
        return {}

    def act_go_to_tab_by_id(self, req, conn):
        """The client's tab becomes tab ID; an unknown id, or no client, does nothing: exit 0,
        no output (0.45.0, verified)."""
        o = req["opts"]
        t = self.find_tab(int(o["id"])) if str(o["id"]).isdigit() else None
        if t is not None and self.clients:
            self.clients[-1]["tab"] = t.id
        return {}

    def act_go_to_tab_name(self, req, conn):
        o = req["opts"]
        if not self.clients:
            return {}
        target = next((t for t in self.tabs if t.name == o["name"]), None)
        if target is None and o.get("create"):
            target = self.build_tabs({"explicit_tabs": True, "tabs": [
                {"name": o["name"], "focus": True, "panes": [{"argv": None}], "floating": []}]})[0]
        if target is None:
            return {}
        self.clients[-1]["tab"] = target.id
        if self.version >= (0, 44, 0):
            return {"stdout": f"{target.id}\n"}
        return {}

    def act_go_to_tab(self, req, conn):
        idx = int(req["opts"]["index"]) - 1
        if self.clients and 0 <= idx < len(self.tabs):
            self.clients[-1]["tab"] = self.tabs[idx].id
        return {}

    def _move_focus(self, step):
        t = self.client_tab()
        if t is None:
            return
        sel = [n.pane for n in tiling.leaves(t.root) if n.pane.selectable]
        sel += [p for p in t.panes if p.floating and p.selectable]
        if not sel:
            return
        cur = self.focused_pane()
        i = sel.index(cur) if cur in sel else 0
        self.set_focus(t, sel[(i + step) % len(sel)])
        self.relayout(t)

    def act_focus_next_pane(self, req, conn):
        self._move_focus(1)
        return {}

    def act_focus_previous_pane(self, req, conn):
        self._move_focus(-1)
        return {}

    def act_move_focus(self, req, conn):
        d = req["opts"].get("direction")
        self._move_focus(1 if d in ("right", "down") else -1)
        return {}

    def act_move_focus_or_tab(self, req, conn):
        return self.act_move_focus(req, conn)

    def act_focus_pane_id(self, req, conn):
        # acts for the attached client: no effect in a detached session (§2.18); an id no pane
        # has is an error, as rename-pane's (verified on 0.45.0)
        p = self.find_pane(tuple(req["pane_id"])) if req.get("pane_id") else None
        if p is None and req.get("pane_id") is not None:
            kind, num = req["pane_id"]
            return {"stderr": f"Pane with id {kind.capitalize()}({num}) not found\n", "exit": 2}
        if p is not None and p.tab is not None and self.clients and not p.suppressed:
            self.set_focus(p.tab, p)
            self.relayout(p.tab)
            self.clients[-1]["tab"] = p.tab.id
        return {}

    def act_stack_panes(self, req, conn):
        """The first id is the stack's root; the others (same tab, tiled) join its stack."""
        panes = [self.find_pane(tuple(ref)) for ref in req["opts"].get("pane_ids", [])]
        panes = [p for p in panes if p is not None and p.tab is not None and not p.floating
                 and tiling.find(p.tab.root, p) is not None]
        if not panes:
            return {}
        root = panes[0]
        tab = root.tab
        for p in panes[1:]:
            if p.tab is not tab or p is root:
                continue
            tab.root, _ = tiling.remove(tab.root, p)
            tab.root = tiling.stack_onto(tab.root, root, p, expand=False)
        self.relayout(tab)
        return {}

    def act_toggle_floating_panes(self, req, conn):
        return {}

    def act_toggle_fullscreen(self, req, conn):
        return {}

    def act_rename_session(self, req, conn):
        new = req["opts"]["name"]
        d = os.path.dirname(self.sock_path)
        new_path = os.path.join(d, new)
        if os.path.exists(new_path):
            return {"stderr": "A session by this name already exists.\n", "exit": 2}
        info = os.path.join(common.session_info_dir(self.ver_str, self.env), new)
        if os.path.exists(os.path.join(info, "session-layout.kdl")):
            return {"stderr": "A resurrectable session by this name exists, cannot use this name.\n",
                    "exit": 2}
        old_info = os.path.join(common.session_info_dir(self.ver_str, self.env), self.name)
        os.rename(self.sock_path, new_path)
        shutil.rmtree(old_info, ignore_errors=True)
        self.sock_path = new_path
        self.name = new
        self.env["ZELLIJ_SESSION_NAME"] = new
        return {}


def environment_is_utf8() -> bool:
    try:
        for name, value in os.environb.items():
            name.decode("utf-8")
            value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def run_server(sock_path: str) -> None:
    """`zellij --server PATH`: daemonise (fork + setsid), bind, serve."""
    if not environment_is_utf8():
        # The real server reads its environment as Rust strings and dies of a name or value
        # that is not UTF-8 before it binds its socket: `attach --create-background` exits 0
        # at once, and the session is never listed (0.45.0).
        os._exit(common.SERVER_DIED_OF_ITS_ENVIRONMENT)
    pid = os.fork()
    if pid > 0:
        os._exit(0)
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    if devnull > 2:
        os.close(devnull)
    try:
        server = Server(sock_path)
        server.serve()
    except Exception:  # pragma: no cover - debugging aid
        import traceback
        try:
            d = common.state_root()
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "server-errors.log"), "a") as fh:
                fh.write(f"--- {sock_path}\n{traceback.format_exc()}\n")
        except OSError:
            pass
        try:
            os.unlink(sock_path)
        except OSError:
            pass
    os._exit(0)
