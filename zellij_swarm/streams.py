"""The bytes side of the process's text streams.

Our commands write their documents and the workers' output as bytes (a worker's output is
bytes, and a 100,000-row ``status --json`` is written in pieces, never decoded and joined). A
program that calls :func:`zellij_swarm.cli.main` with ``sys.stdout`` replaced by a stream
that has no ``buffer`` (``io.StringIO`` under ``contextlib.redirect_stdout``) still gets the
output, as text: bytes are decoded as UTF-8 (an invalid byte becomes U+FFFD there; a real
stdout gets the bytes as they are)."""
from __future__ import annotations

import codecs
import contextlib
import io
import os
import sys
from typing import IO, Any, BinaryIO


class _DecodingWriter(io.RawIOBase):
    """Bytes written become text on ``text``; a character split between two writes is kept
    whole (a flush ends it: its callers flush at the end of what they copy)."""

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
        """What was written is whole: a character still half-written is not coming (U+FFFD)."""
        self._text.write(self._decoder.decode(b"", final=True))
        self._text.flush()


class _Nowhere(io.RawIOBase):
    """Takes every write and keeps nothing: the stream of a program that has none."""

    def writable(self) -> bool:
        return True

    def write(self, data: bytes | bytearray | memoryview, /) -> int:  # type: ignore[override]
        return len(data)


def text_or_nowhere(text: IO[str] | None) -> IO[str]:
    """``text``, or, for a program without that stream (``sys.stderr`` is None under
    ``pythonw``, or set so), one that keeps nothing."""
    if text is not None:
        return text
    return io.TextIOWrapper(io.BufferedWriter(_Nowhere()), encoding="utf-8")  # type: ignore[type-var]


def bytes_out(text: IO[str] | None) -> BinaryIO:
    """Where to write bytes meant for ``text`` (``sys.stdout``, ``sys.stderr``): its buffer —
    after flushing what was written to it as text, so the two stay in order — or, when it has
    none, a writer that decodes into it; for no stream at all (None), one that keeps nothing."""
    if text is None:
        return _Nowhere()  # type: ignore[return-value]
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


def open_standard_descriptors() -> None:
    """Give a process started with stdin, stdout or stderr closed (`cmd >&-`) /dev/null in
    its place. Otherwise the first file it opens takes that descriptor: a child that inherits
    it — the launcher, a worker — then writes its "stdout" into a run's records. Python sets
    ``sys.stdout`` (and the others) to None for a closed one: it gets a stream on /dev/null."""
    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        try:
            os.fstat(fd)
            continue
        except OSError:
            pass
        null = os.open(os.devnull, os.O_RDWR)  # the lowest free descriptor: ``fd`` itself
        if null != fd:
            os.dup2(null, fd, inheritable=True)
            os.close(null)
        else:
            os.set_inheritable(fd, True)
        if getattr(sys, name) is None:
            setattr(sys, name, open(fd, mode, closefd=False, encoding="utf-8"))  # noqa: SIM115 (the process's own)


def replace_unencodable() -> None:
    """Text a stdout or stderr cannot encode (a task named ``ü😀`` under
    ``PYTHONIOENCODING=latin-1``, a path of undecodable bytes) is written escaped rather than
    failing the command that writes it."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper) and stream.errors == "strict":
            stream.reconfigure(errors="backslashreplace")


def discard_unwritten(stream: IO[Any]) -> None:
    """A stream whose descriptor can no longer be written (a closed pipe, a full disk) is
    pointed at /dev/null: what its buffer holds, and whatever is written to it later, goes
    there instead of failing again — in the loop, or as the interpreter flushes it at exit.
    A stream without a descriptor is left as it is."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError):
        return
    null = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.dup2(null, fd)
    finally:
        os.close(null)
    with contextlib.suppress(OSError, ValueError):
        stream.flush()
