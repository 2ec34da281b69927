"""The heuristic pre-labeller: one hand-made trajectory per category, robustness on odd input,
other taxonomies, and every failure in the real tau-bench trajectories."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import pytest

from opinions.prelabel.base import LabelResult
from opinions.prelabel.heuristic import (
    FALLBACK_CONFIDENCE,
    HeuristicLabeller,
    rule_files,
    rules_version,
)
from opinions.prelabel.protocol import RuleLabeller
from taxonomy import Category, Taxonomy, TaxonomyError, builtin_taxonomies, default_taxonomy
from trajectories.importers import read_file
from trajectories.model import Run, Step, StepKind, Task, Trajectory

TAX = default_taxonomy()
VERSION = TAX.version


def traj(
    steps: list[Step],
    *,
    question: str = "How many patients?",
    ground_truth: Any = None,
    final_answer: Any = None,
    reference_sql: str | None = None,
    variant: str | None = None,
) -> Trajectory:
    return Trajectory(
        task=Task(
            id="t",
            question=question,
            ground_truth=ground_truth,
            reference_sql=reference_sql,
            variant=variant,
        ),
        run=Run(name="r", model="m"),
        steps=steps,
        final_answer=final_answer,
    )


def user(text: str) -> Step:
    return Step(kind=StepKind.MESSAGE, role="user", content=text)


def say(text: str) -> Step:
    return Step(kind=StepKind.MESSAGE, role="assistant", content=text)


def sql(code: str, obs: str = "[(1,)]", error: bool = False) -> Step:
    return Step(kind=StepKind.SQL, code=code, observation=obs, error=error)


def py(code: str, obs: str = "") -> Step:
    return Step(kind=StepKind.PYTHON, code=code, observation=obs)


def label(t: Trajectory, labeller: HeuristicLabeller | None = None) -> LabelResult:
    return (labeller or HeuristicLabeller()).label(t, VERSION)


# ------------------------------------------------------------------ one case per category


def variable_scope_case() -> Trajectory:
    return traj(
        [
            user("Mean days from first Depression admission to readmission with Tbili?"),
            py(
                'cohort = query("SELECT subject_id, admittime FROM admissions")\n'
                "print(len(cohort))",
                "5321",
            ),
            py(
                "first = cohort.groupby('subject_id').admittime.min()",
                "Traceback (most recent call last):\nNameError: name 'cohort' is not defined",
            ),
            py("print(first.head())", "NameError: name 'first' is not defined"),
            py(
                'cohort = query("SELECT subject_id FROM admissions LIMIT 100")\nprint(341.08)',
                "341.08",
            ),
            say("341.08 days"),
        ],
        question="Mean number of days from first admission coded Depression to readmission?",
        ground_truth=726.78,
        final_answer=341.08,
    )


def test_variable_scope_error() -> None:
    result = label(variable_scope_case())
    assert result.category == "variable_scope_error"
    assert result.first_error_step == 2
    assert result.confidence >= 0.85
    # The task has a verified answer, so the finder reads it too and names the same step.
    assert "step 2" in result.rationale and "'cohort' is" in result.rationale
    assert result.labeller == "heuristic" and result.labeller_version == "1"


def test_missing_temp_table_from_earlier_call_is_scope() -> None:
    t = traj(
        [
            sql("CREATE TEMP TABLE cohort AS SELECT subject_id FROM diagnoses_icd", "OK"),
            sql(
                "SELECT COUNT(DISTINCT subject_id) FROM cohort",
                "Error: (sqlite3.OperationalError) no such table: cohort",
                error=True,
            ),
        ],
        ground_truth=[[12]],
        final_answer=None,
    )
    result = label(t)
    assert result.category == "variable_scope_error"
    assert result.first_error_step == 1
    assert result.confidence >= 0.85


def test_hallucinated_table_is_not_scope() -> None:
    t = traj(
        [sql("SELECT * FROM procedures", "Error: no such table: procedures", error=True)],
        ground_truth=[[1]],
    )
    assert label(t).category != "variable_scope_error"


def stuck_case(exact: bool = True) -> Trajectory:
    def guess(i: int) -> str:
        sid = 496 if exact else 30000000 + i
        return f"SELECT COUNT(*) FROM labevents WHERE stay_id = {sid} AND itemid = 50902"

    steps = [user("Chloride tests after the stay with ICD-9 496?")]
    steps += [sql(guess(i), "[]") for i in range(5)]
    steps.append(say("I could not find the stay. Maximum number of turns reached."))
    return traj(
        steps,
        question="During the hospitalization after patient 10000980's stay with ICD-9 code 496, "
        "how many Chloride tests were ordered?",
        ground_truth=7,
        final_answer=None,
    )


def test_stuck_in_loop_exact_repetition() -> None:
    result = label(stuck_case(exact=True))
    assert result.category == "stuck_in_loop"
    assert result.first_error_step == 1
    assert result.confidence >= 0.85


def test_stuck_in_loop_guessing_literals_is_weaker() -> None:
    exact = label(stuck_case(exact=True))
    variants = label(stuck_case(exact=False))
    assert variants.category == "stuck_in_loop"
    assert variants.first_error_step == 1
    assert FALLBACK_CONFIDENCE < variants.confidence < exact.confidence


def test_exploration_with_different_terms_is_not_a_loop() -> None:
    steps = [
        Step(
            kind=StepKind.TOOL_CALL,
            name="substring_search_tool",
            arguments=json.dumps({"table": "d_labitems", "column": "label", "value": term}),
            observation=f"Values containing '{term}': ['{term} x']",
        )
        for term in ("sodium", "potassium", "chloride", "glucose")
    ]
    result = label(traj(steps, ground_truth=[[1]], final_answer=[[2]]))
    assert result.category != "stuck_in_loop"


def format_case() -> Trajectory:
    drugs = [
        "Acetaminophen",
        "Sodium Chloride 0.9% Flush",
        "Carbamazepine",
        "Heparin",
        "Docusate Sodium",
    ]
    counts = [31, 29, 20, 18, 15]
    return traj(
        [
            user("Top five medications by admissions?"),
            sql(
                "SELECT drug, COUNT(DISTINCT hadm_id) AS prescription_count FROM prescriptions "
                "GROUP BY drug ORDER BY 2 DESC LIMIT 5",
                str(list(zip(drugs, counts, strict=True))),
            ),
            say("; ".join(drugs)),
        ],
        question="Which five medications are most commonly ordered, based on the count of "
        "separate admissions in which each drug was prescribed?",
        ground_truth=[
            {"drug": d, "prescription_count": c} for d, c in zip(drugs, counts, strict=True)
        ],
        final_answer=drugs,
    )


def test_answer_format_missing_field() -> None:
    result = label(format_case())
    assert result.category == "answer_format_error"
    assert result.first_error_step == 2  # the answer message
    assert result.confidence >= 0.7


def test_answer_format_same_values_other_shape() -> None:
    # Same values, column-oriented instead of row-oriented: only the shape differs.
    t = traj(
        [sql("SELECT a, b FROM x", "[('a', 1), ('b', 2)]"), say("a, b / 1, 2")],
        ground_truth=[["a", 1], ["b", 2]],
        final_answer=[["a", "b"], [1, 2]],
    )
    result = label(t)
    assert result.category == "answer_format_error"
    assert result.confidence >= 0.8
    assert result.first_error_step == 1


def test_code_lookup_dotted_icd() -> None:
    t = traj(
        [
            user("Medications for admissions with 414.01?"),
            sql("SELECT DISTINCT hadm_id FROM diagnoses_icd WHERE icd_code = '414.01'", "[]"),
            say("No admissions found."),
        ],
        question="Which medications are ordered for admissions with 414.01?",
        ground_truth=[["Heparin"]],
        final_answer=None,
    )
    result = label(t)
    assert result.category == "medical_code_lookup_error"
    assert result.first_error_step == 1
    assert result.confidence >= 0.8


def ileus_case(final_sql: str) -> Trajectory:
    return traj(
        [
            user("Entry points for Ileus patients with a Vanc test?"),
            sql(
                "SELECT icd_code, icd_version, long_title FROM d_icd_diagnoses "
                "WHERE long_title LIKE '%ileus%'",
                "[('5601', 9, 'Paralytic ileus'), ('56089', 9, 'Other intestinal obstruction'), "
                "('K567', 10, 'Ileus, unspecified'), ('K5600', 10, 'Paralytic ileus')]",
            ),
            sql("SELECT itemid FROM d_labitems WHERE label = 'Vancomycin'", "[(51009,)]"),
            sql(final_sql, "[('TRANSFER FROM HOSPITAL', 40)]"),
            say("TRANSFER FROM HOSPITAL; PHYSICIAN REFERRAL"),
        ],
        question="Which five entry points contributed the most admissions for patients with "
        "ICD code Ileus who underwent laboratory test Vanc during their stay?",
        ground_truth=[
            ["EMERGENCY ROOM"],
            ["TRANSFER FROM HOSPITAL"],
            ["PHYSICIAN REFERRAL"],
            ["PACU"],
            ["CLINIC REFERRAL"],
        ],
        final_answer=[["TRANSFER FROM HOSPITAL"], ["PHYSICIAN REFERRAL"], ["WALK-IN"]],
    )


def test_code_lookup_only_one_icd_family_used() -> None:
    t = ileus_case(
        "SELECT a.admission_location, COUNT(DISTINCT a.hadm_id) FROM admissions a "
        "JOIN diagnoses_icd d ON a.hadm_id = d.hadm_id JOIN labevents l ON l.hadm_id = a.hadm_id "
        "WHERE d.icd_code IN ('K567', 'K5600') AND l.itemid = 51009 GROUP BY 1 ORDER BY 2 DESC"
    )
    result = label(t)
    assert result.category == "medical_code_lookup_error"
    assert result.first_error_step == 3
    assert "ICD-10" in result.rationale


def test_code_lookup_not_used_at_all() -> None:
    t = ileus_case(
        "SELECT a.admission_location, COUNT(DISTINCT a.hadm_id) FROM admissions a "
        "JOIN diagnoses_icd d ON a.hadm_id = d.hadm_id JOIN labevents l ON l.hadm_id = a.hadm_id "
        "WHERE d.icd_code IN ('5609') AND l.itemid = 51009 GROUP BY 1 ORDER BY 2 DESC"
    )
    result = label(t)
    assert result.category == "medical_code_lookup_error"
    assert result.first_error_step == 3
    assert result.confidence >= 0.6


def sql_logic_case() -> Trajectory:
    return traj(
        [
            user("Top 5 diagnosis codes among patients with lab 50820?"),
            sql(
                "SELECT d.icd_code, COUNT(*) AS n FROM labevents l JOIN diagnoses_icd d "
                "ON l.hadm_id = d.hadm_id WHERE l.itemid = 50820 GROUP BY d.icd_code "
                "ORDER BY n DESC LIMIT 5",
                "[('D62', 900), ('E785', 850), ('J9601', 700), ('4019', 650), ('E872', 600)]",
            ),
            say("D62, E785, J9601, 4019, E872"),
        ],
        question="Among patients who underwent laboratory test 50820 during a hospital "
        "admission, which 5 ICD diagnosis codes were recorded for the largest number of "
        "distinct patients in the same admission?",
        ground_truth=["E785", "4019", "I10", "Z87891", "N179"],
        final_answer=["D62", "E785", "J9601", "4019", "E872"],
    )


def test_sql_logic_count_over_join() -> None:
    result = label(sql_logic_case())
    assert result.category == "sql_logic_error"
    assert result.first_error_step == 1
    assert FALLBACK_CONFIDENCE < result.confidence < 0.85


def test_sql_logic_duplicate_rows() -> None:
    t = traj(
        [
            sql(
                "SELECT p.charttime FROM procedures_icd p JOIN admissions a USING (hadm_id)",
                "[('2100-03-12',), ('2100-03-12',)]",
            )
        ],
        ground_truth=[["2100-03-12"]],
        final_answer=[["2100-03-12"], ["2100-03-12"]],
    )
    result = label(t)
    assert result.category == "sql_logic_error"
    assert result.first_error_step == 0
    assert "DISTINCT" in result.rationale


def semantic_case(reference: str | None) -> Trajectory:
    return traj(
        [
            user("Top 5 last care units in the second admission?"),
            sql(
                "SELECT hadm_id, admittime FROM admissions WHERE subject_id IN "
                "(SELECT subject_id FROM diagnoses_icd WHERE icd_code = '486') ORDER BY admittime",
                "[(1, '2100-01-01')]",
            ),
            sql(
                "SELECT last_careunit, COUNT(DISTINCT hadm_id) FROM icustays GROUP BY 1 "
                "ORDER BY 2 DESC LIMIT 5",
                "[('MICU', 10), ('SICU', 8)]",
            ),
            say("MICU; SICU; CCU; TSICU; MICU/SICU"),
        ],
        question="What are the top 5 most common last care units during the second hospital "
        "admission for patients with an initial diagnosis of ICD code 486?",
        ground_truth=[
            "Medicine",
            "Hematology/Oncology",
            "Medicine/Cardiology",
            "Med/Surg",
            "Neurology",
        ],
        final_answer="MICU; SICU; CCU; TSICU; MICU/SICU",
        reference_sql=reference,
    )


def test_semantic_fallback_is_a_low_confidence_guess() -> None:
    result = label(semantic_case(None))
    assert result.category == "semantic_misunderstanding"
    assert result.confidence == pytest.approx(FALLBACK_CONFIDENCE)
    assert result.first_error_step == 1
    assert "guess" in result.rationale


def test_semantic_wrong_entity_against_reference() -> None:
    ref = (
        "SELECT t.careunit FROM transfers t JOIN admissions a ON t.hadm_id = a.hadm_id "
        "JOIN diagnoses_icd d ON d.hadm_id = a.hadm_id WHERE d.icd_code = '486'"
    )
    result = label(semantic_case(ref))
    assert result.category == "semantic_misunderstanding"
    assert result.first_error_step == 2
    assert result.confidence > FALLBACK_CONFIDENCE
    assert "icustays" in result.rationale and "transfers" in result.rationale


def test_confidence_ordering_strong_over_fallback() -> None:
    strong = [label(variable_scope_case()), label(stuck_case())]
    weak = label(semantic_case(None))
    assert all(s.confidence > weak.confidence for s in strong)
    assert all(0.85 <= s.confidence <= 0.95 for s in strong)


def test_deterministic() -> None:
    cases = [variable_scope_case(), stuck_case(), format_case(), sql_logic_case()]
    first = [label(c) for c in cases]
    assert first == [HeuristicLabeller().label(c, VERSION) for c in cases]


def test_implements_protocol() -> None:
    labeller: RuleLabeller = HeuristicLabeller()
    assert (labeller.name, labeller.version, labeller.model) == ("heuristic", "1", "heuristic")
    assert labeller.prompt_version == rules_version()


def test_the_rules_version_changes_with_any_rule(tmp_path: Path) -> None:
    """The cache key follows the rules' code: editing one signal gives another version."""
    copies = []
    for source in rule_files():
        copy = tmp_path / source.parent.name / source.name
        copy.parent.mkdir(exist_ok=True)
        copy.write_bytes(source.read_bytes())
        copies.append(copy)
    assert rules_version(copies) == rules_version()
    loops = next(c for c in copies if c.name == "loops.py")
    loops.write_text(loops.read_text() + "\n# a changed rule\n")
    assert rules_version(copies) != rules_version()
    assert any(c.name == "finder.py" for c in copies)  # the evidence finder counts too


