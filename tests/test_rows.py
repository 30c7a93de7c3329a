"""The typed rows (``records.rows``) and the JSON schemas say the same thing: every key of
each type is one its schema has, and the keys a schema requires are the type's required
ones. A key added to a writer without a schema (or the other way round) fails here."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import pytest

from zellij_swarm.records import rows

FILE_ONLY = {"rows"}  # in state.json: the rows file it covers, merged away by ``snapshot_file.load``


def _status_schema() -> dict[str, Any]:
    text = resources.files("zellij_swarm.schemas").joinpath("status.schema.json").read_text()
    schema: dict[str, Any] = json.loads(text)
    return schema


@pytest.mark.parametrize(("typed", "where"), [
    (rows.TaskRow, ("$defs", "task")),
    (rows.AttemptRow, ("$defs", "attempt")),
    (rows.WarningRow, ("$defs", "warning")),
    (rows.Snapshot, ()),
], ids=["task", "attempt", "warning", "snapshot"])
def test_each_typed_row_has_the_keys_of_its_schema(typed: Any, where: tuple[str, ...]) -> None:
    schema = _status_schema()
    for key in where:
        schema = schema[key]
    keys = set(typed.__required_keys__) | set(typed.__optional_keys__)
    assert keys - FILE_ONLY == set(schema["properties"])
    assert set(typed.__required_keys__) == set(schema.get("required", ()))


def test_optional_fields_are_the_task_rows_optional_keys() -> None:
    assert set(rows.OptionalFields.__optional_keys__) <= set(rows.TaskRow.__optional_keys__)
