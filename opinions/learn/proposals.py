"""The classifier's proposals for a workspace's failures, for ordering the queue.

Fitted on the confirmed human labels, proposed for every failure. The features reuse the evidence
the pre-label run stored beside each heuristic pre-label (executed on the workspace's EHR
database when it has one); the finder runs (structurally: recorded observations only) just for
failures without stored evidence. Features are computed in a background thread
(``BackgroundFeatures``), never inside a page run: until they are ready the queue keeps the
store's order.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from opinions.features import evidence_features, failure_text, findings
from opinions.learn.classifier import (
    MIN_LABELS,
    FeatureMatrix,
    Proposal,
    feature_matrix,
    propose,
)
from opinions.prelabel.heuristic import HeuristicLabeller
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


def failure_features(
    failures: Mapping[str, Trajectory], stored: Mapping[str, Mapping[str, Any]] | None = None
) -> FailureFeatures:
    """Features of every failure; ``stored`` (trajectory id -> evidence dict, see
    ``stored_evidence``) saves the finder for the failures it covers."""
    from opinions.clusters.embed import TfidfEmbedder

    ids = sorted(failures)
    labeller = HeuristicLabeller()
    found = [findings(failures[i], labeller, (stored or {}).get(i)) for i in ids]
    embedding = TfidfEmbedder().embed(
        [failure_text(failures[i], f) for i, f in zip(ids, found, strict=True)]
    )
    matrix = feature_matrix(
        [evidence_features(failures[i], f) for i, f in zip(ids, found, strict=True)], embedding
    )
    return FailureFeatures(ids, matrix)


def stored_evidence(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Trajectory id -> the newest evidence stored beside a pre-label, from
    ``store.prelabels.successful()`` rows (oldest first)."""
    out: dict[str, dict[str, Any]] = {}
    for row in rows:
        ev = row.get("evidence")
        if isinstance(ev, dict) and "unreadable" not in ev:  # how the store reports bad JSON
            out[str(row["trajectory_id"])] = ev
    return out


class BackgroundFeatures:
    """Failure features per data key, computed in one daemon thread each and kept (the newest
    few). ``get`` never waits: None until the computation is done, so a page shows the store's
    order meanwhile and the next run after it finishes is ranked. A computation that fails is
    not retried for that key (the queue then simply stays unranked) and is reported by
    ``error``."""

    THREAD_NAME = "faillab-ranking-features"

    def __init__(self, kept: int = 4) -> None:
        self._kept = kept
        self._lock = threading.Lock()
        self._done: dict[Hashable, FailureFeatures] = {}
        self._running: dict[Hashable, threading.Thread] = {}
        self._errors: dict[Hashable, str] = {}

    def get(self, key: Hashable, compute: Callable[[], FailureFeatures], *,
            wait: bool = False) -> FailureFeatures | None:
        with self._lock:
            if key in self._done:
                return self._done[key]
            thread = self._running.get(key)
            if thread is None and key not in self._errors:
                thread = threading.Thread(target=self._run, args=(key, compute), daemon=True,
                                          name=self.THREAD_NAME)
                self._running[key] = thread
                thread.start()
        if wait and thread is not None:
            thread.join()
        with self._lock:
            return self._done.get(key)

    def error(self, key: Hashable) -> str | None:
        with self._lock:
            return self._errors.get(key)

    def _run(self, key: Hashable, compute: Callable[[], FailureFeatures]) -> None:
        try:
            features = compute()
        except Exception as err:  # a ranking is optional: the queue stays usable without
            with self._lock:
                self._errors[key] = f"{type(err).__name__}: {err}"
                self._running.pop(key, None)
            return
        with self._lock:
            while len(self._done) >= self._kept:
                self._done.pop(next(iter(self._done)))
            self._done[key] = features
            self._running.pop(key, None)


def proposals(features: FailureFeatures, confirmed: Mapping[str, str]) -> dict[str, Proposal]:
    """trajectory id -> the classifier's proposal, for every failure. ``confirmed`` maps
    trajectory ids (of ``features``) to their confirmed category. Confirmed failures get one
    too: an item a colleague labelled may still be in someone's queue (double annotation), and
    having no proposal would move it to the end there, which would both tell that person
    someone labelled it and push the agreement sample to the end of their work."""
    labelled = {row: confirmed[i] for row, i in enumerate(features.ids) if i in confirmed}
    out = propose(features.matrix, labelled)
    return dict(zip(features.ids, out, strict=True))


# The process's one instance: the app's page runs and the CLI share it.
FEATURES = BackgroundFeatures()
