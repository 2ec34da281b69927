"""Chat messages to step documents: the one walk both chat import paths use.

``steps_as_dicts`` turns OpenAI-style messages (with ``tool_calls``) into the JSON documents of
``Step`` models, in field order with defaults filled (what ``Step.model_dump(mode="json")``
gives). The fast path (``fast_chat``) stores them as they are; the pydantic path
(``openai_chat``) validates them into ``Step`` models. ``answer_of`` picks the agent's final
answer from them.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

from trajectories.model import Step, StepKind
from trajectories.reading import (
    REASONING_CHANNELS,
    harmony_segments,
    is_error_output,
    sql_argument,
    sql_result,
)
from trajectories.scoring import ANSWER_SQL, ANSWER_SQL_PARTIAL, ANSWER_SQL_UNREADABLE

PYTHON_TOOLS = {"python", "execute_python", "run_python", "python_repl", "code_interpreter"}

#: A step's fields in declaration order with their defaults (the order pydantic writes them).
STEP_DEFAULTS: dict[str, Any] = {
    name: None if info.is_required() else info.get_default(call_default_factory=True)
    for name, info in Step.model_fields.items()
}
SQL, PYTHON, TOOL, MESSAGE, THINKING = (str(StepKind.SQL), str(StepKind.PYTHON),
                                        str(StepKind.TOOL_CALL), str(StepKind.MESSAGE),
                                        str(StepKind.THINKING))


def message_text(content: Any) -> str | None:
    """A message's content as text (content parts joined, anything else as JSON)."""
    if content is None:
        return None
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        parts = [p.get("text", "") if isinstance(p, dict) else str(p) for p in content]
        return "".join(parts)
    return json.dumps(content, ensure_ascii=False)


# Steps are written as ``{**STEP_DEFAULTS, ...}``: the fields keep their declared place (a key
# given again keeps its first position) and the extras follow in the order given.


def _name(value: Any, what: str) -> str | None:
    if value is not None and type(value) is not str:
        # Said here, naming the field: a Step would refuse it with pydantic's wording, and
        # ``name.lower()`` would crash the import.
        raise ValueError(f"messages: {what} must be a string, not {type(value).__name__}")
    return value


def tool_step_dict(name: Any, raw_args: Any, call_id: Any) -> dict[str, Any]:
    """One tool call as a step document: a SQL step when one of its arguments is SQL
    (``trajectories.reading.sql_argument``, whatever the tool or argument is called), a Python
    step for a Python tool's ``code``, else a tool call with its arguments as given."""
    name = _name(name, "a tool call's function name")
    raw = raw_args if isinstance(raw_args, str) else json.dumps(raw_args, ensure_ascii=False)
    parsed: Any = raw_args if isinstance(raw_args, dict) else None
    if parsed is None and raw:
        try:
            parsed = orjson.loads(raw)
        except orjson.JSONDecodeError:
            # orjson refuses what the standard parser takes (NaN, lone surrogates): ask it too.
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = None  # real agents emit invalid JSON; keep the raw text and move on
    return step_for_call(name, raw, parsed if isinstance(parsed, dict) else {}, call_id,
                         valid=parsed is not None)


def step_for_call(name: str | None, raw: str | None, args: dict[str, Any], call_id: Any, *,
                  valid: bool) -> dict[str, Any]:
    """A tool call whose arguments are read (``args``) as a step document; ``raw`` is kept as
    the step's ``arguments`` and ``valid`` says whether it was JSON."""
    found = sql_argument(args)
    if found is not None:
        return {**STEP_DEFAULTS, "kind": SQL, "name": name, "code": found[1], "arguments": raw,
                "tool_call_id": call_id, "arguments_valid_json": valid}
    code = args.get("code")
    if isinstance(code, str) and (name or "").lower() in PYTHON_TOOLS:
        return {**STEP_DEFAULTS, "kind": PYTHON, "name": name, "code": code, "arguments": raw,
                "tool_call_id": call_id, "arguments_valid_json": valid}
    return {**STEP_DEFAULTS, "kind": TOOL, "name": name, "arguments": raw,
            "tool_call_id": call_id, "arguments_valid_json": valid}


