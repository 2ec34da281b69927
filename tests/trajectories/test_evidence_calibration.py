"""Calibration of the finder's per-part confidences (trajectories.evidence.calibrate)."""

from __future__ import annotations

from trajectories.evidence import Evidence
from trajectories.evidence.calibrate import score_parts, shrunk_confidence
from trajectories.evidence.parts import Divergence
from trajectories.signals import CODE_LOOKUP, SEMANTIC, SQL_LOGIC


def _ev(part: str | None) -> Evidence:
    found = [Divergence(part, "why", "", 0.0)] if part else []
    return Evidence(step=0, divergences=found)


def test_few_observations_cannot_claim_high_confidence() -> None:
    assert shrunk_confidence(30, 30) == 0.9  # capped: the demo is cleaner than real data
    assert shrunk_confidence(2, 2) < 0.6 < shrunk_confidence(6, 6)
    assert shrunk_confidence(0, 0) == 0.15  # nothing measured: the uninformed prior
    assert shrunk_confidence(5, 10) < shrunk_confidence(9, 10)


def test_parts_are_scored_against_known_causes() -> None:
    pairs = [(SQL_LOGIC, _ev("times"))] * 8 + [(SEMANTIC, _ev("times"))] * 2
    pairs += [(CODE_LOOKUP, _ev("concept")), (SEMANTIC, _ev(None))]
    pairs += [(CODE_LOOKUP, _ev("filters"))] * 12
    designed = {"times": SQL_LOGIC, "concept": SEMANTIC, "filters": SEMANTIC, "lookup": CODE_LOOKUP}
    scores = score_parts(pairs, designed)
    assert (scores["times"].right, scores["times"].seen) == (8, 10)
    assert scores["times"].confidence == shrunk_confidence(8, 10)
    # One odd demo failure does not change what a part means; it only lowers its confidence.
    assert scores["concept"].category == SEMANTIC and scores["concept"].right == 0
    # Many do: the demo's evidence overrules the design.
    assert scores["filters"].category == CODE_LOOKUP
    # A designed part the demo never decided gets the prior, not a made-up figure.
    assert scores["lookup"].seen == 0 and scores["lookup"].confidence == 0.15
