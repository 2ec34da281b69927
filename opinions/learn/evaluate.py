"""How well each offline labeller agrees with a hand-labelled evaluation set.

For the heuristic, the first-divergence finder and the classifier (cross-validated): accuracy,
Cohen's kappa, first-step exact and within one step, and how many suggestions are not the
heuristic's low-confidence fallback. The figures are written to a small JSON that a test reads as
floors.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from labeling.agreement import cohens_kappa_from_labels
from opinions.clusters.embed import Embedder
from opinions.features import Findings, evidence_features, failure_text, findings
from opinions.learn.classifier import FOLDS, cross_validated, feature_matrix
from opinions.learn.evalset import DEV, HELD_OUT, GoldLabel, split_halves
from opinions.prelabel.heuristic import FALLBACK_CONFIDENCE, HeuristicLabeller
from trajectories.model import Trajectory

NONE = "(none)"  # the finder's "no evidence decides"
# Figures a later run may not fall below by more than this (floating point and tie-breaking).
TOLERANCE = 0.02
FLOOR_KEYS = ("accuracy", "kappa", "step_exact", "step_within_1", "suggested")


@dataclass(frozen=True, slots=True)
class Agreement:
    n: int
    accuracy: float
    kappa: float
    step_exact: float  # over items where both have a step
    step_within_1: float
    step_pairs: int
    suggested: float  # share with a real (non-fallback, non-empty) suggestion

    def to_dict(self) -> dict[str, Any]:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in asdict(self).items()}


def agreement(
    predicted: Mapping[str, tuple[str, int | None, bool]], gold: Mapping[str, GoldLabel]
) -> Agreement:
    """``predicted``: id -> (category, first step, is a real suggestion). Items missing from
    ``predicted`` count as wrong with no suggestion."""
    ids = sorted(gold)
    got = [predicted.get(i, (NONE, None, False)) for i in ids]
    want = [gold[i].category for i in ids]
    cats = [g[0] for g in got]
    n = len(ids)
    accuracy = sum(a == b for a, b in zip(cats, want, strict=True)) / n if n else math.nan
    kappa = cohens_kappa_from_labels(want, cats).kappa if n else math.nan
    pairs: list[tuple[int, int]] = []
    for g, i in zip(got, ids, strict=True):
        want_step = gold[i].first_error_step
        if g[1] is not None and want_step is not None:
            pairs.append((g[1], want_step))
    exact = sum(a == b for a, b in pairs) / len(pairs) if pairs else 0.0
    near = sum(abs(a - b) <= 1 for a, b in pairs) / len(pairs) if pairs else 0.0
    # Steps are judged over all gold items: a missing step is a miss, not a skipped item.
    exact_all = exact * len(pairs) / n if n else math.nan
    near_all = near * len(pairs) / n if n else math.nan
    suggested = sum(1 for g in got if g[2]) / n if n else math.nan
    return Agreement(n, accuracy, float(kappa), exact_all, near_all, len(pairs), suggested)


def without_reference_sql(trajectories: Mapping[str, Trajectory]) -> dict[str, Trajectory]:
    """The same failures with every task's reference SQL removed (ground truth kept): the
    regime of a benchmark that ships answers but no queries, measured on a set that has both."""
    return {
        tid: t.model_copy(update={"task": t.task.model_copy(update={"reference_sql": None})})
        for tid, t in trajectories.items()
    }


def evaluate_labellers(
    trajectories: Mapping[str, Trajectory],
    gold: Mapping[str, GoldLabel],
    embedder: Embedder | None = None,
    stored: Mapping[str, Mapping[str, tuple[str, int | None, bool]]] | None = None,
    *,
    ehr_path: Path | None = None,
) -> dict[str, Any]:
    """Figures for heuristic, finder and classifier on the gold items (all must be present),
    and for each labeller in ``stored`` (pre-labels kept in the store, e.g. Gemini's).

    With ``ehr_path`` the finder executes the reference and the agent's queries read-only on
    that EHR database (as pre-labelling does in a workspace with one); without, it compares
    structure and the recorded observations."""
    missing = sorted(set(gold) - set(trajectories))
    if missing:
        raise ValueError(
            f"{len(missing)} labelled trajectories are not among the failures read "
            f"(first: {missing[0]}); ids must match what 'faillab import' assigns"
        )
    labeller = HeuristicLabeller(ehr_path=ehr_path)
    ids = sorted(gold)
    found: dict[str, Findings] = {i: findings(trajectories[i], labeller) for i in ids}
    heuristic = {
        i: (f.heuristic_category, f.heuristic_step, f.heuristic_confidence > FALLBACK_CONFIDENCE)
        for i, f in found.items()
    }
    finder: dict[str, tuple[str, int | None, bool]] = {}
    for i, f in found.items():
        cat = f.evidence.get("category")
        step = f.evidence.get("step")
        finder[i] = (str(cat) if cat else NONE, step if isinstance(step, int) else None,
                     bool(cat))
    predicted: dict[str, dict[str, tuple[str, int | None, bool]]] = {
        "heuristic": heuristic, "finder": finder}
    result: dict[str, Any] = {
        "items": len(ids),
        "executed": sum(1 for f in found.values() if f.evidence.get("executed")),
        "heuristic": agreement(heuristic, gold).to_dict(),
        "finder": agreement(finder, gold).to_dict(),
    }
    for name, stored_labels in (stored or {}).items():
        result[name] = agreement(stored_labels, gold).to_dict()
    if embedder is not None:
        texts = [failure_text(trajectories[i], found[i]) for i in ids]
        vectors = embedder.embed(texts)
        matrix = feature_matrix([evidence_features(trajectories[i], found[i]) for i in ids],
                                vectors)
        groups = [str(trajectories[i].task.id) for i in ids]
        proposals = cross_validated(matrix, [gold[i].category for i in ids], groups)
        folds = min(FOLDS, len(set(groups)))
        classifier = {
            i: (p.category, found[i].evidence.get("step") if isinstance(
                found[i].evidence.get("step"), int) else found[i].heuristic_step, True)
            for i, p in zip(ids, proposals, strict=True)
        }
        result["classifier"] = agreement(classifier, gold).to_dict()
        result["classifier"]["embedder"] = embedder.name
        result["classifier"]["validation"] = f"grouped by task, {folds} folds"
        predicted["classifier"] = classifier
        # Leave one task out: every fold's model trains on all the other tasks, the largest
        # training set grouped validation allows; the figure to quote for a learned labeller.
        loto = cross_validated(matrix, [gold[i].category for i in ids], groups, folds=None)
        classifier_loto = {i: (p.category, classifier[i][1], True)
                           for i, p in zip(ids, loto, strict=True)}
        result["classifier_loto"] = agreement(classifier_loto, gold).to_dict()
        result["classifier_loto"]["validation"] = "leave one task out"
        predicted["classifier_loto"] = classifier_loto
        # Whole-cluster labels against item labels, on the clustering the Clusters page uses.
        from opinions.clusters.accuracy import cluster_label_accuracy
        from opinions.clusters.cluster import cluster_embeddings

        clusters = cluster_embeddings(ids, vectors, distance=embedder.default_distance)
        result["clusters"] = cluster_label_accuracy(
            clusters, {i: gold[i].category for i in ids},
            {i: (c if c != NONE else None) for i, (c, _, _) in finder.items()})
        result["clusters"]["distance"] = embedder.default_distance
    result["halves"] = _halves(predicted, gold, trajectories)
    for name, got in predicted.items():
        result[name]["confusion"] = confusion(got, gold)
    return result


def confusion(
    predicted: Mapping[str, tuple[str, int | None, bool]], gold: Mapping[str, GoldLabel]
) -> dict[str, dict[str, int]]:
    """Gold category -> predicted category -> items: where a labeller's errors go."""
    out: dict[str, dict[str, int]] = {}
    for i, label in gold.items():
        got = predicted.get(i, (NONE, None, False))[0]
        row = out.setdefault(label.category, {})
        row[got] = row.get(got, 0) + 1
    return {want: dict(sorted(row.items())) for want, row in sorted(out.items())}


def _halves(
    predicted: Mapping[str, Mapping[str, tuple[str, int | None, bool]]],
    gold: Mapping[str, GoldLabel], trajectories: Mapping[str, Trajectory],
) -> dict[str, Any]:
    """The same figures on the development and the held-out half (split by task id hash,
    :func:`opinions.learn.evalset.split_halves`): a rule designed on the development half
    has to hold on the other one."""
    task = {i: str(trajectories[i].task.id) for i in gold}
    halves = split_halves(task[i] for i in gold)
    out: dict[str, Any] = {}
    for half in (DEV, HELD_OUT):
        part = {i: g for i, g in gold.items() if halves[task[i]] == half}
        out[half] = {"items": len(part)}
        for name, got in predicted.items():
            out[half][name] = agreement(got, part).to_dict() if part else None
    return out


def check_floors(figures: Mapping[str, Any], floors: Mapping[str, Any],
                 tolerance: float = TOLERANCE, prefix: str = "") -> list[str]:
    """Every figure that fell below its floor by more than ``tolerance``, as readable lines.
    Nested groups (the development and held-out halves) are checked the same way, so a
    regression on the held-out half cannot hide behind a gain on the development half."""
    problems: list[str] = []
    for labeller, wanted in floors.items():
        if not isinstance(wanted, Mapping):
            continue
        name = f"{prefix}{labeller}"
        got = figures.get(labeller)
        if not isinstance(got, Mapping):
            problems.append(f"{name}: no figures")
            continue
        if not any(key in wanted for key in FLOOR_KEYS):
            problems += check_floors(got, wanted, tolerance, prefix=f"{name}.")
            continue
        for key in FLOOR_KEYS:
            if key not in wanted:
                continue
            value = got.get(key)
            if not isinstance(value, (int, float)) or math.isnan(float(value)):
                problems.append(f"{name}.{key}: missing")
            elif float(value) < float(wanted[key]) - tolerance:
                problems.append(f"{name}.{key}: {value:.4f} < floor {wanted[key]:.4f}")
    return problems
