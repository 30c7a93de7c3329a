"""The bytes side of the process's text streams.

Our commands write their documents and the workers' output as bytes (a worker's output is
bytes, and a 100,000-row ``status --json`` is written in pieces, never decoded and joined). A
program that calls :func:`zellij_swarm.cli.main` with ``sys.stdout`` replaced by a stream
that has no ``buffer`` (``io.StringIO`` under ``contextlib.redirect_stdout``) still gets the
output, as text: bytes are decoded as UTF-8 (an invalid byte becomes U+FFFD there; a real
stdout gets the bytes as they are)."""
from __future__ import annotations

import codecs
import io
from typing import IO, BinaryIO


class _DecodingWriter(io.RawIOBase):
    """Bytes written become text on ``text``; a character split between two writes is kept
    whole."""

    def __init__(self, text: IO[str]) -> None:
        super().__init__()
        self._text = text
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def writable(self) -> bool:
        return True

    def write(self, data: bytes | bytearray | memoryview, /) -> int:  # type: ignore[override]
        self._text.write(self._decoder.decode(bytes(data)))
        return len(data)

    def flush(self) -> None:
        self._text.flush()


def bytes_out(text: IO[str]) -> BinaryIO:
    """Where to write bytes meant for ``text`` (``sys.stdout``, ``sys.stderr``): its buffer —
    after flushing what was written to it as text, so the two stay in order — or, when it has
    none, a writer that decodes into it."""
    buffer = getattr(text, "buffer", None)
    if buffer is not None:
        text.flush()
        return buffer  # type: ignore[no-any-return]
    return _DecodingWriter(text)  # type: ignore[return-value]


def read_bytes(text: IO[str]) -> bytes:
    """All of ``text`` (``sys.stdin``) as bytes: from its buffer, or encoded as UTF-8 when it
    has none."""
    buffer = getattr(text, "buffer", None)
    return buffer.read() if buffer is not None else text.read().encode()
