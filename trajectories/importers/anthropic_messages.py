"""Anthropic Messages API logs: the requests a tool-use loop sent and the replies it got.

A file holds JSON values (JSONL, one document, or documents one after another), each one of:
a request (the ``messages.create`` parameters: ``model``, ``max_tokens``, ``messages``), a
reply (a ``Message``: ``{"type": "message", "role": "assistant", "content": [...],
"usage"}``), or both as ``{"request": ..., "response": ...}``; a JSON list of them is read
item by item. A tool-use loop resends the whole conversation with every request, so the
longest request is the conversation and the reply after it the final turn; a request that
does not continue the conversation before it starts the next trajectory.

Content blocks: ``text``; ``tool_use`` (``id``, ``name``, ``input``: the call and its
arguments); ``tool_result`` (``tool_use_id``, ``content`` as text or text blocks, ``is_error``:
the error flag); ``thinking`` (dropped). The question is the first user text; the final
answer the last assistant turn's text.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
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
from trajectories.importers.trace_steps import Call, Said, TraceRun, trajectory_of

_BLOCKS = frozenset({"tool_use", "tool_result"})


def _is_reply(value: Any) -> bool:
    return isinstance(value, dict) and value.get("type") == "message" \
        and value.get("role") == "assistant" and isinstance(value.get("content"), list)


def _is_request(value: Any) -> bool:
    """Anthropic's request: ``messages`` with ``max_tokens`` (which the API requires and
    OpenAI-style chat logs do not carry), or messages holding tool-use blocks."""
    if not isinstance(value, dict) or not isinstance(value.get("messages"), list):
        return False
    if "max_tokens" in value:
        return True
    return any(isinstance(m, dict) and isinstance(m.get("content"), list)
               and any(isinstance(b, dict) and b.get("type") in _BLOCKS for b in m["content"])
               for m in value["messages"])


def looks_like_anthropic(value: Any) -> bool:
    if isinstance(value, list) and value:
        value = value[0]
    if isinstance(value, dict) and ("request" in value or "response" in value
                                    or "responses" in value):
        replies = value.get("responses")
        first = replies[0] if isinstance(replies, list) and replies else None
        return _is_request(value.get("request")) or _is_reply(value.get("response")) \
            or _is_reply(first)
    return _is_request(value) or _is_reply(value)


def _detect(sniff: FileSniff) -> bool:
    # Cheap first: a request names max_tokens, a reply is typed "message", a conversation
    # holds tool_use blocks; only then is the first value parsed.
    head = sniff.text
    if '"max_tokens"' not in head and '"tool_use"' not in head and '"message"' not in head:
        return False
    return looks_like_anthropic(sniff.first_value)


@dataclass
class _Conversation:
    messages: list[Any] = field(default_factory=list)
    system: Any = None
    model: str | None = None
    replies: list[dict[str, Any]] = field(default_factory=list)


def _records(value: Any) -> Iterator[tuple[str, Any]]:
    """(what, value) for each request and reply a JSON value holds."""
    if isinstance(value, list):
        for item in value:
            yield from _records(item)
        return
    if not isinstance(value, dict):
        return
    if "request" in value or "response" in value or "responses" in value:
        if _is_request(value.get("request")):
            yield "request", value["request"]
        replies = value.get("responses")
        for reply in [value.get("response"), *(replies if isinstance(replies, list) else [])]:
            if _is_reply(reply):
                yield "reply", reply
        return
    if _is_request(value):
        yield "request", value
    elif _is_reply(value):
        yield "reply", value


def _continues(conversation: _Conversation, messages: list[Any]) -> bool:
    known = conversation.messages
    return bool(known) and len(messages) >= len(known) and messages[:1] == known[:1]


def conversations(path: Path) -> Iterator[tuple[str, _Conversation | ImportProblem]]:
    current: _Conversation | None = None
    start = ""
    for location, value in json_values(path):
        if isinstance(value, ImportProblem):
            yield location, value
            continue
        found = list(_records(value))
        if not found:
            yield location, ImportProblem(str(path), "not an Anthropic messages request or "
                                          "reply", location)
            continue
        for what, record in found:
            if what == "request":
                messages = record["messages"]
                if current is None or not _continues(current, messages):
                    if current is not None:
                        yield start, current
                    current, start = _Conversation(), location
                current.messages = list(messages)
                current.system = record.get("system")
                model = record.get("model")
                current.model = model if isinstance(model, str) else current.model
            else:
                if current is None:
                    current, start = _Conversation(), location
                current.replies.append(record)
    if current is not None:
        yield start, current


def _turn_key(content: Any) -> str:
    """An assistant turn's content, compared without the fields a reply has and a resent
    message may lack (``citations``, ``caller`` ...): text, and calls with their input."""
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) \
        else content if isinstance(content, list) else []
    kept = [(b.get("type"), b.get("text"), b.get("id"), b.get("name"), b.get("input"))
            for b in blocks if isinstance(b, dict) and b.get("type") in ("text", "tool_use")]
    return json.dumps(kept, sort_keys=True, default=str)


def _result_text(content: Any) -> Any:
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content
                       if isinstance(b, dict) and isinstance(b.get("text"), str))
    return content


def _usage(reply: dict[str, Any]) -> dict[str, int] | None:
    usage = reply.get("usage")
    if not isinstance(usage, dict):
        return None
    tokens = {k: usage[f"{k}_tokens"] for k in ("input", "output")
              if isinstance(usage.get(f"{k}_tokens"), int)
              and not isinstance(usage.get(f"{k}_tokens"), bool)}
    return tokens or None


def anthropic_run(conversation: _Conversation, key: str) -> TraceRun:
    messages = list(conversation.messages)
    # Each reply is an assistant turn the conversation may already hold (a later request
    # resends it): matched by content, else appended (the final turn). Its usage goes with it.
    usage_at: dict[int, dict[str, int] | None] = {}
    held = [i for i, m in enumerate(messages)
            if isinstance(m, dict) and m.get("role") == "assistant"]
    for reply in conversation.replies:
        turn = _turn_key(reply.get("content"))
        index = next((i for i in held if i not in usage_at
                      and _turn_key(messages[i].get("content")) == turn), None)
        if index is None:
            messages.append({"role": "assistant", "content": reply["content"]})
            index = len(messages) - 1
        usage_at[index] = _usage(reply)
    first_reply = conversation.replies[0] if conversation.replies else {}
    found = TraceRun(str(first_reply.get("id") or key), "anthropic")
    model = first_reply.get("model")
    found.model = model if isinstance(model, str) else conversation.model
    calls: dict[str, Call] = {}
    last_text: str | None = None
    for position, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        role = "assistant" if message.get("role") == "assistant" else "user"
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) \
            else [b for b in content if isinstance(b, dict)] if isinstance(content, list) \
            else []
        tokens = usage_at.get(position)
        if tokens:
            for key_name, name in (("input", "input_tokens"), ("output", "output_tokens")):
                if key_name in tokens:
                    setattr(found, name, (getattr(found, name) or 0) + tokens[key_name])
        last_text = None if role == "assistant" else last_text
        for block in blocks:
            item = _block(block, role, calls, found)
            if item is None:
                continue
            if tokens:
                item.tokens, tokens = tokens, None
            found.items.append(item)
            if isinstance(item, Said) and role == "assistant":
                last_text = item.text if last_text is None else last_text + "\n" + item.text
    if found.question is None:
        raise ValueError("messages: the conversation has no user question")
    if last_text is not None and found.items and isinstance(found.items[-1], Said):
        found.answer = last_text
        while found.items and isinstance(found.items[-1], Said) \
                and found.items[-1].role == "assistant":
            found.items.pop()  # the final turn's text: the answer, stored once
    return found


def _block(block: dict[str, Any], role: str, calls: dict[str, Call],
           found: TraceRun) -> Call | Said | None:
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        if role == "user" and found.question is None:
            found.question = block["text"]
            return None
        return Said(role, block["text"])
    if kind == "tool_use":
        call_id = block.get("id") if isinstance(block.get("id"), str) else None
        name = block.get("name") if isinstance(block.get("name"), str) else None
        asked = Call(call_id, name, block.get("input"))
        if call_id:
            calls[call_id] = asked
        return asked
    if kind == "tool_result":
        answered = block.get("tool_use_id")
        call = calls.get(answered) if isinstance(answered, str) else None
        result = _result_text(block.get("content"))
        if call is None:
            return Said("tool", result if isinstance(result, str) else json.dumps(result))
        call.result = result
        if isinstance(block.get("is_error"), bool):
            call.error = block["is_error"]
    return None


def _read(path: Path, options: ReadOptions) -> Iterator[Parsed]:
    for location, item in conversations(path):
        if isinstance(item, ImportProblem):
            yield Parsed(location, None, item, "")
            continue
        try:
            found = anthropic_run(item, f"{path.stem}-{location}")
            traj = trajectory_of(found, path=path, run=options.run, model=options.model)
        except ValueError as err:
            yield rejected(path, location, err, "")
            continue
        yield Parsed(location, traj, None, "")


ANTHROPIC = register(ImportFormat(
    "anthropic", "Anthropic Messages API logs (requests and replies)",
    detect_file=_detect, read_file=_read, priority=60))
