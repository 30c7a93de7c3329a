"""``jsontext.compact`` writes what ``json.dumps`` with the same options writes, for every
shape a record holds — it calls the C encoder directly, so nothing else checks that."""

from __future__ import annotations

import json
import math

import pytest

from zellij_swarm import jsontext

SHAPES = [
    None, True, False, 0, -7, 2**70, 1.5, 1796402951.237639, -0.0, math.inf, -math.inf,
    "", "plain", 'quote " backslash \\ newline \n tab \t', "naïve ünïcode ✓ 日本", "\ud800 lone surrogate", "\x00\x1f",
    [], {}, [1, "a", None, [2.5, {"k": []}]],
    {"ts": 1796402951.237639, "event": "slot_reserved", "task": "task-6", "slot": 6, "gen": 1, "attempt": 1},
    {"nested": {"deeper": {"list": [1, 2, {"x": "y"}]}}, "ü": "é", "": 0},
    {3: "int key", 2.5: "float key", True: "bool key", None: "null key"},
    (1, 2, "tuple"),
]


@pytest.mark.parametrize("obj", SHAPES, ids=range(len(SHAPES)))
def test_compact_is_what_json_dumps_writes(obj: object) -> None:
    assert jsontext.compact(obj) == json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def test_nan_is_written_as_python_writes_it() -> None:
    assert jsontext.compact([math.nan]) == "[NaN]"


@pytest.mark.parametrize("obj", [object(), {"a": {1, 2}}, [b"bytes"], {("tuple", "key"): 1}])
def test_what_json_cannot_hold_is_a_type_error(obj: object) -> None:
    with pytest.raises(TypeError):
        jsontext.compact(obj)


def test_an_interpreter_without_the_c_encoder_gets_the_same_text(monkeypatch):
    monkeypatch.setattr(json.encoder, "c_make_encoder", None)
    pieces = jsontext._pieces()
    for obj in SHAPES:
        assert "".join(pieces(obj, 0)) == json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
