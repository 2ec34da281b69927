"""Validity audit domain: candidate pool, seeded stratified sample, store round trip, reviewer
context and the report assembled from the store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from labeling.audit import (
    AuditError,
    Candidate,
    CandidatePool,
    audit_definition,
    audit_disagreements,
    audit_report,
    candidate_pool,
    create_audit,
    evidence_queries,
    item_context,
    latest_audit,
    plan_audit,
    review_queue,
    task_record,
)
from labeling.store import Store, open_store
from tests.support import make_trajectory
from trajectories.model import Outcome, Run, Task
from trajectories.workspace import Workspace


def _task(tid: str, intent: str = "Labs", scope: str = "patient") -> Task:
    return Task(id=tid, question=f"Question {tid} for patient 10001?", intent=intent,
                scope=scope, template_id=f"tpl-{tid}", reference_sql="SELECT 1 AS x",
                ground_truth=[[1]], answer_format="a number", split="test")


def _traj(tid: str, run: str, ok: bool | None, rollout: int = 0, **task_kw: str) -> object:
    # ok=None: no recorded outcome, so success falls back to exact match (final answer 1 == 1).
    return make_trajectory(task=_task(tid, **task_kw), run=Run(name=run, model=run,
                                                                rollout=rollout),
                           final_answer=1 if ok is None else 0,
                           outcome=None if ok is None else Outcome(success=ok))


@pytest.fixture
def hand_ws(tmp_path: Path) -> Workspace:
    ws = Workspace(tmp_path / "ws").create()
    trajectories = [
        _traj("t1", "A", True), _traj("t1", "B", False),             # solved by A
        _traj("t2", "A", False), _traj("t2", "B", False, 0),
        _traj("t2", "B", True, 1),                                      # one B rollout solved it
        _traj("t3", "A", False), _traj("t3", "B", False, intent="Vitals"),  # nobody solved
        _traj("t4", "C", False, scope="population"),                    # only C tried, failed
        _traj("t5", "A", False), _traj("t5", "C", True),                # only C solved it
        _traj("t6", "B", None),                                         # solved by exact match
    ]
    added, _ = ws.add((t, None) for t in trajectories)  # type: ignore[misc]
    assert added == len(trajectories)
    return ws


def test_candidate_pool_is_task_level_and_run_dependent(hand_ws: Workspace) -> None:
    every = candidate_pool(hand_ws)
    assert every.runs == ("A", "B", "C")
    assert [c.task_id for c in every.candidates] == ["t3", "t4"]
    assert (every.n_candidates, every.n_total_tasks) == (2, 6)
    assert every.share == pytest.approx(2 / 6)

    ab = candidate_pool(hand_ws, ["A", "B"])
    assert [c.task_id for c in ab.candidates] == ["t3", "t5"]
    assert ab.n_total_tasks == 5  # t4 was never attempted by A or B

    only_c = candidate_pool(hand_ws, ["C"])
    assert [c.task_id for c in only_c.candidates] == ["t4"]
    assert only_c.n_total_tasks == 2

    t3 = every.candidates[0]
    assert (t3.intent, t3.scope, t3.template_id) == ("Labs", "patient", "tpl-t3")
    assert t3.reference_sql == "SELECT 1 AS x" and json.loads(t3.ground_truth or "") == [[1]]
    assert t3.question.startswith("Question t3")

    with pytest.raises(AuditError, match="unknown run"):
        candidate_pool(hand_ws, ["A", "nope"])


def test_a_persons_verdict_takes_a_task_out_of_the_pool(hand_ws: Workspace) -> None:
    """People's verdicts win: a trajectory a person judged right solves its task."""
    frame = hand_ws.query_df("SELECT id, task_id, run FROM trajectories")
    t3_of_a = str(frame[(frame.task_id == "t3") & (frame.run == "A")]["id"].iloc[0])
    t1_of_a = str(frame[(frame.task_id == "t1") & (frame.run == "A")]["id"].iloc[0])
    pool = candidate_pool(hand_ws, verdicts={t3_of_a: True, t1_of_a: False})
    assert [c.task_id for c in pool.candidates] == ["t1", "t4"]
    # An open disagreement among people is undecided: neither solved nor failed.
    open_pool = candidate_pool(hand_ws, verdicts={t3_of_a: None})
    assert [c.task_id for c in open_pool.candidates] == ["t3", "t4"]


def _pool(n: int = 954, total: int = 3915) -> CandidatePool:
    intents = ["Demographics", "Vitals", "Medications", "Cost", "Labs", "Diagnoses"]
    cands = []
    for i in range(n):
        # Uneven cells so proportional allocation has remainders to distribute.
        intent = intents[(i * i) % 6]
        scope = "patient" if i % 3 else "population"
        cands.append(Candidate(task_id=f"task-{i:04d}", question="q", intent=intent,
                               scope=scope, template_id=f"tpl-{i % 390}",
                               reference_sql="SELECT 1", ground_truth="[[1]]"))
    return CandidatePool(runs=("r",), candidates=tuple(cands), n_total_tasks=total)


