"""Exact-match scoring of a final answer against the ground truth.

Normalisation (documented in docs/scoring.md), applied to both sides before comparison:

1. Shapes: a scalar ``x``, ``[x]`` and ``[[x]]`` are the same answer; a flat list of scalars
   ``[a, b]`` equals a one-column result ``[[a], [b]]``. Dicts become rows of their values.
2. Values: strings are trimmed, inner whitespace collapsed and lower-cased; numeric strings are
   read as numbers; numbers compare with a relative tolerance of 1e-4 (absolute 1e-6) after
   rounding noise; booleans are 1/0.
3. Unanswerable tasks: ``None``, ``"null"``, ``"none"``, ``""``, ``[]`` and ``[[None]]`` are all
   "no answer" and match each other.
4. Row order is ignored (rows compared as multisets) unless the task asks for an order
   (``ordered=True``: the answer format or question says "order"/"sorted"/"rank"/"top").
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from typing import Any

SCORER_VERSION = "em-1"

_WS = re.compile(r"\s+")
_NUMERIC = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
_ORDER_WORDS = re.compile(r"\b(in order|ordered|sorted|ascending|descending|chronological|rank)\w*",
                          re.IGNORECASE)
_NULL_STRINGS = {"", "null", "none", "nan", "n/a"}

Row = tuple[Any, ...]


def _norm_value(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        f = float(value)
        if math.isnan(f):
            return None
        return f
    if isinstance(value, str):
        text = _WS.sub(" ", value.strip()).lower()
        if text in _NULL_STRINGS:
            return None
        if _NUMERIC.match(text):
            return float(text)
        return text
    # Nested containers inside a cell: compare their canonical JSON.
    return json.dumps(value, sort_keys=True, default=str).lower()


def _maybe_json(value: Any) -> Any:
    """Agents often return a JSON document as a string; read it when it clearly is one."""
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in "[{" and text[-1:] in "]}":
            try:
                return json.loads(text)
            except ValueError:
                return value
    return value


def to_rows(answer: Any) -> list[Row]:
    """Bring any answer shape to a list of tuples of normalised values."""
    answer = _maybe_json(answer)
    if answer is None:
        return []
    if isinstance(answer, dict):
        return [tuple(_norm_value(v) for v in answer.values())]
    if not isinstance(answer, list | tuple):
        value = _norm_value(answer)
        return [] if value is None else [(value,)]
    rows: list[Row] = []
    for item in answer:
        if isinstance(item, dict):
            rows.append(tuple(_norm_value(v) for v in item.values()))
        elif isinstance(item, list | tuple):
            rows.append(tuple(_norm_value(v) for v in item))
        else:
            rows.append((_norm_value(item),))
    # [[None]] and [None] mean "no answer".
    if all(all(v is None for v in row) for row in rows):
        return []
    return rows


def _round_key(value: Any) -> Any:
    if isinstance(value, float):
        # Rounding to 4 significant decimals makes tolerance work inside multiset comparison.
        return round(value, 4) if abs(value) < 1e12 else value
    return value


def _rows_equal(a: Row, b: Row) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if isinstance(x, float) and isinstance(y, float):
            if not math.isclose(x, y, rel_tol=1e-4, abs_tol=1e-6):
                return False
        elif x != y:
            return False
    return True


def wants_order(question: str | None, answer_format: str | None) -> bool:
    text = f"{question or ''} {answer_format or ''}"
    return bool(_ORDER_WORDS.search(text))


def exact_match(predicted: Any, truth: Any, *, ordered: bool = False) -> bool:
    """True when ``predicted`` equals ``truth`` under the documented normalisation."""
    pred_rows = to_rows(predicted)
    true_rows = to_rows(truth)
    if len(pred_rows) != len(true_rows):
        return False
    if ordered:
        return all(_rows_equal(a, b) for a, b in zip(pred_rows, true_rows, strict=True))
    if Counter(tuple(map(_round_key, r)) for r in pred_rows) == Counter(
        tuple(map(_round_key, r)) for r in true_rows
    ):
        return True
    # Fall back to a tolerant greedy match when rounding put near-equal numbers in two buckets.
    remaining = list(true_rows)
    for row in pred_rows:
        for i, candidate in enumerate(remaining):
            if _rows_equal(row, candidate):
                del remaining[i]
                break
        else:
            return False
    return not remaining


def answer_diff(predicted: Any, truth: Any) -> tuple[list[Row], list[Row], list[Row]]:
    """Rows in both, rows missing from the prediction, rows the prediction added."""
    pred = Counter(tuple(map(_round_key, r)) for r in to_rows(predicted))
    true = Counter(tuple(map(_round_key, r)) for r in to_rows(truth))
    common = pred & true
    return list(common.elements()), list((true - pred).elements()), list((pred - true).elements())
