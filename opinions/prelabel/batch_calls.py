"""The Batch API path's calls to the service (create, list, get): retried when refused for
now, each ending within its request deadline and all within the step's deadline.

The SDK's batch calls are synchronous and its timeout bounds each read, not a call, so a server
that drips bytes would hold one for ever: each call runs in a daemon thread that is left behind
(ending with its connection) when it overstays (``within``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, stop_any
from tenacity.stop import stop_base

from llm.retry import Deadline, backoff_delay
from opinions.prelabel.batch_state import BatchError

__all__ = ["Calls", "within"]


def _refused_for_now(err: BaseException) -> bool:
    """The service said the call was not carried out and may be asked again (429, 408, 5xx).
    Network errors are not retried: a job may have been created although its answer was lost,
    and asking again would submit (and bill) it twice."""
    from google.genai import errors as genai_errors

    code = err.code if isinstance(err, genai_errors.APIError) else None
    return isinstance(code, int) and (code in (408, 429) or code >= 500)


def _wait(state: RetryCallState) -> float:
    from google.genai import errors as genai_errors

    from llm.gemini import retry_after_seconds

    err = state.outcome.exception() if state.outcome is not None else None
    after = retry_after_seconds(err) if isinstance(err, genai_errors.APIError) else None
    return backoff_delay(
        state.attempt_number, base_delay_s=2.0, max_delay_s=60.0, retry_after_s=after
    )


class _NoAnswer(TimeoutError):
    """A job-level call that did not end within its deadline (not retried: a job may have
    been created although its answer was lost)."""


def within(fn: Callable[[], Any], seconds: float) -> Any:
    """``fn()``, or ``_NoAnswer`` once ``seconds`` have passed. The SDK's calls are synchronous
    and their timeout bounds each read, not the call: the call runs in a daemon thread, which is
    left behind (and ends with its connection) when it overstays."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # handed to the caller below
            box["error"] = e

    worker = threading.Thread(target=run, name="batch-call", daemon=True)
    worker.start()
    worker.join(max(0.0, seconds))
    if worker.is_alive():
        raise _NoAnswer(f"no answer within {seconds:g}s")
    if "error" in box:
        raise box["error"]
    return box["value"]


@dataclass(frozen=True)
class Calls:
    """How the job-level calls (create, list, get) are made: asked again up to ``attempts``
    times when the service refuses them for now, waiting as the interactive runner does
    (Retry-After respected), each ending within ``timeout_s`` and all by ``deadline``."""

    attempts: int
    sleep: Callable[[float], None]
    timeout_s: float
    deadline: Deadline

    def expired_error(self, running: int = 0) -> BatchError:
        jobs = f"{running} job(s) still running, " if running else ""
        return BatchError(
            f"the batch step stopped at its deadline of {self.deadline.seconds:g}s "
            f"(FAILLAB_BATCH_DEADLINE); {jobs}nothing was lost: run the same command again "
            "later to continue"
        )

    def __call__(self, fn: Callable[[], Any], what: str) -> Any:
        def bounded() -> Any:
            left = self.deadline.remaining()
            if left is not None and left <= 0:
                raise self.expired_error()
            return within(fn, self.timeout_s if left is None else min(self.timeout_s, left))

        deadline = self.deadline

        class _PauseOutlastsDeadline(stop_base):
            def __call__(self, state: RetryCallState) -> bool:
                left = deadline.remaining()
                return left is not None and state.upcoming_sleep >= left

        retrying = Retrying(
            retry=retry_if_exception(_refused_for_now),
            stop=stop_any(stop_after_attempt(self.attempts), _PauseOutlastsDeadline()),
            wait=_wait,
            sleep=self.sleep,
            reraise=True,
        )
        try:
            return retrying(bounded)
        except BatchError:
            raise
        except _NoAnswer as e:
            if self.deadline.expired():  # cut short by the step's deadline, not its own
                raise self.expired_error() from e
            raise BatchError(
                f"{what}: {e} (FAILLAB_GEMINI_TIMEOUT; the step's deadline is "
                "FAILLAB_BATCH_DEADLINE); nothing was lost, run the same command "
                "again to continue"
            ) from e
        except Exception as e:  # the SDK's error types vary by transport
            raise BatchError(
                f"{what} failed: {type(e).__name__}: {e}; nothing was lost, run "
                "the same command again to continue"
            ) from e