def test_tau_bench_tool_call_query_is_sql() -> None:
    t = traj(
        [
            Step(
                kind=StepKind.TOOL_CALL,
                name="sql_db_query",
                arguments=json.dumps(
                    {"query": "SELECT hadm_id FROM diagnoses_icd WHERE icd_code = '250.00'"}
                ),
                observation="[]",
            )
        ],
        ground_truth=[[1]],
    )
    result = label(t)
    assert result.category == "medical_code_lookup_error"
    assert result.first_error_step == 0
    assert result.rationale.startswith("step 0 (sql_db_query)")


# ------------------------------------------------------------------ robustness


ODD_ANSWERS: list[Any] = [
    None,
    "",
    "   ",
    0,
    -1.5,
    math.nan,
    float("inf"),
    True,
    [],
    {},
    [[None]],
    {"a": [1, 2], "b": [3]},
    [[[["deep"]]]],
    "x" * 100_000,
    "[not json",
    '{"a": 1}',
    [{"k": object.__name__}],
]


def garbage_steps(rng: random.Random) -> list[Step]:
    kinds = list(StepKind)
    pieces = [
        "SELECT",
        "FROM",
        "d_icd_diagnoses",
        "diagnoses_icd",
        "JOIN",
        "count(*)",
        "'250.00'",
        "NameError: name 'x' is not defined",
        "no such table: t",
        "[]",
        "x =",
        "WITH a AS (",
        "icd_version = 9",
        "{",
        "}",
        '"query":',
        "None",
        "\x00",
        "é",
        "%",
        "'",
        "\\",
    ]
    steps = []
    for _ in range(rng.randint(0, 12)):
        text = " ".join(rng.choice(pieces) for _ in range(rng.randint(0, 8)))
        steps.append(
            Step(
                kind=rng.choice(kinds),
                role=rng.choice(["assistant", "user", "tool", "system"]),
                name=rng.choice([None, "sql_db_query", "substring_search_tool", "python", ""]),
                code=rng.choice([None, text, ""]),
                arguments=rng.choice(
                    [
                        None,
                        text,
                        '{"query": "' + text + '"}',
                        '{"table": "d_labitems"}',
                        "[1, 2",
                        "{}",
                        "null",
                    ]
                ),
                content=rng.choice([None, text]),
                observation=rng.choice([None, text, "", "[]", text * 50]),
                error=rng.random() < 0.3,
            )
        )
    return steps


