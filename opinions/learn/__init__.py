"""Learn from confirmed labels: features, an offline classifier, and how well each labeller agrees
with a hand-labelled evaluation set."""

from __future__ import annotations

from opinions.learn.evalset import GoldLabel, failed_trajectories, load_gold
from opinions.learn.evaluate import (
    Agreement,
    agreement,
    check_floors,
    evaluate_labellers,
    without_reference_sql,
)
from opinions.learn.rerank import rerank_queue

__all__ = [
    "Agreement",
    "GoldLabel",
    "agreement",
    "check_floors",
    "evaluate_labellers",
    "failed_trajectories",
    "load_gold",
    "rerank_queue",
    "without_reference_sql",
]
