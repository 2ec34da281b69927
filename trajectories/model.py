"""The native trajectory format.

One trajectory is one agent run on one task. Every model keeps fields it does not know
(``extra="allow"``) so that nothing a producer wrote is lost on import.
"""

from __future__ import annotations

import hashlib
import json
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

FORMAT_VERSION = "1"

INTENTS = ("Demographics", "Vitals", "Medications", "Cost", "Labs", "Diagnoses", "Other")
SCOPES = ("patient", "population")
NOISE_TYPES = ("record", "value", "query")


class StepKind(StrEnum):
    SQL = "sql"
    PYTHON = "python"
    TOOL_CALL = "tool_call"
    MESSAGE = "message"
    THINKING = "thinking"  # the model's reasoning text, kept apart from what it said


ACTION_KINDS = frozenset({StepKind.SQL, StepKind.PYTHON, StepKind.TOOL_CALL})


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class Task(_Open):
    id: str = Field(min_length=1)
    question: str
    intent: str = "Other"
    scope: str | None = None
    template_id: str | None = None
    reference_sql: str | None = None
    ground_truth: Any = None
    # False: the producer recorded no ground truth, so exact match cannot be computed. A task
    # whose ground truth is genuinely NULL (unanswerable) keeps True with ``ground_truth=None``.
    has_ground_truth: bool = True
    answer_format: str | None = None
    split: str | None = None
    pair_id: str | None = None
    noise_type: str | None = None
    variant: str | None = None  # "clean" or "noise" inside a Clean/Noise pair


class Run(_Open):
    name: str = Field(min_length=1)
    model: str = Field(min_length=1)
    configuration: dict[str, Any] = Field(default_factory=dict)
    temperature: float | None = None
    rollout: int = 0


class Step(_Open):
    kind: StepKind
    role: str = "assistant"  # message author: assistant | user | system | tool
    name: str | None = None  # tool name for tool calls
    code: str | None = None  # SQL or Python exactly as written
    arguments: str | None = None  # raw tool-call arguments, possibly invalid JSON
    content: str | None = None  # message text
    observation: str | None = None  # execution feedback exactly as returned
    error: bool = False
    duration_ms: float | None = None
    tokens: dict[str, int] | None = None


class Outcome(_Open):
    success: bool | None = None
    reward: float | None = None
    source: str | None = None


class Trajectory(_Open):
    format_version: str = FORMAT_VERSION
    id: str | None = None
    task: Task
    run: Run
    steps: list[Step] = Field(default_factory=list)
    final_answer: Any = None
    outcome: Outcome | None = None

    def content_id(self) -> str:
        """Content hash: the same record always gets the same id, so re-imports add nothing."""
        payload = self.model_dump(mode="json", exclude={"id"}, exclude_none=False)
        canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:24]

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