def test_never_crashes_on_odd_input() -> None:
    rng = random.Random(612)
    labeller = HeuristicLabeller()
    cases: list[Trajectory] = [
        traj([]),
        traj([], ground_truth=[[1]], final_answer=[[2]]),
        traj([Step(kind=StepKind.SQL)]),
        traj([Step(kind=StepKind.PYTHON, code=None, observation=None)]),
        traj([Step(kind=StepKind.TOOL_CALL, name=None, arguments="{{{not json")]),
        traj([Step(kind=StepKind.TOOL_CALL, name="sql_db_query", arguments="[1, 2, 3]")]),
        traj(
            [
                Step(
                    kind=StepKind.TOOL_CALL,
                    name="sql_db_query",
                    arguments=json.dumps({"query": 42}),
                )
            ]
        ),
        traj([sql("SELECT 1", "row\n" * 2_000_000)], ground_truth="x", final_answer="y"),
        traj([Step(kind=StepKind.MESSAGE, content=None)] * 3),
    ]
    for answer in ODD_ANSWERS:
        cases.append(traj([sql("SELECT 1")], ground_truth=answer, final_answer=answer))
        cases.append(traj([sql("SELECT 1")], ground_truth=[["a", 1]], final_answer=answer))
    for _ in range(300):
        cases.append(
            traj(
                garbage_steps(rng),
                question=rng.choice(["", "first patients after ICD-9?"]),
                ground_truth=rng.choice(ODD_ANSWERS),
                final_answer=rng.choice(ODD_ANSWERS),
                reference_sql=rng.choice([None, "SELECT DISTINCT x FROM transfers"]),
            )
        )
    for t in cases:
        result = labeller.label(t, VERSION)
        assert result.category in TAX.keys
        assert 0.0 <= result.confidence <= 1.0
        assert result.first_error_step is None or 0 <= result.first_error_step < len(t.steps)
        assert result.first_error_step is not None or not t.steps
        assert result.secondary_category is None or result.secondary_category in TAX.keys
        assert result.rationale


