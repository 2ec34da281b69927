"""Real agent logs read whole: LM Studio exports as LM Studio writes them, their task rows
matched, results tables with verdicts, and task files with every format. The real files are
read where they are (../shared/data); variants are built here from them."""

from __future__ import annotations

import copy
import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from faillab.cli import main
from taxonomy import default_taxonomy
from tests.support import (
    CLAUDE_ANSWERS,
    LMSTUDIO_SAMPLE,
    REAL_TRAJECTORIES,
    REPO,
    make_trajectory,
    require_shared,
)
from trajectories.importers import read_file
from trajectories.importers.tasks import load_tasks, question_key
from trajectories.model import StepKind
from trajectories.reading import result_table
from trajectories.workspace import Workspace

DATA = REPO / "data"


def conversations() -> list[Path]:
    return sorted(require_shared(LMSTUDIO_SAMPLE).glob("*.conversation.json"))


def tool_calls_in(path: Path) -> list[dict[str, Any]]:
    """The toolCallRequest parts of a real export, read straight from its JSON."""
    doc = json.loads(path.read_text("utf-8"))
    return [part for msg in doc["messages"] for version in msg["versions"]
            for step in version.get("steps", []) for part in step.get("content") or []
            if isinstance(part, dict) and part.get("type") == "toolCallRequest"]


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_every_tool_call_of_the_real_exports_keeps_its_name_and_sql() -> None:
    tasks = load_tasks(LMSTUDIO_SAMPLE / "EHRSQL_benchmark.csv")
    sql_calls = sql_steps = calls = steps_with_names = readable_last = 0
    for path in conversations():
        requests = tool_calls_in(path)
        traj = read_file(path, tasks=tasks).trajectories[0][1]
        actions = traj.actions
        calls += len(requests)
        steps_with_names += sum(1 for s in actions if s.name)
        sql_calls += sum(1 for r in requests if r["name"] == "execute_mimic_query")
        sql = [s for s in actions if s.kind == StepKind.SQL]
        sql_steps += len(sql)
        for step, request in zip(sql, [r for r in requests
                                       if r["name"] == "execute_mimic_query"], strict=True):
            assert step.code == request["parameters"]["sql_query"]
            assert step.observation is not None  # its result found its request by callId
        last_ok = [s for s in sql if not s.error]
        readable_last += bool(last_ok and result_table(last_ok[-1].observation) is not None)
        # Reasoning and what was said are apart; no harmony marker is left in either.
        assert not any("<|" in (s.content or "") for s in traj.steps)
        assert traj.final_answer and isinstance(traj.final_answer, str)
        assert traj.model_extra and traj.model_extra["task_match"] == "conversation"
    assert calls == steps_with_names == 50
    assert sql_steps == sql_calls == 22
    assert readable_last == 10


