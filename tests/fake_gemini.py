"""A local stand-in for the Gemini REST API, for tests and the benchmark (stdlib only).

It answers ``POST /{version}/models/{model}:generateContent`` the way the real service does, so
the real ``google-genai`` SDK can be pointed at it with ``HttpOptions(base_url=...)``. Each
request gets a behaviour: taken from a per-trajectory script if one matches (the trajectory id is
read from the prompt), else from the global script in arrival order, else ``default``.

Behaviours: ``ok``, ``429`` (with Retry-After), ``500``, ``400``/``401``/``403``/``404``,
``timeout`` (answers only after ``delay_s``, longer than the client waits), ``malformed`` (not
JSON), ``empty`` (no candidates), ``safety`` (finishReason SAFETY, no content) and
``prompt_blocked`` (promptFeedback.blockReason). Every request is recorded, together with the
largest number of requests in flight at the same time.

    with FakeGemini(latency_s=0.3) as fake:
        labeller = GeminiLabeller(api_key="test", base_url=fake.base_url)

It also answers the Batch API as the SDK's ``client.batches`` calls it (Developer API, inlined
requests): ``POST .../models/{model}:batchGenerateContent`` creates a job, ``GET .../batches/{id}``
polls it (``batch_polls`` polls say running, then the job succeeds: every request gets its
behaviour as above, answered inline with its ``metadata``), ``POST .../batches/{id}:cancel``.
``GET .../batches`` lists the jobs. ``batch_script`` scripts the job-level calls: ``create_429`` /
``create_500`` (creation refused), ``create_lost`` (the job is created but the connection closes
before the answer), ``get_500`` (one poll fails), ``get_stall`` (one poll gets no answer until
the server stops), ``job_failed`` (the job ends FAILED).
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

__all__ = ["Behaviour", "FakeGemini", "RecordedRequest", "default_answer", "prompt_text"]

_PATH = re.compile(
    r"^/(?P<version>[^/]+)/(?:projects/[^/]+/locations/[^/]+/publishers/google/)?"
    r"models/(?P<model>[^/:]+):generateContent$"
)
_BATCH_CREATE = re.compile(r"^/(?P<version>[^/]+)/models/(?P<model>[^/:]+):batchGenerateContent$")
_BATCH_LIST = re.compile(r"^/(?P<version>[^/]+)/batches$")
_BATCH_GET = re.compile(r"^/(?P<version>[^/]+)/batches/(?P<id>[^/:]+)(?P<cancel>:cancel)?$")
_TRAJ_ID = re.compile(r"Trajectory id: (\S+)")
BATCH_KINDS = frozenset({"create_429", "create_500", "create_lost", "get_500", "get_stall",
                         "job_failed"})

# Returned instead of an answer: the handler closes the connection without responding.
NO_ANSWER: tuple[int, dict[str, str], bytes] = (0, {}, b"")

KINDS = frozenset(
    {
        "ok",
        "429",
        "500",
        "503",
        "400",
        "401",
        "403",
        "404",
        "timeout",
        "malformed",
        "empty",
        "safety",
        "prompt_blocked",
    }
)


@dataclass(frozen=True)
class Behaviour:
    kind: str = "ok"
    retry_after: float | None = None  # seconds, for 429 (and 503)
    delay_s: float = 5.0  # for "timeout": how long the server sits on the request
    text: str | None = None  # for "malformed": the raw text returned

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown behaviour {self.kind!r}; one of {sorted(KINDS)}")


BehaviourLike = Behaviour | str


def _as_behaviour(b: BehaviourLike) -> Behaviour:
    return b if isinstance(b, Behaviour) else Behaviour(b)


@dataclass
class FakeBatchJob:
    id: str
    model: str
    display_name: str
    requests: list[dict[str, Any]]
    fail: bool = False
    polls: int = 0
    state: str = "BATCH_STATE_PENDING"
    output: list[dict[str, Any]] | None = None


@dataclass
class RecordedRequest:
    path: str
    model: str
    body: dict[str, Any]
    trajectory_id: str | None
    behaviour: str
    started: float
    finished: float = 0.0


def prompt_text(body: Mapping[str, Any]) -> str:
    """All text parts of the request's contents, joined."""
    out: list[str] = []
    contents = body.get("contents") or []
    for c in contents if isinstance(contents, list) else [contents]:
        for p in (c or {}).get("parts", []) if isinstance(c, dict) else []:
            if isinstance(p, dict) and isinstance(p.get("text"), str):
                out.append(p["text"])
    return "\n".join(out)