def test_very_long_trajectory_still_gets_a_label() -> None:
    steps = []
    for i in range(3000):
        steps.append(sql(f"SELECT c{i} FROM d_labitems JOIN labevents_{i % 7} ON x = {i}", "[]"))
        steps.append(
            Step(
                kind=StepKind.TOOL_CALL,
                name="substring_search_tool",
                arguments=json.dumps({"table": "d_icd_diagnoses", "value": f"t{i}"}),
                observation="['a']",
            )
        )
    # Throughput targets live in bench/; here: a 6,000-step trajectory still gets a label.
    result = label(traj(steps, ground_truth=[[1]], final_answer=None))
    assert result.category in TAX.keys


def test_empty_trajectory_has_no_step_and_low_confidence() -> None:
    result = label(traj([]))
    assert result.first_error_step is None
    assert result.category == "semantic_misunderstanding"
    assert result.confidence < FALLBACK_CONFIDENCE


# ------------------------------------------------------------------ other taxonomies


def test_robustgym_taxonomy_maps_onto_its_own_keys() -> None:
    robust = builtin_taxonomies()["robustgym"]
    labeller = HeuristicLabeller(robust)
    scope = labeller.label(variable_scope_case(), robust.version)
    assert scope.category == "retrieval_error"
    assert scope.first_error_step == 2
    assert labeller.label(format_case(), robust.version).category == "answer_format_error"
    false_null = traj(
        [sql("SELECT x FROM t", "[]"), say("NULL")],
        ground_truth=[["10 Units"]],
        final_answer=None,
        variant="clean",
    )
    assert labeller.label(false_null, robust.version).category == "false_null"
    unsupported = traj(
        [
            sql("SELECT dose FROM inputevents WHERE x", "[]"),
            sql("SELECT dose FROM inputevents", "[('10 Units',)]"),
        ],
        ground_truth=[[None]],
        final_answer=[["10 Units"]],
        variant="noise",
    )
    result = labeller.label(unsupported, robust.version)
    assert result.category == "null_not_returned"
    # Step 1 is the query whose result the answer reports (step 0 found nothing).
    assert result.first_error_step == 1


