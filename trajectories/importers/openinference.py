"""OpenInference semantic conventions (Arize Phoenix's): one trace is one agent run.

Every span says its kind in ``openinference.span.kind``. The ``AGENT`` span (else the root
``CHAIN``) holds the question in ``input.value`` and the final answer in ``output.value``.
``LLM`` spans hold the model's turns as flattened attributes:
``llm.output_messages.N.message.content`` and
``llm.output_messages.N.message.tool_calls.M.tool_call.{id,function.name,function.arguments}``,
the replies it was given in ``llm.input_messages.N.message.{role,content,tool_call_id}``,
``llm.model_name`` and ``llm.token_count.prompt`` / ``completion``. ``TOOL`` spans hold a
call's ``tool.name``, its arguments in ``input.value`` and its result in ``output.value``; a
tool that raised has span status ERROR (its message the exception's). Tool spans carry no
call id, so a model's calls and the tool spans after it pair in order, by tool name.
"""

from __future__ import annotations

import json
from typing import Any

from trajectories.importers.genai import NoContent
from trajectories.importers.otlp import Span
from trajectories.importers.trace_steps import Call, Said, TraceRun

OPENINFERENCE_KIND = "openinference.span.kind"
#: Keys under which a JSON ``input.value`` / ``output.value`` holds the text itself.
_TEXT_KEYS = ("input", "question", "query", "task", "prompt", "output", "answer",
              "final_output", "content", "result")


