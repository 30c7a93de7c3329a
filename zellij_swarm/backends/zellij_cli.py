"""Zellij facts a backend gates on: the version's capabilities (contract §0), where we run
(contract §1), and the one function every ``zellij`` call goes through (contract §2.0).

``Zellij.call`` is the only way the backend talks to Zellij: long flags only (the short ones
mean different things per subcommand), ``--session NAME`` before the subcommand (it is not a
global flag), ``--`` before a command, a timeout on every call, and ``ZELLIJ_SESSION_NAME`` /
``ZELLIJ_PANE_ID`` removed from the environment unless the call targets the caller's own
session (a stale name makes the CLI retry forever; a foreign pane id is read as a pane of the
target session). Failures become ``BackendError`` with the SPEC §7 codes, carrying stderr.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from zellij_swarm import external, names
from zellij_swarm.backends.base import alive_unless_gone
from zellij_swarm.config.swarmfile import unencodable
from zellij_swarm.exc import BackendError

CALL_TIMEOUT = 10.0
SETTLE = 5.0  # seconds a server not listed live may run on before it counts as live (session_live)
TESTED = ((0, 40, 0), (0, 45, 99))  # versions outside are reported as untested
# Run by the tests against a real binary built from its crate (scripts/zellij-versions); the
# others of the range are covered by the contract and the fake only.
VERIFIED_REAL = ("0.43.1", "0.45.0")
FAKE_MARK = "fake-zellij"  # in the path of the test fake (scripts/fake-zellij/zellij)
_VERSION = re.compile(r"^zellij (\d+)\.(\d+)\.(\d+)")
_PANE_ID = re.compile(r"^terminal_(\d+)$")
_NO_SESSION = ("Session '", "Please specify the session name", "There is no active session")

# capability -> first version that has it (contract §0)
_SINCE: dict[str, tuple[int, int, int]] = {
    "list_clients": (0, 40, 1),
    "new_session_with_layout": (0, 41, 0),
    "stacked": (0, 43, 0),
    "pane_ids": (0, 44, 0),  # run/new-pane print terminal_N; new-tab prints the tab id
    "pane_id_target": (0, 44, 0),  # --pane-id on close-pane, rename-pane, …
    "list_panes": (0, 44, 0),
    "rename_tab_by_id": (0, 44, 0),  # action rename-tab-by-id ID NAME (with list-tabs, go-to-tab-by-id)
    "detached_actions": (0, 44, 0),  # run/new-pane place panes in a session with no client
    "monotonic_ids": (0, 44, 0),
    "near_current_pane": (0, 44, 0),  # run/new-pane next to $ZELLIJ_PANE_ID, without focus
    "tab_id": (0, 44, 1),  # run/new-pane --tab-id
    "layout_string": (0, 44, 1),
    "no_focus": (0, 45, 0),
    "contract_dir": (0, 44, 0),  # sockets in <socket dir>/contract_version_1/, not <socket dir>/<version>/
}


def parse_version(text: str) -> tuple[int, int, int] | None:
    """``(major, minor, patch)`` from ``zellij --version`` output, or None."""
    m = _VERSION.match(text.strip())
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def capabilities(version_string: str) -> dict[str, Any]:
    """What a Zellij version can do, from its ``--version`` text (``"zellij 0.44.3"``) or a
    bare ``"0.44.3"``. Unknown text: every capability off and ``version`` None."""
    text = version_string.strip()
    v = parse_version(text if text.startswith("zellij ") else f"zellij {text}")
    caps: dict[str, Any] = {name: bool(v and v >= since) for name, since in _SINCE.items()}
    caps["version"] = ".".join(map(str, v)) if v else None
    caps["tested"] = bool(v and TESTED[0] <= v <= TESTED[1])
    return caps


def detect(env: Mapping[str, str], *, timeout: float = 5.0) -> dict[str, Any]:
    """For ``doctor``: the binary, its version and capabilities, and whether we run inside a
    session. Never raises; ``error`` says what went wrong."""
    binary = shutil.which("zellij", path=env.get("PATH"))
    out: dict[str, Any] = {
        "binary": binary, "version": None, "capabilities": None, "tested": False, "error": None,
        "verified_on_real": False, "fake": False,
        "inside_session": "ZELLIJ" in env, "session": env.get("ZELLIJ_SESSION_NAME") or None,
        "pane_id": env.get("ZELLIJ_PANE_ID") or None,
    }
    if binary is None:
        out["error"] = "no zellij binary on PATH"
        return out
    try:
        res = external.run([binary, "--version"], timeout=timeout, env=scrubbed(env))
    except BackendError as e:
        out["error"] = str(e)
        return out
    caps = capabilities(res.stdout)
    if caps["version"] is None:
        out["error"] = f"cannot read the version from {res.stdout.strip()!r}"
        return out
    out.update(version=caps["version"], capabilities=caps, tested=caps["tested"],
               verified_on_real=caps["version"] in VERIFIED_REAL, fake=FAKE_MARK in os.path.realpath(binary))
    return out


def scrubbed(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k not in ("ZELLIJ_SESSION_NAME", "ZELLIJ_PANE_ID")}


def readable(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` without the variables whose name or value is not UTF-8 (bytes ``os.environ``
    holds as lone surrogates): Zellij, which reads its environment as Rust strings, dies of
    them — a session started with one died as it started (the real 0.45.0, here), and the run
    went headless. Every call of ``Zellij`` gets this environment, and so does a client that
    may start a server (``zellij_attach``; ``--version`` reads none); the workers in its panes
    get the caller's whole, as every pane does, from the run's saved copy (``envfile``)."""
    return {k: v for k, v in env.items() if unencodable(k) is None and unencodable(v) is None}


