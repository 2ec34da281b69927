"""Agreement statistics against published worked examples and independent implementations."""

from __future__ import annotations

import math

import krippendorff
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from labeling.agreement import (
    OVERALL_ROW,
    binary_agreement,
    brennan_prediger,
    cohens_kappa,
    cohens_kappa_from_labels,
    confusion_matrix,
    fleiss_kappa,
    gwet_ac1,
    krippendorff_alpha_nominal,
    krippendorff_alpha_nominal_from_counts,
    labeller_vs_human,
    pabak,
    pairwise_cohens,
    raw_agreement,
)

NAN = float("nan")
GWET_TABLE = [[13, 0, 0], [0, 20, 7], [0, 4, 56]]
# Fleiss' kappa example on Wikipedia: 10 subjects, 14 raters, 5 categories.
FLEISS_WIKI = [
    [0, 0, 0, 0, 14],
    [0, 2, 6, 4, 2],
    [0, 0, 3, 5, 6],
    [0, 3, 9, 2, 0],
    [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0],
    [3, 2, 6, 3, 0],
    [2, 5, 3, 2, 2],
    [6, 5, 2, 1, 0],
    [0, 2, 2, 3, 7],
]
# The 3-coder x 15-unit reliability data from the `krippendorff` package's documentation.
KRIPP_DATA = [
    [NAN, NAN, NAN, NAN, NAN, 3, 4, 1, 2, 1, 1, 3, 3, NAN, 3],
    [1, NAN, 2, 1, 3, 3, 4, 3, NAN, NAN, NAN, NAN, NAN, NAN, NAN],
    [NAN, NAN, 2, 1, 3, 4, 4, NAN, 2, 1, 1, 3, 3, NAN, 4],
]


def _expand(table: list[list[int]]) -> tuple[list[int], list[int]]:
    """Turn a contingency table back into two aligned label sequences."""
    a: list[int] = []
    b: list[int] = []
    for i, row in enumerate(table):
        for j, count in enumerate(row):
            a += [i] * count
            b += [j] * count
    return a, b


# ---- Cohen's kappa --------------------------------------------------------------------------


def test_statsmodels_reference_kappa_and_ase() -> None:
    res = cohens_kappa([[0, 4, 1], [0, 8, 0], [0, 1, 5]])
    assert res.kappa == pytest.approx(0.4842, abs=5e-5)
    assert res.ase == pytest.approx(0.1380, abs=5e-5)
    assert res.ci_low == pytest.approx(res.kappa - 1.959964 * res.ase, abs=1e-6)
    assert res.ci_high == pytest.approx(res.kappa + 1.959964 * res.ase, abs=1e-6)
    assert res.n == 19


def test_sklearn_reference_kappa_and_cross_check() -> None:
    table = [[20, 20], [10, 50]]
    assert cohens_kappa(table).kappa == pytest.approx(0.348, abs=5e-4)
    a, b = _expand(table)
    assert cohens_kappa(table).kappa == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)


def test_kappa_from_labels_matches_sklearn_on_random_data() -> None:
    rng = np.random.default_rng(7)
    for _ in range(50):
        k = int(rng.integers(2, 6))
        a = rng.integers(0, k, 200).tolist()
        b = [x if rng.random() < 0.6 else int(rng.integers(0, k)) for x in a]
        ours = cohens_kappa_from_labels(a, b, list(range(k))).kappa
        assert ours == pytest.approx(cohen_kappa_score(a, b, labels=list(range(k))), abs=1e-12)


def test_kappa_undefined_when_single_category() -> None:
    res = cohens_kappa([[10, 0], [0, 0]])
    assert math.isnan(res.kappa) and math.isnan(res.ci_low) and math.isnan(res.ase)
    assert math.isnan(cohens_kappa_from_labels(["a"] * 5, ["a"] * 5).kappa)


def test_constant_rater_has_zero_kappa_without_warnings() -> None:
    with np.errstate(all="raise"):
        res = cohens_kappa([[2, 1], [0, 0]])
    assert res.kappa == 0.0 and res.ase == 0.0


@pytest.mark.parametrize("bad", [[[1, 2, 3]], [[0, 0], [0, 0]], [[1, -1], [0, 2]], [[1]]])
def test_bad_tables_rejected(bad: list[list[int]]) -> None:
    with pytest.raises(ValueError):
        cohens_kappa(bad)


# ---- Gwet's Handbook example ---------------------------------------------------------------


def test_gwet_handbook_three_categories() -> None:
    assert raw_agreement(GWET_TABLE) == pytest.approx(0.890, abs=5e-4)
    assert cohens_kappa(GWET_TABLE).kappa == pytest.approx(0.796, abs=5e-4)
    assert gwet_ac1(GWET_TABLE) == pytest.approx(0.849, abs=5e-4)
    assert brennan_prediger(GWET_TABLE) == pytest.approx(0.835, abs=5e-4)
    assert pabak(GWET_TABLE) == brennan_prediger(GWET_TABLE)


