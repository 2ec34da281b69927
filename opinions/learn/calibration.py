"""Confidence that means what it says: each labeller's raw confidence mapped to the probability
that people agree with its category, measured on people's labels.

The map is Platt scaling with a per-category shift, fitted by maximum a posteriori::

    logit P(people agree) = intercept + slope * logit(raw confidence) + shift[category]

A workspace's map is fitted on its own people-checked items (spot checks, confirmations and
overrides: every item whose final label a person stands behind and that the labeller
pre-labelled) with a Gaussian prior centred on the map measured on the development set
(``calibration_prior.json``, see ``calibration_prior``). With no checked items the prior is
the answer; with many the workspace's items decide. The prior weighs about as much as a few
checked items (``PRIOR_SD``): a development set of 95 failures in 10 tasks says how a labeller
tends to behave, not how it behaves on another team's logs. A labeller
the development set could not measure (an LLM: the set is labelled offline) has no prior; it
gets a probability only once people have checked some of its items, and until then
``calibrate`` answers None (unknown), never a guess.

A routing rule reads two numbers: ``Calibration.calibrate(labeller, category, raw)`` and
``Calibration.checked(labeller, category)``, the people-checked items behind that labeller's
proposals of that category (the workspace's, not the prior's).

Pure: numpy only, no store; ``workspace_observations`` (in ``calibration_store``) reads the
store.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

HEURISTIC, FINDER, CLASSIFIER, LLM = "heuristic", "finder", "classifier", "llm"
#: The development prior, written by ``python -m opinions.learn.calibration_prior``.
PRIOR_PATH = Path(__file__).with_name("calibration_prior.json")
#: Raw confidences are clipped here before the logit: a labeller's 1.0 or 0.0 would otherwise
#: be an infinite logit, and no labeller is measured finely enough to tell 0.995 from 1.
CLIP = 0.01
#: A missing raw confidence (an imported LLM label may carry none) reads as even odds.
UNKNOWN_RAW = 0.5
#: Standard deviations of the workspace fit's Gaussian prior around the development map
#: (intercept, slope, each category's shift). At p near 0.5 one item carries information 0.25
#: on a logit, so sd 0.6 alone would be worth about ten items; the three together leave a
#: single category at one confidence freer than that: a prior of 0.9 and four checks of which
#: two agreed give 0.69 (tests/labeling/test_calibration.py), i.e. the prior weighs about four
#: checked items there. The slope is held a little tighter, since a workspace's checked items
#: rarely span the confidence range.
PRIOR_SD = (0.6, 0.4, 0.6)
#: The development fit's own prior: centred on "the raw confidence is already calibrated"
#: (intercept 0, slope 1, no shift), weak, so 95 items move it where they point.
DEV_PRIOR_SD = (1.5, 1.0, 1.0)
#: Reliability bins (equal width over [0, 1]).
BINS = 10
#: Folds for the out-of-sample calibration error of a fitted map.
FOLDS = 5


@dataclass(frozen=True, slots=True)
class Observation:
    """One labeller's proposal on one item that people have labelled."""

    labeller: str
    category: str  # what the labeller proposed
    confidence: float | None  # its raw confidence
    agreed: bool  # people's category is the same
    item: str = ""
    group: str = ""  # folds keep a group together (the development set: the task)

    def to_dict(self) -> dict[str, Any]:
        return {"labeller": self.labeller, "category": self.category,
                "confidence": self.confidence, "agreed": self.agreed, "item": self.item,
                "group": self.group}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Observation:
        raw = data.get("confidence")
        return cls(str(data["labeller"]), str(data["category"]),
                   None if raw is None else float(raw), bool(data["agreed"]),
                   str(data.get("item", "")), str(data.get("group", "")))


def _logit(raw: float | None) -> float:
    p = UNKNOWN_RAW if raw is None or raw != raw else min(max(float(raw), CLIP), 1.0 - CLIP)
    return math.log(p / (1.0 - p))


def _sigmoid(x: NDArray[np.float64]) -> NDArray[np.float64]:
    out: NDArray[np.float64] = 1.0 / (1.0 + np.exp(-np.clip(x, -30.0, 30.0)))
    return out


