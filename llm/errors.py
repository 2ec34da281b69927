"""What can go wrong in a call to an LLM, as exception types the callers act on.

Clients raise ``TransientError`` / ``InvalidAnswerError`` / ``FatalError`` (all ``LLMError``) to
tell the retry policy (``retry.py``) what to do next. ``LLMServiceError`` is a problem the person
running the work can fix, shown as one line: ``LLMConfigError`` (no key, no address, no model)
and ``ConsentRequiredError`` (data would leave the machine unacknowledged). Every one derives
from the one error root, ``FaillabError``.
"""

from __future__ import annotations

from faillab_core.errors import FaillabError
from llm.usage import Usage

__all__ = [
    "ConsentRequiredError",
    "FatalError",
    "InvalidAnswerError",
    "LLMConfigError",
    "LLMError",
    "LLMServiceError",
    "TransientError",
]


class LLMError(FaillabError):
    """A call that gave no usable answer. ``usage`` carries tokens billed for a call that still
    failed."""

    kind = "error"

    def __init__(self, message: str, *, usage: Usage | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.usage = usage or Usage()


class TransientError(LLMError):
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


class InvalidAnswerError(LLMError):
    """The service answered, but not with a usable answer (malformed, empty, blocked)."""

    def __init__(self, message: str, *, kind: str = "malformed", usage: Usage | None = None):
        super().__init__(message, usage=usage)
        self.kind = kind


class FatalError(LLMError):
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


class LLMServiceError(FaillabError):
    """A problem the person running LLM work can fix (one line, no traceback)."""


class LLMConfigError(LLMServiceError, RuntimeError):
    """A client cannot be built (no key, no address, no model): says what to set."""


class ConsentRequiredError(LLMServiceError):
    """Data would leave the machine without the person's explicit acknowledgement."""
