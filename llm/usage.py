"""What LLM calls were billed: the tokens of one call, and the one tally that adds them up."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

__all__ = ["Billed", "Usage", "UsageTally"]


@dataclass(frozen=True)
class Usage:
    """The tokens one call was billed."""

    input_tokens: int = 0
    output_tokens: int = 0  # includes "thinking" tokens: they are billed as output


class Billed(Protocol):
    """Anything that says what it was billed: a call's ``Usage``, a stored pre-label, a tally."""

    @property
    def input_tokens(self) -> int: ...

    @property
    def output_tokens(self) -> int: ...


@dataclass
class UsageTally:
    """Tokens billed so far: the one counter that a run, one item's retries, the LLM judge and
    a Batch API step each extend with their own counts, so tokens are added up in one place."""

    input_tokens: int = 0
    output_tokens: int = 0

    def add(self, billed: Billed) -> None:
        self.input_tokens += billed.input_tokens
        self.output_tokens += billed.output_tokens

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens
