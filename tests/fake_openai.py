"""A local stand-in for an OpenAI-compatible chat-completions server, for tests (stdlib only).

It answers ``POST /v1/chat/completions`` as vLLM, Ollama, LM Studio or OpenAI do, so the real
``openai`` SDK can be pointed at it with ``base_url=fake.base_url``: the answer in
``choices[0].message.content``, token counts in ``usage``. ``formats`` lists the
``response_format`` types the server takes (default ``json_schema``, ``json_object`` and plain
text); a request with any other type is refused with HTTP 400 naming the response format, as
servers without structured output do. Without a response_format the JSON comes inside prose and
a code fence, as a chat model writes it.

Each request gets a behaviour: from a per-trajectory script if one matches (the trajectory id is
read from the prompt's "Trajectory id: ..." line), else from the global script in arrival order,
else ``default``. Behaviours: ``ok``, ``429`` (with Retry-After), ``500``, ``503``,
``400``/``401``/``403``/``404``, ``timeout`` (answers only after ``delay_s``), ``malformed``
(content that is not JSON), ``refusal`` (message.refusal set), ``empty`` (no choices) and
``length`` (finish_reason length, the JSON cut off). Every request is recorded (path, headers,
body, which response_format it asked for), with the largest number in flight at once.

It also acts as a plain-HTTP forward proxy: a request in absolute form (``POST http://host/v1/
chat/completions``, what an HTTP client sends through ``HTTP_PROXY``) is answered the same way
and records the host it was meant for. Tests use this to point a client at an address that is
not local without any request leaving the machine.

    with FakeOpenAI() as fake:
        client = openai.AsyncOpenAI(base_url=fake.base_url, api_key="k", max_retries=0)
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "Behaviour",
    "FakeOpenAI",
    "RecordedRequest",
    "default_answer",
    "fenced",
    "prompt_text",
]

_TRAJ_ID = re.compile(r"Trajectory id: (\S+)")
_ROUTE = "/v1/chat/completions"
ALL_FORMATS = ("json_schema", "json_object", "text")

KINDS = frozenset({"ok", "429", "500", "503", "400", "401", "403", "404", "timeout",
                   "malformed", "refusal", "empty", "length"})


@dataclass(frozen=True)
class Behaviour:
    kind: str = "ok"
    retry_after: float | None = None  # seconds, for 429 (and 503)
    delay_s: float = 5.0  # for "timeout": how long the server sits on the request
    text: str | None = None  # for "malformed": the raw content returned

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown behaviour {self.kind!r}; one of {sorted(KINDS)}")


BehaviourLike = Behaviour | str


def _as_behaviour(b: BehaviourLike) -> Behaviour:
    return b if isinstance(b, Behaviour) else Behaviour(b)


@dataclass
class RecordedRequest:
    path: str
    host: str  # the host the request was addressed to (the proxied one in absolute form)
    headers: dict[str, str]
    body: dict[str, Any]
    model: str
    response_format: str  # "json_schema" | "json_object" | "text" (none sent)
    trajectory_id: str | None
    behaviour: str
    started: float
    finished: float = 0.0


def prompt_text(body: Mapping[str, Any]) -> str:
    """All message contents of the request, joined."""
    out: list[str] = []
    for m in body.get("messages") or []:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            out += [p.get("text", "") for p in content if isinstance(p, dict)]
    return "\n".join(out)


def fenced(text: str, label: str) -> str | None:
    """The data block ``label`` of a prompt (between its <<<DATA ...>>> markers), or None."""
    m = re.search(rf"<<<DATA {re.escape(label)} (\w+)>>>\n(.*?)\n<<<END DATA {re.escape(label)} "
                  r"\1>>>", text, flags=re.S)
    return m.group(2) if m else None


def _schema(body: Mapping[str, Any]) -> dict[str, Any]:
    rf = body.get("response_format") or {}
    if rf.get("type") != "json_schema":
        return {}
    return dict((rf.get("json_schema") or {}).get("schema") or {})


def _enum(prop: Mapping[str, Any]) -> list[str]:
    if "enum" in prop:
        return [str(v) for v in prop["enum"] if v is not None]
    for alt in prop.get("anyOf", []):
        if isinstance(alt, dict) and "enum" in alt:
            return [str(v) for v in alt["enum"] if v is not None]
    return []


def default_answer(body: Mapping[str, Any]) -> dict[str, Any]:
    """A plausible answer to whichever question was asked.

    A verdict request (its schema, or its prompt, names ``verdict``): "correct" when the final
    answer block contains the gold block's text, "incorrect" otherwise. A pre-label request: a
    category from the schema's enum (else the prompt's taxonomy headings), chosen by a hash of
    the trajectory id so that the same trajectory always gets the same one."""
    text = prompt_text(body)
    props = _schema(body).get("properties") or {}
    if "verdict" in props or (not props and '"verdict"' in text):
        gold = (fenced(text, "gold_answer") or "").strip().lower()
        final = (fenced(text, "final_answer") or "").strip().lower()
        verdict = "correct" if gold and gold in final else "incorrect"
        return {"verdict": verdict, "rationale": "synthetic verdict from the fake server."}
    names = _enum(props.get("category") or {})
    if not names:
        names = re.findall(r"^### (.+?)  \(key: ", text, flags=re.M) or ["Unknown"]
    m = _TRAJ_ID.search(text)
    seed = m.group(1) if m else text[:200]
    i = int(hashlib.sha256(seed.encode()).hexdigest(), 16) % len(names)
    return {
        "category": names[i],
        "confidence": 0.7,
        "first_error_step": 0 if "Step 0 " in text else None,
        "rationale": "step 0: synthetic label from the fake server.",
        "secondary_category": None,
    }


class FakeOpenAI:
    """Context manager: starts on a free localhost port; ``base_url`` (ending in /v1) points the
    SDK at it, ``proxy_url`` makes it the HTTP proxy for another address."""

    def __init__(
        self,
        *,
        answer: Callable[[dict[str, Any]], Mapping[str, Any] | str] = default_answer,
        script: Iterable[BehaviourLike] = (),
        per_trajectory: Mapping[str, Iterable[BehaviourLike]] | None = None,
        default: BehaviourLike = "ok",
        formats: Iterable[str] = ALL_FORMATS,
        prompt_tokens: int | None = None,
        output_tokens: int = 40,
        latency_s: float = 0.0,
    ) -> None:
        self.answer = answer
        self.default = _as_behaviour(default)
        self.formats = frozenset(formats)
        unknown = self.formats - set(ALL_FORMATS)
        if unknown:
            raise ValueError(f"unknown formats {sorted(unknown)}; one of {ALL_FORMATS}")
        self.prompt_tokens = prompt_tokens  # None: estimate as characters / 4
        self.output_tokens = output_tokens
        self.latency_s = latency_s
        self.requests: list[RecordedRequest] = []
        self.max_in_flight = 0
        self._in_flight = 0
        self._lock = threading.Lock()
        self._script: deque[Behaviour] = deque(_as_behaviour(b) for b in script)
        self._per_traj: dict[str, deque[Behaviour]] = {
            k: deque(_as_behaviour(b) for b in v) for k, v in (per_trajectory or {}).items()
        }
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- scripting ------------------------------------------------------------------------------

    def push(self, *behaviours: BehaviourLike) -> None:
        with self._lock:
            self._script.extend(_as_behaviour(b) for b in behaviours)

    def script_for(self, trajectory_id: str, *behaviours: BehaviourLike) -> None:
        with self._lock:
            self._per_traj.setdefault(trajectory_id, deque()).extend(
                _as_behaviour(b) for b in behaviours
            )

    def _next_behaviour(self, trajectory_id: str | None) -> Behaviour:
        with self._lock:
            q = self._per_traj.get(trajectory_id) if trajectory_id else None
            if q:
                return q.popleft()
            if self._script:
                return self._script.popleft()
            return self.default

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self.requests)

    def answered(self) -> list[RecordedRequest]:
        """The requests that got an answer (not refused for their response format)."""
        with self._lock:
            return [r for r in self.requests if r.behaviour != "format_refused"]

    # -- lifecycle ------------------------------------------------------------------------------

    @property
    def address(self) -> str:
        if self._server is None:
            raise RuntimeError("FakeOpenAI is not running")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def base_url(self) -> str:
        return f"{self.address}/v1"

    @property
    def proxy_url(self) -> str:
        return self.address

    def start(self) -> FakeOpenAI:
        fake = self

        class Handler(_Handler):
            owner = fake

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 256  # concurrent connects must not wait for SYN retries

        self._stopping.clear()
        self._server = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes handlers sleeping on "timeout" or latency
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- request handling (runs in server threads) ----------------------------------------------

    def _handle(self, target: str, headers: dict[str, str], raw: bytes
                ) -> tuple[int, dict[str, str], bytes]:
        parts = urlsplit(target)
        host = parts.hostname or headers.get("host", "").split(":", 1)[0]
        path = parts.path
        if path != _ROUTE:
            return _error(404, "not_found_error", f"no route for {path}")
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            return _error(400, "invalid_request_error", "request body is not JSON")
        fmt = str((body.get("response_format") or {}).get("type") or "text")
        text = prompt_text(body)
        tm = _TRAJ_ID.search(text)
        traj_id = tm.group(1) if tm else None
        if fmt not in self.formats:
            # Refused before any behaviour is used up: the script is about answers.
            with self._lock:
                self.requests.append(RecordedRequest(
                    path, host, headers, body, str(body.get("model", "")), fmt, traj_id,
                    "format_refused", time.time(), time.time()))
            return _error(400, "invalid_request_error",
                          f"response_format type '{fmt}' is not supported by this server")
        behaviour = self._next_behaviour(traj_id)
        rec = RecordedRequest(path, host, headers, body, str(body.get("model", "")), fmt,
                              traj_id, behaviour.kind, time.time())
        with self._lock:
            self.requests.append(rec)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            if self.latency_s:
                self._stopping.wait(self.latency_s)
            if behaviour.kind == "timeout":
                self._stopping.wait(behaviour.delay_s)
            return self._respond(behaviour, body, text, fmt)
        finally:
            with self._lock:
                self._in_flight -= 1
                rec.finished = time.time()

    def _usage(self, text: str, output: int) -> dict[str, int]:
        p = self.prompt_tokens if self.prompt_tokens is not None else max(1, len(text) // 4)
        return {"prompt_tokens": p, "completion_tokens": output, "total_tokens": p + output}

    def _respond(self, b: Behaviour, body: dict[str, Any], text: str, fmt: str
                 ) -> tuple[int, dict[str, str], bytes]:
        kind = b.kind
        if kind in ("429", "503"):
            headers = {} if b.retry_after is None else {"Retry-After": f"{b.retry_after:g}"}
            return _error(int(kind), "rate_limit_error" if kind == "429" else "server_error",
                          "scripted failure", headers)
        if kind in ("500", "400", "401", "403", "404"):
            return _error(int(kind), "scripted_error", "scripted failure")
        if kind == "empty":
            return _completion(body, [], self._usage(text, 0))
        if kind == "refusal":
            message = {"role": "assistant", "content": None,
                       "refusal": "I can't help with that."}
            return _completion(body, [_choice(message, "stop")], self._usage(text, 5))
        if kind == "malformed":
            content = b.text if b.text is not None else '{"category": "oops", "confid'
            finish = "stop"
        else:  # ok, length, and timeout (whose answer arrives after the client gave up)
            answer = self.answer(body)
            content = answer if isinstance(answer, str) else json.dumps(dict(answer))
            if fmt == "text" and not isinstance(answer, str):
                # A chat model without a response format wraps its JSON in prose.
                content = f"Here is my assessment:\n```json\n{content}\n```\nHope this helps."
            finish = "stop"
            if kind == "length":
                content, finish = content[: max(1, len(content) // 2)], "length"
        message = {"role": "assistant", "content": content}
        return _completion(body, [_choice(message, finish)],
                           self._usage(text, self.output_tokens))


def _choice(message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}


def _completion(body: Mapping[str, Any], choices: list[dict[str, Any]], usage: dict[str, int]
                ) -> tuple[int, dict[str, str], bytes]:
    payload = {
        "id": f"chatcmpl-fake{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": str(body.get("model", "")),
        "choices": choices,
        "usage": usage,
    }
    return _json(200, payload)


def _json(status: int, payload: Mapping[str, Any], headers: Mapping[str, str] | None = None
          ) -> tuple[int, dict[str, str], bytes]:
    return status, dict(headers or {}), json.dumps(payload).encode()


def _error(status: int, kind: str, message: str, headers: Mapping[str, str] | None = None
           ) -> tuple[int, dict[str, str], bytes]:
    # The error envelope OpenAI and the compatible servers use.
    return _json(status, {"error": {"message": message, "type": kind, "param": None,
                                    "code": None}}, headers)


class _Handler(BaseHTTPRequestHandler):
    owner: FakeOpenAI
    protocol_version = "HTTP/1.1"  # keep-alive, as the SDK's connection pool expects
    disable_nagle_algorithm = True

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        self._send(*self.owner._handle(self.path, headers, raw))

    def do_GET(self) -> None:
        self._send(*_error(404, "not_found_error", f"no route for GET {self.path}"))

    def _send(self, status: int, headers: dict[str, str], data: bytes) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a scripted timeout): nothing to answer

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean
