"""The tail of a worker's ``output.log`` rendered through a pyte screen.

A worker's raw output is a terminal byte stream: ``\\r`` progress bars, SGR colours, cursor
movement, partial UTF-8. Feeding it through a pyte screen the size of the pane's output area
shows it as a terminal would. Only the last ``TAIL_BYTES`` of the file are fed (SPEC §2), and
after that only what the file grew by, so a steady redraw costs the new bytes, not 64 KB.

Colours are kept: each line is re-emitted with SGR codes from pyte's cell attributes (the
redraw loop rewrites whole lines in place, so colour adds no flicker). ``color=False`` gives
plain text.

pyte is imported when the first ``TailScreen`` renders, never by the board.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyte
    from pyte.screens import Char

TAIL_BYTES = 64 * 1024

_screen_class: type[pyte.Screen] | None = None
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
        try:
            st = os.stat(path) if path is not None else None
        except OSError:
            st = None
        if path is None or st is None:
            self._path = None
            return [""] * rows
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
        return [_line_text(screen.buffer[y], cols, color) for y in range(rows)]

    def _rebuild(self, path: Path, cols: int, rows: int, size: int, ino: int) -> pyte.Screen:
        import pyte

        self._path, self._size, self._ino = path, (cols, rows), ino
        self._screen = screen = _pyte_screen(cols, rows)
        self._stream = stream = pyte.ByteStream(screen)
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
