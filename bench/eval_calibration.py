"""Figures for docs/evaluation.md: calibrated confidence and corrected failure shares, measured
on the hand-labelled development set (``tests/data/ai612_eval``) through the observations the
shipped prior holds (``opinions/learn/calibration_prior.json``: each offline labeller's
category and raw confidence on the 95 failures, the finder executed on EHRSQL's database).

    .venv/bin/python bench/eval_calibration.py [--draws 200]

1. Calibration error (ECE, ten bins) of the raw confidence and of the calibrated probability,
   out of sample: five folds of whole tasks over all 95, and fitted on the development half
   only, scored on the held-out half. And what a 0.9 threshold would leave to the labeller:
   how many items clear it and how many of those people agree with.
2. Failure shares of the 95 when people check ``k`` random failures and the heuristic labels
   the rest: people's labels alone (Wilson), every label as it is, and the corrected estimate
   (``analysis.corrected``), against the gold shares of all 95: mean absolute error over the
   categories and how often the 95% interval holds the gold share.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from analysis.corrected import (  # noqa: E402
    corrected_counts,
    corrected_distribution,
    with_machine_category,
)
from analysis.failures import category_display_name, failure_distribution  # noqa: E402
from opinions.learn.calibration import (  # noqa: E402
    PRIOR_PATH,
    Observation,
    expected_calibration_error,
    fit_labeller,
    out_of_sample,
    raw_probability,
)
from opinions.learn.evalset import DEV, HELD_OUT, load_gold, split_halves  # noqa: E402


def calibration_figures(obs: list[Observation]) -> dict[str, object]:
    agreed = [o.agreed for o in obs]
    raw = [raw_probability(o) for o in obs]
    folds = out_of_sample(obs, None)
    halves = split_halves(o.group for o in obs)
    dev = [o for o in obs if halves[o.group] == DEV]
    held = [o for o in obs if halves[o.group] == HELD_OUT]
    fitted = fit_labeller(dev)
    held_cal = [fitted.probability(o.category, o.confidence) for o in held]
    held_raw = [raw_probability(o) for o in held]
    held_agreed = [o.agreed for o in held]

    def cleared(values: list[float], truth: list[bool]) -> str:
        picked = [t for v, t in zip(values, truth, strict=True) if v >= 0.9]
        return f"{sum(picked)}/{len(picked)}" if picked else "0/0"

    return {
        "n": len(obs), "agreement": sum(agreed) / len(obs),
        "ece_raw": expected_calibration_error(raw, agreed),
        "ece_cal_5fold": expected_calibration_error(folds, agreed),
        "held_n": len(held),
        "held_ece_raw": expected_calibration_error(held_raw, held_agreed),
        "held_ece_cal": expected_calibration_error(held_cal, held_agreed),
        ">=0.9 raw (all, 5-fold)": cleared(raw, agreed),
        ">=0.9 calibrated (all, 5-fold)": cleared(folds, agreed),
        ">=0.9 raw (held out)": cleared(held_raw, held_agreed),
        ">=0.9 calibrated (held out, dev fit)": cleared(held_cal, held_agreed),
    }


def _inversion(labels: pd.DataFrame, pairs: pd.DataFrame, cats: list[str]) -> pd.DataFrame:
    """The moment estimator alone (clipped least-squares inversion, the likelihood's start),
    as a share table, to compare with the likelihood."""
    index = {c: i for i, c in enumerate(cats)}
    people = np.zeros(len(cats))
    machine = np.zeros(len(cats))
    for cat, prov in zip(labels["category"], labels["provenance"], strict=True):
        (people if prov == "human_single" else machine)[index[cat]] += 1
    checks = np.zeros((len(cats), len(cats)))
    for want, said in zip(pairs["human_category"], pairs["llm_category"], strict=True):
        checks[index[want], index[said]] += 1
    share = corrected_counts(people, machine, checks) / (people.sum() + machine.sum())
    return pd.DataFrame({"category": [category_display_name(c) for c in cats], "share": share,
                         "ci_low": np.nan, "ci_high": np.nan})


def share_figures(machine: dict[str, str], gold: dict[str, str], k: int, draws: int
                  ) -> dict[str, float]:
    ids = sorted(gold)
    cats = sorted(set(gold.values()) | set(machine.values()))
    truth = pd.Series([gold[i] for i in ids]).value_counts(normalize=True)
    df = pd.DataFrame({"id": ids, "run": "r", "model": "m", "success": False, "n_turns": 1})
    rng = np.random.default_rng(0)
    errors: dict[str, list[float]] = {"people only": [], "all labels as they are": [],
                                      "corrected": [], "inversion only": []}
    covered: dict[str, list[bool]] = {"people only": [], "all labels as they are": [],
                                      "corrected": []}
    for _ in range(draws):
        checked = set(rng.choice(ids, size=k, replace=False).tolist())
        labels = pd.DataFrame({
            "trajectory_id": ids,
            "category": [gold[i] if i in checked else machine[i] for i in ids],
            "provenance": ["human_single" if i in checked else "llm_only" for i in ids]})
        pairs = pd.DataFrame({"trajectory_id": sorted(checked),
                              "llm_category": [machine[i] for i in sorted(checked)],
                              "human_category": [gold[i] for i in sorted(checked)]})
        tables = {
            "people only": failure_distribution(df, labels[labels["provenance"]
                                                           == "human_single"]),
            "all labels as they are": failure_distribution(df, labels),
            "corrected": corrected_distribution(df, with_machine_category(labels, pairs),
                                                draws=400),
            "inversion only": _inversion(labels, pairs, cats),
        }
        for name, table in tables.items():
            got = table.set_index("category")
            err = []
            for cat in cats:
                want = float(truth.get(cat, 0.0))
                name_cat = category_display_name(cat) if category_display_name(cat) in \
                    got.index else None
                share = float(got.loc[name_cat, "share"]) if name_cat is not None else 0.0
                err.append(abs(share - want))
                if name in covered and name_cat is not None:  # the inversion has no interval
                    low, high = got.loc[name_cat, "ci_low"], got.loc[name_cat, "ci_high"]
                    covered[name].append(bool(low - 1e-9 <= want <= high + 1e-9))
            errors[name].append(float(np.mean(err)))
    out = {f"MAE {n}": float(np.mean(v)) for n, v in errors.items()}
    out |= {f"coverage {n}": float(np.mean(v)) for n, v in covered.items()}
    return out


def heuristic_confusion(machine: dict[str, str], gold: dict[str, str], cats: list[str]
                        ) -> np.ndarray:
    """The heuristic's confusion on the 95 (people's category -> its), one pseudo-item on
    each row's diagonal."""
    counts = np.eye(len(cats))
    for i, want in gold.items():
        counts[cats.index(want), cats.index(machine[i])] += 1
    out: np.ndarray = counts / counts.sum(1, keepdims=True)
    return out


