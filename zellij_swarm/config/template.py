"""Commands made from a template and arguments, as GNU parallel makes them (SPEC §4):
``run 'pytest {}' ::: tests/*.py``, ``find . -print0 | run -0 --template 'pylint {}' -``.

Every rule is GNU parallel's own (20221122, checked against the real one), not ``os.path``'s:

- ``{}`` is the argument; ``{.}`` drops its last ``.ext`` after the last ``/`` (``a.b.c`` →
  ``a.b``, ``.bashrc`` → empty, ``dir.d/file`` unchanged); ``{/}`` is the basename (``a/`` →
  empty); ``{//}`` the dirname of Perl's ``File::Basename`` (``a.txt`` → ``.``, ``a/`` → ``.``,
  ``/`` → ``/``); ``{/.}`` the basename without extension; ``{#}`` the task's number in input
  order; ``{%}`` the slot it runs in. ``{n}``, ``{n.}``, ``{n/}``, ``{n//}``, ``{n/.}`` (``{-1}``:
  the last) take the argument of the n-th ``:::`` input source; the plain forms take the
  arguments of every source, separated by spaces.
- A template without any replacement string gets `` {}`` appended (``echo ::: a`` runs
  ``echo a``).
- Each value is quoted as parallel's ``Q()`` quotes for a Bourne shell — unless the template's
  first word holds a replacement string (``{} ::: 'ls -l'``): then the values are part of the
  command and go in as they are.
- Several input sources (``::: a b ::: 1 2``) make every combination, the last varying fastest.

One deliberate difference: a ``:::`` argument holding a newline stays one argument, as with
``parallel -0`` (plain ``parallel`` would split it into lines), since the shell has already
told the words apart.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from zellij_swarm import exc, quoting
from zellij_swarm.config import swarmfile

SEPARATOR = ":::"
# parallel's other separators (arguments from files, linked sources): not supported, and an
# error rather than an argument, so that they never run something parallel would not.
_UNSUPPORTED_SEPARATORS = ("::::", ":::+", "::::+")

# Perl's \d and \s on parallel's byte strings are ASCII only: [0-9], and \s includes \v.
_REPLACEMENT = re.compile(r"\{(?:(?P<position>-?[0-9]+)[ \t\n\r\f\v]*)?(?:(?P<counter>[#%])|(?P<part>//|/\.|/|\.|))\}")
_PERL_EXPRESSION = re.compile(r"\{=.*?=\}", re.DOTALL)
# parallel inserts values unquoted when a replacement string is in the template's first word,
# which ends at a blank or "=" (so that in V={} the value stays quoted).
_FIRST_WORD_END = re.compile(r"[ \t\n=]")
# The slot is known only when a generation starts: the command reads it from the wrapper's
# environment (SPEC §5), through eval, so that it lands wherever {%} stood — in single quotes too.
_SLOT = "${ZELLIJ_SWARM_SLOT}"


def refuse_unsupported(words: Iterable[str]) -> None:
    """GNU parallel's separators we do not take (``::::``, ``:::+``) are an error wherever
    they stand, never an argument."""
    for word in words:
        if word in _UNSUPPORTED_SEPARATORS:
            raise exc.UsageError(f"{word} is not supported: give arguments after :::, or read them from a file "
                                 "with --template TEMPLATE FILE")


@dataclass(frozen=True)
class Replacement:
    """One replacement string: ``part`` of the argument (``""``, ``"."``, ``"/"``, ``"//"``,
    ``"/."``) at ``position`` (1-based, negative from the end, ``None``: every source's), or
    the ``counter`` ``#`` or ``%``."""

    part: str = ""
    position: int | None = None
    counter: str | None = None


@dataclass(frozen=True)
class Template:
    pieces: tuple[str | Replacement, ...]  # literal text and replacement strings, in order
    quoted: bool  # whether values are shell-quoted (not when they are the command itself)


def parse(text: str, sources: int) -> Template:
    """The template ``text`` for arguments from ``sources`` input sources."""
    if not text.strip():
        raise exc.UsageError("the template is empty: give the command to run for each argument")
    if _PERL_EXPRESSION.search(text):
        raise exc.UsageError("{= perl expression =} replacement strings are not supported")
    if not _REPLACEMENT.search(text):
        text += " {}"
    matches = list(_REPLACEMENT.finditer(text))
    pieces: list[str | Replacement] = []
    end = 0
    for m in matches:
        position = int(m["position"]) if m["position"] is not None else None
        if position is not None and m["counter"]:
            raise exc.UsageError(f"{m[0]} in the template: {{{m['counter']}}} takes no position")
        if position is not None and not (1 <= abs(position) <= sources):
            count = "is only 1" if sources == 1 else f"are {sources}"
            raise exc.UsageError(f"{m[0]} in the template names input source {position}, but there {count} "
                                 "(::: groups, counted from 1; -1 is the last)")
        pieces += [text[end:m.start()], Replacement(m["part"] or "", position, m["counter"])]
        end = m.end()
    pieces.append(text[end:])
    quoted = _FIRST_WORD_END.search(text, 0, matches[0].start()) is not None
    return Template(tuple(p for p in pieces if p != ""), quoted)


def command(template: Template, arguments: Sequence[str], number: int) -> str:
    """The shell command of task ``number`` (1-based) for ``arguments`` (one per source)."""
    chunks = [""]  # the command's text, split where the slot goes
    for piece in template.pieces:
        if isinstance(piece, str):
            chunks[-1] += piece
        elif piece.counter == "#":
            chunks[-1] += str(number)
        elif piece.counter == "%":
            chunks.append("")
        else:
            values = (_PARTS[piece.part](a) for a in _chosen(arguments, piece.position))
            chunks[-1] += " ".join(quoting.parallel_word(v) if template.quoted else v for v in values)
    if len(chunks) == 1:
        return chunks[0]
    return 'eval "' + _SLOT.join(quoting.sh_double_quoted(c) for c in chunks) + '"'


def _chosen(arguments: Sequence[str], position: int | None) -> Sequence[str]:
    if position is None:
        return arguments
    return [arguments[position - 1 if position > 0 else position]]


def _without_extension(path: str) -> str:
    return re.sub(r"\.[^/.]*\Z", "", path, count=1)


def _basename(path: str) -> str:
    return re.sub(r".*/", "", path, count=1)  # "." stops at a newline, as in Perl


def _dirname(path: str) -> str:
    """Perl's ``File::Basename::dirname`` on Unix (what parallel's ``{//}`` calls)."""
    base, directory = _fileparse(path)
    directory = _strip_trailing_slashes(directory)
    if not base:
        base, directory = _fileparse(directory)
        directory = _strip_trailing_slashes(directory)
    return directory


def _fileparse(path: str) -> tuple[str, str]:
    m = re.fullmatch(r"(.*/)?(.*)", path, re.DOTALL)
    assert m is not None  # the pattern matches any text
    return m[2], m[1] or "./"


def _strip_trailing_slashes(path: str) -> str:
    return re.sub(r"(.)/*\Z", r"\1", path, count=1, flags=re.DOTALL)


_PARTS: dict[str, Callable[[str], str]] = {
    "": lambda a: a,
    ".": _without_extension,
    "/": _basename,
    "//": _dirname,
    "/.": lambda a: _without_extension(_basename(a)),
}


def split_sources(words: Sequence[str]) -> list[list[str]]:
    """The input sources written after the first ``:::`` (``words``, that ``:::`` excluded)."""
    refuse_unsupported(words)
    sources: list[list[str]] = [[]]
    for word in words:
        if word == SEPARATOR:
            sources.append([])
        else:
            sources[-1].append(word)
    for number, source in enumerate(sources, 1):
        if not source:
            which = "" if len(sources) == 1 else f" (input source {number})"
            raise exc.UsageError(f"::: has no arguments after it{which}")
    return sources


def swarm_input(template: Template, sources: Sequence[Sequence[str]], source: str) -> swarmfile.SwarmInput:
    """One task per combination of the sources' arguments, named ``task-N`` in input order."""
    tasks = [swarmfile.TaskSpec(name=f"task-{n}", cmd=command(template, arguments, n), source=source)
             for n, arguments in enumerate(itertools.product(*sources), 1)]
    return swarmfile.SwarmInput(tasks, {}, None, source)


def load(words: Sequence[str], after_separator: Sequence[str] | None, template_text: str | None, *,
         null: bool) -> swarmfile.SwarmInput:
    """The tasks of ``run TEMPLATE ::: ARG…`` (``words``: what came before the ``:::``, joined by
    spaces as parallel joins a command's words; ``after_separator``: what came after it) or of
    ``run --template TEMPLATE FILE|-``. No template before ``:::`` is parallel's default ``{}``:
    each argument is a command. The template is checked before any argument is read."""
    if after_separator is None:
        if template_text is None:
            raise exc.UsageError("-0/--null is for the arguments of a template: --template TEMPLATE FILE|-")
        if len(words) != 1:
            raise exc.UsageError("--template TEMPLATE needs its arguments: after ::: or in a FILE (- for stdin)"
                                 if not words else f"--template reads its arguments from one FILE (- for stdin), "
                                 f"not {len(words)}: to give them here, put ::: before them")
        template = parse(template_text, 1)
        where, arguments = swarmfile.load_arguments(words[0], null=null)
        return swarm_input(template, [arguments], where)
    if null:
        raise exc.UsageError("-0/--null separates arguments read from a FILE or stdin; those after ::: are "
                             "separate words already")
    if template_text is not None and words:
        raise exc.UsageError(f"two templates: --template {template_text!r} and {' '.join(words)!r} before :::; "
                             "give one")
    if template_text is None:
        template_text = " ".join(words) if words else "{}"
    sources = split_sources(after_separator)
    return swarm_input(parse(template_text, len(sources)), sources, "<command line>")
