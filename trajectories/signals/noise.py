"""Clean/Noise pairs (RobustGym taxonomy): false NULLs, NULLs not returned and noise not
detected. Only used when the target taxonomy has these categories."""

from __future__ import annotations

from trajectories.model import Trajectory
from trajectories.signals._answers import (
    Answers,
    _answer_step,
    _cite_step,
    _is_null_table,
    answers,
)
from trajectories.signals._common import (
    FALSE_NULL,
    NOISE_NOT_DETECTED,
    NULL_NOT_RETURNED,
    ActionView,
    Signal,
    _cite,
    has_final_answer,
)


def detect_noise_handling(
    views: list[ActionView], trajectory: Trajectory, ans: Answers | None = None
) -> list[Signal]:
    ans = ans or answers(trajectory)
    gold = ans.gold
    answered = has_final_answer(trajectory.final_answer) and not _is_null_table(ans.pred)
    step = _answer_step(trajectory)
    if not _is_null_table(gold) and not answered:
        return [
            Signal(
                FALSE_NULL,
                0.75,
                step,
                _cite_step(
                    trajectory, step, "answers NULL or nothing although the record holds an answer."
                ),
            )
        ]
    gold_is_null = trajectory.task.ground_truth is not None and _is_null_table(gold)
    if (gold_is_null or (trajectory.task.variant == "noise" and gold is None)) and answered:
        saw_empty = next((v for v in views if v.empty), None)
        if saw_empty is not None:
            return [
                Signal(
                    NULL_NOT_RETURNED,
                    0.7,
                    saw_empty.index,
                    _cite(
                        saw_empty,
                        "an empty result showed the evidence is missing, yet the "
                        "final answer is a concrete value instead of NULL.",
                    ),
                )
            ]
        return [
            Signal(
                NOISE_NOT_DETECTED,
                0.6,
                step,
                _cite_step(
                    trajectory,
                    step,
                    "the expected answer is NULL but a concrete value "
                    "was returned without checking the premise.",
                ),
            )
        ]
    return []