@dataclass(frozen=True)
class LabellerMap:
    """One labeller's fitted map and what it was fitted on."""

    intercept: float
    slope: float
    shifts: Mapping[str, float] = field(default_factory=dict)
    n: int = 0
    agreed: int = 0
    checked: Mapping[str, int] = field(default_factory=dict)  # category -> items

    def probability(self, category: str, raw: float | None) -> float:
        x = self.intercept + self.slope * _logit(raw) + self.shifts.get(category, 0.0)
        return float(_sigmoid(np.asarray(x)))

    def to_dict(self) -> dict[str, Any]:
        return {"intercept": round(self.intercept, 6), "slope": round(self.slope, 6),
                "shifts": {k: round(v, 6) for k, v in sorted(self.shifts.items())},
                "n": self.n, "agreed": self.agreed, "checked": dict(sorted(self.checked.items()))}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LabellerMap:
        return cls(float(data["intercept"]), float(data["slope"]),
                   {str(k): float(v) for k, v in dict(data.get("shifts", {})).items()},
                   int(data.get("n", 0)), int(data.get("agreed", 0)),
                   {str(k): int(v) for k, v in dict(data.get("checked", {})).items()})


IDENTITY = LabellerMap(0.0, 1.0)


def fit_labeller(observations: Sequence[Observation], prior: LabellerMap | None = None,
                 sd: tuple[float, float, float] | None = None) -> LabellerMap:
    """The MAP map for one labeller's observations around ``prior`` (identity when None: the
    development fit). Newton's method on a strictly concave objective: a few steps converge."""
    prior = prior or IDENTITY
    sd = sd or (DEV_PRIOR_SD if prior is IDENTITY else PRIOR_SD)
    categories = sorted({o.category for o in observations} | set(prior.shifts))
    k = 2 + len(categories)
    mean = np.array([prior.intercept, prior.slope,
                     *[prior.shifts.get(c, 0.0) for c in categories]])
    precision = np.array([sd[0] ** -2, sd[1] ** -2, *[sd[2] ** -2] * len(categories)])
    x = np.zeros((len(observations), k))
    x[:, 0] = 1.0
    x[:, 1] = [_logit(o.confidence) for o in observations]
    column = {c: 2 + i for i, c in enumerate(categories)}
    for row, o in enumerate(observations):
        x[row, column[o.category]] = 1.0
    y = np.array([1.0 if o.agreed else 0.0 for o in observations])
    def objective(v: NDArray[np.float64]) -> float:
        z = x @ v
        # log-likelihood of the agreements (stable form) plus the Gaussian log-prior
        return float(np.sum(y * z - np.logaddexp(0.0, z))
                     - 0.5 * np.sum(precision * (v - mean) ** 2))

    w = mean.copy()
    current = objective(w)
    for _ in range(100):
        p = _sigmoid(x @ w)
        grad = x.T @ (y - p) - precision * (w - mean)
        hess = (x * (p * (1.0 - p))[:, None]).T @ x + np.diag(precision)
        step = np.linalg.solve(hess, grad)
        # Damped Newton: a full step can overshoot when the columns are nearly collinear
        # (a labeller that always says the same confidence), so halve until it gains.
        scale = 1.0
        while scale > 1e-6 and objective(w + scale * step) < current - 1e-12:
            scale /= 2.0
        w = w + scale * step
        current = objective(w)
        if float(np.max(np.abs(scale * step))) < 1e-9:
            break
    checked: dict[str, int] = {}
    for o in observations:
        checked[o.category] = checked.get(o.category, 0) + 1
    return LabellerMap(float(w[0]), float(w[1]), {c: float(w[column[c]]) for c in categories},
                       len(observations), sum(o.agreed for o in observations), checked)


def canonical_labeller(name: str | None) -> str:
    """The name a calibration is kept under: a pre-label's labeller (``heuristic``,
    ``gemini``, ``openai-compatible``), ``llm`` for an imported LLM label without one."""
    return (name or LLM).strip() or LLM


@dataclass(frozen=True)
class Calibration:
    """Every labeller's map (its workspace fit around its development prior, or the prior
    alone) and the workspace's people-checked counts. See the module docstring."""

    maps: Mapping[str, LabellerMap]
    #: labeller -> where its map comes from: "workspace + development prior",
    #: "workspace" (no prior: an LLM), "development prior" (no checked item yet).
    sources: Mapping[str, str]
    #: (labeller, category) -> people-checked items in this workspace.
    counts: Mapping[tuple[str, str], int] = field(default_factory=dict)

    def calibrate(self, labeller: str | None, category: str,
                  raw_confidence: float | None) -> float | None:
        """The probability that people agree with ``labeller``'s ``category`` given at
        ``raw_confidence``; None when nothing measured it (an LLM nobody has checked yet)."""
        found = self.maps.get(canonical_labeller(labeller))
        return None if found is None else found.probability(category, raw_confidence)

    def checked(self, labeller: str | None, category: str) -> int:
        """People-checked items of ``labeller``'s ``category`` proposals in this workspace."""
        return int(self.counts.get((canonical_labeller(labeller), category), 0))

    def labellers(self) -> list[str]:
        return sorted(self.maps)


