"""The LLM pre-labeller asks with the evidence, and a label contradicting decisive evidence goes
to a person: against the fake Gemini and OpenAI-compatible servers, through the real SDKs."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from llm.endpoints import OpenAIEndpoint
from llm.openai_compat import OpenAICompatClient
from opinions.prelabel.base import LabelResult
from opinions.prelabel.labellers import build_labeller
from opinions.prelabel.llm_labeller import GeminiLabeller, LLMLabeller, OpenAICompatLabeller
from opinions.prelabel.options import PrelabelOptions
from opinions.prelabel.prompt import build_prompt
from opinions.prelabel.prompt_evidence import CONTRADICTED_MAX, EvidenceGuidedLabeller
from opinions.prelabel.protocol import Labeller
from taxonomy import default_taxonomy
from tests import fake_gemini, fake_openai
from tests.fake_gemini import FakeGemini
from tests.fake_openai import FakeOpenAI
from trajectories.model import Outcome, Run, Step, StepKind, Task, Trajectory

TAX = default_taxonomy()
REF = ("SELECT COUNT(*) FROM microbiologyevents m WHERE m.subject_id = 1 "
       "AND strftime('%Y-%m', m.charttime) = '2100-12'")
LOGIC = TAX.category("sql_logic_error")
SEMANTIC = TAX.category("semantic_misunderstanding")


def trajectory() -> Trajectory:
    # The window is another month: decisive evidence (times, SQL logic at 0.75) at step 1.
    return Trajectory(
        task=Task(id="t1", question="How many tests did patient 1 have in 2100-12?",
                  reference_sql=REF, ground_truth=[[3]]),
        run=Run(name="r", model="agent"),
        steps=[Step(kind=StepKind.SQL, code="SELECT * FROM microbiologyevents LIMIT 1",
                    observation="[...]"),
               Step(kind=StepKind.SQL, code=REF.replace("2100-12", "2100-11"),
                    observation="[(5,)]"),
               Step(kind=StepKind.MESSAGE, role="assistant", content="5 tests.")],
        final_answer=[[5]],
        outcome=Outcome(success=False, reward=0.0),
    ).with_id()


def answering(category: str, seen: list[str], prompt_of: Callable[[Any], str]
              ) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def answer(body: dict[str, Any]) -> dict[str, Any]:
        seen.append(prompt_of(body))
        return {"category": category, "confidence": 0.85, "first_error_step": 1,
                "rationale": "step 1: another month.", "secondary_category": None}
    return answer


def run(lab: Labeller) -> LabelResult:
    async def go() -> LabelResult:
        try:
            return (await lab.alabel(trajectory(), TAX))[0]
        finally:
            await lab.aclose()
    return asyncio.run(go())


def check_prompt(prompt: str) -> None:
    assert "## Evidence found by re-executing the queries" in prompt
    assert "Proposed first faulty step: step 1; diverging part: times" in prompt
    assert f"proposed category: {LOGIC.name}" in prompt
    assert "time window 2100-11 vs reference 2100-12" in prompt  # the reason, fenced as data
    assert "The final answer against the ground truth:" in prompt
    assert "use its step as first_error_step" in prompt


def gemini(fake: FakeGemini) -> GeminiLabeller:
    return GeminiLabeller("gemini-2.5-pro", api_key="test-key", base_url=fake.base_url)


def openai(fake: FakeOpenAI) -> OpenAICompatLabeller:
    return OpenAICompatLabeller(OpenAIEndpoint(fake.base_url, api_key="k"), "local-model")


@pytest.mark.parametrize("server", ["gemini", "openai"])
def test_the_prompt_carries_the_proposal_and_a_contradiction_goes_to_a_person(
        server: str) -> None:
    for category, contradicted in ((SEMANTIC.name, True), (LOGIC.name, False)):
        seen: list[str] = []
        if server == "gemini":
            with FakeGemini(answer=answering(category, seen, fake_gemini.prompt_text)) as g:
                result = run(EvidenceGuidedLabeller(gemini(g)))
        else:
            with FakeOpenAI(answer=answering(category, seen, fake_openai.prompt_text)) as o:
                result = run(EvidenceGuidedLabeller(openai(o)))
        check_prompt(seen[0])
        assert result.evidence is not None and result.evidence["part"] == "times"
        if contradicted:
            assert result.confidence <= CONTRADICTED_MAX
            assert result.secondary_category == LOGIC.key
            assert "Contradicts the executed evidence" in result.rationale
        else:
            assert result.confidence == pytest.approx(0.85)
            assert "Contradicts" not in result.rationale


def test_without_the_wrapper_the_prompt_has_no_proposal_and_the_factory_wraps() -> None:
    assert "Evidence found" not in build_prompt(trajectory(), TAX).text
    with FakeOpenAI() as fake:
        options = PrelabelOptions(labeller="openai-compatible", model="local-model",
                                  openai=OpenAIEndpoint(fake.base_url, api_key="k"))
        lab = build_labeller(options, TAX)
        assert isinstance(lab, EvidenceGuidedLabeller) and lab.name == lab.inner.name
        unwrapped = build_labeller(options, TAX, with_evidence=False)
        assert isinstance(unwrapped, LLMLabeller)
        assert isinstance(unwrapped.llm, OpenAICompatClient)
        asyncio.run(lab.aclose())
        asyncio.run(unwrapped.aclose())
