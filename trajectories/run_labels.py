"""Short display names for runs, for tables and charts narrower than the names.

Run names come from file names and harness settings, and real ones run to 90-110 characters
(``mimic_iv-tool-calling-gemini-2.0-flash-0.0_range_0--1_user-gpt-4o-mini-llm_0427224609_valid``).
A table that sizes its run column to them pushes every number off a 1280-pixel screen, and one
that cuts them at the end hides what tells runs apart, which is usually at the end (the
temperature, the seed, the date). So the rule: a name longer than the limit keeps its start and
its end around an ellipsis, and the kept part grows until no two runs read the same. The full
names stay in the data, the exports and a list beside the table.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import pandas as pd

ELLIPSIS = "…"

#: Characters a short run name may take: ~240 px in the app's table font, a third of a table at
#: 1280 px.
DEFAULT_LIMIT = 34


def _shorten(name: str, budget: int) -> str:
    if len(name) <= budget:
        return name
    # The end tells runs apart more often than the start, so it gets the larger share.
    tail = (budget - 1) * 3 // 5
    head = budget - 1 - tail
    return f"{name[:head]}{ELLIPSIS}{name[len(name) - tail:]}"


def short_run_names(names: Iterable[str], limit: int = DEFAULT_LIMIT) -> dict[str, str]:
    """Each distinct name's display name: itself when it fits ``limit`` characters, else its
    start and end around an ellipsis, widened until it is unique among all the display names."""
    if limit < 5:
        raise ValueError(f"a short run name needs at least 5 characters, not {limit}")
    distinct = list(dict.fromkeys(str(n) for n in names))
    budget = dict.fromkeys(distinct, limit)
    while True:
        shown = {name: _shorten(name, budget[name]) for name in distinct}
        counts = Counter(shown.values())
        clashing = [n for n in distinct if counts[shown[n]] > 1 and shown[n] != n]
        if not clashing:
            return shown
        for name in clashing:
            budget[name] = min(len(name), budget[name] + 4)


def with_short_run_names(frame: pd.DataFrame, column: str = "run",
                         limit: int = DEFAULT_LIMIT) -> tuple[pd.DataFrame, dict[str, str]]:
    """``frame`` with ``column`` shown by short names, and the names that were shortened
    (short -> full) for a list beside the table."""
    if column not in frame.columns or frame.empty:
        return frame, {}
    shown = short_run_names(frame[column].astype(str), limit)
    out = frame.copy()
    out[column] = out[column].astype(str).map(shown)
    return out, {short: full for full, short in shown.items() if short != full}
