"""The classifier's proposals for a workspace's unconfirmed failures, for ordering the queue.

Fitted on the confirmed human labels, proposed for every other failure. The finder runs
structurally here (recorded observations only): the queue is reordered on a page, where
executing every failure's SQL would cost seconds per change of the labels.
"""

from __future__ import annotations

from collections.abc import Mapping

from labeling.learn.classifier import MIN_LABELS, Proposal, feature_matrix, propose
from labeling.learn.features import evidence_features, failure_text, findings
from labeling.prelabel.heuristic import HeuristicLabeller
from trajectories.model import Trajectory


def ready(confirmed: Mapping[str, str], min_labels: int) -> bool:
    """Whether there are enough confirmed labels (and two categories) to learn from."""
    return len(confirmed) >= max(min_labels, MIN_LABELS) and len(set(confirmed.values())) >= 2


def proposals(
    failures: Mapping[str, Trajectory], confirmed: Mapping[str, str]
) -> dict[str, Proposal]:
    """trajectory id -> the classifier's proposal, for every failure without a confirmed label.
    ``confirmed`` maps trajectory ids (a subset of ``failures``) to their confirmed category."""
    from labeling.clusters.embed import TfidfEmbedder

    ids = sorted(failures)
    labeller = HeuristicLabeller()
    found = [findings(failures[i], labeller) for i in ids]
    embedding = TfidfEmbedder().embed(
        [failure_text(failures[i], f) for i, f in zip(ids, found, strict=True)]
    )
    matrix = feature_matrix(
        [evidence_features(failures[i], f) for i, f in zip(ids, found, strict=True)], embedding
    )
    labelled = {row: confirmed[i] for row, i in enumerate(ids) if i in confirmed}
    out = propose(matrix, labelled)
    return {i: p for i, p in zip(ids, out, strict=True) if i not in confirmed}