def test_default_labeller_follows_the_taxonomy_named_in_the_version() -> None:
    robust = builtin_taxonomies()["robustgym"]
    result = HeuristicLabeller().label(variable_scope_case(), robust.version)
    assert result.category in robust.keys
    with pytest.raises(TaxonomyError, match="not 'unknown_tax'"):
        HeuristicLabeller().label(variable_scope_case(), "unknown_tax@1+deadbeef")


def test_taxonomy_without_needed_keys_is_a_clear_error() -> None:
    small = Taxonomy(
        name="small",
        title="Small",
        declared_version="1",
        categories=(Category("sql_logic_error", "SQL", "d"), Category("other", "Other", "d")),
    )
    with pytest.raises(TaxonomyError, match=r"lacks categories.*variable_scope_error"):
        HeuristicLabeller(small)
    key_map = {k: "other" for k in TAX.keys if k != "sql_logic_error"}
    labeller = HeuristicLabeller(small, key_map=key_map)
    assert labeller.label(sql_logic_case(), small.version).category == "sql_logic_error"
    assert labeller.label(stuck_case(), small.version).category == "other"
    with pytest.raises(TaxonomyError, match="key_map targets"):
        HeuristicLabeller(small, key_map={**key_map, "stuck_in_loop": "missing"})


