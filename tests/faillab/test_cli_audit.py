"""``faillab audit`` end to end: a workspace shaped like EHR-Complex (3,915 tasks, 954 unsolved)
-> create -> import judgments -> report reproducing the paper's Table 11."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from faillab.cli import main
from faillab_core.settings import Settings
from labeling.store import open_store
from tests.support import make_trajectory
from trajectories.model import Outcome, Run, Task
from trajectories.workspace import Workspace

N_TASKS, N_UNSOLVED = 3915, 954
INTENTS = ["Demographics", "Vitals", "Medications", "Cost", "Labs", "Diagnoses"]


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(autouse=True)
def _local_store(monkeypatch: pytest.MonkeyPatch) -> None:
    # The store must be the SQLite file inside each test's workspace.
    monkeypatch.delenv("FAILLAB_DATABASE_URL", raising=False)
    monkeypatch.delenv("FAILLAB_WORKSPACE", raising=False)


@pytest.fixture(scope="module")
def complex_ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One run over 3,915 tasks, of which the first 954 (in id order) failed."""
    root = tmp_path_factory.mktemp("cli_audit") / "ws"
    ws = Workspace(root).create()
    run = Run(name="strong", model="strong", rollout=0)
    trajs = []
    for i in range(N_TASKS):
        task = Task(id=f"task-{i:04d}", question=f"Question {i} for patient {10000 + i}?",
                    intent=INTENTS[(i * 7) % 6], scope="patient" if i % 5 < 3 else "population",
                    template_id=f"tpl-{i % 800}", reference_sql="SELECT 1", ground_truth=[[1]])
        trajs.append((make_trajectory(task=task, run=run, steps=[], final_answer=1,
                                      outcome=Outcome(success=i >= N_UNSOLVED)), None))
    ws.add(trajs)
    return root


def _copy(src: Path, tmp_path: Path) -> str:
    import shutil

    dst = tmp_path / "ws"
    shutil.copytree(src, dst)
    return str(dst)


def _table11_csv(task_ids: list[str], path: Path) -> Path:
    """458 both valid, 17 + 18 split, 7 both invalid; adjudicated to 475 valid."""
    assert len(task_ids) == 500
    rows = []
    for k, tid in enumerate(task_ids):
        if k < 458:
            a, b = True, True
        elif k < 475:
            a, b = True, False
        elif k < 493:
            a, b = False, True
        else:
            a, b = False, False
        reason = "" if a and b else "temporal_wording"
        rows.append([tid, "annotator-1", "valid" if a else "invalid", reason, "", "review"])
        rows.append([tid, "annotator-2", "1" if b else "0", reason, "", ""])
        if a != b:
            # 17 of the 35 disagreements are settled as valid: 458 + 17 = 475.
            final = k < 475
            rows.append([tid, "lead", "true" if final else "false", "cohort_unit",
                         "settled jointly", "adjudication"])
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["task_id", "annotator", "valid", "reason", "note", "stage"])
        writer.writerows(rows)
    return path


def _add_users(ws: str, *names: str) -> None:
    for name in names:
        code, _, err = invoke("users", "add", name, "--no-password", "--workspace", ws)
        assert code == 0, err


