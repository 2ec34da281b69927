"""LM Studio conversation exports (one conversation per ``.json`` file).

Structure, as LM Studio writes it: ``{name, createdAt, messages: [...]}``; each message holds
``versions`` (regenerations) and ``currentlySelected``; a version has a ``role`` and either
``content`` (a list of ``{type: "text", text}`` parts) or, for the assistant, ``steps``:
``contentBlock`` steps whose parts are text, ``toolCallRequest`` or ``toolCallResult``; a block
styled ``{"type": "thinking"}`` is reasoning. ``debugInfoBlock`` steps carry no content. The model
is in ``senderInfo.senderName``. Reasoning inlined as ``<think>...</think>`` is split out too.

LM Studio records no task id or ground truth: they come from a companion task file
(``--tasks FILE``, CSV or JSON with ``id, question, gold_sql, gold_answer``), matched on the
first user message (or the conversation name equal to a task id).
"""

from __future__ import annotations

import contextlib
import csv
import json
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from trajectories.importers.errors import ImportProblem, describe_validation_error
from trajectories.importers.openai_chat import (
    _tool_step,
    infer_intent_scope,
    looks_like_error,
    pick_answer,
)
from trajectories.model import Run, Step, StepKind, Task, Trajectory

_THINK = re.compile(r"<think>(.*?)</think>", re.S)
TASK_COLUMNS = ("id", "question", "gold_sql", "gold_answer")


def looks_like_lmstudio(record: Any) -> bool:
    if not isinstance(record, dict) or not isinstance(record.get("messages"), list):
        return False
    return any(isinstance(m, dict) and isinstance(m.get("versions"), list)
               for m in record["messages"][:3])


def _norm(text: str | None) -> str:
    return " ".join((text or "").split()).lower()