def _kind(span: Span) -> str:
    kind = span.attributes.get(OPENINFERENCE_KIND)
    return kind.upper() if isinstance(kind, str) else ""


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _count(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit() and len(value) < 19:
        return int(value)
    return None


def unflatten(attributes: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """``prefix.0.message.role`` style attributes as a list of nested dicts (numbered parts
    become list positions, in number order)."""
    tree: dict[Any, Any] = {}
    start = prefix + "."
    for key, value in attributes.items():
        if not key.startswith(start):
            continue
        node = tree
        parts = key[len(start):].split(".")
        for part in parts[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        node[parts[-1]] = value
    return [m for m in _lists(tree) if isinstance(m, dict)] if tree else []


def _lists(node: Any) -> Any:
    """Dicts whose keys are all numbers become lists (in number order)."""
    if not isinstance(node, dict):
        return node
    if node and all(k.isdigit() and len(k) < 7 for k in node):
        return [_lists(node[k]) for k in sorted(node, key=int)]
    return {k: _lists(v) for k, v in node.items()}


def _text(value: Any) -> str | None:
    """An ``input.value`` / ``output.value`` as text: a JSON object's text field when it has
    one (frameworks record their call's arguments), else the value as written."""
    if not isinstance(value, str):
        return None
    stripped = value.strip()
    if stripped.startswith("{"):
        try:
            parsed = json.loads(stripped)
        except ValueError:
            return value
        if isinstance(parsed, dict):
            for key in _TEXT_KEYS:
                if isinstance(parsed.get(key), str):
                    return str(parsed[key])
            last_user = _last_user(parsed.get("messages"))
            if last_user is not None:
                return last_user
    return value


def _last_user(value: Any) -> str | None:
    if not isinstance(value, list):
        return None
    for message in reversed(value):
        if isinstance(message, dict) and message.get("role") == "user" \
                and isinstance(message.get("content"), str):
            return str(message["content"])
    return None


def openinference_run(trace_id: str, spans: list[Span]) -> TraceRun:
    """The agent run of one trace; raises ``NoContent`` when it holds no content."""
    ordered = sorted(spans, key=lambda s: s.start_ns or 0)
    found = TraceRun(trace_id, "openinference")
    ids = {s.span_id for s in ordered}
    roots = [s for s in ordered if _kind(s) == "AGENT"] or \
        [s for s in ordered if _kind(s) == "CHAIN" and s.parent_id not in ids]
    agent = roots[0] if roots else None
    llms = [s for s in ordered if _kind(s) == "LLM"]
    tools = [s for s in ordered if _kind(s) == "TOOL"]
    if agent is not None:
        found.question = _text(agent.attributes.get("input.value"))
        found.answer = _text(agent.attributes.get("output.value"))
        found.agent = _str(agent.attributes.get("agent.name")) or agent.name or None
        found.duration_ms = agent.duration_ms
    replies: dict[str, str] = {}
    for span in llms:
        for message in unflatten(span.attributes, "llm.input_messages"):
            body = message.get("message")
            if isinstance(body, dict) and body.get("role") == "tool" \
                    and _str(body.get("tool_call_id")) and _str(body.get("content")):
                replies.setdefault(body["tool_call_id"], body["content"])
        if found.question is None:
            found.question = _first_user(span)
    used: set[int] = set()
    for span in llms:
        found.model = found.model or _str(span.attributes.get("llm.model_name"))
        tokens = {k: v for k, v in (
            ("input", _count(span.attributes.get("llm.token_count.prompt"))),
            ("output", _count(span.attributes.get("llm.token_count.completion"))))
            if v is not None}
        for key, name in (("input", "input_tokens"), ("output", "output_tokens")):
            if key in tokens:
                setattr(found, name, (getattr(found, name) or 0) + tokens[key])
        first = True
        for message in unflatten(span.attributes, "llm.output_messages"):
            for item in _items(message.get("message"), tools, used, replies):
                if first and tokens:
                    item.tokens, first = tokens, False
                found.items.append(item)
    if not any(isinstance(i, Call) for i in found.items):
        found.items.extend(_tool_call(span, None, None, None, None)
                           for i, span in enumerate(tools) if i not in used)
    if found.answer is None and found.items and isinstance(found.items[-1], Said):
        found.answer = found.items[-1].text
    if found.question is None and not found.items:
        raise NoContent("the trace holds no input or output values")
    if ordered:
        found.service = _str(ordered[0].resource.get("service.name"))
        found.start_ns = ordered[0].start_ns
    return found


def _first_user(span: Span) -> str | None:
    for message in unflatten(span.attributes, "llm.input_messages"):
        body = message.get("message")
        if isinstance(body, dict) and body.get("role") == "user":
            content = body.get("content")
            if isinstance(content, str):
                return content
    return None


def _items(message: Any, tools: list[Span], used: set[int],
           replies: dict[str, str]) -> list[Call | Said]:
    if not isinstance(message, dict):
        return []
    items: list[Call | Said] = []
    content = message.get("content")
    if isinstance(content, str) and content.strip():
        items.append(Said("assistant", content))
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, list) else []:
        body = call.get("tool_call") if isinstance(call, dict) else None
        if not isinstance(body, dict):
            continue
        function = body["function"] if isinstance(body.get("function"), dict) else {}
        name = _str(function.get("name"))
        call_id = _str(body.get("id"))
        index = next((i for i, t in enumerate(tools) if i not in used
                      and (name is None or _str(t.attributes.get("tool.name")) in (name, None))),
                     None)
        span = None
        if index is not None:
            used.add(index)
            span = tools[index]
        items.append(_tool_call(span, call_id, name, function.get("arguments"),
                                replies.get(call_id or "")))
    return items


def _tool_call(span: Span | None, call_id: str | None, name: str | None, arguments: Any,
               reply: str | None) -> Call:
    attributes = span.attributes if span is not None else {}
    if arguments is None:
        arguments = attributes.get("input.value")
    result = attributes.get("output.value")
    call = Call(call_id, name or _str(attributes.get("tool.name")), arguments,
                result if result is not None else reply)
    if span is not None:
        call.duration_ms = span.duration_ms
        if span.status_error:
            call.error = True
            call.error_message = span.status_message
            if result is None and reply is not None:
                call.result = reply
    return call


__all__ = ["OPENINFERENCE_KIND", "openinference_run", "unflatten"]
