"""``faillab verdicts report --against FILE``: the judge against any per-question reference
verdicts (an official scorer's output, a CSV of people's verdicts)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from analysis.verdicts import ReferenceFileError, read_reference, reference_verdict
from faillab.cli import main
from tests.support import EHRSQL_SQLITE, SHARED_DATA, require_shared

SPLIT = SHARED_DATA / "ehrsql-2024" / "mimic_iv" / "test"
RIGHT, WRONG, ABSTAIN = ("905bf1d8d8b2ee5cc48396ca", "290c69f642635c781b5c7611",
                         "6c16600578aa6d76931a6d00")


def _invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = require_shared(EHRSQL_SQLITE)
    labels = json.loads(require_shared(SPLIT / "label.json").read_text())
    root = tmp_path_factory.mktemp("against")
    prediction = root / "prediction.json"
    prediction.write_text(json.dumps({RIGHT: labels[RIGHT], WRONG: "SELECT 'nothing'",
                                      ABSTAIN: "null"}))
    ws = root / "ws"
    assert _invoke("sandbox", "use", str(db), "--workspace", str(ws))[0] == 0
    code, out = _invoke("import", str(prediction), "--tasks", str(SPLIT / "data.json"),
                        "--run", "sub", "--workspace", str(ws))
    assert code == 0, out
    return ws


def test_reference_verdicts_read_as_a_scorer_writes_them() -> None:
    assert [reference_verdict(v) for v in (1, 0, -1, "correct", "Incorrect", True, "maybe")] \
        == [True, False, False, True, False, True, None]


def test_the_judge_agrees_with_a_scorers_per_question_output(workspace: Path,
                                                             tmp_path: Path) -> None:
    reference = tmp_path / "per_question.json"
    reference.write_text(json.dumps({RIGHT: 1, WRONG: -1, ABSTAIN: 0, "gone": 1}))
    code, out = _invoke("verdicts", "report", "--against", str(reference), "--workspace",
                        str(workspace), "--json")
    assert code == 0, out
    report = json.loads(out)
    assert (report["n"], report["agree"], report["wrong"]) == (3, 3, 0)
    assert report["by_profile"] == {"ehrsql-2024": 3}
    assert report["unmatched_ids"] == ["gone"]
    # A near miss: the reference says the wrong answer was right; the report names it.
    reference.write_text(json.dumps({RIGHT: 1, WRONG: 1}))
    code, out = _invoke("verdicts", "report", "--against", str(reference), "--workspace",
                        str(workspace))
    assert code == 0, out
    assert "agree 1 (50%)" in out and "the reference: correct · judge: incorrect" in out


def test_a_csv_of_verdicts_and_a_file_without_them(workspace: Path, tmp_path: Path) -> None:
    table = tmp_path / "verdicts.csv"
    table.write_text(f"question_id,Correct/Incorrect\n{RIGHT},Correct\n{ABSTAIN},Incorrect\n")
    assert read_reference(table) == {RIGHT: True, ABSTAIN: False}
    code, out = _invoke("verdicts", "report", "--against", str(table), "--run", "sub",
                        "--workspace", str(workspace), "--json")
    assert code == 0 and json.loads(out)["agree"] == 2
    bad = tmp_path / "bad.csv"
    bad.write_text("name,colour\na,red\n")
    with pytest.raises(ReferenceFileError):
        read_reference(bad)
    code, out = _invoke("verdicts", "report", "--against", str(bad), "--workspace",
                        str(workspace))
    assert code != 0 and "verdict column" in out
