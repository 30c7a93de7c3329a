"""Each default ``waiting_pattern`` against a rendered screen of the prompt it claims to match
(issue 24 §5 (d)), and screens none may match.

The recordings in tests/screens/prompts/ are what a program wrote to its terminal, as a
pane's ``output.log`` keeps it: colours, in-place redraws, an Ink TUI erasing its spinner to
draw a dialog. They are rendered as the input watch renders them (``render.screen`` at the
pane's size, here 80×24) before the patterns look.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from zellij_swarm.config import settings
from zellij_swarm.exc import SettingError
from zellij_swarm.render.screen import TailScreen
from zellij_swarm.worker import prompts

SCREENS = Path(__file__).parent / "screens" / "prompts"

# Which recorded screen shows each default's prompt.
CLAIMS = {
    "Proceed?": "proceed.bin",
    "[y/N]": "y-n-brackets.bin",
    "(y/N)": "y-n-parens.bin",
    "(Y)es/(N)o": "aider.bin",
    "Do you want to": "claude-code.bin",
    "Would you like to": "codex.bin",
    "Press Enter": "press-enter.bin",
}


def rendered(name: str) -> list[str]:
    return TailScreen().render(SCREENS / name, 80, 24)


def test_every_default_is_claimed() -> None:
    assert set(CLAIMS) == set(prompts.DEFAULT_PATTERNS)


@pytest.mark.parametrize("default", CLAIMS)
def test_a_default_matches_the_screen_of_its_prompt(default: str) -> None:
    screen = rendered(CLAIMS[default])
    assert prompts.asks(screen, prompts.compiled(prompts.DEFAULT_PATTERNS[default])), "\n".join(screen)
    assert prompts.asks(screen, prompts.compiled(None))


@pytest.mark.parametrize("name", ["no-spinner.bin", "no-answered.bin", "no-dialog-erased.bin"])
def test_no_default_matches_a_screen_that_asks_nothing(name: str) -> None:
    screen = rendered(name)
    assert any(line.strip() for line in screen)
    assert not prompts.asks(screen, prompts.compiled(None)), "\n".join(screen)


def test_the_raw_bytes_would_have_lied() -> None:
    """The erased dialog is still in the bytes: only the rendered screen says it is gone."""
    raw = (SCREENS / "no-dialog-erased.bin").read_bytes().decode()
    assert prompts.compiled(None).search(raw)  # type: ignore[union-attr]


def test_a_pattern_of_ones_own_replaces_the_defaults_and_empty_looks_for_nothing() -> None:
    screen = rendered("claude-code.bin")
    assert not prompts.asks(screen, prompts.compiled(r"Approve\?"))
    assert prompts.asks(screen, prompts.compiled(r"make this edit"))
    assert prompts.compiled("") is None and not prompts.asks(screen, None)


def test_a_bad_pattern_is_a_setting_error_naming_where() -> None:
    with pytest.raises(SettingError, match="waiting_pattern"):
        settings.parse_as("waiting_pattern", "Proceed? [y/N", "file s.toml:3")