def test_create_import_report_reproduces_table_11(complex_ws: Path, tmp_path: Path) -> None:
    ws = _copy(complex_ws, tmp_path)
    _add_users(ws, "annotator-1", "annotator-2")
    code, out, err = invoke("audit", "create", "--workspace", ws, "--runs", "strong",
                            "--n", "500", "--seed", "0", "--annotators", "annotator-1,annotator-2",
                            "--name", "ehr-complex", "--json")
    assert code == 0, err
    created = json.loads(out)
    assert (created["pool_size"], created["total_tasks"], created["sample_size"]) == (954, 3915,
                                                                                      500)
    assert round(created["candidate_share"], 3) == 0.244
    assert sum(s["allocated"] for s in created["strata"]) == 500
    assert all(s["allocated"] >= 1 for s in created["strata"])

    # Same seed, same sample.
    code, out, err = invoke("audit", "create", "--workspace", ws, "--n", "500", "--seed", "0",
                            "--annotators", "annotator-1,annotator-2", "--name", "again")
    assert code == 0, err
    assert "954 / 3,915 tasks (24.4%)" in out
    store = open_store(Settings.from_env(workspace=Path(ws)).annotations_url())
    first = [i.task_id for i in store.audits.items("ehr-complex")]
    assert first == [i.task_id for i in store.audits.items("again")]
    assert len(set(first)) == 500 and all(int(t[5:]) < N_UNSOLVED for t in first)

    code, out, _ = invoke("audit", "list", "--workspace", ws, "--json")
    assert [a["audit"] for a in json.loads(out)] == ["ehr-complex", "again"]

    judgments = _table11_csv(first, tmp_path / "judgments.csv")
    code, out, err = invoke("audit", "import-judgments", str(judgments), "--workspace", ws,
                            "--audit", "ehr-complex", "--json")
    assert code == 0, err
    assert json.loads(out) == {"audit": "ehr-complex", "imported": 1035, "created": False}

    code, out, err = invoke("audit", "report", "--workspace", ws, "--audit", "ehr-complex",
                            "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    assert report["n_items"] == 500
    assert report["raw_agreement"] == pytest.approx(0.930)
    assert round(report["cohens_kappa"], 2) == 0.25
    assert round(report["pabak"], 2) == 0.86
    assert report["valid_rate_adjudicated"] == pytest.approx(0.95)
    assert report["valid_rate_by_annotator"] == {"annotator-1": pytest.approx(0.95),
                                                 "annotator-2": pytest.approx(0.952)}
    low, high = report["cohens_kappa_ci"]
    assert low < report["cohens_kappa"] < high
    for key in ("gwet_ac1", "prevalence_index", "bias_index"):
        assert isinstance(report[key], float)
    assert report["candidate_rate"] == pytest.approx(954 / 3915)
    assert report["audit_rate"] == pytest.approx(500 / 954)

    # The default --audit is the newest one ("again", nothing judged), so name it explicitly.
    code, md, _ = invoke("audit", "report", "--workspace", ws, "--audit", "ehr-complex",
                         "--format", "md")
    assert code == 0
    for text in ("24.4%", "954 / 3,915", "52.4%", "500 / 954", "95.0%", "475 / 500",
                 "95.2%", "476 / 500", "93.0%", "465 / 500", "| Cohen's κ | 0.25 |",
                 "| PABAK | 0.86 |"):
        assert text in md, text
    code, latex, _ = invoke("audit", "report", "--workspace", ws, "--audit", "ehr-complex",
                            "--format", "latex")
    assert code == 0 and r"Cohen's $\kappa$ & 0.25" in latex
    code, csv_text, _ = invoke("audit", "report", "--workspace", ws, "--audit", "ehr-complex",
                               "--format", "csv")
    assert code == 0 and csv_text.startswith("metric,value,count")
    code, out, _ = invoke("audit", "report", "--workspace", ws, "--format", "json")
    assert json.loads(out)["audit"] == "again"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("task_id,annotator,valid\nT0,ana,1\nT0,ben,maybe\n", "row 2"),
        ("task_id,annotator,valid\nT0,ana,1\nT1,ana,\n", "row 2"),
        ("task_id,annotator,valid,stage\nT0,ana,1,review\nT0,ben,0,final\n", "row 2"),
        ("task_id,annotator,reason\nT0,ana,other\n", "missing column(s): valid"),
    ],
    ids=["bad-valid", "missing-value", "bad-stage", "missing-column"],
)
def test_bad_rows_store_nothing(complex_ws: Path, tmp_path: Path, body: str,
                                expected: str) -> None:
    ws = _copy(complex_ws, tmp_path)
    _add_users(ws, "ana", "ben")
    code, _, err = invoke("audit", "create", "--workspace", ws, "--n", "20", "--name", "a1",
                          "--annotators", "ana,ben")
    assert code == 0, err
    bad = tmp_path / "bad.csv"
    bad.write_text(body.replace("T0", "task-0001").replace("T1", "unknown-task"))
    code, out, err = invoke("audit", "import-judgments", str(bad), "--workspace", ws)
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: bad.csv: ") and expected in err
    store = open_store(Settings.from_env(workspace=Path(ws)).annotations_url())
    assert store.audits.judgments("a1") == []
    assert len(store.audits.items("a1")) == 20  # the unknown task of row 2 was not added either


