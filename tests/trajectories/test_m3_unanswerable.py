"""The m3 harness's own JSON export of ten unanswerable questions, read with the published
mapping (data/m3-export.map.toml) and its task file, judged as the people who read it did."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from faillab.cli import main
from tests.support import REPO, SHARED_DATA, require_shared

SAMPLE = SHARED_DATA / "trajectories" / "m3-unanswerable-sample"


def test_the_export_imports_with_the_mapping_and_is_judged_ten_of_ten(tmp_path: Path) -> None:
    folder = require_shared(SAMPLE)
    ws = tmp_path / "ws"
    runner = CliRunner()
    result = runner.invoke(main, ["import", str(folder), "--map",
                                  str(REPO / "data" / "m3-export.map.toml"), "--tasks",
                                  str(folder / "EHRSQL_benchmark_unanswerable.csv"),
                                  "--require-tasks", "--workspace", str(ws)])
    assert result.exit_code == 0, result.output
    assert "imported 10" in result.output
    result = runner.invoke(main, ["verdicts", "report", "--workspace", str(ws), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["n"], report["agree"], report["wrong"]) == (10, 10, 0)
