"""Which labeller a set of options means, built (or only named) from them."""

from __future__ import annotations

from pathlib import Path

from opinions.prelabel.errors import PrelabelServiceError
from opinions.prelabel.heuristic import HeuristicLabeller
from opinions.prelabel.options import DEFAULT_GEMINI_MODEL, PrelabelOptions
from opinions.prelabel.prompt import PROMPT_VERSION
from opinions.prelabel.protocol import Labeller, SyncLabellerAdapter
from taxonomy import Taxonomy, TaxonomyError, default_taxonomy, load_taxonomy

__all__ = ["DEFAULT_GEMINI_MODEL", "build_labeller", "labeller_identity", "load_run_taxonomy"]


def load_run_taxonomy(path: Path | None) -> Taxonomy:
    try:
        return load_taxonomy(path) if path is not None else default_taxonomy()
    except TaxonomyError as e:
        raise PrelabelServiceError(str(e)) from None


def labeller_identity(options: PrelabelOptions) -> tuple[str, str, str]:
    """(name, model, prompt version) of the labeller the options describe, without building it
    (building Gemini needs credentials; the page only wants to know which cache keys to read)."""
    if options.labeller == "heuristic":
        return (HeuristicLabeller.name, HeuristicLabeller.model, HeuristicLabeller.prompt_version)
    if options.labeller == "openai-compatible":
        # The same cache key shape as Gemini's: (model, prompt version); no default model.
        return ("openai-compatible", options.model or "", PROMPT_VERSION)
    return ("gemini", options.model or DEFAULT_GEMINI_MODEL, PROMPT_VERSION)


def build_labeller(
    options: PrelabelOptions, taxonomy: Taxonomy, *, ehr_path: Path | None = None,
    with_evidence: bool = True,
) -> Labeller:
    """The labeller the options name. An LLM labeller is asked with the evidence unless
    ``with_evidence`` is false (the Batch API path builds its prompts itself)."""
    if options.labeller == "heuristic":
        try:
            # With the workspace's EHR database, the evidence finder executes in the sandbox.
            return SyncLabellerAdapter(HeuristicLabeller(taxonomy, ehr_path=ehr_path))
        except TaxonomyError as e:
            raise PrelabelServiceError(
                f"the heuristic labeller cannot use this taxonomy: {e}"
            ) from None
    # An LLM is asked with the evidence (executed on the workspace's EHR database when it has
    # one), and its labels that contradict decisive evidence go to a person.
    from opinions.prelabel.prompt_evidence import EvidenceGuidedLabeller

    if options.labeller == "openai-compatible":
        llm = _openai_labeller(options)
        return EvidenceGuidedLabeller(llm, ehr_path=ehr_path) if with_evidence else llm
    # Imported here: the SDK is heavy and the heuristic path should not pay for it.
    from opinions.prelabel.gemini import GeminiConfigError, GeminiLabeller

    try:
        gemini = GeminiLabeller(
            options.model or DEFAULT_GEMINI_MODEL,
            vertexai=bool(options.vertex),
            project=options.project,
            location=options.location,
            base_url=options.base_url,
        )
    except GeminiConfigError as e:
        raise PrelabelServiceError(str(e)) from None
    return EvidenceGuidedLabeller(gemini, ehr_path=ehr_path) if with_evidence else gemini


def _openai_labeller(options: PrelabelOptions) -> Labeller:
    from opinions.prelabel.endpoints import OpenAIEndpoint
    from opinions.prelabel.openai_compat import OpenAICompatLabeller, OpenAIConfigError

    endpoint = options.openai or OpenAIEndpoint(options.base_url or "")
    try:
        return OpenAICompatLabeller(endpoint, options.model or "")
    except OpenAIConfigError as e:
        raise PrelabelServiceError(str(e)) from None
