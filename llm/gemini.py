"""JSON answers from Gemini through the official ``google-genai`` SDK (Developer API or Vertex AI).

One call per answer: the prompt and a structured-output schema (``answer.AnswerSchema`` in the
API's Schema form, so an enum field cannot be answered outside its values). Temperature 0, JSON
output. The SDK's own retries are disabled: the caller retries (``retry.py``), and every HTTP
request is then one counted call.

Failures are turned into the runner's error classes (``errors.py``): 429/408/5xx/timeouts/network
-> ``TransientError`` (with Retry-After when the server gives one); malformed JSON, empty
candidates and safety blocks -> ``InvalidAnswerError``; 401/403/404 -> ``FatalError(abort_run)``
with a message saying what to fix; other 4xx -> ``FatalError`` for that item only.

``GeminiJsonClient`` is the client (the LLM judge and the Gemini pre-labeller drive it); the
Batch API path reads its jobs' answers with ``GeminiJsonClient.parse`` and submits them through
the SDK client it holds (``GeminiJsonClient.sdk``).

Privacy: read ``privacy.privacy_notice`` before sending MIMIC-derived text anywhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import re
from typing import Any

from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from llm.answer import AnswerSchema
from llm.errors import FatalError, InvalidAnswerError, LLMConfigError, TransientError
from llm.names import DEFAULT_GEMINI_MODEL, GEMINI
from llm.retry import parse_retry_after
from llm.usage import Usage

__all__ = [
    "DEFAULT_MODEL",
    "GeminiConfigError",
    "GeminiJsonClient",
    "classify_api_error",
    "json_config",
    "make_client",
    "response_text",
    "retry_after_seconds",
    "transient_error",
    "wire_schema",
]

DEFAULT_MODEL = DEFAULT_GEMINI_MODEL

_BLOCK_FINISH_REASONS = frozenset(
    {"SAFETY", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "RECITATION", "IMAGE_SAFETY"}
)


def _transient_exception_types() -> tuple[type[BaseException], ...]:
    """Network-level failures worth retrying, from whichever HTTP library the SDK uses."""
    found: list[type[BaseException]] = [TimeoutError, ConnectionError]
    for module_name in ("httpx", "httpx2", "aiohttp"):
        try:
            module = __import__(module_name)
        except ImportError:
            continue
        for attr in ("TimeoutException", "TransportError", "ClientError", "ServerTimeoutError"):
            cls = getattr(module, attr, None)
            if isinstance(cls, type) and issubclass(cls, BaseException):
                found.append(cls)
    return tuple(found)


_TRANSIENT_EXC = _transient_exception_types()


class GeminiConfigError(LLMConfigError):
    """The client cannot be built (e.g. no API key): a message for the person running it."""


_WIRE_TYPES = {
    "enum": types.Type.STRING,
    "number": types.Type.NUMBER,
    "integer": types.Type.INTEGER,
    "string": types.Type.STRING,
}


@functools.lru_cache(maxsize=64)
def wire_schema(schema: AnswerSchema) -> types.Schema:
    """``schema`` in the API's Schema form (the fields, their order, enums and bounds)."""
    props: dict[str, types.Schema] = {}
    for name, f in schema.fields:
        lo, hi = f.bounds if f.bounds is not None else (None, None)
        props[name] = types.Schema(
            type=_WIRE_TYPES[f.kind],
            format="enum" if f.kind == "enum" else None,
            enum=list(f.choices) if f.kind == "enum" else None,
            nullable=f.nullable or None,
            minimum=lo,
            maximum=hi,
            description=f.description,
        )
    return types.Schema(
        type=types.Type.OBJECT,
        properties=props,
        required=schema.required,
        property_ordering=[n for n, _ in schema.fields],
    )


@functools.lru_cache(maxsize=64)
def json_config(schema: AnswerSchema) -> types.GenerateContentConfig:
    """Deterministic JSON answers in ``schema``, the same for interactive and batch requests
    (built once per schema: the request carries the API's Schema form, since handing the SDK a
    pydantic class would make it regenerate and convert the JSON schema on every call)."""
    return types.GenerateContentConfig(
        temperature=0.0, response_mime_type="application/json", response_schema=wire_schema(schema)
    )


