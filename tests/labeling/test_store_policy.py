"""The store's one policy: who sees which label, valid categories, roles, step provenance,
user upserts under concurrency, and pre-label run heartbeats."""

from __future__ import annotations

import multiprocessing
from datetime import timedelta

import pytest
from sqlalchemy import update
from sqlalchemy.orm import Session

from analysis.labeller import llm_vs_human
from analysis.sources import labeller_pairs
from labeling.queue import ids_with_final_category
from labeling.rater_agreement import latest_human_labels, step_agreement
from labeling.store import (
    OPERATOR,
    LabelImportError,
    NotFoundError,
    PermissionDeniedError,
    Store,
    StoreError,
    Viewer,
    export_labels,
    import_labels,
    open_store,
)
from labeling.store.models import PrelabelRunRow, utcnow
from labeling.store.policy import LEAD_ACTIONS
from labeling.store.records import HEARTBEAT_STALE_S
from opinions.prelabel.base import LabelResult, PrelabelKey, PrelabelRecord
from taxonomy.model import default_taxonomy
from tests.support import TEST_CATEGORY_KEYS

V = "v"
SECRET = "bad_join"  # ben's label: a blind annotator must never find it


def _seed(team: Store) -> None:
    team.labels.add("t1", "wrong_table", annotator="ana", taxonomy_version=V)
    team.labels.add("t1", SECRET, annotator="ben", taxonomy_version=V, note="ben's note")
    team.labels.add("t2", SECRET, annotator="ben", taxonomy_version=V)
    team.prelabels.save(PrelabelRecord(
        PrelabelKey("t3", V, "p1", "heuristic"),
        LabelResult(category="other", confidence=0.9, first_error_step=1, rationale="r",
                    labeller="heuristic", labeller_version="1"),
    ))


def _everything_ana_can_read(team: Store, ana: Viewer) -> str:
    """Every label read path, flattened to text, as `ana` sees it."""
    parts = [
        repr(team.labels.for_item("t1", viewer=ana)),
        repr(team.labels.for_item("t2", viewer=ana)),
        team.labels.frame(viewer=ana).to_csv(),
        repr(team.labels.all(ana)),
        team.adjudications.final_labels(viewer=ana).to_csv(),
        repr(team.adjudications.disagreements(viewer=ana, include_adjudicated=True)),
        repr(latest_human_labels(team, viewer=ana)),
        repr({k: v.to_csv()
              for k, v in llm_vs_human(labeller_pairs(team, viewer=ana),
                                       TEST_CATEGORY_KEYS).items()}),
        labeller_pairs(team, viewer=ana).to_csv(),
        export_labels(team, "csv", viewer=ana),
        export_labels(team, "jsonl", viewer=ana),
    ]
    return "\n".join(parts)


def test_blind_annotator_cannot_learn_anothers_label_on_any_read_path(team: Store) -> None:
    _seed(team)
    team.adjudications.decide("t2", SECRET, "clear", "lea", expected_version=None)
    ana = Viewer("ana", blind=True)
    seen = _everything_ana_can_read(team, ana)
    assert SECRET not in seen and "ben" not in seen and "ben's note" not in seen
    # Browse's failure-label filter: ana's own label and the pre-label only.
    assert ids_with_final_category(team, SECRET, viewer=ana) == []
    assert ids_with_final_category(team, "wrong_table", viewer=ana) == ["t1"]
    assert ids_with_final_category(team, "other", viewer=ana) == ["t3"]
    # The same reads as the operator (or with blind mode off) do show ben's work.
    assert ids_with_final_category(team, SECRET) == ["t2"]
    assert SECRET in _everything_ana_can_read(team, OPERATOR)
    assert SECRET in _everything_ana_can_read(team, Viewer("ana", blind=False))


def test_hidden_prelabel_shows_only_after_the_viewer_commits(team: Store) -> None:
    _seed(team)
    hidden = Viewer("ana", blind=True, hide_prelabel=True)
    assert ids_with_final_category(team, "other", viewer=hidden) == []
    team.labels.add("t3", "a", annotator="ana", taxonomy_version=V)
    assert ids_with_final_category(team, "a", viewer=hidden) == ["t3"]
    assert [p["trajectory_id"] for p in team.prelabels.successful(hidden)] == ["t3"]


