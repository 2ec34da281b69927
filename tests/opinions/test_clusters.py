"""Clustering look-alike failures and labelling a cluster in one decision."""

from __future__ import annotations

import numpy as np
import pytest

from labeling.store import Store
from opinions.clusters import (
    TfidfEmbedder,
    cluster_embeddings,
    cluster_title,
    label_cluster,
    shared_words,
)
from opinions.clusters.build import ItemSummary
from opinions.clusters.cluster import Cluster


def _unit(*rows: list[float]) -> np.ndarray:
    m = np.asarray(rows, dtype=float)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def test_near_vectors_cluster_and_far_ones_stay_apart() -> None:
    vectors = _unit([1, 0, 0], [0.99, 0.05, 0], [0.98, 0.1, 0], [0, 0, 1])
    got = cluster_embeddings(["a", "b", "c", "d"], vectors, distance=0.3)
    assert [sorted(c.members) for c in got] == [["a", "b", "c"], ["d"]]
    assert got[0].outliers == []
    assert [c.cluster_id for c in got] == [0, 1]


def test_a_loose_member_is_an_outlier() -> None:
    vectors = _unit([1, 0], [1, 0.02], [1, 0.9])
    got = cluster_embeddings(["a", "b", "c"], vectors, distance=0.5, outlier_similarity=0.95)
    assert len(got) == 1
    assert got[0].outliers == ["c"]
    assert sorted(got[0].core) == ["a", "b"]
    assert got[0].members[-1] == "c"  # closest to the centre first


def test_cluster_input_mismatch_is_refused() -> None:
    with pytest.raises(ValueError, match="2 ids but 1 vectors"):
        cluster_embeddings(["a", "b"], _unit([1, 0]), distance=0.3)


def test_tfidf_embedder_groups_like_texts_and_is_deterministic() -> None:
    texts = [
        "SELECT route FROM prescriptions WHERE drug = 'aspirin' no such column drug_name",
        "SELECT route FROM prescriptions WHERE drug = 'aspirin ' no such column drug_name",
        "SELECT gender FROM patients WHERE subject_id = 1",
        "SELECT gender FROM patients WHERE subject_id = 2",
    ]
    first = TfidfEmbedder().embed(texts)
    assert np.allclose(first, TfidfEmbedder().embed(texts))
    got = cluster_embeddings(["p1", "p2", "g1", "g2"], first, distance=0.3)
    assert sorted(sorted(c.members) for c in got) == [["g1", "g2"], ["p1", "p2"]]


def test_cluster_decision_labels_core_and_confirmed_outliers_only(team: Store) -> None:
    cluster = Cluster(4, ["t1", "t2", "t3", "t4"], outliers=["t3", "t4"])
    done = label_cluster(team, cluster, "wrong_table", annotator="lea", taxonomy_version="v1",
                         confirmed_outliers=["t4"], first_error_steps={"t2": 5},
                         seconds_on_cluster=9.0)
    assert done == ["t1", "t2", "t4"]
    labels = {t: team.labels.for_item(t, viewer="lea") for t in ["t1", "t2", "t3", "t4"]}
    assert labels["t3"] == []
    for tid in done:
        (only,) = labels[tid]
        assert only.source == "human" and only.annotator == "lea"
        assert only.note == "cluster decision: cluster 4 (4 items)"
        assert only.seconds_on_item == pytest.approx(3.0)
    assert labels["t2"][0].first_error_step == 5
    assert labels["t1"][0].first_error_step is None  # no guessed step


def test_a_cluster_decision_is_a_leads_or_on_the_annotators_own_items(team: Store) -> None:
    from labeling.store import PermissionDeniedError

    cluster = Cluster(7, ["t1", "t2", "t3"], outliers=[])
    team.queues.assign(["t1", "t2"], ["ana"], overlap=1)
    refused = r"cluster 7 is a lead.s: 1 of the 3 items are not assigned"
    with pytest.raises(PermissionDeniedError, match=refused):
        label_cluster(team, cluster, "wrong_table", annotator="ana", taxonomy_version="v1")
    assert all(team.labels.for_item(t, viewer="lea") == [] for t in ["t1", "t2", "t3"])
    mine = Cluster(8, ["t1", "t2"], outliers=[])
    assert label_cluster(team, mine, "wrong_table", annotator="ana",
                         taxonomy_version="v1") == ["t1", "t2"]