# ------------------------------------------------------------------ real trajectories


def _load_real(path: Path) -> list[Trajectory]:
    return [t for _, t in read_file(path).trajectories]


def test_every_real_failure_gets_a_label(real_trajectory_files: list[Path]) -> None:
    assert real_trajectory_files
    labeller = HeuristicLabeller()
    failures = [
        t
        for path in real_trajectory_files
        for t in _load_real(path)
        if t.outcome is not None and t.outcome.reward is not None and t.outcome.reward < 1
    ]
    assert len(failures) >= 50
    results = [labeller.label(t, VERSION) for t in failures]
    for t, result in zip(failures, results, strict=True):
        assert result.category in TAX.keys
        assert 0.0 <= result.confidence <= 1.0
        assert result.first_error_step is None or 0 <= result.first_error_step < len(t.steps)
        assert result.rationale
    # More than one category: the rules are not collapsing onto one answer.
    assert len({r.category for r in results}) >= 3


def test_null_spelled_as_text_on_an_unanswerable_task_is_answer_format() -> None:
    t = traj([user("How many ICU stays did patient 99999999 have?"),
              sql("SELECT count(*) FROM icustays WHERE subject_id = 99999999", "[(0,)]"),
              say("NULL")], ground_truth=None, final_answer="NULL")
    result = label(t)
    assert result.category == "answer_format_error"
    assert result.first_error_step is not None and "JSON null" in result.rationale
    # Saying nothing at all is not "the right conclusion in the wrong form".
    silent = traj([user("How many?"), sql("SELECT 1")], ground_truth=None, final_answer="")
    assert label(silent).category != "answer_format_error" or label(silent).confidence < 0.75


def test_demo_failures_cover_every_category_and_mostly_match_the_simulator(
    demo_workspace: Path,
) -> None:
    from trajectories.workspace import Workspace

    ws = Workspace(demo_workspace)
    failed = set(ws.frame().query("~success")["id"])
    names = {c.name: c.key for c in TAX.categories}
    found: set[str] = set()
    agree = total = 0
    for batch in ws.iter_payload_batches():
        for tid, payload, _ in batch:
            if tid not in failed:
                continue
            t = Trajectory.model_validate_json(payload)
            result = label(t)
            found.add(result.category)
            intended = (t.model_extra or {}).get("simulated_failure")
            if intended:
                total += 1
                agree += result.category == names[intended]
    assert found == set(TAX.keys)
    # The simulator's intended category is a noisy reference; this floor guards regressions.
    assert total > 100 and agree / total >= 0.8, agree / total


# ------------------------------------------------ rules checked against the reference SQL

_BOTH_VERSIONS = (
    "((d.icd_version = 9 AND d.icd_code IN ('51881')) OR "
    "(d.icd_version = 10 AND d.icd_code IN ('J9601')))"
)
_DRUG_REF = (
    "WITH adm AS (SELECT d.hadm_id FROM diagnoses_icd d WHERE " + _BOTH_VERSIONS + ")\n"
    "SELECT p.drug, COUNT(DISTINCT p.hadm_id) AS n FROM prescriptions p "
    "JOIN adm ON adm.hadm_id = p.hadm_id GROUP BY p.drug ORDER BY n DESC LIMIT 5"
)


def test_version_filter_covering_both_versions_is_not_a_code_error() -> None:
    # Old: any icd_version = 9 in the SQL read as "restricts to ICD-9"; here both versions are
    # covered and the real mistake is COUNT(*) over a join the reference counts DISTINCT.
    final = (
        "SELECT p.drug, COUNT(*) AS n FROM prescriptions p JOIN diagnoses_icd d "
        "ON d.hadm_id = p.hadm_id WHERE " + _BOTH_VERSIONS + " GROUP BY p.drug "
        "ORDER BY n DESC LIMIT 5"
    )
    t = traj(
        [user("Which five drugs were prescribed in the most admissions with respiratory failure?"),
         sql("SELECT icd_code, icd_version FROM d_icd_diagnoses WHERE long_title ILIKE '%resp%'",
             "icd_code | icd_version\n51881 | 9\nJ9601 | 10"),
         sql(final, "drug | n\nHeparin | 1419")],
        question="Which five drugs were prescribed in the most admissions with respiratory "
        "failure?",
        ground_truth=[["Heparin", 303]], final_answer=[["Heparin", 1419]],
        reference_sql=_DRUG_REF,
    )
    result = label(t)
    assert result.category == "sql_logic_error"
    assert "DISTINCT" in result.rationale
    assert "restricts to ICD" not in result.rationale


