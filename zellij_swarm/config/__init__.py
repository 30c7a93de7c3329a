"""What to run and how: the settings (one table, one precedence rule), swarm files and plain
command lists, and tasks added to a running swarm."""

import re

_INTEGER = re.compile(r"-?[0-9]+")


def ascii_int(text: str) -> int:
    """An integer as a user writes one: ASCII digits, perhaps a minus sign (Python's ``int``
    also takes ``1_0`` and other scripts' digits, ``٤``); ValueError otherwise."""
    if not _INTEGER.fullmatch(text):
        raise ValueError(f"not an integer: {text!r}")
    return int(text)
