"""Answers as tables: expected and given answers normalised into rows of scalars, shared by
the answer-format, SQL-logic and Clean/Noise detectors."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from trajectories.model import StepKind, Trajectory
from trajectories.signals._common import _MAX_ROWS, NULL_TEXTS


def _norm_scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        number = float(value)
        if math.isnan(number) or math.isinf(number):
            return str(number)
        if number.is_integer() and abs(number) < 1e15:
            return str(int(number))
        return f"{round(number, 2):g}" if abs(number) < 1e6 else str(round(number, 2))
    text = " ".join(str(value).split()).casefold()
    try:
        return _norm_scalar(float(text.replace(",", ""))) if text else text
    except ValueError:
        return text


def _row(value: Any) -> tuple[str, ...]:
    if isinstance(value, dict):
        return tuple(_norm_scalar(v) for v in list(value.values())[:50])
    if isinstance(value, list | tuple):
        out: list[str] = []
        for v in value[:50]:
            if isinstance(v, list | tuple | dict):
                out.extend(_row(v))
            else:
                out.append(_norm_scalar(v))
        return tuple(out)
    return (_norm_scalar(value),)


def as_table(value: Any, _depth: int = 0) -> list[tuple[str, ...]] | None:
    """Normalise an answer into rows of normalised scalars; None when there is no answer."""
    if value is None or _depth > 3:
        return None
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in "[{":
            try:
                return as_table(json.loads(text), _depth + 1)
            except (ValueError, RecursionError):
                pass
        if not text:
            return None
        parts = [p for p in re.split(r"\s*(?:;|\n)\s*", text[:20000]) if p]
        return [(_norm_scalar(p),) for p in parts[:_MAX_ROWS]]
    if isinstance(value, dict):
        columns = list(value.values())
        if columns and all(isinstance(c, list) for c in columns):
            length = len(columns[0])
            if all(len(c) == length for c in columns):  # column-oriented frame
                return [tuple(_norm_scalar(c[i]) for c in columns) for i in range(length)][
                    :_MAX_ROWS
                ]
        return [_row(value)]
    if isinstance(value, list | tuple):
        return [_row(v) for v in value[:_MAX_ROWS]]
    return [(_norm_scalar(value),)]


@dataclass(frozen=True)
class Answers:
    """Expected and given answers as normalised tables, computed once per trajectory."""

    gold: list[tuple[str, ...]] | None
    pred: list[tuple[str, ...]] | None


def answers(trajectory: Trajectory) -> Answers:
    return Answers(as_table(trajectory.task.ground_truth), as_table(trajectory.final_answer))


def _is_null_table(table: list[tuple[str, ...]] | None) -> bool:
    if table is None or not table:
        return True
    return all(all(v in NULL_TEXTS for v in row) for row in table)


def _answer_step(trajectory: Trajectory) -> int | None:
    for i in range(len(trajectory.steps) - 1, -1, -1):
        step = trajectory.steps[i]
        if step.kind == StepKind.MESSAGE and step.role == "assistant":
            return i
    return len(trajectory.steps) - 1 if trajectory.steps else None


def _cite_step(trajectory: Trajectory, index: int | None, detail: str) -> str:
    if index is None:
        return f"final answer: {detail}"
    step = trajectory.steps[index]
    label = step.name if step.kind == StepKind.TOOL_CALL and step.name else step.kind.value
    return f"step {index} ({label}): {detail}"


def _match_rows(
    pred: list[tuple[str, ...]], gold: list[tuple[str, ...]], mode: str
) -> tuple[int, int]:
    """Greedy one-to-one matching of rows; returns (matched rows, rows with strict differences).
    mode 'sub': pred row values within a gold row; 'sup': pred row contains a gold row."""
    used = [False] * len(gold)
    gold_sets = [set(g) for g in gold]
    matched = strict = 0
    for p in pred:
        pset = set(p)
        for j, gset in enumerate(gold_sets):
            if used[j]:
                continue
            ok = pset <= gset if mode == "sub" else pset >= gset
            if ok:
                used[j] = True
                matched += 1
                strict += pset != gset
                break
    return matched, strict
