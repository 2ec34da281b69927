"""The records pre-labelling produces and the store interface that keeps them.

The records (``PrelabelKey``, ``LabelResult``, ``PrelabelRecord``) are the annotation store's,
since it persists them and sits below the pre-labellers (``labeling.store.records``); they are
re-exported here for the labellers, the runner and the batch path. The labeller interface itself
is ``opinions.prelabel.protocol``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from labeling.store.records import LabelResult, PrelabelKey, PrelabelRecord
from llm.usage import UsageTally

__all__ = ["LabelResult", "PrelabelKey", "PrelabelRecord", "PrelabelStore", "RunStats"]


@dataclass
class RunStats(UsageTally):
    labelled: int = 0
    cached: int = 0
    failed: int = 0
    calls: int = 0
    estimated_cost_usd: float = 0.0
    errors: list[str] = field(default_factory=list)


class PrelabelStore(Protocol):
    """Where pre-labels are kept; the annotation store's `store.prelabels` implements it."""

    def get(self, key: PrelabelKey) -> PrelabelRecord | None: ...

    def save(self, record: PrelabelRecord) -> None: ...