def test_version_filter_the_reference_shares_is_not_a_code_error() -> None:
    ref = ("SELECT COUNT(DISTINCT hadm_id) FROM diagnoses_icd "
           "WHERE icd_version = 10 AND icd_code = 'J449'")
    final = "SELECT COUNT(hadm_id) FROM diagnoses_icd WHERE icd_version = 10 AND icd_code = 'J449'"
    t = traj([user("How many admissions had COPD coded?"), sql(final, "[(40,)]")],
             question="How many admissions had COPD coded?", ground_truth=[[31]],
             final_answer=[[40]], reference_sql=ref)
    result = label(t)
    assert result.category == "sql_logic_error"
    assert "ICD" not in result.rationale.split("Also possible")[0]
    # Without a reference the one-version filter is still flagged.
    bare = traj([user("How many admissions had COPD coded?"), sql(final, "[(40,)]")],
                question="How many admissions had COPD coded?", ground_truth=[[31]],
                final_answer=[[40]])
    assert any("restricts to ICD-10" in s.rationale for s in HeuristicLabeller().signals(bare))


def test_version_named_in_the_question_is_not_flagged() -> None:
    t = traj([user("q"), sql("SELECT COUNT(*) FROM diagnoses_icd WHERE icd_version = 9", "[(3,)]")],
             question="How many diagnoses use version 9 of the ICD?")
    assert not any("restricts to ICD" in s.rationale for s in HeuristicLabeller().signals(t))


def test_final_codes_equal_to_reference_codes_silence_code_rules() -> None:
    # The agent tried a dotted code first, then used exactly the reference's codes: the answer
    # query was grounded right, so its error is the temporal window, not the code.
    ref = ("SELECT MAX(c.valuenum) FROM chartevents c JOIN icustays s ON s.stay_id = c.stay_id "
           "WHERE c.itemid = 226101 AND c.charttime < s.intime + INTERVAL 12 HOUR")
    final = ref.replace("12 HOUR", "12 DAY")
    t = traj([user("q"),
              sql("SELECT * FROM diagnoses_icd WHERE icd_code = '428.0'", "[]"),
              sql(final, "[(131,)]")],
             question="What was the highest heart rate in the first 12 hours of the ICU stay?",
             ground_truth=[[118]], final_answer=[[131]], reference_sql=ref)
    result = label(t)
    assert result.category == "sql_logic_error"
    assert "12 day" in result.rationale and "12 hour" in result.rationale
    assert not any(s.category == "medical_code_lookup_error"
                   for s in HeuristicLabeller().signals(t))


def test_other_identifier_than_the_reference_is_code_lookup() -> None:
    ref = "SELECT ROUND(AVG(valuenum), 2) FROM chartevents WHERE itemid = 226104"
    t = traj([user("q"), sql(ref.replace("226104", "226110"), "[(119.5,)]")],
             question="Average non-invasive systolic blood pressure?", ground_truth=[[120.1]],
             final_answer=[[119.5]], reference_sql=ref)
    result = label(t)
    assert result.category == "medical_code_lookup_error"
    assert "226110" in result.rationale


def test_one_icd_family_when_the_reference_needs_both_is_code_lookup() -> None:
    final = ("SELECT COUNT(DISTINCT d.hadm_id) FROM diagnoses_icd d "
             "WHERE d.icd_code IN ('J9601')")
    ref = "SELECT COUNT(DISTINCT d.hadm_id) FROM diagnoses_icd d WHERE " + _BOTH_VERSIONS
    t = traj([user("q"), sql(final, "[(4,)]")], question="How many admissions?",
             ground_truth=[[9]], final_answer=[[4]], reference_sql=ref)
    result = label(t)
    assert result.category == "medical_code_lookup_error"
    assert "ICD-10" in result.rationale and "51881" in result.rationale