def _schema_enum(body: Mapping[str, Any]) -> list[str]:
    """The category enum the client sent, whichever schema field it used."""
    gc = body.get("generationConfig") or {}
    schema = gc.get("responseSchema") or gc.get("responseJsonSchema") or {}
    prop = (schema.get("properties") or {}).get("category") or {}
    if "enum" in prop:
        return [str(v) for v in prop["enum"]]
    ref = prop.get("$ref") or next(
        (x.get("$ref") for x in prop.get("anyOf", []) + prop.get("allOf", []) if "$ref" in x), None
    )
    if isinstance(ref, str):
        defs = schema.get("$defs") or schema.get("defs") or {}
        return [str(v) for v in (defs.get(ref.rsplit("/", 1)[-1]) or {}).get("enum", [])]
    return []


def default_answer(body: Mapping[str, Any]) -> dict[str, Any]:
    """A plausible label: a category from the request's schema enum (else the prompt), chosen
    by a hash of the trajectory id so that the same trajectory always gets the same one."""
    text = prompt_text(body)
    names = _schema_enum(body)
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


class FakeGemini:
    """Context manager: starts on a free localhost port, ``base_url`` points the SDK at it."""

    def __init__(
        self,
        *,
        latency_s: float = 0.0,
        answer: Callable[[dict[str, Any]], Mapping[str, Any] | str] = default_answer,
        script: Iterable[BehaviourLike] = (),
        per_trajectory: Mapping[str, Iterable[BehaviourLike]] | None = None,
        default: BehaviourLike = "ok",
        prompt_tokens: int | None = None,
        output_tokens: int = 60,
        batch_polls: int = 1,
        batch_script: Iterable[str] = (),
    ) -> None:
        self.latency_s = latency_s
        self.answer = answer
        self.default = _as_behaviour(default)
        self.prompt_tokens = prompt_tokens  # None: estimate as characters / 4
        self.output_tokens = output_tokens
        self.requests: list[RecordedRequest] = []
        self.max_in_flight = 0
        self._in_flight = 0
        self._lock = threading.Lock()
        self._script: deque[Behaviour] = deque(_as_behaviour(b) for b in script)
        self._per_traj: dict[str, deque[Behaviour]] = {
            k: deque(_as_behaviour(b) for b in v) for k, v in (per_trajectory or {}).items()
        }
        self.batch_polls = batch_polls  # polls answered "running" before a job finishes
        self._batch_script: deque[str] = deque()
        self.push_batch(*batch_script)
        self.batch_jobs: dict[str, FakeBatchJob] = {}
        self.batch_calls: list[str] = []  # "create", "get", "cancel", in arrival order
        self.batch_items: list[RecordedRequest] = []  # the requests answered inside jobs
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

    def push_batch(self, *kinds: str) -> None:
        for kind in kinds:
            if kind not in BATCH_KINDS:
                raise ValueError(f"unknown batch behaviour {kind!r}; one of {sorted(BATCH_KINDS)}")
        with self._lock:
            self._batch_script.extend(kinds)

    def _next_batch(self, *allowed: str) -> str | None:
        with self._lock:
            if self._batch_script and self._batch_script[0] in allowed:
                return self._batch_script.popleft()
            return None

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

    def reset_records(self) -> None:
        with self._lock:
            self.requests.clear()
            self.max_in_flight = 0

    # -- lifecycle ------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("FakeGemini is not running")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/"

    def start(self) -> FakeGemini:
        fake = self

        class Handler(_Handler):
            owner = fake

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            # The default backlog of 5 makes concurrent connects wait for SYN retries (~1 s).
            request_queue_size = 256

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

    def __enter__(self) -> FakeGemini:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- request handling (runs in server threads) ----------------------------------------------

    def _handle(self, path: str, raw: bytes) -> tuple[int, dict[str, str], bytes]:
        bare = path.split("?", 1)[0]
        if _BATCH_CREATE.match(bare) or _BATCH_GET.match(bare) or _BATCH_LIST.match(bare):
            return self._handle_batch("POST", bare, raw)
        m = _PATH.match(bare)
        if m is None:
            return _error(404, "NOT_FOUND", f"no route for {path}")
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            return _error(400, "INVALID_ARGUMENT", "request body is not JSON")
        text = prompt_text(body)
        tm = _TRAJ_ID.search(text)
        traj_id = tm.group(1) if tm else None
        behaviour = self._next_behaviour(traj_id)
        rec = RecordedRequest(path, m.group("model"), body, traj_id, behaviour.kind, time.time())
        with self._lock:
            self.requests.append(rec)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            if self.latency_s:
                self._stopping.wait(self.latency_s)
            if behaviour.kind == "timeout":
                self._stopping.wait(behaviour.delay_s)
            return self._respond(behaviour, body, text)
        finally:
            with self._lock:
                self._in_flight -= 1
                rec.finished = time.time()

    # -- the Batch API --------------------------------------------------------------------------

    def _handle_batch(
        self, method: str, path: str, raw: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        create = _BATCH_CREATE.match(path)
        if create is not None and method == "POST":
            with self._lock:
                self.batch_calls.append("create")
            scripted = self._next_batch("create_429", "create_500", "create_lost")
            if scripted == "create_429":
                return _error(429, "RESOURCE_EXHAUSTED", "scripted failure", {"Retry-After": "1"})
            if scripted == "create_500":
                return _error(500, "INTERNAL", "scripted failure")
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                return _error(400, "INVALID_ARGUMENT", "request body is not JSON")
            batch = body.get("batch") or {}
            requests = ((batch.get("inputConfig") or {}).get("requests") or {}).get("requests")
            if not isinstance(requests, list) or not requests:
                return _error(400, "INVALID_ARGUMENT", "no inlined requests")
            with self._lock:
                job = FakeBatchJob(
                    id=f"fakebatch{len(self.batch_jobs) + 1}",
                    model=create.group("model"),
                    display_name=str(batch.get("displayName") or ""),
                    requests=requests,
                    fail=self._batch_script[0] == "job_failed" if self._batch_script else False,
                )
                if job.fail:
                    self._batch_script.popleft()
                self.batch_jobs[job.id] = job
            if scripted == "create_lost":
                return NO_ANSWER
            return _json(200, self._job_payload(job))
        if _BATCH_LIST.match(path):
            with self._lock:
                self.batch_calls.append("list")
                jobs = list(self.batch_jobs.values())
            return _json(200, {"operations": [self._job_payload(j) for j in jobs]})
        got = _BATCH_GET.match(path)
        if got is None:
            return _error(404, "NOT_FOUND", f"no route for {path}")
        with self._lock:
            self.batch_calls.append("cancel" if got.group("cancel") else "get")
            job_or_none = self.batch_jobs.get(got.group("id"))
        if job_or_none is None:
            return _error(404, "NOT_FOUND", f"batch {got.group('id')} not found")
        job = job_or_none
        if got.group("cancel"):
            job.state = "BATCH_STATE_CANCELLED"
            return _json(200, {})
        scripted_get = self._next_batch("get_500", "get_stall")
        if scripted_get == "get_stall":
            self._stopping.wait(120)  # a poll that never gets its answer (until the server stops)
        if scripted_get is not None:
            return _error(500, "INTERNAL", "scripted failure")
        if job.state in ("BATCH_STATE_PENDING", "BATCH_STATE_RUNNING"):
            job.polls += 1
            if job.polls <= self.batch_polls:
                job.state = "BATCH_STATE_RUNNING"
            elif job.fail:
                job.state = "BATCH_STATE_FAILED"
            else:
                job.output = [self._answer_inline(r) for r in job.requests]
                job.state = "BATCH_STATE_SUCCEEDED"
        return _json(200, self._job_payload(job))

    def _answer_inline(self, item: dict[str, Any]) -> dict[str, Any]:
        body = item.get("request") or {}
        text = prompt_text(body)
        tm = _TRAJ_ID.search(text)
        traj_id = tm.group(1) if tm else None
        behaviour = self._next_behaviour(traj_id)
        now = time.time()
        with self._lock:
            self.batch_items.append(
                RecordedRequest("batch", "", body, traj_id, behaviour.kind, now, now)
            )
        out: dict[str, Any] = {}
        if "metadata" in item:
            out["metadata"] = item["metadata"]
        if behaviour.kind == "timeout":
            behaviour = Behaviour("500")  # a job has no client waiting: it reports an error
        status, _headers, data = self._respond(behaviour, body, text)
        payload = json.loads(data)
        if status == 200:
            out["response"] = payload
        else:
            out["error"] = payload["error"]
        return out

    @staticmethod
    def _job_payload(job: FakeBatchJob) -> dict[str, Any]:
        # The shape of the long-running operation the Developer API returns for a batch.
        meta: dict[str, Any] = {
            "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch",
            "name": f"batches/{job.id}",
            "displayName": job.display_name,
            "model": f"models/{job.model}",
            "state": job.state,
            "createTime": "2026-01-01T00:00:00Z",
        }
        if job.output is not None:
            meta["output"] = {"inlinedResponses": {"inlinedResponses": job.output}}
        payload: dict[str, Any] = {"name": f"batches/{job.id}", "metadata": meta}
        if job.state != "BATCH_STATE_PENDING" and job.state != "BATCH_STATE_RUNNING":
            payload["done"] = True
        if job.state == "BATCH_STATE_FAILED":
            payload["error"] = {"code": 13, "message": "scripted job failure"}
        return payload

    def _usage(self, text: str, output: int) -> dict[str, int]:
        p = self.prompt_tokens if self.prompt_tokens is not None else max(1, len(text) // 4)
        return {
            "promptTokenCount": p,
            "candidatesTokenCount": output,
            "totalTokenCount": p + output,
        }

    def _respond(
        self, b: Behaviour, body: dict[str, Any], text: str
    ) -> tuple[int, dict[str, str], bytes]:
        kind = b.kind
        if kind in ("429", "503"):
            headers = {} if b.retry_after is None else {"Retry-After": f"{b.retry_after:g}"}
            status = "RESOURCE_EXHAUSTED" if kind == "429" else "UNAVAILABLE"
            return _error(int(kind), status, "scripted failure", headers)
        if kind in ("500", "400", "401", "403", "404"):
            status = {
                "500": "INTERNAL",
                "400": "INVALID_ARGUMENT",
                "401": "UNAUTHENTICATED",
                "403": "PERMISSION_DENIED",
                "404": "NOT_FOUND",
            }[kind]
            return _error(int(kind), status, "scripted failure")
        if kind == "empty":
            return _json(200, {"candidates": [], "usageMetadata": self._usage(text, 0)})
        if kind == "safety":
            payload = {
                "candidates": [
                    {
                        "finishReason": "SAFETY",
                        "index": 0,
                        "safetyRatings": [
                            {
                                "category": "HARM_CATEGORY_DANGEROUS_CONTENT",
                                "probability": "HIGH",
                                "blocked": True,
                            }
                        ],
                    }
                ],
                "usageMetadata": self._usage(text, 0),
            }
            return _json(200, payload)
        if kind == "prompt_blocked":
            return _json(
                200,
                {
                    "promptFeedback": {"blockReason": "SAFETY"},
                    "usageMetadata": self._usage(text, 0),
                },
            )
        if kind == "malformed":
            answer_text = b.text if b.text is not None else '{"category": "oops", "confid'
        else:  # ok, and timeout (whose answer arrives after the client gave up)
            answer = self.answer(body)
            answer_text = answer if isinstance(answer, str) else json.dumps(dict(answer))
        payload = {
            "candidates": [
                {
                    "content": {"parts": [{"text": answer_text}], "role": "model"},
                    "finishReason": "STOP",
                    "index": 0,
                }
            ],
            "usageMetadata": self._usage(text, self.output_tokens),
            "modelVersion": "fake-gemini",
        }
        return _json(200, payload)


def _json(
    status: int, payload: Mapping[str, Any], headers: Mapping[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    return status, dict(headers or {}), json.dumps(payload).encode()


def _error(
    status: int, code: str, message: str, headers: Mapping[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    return _json(status, {"error": {"code": status, "message": message, "status": code}}, headers)


class _Handler(BaseHTTPRequestHandler):
    owner: FakeGemini
    # HTTP/1.1 keeps connections alive, as the SDK's httpx pool expects.
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes; with Nagle on, the body waits for the client's
    # delayed ACK (~40 ms per request), which would dominate a latency benchmark.
    disable_nagle_algorithm = True

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        self._send(*self.owner._handle(self.path, raw))

    def do_GET(self) -> None:
        self._send(*self.owner._handle_batch("GET", self.path.split("?", 1)[0], b""))

    def _send(self, status: int, headers: dict[str, str], data: bytes) -> None:
        if (status, headers, data) == NO_ANSWER:
            self.close_connection = True
            return
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=UTF-8")
            self.send_header("Content-Length", str(len(data)))
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a scripted timeout): nothing to answer

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean
