"""Pre-labelling with Gemini through the official ``google-genai`` SDK.

One call per trajectory: the rubric prompt (``prompt.py``) and a structured-output schema whose
``category`` is an enum of the taxonomy's category names, so the model cannot invent a category.
Temperature 0, JSON output. The SDK's own retries are disabled: the runner retries, and every
HTTP request is then one counted call.

Failures are turned into the runner's error classes (``errors.py``): 429/408/5xx/timeouts/network
-> ``TransientError`` (with Retry-After when the server gives one); malformed JSON, empty
candidates and safety blocks -> ``InvalidAnswerError``; 401/403/404 -> ``FatalError(abort_run)``
with a message saying what to fix; other 4xx -> ``FatalError`` for that item only.

``GeminiJsonClient`` is the same call for any other answer schema (the LLM judge uses it); the
client construction, error classification and answer reading are shared with the labeller.

Privacy: read ``privacy_notice`` before sending MIMIC-derived text anywhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pydantic
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from faillab_core.errors import FaillabError
from opinions.prelabel.answer import AnswerSchema, label_result, schema_for_names
from opinions.prelabel.base import LabelResult
from opinions.prelabel.errors import FatalError, InvalidAnswerError, TransientError
from opinions.prelabel.options import DEFAULT_GEMINI_MODEL
from opinions.prelabel.privacy import privacy_notice
from opinions.prelabel.prompt import DEFAULT_TOKEN_BUDGET, PROMPT_VERSION, build_prompt
from opinions.prelabel.protocol import Usage
from opinions.prelabel.retry import parse_retry_after
from trajectories.model import Trajectory

if TYPE_CHECKING:
    from taxonomy import Taxonomy

__all__ = [
    "DEFAULT_MODEL",
    "LABELLER_VERSION",
    "GeminiConfigError",
    "GeminiJsonClient",
    "GeminiLabeller",
    "ResponseSchema",
    "build_response_model",
    "build_wire_schema",
    "classify_api_error",
    "generation_config",
    "make_client",
    "privacy_notice",
    "response_schema",
    "response_text",
    "retry_after_seconds",
    "transient_error",
    "wire_schema",
]

DEFAULT_MODEL = DEFAULT_GEMINI_MODEL
# Version of this module's parsing/mapping logic (the prompt has its own PROMPT_VERSION).
LABELLER_VERSION = "1"

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


class GeminiConfigError(FaillabError, RuntimeError):
    """The labeller cannot be built (e.g. no API key): a message for the person running it."""


@dataclass(frozen=True)
class ResponseSchema:
    """The answer schema for one taxonomy, in both forms: ``model`` validates answers, ``wire``
    is what the request carries (handing the SDK a pydantic class would make it regenerate and
    convert the JSON schema on every call, several ms of CPU each)."""

    model: type[pydantic.BaseModel]
    wire: types.Schema


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


@functools.lru_cache(maxsize=32)
def _response_schema(names: tuple[str, ...]) -> ResponseSchema:
    spec = schema_for_names(names)
    return ResponseSchema(spec.model, wire_schema(spec))


def response_schema(taxonomy: Taxonomy) -> ResponseSchema:
    """The answer schema for ``taxonomy``, built once per set of category names."""
    names = tuple(c.name for c in taxonomy.categories)
    if not names:
        raise ValueError(f"taxonomy {taxonomy.name!r} has no categories")
    return _response_schema(names)


def build_response_model(taxonomy: Taxonomy) -> type[pydantic.BaseModel]:
    """The structured-output model; ``category`` is an enum of exactly the taxonomy's names."""
    return response_schema(taxonomy).model


def build_wire_schema(taxonomy: Taxonomy) -> types.Schema:
    """The same schema in the API's Schema form, as the request carries it."""
    return response_schema(taxonomy).wire


def generation_config(schema: ResponseSchema) -> types.GenerateContentConfig:
    """Deterministic JSON answers in the schema; the same for interactive and batch requests."""
    return _json_config(schema.wire)


