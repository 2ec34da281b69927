"""LM Studio conversation exports (one conversation per ``.json`` file), as LM Studio writes
them.

``{name, createdAt, lastUsedModel, messages: [...]}``; each message holds ``versions``
(regenerations) and ``currentlySelected``. A user version has ``content`` parts; an assistant
version (``multiStep``) has ``steps``:

- ``contentBlock`` steps, whose ``content`` parts are ``text``, ``toolCallRequest`` or
  ``toolCallResult``; a block styled ``{"type": "thinking"}`` is reasoning. A request carries
  ``callId``, ``name`` and ``parameters`` on the part itself; ``parameters`` is an object, or
  a JSON or Python-literal string. A result carries the same ``callId`` and its ``content``:
  MCP content parts, stored as a JSON string. Text parts flagged ``isStructural`` are the
  runtime's own markers (gpt-oss's ``<|start|>assistant<|channel|>final<|message|>``), not
  something the model said; harmony markers inside text split it into thinking and message.
- ``toolStatus`` steps: the call's state (``toolCallSucceeded``, ``toolCallFailed``...) and its
  time, keyed by the same ``callId``.
- ``debugInfoBlock`` steps: the runtime's notes, no conversation content.

A request and its result are paired by ``callId`` (then ``toolCallRequestId``); a result with
neither answers the oldest request still waiting, and a result no request asked for is kept as
a tool message. Tool calls become steps by the one rule of ``trajectories.reading``: SQL when
an argument is SQL. The final answer is the last thing the assistant said (a chat has no
harness that scores a SQL result); the last SQL result stays in the steps as evidence.

LM Studio records no task id or ground truth: a task file (``--tasks``) gives them
(``trajectories.importers.tasks``). Without one, the task id is a content key of the question.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from trajectories.importers.chat_steps import (
    STEP_DEFAULTS,
    is_substantive,
    said_steps,
    step_for_call,
)
from trajectories.importers.errors import describe_validation_error
from trajectories.importers.run_names import run_for_file
from trajectories.importers.tasks import question_key
from trajectories.model import Run, Step, StepKind, Task, Trajectory, finite_number
from trajectories.reading import (
    arguments_text,
    is_error_output,
    parse_arguments,
    tool_output_text,
)

_THINK_OPEN, _THINK_CLOSE = "<think>", "</think>"
#: ``toolStatus`` states that mean the call did not succeed.
_FAILED_STATES = frozenset({"toolCallFailed", "toolCallError", "toolCallCancelled",
                            "toolCallRejected", "toolCallDenied", "toolCallTimedOut"})


def looks_like_lmstudio(record: Any) -> bool:
    if not isinstance(record, dict) or not isinstance(record.get("messages"), list):
        return False
    return any(isinstance(m, dict) and isinstance(m.get("versions"), list)
               for m in record["messages"][:3])


def _parts_text(parts: Any) -> str:
    if isinstance(parts, str):
        return parts
    if not isinstance(parts, list):
        return ""
    return "".join(str(p.get("text") or "") for p in parts if isinstance(p, dict)
                   and p.get("type") == "text" and not p.get("isStructural"))


def _said(text: str, thinking: bool) -> list[dict[str, Any]]:
    """Text to step documents: a thinking block is one THINKING step; in what the model said,
    ``<think>`` spans and harmony analysis channels are reasoning too."""
    if not text.strip():
        return []
    if thinking:
        return [{**STEP_DEFAULTS, "kind": str(StepKind.THINKING), "role": "assistant",
                 "content": text.strip()}]
    steps: list[dict[str, Any]] = []
    rest = text
    while _THINK_OPEN in rest:
        before, _, after = rest.partition(_THINK_OPEN)
        reasoning, closed, rest = after.partition(_THINK_CLOSE)
        if before.strip():
            steps.extend(said_steps(before))
        if reasoning.strip():
            steps.append({**STEP_DEFAULTS, "kind": str(StepKind.THINKING), "role": "assistant",
                          "content": reasoning.strip()})
        if not closed:
            rest = ""
    if rest.strip():
        steps.extend(said_steps(rest))
    return steps


class _Calls:
    """Requests waiting for their results, by call id (and request id)."""

    def __init__(self) -> None:
        self.by_key: dict[str, dict[str, Any]] = {}
        self.waiting: list[dict[str, Any]] = []
        self.status: dict[str, dict[str, Any]] = {}

    def add(self, part: dict[str, Any], step: dict[str, Any]) -> None:
        for key in ("callId", "toolCallRequestId"):
            if part.get(key) is not None:
                self.by_key[f"{key}:{part[key]}"] = step
        self.waiting.append(step)

    def answer(self, part: dict[str, Any]) -> dict[str, Any] | None:
        step = None
        for key in ("callId", "toolCallId", "toolCallRequestId"):
            if part.get(key) is not None:
                step = self.by_key.get(f"{'callId' if key == 'toolCallId' else key}:"
                                       f"{part[key]}")
                if step is not None:
                    break
        has_key = any(part.get(k) is not None for k in ("callId", "toolCallId",
                                                        "toolCallRequestId"))
        if step is None and not has_key:
            step = next((s for s in self.waiting if s["observation"] is None), None)
        if step is not None and step in self.waiting:
            self.waiting.remove(step)
        return step


def _request_step(part: dict[str, Any], calls: _Calls) -> dict[str, Any]:
    raw = part.get("parameters", part.get("arguments"))
    parsed = parse_arguments(raw)
    args = parsed if isinstance(parsed, dict) else {}
    # Arguments are kept as JSON when they could be read (a Python literal included), else as
    # the text the model wrote.
    text = arguments_text(parsed if isinstance(parsed, dict | list) else raw)
    name = part.get("name")
    step = step_for_call(name if isinstance(name, str) else None, text, args,
                         part.get("callId"), valid=isinstance(parsed, dict | list))
    if part.get("pluginIdentifier"):
        step["plugin"] = part["pluginIdentifier"]
    status = calls.status.get(str(part.get("callId")))
    if status is not None:
        state = (status.get("status") or {}) if isinstance(status, dict) else {}
        if isinstance(state.get("timeMs"), int | float):
            # A float; a value no float holds (10**400) as it is, for the model to refuse.
            step["duration_ms"] = finite_number(state["timeMs"]) or state["timeMs"]
        if state.get("type"):
            step["tool_status"] = state["type"]
    return step


def _result(part: dict[str, Any], calls: _Calls, steps: list[dict[str, Any]]) -> None:
    text = tool_output_text(part.get("content")) or ""
    target = calls.answer(part)
    if target is None:
        steps.append({**STEP_DEFAULTS, "kind": str(StepKind.MESSAGE), "role": "tool",
                      "content": text})
        return
    target["observation"] = text
    target["error"] = target.get("tool_status") in _FAILED_STATES or is_error_output(text)


def _version_steps(version: dict[str, Any]) -> list[dict[str, Any]]:
    role = str(version.get("role") or "assistant")
    if role != "assistant" or not isinstance(version.get("steps"), list):
        text = _parts_text(version.get("content"))
        if role == "assistant":
            return _said(text, False)
        return [{**STEP_DEFAULTS, "kind": str(StepKind.MESSAGE), "role": role,
                 "content": text}] if text else []
    steps: list[dict[str, Any]] = []
    calls = _Calls()
    for block in version["steps"]:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "toolStatus":
            state = block.get("statusState")
            if block.get("callId") is not None and isinstance(state, dict):
                calls.status[str(block["callId"])] = state
                # A status seen after its request still applies to it.
                for step in calls.waiting:
                    if str(step.get("tool_call_id")) == str(block["callId"]):
                        status = state.get("status") or {}
                        if isinstance(status.get("timeMs"), int | float):
                            step["duration_ms"] = (finite_number(status["timeMs"])
                                                   or status["timeMs"])  # as above
                        if status.get("type"):
                            step["tool_status"] = status["type"]
            continue
        if kind != "contentBlock":
            continue  # debugInfoBlock and unknown blocks carry no conversation content
        style = block.get("style")
        thinking = isinstance(style, dict) and style.get("type") == "thinking"
        for part in block.get("content") or []:
            if not isinstance(part, dict):
                continue
            part_kind = part.get("type")
            if part_kind == "text":
                if not part.get("isStructural"):
                    steps.extend(_said(str(part.get("text") or ""), thinking))
            elif part_kind == "toolCallRequest":
                step = _request_step(part, calls)
                steps.append(step)
                calls.add(part, step)
            elif part_kind == "toolCallResult":
                _result(part, calls, steps)
    return steps


def _selected(msg: dict[str, Any], index: int) -> tuple[dict[str, Any], int]:
    versions = msg.get("versions")
    if not isinstance(versions, list) or not versions:
        return msg, 0
    chosen = msg.get("currentlySelected", 0)
    version = versions[chosen] if isinstance(chosen, int) and 0 <= chosen < len(versions) \
        else versions[0]
    if not isinstance(version, dict):
        raise ValueError(f"messages.{index}.versions: expected objects")
    return version, len(versions) - 1


def conversation_model(record: dict[str, Any]) -> str | None:
    """The model that wrote the conversation: the assistant's sender, else the last model
    LM Studio used for it."""
    for msg in record.get("messages") or []:
        if not isinstance(msg, dict):
            continue
        for version in msg.get("versions") or []:
            if isinstance(version, dict) and version.get("role") == "assistant":
                sender = (version.get("senderInfo") or {}).get("senderName")
                if isinstance(sender, str) and sender:
                    return sender
    last = record.get("lastUsedModel")
    if isinstance(last, dict):
        for key in ("identifier", "indexedModelIdentifier", "path"):
            if isinstance(last.get(key), str) and last[key]:
                return str(last[key])
    return None


def final_message(steps: list[dict[str, Any]]) -> tuple[Any, int | None, str]:
    """The assistant's last substantive message: a chat's answer."""
    for index in range(len(steps) - 1, -1, -1):
        step = steps[index]
        if step["kind"] == str(StepKind.MESSAGE) and step["role"] == "assistant" \
                and is_substantive(step["content"]):
            return step["content"], index, "last_answer_message"
    return None, None, "none"


def parse_lmstudio(record: Any, *, path: Path, run: str | None,
                   model: str | None) -> Trajectory:
    """One LM Studio conversation to a trajectory; raises ``ValueError`` ``field: message``.
    ``run`` defaults to the model and the folder (``run_names.run_for_file``)."""
    if not looks_like_lmstudio(record):
        raise ValueError("messages: expected an LM Studio conversation (messages with versions)")
    steps: list[dict[str, Any]] = []
    regenerations = 0
    for i, msg in enumerate(record["messages"]):
        if not isinstance(msg, dict):
            raise ValueError(f"messages.{i}: expected an object")
        version, others = _selected(msg, i)
        regenerations += others
        steps.extend(_version_steps(version))
    first_user = next((s["content"] for s in steps if s["role"] == "user" and s["content"]), "")
    name = str(record.get("name") or "")
    final_answer, answer_step, answer_source = final_message(steps)
    producer_model = conversation_model(record)
    model_name = model or producer_model or "unknown"
    try:
        task = Task.model_validate({
            "id": question_key(first_user) if first_user else (name or path.stem),
            "question": first_user, "has_ground_truth": False,
        })
        traj = Trajectory.model_validate({
            "task": task,
            "run": Run.model_validate({"name": run or run_for_file(model_name, path),
                                       "model": model_name}),
            "steps": [Step.model_validate(s) for s in steps],
            "final_answer": final_answer,
            "final_answer_step": answer_step, "final_answer_source": answer_source,
            "source_format": "lmstudio", "conversation_name": name or None,
            **({"regenerations": regenerations} if regenerations else {}),
            "source_record": {k: v for k, v in record.items() if k != "messages"},
        })
    except ValidationError as err:
        field, msg = describe_validation_error(err)
        raise ValueError(f"{field}: {msg}") from None
    return traj.with_id()