def test_automatic_opinions_follow_the_prelabel_rule_for_every_kind_of_viewer(
        team: Store) -> None:
    """The pre-label and the evidence finder's suggestion: one store rule (`visible_items`)."""
    _seed(team)
    items = ["t1", "t2", "t3"]
    hidden = Viewer("ana", blind=True, hide_prelabel=True)
    # ana labelled t1 only: with the pre-label hidden until commit she sees opinions there only.
    assert team.prelabels.visible_items(items, hidden) == {"t1"}
    team.labels.add("t3", "a", annotator="ana", taxonomy_version=V)
    assert team.prelabels.visible_items(items, hidden) == {"t1", "t3"}
    # An undone label is no commitment: the opinion hides again.
    team.labels.retract_latest("t3", annotator="ana")
    assert team.prelabels.visible_items(items, hidden) == {"t1"}
    # Nobody signed in, and a name the store has not recorded yet, have labelled nothing.
    for stranger in (Viewer(None, blind=True, hide_prelabel=True),
                     Viewer("newcomer", blind=True, hide_prelabel=True)):
        assert team.prelabels.visible_items(items, stranger) == set()
    # Not hidden until commit: everyone sees them.
    assert team.prelabels.visible_items(items, Viewer("ana", blind=True)) == set(items)
    assert team.prelabels.visible_items(items, Viewer("ana", blind=False)) == set(items)
    # Hidden until commit and blind mode off: still hidden (blind mode is about colleagues).
    assert team.prelabels.visible_items(
        items, Viewer("newcomer", blind=False, hide_prelabel=True)) == set()
    assert team.prelabels.visible_items(
        items, Viewer(None, blind=False, hide_prelabel=True)) == set()
    assert team.prelabels.visible_items(
        items, Viewer("ana", blind=False, hide_prelabel=True)) == {"t1"}
    # A lead sees them, except on items assigned to them that they have not labelled, in
    # blind mode or not.
    team.queues.assign(["t2"], ["lea"], overlap=1)
    for blind in (True, False):
        assert team.prelabels.visible_items(
            items, Viewer("lea", blind=blind, hide_prelabel=True)) == {"t1", "t3"}


def test_hiding_the_prelabel_needs_no_blind_mode_on_any_read_path(team: Store) -> None:
    _seed(team)
    hidden = Viewer("ana", blind=False, hide_prelabel=True)
    # Blind mode off: colleagues' labels show...
    assert SECRET in _everything_ana_can_read(team, hidden)
    # ...but the pre-label on t3 (category "other", confidence 0.9) shows on no read path
    # until ana commits there.
    assert team.prelabels.opinion_for("t3", hidden) == (None, True)
    assert team.prelabels.successful(hidden) == []
    assert ids_with_final_category(team, "other", viewer=hidden) == []
    assert not [lab for lab in team.labels.for_item("t3", viewer=hidden) if lab.source == "llm"]
    team.labels.add("t3", "a", annotator="ana", taxonomy_version=V)
    assert [p["trajectory_id"] for p in team.prelabels.successful(hidden)] == ["t3"]


def test_nobody_signed_in_sees_no_human_label_in_blind_mode(team: Store) -> None:
    _seed(team)
    assert team.labels.frame(viewer=Viewer(None, blind=True)).empty
    assert team.labels.for_item("t1", viewer=None, blind=True) == []


def test_lead_who_annotates_is_blind_on_their_items_until_they_commit(team: Store) -> None:
    _seed(team)
    team.queues.assign(["t1"], ["lea"], overlap=1)
    lea = Viewer("lea", blind=True)
    assert [lab.annotator for lab in team.labels.for_item("t1", viewer=lea)] == []
    assert ids_with_final_category(team, ["wrong_table", SECRET], viewer=lea) == ["t2"]
    assert "t1" not in {d.trajectory_id for d in team.adjudications.disagreements(viewer=lea)}
    # Items they are not assigned to: a lead sees everything.
    assert [lab.annotator for lab in team.labels.for_item("t2", viewer=lea)] == ["ben"]
    team.labels.add("t1", "c", annotator="lea", taxonomy_version=V)
    seen = team.labels.for_item("t1", viewer=lea)
    assert [lab.annotator for lab in seen] == ["ana", "ben", "lea"]
    assert "t1" in {d.trajectory_id for d in team.adjudications.disagreements(viewer=lea)}


