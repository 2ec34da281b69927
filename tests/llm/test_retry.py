"""When to call an LLM again and how long to wait (``llm.retry``), without a server."""

from __future__ import annotations

from llm.retry import RETRY_AFTER_CEILING_S, backoff_delay


def test_backoff_delay() -> None:
    import random

    rng = random.Random(1)
    for attempt in range(1, 12):
        d = backoff_delay(attempt, base_delay_s=1.0, max_delay_s=60.0, rng=rng)
        step = min(60.0, 2.0 ** (attempt - 1))
        assert step / 2 <= d <= step
    assert backoff_delay(1, base_delay_s=1.0, max_delay_s=60.0, retry_after_s=30) >= 30


def test_huge_retry_after_is_capped() -> None:
    d = backoff_delay(1, base_delay_s=1.0, max_delay_s=60.0, retry_after_s=6 * 3600)
    assert d == RETRY_AFTER_CEILING_S
