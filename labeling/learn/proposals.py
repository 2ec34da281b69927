"""The classifier's proposals for a workspace's failures, for ordering the queue.

Fitted on the confirmed human labels, proposed for every failure. The finder runs
structurally here (recorded observations only): the queue is reordered on a page, where
executing every failure's SQL would cost seconds per change of the labels.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from labeling.learn.classifier import (
    MIN_LABELS,
    FeatureMatrix,
    Proposal,
    feature_matrix,
    propose,
)
from labeling.learn.features import evidence_features, failure_text, findings
from labeling.prelabel.heuristic import HeuristicLabeller
from trajectories.model import Trajectory


def ready(confirmed: Mapping[str, str], min_labels: int) -> bool:
    """Whether there are enough confirmed labels (and two categories) to learn from."""
    return len(confirmed) >= max(min_labels, MIN_LABELS) and len(set(confirmed.values())) >= 2


@dataclass(frozen=True, slots=True)
class FailureFeatures:
    """Every failure's features, computed once: the finder and heuristic dominate the cost
    (9-14 s for 573 demo failures on the loaded 2-core machine), a refit about 0.5 s, so a new
    confirmed label refits on these rather than recomputing them."""

    ids: list[str]
    matrix: FeatureMatrix


def failure_features(failures: Mapping[str, Trajectory]) -> FailureFeatures:
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
    return FailureFeatures(ids, matrix)


def proposals(features: FailureFeatures, confirmed: Mapping[str, str]) -> dict[str, Proposal]:
    """trajectory id -> the classifier's proposal, for every failure. ``confirmed`` maps
    trajectory ids (of ``features``) to their confirmed category. Confirmed failures get one
    too: an item a colleague labelled may still be in someone's queue (double annotation), and
    having no proposal would move it to the end there, which would both tell that person
    someone labelled it and push the agreement sample to the end of their work."""
    labelled = {row: confirmed[i] for row, i in enumerate(features.ids) if i in confirmed}
    out = propose(features.matrix, labelled)
    return dict(zip(features.ids, out, strict=True))
