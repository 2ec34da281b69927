"""Answer format: the right values given in the wrong structure or form."""

from __future__ import annotations

import re
from collections import Counter

from trajectories.model import Trajectory
from trajectories.signals._answers import (
    Answers,
    _answer_step,
    _cite_step,
    _is_null_table,
    _match_rows,
    answers,
)
from trajectories.signals._common import ANSWER_FORMAT, NULL_TEXTS, Signal


def detect_answer_format(trajectory: Trajectory, ans: Answers | None = None) -> list[Signal]:
    answer = trajectory.final_answer
    ans = ans or answers(trajectory)
    gold, pred = ans.gold, ans.pred
    if trajectory.task.ground_truth is None and isinstance(answer, str) and answer.strip() and \
            answer.strip().casefold() in NULL_TEXTS:
        # Unanswerable task answered with the word "NULL" rather than a JSON null: the right
        # conclusion in the wrong form (a strict harness fails it; our exact match forgives it).
        step = _answer_step(trajectory)
        return [Signal(ANSWER_FORMAT, 0.75, step, _cite_step(
            trajectory, step, f"the task has no answer and the agent said so, but as the text "
            f"{answer.strip()[:20]!r} instead of a JSON null."))]
    if _is_null_table(gold) or _is_null_table(pred):
        return []
    assert gold is not None and pred is not None
    if pred == gold:
        return []
    step = _answer_step(trajectory)
    flat_gold = Counter(v for row in gold for v in row)
    flat_pred = Counter(v for row in pred for v in row)
    if flat_gold == flat_pred:
        return [
            Signal(
                ANSWER_FORMAT,
                0.85,
                step,
                _cite_step(
                    trajectory,
                    step,
                    "the answer has the right values in a different structure than required.",
                ),
            )
        ]
    if len(pred) == len(gold) and len(gold) <= 500:
        for mode, conf_all, what, short in (
            ("sub", 0.8, "required fields are missing", "missing fields"),
            ("sup", 0.7, "extra fields were added", "extra fields"),
        ):
            matched, strict = _match_rows(pred, gold, mode)
            if strict == 0:
                continue
            if matched == len(gold):
                return [
                    Signal(
                        ANSWER_FORMAT,
                        conf_all,
                        step,
                        _cite_step(trajectory, step, f"every row matches but {what}."),
                    )
                ]
            if len(gold) >= 3 and matched * 5 >= len(gold) * 3:
                return [
                    Signal(
                        ANSWER_FORMAT,
                        0.4,  # values partly wrong: weaker than a signal explaining them
                        step,
                        _cite_step(
                            trajectory,
                            step,
                            f"{matched}/{len(gold)} rows match apart from {short}; the "
                            "other values differ.",
                        ),
                    )
                ]
    if isinstance(answer, str) and answer.strip()[:1] not in "[{":
        values = [v for v in flat_gold if v not in NULL_TEXTS]
        text = " ".join(answer.casefold().split())
        if 0 < len(values) <= 50 and all(
            re.search(r"(?<![\w.])" + re.escape(v) + r"(?![\w])", text) for v in values
        ):
            conf = 0.5 if len(values) == 1 and len(values[0]) <= 3 else 0.65
            return [
                Signal(
                    ANSWER_FORMAT,
                    conf,
                    step,
                    _cite_step(
                        trajectory,
                        step,
                        "every expected value appears in the answer "
                        "text, but not in the required form.",
                    ),
                )
            ]
    return []
