"""The LLM transport: clients behind one interface, retries and deadlines, the privacy
interlock, prices, endpoints, errors, structured answers and usage, and the registry of
backends. It imports only the core (``faillab_core``) and the SDKs; what is asked and what an
answer means are its users' (``opinions``).

The names faces and callers need are re-exported here; importing this package imports no SDK
(a client's module is loaded when a client is built), and the answer schemas and the retry
policy (pydantic, asyncio, tenacity) only when first named, so a command's ``--help`` that
lists the backends stays light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from llm.backends import Backend, Connection, backend, backend_names, backends, is_backend
from llm.client import JsonLLM
from llm.endpoints import (
    EndpointAddressError,
    OpenAIEndpoint,
    describe_structured_output,
    is_own_address,
)
from llm.errors import (
    ConsentRequiredError,
    FatalError,
    InvalidAnswerError,
    LLMConfigError,
    LLMError,
    LLMServiceError,
    TransientError,
)
from llm.names import DEFAULT_GEMINI_MODEL
from llm.pricing import estimate_cost_usd
from llm.privacy import (
    ALLOW_EXTERNAL_ENV,
    Destination,
    openai_privacy_notice,
    privacy_notice,
    require_destination_consent,
)
from llm.usage import Usage, UsageTally

if TYPE_CHECKING:
    from llm.answer import AnswerField, AnswerSchema
    from llm.retry import Attempts, Deadline, RetryPolicy, call_with_retries

#: Names loaded when first asked for, by the module that defines them.
_LAZY = {
    "AnswerField": "llm.answer",
    "AnswerSchema": "llm.answer",
    "Attempts": "llm.retry",
    "Deadline": "llm.retry",
    "RetryPolicy": "llm.retry",
    "call_with_retries": "llm.retry",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'llm' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value

__all__ = [
    "ALLOW_EXTERNAL_ENV",
    "DEFAULT_GEMINI_MODEL",
    "AnswerField",
    "AnswerSchema",
    "Attempts",
    "Backend",
    "Connection",
    "ConsentRequiredError",
    "Deadline",
    "Destination",
    "EndpointAddressError",
    "FatalError",
    "InvalidAnswerError",
    "JsonLLM",
    "LLMConfigError",
    "LLMError",
    "LLMServiceError",
    "OpenAIEndpoint",
    "RetryPolicy",
    "TransientError",
    "Usage",
    "UsageTally",
    "backend",
    "backend_names",
    "backends",
    "call_with_retries",
    "describe_structured_output",
    "estimate_cost_usd",
    "is_backend",
    "is_own_address",
    "openai_privacy_notice",
    "privacy_notice",
    "require_destination_consent",
]
