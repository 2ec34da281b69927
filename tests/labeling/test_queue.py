"""labeling.queue and labeling.rater_agreement: assignment of failures, per-user queues,
final-label filter, agreement inputs built from stored labels, the LLM against people."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest

from analysis.labeller import llm_vs_human
from analysis.sources import labeller_pairs
from labeling.agreement import cohens_kappa_from_labels, krippendorff_alpha_nominal
from labeling.queue import (
    create_assignments,
    failed_frame,
    ids_with_final_category,
    prelabel_for,
    queue_for,
    strata_for,
    stratum_of,
)
from labeling.rater_agreement import (
    latest_human_labels,
    multi_rater_summary,
    pair_confusion,
    pairwise_table,
)
from labeling.store import OPERATOR, Store, Viewer, open_store
from opinions.prelabel.base import LabelResult, PrelabelKey, PrelabelRecord
from tests.support import save_test_taxonomy
from trajectories.workspace import Workspace

KEYS = ["a", "b", "c"]


@pytest.fixture
def st_(tmp_path: Path) -> Iterator[Store]:
    store = open_store(f"sqlite:///{tmp_path / 'a.sqlite'}")
    save_test_taxonomy(store)
    for name in ("ana", "ben", "cai"):
        store.users.add(name)
    yield store
    store.close()


def prelabel(store: Store, tid: str, category: str, confidence: float,
             rationale: str = "step 1: because") -> None:
    store.prelabels.save(PrelabelRecord(
        PrelabelKey(tid, "v", "p", "m"),
        LabelResult(category, confidence, 1, rationale, "heuristic", "1")))


def test_stratum_of_keeps_missing_values() -> None:
    assert stratum_of("Labs", "patient") == "Labs x patient"
    assert stratum_of("Labs", None) == "Labs x unknown"
    assert stratum_of(None, float("nan")) == "unknown x unknown"


def test_assignments_cover_failures_with_stratified_overlap(st_: Store,
                                                            demo_workspace: Path) -> None:
    ws = Workspace(demo_workspace)
    frame = failed_frame(ws)
    assert len(frame) > 20
    created = create_assignments(st_, ws, ["ana", "ben"], overlap=2, double_share=0.5, seed=3)
    pairs = st_.queues.assignments()
    assert created == len(pairs)
    per_item = Counter(t for t, _, _ in pairs)
    assert set(per_item) == set(frame["id"])  # every failure, nothing else
    doubled = {t for t, n in per_item.items() if n == 2}
    strata = strata_for(frame)
    by_stratum = Counter(strata.values())
    doubled_by_stratum = Counter(strata[t] for t in doubled)
    for stratum, size in by_stratum.items():
        # The store rounds each stratum's share separately.
        assert doubled_by_stratum[stratum] == round(0.5 * size)
    # Idempotent: running again adds nothing.
    assert create_assignments(st_, ws, ["ana", "ben"], overlap=2, double_share=0.5,
                              seed=3) == 0


def test_queue_is_restricted_to_failures_and_ordered(st_: Store, demo_workspace: Path) -> None:
    ws = Workspace(demo_workspace)
    failed = list(failed_frame(ws)["id"])[:4]
    succeeded = [r["id"] for r in ws.list() if r["success"]][:1]
    st_.queues.assign([*failed, *succeeded], ["ana"], overlap=1)
    prelabel(st_, failed[2], "a", 0.2)  # low confidence: first
    prelabel(st_, failed[3], "a", 0.99)  # confident: only as a spot check
    queue = queue_for(st_, failed, "ana", prelabel_threshold=0.7, spot_check_share=0.0)
    assert queue[0] == failed[2]
    assert set(queue) == {failed[0], failed[1], failed[2]}
    assert succeeded[0] not in queue
    everything = queue_for(st_, failed, "ana", prelabel_threshold=0.7, spot_check_share=1.0)
    assert everything[-1] == failed[3]


def test_prelabel_for_includes_rationale(st_: Store) -> None:
    assert prelabel_for(st_, "t1", OPERATOR) == (None, False)
    prelabel(st_, "t1", "b", 0.6, rationale="step 4: wrong code")
    view, hidden = prelabel_for(st_, "t1", OPERATOR)
    assert view is not None and not hidden
    assert (view.category, view.confidence, view.rationale, view.labeller) == (
        "b", 0.6, "step 4: wrong code", "heuristic")


def test_prelabel_for_a_blind_annotator_is_hidden_until_they_commit(st_: Store) -> None:
    prelabel(st_, "t1", "b", 0.6, rationale="step 4: wrong code")
    blind = Viewer("ana", blind=True, hide_prelabel=True)
    assert prelabel_for(st_, "t1", blind) == (None, True)  # there is one; the page gets nothing
    assert st_.prelabels.opinion("t1", viewer=blind) is None
    assert prelabel_for(st_, "t2", blind) == (None, False)  # nothing to hide
    st_.labels.add("t1", "a", annotator="ana", taxonomy_version="v")
    view, hidden = prelabel_for(st_, "t1", blind)
    assert view is not None and view.category == "b" and not hidden


def test_ids_with_final_category(st_: Store) -> None:
    st_.labels.add("t1", "a", annotator="ana", taxonomy_version="v")
    st_.labels.add("t2", "b", annotator="ana", taxonomy_version="v")
    st_.labels.add("t3", "a", annotator="ana", taxonomy_version="v")
    st_.labels.add("t3", "b", annotator="ben", taxonomy_version="v")  # disputed: no category
    st_.labels.add("t4", "a", annotator=None, source="llm", confidence=0.9, taxonomy_version="v")
    assert ids_with_final_category(st_, "a") == ["t1", "t4"]
    assert ids_with_final_category(st_, ["a", "b"]) == ["t1", "t2", "t4"]
    st_.users.add("lea", "lead")
    st_.adjudications.decide("t3", "a", "reason", "lea", expected_version=None)
    assert ids_with_final_category(st_, "a") == ["t1", "t3", "t4"]


def label_all(store: Store, ratings: dict[str, dict[str, str]]) -> None:
    for who, items in ratings.items():
        for tid, cat in items.items():
            store.labels.add(tid, cat, annotator=who, taxonomy_version="v")


def test_agreement_from_stored_labels(st_: Store) -> None:
    ratings = {
        "ana": {"t1": "a", "t2": "b", "t3": "c", "t4": "a", "t5": "b"},
        "ben": {"t1": "a", "t2": "b", "t3": "a", "t4": "a", "t5": "c"},
        "cai": {"t1": "a", "t2": "c", "t3": "c", "t4": "a"},
    }
    label_all(st_, ratings)
    st_.labels.add("t5", "b", annotator="ben", taxonomy_version="v")  # supersedes "c"
    ratings["ben"]["t5"] = "b"
    st_.labels.add("t1", "c", annotator="ana", taxonomy_version="other")  # other rubric
    got = latest_human_labels(st_, "v")
    assert got == ratings
    pairs = pairwise_table(got).set_index(["rater_a", "rater_b"])
    expected = cohens_kappa_from_labels(
        [ratings["ana"][t] for t in sorted(ratings["ana"])],
        [ratings["ben"][t] for t in sorted(ratings["ana"])], KEYS)
    assert pairs.loc[("ana", "ben"), "n_items"] == 5
    assert pairs.loc[("ana", "ben"), "kappa"] == pytest.approx(expected.kappa)
    assert pairs.loc[("ana", "ben"), "ci_low"] == pytest.approx(expected.ci_low)
    assert pairs.loc[("ben", "cai"), "n_items"] == 4
    multi = multi_rater_summary(got, KEYS)
    assert (multi.raters, multi.items_rated_twice) == (3, 5)
    assert (multi.fleiss_items, multi.fleiss_raters_per_item) == (4, 3)
    assert multi.krippendorff_alpha == pytest.approx(krippendorff_alpha_nominal(
        [[got[r].get(t) for t in ("t1", "t2", "t3", "t4", "t5")] for r in sorted(got)]))
    assert multi.fleiss_kappa is not None and not math.isnan(multi.fleiss_kappa)
    matrix = pair_confusion(got, "ana", "ben", KEYS)
    assert int(matrix.to_numpy().sum()) == 5
    assert int(cast(int, matrix.loc["c", "a"])) == 1  # t3: ana c, ben a


def test_llm_vs_human_split_by_prelabel_exposure(st_: Store) -> None:
    for tid in ("t1", "t2", "t3"):
        prelabel(st_, tid, "a", 0.9)
    st_.labels.add("t1", "a", annotator="ana", taxonomy_version="v", prelabel_shown=True)
    st_.labels.add("t2", "a", annotator="ana", taxonomy_version="v", prelabel_shown=True)
    st_.labels.add("t3", "b", annotator="ben", taxonomy_version="v", prelabel_shown=False)
    st_.labels.add("t9", "b", annotator="ben", taxonomy_version="v")  # no LLM opinion: ignored
    out = llm_vs_human(labeller_pairs(st_, "v"), KEYS)
    assert set(out) == {"all", "pre-label shown", "pre-label hidden"}
    assert out["all"].attrs["n"] == 3
    assert out["all"].attrs["override_rate"] == pytest.approx(1 / 3)
    assert out["pre-label shown"].attrs["override_rate"] == 0.0
    assert out["pre-label hidden"].attrs["override_rate"] == 1.0
    row_a = out["all"].set_index("category").loc["a"]
    assert row_a["precision"] == pytest.approx(2 / 3)
    assert row_a["recall"] == 1.0


def test_take_unassigned_leaves_planned_items_alone(tmp_path: Path, demo_workspace: Path) -> None:
    import shutil

    from labeling.queue import failed_frame, take_unassigned
    from labeling.store import open_store
    from trajectories.workspace import Workspace

    root = tmp_path / "ws"
    shutil.copytree(demo_workspace, root)
    ws = Workspace(root)
    store = open_store(f"sqlite:///{root / 'annotations.sqlite'}")
    for name in ("lead", "solo"):
        store.users.ensure(name, "annotator")
    failed = [str(t) for t in failed_frame(ws)["id"]]
    store.queues.assign(failed[:5], ["lead"], overlap=1)
    assert take_unassigned(store, ws, "solo", 10) == 10
    mine = {tid for tid, user, _ in store.queues.assignments("solo")}
    assert len(mine) == 10 and not mine & set(failed[:5])
    assert mine <= set(failed)
    store.close()
