"""Fixtures for the zellij-swarm tests; the helpers they use live in swarmtest.py."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from swarmtest import Swarm, scrub
from tmuxtest import Tmux, private_tmux
from zellijtest import FakeZellij


@pytest.fixture(autouse=True)
def _scrubbed_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Never touch a developer's real Zellij or tmux session (SPEC §10)."""
    scrub(monkeypatch)


@pytest.fixture
def swarm(tmp_path: Path) -> Swarm:
    return Swarm(tmp_path)


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    """A private tmux server for one test."""
    with private_tmux() as t:
        yield t


@pytest.fixture
def fz() -> Iterator[FakeZellij]:
    """The fake zellij first on PATH with a private socket dir; every process of it ends with the test."""
    f = FakeZellij()
    try:
        yield f
    finally:
        f.cleanup()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``full`` (more versions, signals, sources of a case CI already runs) run
    only with ZSW_FULL_MATRIX=1, so that CI stays within its time on 2 cores."""
    if os.environ.get("ZSW_FULL_MATRIX"):
        return
    skip = pytest.mark.skip(reason="a neighbour of a case CI runs: ZSW_FULL_MATRIX=1 (scripts/test-full) runs it")
    for item in items:
        if "full" in item.keywords:
            item.add_marker(skip)
