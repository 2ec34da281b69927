"""The native format: JSONL, one trajectory per line (a JSON list of them is accepted too)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic import ValidationError

from trajectories.importers.errors import describe_validation_error
from trajectories.model import Trajectory


def parse_native(record: Any) -> Trajectory:
    """Validate one native record; raises ``ValueError`` with ``field: message``."""
    if not isinstance(record, dict):
        raise ValueError(f"(record): expected a JSON object, got {type(record).__name__}")
    try:
        return Trajectory.model_validate(record).with_id()
    except ValidationError as err:
        field, msg = describe_validation_error(err)
        raise ValueError(f"{field}: {msg}") from None


def iter_native(records: Iterator[tuple[str, Any]]) -> Iterator[tuple[str, Trajectory]]:
    for location, record in records:
        yield location, parse_native(record)
