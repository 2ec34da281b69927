"""Generic mapping: records that hold a question, steps and an answer under other names.

A TOML file names, for each native field, the dotted path where a record keeps it::

    [record]
    task_id = "id"                 # optional (else a content key of the question)
    question = "prompt.text"
    steps = "trace"                # optional: final-answer-only results have none
    final_answer = "output"
    final_message = "output"       # optional: the agent's last message, kept as its last step
    ground_truth = "expected"      # optional
    reference_sql = "gold_sql"     # optional
    run = "meta.run"               # optional (else the file name)
    model = "meta.model"           # optional
    verdict = "judged.correct"     # optional: 1/0, true/false, correct/incorrect...
    verdict_source = "judged.by"   # optional (else "human")

For a CSV or TSV results file the paths are column names (``question = "Query"``).

    [step]                         # paths inside each element of ``steps``
    kind = "type"                  # values: sql, python, tool_call, message
    code = "sql"
    observation = "result"
    content = "text"
    role = "role"

    [step.kinds]                   # optional: producer kind -> native kind
    query = "sql"
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trajectories.importers.errors import ImportProblem
from trajectories.importers.native import parse_native
from trajectories.importers.tasks import gold_value, question_key, truth_value
from trajectories.model import StepKind

RECORD_KEYS = ("task_id", "question", "steps", "final_answer", "final_message", "ground_truth",
               "reference_sql", "run", "model", "intent", "scope", "verdict", "verdict_source",
               "rollout")
STEP_KEYS = ("kind", "code", "observation", "content", "role", "name", "error")
_REQUIRED = ("question",)
#: The source of a mapped verdict when the mapping names none.
DEFAULT_VERDICT_SOURCE = "human"
_MISSING = object()


@dataclass(frozen=True)
class Mapping:
    record: dict[str, str]
    step: dict[str, str]
    kinds: dict[str, str] = field(default_factory=dict)


def load_mapping(path: Path) -> Mapping:
    """Read and check a mapping file; any mistake is one ``ImportProblem`` line."""
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise ImportProblem(str(path), f"cannot read mapping: {err.strerror or err}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise ImportProblem(str(path), f"not a valid TOML mapping ({err})") from None
    record = doc.get("record")
    step = doc.get("step", {})
    if not isinstance(record, dict) or not isinstance(step, dict):
        raise ImportProblem(str(path), "a mapping needs a [record] table (and may have [step])")
    kinds = step.pop("kinds", {})
    unknown = sorted(set(record) - set(RECORD_KEYS)) + sorted(set(step) - set(STEP_KEYS))
    if unknown:
        raise ImportProblem(str(path), f"unknown mapping key '{unknown[0]}' (known: "
                            f"{', '.join(RECORD_KEYS)}; step: {', '.join(STEP_KEYS)})")
    missing = [k for k in _REQUIRED if k not in record]
    if missing:
        raise ImportProblem(str(path), f"[record] must name '{missing[0]}'")
    allowed = {k.value for k in StepKind}
    bad = [v for v in (kinds or {}).values() if v not in allowed]
    if not isinstance(kinds, dict) or bad:
        raise ImportProblem(str(path), f"[step.kinds] values must be one of {sorted(allowed)}")
    values = [*record.values(), *step.values()]
    if not all(isinstance(v, str) and v for v in values):
        raise ImportProblem(str(path), "every mapping value must be a dotted path string")
    return Mapping(record=dict(record), step=dict(step), kinds=dict(kinds))


def _get(obj: Any, path: str) -> Any:
    for part in path.split("."):
        if isinstance(obj, dict) and part in obj:
            obj = obj[part]
        elif isinstance(obj, list) and part.isdigit() and int(part) < len(obj):
            obj = obj[int(part)]
        else:
            return _MISSING
    return obj


def _step(raw: Any, mapping: Mapping, index: int) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ValueError(f"steps.{index}: expected an object, got {type(raw).__name__}")
    out: dict[str, Any] = {}
    for key, path in mapping.step.items():
        value = _get(raw, path)
        if value is not _MISSING:
            out[key] = value
    kind = out.get("kind")
    if kind is not None:
        out["kind"] = mapping.kinds.get(str(kind), str(kind))
    else:
        out["kind"] = StepKind.SQL.value if out.get("code") else StepKind.MESSAGE.value
    for key in ("code", "observation", "content"):
        if key in out and out[key] is not None and not isinstance(out[key], str):
            out[key] = str(out[key])
    out["source_step"] = raw
    return out


def apply_mapping(record: Any, mapping: Mapping, default_run: str,
                  default_model: str | None = None, *, cells: bool = False) -> dict[str, Any]:
    """One producer record to a native record dict; raises ``ValueError`` ``field: message``.
    ``cells``: the record is a row of a CSV file, whose gold answer is text (``a; b; c`` is a
    list, JSON text is read: ``tasks.gold_value``)."""
    if not isinstance(record, dict):
        raise ValueError(f"(record): expected a JSON object, got {type(record).__name__}")
    got = {k: _get(record, p) for k, p in mapping.record.items()}
    for key in _REQUIRED:
        if got[key] is _MISSING:
            raise ValueError(f"{mapping.record[key]}: missing (mapped to {key})")
    steps = got.get("steps", [])
    if steps is _MISSING or steps is None:
        steps = []  # a final-answer-only record
    if not isinstance(steps, list):
        raise ValueError(f"{mapping.record['steps']}: expected a list of steps")
    task_id = got.get("task_id", _MISSING)
    task: dict[str, Any] = {
        "id": str(task_id) if task_id not in (_MISSING, None, "")
        else question_key(str(got["question"])),
        "question": str(got["question"])}
    for key in ("reference_sql", "intent", "scope"):
        if got.get(key, _MISSING) is not _MISSING:
            task[key] = got[key]
    if "ground_truth" in got and got["ground_truth"] is not _MISSING:
        task["ground_truth"] = gold_value(got["ground_truth"]) if cells else got["ground_truth"]
    else:
        task["has_ground_truth"] = False
    run_name = got.get("run", _MISSING)
    model = got.get("model", _MISSING)
    answer = got.get("final_answer", _MISSING)
    rollout = got.get("rollout", _MISSING)
    doc: dict[str, Any] = {
        "task": task,
        "run": {"name": str(run_name) if run_name not in (_MISSING, None, "") else default_run,
                "model": str(model) if model not in (_MISSING, None, "")
                else default_model or "unknown"},
        "steps": [_step(s, mapping, i) for i, s in enumerate(steps)] + _final_message(got),
        "final_answer": None if answer is _MISSING else answer,
        "source_format": "mapped",
        "source_record": {k: v for k, v in record.items()
                          if k != mapping.record.get("steps")},
    }
    if isinstance(rollout, int) and not isinstance(rollout, bool):
        doc["run"]["rollout"] = rollout
    verdict = got.get("verdict", _MISSING)
    if verdict is not _MISSING:
        success = truth_value(verdict)
        if success is not None:
            source = got.get("verdict_source", _MISSING)
            doc["outcome"] = {"success": success, "reward": 1.0 if success else 0.0,
                              "source": str(source) if source not in (_MISSING, None, "")
                              else DEFAULT_VERDICT_SOURCE}
    return doc


def _final_message(got: dict[str, Any]) -> list[dict[str, Any]]:
    """The agent's last message as its last step, when the mapping names one: a conversation's
    answer is something the agent did (a step a reviewer can name), also when it used no tool."""
    text = got.get("final_message", _MISSING)
    if text is _MISSING or text is None or (isinstance(text, str) and not text.strip()):
        return []
    return [{"kind": StepKind.MESSAGE.value, "role": "assistant",
             "content": text if isinstance(text, str) else json.dumps(text)}]


def parse_mapped(record: Any, mapping: Mapping, default_run: str,
                 default_model: str | None = None, *, cells: bool = False) -> Any:
    return parse_native(apply_mapping(record, mapping, default_run, default_model,
                                      cells=cells))