def load_prior(data: Mapping[str, Any] | None = None) -> dict[str, LabellerMap]:
    """The shipped development prior (``calibration_prior.json``), or the one in ``data``."""
    if data is None:
        import json

        if not PRIOR_PATH.exists():
            return {}
        data = json.loads(PRIOR_PATH.read_text(encoding="utf-8"))
    return {str(k): LabellerMap.from_dict(v) for k, v in dict(data["labellers"]).items()}


def fit_calibration(observations: Iterable[Observation],
                    prior: Mapping[str, LabellerMap] | None = None) -> Calibration:
    """Every labeller's map from a workspace's observations around ``prior`` (by default
    the shipped development prior). Labellers with a prior and no observation keep the
    prior; labellers with neither are absent (``calibrate`` then answers None)."""
    prior = load_prior() if prior is None else prior
    grouped: dict[str, list[Observation]] = {}
    for o in observations:
        grouped.setdefault(canonical_labeller(o.labeller), []).append(o)
    maps: dict[str, LabellerMap] = {}
    sources: dict[str, str] = {}
    counts: dict[tuple[str, str], int] = {}
    for name in sorted(set(grouped) | set(prior)):
        obs = grouped.get(name, [])
        base = prior.get(name)
        for o in obs:
            counts[(name, o.category)] = counts.get((name, o.category), 0) + 1
        if obs:
            # No prior: centre on "raw confidence is right" with the workspace fit's weight,
            # so a handful of checks cannot swing it to an extreme.
            maps[name] = fit_labeller(obs, base or IDENTITY, PRIOR_SD)
            sources[name] = "workspace + development prior" if base else "workspace"
        elif base is not None:
            maps[name] = base
            sources[name] = "development prior"
    return Calibration(maps, sources, counts)


# --- how well a map is calibrated ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Bin:
    low: float
    high: float
    n: int
    mean_predicted: float | None
    observed: float | None  # share agreed; None for an empty bin


def reliability(predicted: Sequence[float], agreed: Sequence[bool], bins: int = BINS
                ) -> list[Bin]:
    """The reliability curve: equal-width bins of the predicted probability, each with its
    mean prediction and the share people agreed with (the diagonal is perfect calibration)."""
    p = np.asarray(predicted, dtype=float)
    y = np.asarray(agreed, dtype=float)
    index = np.minimum((p * bins).astype(int), bins - 1)
    out: list[Bin] = []
    for b in range(bins):
        mask = index == b
        n = int(mask.sum())
        out.append(Bin(b / bins, (b + 1) / bins, n,
                       float(p[mask].mean()) if n else None,
                       float(y[mask].mean()) if n else None))
    return out


def expected_calibration_error(predicted: Sequence[float], agreed: Sequence[bool],
                               bins: int = BINS) -> float | None:
    """ECE: the items-weighted mean gap between prediction and observed agreement over the
    reliability bins; None without items."""
    curve = reliability(predicted, agreed, bins)
    total = sum(b.n for b in curve)
    if not total:
        return None
    return float(sum(b.n / total * abs((b.observed or 0.0) - (b.mean_predicted or 0.0))
                     for b in curve if b.n))


def out_of_sample(observations: Sequence[Observation], prior: LabellerMap | None,
                  folds: int = FOLDS, seed: int = 0) -> list[float]:
    """Each observation's calibrated probability from a map fitted without it (folds of
    whole groups when the observations name groups, else of items), so a calibration error
    measured on them is not flattered by fitting and scoring the same items. ``prior`` None
    refits the development map itself (identity-centred), as ``calibration_prior`` does."""
    n = len(observations)
    if n == 0:
        return []
    keys = [o.group or o.item or str(i) for i, o in enumerate(observations)]
    unique = sorted(set(keys))
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(unique))
    fold_of = {unique[j]: int(pos % max(1, min(folds, len(unique))))
               for pos, j in enumerate(order)}
    out = [0.0] * n
    for f in sorted(set(fold_of.values())):
        train = [o for o, k in zip(observations, keys, strict=True) if fold_of[k] != f]
        if prior is None:
            fitted = fit_labeller(train) if train else IDENTITY
        else:
            fitted = fit_labeller(train, prior, PRIOR_SD) if train else prior
        for i, (o, k) in enumerate(zip(observations, keys, strict=True)):
            if fold_of[k] == f:
                out[i] = fitted.probability(o.category, o.confidence)
    return out


def raw_probability(o: Observation) -> float:
    """The raw confidence read as a probability (what an uncalibrated router would use)."""
    raw = UNKNOWN_RAW if o.confidence is None or o.confidence != o.confidence else o.confidence
    return float(min(max(raw, 0.0), 1.0))