def test_cluster_decision_refuses_confirming_a_non_outlier(team: Store) -> None:
    cluster = Cluster(0, ["t1", "t2"], outliers=["t2"])
    with pytest.raises(ValueError, match="not outliers of cluster 0"):
        label_cluster(team, cluster, "wrong_table", annotator="ana", taxonomy_version="v1",
                      confirmed_outliers=["t1"])
    assert team.labels.for_item("t1", viewer="lea") == []


def test_cluster_label_accuracy_counts_core_members_of_real_clusters() -> None:
    from opinions.clusters.accuracy import cluster_label_accuracy
    from opinions.clusters.cluster import Cluster

    clusters = [Cluster(0, ["a", "b", "c", "x"], outliers=["x"]), Cluster(1, ["d", "e"]),
                Cluster(2, ["f"])]
    gold = {"a": "code", "b": "code", "c": "sem", "x": "sem", "d": "sql", "e": "sem", "f": "sem"}
    suggested = {"a": "sem", "b": "sem", "c": "sem", "d": "sql", "e": None, "f": "sem"}
    got = cluster_label_accuracy(clusters, gold, suggested)
    # Core members of clusters of two or more: a, b, c, d, e (x is an outlier, f a singleton).
    assert got["core_items"] == 5 and got["outliers"] == 1 and got["singletons"] == 1
    assert got["best_case"] == 3 / 5  # majority "code" for a, b; either one of d, e
    assert got["finder_majority"] == 2 / 5  # "sem" for a, b, c: c right; "sql" for d, e: d right
    assert got["finder_items"] == 2 / 5  # c and d


def _summary(tid: str, task: str, question: str) -> ItemSummary:
    return ItemSummary(trajectory_id=tid, task_id=task, question=question, divergence="",
                       suggested=None, step=None)


def test_a_cluster_is_titled_by_its_size_its_tasks_and_the_words_its_questions_share() -> None:
    items = {
        "a": _summary("a", "t1", "How old was patient 10146589 at the first admission?"),
        "b": _summary("b", "t2", "What was the age of patient 10000032 at admission?"),
        "c": _summary("c", "t2", "At admission, how old was patient 1003?"),
    }
    title = cluster_title(7, ["a", "b", "c"], items)
    # Three members of two tasks; "admission" is in every question, "old" in two; the words
    # every clinical question uses ("patient", "was", "the") describe nothing.
    assert title == "Cluster 7 · 3 items from 2 tasks · shared words: admission, old, age"
    assert "10146589" not in title
    assert shared_words(["the patient was", "what was it"]) == []
    assert cluster_title(1, ["x"], {"x": _summary("x", "t", "Was it?")}) == (
        "Cluster 1 · 1 item from 1 task")


def test_stored_evidence_spares_the_finder(monkeypatch: pytest.MonkeyPatch) -> None:
    import opinions.features as features
    from opinions.clusters import build_clusters, default_embedder
    from opinions.prelabel.heuristic import HeuristicLabeller
    from tests.support import make_trajectory
    from trajectories.evidence import find_divergence
    from trajectories.model import Step, StepKind

    failures = {}
    for i in range(4):
        traj = make_trajectory(
            steps=[Step(kind=StepKind.SQL, code=f"SELECT * FROM labs{i}", error=True,
                        observation=f"Catalog Error: Table labs{i} does not exist")],
            final_answer=None).with_id()
        failures[str(traj.id)] = traj
    labeller = HeuristicLabeller()
    stored = {tid: labeller.label(t, labeller.taxonomy.version).evidence
              or find_divergence(t).to_dict() for tid, t in failures.items()}
    fresh = build_clusters(failures, default_embedder("tfidf"))

    def no_finder(*args: object, **kwargs: object) -> object:
        raise AssertionError("the finder ran although the evidence was stored")

    monkeypatch.setattr(features, "find_divergence", no_finder)
    monkeypatch.setattr("opinions.prelabel.heuristic.find_divergence", no_finder)
    reused = build_clusters(failures, default_embedder("tfidf"), stored=stored)
    assert reused.items == fresh.items  # the same summaries, without running the finder
