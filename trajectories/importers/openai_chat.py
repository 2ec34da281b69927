"""OpenAI-style chat logs with ``tool_calls``, as written by tau-bench-style harnesses.

A record is ``{"messages": [...], ...}``. The tau-bench result layout
(``{task_idx, trial, reward, info: {task: {instruction, gold_sql, gold_answer}, reward_info},
messages, cost}``) is understood field by field; anything else in the record is kept under
``source_record`` so nothing the producer wrote is lost.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from trajectories.importers.errors import describe_validation_error
from trajectories.model import Outcome, Run, Step, StepKind, Task, Trajectory
from trajectories.scoring import ANSWER_SQL, ANSWER_SQL_PARTIAL, ANSWER_SQL_UNREADABLE

SQL_TOOLS = {"sql_db_query", "execute_sql", "run_sql", "sql", "query_database", "sql_query"}
PYTHON_TOOLS = {"python", "execute_python", "run_python", "python_repl", "code_interpreter"}
_ERROR_START = re.compile(r"^\s*(error\b|traceback|exception\b|\w+(error|exception):)", re.I)
_SQLISH = re.compile(r"^\s*(select|with)\b", re.I)

# mimic_iv-tool-calling-v2-gpt-4o-mini-0.0_range_0--1_user-gpt-4o-mini-llm_0515215141_valid
_TAU_NAME = re.compile(
    r"tool-calling-(?:v\d+-)?(?P<model>.+?)-(?P<temp>\d+(?:\.\d+)?)_range_.*?(?:_(?P<split>[a-z]+))?$"
)


@dataclass(frozen=True)
class RunIdentity:
    run: str
    model: str
    temperature: float | None
    split: str | None
    model_overridden: bool = False
    display_name: str | None = None


_STAMP = re.compile(r"_(?P<mo>\d\d)(?P<d>\d\d)(?P<h>\d\d)(?P<mi>\d\d)(?P<s>\d\d)(?:_|$)")


def short_run_name(stem: str) -> str | None:
    """A short display name (model, temperature, date, split) for a long harness file stem,
    or None when the stem is not a recognised harness name."""
    match = _TAU_NAME.search(stem)
    if not match:
        return None
    parts = [match.group("model"), f"t{match.group('temp')}"]
    stamp = _STAMP.search(stem)
    if stamp:
        parts.append(f"{stamp['mo']}-{stamp['d']} {stamp['h']}:{stamp['mi']}")
    if match.group("split"):
        parts.append(match.group("split"))
    return " ".join(parts)


def identity_from_filename(path: Path, run: str | None, model: str | None) -> RunIdentity:
    """Run and model from the file name unless the user overrides them."""
    stem = path.stem
    match = _TAU_NAME.search(stem)
    parsed_model = match.group("model") if match else None
    temp = float(match.group("temp")) if match else None
    split = match.group("split") if match else None
    return RunIdentity(
        run=run or stem,
        model=model or parsed_model or stem,
        temperature=temp,
        split=split,
        model_overridden=model is not None,
        display_name=run or short_run_name(stem),
    )


def looks_like_error(text: str | None) -> bool:
    if not text:
        return False
    head = text[:300]
    return bool(_ERROR_START.search(head)) or "OperationalError" in head


def infer_intent_scope(sql: str | None) -> tuple[str, str | None]:
    """Best-effort intent and scope from the reference SQL, for producers that don't carry them."""
    if not sql:
        return "Other", None
    low = sql.lower()
    if re.search(r"\bcost\b|drgcodes|insurance", low):
        intent = "Cost"
    elif re.search(r"prescriptions|pharmacy|emar|inputevents", low):
        intent = "Medications"
    elif re.search(r"labevents|microbiologyevents|d_labitems", low):
        intent = "Labs"
    elif re.search(r"chartevents|vitalsign|outputevents|d_items", low):
        intent = "Vitals"
    elif re.search(r"diagnoses_icd|procedures_icd|d_icd_", low):
        intent = "Diagnoses"
    elif re.search(r"patients|admissions|transfers|icustays", low):
        intent = "Demographics"
    else:
        intent = "Other"
    scope = "patient" if re.search(r"subject_id\s*=\s*\d+", low) else "population"
    return intent, scope


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(content: Any) -> str | None:
    if content is None:
        return None
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        parts = [p.get("text", "") if isinstance(p, dict) else str(p) for p in content]
        return "".join(parts)
    return json.dumps(content, ensure_ascii=False)


