"""Short display names for long run names: unique, and they keep what tells runs apart."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trajectories.run_labels import ELLIPSIS, short_run_names, with_short_run_names

REAL_LIKE = [
    "mimic_iv-tool-calling-gemini-2.0-flash-0.0_range_0--1_user-gpt-4o-mini-llm_0427224609_valid",
    "mimic_iv-tool-calling-gemini-2.0-flash-0.0_range_0--1_user-gpt-4o-mini-llm_0427231110_valid",
    "mimic_iv-tool-calling-gpt-4o-mini-0.0_range_0--1_user-gpt-4o-mini-llm_0427210012_valid",
]


def test_short_names_pass_through_and_long_ones_keep_start_and_end() -> None:
    shown = short_run_names(["sim-gpt-strong/t0.0", *REAL_LIKE], limit=34)
    assert shown["sim-gpt-strong/t0.0"] == "sim-gpt-strong/t0.0"
    for full in REAL_LIKE:
        short = shown[full]
        head, tail = short.split(ELLIPSIS)
        assert full.startswith(head) and full.endswith(tail)
        assert len(short) <= len(full)
    # The two gemini runs differ only in their time stamp near the end: still told apart.
    assert len(set(shown.values())) == len(shown)


def test_runs_that_differ_only_in_the_middle_widen_until_unique() -> None:
    names = [f"{'a' * 40}-{i}-{'b' * 40}" for i in range(3)]
    shown = short_run_names(names, limit=20)
    assert len(set(shown.values())) == 3
    assert all(str(i) in shown[n] for i, n in enumerate(names))


def test_a_too_small_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 5"):
        short_run_names(["x"], limit=2)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=80), min_size=1, max_size=12),
       st.integers(min_value=5, max_value=40))
def test_display_names_are_always_unique_and_no_longer_than_needed(names: list[str],
                                                                   limit: int) -> None:
    shown = short_run_names(names, limit)
    assert set(shown) == set(names)
    assert len(set(shown.values())) == len(shown)
    for full, short in shown.items():
        assert short == full or ELLIPSIS in short
        assert len(short) <= max(limit, len(full))


def test_frame_helper_lists_what_it_shortened() -> None:
    frame = pd.DataFrame({"run": [REAL_LIKE[0], "short", REAL_LIKE[0]], "n": [1, 2, 3]})
    shown, shortened = with_short_run_names(frame)
    assert shown["run"].tolist()[1] == "short"
    assert shown["run"].iloc[0] == shown["run"].iloc[2] != REAL_LIKE[0]
    assert shortened == {shown["run"].iloc[0]: REAL_LIKE[0]}
    assert frame["run"].iloc[0] == REAL_LIKE[0]  # the caller's frame is left as it was