def test_brennan_prediger_is_pabak_for_two_categories() -> None:
    for table in ([[40, 9], [6, 45]], [[80, 10], [5, 5]], [[3, 4], [5, 6]]):
        p_o = raw_agreement(table)
        assert brennan_prediger(table) == pytest.approx(2 * p_o - 1)


# ---- binary agreement and the kappa paradox ------------------------------------------------


def test_kappa_paradox_pair() -> None:
    balanced = binary_agreement([[40, 9], [6, 45]])
    skewed = binary_agreement([[80, 10], [5, 5]])
    for r in (balanced, skewed):
        assert r.raw_agreement == pytest.approx(0.85)
        assert r.pabak == pytest.approx(0.70)
    assert balanced.cohens_kappa.kappa == pytest.approx(0.70, abs=5e-3)
    assert skewed.cohens_kappa.kappa == pytest.approx(0.32, abs=5e-3)
    assert balanced.kappa_paradox_note is None
    assert skewed.kappa_paradox_note is not None
    assert "0.32" in skewed.kappa_paradox_note and "85.0%" in skewed.kappa_paradox_note


def test_low_kappa_with_low_pabak_is_disagreement_not_the_paradox() -> None:
    # 60% raw agreement, most labels in one category: PABAK 0.20, kappa near zero.
    r = binary_agreement([[55, 20], [20, 5]], labels=("valid", "invalid"))
    assert r.pabak == pytest.approx(0.20)
    assert r.kappa_paradox_note is not None
    assert "not the kappa paradox" in r.kappa_paradox_note
    assert "PABAK 0.20" in r.kappa_paradox_note
    assert "This is the kappa paradox" not in r.kappa_paradox_note
    high = binary_agreement([[458, 17], [18, 7]], labels=("valid", "invalid"))
    assert high.kappa_paradox_note is not None
    assert "This is the kappa paradox" in high.kappa_paradox_note


def test_byrt_indices() -> None:
    r = binary_agreement([[80, 10], [5, 5]])
    assert r.prevalence_index == pytest.approx(abs(80 - 5) / 100)
    assert r.bias_index == pytest.approx(abs(10 - 5) / 100)
    assert r.positive_agreement == pytest.approx(160 / 175)
    assert r.negative_agreement == pytest.approx(10 / 25)


def test_ehr_complex_table_11() -> None:
    # 458 both valid, A valid/B invalid 17, A invalid/B valid 18, 7 both invalid.
    r = binary_agreement([[458, 17], [18, 7]], labels=("valid", "invalid"))
    assert r.n == 500 and r.n_agree == 465
    assert r.raw_agreement == pytest.approx(0.930)
    assert round(r.cohens_kappa.kappa, 2) == 0.25
    assert r.pabak == pytest.approx(0.86)
    assert (458 + 17) / r.n == pytest.approx(0.950)
    assert (458 + 18) / r.n == pytest.approx(0.952)
    assert r.kappa_paradox_note is not None and "'valid'" in r.kappa_paradox_note
    assert r.cohens_kappa.ci_low < r.cohens_kappa.kappa < r.cohens_kappa.ci_high
    assert r.gwet_ac1 > 0.9


def test_binary_requires_2x2() -> None:
    with pytest.raises(ValueError):
        binary_agreement(GWET_TABLE)


def test_undefined_kappa_note() -> None:
    r = binary_agreement([[0, 0], [0, 12]], labels=("valid", "invalid"))
    assert math.isnan(r.cohens_kappa.kappa)
    assert r.kappa_paradox_note is not None and "undefined" in r.kappa_paradox_note
    assert "'invalid'" in r.kappa_paradox_note


# ---- many raters ----------------------------------------------------------------------------


def _fleiss_by_hand(m: np.ndarray) -> float:
    n_raters = m.sum(axis=1)[0]
    p_j = m.sum(axis=0) / m.sum()
    p_i = (np.sum(m * m, axis=1) - n_raters) / (n_raters * (n_raters - 1))
    p_bar, p_e = p_i.mean(), np.sum(p_j**2)
    return float((p_bar - p_e) / (1 - p_e))


def test_fleiss_wikipedia() -> None:
    assert fleiss_kappa(FLEISS_WIKI) == pytest.approx(0.210, abs=5e-4)
    assert fleiss_kappa(FLEISS_WIKI) == pytest.approx(_fleiss_by_hand(np.array(FLEISS_WIKI)))


def test_fleiss_rejects_unequal_rater_counts() -> None:
    with pytest.raises(ValueError):
        fleiss_kappa([[1, 1], [2, 1]])


