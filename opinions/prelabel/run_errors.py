"""What can stop a pre-labelling run, beside what a single LLM call raises (``llm.errors``).

``PrelabelServiceError`` is the transport's ``LLMServiceError`` itself: one class for every
problem the person running pre-labelling can fix (options, configuration, consent), so a refusal
from the privacy interlock and a bad option are caught alike. The runner raises
``PrelabelRunAborted`` after a run stopped early on a fatal error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from faillab_core.errors import FaillabError
from llm.errors import LLMServiceError

if TYPE_CHECKING:
    from opinions.prelabel.base import RunStats

__all__ = ["PrelabelRunAborted", "PrelabelServiceError"]

#: A problem the person running pre-labelling can fix (one line, no traceback).
PrelabelServiceError = LLMServiceError


class PrelabelRunAborted(FaillabError):
    """Raised after a run stopped early on a fatal error; ``stats`` holds what was done."""

    def __init__(self, message: str, stats: RunStats) -> None:
        super().__init__(message)
        self.stats = stats
