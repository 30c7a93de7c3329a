"""Compact JSON text, as every record of a run is written: no spaces, characters as they are
(not ``\\u`` escapes), NaN and infinities as Python writes them.

One encoder for the event log, the rows file, the snapshots and a task's packed spec. The
supervisor writes about five event lines and a row for each task; ``JSONEncoder.encode``
spends more time in its own Python frames (and on an encoder it builds for each call) than
the C encoder spends on the object, so the C encoder is called directly where the
interpreter has one. It does not look for cycles: no record holds one.
"""

from __future__ import annotations

import json
import json.encoder
from collections.abc import Callable, Iterable
from typing import Any


def _unencodable(obj: Any) -> Any:
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


def _pieces() -> Callable[[Any, int], Iterable[str]]:
    make = getattr(json.encoder, "c_make_encoder", None)
    try:
        pieces: Callable[[Any, int], Iterable[str]] = make(  # type: ignore[misc]
            None, _unencodable, json.encoder.encode_basestring, None, ":", ",", False, False, True)
        if "".join(pieces({"a": [1, "ü"]}, 0)) == '{"a":[1,"ü"]}':
            return pieces
    except TypeError:  # none (an interpreter without the accelerator), or called otherwise
        pass
    encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    return lambda obj, _indent: (encode(obj),)


_PIECES = _pieces()


def compact(obj: Any) -> str:
    """``obj`` as compact JSON text: ``json.dumps(obj, ensure_ascii=False, separators=(",", ":"))``."""
    return "".join(_PIECES(obj, 0))


def loads(data: str | bytes) -> Any:
    """``json.loads``, where a document nested too deep for the parser — a damaged or planted
    record, ``[[[[…`` — fails as any other text that is not JSON (``JSONDecodeError``, a
    ``ValueError``), not with a ``RecursionError`` no reader expects."""
    try:
        return json.loads(data)
    except RecursionError:
        raise json.JSONDecodeError("nested too deep to be read", "", 0) from None
