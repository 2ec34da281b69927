"""The evaluation set, the agreement figures and their floors."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from opinions.learn import (
    agreement,
    check_floors,
    evaluate_labellers,
    failed_trajectories,
    without_reference_sql,
)
from opinions.learn.evalset import EvalSetError, GoldLabel, load_gold
from opinions.learn.rerank import rerank_queue
from tests.support import EHRSQL_SQLITE, REAL_TRAJECTORIES, REPO, require_shared

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


def test_confusion_says_where_each_gold_category_went() -> None:
    from opinions.learn.evaluate import NONE, confusion

    gold = _gold(("a", "x", 1), ("b", "x", 2), ("c", "y", 3), ("d", "y", None))
    got = confusion({"a": ("x", 1, True), "b": ("y", 2, True), "c": ("y", 3, True)}, gold)
    assert got == {"x": {"x": 1, "y": 1}, "y": {NONE: 1, "y": 1}}


def test_leave_one_task_out_never_proposes_from_the_task_itself() -> None:
    import numpy as np

    from opinions.learn.classifier import FeatureMatrix, cross_validated

    # Three tasks, one category each, features that name the category outright: a model that
    # had seen a task would get it right; one trained on the other tasks cannot know its label.
    labels = ["x"] * 4 + ["y"] * 4 + ["z"] * 4
    groups = ["t1"] * 4 + ["t2"] * 4 + ["t3"] * 4
    onehot = {"x": [1.0, 0.0, 0.0], "y": [0.0, 1.0, 0.0], "z": [0.0, 0.0, 1.0]}
    matrix = FeatureMatrix(np.asarray([onehot[c] for c in labels]), 3)
    proposals = cross_validated(matrix, labels, groups, folds=None)
    assert len(proposals) == 12
    assert all(p.category != want for p, want in zip(proposals, labels, strict=True))


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
    # The halves are floored too: a held-out drop is reported even when the total holds.
    halves = {"halves": {"dev": {"finder": {"kappa": 0.4}}, "held_out": {"finder": {"kappa": 0.2}}}}
    got = {"halves": {"dev": {"finder": {"kappa": 0.6}}, "held_out": {"finder": {"kappa": 0.1}}}}
    assert check_floors(got, halves) == ["halves.held_out.finder.kappa: 0.1000 < floor 0.2000"]
    assert check_floors({"halves": {"dev": {"finder": {"kappa": 0.4}}}}, halves) == [
        "halves.held_out: no figures"]


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


def test_committed_labels_are_the_passes_and_their_adjudication() -> None:
    gold = load_gold(EVAL_DIR / "adjudicated.csv")
    with (EVAL_DIR / "passes.csv").open(newline="") as fh:
        passes = list(csv.DictReader(fh))
    by_rater: dict[str, dict[str, str]] = {}
    for row in passes:
        assert row["source"] == "human"
        by_rater.setdefault(row["annotator"], {})[row["trajectory_id"]] = row["category"]
    # Two passes by the team, one by an independent annotator; each labels every failure.
    assert set(by_rater) == {"dev_a", "dev_b", "dev_c"}
    assert all(set(labels) == set(gold) for labels in by_rater.values())
    assert len(gold) == 95
    # Adjudication chooses between the passes; it never invents a category none of them gave.
    for tid, label in gold.items():
        assert label.category in {labels[tid] for labels in by_rater.values()}, tid


def test_gold_ids_are_the_ids_import_assigns() -> None:
    files = sorted(require_shared(REAL_TRAJECTORIES).glob("*.json"))
    failures = failed_trajectories(files)
    gold = load_gold(EVAL_DIR / "adjudicated.csv")
    assert set(gold) == set(failures)


def test_figures_do_not_fall_below_the_committed_floors() -> None:
    """Recompute every figure from the trajectories and compare with floors.json (written by
    'faillab evaluate --write-floors'); improvements pass, drops beyond the tolerance fail."""
    from opinions.clusters.embed import TfidfEmbedder

    files = sorted(require_shared(REAL_TRAJECTORIES).glob("*.json"))
    gold = load_gold(EVAL_DIR / "adjudicated.csv")
    floors = json.loads((EVAL_DIR / "floors.json").read_text())
    # The floors were written with the finder executing on EHRSQL's database ('--db'); the
    # figures are recomputed the same way, so a finder or classifier change that only helps
    # without execution cannot hide a regression with it.
    assert floors["ehr_db"] == EHRSQL_SQLITE.name
    figures = evaluate_labellers(failed_trajectories(files), gold, TfidfEmbedder(),
                                 ehr_path=require_shared(EHRSQL_SQLITE))
    assert figures["items"] == floors["items"] == 95
    assert figures["executed"] == floors["executed"] > 0
    assert check_floors(figures, floors) == []


def test_figures_without_reference_sql_do_not_fall_below_their_floors() -> None:
    """The same 95 failures with every reference SQL removed (a benchmark that ships answers
    and no queries): the heuristic's figures, executed on the database, against the floors
    written by 'faillab evaluate --without-reference'."""
    files = sorted(require_shared(REAL_TRAJECTORIES).glob("*.json"))
    gold = load_gold(EVAL_DIR / "adjudicated.csv")
    floors = json.loads((EVAL_DIR / "floors_without_reference.json").read_text())
    assert floors["reference_sql"] is False and floors["ehr_db"] == EHRSQL_SQLITE.name
    failures = without_reference_sql(failed_trajectories(files))
    assert all(t.task.reference_sql is None for t in failures.values())
    figures = evaluate_labellers(failures, gold, ehr_path=require_shared(EHRSQL_SQLITE))
    assert figures["items"] == floors["items"] == 95
    assert check_floors({k: figures[k] for k in ("heuristic", "finder")},
                        {k: floors[k] for k in ("heuristic", "finder")}) == []


def test_embedding_block_is_not_standardised_per_column() -> None:
    """Evidence columns are standardised, the embedding passes through as the embedder made it:
    a tiny embedding column keeps its small scale, where per-column scaling would blow it up to
    the weight of the finder's verdict."""
    import numpy as np

    from opinions.learn.classifier import _model, feature_matrix

    feats = [{"finder=x": float(i % 2), "steps": float(i)} for i in range(12)]
    emb = np.array([[0.001 * (i % 3)] for i in range(12)])
    fm = feature_matrix(feats, emb)
    assert fm.evidence_columns == 2 and fm.values.shape == (12, 3)
    scaler = _model(fm.evidence_columns)[0].fit(fm.values)
    out = scaler.transform(fm.values)
    assert np.allclose(out[:, :2].std(axis=0), 1.0)
    assert np.allclose(out[:, 2], emb[:, 0])


def test_propose_learns_from_labelled_rows_only() -> None:
    from opinions.learn.classifier import MIN_LABELS, feature_matrix, propose

    feats = [{"finder=a": 1.0} if i % 2 else {"finder=b": 1.0} for i in range(14)]
    fm = feature_matrix(feats, None)
    labelled = {i: ("A" if i % 2 else "B") for i in range(MIN_LABELS)}
    out = propose(fm, labelled)
    assert len(out) == 14
    assert [p.category for p in out[MIN_LABELS:]] == ["B", "A", "B", "A"]
    with pytest.raises(ValueError, match="at least"):
        propose(fm, {i: labelled[i] for i in range(MIN_LABELS - 1)})
