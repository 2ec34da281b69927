"""The LLM judge the settings describe (``make_llm_judge``), for any backend of the registry
(``llm.backends``: ``gemini``, ``openai-compatible``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

from llm.backends import backend
from llm.errors import LLMConfigError
from llm.retry import RetryPolicy
from opinions.verdict_llm.cache import CACHE_FILE, SqliteVerdictCache, VerdictCache
from opinions.verdict_llm.judge import LLMJudge
from opinions.verdict_llm.records import JudgeConfigError

if TYPE_CHECKING:
    from faillab_core.settings import Settings
    from llm.client import JsonLLM

__all__ = ["make_llm_judge"]


def make_llm_judge(
    settings: Settings,
    backend_name: str,
    *,
    model: str | None = None,
    allow_external: bool = False,
    env: Mapping[str, str] | None = None,
    cache: VerdictCache | None = None,
    concurrency: int = 8,
    retry: RetryPolicy | None = None,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> LLMJudge:
    """The LLM judge the settings describe, for ``backend`` one of the registry's names
    (``llm.backend_names()``: "gemini", "openai-compatible").

    Contract:

    - ``judge.judge(items: Sequence[JudgeItem]) -> list[LLMVerdict]``: one verdict per item,
      in the same order, ``verdict`` one of "correct" / "incorrect" / "undecided" and ``model``
      the model that gave it. ``undecided`` with ``error`` set means no usable answer (outside
      the schema, refused, failed after retries): treat it as undecided (people decide), never
      as a failure; it is not cached, so a later call asks again. ``await judge.ajudge(items)``
      is the same inside an event loop. ``judge.stats`` (``JudgeStats``) gives the requests,
      tokens, estimated cost and the structured-output mode of the last call.
    - Settings read: gemini: ``gemini_model``, ``vertex_project`` (Vertex AI when set, with
      ``vertex_location``; else the Developer API with ``GEMINI_API_KEY``), ``gemini_base_url``;
      openai-compatible: ``openai_base_url``, ``openai_api_key``, ``openai_model``,
      ``openai_response_format``, ``openai_timeout_s``, ``openai_own_hosts``,
      ``openai_price_per_mtok``. ``model`` overrides the settings' model. The deadlines:
      one request's (``gemini_timeout_s``, ``openai_timeout_s``), one item's retries
      (``llm_item_deadline_s``) and the run's (``llm_run_deadline_h``), unless ``retry`` is
      given.
    - Privacy: show ``judge.privacy_notice`` before judging. When ``judge.needs_consent`` (the
      destination is not one of the team's own addresses) ``judge()`` raises
      ``ConsentRequiredError`` before sending anything unless ``allow_external`` is True (the
      person's ``--yes-send-data``) or ``FAILLAB_ALLOW_EXTERNAL_LLM=1`` is in ``env`` (default
      ``os.environ``). Items answered from the cache need no consent.
    - Cache: ``cache`` (a ``VerdictCache``), by default ``SqliteVerdictCache`` at
      ``settings.workspace / "llm-verdicts.sqlite"``; keyed by trajectory id, the item's four
      texts, backend, model and ``JUDGE_PROMPT_VERSION``.
    - Errors: ``JudgeConfigError`` (here: unknown backend, no address/model/key),
      ``ConsentRequiredError`` (from ``judge``), both ``PrelabelServiceError`` (one line for the
      person); ``JudgeAborted`` from ``judge`` when the service refuses every request (bad key,
      unknown model), carrying the verdicts so far.
    - ``concurrency`` requests in flight at once; ``retry`` and ``sleep`` as the pre-label
      runner's (tests pass ``RetryPolicy(base_delay_s=0)``).
    """
    try:
        entry = backend(backend_name)
        conn = entry.connect(settings, model=model)
    except LLMConfigError as e:
        raise JudgeConfigError(_judge_message(str(e))) from None

    def build() -> JsonLLM:
        try:
            return entry.client(conn)
        except LLMConfigError as e:
            raise JudgeConfigError(str(e)) from None

    if retry is None:
        retry = RetryPolicy(item_deadline_s=settings.llm_item_deadline_s,
                            run_deadline_s=settings.llm_run_deadline_h * 3600)
    judge = LLMJudge(
        build,
        backend=entry.name,
        model=conn.model,
        destination=entry.destination(conn),
        allow_external=allow_external,
        env=env,
        cache=cache if cache is not None else SqliteVerdictCache(settings.workspace / CACHE_FILE),
        concurrency=concurrency,
        retry=retry,
        sleep=sleep,
    )
    # Built once now, so that a missing key or address is reported here, not mid-run; the
    # first judge() call uses it (a client is bound to the event loop that first uses it, so
    # every later call builds its own).
    judge.prepare_client()
    return judge


def _judge_message(message: str) -> str:
    # The registry's refusal of an unknown name, in the judge's words.
    return message.replace("unknown LLM backend", "unknown LLM judge backend", 1)
