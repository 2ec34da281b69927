"""When to call an LLM again, and how long to wait first (built on ``tenacity``).

- ``TransientError`` (HTTP 429, 408, 5xx, timeouts, network errors): retried up to
  ``max_attempts`` calls in total, waiting an exponential back-off with "equal jitter"
  (``base_delay_s * 2**n`` capped at ``max_delay_s``, half fixed and half random so that workers
  hit by the same 429 spread out), or the server's Retry-After when that is longer (capped at
  ``RETRY_AFTER_CEILING_S``).
- ``InvalidAnswerError`` (malformed JSON, empty candidates, safety block): retried without a
  pause (an answer came back, so the service is fine) at most ``max_invalid_attempts`` calls in
  total, since a deterministic model tends to repeat itself.
- ``FatalError`` and anything else: not retried.

Every call ends on time, whatever the server does (a server that drips one byte a second resets
an HTTP client's read timeout with each byte, so the clients put a total deadline on each
request themselves), and the retries of one item end by ``item_deadline_s`` after its first
call, and every item's by the run's deadline (``Deadline``): a call still running then is
cancelled, a back-off that would end past it is not waited out, and the item fails with
``TransientError(kind="deadline")``.

Tokens billed for failed calls are added up, so the cost of a run counts every call made.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
)

from llm.errors import InvalidAnswerError, LLMError, TransientError
from llm.usage import Usage, UsageTally

__all__ = [
    "DEFAULT_ITEM_DEADLINE_S",
    "RETRY_AFTER_CEILING_S",
    "Attempts",
    "Deadline",
    "RetryPolicy",
    "backoff_delay",
    "call_with_retries",
    "parse_retry_after",
]

T = TypeVar("T")

# A Retry-After beyond this (e.g. a daily quota saying "come back in 6 hours") is not waited out
# in full: the item fails after its attempts and a later run picks it up.
RETRY_AFTER_CEILING_S = 900.0
# All the calls and pauses for one item: five calls at the default 120 s request limit with
# their back-offs fit, a server that never answers does not hold a worker longer.
DEFAULT_ITEM_DEADLINE_S = 900.0


class Deadline:
    """A point in time (``time.monotonic``) by which something must be over; ``None``
    seconds: never."""

    def __init__(self, seconds: float | None, *, clock: Callable[[], float] = time.monotonic):
        self.seconds = seconds
        self._clock = clock
        self._at = None if seconds is None else clock() + seconds

    def remaining(self) -> float | None:
        """Seconds left (never below 0), or None without a deadline."""
        return None if self._at is None else max(0.0, self._at - self._clock())

    def expired(self) -> bool:
        left = self.remaining()
        return left is not None and left <= 0


def _earliest(*deadlines: Deadline | None) -> float | None:
    left = [r for d in deadlines if d is not None and (r := d.remaining()) is not None]
    return min(left) if left else None


def parse_retry_after(value: object) -> float | None:
    """A Retry-After header value in seconds (it may be a number or an HTTP date), or None."""
    if value is None:
        return None
    text = str(value).strip()
    if not text:
        return None
    try:
        return max(0.0, float(text))
    except ValueError:
        with contextlib.suppress(TypeError, ValueError):
            when = email.utils.parsedate_to_datetime(text)
            return max(0.0, when.timestamp() - time.time())
    return None


def backoff_delay(
    attempt: int,
    *,
    base_delay_s: float,
    max_delay_s: float,
    retry_after_s: float | None = None,
    rng: random.Random | None = None,
) -> float:
    """Delay before retry number ``attempt`` (1 = first retry).

    Half of the exponential step is fixed, half random: never an immediate retry, never a burst
    of workers in lock-step. A server's Retry-After is a floor: retrying earlier would only earn
    another 429."""
    step = min(max_delay_s, base_delay_s * (2 ** max(attempt - 1, 0)))
    r = rng.random() if rng is not None else random.random()
    delay = step / 2 + r * step / 2
    if retry_after_s is not None:
        delay = max(delay, min(retry_after_s, RETRY_AFTER_CEILING_S))
    return delay


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 5
    max_invalid_attempts: int = 2
    base_delay_s: float = 1.0
    max_delay_s: float = 60.0
    # Every call and pause for one item, from its first call (None: no limit).
    item_deadline_s: float | None = DEFAULT_ITEM_DEADLINE_S
    # Every item of one run, from its start (None: no limit); the runner and the judge start it.
    run_deadline_s: float | None = None

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        for name in ("item_deadline_s", "run_deadline_s"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be positive (or None for no limit)")


@dataclass
class Attempts(UsageTally):
    """What the calls for one item cost, whatever their outcome."""

    calls: int = 0
    invalid: int = 0


async def call_with_retries(
    call: Callable[[], Awaitable[tuple[T, Usage]]],
    policy: RetryPolicy,
    attempts: Attempts,
    *,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    stop: asyncio.Event | None = None,
    run_deadline: Deadline | None = None,
) -> T:
    """Call until an answer (a label, a verdict) comes back or the policy gives up; the last
    error is re-raised.

    ``attempts`` is filled in as calls are made (also when this raises). ``stop`` set by the
    runner after a fatal error elsewhere: no further retries are started. The item's deadline
    (``policy.item_deadline_s``) starts now; ``run_deadline`` is the run's, shared by its
    items."""
    max_invalid = max(1, policy.max_invalid_attempts)
    item_deadline = Deadline(policy.item_deadline_s)

    def give_up(state: RetryCallState) -> bool:
        if stop is not None and stop.is_set():
            return True
        if attempts.calls >= policy.max_attempts:
            return True
        left = _earliest(item_deadline, run_deadline)
        if left is not None and state.upcoming_sleep >= left:
            return True  # the pause alone would outlast the deadline
        err = state.outcome.exception() if state.outcome is not None else None
        return isinstance(err, InvalidAnswerError) and attempts.invalid >= max_invalid

    def wait(state: RetryCallState) -> float:
        err = state.outcome.exception() if state.outcome is not None else None
        if not isinstance(err, TransientError):
            return 0.0  # an answer came back: the service is fine, no need to wait
        return backoff_delay(
            state.attempt_number,
            base_delay_s=policy.base_delay_s,
            max_delay_s=policy.max_delay_s,
            retry_after_s=err.retry_after_s,
        )

    async def pause(delay: float) -> None:
        if delay > 0:
            await sleep(delay)

    def deadline_error() -> TransientError:
        if run_deadline is not None and run_deadline.expired():
            return TransientError(
                f"the run's deadline of {run_deadline.seconds:g}s passed", kind="deadline")
        return TransientError(
            f"no answer within the item's deadline of {policy.item_deadline_s:g}s "
            f"({attempts.calls} call(s))", kind="deadline")

    async def once() -> T:
        left = _earliest(item_deadline, run_deadline)
        if left is not None and left <= 0:
            raise deadline_error()
        attempts.calls += 1
        try:
            async with asyncio.timeout(left):
                result, usage = await call()
        except TimeoutError:
            # This deadline, not the request's own limit (the clients turn that into a
            # TransientError inside): nothing more is tried for this item.
            raise deadline_error() from None
        except LLMError as e:
            attempts.add(e.usage)
            if isinstance(e, InvalidAnswerError):
                attempts.invalid += 1
            raise
        attempts.add(usage)
        return result

    retrying = AsyncRetrying(
        retry=retry_if_exception_type((TransientError, InvalidAnswerError)),
        stop=give_up,
        wait=wait,
        sleep=pause,
        reraise=True,
    )
    result: T = await retrying(once)
    return result
