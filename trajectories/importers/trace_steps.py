"""One agent run read out of a trace, whatever wrote the trace, and the trajectory it makes.

Every trace reader (OpenTelemetry GenAI, OpenInference, the OpenAI Agents SDK, Anthropic
messages, smolagents, ...) says what it found as a ``TraceRun``: the question, the tool calls
and messages in order, the final answer, the model and what ran it. ``trajectory_of`` turns
that into a trajectory by the same rules for all of them: a tool call is a SQL step when one of
its arguments is SQL (``chat_steps.tool_step_dict``, the one step-reading rule), its result is
the observation, and its error flag is the trace's own (a failed span, ``is_error``) when the
trace says, else read from the result text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from trajectories.importers.chat_steps import (
    MESSAGE,
    STEP_DEFAULTS,
    is_substantive,
    tool_step_dict,
)
from trajectories.importers.errors import describe_validation_error
from trajectories.importers.run_names import run_for_file
from trajectories.importers.tasks import question_key
from trajectories.model import Run, Step, Task, Trajectory
from trajectories.reading import is_error_output

#: Where the final answer came from (``final_answer_source``).
ANSWER_FROM_TRACE = "trace_output"
ANSWER_FROM_MESSAGE = "last_answer_message"


@dataclass
class Call:
    """One tool call: what was asked, what came back, and whether it failed."""

    call_id: str | None
    name: str | None
    arguments: Any
    result: Any = None
    #: The trace's own verdict (a span with status ERROR, ``is_error``); None: read the result.
    error: bool | None = None
    error_message: str | None = None
    duration_ms: float | None = None
    tokens: dict[str, int] | None = None


@dataclass
class Said:
    """A message: the assistant's text between calls, a tool message without a call."""

    role: str
    text: str
    tokens: dict[str, int] | None = None


@dataclass
class TraceRun:
    """An agent run as a trace reader found it."""

    trace_id: str
    source_format: str
    question: str | None = None
    items: list[Call | Said] = field(default_factory=list)
    #: The agent's own final answer (its output), when the trace records one.
    answer: str | None = None
    model: str | None = None
    agent: str | None = None
    service: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    duration_ms: float | None = None
    start_ns: int | None = None
    #: What else the trace says about the run, kept with the trajectory.
    extra: dict[str, Any] = field(default_factory=dict)


def text_of(value: Any) -> str | None:
    """A result or argument as text: strings as they are, anything else as JSON."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def _call_step(call: Call) -> dict[str, Any]:
    step = tool_step_dict(call.name, call.arguments if call.arguments is not None else "",
                          call.call_id)
    observation = text_of(call.result)
    if observation is None and call.error and call.error_message:
        observation = call.error_message
    step["observation"] = observation
    step["error"] = bool(call.error) if call.error is not None \
        else is_error_output(observation)
    if call.error and call.error_message and call.error_message != observation:
        step["error_message"] = call.error_message
    step["duration_ms"] = call.duration_ms
    step["tokens"] = call.tokens
    return step


def trajectory_of(found: TraceRun, *, path: Path, run: str | None, model: str | None,
                  rollout: int = 0) -> Trajectory:
    """The trajectory of one traced run; raises ``ValueError`` ``field: message``. The run is
    ``--run``, else the model and the folder (``run_names``: a folder of traces is one run per
    model); the task id a content key of the question (``--tasks`` gives the real one)."""
    question = found.question or ""
    steps: list[dict[str, Any]] = []
    if question:
        steps.append({**STEP_DEFAULTS, "kind": MESSAGE, "role": "user", "content": question})
    for item in found.items:
        if isinstance(item, Call):
            steps.append(_call_step(item))
        elif item.text.strip():
            steps.append({**STEP_DEFAULTS, "kind": MESSAGE, "role": item.role,
                          "content": item.text, "tokens": item.tokens})
    answer: Any = found.answer
    source = ANSWER_FROM_TRACE
    answer_step: int | None = None
    if answer is not None and answer.strip():
        last = steps[-1] if steps else None
        if last is None or last["kind"] != MESSAGE or last["role"] != "assistant" \
                or last["content"] != answer:
            steps.append({**STEP_DEFAULTS, "kind": MESSAGE, "role": "assistant",
                          "content": answer})
        answer_step = len(steps) - 1
    else:
        answer, source = None, "none"
        for index in range(len(steps) - 1, -1, -1):
            step = steps[index]
            if step["kind"] == MESSAGE and step["role"] == "assistant" \
                    and is_substantive(step["content"]):
                answer, answer_step, source = step["content"], index, ANSWER_FROM_MESSAGE
                break
    model_name = model or found.model or "unknown"
    configuration = {key: value for key, value in (("service", found.service),
                                                   ("agent", found.agent)) if value}
    usage = {key: value for key, value in (("input", found.input_tokens),
                                           ("output", found.output_tokens))
             if value is not None}
    try:
        traj = Trajectory.model_validate({
            "task": Task.model_validate({"id": question_key(question) if question
                                         else f"trace-{found.trace_id}",
                                         "question": question, "has_ground_truth": False}),
            "run": Run.model_validate({"name": run or run_for_file(model_name, path),
                                       "model": model_name, "configuration": configuration,
                                       "rollout": rollout}),
            "steps": [Step.model_validate(s) for s in steps],
            "final_answer": answer, "final_answer_step": answer_step,
            "final_answer_source": source,
            "source_format": found.source_format, "trace_id": found.trace_id,
            **({"usage": usage} if usage else {}),
            **({"duration_ms": found.duration_ms} if found.duration_ms is not None else {}),
            **found.extra,
        })
    except ValidationError as err:
        field_name, message = describe_validation_error(err)
        raise ValueError(f"{field_name}: {message}") from None
    return traj.with_id()


__all__ = ["ANSWER_FROM_MESSAGE", "ANSWER_FROM_TRACE", "Call", "Said", "TraceRun", "text_of",
           "trajectory_of"]
