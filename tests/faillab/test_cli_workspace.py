"""``faillab workspace compact``: merges small parts, keeps every trajectory, says so."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from faillab.cli import main
from tests.support import make_trajectory


def _native(path: Path, task: str) -> Path:
    rec = make_trajectory().model_dump(mode="json", exclude={"id"})
    rec["task"]["id"] = task
    path.write_text(json.dumps(rec) + "\n")
    return path


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_compact_merges_parts_and_keeps_trajectories(tmp_path: Path) -> None:
    ws = str(tmp_path / "ws")
    for i in range(3):
        code, _, _ = _run("import", str(_native(tmp_path / f"{i}.jsonl", f"t{i}")),
                          "--workspace", ws, "--json")
        assert code == 0
    before = json.loads(_run("list", "--workspace", ws, "--json")[1])
    code, out, _ = _run("workspace", "compact", "--workspace", ws, "--json")
    assert code == 0 and json.loads(out) == {"merged_parts": 3, "new_parts": 1, "rows": 3}
    assert json.loads(_run("list", "--workspace", ws, "--json")[1]) == before
    code, out, _ = _run("workspace", "compact", "--workspace", ws)
    assert code == 0 and "nothing to compact" in out


def test_compact_without_workspace_is_one_line_error(tmp_path: Path) -> None:
    code, _, err = _run("workspace", "compact", "--workspace", str(tmp_path / "none"))
    assert code == 1 and err.startswith("error: ") and "no workspace" in err
