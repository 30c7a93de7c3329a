"""Shared helpers of the fake zellij: versions, paths, faults, wire protocol."""
from __future__ import annotations

import json
import os
import re
import socket
import time

DEFAULT_VERSION = "0.45.0"
SOCK_MAX = 108  # sun_path size on Linux (107 usable bytes + NUL)
# `--server`'s exit status when it dies of its environment before it forks (Rust's for a panic)
SERVER_DIED_OF_ITS_ENVIRONMENT = 101


class UsageError(Exception):
    """A clap-level usage error: `error: ...` on stderr, exit 2."""


def parse_version(text: str) -> tuple[int, int, int]:
    m = re.match(r"^\s*v?(\d+)\.(\d+)\.(\d+)", text or "")
    if not m:
        raise SystemExit(f"fake zellij: bad FAKE_ZELLIJ_VERSION {text!r}")
    return (int(m.group(1)), int(m.group(2)), int(m.group(3)))


def version_string(env=None) -> str:
    env = os.environ if env is None else env
    return env.get("FAKE_ZELLIJ_VERSION") or DEFAULT_VERSION


def version_dir_name(ver_str: str) -> str:
    return "contract_version_1" if parse_version(ver_str) >= (0, 44, 0) else ver_str


def socket_root(env=None) -> str:
    env = os.environ if env is None else env
    d = env.get("ZELLIJ_SOCKET_DIR")
    if d:
        return d
    xdg = env.get("XDG_RUNTIME_DIR")
    if xdg:
        return os.path.join(xdg, "zellij")
    tmp = env.get("TMPDIR") or "/tmp"
    return os.path.join(tmp, f"zellij-{os.getuid()}")


def socket_dir(ver_str: str, env=None) -> str:
    return os.path.join(socket_root(env), version_dir_name(ver_str))


def state_root(env=None) -> str:
    env = os.environ if env is None else env
    return env.get("FAKE_ZELLIJ_STATE_DIR") or os.path.join(socket_root(env), ".fake")


def session_info_dir(ver_str: str, env=None) -> str:
    return os.path.join(state_root(env), version_dir_name(ver_str), "session_info")


def log_path(env=None) -> str:
    env = os.environ if env is None else env
    return env.get("FAKE_ZELLIJ_LOG") or os.path.join(state_root(env), "invocations.jsonl")


# --------------------------------------------------------------------------- faults

DEFAULT_KILL_DELAY_MS = 250  # how long a killed server lingers before it exits (§2.4)


def fault_text(env=None) -> str:
    """FAKE_ZELLIJ_FAULTS plus the contents of FAKE_ZELLIJ_FAULTS_FILE (read at every
    invocation, so a test can change faults while a run is going on)."""
    env = os.environ if env is None else env
    parts = [env.get("FAKE_ZELLIJ_FAULTS") or ""]
    path = env.get("FAKE_ZELLIJ_FAULTS_FILE")
    if path:
        try:
            with open(path, encoding="utf-8") as fh:
                parts.append(fh.read().replace("\n", ","))
        except OSError:
            pass
    return ",".join(p for p in parts if p.strip())


def pid_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return False
    return stat[stat.rindex(b")") + 2:][:1] not in (b"Z", b"X")

def parse_faults(text: str | None) -> dict:
    """FAKE_ZELLIJ_FAULTS: items separated by ',' or ';'.

    silent_new_pane | no_hang | init_delay_ms=N | action_delay_ms=N | birth_panics=N |
    layout_delay_ms=N (new-tab --layout: its panes listed, the clients moved, N ms after it
    answers) | fail:<subcmd>:<rc>:<text> | hang:<subcmd> | unprobed:<session> (``ls`` does
    not list that live session live)
    """
    faults: dict = {"fail": {}, "hang": set(), "unprobed": set()}
    if not text:
        return faults
    for item in re.split(r"[;,]", text):
        item = item.strip()
        if not item:
            continue
        if item.startswith("fail:"):
            parts = item.split(":", 3)
            if len(parts) < 3:
                continue
            sub = parts[1]
            try:
                rc = int(parts[2])
            except ValueError:
                rc = 1
            msg = parts[3] if len(parts) > 3 else ""
            faults["fail"][sub] = (rc, msg)
        elif item.startswith("hang:"):
            faults["hang"].add(item[5:])
        elif item.startswith("unprobed:"):
            faults["unprobed"].add(item[len("unprobed:"):])
        elif "=" in item:
            k, v = item.split("=", 1)
            try:
                faults[k.strip()] = int(v)
            except ValueError:
                faults[k.strip()] = v
        else:
            faults[item] = True
    return faults


def server_faults(faults: dict) -> dict:
    """The faults a server is told of: not those only its CLI acts on."""
    return {k: v for k, v in faults.items() if k not in ("fail", "hang", "unprobed")}


# --------------------------------------------------------------------------- wire protocol

def send_msg(sock: socket.socket, obj) -> None:
    sock.sendall(json.dumps(obj).encode() + b"\n")


def recv_msg(sock: socket.socket):
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = sock.recv(65536)
        if not chunk:
            break
        buf += chunk
    if not buf.strip():
        return None
    return json.loads(buf)


def connect(path: str, timeout: float | None = None) -> socket.socket | None:
    """Connect to a session socket; None when it refuses (dead socket)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
    except OSError:
        s.close()
        return None
    s.settimeout(timeout)
    return s


def request(path: str, obj, timeout: float | None = None):
    s = connect(path, timeout)
    if s is None:
        return None
    try:
        send_msg(s, obj)
        return recv_msg(s)
    finally:
        s.close()


# --------------------------------------------------------------------------- formatting

def rust_debug_str(s: str) -> str:
    """Rust `{:?}` for a str."""
    out = ['"']
    for ch in s:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\0":
            out.append("\\0")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{{{ord(ch):x}}}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def humantime(seconds: int) -> str:
    """humantime::format_duration for whole seconds."""
    seconds = max(0, int(seconds))
    if seconds == 0:
        return "0s"
    parts = []
    years, rem = divmod(seconds, 31_557_600)
    months, rem = divmod(rem, 2_630_016)
    days, rem = divmod(rem, 86_400)
    hours, rem = divmod(rem, 3600)
    minutes, secs = divmod(rem, 60)
    for value, one, many in (
        (years, "year", "years"),
        (months, "month", "months"),
        (days, "day", "days"),
        (hours, "h", "h"),
        (minutes, "m", "m"),
        (secs, "s", "s"),
    ):
        if value:
            parts.append(f"{value}{one if value == 1 else many}")
    return " ".join(parts)


def now() -> float:
    return time.time()
