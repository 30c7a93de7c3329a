"""What on a worker's screen says it asks a person something (SPEC §2, Waiting for input).

The kernel tells when a program reads its terminal or polls nothing else (``worker.waiting``),
but an agent CLI that polls its terminal among its connections to the model looks the same
while it thinks, and without ptrace access the kernel tells less, or nothing. Its screen
then says it:
``waiting_pattern``, a regular expression looked for in the *rendered* screen (a pyte screen
of the pane's size fed the pane's output, ``worker.screen``), not in the raw bytes, where
cursor moves and colours split the words.

Only the bottom of the screen counts, the last ``LOOKED_AT`` lines that are not blank: a
prompt is where the program stopped, and a question answered long ago a few screens up is
not asked any more. A full-screen program's whole screen is current and usually fits.

``DEFAULT_PATTERNS`` are the prompts of common agent CLIs and tools; each is tested against a
rendered screen of the prompt it names (tests/test_waiting_screens.py). A run's or a task's
own ``waiting_pattern`` replaces them all; ``""`` looks for nothing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

LOOKED_AT = 8  # the last non-blank lines of the screen a prompt is looked for in

DEFAULT_PATTERNS: dict[str, str] = {
    "Proceed?": r"\bProceed\?",  # generic confirmations, Gemini CLI's "Proceed?"
    "[y/N]": r"(?i:\[y/n\])",  # [y/N], [Y/n]: apt, git, pip, most shell scripts
    "(y/N)": r"(?i:\((?:y|yes)/(?:n|no)\))",  # inquirer-style confirms (npm init, yeoman), (yes/no)
    "(Y)es/(N)o": r"\(Y\)es/\(N\)o",  # aider's confirmations
    "Do you want to": r"\bDo you want to\b",  # Claude Code's permission dialogs
    "Would you like to": r"\bWould you like to\b",  # Codex CLI's approval dialogs
    "Press Enter": r"\bPress (?:any key|[Ee]nter|ENTER|[Rr]eturn)\b",  # pagers, installers, "press any key"
}
DEFAULT = "|".join(f"(?:{p})" for p in DEFAULT_PATTERNS.values())


def compiled(pattern: str | None) -> re.Pattern[str] | None:
    """The pattern to look for: the defaults for None, nothing for ``""``. Settings checked
    that it compiles."""
    if pattern is None:
        return re.compile(DEFAULT)
    return re.compile(pattern) if pattern else None


def bottom(lines: Sequence[str], count: int = LOOKED_AT) -> str:
    """The last ``count`` non-blank lines of a screen, joined by newlines: what is searched."""
    kept = [line for line in lines if line.strip()]
    return "\n".join(kept[-count:])


def asks(lines: Sequence[str], pattern: re.Pattern[str] | None) -> bool:
    """Whether the screen's ``lines`` show a prompt ``pattern`` matches."""
    return pattern is not None and pattern.search(bottom(lines)) is not None
