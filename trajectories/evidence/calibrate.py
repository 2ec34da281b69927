"""Calibrating the finder's per-part confidences on failures whose true category is known.

The demo generator (``faillab demo``) records the cause it injected into every failure, so the
finder's parts can be scored against it without touching the hand-labelled real set: a part's
confidence is its precision for its category there. Real causes are messier than injected
ones, so a measured precision is capped (``CAP``), and a part seen on few demo failures is
shrunk towards an uninformed prior (Laplace's rule of succession over the categories), so a
part seen twice cannot claim 0.9.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from trajectories import signals as sg
from trajectories.evidence.finder import Evidence

CAP = 0.9  # the demo's causes are cleaner than real ones
STEP = 0.05  # confidences are rounded to this: more digits would be false precision
PRIOR_WEIGHT = 2.0  # pseudo-failures of the uninformed prior added to each part's count
MIN_SWITCH = 10  # demo failures needed before a part's category may differ from its design
# The demo generator names its injected causes by the taxonomy's display names.
DEMO_CAUSE_KEYS = {
    "Medical-Code Lookup Error": sg.CODE_LOOKUP,
    "SQL Logic Error": sg.SQL_LOGIC,
    "Semantic Misunderstanding": sg.SEMANTIC,
    "Answer Format Error": sg.ANSWER_FORMAT,
    "Variable Scope Error": sg.VARIABLE_SCOPE,
    "Stuck-in-Loop": sg.STUCK_IN_LOOP,
}


@dataclass(frozen=True, slots=True)
class PartScore:
    """How one part fared on failures with known causes."""

    part: str
    category: str  # the category the part most often went with
    right: int  # failures of that category among those with this part
    seen: int  # failures with this part as the deciding one
    confidence: float  # shrunk, capped, rounded precision

    @property
    def precision(self) -> float:
        return self.right / self.seen if self.seen else 0.0


def part_counts(pairs: Iterable[tuple[str, Evidence]]) -> dict[str, Counter[str]]:
    """Deciding part -> how often each true category (internal key) went with it."""
    out: dict[str, Counter[str]] = {}
    for category, evidence in pairs:
        if evidence.part is not None:
            out.setdefault(evidence.part, Counter())[category] += 1
    return out


def shrunk_confidence(right: int, seen: int, categories: int = 6) -> float:
    """Precision pulled towards 1/``categories`` by ``PRIOR_WEIGHT`` pseudo-failures, capped at
    ``CAP`` and rounded down to ``STEP``: 30 of 30 gives 0.9, 2 of 2 gives 0.55, none 1/6."""
    prior = 1.0 / categories
    value = (right + PRIOR_WEIGHT * prior) / (seen + PRIOR_WEIGHT)
    return round(int(min(CAP, value) / STEP + 1e-9) * STEP, 2)


def score_parts(
    pairs: Iterable[tuple[str, Evidence]], designed: Mapping[str, str], categories: int = 6,
    min_switch: int = MIN_SWITCH,
) -> dict[str, PartScore]:
    """Each part's category and calibrated confidence. ``designed`` is the category each part
    was written to mean (the taxonomy's rule); the demo may overrule it only on ``min_switch``
    failures or more, since one odd demo failure is no reason to change a rule's meaning. Parts
    in ``designed`` that the demo never decided get the uninformed prior."""
    counts = part_counts(pairs)
    scores: dict[str, PartScore] = {}
    for part in sorted(set(designed) | set(counts)):
        seen_by = counts.get(part, Counter())
        seen = sum(seen_by.values())
        category = designed.get(part, "")
        if seen_by and (not category or seen >= min_switch):
            category = seen_by.most_common(1)[0][0]
        right = seen_by[category]
        scores[part] = PartScore(part, category, right, seen,
                                 shrunk_confidence(right, seen, categories))
    return scores