def said_steps(text: str) -> list[dict[str, Any]]:
    """What an assistant wrote, as message steps: gpt-oss's harmony markers are dropped and
    its ``analysis`` channel becomes a thinking step (text without markers is one message)."""
    steps: list[dict[str, Any]] = []
    for channel, piece in harmony_segments(text):
        kind = THINKING if channel in REASONING_CHANNELS else MESSAGE
        steps.append({**STEP_DEFAULTS, "kind": kind, "role": "assistant",
                      "content": piece.strip()})
    return steps


def steps_as_dicts(messages: list[Any]) -> list[dict[str, Any]]:
    """The steps of a chat, as ``Step`` documents; raises ``ValueError`` ("messages: ...")
    for a name that is not a string."""
    steps: list[dict[str, Any]] = []
    open_calls: dict[Any, dict[str, Any]] = {}
    for msg in messages:
        if not isinstance(msg, dict):
            continue
        role = str(msg.get("role") or "assistant")
        content = msg.get("content")
        if type(content) is not str:
            content = message_text(content)
        if role in {"tool", "function"}:
            call_id = msg.get("tool_call_id")
            step = open_calls.pop(call_id, None) if call_id else None
            if step is None:  # no id: answer the oldest call still waiting
                step = next((s for s in steps
                             if s["kind"] != MESSAGE and s["observation"] is None), None)
            if step is None:
                steps.append({**STEP_DEFAULTS, "kind": MESSAGE, "role": "tool",
                              "name": _name(msg.get("name"), "a tool message's name"),
                              "content": content})
            else:
                step["observation"] = content
                step["error"] = is_error_output(content)
            continue
        if role == "assistant":
            if content and content.strip():
                if "<|" in content:
                    steps.extend(said_steps(content))
                else:
                    steps.append({**STEP_DEFAULTS, "kind": MESSAGE, "role": "assistant",
                                  "content": content})
            calls = msg.get("tool_calls") or []
            if msg.get("function_call"):
                calls = [*calls, {"function": msg["function_call"], "id": None}]
            for call in calls:
                if not isinstance(call, dict):
                    continue
                fn = call.get("function") or {}
                tool_step = tool_step_dict(fn.get("name"), fn.get("arguments"), call.get("id"))
                steps.append(tool_step)
                if call.get("id"):
                    open_calls[call["id"]] = tool_step
            continue
        steps.append({**STEP_DEFAULTS, "kind": MESSAGE, "role": role, "content": content})
    return steps


# Turns that only point back at an earlier answer carry no answer of their own.
_NON_ANSWER = re.compile(
    r"^\W*(i\s+(have|'ve)\s+already\s+(provided|given|answered)|as\s+(i\s+)?(mentioned|stated)"
    r"\s+(before|earlier|above)|you'?re\s+welcome|glad\s+(i\s+)?(could|to)\s+help|"
    r"is\s+there\s+anything\s+else)", re.I)


def is_substantive(text: str | None) -> bool:
    """True for an assistant message that states an answer, not a pleasantry or a pointer back."""
    return bool(text and text.strip()) and not _NON_ANSWER.search(text or "")


def answer_of(steps: list[dict[str, Any]]) -> tuple[Any, int | None, str, int | None]:
    """The agent's own final answer: the result of its last SQL query that ran without error
    (what a SQL-submitting harness scores), else its last substantive assistant message.
    Returns (answer, index of the step it came from, source, full row count of a cut result).
    ``steps``: step documents (any mapping with ``kind``, ``role``, ``content``,
    ``observation`` and ``error``).

    The last successful query is the answer even when its result cannot be used: a cut
    listing gives its visible rows (``ANSWER_SQL_PARTIAL``, with the full count), an
    unreadable one no answer (``ANSWER_SQL_UNREADABLE``); an earlier query's rows would be an
    answer the agent did not end with."""
    for index in range(len(steps) - 1, -1, -1):
        step = steps[index]
        if step["kind"] == SQL and not step["error"]:
            rows, total = sql_result(step["observation"])
            if rows is None:
                return None, index, ANSWER_SQL_UNREADABLE, None
            if total is not None:
                return rows, index, ANSWER_SQL_PARTIAL, total
            return rows, index, ANSWER_SQL, None
    for index in range(len(steps) - 1, -1, -1):
        step = steps[index]
        if step["kind"] == MESSAGE and step["role"] == "assistant" \
                and is_substantive(step["content"]):
            return step["content"], index, "last_answer_message", None
    return None, None, "none", None
