"""Confirmed human labels of a workspace as gold, and the stored LLM opinions beside them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from labeling.store.records import HUMAN_PROVENANCES
from opinions.learn.classifier import MIN_LABELS
from opinions.learn.evalset import GoldLabel

if TYPE_CHECKING:
    from labeling.store import Store
    from opinions.clusters.embed import Embedder
    from trajectories.workspace import Workspace

# What a person stands behind: the same set "human-confirmed only" counts everywhere.
CONFIRMED = HUMAN_PROVENANCES
MIN_CONFIRMED = MIN_LABELS


def confirmed_gold(store: Store, taxonomy_version: str | None = None) -> dict[str, GoldLabel]:
    """Final labels that a human made or confirmed (never LLM-only or disputed items)."""
    frame = store.adjudications.final_labels(taxonomy_version, people_only=True)
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


def evaluate_confirmed(
    ws: Workspace, store: Store, embedder: Embedder, *, ehr_path: Path | None = None,
    taxonomy_version: str | None = None,
) -> dict[str, Any]:
    """``evaluate_labellers`` with the workspace's confirmed labels as gold and its failures as
    items, plus a row per stored pre-labeller. Raises ValueError below ``MIN_CONFIRMED``."""
    from labeling.pool import workspace_failures
    from opinions.learn.evaluate import evaluate_labellers

    failures = workspace_failures(ws, store.verdicts.effective())
    gold = {k: v for k, v in confirmed_gold(store, taxonomy_version).items() if k in failures}
    if len(gold) < MIN_CONFIRMED:
        raise ValueError(f"only {len(gold)} failures have confirmed labels")
    stored = stored_opinions(store, taxonomy_version)
    figures = evaluate_labellers(failures, gold, embedder, stored, ehr_path=ehr_path)
    figures["labels"] = "confirmed labels of the workspace"
    return figures
