"""LangSmith run trees: one root run (``run_type``, ``inputs``, ``outputs``, ``error``,
``start_time``, ``child_runs``) is one trajectory, as ``RunTree.model_dump()`` with its child
runs nested or as the API's ``Run`` read with ``load_child_runs``; a flat list of runs (each
with ``parent_run_id`` and ``trace_id``) is put back into trees. Files: one document, JSONL,
a JSON list.

The root run's inputs hold the question (a text field, else the last user message) and its
outputs the answer. ``llm`` runs' outputs hold the model's turn (an OpenAI chat completion's
``choices[0].message`` or LangChain ``generations``): its ``tool_calls`` are the calls; usage
from ``extra.metadata.usage_metadata`` (else the completion's ``usage``), the model from
``ls_model_name``. ``tool`` runs hold a call's arguments (``inputs``), result
(``outputs.output``) and, for a tool that raised, ``error`` (the exception and a traceback):
the step's flag and its ``error_message`` (the exception line). Tool runs carry no call id: a
model's calls and the tool runs after it pair in order, by name.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from trajectories.importers.errors import ImportProblem
from trajectories.importers.otlp import json_values
from trajectories.importers.registry import (
    FileSniff,
    ImportFormat,
    Parsed,
    ReadOptions,
    register,
    rejected,
)
from trajectories.importers.trace_steps import Call, Said, TraceRun, text_of, trajectory_of

_TEXT_KEYS = ("question", "input", "query", "task", "prompt", "output", "answer", "content",
              "result")


def _is_run(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("run_type"), str) \
        and "inputs" in value and ("child_runs" in value or "dotted_order" in value
                                   or "parent_run_id" in value)


def _detect(sniff: FileSniff) -> bool:
    if '"run_type"' not in sniff.text:
        return False
    return _is_run(sniff.first_value)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _text(value: Any) -> str | None:
    """A run's inputs or outputs as text: a text field, else the last user message, else a
    lone string value."""
    if isinstance(value, str):
        return value
    if not isinstance(value, dict):
        return None
    for key in _TEXT_KEYS:
        if isinstance(value.get(key), str):
            return str(value[key])
    messages = value.get("messages")
    if isinstance(messages, list):
        for message in reversed(messages):
            if isinstance(message, dict) and message.get("role") in ("user", "human") \
                    and isinstance(message.get("content"), str):
                return str(message["content"])
    strings = [v for v in value.values() if isinstance(v, str)]
    return strings[0] if len(strings) == 1 else None


def _walk(run: dict[str, Any], depth: int = 0) -> Iterator[dict[str, Any]]:
    """The runs of a tree, each before its children, children by start time."""
    yield run
    if depth > 200:
        return
    children = [c for c in run.get("child_runs") or [] if isinstance(c, dict)] \
        if isinstance(run.get("child_runs"), list) else []
    for child in sorted(children, key=lambda c: str(c.get("start_time") or "")):
        yield from _walk(child, depth + 1)


def _model_turn(outputs: Any) -> dict[str, Any]:
    outputs = _dict(outputs)
    choices = outputs.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        return _dict(choices[0].get("message"))
    generations = outputs.get("generations")
    if isinstance(generations, list) and generations:
        first = generations[0][0] if isinstance(generations[0], list) and generations[0] \
            else generations[0]
        return _dict(_dict(first).get("message"))
    return {}


def _tokens(run: dict[str, Any]) -> dict[str, int]:
    usage = _dict(_dict(_dict(run.get("extra")).get("metadata")).get("usage_metadata"))
    names = (("input", "input_tokens"), ("output", "output_tokens"))
    if not usage:
        usage = _dict(_dict(run.get("outputs")).get("usage"))
        names = (("input", "prompt_tokens"), ("output", "completion_tokens"))
    return {key: usage[name] for key, name in names
            if isinstance(usage.get(name), int) and not isinstance(usage.get(name), bool)}


def langsmith_run(root: dict[str, Any]) -> TraceRun:
    runs = list(_walk(root))
    found = TraceRun(str(root.get("trace_id") or root.get("id") or "run"), "langsmith")
    found.question = _text(root.get("inputs"))
    found.answer = _text(root.get("outputs"))
    found.agent = _str(root.get("name"))
    llms = [r for r in runs if r.get("run_type") == "llm"]
    tools = [r for r in runs if r.get("run_type") == "tool"]
    used: set[int] = set()
    for run in llms:
        metadata = _dict(_dict(run.get("extra")).get("metadata"))
        found.model = found.model or _str(metadata.get("ls_model_name")) \
            or _str(_dict(run.get("outputs")).get("model"))
        tokens = _tokens(run)
        for key, total in (("input", "input_tokens"), ("output", "output_tokens")):
            if key in tokens:
                setattr(found, total, (getattr(found, total) or 0) + tokens[key])
        turn = _model_turn(run.get("outputs"))
        items: list[Call | Said] = []
        content = turn.get("content")
        if isinstance(content, str) and content.strip():
            items.append(Said("assistant", content))
        calls = turn.get("tool_calls")
        for call in calls if isinstance(calls, list) else []:
            if not isinstance(call, dict):
                continue
            function = _dict(call.get("function"))
            name = _str(function.get("name")) or _str(call.get("name"))
            arguments = function.get("arguments", call.get("args"))
            index = next((i for i, t in enumerate(tools) if i not in used
                          and _str(t.get("name")) in (name, None)), None)
            tool = None
            if index is not None:
                used.add(index)
                tool = tools[index]
            items.append(_call(tool, _str(call.get("id")), name, arguments))
        if items and tokens:
            items[0].tokens = tokens
        found.items.extend(items)
    if not any(isinstance(i, Call) for i in found.items):
        found.items.extend(_call(t, None, None, None)
                           for i, t in enumerate(tools) if i not in used)
    root_error = root.get("error")
    if isinstance(root_error, str) and root_error.strip():
        found.extra["run_error"] = root_error.strip().splitlines()[0]
    found.duration_ms = _duration(root)
    if found.question is None and not found.items:
        raise ValueError("inputs: the run tree holds no question and no tool runs")
    return found


def _call(tool: dict[str, Any] | None, call_id: str | None, name: str | None,
          arguments: Any) -> Call:
    run = tool or {}
    outputs = run.get("outputs")
    result = outputs.get("output") if isinstance(outputs, dict) and "output" in outputs \
        else outputs
    call = Call(call_id, name or _str(run.get("name")),
                arguments if arguments is not None else run.get("inputs"), text_of(result))
    call.duration_ms = _duration(run)
    error = run.get("error")
    if isinstance(error, str) and error.strip():
        call.error = True
        call.error_message = error.strip().splitlines()[0]
        if call.result is None:
            call.result = call.error_message
    return call


def _duration(run: dict[str, Any]) -> float | None:
    try:
        start = datetime.fromisoformat(str(run["start_time"]).replace("Z", "+00:00"))
        end = datetime.fromisoformat(str(run["end_time"]).replace("Z", "+00:00"))
    except (KeyError, ValueError):
        return None
    try:
        seconds = (end - start).total_seconds()
    except TypeError:  # one time with a zone, one without
        return None
    return seconds * 1000 if seconds >= 0 else None


def _trees(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Flat runs (``parent_run_id``) nested under their parents; roots in order."""
    if any(isinstance(r.get("child_runs"), list) and r["child_runs"] for r in runs):
        return [r for r in runs if not r.get("parent_run_id")] or runs
    by_id = {str(r.get("id")): {**r, "child_runs": []} for r in runs}
    roots = []
    for run in by_id.values():
        parent = by_id.get(str(run.get("parent_run_id")))
        if parent is not None and parent is not run:
            parent["child_runs"].append(run)
        else:
            roots.append(run)
    return roots


def _read(path: Path, options: ReadOptions) -> Iterator[Parsed]:
    runs: list[tuple[str, dict[str, Any]]] = []
    for location, value in json_values(path):
        if isinstance(value, ImportProblem):
            yield Parsed(location, None, value, "")
            continue
        for item in value if isinstance(value, list) else [value]:
            if not _is_run(item):
                yield Parsed(location, None, ImportProblem(
                    str(path), "not a LangSmith run", location), "")
                continue
            runs.append((location, item))
    where = {id(run): location for location, run in runs}
    for root in _trees([run for _, run in runs]):
        location = where.get(id(root)) or f"run {root.get('id')}"
        try:
            traj = trajectory_of(langsmith_run(root), path=path, run=options.run,
                                 model=options.model)
        except ValueError as err:
            yield rejected(path, location, err, json.dumps({"id": str(root.get("id"))}))
            continue
        yield Parsed(location, traj, None, "")


LANGSMITH = register(ImportFormat(
    "langsmith", "LangSmith run trees (RunTree.model_dump / Run with child runs)",
    detect_file=_detect, read_file=_read, priority=60))
