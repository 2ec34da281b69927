"""The OpenAI-compatible pre-labeller, through the real ``openai`` SDK, against the local fake
chat-completions server (no network): the request, structured output and its fallbacks, every
failure mode, the runner's retries and cache, and the privacy interlock."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest

from faillab_core.settings import Settings
from labeling.store import open_store
from llm.endpoints import OpenAIEndpoint, is_own_address, parse_prices
from llm.errors import ConsentRequiredError, FatalError, InvalidAnswerError, TransientError
from llm.openai_compat import OpenAIConfigError
from llm.pricing import estimate_cost_usd
from opinions.prelabel.base import PrelabelKey, PrelabelRecord
from opinions.prelabel.consent import needs_consent, privacy_text, require_consent
from opinions.prelabel.labellers import build_labeller, labeller_identity
from opinions.prelabel.llm_labeller import OpenAICompatLabeller
from opinions.prelabel.options import PrelabelOptions
from opinions.prelabel.prompt import PROMPT_VERSION, build_prompt
from opinions.prelabel.run_errors import PrelabelServiceError
from opinions.prelabel.runner import run_prelabels
from opinions.prelabel.service import failed_trajectories, run_prelabelling
from taxonomy import default_taxonomy
from tests.fake_openai import Behaviour, FakeOpenAI
from trajectories.model import Run, Step, StepKind, Task, Trajectory
from trajectories.workspace import Workspace

TAX = default_taxonomy()
PROXIED_URL = "http://llm.example.com/v1"  # not local; reached only through the fake as proxy
ALLOW_ENV = "FAILLAB_ALLOW_EXTERNAL_LLM"


def make_trajectory(n: int = 0) -> Trajectory:
    return Trajectory(
        task=Task(
            id=f"task-{n}",
            question=f"How many patients had lactate > 2 in admission {n}?",
            intent="Labs",
            reference_sql="SELECT COUNT(DISTINCT subject_id) FROM labevents WHERE valuenum > 2",
            ground_truth=[n + 3],
        ),
        run=Run(name="bench", model="agent-x"),
        steps=[
            Step(kind=StepKind.SQL, code="SELECT COUNT(*) FROM labevents", observation="[(12,)]"),
            Step(kind=StepKind.MESSAGE, content="The answer is 12."),
        ],
        final_answer=[12],
    ).with_id()


def endpoint(url: str, **kw: Any) -> OpenAIEndpoint:
    return OpenAIEndpoint(url, api_key=kw.pop("api_key", "test-key"), **kw)


class HasBaseUrl(Protocol):
    @property
    def base_url(self) -> str: ...


def label(fake: HasBaseUrl, *trajectories: Trajectory, **kw: Any) -> list[Any]:
    """Each trajectory labelled by one labeller (one client), in order; errors are returned."""

    async def go() -> list[Any]:
        lab = OpenAICompatLabeller(endpoint(fake.base_url, **kw), "local-model")
        out: list[Any] = []
        try:
            for t in trajectories:
                try:
                    out.append(await lab.alabel(t, TAX))
                except Exception as e:
                    out.append(e)
            out.append(lab)
        finally:
            await lab.aclose()
        return out

    return asyncio.run(go())


class MemoryStore:
    def __init__(self) -> None:
        self.records: dict[PrelabelKey, PrelabelRecord] = {}

    def get(self, key: PrelabelKey) -> PrelabelRecord | None:
        return self.records.get(key)

    def save(self, record: PrelabelRecord) -> None:
        self.records[record.key] = record


class SleepRecorder:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


@pytest.fixture
def proxied(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    """The fake as the HTTP proxy: a client pointed at PROXIED_URL (not a local address)
    reaches the fake, so a test can show that nothing was sent, and that it would have been."""
    with FakeOpenAI() as fake:
        for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "http_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HTTP_PROXY", fake.proxy_url)
        monkeypatch.delenv(ALLOW_ENV, raising=False)
        yield fake


# -- the request and structured output ---------------------------------------------------------


def test_request_is_the_gemini_prompt_with_a_strict_json_schema() -> None:
    t = make_trajectory()
    with FakeOpenAI() as fake:
        (result, usage), lab = label(fake, t)
        req = fake.requests[0]
    assert req.path == "/v1/chat/completions" and req.model == "local-model"
    assert req.headers["authorization"] == "Bearer test-key"
    body = req.body
    assert body["temperature"] == 0
    # The same rubric prompt as the Gemini labeller, as one user message.
    assert body["messages"] == [{"role": "user", "content": build_prompt(t, TAX).text}]
    rf = body["response_format"]
    assert rf["type"] == "json_schema" and rf["json_schema"]["strict"] is True
    schema = rf["json_schema"]["schema"]
    assert schema["properties"]["category"]["enum"] == list(TAX.names)
    assert schema["properties"]["secondary_category"]["anyOf"][0]["enum"] == list(TAX.names)
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) == set(schema["properties"])
    assert result.category in TAX.keys and result.labeller == "openai-compatible"
    assert result.labeller_version.endswith(f"prompt-{PROMPT_VERSION}")
    assert usage.input_tokens > 0 and usage.output_tokens == 40
    assert lab.structured_output == "json_schema" and lab.structured_output_refused == ()


def test_answer_maps_names_to_keys() -> None:
    target, other = TAX.categories[2], TAX.categories[0]

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        return {"category": target.name, "confidence": 0.8, "first_error_step": 99,
                "rationale": "step 0: counts rows, not patients.",
                "secondary_category": other.name}

    with FakeOpenAI(answer=answer) as fake:
        (result, _), _ = label(fake, make_trajectory())
    assert (result.category, result.secondary_category) == (target.key, other.key)
    assert result.first_error_step is None  # step 99 does not exist
    assert result.confidence == pytest.approx(0.8)


def test_falls_back_to_json_object_and_keeps_it() -> None:
    with FakeOpenAI(formats=("json_object", "text")) as fake:
        (r1, _), (r2, _), lab = label(fake, make_trajectory(0), make_trajectory(1))
        asked = [(r.response_format, r.behaviour) for r in fake.requests]
    assert r1.category in TAX.keys and r2.category in TAX.keys
    # One refusal finds the mode; the second item goes straight to it.
    assert asked == [("json_schema", "format_refused"), ("json_object", "ok"),
                     ("json_object", "ok")]
    assert lab.structured_output == "json_object"
    assert lab.structured_output_refused == ("json_schema",)


def test_falls_back_to_text_and_reads_json_out_of_prose() -> None:
    with FakeOpenAI(formats=("text",)) as fake:
        (result, _), lab = label(fake, make_trajectory())
        asked = [r.response_format for r in fake.requests]
        assert "response_format" not in fake.requests[-1].body
    assert asked == ["json_schema", "json_object", "text"]
    assert result.category in TAX.keys
    assert lab.structured_output == "text"


def test_a_fixed_response_format_is_used_without_probing() -> None:
    with FakeOpenAI() as fake:
        (label_result, _), lab = label(fake, make_trajectory(), response_format="json_object")
        assert label_result.category in TAX.keys
        assert [r.response_format for r in fake.requests] == ["json_object"]
    assert lab.structured_output == "json_object"
    # A fixed format the server refuses is a clear, run-stopping error, not a silent fallback.
    with FakeOpenAI(formats=("text",)) as fake:
        err, _ = label(fake, make_trajectory(), response_format="json_schema")
    assert isinstance(err, FatalError) and err.abort_run
    assert "FAILLAB_OPENAI_RESPONSE_FORMAT=auto" in err.message


# -- each failure mode -------------------------------------------------------------------------


def test_429_is_transient_with_retry_after_and_not_retried_by_the_sdk() -> None:
    with FakeOpenAI(script=[Behaviour("429", retry_after=7)]) as fake:
        err, _ = label(fake, make_trajectory())
        assert fake.request_count == 1
    assert isinstance(err, TransientError) and err.kind == "rate_limited"
    assert err.retry_after_s == pytest.approx(7)


@pytest.mark.parametrize("code", ["500", "503"])
def test_server_errors_are_transient(code: str) -> None:
    with FakeOpenAI(script=[code]) as fake:
        err, _ = label(fake, make_trajectory())
        assert fake.request_count == 1
    assert isinstance(err, TransientError) and err.status == int(code)


def test_timeout_is_transient() -> None:
    with FakeOpenAI(script=[Behaviour("timeout", delay_s=3)]) as fake:
        err, _ = label(fake, make_trajectory(), timeout_s=0.3)
    assert isinstance(err, TransientError) and err.kind == "timeout"


def test_unreachable_server_is_transient() -> None:
    with FakeOpenAI() as fake:
        url = fake.base_url
    # The server is gone: nothing listens on that port any more.
    err, _ = label(FakeOpenAIAt(url), make_trajectory())
    assert isinstance(err, TransientError) and err.kind == "network"


class FakeOpenAIAt:
    """Just an address (for a server that has been stopped)."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url


