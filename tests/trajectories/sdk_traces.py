"""Trace files written by the real agent SDKs, for the trace importer tests.

Run as a script, one SDK per process (instrumentations patch client libraries and read their
settings once, so each run needs a fresh interpreter):

    python tests/trajectories/sdk_traces.py KIND OUT_DIR LLM_BASE_URL DB

A small EHRSQL agent answers ``QUESTION`` with a ``run_sql`` tool that really runs each query
read-only on the SQLite database DB; the LLM is ``tests/fake_agent_llm.py`` at LLM_BASE_URL,
which asks for ``QUERIES`` in order (the first fails: no such table) and then answers
``ANSWER``. Each kind
traces the run with the SDK's own instrumentation and writes the files its exporters write.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

QUESTION = "How many female patients are there?"
QUERIES = ["SELECT count(*) FROM patient WHERE gender = 'f'",
           "SELECT count(*) FROM patients WHERE gender = 'f'"]
#: What the scripted LLM answers after the queries (the database's answer is 39).
ANSWER = "There are 39 female patients."
MODEL = "fake-sql-model"
SYSTEM = "You answer questions about the MIMIC-IV database with the run_sql tool."
RUN_SQL_SCHEMA = {"type": "object", "properties": {"query": {"type": "string"}},
                  "required": ["query"]}

#: The kinds this script writes: (kind, the files it writes).
KINDS = {
    "otel-span-otlp": ("spans.jsonl",),
    "otel-span-console": ("spans.json",),
    "otel-event-otlp": ("spans.jsonl", "logs.jsonl"),
    "otel-event-console": ("spans.json", "logs.json"),
    "otel-true-otlp": ("spans.jsonl",),
    "openinference-otlp": ("spans.jsonl",),
    "openinference-console": ("spans.json",),
    "anthropic": ("messages.jsonl", "conversation.json"),
    "openai-agents": ("traces.jsonl",),
    "smolagents": ("run.json",),
    "langsmith": ("run.json",),
    "langfuse": ("spans.jsonl",),
}


def run_sql(db: str, query: str) -> str:
    """The agent's tool: the rows as a Python literal; a database error raises."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return repr(con.execute(query).fetchall())
    finally:
        con.close()


# --------------------------------------------------------------------------- OTLP JSON


def otlp_span_exporter(path: Path) -> Any:
    """The OTLP JSON file exporter's span exporter: one OTLP/JSON request per line."""
    from opentelemetry.exporter.otlp.json.file import FileSpanExporter

    return FileSpanExporter(path)


def otlp_log_exporter(path: Path) -> Any:
    from opentelemetry.exporter.otlp.json.file._log_exporter import FileLogExporter

    return FileLogExporter(path)


def _providers(out: Path, encoding: str) -> tuple[Any, Any, list[Any]]:
    """Tracer and logger providers exporting to files of ``out`` in the given encoding."""
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import ConsoleLogRecordExporter, SimpleLogRecordProcessor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

    resource = Resource.create({"service.name": "ehrsql-agent"})
    tracer_provider = TracerProvider(resource=resource)
    logger_provider = LoggerProvider(resource=resource)
    handles: list[Any] = []
    if encoding == "otlp":
        tracer_provider.add_span_processor(SimpleSpanProcessor(
            otlp_span_exporter(out / "spans.jsonl")))
        logger_provider.add_log_record_processor(SimpleLogRecordProcessor(
            otlp_log_exporter(out / "logs.jsonl")))
    else:
        spans = open(out / "spans.json", "w", encoding="utf-8")  # noqa: SIM115
        logs = open(out / "logs.json", "w", encoding="utf-8")  # noqa: SIM115
        handles += [spans, logs]
        tracer_provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=spans)))
        logger_provider.add_log_record_processor(SimpleLogRecordProcessor(
            ConsoleLogRecordExporter(out=logs)))
    return tracer_provider, logger_provider, handles


# --------------------------------------------------------------------------- OpenTelemetry


