"""How often people confirm the pre-labels they see: each person's latest label on a
pre-labelled item, counted per labeller.

A label made with `A` (or the same category chosen with the pre-label on screen) is a person
confirming that pre-label. The LLM-vs-human tables compare against *final* labels only, which
an item has once its assigned annotators agree; until then those tables are empty although
people have confirmed pre-labels, and this count shows what they did.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from labeling.store import LlmOpinion

CONFIRMATION_COLUMNS = ["labeller", "labels", "accepted", "changed", "acceptance_rate",
                        "blind_labels", "blind_agreed"]


def confirmations(labels: pd.DataFrame, opinions: Mapping[str, LlmOpinion]) -> pd.DataFrame:
    """Per labeller: people's labels on its pre-labelled items (each person's latest),
    accepted (same category, pre-label shown) and changed, and those made with the pre-label
    hidden and how many of them agree with it anyway."""
    human = labels[labels["source"] == "human"] if not labels.empty else labels
    if human.empty or not opinions:
        return pd.DataFrame(columns=CONFIRMATION_COLUMNS)
    latest = human.drop_duplicates(["annotator", "trajectory_id"], keep="last")
    counts: dict[str, dict[str, int]] = {}
    for row in latest.itertuples(index=False):
        opinion = opinions.get(str(row.trajectory_id))
        if opinion is None:
            continue
        tally = counts.setdefault(opinion.labeller or "LLM", dict.fromkeys(
            ("labels", "accepted", "changed", "blind_labels", "blind_agreed"), 0))
        same = str(row.category) == str(opinion.category)
        tally["labels"] += 1
        if bool(row.prelabel_shown):
            tally["accepted" if same else "changed"] += 1
        else:
            tally["blind_labels"] += 1
            tally["blind_agreed"] += int(same)
    rows = [{"labeller": name, **tally,
             "acceptance_rate": (tally["accepted"] / (tally["accepted"] + tally["changed"])
                                 if tally["accepted"] + tally["changed"] else None)}
            for name, tally in sorted(counts.items())]
    return pd.DataFrame(rows, columns=CONFIRMATION_COLUMNS)
