"""Which labeller a set of options means, built (or only named) from them: the offline
heuristic, or an LLM backend of the registry (``llm.backends``) asked through ``LLMLabeller``."""

from __future__ import annotations

from pathlib import Path

from llm.backends import backend
from opinions.prelabel.heuristic import HeuristicLabeller
from opinions.prelabel.options import PrelabelOptions
from opinions.prelabel.prompt import PROMPT_VERSION
from opinions.prelabel.protocol import Labeller, SyncLabellerAdapter
from opinions.prelabel.run_errors import PrelabelServiceError
from taxonomy import Taxonomy, TaxonomyError, default_taxonomy, load_taxonomy

__all__ = ["build_labeller", "labeller_identity", "load_run_taxonomy"]


def load_run_taxonomy(path: Path | None) -> Taxonomy:
    try:
        return load_taxonomy(path) if path is not None else default_taxonomy()
    except TaxonomyError as e:
        raise PrelabelServiceError(str(e)) from None


def labeller_identity(options: PrelabelOptions) -> tuple[str, str, str]:
    """(name, model, prompt version) of the labeller the options describe, without building it
    (building an LLM client needs credentials; the page only wants to know which cache keys to
    read). An LLM backend's model is the options' (after ``with_defaults``)."""
    if not options.uses_llm:
        return (HeuristicLabeller.name, HeuristicLabeller.model, HeuristicLabeller.prompt_version)
    entry = backend(options.labeller)
    return (entry.name, options.model or entry.fallback_model, PROMPT_VERSION)


def build_labeller(
    options: PrelabelOptions, taxonomy: Taxonomy, *, ehr_path: Path | None = None,
    with_evidence: bool = True,
) -> Labeller:
    """The labeller the options name. An LLM labeller is asked with the evidence unless
    ``with_evidence`` is false (the Batch API path builds its prompts itself)."""
    if not options.uses_llm:
        try:
            # With the workspace's EHR database, the evidence finder executes in the sandbox.
            return SyncLabellerAdapter(HeuristicLabeller(taxonomy, ehr_path=ehr_path))
        except TaxonomyError as e:
            raise PrelabelServiceError(
                f"the heuristic labeller cannot use this taxonomy: {e}"
            ) from None
    # Imported here: the SDKs are heavy and the heuristic path should not pay for them.
    from opinions.prelabel.llm_labeller import LLMLabeller
    from opinions.prelabel.prompt_evidence import EvidenceGuidedLabeller

    entry = backend(options.labeller)
    # The client is the registry's (LLMConfigError, a PrelabelServiceError, says what is
    # missing); the labeller adds the prompt and the label schema.
    llm = LLMLabeller(entry.client(options.connection()), name=entry.name)
    # An LLM is asked with the evidence (executed on the workspace's EHR database when it has
    # one), and its labels that contradict decisive evidence go to a person.
    return EvidenceGuidedLabeller(llm, ehr_path=ehr_path) if with_evidence else llm
