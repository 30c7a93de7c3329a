"""Config resolution: flag > env > file > default, task keys over run defaults, sources."""

from __future__ import annotations

from typing import NamedTuple

import pytest

from zellij_swarm import exc
from zellij_swarm.config import settings
from zellij_swarm.config.settings import FileValue, parse_bool, parse_duration, resolve


def test_precedence_and_sources():
    file = {"jobs": FileValue(3, "s.toml", 2), "ui": FileValue("live", "s.toml", 3),
            "halt": FileValue("soon", "s.toml", 4)}
    env = {"ZELLIJ_SWARM_JOBS": "5", "ZELLIJ_SWARM_UI": "compact"}
    r = resolve({"jobs": "7"}, env, file)
    assert (r.jobs, r.sources["jobs"]) == (7, "flag --jobs")
    assert (r.ui, r.sources["ui"]) == ("compact", "env ZELLIJ_SWARM_UI")
    assert (r.halt, r.sources["halt"]) == ("soon", "file s.toml:4")
    assert (r.retries, r.sources["retries"]) == (0, "default")
    assert set(r.as_record()) == {s.name for s in settings.SETTINGS}


def test_ms_env_variables_and_durations():
    r = resolve({}, {"ZELLIJ_SWARM_HEARTBEAT_TIMEOUT_MS": "250", "ZELLIJ_SWARM_PANE_HOLD_MS": "1500"})
    assert (r.heartbeat_timeout, r.pane_hold) == (0.25, 1.5)
    assert resolve({"heartbeat_timeout": "2s"}, {}).heartbeat_timeout == 2.0
    assert [parse_duration(v) for v in (30, "500ms", "90s", "5m", "1h", 0.5)] == [30, 0.5, 90, 300, 3600, 0.5]
    for endless in (10**400, float("inf"), "9" * 400 + "h"):  # (an int past any float: an OverflowError, a crash)
        with pytest.raises(ValueError, match="a finite duration"):
            parse_duration(endless)


@pytest.mark.parametrize("raw, value", [("1", True), ("yes", True), ("ON", True), ("true", True),
                                        ("0", False), ("no", False), ("off", False), ("false", False)])
def test_booleans(raw, value):
    assert parse_bool(raw) is value


def test_require_aliases_either_turns_it_on():
    assert resolve({}, {"ZELLIJ_SWARM_REQUIRE_ZELLIJ": "1"}).require_multiplexer is True
    r = resolve({}, {"ZELLIJ_SWARM_REQUIRE_MULTIPLEXER": "0", "ZELLIJ_SWARM_REQUIRE_ZELLIJ": "yes"})
    assert (r.require_multiplexer, r.sources["require_multiplexer"]) == (True, "env ZELLIJ_SWARM_REQUIRE_ZELLIJ")
    assert resolve({"require_multiplexer": False}, {"ZELLIJ_SWARM_REQUIRE_ZELLIJ": "1"}).require_multiplexer is False


class Bad(NamedTuple):
    test_id: str
    flags: dict
    env: dict
    needle: str


BAD = [
    Bad("jobs-zero", {"jobs": "0"}, {}, "invalid jobs '0' (from flag --jobs): expected an integer 1–1024"),
    Bad("jobs-5000", {"jobs": "5000"}, {}, "invalid jobs '5000'"),
    Bad("jobs-env-text", {}, {"ZELLIJ_SWARM_JOBS": "many"}, "(from env ZELLIJ_SWARM_JOBS)"),
    Bad("ui-unknown", {"ui": "fancy"}, {}, "expected one of live|compact"),
    Bad("ms-not-int", {}, {"ZELLIJ_SWARM_HEARTBEAT_TIMEOUT_MS": "5s"}, "ZELLIJ_SWARM_HEARTBEAT_TIMEOUT_MS"),
    Bad("bool-junk", {}, {"ZELLIJ_SWARM_REQUIRE_ZELLIJ": "maybe"}, "expected one of 1/0"),
    Bad("duration-negative", {"timeout": "-3"}, {}, "invalid timeout"),
    Bad("duration-junk", {"timeout": "soon"}, {}, "a duration such as"),
    Bad("halt-junk", {}, {"ZELLIJ_SWARM_HALT": "later"}, "never|soon|now"),
    Bad("kill-grace-zero", {}, {"ZELLIJ_SWARM_KILL_GRACE": "0"},
        "invalid kill_grace '0' (from env ZELLIJ_SWARM_KILL_GRACE)"),
]


def test_kill_grace_defaults_to_two_seconds_and_takes_any_duration():
    assert resolve({}, {}).kill_grace == 2.0
    assert resolve({}, {"ZELLIJ_SWARM_KILL_GRACE": "90s"}).kill_grace == 90.0
    assert resolve({"kill_grace": "500ms"}, {"ZELLIJ_SWARM_KILL_GRACE": "90s"}).kill_grace == 0.5


@pytest.mark.parametrize("case", BAD, ids=[b.test_id for b in BAD])
def test_invalid_values_name_setting_source_and_allowed(case):
    with pytest.raises(exc.SettingError) as e:
        resolve(case.flags, case.env)
    assert case.needle in str(e.value)
    assert e.value.exit_code == 2 and "\n" not in str(e.value)
