"""Learn from confirmed labels: features, an offline classifier, and how well each labeller agrees
with a hand-labelled evaluation set."""

from __future__ import annotations

from labeling.learn.evalset import GoldLabel, failed_trajectories, load_gold
from labeling.learn.evaluate import Agreement, agreement, check_floors, evaluate_labellers
from labeling.learn.rerank import rerank_queue

__all__ = [
    "Agreement",
    "GoldLabel",
    "agreement",
    "check_floors",
    "evaluate_labellers",
    "failed_trajectories",
    "load_gold",
    "rerank_queue",
]