def _json_config(wire: types.Schema) -> types.GenerateContentConfig:
    return types.GenerateContentConfig(
        temperature=0.0, response_mime_type="application/json", response_schema=wire
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


def _cut_note(finish: str | None) -> str:
    return " (cut off at MAX_TOKENS)" if finish == "MAX_TOKENS" else ""


class GeminiLabeller:
    """``await labeller.alabel(trajectory, taxonomy) -> (LabelResult, Usage)``; one HTTP call."""

    name = "gemini"
    remote = True

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
        token_budget: int = DEFAULT_TOKEN_BUDGET,
    ) -> None:
        self.model = model
        self.vertexai = vertexai
        self.timeout_s = timeout_s
        self.token_budget = token_budget
        self.prompt_version = PROMPT_VERSION
        self.version = f"{LABELLER_VERSION}/{model}/prompt-{PROMPT_VERSION}"
        self._schemas: dict[
            tuple[str, tuple[str, ...]],
            tuple[type[pydantic.BaseModel], types.GenerateContentConfig],
        ] = {}

        self._client = make_client(
            vertexai=vertexai,
            api_key=api_key,
            project=project,
            location=location,
            base_url=base_url,
            timeout_s=timeout_s,
        )

    # -- schema ---------------------------------------------------------------------------------

    def _schema_and_config(
        self, taxonomy: Taxonomy
    ) -> tuple[type[pydantic.BaseModel], types.GenerateContentConfig]:
        cache_key = (taxonomy.version, taxonomy.names)
        found = self._schemas.get(cache_key)
        if found is None:
            schema = response_schema(taxonomy)
            config = generation_config(schema)
            found = self._schemas[cache_key] = (schema.model, config)
        return found

    @property
    def client(self) -> genai.Client:
        """The SDK client (the batch path submits and polls jobs through it)."""
        return self._client

    def generation_config(self, taxonomy: Taxonomy) -> types.GenerateContentConfig:
        return self._schema_and_config(taxonomy)[1]

    def response_model(self, taxonomy: Taxonomy) -> type[pydantic.BaseModel]:
        return self._schema_and_config(taxonomy)[0]

    # -- the call -------------------------------------------------------------------------------

    async def alabel(self, trajectory: Trajectory, taxonomy: Taxonomy) -> tuple[LabelResult, Usage]:
        prompt = build_prompt(trajectory, taxonomy, token_budget=self.token_budget)
        _, config = self._schema_and_config(taxonomy)
        try:
            # The SDK's timeout bounds each read; a server dripping bytes never trips it, so
            # the request as a whole ends here.
            async with asyncio.timeout(self.timeout_s):
                response = await self._client.aio.models.generate_content(
                    model=self.model, contents=prompt.text, config=config
                )
        except TimeoutError as e:
            raise request_deadline_error(self.timeout_s) from e
        except genai_errors.APIError as e:
            raise self._classify_api_error(e) from e
        except _TRANSIENT_EXC as e:
            raise transient_error(e, self.timeout_s) from e
        return self.parse_response(response, trajectory, taxonomy)

    def _classify_api_error(self, e: genai_errors.APIError) -> Exception:
        return classify_api_error(e, vertexai=self.vertexai, model=self.model)

    def parse_response(
        self,
        response: types.GenerateContentResponse,
        trajectory: Trajectory,
        taxonomy: Taxonomy,
    ) -> tuple[LabelResult, Usage]:
        """The label in one answer (interactive or from a batch job), or ``InvalidAnswerError``."""
        spec = schema_for_names(tuple(c.name for c in taxonomy.categories))
        text, usage, finish = response_text(response)
        data = spec.parse(text, usage=usage, note=_cut_note(finish))
        result = label_result(
            data, trajectory, taxonomy, labeller=self.name, labeller_version=self.version
        )
        return result, usage

    async def aclose(self) -> None:
        """Close the SDK's async HTTP connections (optional; the process exit also does it)."""
        with contextlib.suppress(Exception):
            await self._client.aio.aclose()


class GeminiJsonClient:
    """One JSON answer in any ``AnswerSchema`` from Gemini: ``await client.complete(prompt,
    schema) -> (answer, usage)``, the answer validated against the schema. Errors are the
    runner's classes, as for the labeller. ``structured_output`` is always the service's own
    response schema."""

    name = "gemini"
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

    async def complete(self, prompt: str, schema: AnswerSchema) -> tuple[dict[str, Any], Usage]:
        try:
            async with asyncio.timeout(self.timeout_s):  # a total deadline, as alabel's
                response = await self._client.aio.models.generate_content(
                    model=self.model, contents=prompt, config=_json_config(wire_schema(schema))
                )
        except TimeoutError as e:
            raise request_deadline_error(self.timeout_s) from e
        except genai_errors.APIError as e:
            raise classify_api_error(e, vertexai=self.vertexai, model=self.model) from e
        except _TRANSIENT_EXC as e:
            raise transient_error(e, self.timeout_s) from e
        text, usage, finish = response_text(response)
        return schema.parse(text, usage=usage, note=_cut_note(finish)), usage

    async def aclose(self) -> None:
        with contextlib.suppress(Exception):
            await self._client.aio.aclose()
