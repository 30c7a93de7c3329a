"""Small text helpers shared by the renderers: display width, clipping, durations, colour.

Everything here is pure and stdlib-only (``wcwidth`` is imported lazily, and only for text that
is not plain ASCII). A worker's output is read through a terminal screen (``worker.screen``),
never by stripping escapes here.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

RESET = "\x1b[0m"
STATUS_SGR = {
    "running": "1;33",
    "starting": "33",
    "queued": "33",
    "reserved": "33",
    "succeeded": "32",
    "failed": "1;31",
    "timed_out": "1;31",
    "lost": "1;35",
    "unknown": "1;35",
    "cancelled": "35",
    "skipped": "2",
    "pending": "2",
    "idle": "2",
    "closed": "2",
}


def char_width(ch: str) -> int:
    """Columns ``ch`` takes on a terminal (0 for combining marks, 2 for wide characters)."""
    if " " <= ch <= "~":
        return 1
    from wcwidth import wcwidth

    return max(wcwidth(ch), 0)


def width(text: str) -> int:
    if text.isascii():
        return len(text)
    return sum(char_width(c) for c in text)


def clip(text: str, cols: int, *, ellipsis: str = "…") -> str:
    """``text`` cut to at most ``cols`` display columns, ending in ``ellipsis`` if it was cut."""
    if cols <= 0:
        return ""
    if text.isascii() and len(text) <= cols:
        return text
    if width(text) <= cols:
        return text
    room = cols - width(ellipsis)
    out, used = [], 0
    for ch in text:
        w = char_width(ch)
        if used + w > room:
            break
        out.append(ch)
        used += w
    return "".join(out) + ellipsis if room >= 0 else "".join(out)


def pad(text: str, cols: int, *, right: bool = False) -> str:
    """``text`` clipped and padded with spaces to exactly ``cols`` display columns."""
    text = clip(text, cols)
    fill = " " * (cols - width(text))
    return fill + text if right else text + fill


def clip_middle(text: str, cols: int) -> str:
    """Keep both ends of a long name (``shard-…-017``): task names differ mostly at the end."""
    if width(text) <= cols or not text.isascii() or cols < 5:
        return clip(text, cols)
    tail = (cols - 1) // 2
    return text[: cols - 1 - tail] + "…" + text[len(text) - tail :]


def duration(seconds: float | None) -> str:
    """Compact duration for columns: ``0.4s``, ``42s``, ``12m05s``, ``3h07m`` (at most 6 columns)."""
    if seconds is None:
        return "-"
    if seconds < 10:
        return f"{max(seconds, 0.0):.1f}s"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 100 * 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d"


def clock_time(ts: float | None) -> str:
    return "-" if ts is None else time.strftime("%H:%M:%S", time.localtime(ts))


def sgr(text: str, code: str | None, color: bool) -> str:
    if not color or not code or not text:
        return text
    return f"\x1b[{code}m{text}{RESET}"


def ranges(numbers: Iterable[int]) -> str:
    """``[1, 2, 3, 7, 9, 10]`` -> ``"1-3,7,9-10"``."""
    out: list[str] = []
    nums = sorted(numbers)
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        out.append(str(nums[i]) if i == j else f"{nums[i]}-{nums[j]}")
        i = j + 1
    return ",".join(out)


def join_parts(parts: Iterable[tuple[str, str | None]], cols: int, color: bool) -> str:
    """Concatenate ``(text, sgr)`` parts clipped to ``cols`` columns, styling each part."""
    out: list[str] = []
    left = cols
    for text, code in parts:
        if left <= 0:
            break
        w = width(text)
        if w > left:
            text = clip(text, left)
            w = width(text)
        out.append(sgr(text, code, color))
        left -= w
    return "".join(out)
