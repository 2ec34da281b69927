"""An offline scikit-learn classifier over evidence and embedding features.

Logistic regression (balanced class weights) on the finder's and the heuristic's findings plus the
failure's embedding. Accuracy is measured by cross-validation grouped by task, so a fold never
holds failures of a task it was trained on (trajectories of one task look alike; mixing them
would flatter the figure).
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


def feature_matrix(
    features: Sequence[Mapping[str, float]], embeddings: NDArray[np.float64] | None
) -> NDArray[np.float64]:
    """Evidence features (one-hot / numeric, names sorted) beside the embedding columns."""
    from sklearn.feature_extraction import DictVectorizer

    dense = DictVectorizer(sparse=False, sort=True).fit_transform([dict(f) for f in features])
    dense = np.asarray(dense, dtype=np.float64)
    if embeddings is None or embeddings.size == 0:
        return dense
    return np.hstack([dense, embeddings])


def _model(seed: int = 0):  # type: ignore[no-untyped-def]
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(
        StandardScaler(),
        LogisticRegression(max_iter=2000, class_weight="balanced", C=0.5, random_state=seed),
    )


def cross_validated(
    matrix: NDArray[np.float64], labels: Sequence[str], groups: Sequence[str], *, seed: int = 0
) -> list[Proposal]:
    """Out-of-fold proposals for every row: grouped folds by task when there are enough tasks,
    otherwise stratified folds (said so by the caller)."""
    from sklearn.model_selection import GroupKFold

    y = np.asarray(labels)
    n_groups = len(set(groups))
    folds = min(FOLDS, n_groups)
    if folds < 2:
        raise ValueError("cross-validation needs failures of at least two tasks")
    out: list[Proposal | None] = [None] * len(y)
    for train, test in GroupKFold(n_splits=folds).split(matrix, y, groups=list(groups)):
        if len(set(y[train])) < 2:
            only = str(y[train][0])
            for i in test:
                out[i] = Proposal(only, 1.0)
            continue
        model = _model(seed).fit(matrix[train], y[train])
        probs = model.predict_proba(matrix[test])
        classes = model.classes_
        for row, i in enumerate(test):
            best = int(np.argmax(probs[row]))
            out[i] = Proposal(str(classes[best]), float(probs[row][best]))
    return [p for p in out if p is not None]


def propose(
    train_matrix: NDArray[np.float64], train_labels: Sequence[str], matrix: NDArray[np.float64],
    *, seed: int = 0,
) -> list[Proposal]:
    """Fit on confirmed labels and propose a category (with its probability) for each row."""
    if len(train_labels) < MIN_LABELS or len(set(train_labels)) < 2:
        raise ValueError(
            f"the classifier needs at least {MIN_LABELS} confirmed labels in two or more "
            f"categories (got {len(train_labels)})"
        )
    model = _model(seed).fit(train_matrix, np.asarray(train_labels))
    probs = model.predict_proba(matrix)
    return [Proposal(str(model.classes_[int(np.argmax(p))]), float(np.max(p))) for p in probs]
