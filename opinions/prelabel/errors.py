"""What can go wrong while pre-labelling, as exception types the callers act on.

Labellers raise ``TransientError`` / ``InvalidAnswerError`` / ``FatalError`` to tell the retry
policy (``retry.py``) what to do next; the runner raises ``PrelabelRunAborted``; the service and
the batch path raise ``PrelabelServiceError`` (and its ``ConsentRequiredError``) for problems the
person running pre-labelling can fix.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from faillab_core.errors import FaillabError
from opinions.prelabel.protocol import Usage

if TYPE_CHECKING:
    from opinions.prelabel.base import RunStats

__all__ = [
    "ConsentRequiredError",
    "FatalError",
    "InvalidAnswerError",
    "LabellerError",
    "PrelabelRunAborted",
    "PrelabelServiceError",
    "TransientError",
]


class LabellerError(FaillabError):
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


class PrelabelRunAborted(FaillabError):
    """Raised after a run stopped early on a fatal error; ``stats`` holds what was done."""

    def __init__(self, message: str, stats: RunStats) -> None:
        super().__init__(message)
        self.stats = stats


class PrelabelServiceError(FaillabError):
    """A problem the person running pre-labelling can fix (one line, no traceback)."""


class ConsentRequiredError(PrelabelServiceError):
    """Data would leave the machine without the person's explicit acknowledgement."""
