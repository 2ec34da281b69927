"""The Gemini client (through the Gemini pre-labeller), against the local fake server (no
network). The prompt's own tests are tests/opinions/test_prompt.py."""

from __future__ import annotations

import asyncio
import enum
from typing import Any

import pydantic
import pytest
from google.genai import types

from llm.errors import FatalError, InvalidAnswerError, TransientError
from llm.gemini import GeminiConfigError, wire_schema
from llm.privacy import privacy_notice
from opinions.prelabel.label_answer import label_schema
from opinions.prelabel.llm_labeller import GeminiLabeller
from opinions.prelabel.prompt import (
    PROMPT_VERSION,
)
from taxonomy import Taxonomy, builtin_taxonomies, default_taxonomy
from tests.fake_gemini import Behaviour, FakeGemini
from trajectories.model import Run, Step, StepKind, Task, Trajectory

TAX = default_taxonomy()


def build_response_model(tax: Taxonomy) -> type[pydantic.BaseModel]:
    return label_schema(tax).model


def build_wire_schema(tax: Taxonomy) -> types.Schema:
    return wire_schema(label_schema(tax))


def make_trajectory(n: int = 0, *, steps: list[Step] | None = None) -> Trajectory:
    return Trajectory(
        task=Task(
            id=f"task-{n}",
            question=f"How many patients had lactate > 2 in admission {n}?",
            intent="Labs",
            scope="population",
            reference_sql="SELECT COUNT(DISTINCT subject_id) FROM labevents WHERE valuenum > 2",
            ground_truth=[n + 3],
            answer_format="a single integer",
        ),
        run=Run(name="bench", model="agent-x"),
        steps=steps
        if steps is not None
        else [
            Step(kind=StepKind.SQL, code="SELECT COUNT(*) FROM labevents", observation="[(12,)]"),
            Step(kind=StepKind.MESSAGE, content="The answer is 12."),
        ],
        final_answer=[12],
    ).with_id()


def labeller(fake: FakeGemini, **kw: Any) -> GeminiLabeller:
    return GeminiLabeller("gemini-2.5-pro", api_key="test-key", base_url=fake.base_url, **kw)


def call(fake: FakeGemini, t: Trajectory, **kw: Any) -> Any:
    async def go() -> Any:
        lab = labeller(fake, **kw)
        try:
            return await lab.alabel(t, TAX)
        finally:
            await lab.aclose()

    return asyncio.run(go())


# -- structured output -------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(builtin_taxonomies()))
def test_enum_is_exactly_the_taxonomy_categories(name: str) -> None:
    tax = builtin_taxonomies()[name]
    model = build_response_model(tax)
    cat_type = model.model_fields["category"].annotation
    assert isinstance(cat_type, type) and issubclass(cat_type, enum.Enum)
    assert [m.value for m in cat_type] == list(tax.names)
    with pytest.raises(ValueError):
        model.model_validate(
            {
                "category": "Not A Category",
                "confidence": 0.5,
                "first_error_step": None,
                "rationale": "x",
            }
        )


@pytest.mark.parametrize("name", sorted(builtin_taxonomies()))
def test_wire_schema_and_validation_model_are_one_schema(name: str) -> None:
    tax = builtin_taxonomies()[name]
    model, wire = build_response_model(tax), build_wire_schema(tax)
    # Built once per taxonomy, not per call.
    assert build_response_model(tax) is model and build_wire_schema(tax) is wire
    fields = model.model_fields
    assert wire.properties is not None and list(wire.properties) == list(fields)
    assert wire.required == [n for n, f in fields.items() if f.is_required()]
    for n, f in fields.items():
        assert wire.properties[n].description == f.description
    for n in ("category", "secondary_category"):
        assert wire.properties[n].enum == list(tax.names)


def test_request_carries_schema_enum_temperature_and_json_mime() -> None:
    with FakeGemini() as fake:
        result, usage = call(fake, make_trajectory())
        body = fake.requests[0].body
    gc = body["generationConfig"]
    assert gc["temperature"] == 0
    assert gc["responseMimeType"] == "application/json"
    assert gc["responseSchema"]["properties"]["category"]["enum"] == list(TAX.names)
    assert result.category in TAX.keys  # stored as the stable key, like the heuristic's labels
    assert result.labeller == "gemini"
    assert usage.input_tokens > 0 and usage.output_tokens == 60