def otel(out: Path, base_url: str, db: str, capture: str, encoding: str) -> None:
    """The instrumentation's own chat spans, with agent and tool spans from the GenAI util's
    handler, around a plain chat-completions agent loop."""
    if capture == "true":  # what the instrumentation's own docs say; captures nothing today
        os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "true"
    else:
        os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
        os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = \
            "span_only" if capture == "span" else "event_only"
    import openai
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    from opentelemetry.util.genai.handler import TelemetryHandler
    from opentelemetry.util.genai.types import InputMessage, OutputMessage, Text

    tracer_provider, logger_provider, handles = _providers(out, encoding)
    OpenAIInstrumentor().instrument(tracer_provider=tracer_provider,
                                    logger_provider=logger_provider)
    handler = TelemetryHandler(tracer_provider=tracer_provider, logger_provider=logger_provider)
    client = openai.OpenAI(base_url=base_url + "/v1", api_key="k", max_retries=0)
    tools: Any = [{"type": "function", "function": {
        "name": "run_sql", "description": "Run SQL on MIMIC-IV", "parameters": RUN_SQL_SCHEMA}}]
    # The invocation is started by the call; ``with`` ends it (or fails it on an exception).
    agent = handler.invoke_local_agent(request_model=MODEL, agent_name="ehrsql-agent")
    with agent:
        agent.input_messages = [InputMessage("user", [Text(QUESTION)])]
        messages: list[Any] = [{"role": "system", "content": SYSTEM},
                               {"role": "user", "content": QUESTION}]
        while True:
            reply = client.chat.completions.create(model=MODEL, messages=messages,
                                                   tools=tools)
            message = reply.choices[0].message
            if not message.tool_calls:
                answer = message.content or ""
                break
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                arguments = call.function.arguments  # type: ignore[union-attr]
                try:
                    tool = handler.tool("run_sql", tool_call_id=call.id, tool_type="function")
                    with tool:
                        tool.arguments = arguments
                        result = run_sql(db, json.loads(arguments)["query"])
                        tool.tool_result = result
                except sqlite3.Error as err:
                    result = f"Error: {err}"
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
        agent.output_messages = [OutputMessage("assistant", [Text(answer)], "stop")]
    tracer_provider.shutdown()
    logger_provider.shutdown()
    for handle in handles:
        handle.close()
    for path in out.iterdir():  # a file a mode wrote nothing to is not one it writes
        if path.stat().st_size == 0:
            path.unlink()


def openinference(out: Path, base_url: str, db: str, encoding: str) -> None:
    """OpenInference's OpenAI instrumentation for the LLM spans, its tracer's agent span and
    tool decorator for the rest (what a Phoenix user writes)."""
    import openai
    from openinference.instrumentation import TracerProvider
    from openinference.instrumentation.openai import OpenAIInstrumentor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": "ehrsql-agent"}))
    handle = None
    if encoding == "otlp":
        provider.add_span_processor(SimpleSpanProcessor(otlp_span_exporter(out / "spans.jsonl")))
    else:
        handle = open(out / "spans.json", "w", encoding="utf-8")  # noqa: SIM115
        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=handle)))
    OpenAIInstrumentor().instrument(tracer_provider=provider)
    tracer = provider.get_tracer("ehrsql-agent")

    @tracer.tool(name="run_sql", description="Run SQL on MIMIC-IV")
    def traced_sql(query: str) -> str:
        return run_sql(db, query)

    client = openai.OpenAI(base_url=base_url + "/v1", api_key="k", max_retries=0)
    tools: Any = [{"type": "function", "function": {
        "name": "run_sql", "description": "Run SQL on MIMIC-IV", "parameters": RUN_SQL_SCHEMA}}]
    with tracer.start_as_current_span("ehrsql-agent", openinference_span_kind="agent") as span:
        span.set_input(QUESTION)
        messages: list[Any] = [{"role": "system", "content": SYSTEM},
                               {"role": "user", "content": QUESTION}]
        while True:
            reply = client.chat.completions.create(model=MODEL, messages=messages,
                                                   tools=tools)
            message = reply.choices[0].message
            if not message.tool_calls:
                answer = message.content or ""
                break
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                query = json.loads(call.function.arguments)["query"]  # type: ignore[union-attr]
                try:
                    result = traced_sql(query)
                except sqlite3.Error as err:
                    result = f"Error: {err}"
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
        span.set_output(answer)
    provider.shutdown()
    if handle is not None:
        handle.close()


