"""The native trajectory format.

One trajectory is one agent run on one task. Every model keeps fields it does not know
(``extra="allow"``) so that nothing a producer wrote is lost on import.
"""

from __future__ import annotations

import hashlib
import json
import math
from enum import StrEnum
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, field_validator

FORMAT_VERSION = "1"

#: EHR-Complex's clinical intents, in the order the papers' tables show them.
CLINICAL_INTENTS: tuple[str, ...] = ("Demographics", "Vitals", "Medications", "Cost", "Labs",
                                     "Diagnoses")
#: The catch-all intent of a task that names none of the clinical ones.
OTHER_INTENT = "Other"
INTENTS: tuple[str, ...] = (*CLINICAL_INTENTS, OTHER_INTENT)
#: Query scopes: one patient's record or a population (a task may have none).
SCOPES: tuple[str, ...] = ("patient", "population")
NOISE_TYPES = ("record", "value", "query")
#: The workspace stores ``run.rollout`` in a 32-bit integer column: a value outside this range
#: cannot be stored (pyarrow refused it with a traceback), so the record is refused instead.
ROLLOUT_RANGE = (-(2**31), 2**31 - 1)
#: Integers kept only in the JSON payload (token counts) stay within 64 bits, the widest
#: integer the readers (DuckDB, pyarrow) take.
INT64_RANGE = (-(2**63), 2**63 - 1)


def rollout_index(value: Any) -> Any:
    """A producer's rollout (or trial) number as ``Run.rollout`` is given it: a number as an
    int (a float's fraction dropped, as the importers always did), NaN and infinities as they
    are, so that the model refuses them in its own words (``int()`` raised instead), and 0
    for anything that is not a number."""
    if isinstance(value, float) and not math.isfinite(value):
        return value
    return int(value) if isinstance(value, int | float) else 0


def finite_number(value: int | float) -> float | None:
    """``value`` as a float when it is a finite one; None for NaN, the infinities and integers
    beyond every float (``float(10**400)`` raises)."""
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


class StepKind(StrEnum):
    SQL = "sql"
    PYTHON = "python"
    TOOL_CALL = "tool_call"
    MESSAGE = "message"
    THINKING = "thinking"  # the model's reasoning text, kept apart from what it said


ACTION_KINDS = frozenset({StepKind.SQL, StepKind.PYTHON, StepKind.TOOL_CALL})


class _Open(BaseModel):
    # Descriptions double as the published JSON Schema's (data/trajectory.schema.json).
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class Task(_Open):
    """The clinical-database task the agent was given, with its ground truth."""

    id: str = Field(min_length=1)
    question: str
    intent: str = Field(
        default=OTHER_INTENT,
        description=f"{' | '.join(CLINICAL_INTENTS)}, or another intent name "
                    f"({OTHER_INTENT} when none)")
    scope: str | None = Field(default=None, description=" | ".join(SCOPES))
    template_id: str | None = None
    reference_sql: str | None = None
    ground_truth: Any = Field(
        default=None,
        description="The verified answer: any JSON value; null for an unanswerable (noise) task.")
    has_ground_truth: bool = Field(
        default=True,
        description="False when the producer recorded no ground truth (exact match cannot be "
                    "computed); a genuinely null answer keeps true.")
    answer_format: str | None = Field(
        default=None, description="The answer-format requirement stated to the agent.")
    split: str | None = None
    pair_id: str | None = Field(default=None,
                                description="Clean/Noise pair this task belongs to.")
    noise_type: str | None = Field(default=None, description=" | ".join(NOISE_TYPES))
    variant: str | None = Field(default=None,
                                description="clean | noise, inside a Clean/Noise pair")


class Run(_Open):
    """The agent configuration that produced the trajectory."""

    name: str = Field(min_length=1)
    model: str = Field(min_length=1)
    configuration: dict[str, Any] = Field(default_factory=dict)
    # Finite: NaN is not JSON, and a NaN or infinite temperature compares with nothing.
    temperature: float | None = Field(default=None, allow_inf_nan=False)
    rollout: int = Field(default=0, ge=ROLLOUT_RANGE[0], le=ROLLOUT_RANGE[1])


class Step(_Open):
    """One step of the conversation: an action (SQL, Python, tool call) or a message."""

    kind: StepKind
    role: str = Field(default="assistant", description="assistant | user | system | tool")
    name: str | None = Field(default=None, description="Tool name for tool calls.")
    code: str | None = Field(default=None,
                             description="SQL or Python exactly as the agent wrote it.")
    arguments: str | None = Field(
        default=None,
        description="Raw tool-call arguments, kept even when they are not valid JSON.")
    content: str | None = Field(default=None, description="Message text.")
    observation: str | None = Field(
        default=None, description="What the environment returned, exactly.")
    error: bool = False
    duration_ms: float | None = Field(default=None, allow_inf_nan=False)
    tokens: dict[str, int] | None = None

    @field_validator("tokens")
    @classmethod
    def _tokens_fit(cls, tokens: dict[str, int] | None) -> dict[str, int] | None:
        for name, count in (tokens or {}).items():
            if not INT64_RANGE[0] <= count <= INT64_RANGE[1]:
                raise ValueError(f"token count '{name}' is beyond 64 bits")
        return tokens