@pytest.mark.parametrize(
    ("kind", "expected"),
    [("malformed", "malformed"), ("refusal", "refused"), ("empty", "empty"),
     ("length", "malformed")],
)
def test_unusable_answers(kind: str, expected: str) -> None:
    with FakeOpenAI(script=[kind]) as fake:
        err, _ = label(fake, make_trajectory())
    assert isinstance(err, InvalidAnswerError) and err.kind == expected
    assert err.usage.input_tokens > 0 or kind == "empty"  # billed tokens are kept


def test_an_answer_outside_the_schema_is_malformed() -> None:
    bad = {"category": "Made Up", "confidence": 1, "first_error_step": None, "rationale": "x"}
    with FakeOpenAI(answer=lambda body: bad) as fake:
        err, _ = label(fake, make_trajectory())
    assert isinstance(err, InvalidAnswerError) and "category" in err.message


@pytest.mark.parametrize(("code", "aborts", "hint"), [
    ("401", True, "FAILLAB_OPENAI_API_KEY"), ("403", True, "FAILLAB_OPENAI_API_KEY"),
    ("404", True, "FAILLAB_OPENAI_MODEL"), ("400", False, "rejected"),
])
def test_fatal_errors(code: str, aborts: bool, hint: str) -> None:
    with FakeOpenAI(script=[code]) as fake:
        err, _ = label(fake, make_trajectory())
        # A 400 that does not name the response format is not a reason to change format.
        assert fake.request_count == 1
    assert isinstance(err, FatalError) and err.abort_run is aborts
    assert code in err.message and hint in err.message