def anthropic_messages(out: Path, base_url: str, db: str) -> None:
    """The Anthropic SDK's tool-use loop, logged as teams log it: each request with the
    response it got (``Message.model_dump``) as a JSONL line, and the whole conversation (the
    request parameters with the final reply appended) as one JSON document."""
    import anthropic

    client = anthropic.Anthropic(base_url=base_url, api_key="k", max_retries=0)
    tools: Any = [{"name": "run_sql", "description": "Run SQL on MIMIC-IV",
                   "input_schema": RUN_SQL_SCHEMA}]
    messages: list[Any] = [{"role": "user", "content": QUESTION}]
    with open(out / "messages.jsonl", "w", encoding="utf-8") as log:
        while True:
            request = {"model": MODEL, "max_tokens": 1024, "system": SYSTEM,
                       "messages": list(messages), "tools": tools}
            reply = client.messages.create(**request)
            log.write(json.dumps({"request": request,
                                  "response": reply.model_dump(mode="json")}) + "\n")
            messages.append({"role": "assistant",
                             "content": [block.model_dump(mode="json", exclude_none=True)
                                         for block in reply.content]})
            uses = [block for block in reply.content if block.type == "tool_use"]
            if not uses:
                break
            results: list[Any] = []
            for use in uses:
                try:
                    results.append({"type": "tool_result", "tool_use_id": use.id,
                                    "content": run_sql(db, use.input["query"])})
                except sqlite3.Error as err:
                    results.append({"type": "tool_result", "tool_use_id": use.id,
                                    "content": f"Error: {err}", "is_error": True})
            messages.append({"role": "user", "content": results})
    conversation = {"model": MODEL, "max_tokens": 1024, "system": SYSTEM, "tools": tools,
                    "messages": messages}
    (out / "conversation.json").write_text(json.dumps(conversation, indent=2), "utf-8")


def openai_agents(out: Path, base_url: str, db: str) -> None:
    """The OpenAI Agents SDK's runner with a function tool; its tracing processor replaced by
    one that writes each trace's and span's own ``export()`` as a JSON line when it ends
    (so children come before their parents, as the SDK's exporters send them)."""
    from agents import (
        Agent,
        OpenAIChatCompletionsModel,
        Runner,
        function_tool,
        set_trace_processors,
    )
    from agents.tracing import TracingProcessor
    from openai import AsyncOpenAI

    log = open(out / "traces.jsonl", "w", encoding="utf-8")  # noqa: SIM115

    class JsonLines(TracingProcessor):
        def _write(self, item: Any) -> None:
            exported = item.export()
            if exported is not None:
                log.write(json.dumps(exported, default=str) + "\n")

        def on_trace_start(self, trace: Any) -> None:
            pass

        def on_trace_end(self, trace: Any) -> None:
            self._write(trace)

        def on_span_start(self, span: Any) -> None:
            pass

        def on_span_end(self, span: Any) -> None:
            self._write(span)

        def shutdown(self) -> None:
            log.flush()

        def force_flush(self) -> None:
            log.flush()

    set_trace_processors([JsonLines()])

    @function_tool
    def run_sql_tool(query: str) -> str:
        """Run SQL on MIMIC-IV."""
        return run_sql(db, query)

    run_sql_tool.name = "run_sql"
    client = AsyncOpenAI(base_url=base_url + "/v1", api_key="k", max_retries=0)
    agent = Agent(name="ehrsql-agent", instructions=SYSTEM, tools=[run_sql_tool],
                  model=OpenAIChatCompletionsModel(model=MODEL, openai_client=client))
    Runner.run_sync(agent, QUESTION)
    log.close()


def smolagents_run(out: Path, base_url: str, db: str) -> None:
    """smolagents' tool-calling agent; the run kept as its ``RunResult.dict()``, with the
    memory's full steps (model input messages included) as ``steps``."""
    from smolagents import OpenAIModel, ToolCallingAgent, tool

    @tool
    def run_sql_tool(query: str) -> str:
        """Run SQL on MIMIC-IV.

        Args:
            query: the SQLite query to run.
        """
        return run_sql(db, query)

    run_sql_tool.name = "run_sql"
    model = OpenAIModel(model_id=MODEL, api_base=base_url + "/v1", api_key="k")
    agent = ToolCallingAgent(tools=[run_sql_tool], model=model, max_steps=6,
                             verbosity_level=0)
    result = agent.run(QUESTION, return_full_result=True)
    record = result.dict()
    record["steps"] = agent.memory.get_full_steps()
    (out / "run.json").write_text(json.dumps(record, indent=2, default=str), "utf-8")


