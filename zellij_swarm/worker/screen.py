"""The tail of a worker's ``output.log`` rendered through a pyte screen.

A worker's raw output is a terminal byte stream: ``\\r`` progress bars, SGR colours, cursor
movement, partial UTF-8. Feeding it through a pyte screen the size of the pane's output area
shows it as a terminal would. Only the last ``TAIL_BYTES`` of the file are fed (SPEC §2), and
after that only what the file grew by, so a steady redraw costs the new bytes, not 64 KB.

Colours are kept: each line is re-emitted with SGR codes from pyte's cell attributes (the
redraw loop rewrites whole lines in place, so colour adds no flicker). ``color=False`` gives
plain text.

``LastScreenLines`` gives the board its output column: the last line of each live worker's
rendered screen that says something (a letter or a digit, box borders trimmed), recomputed
only when the file changed, scanning only the screen rows the output touched.

pyte is imported when the first ``TailScreen`` renders: by the board only once a slot has
output.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyte
    from pyte.screens import Char

TAIL_BYTES = 64 * 1024
LAST_LINE_SCREEN = (160, 50)  # columns, rows a board's output line is rendered at: wider than most panes
# Box drawing, block elements and bars around what a TUI line says
_BORDERS = "".join(chr(c) for c in range(0x2500, 0x25A0)) + "| \t"
_SAYS = re.compile(r"\w")

_screen_class: type[pyte.Screen] | None = None
_stream_class: type[pyte.ByteStream] | None = None
# What a line-drawing span is cut at: an escape sequence is passed on whole, never translated
_DRAWING_TOKENS = re.compile(r"\x1b[()][0-~]|\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"
                             r"|\x1b.|[\x0e\x0f]", re.DOTALL)
_sgr_maps: tuple[dict[str, int], dict[str, int]] | None = None


def _pyte_screen(cols: int, rows: int) -> pyte.Screen:
    global _screen_class
    if _screen_class is None:
        import pyte

        class _LogScreen(pyte.Screen):
            # A log file holds what a program wrote through the tty's ONLCR translation, so a
            # bare LF means CR+LF. Forced here rather than through the LNM mode, which a worker's
            # own reset (ESC c, CSI 20 l) would clear.
            def linefeed(self) -> None:
                self.index()
                self.carriage_return()

        _screen_class = _LogScreen
    return _screen_class(cols, rows)


def _pyte_stream(screen: pyte.Screen) -> pyte.ByteStream:
    global _stream_class
    if _stream_class is None:
        import pyte
        from pyte.charsets import VT100_MAP

        class _LogStream(pyte.ByteStream):
            """UTF-8, with the DEC line-drawing set all the same: xterm and tmux honour ``ESC ( 0``
            (ncurses' ``smacs``) and SO/SI in UTF-8, where pyte drops them — a curses box would
            read ``lqqqk``."""

            def __init__(self, screen: pyte.Screen) -> None:
                super().__init__(screen)
                self.sets = ["B", "B"]  # G0, G1
                self.shifted = 0  # SO selects G1, SI G0
                self.held = ""  # an escape sequence cut by the end of a chunk

            def feed(self, data: bytes) -> None:  # type: ignore[override]
                text = self.held + self.utf8_decoder.decode(data)
                cut = text.rfind("\x1b")
                self.held, text = (text[cut:], text[:cut]) if cut >= 0 and len(text) - cut < 3 else ("", text)
                out, at = [], 0
                for m in _DRAWING_TOKENS.finditer(text):
                    out.append(self._drawn(text[at:m.start()]))
                    token, at = m.group(), m.end()
                    if token in ("\x0e", "\x0f"):
                        self.shifted = token == "\x0e"
                    elif token[:2] in ("\x1b(", "\x1b)"):
                        self.sets[token[1] == ")"] = token[2]
                    else:
                        out.append(token)
                out.append(self._drawn(text[at:]))
                pyte.Stream.feed(self, "".join(out))

            def _drawn(self, text: str) -> str:
                return text.translate(VT100_MAP) if self.sets[self.shifted] == "0" else text

        _stream_class = _LogStream
    return _stream_class(screen)


def _colour_maps() -> tuple[dict[str, int], dict[str, int]]:
    global _sgr_maps
    if _sgr_maps is None:
        from pyte import graphics as g

        fg = {name: code for code, name in {**g.FG_ANSI, **g.FG_AIXTERM}.items() if name != "default"}
        bg = {name: code for code, name in {**g.BG_ANSI, **g.BG_AIXTERM}.items() if name != "default"}
        _sgr_maps = fg, bg
    return _sgr_maps


def _colour_sgr(value: str, named: dict[str, int], extended: int) -> str | None:
    if value == "default":
        return None
    if value in named:
        return str(named[value])
    if len(value) == 6:
        try:
            r, g, b = (int(value[i : i + 2], 16) for i in (0, 2, 4))
        except ValueError:
            return None
        return f"{extended};2;{r};{g};{b}"
    return None


def _line_text(row: Mapping[int, Char], cols: int, color: bool) -> str:
    """One pyte buffer row as text, trailing blanks dropped, with SGR codes if ``color``."""
    cells = [row[x] for x in range(cols)]
    end = cols
    while end and cells[end - 1].data in (" ", "") and cells[end - 1].bg == "default" and not cells[end - 1].reverse:
        end -= 1
    if not color:
        return "".join(c.data for c in cells[:end])
    fg_map, bg_map = _colour_maps()
    out: list[str] = []
    current: tuple[str | bool, ...] = ()
    plain = True
    for c in cells[:end]:
        attrs = (c.fg, c.bg, c.bold, c.italics, c.underscore, c.strikethrough, c.reverse)
        if attrs != current:
            codes = [
                code
                for code in (
                    _colour_sgr(c.fg, fg_map, 38),
                    _colour_sgr(c.bg, bg_map, 48),
                    "1" if c.bold else None,
                    "3" if c.italics else None,
                    "4" if c.underscore else None,
                    "9" if c.strikethrough else None,
                    "7" if c.reverse else None,
                )
                if code
            ]
            if codes or not plain:
                out.append("\x1b[0" + "".join(";" + code for code in codes) + "m")
            plain = not codes
            current = attrs
        out.append(c.data)
    if not plain:
        out.append("\x1b[0m")
    return "".join(out)


class TailScreen:
    """A pyte screen following the tail of one file; ``render`` feeds it what is new.

    The screen is rebuilt from the last ``tail_bytes`` when the file, the size or the colour
    choice changes, when the file shrank, or when it grew by more than ``tail_bytes``.
    """

    def __init__(self, tail_bytes: int = TAIL_BYTES) -> None:
        self.tail_bytes = tail_bytes
        self._path: Path | None = None
        self._size: tuple[int, int] = (0, 0)
        self._offset = 0
        self._ino = 0
        self._screen: pyte.Screen | None = None
        self._stream: pyte.ByteStream | None = None

    def render(self, path: Path | None, cols: int, rows: int, *, color: bool = False) -> list[str]:
        """The ``rows`` lines of the screen (``cols`` wide) after feeding the file's new bytes."""
        if cols <= 0 or rows <= 0:
            return []
        screen = self._fed(path, cols, rows)
        if screen is None:
            return [""] * rows
        return [_line_text(screen.buffer[y], cols, color) for y in range(rows)]

    def last_line(self, path: Path | None, cols: int, rows: int) -> str:
        """The lowest line of the screen that says something (a letter or a digit), without
        the borders around it; only the rows the output wrote to are looked at."""
        screen = self._fed(path, cols, rows)
        if screen is None:
            return ""
        for y in sorted(screen.buffer.keys(), reverse=True):
            row = screen.buffer[y]
            if not row or y >= rows:
                continue
            text = "".join(row[x].data for x in range(min(max(row) + 1, cols)))
            if _SAYS.search(text):
                return text.strip(_BORDERS)
        return ""

    def _fed(self, path: Path | None, cols: int, rows: int) -> pyte.Screen | None:
        """The screen after feeding the file's new bytes; None when there is no file."""
        try:
            st = os.stat(path) if path is not None else None
        except OSError:
            st = None
        if path is None or st is None:
            self._path = None
            return None
        screen, stream = self._screen, self._stream
        if (
            screen is None
            or stream is None
            or path != self._path
            or (cols, rows) != self._size
            or st.st_ino != self._ino
            or st.st_size < self._offset
            or st.st_size - self._offset > self.tail_bytes
        ):
            screen = self._rebuild(path, cols, rows, st.st_size, st.st_ino)
        elif st.st_size > self._offset:
            self._feed_from(stream, path, self._offset)
        return screen

    def _rebuild(self, path: Path, cols: int, rows: int, size: int, ino: int) -> pyte.Screen:
        self._path, self._size, self._ino = path, (cols, rows), ino
        self._screen = screen = _pyte_screen(cols, rows)
        self._stream = stream = _pyte_stream(screen)
        start = max(0, size - self.tail_bytes)
        self._feed_from(stream, path, start, skip_partial=start > 0)
        return screen

    def _feed_from(self, stream: pyte.ByteStream, path: Path, offset: int, *, skip_partial: bool = False) -> None:
        try:
            with open(path, "rb") as f:
                f.seek(offset)
                data = f.read(self.tail_bytes)
        except OSError:
            return
        self._offset = offset + len(data)
        if skip_partial:
            # Starting mid-file may cut an escape sequence or a UTF-8 character in half: start
            # at the next line (or, in one long progress line, at the next carriage return).
            cut = data.find(b"\n")
            if cut < 0:
                cut = data.find(b"\r")
            data = data[cut + 1 :] if cut >= 0 else data
        stream.feed(data)


class LastScreenLines:
    """``TailScreen.last_line`` of each file, at ``LAST_LINE_SCREEN``, recomputed only when the
    file changed (its size or its mtime)."""

    def __init__(self) -> None:
        self._seen: dict[Path, tuple[tuple[int, int], TailScreen, str]] = {}

    def get(self, path: Path) -> str:
        try:
            st = os.stat(path)
        except OSError:
            return ""
        key = (st.st_size, st.st_mtime_ns)
        seen = self._seen.get(path)
        if seen is not None and seen[0] == key:
            return seen[2]
        screen = seen[1] if seen is not None else TailScreen()
        line = screen.last_line(path, *LAST_LINE_SCREEN)
        self._seen[path] = (key, screen, line)
        return line

    def forget_except(self, keep: set[Path]) -> None:
        for path in list(self._seen):
            if path not in keep:
                del self._seen[path]
