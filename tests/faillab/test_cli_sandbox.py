from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from faillab.cli import main
from tests.support import EHRSQL_SQLITE, MIMIC_DEMO, require_shared


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_query_against_the_demo_database(demo_workspace: Path) -> None:
    code, out, _ = run("sandbox", "query", "SELECT count(*) AS n FROM patients",
                       "--workspace", str(demo_workspace), "--json")
    assert code == 0
    data = json.loads(out)
    assert data["columns"] == ["n"] and data["rows"][0][0] == 300


def test_refused_statement_is_one_line(demo_workspace: Path) -> None:
    code, _, err = run("sandbox", "query", "COPY patients TO '/tmp/x.csv'",
                       "--workspace", str(demo_workspace))
    assert code == 1 and err.startswith("error: refused") and err.count("\n") == 1


def test_use_points_the_workspace_at_sqlite(tmp_path: Path) -> None:
    db = require_shared(EHRSQL_SQLITE)
    ws = str(tmp_path / "ws")
    assert run("sandbox", "use", str(db), "--workspace", ws)[0] == 0
    code, out, _ = run("sandbox", "query", "SELECT count(*) FROM patients", "--workspace", ws,
                       "--json")
    assert code == 0 and json.loads(out)["rows"][0][0] > 0


def test_no_database_is_a_clear_error(tmp_path: Path) -> None:
    code, _, err = run("sandbox", "query", "SELECT 1", "--workspace", str(tmp_path / "empty"))
    assert code == 1 and "no EHR database" in err


def test_build_from_mimic_csv(tmp_path: Path) -> None:
    src = require_shared(MIMIC_DEMO)
    # A copy with only two small tables keeps the test quick while using the real files.
    mini = tmp_path / "mimic"
    (mini / "hosp").mkdir(parents=True)
    for name in ("patients", "admissions"):
        (mini / "hosp" / f"{name}.csv.gz").write_bytes((src / "hosp" / f"{name}.csv.gz")
                                                       .read_bytes())
    ws = tmp_path / "ws"
    code, out, _ = run("sandbox", "build", "--mimic-dir", str(mini), "--workspace", str(ws))
    assert code == 0 and "2 tables" in out
    code, out, _ = run("sandbox", "query", "SELECT count(*) FROM patients", "--workspace",
                       str(ws), "--json")
    assert json.loads(out)["rows"][0][0] == 100
