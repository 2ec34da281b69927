"""Confirmed human labels of a workspace as gold, and the stored LLM opinions beside them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from labeling.learn.evalset import GoldLabel

if TYPE_CHECKING:
    from labeling.store import Store

CONFIRMED = ("adjudicated", "human_agreed", "human_single")


def confirmed_gold(store: Store, taxonomy_version: str | None = None) -> dict[str, GoldLabel]:
    """Final labels that a human made or confirmed (never LLM-only or disputed items)."""
    frame = store.adjudications.final_labels(taxonomy_version)
    out: dict[str, GoldLabel] = {}
    for row in frame.to_dict("records"):
        if row["provenance"] not in CONFIRMED or not row["category"]:
            continue
        step = row.get("first_error_step")
        out[str(row["trajectory_id"])] = GoldLabel(
            str(row["trajectory_id"]), str(row["category"]),
            int(step) if step is not None and step == step else None,  # NaN from pandas
        )
    return out


def stored_opinions(
    store: Store, taxonomy_version: str | None = None
) -> dict[str, dict[str, tuple[str, int | None, bool]]]:
    """labeller name -> trajectory -> (category, step, True): the stored pre-labels (Gemini or
    the heuristic as cached when pre-labelling ran)."""
    out: dict[str, dict[str, tuple[str, int | None, bool]]] = {}
    for tid, opinion in store.prelabels.opinions(taxonomy_version).items():
        name = opinion.labeller or "llm"
        out.setdefault(f"stored {name}", {})[tid] = (
            opinion.category, opinion.first_error_step, True
        )
    return out