def _tool_step(name: str | None, raw_args: Any, call_id: str | None) -> Step:
    if name is not None and not isinstance(name, str):
        # Said here: ``name.lower()`` below would crash the whole import instead.
        raise ValueError(f"messages: a tool call's function name must be a string, "
                         f"not {type(name).__name__}")
    raw = raw_args if isinstance(raw_args, str) else json.dumps(raw_args, ensure_ascii=False)
    parsed: Any = None
    try:
        parsed = json.loads(raw) if raw else None
    except ValueError:
        parsed = None  # real agents emit invalid JSON; keep the raw text and move on
    args = parsed if isinstance(parsed, dict) else {}
    tool = (name or "").lower()
    sql = args.get("query") or args.get("sql")
    code = args.get("code")
    extra: dict[str, Any] = {"tool_call_id": call_id, "arguments_valid_json": parsed is not None}
    if isinstance(sql, str) and (tool in SQL_TOOLS or _SQLISH.match(sql)):
        return Step(kind=StepKind.SQL, name=name, code=sql, arguments=raw, **extra)
    if isinstance(code, str) and tool in PYTHON_TOOLS:
        return Step(kind=StepKind.PYTHON, name=name, code=code, arguments=raw, **extra)
    return Step(kind=StepKind.TOOL_CALL, name=name, arguments=raw, **extra)


def steps_from_messages(messages: list[Any]) -> list[Step]:
    steps: list[Step] = []
    open_calls: dict[str, Step] = {}
    for msg in messages:
        if not isinstance(msg, dict):
            continue
        role = str(msg.get("role") or "assistant")
        content = _text(msg.get("content"))
        if role in {"tool", "function"}:
            call_id = msg.get("tool_call_id")
            step = open_calls.pop(call_id, None) if call_id else None
            if step is None:  # no id: answer the oldest call still waiting
                waiting = [s for s in steps if s.kind != StepKind.MESSAGE and s.observation is None]
                step = waiting[0] if waiting else None
            if step is None:
                steps.append(Step(kind=StepKind.MESSAGE, role="tool", name=msg.get("name"),
                                  content=content))
            else:
                step.observation = content
                step.error = looks_like_error(content)
            continue
        if role == "assistant":
            if content and content.strip():
                steps.append(Step(kind=StepKind.MESSAGE, role="assistant", content=content))
            calls = msg.get("tool_calls") or []
            if msg.get("function_call"):
                calls = [*calls, {"function": msg["function_call"], "id": None}]
            for call in calls:
                if not isinstance(call, dict):
                    continue
                fn = call.get("function") or {}
                step = _tool_step(fn.get("name"), fn.get("arguments"), call.get("id"))
                steps.append(step)
                if call.get("id"):
                    open_calls[call["id"]] = step
            continue
        steps.append(Step(kind=StepKind.MESSAGE, role=role, content=content))
    return steps


# Turns that only point back at an earlier answer carry no answer of their own.
_NON_ANSWER = re.compile(
    r"^\W*(i\s+(have|'ve)\s+already\s+(provided|given|answered)|as\s+(i\s+)?(mentioned|stated)"
    r"\s+(before|earlier|above)|you'?re\s+welcome|glad\s+(i\s+)?(could|to)\s+help|"
    r"is\s+there\s+anything\s+else)", re.I)


def is_substantive(text: str | None) -> bool:
    """True for an assistant message that states an answer, not a pleasantry or a pointer back."""
    return bool(text and text.strip()) and not _NON_ANSWER.search(text or "")


#: The harness prints at most 100 rows of a result and then says how many it left out.
_CUT_NOTE = re.compile(
    r"Note: There are \d+ results not shown \(out of (\d+) total results\)\.?\s*")
_CUT_MARK = "Note: There are "


def sql_result(observation: str | None) -> tuple[list[list[Any]] | None, int | None]:
    """The rows a SQL tool printed (a Python-literal list of tuples) and, when the harness
    cut the listing ("Note: There are 73 results not shown (out of 173 total results)."),
    the result's full row count. Rows are None when the text is not a readable result."""
    if not observation or looks_like_error(observation):
        return None, None
    text, total = observation, None
    mark = text.rfind(_CUT_MARK)
    if mark != -1:
        note = _CUT_NOTE.fullmatch(text, mark)
        if note is not None:
            text, total = text[:mark], int(note.group(1))
    try:
        value = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None, None
    if not isinstance(value, list):
        return None, None
    return [list(row) if isinstance(row, tuple | list) else [row] for row in value], total


