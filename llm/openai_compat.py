"""JSON answers from any OpenAI-compatible server, with the official ``openai`` SDK: vLLM,
Ollama, LM Studio's server, Azure OpenAI (its v1 API), OpenAI.

One chat-completions call per answer, temperature 0, the prompt as one user message. Answers are
asked for in the best form the server takes (``FAILLAB_OPENAI_RESPONSE_FORMAT=auto``, the
default):

1. ``json_schema``: ``response_format`` with the answer's JSON Schema, ``strict``; the server
   constrains decoding to it (an enum field answered only within its values).
2. ``json_object``: if the server refuses json_schema (HTTP 400/422 naming the response format),
   plain JSON mode; the answer is validated against the schema after parsing.
3. ``text``: if it refuses that too, no response_format; the JSON object is read from the text
   (a code fence or prose around it is tolerated) and validated the same way.

The mode found is kept for the rest of the run (while it is unknown, one request at a time
finds it) and reported (``structured_output``). Whatever the mode, an answer outside the schema
is an ``InvalidAnswerError``, never a guess.

The SDK's own retries are off (``max_retries=0``): the caller retries (``retry.py``), so every
counted call is one HTTP request. Failures become ``errors.py``' classes:
429/408/409/5xx/timeouts/network -> ``TransientError`` (Retry-After or retry-after-ms honoured);
malformed, empty, refused or filtered answers -> ``InvalidAnswerError``; 401/403/404 ->
``FatalError(abort_run)`` saying what to fix; other 4xx -> ``FatalError`` for that item.

Privacy: the interlock (``privacy.py``) decides whether the server's address needs an
acknowledgement before anything is sent; this module sends whatever it is given.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from typing import Any

import openai

from llm.answer import AnswerSchema
from llm.endpoints import OpenAIEndpoint
from llm.errors import FatalError, InvalidAnswerError, LLMConfigError, TransientError
from llm.names import OPENAI_COMPATIBLE
from llm.retry import parse_retry_after
from llm.usage import Usage

__all__ = ["OpenAICompatClient", "OpenAIConfigError"]

_MODES = ("json_schema", "json_object", "text")
# A 400/422 that names the response format: the server cannot produce that form of answer.
_FORMAT_REFUSAL = re.compile(
    r"response[_ ]format|json[_ ]schema|json[_ ]object|structured[_ ]output|guided[_ ]json",
    re.I,
)
# Some local reasoning models write their thinking into the answer text.
_THINKING = re.compile(r"<think>.*?</think>", re.S | re.I)


class OpenAIConfigError(LLMConfigError):
    """The client cannot be built (no address, no model): a message for the person running it."""


class _FormatRefused(Exception):
    """The server refused this response_format; the next mode is tried."""


def _error_message(e: openai.APIStatusError) -> str:
    body = e.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])[:300]
        if isinstance(inner, str):
            return inner[:300]
    return (e.message or "")[:300]


def _retry_after(e: openai.APIStatusError) -> float | None:
    headers = getattr(e.response, "headers", None)
    if headers is None:
        return None
    with contextlib.suppress(Exception):
        ms = headers.get("retry-after-ms")
        if ms:
            return max(0.0, float(ms) / 1000)
    with contextlib.suppress(Exception):
        return parse_retry_after(headers.get("retry-after"))
    return None


class OpenAICompatClient:
    """JSON answers in an ``AnswerSchema`` from one model on one server:
    ``await client.complete(prompt, schema) -> (answer, usage)``."""

    name = OPENAI_COMPATIBLE

    def __init__(self, endpoint: OpenAIEndpoint, model: str) -> None:
        if not endpoint.base_url:
            raise OpenAIConfigError(
                "No OpenAI-compatible server: set FAILLAB_OPENAI_BASE_URL, e.g. "
                "http://localhost:8000/v1 (vLLM), http://localhost:11434/v1 (Ollama) or "
                "http://localhost:1234/v1 (LM Studio)."
            )
        if not model:
            raise OpenAIConfigError(
                "No model for the OpenAI-compatible server: pass --model or set "
                "FAILLAB_OPENAI_MODEL to the name the server knows it by (its /v1/models list; "
                "Azure OpenAI: the deployment name)."
            )
        self.endpoint = endpoint
        self.model = model
        self.price_per_mtok = endpoint.price_per_mtok
        self._fixed = endpoint.response_format != "auto"
        self._candidates = [endpoint.response_format] if self._fixed else list(_MODES)
        self._confirmed = self._fixed
        self.refused: list[str] = []  # modes the server refused while the mode was found
        self.structured_output: str | None = None  # the mode of the last answer received
        self._lock: asyncio.Lock | None = None
        self._client = openai.AsyncOpenAI(
            base_url=endpoint.base_url,
            # Always explicit: the SDK would otherwise send $OPENAI_API_KEY, a key meant for
            # OpenAI, to whatever server this is. Local servers accept any key.
            api_key=endpoint.api_key or "no-key",
            timeout=endpoint.timeout_s,
            max_retries=0,
        )

    @property
    def mode(self) -> str:
        """The response format the next request uses."""
        return self._candidates[0]

    async def complete(self, prompt: str, schema: AnswerSchema) -> tuple[dict[str, Any], Usage]:
        if self._confirmed:
            return await self._request(prompt, schema, self.mode)
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            # While the mode is unknown one request at a time finds it; the others then wait
            # here and use it, instead of each being refused in turn.
            while not self._confirmed:
                try:
                    answer = await self._request(prompt, schema, self.mode)
                except _FormatRefused:
                    self.refused.append(self._candidates.pop(0))
                    continue
                self._confirmed = True
                return answer
        return await self._request(prompt, schema, self.mode)

    def _response_format(self, schema: AnswerSchema, mode: str) -> dict[str, Any] | None:
        if mode == "json_schema":
            return {
                "type": "json_schema",
                "json_schema": {"name": schema.name, "schema": schema.json_schema,
                                "strict": True},
            }
        if mode == "json_object":
            return {"type": "json_object"}
        return None

    async def _request(
        self, prompt: str, schema: AnswerSchema, mode: str
    ) -> tuple[dict[str, Any], Usage]:
        extra: dict[str, Any] = {}
        response_format = self._response_format(schema, mode)
        if response_format is not None:
            extra["response_format"] = response_format
        try:
            # The SDK's timeout bounds each read, and a server that sends a byte now and then
            # never trips it: the request as a whole (connect, headers, body) ends here.
            async with asyncio.timeout(self.endpoint.timeout_s):
                response = await self._client.chat.completions.create(
                    model=self.model,
                    messages=[{"role": "user", "content": prompt}],
                    temperature=0.0,
                    **extra,
                )
        except TimeoutError as e:
            raise TransientError(
                f"no complete answer within {self.endpoint.timeout_s:g}s from "
                f"{self.endpoint.base_url}", kind="timeout",
            ) from e
        except openai.APIStatusError as e:
            if (not self._fixed and mode != "text" and e.status_code in (400, 422)
                    and _FORMAT_REFUSAL.search(_error_message(e))):
                raise _FormatRefused(mode) from e
            raise self._classify(e, mode) from e
        except openai.APITimeoutError as e:
            raise TransientError(
                f"no answer within {self.endpoint.timeout_s:g}s from {self.endpoint.base_url}",
                kind="timeout",
            ) from e
        except openai.APIConnectionError as e:
            cause = e.__cause__ or e
            raise TransientError(
                f"cannot reach {self.endpoint.base_url}: {type(cause).__name__}: {cause}",
                kind="network",
            ) from e
        except openai.APIError as e:  # a 2xx the SDK could not read as a chat completion
            raise InvalidAnswerError(f"unreadable response: {e}", kind="malformed") from e
        answer = self._parse(response, schema)
        self.structured_output = mode
        return answer

    def _classify(self, e: openai.APIStatusError, mode: str) -> Exception:
        code = e.status_code
        detail = f"HTTP {code}: {_error_message(e)}".rstrip(": ")
        where = self.endpoint.base_url
        if code == 429:
            return TransientError(detail, kind="rate_limited", retry_after_s=_retry_after(e),
                                  status=code)
        if code in (408, 409) or code >= 500:
            return TransientError(detail, kind="server_error", retry_after_s=_retry_after(e),
                                  status=code)
        if code in (401, 403):
            return FatalError(
                f"the server at {where} refused the request ({detail}); check "
                "FAILLAB_OPENAI_API_KEY",
                kind="auth", status=code, abort_run=True,
            )
        if code == 404:
            return FatalError(
                f"model {self.model!r} or the chat-completions route not found at {where} "
                f"({detail}); check FAILLAB_OPENAI_MODEL and that the address ends in /v1",
                kind="not_found", status=code, abort_run=True,
            )
        if self._fixed and mode != "text" and _FORMAT_REFUSAL.search(_error_message(e)):
            return FatalError(
                f"the server at {where} refused response_format {mode} ({detail}); set "
                "FAILLAB_OPENAI_RESPONSE_FORMAT=auto to fall back to what it supports",
                kind="bad_request", status=code, abort_run=True,
            )
        # 400 and the rest: this request is wrong (e.g. prompt too long); others may be fine.
        return FatalError(f"the server rejected the request ({detail})", kind="bad_request",
                          status=code)

    def _parse(self, response: Any, schema: AnswerSchema) -> tuple[dict[str, Any], Usage]:
        u = getattr(response, "usage", None)
        # Reasoning tokens are part of completion_tokens, so they count towards the cost.
        usage = Usage(
            input_tokens=int(getattr(u, "prompt_tokens", 0) or 0),
            output_tokens=int(getattr(u, "completion_tokens", 0) or 0),
        )
        choices = getattr(response, "choices", None)
        if not choices:
            raise InvalidAnswerError("no choices in the response", kind="empty", usage=usage)
        choice = choices[0]
        finish = getattr(choice, "finish_reason", None)
        message = getattr(choice, "message", None)
        refusal = getattr(message, "refusal", None)
        if refusal:
            raise InvalidAnswerError(f"the model refused: {str(refusal)[:200]}",
                                     kind="refused", usage=usage)
        if finish == "content_filter":
            raise InvalidAnswerError("answer filtered (finish_reason content_filter)",
                                     kind="blocked", usage=usage)
        text = _THINKING.sub("", str(getattr(message, "content", None) or "")).strip()
        if not text:
            raise InvalidAnswerError(f"empty answer (finish_reason {finish})", kind="empty",
                                     usage=usage)
        note = " (cut off: finish_reason length)" if finish == "length" else ""
        return schema.parse(text, usage=usage, note=note), usage

    async def aclose(self) -> None:
        with contextlib.suppress(Exception):
            await self._client.close()