@pytest.mark.parametrize("bad", ["made_up", "Test bad_join", ""])
def test_invalid_category_is_refused_on_add_and_adjudicate(team: Store, bad: str) -> None:
    with pytest.raises(StoreError, match="category"):
        team.labels.add("t1", bad, annotator="ana", taxonomy_version=V)
    with pytest.raises(StoreError, match="category"):
        team.labels.add("t1", "a", annotator="ana", taxonomy_version=V,
                        secondary_category=bad or "x")
    team.labels.add("t1", "a", annotator="ana", taxonomy_version=V)
    with pytest.raises(StoreError, match="category"):
        team.adjudications.decide("t1", bad, "because", "lea", expected_version=None)
    assert team.adjudications.get("t1") is None
    assert [lab.category for lab in team.labels.all()] == ["a"]


def test_unknown_taxonomy_version_is_refused(team: Store) -> None:
    with pytest.raises(StoreError, match="unknown taxonomy version 'nope'"):
        team.labels.add("t1", "a", annotator="ana", taxonomy_version="nope")


def test_import_maps_display_names_to_keys_and_refuses_unknown_with_the_row(team: Store) -> None:
    tax = default_taxonomy()
    name = tax.categories[2].name
    text = f"trajectory_id,annotator,source,category\nt1,ana,human,{name}\n"
    assert import_labels(team, text, known_trajectory_ids={"t1", "t2"},
                         default_taxonomy_version=tax.version) == 1
    assert [lab.category for lab in team.labels.all()] == [tax.categories[2].key]
    bad = "trajectory_id,annotator,source,category\nt1,ana,human,a\nt2,ana,human,Wrong Thing\n"
    with pytest.raises(LabelImportError, match="row 2: unknown category 'Wrong Thing'"):
        import_labels(team, bad, known_trajectory_ids={"t1", "t2"}, default_taxonomy_version=V)
    assert len(team.labels.all()) == 1


def test_step_provenance_is_stored_and_step_agreement_uses_only_chosen_steps(
    team: Store,
) -> None:
    team.labels.add("t1", "a", annotator="ana", taxonomy_version=V, first_error_step=2)
    team.labels.add("t1", "a", annotator="ben", taxonomy_version=V, first_error_step=2,
                    step_from_prelabel=True)
    team.labels.add("t2", "a", annotator="ana", taxonomy_version=V, first_error_step=1)
    team.labels.add("t2", "a", annotator="ben", taxonomy_version=V, first_error_step=3)
    team.labels.add("t3", "a", annotator="ana", taxonomy_version=V)
    by = {(lab.trajectory_id, lab.annotator): lab for lab in team.labels.all()}
    assert by["t1", "ben"].step_from_prelabel and not by["t1", "ana"].step_from_prelabel
    assert by["t3", "ana"].first_error_step is None
    result = step_agreement(team)
    # t1 is left out (ben's step came from the pre-label), t3 has no step: one pair, t2.
    assert (result.pairs, result.agreeing, result.excluded_labels) == (1, 0, 2)
    with pytest.raises(StoreError, match="step_from_prelabel"):
        team.labels.add("t4", "a", annotator="ana", taxonomy_version=V, step_from_prelabel=True)


def test_assign_and_start_prelabel_run_check_roles(team: Store) -> None:
    with pytest.raises(PermissionDeniedError, match="only leads and admins"):
        team.queues.assign(["t1"], ["ben"], actor="ana")
    assert team.queues.assign(["t1"], ["ana"], actor="ana") == 1  # self-service
    assert team.queues.assign(["t2"], ["ana", "ben"], actor="lea") == 1
    with pytest.raises(PermissionDeniedError):
        team.prelabels.start_run("heuristic", "h", actor="ben")
    assert team.prelabels.start_run("heuristic", "h", actor="root") > 0


