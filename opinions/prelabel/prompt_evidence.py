"""The LLM pre-labeller asks with the evidence, and a label that contradicts it goes to a person.

``EvidenceGuidedLabeller`` wraps an LLM labeller (Gemini, OpenAI-compatible): before each call
it runs the first-divergence finder on the trajectory (executed in the SQL sandbox on the
workspace's EHR database when there is one) and the prompt carries that proposal (its step,
the diverging part, the evidence rows, the final answer against the ground truth) and asks the
model to check it and to name the step. After the call, a label whose category contradicts
*decisive* evidence (a calibrated confidence of at least ``EVIDENCE_MIN``, the bar at which the
heuristic lets evidence decide) is capped at ``CONTRADICTED_MAX`` and says so, so the routing
sends it to a person instead of trusting either machine.

The proposal reaches ``prompt.build_prompt`` through a context variable set around the wrapped
call (``prompt.using_evidence``), so the labellers' transport code is not touched; a prompt
built outside such a call (the batch path) carries none.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from llm.usage import Usage
from opinions.prelabel.base import LabelResult
from opinions.prelabel.heuristic import EVIDENCE_MIN, HeuristicLabeller
from opinions.prelabel.prompt import using_evidence
from opinions.prelabel.protocol import Labeller
from taxonomy import Taxonomy, TaxonomyError
from trajectories.model import Trajectory

__all__ = ["CONTRADICTED_MAX", "EvidenceGuidedLabeller", "contradicts"]

#: A contradicted label's confidence is at most this, the lowest a labeller here reports (the
#: heuristic's floor): routing by measured trust leaves it to the machine only if people found
#: that labeller right at its lowest confidence, so a person decides between the two machines.
CONTRADICTED_MAX = 0.05
def contradicts(result: LabelResult, evidence: Mapping[str, Any] | None,
                category: str | None) -> bool:
    """Whether the label's category differs from decisive evidence's (``category``: the
    evidence's category as a key of the label's taxonomy)."""
    if evidence is None or category is None:
        return False
    confidence = evidence.get("confidence")
    decisive = isinstance(confidence, (int, float)) and confidence >= EVIDENCE_MIN
    return decisive and result.category != category


class EvidenceGuidedLabeller:
    """An LLM ``Labeller`` asked with the evidence; see the module's docstring."""

    def __init__(self, inner: Labeller, *, ehr_path: Path | None = None) -> None:
        self.inner = inner
        self.name = inner.name
        self.version = inner.version
        self.model = inner.model
        self.prompt_version = inner.prompt_version
        self.remote = inner.remote
        self.ehr_path = ehr_path
        self._finders: dict[str, HeuristicLabeller] = {}

    def __getattr__(self, name: str) -> Any:
        # The runner and the page read labeller-specific attributes (price, response format).
        return getattr(self.inner, name)

    def _finder(self, taxonomy: Taxonomy) -> HeuristicLabeller:
        found = self._finders.get(taxonomy.version)
        if found is None:
            found = self._finders[taxonomy.version] = HeuristicLabeller(taxonomy,
                                                                        ehr_path=self.ehr_path)
        return found

    async def alabel(self, trajectory: Trajectory, taxonomy: Taxonomy
                     ) -> tuple[LabelResult, Usage]:
        try:
            finder = self._finder(taxonomy)
        except TaxonomyError:  # a taxonomy the rules cannot map: ask without evidence
            return await self.inner.alabel(trajectory, taxonomy)
        # The finder executes SQL: off the event loop, as the runner's other work is.
        found = await asyncio.to_thread(finder.evidence, trajectory)
        evidence = found.to_dict() if found is not None else None
        with using_evidence(evidence):
            result, usage = await self.inner.alabel(trajectory, taxonomy)
        if evidence is None:
            return result, usage
        category = finder.evidence_category(found)
        result = dataclasses.replace(result, evidence=evidence)
        if contradicts(result, evidence, category):
            result = dataclasses.replace(
                result,
                confidence=min(result.confidence, CONTRADICTED_MAX),
                secondary_category=result.secondary_category or category,
                rationale=(f"{result.rationale} [Contradicts the executed evidence "
                           f"({evidence.get('part')}: {category} at "
                           f"{float(evidence.get('confidence') or 0):.2f}, "
                           f"{evidence.get('reason')}): for a person to decide.]"),
            )
        return result, usage

    async def aclose(self) -> None:
        await self.inner.aclose()
