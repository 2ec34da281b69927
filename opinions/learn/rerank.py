"""The queue hook: put the items a proposal is least sure about first.

Kept separate and small on purpose: the queue belongs to other parts of the store, which call this
with whatever proposals they have.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def rerank_queue(ids: Sequence[str], confidence: Mapping[str, float]) -> list[str]:
    """``ids`` reordered by ascending proposal confidence (unsure first, where a human decision
    teaches the classifier most); items without a proposal keep their order at the end. Stable."""
    scored = [i for i in ids if i in confidence]
    rest = [i for i in ids if i not in confidence]
    return sorted(scored, key=lambda i: confidence[i]) + rest
