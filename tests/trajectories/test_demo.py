"""The synthetic demo: deterministic EHR, verified tasks, and simulated agents whose every SQL
observation is a real execution result."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import duckdb
import pytest

from trajectories.demo import (
    FAILURE_CATEGORIES,
    DemoDatabase,
    DemoResult,
    build_ehr,
    generate_demo,
    iter_demo_trajectories,
    make_tasks,
    table_content_hash,
)
from trajectories.model import INTENTS, SCOPES, StepKind, Trajectory

N_PATIENTS = 300


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> DemoResult:
    return generate_demo(tmp_path_factory.mktemp("demo"), seed=7, n_patients=N_PATIENTS)


def _failure(t: Trajectory) -> str | None:
    value = (t.model_extra or {}).get("simulated_failure")
    assert value is None or isinstance(value, str)
    return value


def test_ehr_schema_and_code_conventions(demo: DemoResult) -> None:
    con = duckdb.connect(str(demo.ehr_path), read_only=True)
    try:
        tables = {r[0] for r in con.execute(
            "SELECT table_name FROM information_schema.tables").fetchall()}
        assert {"patients", "admissions", "transfers", "icustays", "diagnoses_icd",
                "d_icd_diagnoses", "labevents", "d_labitems", "prescriptions",
                "microbiologyevents", "chartevents", "d_items", "drgcodes"} <= tables
        cols = {r[0] for r in con.execute(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_name = 'admissions'").fetchall()}
        assert {"hadm_id", "admittime", "dischtime", "insurance", "race"} <= cols
        # ICD codes are stored without dots, in both versions
        versions = dict(con.execute(
            "SELECT icd_version, COUNT(*) FROM diagnoses_icd GROUP BY 1").fetchall())
        assert versions.get(9, 0) > 0 and versions.get(10, 0) > 0
        assert con.execute(
            "SELECT COUNT(*) FROM d_icd_diagnoses WHERE icd_code LIKE '%.%'").fetchone() == (0,)
        assert con.execute("SELECT COUNT(*) FROM d_icd_diagnoses WHERE icd_code IN "
                           "('25000', 'E119', '4019', 'I10')").fetchone() == (4,)
        assert con.execute("SELECT COUNT(*) FROM patients").fetchone() == (N_PATIENTS,)
        # admissions of one patient never overlap
        overlaps = con.execute(
            "SELECT COUNT(*) FROM admissions a JOIN admissions b ON a.subject_id = b.subject_id "
            "AND a.hadm_id <> b.hadm_id AND a.admittime < b.admittime "
            "AND b.admittime < a.dischtime").fetchone()
        assert overlaps == (0,)
    finally:
        con.close()


def test_ehr_is_deterministic_by_seed(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a.duckdb", tmp_path / "b.duckdb", tmp_path / "c.duckdb"
    build_ehr(a, seed=3, n_patients=N_PATIENTS)
    build_ehr(b, seed=3, n_patients=N_PATIENTS)
    build_ehr(c, seed=4, n_patients=N_PATIENTS)
    assert table_content_hash(a) == table_content_hash(b)
    assert table_content_hash(a) != table_content_hash(c)


@pytest.mark.slow
def test_trajectory_ids_are_deterministic_by_seed(tmp_path: Path, demo: DemoResult) -> None:
    same = generate_demo(tmp_path / "same", seed=7, n_patients=N_PATIENTS)
    assert [t.id for t in same.trajectories] == [t.id for t in demo.trajectories]
    assert table_content_hash(same.ehr_path) == table_content_hash(demo.ehr_path)
    other = generate_demo(tmp_path / "other", seed=8, n_patients=N_PATIENTS, n_tasks=60,
                          rollouts=1)
    assert not {t.id for t in other.trajectories} & {t.id for t in demo.trajectories}


def test_ids_are_content_hashes_and_unique(demo: DemoResult) -> None:
    ids = [t.id for t in demo.trajectories]
    assert len(set(ids)) == len(ids)
    for t in demo.trajectories[::97]:
        assert t.id == t.content_id()
        # the native format round-trips
        again = Trajectory.model_validate_json(t.model_dump_json())
        assert again.content_id() == t.id


def test_tasks_cover_intents_and_scopes(demo: DemoResult) -> None:
    tasks = demo.tasks
    assert len(tasks) >= 60
    assert len({t.id for t in tasks}) == len(tasks)
    cells = Counter((t.intent, t.scope) for t in tasks)
    for intent in INTENTS[:6]:
        for scope in SCOPES:
            assert cells[(intent, scope)] >= 1, (intent, scope)
    assert all(t.split == "test" and t.template_id and t.answer_format for t in tasks)
    assert len({t.template_id for t in tasks}) >= 15


def test_reference_sql_reproduces_ground_truth(demo: DemoResult) -> None:
    with DemoDatabase(demo.ehr_path) as db:
        for task in demo.tasks:
            res = db.run(task.reference_sql or "")
            assert res.error is None, task.id
            if task.variant == "noise":
                assert res.answer is None and task.ground_truth is None, task.id
            else:
                assert task.ground_truth is not None, task.id
                assert res.answer == task.ground_truth, task.id
                # ground truth is a JSON list of rows
                assert isinstance(task.ground_truth, list)
                assert all(isinstance(row, list) for row in task.ground_truth)
                json.dumps(task.ground_truth)


def test_clean_noise_pairs(demo: DemoResult) -> None:
    by_pair: dict[str, list[str | None]] = {}
    for t in demo.tasks:
        if t.pair_id:
            by_pair.setdefault(t.pair_id, []).append(t.variant)
    assert len(by_pair) >= 6
    assert all(sorted(v, key=str) == ["clean", "noise"] for v in by_pair.values())
    noise = [t for t in demo.tasks if t.variant == "noise"]
    assert {t.noise_type for t in noise} == {"record", "value", "query"}
    assert all(t.ground_truth is None for t in noise)


def test_some_tasks_need_distinct_counting_and_both_icd_versions(demo: DemoResult) -> None:
    templates = {t.template_id for t in demo.tasks}
    assert "labs.top5_icd_with_lab" in templates
    both = [t for t in demo.tasks if "icd_version = 9" in (t.reference_sql or "")
            and "icd_version = 10" in (t.reference_sql or "")]
    assert both
    assert any("INTERVAL" in (t.reference_sql or "") or "TIMESTAMP '" in (t.reference_sql or "")
               for t in demo.tasks)


def test_models_runs_and_rollouts(demo: DemoResult) -> None:
    trajs = demo.trajectories
    models = {t.run.model for t in trajs}
    assert len(models) >= 4
    assert {t.run.temperature for t in trajs} == {0.0, 0.6}
    assert {t.run.rollout for t in trajs} == {0, 1, 2}
    per_run = Counter(t.run.name for t in trajs)
    assert len(per_run) >= 8 and len(set(per_run.values())) == 1
    assert any(t.outcome is None for t in trajs)
    assert any(t.outcome is not None and t.outcome.source == "simulator" for t in trajs)


def test_every_failure_category_and_successes_present(demo: DemoResult) -> None:
    seen = Counter(_failure(t) for t in demo.trajectories)
    assert seen[None] > 0
    for cat in FAILURE_CATEGORIES:
        assert seen[cat] > 0, cat
    assert set(seen) <= {None, *FAILURE_CATEGORIES}


def test_outcomes_agree_with_exact_match(demo: DemoResult) -> None:
    for t in demo.trajectories:
        match = t.final_answer == t.task.ground_truth
        assert match == (_failure(t) is None), (t.id, _failure(t))
        if t.outcome is not None:
            assert t.outcome.success is match
        assert t.steps[0].kind == StepKind.MESSAGE and t.steps[0].role == "user"
        assert t.steps[-1].kind == StepKind.MESSAGE and t.steps[-1].role == "assistant"
        assert "Final answer:" in (t.steps[-1].content or "")


def test_failure_signals_look_like_the_taxonomy(demo: DemoResult) -> None:
    by_cat: dict[str | None, list[Trajectory]] = {}
    for t in demo.trajectories:
        by_cat.setdefault(_failure(t), []).append(t)
    # Variable scope: a Python cell fails with NameError on a name defined in an earlier cell
    for t in by_cat["Variable Scope Error"]:
        errs = [s for s in t.steps if s.kind == StepKind.PYTHON and s.error]
        assert errs and all("NameError: name '" in (s.observation or "") for s in errs)
    # Stuck in loop: turn budget exhausted with the same failing query, no answer
    for t in by_cat["Stuck-in-Loop"]:
        budget = t.run.configuration["max_turns"]
        assert t.n_turns == budget and t.final_answer is None
        codes = Counter((s.code or "").replace("\n", " ").strip().rstrip(";")
                        for s in t.actions if s.kind == StepKind.SQL)
        assert codes.most_common(1)[0][1] >= budget // 2
    # Code look-up: the SQL hardcodes dotted or single-version codes, or the wrong lab item
    code_sql = [s.code or "" for t in by_cat["Medical-Code Lookup Error"] for s in t.actions]
    assert any("." in c and "icd_code IN" in c for c in code_sql)
    # Answer format: the right values in the wrong shape
    for t in by_cat["Answer Format Error"]:
        assert t.final_answer != t.task.ground_truth
    # SQL logic: includes counting joined rows instead of distinct patients somewhere
    logic_sql = [s.code or "" for t in by_cat["SQL Logic Error"] for s in t.actions]
    assert any("COUNT(*)" in c for c in logic_sql)
    # tool calls and execution errors both occur
    all_steps = [s for t in demo.trajectories for s in t.steps]
    assert any(s.kind == StepKind.TOOL_CALL and s.name == "get_schema" for s in all_steps)
    assert any(s.kind == StepKind.SQL and s.error for s in all_steps)


def test_sql_observations_are_real(demo: DemoResult) -> None:
    rng = random.Random(0)
    steps = [s for t in demo.trajectories for s in t.steps if s.kind == StepKind.SQL]
    sample = rng.sample(steps, min(400, len(steps)))
    con = duckdb.connect(str(demo.ehr_path), read_only=True)
    fresh = DemoDatabase(demo.ehr_path)
    try:
        for step in sample:
            again = fresh.run(step.code or "")
            assert again.observation == step.observation
            assert step.error == (again.error is not None)
            if step.error:
                with pytest.raises(duckdb.Error):
                    con.execute(step.code or "")
            else:
                rows = con.execute(step.code or "").fetchall()
                assert step.observation is not None
                plural = "s" if len(rows) != 1 else ""
                assert step.observation.endswith(f"({len(rows)} row{plural})") \
                    or f"({len(rows)} rows total" in step.observation
    finally:
        fresh.close()
        con.close()


def test_no_wall_clock_and_durations_are_seeded(demo: DemoResult) -> None:
    for t in demo.trajectories[:200]:
        for s in t.steps:
            assert s.duration_ms is None or 0 <= s.duration_ms < 10_000


def test_iterator_matches_and_scales(tmp_path: Path) -> None:
    eager = generate_demo(tmp_path, seed=1, n_patients=N_PATIENTS, n_tasks=60, rollouts=1)
    lazy = list(iter_demo_trajectories(tmp_path, seed=1, n_patients=N_PATIENTS, n_tasks=60,
                                       rollouts=1, rebuild=False))
    assert [t.id for t in lazy] == [t.id for t in eager.trajectories]
    with DemoDatabase(eager.ehr_path) as db:
        assert len(make_tasks(db, seed=1, n_tasks=150)) == 150


def test_demo_code_does_not_import_streamlit() -> None:
    import trajectories.demo as pkg

    src = Path(pkg.__file__).parent
    for f in src.glob("*.py"):
        assert "streamlit" not in f.read_text()


def test_demo_output_validates_against_the_json_schema(demo_workspace: Path) -> None:
    import json as _json

    import jsonschema

    from trajectories.workspace import Workspace

    schema = _json.loads((Path(__file__).resolve().parents[2] / "data"
                          / "trajectory.schema.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    ws = Workspace(demo_workspace)
    checked = 0
    for batch in ws.iter_payload_batches():
        for _, payload, _ in batch:
            validator.validate(_json.loads(payload))
            checked += 1
    assert checked == ws.summary()["trajectories"]


def test_demo_categories_are_the_taxonomys() -> None:
    from taxonomy import builtin_taxonomies

    assert builtin_taxonomies()["ehr_complex"].names == FAILURE_CATEGORIES


def test_some_references_look_codes_up_by_name_and_the_agents_get_that_wrong(
    demo: DemoResult,
) -> None:
    from trajectories.demo.drafting import CODE
    from trajectories.evidence import Probe, find_divergence

    by_name = [t for t in demo.tasks if (t.template_id or "").startswith("lookups.")]
    assert by_name, "no task grounds a name in a dictionary table"
    for task in by_name:
        assert " IN (\n  SELECT " in (task.reference_sql or "")
        assert ("WHERE label = '" in (task.reference_sql or "")
                or "WHERE long_title = '" in (task.reference_sql or ""))
    code_failures = [t for t in demo.trajectories
                     if t.task.template_id in {k.template_id for k in by_name}
                     and _failure(t) == CODE]
    assert code_failures, "no agent grounded a name wrongly"
    with Probe.open(demo.ehr_path) as probe:
        found = [find_divergence(t, probe=probe) for t in code_failures]
    # The wrong grounding is seen as such (another item, a partial name, the other ICD version)
    # or not at all (a Python cell whose SQL the finder does not read), never as another error.
    parts = Counter(ev.part for ev in found)
    assert set(parts) <= {"lookup", "codes", None}, parts
    assert parts["lookup"] + parts["codes"] >= 0.8 * len(found), parts
