"""The import's compiled-serializer path for tau-bench chat records.

``parse_openai_chat`` builds ~27 pydantic models per record and hashes the trajectory through
``model_dump`` + ``json.dumps``; at 50,000 records that per-record Python is most of an import.
This module builds the very same JSON document (what ``Trajectory.model_dump(mode="json")``
gives) as plain dicts, hashes it with orjson and serialises the payload with orjson, which
writes exactly what pydantic's serializer writes (same float and string formatting).

The pydantic models stay the one definition of the format: the field names, order and defaults
come from them, ``MIRRORED`` records what this module checks for each field, and a test fails
when the two disagree. Whenever a record is not plainly well formed, or a value could hash
differently (``model.canonical_bytes`` says when), ``prepare_chat`` returns None and the record
goes through ``parse_openai_chat`` unchanged: the same trajectory, or the same error.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import orjson
from pydantic import BaseModel

from trajectories.importers.chat_steps import answer_of, steps_as_dicts
from trajectories.importers.openai_chat import RunIdentity, infer_intent_scope
from trajectories.model import (
    ROLLOUT_RANGE,
    Outcome,
    Run,
    Step,
    Task,
    Trajectory,
    canonical_id,
    rollout_index,
)
from trajectories.scoring import ANSWER_SQL, ANSWER_SQL_PARTIAL

#: Per model, each field as this module fills it: its type and constraints, as
#: ``field_signatures`` reads them from the model (the checks in ``_prepare`` follow them: a
#: ``str`` field gets a ``str``, ``min_length=1`` a non-empty one). A test compares this with
#: the models: a new, renamed or retyped field fails it until this mirror and the code follow.
MIRRORED: dict[str, dict[str, str]] = {
    "Task": {"id": "str MinLen(min_length=1)", "question": "str", "intent": "str",
             "scope": "str | None", "template_id": "str | None",
             "reference_sql": "str | None", "ground_truth": "Any",
             "has_ground_truth": "bool", "answer_format": "str | None",
             "split": "str | None", "pair_id": "str | None", "noise_type": "str | None",
             "variant": "str | None", "(config)": "extra=allow"},
    "Run": {"name": "str MinLen(min_length=1)", "model": "str MinLen(min_length=1)",
            "configuration": "dict[str, typing.Any]",
            "temperature": "float | None AllowInfNan(allow_inf_nan=False)",
            "rollout": "int Ge(ge=-2147483648) Le(le=2147483647)", "(config)": "extra=allow"},
    "Step": {"kind": "StepKind", "role": "str", "name": "str | None", "code": "str | None",
             "arguments": "str | None", "content": "str | None",
             "observation": "str | None", "error": "bool",
             "duration_ms": "float | None AllowInfNan(allow_inf_nan=False)",
             "tokens": "dict[str, int] | None", "(config)": "extra=allow"},
    "Outcome": {"success": "bool | None",
                "reward": "float | None AllowInfNan(allow_inf_nan=False)",
                "source": "str | None", "(config)": "extra=allow"},
    "Trajectory": {"format_version": "str", "id": "str | None", "task": "Task", "run": "Run",
                   "steps": "list[trajectories.model.Step]", "final_answer": "Any",
                   "outcome": "trajectories.model.Outcome | None", "(config)": "extra=allow"},
}
_MODELS: dict[str, type[BaseModel]] = {"Task": Task, "Run": Run, "Step": Step,
                                       "Outcome": Outcome, "Trajectory": Trajectory}


def field_signatures() -> dict[str, dict[str, str]]:
    """What ``MIRRORED`` should say, read from the pydantic models."""
    out: dict[str, dict[str, str]] = {}
    for name, model in _MODELS.items():
        fields: dict[str, str] = {}
        for field_name, info in model.model_fields.items():
            kind = info.annotation
            text = kind.__name__ if isinstance(kind, type) else str(kind)
            fields[field_name] = " ".join([text, *map(repr, info.metadata)])
        # The mirror keeps unknown fields as they come and knows no aliases.
        fields["(config)"] = f"extra={model.model_config.get('extra')}"
        out[name] = fields
    return out


def _defaults(model: type[BaseModel]) -> dict[str, Any]:
    """A model's fields in declaration order with their defaults as JSON values (the order
    pydantic writes them in; required fields hold None until they are set)."""
    out: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        out[name] = None if info.is_required() else info.get_default(call_default_factory=True)
    return out


_TASK = _defaults(Task)
_RUN = _defaults(Run)
_OUTCOME = _defaults(Outcome)
_TRAJ = _defaults(Trajectory)


def _opt_str(value: Any) -> bool:
    return value is None or type(value) is str


#: Six regular expressions per record over the same few reference queries: remembered.
_intent_scope = functools.lru_cache(maxsize=4096)(infer_intent_scope)


@dataclass(frozen=True)
class Prepared:
    """One record ready to store: its content id, its JSON document (with ``id``) and the
    payload bytes (the document as pydantic's serializer writes it)."""

    id: str
    doc: dict[str, Any]
    payload: bytes

    def trajectory(self) -> Trajectory:
        """The pydantic model, for callers that want one (validates the document)."""
        return Trajectory.model_validate(self.doc)


_ROWS_ANSWERS = (ANSWER_SQL, ANSWER_SQL_PARTIAL)
_PLAIN_CELL = (str, int, bool, type(None))


def _plain_rows(rows: list[list[Any]]) -> bool:
    """True when the rows read from a SQL reply hold only JSON scalars (no complex,
    bytes, sets, tuples in cells, non-finite floats): anything else takes the slow path."""
    for row in rows:
        for cell in row:
            if type(cell) is float:
                if not math.isfinite(cell):
                    return False
            elif type(cell) not in _PLAIN_CELL:
                return False
    return True


def _answer(steps: list[dict[str, Any]]) -> tuple[Any, int | None, str, int | None] | None:
    """``answer_of``; None when the answer rows are not plain JSON."""
    answer = answer_of(steps)
    if answer[2] in _ROWS_ANSWERS and not _plain_rows(answer[0]):
        return None
    return answer


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def prepare_chat(record: Any, identity: RunIdentity) -> Prepared | None:
    """``parse_openai_chat(record, identity)`` as a stored document, or None when the record
    must go through the pydantic path (anything unusual: the slow path decides, and words any
    error). Only for records parsed by orjson: values the standard parser alone produces (NaN,
    Infinity, integers beyond 64 bits) never reach this function."""
    try:
        return _prepare(record, identity)
    except Exception:  # whatever it is, the slow path raises it or words it
        return None


def _prepare(record: Any, identity: RunIdentity) -> Prepared | None:
    if not isinstance(record, dict):
        return None
    messages = record.get("messages")
    if not isinstance(messages, list):
        return None
    info = _dict(record.get("info"))
    task_info = _dict(info.get("task"))
    reward_info = _dict(info.get("reward_info"))
    reward_detail = _dict(reward_info.get("info"))
    src_task = _dict(record.get("task"))

    steps = steps_as_dicts(messages)
    for step in steps:
        # A step holds strings, booleans and None (the hash's value check skips the steps),
        # except the producer's call id, which may be any JSON value: the slow path takes those.
        call_id = step.get("tool_call_id")
        if call_id is not None and type(call_id) is not str:
            return None
    first_user = next((s["content"] for s in steps if s["role"] == "user" and s["content"]),
                      None)
    question = task_info.get("instruction") or src_task.get("question") or record.get("question")
    task_id = task_info.get("task_id", record.get("task_idx", src_task.get("id")))
    if task_id is None:
        return None
    reference_sql = task_info.get("gold_sql") or src_task.get("reference_sql")
    if not _opt_str(reference_sql):
        return None
    intent, scope = _intent_scope(reference_sql)
    if not reference_sql and task_info.get("gold_answer") is None \
            and record.get("reward") is not None and reward_info.get("reward") is None:
        return None  # a held-out record: parse_openai_chat decides what its reward means
    reward = record.get("reward", reward_info.get("reward"))
    outcome: dict[str, Any] | None = None
    if isinstance(reward, int | float) and not isinstance(reward, bool):
        value = float(reward)
        if not math.isfinite(value):
            return None
        outcome = {**_OUTCOME, "success": reward >= 1.0 - 1e-9, "reward": value,
                   "source": "reward"}
    answer_step: int | None = None
    rows_total: int | None = None
    if "final_answer" in record:
        final_answer, answer_source = record["final_answer"], "record"
    else:
        answer = _answer(steps)
        if answer is None:
            return None
        final_answer, answer_step, answer_source, rows_total = answer
    if "pred_answer" in reward_detail or "pred_sql" in reward_detail:
        outcome = outcome or {**_OUTCOME, "source": "harness"}
        outcome["recorded_answer"] = reward_detail.get("pred_answer")
        outcome["recorded_sql"] = reward_detail.get("pred_sql")
    rollout = record.get("trial", record.get("rollout", 0))
    kept = {k: v for k, v in record.items() if k != "messages"}

    task_intent = src_task.get("intent") or intent
    task_scope = src_task.get("scope") or scope
    task_id_text = str(task_id)
    if type(task_intent) is not str or not _opt_str(task_scope) or not task_id_text:
        return None
    task = dict(_TASK)
    task.update({
        "id": task_id_text,
        "question": str(question or first_user or ""),
        "intent": task_intent,
        "scope": task_scope,
        "reference_sql": reference_sql,
        "ground_truth": task_info.get("gold_answer", src_task.get("ground_truth")),
        "has_ground_truth": not (
            task_info.get("gold_answer") is None and not reference_sql
            and src_task.get("ground_truth") is None
        ),
        "split": identity.split,
        "intent_inferred": not src_task.get("intent"),
    })
    model = identity.model if identity.model_overridden \
        else str(record.get("model") or identity.model)
    temperature = identity.temperature
    if not identity.run or not model or (temperature is not None
                                         and not math.isfinite(temperature)):
        return None
    rollout = rollout_index(rollout)
    if type(rollout) is not int or not ROLLOUT_RANGE[0] <= rollout <= ROLLOUT_RANGE[1]:
        return None  # the model refuses it (its column is 32 bits): its error names the field
    run = dict(_RUN)
    run.update({
        "name": identity.run,
        "model": model,
        "temperature": temperature,
        "rollout": rollout,
        "display_name": identity.display_name or identity.run,
    })
    doc = dict(_TRAJ)
    del doc["id"]  # the hash covers everything but the id
    doc.update({
        "task": task, "run": run, "steps": steps, "final_answer": final_answer,
        "outcome": outcome, "source_record": kept, "source_format": "openai-chat",
        "final_answer_step": answer_step, "final_answer_source": answer_source,
    })
    if rows_total is not None:
        doc["final_answer_rows_total"] = rows_total
    tid = canonical_id(doc, plain="steps")
    if tid is None:
        return None
    stored = {"format_version": doc.pop("format_version"), "id": tid, **doc}
    try:
        payload = orjson.dumps(stored)
    except TypeError:
        return None
    return Prepared(tid, stored, payload)

