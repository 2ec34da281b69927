"""Trace files written by the real agent SDKs import whole: the question, every SQL step in
order with its error flag, the final answer, the model and the run.

Each file is made the way a team makes one (``sdk_traces.py``, one SDK per process): a small
EHRSQL agent with a ``run_sql`` tool that really runs on the EHRSQL SQLite, its LLM a scripted
local server (``tests/fake_agent_llm.py``), traced by the SDK's instrumentation and written by
its exporters. The agent's first query fails (no such table), its second answers.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from faillab.cli import main
from tests.fake_agent_llm import FakeAgentLLM
from tests.support import EHRSQL_SQLITE, require_shared
from tests.trajectories.sdk_traces import ANSWER, KINDS, QUERIES, QUESTION
from trajectories.importers import read_file
from trajectories.importers.detect import iter_file
from trajectories.model import StepKind, Trajectory

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tests" / "trajectories" / "sdk_traces.py"

Make = Callable[[str], Path]


@pytest.fixture(scope="module")
def make(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Make]:
    """Writes the files of a kind (once per module) and returns their folder."""
    db = require_shared(EHRSQL_SQLITE)
    root = tmp_path_factory.mktemp("sdk-traces")
    made: dict[str, Path] = {}
    with FakeAgentLLM(QUERIES, ANSWER) as llm:
        def run(kind: str) -> Path:
            if kind not in made:
                out = root / kind
                done = subprocess.run(
                    [sys.executable, str(SCRIPT), kind, str(out), llm.session_url(kind), str(db)],
                    capture_output=True, text=True, timeout=300, cwd=REPO,
                    env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin",
                         "NO_PROXY": "127.0.0.1", "OTEL_SDK_DISABLED": "false"})
                assert done.returncode == 0, done.stderr
                made[kind] = out
            return made[kind]

        yield run


def _whole(traj: Trajectory, *, traced: bool = True) -> None:
    """The agent's run, as the fake LLM scripted it and the database answered; ``traced``:
    the file is a trace (spans with a service, durations and each model call's usage)."""
    assert traj.task.question == QUESTION
    sql = [s for s in traj.steps if s.kind == StepKind.SQL]
    assert [s.code for s in sql] == QUERIES
    assert [s.error for s in sql] == [True, False]
    assert sql[1].observation == "[(39,)]"
    assert traj.final_answer == ANSWER
    assert traj.run.model == "fake-sql-model"
    assert traj.steps[0].role == "user" and traj.steps[-1].content == ANSWER
    if not traced:
        return
    assert all(s.duration_ms is not None and s.duration_ms >= 0 for s in sql)
    assert sql[0].tokens == {"input": 100, "output": 20}


#: Kinds whose files are logs of the API calls, not traces.
UNTRACED = {"anthropic"}
FORMAT_OF = {"openinference": "openinference", "anthropic": "anthropic",
             "openai": "openai-agents", "smolagents": "smolagents",
             "langsmith": "langsmith", "langfuse": "langfuse"}
WHOLE = [(kind, name) for kind, names in KINDS.items() if kind != "otel-true-otlp"
         for name in names]


@pytest.mark.parametrize(("kind", "name"), WHOLE)
def test_every_file_that_holds_its_content_imports_whole(make: Make, kind: str,
                                                          name: str) -> None:
    parsed = read_file(make(kind) / name)
    assert parsed.problems == []
    assert len(parsed.trajectories) == 1
    traj = parsed.trajectories[0][1]
    _whole(traj, traced=kind not in UNTRACED)
    if kind != "openai-agents":  # the Agents SDK redacts a tool's error by default (below)
        sql = [s for s in traj.steps if s.kind == StepKind.SQL]
        assert "no such table: patient" in (sql[0].observation or "")
    if kind.startswith(("otel", "openinference")):
        assert traj.run.configuration.get("service") == "ehrsql-agent"
    assert parsed.format == FORMAT_OF.get(kind.split("-")[0], "otel-genai")


def test_a_spans_file_and_its_logs_file_are_one_trajectory(make: Make, tmp_path: Path) -> None:
    """Content captured as events: the spans file and the logs file are joined by trace and
    span id, whichever is read; imported together the second adds nothing."""
    folder = make("otel-event-otlp")
    spans = read_file(folder / "spans.jsonl").trajectories[0][1]
    logs = read_file(folder / "logs.jsonl").trajectories[0][1]
    assert spans.id == logs.id
    ws = tmp_path / "ws"
    result = CliRunner().invoke(main, ["import", str(folder / "spans.jsonl"),
                                       str(folder / "logs.jsonl"), "--workspace", str(ws),
                                       "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["imported"] == 1 and report["duplicates"] == 1


def test_the_logs_file_alone_still_holds_the_run(make: Make, tmp_path: Path) -> None:
    """Without the spans beside it the logs give the question, the steps and the answer; the
    error flag then comes from the tool reply's text."""
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(make("otel-event-otlp") / "logs.jsonl", alone / "logs.jsonl")
    parsed = read_file(alone / "logs.jsonl")
    traj = parsed.trajectories[0][1]
    assert [s.code for s in traj.steps if s.kind == StepKind.SQL] == QUERIES
    assert [s.error for s in traj.steps if s.kind == StepKind.SQL] == [True, False]
    assert traj.final_answer == ANSWER


def test_spans_without_content_say_what_is_missing_in_one_line(make: Make,
                                                               tmp_path: Path) -> None:
    """``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``, as the instrumentation's
    docs say, captures nothing with today's versions: the import fails in one line that says
    so, and nothing is imported."""
    path = make("otel-true-otlp") / "spans.jsonl"
    ws = tmp_path / "ws"
    result = CliRunner().invoke(main, ["import", str(path), "--workspace", str(ws)])
    assert result.exit_code != 0
    lines = result.stderr.strip().split("\n")
    assert len(lines) == 1
    assert "no message content" in lines[0] and "span_only" in lines[0]


@pytest.mark.parametrize("kind", ["otel-span-otlp", "otel-event-console", "openinference-otlp"])
def test_the_order_of_the_file_does_not_matter(make: Make, kind: str, tmp_path: Path) -> None:
    """Exporters write a span when it ends (children first); a file sorted any other way
    gives the same trajectory: spans are ordered by time and parentage."""
    source = make(kind)
    for path in source.iterdir():
        values = _values(path)
        (tmp_path / path.name).write_text(
            "".join(json.dumps(v, indent=4 if path.suffix == ".json" else None) + "\n"
                    for v in reversed(_split(values))))
    name = KINDS[kind][0]
    original = read_file(source / name).trajectories[0][1]
    shuffled = read_file(tmp_path / name).trajectories[0][1]
    _whole(shuffled)
    assert [(s.kind, s.code, s.error) for s in shuffled.steps] == \
        [(s.kind, s.code, s.error) for s in original.steps]


def _values(path: Path) -> list[object]:
    decoder, text, at, values = json.JSONDecoder(), path.read_text(), 0, []
    while at < len(text):
        if text[at].isspace():
            at += 1
            continue
        value, at = decoder.raw_decode(text, at)
        values.append(value)
    return values


def _split(values: list[object]) -> list[object]:
    """OTLP requests split into one request per span (so reversing reorders the spans)."""
    out: list[object] = []
    for value in values:
        if isinstance(value, dict) and "resourceSpans" in value:
            for resource in value["resourceSpans"]:
                for scope in resource["scopeSpans"]:
                    for span in scope["spans"]:
                        out.append({"resourceSpans": [{**resource, "scopeSpans": [
                            {**scope, "spans": [span]}]}]})
        else:
            out.append(value)
    return out


def test_a_format_named_on_the_command_line_overrides_detection(make: Make) -> None:
    path = make("otel-span-otlp") / "spans.jsonl"
    items = list(iter_file(path, "otel-genai"))
    assert len(items) == 1 and items[0].trajectory is not None
    wrong = list(iter_file(REPO / "data" / "native-sample.jsonl", "otel-genai"))
    assert wrong and all(i.trajectory is None and i.problem is not None
                         and "not an OpenTelemetry span" in i.problem.message for i in wrong)


def test_a_folder_of_traces_is_one_run_per_model_and_tasks_match_by_question(
        make: Make, tmp_path: Path) -> None:
    folder = tmp_path / "ehrsql-traces"
    folder.mkdir()
    for kind in ("otel-span-otlp", "openinference-otlp"):
        shutil.copy(make(kind) / "spans.jsonl", folder / f"{kind}.jsonl")
    tasks = tmp_path / "tasks.csv"
    tasks.write_text("id,question,gold_answer\nfemale-count,How many female patients are "
                     "there?,39\n")
    ws = tmp_path / "ws"
    result = CliRunner().invoke(main, ["import", str(folder), "--tasks", str(tasks),
                                       "--workspace", str(ws), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["imported"] == 2
    listed = CliRunner().invoke(main, ["list", "--workspace", str(ws), "--json"])
    rows = json.loads(listed.output)
    assert {r["task_id"] for r in rows} == {"female-count"}
    assert {r["run"] for r in rows} == {"fake-sql-model (ehrsql-traces)"}


def test_anthropic_logs_keep_the_error_flag_and_each_reply_usage(make: Make) -> None:
    traj = read_file(make("anthropic") / "messages.jsonl").trajectories[0][1]
    said = [s for s in traj.steps if s.kind == StepKind.MESSAGE and s.role == "assistant"]
    assert said[0].tokens == {"input": 100, "output": 20}
    assert (traj.model_extra or {}).get("usage") == {"input": 330, "output": 60}


def test_two_questions_in_one_anthropic_log_are_two_trajectories(make: Make,
                                                                 tmp_path: Path) -> None:
    """A request that does not continue the conversation before it starts the next one."""
    lines = (make("anthropic") / "messages.jsonl").read_text().splitlines()
    other = [line.replace(QUESTION, "How many female patients are there in total?")
             for line in lines]
    path = tmp_path / "two.jsonl"
    path.write_text("\n".join(lines + other) + "\n")
    parsed = read_file(path)
    assert [t.task.question for _, t in parsed.trajectories] == [
        QUESTION, "How many female patients are there in total?"]
    for _, traj in parsed.trajectories:
        assert [s.error for s in traj.steps if s.kind == StepKind.SQL] == [True, False]


def test_an_agents_sdk_tool_error_is_flagged_from_the_span_error(make: Make) -> None:
    """The SDK gives the model a generic message for a failing tool and, by default, redacts
    the exception in the span's ``error.data.error``: the step is flagged from the span's
    error, whatever the output says."""
    traj = read_file(make("openai-agents") / "traces.jsonl").trajectories[0][1]
    failed = next(s for s in traj.steps if s.kind == StepKind.SQL)
    assert failed.error
    assert failed.observation and "error occurred" in failed.observation
    assert (failed.model_extra or {}).get("error_message")
    assert traj.run.configuration.get("agent") == "ehrsql-agent"


def test_a_failing_smolagents_step_keeps_its_sql_from_the_model_turn(make: Make) -> None:
    """smolagents keeps no tool calls on a step whose tool raised: the SQL is read from the
    model's own turn, the database's error is the observation and the step is flagged."""
    traj = read_file(make("smolagents") / "run.json").trajectories[0][1]
    failed = next(s for s in traj.steps if s.kind == StepKind.SQL)
    assert failed.code == QUERIES[0] and failed.error
    assert "no such table: patient" in (failed.observation or "")
    assert (traj.model_extra or {}).get("run_state") == "success"


def test_a_langsmith_tool_error_is_the_exception_line(make: Make) -> None:
    """LangSmith keeps a raising tool's exception with its traceback in ``error``: the step
    is flagged and keeps the exception's line, not the traceback."""
    traj = read_file(make("langsmith") / "run.json").trajectories[0][1]
    failed = next(s for s in traj.steps if s.kind == StepKind.SQL)
    assert failed.error and "Traceback" not in (failed.observation or "")
    assert (failed.model_extra or {}).get("error_message", failed.observation or "") \
        .startswith("OperationalError")


def test_a_langfuse_tool_at_level_error_is_flagged(make: Make) -> None:
    traj = read_file(make("langfuse") / "spans.jsonl").trajectories[0][1]
    failed = next(s for s in traj.steps if s.kind == StepKind.SQL)
    assert failed.error and failed.observation == "no such table: patient"
    assert traj.run.configuration.get("agent") == "ehrsql-agent"


def test_an_escaped_emoji_is_text_and_a_lone_surrogate_is_refused(make: Make,
                                                                  tmp_path: Path) -> None:
    """JSON encoders that escape non-ASCII write an emoji as a surrogate pair: that is text. A
    surrogate without its pair is not, and its record is refused in one line."""
    lines = (make("otel-span-otlp") / "spans.jsonl").read_text().splitlines()
    asked = QUESTION + " \U0001f600"
    emoji = tmp_path / "emoji.jsonl"
    emoji.write_text("".join(json.dumps(json.loads(line.replace(QUESTION, asked))) + "\n"
                             for line in lines))
    assert "\\ud83d\\ude00" in emoji.read_text()
    parsed = read_file(emoji)
    assert parsed.problems == [] and parsed.trajectories[0][1].task.question == asked
    lone = tmp_path / "lone.jsonl"
    lone.write_text(emoji.read_text().replace("\\ud83d\\ude00", "\\ud83d"))
    problems = read_file(lone).problems
    assert problems and all("lone surrogate" in p.message for p in problems)


def test_a_metrics_file_beside_the_traces_is_passed_over(make: Make, tmp_path: Path) -> None:
    """The file exporter writes metrics beside spans and logs; importing the folder reads the
    traces and passes the metrics over."""
    from opentelemetry.exporter.otlp.json.file import FileMetricExporter
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    folder = tmp_path / "telemetry"
    shutil.copytree(make("otel-span-otlp"), folder)
    reader = PeriodicExportingMetricReader(FileMetricExporter(folder / "metrics.jsonl"),
                                           export_interval_millis=600_000)
    provider = MeterProvider(metric_readers=[reader])
    provider.get_meter("ehrsql-agent").create_counter("calls").add(1)
    provider.shutdown()
    assert '"resourceMetrics"' in (folder / "metrics.jsonl").read_text()
    result = CliRunner().invoke(main, ["import", str(folder), "--workspace",
                                       str(tmp_path / "ws"), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["imported"] == 1


def test_an_anthropic_request_with_all_its_replies_is_one_trajectory(make: Make,
                                                                     tmp_path: Path) -> None:
    """The last request (the whole conversation) logged with every reply it took to get
    there: replies the conversation already holds are matched by content, not repeated."""
    records = [json.loads(line) for line in
               (make("anthropic") / "messages.jsonl").read_text().splitlines()]
    path = tmp_path / "log.json"
    path.write_text(json.dumps({"request": records[-1]["request"],
                                "responses": [r["response"] for r in records]}))
    parsed = read_file(path)
    assert parsed.format == "anthropic" and len(parsed.trajectories) == 1
    traj = parsed.trajectories[0][1]
    _whole(traj, traced=False)
    assert len([s for s in traj.steps if s.kind == StepKind.SQL]) == 2
    assert (traj.model_extra or {}).get("usage") == {"input": 330, "output": 60}


def test_a_smolagents_error_written_as_text_still_flags_the_step(make: Make,
                                                                tmp_path: Path) -> None:
    """A run written with ``default=str`` keeps a step's error as its text."""
    record = json.loads((make("smolagents") / "run.json").read_text())
    failed = next(s for s in record["steps"] if s.get("error"))
    failed["error"] = f"AgentToolExecutionError: {failed['error']['message']}"
    path = tmp_path / "run.json"
    path.write_text(json.dumps(record))
    traj = read_file(path).trajectories[0][1]
    assert [s.error for s in traj.steps if s.kind == StepKind.SQL] == [True, False]


def _legacy_log(span_id: str, at: int, event: str, body: dict[str, object]) -> dict[str, object]:
    """A log record of the previous GenAI conventions: one event per message, its body in
    the OpenAI style (an OTLP kvlist)."""
    def value(item: object) -> dict[str, object]:
        if isinstance(item, dict):
            return {"kvlistValue": {"values": [{"key": k, "value": value(v)}
                                               for k, v in item.items()]}}
        if isinstance(item, list):
            return {"arrayValue": {"values": [value(v) for v in item]}}
        if isinstance(item, int):
            return {"intValue": str(item)}
        return {"stringValue": str(item)}
    return {"timeUnixNano": str(at), "traceId": "ab" * 16, "spanId": span_id,
            "eventName": event, "body": value(body),
            "attributes": [{"key": "gen_ai.system", "value": {"stringValue": "openai"}}]}


def test_the_previous_genai_conventions_are_read(tmp_path: Path) -> None:
    """Chat spans named by ``gen_ai.system`` with ``gen_ai.usage.prompt_tokens``, and the
    messages as per-message events (``gen_ai.user.message``, ``gen_ai.choice``,
    ``gen_ai.tool.message``) in a logs file: the same run comes out."""
    def call(n: int, sql: str) -> dict[str, object]:
        return {"id": f"c{n}", "type": "function",
                "function": {"name": "run_sql", "arguments": json.dumps({"query": sql})}}
    spans, logs = [], []
    replies = [("Error: no such table: patient", QUERIES[0]), ("[(39,)]", QUERIES[1])]
    for turn in range(3):
        span_id = f"{turn + 1:016x}"
        spans.append({"traceId": "ab" * 16, "spanId": span_id, "name": "chat fake-sql-model",
                      "startTimeUnixNano": str(10 * turn + 1),
                      "endTimeUnixNano": str(10 * turn + 2), "status": {}, "attributes": [
                          {"key": "gen_ai.system", "value": {"stringValue": "openai"}},
                          {"key": "gen_ai.response.model",
                           "value": {"stringValue": "fake-sql-model"}},
                          {"key": "gen_ai.usage.prompt_tokens", "value": {"intValue": "100"}},
                          {"key": "gen_ai.usage.completion_tokens",
                           "value": {"intValue": "20"}}]})
        at = 10 * turn + 1
        logs.append(_legacy_log(span_id, at, "gen_ai.user.message", {"content": QUESTION}))
        for earlier in range(turn):
            logs.append(_legacy_log(span_id, at, "gen_ai.assistant.message",
                                    {"tool_calls": [call(earlier, replies[earlier][1])]}))
            logs.append(_legacy_log(span_id, at, "gen_ai.tool.message",
                                    {"content": replies[earlier][0], "id": f"c{earlier}"}))
        message: dict[str, object] = {"tool_calls": [call(turn, QUERIES[turn])]} \
            if turn < 2 else {"content": ANSWER}
        logs.append(_legacy_log(span_id, at + 1, "gen_ai.choice",
                                {"index": 0, "finish_reason": "stop", "message": message}))
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "agent"}}]}
    (tmp_path / "spans.jsonl").write_text(json.dumps({"resourceSpans": [{
        "resource": resource, "scopeSpans": [{"scope": {}, "spans": spans}]}]}) + "\n")
    (tmp_path / "logs.jsonl").write_text(json.dumps({"resourceLogs": [{
        "resource": resource, "scopeLogs": [{"scope": {}, "logRecords": logs}]}]}) + "\n")
    traj = read_file(tmp_path / "spans.jsonl").trajectories[0][1]
    assert traj.task.question == QUESTION and traj.final_answer == ANSWER
    sql = [s for s in traj.steps if s.kind == StepKind.SQL]
    assert [s.code for s in sql] == QUERIES and [s.error for s in sql] == [True, False]
    assert sql[0].tokens == {"input": 100, "output": 20}
    assert traj.run.model == "fake-sql-model"
