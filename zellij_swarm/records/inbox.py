"""The control inbox: how ``cancel``, ``add`` and follow-ups reach a running supervisor.

A sender writes one JSON file into ``inbox/`` atomically (temp name, then rename), so the
supervisor never reads half a message. The supervisor applies each message once and then
moves it to ``inbox/consumed/`` under the same name, which is also its id: a message id in
``consumed/`` (or named in the event log) is never applied again, also after a resume. A
sender that needs an answer (``add``) waits for ``inbox/replies/<id>``.
"""

from __future__ import annotations

import json
import os
import select
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from zellij_swarm import jsontext
from zellij_swarm.records.rundir import RunPaths, make_private_dir, open_record, write_atomic


@dataclass(frozen=True)
class Message:
    id: str
    body: dict[str, Any]


def send(run: RunPaths, kind: str, **body: Any) -> str:
    """Post a message; returns its id."""
    msg_id = f"{time.time_ns():020d}-{os.urandom(4).hex()}.json"
    write_atomic(run.inbox / msg_id, json.dumps({"kind": kind, **body}) + "\n")
    return msg_id


def pending(run: RunPaths) -> list[Message]:
    """Messages not yet consumed, oldest first. Unreadable ones come back with an ``error``."""
    try:
        names = sorted(n for n in os.listdir(run.inbox) if n.endswith(".json") and not n.startswith("."))
    except FileNotFoundError:
        return []
    out = []
    for name in names:
        path = run.inbox / name
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            with os.fdopen(fd, "rb") as f:
                st = os.fstat(f.fileno())
                if st.st_uid != os.geteuid() or st.st_mode & 0o022:  # the run dir's trust rule
                    raise ValueError(f"not written by you (uid {st.st_uid}, mode {st.st_mode & 0o777:04o}); ignored")
                body = jsontext.loads(f.read())
            if not isinstance(body, dict):
                raise ValueError("not a JSON object")
        except FileNotFoundError:
            continue
        except (OSError, ValueError) as e:
            body = {"kind": "invalid", "error": str(e)}
        out.append(Message(name, body))
    return out


def consume(run: RunPaths, msg: Message) -> None:
    try:
        os.replace(run.inbox / msg.id, run.consumed / msg.id)
    except FileNotFoundError:
        pass


def make_dirs(run: RunPaths) -> None:
    make_private_dir(run.consumed)
    make_private_dir(run.replies)


def reply(run: RunPaths, msg: Message, body: dict[str, Any]) -> None:
    """The supervisor's answer to a message (``cancel``, ``add``). A reply that cannot be
    written (a full disk) is not fatal to the run: its sender stops waiting at its deadline."""
    try:
        make_private_dir(run.replies)
        write_atomic(run.replies / msg.id, json.dumps(body) + "\n")
    except OSError:
        pass


def withdraw(run: RunPaths, msg_id: str) -> bool:
    """Take back a message nobody has read (its run ended first); False if it was taken."""
    try:
        os.unlink(run.inbox / msg_id)
        return True
    except FileNotFoundError:
        return False


def await_reply(run: RunPaths, msg_id: str, *, timeout: float,
                still_running: Callable[[], bool]) -> dict[str, Any] | None:
    """Wait for the supervisor's reply to ``msg_id`` (file events, with a deadline). None if
    the supervisor ended or did not answer in time (a reply that is not a JSON object is none)."""
    from zellij_swarm.watch import Inotify

    make_private_dir(run.replies)
    path = run.replies / msg_id
    watcher = Inotify()
    try:
        try:
            watcher.add(run.replies)
        except OSError:
            pass  # no watch to be had: the look below every 0.5 s finds the reply all the same
        deadline = time.monotonic() + timeout
        while True:
            try:
                with os.fdopen(open_record(path), "rb") as f:
                    answer = jsontext.loads(f.read())
                return answer if isinstance(answer, dict) else None
            except FileNotFoundError:
                pass
            left = deadline - time.monotonic()
            if left <= 0 or not still_running():
                return None
            select.select([watcher.fileno()], [], [], min(left, 0.5))
            watcher.read()
    finally:
        watcher.close()
