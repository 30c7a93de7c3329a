"""A Zellij client on this terminal, attached again when Zellij dropped it as it attached.

Zellij 0.45 may drop an interactive client 3 ms after it connects: it gave the client the id of
a CLI client it was still removing (contract §6.19). The client prints a message that blames a
slow terminal and exits 0; the session is untouched. The only trace apart from the screen is
Zellij's own log, where the client writes the same reason with the session named in its tip.

So the client runs as our child, and when it ends within ``DROPPED_WITHIN`` of its start, we
read what Zellij's log gained meanwhile: if it says this session's client lost its connection
and the session is still live, we attach again, at most ``REATTACHES`` times, and say so on
stderr. Otherwise — a detach, a quit, another session's client dropped, a client that lived
longer than a drop at its attach takes — we end as the client did, with its status.

``zellij-swarm attach`` calls ``attach``; ``run --attach`` outside Zellij runs this module
(``python -m zellij_swarm.backends.zellij_attach SESSION``) as its client.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping

from zellij_swarm import exc, quoting
from zellij_swarm.backends.zellij_cli import CALL_TIMEOUT, Zellij, readable

REATTACHES = 3
# A client dropped as it attached ends within milliseconds; one that ends later was detached or
# quit by its user — even if another client of the session was dropped meanwhile, and logged so
DROPPED_WITHIN = 2.0
_DROPPED = b"Your zellij client lost connection to the zellij server."
_TIP_WITHIN = 1024  # bytes from that line to its tip, which names the session
_LOG_TAIL = 1 << 20  # what Zellij's log may gain while one client runs, read at most


def attach(session: str, env: Mapping[str, str]) -> int:
    """Be ``session``'s client on this terminal until it ends; return its exit status."""
    argv = ["zellij", "attach", session]
    env = readable(env)  # (a client may start the session's server again: it would die of the rest)
    log = log_file(env)
    for again in range(REATTACHES + 1):
        mark, began = _size(log), time.monotonic()
        code = _client(argv, env)
        if code != 0 or again == REATTACHES or time.monotonic() - began > DROPPED_WITHIN \
                or not dropped_as_attached(_grown(log, mark), session) or not _live(session, env):
            return code
        print(f"zellij-swarm: zellij dropped this client as it attached (a zellij race with another "
              f"zellij call, not your terminal); attaching to {quoting.terminal_text(session)} again",
              file=sys.stderr)
    return code


def log_file(env: Mapping[str, str]) -> str:
    """Zellij's log, which its clients and servers share: Rust's ``temp_dir()`` is
    ``$TMPDIR``, else ``/tmp``."""
    return os.path.join(env.get("TMPDIR") or "/tmp", f"zellij-{os.getuid()}", "zellij-log", "zellij.log")


def dropped_as_attached(log_tail: bytes, session: str) -> bool:
    """Whether ``log_tail`` says a client of ``session`` lost its connection: the line that
    blames a slow terminal, followed by a tip that names this session."""
    tip = b"`zellij attach " + session.encode() + b"`"
    at = log_tail.find(_DROPPED)
    while at >= 0:
        if tip in log_tail[at:at + _TIP_WITHIN]:
            return True
        at = log_tail.find(_DROPPED, at + 1)
    return False


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _grown(path: str, mark: int) -> bytes:
    """What ``path`` gained past ``mark`` (all of it if it was rolled over and began again),
    its last ``_LOG_TAIL`` bytes at most."""
    try:
        with open(path, "rb") as fh:
            end = fh.seek(0, os.SEEK_END)
            fh.seek(max(mark if end >= mark else 0, end - _LOG_TAIL))
            return fh.read()
    except OSError:
        return b""


def _live(session: str, env: Mapping[str, str]) -> bool:
    """Whether ``session`` lives, by evidence (``Zellij.live_in``): a busy server left out of
    one ``ls`` is attached again all the same. False when Zellij does not answer at all."""
    z = Zellij(env, timeout=CALL_TIMEOUT)
    try:
        z.version()  # its socket directory, where its server is looked for, depends on it
        return z.live_in(z.sessions(), session)
    except exc.BackendError:
        return False


def _client(argv: list[str], env: Mapping[str, str]) -> int:
    """Run the client on this terminal and wait for it. Meanwhile the terminal's INT and QUIT
    are ignored here (they are the client's keys, and reach it too), and a TERM or HUP sent to
    us is passed on to it, as if it were this process."""
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        child = subprocess.Popen(argv, env=dict(env))
    except OSError as e:
        raise exc.SwarmError(f"cannot run {quoting.shell_line(argv)}: {e.strerror}") from None
    before = {sig: signal.signal(sig, lambda number, _frame: child.send_signal(number))
              for sig in (signal.SIGTERM, signal.SIGHUP)}
    before |= {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGQUIT)}
    try:
        code = child.wait()
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
    return code if code >= 0 else 128 - code


def main(argv: list[str]) -> None:
    if len(argv) != 2:
        sys.exit(f"usage: {argv[0]} SESSION")
    try:
        sys.exit(attach(argv[1], os.environ))
    except exc.SwarmError as e:
        sys.exit(f"zellij-swarm: error: {e}")


if __name__ == "__main__":
    main(sys.argv)