def test_unknown_tasks_are_allowed_and_errors_are_one_line(complex_ws: Path,
                                                          tmp_path: Path) -> None:
    ws = _copy(complex_ws, tmp_path)
    code, _, err = invoke("audit", "report", "--workspace", ws)
    assert code == 1 and err == "error: no audit yet: create one with 'faillab audit create'\n"
    code, _, err = invoke("audit", "create", "--workspace", ws, "--runs", "nope")
    assert code == 1 and err.startswith("error: unknown run(s): nope") and err.count("\n") == 1
    code, _, err = invoke("audit", "create", "--workspace", ws, "--annotators", "solo")
    assert code == 1 and "at least 2 annotators" in err
    code, out, err = invoke("audit", "create", "--workspace", ws, "--n", "5", "--name", "small")
    assert code == 0, err
    assert "annotators: open" in out
    extra = tmp_path / "extra.csv"
    extra.write_text("task_id,annotator,valid\nnot-in-workspace,ana,valid\n")
    code, out, err = invoke("audit", "import-judgments", str(extra), "--workspace", ws)
    assert code == 0, err
    code, out, _ = invoke("audit", "report", "--workspace", ws, "--format", "json")
    assert json.loads(out)["n_items"] == 6
    code, _, err = invoke("audit", "report", "--workspace", ws, "--audit", "nope")
    assert code == 1 and "unknown audit 'nope'" in err


