"""How one SQL cell value is written: as strict JSON and as one line of text.

This is the only JSON encoder for values coming out of a database in the product. Timestamps
are written the way SQL itself prints them (``YYYY-MM-DD HH:MM:SS``, ISO 8601 with a space):
that is how EHRSQL and the demo store ground-truth answers, so a re-run value compares equal to
a recorded one without further normalisation.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import math
import uuid
from typing import Any

__all__ = ["cell_text", "json_cell"]


def json_cell(value: Any) -> Any:
    """``value`` as something ``json.dumps(..., allow_nan=False)`` accepts."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        # NaN and infinities are not valid JSON.
        return value if math.isfinite(value) else str(value)
    if isinstance(value, decimal.Decimal):
        return float(value) if value.is_finite() else str(value)
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return "base64:" + base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dict):
        return {str(k): json_cell(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [json_cell(v) for v in value]
    return str(value)


def cell_text(value: Any) -> str:
    """One cell for a plain-text table: NULL spelled out, bytes as hex, always one line."""
    if value is None:
        return "NULL"
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        return "x'" + raw[:32].hex() + ("…" if len(raw) > 32 else "") + "'"
    if isinstance(value, dt.datetime):
        text = value.isoformat(sep=" ")
    else:
        text = value if isinstance(value, str) else str(value)
    # Keep one row per line whatever the data holds.
    return text.replace("\r", "\\r").replace("\n", "\\n").replace("\t", " ")
