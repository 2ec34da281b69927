"""smolagents runs: ``RunResult.dict()`` (``output``, ``state``, ``steps``, ``token_usage``,
``timing``), with ``steps`` the memory's full steps (``agent.memory.get_full_steps()``), or
those steps alone as a JSON list. One run is one trajectory; a file may hold several (JSONL,
documents one after another).

Steps: the task step (``task``: the question); action steps (``step_number``; ``tool_calls``
with ``function.name`` and ``arguments``; ``observations``, the tool's output; ``error``, with
``type`` and ``message``; ``model_output_message``, the model's raw turn; ``code_action`` for a
code agent; ``timing``; ``token_usage``; ``is_final_answer``); planning steps (``plan``) and
the final answer step. A failing step keeps no tool calls: its call is read from the model's
raw turn (``model_output_message.tool_calls``), its output is the error's message and it is
flagged. The answer is the run's ``output``, else the ``final_answer`` call's argument.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
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

FINAL_ANSWER_TOOL = "final_answer"
#: What a code agent's step becomes: a Python step (``chat_steps.PYTHON_TOOLS``).
CODE_TOOL = "python_interpreter"


def _is_step(value: Any) -> bool:
    return isinstance(value, dict) and (
        ("task" in value and "task_images" in value)
        or ("step_number" in value and ("model_output_message" in value
                                        or "observations" in value)))


def looks_like_run(value: Any) -> bool:
    if isinstance(value, dict) and isinstance(value.get("steps"), list):
        return ("state" in value or "timing" in value) and \
            any(_is_step(s) for s in value["steps"][:2])
    return _is_step(value)


def _detect(sniff: FileSniff) -> bool:
    if '"step_number"' not in sniff.text and '"task_images"' not in sniff.text:
        return False
    return looks_like_run(sniff.first_value)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _arguments(call: dict[str, Any]) -> tuple[str | None, Any]:
    function = _dict(call.get("function"))
    name = function.get("name")
    return (name if isinstance(name, str) else None), function.get("arguments")


def _final_argument(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return arguments
    if isinstance(arguments, dict) and "answer" in arguments:
        return arguments["answer"]
    return arguments


def smolagents_run(record: dict[str, Any], steps: list[Any], key: str) -> TraceRun:
    found = TraceRun(key, "smolagents")
    final: Any = None
    for step in steps:
        if not isinstance(step, dict):
            continue
        if "task" in step and "step_number" not in step:
            if found.question is None and isinstance(step["task"], str):
                found.question = step["task"]
            continue
        if "plan" in step and isinstance(step["plan"], str):
            found.items.append(Said("assistant", step["plan"]))
            continue
        if "step_number" not in step:
            continue
        raw_turn = _dict(step.get("model_output_message"))
        found.model = found.model or _str(_dict(raw_turn.get("raw")).get("model"))
        calls = step.get("tool_calls")
        if not isinstance(calls, list) or not calls:
            # A failing step keeps no calls; the model's own turn still has them.
            calls = raw_turn.get("tool_calls")
        calls = [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []
        error = _error(step.get("error"))
        observation = step.get("observations")
        usage = _dict(step.get("token_usage"))
        tokens = {k: usage[f"{k}_tokens"] for k in ("input", "output")
                  if isinstance(usage.get(f"{k}_tokens"), int)
                  and not isinstance(usage.get(f"{k}_tokens"), bool)}
        timing = _dict(step.get("timing"))
        duration = timing.get("duration")
        made: list[Call] = []
        for call in calls:
            name, arguments = _arguments(call)
            if name == FINAL_ANSWER_TOOL:
                final = _final_argument(arguments)
                continue
            made.append(Call(_str(call.get("id")), name, arguments))
        code = step.get("code_action")
        if not made and isinstance(code, str) and code.strip():
            made.append(Call(None, CODE_TOOL, {"code": code}))
        if not made:
            text = step.get("model_output")
            if isinstance(text, str) and text.strip():
                found.items.append(Said("assistant", text))
            continue
        for index, call in enumerate(made):
            if index == 0:
                call.result = text_of(observation)
                if isinstance(duration, int | float) and not isinstance(duration, bool) \
                        and 0 <= duration < 1e9:
                    call.duration_ms = float(duration) * 1000
                call.tokens = tokens or None
            if error is not None:
                call.error = True
                call.error_message = error or None
                if call.result is None:
                    call.result = call.error_message
        found.items.extend(made)
        if step.get("is_final_answer") is True and final is None:
            final = step.get("action_output")
    output = record.get("output")
    answer = output if output is not None else final
    found.answer = text_of(answer)
    usage = _dict(record.get("token_usage"))
    for key_name in ("input", "output"):
        value = usage.get(f"{key_name}_tokens")
        if isinstance(value, int) and not isinstance(value, bool):
            setattr(found, f"{key_name}_tokens", value)
    duration = _dict(record.get("timing")).get("duration")
    if isinstance(duration, int | float) and not isinstance(duration, bool) \
            and 0 <= duration < 1e9:
        found.duration_ms = float(duration) * 1000
    if isinstance(record.get("state"), str):
        found.extra["run_state"] = record["state"]
    if found.question is None:
        raise ValueError("steps: the run has no task step (the question)")
    return found


def _error(value: Any) -> str | None:
    """A step's error as its message ("" when it names none), or None for no error: an
    ``AgentError.dict()`` (``type``, ``message``), or the error as text when a run was written
    with ``default=str``."""
    if isinstance(value, dict) and value:
        message = value.get("message")
        return message if isinstance(message, str) else str(value.get("type") or "")
    if isinstance(value, str) and value.strip() and value.strip() != "None":
        return value.strip()
    return None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _read(path: Path, options: ReadOptions) -> Iterator[Parsed]:
    loose: list[Any] = []  # steps written one per value (a list or JSONL of steps)
    start = ""
    for location, value in json_values(path):
        if isinstance(value, ImportProblem):
            yield Parsed(location, None, value, "")
            continue
        if isinstance(value, dict) and isinstance(value.get("steps"), list):
            yield from _one(path, options, location, value, value["steps"])
            continue
        items = value if isinstance(value, list) else [value]
        if not all(_is_step(item) for item in items):
            yield Parsed(location, None, ImportProblem(
                str(path), "not a smolagents run result or memory step", location), "")
            continue
        for item in items:
            if "task" in item and "step_number" not in item and loose:
                yield from _one(path, options, start, {}, loose)
                loose = []
            if not loose:
                start = location
            loose.append(item)
    if loose:
        yield from _one(path, options, start, {}, loose)


def _one(path: Path, options: ReadOptions, location: str, record: dict[str, Any],
         steps: list[Any]) -> Iterator[Parsed]:
    try:
        found = smolagents_run(record, steps, f"{path.stem}-{location}")
        traj = trajectory_of(found, path=path, run=options.run, model=options.model)
    except ValueError as err:
        yield rejected(path, location, err, "")
        return
    yield Parsed(location, traj, None, "")


SMOLAGENTS = register(ImportFormat(
    "smolagents", "smolagents run results (RunResult.dict with the memory's full steps)",
    detect_file=_detect, read_file=_read, priority=60))