class Outcome(_Open):
    """The producer's own verdict, when it has one (e.g. a tau-bench reward)."""

    success: bool | None = None
    reward: float | None = Field(default=None, allow_inf_nan=False)
    source: str | None = None


class Trajectory(_Open):
    """One agent run on one clinical-database task. Files are JSONL: one trajectory per line.
    Fields not listed here are allowed and kept on import."""

    format_version: str = FORMAT_VERSION
    id: str | None = Field(
        default=None,
        description="Ignored on import: ids are content hashes. A producer's own id is kept as "
                    "producer_id.")
    task: Task
    run: Run
    steps: list[Step] = Field(default_factory=list)
    final_answer: Any = Field(
        default=None,
        description="The agent's final answer: any JSON value (rows as lists, a scalar, null "
                    "for no answer).")
    outcome: Outcome | None = None

    def content_id(self) -> str:
        """Content hash: the same record always gets the same id, so re-imports add nothing.
        This is the definition of an id; ``canonical_id`` is a faster way to the same bytes."""
        payload = self.model_dump(mode="json", exclude={"id"}, exclude_none=False)
        canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return _digest(canonical.encode("utf-8"))

    def with_id(self) -> Trajectory:
        """Return a copy whose ``id`` is its content hash (a producer's own id is kept as
        ``producer_id`` so that it stays searchable)."""
        update: dict[str, Any] = {"id": self.content_id()}
        copy = self.model_copy(update=update)
        if self.id and self.id != update["id"]:
            extra = dict(copy.model_extra or {})
            extra.setdefault("producer_id", self.id)
            copy = Trajectory.model_validate({**copy.model_dump(mode="json"), **extra})
        return copy

    @property
    def actions(self) -> list[Step]:
        return [s for s in self.steps if s.kind in ACTION_KINDS]

    @property
    def n_turns(self) -> int:
        """Agent turns: steps in which the agent acted on the environment (SQL, Python, tools)."""
        return len(self.actions)


def _digest(canonical: bytes) -> str:
    return hashlib.sha256(canonical).hexdigest()[:24]


def _orjson_writes_like_repr(doc: Any) -> bool:
    """True when every value in ``doc`` is a JSON value orjson writes exactly as ``json.dumps``
    does: strings (escapes agree for every code point), integers, booleans, null, lists and
    string-keyed dicts, and floats that are zero or between 1e-4 and 1e16 in size. Outside
    that range ``repr`` switches to an exponent and orjson's format differs (1e+16 vs 1e16,
    1e-05 vs 0.00001); NaN and Infinity orjson writes as null. Integers beyond 64 bits,
    non-string keys and lone surrogates make orjson raise (the caller falls back)."""
    stack: list[Any] = [doc]
    while stack:
        value = stack.pop()
        kind = type(value)
        if kind is dict:
            stack.extend(value.values())
        elif kind is list:
            stack.extend(value)
        elif kind is float:
            if value != 0.0 and not 1e-4 <= abs(value) < 1e16:  # NaN fails both tests
                return False
        elif kind is not str and kind is not int and kind is not bool and value is not None:
            return False  # tuples, enums, datetimes...: only model_dump knows their JSON
    return True


def canonical_bytes(doc: dict[str, Any], *, plain: str | None = None) -> bytes | None:
    """The bytes ``content_id`` hashes for ``doc`` (a trajectory's ``model_dump(mode="json")``
    without ``id``), written by orjson; None when orjson could write them differently from
    ``json.dumps`` (``_orjson_writes_like_repr``). Tests compare the two on every code point,
    on floats across the range and on real, generated and adversarial trajectories.

    ``plain``: a top-level key whose value the caller built from strings, booleans and None
    only (the fast import's steps), so the value check skips it; orjson still refuses a lone
    surrogate there."""
    checked = doc if plain is None else {k: v for k, v in doc.items() if k != plain}
    if not _orjson_writes_like_repr(checked):
        return None
    try:
        return orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # orjson.JSONEncodeError: big integer, non-str key, lone surrogate
        return None


def canonical_id(doc: dict[str, Any], *, plain: str | None = None) -> str | None:
    """``Trajectory.content_id`` of the trajectory whose JSON document is ``doc``, or None when
    only the slow path can say (``canonical_bytes``, which says what ``plain`` means)."""
    data = canonical_bytes(doc, plain=plain)
    return None if data is None else _digest(data)


SCHEMA_ID = f"https://faillab.invalid/schema/trajectory/{FORMAT_VERSION}"


def trajectory_json_schema() -> dict[str, Any]:
    """The native format's JSON Schema, generated from the models above (the one definition).

    Published as ``data/trajectory.schema.json`` by ``python -m faillab.cli.reference_docs``; a test
    fails when the published file differs from this."""
    generated = Trajectory.model_json_schema(mode="validation")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        **generated,
        "title": f"EHR Failure Lab trajectory (native format, version {FORMAT_VERSION})",
    }
