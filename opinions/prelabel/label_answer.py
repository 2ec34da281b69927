"""The pre-label answer an LLM must give, in the fields of ``llm.answer``: its category enum is
the taxonomy's names. ``label_schema`` builds it once per set of names; ``label_result`` turns a
validated answer into the ``LabelResult`` the store keeps.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from llm.answer import AnswerField, AnswerSchema
from opinions.prelabel.base import LabelResult

if TYPE_CHECKING:
    from taxonomy import Taxonomy
    from trajectories.model import Trajectory

__all__ = ["label_result", "label_schema", "schema_for_names"]


def _label_fields(names: tuple[str, ...]) -> tuple[tuple[str, AnswerField], ...]:
    return (
        (
            "category",
            AnswerField(
                "enum", "Primary failure category (one of the taxonomy names).", choices=names
            ),
        ),
        ("confidence", AnswerField("number", "Honest confidence in [0, 1].", bounds=(0.0, 1.0))),
        (
            "first_error_step",
            AnswerField(
                "integer", "Number of the first wrong step as shown, or null.", nullable=True
            ),
        ),
        (
            "rationale",
            AnswerField("string", "At most three sentences citing steps ('step N: ...')."),
        ),
        (
            "secondary_category",
            AnswerField(
                "enum",
                "A second contributing category, or null.",
                nullable=True,
                required=False,
                choices=names,
            ),
        ),
    )


@functools.lru_cache(maxsize=32)
def schema_for_names(names: tuple[str, ...]) -> AnswerSchema:
    if not names:
        raise ValueError("a taxonomy without categories cannot be labelled")
    return AnswerSchema("PrelabelAnswer", _label_fields(names))


def label_schema(taxonomy: Taxonomy) -> AnswerSchema:
    """The pre-label answer for ``taxonomy``, built once per set of category names; the model
    sees (and must emit) the display names."""
    names = tuple(c.name for c in taxonomy.categories)
    if not names:
        raise ValueError(f"taxonomy {taxonomy.name!r} has no categories")
    return schema_for_names(names)


def label_result(
    data: dict[str, Any],
    trajectory: Trajectory,
    taxonomy: Taxonomy,
    *,
    labeller: str,
    labeller_version: str,
) -> LabelResult:
    """A validated pre-label answer as the ``LabelResult`` the store keeps."""
    # The model sees display names (more meaningful to it); labels store the stable keys,
    # as the heuristic labeller and the annotation store do.
    category = taxonomy.category(data["category"]).key
    secondary = data.get("secondary_category")
    if secondary is not None:
        secondary = taxonomy.category(secondary).key
        if secondary == category:
            secondary = None
    step = data.get("first_error_step")
    if step is not None and not 0 <= step < len(trajectory.steps):
        step = None  # a step that does not exist is no pointer at all
    return LabelResult(
        category=category,
        confidence=float(data["confidence"]),
        first_error_step=step,
        rationale=str(data["rationale"]).strip(),
        labeller=labeller,
        labeller_version=labeller_version,
        secondary_category=secondary,
    )
