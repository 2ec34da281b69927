"""Failure shares with the machine's labels corrected by its measured confusion: checked
against a simulated labeller whose confusion is known, and through the registry."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis.corrected import (
    BOOTSTRAP,
    MACHINE,
    UNKNOWN,
    WILSON,
    corrected_distribution,
    simplex_least_squares,
    with_machine_category,
)
from analysis.failures import failure_distribution
from analysis.tables import STATISTICS, TableOptions, compute

CATS = ["answer_format_error", "semantic_misunderstanding", "sql_logic_error"]
TRUE_SHARES = np.array([0.5, 0.3, 0.2])
# People's category (row) -> the machine's (column): it calls 40% of the semantic failures
# and 30% of the SQL logic errors answer format errors, so its raw shares inflate that one.
CONFUSION = np.array([[0.9, 0.05, 0.05],
                      [0.4, 0.5, 0.1],
                      [0.3, 0.1, 0.6]])


def _world(n_machine: int, n_people: int, n_checked: int, seed: int = 0
           ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """One model's failures: some labelled by people, the rest by a simulated labeller with
    ``CONFUSION``; ``n_checked`` people-labelled items also carry the machine's label."""
    rng = np.random.default_rng(seed)
    n = n_machine + n_people
    truth = rng.choice(3, n, p=TRUE_SHARES)
    said = np.array([rng.choice(3, p=CONFUSION[t]) for t in truth])
    ids = [f"t{i}" for i in range(n)]
    df = pd.DataFrame({"id": ids, "run": "r1", "model": "m1", "task_id": ids,
                       "success": False, "n_turns": 3})
    is_machine = np.arange(n) < n_machine
    labels = pd.DataFrame({
        "trajectory_id": ids,
        "category": [CATS[s] if m else CATS[t] for s, t, m in zip(said, truth, is_machine,
                                                                 strict=True)],
        "provenance": np.where(is_machine, "llm_only", "human_single"),
    })
    checked = np.flatnonzero(~is_machine)[:n_checked]
    pairs = pd.DataFrame({"trajectory_id": [ids[i] for i in checked],
                          "llm_category": [CATS[said[i]] for i in checked],
                          "human_category": [CATS[truth[i]] for i in checked]})
    return df, labels, pairs


def _by_category(table: pd.DataFrame) -> pd.DataFrame:
    names = dict(zip(CATS, ["Answer Format Error", "Semantic Misunderstanding",
                            "SQL Logic Error"], strict=True))
    return table.set_index("category").loc[[names[c] for c in CATS]]


def test_the_correction_recovers_a_simulated_labellers_true_shares() -> None:
    df, labels, pairs = _world(n_machine=4000, n_people=800, n_checked=800)
    table = _by_category(corrected_distribution(df, with_machine_category(labels, pairs)))
    assert (table["interval"] == BOOTSTRAP).all()
    assert table["share"].to_numpy() == pytest.approx(TRUE_SHARES, abs=0.03)
    assert ((table["ci_low"] <= TRUE_SHARES) & (table["ci_high"] >= TRUE_SHARES)).all()
    assert table["machine_share"].iloc[0] == pytest.approx(4000 / 4800)
    assert table["checked"].iloc[0] == 800
    assert table["share"].sum() == pytest.approx(1.0)
    # Not vacuous: counting the machine's labels as they are is off by more than the error.
    naive = _by_category(failure_distribution(df, labels))
    assert np.max(np.abs(naive["share"].to_numpy() - TRUE_SHARES)) > 0.08


def test_the_interval_narrows_with_more_checked_items() -> None:
    df, labels, pairs = _world(n_machine=2000, n_people=600, n_checked=40, seed=1)
    few = corrected_distribution(df, with_machine_category(labels, pairs))
    df, labels, pairs = _world(n_machine=2000, n_people=600, n_checked=600, seed=1)
    many = corrected_distribution(df, with_machine_category(labels, pairs))
    # The unchecked items inform the confusion too (the likelihood reads them), so the
    # checks are not the only source: 40 instead of 600 widens the interval by a quarter.
    assert (few["ci_high"] - few["ci_low"]).mean() > 1.15 * (many["ci_high"]
                                                           - many["ci_low"]).mean()


