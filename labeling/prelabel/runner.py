"""Run a pre-labeller over many trajectories: cached, resumable, bounded, and never crashing.

Policy, in the order it applies to one trajectory:

1. Cache: the store is asked for ``PrelabelKey(trajectory id, taxonomy version, prompt version,
   labeller model)`` before anything is sent. A stored result is reused (zero calls); a stored
   *failure* is retried, so a later run picks up what an earlier run could not label.
2. Concurrency: at most ``concurrency`` labeller calls are in flight (an ``asyncio.Semaphore``).
   Sync labellers (the heuristic) run inline in the event loop: they make no calls.
3. Retries (the runner owns them; the Gemini SDK's own retries are switched off so that
   ``RunStats.calls`` counts real HTTP requests):
   - ``TransientError`` (HTTP 429, 408, 5xx, timeouts, network errors): retried up to
     ``max_attempts`` calls in total, sleeping an exponential back-off with jitter
     (``base_delay_s * 2**n``, capped at ``max_delay_s``, half fixed and half random so that
     workers spread out), or the server's Retry-After when that is longer (up to 15 minutes).
   - ``InvalidAnswerError`` (malformed JSON, empty candidates, safety block): retried at most
     ``max_invalid_attempts`` calls in total (a deterministic model tends to repeat itself), then
     recorded as a failure.
   - ``FatalError``: not retried. With ``abort_run`` set (bad credentials, unknown model) no new
     calls are started and ``run_prelabels`` raises ``PrelabelRunAborted`` after in-flight items
     have been saved; otherwise (e.g. HTTP 400 for one prompt) only that item fails.
   - Any other exception from a labeller is recorded as that item's failure.
4. Each outcome is saved as soon as it arrives, so a run killed midway resumes without paying
   twice for what it already received.

Costs are an *estimate* from a small list-price table (USD per million tokens, standard tier,
prompts under 200k tokens); check current pricing before relying on them.
"""

from __future__ import annotations

import asyncio
import inspect
import random
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from labeling.prelabel.base import (
    Labeller,
    LabelResult,
    PrelabelKey,
    PrelabelRecord,
    PrelabelStore,
    RunStats,
)
from trajectories.model import Trajectory

if TYPE_CHECKING:
    from taxonomy import Taxonomy

__all__ = [
    "PRICES_PER_MTOK",
    "AsyncLabeller",
    "FatalError",
    "InvalidAnswerError",
    "LabellerError",
    "PrelabelRunAborted",
    "TransientError",
    "Usage",
    "backoff_delay",
    "estimate_cost_usd",
    "run_prelabels",
    "run_prelabels_sync",
]


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0  # includes "thinking" tokens: they are billed as output


# ---------------------------------------------------------------------------------------------
# Errors a labeller raises to tell the runner what to do next.


