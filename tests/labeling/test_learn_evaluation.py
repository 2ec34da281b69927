"""The evaluation set, the agreement figures and their floors."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from labeling.learn import agreement, check_floors, evaluate_labellers, failed_trajectories
from labeling.learn.evalset import EvalSetError, GoldLabel, load_gold
from labeling.learn.rerank import rerank_queue
from tests.support import REAL_TRAJECTORIES, REPO, require_shared

EVAL_DIR = REPO / "tests" / "data" / "ai612_eval"


def _gold(*rows: tuple[str, str, int | None]) -> dict[str, GoldLabel]:
    return {t: GoldLabel(t, c, s) for t, c, s in rows}


def test_agreement_counts_categories_steps_and_suggestions() -> None:
    gold = _gold(("a", "x", 3), ("b", "x", 5), ("c", "y", 2), ("d", "y", None))
    predicted = {
        "a": ("x", 3, True),   # right, step exact
        "b": ("y", 6, True),   # wrong, step within one
        "c": ("y", 9, False),  # right (a fallback guess), step off
        # d: no prediction at all
    }
    got = agreement(predicted, gold)
    assert got.n == 4
    assert got.accuracy == pytest.approx(2 / 4)
    assert got.step_pairs == 3  # d has no gold step and no predicted one
    assert got.step_exact == pytest.approx(1 / 4)
    assert got.step_within_1 == pytest.approx(2 / 4)
    assert got.suggested == pytest.approx(2 / 4)
    # kappa: observed 0.5; both raters' margins give chance agreement 0.5 on x/y plus the
    # '(none)' column, so kappa is below the raw agreement and above zero's floor of -1.
    assert -1.0 <= got.kappa < got.accuracy


def test_perfect_agreement_has_kappa_one() -> None:
    gold = _gold(("a", "x", 1), ("b", "y", 2), ("c", "z", 3))
    got = agreement({k: (v.category, v.first_error_step, True) for k, v in gold.items()}, gold)
    assert got.accuracy == 1.0 and got.kappa == pytest.approx(1.0) and got.step_exact == 1.0


def test_check_floors_reports_only_real_drops() -> None:
    floors = {"finder": {"accuracy": 0.5, "kappa": 0.3}, "items": 95}
    assert check_floors({"finder": {"accuracy": 0.49, "kappa": 0.31}}, floors) == []
    drops = check_floors({"finder": {"accuracy": 0.40, "kappa": math.nan}}, floors)
    assert drops == ["finder.accuracy: 0.4000 < floor 0.5000", "finder.kappa: missing"]
    assert check_floors({}, floors) == ["finder: no figures"]


def test_load_gold_refuses_bad_rows(tmp_path: Path) -> None:
    path = tmp_path / "gold.csv"
    path.write_text("trajectory_id,category,first_error_step\nt1,x,2\nt1,y,3\n")
    with pytest.raises(EvalSetError, match="line 3 repeats trajectory t1"):
        load_gold(path)
    path.write_text("trajectory_id,category,first_error_step\nt1,x,two\n")
    with pytest.raises(EvalSetError, match="'two' is not a number"):
        load_gold(path)


def test_rerank_puts_unsure_first_and_keeps_the_rest() -> None:
    assert rerank_queue(["a", "b", "c", "d"], {"b": 0.9, "c": 0.2}) == ["c", "b", "a", "d"]


def test_committed_labels_are_the_two_passes_and_their_adjudication() -> None:
    gold = load_gold(EVAL_DIR / "adjudicated.csv")
    with (EVAL_DIR / "passes.csv").open(newline="") as fh:
        passes = list(csv.DictReader(fh))
    by_rater: dict[str, set[str]] = {}
    for row in passes:
        assert row["source"] == "human"
        by_rater.setdefault(row["annotator"], set()).add(row["trajectory_id"])
    assert set(by_rater) == {"dev_a", "dev_b"}
    assert by_rater["dev_a"] == by_rater["dev_b"] == set(gold)
    assert len(gold) == 95


def test_gold_ids_are_the_ids_import_assigns() -> None:
    files = sorted(require_shared(REAL_TRAJECTORIES).glob("*.json"))
    failures = failed_trajectories(files)
    gold = load_gold(EVAL_DIR / "adjudicated.csv")
    assert set(gold) == set(failures)


def test_figures_do_not_fall_below_the_committed_floors() -> None:
    """Recompute every figure from the trajectories and compare with floors.json (written by
    'faillab evaluate --write-floors'); improvements pass, drops beyond the tolerance fail."""
    from labeling.clusters.embed import TfidfEmbedder

    files = sorted(require_shared(REAL_TRAJECTORIES).glob("*.json"))
    gold = load_gold(EVAL_DIR / "adjudicated.csv")
    figures = evaluate_labellers(failed_trajectories(files), gold, TfidfEmbedder())
    floors = json.loads((EVAL_DIR / "floors.json").read_text())
    assert figures["items"] == floors["items"] == 95
    assert check_floors(figures, floors) == []
