"""A workspace's calibration: its people-checked items read from the store, the maps fitted
on them around the development prior, and the report the Agreement page and ``faillab stats
labeller`` show (reliability curve and calibration error, raw and calibrated).

People-checked: an item whose final label a person stands behind (adjudicated, agreed or a
single annotator: spot checks, confirmations and overrides alike) and that the labeller
labelled. Each stored pre-labeller counts apart (heuristic, Gemini, an OpenAI-compatible
server), the first-divergence finder through the evidence stored beside the heuristic's
pre-labels, imported LLM labels as ``llm``, and the classifier by grouped cross-validation
on the confirmed labels (``classifier_observations``), since its own proposals are not stored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from labeling.store.policy import OPERATOR, Viewer
from labeling.store.records import HUMAN_PROVENANCES
from opinions.learn.calibration import (
    CLASSIFIER,
    FINDER,
    IDENTITY,
    LLM,
    PRIOR_PATH,
    PRIOR_SD,
    Calibration,
    LabellerMap,
    Observation,
    canonical_labeller,
    expected_calibration_error,
    fit_calibration,
    fit_labeller,
    load_prior,
    out_of_sample,
    raw_probability,
    reliability,
)

if TYPE_CHECKING:
    from labeling.store import Store
    from trajectories.workspace import Workspace

WORKSPACE, DEVELOPMENT = "workspace", "development set"
ALL_CATEGORIES = "(all)"


def people_labels(store: Store, taxonomy_version: str | None = None,
                  viewer: Viewer = OPERATOR) -> dict[str, str]:
    """trajectory id -> the category a person stands behind (never LLM-only or disputed), as
    ``viewer`` may see it."""
    final = store.adjudications.final_labels(taxonomy_version, people_only=True, viewer=viewer)
    out: dict[str, str] = {}
    for row in final.to_dict("records"):
        if row["provenance"] in HUMAN_PROVENANCES and row["category"]:
            out[str(row["trajectory_id"])] = str(row["category"])
    return out


def workspace_observations(store: Store, taxonomy_version: str | None = None,
                           viewer: Viewer = OPERATOR) -> list[Observation]:
    """Every stored labeller's latest proposal on every people-checked item ``viewer`` may
    see (blind mode holds for the figures too: a lead's own open items are not in them)."""
    people = people_labels(store, taxonomy_version, viewer)
    latest: dict[tuple[str, str], tuple[str, float | None]] = {}
    for row in store.prelabels.successful(viewer):  # oldest first: later rows win
        tid = str(row["trajectory_id"])
        if tid not in people or (taxonomy_version is not None
                                 and row["taxonomy_version"] != taxonomy_version):
            continue
        # The store reports "labeller:model"; the calibration is per labeller.
        name = canonical_labeller(str(row["labeller"]).split(":", 1)[0])
        latest[(name, tid)] = (str(row["category"]), _number(row["confidence"]))
        evidence = row.get("evidence")
        if isinstance(evidence, dict) and evidence.get("category") \
                and "unreadable" not in evidence:
            latest[(FINDER, tid)] = (str(evidence["category"]),
                                     _number(evidence.get("confidence")))
    labels = store.labels.frame(taxonomy_version=taxonomy_version, viewer=viewer)
    for label in labels[labels["source"] == "llm"].to_dict("records"):  # oldest first
        tid = str(label["trajectory_id"])
        if tid in people:
            latest[(LLM, tid)] = (str(label["category"]), _number(label["confidence"]))
    return [Observation(name, cat, conf, cat == people[tid], tid)
            for (name, tid), (cat, conf) in sorted(latest.items())]


def _number(value: Any) -> float | None:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return None if out != out else out


def classifier_observations(ws: Workspace, store: Store, taxonomy_version: str | None = None,
                            viewer: Viewer = OPERATOR) -> list[Observation]:
    """The classifier's out-of-task proposals on the confirmed items (folds grouped by task,
    as its figures are measured), from the evidence stored beside the pre-labels; none below
    the classifier's minimum or with fewer than two tasks."""
    from labeling.pool import workspace_failures
    from opinions.learn.classifier import MIN_LABELS, cross_validated
    from opinions.learn.proposals import failure_features, stored_evidence

    people = people_labels(store, taxonomy_version, viewer)
    failures = {k: v for k, v in workspace_failures(ws).items() if k in people}
    groups = {k: str(t.task.id) for k, t in failures.items()}
    if len(failures) < MIN_LABELS or len(set(groups.values())) < 2 \
            or len({people[k] for k in failures}) < 2:
        return []
    features = failure_features(failures, stored_evidence(store.prelabels.successful(viewer)))
    ids = features.ids
    proposals = cross_validated(features.matrix, [people[i] for i in ids],
                                [groups[i] for i in ids])
    return [Observation(CLASSIFIER, p.category, p.confidence, p.category == people[i], i,
                        groups[i]) for i, p in zip(ids, proposals, strict=True)]


def workspace_calibration(store: Store, taxonomy_version: str | None = None, *,
                          extra: Sequence[Observation] = ()) -> Calibration:
    """The routing rule's input: every labeller's map on this workspace's checked items
    around the development prior (``extra``: observations computed elsewhere, e.g. the
    classifier's)."""
    return fit_calibration([*workspace_observations(store, taxonomy_version), *extra])


# --- the report ----------------------------------------------------------------------------


def _prior_observations() -> dict[str, list[Observation]]:
    import json

    if not PRIOR_PATH.exists():
        return {}
    data = json.loads(PRIOR_PATH.read_text(encoding="utf-8"))
    out: dict[str, list[Observation]] = {}
    for row in data.get("observations", []):
        o = Observation.from_dict(row)
        out.setdefault(o.labeller, []).append(o)
    return out


def calibration_report(observations: Sequence[Observation],
                       prior: Mapping[str, LabellerMap] | None = None,
                       development: Mapping[str, Sequence[Observation]] | None = None
                       ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(summary rows, reliability rows). Per labeller, measured on the workspace's checked
    items when it has any, else on the development set (where its prior was measured):

    - summary, one row per category the labeller proposed and an ``(all)`` row: items
      checked, share people agreed with, mean raw confidence, mean calibrated probability,
      and on the ``(all)`` row the calibration error (ECE) of the raw confidence and of the
      calibrated probability, the latter out of sample (each item scored by a map fitted
      without its fold), so fitting cannot flatter it;
    - reliability, per bin: items, mean prediction and observed agreement, raw and calibrated.
    """
    prior = load_prior() if prior is None else prior
    development = _prior_observations() if development is None else development
    grouped: dict[str, list[Observation]] = {}
    for o in observations:
        grouped.setdefault(canonical_labeller(o.labeller), []).append(o)
    summary: list[dict[str, Any]] = []
    curve: list[dict[str, Any]] = []
    for name in sorted(set(grouped) | set(prior)):
        obs = grouped.get(name) or list(development.get(name, []))
        if not obs:
            continue
        measured_on = WORKSPACE if name in grouped else DEVELOPMENT
        if measured_on == DEVELOPMENT:
            fitted, calibrated = fit_labeller(obs), out_of_sample(obs, None)
        else:
            # A labeller without a development prior (an LLM) is centred on its raw
            # confidence, with the workspace fit's weight, as fit_calibration does.
            centre = prior.get(name) or IDENTITY
            fitted = fit_labeller(obs, centre, PRIOR_SD)
            calibrated = out_of_sample(obs, centre)
        raw = [raw_probability(o) for o in obs]
        agreed = [o.agreed for o in obs]
        for kind, values in (("raw", raw), ("calibrated", calibrated)):
            for b in reliability(values, agreed):
                curve.append({"labeller": name, "measured_on": measured_on, "kind": kind,
                              "bin_low": b.low, "bin_high": b.high, "n": b.n,
                              "mean_predicted": b.mean_predicted, "observed": b.observed})
        categories = sorted({o.category for o in obs})
        for category in [ALL_CATEGORIES, *categories]:
            part = [o for o in obs if category in (ALL_CATEGORIES, o.category)]
            row: dict[str, Any] = {
                "labeller": name, "category": category, "measured_on": measured_on,
                "checked": len(part),
                "agreement": sum(o.agreed for o in part) / len(part),
                "mean_raw": sum(raw_probability(o) for o in part) / len(part),
                "mean_calibrated": sum(fitted.probability(o.category, o.confidence)
                                       for o in part) / len(part),
                "ece_raw": None, "ece_calibrated": None,
            }
            if category == ALL_CATEGORIES:
                row["ece_raw"] = expected_calibration_error(raw, agreed)
                row["ece_calibrated"] = expected_calibration_error(calibrated, agreed)
            summary.append(row)
    return summary, curve