class LabellerError(Exception):
    """Base class. ``usage`` carries tokens billed for a call that still failed."""

    kind = "error"

    def __init__(self, message: str, *, usage: Usage | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.usage = usage or Usage()


class TransientError(LabellerError):
    """Worth retrying after a pause: rate limits, server errors, timeouts, network errors."""

    def __init__(
        self,
        message: str,
        *,
        kind: str = "transient",
        retry_after_s: float | None = None,
        status: int | None = None,
        usage: Usage | None = None,
    ) -> None:
        super().__init__(message, usage=usage)
        self.kind = kind
        self.retry_after_s = retry_after_s
        self.status = status


class InvalidAnswerError(LabellerError):
    """The service answered, but not with a usable label (malformed, empty, blocked)."""

    def __init__(self, message: str, *, kind: str = "malformed", usage: Usage | None = None):
        super().__init__(message, usage=usage)
        self.kind = kind


class FatalError(LabellerError):
    """Retrying cannot help. ``abort_run``: no other item can succeed either (e.g. bad key)."""

    def __init__(
        self,
        message: str,
        *,
        kind: str = "fatal",
        status: int | None = None,
        abort_run: bool = False,
        usage: Usage | None = None,
    ) -> None:
        super().__init__(message, usage=usage)
        self.kind = kind
        self.status = status
        self.abort_run = abort_run


class PrelabelRunAborted(RuntimeError):
    """Raised after a run stopped early on a fatal error; ``stats`` holds what was done."""

    def __init__(self, message: str, stats: RunStats) -> None:
        super().__init__(message)
        self.stats = stats


# ---------------------------------------------------------------------------------------------
# Labeller shapes the runner accepts.


@runtime_checkable
class AsyncLabeller(Protocol):
    name: str
    version: str
    model: str
    prompt_version: str

    async def alabel(
        self, trajectory: Trajectory, taxonomy: Taxonomy
    ) -> tuple[LabelResult, Usage]: ...


AnyLabeller = AsyncLabeller | Labeller

# ---------------------------------------------------------------------------------------------
# Cost estimate. List prices (USD per 1M tokens, paid tier, prompts <= 200k tokens) as published
# for the Gemini API when this was written; they change, so the figure is only an estimate.

PRICES_PER_MTOK: dict[str, tuple[float, float]] = {
    "gemini-2.5-pro": (1.25, 10.00),
    "gemini-2.5-flash": (0.30, 2.50),
    "gemini-2.5-flash-lite": (0.10, 0.40),
    "gemini-2.0-flash": (0.10, 0.40),
    "gemini-2.0-flash-lite": (0.075, 0.30),
}


def estimate_cost_usd(model: str, input_tokens: int, output_tokens: int) -> float:
    """Estimated cost; 0.0 for models not in the table (e.g. the heuristic)."""
    name = model.removeprefix("models/")
    price = PRICES_PER_MTOK.get(name)
    if price is None:
        # Versioned names ("gemini-2.5-pro-preview-05-06") fall back to their family's price.
        matches = [k for k in PRICES_PER_MTOK if name.startswith(k)]
        if not matches:
            return 0.0
        price = PRICES_PER_MTOK[max(matches, key=len)]
    return (input_tokens * price[0] + output_tokens * price[1]) / 1_000_000


# A Retry-After beyond this (e.g. a daily quota saying "come back in 6 hours") is not waited out
# in full: the item fails after its attempts and a later run picks it up.
RETRY_AFTER_CEILING_S = 900.0


def backoff_delay(
    attempt: int,
    *,
    base_delay_s: float,
    max_delay_s: float,
    retry_after_s: float | None = None,
    rng: random.Random | None = None,
) -> float:
    """Delay before retry number ``attempt`` (1 = first retry).

    "Equal jitter": half of the exponential step is fixed, half random, so a burst of workers hit
    by the same 429 does not come back in lock-step, yet never retries immediately. A server's
    Retry-After is a floor: retrying earlier would only earn another 429."""
    step = min(max_delay_s, base_delay_s * (2 ** max(attempt - 1, 0)))
    r = rng.random() if rng is not None else random.random()
    delay = step / 2 + r * step / 2
    if retry_after_s is not None:
        delay = max(delay, min(retry_after_s, RETRY_AFTER_CEILING_S))
    return delay


# ---------------------------------------------------------------------------------------------


@dataclass
class _Outcome:
    record: PrelabelRecord
    calls: int
    abort: FatalError | None = None


def _trajectory_id(t: Trajectory) -> str:
    return t.id or t.content_id()


def _key(t: Trajectory, labeller: AnyLabeller, taxonomy: Taxonomy) -> PrelabelKey:
    return PrelabelKey(
        trajectory_id=_trajectory_id(t),
        taxonomy_version=taxonomy.version,
        prompt_version=labeller.prompt_version,
        model=labeller.model,
    )


def _is_async(labeller: AnyLabeller) -> bool:
    fn = getattr(labeller, "alabel", None)
    return fn is not None and inspect.iscoroutinefunction(fn)


async def _label_one(
    t: Trajectory,
    key: PrelabelKey,
    labeller: AsyncLabeller,
    taxonomy: Taxonomy,
    *,
    max_attempts: int,
    max_invalid_attempts: int,
    base_delay_s: float,
    max_delay_s: float,
    sleep: Callable[[float], Awaitable[object]],
    stop: asyncio.Event,
) -> _Outcome:
    calls = 0
    invalid = 0
    in_tok = out_tok = 0
    last_error = "not attempted"
    while calls < max_attempts:
        if stop.is_set():
            last_error = "not attempted: run aborted"
            break
        calls += 1
        try:
            result, usage = await labeller.alabel(t, taxonomy)
        except TransientError as e:
            in_tok += e.usage.input_tokens
            out_tok += e.usage.output_tokens
            last_error = f"{e.kind}: {e.message}"
            if calls >= max_attempts:
                break
            await sleep(
                backoff_delay(
                    calls,
                    base_delay_s=base_delay_s,
                    max_delay_s=max_delay_s,
                    retry_after_s=e.retry_after_s,
                )
            )
            continue
        except InvalidAnswerError as e:
            in_tok += e.usage.input_tokens
            out_tok += e.usage.output_tokens
            invalid += 1
            last_error = f"{e.kind}: {e.message}"
            if invalid >= max_invalid_attempts:
                break
            continue  # an answer came back, so the service is fine: no need to wait
        except FatalError as e:
            in_tok += e.usage.input_tokens
            out_tok += e.usage.output_tokens
            last_error = f"{e.kind}: {e.message}"
            record = PrelabelRecord(key, None, last_error, in_tok, out_tok, calls)
            return _Outcome(record, calls, abort=e if e.abort_run else None)
        except Exception as e:  # a bug in one item must not lose the rest of the run
            last_error = f"unexpected {type(e).__name__}: {e}"
            break
        record = PrelabelRecord(
            key,
            result,
            None,
            in_tok + usage.input_tokens,
            out_tok + usage.output_tokens,
            calls,
        )
        return _Outcome(record, calls)
    return _Outcome(PrelabelRecord(key, None, last_error, in_tok, out_tok, max(calls, 1)), calls)


async def run_prelabels(
    trajectories: Iterable[Trajectory],
    labeller: AnyLabeller,
    taxonomy: Taxonomy,
    store: PrelabelStore,
    *,
    concurrency: int = 8,
    max_attempts: int = 5,
    max_invalid_attempts: int = 2,
    base_delay_s: float = 1.0,
    max_delay_s: float = 60.0,
    limit: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> RunStats:
    """Pre-label ``trajectories`` into ``store``; returns counts, calls, tokens and cost.

    ``limit`` caps how many trajectories are sent to the labeller in this run (cached ones do not
    count), so a trial run spends a known amount. ``progress(done, total)`` is called with the
    cached items already counted as done. Raises ``PrelabelRunAborted`` only for a fatal error
    that dooms every call (after saving everything received)."""
    if concurrency < 1:
        raise ValueError("concurrency must be >= 1")
    if max_attempts < 1:
        raise ValueError("max_attempts must be >= 1")

    stats = RunStats()
    # The cache is checked up front, in this thread, before any call: store implementations
    # (SQLAlchemy sessions) are not assumed to be thread- or task-safe.
    pending: list[tuple[Trajectory, PrelabelKey]] = []
    seen: set[PrelabelKey] = set()
    for t in trajectories:
        key = _key(t, labeller, taxonomy)
        if key in seen:
            continue
        seen.add(key)
        cached = store.get(key)
        if cached is not None and cached.ok:
            stats.cached += 1
            continue
        if limit is not None and len(pending) >= limit:
            continue
        pending.append((t, key))

    total = stats.cached + len(pending)
    done = stats.cached
    if progress is not None:
        progress(done, total)

    def finish(outcome: _Outcome) -> None:
        nonlocal done
        rec = outcome.record
        store.save(rec)
        stats.calls += outcome.calls
        stats.input_tokens += rec.input_tokens
        stats.output_tokens += rec.output_tokens
        if rec.ok:
            stats.labelled += 1
        else:
            stats.failed += 1
            stats.errors.append(f"{rec.key.trajectory_id}: {rec.error}")
        done += 1
        if progress is not None:
            progress(done, total)

    abort: FatalError | None = None

    if not _is_async(labeller):
        sync_labeller: Labeller = labeller  # type: ignore[assignment]
        for t, key in pending:
            try:
                result = sync_labeller.label(t, taxonomy.version)
                rec = PrelabelRecord(key, result, None, 0, 0, 1)
            except Exception as e:  # one odd trajectory must not stop the heuristic pass
                rec = PrelabelRecord(key, None, f"{type(e).__name__}: {e}", 0, 0, 1)
            finish(_Outcome(rec, 0))
    else:
        async_labeller: AsyncLabeller = labeller  # type: ignore[assignment]
        sem = asyncio.Semaphore(concurrency)
        stop = asyncio.Event()

        async def worker(t: Trajectory, key: PrelabelKey) -> None:
            nonlocal abort
            async with sem:
                if stop.is_set():
                    return  # not attempted: stays unlabelled, a later run will try it
                outcome = await _label_one(
                    t,
                    key,
                    async_labeller,
                    taxonomy,
                    max_attempts=max_attempts,
                    max_invalid_attempts=max(1, max_invalid_attempts),
                    base_delay_s=base_delay_s,
                    max_delay_s=max_delay_s,
                    sleep=sleep,
                    stop=stop,
                )
            if outcome.calls == 0 and stop.is_set():
                return
            # Saved here, as each item completes, not at the end of the run.
            finish(outcome)
            if outcome.abort is not None and abort is None:
                abort = outcome.abort
                stop.set()

        # One task per item, gated by the semaphore; fine for the tens of thousands of
        # trajectories a study has (a task costs about a kilobyte while it waits).
        await asyncio.gather(*(worker(t, key) for t, key in pending))

    stats.estimated_cost_usd = estimate_cost_usd(
        labeller.model, stats.input_tokens, stats.output_tokens
    )
    if abort is not None:
        raise PrelabelRunAborted(f"pre-labelling stopped: {abort.message}", stats)
    return stats


def run_prelabels_sync(
    trajectories: Iterable[Trajectory],
    labeller: AnyLabeller,
    taxonomy: Taxonomy,
    store: PrelabelStore,
    **kwargs: object,
) -> RunStats:
    """``run_prelabels`` for callers without an event loop (the CLI, a Streamlit script run)."""
    return asyncio.run(
        run_prelabels(trajectories, labeller, taxonomy, store, **kwargs)  # type: ignore[arg-type]
    )
