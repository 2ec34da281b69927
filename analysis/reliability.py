"""The reliability score RS(c) per run, the EHRSQL-2024 shared task's metric, in its table layout.

Each question scores +1 for a right answer or a right abstention, 0 for an abstention on a
question that has an answer, and -c for any other answer (a wrong one, or one to a question
that has none); RS(c) is the mean, in percent, reported at c = 0, 5, 10 and N (the run's
number of questions, so that a single wrong answer outweighs every right one).

A trajectory's outcome is the one every table reads (people's verdicts win, then the recorded,
then the judge's); it is an abstention when the judge found it abstained or gave no answer at
all (methods ``abstained`` and ``no_answer``). A trajectory whose outcome is undecided has no
score: it is left out and counted, like every undecided outcome in the success rates.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from analysis.chart_fit import display_labels
from analysis.success import run_order, select_runs

#: What the judge calls an abstention on a question that has an answer (score 0).
ABSTAINING_METHODS = frozenset({"abstained", "no_answer"})
PENALTIES = (0, 5, 10)
RELIABILITY_COLUMNS = ["run", "model", "questions", "undecided", "right", "abstained",
                       "wrong", "RS(0)", "RS(5)", "RS(10)", "RS(N)"]


def question_scores(df: pd.DataFrame) -> pd.Series:
    """+1, 0 or -1 per trajectory (NaN when undecided), the frame's index kept."""
    success = df["success"].astype("object")
    method = df["judge_method"].astype("object") if "judge_method" in df.columns \
        else pd.Series(None, index=df.index, dtype="object")
    scores = pd.Series(np.nan, index=df.index, dtype="float64")
    scores[success.eq(True)] = 1.0
    failed = success.eq(False)
    scores[failed & method.isin(ABSTAINING_METHODS)] = 0.0
    scores[failed & ~method.isin(ABSTAINING_METHODS)] = -1.0
    return scores


def rs(scores: pd.Series, penalty: float) -> float | None:
    """RS(penalty) in percent over the decided scores, or None when there are none."""
    decided = scores.dropna()
    if decided.empty:
        return None
    weighted = decided.where(decided >= 0, decided * penalty)
    return float(weighted.mean() * 100.0)


def reliability(df: pd.DataFrame, runs: Iterable[str] | None = None) -> pd.DataFrame:
    """One row per run: counts and RS(0), RS(5), RS(10), RS(N)."""
    sub = select_runs(df, runs)
    if sub.empty:
        return pd.DataFrame(columns=RELIABILITY_COLUMNS)
    rows = []
    for run in run_order(sub, runs):
        part = sub[sub["run"] == run]
        scores = question_scores(part)
        decided = scores.dropna()
        row: dict[str, object] = {
            "run": run, "model": str(part["model"].iloc[0]), "questions": len(decided),
            "undecided": int(scores.isna().sum()), "right": int((decided == 1).sum()),
            "abstained": int((decided == 0).sum()), "wrong": int((decided == -1).sum()),
        }
        for penalty in PENALTIES:
            row[f"RS({penalty})"] = rs(scores, penalty)
        row["RS(N)"] = rs(scores, len(decided))
        rows.append(row)
    return pd.DataFrame(rows, columns=RELIABILITY_COLUMNS)


def reliability_bars(table: pd.DataFrame) -> go.Figure:
    """RS(0), RS(5) and RS(10) per run, grouped (RS(N) is in the table: at N it dwarfs them)."""
    fig = go.Figure()
    decided = table.dropna(subset=["RS(0)"]) if not table.empty else table
    runs = display_labels([str(r) for r in decided["run"]]) if not decided.empty else []
    for penalty in PENALTIES:
        column = f"RS({penalty})"
        fig.add_trace(go.Bar(x=runs, y=decided[column] if not decided.empty else [],
                             name=column))
    fig.update_layout(title="Reliability score per run (EHRSQL-2024)", barmode="group",
                      yaxis_title="RS (%)", xaxis_title="run")
    return fig