def test_one_gate_authorises_every_lead_action(team: Store) -> None:
    with team.engine.connect() as conn, Session(conn) as s:
        for action, words in LEAD_ACTIONS.items():
            with pytest.raises(PermissionDeniedError, match=words):
                team.gate.authorise(s, "ana", action)  # type: ignore[arg-type]
            lead = team.gate.authorise(s, "lea", action)  # type: ignore[arg-type]
            assert lead is not None and lead.name == "lea"
            # None: the command line operator, who is never asked.
            assert team.gate.authorise(s, None, action) is None  # type: ignore[arg-type]
            with pytest.raises(NotFoundError):
                team.gate.authorise(s, "nobody", action)  # type: ignore[arg-type]


def test_llm_opinions_read_both_tables_latest_first(team: Store) -> None:
    team.prelabels.save(PrelabelRecord(
        PrelabelKey("t1", V, "p1", "heuristic"),
        LabelResult(category="other", confidence=0.4, first_error_step=1, rationale="r",
                    labeller="heuristic", labeller_version="1"),
    ))
    assert team.prelabels.opinion("t1") == team.prelabels.opinions()["t1"]
    assert team.prelabels.opinions()["t1"].category == "other"
    team.labels.add("t1", "a", annotator=None, source="llm", confidence=0.9, taxonomy_version=V)
    latest = team.prelabels.opinions()["t1"]  # the imported LLM label is newer
    assert (latest.category, latest.confidence, latest.labeller) == ("a", 0.9, "llm")
    assert team.prelabels.opinions(taxonomy_version="other-version") == {}


def test_stale_heartbeat_reads_as_interrupted_and_can_resume(team: Store) -> None:
    run_id = team.prelabels.start_run("heuristic", "h")
    run = team.prelabels.get_run(run_id)
    assert run is not None and run.status == "running" and run.heartbeat_at is not None
    stale = utcnow() - timedelta(seconds=HEARTBEAT_STALE_S + 5)
    with team.engine.begin() as conn:
        conn.execute(update(PrelabelRunRow).values(heartbeat_at=stale, started_at=stale))
    assert team.prelabels.get_run(run_id).status == "interrupted"  # type: ignore[union-attr]
    assert [r.status for r in team.prelabels.latest_runs()] == ["interrupted"]
    team.prelabels.heartbeat_run(run_id)  # a resumed worker beats again
    assert team.prelabels.get_run(run_id).status == "running"  # type: ignore[union-attr]
    team.prelabels.update_run(run_id, status="done")
    with team.engine.begin() as conn:
        conn.execute(update(PrelabelRunRow).values(heartbeat_at=stale))
    assert team.prelabels.get_run(run_id).status == "done"  # type: ignore[union-attr]


def _import_as_newcomer(url: str, n: int) -> None:
    store = open_store(url)
    try:
        text = f"trajectory_id,annotator,source,category\nt{n},newcomer,human,a\n"
        import_labels(store, text, known_trajectory_ids={f"t{i}" for i in range(8)},
                      default_taxonomy_version=V)
    finally:
        store.close()


@pytest.mark.slow
@pytest.mark.postgres
def test_eight_processes_importing_the_same_new_annotator(postgres_database: str) -> None:
    from tests.labeling.support import fresh_postgres_url

    url = fresh_postgres_url(postgres_database)
    store = open_store(url)
    try:
        from tests.support import save_test_taxonomy

        save_test_taxonomy(store)
        ctx = multiprocessing.get_context("spawn")
        procs = [ctx.Process(target=_import_as_newcomer, args=(url, n)) for n in range(8)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(120)
        assert [p.exitcode for p in procs] == [0] * 8
        assert [u.name for u in store.users.all()] == ["newcomer"]
        assert sorted(lab.trajectory_id for lab in store.labels.all()) == [
            f"t{i}" for i in range(8)
        ]
    finally:
        store.close()
