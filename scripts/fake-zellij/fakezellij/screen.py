"""A very small terminal content model: logical lines + cursor, for dump-screen.

Not a terminal emulator: it keeps printable text, handles CR/LF/BS/TAB, erase-in-line,
clear-screen, OSC titles and drops every other escape sequence. Soft wrapping is only used to
compute which logical lines are inside the viewport (dump-screen re-joins wrapped rows anyway).
"""
from __future__ import annotations

import codecs

SCROLLBACK_LIMIT = 10_000


class Screen:
    def __init__(self, cols: int, rows: int):
        self.cols = max(1, cols)
        self.rows = max(1, rows)
        self.lines: list[list[str]] = [[]]
        self.y = 0
        self.x = 0
        self.title: str | None = None
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._state = "text"  # text | esc | csi | osc | osc_esc | esc2
        self._seq = ""

    # ------------------------------------------------------------------ geometry
    def resize(self, cols: int, rows: int) -> None:
        self.cols = max(1, cols)
        self.rows = max(1, rows)

    def _row_start(self) -> int:
        if self.x <= 0:
            return 0
        return ((self.x - 1) // self.cols) * self.cols

    # ------------------------------------------------------------------ input
    def write_text(self, text: str) -> None:
        """Text produced by the fake itself (banners); '\n' = new line."""
        self.feed(text.replace("\n", "\r\n").encode())

    def feed(self, data: bytes) -> None:
        text = self._decoder.decode(data)
        for ch in text:
            st = self._state
            if st == "text":
                self._text_char(ch)
            elif st == "esc":
                if ch == "[":
                    self._state, self._seq = "csi", ""
                elif ch == "]":
                    self._state, self._seq = "osc", ""
                elif ch in "()*+#%":
                    self._state = "esc2"
                else:
                    self._state = "text"
            elif st == "esc2":
                self._state = "text"
            elif st == "csi":
                if "@" <= ch <= "~":
                    self._csi(self._seq, ch)
                    self._state = "text"
                else:
                    self._seq += ch
                    if len(self._seq) > 64:
                        self._state = "text"
            elif st == "osc":
                if ch == "\x07":
                    self._osc(self._seq)
                    self._state = "text"
                elif ch == "\x1b":
                    self._state = "osc_esc"
                else:
                    self._seq += ch
                    if len(self._seq) > 4096:
                        self._state = "text"
            elif st == "osc_esc":
                self._osc(self._seq)
                self._state = "text"

    def _text_char(self, ch: str) -> None:
        if ch == "\x1b":
            self._state = "esc"
        elif ch == "\r":
            self.x = self._row_start()
        elif ch == "\n":
            col = self.x - self._row_start()
            self.y += 1
            if self.y >= len(self.lines):
                self.lines.append([])
                self._trim()
            self.x = col
        elif ch == "\b":
            self.x = max(self._row_start(), self.x - 1)
        elif ch == "\t":
            start = self._row_start()
            col = self.x - start
            self.x = start + min(self.cols - 1, (col // 8 + 1) * 8)
        elif ch < " " or ch == "\x7f":
            pass
        else:
            line = self.lines[self.y]
            if len(line) < self.x:
                line.extend(" " * (self.x - len(line)))
            if self.x < len(line):
                line[self.x] = ch
            else:
                line.append(ch)
            self.x += 1

    def _trim(self) -> None:
        excess = len(self.lines) - (SCROLLBACK_LIMIT + self.rows)
        if excess > 0:
            del self.lines[:excess]
            self.y -= excess

    def _csi(self, params: str, final: str) -> None:
        p = params.lstrip("?>=")
        try:
            n = int(p.split(";")[0]) if p.split(";")[0] else 0
        except ValueError:
            n = 0
        line = self.lines[self.y]
        if final == "K":
            if n == 0:
                del line[self.x:]
            elif n == 1:
                for i in range(min(self.x + 1, len(line))):
                    line[i] = " "
            elif n == 2:
                line.clear()
        elif final == "J" and n in (2, 3):
            # clear: the old content scrolls up (kept in scrollback), cursor to a fresh row
            if any(self.lines[-1]):
                self.lines.append([])
            self.y = len(self.lines) - 1
            self.x = 0
        elif final == "D":
            self.x = max(self._row_start(), self.x - max(1, n))
        elif final == "C":
            self.x += max(1, n)
        elif final == "G":
            self.x = self._row_start() + max(1, n) - 1

    def _osc(self, seq: str) -> None:
        code, _, rest = seq.partition(";")
        if code in ("0", "2"):
            self.title = rest

    # ------------------------------------------------------------------ output
    @staticmethod
    def _render(line: list[str]) -> str:
        return "".join(line).rstrip()

    def viewport_lines(self) -> list[list[str]]:
        used = 0
        start = len(self.lines)
        for i in range(len(self.lines) - 1, -1, -1):
            h = max(1, -(-len(self.lines[i]) // self.cols))
            if used + h > self.rows and start < len(self.lines):
                break
            used += h
            start = i
            if used >= self.rows:
                break
        return self.lines[start:]

    def dump(self, full: bool = False) -> str:
        lines = self.lines if full else self.viewport_lines()
        return "\n".join(self._render(line) for line in lines)

    def cursor(self) -> list[int]:
        vp = self.viewport_lines()
        row = len(vp) - 1 - (len(self.lines) - 1 - self.y)
        return [self.x - self._row_start(), max(0, row)]
