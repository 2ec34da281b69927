from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from faillab.cli import main
from tests.support import REPO, make_trajectory


def native_file(path: Path, n: int = 3) -> Path:
    lines = []
    for i in range(n):
        t = make_trajectory(final_answer=52 if i % 2 == 0 else 7)
        rec = t.model_dump(mode="json", exclude={"id"})
        rec["task"]["id"] = f"t{i}"
        lines.append(json.dumps(rec))
    path.write_text("\n".join(lines) + "\n")
    return path


def invoke(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_import_summary_list_json(tmp_path: Path) -> None:
    ws = str(tmp_path / "ws")
    src = native_file(tmp_path / "a.jsonl")
    code, out, _ = invoke("import", str(src), "--workspace", ws, "--json")
    assert code == 0 and json.loads(out) == {"imported": 3, "duplicates": 0, "rejected": 0,
                                             "replaced": 0, "runs": {"run-a": 3}}
    code, out, _ = invoke("import", str(src), "--workspace", ws, "--json")
    # The file was imported whole before: it is not read again, so no run is counted.
    assert json.loads(out) == {"imported": 0, "duplicates": 3, "rejected": 0, "replaced": 0,
                               "runs": {}}
    code, out, _ = invoke("summary", "--workspace", ws, "--json")
    assert json.loads(out) == {"trajectories": 3, "tasks": 3, "runs": 1, "failed": 1,
                               "unscored": 0, "needs_a_person": 1, "decided_by_people": 0,
                               "outcome_disagreements": 0, "success_source": "verdict"}
    code, out, _ = invoke("list", "--failed", "--workspace", ws, "--json")
    rows = json.loads(out)
    assert [r["task_id"] for r in rows] == ["t1"]
    assert set(rows[0]) == {"id", "run", "model", "task_id", "success", "outcome"}
    assert rows[0]["outcome"] == "failure"


def test_workspace_from_environment(tmp_path: Path) -> None:
    ws = tmp_path / "env-ws"
    src = native_file(tmp_path / "a.jsonl", 1)
    code, _, _ = invoke("import", str(src), "--json", env={"FAILLAB_WORKSPACE": str(ws)})
    assert code == 0 and (ws / "trajectories").is_dir()


def test_no_progress_bar_goes_to_a_log_or_a_pipe(tmp_path: Path, demo_workspace: Path) -> None:
    """Progress bars are for a terminal: in a log each refresh was a line, and an error after
    a slow start was no longer the one line a script reads."""
    import shutil

    ws = tmp_path / "ws"
    shutil.copytree(demo_workspace, ws)
    # Pre-labelling the demo's failures takes seconds: a bar would have appeared (0.2 s).
    proc = subprocess.run(
        [sys.executable, "-m", "faillab.cli", "prelabel", "--workspace", str(ws)],
        cwd=REPO, capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "traj/s" not in proc.stderr and "\r" not in proc.stderr, proc.stderr[:500]
    assert "labelled" in proc.stdout + proc.stderr


def test_invalid_file_is_one_line_error_and_changes_nothing(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task": {"id": "1", "question": "q"}, "run": {"name": "r"}}\n')
    proc = subprocess.run(
        [sys.executable, "-m", "faillab.cli", "import", str(bad), "--workspace", str(ws)],
        cwd=REPO, capture_output=True, text=True,
    )
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "line 1" in proc.stderr and "run.model" in proc.stderr
    assert not list(ws.glob("trajectories/part-*.parquet"))


def test_skip_invalid_reports_rejects(tmp_path: Path) -> None:
    src = native_file(tmp_path / "a.jsonl", 2)
    src.write_text(src.read_text() + "{broken\n")
    code, out, _ = invoke("import", str(src), "--workspace", str(tmp_path / "ws"),
                            "--skip-invalid", "--json")
    assert code == 0 and json.loads(out) == {"imported": 2, "duplicates": 0, "rejected": 1,
                                             "replaced": 0, "runs": {"run-a": 2}}


def test_run_and_model_overrides(tmp_path: Path) -> None:
    ws = str(tmp_path / "ws")
    invoke("import", str(native_file(tmp_path / "a.jsonl", 1)), "--workspace", ws,
           "--run", "R9", "--model", "M9", "--json")
    _, out, _ = invoke("list", "--workspace", ws, "--json")
    assert json.loads(out)[0]["run"] == "R9" and json.loads(out)[0]["model"] == "M9"
