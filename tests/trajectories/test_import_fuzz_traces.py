"""Hostile input to every trace reader (OTLP JSON lines, console exporter output, Anthropic
messages logs, OpenAI Agents exports, smolagents runs, LangSmith run trees, Langfuse): ``faillab
import`` imports, or exits non-zero with one error line and leaves the workspace as it was.
The mutations and the check are those of ``test_import_fuzz.py``; the seeds are small files
in each format's structure."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.trajectories.test_import_fuzz import (
    DEEP,
    DELETE,
    FUZZ,
    HOSTILE_SCALARS,
    NATIVE_SAMPLE,
    Raw,
    _at,
    _check,
    _dumps,
    _import,
    _paths,
    _replace,
)

QUESTION = "How many female patients are there?"
BAD, GOOD = "SELECT count(*) FROM patient", "SELECT count(*) FROM patients"
TRACE = "5b8efff798038103d269b633813fc60c"


def _attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        wrapped: dict[str, Any] = {"boolValue": value}
    elif isinstance(value, int):
        wrapped = {"intValue": str(value)}
    else:
        wrapped = {"stringValue": value}
    return {"key": key, "value": wrapped}


def _otlp_span(span_id: str, parent: str | None, name: str, start: int,
               attributes: dict[str, Any], error: str | None = None) -> dict[str, Any]:
    span: dict[str, Any] = {
        "traceId": TRACE, "spanId": span_id, "name": name, "kind": "SPAN_KIND_INTERNAL",
        "startTimeUnixNano": str(start), "endTimeUnixNano": str(start + 1000),
        "attributes": [_attr(k, v) for k, v in attributes.items()],
        "status": {"code": "STATUS_CODE_ERROR", "message": error} if error else {}}
    if parent:
        span["parentSpanId"] = parent
    return span


def _otlp() -> list[dict[str, Any]]:
    """OpenTelemetry GenAI spans with content on them, one OTLP request per line."""
    call = json.dumps([{"role": "assistant", "parts": [
        {"type": "tool_call", "id": "c1", "name": "run_sql", "arguments": {"query": BAD}}]}])
    spans = [
        _otlp_span("00000000000000a1", None, "invoke_agent a", 1, {
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a",
            "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [
                {"type": "text", "content": QUESTION}]}]),
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
                {"type": "text", "content": "39"}]}])}),
        _otlp_span("00000000000000a2", "00000000000000a1", "chat m", 2, {
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
            "gen_ai.usage.input_tokens": 10, "gen_ai.output.messages": call}),
        _otlp_span("00000000000000a3", "00000000000000a1", "execute_tool run_sql", 3, {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "run_sql",
            "gen_ai.tool.call.id": "c1", "gen_ai.tool.call.arguments": json.dumps({"query": BAD}),
            "error.type": "OperationalError"}, "no such table: patient"),
    ]
    resource = {"attributes": [_attr("service.name", "agent")]}
    scope = {"name": "x"}
    return [{"resourceSpans": [{"resource": resource, "scopeSpans": [
        {"scope": scope, "spans": [span]}]}]} for span in reversed(spans)]


def _console() -> list[dict[str, Any]]:
    """OpenInference spans as the console exporter prints them."""
    def span(span_id: str, parent: str | None, name: str, second: int,
             attributes: dict[str, Any], error: str | None = None) -> dict[str, Any]:
        return {"name": name, "context": {"trace_id": "0x" + TRACE, "span_id": "0x" + span_id,
                                          "trace_state": "[]"},
                "kind": "SpanKind.INTERNAL", "parent_id": "0x" + parent if parent else None,
                "start_time": f"2026-01-01T00:00:0{second}.000000Z",
                "end_time": f"2026-01-01T00:00:0{second}.500000Z",
                "status": {"status_code": "ERROR", "description": error} if error
                else {"status_code": "UNSET"},
                "attributes": attributes, "events": [], "links": [],
                "resource": {"attributes": {"service.name": "agent"}, "schema_url": ""}}
    return [
        span("00000000000000b2", "00000000000000b1", "ChatCompletion", 2, {
            "openinference.span.kind": "LLM", "llm.model_name": "m",
            "llm.token_count.prompt": 10,
            "llm.output_messages.0.message.tool_calls.0.tool_call.id": "c1",
            "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "run_sql",
            "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments":
                json.dumps({"query": GOOD})}),
        span("00000000000000b3", "00000000000000b1", "run_sql", 3, {
            "openinference.span.kind": "TOOL", "tool.name": "run_sql",
            "input.value": json.dumps({"query": GOOD}), "output.value": "[(39,)]"}),
        span("00000000000000b1", None, "agent", 1, {
            "openinference.span.kind": "AGENT", "input.value": QUESTION,
            "output.value": "39"}),
    ]


def _anthropic() -> list[dict[str, Any]]:
    use = {"type": "tool_use", "id": "t1", "name": "run_sql", "input": {"query": BAD}}
    asked = {"role": "user", "content": QUESTION}
    first = {"model": "m", "max_tokens": 64, "messages": [asked]}
    second = {"model": "m", "max_tokens": 64, "messages": [
        asked, {"role": "assistant", "content": [use]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": "no such table", "is_error": True}]}]}
    reply = {"type": "message", "role": "assistant", "model": "m", "content": [use],
             "usage": {"input_tokens": 10, "output_tokens": 2}}
    final = {**reply, "content": [{"type": "text", "text": "39"}]}
    return [{"request": first, "response": reply}, {"request": second, "response": final}]


def _agents() -> list[dict[str, Any]]:
    trace = "trace_0123"

    def span(span_id: str, parent: str | None, second: int, data: dict[str, Any],
             error: Any = None) -> dict[str, Any]:
        return {"object": "trace.span", "id": span_id, "trace_id": trace, "parent_id": parent,
                "started_at": f"2026-01-01T00:00:0{second}+00:00",
                "ended_at": f"2026-01-01T00:00:0{second}.5+00:00", "span_data": data,
                "error": error}
    call = {"id": "c1", "type": "function",
            "function": {"name": "run_sql", "arguments": json.dumps({"query": BAD})}}
    return [
        span("span_2", "span_1", 2, {"type": "generation", "model": "m",
                                     "input": [{"role": "user", "content": QUESTION}],
                                     "output": [{"role": "assistant", "tool_calls": [call]}],
                                     "usage": {"input_tokens": 10, "output_tokens": 2}}),
        span("span_3", "span_1", 3, {"type": "function", "name": "run_sql",
                                     "input": json.dumps({"query": BAD}),
                                     "output": "An error occurred"},
             {"message": "Error running tool", "data": {"error": "no such table"}}),
        span("span_1", None, 1, {"type": "agent", "name": "a"}),
        {"object": "trace", "id": trace, "workflow_name": "w"},
    ]


def _smolagents() -> dict[str, Any]:
    call = {"id": "c1", "type": "function",
            "function": {"name": "run_sql", "arguments": {"query": BAD}}}
    final = {"id": "c2", "type": "function",
             "function": {"name": "final_answer", "arguments": {"answer": "39"}}}
    return {"output": "39", "state": "success",
            "token_usage": {"input_tokens": 10, "output_tokens": 2},
            "timing": {"start_time": 1.0, "end_time": 2.0, "duration": 1.0},
            "steps": [
                {"task": QUESTION, "task_images": None},
                {"step_number": 1, "tool_calls": [],
                 "error": {"type": "AgentToolExecutionError", "message": "no such table"},
                 "model_output_message": {"role": "assistant", "tool_calls": [call]},
                 "observations": None, "timing": {"duration": 0.5},
                 "token_usage": {"input_tokens": 10, "output_tokens": 2},
                 "is_final_answer": False},
                {"step_number": 2, "tool_calls": [final], "error": None,
                 "model_output_message": {"role": "assistant", "tool_calls": [final]},
                 "observations": "39", "action_output": "39", "is_final_answer": True}]}


def _langsmith() -> dict[str, Any]:
    call = {"id": "c1", "type": "function",
            "function": {"name": "run_sql", "arguments": json.dumps({"query": BAD})}}
    return {
        "id": "r1", "name": "agent", "run_type": "chain", "trace_id": "r1",
        "dotted_order": "1", "inputs": {"question": QUESTION}, "outputs": {"output": "39"},
        "error": None, "start_time": "2026-01-01T00:00:01Z", "end_time": "2026-01-01T00:00:04Z",
        "child_runs": [
            {"id": "r2", "name": "ChatOpenAI", "run_type": "llm", "parent_run_id": "r1",
             "inputs": {"messages": []}, "start_time": "2026-01-01T00:00:02Z",
             "end_time": "2026-01-01T00:00:02.5Z",
             "outputs": {"choices": [{"message": {"role": "assistant", "tool_calls": [call]}}]},
             "extra": {"metadata": {"ls_model_name": "m",
                                    "usage_metadata": {"input_tokens": 10}}},
             "child_runs": []},
            {"id": "r3", "name": "run_sql", "run_type": "tool", "parent_run_id": "r1",
             "inputs": {"query": BAD}, "outputs": {"output": None},
             "error": "OperationalError('no such table')\n\nTraceback ...",
             "start_time": "2026-01-01T00:00:03Z", "end_time": "2026-01-01T00:00:03.5Z",
             "child_runs": []}]}


def _langfuse() -> list[dict[str, Any]]:
    """Langfuse observations as OTLP spans, one request per line."""
    call = {"id": "c1", "type": "function",
            "function": {"name": "run_sql", "arguments": json.dumps({"query": GOOD})}}
    spans = [
        _otlp_span("00000000000000c1", None, "agent", 1, {
            "langfuse.observation.type": "agent",
            "langfuse.observation.input": json.dumps({"args": [QUESTION], "kwargs": {}}),
            "langfuse.observation.output": "39"}),
        _otlp_span("00000000000000c2", "00000000000000c1", "OpenAI-generation", 2, {
            "langfuse.observation.type": "generation",
            "langfuse.observation.model.name": "m",
            "langfuse.observation.usage_details": json.dumps({"prompt_tokens": 10}),
            "langfuse.observation.output": json.dumps({"role": "assistant",
                                                       "tool_calls": [call]})}),
        _otlp_span("00000000000000c3", "00000000000000c1", "run_sql", 3, {
            "langfuse.observation.type": "tool",
            "langfuse.observation.input": json.dumps({"args": [GOOD], "kwargs": {}}),
            "langfuse.observation.output": "[(39,)]"}),
    ]
    return [{"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [
        {"scope": {"name": "langfuse"}, "spans": [span]}]}]} for span in spans]


#: (file name, the seed, how it is written, paths worth aiming at first)
SEEDS: dict[str, tuple[str, Any, str, list[tuple[Any, ...]]]] = {
    "otlp-spans": ("spans.jsonl", _otlp(), "jsonl",
                   [(0, "resourceSpans", 0, "scopeSpans", 0, "spans", 0, "startTimeUnixNano"),
                    (1, "resourceSpans", 0, "scopeSpans", 0, "spans", 0, "traceId"),
                    (2, "resourceSpans", 0, "scopeSpans", 0, "spans", 0, "attributes", 3,
                     "value", "stringValue")]),
    "console-spans": ("spans.json", _console(), "concatenated",
                      [(0, "start_time"), (1, "attributes", "input.value"),
                       (2, "context", "trace_id"), (0, "attributes", "llm.token_count.prompt")]),
    "anthropic": ("messages.jsonl", _anthropic(), "jsonl",
                  [(0, "response", "usage", "input_tokens"),
                   (1, "request", "messages", 2, "content", 0, "is_error"),
                   (1, "response", "content", 0, "text")]),
    "openai-agents": ("traces.jsonl", _agents(), "jsonl",
                      [(0, "started_at"), (1, "span_data", "input"),
                       (0, "span_data", "usage", "input_tokens"), (3, "id")]),
    "smolagents": ("run.json", _smolagents(), "pretty",
                   [("steps", 1, "timing", "duration"), ("timing", "duration"),
                    ("steps", 0, "task"), ("steps", 1, "error", "message"),
                    ("token_usage", "input_tokens")]),
    "langsmith": ("run.json", _langsmith(), "pretty",
                  [("start_time",), ("child_runs", 1, "error"), ("inputs", "question"),
                   ("child_runs", 0, "extra", "metadata", "usage_metadata", "input_tokens"),
                   ("child_runs", 1, "end_time")]),
    "langfuse": ("spans.jsonl", _langfuse(), "jsonl",
                 [(0, "resourceSpans", 0, "scopeSpans", 0, "spans", 0, "attributes", 1,
                   "value", "stringValue"),
                  (1, "resourceSpans", 0, "scopeSpans", 0, "spans", 0, "attributes", 3,
                   "value", "stringValue"),
                  (2, "resourceSpans", 0, "scopeSpans", 0, "spans", 0, "endTimeUnixNano")]),
}


def _render(seed: Any, style: str) -> str:
    raws: list[str] = []
    items = seed if isinstance(seed, list) else [seed]
    if style == "jsonl":
        return "".join(_dumps(item, "jsonl", raws) + "\n" for item in items)
    return "".join(_dumps(item, "pretty", raws) + "\n" for item in items)


@st.composite
def hostile_trace(draw: st.DrawFn, fmt: str) -> tuple[str, bytes]:
    name, seed, style, aimed = SEEDS[fmt]
    doc = seed
    everywhere = list(_paths(seed))
    leaves = [path for path in everywhere if not isinstance(_at(seed, path), dict | list)]
    for _ in range(draw(st.integers(1, 3))):
        how = draw(st.sampled_from(["scalar", "scalar", "deep", "delete"]))
        if how == "scalar":
            path = draw(st.one_of(st.sampled_from(aimed), st.sampled_from(leaves)))
            doc = _replace(doc, path, draw(HOSTILE_SCALARS))
        else:
            path = draw(st.sampled_from(everywhere))
            doc = _replace(doc, path, draw(DEEP) if how == "deep" else DELETE)
    data = _render(doc, style).encode("utf-8", "surrogatepass")
    damage = draw(st.sampled_from(["none", "none", "none", "truncate", "byte"]))
    if damage == "truncate" and data:
        data = data[:draw(st.integers(0, len(data) - 1))]
    elif damage == "byte" and data:
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + bytes([draw(st.integers(0, 255))]) + data[at + 1:]
    return name, data


@pytest.fixture(scope="module")
def base_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ws = tmp_path_factory.mktemp("fuzz-traces") / "ws"
    result = _import(ws, NATIVE_SAMPLE)
    assert result.exit_code == 0, result.output
    return ws


@pytest.mark.parametrize("fmt", list(SEEDS))
def test_the_valid_seed_imports(fmt: str, base_workspace: Path) -> None:
    name, seed, style, _ = SEEDS[fmt]
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        shutil.copytree(base_workspace, ws)
        path = Path(tmp) / name
        path.write_text(_render(seed, style))
        result = _import(ws, path, "--json")
        assert result.exit_code == 0, result.output
        assert json.loads(result.output)["imported"] == 1


@pytest.mark.slow
@pytest.mark.parametrize("fmt", list(SEEDS))
def test_hostile_traces_import_or_fail_in_one_line(fmt: str, base_workspace: Path) -> None:
    @FUZZ
    @given(case=hostile_trace(fmt), skip_invalid=st.booleans())
    def run(case: tuple[str, bytes], skip_invalid: bool) -> None:
        _check(base_workspace, *case, skip_invalid)

    run()


@pytest.mark.parametrize("fmt", list(SEEDS))
def test_nesting_past_the_limit_is_one_line(fmt: str, base_workspace: Path,
                                           tmp_path: Path) -> None:
    name, seed, style, aimed = SEEDS[fmt]
    doc = _replace(seed, aimed[0], Raw("[" * 5000 + "]" * 5000))
    path = tmp_path / name
    path.write_bytes(_render(doc, style).encode())
    _check(base_workspace, name, path.read_bytes(), False)