def simulated_figures(confusion: np.ndarray, truth: dict[str, float], n: int, k: int,
                      draws: int) -> dict[str, float]:
    """A workspace of ``n`` failures whose true shares are ``truth`` (another model's, not the
    development set's), labelled by a labeller with ``confusion``, ``k`` of them checked at
    random by people: the same estimates."""
    cats = sorted(truth)
    p = np.array([truth[c] for c in cats])
    rng = np.random.default_rng(1)
    ids = [f"s{i}" for i in range(n)]
    df = pd.DataFrame({"id": ids, "run": "r", "model": "m", "success": False, "n_turns": 1})
    errors: dict[str, list[float]] = {"people only": [], "all labels as they are": [],
                                      "corrected": [], "inversion only": []}
    covered: dict[str, list[bool]] = {name: [] for name in errors if name != "inversion only"}
    for _ in range(draws):
        true = rng.choice(len(cats), n, p=p)
        said = np.array([rng.choice(len(cats), p=confusion[t]) for t in true])
        checked = np.zeros(n, dtype=bool)
        checked[rng.choice(n, size=k, replace=False)] = True
        labels = pd.DataFrame({
            "trajectory_id": ids,
            "category": [cats[t] if c else cats[s] for t, s, c in zip(true, said, checked,
                                                                     strict=True)],
            "provenance": np.where(checked, "human_single", "llm_only")})
        pairs = pd.DataFrame({"trajectory_id": [ids[i] for i in np.flatnonzero(checked)],
                              "llm_category": [cats[said[i]] for i in np.flatnonzero(checked)],
                              "human_category": [cats[true[i]] for i in np.flatnonzero(checked)]})
        tables = {
            "people only": failure_distribution(df, labels[labels["provenance"]
                                                           == "human_single"]),
            "all labels as they are": failure_distribution(df, labels),
            "corrected": corrected_distribution(df, with_machine_category(labels, pairs),
                                                draws=400),
            "inversion only": _inversion(labels, pairs, cats),
        }
        for name, table in tables.items():
            got = table.set_index("category")
            err = []
            for j, cat in enumerate(cats):
                want = float(np.mean(true == j))
                shown = category_display_name(cat)
                share = float(got.loc[shown, "share"]) if shown in got.index else 0.0
                err.append(abs(share - want))
                if name in covered and shown in got.index:
                    low, high = got.loc[shown, "ci_low"], got.loc[shown, "ci_high"]
                    covered[name].append(bool(low - 1e-9 <= want <= high + 1e-9))
            errors[name].append(float(np.mean(err)))
    out = {f"MAE {name}": float(np.mean(v)) for name, v in errors.items()}
    out |= {f"coverage {name}": float(np.mean(v)) for name, v in covered.items()}
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--draws", type=int, default=200)
    args = parser.parse_args()
    data = json.loads(PRIOR_PATH.read_text(encoding="utf-8"))
    obs = [Observation.from_dict(o) for o in data["observations"]]
    print("## calibration")
    for name in ("heuristic", "finder", "classifier"):
        figures = calibration_figures([o for o in obs if o.labeller == name])
        print(name, json.dumps(figures))
    gold = {k: v.category for k, v in load_gold(REPO / "tests" / "data" / "ai612_eval"
                                                / "adjudicated.csv").items()}
    print("## shares (heuristic labels what people did not check)")
    machine = {o.item: o.category for o in obs if o.labeller == "heuristic"}
    for k in (10, 20, 40):
        print(k, json.dumps(share_figures(machine, gold, k, args.draws)))
    other = {"answer_format_error": 0.1, "medical_code_lookup_error": 0.15,
             "semantic_misunderstanding": 0.45, "sql_logic_error": 0.2, "stuck_in_loop": 0.1}
    cats = sorted(other)
    # A labeller that falls back to Semantic on three failures of four, as the heuristic did on
    # the LM Studio failures (28 of 31 pre-labels), and is right on the rest.
    fallback = np.full((len(cats), len(cats)), 0.0)
    fallback[:, cats.index("semantic_misunderstanding")] = 0.75
    fallback[np.arange(len(cats)), np.arange(len(cats))] += 0.25
    for title, confusion in (("the heuristic's confusion on the 95",
                              heuristic_confusion(machine, gold, cats)),
                             ("a Semantic fallback on 3 of 4", fallback)):
        print(f"## simulated workspace: 1,000 failures, another model's shares, {title}")
        for k in (30, 100):
            print(k, json.dumps(simulated_figures(confusion, other, 1000, k, args.draws // 4)))

if __name__ == "__main__":
    main()
