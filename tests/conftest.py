"""Fixtures for the zellij-swarm tests; the helpers they use live in swarmtest.py."""

from __future__ import annotations

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