def test_import_judgments_creates_a_missing_audit_from_the_file(tmp_path: Path) -> None:
    # No workspace sample at all: the judgments were made elsewhere.
    ws = str(tmp_path / "elsewhere")
    judgments = tmp_path / "external.csv"
    judgments.write_text(
        "task_id,annotator,valid,reason,note,stage\n"
        "ext-1,ana,valid,,,review\n"
        "ext-1,ben,valid,,,review\n"
        "ext-2,ana,invalid,temporal_wording,,review\n"
        "ext-2,ben,valid,,,review\n"
        "ext-2,lead,invalid,temporal_wording,settled,adjudication\n"
        "ext-3,ana,valid,,,review\n"
    )
    code, out, err = invoke("audit", "import-judgments", str(judgments), "--workspace", ws,
                            "--audit", "external", "--json")
    assert code == 0, err
    assert json.loads(out) == {"audit": "external", "imported": 6, "created": True}
    store = open_store(Settings.from_env(workspace=Path(ws)).annotations_url())
    assert [i.task_id for i in store.audits.items("external")] == ["ext-1", "ext-2", "ext-3"]
    store.close()

    code, out, err = invoke("audit", "report", "--workspace", ws, "--audit", "external",
                            "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    assert report["n_items"] == 3
    assert report["n_candidates"] is None and report["candidate_rate"] is None
    assert report["audit_rate"] is None
    assert report["n_unreviewed"] == 0
    assert report["n_unique_templates"] is None and report["n_without_template"] == 3
    assert report["valid_rate_adjudicated"] == pytest.approx(2 / 3)

    code, md, err = invoke("audit", "report", "--workspace", ws, "--audit", "external",
                           "--format", "md")
    assert code == 0, err
    assert "Candidate tasks" not in md and "Unreviewed" not in md
    assert "| Audited sample | – | 3 |" in md
    assert "| Structurally unique templates | – | – |" in md
    code, csv_text, _ = invoke("audit", "report", "--workspace", ws, "--audit", "external",
                               "--format", "csv")
    rows = {r["metric"]: r for r in csv.DictReader(csv_text.splitlines())}
    assert "candidate_tasks" not in rows and "audited_sample" not in rows
    assert rows["unique_templates"]["count"] == "" and rows["unreviewed"]["count"] == "0"
    assert rows["items_without_template"]["count"] == "3"
    code, out, _ = invoke("audit", "list", "--workspace", ws)
    assert out == "external: 3 items imported from a judgments file\n"

    # A second file into the now existing audit adds to it; a bad file creates nothing.
    more = tmp_path / "more.csv"
    more.write_text("task_id,annotator,valid\next-3,ben,valid\n")
    code, out, err = invoke("audit", "import-judgments", str(more), "--workspace", ws,
                            "--audit", "external")
    assert code == 0, err
    assert out == "imported 1 judgment(s) into audit external\n"
    bad = tmp_path / "bad.csv"
    bad.write_text("task_id,annotator,valid\next-9,ana,1\next-9,ben,maybe\n")
    code, out, err = invoke("audit", "import-judgments", str(bad), "--workspace", ws,
                            "--audit", "never")
    assert code == 1 and out == "" and err.count("\n") == 1 and "row 2" in err
    code, out, _ = invoke("audit", "list", "--workspace", ws, "--json")
    assert [a["audit"] for a in json.loads(out)] == ["external"]


def test_partly_templated_audit_counts_templates(complex_ws: Path, tmp_path: Path) -> None:
    ws = _copy(complex_ws, tmp_path)
    code, _, err = invoke("audit", "create", "--workspace", ws, "--n", "4", "--name", "a1")
    assert code == 0, err
    extra = tmp_path / "extra.csv"
    extra.write_text("task_id,annotator,valid\nnot-in-workspace,ana,valid\n")
    code, _, err = invoke("audit", "import-judgments", str(extra), "--workspace", ws,
                          "--audit", "a1")
    assert code == 0, err
    code, md, _ = invoke("audit", "report", "--workspace", ws, "--audit", "a1", "--format", "md")
    store = open_store(Settings.from_env(workspace=Path(ws)).annotations_url())
    templates = {i.template_id for i in store.audits.items("a1") if i.template_id}
    store.close()
    assert len(templates) >= 1
    assert (f"| Structurally unique templates | – | {len(templates)} "
            "(+1 items without a template) |") in md


def test_create_refuses_unknown_annotators_and_creates_nothing(complex_ws: Path,
                                                                tmp_path: Path) -> None:
    ws = _copy(complex_ws, tmp_path)
    _add_users(ws, "ann1")
    code, out, err = invoke("audit", "create", "--workspace", ws, "--n", "5", "--name", "typo",
                            "--annotators", "ann1,nobody,ghost")
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and "unknown users nobody, ghost" in err
    code, out, _ = invoke("audit", "list", "--workspace", ws, "--json")
    assert code == 0 and json.loads(out) == []
    store = open_store(Settings.from_env(workspace=Path(ws)).annotations_url())
    try:
        assert [u.name for u in store.users.all()] == ["ann1"]  # nobody was created either
    finally:
        store.close()


def test_archive_hands_the_default_back_to_the_previous_audit(complex_ws: Path,
                                                               tmp_path: Path) -> None:
    ws = _copy(complex_ws, tmp_path)
    for name in ("first", "mistake"):
        code, _, err = invoke("audit", "create", "--workspace", ws, "--n", "5", "--name", name)
        assert code == 0, err
    code, out, _ = invoke("audit", "report", "--workspace", ws, "--format", "json")
    assert json.loads(out)["audit"] == "mistake"
    code, out, err = invoke("audit", "archive", "mistake", "--workspace", ws)
    assert (code, out) == (0, "archived audit mistake\n"), err
    code, out, _ = invoke("audit", "report", "--workspace", ws, "--format", "json")
    assert json.loads(out)["audit"] == "first"
    code, out, _ = invoke("audit", "list", "--workspace", ws, "--json")
    assert [(a["audit"], a["archived_at"] is not None) for a in json.loads(out)] == [
        ("first", False), ("mistake", True)]
    code, _, err = invoke("audit", "archive", "nope", "--workspace", ws)
    assert code == 1 and "unknown audit 'nope'" in err
    code, out, err = invoke("audit", "archive", "mistake", "--restore", "--workspace", ws)
    assert code == 0 and out == "restored audit mistake\n", err
