"""The m3 harness's own JSON export of ten unanswerable questions, read with the published
mapping (data/m3-export.map.toml) and its task file, judged as the people who read it did."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from faillab.cli import main
from tests.support import REPO, SHARED_DATA, require_shared

SAMPLE = SHARED_DATA / "trajectories" / "m3-unanswerable-sample"


def imported(ws: Path) -> CliRunner:
    """The sample imported with the published mapping and its task file into ``ws``."""
    folder = require_shared(SAMPLE)
    runner = CliRunner()
    result = runner.invoke(main, ["import", str(folder), "--map",
                                  str(REPO / "data" / "m3-export.map.toml"), "--tasks",
                                  str(folder / "EHRSQL_benchmark_unanswerable.csv"),
                                  "--require-tasks", "--workspace", str(ws)])
    assert result.exit_code == 0, result.output
    assert "imported 10" in result.output
    return runner


def test_the_export_imports_with_the_mapping_and_is_judged_ten_of_ten(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    runner = imported(ws)
    result = runner.invoke(main, ["verdicts", "report", "--workspace", str(ws), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["n"], report["agree"], report["wrong"]) == (10, 10, 0)


def test_the_answer_is_the_last_step_and_every_failure_gets_a_step(tmp_path: Path) -> None:
    """The mapping keeps the agent's final message as its last step, so a conversation that
    used no tool still has an action to name; every answered unanswerable question gets a
    proposal at a step of the conversation."""
    ws = tmp_path / "ws"
    imported(ws)
    from trajectories.workspace import Workspace

    workspace = Workspace(ws)
    trajectories = list(workspace.get_many(sorted(workspace.existing_ids())).values())
    assert all(t.steps and t.steps[-1].kind.value == "message" for t in trajectories)
    no_tool = [t for t in trajectories if len(t.steps) == 1]
    assert no_tool, "the sample has a conversation that used no tool"
    from trajectories.evidence import find_divergence
    from trajectories.outcome import recorded_verdict

    failed = [t for t in trajectories if recorded_verdict(t.outcome) is False]
    assert len(failed) == 4
    for t in failed:
        ev = find_divergence(t)
        assert ev.step is not None and 0 <= ev.step < len(t.steps), ev.reason
        assert ev.category == "semantic_misunderstanding"
