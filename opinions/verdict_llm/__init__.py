"""An LLM judge of whether an agent's final answer is correct, for what the rule layers of the
judge (``trajectories.judge``) cannot decide. Optional and off unless called.

    judge = make_llm_judge(settings, "openai-compatible")  # any name of llm.backend_names()
    verdicts = judge.judge([JudgeItem(tid, question, gold, final, last_result)])

One request per item: the question, the gold answer, the agent's final answer and an excerpt of
its last SQL result, each fenced as data (``prompt.fence_for``), and an answer schema of exactly
``{"verdict": "correct" | "incorrect" | "undecided", "rationale": str}`` with no other field.
Any backend of the LLM transport's registry (``llm.backends``), each client built there:

- ``gemini``: google-genai through ``llm.gemini.make_client`` (Vertex AI when the settings name a
  project, which is the zero-retention route; else the Developer API), the schema as Gemini's
  response schema.
- ``openai-compatible``: the ``openai`` SDK against ``FAILLAB_OPENAI_BASE_URL``
  (``llm.openai_compat.OpenAICompatClient``): json_schema, falling back to json_object or text when
  the server does not take it; ``structured_output`` in the stats says which.

The same privacy interlock as pre-labelling (``llm.privacy``): nothing is sent to a destination
that is not one of the team's own addresses without ``allow_external=True`` or
``FAILLAB_ALLOW_EXTERNAL_LLM=1``. The same retries and deadlines (``llm.retry``:
429/5xx/timeouts with Retry-After; an answer outside the schema asked once more). Verdicts are
cached (by trajectory id, the four texts, backend, model and prompt version) in ``WORKSPACE/llm-
verdicts.sqlite`` by default, so a second run sends only what changed.

An answer outside the schema (not JSON, a verdict not in the enum, a missing or extra field),
a refusal, or a call that fails for good gives ``undecided`` with ``error`` set, never a guess;
such verdicts are not cached, so a later run asks again.
"""

from __future__ import annotations

from opinions.verdict_llm.backends import make_llm_judge
from opinions.verdict_llm.cache import (
    CACHE_FILE,
    MemoryVerdictCache,
    SqliteVerdictCache,
    VerdictCache,
)
from opinions.verdict_llm.judge import LLMJudge
from opinions.verdict_llm.prompt import JUDGE_PROMPT_VERSION, build_judge_prompt
from opinions.verdict_llm.records import (
    VERDICT_SCHEMA,
    VERDICTS,
    JudgeAborted,
    JudgeConfigError,
    JudgeItem,
    JudgeStats,
    LLMVerdict,
    VerdictValue,
)

__all__ = [
    "CACHE_FILE",
    "JUDGE_PROMPT_VERSION",
    "VERDICTS",
    "VERDICT_SCHEMA",
    "JudgeAborted",
    "JudgeConfigError",
    "JudgeItem",
    "JudgeStats",
    "LLMJudge",
    "LLMVerdict",
    "MemoryVerdictCache",
    "SqliteVerdictCache",
    "VerdictCache",
    "VerdictValue",
    "build_judge_prompt",
    "make_llm_judge",
]
