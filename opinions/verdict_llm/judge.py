"""The LLM judge: one request per item not in the cache, answers checked against
``VERDICT_SCHEMA``, anything outside it (or a failed call) ``undecided`` with ``error`` set."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import sqlite3
from collections.abc import Awaitable, Callable, Mapping, Sequence

from llm.client import JsonLLM
from llm.errors import FatalError, LLMError
from llm.pricing import estimate_cost_usd, labeller_prices
from llm.privacy import Destination, require_destination_consent
from llm.retry import Attempts, Deadline, RetryPolicy, call_with_retries
from opinions.verdict_llm.cache import MemoryVerdictCache, VerdictCache
from opinions.verdict_llm.prompt import JUDGE_PROMPT_VERSION, build_judge_prompt
from opinions.verdict_llm.records import (
    VERDICT_SCHEMA,
    VERDICTS,
    JudgeAborted,
    JudgeItem,
    JudgeStats,
    LLMVerdict,
    VerdictValue,
)

__all__ = ["LLMJudge"]


class LLMJudge:
    """``judge.judge(items) -> list[LLMVerdict]`` (one per item, in order); see the package
    docstring (``opinions.verdict_llm``). Build it with ``make_llm_judge``. ``stats`` describes
    the last call."""

    def __init__(
        self,
        client_factory: Callable[[], JsonLLM],
        *,
        backend: str,
        model: str,
        destination: Destination,
        allow_external: bool = False,
        env: Mapping[str, str] | None = None,
        cache: VerdictCache | None = None,
        concurrency: int = 8,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.backend = backend
        self.model = model
        self.destination = destination
        self.allow_external = allow_external
        self.prompt_version = JUDGE_PROMPT_VERSION
        self._factory = client_factory
        self._spare: JsonLLM | None = None
        self._env = env
        self._cache: VerdictCache = cache if cache is not None else MemoryVerdictCache()
        self._concurrency = concurrency
        self._policy = retry or RetryPolicy()
        self._sleep = sleep
        self.stats = JudgeStats()

    @property
    def privacy_notice(self) -> str:
        """The notice to show before judging (where the texts go, and the rule)."""
        return self.destination.notice

    @property
    def needs_consent(self) -> bool:
        return not self.destination.own_machines

    def prepare_client(self) -> None:
        """Build the client now, for the next ``judge`` call to use: a missing key or address is
        then reported by the caller (``make_llm_judge``), not mid-run. Only the next call uses
        it (a client is bound to the event loop that first uses it, so every later call builds
        its own)."""
        self._spare = self._factory()

    def cache_key(self, item: JudgeItem) -> str:
        parts = [JUDGE_PROMPT_VERSION, self.backend, self.model, item.trajectory_id,
                 item.question, item.gold_answer_text, item.final_answer_text,
                 item.last_result_excerpt]
        return hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode()).hexdigest()

    def judge(self, items: Sequence[JudgeItem]) -> list[LLMVerdict]:
        """Synchronous ``ajudge`` (for callers without an event loop: the CLI, a page run)."""
        return asyncio.run(self.ajudge(items))

    async def ajudge(self, items: Sequence[JudgeItem]) -> list[LLMVerdict]:
        stats = self.stats = JudgeStats()
        keys = [self.cache_key(item) for item in items]
        known = self._cache.get_many(set(keys))
        answers: dict[str, tuple[VerdictValue, str, str | None, bool]] = {}
        for key, (verdict, rationale) in known.items():
            if verdict in VERDICTS:
                answers[key] = (VerdictValue(verdict), rationale, None, True)
        pending: dict[str, JudgeItem] = {}
        for key, item in zip(keys, items, strict=True):
            if key not in answers and key not in pending:
                pending[key] = item
        stats.cached = sum(1 for k in keys if k in answers)
        abort: FatalError | None = None
        if pending:
            # Before any client exists: nothing can be sent without the acknowledgement.
            require_destination_consent(self.destination, self.allow_external, self._env,
                                        what="answers to judge")
            abort = await self._ask(pending, answers, stats)
        verdicts: list[LLMVerdict] = []
        for key, item in zip(keys, items, strict=True):
            verdict, rationale, error, cached = answers.get(
                key, (VerdictValue.UNDECIDED, "",
                      "not sent: the run stopped after a fatal error", False))
            verdicts.append(LLMVerdict(item.trajectory_id, verdict, rationale, self.model,
                                       error=error, cached=cached))
        if abort is not None:
            raise JudgeAborted(f"LLM judge stopped: {abort.message}", verdicts, stats)
        return verdicts

    async def _ask(
        self,
        pending: dict[str, JudgeItem],
        answers: dict[str, tuple[VerdictValue, str, str | None, bool]],
        stats: JudgeStats,
    ) -> FatalError | None:
        client = self._spare or self._factory()
        self._spare = None
        sem = asyncio.Semaphore(self._concurrency)
        stop = asyncio.Event()
        abort: FatalError | None = None
        run_deadline = Deadline(self._policy.run_deadline_s)

        async def one(key: str, item: JudgeItem) -> None:
            nonlocal abort
            async with sem:
                if stop.is_set():
                    return  # stays unjudged: "not sent"
                prompt = build_judge_prompt(item)
                tried = Attempts()
                try:
                    data = await call_with_retries(
                        lambda: client.complete(prompt, VERDICT_SCHEMA), self._policy, tried,
                        sleep=self._sleep, stop=stop, run_deadline=run_deadline,
                    )
                except LLMError as e:
                    error = f"{e.kind}: {e.message}"
                    if isinstance(e, FatalError) and e.abort_run and abort is None:
                        abort = e
                        stop.set()
                except Exception as e:  # a bug in one item must not lose the others
                    error = f"unexpected {type(e).__name__}: {e}"
                else:
                    verdict = VerdictValue(data["verdict"])
                    rationale = str(data["rationale"]).strip()
                    answers[key] = (verdict, rationale, None, False)
                    # Saved as each answer arrives: an interrupted run keeps what it paid for.
                    # A cache that cannot be written costs a repeat request later, not this
                    # verdict.
                    with contextlib.suppress(sqlite3.Error, OSError):
                        self._cache.put(key, item.trajectory_id, verdict, rationale, self.model)
                    stats.judged += 1
                    error = ""
                finally:
                    stats.calls += tried.calls
                    stats.add(tried)
            if error:
                answers[key] = (VerdictValue.UNDECIDED, "", error, False)
                stats.failed += 1
                stats.errors.append(f"{item.trajectory_id}: {error}")

        try:
            await asyncio.gather(*(one(k, it) for k, it in pending.items()))
        finally:
            await client.aclose()
        stats.structured_output = client.structured_output
        stats.structured_output_refused = tuple(getattr(client, "refused", ()))
        stats.estimated_cost_usd = estimate_cost_usd(
            self.model, stats.input_tokens, stats.output_tokens, prices=labeller_prices(client)
        )
        return abort
