"""The LLM pre-labellers: the rubric prompt (``prompt.py``) sent through any LLM client of the
transport (``llm.JsonLLM``), the answer asked for in the pre-label schema (``label_answer.py``:
its category an enum of the taxonomy's names, so the model cannot invent one) and turned into the
``LabelResult`` the store keeps. One request per trajectory (more only while an
OpenAI-compatible server's response format is being found).

``LLMLabeller`` wraps any client; ``GeminiLabeller`` and ``OpenAICompatLabeller`` build theirs
(the Batch API path also reads a job's answers through ``GeminiLabeller.parse_response``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llm.names import DEFAULT_GEMINI_MODEL, DEFAULT_GEMINI_TIMEOUT_S
from opinions.prelabel.base import LabelResult
from opinions.prelabel.label_answer import label_result, label_schema
from opinions.prelabel.prompt import DEFAULT_TOKEN_BUDGET, PROMPT_VERSION, build_prompt

if TYPE_CHECKING:
    import pydantic
    from google import genai
    from google.genai import types

    from llm.client import JsonLLM
    from llm.endpoints import OpenAIEndpoint
    from llm.gemini import GeminiJsonClient
    from llm.usage import Usage
    from taxonomy import Taxonomy
    from trajectories.model import Trajectory

__all__ = ["LABELLER_VERSION", "GeminiLabeller", "LLMLabeller", "OpenAICompatLabeller"]

# Version of the mapping from an answer to a label (the prompt has its own PROMPT_VERSION).
LABELLER_VERSION = "1"


class LLMLabeller:
    """``await labeller.alabel(trajectory, taxonomy) -> (LabelResult, Usage)`` through ``llm``;
    ``name`` is the backend's."""

    remote = True

    def __init__(
        self, llm: JsonLLM, *, name: str, token_budget: int = DEFAULT_TOKEN_BUDGET
    ) -> None:
        self.llm = llm
        self.name = name
        self.model = llm.model
        self.token_budget = token_budget
        self.prompt_version = PROMPT_VERSION
        self.version = f"{LABELLER_VERSION}/{self.model}/prompt-{PROMPT_VERSION}"
        self.price_per_mtok: tuple[float, float] | None = getattr(llm, "price_per_mtok", None)

    @property
    def structured_output(self) -> str | None:
        """The response format answers came in (None before the first answer)."""
        return self.llm.structured_output

    @property
    def structured_output_refused(self) -> tuple[str, ...]:
        """The response formats the server refused before one was found."""
        return tuple(getattr(self.llm, "refused", ()))

    def result(
        self, data: dict[str, Any], trajectory: Trajectory, taxonomy: Taxonomy
    ) -> LabelResult:
        return label_result(
            data, trajectory, taxonomy, labeller=self.name, labeller_version=self.version
        )

    async def alabel(self, trajectory: Trajectory, taxonomy: Taxonomy) -> tuple[LabelResult, Usage]:
        prompt = build_prompt(trajectory, taxonomy, token_budget=self.token_budget)
        data, usage = await self.llm.complete(prompt.text, label_schema(taxonomy))
        return self.result(data, trajectory, taxonomy), usage

    async def aclose(self) -> None:
        await self.llm.aclose()


class GeminiLabeller(LLMLabeller):
    """The Gemini pre-labeller (``llm.gemini.GeminiJsonClient``); ``timeout_s`` is the total
    deadline of one request."""

    def __init__(
        self,
        model: str = DEFAULT_GEMINI_MODEL,
        *,
        api_key: str | None = None,
        vertexai: bool = False,
        project: str | None = None,
        location: str | None = None,
        base_url: str | None = None,
        timeout_s: float = DEFAULT_GEMINI_TIMEOUT_S,
        token_budget: int = DEFAULT_TOKEN_BUDGET,
        client: GeminiJsonClient | None = None,
    ) -> None:
        # Imported here, as the SDKs are below: the heuristic path should not pay for them.
        from llm.gemini import GeminiJsonClient

        gemini = client or GeminiJsonClient(
            model,
            api_key=api_key,
            vertexai=vertexai,
            project=project,
            location=location,
            base_url=base_url,
            timeout_s=timeout_s,
        )
        super().__init__(gemini, name=gemini.name, token_budget=token_budget)
        self.gemini = gemini
        self.vertexai = gemini.vertexai
        self.timeout_s = gemini.timeout_s

    @property
    def client(self) -> genai.Client:
        """The SDK client (the batch path submits and polls jobs through it)."""
        return self.gemini.sdk

    def generation_config(self, taxonomy: Taxonomy) -> types.GenerateContentConfig:
        from llm.gemini import json_config

        return json_config(label_schema(taxonomy))

    def response_model(self, taxonomy: Taxonomy) -> type[pydantic.BaseModel]:
        return label_schema(taxonomy).model

    def parse_response(
        self,
        response: types.GenerateContentResponse,
        trajectory: Trajectory,
        taxonomy: Taxonomy,
    ) -> tuple[LabelResult, Usage]:
        """The label in one answer (interactive or from a batch job), or
        ``InvalidAnswerError``."""
        data, usage = self.gemini.parse(response, label_schema(taxonomy))
        return self.result(data, trajectory, taxonomy), usage


class OpenAICompatLabeller(LLMLabeller):
    """The pre-labeller of an OpenAI-compatible server (``llm.openai_compat``)."""

    def __init__(
        self, endpoint: OpenAIEndpoint, model: str, *, token_budget: int = DEFAULT_TOKEN_BUDGET
    ) -> None:
        from llm.openai_compat import OpenAICompatClient

        client = OpenAICompatClient(endpoint, model)
        super().__init__(client, name=client.name, token_budget=token_budget)
        self.price_per_mtok = endpoint.price_per_mtok