def retry_after_seconds(err: genai_errors.APIError) -> float | None:
    """Retry-After header (seconds or HTTP date), else google.rpc.RetryInfo's retryDelay."""
    headers = getattr(getattr(err, "response", None), "headers", None)
    value = None
    if headers is not None:
        with contextlib.suppress(Exception):
            value = headers.get("retry-after")
    after = parse_retry_after(value)
    if after is not None:
        return after
    details = err.details if isinstance(err.details, dict) else {}
    inner = details.get("error", details)
    for d in inner.get("details", []) if isinstance(inner, dict) else []:
        if isinstance(d, dict) and str(d.get("@type", "")).endswith("RetryInfo"):
            m = re.fullmatch(r"\s*([0-9.]+)s\s*", str(d.get("retryDelay", "")))
            if m:
                return float(m.group(1))
    return None


def _usage(response: types.GenerateContentResponse) -> Usage:
    um = response.usage_metadata
    if um is None:
        return Usage()
    # Thinking tokens are billed as output, so they count towards the cost estimate.
    out = (um.candidates_token_count or 0) + (um.thoughts_token_count or 0)
    return Usage(input_tokens=um.prompt_token_count or 0, output_tokens=out)


def make_client(
    *,
    vertexai: bool = False,
    api_key: str | None = None,
    project: str | None = None,
    location: str | None = None,
    base_url: str | None = None,
    timeout_s: float = 60,
) -> genai.Client:
    """The SDK client, Developer API (API key) or Vertex AI (project, location and
    application-default credentials), with the SDK's own retries off. ``GeminiConfigError``
    says what is missing."""
    http_options = types.HttpOptions(
        base_url=base_url
        or os.environ.get("GOOGLE_VERTEX_BASE_URL" if vertexai else "GOOGLE_GEMINI_BASE_URL")
        or None,
        # HttpOptions.timeout is in milliseconds.
        timeout=max(1, round(timeout_s * 1000)),
        # attempts=1 switches the SDK's tenacity retries off entirely (and also its implicit
        # retry of connection errors): the runner owns retries, so calls are exact.
        retry_options=types.HttpRetryOptions(attempts=1),
    )
    if vertexai:
        project = project or os.environ.get("GOOGLE_CLOUD_PROJECT")
        if not project:
            raise GeminiConfigError(
                "Vertex AI needs a Google Cloud project: pass project= or set "
                "GOOGLE_CLOUD_PROJECT (and GOOGLE_CLOUD_LOCATION), with application-default "
                "credentials (gcloud auth application-default login)."
            )
        try:
            return genai.Client(
                vertexai=True,
                project=project,
                location=location or os.environ.get("GOOGLE_CLOUD_LOCATION") or "us-central1",
                http_options=http_options,
            )
        except Exception as e:  # e.g. no application-default credentials
            raise GeminiConfigError(f"cannot set up the Vertex AI client: {e}") from e
    key = api_key or os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY")
    if not key:
        raise GeminiConfigError(
            "No Gemini API key: set GEMINI_API_KEY (or GOOGLE_API_KEY), pass api_key=, "
            "or use Vertex AI (vertexai=True with a project and location)."
        )
    return genai.Client(api_key=key, http_options=http_options)


def classify_api_error(e: genai_errors.APIError, *, vertexai: bool, model: str) -> Exception:
    """The runner's error class for an HTTP error from the service (see the module docstring)."""
    code = int(e.code) if isinstance(e.code, int) else 0
    detail = f"HTTP {code} {e.status or ''}: {e.message or ''}".strip()
    if code == 429:
        return TransientError(
            detail, kind="rate_limited", retry_after_s=retry_after_seconds(e), status=code
        )
    if code == 408 or code >= 500:
        return TransientError(
            detail, kind="server_error", retry_after_s=retry_after_seconds(e), status=code
        )
    if code in (401, 403):
        where = (
            "Vertex AI credentials/project permissions"
            if vertexai
            else ("the API key (GEMINI_API_KEY / GOOGLE_API_KEY)")
        )
        return FatalError(
            f"Gemini refused the request ({detail}); check {where}.",
            kind="auth",
            status=code,
            abort_run=True,
        )
    if code == 404:
        return FatalError(
            f"Model {model!r} not found or not available to you ({detail}).",
            kind="not_found",
            status=code,
            abort_run=True,
        )
    # 400 and the rest: this request is wrong (e.g. prompt too long); others may be fine.
    return FatalError(f"Gemini rejected the request ({detail}).", kind="bad_request", status=code)


