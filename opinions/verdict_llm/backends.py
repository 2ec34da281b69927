"""The LLM judge the settings describe (``make_llm_judge``), one backend per SDK: ``gemini``
(``gemini.GeminiJsonClient``) and ``openai-compatible`` (``openai_compat.OpenAICompatClient``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

from opinions.prelabel.privacy import Destination, gemini_destination, openai_destination
from opinions.prelabel.retry import RetryPolicy
from opinions.verdict_llm.cache import CACHE_FILE, SqliteVerdictCache, VerdictCache
from opinions.verdict_llm.judge import JsonLLM, LLMJudge
from opinions.verdict_llm.records import JudgeConfigError

if TYPE_CHECKING:
    from faillab_core.settings import Settings

__all__ = ["BACKENDS", "make_llm_judge"]

BACKENDS: tuple[str, ...] = ("gemini", "openai-compatible")


def make_llm_judge(
    settings: Settings,
    backend: str,
    *,
    model: str | None = None,
    allow_external: bool = False,
    env: Mapping[str, str] | None = None,
    cache: VerdictCache | None = None,
    concurrency: int = 8,
    retry: RetryPolicy | None = None,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> LLMJudge:
    """The LLM judge the settings describe, for ``backend`` "gemini" or "openai-compatible".

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
      ``openai_price_per_mtok``. ``model`` overrides the settings' model.
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
    if backend == "gemini":
        factory, model_name, dest = _gemini_backend(settings, model)
    elif backend == "openai-compatible":
        factory, model_name, dest = _openai_backend(settings, model)
    else:
        raise JudgeConfigError(
            f"unknown LLM judge backend {backend!r}; choose one of {', '.join(BACKENDS)}"
        )
    judge = LLMJudge(
        factory,
        backend=backend,
        model=model_name,
        destination=dest,
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


def _gemini_backend(
    settings: Settings, model: str | None
) -> tuple[Callable[[], JsonLLM], str, Destination]:
    from opinions.prelabel.gemini import GeminiConfigError, GeminiJsonClient

    vertex = bool(settings.vertex_project)
    name = model or settings.gemini_model

    def build() -> JsonLLM:
        try:
            return GeminiJsonClient(
                name,
                vertexai=vertex,
                project=settings.vertex_project or None,
                location=settings.vertex_location or None,
                # The Developer API override must not leak into a Vertex client.
                base_url=None if vertex else settings.gemini_base_url or None,
            )
        except GeminiConfigError as e:
            raise JudgeConfigError(str(e)) from None

    return build, name, gemini_destination(vertex)


def _openai_backend(
    settings: Settings, model: str | None
) -> tuple[Callable[[], JsonLLM], str, Destination]:
    from opinions.prelabel.endpoints import OpenAIEndpoint
    from opinions.prelabel.openai_compat import OpenAICompatClient, OpenAIConfigError

    try:
        endpoint = OpenAIEndpoint.from_settings(settings)
    except ValueError as e:
        raise JudgeConfigError(str(e)) from None
    name = model or settings.openai_model

    def build() -> JsonLLM:
        try:
            return OpenAICompatClient(endpoint, name)
        except OpenAIConfigError as e:
            raise JudgeConfigError(str(e)) from None

    return build, name, openai_destination(endpoint)
