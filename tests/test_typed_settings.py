"""``settings.Resolved``: one typed field per row of the table, checked when it is made."""

from __future__ import annotations

import dataclasses

import pytest

from zellij_swarm import exc
from zellij_swarm.config import settings
from zellij_swarm.config.settings import SETTINGS, Resolved, resolve


def test_a_setting_without_a_field_or_a_field_without_a_setting_fails_at_import() -> None:
    extra = dataclasses.replace(SETTINGS[0], name="colour", flag="--colour")
    with pytest.raises(TypeError, match="differ: colour"):
        settings._field_types(Resolved, (*SETTINGS, extra))

    @dataclasses.dataclass(frozen=True)
    class WithExtraField(Resolved):
        colour: str = "red"

    with pytest.raises(TypeError, match="differ: colour"):
        settings._field_types(WithExtraField, SETTINGS)


def test_resolved_is_frozen_sources_included() -> None:
    r = resolve({"jobs": "3"}, {})
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.jobs = 4
    with pytest.raises(TypeError):
        r.sources["jobs"] = "default"
    assert (r.jobs, r.sources["jobs"]) == (3, "flag --jobs")


@pytest.mark.parametrize("field, value", [
    ("jobs", "8"),  # text that was never parsed
    ("jobs", True),  # a bool is an int to isinstance, never to a setting
    ("require_multiplexer", 1),
    ("output", "loud"),  # outside its Literal
    ("halt", None),
    ("timeout", "5m"),
])
def test_a_value_of_the_wrong_type_is_refused(field: str, value: object) -> None:
    with pytest.raises(TypeError, match=f"setting {field}:"):
        dataclasses.replace(resolve({}, {}), **{field: value})


def test_optional_settings_take_none_and_durations_take_ints() -> None:
    r = dataclasses.replace(resolve({"timeout": "5m", "session": "s"}, {}), timeout=None, session=None,
                            heartbeat_timeout=3)
    assert (r.timeout, r.session, r.heartbeat_timeout) == (None, None, 3)


def test_every_setting_needs_a_source() -> None:
    r = resolve({}, {})
    with pytest.raises(TypeError, match="without a source: halt"):
        dataclasses.replace(r, sources={k: v for k, v in r.sources.items() if k != "halt"})


def test_a_run_record_reads_back_as_it_was_written() -> None:
    r = resolve({"jobs": "3", "output": "tag", "timeout": "90s"}, {"ZELLIJ_SWARM_UI": "live"})
    assert Resolved.from_record(r.as_record()) == r


def test_a_record_that_predates_a_setting_gets_its_default() -> None:
    record = resolve({"jobs": "3"}, {}).as_record()
    del record["kill_grace"]
    r = Resolved.from_record(record)
    assert (r.jobs, r.kill_grace, r.sources["kill_grace"]) == (3, 2.0, "default")


def test_a_bad_recorded_value_names_the_setting_and_its_source() -> None:
    record = resolve({}, {}).as_record()
    record["jobs"] = {"value": 0, "source": "flag --jobs"}
    with pytest.raises(exc.SettingError, match=r"invalid jobs 0 \(from flag --jobs\)"):
        Resolved.from_record(record)
