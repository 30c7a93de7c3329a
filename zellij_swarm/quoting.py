"""One encoder per sink: every string that leaves the program for a shell, tmux, a Zellij
layout or the user's terminal goes through exactly one function of this module, chosen by
where it goes — never by what it looks like. Task names, commands, cwds and the state
directory are all data, whatever characters they hold.

- **a shell** (``sh`` reads it): ``shell_word`` for one word, ``shell_line`` for a command
  line (``shlex``: single quotes, ``'`` as ``'\\''``); ``parallel_word`` for a word of a
  command built from a template as GNU parallel builds it (``run TEMPLATE ::: ARGS``: the same
  text parallel would run); ``sh_double_quoted`` for text inside ``"…"``.
- **a tmux argument** (any argument of a tmux command, even passed as argv): ``tmux_arg``.
  tmux's command parser takes an argument *ending* in ``;`` as the end of a command and drops
  the ``;`` (so a path ending in ``;`` lost it, or split the command); ``\\;`` keeps it.
- **tmux formats**, two sinks (tmux 3.3a, checked against the real one):

  - text tmux format-expands once — the command of ``pipe-pane``, the ``-s`` and ``-n`` names
    of new sessions and windows: ``tmux_expanded``. Left alone, ``#{pane_id}`` in a log path
    expanded into another file name and ``#(cmd)`` ran ``cmd``. Each ``#`` is doubled, except
    a run of ``#`` right before ``[``, which expansion keeps as it is (for styles).
    A shell command that tmux expands is encoded for the shell first, then for tmux.
  - text tmux draws through a format — a pane title shown by ``pane-border-format``:
    ``tmux_drawn`` doubles every ``#``; drawing shows ``##`` as ``#``, so ``#[fg=red]`` cannot
    restyle the border.
- **a KDL layout**: ``kdl_text``, ckdl's KDL v1 emitter (Zellij reads KDL v1; ``json.dumps``
  is not a KDL quoter), checked by parsing the text back.
- **the user's terminal**: ``terminal_text``, for every task-provided string shown on a
  terminal — board and slot views, pane titles, progress and end-of-task lines, ``status`` and
  ``ls``, error messages. Raw task data there could move the cursor, retitle or recolour the
  terminal, hide text (OSC, CSI, C1 ``\\x9b``), or break a one-line-per-row listing (a newline
  in a ``--name``). Each character that could do that is shown as an escape a reader can
  type back:

  - ``\\n``, ``\\r``, ``\\t`` for newline, carriage return and tab;
  - ``\\xNN`` for the other C0 controls (ESC is ``\\x1b``, BEL ``\\x07``), DEL and the C1
    controls U+0080–U+009F;
  - ``\\uNNNN`` for the Unicode line and paragraph separators, the bidirectional controls that
    reorder what is shown (U+061C, U+200E/F, U+202A–E, U+2066–9), and lone surrogates (JSON
    can hold them; printing one raises ``UnicodeEncodeError``).

  Everything else, backslashes and non-ASCII text included, is shown as it is, so an
  ordinary name is unchanged (and ``a\\nb`` typed with a backslash looks like a newline
  escape: the display is for people; ``--json`` and the records keep the exact text).
  Output logs, ``logs`` and the task output that ``--output group|tag`` copies are the task's
  own bytes and never pass through here.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import ckdl

_UNSHOWABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_HASH_NOT_STYLE = re.compile(r"#(?!#*\[)")


def shell_word(text: str) -> str:
    """``text`` as one ``sh`` word."""
    return shlex.quote(text)


def shell_line(argv: Iterable[str]) -> str:
    """``argv`` as one ``sh`` command line that runs exactly that argv."""
    return shlex.join(argv)


def positional_line(words: Iterable[str]) -> str:
    """Positional arguments of one of our commands as ``sh`` words, after ``--`` when one of
    them begins with ``-`` (a task named ``-x`` is no option)."""
    words = list(words)
    line = shlex.join(words)
    return f"-- {line}" if any(w.startswith("-") for w in words) else line


def task_word(name: str, task_id: str) -> str:
    """How a command a hint offers names a task: by its name — or, when that holds what a
    terminal cannot show as typed (an escape, a newline: shown escaped, the line would name
    no task), by its id, which every command takes as well."""
    return name if name.isprintable() else task_id


def tmux_arg(text: str) -> str:
    """``text`` as one argument of a tmux command (argv or a ``;``-chained command line)."""
    return text[:-1] + "\\;" if text.endswith(";") else text


def tmux_expanded(text: str) -> str:
    """``text`` where tmux format-expands it, so that the expansion yields ``text`` itself."""
    return _HASH_NOT_STYLE.sub("##", text)


def tmux_time_expanded(text: str) -> str:
    """``text`` where tmux runs ``strftime`` over it and then format-expands it (``pipe-pane``,
    ``display-message``), so that both yield ``text`` itself: a ``%d`` in a state directory's
    path would otherwise become the day of the month and the output go to another file."""
    return tmux_expanded(text).replace("%", "%%")


def tmux_drawn(text: str) -> str:
    """``text`` where tmux draws it through a format (a pane title), so that it shows as is."""
    return text.replace("#", "##")


def kdl_text(root: ckdl.Node) -> str:
    """The KDL v1 text of a one-node document, valid KDL v1 (parsed back, or ``ckdl`` raises)."""
    import ckdl  # here: only a Zellij layout needs it, and a headless run has 0.4 MB less

    text: str = ckdl.Document(root).dump(ckdl.EmitterOptions(version=1))
    ckdl.parse(text, version=1)
    return text


def terminal_text(text: object) -> str:
    """``text`` safe to show on a terminal, on one line (see the module docstring)."""
    s = str(text)
    return s if s.isprintable() else _UNSHOWABLE.sub(_visible, s)


def _visible(m: re.Match[str]) -> str:
    ch = m.group()
    code = ord(ch)
    return _NAMED.get(ch) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


_PARALLEL_PLAIN = re.compile(r"[-_.+a-zA-Z0-9/]+")
_DOUBLE_QUOTED_SPECIAL = re.compile(r'([\\"$`])')


def parallel_word(value: str) -> str:
    """``value`` as one ``sh`` word, exactly as GNU parallel's ``Q()`` writes it: as it is
    when it is plain, else in single quotes, a ``'`` as ``'"'"'``, without empty ``''`` at
    either end."""
    if _PARALLEL_PLAIN.fullmatch(value):
        return value
    if not value:
        return "''"
    quoted = "'" + value.replace("'", "'\"'\"'") + "'"
    return quoted.removeprefix("''").removesuffix("''")


def sh_double_quoted(text: str) -> str:
    """``text`` to put between ``"`` and ``"`` in ``sh``: ``\\``, ``"``, ``$`` and a backquote
    escaped, so it stays literal."""
    return _DOUBLE_QUOTED_SPECIAL.sub(r"\\\1", text)
