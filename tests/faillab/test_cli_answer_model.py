"""An answer table names its model or is asked for one: the claude table once imported as
model "unknown", which then showed in every table and chart."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from faillab.cli import main
from trajectories.workspace import Workspace

ROWS = "How many patients are female?,There are 2.,2,correct\n"


def _import(path: Path, ws: Path, *extra: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["import", str(path), "--workspace", str(ws), "--json",
                                       *extra])
    return result.exit_code, result.stdout, result.stderr


def _models(ws: Path) -> set[str]:
    return set(Workspace(ws).frame()["model"].astype(str))


def test_the_model_comes_from_the_file_name(tmp_path: Path) -> None:
    table = tmp_path / "gpt-4o-mini_answers.csv"
    table.write_text("question,model answer,gold,verdict\n" + ROWS)
    code, _, err = _import(table, tmp_path / "ws")
    assert code == 0, err
    assert _models(tmp_path / "ws") == {"gpt-4o-mini"}


def test_the_model_comes_from_the_folder_or_the_chat_links(tmp_path: Path) -> None:
    named = tmp_path / "m3-claude" / "answers.csv"
    named.parent.mkdir()
    named.write_text("question,model answer,gold,verdict\n" + ROWS)
    linked = tmp_path / "two" / "answers.csv"
    linked.parent.mkdir()
    linked.write_text("question,conversation link,model answer,gold,verdict\n"
                      "How many patients are female?,https://claude.ai/share/abc,There are 2.,"
                      "2,correct\n")
    for path, ws in ((named, tmp_path / "ws1"), (linked, tmp_path / "ws2")):
        code, _, err = _import(path, ws)
        assert code == 0, err
        assert _models(ws) == {"claude"}, path


def test_a_table_that_names_no_model_is_refused_until_one_is_given(tmp_path: Path) -> None:
    table = tmp_path / "results" / "answers.csv"
    table.parent.mkdir()
    table.write_text("question,model answer,gold,verdict\n" + ROWS)
    code, out, err = _import(table, tmp_path / "ws")
    assert "--model" in out + err and "unknown" not in out
    assert not Workspace(tmp_path / "ws").exists() or Workspace(tmp_path / "ws").frame().empty
    code, out, err = _import(table, tmp_path / "ws", "--model", "my-model")
    assert code == 0, err
    assert json.loads(out)["imported"] == 1 and _models(tmp_path / "ws") == {"my-model"}
