"""Making untrusted text safe to hand over: CSV cells for spreadsheets, text for terminals.

Notes, run names, model names and answers come from annotators and imported files. Two
helpers, used by every CSV writer and every CLI text output:

* :func:`csv_cell` / :func:`csv_frame` neutralise spreadsheet formulas (the OWASP rule: a
  text cell starting with ``= + - @``, tab or carriage return gets a leading single quote;
  a line feed too, since spreadsheets skip a leading line break and run what follows).
  Numbers are never touched, so a negative value stays a number; a numeric *string* such
  as ``"-3"`` typed in a note is text and is neutralised like any other. A cell that
  already starts with quotes before such a character gets one more, so that
  :func:`csv_uncell` (which removes exactly one) gives back every text as it was typed.
* :func:`csv_text` / :func:`csv_frame_text` write rows with ``\n`` line endings and quote every
  field of a row (or frame) holding a carriage return: Python's writer leaves a lone ``\r``
  unquoted when the line ending is ``\n``, and such a file no longer reads back.
* :func:`terminal_text` removes terminal escape sequences and other control characters
  (C0 except newline and tab, DEL, C1, and bidirectional overrides) from text printed by
  the CLI. JSON output does not need it: ``json.dumps`` escapes every control character.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["FORMULA_PREFIXES", "csv_cell", "csv_frame", "csv_frame_text", "csv_row", "csv_text",
           "csv_uncell", "terminal_text"]

#: A text cell starting with one of these is read as a formula by spreadsheet programs.
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r", "\n")

# Whole escape sequences first (CSI ``ESC [ ... final`` and OSC ``ESC ] ... BEL|ST``, and the
# 8-bit CSI/OSC introducers), so no printable remnant such as "[31m" is left behind.
_ESCAPES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
    r"|(?:\x1b\]|\x9d)[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[@-_]?"
)
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _guarded(value: str) -> bool:
    # "=x", and also "'=x", "''=x": quotes before a formula character. The latter are not
    # formulas, but without their own extra quote csv_uncell could not tell "'=x" typed by a
    # person from "=x" neutralised by us, and an export/import round trip would change them.
    return value.lstrip("'").startswith(FORMULA_PREFIXES)


def csv_cell(value: Any) -> Any:
    """``value`` with a leading ``'`` when it is text a spreadsheet would run as a formula
    (or text starting with quotes before one, see the module notes)."""
    if isinstance(value, str) and _guarded(value):
        return "'" + value
    return value


def csv_uncell(value: str) -> str:
    """Undo :func:`csv_cell` when reading a CSV file this program wrote (``'=x`` -> ``=x``,
    ``''=x`` -> ``'=x``)."""
    if value.startswith("'") and _guarded(value):
        return value[1:]
    return value


def csv_row(values: Any) -> list[Any]:
    """Every cell of one row through :func:`csv_cell`."""
    return [csv_cell(v) for v in values]


def _has_cr(value: Any) -> bool:
    return isinstance(value, str) and "\r" in value


def csv_text(rows: Iterable[Sequence[Any]]) -> str:
    """Rows as CSV text (``\n`` line endings); a row holding a carriage return is written with
    every field quoted so that it reads back as one record. Cells are written as given: pass
    them through :func:`csv_cell` first where a spreadsheet may open the file."""
    buf = io.StringIO()
    plain = csv.writer(buf, lineterminator="\n")
    quoted = csv.writer(buf, lineterminator="\n", quoting=csv.QUOTE_ALL)
    for row in rows:
        (quoted if any(_has_cr(v) for v in row) else plain).writerow(row)
    return buf.getvalue()


def csv_frame_text(df: pd.DataFrame) -> str:
    """``df`` (already made safe) as CSV text without its index, ``\n`` line endings; text
    fields are quoted when any cell holds a carriage return (see :func:`csv_text`)."""
    text_cells = df.select_dtypes(include=["object", "string"])
    has_cr = bool(text_cells.map(_has_cr).to_numpy().any()) if not text_cells.empty else False
    has_cr = has_cr or any(_has_cr(c) for c in df.columns)
    buf = io.StringIO()
    df.to_csv(buf, index=False, lineterminator="\n",
              quoting=csv.QUOTE_NONNUMERIC if has_cr else csv.QUOTE_MINIMAL)
    return buf.getvalue()


def csv_frame(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``df`` whose text cells, column names and index labels are safe for CSV."""
    # Imported here: the CLI loads this module for `terminal_text`, and --help must stay light.
    import pandas as pd

    out = df.copy()
    for column in out.columns:
        series = out[column]
        if pd.api.types.is_object_dtype(series.dtype) or pd.api.types.is_string_dtype(
            series.dtype
        ):
            out[column] = series.map(csv_cell)
    out.columns = [csv_cell(str(c)) for c in out.columns]
    if pd.api.types.is_object_dtype(out.index.dtype) or pd.api.types.is_string_dtype(
        out.index.dtype
    ):
        out.index = out.index.map(csv_cell)
    return out


def terminal_text(text: str, *, keep_newlines: bool = True) -> str:
    """``text`` without escape sequences and control characters (tab kept).

    With ``keep_newlines=False`` a newline becomes a space, for one-line fields such as a
    run name in a listing.
    """
    if not keep_newlines:
        text = text.replace("\r\n", " ").replace("\n", " ")
    return _CONTROLS.sub("", _ESCAPES.sub("", text))