def pane_number(pane_id: str) -> int | None:
    m = _PANE_ID.match(pane_id)
    return int(m.group(1)) if m else None


@dataclass(frozen=True)
class SessionRow:
    name: str
    live: bool


def parse_ls(stdout: str) -> dict[str, SessionRow]:
    """``zellij ls -n`` rows (contract §2.2): name before `` [Created ``, EXITED = dead."""
    rows: dict[str, SessionRow] = {}
    for line in stdout.splitlines():
        if " [Created " not in line:
            continue
        name = line.split(" [Created ", 1)[0]
        rows[name] = SessionRow(name, "(EXITED - attach to resurrect)" not in line)
    return rows


# bytes: a Unix socket's path (``sun_path``: 108 with its NUL); 0.45.0 checks it as it makes a
# session ("the IPC socket path is too long (111 bytes, max 107)"), earlier ones fail to bind it
SOCKET_PATH_MAX = 107


def caller_session(env: Mapping[str, str]) -> str | None:
    """The Zellij session the caller runs in: ``ZELLIJ_SESSION_NAME`` where ``ZELLIJ`` says the
    environment is a Zellij pane's. A name without it (kept by ``sudo -E`` or an ``env`` that
    dropped the other) puts the caller in no session."""
    return (env.get("ZELLIJ_SESSION_NAME") or None) if "ZELLIJ" in env else None


def run_session(chosen: str | None, own: str | None, run_id: str, live: Callable[[str], bool]) -> tuple[str, bool]:
    """The session a run's panes go to: ``chosen`` (``--session``), else ``own``, the one the
    run starts in, else the run's own, ``swarm-<run id>`` — also when ``own`` is stale, a shell
    that outlived its session (then the second value is True). ``live`` tells whether a
    session is live (``Zellij.live_in``: one ``ls`` for every name asked)."""
    stale = bool(own) and not chosen and not live(own or "")
    return chosen or (None if stale else own) or names.session(run_id), stale