def test_missing_address_or_model_is_a_clear_config_error() -> None:
    with pytest.raises(OpenAIConfigError, match="FAILLAB_OPENAI_BASE_URL"):
        OpenAICompatLabeller(OpenAIEndpoint(""), "m")
    with pytest.raises(OpenAIConfigError, match="FAILLAB_OPENAI_MODEL"):
        OpenAICompatLabeller(OpenAIEndpoint("http://localhost:8000/v1"), "")


def test_the_openai_key_of_the_environment_is_never_sent(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-meant-for-openai")
    with FakeOpenAI() as fake:
        label(fake, make_trajectory(), api_key="")
        assert fake.requests[0].headers["authorization"] != "Bearer sk-meant-for-openai"


# -- the runner: retries, concurrency, cost, cache ---------------------------------------------


def run(fake: FakeOpenAI, trajectories: list[Trajectory], store: MemoryStore, **kw: Any) -> Any:
    async def go() -> Any:
        lab = OpenAICompatLabeller(endpoint(fake.base_url, price_per_mtok=(1.0, 2.0)), "m")
        try:
            return await run_prelabels(trajectories, lab, TAX, store, **kw)
        finally:
            await lab.aclose()

    return asyncio.run(go())


def test_429_and_500_are_retried_honouring_retry_after() -> None:
    ts = [make_trajectory(i) for i in range(3)]
    script: dict[str, list[Behaviour | str]] = {
        ts[1].id or "": [Behaviour("429", retry_after=7), "500"]}
    sleep = SleepRecorder()
    store = MemoryStore()
    with FakeOpenAI(per_trajectory=script) as fake:
        stats = run(fake, ts, store, sleep=sleep, base_delay_s=0.0)
        behaviours = [r.behaviour for r in fake.requests if r.trajectory_id == ts[1].id]
    assert behaviours == ["429", "500", "ok"]
    assert (stats.labelled, stats.failed, stats.calls) == (3, 0, 5)
    assert sleep.delays[0] >= 7  # the server's Retry-After is a floor
    assert store.records[next(k for k in store.records if k.trajectory_id == ts[1].id)].attempts \
        == 3


def test_concurrency_is_bounded_and_tokens_and_cost_are_counted() -> None:
    ts = [make_trajectory(i) for i in range(8)]
    with FakeOpenAI(latency_s=0.1, prompt_tokens=1000, output_tokens=50) as fake:
        stats = run(fake, ts, MemoryStore(), concurrency=3)
        assert 1 <= fake.max_in_flight <= 3
    assert (stats.labelled, stats.calls) == (8, 8)
    assert (stats.input_tokens, stats.output_tokens) == (8000, 400)
    # The configured prices, not the (Gemini) price table.
    assert stats.estimated_cost_usd == pytest.approx(estimate_cost_usd(
        "m", 8000, 400, prices=(1.0, 2.0)))
    assert stats.estimated_cost_usd == pytest.approx((8000 * 1.0 + 400 * 2.0) / 1e6)


def test_second_run_answers_from_the_cache() -> None:
    ts = [make_trajectory(i) for i in range(4)]
    store = MemoryStore()
    with FakeOpenAI() as fake:
        first = run(fake, ts, store)
        sent = fake.request_count
        second = run(fake, ts, store)
        assert fake.request_count == sent == 4  # the fake saw no second request
    assert (first.labelled, first.cached) == (4, 0)
    assert (second.labelled, second.cached, second.calls) == (0, 4, 0)
    key = next(iter(store.records))
    assert key.model == "m" and key.prompt_version == PROMPT_VERSION


def test_a_malformed_answer_is_asked_once_more_then_recorded_as_a_failure() -> None:
    ts = [make_trajectory(0)]
    store = MemoryStore()
    with FakeOpenAI(default="malformed") as fake:
        stats = run(fake, ts, store, sleep=SleepRecorder())
        assert fake.request_count == 2
    assert (stats.labelled, stats.failed) == (0, 1) and "malformed" in stats.errors[0]


# -- settings, options and the privacy interlock -----------------------------------------------


@pytest.mark.parametrize("url", [
    "http://localhost:8000/v1", "http://LOCALHOST:1234/v1", "http://gpu.localhost/v1",
    "http://127.0.0.1:11434/v1", "http://127.3.4.5/v1", "http://[::1]:8000/v1",
    "http://10.1.2.3/v1", "http://172.16.0.9/v1", "http://192.168.1.20:8000/v1",
    "http://169.254.1.1/v1", "http://100.101.102.103/v1", "http://[fd12::1]/v1",
    "http://[::ffff:192.168.0.1]/v1",
])
def test_own_addresses(url: str) -> None:
    # Names are resolved by the injected resolver: localhost names to loopback, as /etc/hosts
    # (or systemd-resolved) answers them.
    assert is_own_address(url, resolve=lambda host: ["127.0.0.1", "::1"])


@pytest.mark.parametrize("url", [
    "https://api.openai.com/v1", "https://res.openai.azure.com/openai/v1/", "http://8.8.8.8/v1",
    "http://localhost.example.com/v1", "http://mylocalhost/v1", "http://172.32.0.1/v1",
    "http://0.0.0.0/v1", "", "not a url", "http://[::]/v1",
])
def test_other_addresses(url: str) -> None:
    assert not is_own_address(url, resolve=lambda host: ["20.1.2.3"])  # a public address


def test_listed_host_names_count_as_own() -> None:
    assert not is_own_address("http://gpu01.lab.example.org:8000/v1", resolve=lambda h: [])
    assert is_own_address("http://GPU01.lab.example.org:8000/v1", ("gpu01.lab.example.org",))


def test_settings_fill_the_options_and_the_key_stays_out_of_argv_and_repr(
        tmp_path: Path) -> None:
    settings = Settings.from_env({
        "FAILLAB_WORKSPACE": str(tmp_path), "FAILLAB_OPENAI_BASE_URL": "http://10.0.0.5:8000/v1",
        "FAILLAB_OPENAI_API_KEY": "secret-key", "FAILLAB_OPENAI_MODEL": "qwen",
        "FAILLAB_OPENAI_RESPONSE_FORMAT": "json_object", "FAILLAB_OPENAI_TIMEOUT": "30",
        "FAILLAB_OPENAI_OWN_HOSTS": "a.example, b.example",
        "FAILLAB_OPENAI_PRICE_PER_MTOK": "0.5,1.5",
    })
    assert "secret-key" not in repr(settings)
    options = PrelabelOptions(labeller="openai-compatible").with_defaults(settings)
    assert options.model == "qwen" and options.openai is not None
    assert options.openai == OpenAIEndpoint(
        "http://10.0.0.5:8000/v1", api_key="secret-key", response_format="json_object",
        timeout_s=30.0, own_hosts=("a.example", "b.example"), price_per_mtok=(0.5, 1.5))
    assert "secret-key" not in repr(options) and "secret-key" not in options.to_argv()
    assert labeller_identity(options) == ("openai-compatible", "qwen", PROMPT_VERSION)
    lab = build_labeller(options, TAX)
    assert (lab.name, lab.model, lab.remote) == ("openai-compatible", "qwen", True)
    # --model wins over the setting.
    assert PrelabelOptions(labeller="openai-compatible", model="llama").with_defaults(
        settings).model == "llama"


@pytest.mark.parametrize(("env", "message"), [
    ({"FAILLAB_OPENAI_MODEL": "m"}, "FAILLAB_OPENAI_BASE_URL"),
    ({"FAILLAB_OPENAI_BASE_URL": "http://localhost:8000/v1"}, "FAILLAB_OPENAI_MODEL"),
    ({"FAILLAB_OPENAI_BASE_URL": "http://localhost:8000/v1", "FAILLAB_OPENAI_MODEL": "m",
      "FAILLAB_OPENAI_PRICE_PER_MTOK": "cheap"}, "FAILLAB_OPENAI_PRICE_PER_MTOK"),
])
def test_incomplete_settings_are_one_clear_error(env: dict[str, str], message: str) -> None:
    with pytest.raises(PrelabelServiceError, match=message):
        PrelabelOptions(labeller="openai-compatible").with_defaults(Settings.from_env(env))


def test_an_unknown_response_format_is_refused_when_the_settings_are_read() -> None:
    from faillab_core.settings import SettingsError

    with pytest.raises(SettingsError, match="FAILLAB_OPENAI_RESPONSE_FORMAT='xml' is not valid"):
        Settings.from_env({"FAILLAB_OPENAI_RESPONSE_FORMAT": "xml"})


def test_parse_prices() -> None:
    assert parse_prices("") is None
    assert parse_prices(" 0.15 , 0.6 ") == (0.15, 0.6)
    for bad in ("1", "a,b", "-1,2", "1,2,3"):
        with pytest.raises(ValueError):
            parse_prices(bad)


def openai_options(url: str, **kw: Any) -> PrelabelOptions:
    return PrelabelOptions(labeller="openai-compatible", model="m",
                           openai=OpenAIEndpoint(url, api_key="k"), **kw)


def test_consent_is_needed_only_away_from_own_machines() -> None:
    local = openai_options("http://127.0.0.1:8000/v1")
    remote = openai_options("https://llm.example.com/v1")
    assert not needs_consent(local) and needs_consent(remote)
    assert "local or private address" in privacy_text(local)
    assert "NOT a local or private address" in privacy_text(remote)
    assert "plain http" in privacy_text(openai_options(PROXIED_URL))
    require_consent(local, env={})  # nothing to acknowledge
    with pytest.raises(ConsentRequiredError, match=r"llm\.example\.com"):
        require_consent(remote, env={})
    require_consent(remote, env={ALLOW_ENV: "1"})
    require_consent(openai_options("https://llm.example.com/v1", allow_external=True), env={})


@pytest.fixture
def ws(demo_workspace: Path, tmp_path: Path) -> Workspace:
    root = tmp_path / "ws"
    shutil.copytree(demo_workspace, root)
    return Workspace(root)


def test_service_refuses_a_remote_server_before_sending_anything(
        ws: Workspace, proxied: FakeOpenAI) -> None:
    store = open_store(ws.default_annotations_url)
    try:
        with pytest.raises(ConsentRequiredError):
            run_prelabelling(ws, store, openai_options(PROXIED_URL, limit=2))
        assert proxied.request_count == 0
        # Acknowledged, the same run does reach the server (through the proxy): the refusal
        # above was the interlock, not an unreachable address.
        outcome = run_prelabelling(ws, store, openai_options(PROXIED_URL, limit=2,
                                                             allow_external=True))
    finally:
        store.close()
    assert outcome.stats.labelled == 2 and outcome.structured_output == "json_schema"
    assert {r.host for r in proxied.requests} == {"llm.example.com"}


def test_service_sends_to_an_own_server_without_acknowledgement(ws: Workspace) -> None:
    store = open_store(ws.default_annotations_url)
    try:
        items = list(failed_trajectories(ws))[:3]
        with FakeOpenAI(formats=("json_object",)) as fake:
            options = openai_options(fake.base_url)
            outcome = run_prelabelling(ws, store, options, env={}, trajectories=items)
            again = run_prelabelling(ws, store, options, env={}, trajectories=items)
            assert len(fake.answered()) == 3
    finally:
        store.close()
    assert (outcome.stats.labelled, outcome.labeller) == (3, "openai-compatible")
    assert outcome.structured_output == "json_object"
    assert outcome.structured_output_refused == ("json_schema",)
    assert (again.stats.cached, again.stats.calls, again.structured_output) == (3, 0, None)
