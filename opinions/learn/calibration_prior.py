"""The calibration prior: each offline labeller's confidence against the hand-labelled
development set (``tests/data/ai612_eval``), for a workspace where people have checked nothing.

``dev_observations`` labels the set's failures the way a workspace's pre-label run would (the
heuristic with the finder executing on the EHR database, the finder's own verdict, the
classifier's out-of-task proposals, since a workspace's classifier has never seen the item it
proposes for) and records, per item, each labeller's category, its raw confidence and whether
the gold agrees. ``fit_prior`` turns them into the shipped ``calibration_prior.json`` (the
maps and the observations they were fitted on, so the page can show the prior's own
reliability); ``python -m opinions.learn.calibration_prior TRAJECTORY_DIR GOLD.csv EHR_DB``
writes it again after a labeller changes.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from opinions.learn.calibration import (
    CLASSIFIER,
    FINDER,
    HEURISTIC,
    PRIOR_PATH,
    Observation,
    fit_labeller,
)
from opinions.learn.evalset import GoldLabel
from trajectories.model import Trajectory


def dev_observations(
    trajectories: Mapping[str, Trajectory], gold: Mapping[str, GoldLabel], *,
    ehr_path: Path | None = None,
) -> list[Observation]:
    """One observation per gold item and labeller (heuristic, finder, classifier): what it
    proposed, how sure it said it was, and whether the gold agrees. An item the finder leaves
    undecided gives the finder no observation (it proposed nothing to trust)."""
    from opinions.clusters.embed import TfidfEmbedder
    from opinions.features import evidence_features, failure_text, findings
    from opinions.learn.classifier import cross_validated, feature_matrix
    from opinions.prelabel.heuristic import HeuristicLabeller

    labeller = HeuristicLabeller(ehr_path=ehr_path)
    ids = sorted(gold)
    found = {i: findings(trajectories[i], labeller) for i in ids}
    out: list[Observation] = []
    for i in ids:
        f = found[i]
        want, task = gold[i].category, str(trajectories[i].task.id)
        out.append(Observation(HEURISTIC, f.heuristic_category, f.heuristic_confidence,
                               f.heuristic_category == want, i, task))
        cat, conf = f.evidence.get("category"), f.evidence.get("confidence")
        if cat and isinstance(conf, (int, float)):
            out.append(Observation(FINDER, str(cat), float(conf), cat == want, i, task))
    vectors = TfidfEmbedder().embed([failure_text(trajectories[i], found[i]) for i in ids])
    matrix = feature_matrix([evidence_features(trajectories[i], found[i]) for i in ids], vectors)
    groups = [str(trajectories[i].task.id) for i in ids]
    # Leave one task out: the classifier never proposes for a task it was fitted on.
    proposals = cross_validated(matrix, [gold[i].category for i in ids], groups, folds=None)
    for i, p, task in zip(ids, proposals, groups, strict=True):
        out.append(Observation(CLASSIFIER, p.category, p.confidence,
                               p.category == gold[i].category, i, task))
    return out


def fit_prior(observations: list[Observation], source: str) -> dict[str, Any]:
    """The shipped prior: per labeller, the fitted map and its counts, and where it came from."""
    by_labeller: dict[str, list[Observation]] = {}
    for o in observations:
        by_labeller.setdefault(o.labeller, []).append(o)
    return {
        "source": source,
        "labellers": {name: fit_labeller(obs).to_dict()
                      for name, obs in sorted(by_labeller.items())},
        "observations": [o.to_dict() for o in observations],
    }


def main(argv: list[str]) -> int:
    """``python -m opinions.learn.calibration_prior TRAJECTORY_DIR GOLD.csv [EHR_DB]``."""
    from opinions.learn.evalset import failed_trajectories, load_gold

    if len(argv) < 2:
        print(main.__doc__, file=sys.stderr)
        return 2
    files = sorted(Path(argv[0]).glob("*.json"))
    gold = load_gold(Path(argv[1]))
    ehr = Path(argv[2]) if len(argv) > 2 else None
    observations = dev_observations(failed_trajectories(files), gold, ehr_path=ehr)
    source = (f"{Path(argv[1]).parent.name}: {len(gold)} hand-labelled failures, finder "
              f"{'executed on ' + ehr.name if ehr else 'structural'}")
    PRIOR_PATH.write_text(json.dumps(fit_prior(observations, source), indent=1, sort_keys=True)
                          + "\n", encoding="utf-8")
    print(f"wrote {PRIOR_PATH}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
