from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from tests.support import make_trajectory
from trajectories.importers import ImportProblem, read_file
from trajectories.importers.openai_chat import identity_from_filename
from trajectories.importers.tasks import load_tasks, question_key
from trajectories.model import StepKind

SCHEMA = json.loads(
    (Path(__file__).resolve().parents[2] / "data" / "trajectory.schema.json").read_text()
)


def write_jsonl(path: Path, records: list[object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def native_record(**task_overrides: object) -> dict[str, object]:
    record = make_trajectory().model_dump(mode="json", exclude={"id"})
    record["task"].update(task_overrides)
    return record


def test_native_round_trip_validates_against_schema(tmp_path: Path) -> None:
    record = native_record()
    record["producer_note"] = {"kept": True}  # unknown fields survive
    jsonschema.validate(record, SCHEMA)
    parsed = read_file(write_jsonl(tmp_path / "a.jsonl", [record]))
    assert parsed.format == "native" and not parsed.problems
    traj = parsed.trajectories[0][1]
    assert traj.model_extra is not None and traj.model_extra["producer_note"] == {"kept": True}
    dumped = traj.model_dump(mode="json")
    jsonschema.validate(dumped, SCHEMA)
    assert dumped["task"]["question"] == record["task"]["question"]  # type: ignore[index]


def test_ids_are_content_hashes(tmp_path: Path) -> None:
    a = read_file(write_jsonl(tmp_path / "a.jsonl", [native_record()])).trajectories[0][1]
    b = read_file(write_jsonl(tmp_path / "b.jsonl", [native_record()])).trajectories[0][1]
    c = read_file(write_jsonl(tmp_path / "c.jsonl", [native_record(question="Other?")]))
    assert a.id == b.id
    assert c.trajectories[0][1].id != a.id


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "file is empty"),
        (b"   \n\n", "file is empty"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00", "binary file"),
        (b"hello world", "not JSON or JSONL"),
        (b'[{"task": {"id": "1", "question": "q"}, "run"', "truncated"),
        (b"\xff\xfe{\x00", "binary file"),
    ],
)
def test_whole_file_problems_are_one_line(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    with pytest.raises(ImportProblem) as info:
        read_file(path)
    text = str(info.value)
    assert message in text and str(path) in text and "\n" not in text


def test_record_problem_names_line_and_field(tmp_path: Path) -> None:
    bad = native_record()
    del bad["run"]["model"]  # type: ignore[attr-defined]
    path = write_jsonl(tmp_path / "x.jsonl", [native_record(), bad])
    parsed = read_file(path)
    assert len(parsed.trajectories) == 1
    problem = parsed.problems[0]
    assert problem.location == "line 2" and problem.field == "run.model"
    assert "line 2" in str(problem) and "run.model" in str(problem)


def test_json_list_problem_names_index(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text(json.dumps([native_record(), {"task": {"id": "", "question": "q"},
                                                  "run": {"name": "r", "model": "m"}}]))
    problem = read_file(path).problems[0]
    assert problem.location == "record 1" and problem.field == "task.id"


def test_bad_json_line_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text(json.dumps(native_record()) + "\n{not json\n")
    parsed = read_file(path)
    assert parsed.problems[0].location == "line 2"
    assert "not valid JSON" in parsed.problems[0].message


def chat_record(arguments: str) -> dict[str, object]:
    return {
        "task_idx": 3, "trial": 2, "reward": 0.0,
        "info": {"task": {"instruction": "Find the gender of patient 10027602.",
                          "gold_sql": "SELECT gender FROM patients WHERE subject_id = 10027602",
                          "gold_answer": [["f"]]},
                 "reward_info": {"reward": 0.0, "info": {"pred_answer": [["m"]]}}},
        "messages": [
            {"role": "system", "content": "You are a SQL agent."},
            {"role": "user", "content": "What's the gender of patient 10027602?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "sql_db_query", "arguments": arguments}}]},
            {"role": "tool", "tool_call_id": "c1", "name": "sql_db_query",
             "content": "Error: (sqlite3.OperationalError) no such column: patient_id"},
            {"role": "assistant", "content": "It is m."},
        ],
        "cost": {"total_cost": 0.01},
    }


def test_openai_chat_keeps_invalid_arguments_raw(tmp_path: Path) -> None:
    raw = '{"query": "SELECT gender FROM patients WHERE patient_id = 10027602"'  # no brace
    path = tmp_path / "mimic_iv-tool-calling-gpt-4o-mini-0.6_range_0--1_user-x_0101_valid.json"
    path.write_text(json.dumps([chat_record(raw)]))
    parsed = read_file(path)
    assert parsed.format == "openai-chat" and not parsed.problems
    traj = parsed.trajectories[0][1]
    tool_steps = [s for s in traj.steps if s.kind != StepKind.MESSAGE]
    assert tool_steps[0].arguments == raw and tool_steps[0].kind == StepKind.TOOL_CALL
    assert tool_steps[0].error and "no such column" in (tool_steps[0].observation or "")
    assert traj.run.model == "gpt-4o-mini" and traj.run.temperature == 0.6
    assert traj.run.rollout == 2 and traj.task.id == "3" and traj.task.split == "valid"
    assert traj.outcome is not None and traj.outcome.success is False
    # The query failed, so the agent's own answer is its last substantive message; the
    # harness's copy stays as recorded evidence.
    assert traj.final_answer == "It is m."
    assert traj.outcome.model_extra is not None
    assert traj.outcome.model_extra["recorded_answer"] == [["m"]]
    assert traj.model_extra is not None and traj.model_extra["source_record"]["cost"]
    assert traj.model_extra["final_answer_source"] == "last_answer_message"
    assert traj.steps[traj.model_extra["final_answer_step"]].content == "It is m."


def test_openai_chat_answer_is_agents_last_query_result(tmp_path: Path) -> None:
    record = chat_record('{"query": "SELECT gender FROM patients WHERE subject_id = 10027602"}')
    messages = record["messages"]
    assert isinstance(messages, list)
    messages[3]["content"] = "[('F',)]"
    messages[4:] = [{"role": "assistant", "content": "The patient is female."},
                    {"role": "user", "content": "Thanks!"},
                    {"role": "assistant", "content": "I have already provided the answer."}]
    path = tmp_path / "run.json"
    path.write_text(json.dumps([record]))
    traj = read_file(path).trajectories[0][1]
    assert traj.final_answer == [["F"]]
    extra = traj.model_extra or {}
    assert extra["final_answer_source"] == "last_sql_result"
    assert traj.steps[extra["final_answer_step"]].kind == StepKind.SQL


def test_openai_chat_skips_pointer_back_turns(tmp_path: Path) -> None:
    record = chat_record('{"query": "SELECT gender FROM patients WHERE patient_id = 1"}')
    messages = record["messages"]
    assert isinstance(messages, list)
    messages.extend([{"role": "user", "content": "Are you sure?"},
                     {"role": "assistant", "content": "I have already provided the answer."}])
    path = tmp_path / "run.json"
    path.write_text(json.dumps([record]))
    traj = read_file(path).trajectories[0][1]
    assert traj.final_answer == "It is m."
    extra = traj.model_extra or {}
    assert extra["final_answer_step"] < len(traj.steps) - 1


def test_real_ai612_answers_come_from_agent_steps() -> None:
    from tests.support import REAL_TRAJECTORIES

    files = sorted(REAL_TRAJECTORIES.glob("*.json"))
    assert files, f"shared data missing at {REAL_TRAJECTORIES}"
    sources: dict[str, int] = {}
    for path in files:
        for _, traj in read_file(path).trajectories:
            extra = traj.model_extra or {}
            sources[extra["final_answer_source"]] = sources.get(extra["final_answer_source"], 0) + 1
            step = extra["final_answer_step"]
            if step is not None:
                assert traj.steps[step].kind in (StepKind.SQL, StepKind.MESSAGE)
            detail = extra["source_record"]["info"]["reward_info"].get("info") or {}
            if "pred_answer" in detail:  # the harness's copy is kept verbatim as evidence
                assert traj.outcome is not None
                assert (traj.outcome.model_extra or {})["recorded_answer"] == detail["pred_answer"]
    assert sources.get("last_sql_result", 0) > sources.get("last_answer_message", 0) > 0


def test_openai_chat_sql_calls_become_sql_steps(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text(json.dumps([chat_record('{"query": "SELECT 1"}')]))
    traj = read_file(path, run="my-run", model="my-model").trajectories[0][1]
    sql = [s for s in traj.steps if s.kind == StepKind.SQL]
    assert sql and sql[0].code == "SELECT 1"
    assert traj.run.name == "my-run" and traj.run.model == "my-model"
    assert [s.role for s in traj.steps if s.kind == StepKind.MESSAGE] == [
        "system", "user", "assistant"]


def test_identity_from_filename_parses_tau_names() -> None:
    ident = identity_from_filename(
        Path("mimic_iv-tool-calling-v2-gemini-2.5-flash-preview-04-17-0.0_range_0--1_"
             "user-gemini-2.0-flash-llm_0603224931_valid.json"), None, None)
    assert ident.model == "gemini-2.5-flash-preview-04-17"
    assert ident.temperature == 0.0 and ident.split == "valid"
    assert identity_from_filename(Path("whatever.jsonl"), None, None).model == "whatever"


def test_real_tau_bench_files_import_as_they_are(real_trajectory_files: list[Path]) -> None:
    total = 0
    for path in real_trajectory_files:
        parsed = read_file(path)
        assert parsed.problems == [], parsed.problems[:1]
        assert parsed.format == "openai-chat"
        raw = json.loads(path.read_text())
        for (_, traj), rec in zip(parsed.trajectories, raw, strict=True):
            assert traj.outcome is not None and traj.outcome.reward == rec["reward"]
            assert traj.run.rollout == rec["trial"]
            calls = sum(len(m.get("tool_calls") or []) for m in rec["messages"])
            assert traj.n_turns == calls
        total += len(parsed.trajectories)
    assert total == 165


def test_pretty_printed_object_is_one_document(tmp_path: Path) -> None:
    path = tmp_path / "one.json"
    path.write_text(json.dumps(native_record(), indent=2))
    parsed = read_file(path)
    assert not parsed.problems
    assert [loc for loc, _ in parsed.trajectories] == ["document"]


def test_broken_jsonl_still_reports_its_lines(tmp_path: Path) -> None:
    path = tmp_path / "broken.jsonl"
    good = json.dumps(native_record())
    path.write_text(good + "\n{not json\n" + good + "\n")
    parsed = read_file(path)
    assert len(parsed.trajectories) == 2
    assert [p.location for p in parsed.problems] == ["line 2"]


def test_unrecognised_object_is_one_problem_not_per_line(tmp_path: Path) -> None:
    path = tmp_path / "odd.json"
    path.write_text('{\n"a": 1\n}\n')
    parsed = read_file(path)
    # One object with no trajectory fields: one problem for the document, not one per line.
    assert len(parsed.problems) == 1 and parsed.problems[0].location == "document"


def test_long_harness_stem_gets_short_display_name(tmp_path: Path) -> None:
    stem = ("mimic_iv-tool-calling-v2-gpt-4o-mini-0.0_range_0--1_"
            "user-gpt-4o-mini-llm_0515215141_valid")
    path = tmp_path / f"{stem}.json"
    path.write_text(json.dumps([chat_record('{"query": "SELECT 1"}')]))
    run = read_file(path).trajectories[0][1].run
    assert run.name == stem
    assert (run.model_extra or {})["display_name"] == "gpt-4o-mini t0.0 05-15 21:51 valid"
    named = read_file(path, run="mine").trajectories[0][1].run
    assert (named.model_extra or {})["display_name"] == "mine"


def test_test_split_without_gold_has_no_ground_truth(tmp_path: Path) -> None:
    record = chat_record('{"query": "SELECT 1"}')
    task = record["info"]["task"]  # type: ignore[index]
    task["gold_answer"] = None
    task["gold_sql"] = None
    path = tmp_path / "run.json"
    path.write_text(json.dumps([record, chat_record('{"query": "SELECT 1"}')]))
    first, second = (t for _, t in read_file(path).trajectories)
    assert getattr(first.task, "has_ground_truth", None) is False
    assert getattr(second.task, "has_ground_truth", None) is True


DATA = Path(__file__).resolve().parents[2] / "data"


def test_mapping_sample_imports_as_native() -> None:
    from trajectories.importers.mapping import load_mapping

    mapping = load_mapping(DATA / "mapping-example.toml")
    parsed = read_file(DATA / "mapped-sample.jsonl", mapping=mapping)
    assert not parsed.problems and len(parsed.trajectories) == 2
    first, second = (t for _, t in parsed.trajectories)
    assert first.task.id == "q1" and first.task.ground_truth == [[2]]
    assert first.run.name == "sample-run" and first.run.model == "example-model"
    assert [s.kind for s in first.steps] == [StepKind.SQL, StepKind.MESSAGE]
    assert first.steps[0].observation == "[(2,)]" and first.final_answer == [[2]]
    assert second.final_answer is None and second.steps[0].code is not None


def test_mapping_problems_are_one_line(tmp_path: Path) -> None:
    from trajectories.importers.mapping import load_mapping

    bad = tmp_path / "bad.toml"
    bad.write_text('[record]\ntask_id = "i"\nsteps = "s"\n')
    with pytest.raises(ImportProblem, match="question"):
        load_mapping(bad)
    bad.write_text('[record]\ntask_id = "i"\nquestion = "q"\nsteps = "s"\nanswr = "a"\n')
    with pytest.raises(ImportProblem, match="unknown mapping key 'answr'"):
        load_mapping(bad)
    good = tmp_path / "good.toml"
    good.write_text('[record]\ntask_id = "i"\nquestion = "q"\nsteps = "s"\n')
    records = tmp_path / "r.jsonl"
    records.write_text('{"i": 1, "q": "x", "s": []}\n{"i": 2, "s": []}\n')
    parsed = read_file(records, mapping=load_mapping(good))
    assert len(parsed.trajectories) == 1
    assert parsed.problems[0].location == "line 2" and "q" in parsed.problems[0].message
    # No ground truth mapped: exact match cannot be computed.
    assert getattr(parsed.trajectories[0][1].task, "has_ground_truth", None) is False


def test_cli_import_with_map(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from faillab.cli import main

    ws = str(tmp_path / "ws")
    result = CliRunner().invoke(main, ["import", str(DATA / "mapped-sample.jsonl"), "--map",
                                       str(DATA / "mapping-example.toml"), "--workspace", ws,
                                       "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["imported"] == 2
    missing = CliRunner().invoke(main, ["import", str(DATA / "mapped-sample.jsonl"), "--map",
                                        str(tmp_path / "nope.toml"), "--workspace", ws])
    assert missing.exit_code != 0 and "cannot read mapping" in missing.stderr


# LM Studio fixtures in data/ are built by hand from the structure LM Studio documents for its
# conversation files (messages -> versions -> steps -> contentBlock parts); no real export.
def test_lmstudio_sample_is_read_as_lmstudio_writes_it() -> None:
    """The published sample has the structure real exports have (part-level requests keyed by
    callId, results as MCP content parts in a JSON string, toolStatus and debugInfoBlock
    steps, a structural harmony marker); its task file matches it by the file it names."""
    tasks = load_tasks(DATA / "lmstudio-tasks.csv")
    parsed = read_file(DATA / "lmstudio-conversation.json", tasks=tasks)
    assert parsed.format == "lmstudio" and not parsed.problems
    traj = parsed.trajectories[0][1]
    assert [s.kind for s in traj.steps] == [StepKind.MESSAGE, StepKind.THINKING,
                                            StepKind.TOOL_CALL, StepKind.SQL,
                                            StepKind.THINKING, StepKind.MESSAGE]
    sql = traj.steps[3]
    assert sql.name == "execute_query" and sql.code is not None and "COUNT(*)" in sql.code
    assert sql.observation == " n_female\n        2" and not sql.error
    assert sql.duration_ms == 9.0
    assert json.loads(traj.steps[2].arguments or "") == {"table_name": "patients",
                                                         "show_sample": False}
    assert "<|" not in " ".join(s.content or "" for s in traj.steps)
    # The question in the task file spans two lines inside its quotes.
    assert traj.task.question == "How many patients\nare female?"
    assert traj.task.ground_truth == "2" and traj.task.has_ground_truth
    assert traj.run.model == "openai/gpt-oss-20b" and traj.run.name == "gpt-oss-20b"
    assert traj.final_answer == "There are **2** female patients in the database."
    assert traj.outcome is not None and traj.outcome.success is True
    assert traj.outcome.source == "human"


def test_lmstudio_without_task_file_keys_the_task_by_its_question(tmp_path: Path) -> None:
    doc = json.loads((DATA / "lmstudio-conversation.json").read_text())
    doc["messages"][1]["versions"][0]["steps"] = [
        {"type": "contentBlock",
         "content": [{"type": "text", "text": "<think>count them</think>Two of them."}]}]
    path = tmp_path / "conv.json"
    path.write_text(json.dumps(doc))
    traj = read_file(path).trajectories[0][1]
    assert [s.kind for s in traj.steps] == [StepKind.MESSAGE, StepKind.THINKING,
                                            StepKind.MESSAGE]
    assert traj.final_answer == "Two of them."
    assert traj.task.id == question_key(traj.task.question)
    assert getattr(traj.task, "has_ground_truth", None) is False


def test_task_file_without_a_question_column_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "tasks.csv"
    bad.write_text("id,gold\n1,2\n")
    with pytest.raises(ImportProblem, match="no question column"):
        load_tasks(bad)
    empty_question = tmp_path / "empty.csv"
    empty_question.write_text("id,question\n7,\n")
    with pytest.raises(ImportProblem, match="row 1: every task needs a question"):
        load_tasks(empty_question)


def test_reading_a_json_list_leaves_the_cycle_collector_as_it_was(tmp_path: Path) -> None:
    import gc

    from trajectories.importers.detect import iter_file

    # An integer beyond 64 bits sends the file to the whole-document parse (orjson would
    # read it as a float), which sets the parsed records aside from the cycle collector.
    record = {"task_idx": 1, "big": 2**70, "messages": [{"role": "user", "content": "q"}]}
    path = tmp_path / "mimic_iv-tool-calling-gpt-x-0.0_range_0--1_valid.json"
    path.write_text(json.dumps([record, record, record]), "utf-8")
    assert gc.isenabled()
    # While the records are read, the parsed file is set aside from the collector...
    items = iter_file(path)
    next(items)
    assert gc.isenabled() and gc.get_freeze_count() > 0
    # ...and given back once the file is read, or the reader stops early.
    assert len(list(items)) == 2
    assert gc.isenabled() and gc.get_freeze_count() == 0
    stopped = iter_file(path)
    next(stopped)
    del stopped  # an abandoned reader is closed when it is let go
    assert gc.isenabled() and gc.get_freeze_count() == 0
    # A list read record by record freezes nothing.
    del record["big"]
    path.write_text(json.dumps([record, record, record]), "utf-8")
    streamed = iter_file(path, prepare=True)
    assert next(streamed).prepared is not None
    assert gc.isenabled() and gc.get_freeze_count() == 0
    del streamed
    # A file that is not JSON leaves it enabled too.
    path.write_text("[{", "utf-8")
    with pytest.raises(ImportProblem):
        list(iter_file(path, prepare=True))
    assert gc.isenabled()
