"""The one interface every LLM client gives: a JSON answer in a schema, and its cost.

``GeminiJsonClient`` (``gemini.py``) and ``OpenAICompatClient`` (``openai_compat.py``) are the
two; the registry (``backends.py``) builds the one a backend name means. Their users (the
pre-labellers, the LLM judge) drive this interface and never an SDK.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from llm.answer import AnswerSchema
    from llm.usage import Usage

__all__ = ["JsonLLM"]


class JsonLLM(Protocol):
    """``await client.complete(prompt, schema) -> (answer, usage)``: the answer validated against
    ``schema``, or one of ``llm.errors``' classes. ``structured_output``: how the last answer
    was asked for (None before the first)."""

    model: str

    @property
    def structured_output(self) -> str | None: ...

    def complete(
        self, prompt: str, schema: AnswerSchema
    ) -> Awaitable[tuple[dict[str, Any], Usage]]: ...

    def aclose(self) -> Awaitable[None]: ...