def pick_answer(steps: list[Step]) -> tuple[Any, int | None, str, int | None]:
    """The agent's own final answer: the result of its last SQL query that ran without error
    (what a SQL-submitting harness scores), else its last substantive assistant message.
    Returns (answer, index of the step it came from, source, full row count of a cut result).

    The last successful query is the answer even when its result cannot be used: a cut
    listing gives its visible rows (``ANSWER_SQL_PARTIAL``, with the full count), an
    unreadable one no answer (``ANSWER_SQL_UNREADABLE``); an earlier query's rows would be an
    answer the agent did not end with."""
    for index in range(len(steps) - 1, -1, -1):
        step = steps[index]
        if step.kind == StepKind.SQL and not step.error:
            rows, total = sql_result(step.observation)
            if rows is None:
                return None, index, ANSWER_SQL_UNREADABLE, None
            if total is not None:
                return rows, index, ANSWER_SQL_PARTIAL, total
            return rows, index, ANSWER_SQL, None
    for index in range(len(steps) - 1, -1, -1):
        step = steps[index]
        if step.kind == StepKind.MESSAGE and step.role == "assistant" \
                and is_substantive(step.content):
            return step.content, index, "last_answer_message", None
    return None, None, "none", None


def parse_openai_chat(record: Any, identity: RunIdentity) -> Trajectory:
    """One chat record to a native trajectory; raises ``ValueError`` with ``field: message``."""
    if not isinstance(record, dict):
        raise ValueError(f"(record): expected a JSON object, got {type(record).__name__}")
    messages = record.get("messages")
    if not isinstance(messages, list):
        raise ValueError("messages: a list of chat messages is required")
    info = _dict(record.get("info"))
    task_info = _dict(info.get("task"))
    reward_info = _dict(info.get("reward_info"))
    reward_detail = _dict(reward_info.get("info"))
    src_task = _dict(record.get("task"))

    steps = steps_from_messages(messages)
    first_user = next((s.content for s in steps if s.role == "user" and s.content), None)
    question = task_info.get("instruction") or src_task.get("question") or record.get("question")
    task_id = task_info.get("task_id", record.get("task_idx", src_task.get("id")))
    if task_id is None:
        raise ValueError("task_idx: the record names no task (task_idx or info.task.task_id)")
    reference_sql = task_info.get("gold_sql") or src_task.get("reference_sql")
    intent, scope = infer_intent_scope(reference_sql)
    reward = record.get("reward", reward_info.get("reward"))
    outcome = None
    if isinstance(reward, int | float) and not isinstance(reward, bool):
        outcome = Outcome(success=reward >= 1.0 - 1e-9, reward=float(reward), source="reward")
    answer_step: int | None = None
    rows_total: int | None = None
    if "final_answer" in record:
        final_answer, answer_source = record["final_answer"], "record"
    else:
        final_answer, answer_step, answer_source, rows_total = pick_answer(steps)
    if "pred_answer" in reward_detail or "pred_sql" in reward_detail:
        # The harness's own copy is evidence, not the agent's answer.
        outcome = outcome or Outcome(source="harness")
        outcome.recorded_answer = reward_detail.get("pred_answer")  # type: ignore[attr-defined]
        outcome.recorded_sql = reward_detail.get("pred_sql")  # type: ignore[attr-defined]
    rollout = record.get("trial", record.get("rollout", 0))
    kept = {k: v for k, v in record.items() if k != "messages"}
    try:
        task = Task.model_validate({
            "id": str(task_id),
            "question": str(question or first_user or ""),
            "intent": src_task.get("intent") or intent,
            "scope": src_task.get("scope") or scope,
            "reference_sql": reference_sql,
            "ground_truth": task_info.get("gold_answer", src_task.get("ground_truth")),
            # A test split records neither a gold answer nor gold SQL: exact match is unknown.
            "has_ground_truth": not (
                task_info.get("gold_answer") is None and not reference_sql
                and src_task.get("ground_truth") is None
            ),
            "split": identity.split,
            # Intent and scope were guessed from the reference SQL: say so.
            "intent_inferred": not src_task.get("intent"),
        })
        run = Run.model_validate({
            "name": identity.run,
            "model": identity.model
            if identity.model_overridden
            else str(record.get("model") or identity.model),
            "temperature": identity.temperature,
            "rollout": int(rollout) if isinstance(rollout, int | float) else 0,
            # Short name for tables and charts; ``name`` keeps the full harness stem.
            "display_name": identity.display_name or identity.run,
        })
        traj = Trajectory.model_validate({
            "task": task, "run": run, "steps": steps, "final_answer": final_answer,
            "outcome": outcome, "source_record": kept, "source_format": "openai-chat",
            "final_answer_step": answer_step, "final_answer_source": answer_source,
            # Only on a cut result: every other record keeps the fields (and id) it had.
            **({} if rows_total is None else {"final_answer_rows_total": rows_total}),
        })
    except ValidationError as err:
        field, msg = describe_validation_error(err)
        raise ValueError(f"{field}: {msg}") from None
    return traj.with_id()
