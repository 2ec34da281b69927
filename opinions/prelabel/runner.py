"""Run a labeller over many trajectories: cached, resumable, bounded, and never crashing.

Policy, in the order it applies to one trajectory:

1. Cache: the store is asked for ``PrelabelKey(trajectory id, taxonomy version, prompt version,
   labeller model)`` before anything is sent. A stored result is reused (zero calls); a stored
   *failure* is retried, so a later run picks up what an earlier run could not label.
2. Concurrency: at most ``concurrency`` labeller calls are in flight (an ``asyncio.Semaphore``).
3. Retries: ``retry.py`` (remote labellers only; the Gemini SDK's own retries are off so that
   ``RunStats.calls`` counts real HTTP requests). A ``FatalError`` with ``abort_run`` set (bad
   credentials, unknown model) starts no new calls, and ``run_prelabels`` raises
   ``PrelabelRunAborted`` after the in-flight items have been saved; any other error is that
   item's recorded failure.
4. Each outcome is saved as soon as it arrives, so a run killed midway resumes without paying
   twice for what it already received.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from llm.errors import FatalError, LLMError
from llm.pricing import estimate_cost_usd, labeller_prices
from llm.retry import DEFAULT_ITEM_DEADLINE_S, Attempts, Deadline, RetryPolicy, call_with_retries
from opinions.prelabel.base import PrelabelKey, PrelabelRecord, PrelabelStore, RunStats
from opinions.prelabel.protocol import Labeller
from opinions.prelabel.run_errors import PrelabelRunAborted
from trajectories.model import Trajectory

if TYPE_CHECKING:
    from taxonomy import Taxonomy

__all__ = ["prelabel_key", "run_prelabels", "run_prelabels_sync", "trajectory_key_id"]


@dataclass
class _Outcome:
    record: PrelabelRecord
    calls: int
    abort: FatalError | None = None


def trajectory_key_id(t: Trajectory) -> str:
    return t.id or t.content_id()


def prelabel_key(t: Trajectory, labeller: Labeller, taxonomy: Taxonomy) -> PrelabelKey:
    return PrelabelKey(
        trajectory_id=trajectory_key_id(t),
        taxonomy_version=taxonomy.version,
        prompt_version=labeller.prompt_version,
        model=labeller.model,
    )


async def _label_one(
    t: Trajectory,
    key: PrelabelKey,
    labeller: Labeller,
    taxonomy: Taxonomy,
    policy: RetryPolicy,
    sleep: Callable[[float], Awaitable[object]],
    stop: asyncio.Event,
    run_deadline: Deadline,
) -> _Outcome:
    tried = Attempts()
    error: str
    abort: FatalError | None = None
    try:
        if labeller.remote:
            result = await call_with_retries(
                lambda: labeller.alabel(t, taxonomy), policy, tried, sleep=sleep, stop=stop,
                run_deadline=run_deadline,
            )
        else:
            # Local rules are deterministic: a retry would repeat the same answer.
            tried.calls = 1
            result, _ = await labeller.alabel(t, taxonomy)
    except LLMError as e:
        error = f"{e.kind}: {e.message}"
        if isinstance(e, FatalError) and e.abort_run:
            abort = e
    except Exception as e:  # a bug in one item must not lose the rest of the run
        error = f"unexpected {type(e).__name__}: {e}"
    else:
        record = PrelabelRecord(
            key, result, None, tried.input_tokens, tried.output_tokens, max(tried.calls, 1)
        )
        return _Outcome(record, tried.calls if labeller.remote else 0)
    record = PrelabelRecord(
        key, None, error, tried.input_tokens, tried.output_tokens, max(tried.calls, 1)
    )
    return _Outcome(record, tried.calls if labeller.remote else 0, abort)


async def run_prelabels(
    trajectories: Iterable[Trajectory],
    labeller: Labeller,
    taxonomy: Taxonomy,
    store: PrelabelStore,
    *,
    concurrency: int = 8,
    max_attempts: int = 5,
    max_invalid_attempts: int = 2,
    base_delay_s: float = 1.0,
    max_delay_s: float = 60.0,
    item_deadline_s: float | None = DEFAULT_ITEM_DEADLINE_S,
    run_deadline_s: float | None = None,
    limit: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> RunStats:
    """Pre-label ``trajectories`` into ``store``; returns counts, calls, tokens and cost.

    ``limit`` caps how many trajectories are sent to the labeller in this run (cached ones do not
    count), so a trial run spends a known amount. ``item_deadline_s`` bounds every call and
    pause for one item, ``run_deadline_s`` every item of the run (``retry.py``; None: no
    limit). ``progress(done, total)`` is called with the
    cached items already counted as done. Raises ``PrelabelRunAborted`` only for a fatal error
    that dooms every call (after saving everything received)."""
    if concurrency < 1:
        raise ValueError("concurrency must be >= 1")
    policy = RetryPolicy(max_attempts, max_invalid_attempts, base_delay_s, max_delay_s,
                         item_deadline_s=item_deadline_s, run_deadline_s=run_deadline_s)
    # Started before the cache is read: the run's deadline covers the whole run.
    run_deadline = Deadline(run_deadline_s)

    stats = RunStats()
    # The cache is checked up front, in this task, before any call: store implementations
    # (SQLAlchemy sessions) are not assumed to be thread- or task-safe.
    pending: list[tuple[Trajectory, PrelabelKey]] = []
    seen: set[PrelabelKey] = set()
    for t in trajectories:
        key = prelabel_key(t, labeller, taxonomy)
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
        stats.add(rec)
        if rec.ok:
            stats.labelled += 1
        else:
            stats.failed += 1
            stats.errors.append(f"{rec.key.trajectory_id}: {rec.error}")
        done += 1
        if progress is not None:
            progress(done, total)

    abort: FatalError | None = None
    sem = asyncio.Semaphore(concurrency)
    stop = asyncio.Event()

    async def worker(t: Trajectory, key: PrelabelKey) -> None:
        nonlocal abort
        async with sem:
            if stop.is_set():
                return  # not attempted: stays unlabelled, a later run will try it
            outcome = await _label_one(t, key, labeller, taxonomy, policy, sleep, stop,
                                       run_deadline)
        # Saved here, as each item completes, not at the end of the run.
        finish(outcome)
        if outcome.abort is not None and abort is None:
            abort = outcome.abort
            stop.set()

    # One task per item, gated by the semaphore; fine for the tens of thousands of trajectories
    # a study has (a task costs about a kilobyte while it waits). Larger runs: the Batch API.
    await asyncio.gather(*(worker(t, key) for t, key in pending))

    stats.estimated_cost_usd = estimate_cost_usd(
        labeller.model, stats.input_tokens, stats.output_tokens, prices=labeller_prices(labeller)
    )
    if abort is not None:
        raise PrelabelRunAborted(f"pre-labelling stopped: {abort.message}", stats)
    return stats


def run_prelabels_sync(
    trajectories: Iterable[Trajectory],
    labeller: Labeller,
    taxonomy: Taxonomy,
    store: PrelabelStore,
    **kwargs: object,
) -> RunStats:
    """``run_prelabels`` for callers without an event loop (the CLI, a Streamlit script run)."""
    return asyncio.run(
        run_prelabels(trajectories, labeller, taxonomy, store, **kwargs)  # type: ignore[arg-type]
    )