def test_sample_is_seeded_stratified_and_sums_to_n() -> None:
    pool = _pool()
    plan = plan_audit(pool, n=500, seed=0)
    assert plan.sample.n_selected == 500
    strata = plan.strata()
    assert sum(s["allocated"] for s in strata) == 500
    assert all(s["allocated"] >= 1 for s in strata if s["population"])
    for s in strata:  # proportional within one unit of the exact quota (min-one aside)
        assert abs(s["allocated"] - 500 * s["population"] / 954) < 1.5
    again = plan_audit(pool, n=500, seed=0)
    assert [c.task_id for c in again.items] == [c.task_id for c in plan.items]
    other = plan_audit(pool, n=500, seed=1)
    assert [c.task_id for c in other.items] != [c.task_id for c in plan.items]
    # n is capped at the pool.
    assert plan_audit(_pool(30, 100), n=500).sample.n_selected == 30
    summary = plan.summary()
    assert (summary["pool_size"], summary["total_tasks"], summary["sample_size"]) == (954, 3915,
                                                                                      500)
    with pytest.raises(AuditError, match="no candidate"):
        plan_audit(CandidatePool(runs=("r",), candidates=(), n_total_tasks=3))


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = open_store(f"sqlite:///{tmp_path / 'annotations.sqlite'}")
    s.users.add("lea", "lead")
    for name in ("ana", "ben", "cy"):
        s.users.add(name)
    return s


def test_create_audit_stores_definition_and_two_reviewers(store: Store) -> None:
    plan = plan_audit(_pool(60, 200), n=20, seed=3)
    definition = create_audit(store, plan, name="a1", annotators=["ana", "ben", "cy"])
    assert latest_audit(store) == "a1"
    stored = audit_definition(store, "a1")
    assert stored == json.loads(json.dumps(definition))
    assert (stored["pool_size"], stored["total_tasks"], stored["n"], stored["seed"]) == (
        60, 200, 20, 3)
    assert sum(s["allocated"] for s in stored["strata"]) == 20
    items = store.audits.items("a1")
    assert [i.task_id for i in items] == [c.task_id for c in plan.items]
    assert all(len(i.annotators) == 2 for i in items)
    assert sum(len(review_queue(store, "a1", p)) for p in ("ana", "ben", "cy")) == 40
    with pytest.raises(AuditError, match="at least 2"):
        create_audit(store, plan, name="a2", annotators=["ana"])
    # Without annotators the audit is open: everyone sees every item.
    create_audit(store, plan, name="open", annotators=[])
    assert len(review_queue(store, "open", "whoever")) == 20
    assert latest_audit(store) == "open"


def test_report_from_store_merges_page_verdicts(store: Store) -> None:
    plan = plan_audit(_pool(40, 100), n=10, seed=0)
    create_audit(store, plan, name="a1", annotators=["ana", "ben"])
    tids = [c.task_id for c in plan.items]
    for tid in tids:
        store.audits.record_judgment("a1", tid, "ana", True)
        store.audits.record_judgment("a1", tid, "ben", tid != tids[0], reason="temporal_wording",
                                     note="ben's doubt")
    [case] = audit_disagreements(store, "a1")
    assert case.item.task_id == tids[0] and case.verdict is None
    assert {j.annotator for j in case.reviews} == {"ana", "ben"}
    before = audit_report(store, "a1")
    assert (before.n_unresolved, before.n_valid_adjudicated, before.n_resolved) == (1, 9, 9)
    store.audits.decide("a1", tids[0], "lea", valid=False, reason="temporal_wording",
                        expected_version=None)
    after = audit_report(store, "a1")
    assert (after.n_unresolved, after.n_valid_adjudicated, after.n_resolved) == (0, 9, 10)
    assert after.n_candidates == 40 and after.n_total_tasks == 100
    assert after.valid_rate_by_annotator == {"ana": 1.0, "ben": 0.9}
    assert audit_disagreements(store, "a1")[0].verdict is not None


def test_reviewer_context_on_demo(demo_workspace: Path) -> None:
    ws = Workspace(demo_workspace)
    runs = ["sim-small/t0.0"]
    pool = candidate_pool(ws, runs)
    assert pool.n_candidates > 0
    patient_task = next(c for c in pool.candidates if c.scope == "patient")
    ctx = item_context(ws, patient_task)
    assert ctx.has_database and ctx.result is not None and ctx.result_error is None
    assert ctx.tables
    assert ctx.schema, "the tables the reference SQL reads are described"
    assert ctx.evidence and all(e.result is not None for e in ctx.evidence)
    # Blinded: nothing about agents or runs is in the context.
    text = repr(ctx)
    assert "sim-" not in text and "final_answer" not in text
    assert task_record(ws, "no-such-task") is None


def test_context_without_database(hand_ws: Workspace) -> None:
    task = task_record(hand_ws, "t3")
    assert task is not None
    ctx = item_context(hand_ws, task)
    assert not ctx.has_database and ctx.result is None and ctx.ground_truth == [[1]]


def test_evidence_query_only_uses_digits_and_known_tables() -> None:
    schema = {"admissions": [("subject_id", "INTEGER"), ("hadm_id", "INTEGER")],
              "d_items": [("itemid", "INTEGER")]}
    [(title, sql)] = evidence_queries("What did patient 10006921 get?", schema)
    assert sql == 'SELECT * FROM "admissions" WHERE subject_id = 10006921 LIMIT 20'
    assert "10006921" in title
    assert evidence_queries("How many patients are female?", schema) == []
