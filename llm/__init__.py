"""The LLM transport: clients behind one interface, retries and deadlines, the privacy
interlock, prices, endpoints, errors, structured answers and usage, and the registry of
backends. It imports only the core (``faillab_core``) and the SDKs; what is asked and what an
answer means are its users' (``opinions``).

The names faces and callers need are re-exported here; importing this package imports no SDK
(a client's module is loaded when a client is built).
"""

from __future__ import annotations

from llm.answer import AnswerField, AnswerSchema
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
from llm.retry import Attempts, Deadline, RetryPolicy, call_with_retries
from llm.usage import Usage, UsageTally

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