# -- one call, each failure mode ---------------------------------------------------------------


def test_success_maps_answer_to_label_result() -> None:
    target = TAX.categories[2]

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        return {
            "category": target.name,
            "confidence": 0.8,
            "first_error_step": 0,
            "rationale": "step 0: counts rows, not patients.",
            "secondary_category": TAX.categories[0].name,
        }

    with FakeGemini(answer=answer) as fake:
        result, _ = call(fake, make_trajectory())
        assert fake.request_count == 1
    assert result.category == target.key
    assert result.secondary_category == TAX.categories[0].key
    assert result.first_error_step == 0
    assert result.confidence == pytest.approx(0.8)
    assert result.labeller_version.endswith(f"prompt-{PROMPT_VERSION}")


def test_out_of_range_step_becomes_none() -> None:
    def answer(body: dict[str, Any]) -> dict[str, Any]:
        return {
            "category": TAX.names[0],
            "confidence": 0.4,
            "first_error_step": 99,
            "rationale": "x",
            "secondary_category": None,
        }

    with FakeGemini(answer=answer) as fake:
        result, _ = call(fake, make_trajectory())
    assert result.first_error_step is None


def test_429_is_transient_with_retry_after() -> None:
    with FakeGemini(script=[Behaviour("429", retry_after=7)]) as fake:
        with pytest.raises(TransientError) as err:
            call(fake, make_trajectory())
        assert fake.request_count == 1  # the SDK did not retry on its own
    assert err.value.kind == "rate_limited"
    assert err.value.retry_after_s == pytest.approx(7)


def test_500_is_transient_and_not_retried_by_sdk() -> None:
    with FakeGemini(script=["500"]) as fake:
        with pytest.raises(TransientError) as err:
            call(fake, make_trajectory())
        assert fake.request_count == 1
    assert err.value.status == 500


def test_timeout_is_transient() -> None:
    fake = FakeGemini(script=[Behaviour("timeout", delay_s=3)])
    with fake, pytest.raises(TransientError) as err:
        call(fake, make_trajectory(), timeout_s=0.3)
    assert err.value.kind == "timeout"


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("malformed", "malformed"),
        ("empty", "empty"),
        ("safety", "blocked"),
        ("prompt_blocked", "blocked"),
    ],
)
def test_unusable_answers(kind: str, expected: str) -> None:
    with FakeGemini(script=[kind]) as fake, pytest.raises(InvalidAnswerError) as err:
        call(fake, make_trajectory())
    assert err.value.kind == expected


def test_wrong_enum_value_is_malformed() -> None:
    bad = {"category": "Made Up", "confidence": 1, "first_error_step": None, "rationale": "x"}
    fake = FakeGemini(answer=lambda body: bad)
    with fake, pytest.raises(InvalidAnswerError):
        call(fake, make_trajectory())


@pytest.mark.parametrize(("code", "aborts"), [("401", True), ("403", True), ("400", False)])
def test_fatal_errors(code: str, aborts: bool) -> None:
    with FakeGemini(script=[code]) as fake, pytest.raises(FatalError) as err:
        call(fake, make_trajectory())
    assert err.value.abort_run is aborts
    assert code in err.value.message
    if aborts:
        assert "API key" in err.value.message


def test_missing_key_is_a_clear_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    with pytest.raises(GeminiConfigError, match="GEMINI_API_KEY"):
        GeminiLabeller()


def test_key_and_base_url_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeGemini() as fake:
        monkeypatch.setenv("GEMINI_API_KEY", "env-key")
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", fake.base_url)

        async def go() -> None:
            lab = GeminiLabeller("gemini-2.5-flash")
            await lab.alabel(make_trajectory(), TAX)
            await lab.aclose()

        asyncio.run(go())
        assert fake.request_count == 1
        assert fake.requests[0].model == "gemini-2.5-flash"


def test_privacy_notice() -> None:
    dev = privacy_notice(vertexai=False)
    vtx = privacy_notice(vertexai=True)
    assert "PhysioNet" in dev and "NOT zero-retention" in dev
    assert "Vertex AI" in vtx and "zero data retention" in vtx


def test_vertex_without_project_is_a_clear_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT", raising=False)
    with pytest.raises(GeminiConfigError, match="GOOGLE_CLOUD_PROJECT"):
        GeminiLabeller(vertexai=True)
