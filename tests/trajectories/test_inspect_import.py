"""Inspect AI logs: real `.eval` and `.json` logs written by Inspect itself, offline.

The logs come from a tiny tool-using task run by Inspect with its ``mockllm/model`` provider:
the mock model's turns call a ``sql`` tool over a SQLite file the test creates and a
``describe`` tool that raises Inspect's ``ToolError``. Nothing reaches the network: no API key
is set, and any HTTP(S) request would go to a closed local port.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import zipfile
from pathlib import Path
from typing import Any, Literal

import pandas as pd
import pytest
from click.testing import CliRunner

from faillab.cli import main
from trajectories.importers import ImportProblem, read_file
from trajectories.model import StepKind
from trajectories.workspace import Workspace

QUESTIONS = {
    "t-female": "How many female patients are there?",
    "t-male": "How many male patients are there?",
    "t-open": "Describe the admissions table.",
}
GOLD_SQL = "SELECT count(*) FROM patients WHERE gender = 'F'"
# Over 100 characters: Inspect pools such text as attachments in a sample's events.
LONG_ANSWER = "I could not describe the admissions table: " + "the tool refused. " * 30


def _make_db(path: Path) -> None:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE patients (subject_id INTEGER, gender TEXT)")
    con.executemany("INSERT INTO patients VALUES (?, ?)", [(1, "F"), (2, "M"), (3, "F")])
    con.commit()
    con.close()


def _run_inspect(db: Path, log_dir: Path, log_format: Literal["eval", "json"]) -> Path:
    """Run the tiny task through Inspect and return the log file it wrote."""
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import (
        ChatMessage,
        ChatMessageTool,
        ContentReasoning,
        ContentText,
        ModelOutput,
        ModelUsage,
        get_model,
    )
    from inspect_ai.scorer import match
    from inspect_ai.solver import generate, system_message, use_tools
    from inspect_ai.tool import ToolError, tool

    @tool
    def sql():
        async def execute(query: str) -> str:
            """Run a read-only SQL query against the EHR database.

            Args:
                query: The SQL query to run.
            """
            con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
            try:
                return str(con.execute(query).fetchall())
            except sqlite3.Error as err:
                return f"Error: {err}"
            finally:
                con.close()

        return execute

    @tool
    def describe():
        async def execute(table: str) -> str:
            """Describe a table of the EHR database.

            Args:
                table: The table name.
            """
            raise ToolError(f"unknown table {table}")

        return execute

    def reply(messages: list[ChatMessage], *_: Any) -> ModelOutput:
        question = next(m.text for m in messages if m.role == "user")
        tool_turns = sum(isinstance(m, ChatMessageTool) for m in messages)
        model = "mockllm/model"
        if question == QUESTIONS["t-female"]:
            if tool_turns == 0:  # a typo first: the tool reply is an SQL error
                out = ModelOutput.for_tool_call(model, "sql",
                                                {"query": "SELECT count(*) FROM patient"})
            elif tool_turns == 1:
                out = ModelOutput.for_tool_call(model, "sql", {"query": GOLD_SQL})
            else:
                out = ModelOutput.from_content(model, "2")
        elif question == QUESTIONS["t-open"] and tool_turns == 0:
            out = ModelOutput.for_tool_call(model, "describe", {"table": "admissions"})
        elif question == QUESTIONS["t-open"]:
            out = ModelOutput.from_content(model, LONG_ANSWER)
        else:  # reasoning first, then a wrong answer
            out = ModelOutput.from_content(model, [
                ContentReasoning(reasoning="Count rows where gender is M."),
                ContentText(text="3")])
        # Token usage given up front: mockllm would otherwise count tokens with tiktoken,
        # whose encodings are downloaded on first use.
        out.usage = ModelUsage(input_tokens=20, output_tokens=4, total_tokens=24)
        return out

    task = Task(
        dataset=[
            Sample(id="t-female", input=QUESTIONS["t-female"], target="2",
                   metadata={"intent": "Demographics", "gold_sql": GOLD_SQL, "cohort": "all"}),
            Sample(id="t-male", input=QUESTIONS["t-male"], target="1",
                   metadata={"intent": "Demographics"}),
            Sample(id="t-open", input=QUESTIONS["t-open"], metadata={"kind": "open"}),
        ],
        solver=[system_message("Answer with SQL."), use_tools(sql(), describe()), generate()],
        scorer=match(),
        name="tiny_ehr",
        epochs=2,
    )
    logs = inspect_eval(task, model=get_model("mockllm/model", custom_outputs=reply),
                        log_dir=str(log_dir), log_format=log_format, display="none",
                        max_samples=1, score_display=False)
    assert logs[0].status == "success", logs[0].error
    assert logs[0].location
    return Path(logs[0].location)


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("inspect")
    db = root / "ehr.sqlite"
    _make_db(db)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_DATA_HOME", str(root / "data"))  # Inspect's own traces and buffers
        mp.setenv("INSPECT_DISPLAY", "none")
        for var in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
            mp.setenv(var, "http://127.0.0.1:9")  # nothing may leave the machine
        for var in ("NO_PROXY", "no_proxy", "OPENAI_API_KEY", "ANTHROPIC_API_KEY",
                    "GOOGLE_API_KEY", "GEMINI_API_KEY"):
            mp.delenv(var, raising=False)
        return {fmt: _run_inspect(db, root / fmt, fmt) for fmt in ("eval", "json")}


def _by_task(path: Path) -> dict[str, Any]:
    """Epoch 1 of each sample, by task id (each sample ran for two epochs)."""
    parsed = read_file(path)
    assert parsed.format == "inspect"
    assert not parsed.problems
    trajs = [traj for _, traj in parsed.trajectories]
    assert sorted((t.task.id, t.run.rollout) for t in trajs) == sorted(
        (task_id, rollout) for task_id in QUESTIONS for rollout in (0, 1))
    return {traj.task.id: traj for traj in trajs if traj.run.rollout == 0}


@pytest.mark.parametrize("fmt", ["eval", "json"])
def test_samples_become_trajectories_with_tool_steps(logs: dict[str, Path], fmt: str) -> None:
    trajs = _by_task(logs[fmt])
    assert set(trajs) == set(QUESTIONS)
    female = trajs["t-female"]
    assert female.task.question == QUESTIONS["t-female"]
    assert female.run.model == "mockllm/model"
    assert female.run.name == logs[fmt].stem and female.run.rollout == 0
    assert female.run.model_extra["display_name"] == "tiny_ehr mockllm/model"
    sql_steps = [s for s in female.steps if s.kind == StepKind.SQL]
    assert [s.code for s in sql_steps] == ["SELECT count(*) FROM patient", GOLD_SQL]
    assert sql_steps[0].error and "no such table: patient" in (sql_steps[0].observation or "")
    assert not sql_steps[1].error and sql_steps[1].observation == "[(2,)]"
    assert json.loads(sql_steps[1].arguments or "") == {"query": GOLD_SQL}
    assert sql_steps[1].name == "sql"
    assert [s.role for s in female.steps[:2]] == ["system", "user"]

    opened = trajs["t-open"]
    calls = [s for s in opened.steps if s.kind == StepKind.TOOL_CALL]
    assert len(calls) == 1 and calls[0].name == "describe"
    assert json.loads(calls[0].arguments or "") == {"table": "admissions"}
    assert calls[0].error and "unknown table admissions" in (calls[0].observation or "")


@pytest.mark.parametrize("fmt", ["eval", "json"])
def test_scores_target_and_metadata(logs: dict[str, Path], fmt: str) -> None:
    trajs = _by_task(logs[fmt])
    female, male, opened = trajs["t-female"], trajs["t-male"], trajs["t-open"]
    # scores -> recorded outcome
    assert female.outcome.success is True and female.outcome.reward == 1.0
    assert female.outcome.source == "inspect:match"
    assert female.outcome.model_extra["scores"]["match"]["value"] == "C"
    assert male.outcome.success is False and male.outcome.reward == 0.0
    # target -> ground truth; a sample without one cannot be scored by exact match
    assert female.task.ground_truth == "2" and female.task.has_ground_truth
    assert male.task.ground_truth == "1" and male.task.has_ground_truth
    assert opened.task.has_ground_truth is False and opened.task.ground_truth is None
    # the final answer is the completion Inspect scored, and the step it came from
    extra = female.model_extra
    assert female.final_answer == "2" and extra["final_answer_source"] == "output_completion"
    assert female.steps[extra["final_answer_step"]].content == "2"
    assert male.final_answer == "3"
    # reasoning parts are thinking steps, apart from what the model said
    thinking = [s for s in male.steps if s.kind == StepKind.THINKING]
    assert [s.content for s in thinking] == ["Count rows where gender is M."]
    assert male.steps[male.steps.index(thinking[0]) + 1].content == "3"
    # long text comes back whole and exact
    assert opened.final_answer == LONG_ANSWER
    # metadata kept, and read for intent and reference SQL
    assert female.task.model_extra["metadata"] == {
        "intent": "Demographics", "gold_sql": GOLD_SQL, "cohort": "all"}
    assert female.task.intent == "Demographics" and female.task.reference_sql == GOLD_SQL
    assert opened.task.model_extra["metadata"] == {"kind": "open"}
    assert female.model_extra["source_record"]["log"]["eval"]["task"] == "tiny_ehr"


def test_both_formats_give_the_same_steps(logs: dict[str, Path]) -> None:
    eval_trajs, json_trajs = _by_task(logs["eval"]), _by_task(logs["json"])
    for task_id in QUESTIONS:
        left = [(s.kind, s.role, s.code, s.content, s.observation, s.error)
                for s in eval_trajs[task_id].steps]
        right = [(s.kind, s.role, s.code, s.content, s.observation, s.error)
                 for s in json_trajs[task_id].steps]
        assert left == right


def test_faillab_import_cli(logs: dict[str, Path], tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    runner = CliRunner()
    for fmt in ("eval", "json"):
        result = runner.invoke(main, ["import", str(logs[fmt]), "--workspace", str(ws), "--json"])
        assert result.exit_code == 0, result.output
        assert json.loads(result.output)["imported"] == 6
    again = runner.invoke(main, ["import", str(logs["eval"]), "--workspace", str(ws), "--json"])
    assert json.loads(again.output)["imported"] == 0  # same content, same ids
    summary = runner.invoke(main, ["summary", "--workspace", str(ws), "--json"])
    assert summary.exit_code == 0, summary.output
    counts = json.loads(summary.output)
    assert counts["unscored"] == 0  # t-open carries Inspect's own score
    assert counts["outcome_disagreements"] == 0  # exact match agrees where it can score
    stored = Workspace(ws).frame()
    assert len(stored) == 12
    # t-open has no target: exact match cannot score it, Inspect's recorded score stands
    for _, row in stored.iterrows():
        if row["task_id"] == "t-open":
            assert pd.isna(row["exact_match"])
        else:
            assert bool(row["exact_match"]) == bool(row["recorded_success"])
    one = Workspace(ws).get(str(stored["id"].iloc[0]))
    assert one is not None and (one.model_extra or {}).get("source_format") == "inspect"


def test_run_and_model_overrides(logs: dict[str, Path]) -> None:
    from trajectories.importers.detect import iter_file

    items = list(iter_file(logs["json"], "inspect", run="my-run", model="gpt-x"))
    assert {i.trajectory.run.name for i in items if i.trajectory} == {"my-run"}
    assert {i.trajectory.run.model for i in items if i.trajectory} == {"gpt-x"}
    assert {i.location for i in items} == {
        f"sample {t} epoch {e}" for t in QUESTIONS for e in (1, 2)}


def test_truncated_eval_log_is_one_line(logs: dict[str, Path], tmp_path: Path) -> None:
    broken = tmp_path / "broken.eval"
    broken.write_bytes(logs["eval"].read_bytes()[:300])
    with pytest.raises(ImportProblem) as err:
        read_file(broken)
    message = str(err.value)
    assert "\n" not in message and "not a readable Inspect .eval log" in message
    assert message.startswith(str(broken))


def test_bad_sample_is_rejected_with_its_location(logs: dict[str, Path], tmp_path: Path) -> None:
    doc = json.loads(logs["json"].read_text())
    doc["samples"][1]["messages"] = "not a list"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc, indent=2))
    parsed = read_file(bad)
    assert len(parsed.trajectories) == 5 and len(parsed.problems) == 1
    problem = parsed.problems[0]
    sample = doc["samples"][1]
    assert problem.location == f"sample {sample['id']} epoch {sample['epoch']}"
    assert problem.field == "messages"


def test_eval_archive_is_detected_by_content(logs: dict[str, Path], tmp_path: Path) -> None:
    renamed = tmp_path / "run-log.zip"
    renamed.write_bytes(logs["eval"].read_bytes())
    assert zipfile.is_zipfile(renamed)
    assert len(read_file(renamed).trajectories) == 6
    # An explicit other format on an Inspect .json log names what it expected.
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"messages": []}))
    parsed = read_file(other, "inspect")
    assert parsed.problems and "expected an Inspect eval log" in parsed.problems[0].message


def test_eval_log_without_inspect_installed_is_one_line(
        logs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    # As on a machine without the optional package: importing inspect_ai.log fails.
    monkeypatch.setitem(sys.modules, "inspect_ai.log", None)
    with pytest.raises(ImportProblem) as err:
        read_file(logs["eval"])
    assert "pip install inspect-ai" in str(err.value) and "\n" not in str(err.value)
    assert len(read_file(logs["json"]).trajectories) == 6  # .json logs need nothing
