"""``faillab show``: one trajectory as terminal-safe text, on workspaces built by the CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path

from click.testing import CliRunner

from faillab.cli import main
from tests.support import make_trajectory
from trajectories.model import Outcome, Step, StepKind


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def _import(tmp_path: Path, record: dict[str, object]) -> tuple[str, str]:
    """Import one native record into a fresh workspace; return (workspace, trajectory id)."""
    src = tmp_path / "one.jsonl"
    src.write_text(json.dumps(record) + "\n")
    ws = str(tmp_path / "ws")
    code, _, err = _run("import", str(src), "--workspace", ws, "--json")
    assert code == 0, err
    rows = json.loads(_run("list", "--workspace", ws, "--json")[1])
    assert len(rows) == 1
    return ws, rows[0]["id"]


def test_demo_failure_shows_every_step_in_order(tmp_path: Path) -> None:
    ws = str(tmp_path / "ws")
    code, _, err = _run("demo", "--workspace", ws, "--tasks", "6", "--rollouts", "1",
                        "--patients", "150", "--json")
    assert code == 0, err
    failed = json.loads(_run("list", "--workspace", ws, "--failed", "--json")[1])
    assert failed, "the demo agents fail some tasks"
    tid = failed[0]["id"]
    code, record_text, _ = _run("show", tid, "--workspace", ws, "--json")
    assert code == 0
    record = json.loads(record_text)
    assert record["id"] == tid
    code, out, _ = _run("show", tid, "--workspace", ws, "--max-chars", "0")
    assert code == 0
    assert tid in out and record["task"]["question"].splitlines()[0] in out
    assert record["run"]["name"] in out and record["run"]["model"] in out
    # Each step's header, with its index and kind, in the recorded order.
    positions = []
    for i, step in enumerate(record["steps"]):
        match = re.search(rf"^\[{i}\] {step['kind']}\b", out, re.MULTILINE)
        assert match, f"step {i} missing"
        positions.append(match.start())
        body = step.get("code") or step.get("content")
        if body:
            assert body.splitlines()[0].strip() in out[match.start():]
    assert positions == sorted(positions)
    assert "OUTCOME FAILURE" in out
    assert positions and out.index("FINAL ANSWER") > positions[-1]
    if record["task"]["reference_sql"]:
        assert record["task"]["reference_sql"].splitlines()[0] in out.split("REFERENCE SQL")[1]


def test_control_sequences_are_stripped_and_no_ground_truth_is_unknown(tmp_path: Path) -> None:
    traj = make_trajectory(
        steps=[
            Step(kind=StepKind.MESSAGE, role="user", content="count \x1b[2Jpatients"),
            Step(kind=StepKind.SQL, code="SELECT 1 \x1b]0;owned\x07",
                 observation="rows\x1b[31m red\x1b[0m\x9b1A\x07 end", error=False),
            Step(kind=StepKind.MESSAGE, content="done\u202e"),
        ],
        final_answer="52\x1b[8m",
        outcome=Outcome(success=True, source="producer"),
    )
    record = traj.model_dump(mode="json", exclude={"id"})
    record["task"]["has_ground_truth"] = False
    record["task"]["ground_truth"] = None
    record["task"]["question"] = "How many\x1b[1A female?"
    ws, tid = _import(tmp_path, record)
    code, out, _ = _run("show", tid, "--workspace", ws)
    assert code == 0
    for bad in ("\x1b", "\x07", "\x9b", "\u202e"):
        assert bad not in out
    assert "rows red" in out and "How many female?" in out
    assert "OUTCOME UNKNOWN" in out
    assert "OUTCOME SUCCESS" not in out
    assert "the producer recorded: success" in out
    # --json keeps the stored record exactly (JSON escapes the control characters itself).
    code, raw, _ = _run("show", tid, "--workspace", ws, "--json")
    assert code == 0 and "\x1b" not in raw
    assert json.loads(raw)["steps"][1]["observation"] == "rows\x1b[31m red\x1b[0m\x9b1A\x07 end"


def test_long_observation_is_cut_with_a_note(tmp_path: Path) -> None:
    long_obs = "x" * 250
    traj = make_trajectory(steps=[Step(kind=StepKind.SQL, code="SELECT 1",
                                       observation=long_obs)])
    ws, tid = _import(tmp_path, traj.model_dump(mode="json", exclude={"id"}))
    code, out, _ = _run("show", tid, "--workspace", ws, "--max-chars", "100")
    assert code == 0
    assert "x" * 100 in out and "x" * 101 not in out
    assert "150 more characters cut" in out
    code, out, _ = _run("show", tid, "--workspace", ws, "--max-chars", "0")
    assert long_obs in out and "cut" not in out


def test_unknown_id_is_a_clear_error_with_status_2(tmp_path: Path) -> None:
    ws, _ = _import(tmp_path, make_trajectory().model_dump(mode="json", exclude={"id"}))
    code, out, err = _run("show", "no-such-id", "--workspace", ws)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and "no-such-id" in err
    code, _, err = _run("show", "no-such-id", "--workspace", str(tmp_path / "empty"))
    assert code == 2 and "no-such-id" in err
