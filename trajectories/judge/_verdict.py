"""The judge's verdicts: what a rule decides (``Verdict``), how (``Method``) and on what
evidence (``Judgement``), and the small helpers every layer writes evidence with."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Verdict(StrEnum):
    CORRECT = "correct"
    INCORRECT = "incorrect"
    UNDECIDED = "undecided"


class Method(StrEnum):
    """How a verdict was reached (the layers above, then the ones beyond the rules)."""

    HARNESS = "harness"
    EXACT_MATCH = "exact_match"
    SQL_RESULT = "sql_result"
    PROSE = "prose"
    ABSTENTION = "abstention"
    #: Abstains on a question that has an answer: incorrect, and no wrong answer either
    #: (the reliability score counts it 0).
    ABSTAINED = "abstained"
    NO_ANSWER = "no_answer"
    NO_GROUND_TRUTH = "no_ground_truth"
    LLM = "llm"
    HUMAN = "human"


@dataclass(frozen=True)
class Judgement:
    verdict: Verdict
    method: Method
    evidence: str

    @property
    def success(self) -> bool | None:
        """The verdict as an outcome: True, False, or None (undecided)."""
        if self.verdict == Verdict.UNDECIDED:
            return None
        return self.verdict == Verdict.CORRECT


def _correct(method: Method, evidence: str) -> Judgement:
    return Judgement(Verdict.CORRECT, method, evidence)


def _incorrect(method: Method, evidence: str) -> Judgement:
    return Judgement(Verdict.INCORRECT, method, evidence)


def _undecided(method: Method, evidence: str) -> Judgement:
    return Judgement(Verdict.UNDECIDED, method, evidence)


def _raw_rows(gold: Any) -> Sequence[Sequence[Any]]:
    if isinstance(gold, str) and gold.strip()[:1] in "[{":
        with contextlib.suppress(ValueError):
            gold = json.loads(gold)
    if isinstance(gold, dict):
        return [list(gold.values())]
    if isinstance(gold, list | tuple):
        return [list(item.values()) if isinstance(item, dict)
                else list(item) if isinstance(item, list | tuple) else [item] for item in gold]
    return [[gold]]


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _short(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit - 3] + "..."
