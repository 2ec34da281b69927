"""What the classifier and the clusters see of one failure.

Two views: ``failure_text`` (question, final SQL, error text, divergence) for the embedding, and
``evidence_features`` (the finder's and the heuristic's findings plus a few counts) as numbers.
Everything is computed offline from the trajectory alone.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from opinions.prelabel.heuristic import CORE_KEYS, HeuristicLabeller
from trajectories.evidence import Evidence, find_divergence
from trajectories.model import StepKind, Trajectory

_TEXT_CAP = 600  # characters per part: enough to tell failures apart, short enough to embed fast


@dataclass(frozen=True, slots=True)
class Findings:
    """The offline labellers' opinions on one failure, computed once and shared."""

    evidence: dict[str, Any]  # the finder's Evidence.to_dict(), whatever fields it has
    heuristic_category: str
    heuristic_confidence: float
    heuristic_step: int | None
    signals: dict[str, float]  # category -> strongest heuristic signal


def findings(trajectory: Trajectory, labeller: HeuristicLabeller | None = None,
             evidence: Mapping[str, Any] | None = None) -> Findings:
    """With ``evidence`` (the finder's ``to_dict``, e.g. stored beside a pre-label) the
    finder does not run again."""
    labeller = labeller or HeuristicLabeller()
    if evidence is not None:
        result = labeller.label_with_evidence(trajectory, labeller.taxonomy.version,
                                              Evidence.from_dict(evidence))
    else:
        result = labeller.label(trajectory, labeller.taxonomy.version)
    # The label already ran the finder (executed when the labeller has an EHR database): reuse
    # its evidence, so the classifier sees the same finding as the heuristic, computed once.
    evidence = result.evidence if result.evidence is not None else \
        find_divergence(trajectory).to_dict()
    strongest: dict[str, float] = {}
    for sig in labeller.signals(trajectory):
        strongest[sig.category] = max(strongest.get(sig.category, 0.0), sig.confidence)
    return Findings(evidence, result.category, result.confidence, result.first_error_step,
                    strongest)


def _final_sql(trajectory: Trajectory) -> str:
    for step in reversed(trajectory.steps):
        if step.kind == StepKind.SQL and step.code:
            return step.code
    return ""


def _error_text(trajectory: Trajectory) -> str:
    errors = [" ".join((s.observation or "").split())[:160] for s in trajectory.steps if s.error]
    return " | ".join(errors[-3:])


def failure_text(trajectory: Trajectory, found: Findings | None = None) -> str:
    """Question, final SQL, error text and divergence, as one string to embed."""
    question = trajectory.task.question if isinstance(trajectory.task.question, str) else ""
    divergence = ""
    if found is not None:
        divergence = "; ".join(str(d) for d in found.evidence.get("divergences") or [])
    parts = [question, _final_sql(trajectory), _error_text(trajectory), divergence]
    return "\n".join(" ".join(p.split())[:_TEXT_CAP] for p in parts if p)


def _max_identical(trajectory: Trajectory) -> int:
    actions = [" ".join((s.code or s.arguments or "").split()) for s in trajectory.steps
               if s.kind != StepKind.MESSAGE]
    counts = Counter(a for a in actions if a)
    return max(counts.values(), default=0)


def evidence_features(trajectory: Trajectory, found: Findings) -> dict[str, float]:
    """Named numbers: finder category and parts, heuristic signals, simple counts."""
    feats: dict[str, float] = {}
    ev = found.evidence
    if ev.get("category"):
        feats[f"finder={ev['category']}"] = float(ev.get("confidence") or 0.0)
    for part in ev.get("parts") or []:
        feats[f"part={part}"] = 1.0
    feats[f"heuristic={found.heuristic_category}"] = found.heuristic_confidence
    for key in CORE_KEYS:
        feats[f"signal={key}"] = found.signals.get(key, 0.0)
    steps = trajectory.steps
    n = max(len(steps), 1)
    n_actions = sum(1 for s in steps if s.kind != StepKind.MESSAGE)
    feats["steps"] = float(len(steps))
    feats["error_share"] = sum(1 for s in steps if s.error) / n
    feats["max_identical_action"] = float(_max_identical(trajectory))
    feats["action_share"] = n_actions / n
    answer = trajectory.final_answer
    feats["answer_empty"] = 1.0 if answer in (None, "", [], [[]]) else 0.0
    feats["answer_is_text"] = 1.0 if isinstance(answer, str) else 0.0
    return feats
