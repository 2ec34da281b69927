"""An offline scikit-learn classifier over evidence and embedding features.

Logistic regression (balanced class weights) on the finder's and the heuristic's findings plus the
failure's embedding. Accuracy is measured by cross-validation grouped by task, so a fold never
holds failures of a task it was trained on (trajectories of one task look alike; mixing them
would flatter the figure).

Only the evidence columns are standardised; the embedding enters as the embedder made it (one
L2-normalised block). Standardising each of its 64 SVD components gave the weak tail components,
which mostly tell tasks apart rather than failure kinds, the same weight as the finder's verdict:
on the hand-labelled set that cost the classifier 0.09 accuracy with the executed finder, whose
divergence texts name task-specific codes and values (docs/evaluation.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

MIN_LABELS = 10  # fewer confirmed labels teach nothing worth proposing
FOLDS = 5


@dataclass(frozen=True, slots=True)
class Proposal:
    category: str
    confidence: float


@dataclass(frozen=True, slots=True)
class FeatureMatrix:
    """Rows of evidence columns (first ``evidence_columns``) followed by the embedding."""

    values: NDArray[np.float64]
    evidence_columns: int


def feature_matrix(
    features: Sequence[Mapping[str, float]], embeddings: NDArray[np.float64] | None
) -> FeatureMatrix:
    """Evidence features (one-hot / numeric, names sorted) beside the embedding columns."""
    from sklearn.feature_extraction import DictVectorizer

    dense = DictVectorizer(sparse=False, sort=True).fit_transform([dict(f) for f in features])
    dense = np.asarray(dense, dtype=np.float64)
    if embeddings is None or embeddings.size == 0:
        return FeatureMatrix(dense, dense.shape[1])
    return FeatureMatrix(np.hstack([dense, embeddings]), dense.shape[1])


def _model(evidence_columns: int, seed: int = 0):  # type: ignore[no-untyped-def]
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    # Evidence columns standardised (counts and one-hots live on different scales); the
    # embedding passed through as one normalised block (see the module docstring).
    scale = ColumnTransformer([("evidence", StandardScaler(), slice(0, evidence_columns))],
                              remainder="passthrough")
    return make_pipeline(
        scale,
        LogisticRegression(max_iter=2000, class_weight="balanced", C=0.5, random_state=seed),
    )


def cross_validated(
    features: FeatureMatrix, labels: Sequence[str], groups: Sequence[str], *, seed: int = 0,
    folds: int | None = FOLDS,
) -> list[Proposal]:
    """Out-of-fold proposals for every row, in folds grouped by task: ``folds`` of them (five
    by default, fewer when there are fewer tasks), or one per task with ``folds=None``
    (leave one task out: each task is proposed by a model that never saw it, trained on all
    the others)."""
    from sklearn.model_selection import GroupKFold

    matrix = features.values
    y = np.asarray(labels)
    n_groups = len(set(groups))
    folds = n_groups if folds is None else min(folds, n_groups)
    if folds < 2:
        raise ValueError("cross-validation needs failures of at least two tasks")
    out: list[Proposal | None] = [None] * len(y)
    for train, test in GroupKFold(n_splits=folds).split(matrix, y, groups=list(groups)):
        if len(set(y[train])) < 2:
            only = str(y[train][0])
            for i in test:
                out[i] = Proposal(only, 1.0)
            continue
        model = _model(features.evidence_columns, seed).fit(matrix[train], y[train])
        probs = model.predict_proba(matrix[test])
        classes = model.classes_
        for row, i in enumerate(test):
            best = int(np.argmax(probs[row]))
            out[i] = Proposal(str(classes[best]), float(probs[row][best]))
    return [p for p in out if p is not None]


def propose(
    features: FeatureMatrix, labelled: Mapping[int, str], *, seed: int = 0
) -> list[Proposal]:
    """Fit on the labelled rows (row index -> confirmed category) and propose a category, with
    its probability, for every row. Both come from one ``feature_matrix`` call, so the columns
    mean the same for training and proposals."""
    if len(labelled) < MIN_LABELS or len(set(labelled.values())) < 2:
        raise ValueError(
            f"the classifier needs at least {MIN_LABELS} confirmed labels in two or more "
            f"categories (got {len(labelled)})"
        )
    rows = sorted(labelled)
    model = _model(features.evidence_columns, seed).fit(
        features.values[rows], np.asarray([labelled[r] for r in rows])
    )
    probs = model.predict_proba(features.values)
    return [Proposal(str(model.classes_[int(np.argmax(p))]), float(np.max(p))) for p in probs]