def test_krippendorff_reference_data() -> None:
    assert krippendorff_alpha_nominal(KRIPP_DATA) == pytest.approx(0.691, abs=5e-4)
    expected = krippendorff.alpha(reliability_data=KRIPP_DATA, level_of_measurement="nominal")
    assert krippendorff_alpha_nominal(KRIPP_DATA) == pytest.approx(expected, abs=1e-12)


def test_krippendorff_string_labels_and_none() -> None:
    mapping = {1: "low", 2: "mid", 3: "high", 4: "very high"}
    as_text = [[None if math.isnan(x) else mapping[int(x)] for x in row] for row in KRIPP_DATA]
    assert krippendorff_alpha_nominal(as_text) == pytest.approx(0.691358, abs=1e-6)


def test_krippendorff_from_counts_matches() -> None:
    # value counts per unit for the same data (values 1..4)
    counts = np.zeros((15, 4))
    for row in KRIPP_DATA:
        for u, x in enumerate(row):
            if not math.isnan(x):
                counts[u, int(x) - 1] += 1
    assert krippendorff_alpha_nominal_from_counts(counts) == pytest.approx(0.691358, abs=1e-6)


def test_krippendorff_on_10000_items_matches_package() -> None:
    rng = np.random.default_rng(3)
    truth = rng.integers(0, 4, 10_000)
    data = np.where(rng.random((5, 10_000)) < 0.8, truth, rng.integers(0, 4, (5, 10_000)))
    data = data.astype(float)
    data[rng.random((5, 10_000)) < 0.1] = np.nan
    ours = krippendorff_alpha_nominal(data)
    expected = krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")
    assert ours == pytest.approx(expected, abs=1e-9)


def test_krippendorff_undefined_for_one_value() -> None:
    assert math.isnan(krippendorff_alpha_nominal([[1, 1, 1], [1, 1, 1]]))


# ---- tables and pairs -----------------------------------------------------------------------


def test_confusion_matrix_layout() -> None:
    cm = confusion_matrix(["a", "a", "b"], ["a", "b", "b"], ["a", "b", "c"])
    assert list(cm.index) == ["a", "b", "c"] and list(cm.columns) == ["a", "b", "c"]
    assert cm.loc["a", "b"] == 1 and cm.loc["b", "b"] == 1 and cm.loc["c"].sum() == 0
    with pytest.raises(ValueError):
        confusion_matrix(["a"], ["z"], ["a", "b"])
    with pytest.raises(ValueError):
        confusion_matrix(["a"], ["a", "b"])


def test_pairwise_cohens_uses_shared_items_only() -> None:
    labels = {
        "bea": {"t1": "ok", "t2": "bad", "t3": "ok", "t4": "bad"},
        "al": {"t1": "ok", "t2": "bad", "t3": "bad", "t9": "ok"},
        "cy": {"t7": "ok"},
    }
    res = pairwise_cohens(labels)
    assert [(r.rater_a, r.rater_b) for r in res] == [("al", "bea"), ("al", "cy"), ("bea", "cy")]
    first = res[0]
    assert first.n_items == 3 and first.n_agree == 2
    assert first.kappa is not None
    assert first.kappa.kappa == pytest.approx(
        cohen_kappa_score(["ok", "bad", "bad"], ["ok", "bad", "ok"])
    )
    assert res[1].n_items == 0 and res[1].kappa is None and res[1].raw_agreement is None


def test_labeller_vs_human() -> None:
    pred = ["a", "a", "b", "b", "c", "c"]
    human = ["a", "b", "b", "b", "c", "a"]
    df = labeller_vs_human(pred, human, ["a", "b", "c"])
    assert list(df["category"]) == ["a", "b", "c", OVERALL_ROW]
    row_a = df.set_index("category").loc["a"]
    assert row_a["precision"] == pytest.approx(0.5) and row_a["recall"] == pytest.approx(0.5)
    assert row_a["support"] == 2
    row_b = df.set_index("category").loc["b"]
    assert row_b["precision"] == pytest.approx(1.0) and row_b["recall"] == pytest.approx(2 / 3)
    overall = df.set_index("category").loc[OVERALL_ROW]
    assert overall["override_rate"] == pytest.approx(2 / 6)
    assert df.attrs["override_rate"] == pytest.approx(2 / 6)
    assert df.attrs["kappa"] == pytest.approx(cohen_kappa_score(human, pred))
    with pytest.raises(ValueError):
        labeller_vs_human(["x"], ["a"], ["a"])


def test_labeller_vs_human_unpredicted_category_is_nan() -> None:
    df = labeller_vs_human(["a", "a"], ["a", "b"], ["a", "b"]).set_index("category")
    precision, recall = df["precision"].to_dict(), df["recall"].to_dict()
    assert math.isnan(precision["b"]) and recall["b"] == 0.0
