"""Every LLM call ends on time, whatever the server does: a local server that answers with
headers and then drips one byte a second, never finishing its body, against the real ``openai``
and ``google-genai`` SDKs. The drip resets the SDKs' read timeouts with every byte, so before
the total deadlines a call never ended; each test runs under a generous guard that only fails
it when the call does not end at all."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

import pytest

from faillab_core.settings import Settings
from llm.endpoints import OpenAIEndpoint
from llm.errors import TransientError
from llm.gemini import GeminiJsonClient
from llm.openai_compat import OpenAICompatClient
from llm.retry import Attempts, Deadline, RetryPolicy, call_with_retries
from opinions.prelabel.base import PrelabelKey, PrelabelRecord
from opinions.prelabel.label_answer import label_schema
from opinions.prelabel.llm_labeller import OpenAICompatLabeller
from opinions.prelabel.options import PrelabelOptions, labeller_names
from opinions.prelabel.runner import run_prelabels
from opinions.verdict_llm import JudgeItem, make_llm_judge
from taxonomy import default_taxonomy
from trajectories.model import Run, Step, StepKind, Task, Trajectory

TAX = default_taxonomy()
# Far beyond any deadline set here: reaching it means the call did not end at all.
GUARD_S = 60.0
T = TypeVar("T")


class DripServer:
    """Answers every request with 200, a long Content-Length, and one byte a second."""

    def __init__(self) -> None:
        self.stopping = threading.Event()
        self.requests = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                server.requests += 1
                self.rfile.read(int(self.headers.get("Content-Length", "0") or 0))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "100000")
                self.end_headers()
                try:
                    while not server.stopping.is_set():
                        self.wfile.write(b" ")
                        self.wfile.flush()
                        server.stopping.wait(1.0)
                except OSError:
                    return  # the client gave up and closed the connection

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> DripServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def drip() -> Iterator[DripServer]:
    with DripServer() as server:
        yield server


def guarded(awaitable: Awaitable[T]) -> T:
    async def go() -> T:
        return await asyncio.wait_for(awaitable, GUARD_S)

    return asyncio.run(go())


def trajectories(n: int) -> list[Trajectory]:
    return [
        Trajectory(
            task=Task(id=f"task-{i}", question=f"How many ICU stays for patient {i}?",
                      ground_truth=[i], reference_sql="SELECT COUNT(*) FROM icustays"),
            run=Run(name="r", model="agent"),
            steps=[Step(kind=StepKind.SQL, code=f"SELECT {i}", observation="[(0,)]")],
            final_answer=[0],
        ).with_id()
        for i in range(n)
    ]


def test_an_openai_compatible_request_ends_at_its_total_deadline(drip: DripServer) -> None:
    client = OpenAICompatClient(OpenAIEndpoint(drip.base_url + "/v1", timeout_s=1.5,
                                               response_format="json_object"), "m")

    async def go() -> None:
        try:
            await client.complete("q", label_schema(TAX))
        finally:
            await client.aclose()

    with pytest.raises(TransientError, match=r"within 1\.5s") as err:
        guarded(go())
    assert err.value.kind == "timeout" and drip.requests == 1


def test_a_gemini_request_ends_at_its_total_deadline(drip: DripServer) -> None:
    client = GeminiJsonClient("gemini-2.5-flash", api_key="k", base_url=drip.base_url,
                              timeout_s=1.5)

    async def go() -> None:
        try:
            await client.complete("q", label_schema(TAX))
        finally:
            await client.aclose()

    with pytest.raises(TransientError, match=r"within 1\.5s") as err:
        guarded(go())
    assert err.value.kind == "timeout" and drip.requests == 1


def test_retries_end_at_the_item_deadline(drip: DripServer) -> None:
    client = OpenAICompatClient(OpenAIEndpoint(drip.base_url + "/v1", timeout_s=1.2,
                                               response_format="json_object"), "m")
    # Many attempts allowed and no pause between them: only the item's deadline ends it.
    policy = RetryPolicy(max_attempts=1000, base_delay_s=0.0, item_deadline_s=3.0)
    tried = Attempts()

    async def go() -> None:
        try:
            await call_with_retries(lambda: client.complete("q", label_schema(TAX)), policy,
                                    tried)
        finally:
            await client.aclose()

    with pytest.raises(TransientError, match="item's deadline of 3s") as err:
        guarded(go())
    assert err.value.kind == "deadline"
    assert 2 <= tried.calls < 1000 and drip.requests == tried.calls


def test_a_back_off_longer_than_what_is_left_is_not_waited_out() -> None:
    slept: list[float] = []

    async def sleep(delay: float) -> None:
        slept.append(delay)

    async def busy() -> tuple[str, Any]:
        raise TransientError("429", kind="rate_limited", retry_after_s=600.0)

    tried = Attempts()
    with pytest.raises(TransientError, match="429"):
        asyncio.run(call_with_retries(busy, RetryPolicy(item_deadline_s=60.0), tried,
                                      sleep=sleep))
    assert (tried.calls, slept) == (1, [])


def test_the_run_deadline_ends_every_item_of_the_run(drip: DripServer) -> None:
    store = _MemoryStore()
    endpoint = OpenAIEndpoint(drip.base_url + "/v1", timeout_s=30.0,
                              response_format="json_object")

    async def go() -> Any:
        lab = OpenAICompatLabeller(endpoint, "m")
        try:
            return await run_prelabels(trajectories(3), lab, TAX, store, concurrency=1,
                                       base_delay_s=0.0, item_deadline_s=None,
                                       run_deadline_s=2.0)
        finally:
            await lab.aclose()

    stats = guarded(go())
    assert (stats.labelled, stats.failed) == (0, 3)
    assert all("run's deadline of 2s" in e for e in stats.errors)
    # Every item is recorded as failed, so a later run picks them up; only the first was sent.
    assert len(store.saves) == 3 and drip.requests == 1


def test_the_llm_judge_ends_on_time_with_the_settings_timeout(
        drip: DripServer, tmp_path: Path) -> None:
    settings = Settings.from_env({
        "FAILLAB_WORKSPACE": str(tmp_path / "ws"),
        "FAILLAB_OPENAI_BASE_URL": drip.base_url + "/v1",
        "FAILLAB_OPENAI_MODEL": "judge-model",
        "FAILLAB_OPENAI_TIMEOUT": "1.5s",
    })
    judge = make_llm_judge(settings, "openai-compatible", env={},
                           retry=RetryPolicy(max_attempts=2, base_delay_s=0.0))
    item = JudgeItem("t1", "How many ICU stays?", "[[3]]", "Three.", "[(3,)]")
    verdicts = guarded(judge.ajudge([item]))
    assert verdicts[0].verdict == "undecided" and "timeout" in (verdicts[0].error or "")
    assert drip.requests == 2


def test_the_judges_item_deadline_is_a_setting(drip: DripServer, tmp_path: Path) -> None:
    settings = Settings.from_env({
        "FAILLAB_WORKSPACE": str(tmp_path / "ws"),
        "FAILLAB_OPENAI_BASE_URL": drip.base_url + "/v1",
        "FAILLAB_OPENAI_MODEL": "judge-model",
        "FAILLAB_OPENAI_TIMEOUT": "30s",
        "FAILLAB_LLM_ITEM_DEADLINE": "1.5s",
    })
    judge = make_llm_judge(settings, "openai-compatible", env={})  # the settings' deadlines
    item = JudgeItem("t1", "How many ICU stays?", "[[3]]", "Three.", "[(3,)]")
    started = time.monotonic()
    verdicts = guarded(judge.ajudge([item]))
    assert time.monotonic() - started < 15
    assert verdicts[0].verdict == "undecided"
    assert "item's deadline of 1.5s" in (verdicts[0].error or "")


def test_the_gemini_request_deadline_is_a_setting(
        drip: DripServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "test-key")
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
    settings = Settings.from_env({
        "FAILLAB_WORKSPACE": str(tmp_path / "ws"),
        "GOOGLE_GEMINI_BASE_URL": drip.base_url,
        "FAILLAB_GEMINI_TIMEOUT": "1s",
    })
    judge = make_llm_judge(settings, "gemini", env={"FAILLAB_ALLOW_EXTERNAL_LLM": "1"},
                           retry=RetryPolicy(max_attempts=1))
    item = JudgeItem("t1", "How many ICU stays?", "[[3]]", "Three.", "[(3,)]")
    verdicts = guarded(judge.ajudge([item]))
    assert "no complete answer within 1s" in (verdicts[0].error or "")
    assert drip.requests == 1


@pytest.mark.parametrize("labeller", labeller_names())
def test_a_runs_deadlines_come_from_the_settings(labeller: str) -> None:
    settings = Settings.from_env({
        "FAILLAB_OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "FAILLAB_OPENAI_MODEL": "m",
        "FAILLAB_LLM_ITEM_DEADLINE": "2m", "FAILLAB_LLM_RUN_DEADLINE": "3h",
        "FAILLAB_BATCH_DEADLINE": "30m", "FAILLAB_GEMINI_TIMEOUT": "7s",
        "FAILLAB_OPENAI_TIMEOUT": "9s",
    })
    options = PrelabelOptions(labeller=labeller).with_defaults(settings)
    assert (options.item_deadline_s, options.run_deadline_s, options.batch_deadline_s) == (
        120.0, 3 * 3600.0, 1800.0)
    request = {"heuristic": None, "gemini": 7.0, "openai-compatible": 9.0}[labeller]
    assert options.timeout_s == request


def test_deadlines_are_positive_or_none() -> None:
    with pytest.raises(ValueError, match="item_deadline_s"):
        RetryPolicy(item_deadline_s=0)
    assert Deadline(None).remaining() is None and not Deadline(None).expired()
    assert Deadline(0.0).expired()


class _MemoryStore:
    def __init__(self) -> None:
        self.records: dict[PrelabelKey, PrelabelRecord] = {}
        self.saves: list[PrelabelRecord] = []

    def get(self, key: PrelabelKey) -> PrelabelRecord | None:
        return self.records.get(key)

    def save(self, record: PrelabelRecord) -> None:
        self.records[record.key] = record
        self.saves.append(record)
