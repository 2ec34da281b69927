"""The EHRSQL-2024 shared task's scoring conventions, reproduced rule by rule (the scorer's
behaviour is the specification; the code here is our own).

* **Post-processing** (both the gold SQL and the prediction, before they run): line breaks and
  runs of spaces become one space; ``> =``, ``< =`` and ``! =`` are closed up; MySQL's
  ``DATE_SUB(x, INTERVAL n UNIT)`` / ``DATE_ADD`` become SQLite's ``datetime(x, '-n units')``;
  the benchmark's named normal ranges (``temperature_lower`` ... ``mean_bp_upper``) are filled
  with its values; ``%y`` and ``%j`` in date formats become ``%Y`` and ``%J``. The clock
  (``current_time`` and the like) is the sandbox's (``trajectories.sql.clock``), which replaces
  it the same way for every query.
* **Execution match**: a result is compared as the scorer compares it: every value that reads
  as a number is rounded to 3 decimals and written as a float, every other value as text; the
  rows are sorted; the first 100 rows decide.
* **Reliability**: a null prediction (the text ``null``) abstains; any other prediction answers,
  even one that fails or finds nothing. A right answer or a right abstention scores 1, an
  abstention on an answerable question 0, any other answer -1 (``RS(c)`` weighs it by ``c``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

__all__ = [
    "NULL_PREDICTION",
    "ROWS_COMPARED",
    "VITAL_RANGES",
    "execution_key",
    "is_null_prediction",
    "post_process",
]

#: The text a submission gives for "I abstain".
NULL_PREDICTION = "null"
#: Rows of a sorted result the scorer compares.
ROWS_COMPARED = 100
#: The benchmark's normal ranges for the vital signs its questions name "normal".
VITAL_RANGES: dict[str, tuple[float, float]] = {
    "temperature": (35.5, 38.1), "sao2": (95.0, 100.0), "heart rate": (60.0, 100.0),
    "respiration": (12.0, 18.0), "systolic bp": (90.0, 120.0),
    "diastolic bp": (60.0, 90.0), "mean bp": (60.0, 110.0),
}

_INTERVAL = re.compile(
    r"(DATE_SUB|DATE_ADD)\((\w+\(\)|'[^']+')[, ]+ INTERVAL (\d+) (MONTH|YEAR|DAY)\)")
_LOWER = re.compile(r"[ \n]+([a-zA-Z0-9_]+_lower)")
_UPPER = re.compile(r"[ \n]+([a-zA-Z0-9_]+_upper)")


def is_null_prediction(sql: str | None) -> bool:
    """Whether a submission's entry abstains (``None`` counts as the text ``null``)."""
    return sql is None or sql == NULL_PREDICTION


def _sqlite_interval(match: re.Match[str]) -> str:
    name, start, count, unit = match.group(1), match.group(2), match.group(3), match.group(4)
    unit = unit.lower() if count == "1" else unit.lower() + "s"
    sign = "-" if name == "DATE_SUB" else "+"
    return f"datetime({start}, '{sign}{count} {unit}')"


def post_process(sql: str) -> str:
    """The scorer's post-processing of one query, except the clock (the sandbox's)."""
    text = re.sub(" +", " ", sql.replace("\n", " ")).strip()
    for spaced, closed in (("> =", ">="), ("< =", "<="), ("! =", "!=")):
        text = text.replace(spaced, closed)
    text = _INTERVAL.sub(_sqlite_interval, text)
    lowers, uppers = _LOWER.findall(text), _UPPER.findall(text)
    if lowers and uppers:
        # Only when the first lower and first upper bound name one and the same vital sign.
        lower, upper = lowers[0], uppers[0]
        names = {lower[: -len("_lower")], upper[: -len("_upper")]}
        if len(names) == 1:
            bounds = VITAL_RANGES.get(names.pop().replace("_", " "))
            if bounds is not None:
                text = text.replace(lower, f"{bounds[0]}").replace(upper, f"{bounds[1]}")
    return text.replace("%y", "%Y").replace("%j", "%J")


def _cell(value: Any) -> str:
    try:
        return str(round(float(value), 3))
    except (TypeError, ValueError, OverflowError):
        return str(value)


def execution_key(rows: Sequence[Sequence[Any]]) -> list[list[str]]:
    """What the scorer compares of a result: cells as text (numbers rounded to 3 decimals),
    rows sorted, the first ``ROWS_COMPARED``."""
    return sorted([_cell(value) for value in row] for row in rows)[:ROWS_COMPARED]