def transient_error(e: BaseException, timeout_s: float) -> TransientError:
    """A network-level failure (one of the HTTP library's timeout/transport errors)."""
    kind = "timeout" if "timeout" in type(e).__name__.lower() else "network"
    return TransientError(
        f"{type(e).__name__} after up to {timeout_s:g}s: {e}".rstrip(": "), kind=kind
    )


def request_deadline_error(timeout_s: float) -> TransientError:
    """A request that did not end within its total deadline (connect, headers and body)."""
    return TransientError(f"no complete answer within {timeout_s:g}s", kind="timeout")


def response_text(response: types.GenerateContentResponse) -> tuple[str, Usage, str | None]:
    """(answer text, usage, finish reason) of one answer, or ``InvalidAnswerError`` when the
    prompt or the answer was blocked or nothing came back."""
    usage = _usage(response)
    feedback = response.prompt_feedback
    if feedback is not None and feedback.block_reason is not None:
        reason = getattr(feedback.block_reason, "value", feedback.block_reason)
        raise InvalidAnswerError(f"prompt blocked ({reason})", kind="blocked", usage=usage)
    if not response.candidates:
        raise InvalidAnswerError("no candidates in the response", kind="empty", usage=usage)
    cand = response.candidates[0]
    finish = getattr(cand.finish_reason, "value", cand.finish_reason)
    if finish in _BLOCK_FINISH_REASONS:
        raise InvalidAnswerError(
            f"answer blocked (finishReason {finish})", kind="blocked", usage=usage
        )
    parts = cand.content.parts if cand.content and cand.content.parts else []
    # Thought summaries (if ever enabled) are not the answer.
    text = "".join(p.text for p in parts if p.text and not p.thought).strip()
    if not text:
        raise InvalidAnswerError(
            f"empty answer (finishReason {finish})", kind="empty", usage=usage
        )
    return text, usage, None if finish is None else str(finish)


def cut_note(finish: str | None) -> str:
    return " (cut off at MAX_TOKENS)" if finish == "MAX_TOKENS" else ""


class GeminiJsonClient:
    """One JSON answer in any ``AnswerSchema`` from Gemini: ``await client.complete(prompt,
    schema) -> (answer, usage)``, the answer validated against the schema. Errors are
    ``llm.errors``' classes. ``structured_output`` is always the service's own response
    schema. ``timeout_s`` is the total deadline of one request (connect, headers, body)."""

    name = GEMINI
    structured_output = "response_schema"
    price_per_mtok: tuple[float, float] | None = None  # the price table knows Gemini's models

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        api_key: str | None = None,
        vertexai: bool = False,
        project: str | None = None,
        location: str | None = None,
        base_url: str | None = None,
        timeout_s: float = 60,
    ) -> None:
        self.model = model
        self.vertexai = vertexai
        self.timeout_s = timeout_s
        self._client = make_client(
            vertexai=vertexai, api_key=api_key, project=project, location=location,
            base_url=base_url, timeout_s=timeout_s,
        )

    @property
    def sdk(self) -> genai.Client:
        """The SDK client (the Batch API path submits and polls jobs through it)."""
        return self._client

    async def complete(self, prompt: str, schema: AnswerSchema) -> tuple[dict[str, Any], Usage]:
        try:
            # The SDK's timeout bounds each read; a server dripping bytes never trips it, so
            # the request as a whole ends here.
            async with asyncio.timeout(self.timeout_s):
                response = await self._client.aio.models.generate_content(
                    model=self.model, contents=prompt, config=json_config(schema)
                )
        except TimeoutError as e:
            raise request_deadline_error(self.timeout_s) from e
        except genai_errors.APIError as e:
            raise classify_api_error(e, vertexai=self.vertexai, model=self.model) from e
        except _TRANSIENT_EXC as e:
            raise transient_error(e, self.timeout_s) from e
        return self.parse(response, schema)

    def parse(
        self, response: types.GenerateContentResponse, schema: AnswerSchema
    ) -> tuple[dict[str, Any], Usage]:
        """The validated answer in one response (interactive or from a batch job), or
        ``InvalidAnswerError``."""
        text, usage, finish = response_text(response)
        return schema.parse(text, usage=usage, note=cut_note(finish)), usage

    async def aclose(self) -> None:
        """Close the SDK's async HTTP connections (optional; the process exit also does it)."""
        with contextlib.suppress(Exception):
            await self._client.aio.aclose()