def load_tasks(path: Path) -> dict[str, dict[str, Any]]:
    """Task file rows keyed by id and by normalised question; one-line problems."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as err:
        raise ImportProblem(str(path), f"cannot read task file: {err}") from None
    rows: list[Any]
    if path.suffix.lower() == ".csv":
        rows = list(csv.DictReader(text.splitlines()))
    else:
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as err:
            raise ImportProblem(str(path), f"task file is not valid JSON ({err.msg})") from None
        rows = doc if isinstance(doc, list) else []
    if not rows:
        raise ImportProblem(str(path), "task file must be a CSV with a header or a JSON list "
                            f"of objects with {', '.join(TASK_COLUMNS)}")
    tasks: dict[str, dict[str, Any]] = {}
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or not row.get("id") or not row.get("question"):
            raise ImportProblem(str(path), "every task needs an id and a question", f"row {i + 1}")
        answer = row.get("gold_answer")
        if isinstance(answer, str) and answer.strip()[:1] in ("[", "{"):
            with contextlib.suppress(ValueError):
                answer = json.loads(answer)
        entry = {**row, "id": str(row["id"]), "gold_answer": answer,
                 "has_gold": row.get("gold_answer") not in ("", None) or bool(row.get("gold_sql"))}
        tasks[f"id:{entry['id']}"] = entry
        tasks[f"q:{_norm(str(row['question']))}"] = entry
    return tasks


def _parts_text(parts: Any) -> str:
    if isinstance(parts, str):
        return parts
    if not isinstance(parts, list):
        return ""
    return "".join(p.get("text", "") for p in parts if isinstance(p, dict)
                   and p.get("type") == "text")


def _text_steps(text: str, thinking: bool) -> list[Step]:
    """Text to steps: a thinking block is one THINKING step; inline <think> spans are split out."""
    if thinking:
        return [Step(kind=StepKind.THINKING, role="assistant", content=text)] \
            if text.strip() else []
    steps: list[Step] = []
    pieces = _THINK.split(text)  # even indexes: said; odd indexes: reasoning
    for index, piece in enumerate(pieces):
        if not piece.strip():
            continue
        kind = StepKind.THINKING if index % 2 else StepKind.MESSAGE
        steps.append(Step(kind=kind, role="assistant", content=piece.strip()))
    return steps


def _version_steps(version: dict[str, Any]) -> list[Step]:
    role = str(version.get("role") or "assistant")
    if role != "assistant" or not isinstance(version.get("steps"), list):
        text = _parts_text(version.get("content"))
        if role == "assistant":
            return _text_steps(text, False)
        return [Step(kind=StepKind.MESSAGE, role=role, content=text)] if text else []
    steps: list[Step] = []
    calls: dict[str, Step] = {}
    for block in version["steps"]:
        if not isinstance(block, dict) or block.get("type") != "contentBlock":
            continue  # debugInfoBlock and unknown blocks carry no conversation content
        thinking = (block.get("style") or {}).get("type") == "thinking"
        for part in block.get("content") or []:
            if not isinstance(part, dict):
                continue
            kind = part.get("type")
            if kind == "text":
                steps.extend(_text_steps(str(part.get("text") or ""), thinking))
            elif kind == "toolCallRequest":
                req = part.get("toolCallRequest") or {}
                step = _tool_step(req.get("name"), req.get("arguments"), req.get("id"))
                steps.append(step)
                if req.get("id"):
                    calls[str(req["id"])] = step
            elif kind == "toolCallResult":
                target = calls.get(str(part.get("toolCallId")))
                content = part.get("content")
                text = content if isinstance(content, str) else json.dumps(content)
                if target is None:
                    steps.append(Step(kind=StepKind.MESSAGE, role="tool", content=text))
                else:
                    target.observation = text
                    target.error = looks_like_error(text)
    return steps


def parse_lmstudio(record: Any, *, stem: str, run: str | None, model: str | None,
                   tasks: dict[str, dict[str, Any]] | None) -> Trajectory:
    """One LM Studio conversation to a trajectory; raises ``ValueError`` ``field: message``."""
    if not looks_like_lmstudio(record):
        raise ValueError("messages: expected an LM Studio conversation (messages with versions)")
    steps: list[Step] = []
    sender: str | None = None
    for i, msg in enumerate(record["messages"]):
        if not isinstance(msg, dict):
            raise ValueError(f"messages.{i}: expected an object")
        versions = msg.get("versions")
        if isinstance(versions, list) and versions:
            index = msg.get("currentlySelected", 0)
            version = versions[index] if isinstance(index, int) and 0 <= index < len(versions) \
                else versions[0]
        else:
            version = msg
        if not isinstance(version, dict):
            raise ValueError(f"messages.{i}.versions: expected objects")
        sender = sender or (version.get("senderInfo") or {}).get("senderName")
        steps.extend(_version_steps(version))
    first_user = next((s.content for s in steps if s.role == "user" and s.content), "")
    name = str(record.get("name") or "")
    entry = None
    if tasks:
        entry = tasks.get(f"id:{name}") or tasks.get(f"q:{_norm(first_user)}")
    final_answer, answer_step, answer_source, rows_total = pick_answer(steps)
    gold_sql = (entry or {}).get("gold_sql") or None
    intent, scope = infer_intent_scope(gold_sql)
    try:
        task = Task.model_validate({
            "id": entry["id"] if entry else (name or stem),
            "question": entry["question"] if entry else first_user,
            "intent": intent, "scope": scope, "intent_inferred": True,
            "reference_sql": gold_sql,
            "ground_truth": entry.get("gold_answer") if entry else None,
            "has_ground_truth": bool(entry and entry["has_gold"]),
        })
        traj = Trajectory.model_validate({
            "task": task,
            "run": Run.model_validate({"name": run or stem,
                                       "model": model or sender or "unknown"}),
            "steps": steps, "final_answer": final_answer,
            "final_answer_step": answer_step, "final_answer_source": answer_source,
            **({} if rows_total is None else {"final_answer_rows_total": rows_total}),
            "source_format": "lmstudio",
            "source_record": {k: v for k, v in record.items() if k != "messages"},
        })
    except ValidationError as err:
        field, msg = describe_validation_error(err)
        raise ValueError(f"{field}: {msg}") from None
    return traj.with_id()
