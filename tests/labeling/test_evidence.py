"""The first-divergence finder and the heuristic labeller's use of it."""

from __future__ import annotations

from typing import Any

from labeling.evidence import decompose, find_divergence
from labeling.prelabel.heuristic import HeuristicLabeller
from labeling.prelabel.signals import ANSWER_FORMAT, CODE_LOOKUP, SEMANTIC, SQL_LOGIC
from taxonomy import default_taxonomy
from trajectories.model import Outcome, Run, Step, StepKind, Task, Trajectory

REF = (
    "SELECT COUNT(DISTINCT l.subject_id) FROM labevents l WHERE l.itemid = 50820 "
    "AND strftime('%Y-%m', l.charttime) = '2100-11'"
)


def sql(code: str, obs: str = "[(3,)]", error: bool = False) -> Step:
    return Step(kind=StepKind.SQL, code=code, observation=obs, error=error)


def traj(steps: list[Step], final: Any, *, ref: str | None = REF, gold: Any = 4) -> Trajectory:
    return Trajectory(
        task=Task(
            id="t",
            question="How many patients had a pH test in 2100-11?",
            reference_sql=ref,
            ground_truth=gold,
        ),
        run=Run(name="r", model="m"),
        steps=[*steps, Step(kind=StepKind.MESSAGE, content=str(final))],
        final_answer=final,
        outcome=Outcome(success=False, reward=0.0),
    )


def test_decompose_reads_every_part_in_both_dialects() -> None:
    parts = decompose(REF)
    assert parts is not None
    assert parts.tables == {"labevents"}
    assert ("itemid", "50820") in parts.codes
    assert parts.times == {"2100-11"}
    assert parts.aggregations == {"count distinct"}
    duck = decompose(
        "SELECT a, count(*) FROM t WHERE ts >= TIMESTAMP '2100-11-01' "
        "GROUP BY a ORDER BY 2 DESC LIMIT 3"
    )
    assert duck is not None
    assert duck.group_by == {"a"} and duck.order_limit == (True, 3) and duck.n_outputs == 2
    assert decompose("SELEC nonsense ((") is None or decompose("") is None


def test_missing_code_filter_is_a_code_lookup_divergence() -> None:
    t = traj(
        [
            sql("SELECT * FROM d_labitems WHERE label LIKE '%ph%'"),
            sql(
                "SELECT COUNT(DISTINCT subject_id) FROM labevents WHERE itemid = 50831 "
                "AND strftime('%Y-%m', charttime) = '2100-11'"
            ),
        ],
        3,
    )
    ev = find_divergence(t)
    assert ev.category == CODE_LOOKUP
    assert ev.step == 1
    assert "itemid 50820 missing" in ev.reason
    assert ev.rows and ev.rows[0].startswith("step 1")


def test_other_time_window_is_sql_logic_and_first_step_is_earliest() -> None:
    wrong = (
        "SELECT COUNT(DISTINCT subject_id) FROM labevents WHERE itemid = 50820 "
        "AND strftime('%Y-%m', charttime) = '2100-12'"
    )
    t = traj([sql("SELECT 1 FROM patients"), sql(wrong), sql(wrong + " AND 1=1")], 3)
    ev = find_divergence(t)
    assert ev.category == SQL_LOGIC
    assert ev.step == 1
    assert "time window 2100-12 vs reference 2100-11" in ev.reason


def test_answer_seen_then_changed_is_answer_format() -> None:
    t = traj([sql(REF, obs="[(4,)]")], "four patients: 4.0 maybe 5", gold=[[4]])
    t2 = t.model_copy(update={"final_answer": "around five"})
    ev = find_divergence(t2)
    assert ev.category == ANSWER_FORMAT
    assert ev.step == 0
    assert "answer correct in step 0" in ev.reason


def test_other_tables_are_semantic() -> None:
    t = traj([sql("SELECT COUNT(*) FROM chartevents WHERE itemid = 50820")], 9)
    ev = find_divergence(t)
    assert {d.part for d in ev.divergences} >= {"tables"}
    assert any(d.category == SEMANTIC for d in ev.divergences)


def test_no_reference_or_matching_query_decides_nothing() -> None:
    assert find_divergence(traj([sql(REF)], 3, ref=None)).category is None
    same = find_divergence(traj([sql(REF)], 3, gold=[[4]]))
    assert same.category is None and "matches every reference part" in same.reason


def test_heuristic_uses_evidence_and_falls_back_honestly() -> None:
    tax = default_taxonomy()
    lab = HeuristicLabeller()
    wrong = (
        "SELECT COUNT(DISTINCT subject_id) FROM labevents WHERE itemid = 50820 "
        "AND strftime('%Y-%m', charttime) = '2100-12'"
    )
    t = traj([sql("SELECT 1 FROM patients"), sql(wrong)], 3)
    got = lab.label(t, tax.version)
    assert got.category == SQL_LOGIC and got.first_error_step == 1
    assert "evidence:" in got.rationale
    fallback = lab.label(traj([sql(REF)], 3, gold=[[4]]), tax.version)
    assert fallback.confidence <= 0.3
    assert "No evidence decided" in fallback.rationale


def test_cli_prints_evidence_for_each_real_failure() -> None:
    import json

    from click.testing import CliRunner

    from faillab.cli import main
    from tests.conftest import REAL_TRAJECTORIES

    path = sorted(REAL_TRAJECTORIES.glob("*.json"))[0]
    res = CliRunner().invoke(main, ["evidence", str(path), "--json"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in res.output.splitlines()]
    assert rows and all("reason" in r and "step" in r for r in rows)
    assert sum(r["category"] is not None for r in rows) >= len(rows) // 2
    bad = CliRunner().invoke(main, ["evidence", str(path) + ".missing"])
    assert bad.exit_code == 1 and "no such trajectory file" in bad.output
