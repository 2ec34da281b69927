"""The verdict records and the answer schema the LLM judge asks for: one item to judge, one
verdict, the stats of a call, and the judge's errors."""

from __future__ import annotations

from dataclasses import dataclass, field

from faillab_core.errors import FaillabError
from llm.answer import AnswerField, AnswerSchema
from llm.usage import UsageTally
from opinions.prelabel.run_errors import PrelabelServiceError
from trajectories.judge import Verdict

__all__ = [
    "VERDICTS",
    "VERDICT_SCHEMA",
    "JudgeAborted",
    "JudgeConfigError",
    "JudgeItem",
    "JudgeStats",
    "LLMVerdict",
    "VerdictValue",
]

#: The LLM judge answers with the judge's own values (``trajectories.judge.Verdict``).
VerdictValue = Verdict
VERDICTS: tuple[str, ...] = tuple(v.value for v in Verdict)

VERDICT_SCHEMA = AnswerSchema(
    "LLMVerdict",
    (
        ("verdict", AnswerField(
            "enum", "correct, incorrect, or undecided when it cannot be told from what is shown.",
            choices=VERDICTS)),
        ("rationale", AnswerField(
            "string", "One or two sentences naming the values compared.")),
    ),
    forbid_extra=True,
)


@dataclass(frozen=True)
class JudgeItem:
    """One answer to judge, as text.

    ``gold_answer_text``: the verified answer as a reviewer would read it (rows as JSON, a
    number, a list); for a question whose right answer is to abstain, say so (e.g. ``null (the
    question cannot be answered from the database)``). ``last_result_excerpt``: the agent's
    last successful SQL result, cut to a readable size, or "" when there is none."""

    trajectory_id: str
    question: str
    gold_answer_text: str
    final_answer_text: str
    last_result_excerpt: str = ""


@dataclass(frozen=True)
class LLMVerdict:
    """The LLM's verdict on one item. ``error`` says why there is no real verdict (then
    ``verdict`` is ``undecided``): an answer outside the schema, a refusal, a failed call.
    ``cached``: answered from the cache, no request made."""

    trajectory_id: str
    verdict: VerdictValue
    rationale: str
    model: str
    error: str | None = None
    cached: bool = False


@dataclass
class JudgeStats(UsageTally):
    """What the last ``judge`` call did and cost."""

    judged: int = 0  # verdicts received from the LLM (its own "undecided" included)
    cached: int = 0
    failed: int = 0  # no usable answer: undecided with an error
    calls: int = 0  # requests made, retries included
    estimated_cost_usd: float = 0.0
    structured_output: str | None = None  # how answers were asked for (see endpoints.py)
    structured_output_refused: tuple[str, ...] = ()
    errors: list[str] = field(default_factory=list)


class JudgeConfigError(PrelabelServiceError):
    """The judge cannot be built (unknown backend, no server address, no model, no key)."""


class JudgeAborted(FaillabError):
    """The service refused in a way no further request can fix (bad key, unknown model).
    ``verdicts`` is the full list, in item order (the unjudged ones undecided with an error);
    what was received is cached."""

    def __init__(self, message: str, verdicts: list[LLMVerdict], stats: JudgeStats) -> None:
        super().__init__(message)
        self.verdicts = verdicts
        self.stats = stats
