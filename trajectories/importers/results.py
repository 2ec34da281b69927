"""Results tables: one row per question with the model's final answer, the gold answer and
often a verdict (what many groups publish, e.g. ``question, model answer, gold, correct``).

A CSV or TSV file whose columns include a question and a model answer (``tasks.COLUMNS``
names them) imports as one trajectory per row, with no steps: the answer is the row's, the
task the row's own, the verdict (when there is one) the recorded outcome with its source. The
same question asked again in a run is its next rollout. ``--map`` names the columns instead
(``[record]`` paths are column names). JSON and JSONL results go through ``--map`` (its
``steps`` is optional).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from trajectories.importers.errors import ImportProblem, describe_validation_error
from trajectories.importers.mapping import Mapping, parse_mapped
from trajectories.importers.openai_chat import infer_intent_scope
from trajectories.importers.run_names import run_for_file
from trajectories.importers.tasks import (
    columns_of,
    normalise_question,
    read_rows,
    task_row,
    verdict_outcome,
)
from trajectories.model import Trajectory

_TABLE_SUFFIXES = (".csv", ".tsv")

#: A model's name inside a file or column name: its family, then version parts joined by
#: ``-``, ``.`` or ``:`` (``claude-sonnet-4``, ``gpt-4o-mini``, ``qwen2.5-72b``), never a
#: word that merely starts like one (``philosophy``).
_MODEL_NAME = re.compile(
    r"(?<![A-Za-z0-9])(?:claude|gpt|gemini|llama|qwen|mistral|mixtral|deepseek|kimi|gemma|"
    r"phi|grok|o[134])(?:\d[A-Za-z0-9.]*)?(?:[-.:][A-Za-z0-9.]+)*(?![A-Za-z])", re.IGNORECASE)
#: Chat services whose share links a results table often keeps beside each answer.
_SHARE_HOSTS = {"claude.ai": "claude", "chatgpt.com": "chatgpt", "chat.openai.com": "chatgpt",
                "gemini.google.com": "gemini", "chat.deepseek.com": "deepseek",
                "chat.qwen.ai": "qwen", "grok.com": "grok"}


def infer_model(path: Path, columns: Iterable[str], rows: list[dict[str, Any]]) -> str | None:
    """The model a results table without a model column holds: named in its file name, its
    folder, a column name (``Claude Answer``), or the host of the chat links in its cells;
    None when nothing says (the import then asks for ``--model``)."""
    for text in (path.stem, path.resolve().parent.name, *columns):
        found = _MODEL_NAME.search(text)
        if found:
            return found.group(0).strip(".-:").lower()
    for item in rows[:20]:
        for value in item.values():
            cell = str(value or "")
            for host, model in _SHARE_HOSTS.items():
                if f"//{host}/" in cell or f"//www.{host}/" in cell:
                    return model
    return None


def is_results_table(path: Path) -> bool:
    return path.suffix.lower() in _TABLE_SUFFIXES


def results_items(path: Path, *, run: str | None, model: str | None,
                  mapping: Mapping | None = None,
                  verdict_source: str = "human",
                  ) -> Iterator[tuple[str, Trajectory | None, str | None, str]]:
    """``(location, trajectory, problem, raw)`` per row; a file that is not a results table
    raises one ``ImportProblem``."""
    rows = read_rows(path)
    if not rows:
        raise ImportProblem(str(path), "no rows (a CSV needs a header row and one row per "
                            "answer)")
    names: dict[str, None] = {}
    for item in rows:
        names.update(dict.fromkeys(str(k) for k in item))
    columns = columns_of(names)
    if mapping is None:
        missing = [c for c in ("question", "final_answer") if c not in columns]
        if missing:
            raise ImportProblem(str(path), "not a results table: no "
                                + " and no ".join(f"{c.replace('_', ' ')} column" for c in missing)
                                + f" (its columns: {', '.join(list(names)[:12])}); a task file "
                                "goes with --tasks, other layouts with --map")
    if mapping is None and model is None and "model" not in columns:
        # Every table and chart groups by model: an answer table imported under "unknown"
        # would show that name everywhere, so the model is inferred or asked for.
        model = infer_model(path, names, rows)
        if model is None:
            raise ImportProblem(str(path), "which model answered? Neither the file name, its "
                                "folder, its columns nor its links name one: give --model "
                                "NAME (or add a model column)")
    asked: Counter[tuple[str, str]] = Counter()
    for index, item in enumerate(rows):
        location = f"row {index + 1}"
        raw = repr(item)
        try:
            if mapping is not None:
                traj = parse_mapped(item, mapping, run or run_for_file(model, path), model,
                                    cells=True)
            else:
                traj = _row_trajectory(item, columns, location, path, run, model,
                                       verdict_source)
        except ValueError as err:
            field, _, message = str(err).partition(": ")
            yield location, None, f"{field}: {message}" if message else str(err), raw
            continue
        key = (traj.run.name, normalise_question(traj.task.question))
        if asked[key]:
            # The same question again in this run: its next rollout.
            traj = Trajectory.model_validate({**traj.model_dump(mode="json"),
                                              "run": {**traj.run.model_dump(mode="json"),
                                                      "rollout": asked[key]}}).with_id()
        asked[key] += 1
        yield location, traj, None, raw


def _row_trajectory(item: dict[str, Any], columns: dict[str, str], location: str, path: Path,
                    run: str | None, model: str | None, verdict_source: str) -> Trajectory:
    gold_name = columns.get("gold_answer")
    try:
        row = task_row(item, columns, location, present=gold_name is not None
                       and gold_name in item)
    except ValueError as err:
        raise ValueError(f"{columns.get('question', 'question')}: {err}") from None
    model_name = model or row.fields.get("model") or "unknown"
    intent, scope = infer_intent_scope(row.gold_sql)
    task: dict[str, Any] = {
        "id": row.id, "question": row.question, "reference_sql": row.gold_sql,
        "ground_truth": row.gold_answer, "has_ground_truth": row.has_gold,
        "intent": row.fields.get("intent") or intent,
        "scope": row.fields.get("scope") or scope,
        "intent_inferred": not row.fields.get("intent"),
    }
    for name in ("template_id", "split"):
        if row.fields.get(name):
            task[name] = row.fields[name]
    if not row.answerable:
        task["answerable"] = False
    doc: dict[str, Any] = {
        "task": task,
        "run": {"name": run or row.fields.get("run") or run_for_file(model_name, path),
                "model": model_name},
        "steps": [],
        "final_answer": _answer(row.final_answer),
        "final_answer_source": "record",
        "source_format": "results",
        "source_record": {k: v for k, v in item.items() if k is not None},
    }
    if row.conversation:
        doc["conversation"] = row.conversation
    if row.verdict is not None:
        doc["outcome"] = verdict_outcome(row, verdict_source, None)
    try:
        return Trajectory.model_validate(doc).with_id()
    except ValidationError as err:
        field, message = describe_validation_error(err)
        raise ValueError(f"{field}: {message}") from None


def _answer(value: Any) -> Any:
    """A model-answer cell: the text as written (prose is the answer; the judge reads it),
    None when empty."""
    if value is None:
        return None
    text = str(value)
    return text if text.strip() else None