def test_count_over_join_is_fine_when_the_reference_counts_joined_rows_too() -> None:
    # Old: "admission" in the question plus COUNT(*) over a JOIN was always SQL logic.
    ref = ("SELECT p.drug, COUNT(*) AS n FROM prescriptions p JOIN admissions a "
           "ON a.hadm_id = p.hadm_id WHERE a.subject_id = 1 GROUP BY p.drug")
    t = traj([user("q"), sql(ref.replace("= 1", "= 2"), "drug | n\nHeparin | 3")],
             question="Which drugs were prescribed in patient 1's first admission, and how often?",
             ground_truth=[["Aspirin", 2]], final_answer=[["Heparin", 3]], reference_sql=ref)
    assert not any("COUNT without DISTINCT" in s.rationale
                   for s in HeuristicLabeller().signals(t))


def test_count_over_join_is_sql_logic_only_when_the_question_counts_units() -> None:
    """A question that ranks events ("the specimen types most often collected from patients
    who ...") does not count patients: a COUNT(*) over a join is no sign of a wrong unit there.
    The same query under "how many patients" is."""
    query = ("SELECT m.spec_type_desc, COUNT(*) AS n FROM microbiologyevents m JOIN "
             "procedures_icd p ON p.hadm_id = m.hadm_id GROUP BY m.spec_type_desc "
             "ORDER BY n DESC LIMIT 3")

    def count_signal(question: str) -> bool:
        t = traj([user(question), sql(query, "[('blood', 9), ('urine', 7), ('sputum', 5)]")],
                 question=question, ground_truth=[["urine"], ["blood"], ["sputum"]],
                 final_answer=[["blood"], ["urine"], ["sputum"]])
        return any("COUNT without DISTINCT" in s.rationale
                   for s in HeuristicLabeller().signals(t))

    assert not count_signal("Which 3 specimen types were most often collected from patients "
                            "who had a CVC placement?")
    assert count_signal("For each specimen type, how many patients who had a CVC placement "
                        "had one collected?")


def test_grouping_or_time_ordering_unlike_the_reference_is_sql_logic() -> None:
    ref = ("SELECT ROUND(AVG(c.valuenum), 2) FROM chartevents c JOIN icustays i "
           "ON i.stay_id = c.stay_id WHERE c.itemid = 226104")
    per_stay = ("SELECT ROUND(AVG(m), 2) FROM (SELECT c.stay_id, AVG(c.valuenum) AS m "
                "FROM chartevents c JOIN icustays i ON i.stay_id = c.stay_id "
                "WHERE c.itemid = 226104 GROUP BY c.stay_id) x")
    t = traj([user("q"), sql(per_stay, "[(119.5,)]")], question="Average systolic pressure?",
             ground_truth=[[119.9]], final_answer=[[119.5]], reference_sql=ref)
    result = label(t)
    assert result.category == "sql_logic_error" and "groups by stay_id" in result.rationale

    ref2 = ("SELECT a.insurance FROM admissions a WHERE a.subject_id = 7 "
            "ORDER BY a.admittime DESC LIMIT 1")
    t2 = traj([user("q"), sql(ref2.replace("a.admittime", "a.hadm_id"), "[('Medicaid',)]")],
              question="Insurance at patient 7's most recent admission?",
              ground_truth=[["Medicare"]], final_answer=[["Medicaid"]], reference_sql=ref2)
    result2 = label(t2)
    assert result2.category == "sql_logic_error" and "orders by hadm_id" in result2.rationale


def test_sql_inside_a_python_cell_is_compared_with_the_reference() -> None:
    ref = ("SELECT COUNT(DISTINCT a.subject_id) FROM admissions a JOIN drgcodes g "
           "ON g.hadm_id = a.hadm_id WHERE g.drg_severity = 3")
    cell = 'df = con.sql("""\n' + ref.replace("COUNT(DISTINCT a.subject_id)", "COUNT(*)") + \
        '\n""").df()\nprint(df)'
    t = traj([user("q"), py(cell, "   n\n0  812")], question="How many distinct patients?",
             ground_truth=[[301]], final_answer=[[812]], reference_sql=ref)
    result = label(t)
    assert result.category == "sql_logic_error" and "DISTINCT" in result.rationale


def test_cte_names_are_not_tables_for_the_semantic_rule() -> None:
    ref = ("WITH dx AS (SELECT hadm_id FROM diagnoses_icd WHERE icd_code = 'J449') "
           "SELECT COUNT(*) FROM admissions a JOIN dx ON dx.hadm_id = a.hadm_id")
    final = ref.replace("dx", "cohort")
    t = traj([user("q"), sql(final, "[(5,)]")], question="How many?", ground_truth=[[4]],
             final_answer=[[5]], reference_sql=ref)
    assert not any(s.category == "semantic_misunderstanding"
                   for s in HeuristicLabeller().signals(t))