def test_the_real_sample_matches_its_task_rows_and_verdicts(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    code, out, err = invoke("import", str(require_shared(LMSTUDIO_SAMPLE)), "--tasks",
                            str(LMSTUDIO_SAMPLE / "EHRSQL_benchmark.csv"), "--workspace",
                            str(ws), "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["imported"] == 10 and report["tasks_matched"] == 10
    assert report["tasks_unmatched"] == []
    # Ten files of one model are one run, named after the model and the folder.
    assert report["runs"] == {"gpt-oss-20b (m3-lmstudio-sample)": 10}
    frame = Workspace(ws).frame()
    assert frame["recorded_success"].tolist() == [True] * 10  # the human verdicts
    assert frame["task_id"].nunique() == 10


def harness_variant(path: Path, suffix: str) -> dict[str, Any]:
    """A real export whose question carries a harness suffix, renamed like another."""
    doc = json.loads(path.read_text("utf-8"))
    first = doc["messages"][0]["versions"][0]["content"][0]
    first["text"] = first["text"].split(" Set the current time")[0] + suffix
    doc["name"] = "\U0001f4a1 **Recommended wor"  # a title two conversations share
    return doc


def test_task_rows_match_by_question_with_harness_text_and_quoted_newlines(
        tmp_path: Path) -> None:
    sources = conversations()[:3]
    rows = list(csv.DictReader(io.StringIO((LMSTUDIO_SAMPLE / "EHRSQL_benchmark.csv")
                                           .read_text("utf-8"), newline="")))
    by_file = {r["Chat Conversation"]: r for r in rows}
    folder = tmp_path / "convs"
    folder.mkdir()
    task_rows = []
    for i, source in enumerate(sources):
        doc = harness_variant(source, ' Set the current time to be "2100-12-31 23:59:00".')
        (folder / f"run-{i}.json").write_text(json.dumps(doc), "utf-8")
        row = by_file[source.name]
        # No file named, the question broken over two lines inside its quotes.
        words = row["Query"].split(" ")
        task_rows.append({"id": f"task-{i}", "question": " ".join(words[:4]) + "\n"
                          + " ".join(words[4:]), "gold_answer": row["Golden Truth"],
                          "gold_sql": row["Golden Truth SQL Query"]})
    task_file = tmp_path / "tasks.csv"
    with task_file.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=["id", "question", "gold_answer",
                                                    "gold_sql"])
        writer.writeheader()
        writer.writerows(task_rows)
    tasks = load_tasks(task_file)
    assert "\n" in tasks.rows[0].question  # the CSV parser kept the quoted newline
    ids = {}
    for i in range(3):
        traj = read_file(folder / f"run-{i}.json", tasks=tasks).trajectories[0][1]
        assert traj.task.id == f"task-{i}"
        assert traj.model_extra and traj.model_extra["task_match"] == "contained"
        ids[i] = traj.task.id
    # Without the task file the same titles never make one task of different questions.
    keys = {read_file(folder / f"run-{i}.json").trajectories[0][1].task.id for i in range(3)}
    assert len(keys) == 3


def test_ambiguous_task_rows_are_refused_not_guessed(tmp_path: Path) -> None:
    task_file = tmp_path / "tasks.json"
    task_file.write_text(json.dumps([
        {"id": "a", "question": "How many patients are female?", "gold_answer": 2},
        {"id": "b", "question": "How many patients are female?", "gold_answer": 3}]))
    traj = read_file(DATA / "lmstudio-conversation.json",
                     tasks=load_tasks(task_file)).trajectories[0][1]
    extra = traj.model_extra or {}
    assert extra["task_match"] is None and "several task rows" in extra["task_match_problem"]
    assert traj.task.id == question_key(traj.task.question)
    assert not traj.task.has_ground_truth


def test_require_tasks_fails_the_import_and_lists_the_unmatched(tmp_path: Path) -> None:
    task_file = tmp_path / "tasks.csv"
    task_file.write_text("question,gold_answer\nWhat is the average age of patients?,64\n")
    ws = tmp_path / "ws"
    code, out, err = invoke("import", str(DATA / "lmstudio-conversation.json"), "--tasks",
                            str(task_file), "--workspace", str(ws))
    assert code == 0, err
    assert "0 trajectories matched a task row, 1 did not" in out
    assert "unmatched: lmstudio-conversation.json document" in err
    ws2 = tmp_path / "ws2"
    code, _, err = invoke("import", str(DATA / "lmstudio-conversation.json"), "--tasks",
                          str(task_file), "--require-tasks", "--workspace", str(ws2))
    assert code == 1 and "no task row matches" in err
    assert not Workspace(ws2).part_files()


def python_literal_variant(doc: dict[str, Any]) -> dict[str, Any]:
    """Parameters written with repr, one result without its callId, one without a request."""
    doc = copy.deepcopy(doc)
    steps = doc["messages"][1]["versions"][0]["steps"]
    parts = [p for s in steps for p in s.get("content") or [] if isinstance(p, dict)]
    requests = [p for p in parts if p["type"] == "toolCallRequest"]
    results = [p for p in parts if p["type"] == "toolCallResult"]
    for request in requests:
        request["parameters"] = repr(request["parameters"]).replace("False", "False")
    del results[0]["callId"], results[0]["toolCallRequestId"]
    steps.append({"type": "contentBlock", "content": [
        {"type": "toolCallResult", "callId": 424242, "content": "orphan output"}]})
    return doc


def test_python_literal_parameters_and_missing_call_ids(tmp_path: Path) -> None:
    doc = python_literal_variant(json.loads((DATA / "lmstudio-conversation.json").read_text()))
    path = tmp_path / "conv.json"
    path.write_text(json.dumps(doc))
    traj = read_file(path).trajectories[0][1]
    sql = [s for s in traj.steps if s.kind == StepKind.SQL]
    assert len(sql) == 1 and sql[0].code and sql[0].code.startswith("SELECT COUNT(*)")
    schema = next(s for s in traj.steps if s.name == "get_table_info")
    assert json.loads(schema.arguments or "") == {"table_name": "patients",
                                                  "show_sample": False}
    # The result without ids answered the oldest waiting call; the orphan is a tool message.
    assert schema.observation and "Column Information" in schema.observation
    assert traj.steps[-1].role == "tool" and traj.steps[-1].content == "orphan output"


def test_results_table_with_verdicts_imports(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    code, out, err = invoke("import", str(require_shared(CLAUDE_ANSWERS)), "--workspace",
                            str(ws), "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["imported"] == 100 and report["runs"] == {"m3-claude-sonnet-4": 100}
    frame = Workspace(ws).frame()
    assert int(frame["recorded_success"].sum()) == 94  # the human verdicts, as recorded
    assert frame["n_steps"].eq(0).all() and frame["final_answer"].str.len().gt(2).all()
    one = Workspace(ws).get(str(frame["id"].iloc[0]))
    assert one is not None and one.outcome is not None and one.outcome.source == "human"
    assert one.task.has_ground_truth and one.task.reference_sql


def test_a_results_table_can_be_mapped(tmp_path: Path) -> None:
    table = tmp_path / "answers.csv"
    table.write_text("Q,Said,Gold,Judged\nHow many patients are female?,There are 2.,2,wrong\n")
    mapping = tmp_path / "map.toml"
    mapping.write_text('[record]\nquestion = "Q"\nfinal_answer = "Said"\nground_truth = "Gold"'
                       '\nverdict = "Judged"\nmodel = "Model"\n')
    parsed = read_file(table, mapping=__import__("trajectories.importers.mapping",
                                                 fromlist=["load_mapping"]
                                                 ).load_mapping(mapping))
    assert not parsed.problems
    traj = parsed.trajectories[0][1]
    assert traj.final_answer == "There are 2." and traj.steps == []
    assert traj.outcome is not None and traj.outcome.success is False
    assert traj.task.ground_truth == "2"


def test_task_files_apply_to_every_format(tmp_path: Path) -> None:
    """--tasks matches native, chat, Inspect-like and mapped records alike (by the record's
    own task id here), and gives them the file's gold answer and verdict."""
    task_file = tmp_path / "tasks.json"
    task_file.write_text(json.dumps([{"id": "t1", "question": "How many patients are female?",
                                      "gold_answer": [[7]], "verdict": "correct"}]))
    tasks = load_tasks(task_file)
    native = tmp_path / "native.jsonl"
    native.write_text(make_trajectory().model_dump_json(exclude={"id"}) + "\n")
    chat = tmp_path / "chat.jsonl"
    chat.write_text(json.dumps({"task_idx": "t1", "messages": [
        {"role": "user", "content": "How many patients are female?"},
        {"role": "assistant", "content": "7"}]}) + "\n")
    mapped = tmp_path / "mapped.jsonl"
    mapped.write_text(json.dumps({"qid": "t1", "q": "How many patients are female?",
                                  "a": "7"}) + "\n")
    mapping_file = tmp_path / "m.toml"
    mapping_file.write_text('[record]\ntask_id = "qid"\nquestion = "q"\nfinal_answer = "a"\n')
    from trajectories.importers.mapping import load_mapping

    for path, mapping in ((native, None), (chat, None), (mapped, load_mapping(mapping_file)),
                          (DATA / "lmstudio-conversation.json", None)):
        traj = read_file(path, tasks=tasks, mapping=mapping).trajectories[0][1]
        assert traj.task.id == "t1" and traj.task.ground_truth == [[7]], path
        assert traj.outcome is not None and traj.outcome.success is True, path


def test_a_null_gold_answer_is_ground_truth_not_its_absence(tmp_path: Path) -> None:
    task_file = tmp_path / "tasks.json"
    task_file.write_text(json.dumps([
        {"id": "u", "question": "What is the home address of patient 1?", "gold_answer": None},
        {"id": "n", "question": "How many patients are female?"}]))
    rows = {r.id: r for r in load_tasks(task_file).rows}
    assert rows["u"].has_gold and not rows["u"].answerable and rows["u"].gold_answer is None
    assert not rows["n"].has_gold  # no gold answer and no gold SQL: nothing to score against
    csv_file = tmp_path / "tasks.csv"
    csv_file.write_text("question,gold_answer,gold_sql\nWhere does patient 1 live?,,null\n")
    (row,) = load_tasks(csv_file).rows
    assert row.has_gold and not row.answerable


def test_a_held_out_record_without_gold_is_unscored_not_a_failure(tmp_path: Path) -> None:
    """tau-bench test splits write reward 0.0 beside a null gold and a null reward_info
    reward: no verdict, so no failure in the success tables."""
    record = json.loads(sorted(require_shared(REAL_TRAJECTORIES).glob("*.json"))[0]
                        .read_text("utf-8"))[0]
    record["reward"] = 0.0
    record["info"]["task"]["gold_answer"] = None
    record["info"]["task"]["gold_sql"] = None
    record["info"]["reward_info"]["reward"] = None
    path = tmp_path / "mimic_iv-tool-calling-gpt-x-0.0_range_0--1_user-y_0101010101_test.json"
    path.write_text(json.dumps([record]))
    traj = read_file(path).trajectories[0][1]
    assert traj.outcome is not None and traj.outcome.success is None
    assert traj.outcome.reward is None
    assert traj.outcome.model_extra and traj.outcome.model_extra["reported_reward"] == 0.0
    ws = Workspace(tmp_path / "ws")
    ws.import_files([path])
    assert ws.summary()["unscored"] == 1 and ws.summary()["failed"] == 0


@pytest.mark.parametrize("name", ["12.conversation.json", "58.conversation.json"])
def test_unreadable_identical_calls_are_no_loop(tmp_path: Path, name: str) -> None:
    """The heuristic read 99 of 100 real conversations as Stuck-in-Loop when every call had
    been lost (no name, null arguments): such calls are no plan, so no loop."""
    from opinions.prelabel.heuristic import HeuristicLabeller

    source = require_shared(LMSTUDIO_SAMPLE) / name
    traj = read_file(source).trajectories[0][1]
    lost = traj.model_copy(update={"steps": [
        s.model_copy(update={"kind": StepKind.TOOL_CALL, "name": None, "arguments": "null",
                             "code": None}) if s.kind != StepKind.MESSAGE
        and s.kind != StepKind.THINKING else s for s in traj.steps]})
    result = HeuristicLabeller().label(lost, default_taxonomy().version)
    assert result.category != "stuck_in_loop", result.rationale
