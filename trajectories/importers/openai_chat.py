"""OpenAI-style chat logs with ``tool_calls``, as written by tau-bench-style harnesses.

A record is ``{"messages": [...], ...}``. The tau-bench result layout
(``{task_idx, trial, reward, info: {task: {instruction, gold_sql, gold_answer}, reward_info},
messages, cost}``) is understood field by field; anything else in the record is kept under
``source_record`` so nothing the producer wrote is lost.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from trajectories.importers.chat_steps import (
    answer_of,
    is_substantive,
    steps_as_dicts,
    tool_step_dict,
)
from trajectories.importers.errors import describe_validation_error
from trajectories.model import (
    Outcome,
    Run,
    Step,
    Task,
    Trajectory,
    finite_number,
    rollout_index,
)
from trajectories.reading import is_error_output

#: Re-exported for the other importers.
__all__ = [
    "RunIdentity",
    "identity_from_filename",
    "infer_intent_scope",
    "is_error_output",
    "is_substantive",
    "parse_openai_chat",
    "pick_answer",
    "short_run_name",
    "steps_from_messages",
]

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


def infer_intent_scope(sql: str | None) -> tuple[str, str | None]:
    """Best-effort intent and scope from the reference SQL, for producers that don't carry them."""
    if not sql or not isinstance(sql, str):  # not SQL: the task model says what is wrong
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


def _tool_step(name: Any, raw_args: Any, call_id: Any) -> Step:
    """One tool call as a ``Step`` (for the importers that build steps one by one)."""
    return Step.model_validate(tool_step_dict(name, raw_args, call_id))


def steps_from_messages(messages: list[Any]) -> list[Step]:
    """The steps of a chat as ``Step`` models (``steps_as_dicts``, validated)."""
    return [Step.model_validate(step) for step in steps_as_dicts(messages)]


def pick_answer(steps: list[Step]) -> tuple[Any, int | None, str, int | None]:
    """``answer_of`` for ``Step`` models (a model's fields are its ``vars``)."""
    return answer_of([vars(step) for step in steps])


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

    steps = steps_as_dicts(messages)
    first_user = next((s["content"] for s in steps if s["role"] == "user" and s["content"]),
                      None)
    question = task_info.get("instruction") or src_task.get("question") or record.get("question")
    task_id = task_info.get("task_id", record.get("task_idx", src_task.get("id")))
    if task_id is None:
        raise ValueError("task_idx: the record names no task (task_idx or info.task.task_id)")
    reference_sql = task_info.get("gold_sql") or src_task.get("reference_sql")
    intent, scope = infer_intent_scope(reference_sql)
    reward = record.get("reward", reward_info.get("reward"))
    # A test split records neither a gold answer nor gold SQL: exact match is unknown.
    has_ground_truth = not (task_info.get("gold_answer") is None and not reference_sql
                            and src_task.get("ground_truth") is None)
    outcome = None
    if isinstance(reward, int | float) and not isinstance(reward, bool):
        value = finite_number(reward)
        if value is None:  # NaN, an infinity or an integer beyond every float
            raise ValueError("reward: Input should be a finite number")
        if not has_ground_truth and reward_info.get("reward") is None:
            # A held-out record: the harness wrote a reward of 0 beside no gold and no
            # reward of its own. That is not a verdict; keep the number, decide nothing.
            outcome = Outcome(source="reward")
            outcome.reported_reward = value  # type: ignore[attr-defined]
        else:
            outcome = Outcome(success=value >= 1.0 - 1e-9, reward=value, source="reward")
    answer_step: int | None = None
    rows_total: int | None = None
    if "final_answer" in record:
        final_answer, answer_source = record["final_answer"], "record"
    else:
        final_answer, answer_step, answer_source, rows_total = answer_of(steps)
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
            "has_ground_truth": has_ground_truth,
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
            "rollout": rollout_index(rollout),
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
