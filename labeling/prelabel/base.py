"""The records pre-labelling produces and the store interface that keeps them.

Shared by the labellers, the runner, the batch path and the annotation store, so it holds only
plain data and protocols. The labeller interface itself is ``labeling.prelabel.protocol``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class PrelabelKey:
    """What a cached pre-label depends on: change any part and the label is recomputed."""

    trajectory_id: str
    taxonomy_version: str
    prompt_version: str
    model: str  # labeller model, e.g. "gemini-2.5-pro" or "heuristic"


@dataclass(frozen=True)
class LabelResult:
    category: str
    confidence: float  # in [0, 1]; honest: low when the labeller is guessing
    first_error_step: int | None  # index into Trajectory.steps
    rationale: str  # short, cites the step ("step 7: ...")
    labeller: str  # "heuristic" | "gemini"
    labeller_version: str
    secondary_category: str | None = None
    # The first-divergence evidence behind the label (labeling.evidence.Evidence.to_dict()),
    # stored beside the pre-label and exported with it; None when the labeller had none.
    evidence: dict[str, Any] | None = None


@dataclass(frozen=True)
class PrelabelRecord:
    """A pre-label as stored: either a result or a recorded failure (never a crashed run)."""

    key: PrelabelKey
    result: LabelResult | None
    error: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    attempts: int = 1

    @property
    def ok(self) -> bool:
        return self.result is not None


@dataclass
class RunStats:
    labelled: int = 0
    cached: int = 0
    failed: int = 0
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    estimated_cost_usd: float = 0.0
    errors: list[str] = field(default_factory=list)


class PrelabelStore(Protocol):
    """Where pre-labels are kept; the annotation store's `store.prelabels` implements it."""

    def get(self, key: PrelabelKey) -> PrelabelRecord | None: ...

    def save(self, record: PrelabelRecord) -> None: ...

