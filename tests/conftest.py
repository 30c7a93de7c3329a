"""Fixtures for the zellij-swarm tests; the helpers they use live in swarmtest.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from swarmtest import Swarm, scrub


@pytest.fixture(autouse=True)
def _scrubbed_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Never touch a developer's real Zellij or tmux session (SPEC §10)."""
    scrub(monkeypatch)


@pytest.fixture
def swarm(tmp_path: Path) -> Swarm:
    return Swarm(tmp_path)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``full`` (more versions, signals, sources of a case CI already runs) run
    only with ZSW_FULL_MATRIX=1, so that CI stays within its time on 2 cores."""
    if os.environ.get("ZSW_FULL_MATRIX"):
        return
    skip = pytest.mark.skip(reason="a neighbour of a case CI runs: ZSW_FULL_MATRIX=1 (scripts/test-full) runs it")
    for item in items:
        if "full" in item.keywords:
            item.add_marker(skip)
