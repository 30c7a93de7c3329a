"""Transcripts of the Zellij CLI forms the backend uses (docs/zellij-contract.md, "Provenance"):
what the real Zellij answered (scripts/record-zellij-transcripts records them under
tests/zellij-transcripts/<version>/<form>.json) and the machinery that plays one against an
installation — the real binary (``RealInstall``) or the fake (``FakeInstall``) — so that
tests/test_zellij_transcripts.py can hold the fake to what the real one did.

A transcript is ``{"version", "form", "about", "files", "fake_faults", "steps"}``. ``files``
are written into the installation's root first (the layouts the steps load). A step is one
of:

- ``{"argv": [...], "env": {...}, "exit", "stdout", "stderr"}`` — a recorded call: ``zellij
  ARGV…`` with the installation's environment plus ``env``; ``exit`` is None when it did not
  answer within ``timeout`` seconds (default ``CALL_TIMEOUT``);
- ``{"argv": [...], "until": [...]}`` — set-up: the call is repeated until its stdout holds
  every string (Zellij builds a session's panes after ``attach`` returned, contract §6.4);
  ``"until_not"`` waits for strings to go;
- ``{"client": NAME}`` — a client attaches to session NAME: on the real Zellij ``zellij attach
  NAME`` on a terminal of a private tmux server, on the fake ``__fake-attach``;
- ``{"detach": NAME}`` — that client goes: its tmux session is killed (the fake:
  ``__fake-detach``), and the step ends once ``list-clients`` lists none.

``fake_faults`` (``FAKE_ZELLIJ_FAULTS``) opens on the fake a window the real one shows only
by racing it: ``init_delay_ms`` for a call made right after ``attach --create-background``.

Everything in stdout and stderr that differs between two runs of the same steps is
normalised (``normalise``): the installation's root directory, session ages, and pane
geometry — which the fake does not model exactly (contract §5.8). Pane ids, tab ids, client
ids and session names are fixed by the steps themselves, so they are kept as they are."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from realzellij import RealZellij
from tmuxtest import Tmux, private_tmux
from zellijtest import FakeZellij

REPO = Path(__file__).resolve().parent.parent
TRANSCRIPTS = REPO / "tests" / "zellij-transcripts"
CALL_TIMEOUT = 10.0
WAIT_TIMEOUT = 30.0
ROOT = "<root>"

_AGE = re.compile(r"\[Created (?:\x1b\[35;1m)?[^\]\x1b]*?(?:\x1b\[m)? ago\]")
_GEOMETRY = re.compile(r'("(?:pane_x|pane_content_x|pane_y|pane_content_y|pane_rows|pane_content_rows|'
                       r'pane_columns|pane_content_columns)": )\d+')
_CURSOR = re.compile(r'("cursor_coordinates_in_pane": )(?:null|\[[^\]]*\])')


def normalise(text: str, root: str) -> str:
    """What may differ between two runs of the same steps, replaced by a placeholder."""
    text = text.replace(os.path.realpath(root), ROOT).replace(root, ROOT)
    text = _AGE.sub("[Created <age> ago]", text)
    text = _GEOMETRY.sub(r"\1<n>", text)
    return _CURSOR.sub(r"\1<cursor>", text)


class RealInstall:
    """The real Zellij of ``version``, private (tests/realzellij.py), with clients in tmux."""

    def __init__(self, version: str, tmux: Tmux) -> None:
        self.rz = RealZellij(version)
        self.tmux = tmux
        self.root = str(self.rz.root)
        self.env = self.rz.base

    def attach_client(self, session: str) -> None:
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items())
        self.tmux("new-session", "-d", "-s", f"client-{session}", "-x", "200", "-y", "50",
                  f"env -i {env} {shlex.quote(str(self.rz.binary))} attach {shlex.quote(session)}")
        _wait(lambda: _clients(self, session) > 0, lambda: f"a client attached to {session}")

    def detach_client(self, session: str) -> None:
        self.tmux("kill-session", "-t", f"client-{session}")
        _wait(lambda: _clients(self, session) == 0, lambda: f"the client of {session} gone")

    def call(self, argv: list[str], env: dict[str, str] | None = None,
             timeout: float = CALL_TIMEOUT) -> tuple[int | None, str, str]:
        return _run([str(self.rz.binary), *argv], dict(self.env, **(env or {})), self.root, timeout)

    def cleanup(self) -> None:
        self.rz.cleanup()


class FakeInstall:
    """The fake ``zellij`` (scripts/fake-zellij) at ``version``, private (tests/zellijtest.py)."""

    def __init__(self, version: str, faults: str = "") -> None:
        self.fz = FakeZellij()
        self.root = str(self.fz.root)
        self.env = self.fz.env(version, faults=faults)

    def attach_client(self, session: str) -> None:
        rc, _, err = self.call(["__fake-attach", session])
        assert rc == 0, err

    def detach_client(self, session: str) -> None:
        rc, _, err = self.call(["__fake-detach", session])
        assert rc == 0, err
        _wait(lambda: _clients(self, session) == 0, lambda: f"the client of {session} gone")

    def call(self, argv: list[str], env: dict[str, str] | None = None,
             timeout: float = CALL_TIMEOUT) -> tuple[int | None, str, str]:
        return _run(["zellij", *argv], dict(self.env, **(env or {})), self.root, timeout)

    def cleanup(self) -> None:
        self.fz.cleanup()


def _clients(install: RealInstall | FakeInstall, session: str) -> int:
    """How many clients ``list-clients`` lists (-1: it gave no answer)."""
    lines = install.call(["--session", session, "action", "list-clients"])[1].splitlines()
    return len(lines) - 1 if lines and lines[0].startswith("CLIENT_ID") else -1


def _run(argv: list[str], env: dict[str, str], cwd: str, timeout: float) -> tuple[int | None, str, str]:
    try:
        p = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                           timeout=timeout)
    except subprocess.TimeoutExpired as e:
        def text(b: bytes | str | None) -> str:
            return b.decode() if isinstance(b, bytes) else b or ""
        return None, text(e.stdout), text(e.stderr)
    return p.returncode, p.stdout, p.stderr


def _wait(ready: Callable[[], bool], what: Callable[[], str]) -> None:
    deadline = time.monotonic() + WAIT_TIMEOUT
    while not ready():
        assert time.monotonic() < deadline, f"timed out waiting for {what()}"
        time.sleep(0.05)


def _fill(argv: list[str], root: str) -> list[str]:
    return [a.replace(ROOT, root) for a in argv]


def _await(install: RealInstall | FakeInstall, argv: list[str], env: dict[str, str], step: dict[str, Any]) -> None:
    """Repeat a set-up call until its stdout holds every ``until`` string and no ``until_not`` one."""
    last = ""

    def ready() -> bool:
        nonlocal last
        last = install.call(argv, env)[1]
        return all(s in last for s in step.get("until", ())) and not any(s in last for s in step.get("until_not", ()))

    _wait(ready, lambda: f"zellij {shlex.join(argv)} to show {step.get('until')} and not {step.get('until_not')}; "
                         f"it last printed {last!r}")


def play(transcript: dict[str, Any], install: RealInstall | FakeInstall) -> list[dict[str, Any]]:
    """Run a transcript's steps on ``install``; the recorded steps with what this installation
    answered (normalised), in the transcript's shape."""
    for name, text in transcript.get("files", {}).items():
        Path(install.root, name).write_text(text)
    out: list[dict[str, Any]] = []
    for step in transcript["steps"]:
        if "client" in step:
            install.attach_client(step["client"])
            out.append({"client": step["client"]})
            continue
        if "detach" in step:
            install.detach_client(step["detach"])
            out.append({"detach": step["detach"]})
            continue
        argv = _fill(step["argv"], install.root)
        env = step.get("env") or {}
        if "until" in step or "until_not" in step:
            _await(install, argv, env, step)
            out.append(dict(step))
            continue
        rc, stdout, stderr = install.call(argv, env, step.get("timeout", CALL_TIMEOUT))
        done = {k: v for k, v in step.items() if k not in ("exit", "stdout", "stderr")}
        done.update(exit=rc, stdout=normalise(stdout, install.root), stderr=normalise(stderr, install.root))
        out.append(done)
    return out


@contextmanager
def real(version: str) -> Iterator[RealInstall]:
    """A private real Zellij with its own tmux server for clients; everything ends with it."""
    with private_tmux() as tmux:
        install = RealInstall(version, tmux)
        try:
            yield install
        finally:
            install.cleanup()


@contextmanager
def fake(version: str, faults: str = "") -> Iterator[FakeInstall]:
    install = FakeInstall(version, faults)
    try:
        yield install
    finally:
        install.cleanup()
