"""``faillab clusters`` and ``faillab evaluate`` on real trajectories."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from faillab.cli import main
from labeling.store import open_store
from opinions.prelabel.base import LabelResult, PrelabelKey, PrelabelRecord
from taxonomy import default_taxonomy
from tests.support import EHRSQL_SQLITE, REAL_TRAJECTORIES, REPO, require_shared
from trajectories.workspace import Workspace


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three real logs, imported once for the module; tests get a copy (they may write)."""
    files = sorted(require_shared(REAL_TRAJECTORIES).glob("*.json"))[:3]
    root = tmp_path_factory.mktemp("clusters") / "ws"
    Workspace(root).import_files(files)
    return root


@pytest.fixture
def ws(imported: Path, tmp_path: Path) -> Workspace:
    root = tmp_path / "ws"
    shutil.copytree(imported, root)
    return Workspace(root)


def _failed(ws: Workspace) -> list[str]:
    return [str(i) for i in ws.query_df("SELECT id FROM trajectories WHERE NOT success")["id"]]


def test_clusters_json_puts_every_failure_in_exactly_one_cluster(ws: Workspace) -> None:
    code, out, _ = invoke("clusters", "--json", "--embedder", "tfidf",
                          "--workspace", str(ws.root))
    assert code == 0
    data = json.loads(out)
    members = [m for c in data["clusters"] for m in c["members"]]
    assert sorted(members) == sorted(_failed(ws))
    assert data["failures"] == len(members)
    for c in data["clusters"]:
        assert set(c["outliers"]) <= set(c["members"])
        assert [i["id"] for i in c["items"]] == c["members"]


def test_evaluate_confirmed_needs_enough_labels_then_reports_each_labeller(
        ws: Workspace) -> None:
    code, _, err = invoke("evaluate", "--confirmed", "--workspace", str(ws.root))
    assert code == 1 and "only 0 failures have confirmed labels" in err
    store = open_store(f"sqlite:///{ws.root / 'annotations.sqlite'}")
    taxonomy = default_taxonomy()
    store.taxonomies.save(taxonomy.version, taxonomy.name, taxonomy.to_dict())
    store.users.add("ana")
    failed = _failed(ws)
    keys = ["semantic_misunderstanding", "medical_code_lookup_error", "sql_logic_error"]
    for n, tid in enumerate(failed):
        store.labels.add(tid, keys[n % 3], annotator="ana", taxonomy_version=taxonomy.version,
                         first_error_step=2)
        # A stored Gemini pre-label that agrees on every third item only.
        store.prelabels.save(PrelabelRecord(
            key=PrelabelKey(tid, taxonomy.version, "p1", "gemini-test"),
            result=LabelResult(keys[0], 0.8, 2, "step 2: ...", "gemini", "1"),
        ))
    store.close()
    code, out, _ = invoke("evaluate", "--confirmed", "--json", "--workspace", str(ws.root))
    assert code == 0
    figures = json.loads(out)
    assert figures["items"] == len(failed)
    for name in ("heuristic", "finder", "classifier", "stored gemini"):
        assert figures[name]["n"] == len(failed)
        assert 0.0 <= figures[name]["accuracy"] <= 1.0
    agreeing = sum(1 for n in range(len(failed)) if n % 3 == 0)
    assert figures["stored gemini"]["accuracy"] == pytest.approx(agreeing / len(failed),
                                                                 abs=1e-4)
    assert figures["stored gemini"]["step_exact"] == 1.0


def test_evaluate_refuses_a_missing_label_file(tmp_path: Path) -> None:
    code, _, err = invoke("evaluate", "--labels", str(tmp_path / "nope.csv"))
    assert code == 1 and "no such label file" in err


def test_evaluate_refuses_a_missing_database(tmp_path: Path) -> None:
    code, _, err = invoke("evaluate", "--db", str(tmp_path / "nope.sqlite"))
    assert code == 1 and "no such EHR database" in err


@pytest.mark.slow
def test_evaluate_with_db_executes_the_finder(tmp_path: Path) -> None:
    """--db runs the reference of every item on the database and says which one it used."""
    db = require_shared(EHRSQL_SQLITE)
    common = ("--labels", str(REPO / "tests/data/ai612_eval/adjudicated.csv"),
              "--trajectories", str(require_shared(REAL_TRAJECTORIES)), "--json")
    code, out, err = invoke("evaluate", *common, "--db", str(db),
                            "--write-floors", str(tmp_path / "floors.json"))
    assert code == 0, err
    executed = json.loads(out)
    assert executed["ehr_db"] == db.name and executed["executed"] == executed["items"] == 95
    assert json.loads((tmp_path / "floors.json").read_text()) == executed
    code, out, _ = invoke("evaluate", *common)
    structural = json.loads(out)
    assert structural["ehr_db"] is None and structural["executed"] == 0
    # Execution changes what the finder decides (its evidence rows are real results).
    assert executed["finder"] != structural["finder"]