class Zellij:
    """The zellij CLI for one target session. Calls run one at a time, on the caller's thread."""

    def __init__(self, env: Mapping[str, str], *, timeout: float = CALL_TIMEOUT) -> None:
        self.env = readable(env)
        self.timeout = timeout
        self.session: str | None = None
        self.own = caller_session(env)
        self.ls_error: BackendError | None = None  # the last ``ls`` that gave no answer (``listed_live``)
        # The first call to the session that got no answer in its time: every later one fails
        # with it at once (as tmux_client's does). A server stopped or stuck would cost each its
        # whole timeout — a Ctrl-C, closing the panes one by one, would take ten seconds a pane.
        # ``ls``, which says whether the session lives, is still asked, within PROBE_TIMEOUT.
        self.unresponsive: BackendError | None = None
        self.caps: dict[str, Any] = capabilities("")

    def version(self) -> dict[str, Any]:
        res = self.call("--version", session=False)
        caps = capabilities(res.stdout)
        if caps["version"] is None:
            raise BackendError("pane_call_failed", f"zellij --version printed {res.stdout.strip()!r}")
        self.caps = caps
        return caps

    def has(self, capability: str) -> bool:
        return bool(self.caps.get(capability))

    def call(self, *args: str, cmd: Sequence[str] | None = None, session: bool = True, check: bool = True,
             timeout: float | None = None, top: Sequence[str] = (), from_pane: str | None = None) -> external.CmdResult:
        """``zellij [TOP…] [--session S] ARGS… [-- CMD…]``. ``session=False`` for the session
        commands that name their session themselves (attach, ls, kill-session, …).
        ``from_pane`` (``terminal_7``): the call is made as if from that pane of the target
        session — its ``$ZELLIJ_PANE_ID`` (contract §1), which ``--near-current-pane`` and
        ``--no-focus`` place new panes next to."""
        argv = ["zellij", *top]
        target_own = False
        if session:
            assert self.session, "no target session yet"
            if self.unresponsive is not None:
                raise self.unresponsive
            argv += ["--session", self.session]
            target_own = self.session == self.own
        argv += list(args)
        if cmd is not None:
            argv += ["--", *cmd]
        env = self.env if target_own else scrubbed(self.env)
        if from_pane is not None:
            env = dict(scrubbed(env), ZELLIJ_PANE_ID=str(pane_number(from_pane)))
        limit = timeout or self.timeout
        deadline = time.monotonic() + limit
        give_up = _GiveUp(self, argv) if session else None
        while True:
            try:
                res = external.run(argv, timeout=limit, env=env, check=False, give_up=give_up)
            except BackendError as e:
                if session and e.code == "pane_call_timeout":
                    self.unresponsive = e
                raise
            limit = max(deadline - time.monotonic(), 0.1)
            if not (session and res.stderr.startswith(_NO_SESSION)):
                break
            # contract §2.0: with ≥2 live sessions "not found" even exits 0 (list on stdout). The
            # CLI says so before it sends anything, from a probe of the sockets that a busy
            # server can fail: the real 0.45.0 answered "There is no active session!" to a
            # `run` in the middle of a swarm, its session listed live before and after. Asked
            # again while the session may be live (listed, or its server runs), until the
            # call's deadline.
            if not self.session_live(self.session or "", settle=0) or time.monotonic() > deadline:
                raise BackendError("session_missing", f"zellij: {external.what_it_said(res.stderr)}",
                                   stderr=res.stderr)
            time.sleep(0.05)
        first = external.what_it_said(res.stderr) or f"exit status {res.returncode}"
        if check and res.returncode != 0:
            what = " ".join(a for a in args[:2] if not a.startswith("-"))
            raise BackendError("pane_call_failed", f"zellij {what}: {first}", stderr=res.stderr)
        return res

    def session_live(self, name: str, *, settle: float = SETTLE) -> bool:
        """Whether the session ``name`` is live, false only on evidence of its death: ``ls``
        lists it live; or else its server still runs, and does for ``settle`` seconds (a
        server killed, or ending with its last pane, exits well within them). ``ls`` alone is
        no such evidence: its probe of a busy server can fail (contract §2.0) or outlast our
        call, and a live session taken for dead has its panes' workers recorded lost and run
        again."""
        return alive_unless_gone(lambda: True if self.listed_live(name) else None,
                                 lambda: not self.server_runs(name), settle=settle, every=0.05,
                                 server=self.server_pid(name))

    def live_in(self, rows: Mapping[str, SessionRow], name: str) -> bool:
        """Whether the session ``name`` is live, given one ``ls``'s ``rows``: listed live; or,
        left out of them — as a busy server that failed ``ls``'s probe is (contract §2.2) —
        its server runs and ``session_live`` finds it live. One ``ls`` is no evidence of death."""
        row = rows.get(name)
        return (row is not None and row.live) or (self.server_runs(name) and self.session_live(name))

    def server_runs(self, session: str) -> bool:
        return self.server_pid(session) is not None

    def server_pid(self, session: str) -> int | None:
        """The server of ``session``, when it runs: a process ``zellij --server SOCKET`` of this
        Zellij's socket (``socket_dir``), not a zombie (its command line is empty) — never
        another version's, another user's or another socket directory's of the same name."""
        wanted = os.path.join(self.socket_dir(), session).encode("utf-8", "surrogateescape")
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:  # gone meanwhile, or not ours to read
                continue
            if b"--server" in argv[:-1] and argv[argv.index(b"--server") + 1] == wanted:
                return int(pid)
        return None

    def listed_live(self, name: str) -> bool:
        """Whether ``ls`` lists ``name`` live; False also when it gives no answer (kept in
        ``ls_error`` for a message that has to say why a session was not found)."""
        try:
            row = self.sessions().get(name)
        except BackendError as e:  # no answer
            self.ls_error = e
            return False
        self.ls_error = None
        return row is not None and row.live

    def sessions(self) -> dict[str, SessionRow]:
        res = self.call("list-sessions", "--no-formatting", session=False, check=False,
                        timeout=external.probe_timeout(self.unresponsive, self.timeout))
        if res.returncode not in (0, 1):
            raise BackendError("pane_call_failed", f"zellij list-sessions: exit {res.returncode}", stderr=res.stderr)
        return parse_ls(res.stdout)

    @staticmethod
    def clients(res: external.CmdResult) -> int | None:
        """How many clients ``action list-clients`` lists (contract §2.14): the lines after its
        header; None when it gave no answer — it failed, or printed nothing at all (0.45.0 does,
        exit 0, when the server took more than 1 s, §2.0): that is not "no client"."""
        lines = res.lines
        if res.returncode != 0 or not lines or not lines[0].startswith("CLIENT_ID"):
            return None
        return len(lines) - 1

    def list_panes(self) -> list[dict[str, Any]] | None:
        """``action list-panes --json`` (≥0.44); None when the server did not answer in time."""
        res = self.call("action", "list-panes", "--json", check=False)
        if res.returncode != 0:
            if "Timeout listing panes" in res.stderr or not res.stderr.strip():
                return None
            raise BackendError("pane_call_failed", f"zellij action list-panes: {res.stderr.strip()}", stderr=res.stderr)
        if not res.stdout.strip():
            # No answer, not "no panes" (which is "[]"): the server took more than 1 s, or the
            # real 0.45.0, busy, closed the call at once with nothing (seen about once in 100)
            return None
        try:
            panes = json.loads(res.stdout)
        except ValueError:
            return None
        return panes if isinstance(panes, list) else None

    def socket_dir(self) -> str:
        """Where this Zellij keeps its sessions' sockets (contract §1)."""
        root = self.env.get("ZELLIJ_SOCKET_DIR") or (
            os.path.join(self.env["XDG_RUNTIME_DIR"], "zellij") if self.env.get("XDG_RUNTIME_DIR")
            else os.path.join(self.env.get("TMPDIR") or "/tmp", f"zellij-{os.getuid()}"))
        return os.path.join(root, "contract_version_1" if self.has("contract_dir") else str(self.caps["version"]))

    def socket_too_long(self, session: str) -> str | None:
        """Why a session of this name cannot be made here — its socket's path is longer than a
        Unix socket's may be, which Zellij refuses as ``attach`` makes it — or None."""
        path = os.path.join(self.socket_dir(), session)
        size = len(path.encode("utf-8", "surrogateescape"))
        if size <= SOCKET_PATH_MAX:
            return None
        return (f"zellij {self.caps['version']} would make its socket {path} ({size} bytes), over the "
                f"{SOCKET_PATH_MAX} bytes a socket's path may have")

    def wait_live(self, deadline: float) -> None:
        """Poll ``ls -n`` until our session, just made by ``attach --create-background``, is
        listed as live (contract §6.4). 0.45.0's server now and then panics as it is born
        (contract, Provenance): its socket stays, refusing, until an ``ls`` removes it. A live
        server keeps its socket however busy it is, so a socket seen in the socket directory
        and gone from it since is a dead server: ``session_died``, said at once. One never
        seen there (a directory laid out as we do not know) decides nothing: the deadline does."""
        sockets = self.socket_dir()
        seen = False
        while True:
            try:  # looked at before each ``ls``, which removes a refusing socket
                present = self.session in os.listdir(sockets)
            except OSError:
                present = False
            if seen and not present:
                raise BackendError("session_died", f"zellij session {self.session!r} died as it started")
            seen = seen or present
            if self.listed_live(self.session or ""):  # an ``ls`` with no answer is asked again
                return
            if time.monotonic() > deadline:
                why = f" (zellij ls gave no answer: {self.ls_error.message})" if self.ls_error else ""
                raise BackendError("session_missing", f"zellij session {self.session!r} did not come up{why}")
            time.sleep(0.05)


class _GiveUp:
    """When to stop waiting for a call to our session (``external.run``'s ``give_up``):

    - ``session_missing`` once the session's server is gone: not running, and ``ls`` does not
      list the session live. The real CLI whose server was killed in the middle of its call
      does not end: it spins on the closed socket (seen with 0.45.0), and the swarm would wait
      out the call's timeout before it learnt that its panes' workers were lost.
    - ``pane_call_timeout`` once the server has been stopped a while (``external.StoppedServer``)."""

    def __init__(self, z: Zellij, argv: Sequence[str]) -> None:
        self.z = z
        self.argv = argv
        self.server: int | None = None
        session = z.session or ""
        self.stopped = external.StoppedServer(argv, f"the server of session {session!r}", lambda: self.server)

    def __call__(self) -> BackendError | None:
        session = self.z.session or ""
        self.server = self.z.server_pid(session)
        if self.server is None and not self.z.listed_live(session):
            return BackendError("session_missing", f"zellij: session {session!r} is gone: its server ended while "
                                                   f"{external.what(self.argv)} waited for its answer")
        return self.stopped()