def test_the_estimator_is_exact_on_the_population_and_clips_to_the_simplex() -> None:
    observed = CONFUSION.T @ TRUE_SHARES
    assert simplex_least_squares(CONFUSION, observed) == pytest.approx(TRUE_SHARES, abs=1e-6)
    # A machine distribution the confusion cannot produce from any true one: plain inversion
    # gives a negative share; the estimate stays a distribution.
    impossible = np.array([0.0, 0.05, 0.95])
    assert np.linalg.solve(CONFUSION.T, impossible).min() < 0
    p = simplex_least_squares(CONFUSION, impossible)
    assert p.min() >= 0 and p.sum() == pytest.approx(1.0)


def test_unchecked_machine_labels_are_unknown_and_people_alone_are_wilson() -> None:
    df, labels, pairs = _world(n_machine=50, n_people=30, n_checked=0)
    unknown = corrected_distribution(df, with_machine_category(labels, pairs))
    assert (unknown["interval"] == UNKNOWN).all() and unknown["share"].isna().all()
    assert unknown["machine"].sum() == 50 and unknown["people"].sum() == 30
    people_only = labels[labels["provenance"] == "human_single"]
    table = corrected_distribution(df, with_machine_category(people_only, pairs))
    plain = failure_distribution(df, people_only)
    merged = table.merge(plain, on=["model", "category"], suffixes=("", "_plain"))
    assert (table["interval"] == WILSON).all() and len(merged) == 3
    for column in ("share", "ci_low", "ci_high"):
        assert merged[column].to_numpy() == pytest.approx(merged[f"{column}_plain"].to_numpy())


def test_the_registry_entry_reads_labels_and_pairs_and_ignores_the_label_policy() -> None:
    df, labels, pairs = _world(n_machine=300, n_people=200, n_checked=200, seed=2)
    statistic = STATISTICS["taxonomy_corrected"]
    assert not statistic.counts_labels_by_policy
    direct = corrected_distribution(df, with_machine_category(labels, pairs))
    for policy in ("human-confirmed", "all"):
        via = compute("taxonomy_corrected", df, labels, pairs, TableOptions(label_policy=policy))
        pd.testing.assert_frame_equal(via, direct)
    assert MACHINE not in labels.columns  # the caller's frame is left as it was


def test_a_model_nobody_checked_is_corrected_by_another_models_checks() -> None:
    """The confusion is the labeller's, whatever the model: checks made on one model's failures
    correct another model's machine labels, though the two fail in different proportions
    (reading the checks the other way, as P(people | machine), would carry the first model's
    proportions over)."""
    df_a, labels_a, pairs = _world(n_machine=1000, n_people=1000, n_checked=1000, seed=3)
    rng = np.random.default_rng(4)
    other = np.array([0.1, 0.2, 0.7])
    truth = rng.choice(3, 3000, p=other)
    said = [CATS[rng.choice(3, p=CONFUSION[t])] for t in truth]
    ids = [f"b{i}" for i in range(3000)]
    df = pd.concat([df_a, pd.DataFrame({"id": ids, "run": "r2", "model": "m2", "task_id": ids,
                                        "success": False, "n_turns": 3})])
    labels = pd.concat([labels_a, pd.DataFrame({"trajectory_id": ids, "category": said,
                                                "provenance": "llm_only"})])
    table = corrected_distribution(df, with_machine_category(labels, pairs))
    m2 = _by_category(table[table["model"] == "m2"])
    assert m2["machine_share"].iloc[0] == 1.0
    assert m2["share"].to_numpy() == pytest.approx(np.bincount(truth) / 3000, abs=0.03)