def langsmith_run(out: Path, base_url: str, db: str) -> None:
    """LangSmith's ``@traceable`` agent and tool with the OpenAI client wrapped, traced
    locally (nothing uploaded); the finished root run kept as ``RunTree.model_dump()`` with its
    child runs nested under ``child_runs``."""
    import langsmith
    import openai
    from langsmith.wrappers import wrap_openai

    finished: list[Any] = []
    client = wrap_openai(openai.OpenAI(base_url=base_url + "/v1", api_key="k", max_retries=0))
    tools: Any = [{"type": "function", "function": {
        "name": "run_sql", "description": "Run SQL on MIMIC-IV", "parameters": RUN_SQL_SCHEMA}}]

    @langsmith.traceable(run_type="tool", name="run_sql")
    def traced_sql(query: str) -> str:
        return run_sql(db, query)

    @langsmith.traceable(run_type="chain", name="ehrsql-agent")
    def agent(question: str) -> str:
        messages: list[Any] = [{"role": "system", "content": SYSTEM},
                               {"role": "user", "content": question}]
        while True:
            reply = client.chat.completions.create(model=MODEL, messages=messages,
                                                   tools=tools)
            message = reply.choices[0].message
            if not message.tool_calls:
                return message.content or ""
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                query = json.loads(call.function.arguments)["query"]  # type: ignore[union-attr]
                try:
                    result = traced_sql(query)
                except sqlite3.Error as err:
                    result = f"Error: {err}"
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})

    # Local tracing: runs are built, nothing is sent (the client points at a closed local
    # port in case anything tried).
    nowhere = langsmith.Client(api_url="http://127.0.0.1:9", api_key="k",
                               auto_batch_tracing=False)
    with langsmith.tracing_context(enabled="local", client=nowhere):
        agent(QUESTION, langsmith_extra={"on_end": finished.append})
    def tree(run: Any) -> dict[str, Any]:
        # RunTree.model_dump leaves child_runs out: nest them as the API's Run
        # (read_run(..., load_child_runs=True)) does.
        dumped: dict[str, Any] = run.model_dump(mode="json")
        dumped["child_runs"] = [tree(child) for child in run.child_runs]
        return dumped

    (out / "run.json").write_text(json.dumps(tree(finished[0]), indent=2, default=str),
                                  "utf-8")


def langfuse_run(out: Path, base_url: str, db: str) -> None:
    """Langfuse's ``@observe`` agent and tool and its OpenAI drop-in, exported through the
    client's ``span_exporter`` (OTLP JSON lines here; nothing goes to a Langfuse server)."""
    import langfuse
    from langfuse.openai import OpenAI

    client_lf = langfuse.Langfuse(public_key="pk-lf-test", secret_key="sk-lf-test",
                                  base_url="http://127.0.0.1:9",
                                  span_exporter=otlp_span_exporter(out / "spans.jsonl"),
                                  flush_at=1)
    client = OpenAI(base_url=base_url + "/v1", api_key="k", max_retries=0)
    tools: Any = [{"type": "function", "function": {
        "name": "run_sql", "description": "Run SQL on MIMIC-IV", "parameters": RUN_SQL_SCHEMA}}]

    @langfuse.observe(as_type="tool", name="run_sql")
    def traced_sql(query: str) -> str:
        return run_sql(db, query)

    @langfuse.observe(as_type="agent", name="ehrsql-agent")
    def agent(question: str) -> str:
        messages: list[Any] = [{"role": "system", "content": SYSTEM},
                               {"role": "user", "content": question}]
        while True:
            reply = client.chat.completions.create(model=MODEL, messages=messages,
                                                   tools=tools)
            message = reply.choices[0].message
            if not message.tool_calls:
                return message.content or ""
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                query = json.loads(call.function.arguments)["query"]  # type: ignore[union-attr]
                try:
                    result = traced_sql(query)
                except sqlite3.Error as err:
                    result = f"Error: {err}"
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})

    agent(QUESTION)
    client_lf.flush()
    client_lf.shutdown()


def main(argv: list[str]) -> None:
    kind, out, base_url, db = argv
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    if kind.startswith("otel-"):
        _, capture, encoding = kind.split("-")
        otel(out_dir, base_url, db, capture, encoding)
    elif kind == "openai-agents":
        openai_agents(out_dir, base_url, db)
    elif kind == "langfuse":
        langfuse_run(out_dir, base_url, db)
    elif kind == "langsmith":
        langsmith_run(out_dir, base_url, db)
    elif kind == "smolagents":
        smolagents_run(out_dir, base_url, db)
    elif kind == "anthropic":
        anthropic_messages(out_dir, base_url, db)
    elif kind.startswith("openinference-"):
        openinference(out_dir, base_url, db, kind.split("-")[1])
    else:
        raise SystemExit(f"unknown kind {kind}")


if __name__ == "__main__":
    main(sys.argv[1:])
