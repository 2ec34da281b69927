"""How far the automatic verdicts agree with people's: the report a team reads before it trusts
the judge on its own logs.

People's verdicts are those in the annotation store (``store.verdicts``, as the viewer may see
them) and outcomes a file recorded as a person's (a verdict column whose source names a person:
``human``, ``human:...``, ``annotator``...); the store's win where both exist. The automatic
verdict is the judge's rules (``trajectories.judge``), never the recorded outcome itself. The
report gives, over every trajectory with a person's verdict: agreement (an undecided verdict
counts as not agreeing), the share the rules decided, Cohen's kappa with its 95% interval over
the decided ones, the confusion table, the figures by method, and each disagreement with its
evidence.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from labeling.agreement import KappaResult, cohens_kappa

if TYPE_CHECKING:
    from trajectories.workspace import Workspace

#: Recorded-outcome sources that are a person's verdict.
PERSON_SOURCES = ("human", "person", "annotator", "expert", "reviewer", "manual")
VERDICT_LEVELS = ("correct", "incorrect", "undecided")
DISAGREEMENT_COLUMNS = ["id", "run", "question", "human", "judge", "method", "evidence",
                        "final_answer", "ground_truth"]


def is_person_source(source: Any) -> bool:
    """True for a recorded outcome's source that names a person (``human:ana`` too)."""
    if not isinstance(source, str):
        return False
    head = source.strip().lower().split(":", 1)[0]
    return head in PERSON_SOURCES


@dataclass(frozen=True)
class VerdictReport:
    n: int
    agree: int
    undecided: int
    wrong: int
    kappa: KappaResult | None
    confusion: pd.DataFrame
    by_method: pd.DataFrame
    disagreements: pd.DataFrame

    @property
    def accuracy(self) -> float | None:
        return self.agree / self.n if self.n else None

    @property
    def decided_accuracy(self) -> float | None:
        decided = self.n - self.undecided
        return self.agree / decided if decided else None

    def as_json(self) -> dict[str, Any]:
        def number(value: float | None) -> float | None:
            return None if value is None or math.isnan(value) else round(value, 4)

        kappa = self.kappa
        return {
            "n": self.n, "agree": self.agree, "undecided": self.undecided, "wrong": self.wrong,
            "accuracy": number(self.accuracy), "accuracy_decided": number(self.decided_accuracy),
            "kappa": None if kappa is None else {"kappa": number(kappa.kappa),
                                                 "ci_low": number(kappa.ci_low),
                                                 "ci_high": number(kappa.ci_high),
                                                 "n": kappa.n},
            "confusion": {str(h): {str(j): int(v) for j, v in row.items()}
                          for h, row in self.confusion.iterrows()},
            "by_method": self.by_method.to_dict(orient="records"),
            "disagreements": self.disagreements.to_dict(orient="records"),
        }


def verdict_frame(ws: Workspace, people: Mapping[str, bool | None] | None = None
                  ) -> pd.DataFrame:
    """One row per trajectory with a person's verdict: its id, run, question, the person's
    verdict (``human``: True/False), where it came from, and the judge's verdict, method and
    evidence. ``people``: the store's verdicts (``store.verdicts.effective``); a None there is
    an open disagreement among people and is left out."""
    frame = ws.query_df(
        "SELECT id, run, question, recorded_success, recorded_source, judge_verdict, "
        "judge_method, judge_evidence, final_answer, ground_truth FROM trajectories "
        "ORDER BY run, task_id, rollout, id")
    stored = {k: v for k, v in (people or {}).items() if v is not None}
    recorded = frame["recorded_source"].map(is_person_source) & frame["recorded_success"].notna()
    human = pd.Series([stored.get(str(i)) for i in frame["id"]], index=frame.index,
                      dtype="object")
    human_source = pd.Series(["store" if v is not None else None for v in human],
                             index=frame.index, dtype="object")
    take = human.isna() & recorded
    human[take] = frame.loc[take, "recorded_success"].astype(bool)
    human_source[take] = frame.loc[take, "recorded_source"]
    out = frame[human.notna()].copy()
    out["human"] = human[human.notna()].astype(bool)
    out["human_source"] = human_source[human.notna()]
    out["judge"] = out["judge_verdict"].fillna("undecided")
    return out.drop(columns=["recorded_success", "recorded_source", "judge_verdict"])


def verdict_report(rows: pd.DataFrame) -> VerdictReport:
    """The report over ``verdict_frame``'s rows."""
    human = rows["human"].map({True: "correct", False: "incorrect"}) if len(rows) \
        else pd.Series(dtype="object")
    judge = rows["judge"] if len(rows) else pd.Series(dtype="object")
    agree_mask = human == judge
    undecided_mask = judge == "undecided"
    confusion = pd.crosstab(
        pd.Categorical(human, categories=["correct", "incorrect"]),
        pd.Categorical(judge, categories=list(VERDICT_LEVELS)), dropna=False)
    confusion.index.name, confusion.columns.name = "human", "judge"
    decided = ~undecided_mask
    kappa: KappaResult | None = None
    if decided.sum() > 0:
        table = confusion[["correct", "incorrect"]].to_numpy()
        if table.sum() > 0:
            kappa = cohens_kappa(table)
    methods = []
    for method, group in rows.groupby(rows["judge_method"].fillna("none"), sort=True):
        g_human = human.loc[group.index]
        g_judge = judge.loc[group.index]
        methods.append({"method": str(method), "n": len(group),
                        "agree": int((g_human == g_judge).sum()),
                        "undecided": int((g_judge == "undecided").sum()),
                        "wrong": int(((g_human != g_judge) & (g_judge != "undecided")).sum())})
    by_method = pd.DataFrame(methods, columns=["method", "n", "agree", "undecided", "wrong"])
    off = rows[~agree_mask]
    disagreements = pd.DataFrame({
        "id": off["id"], "run": off["run"], "question": off["question"],
        "human": human[~agree_mask], "judge": judge[~agree_mask],
        "method": off["judge_method"], "evidence": off["judge_evidence"],
        "final_answer": off["final_answer"], "ground_truth": off["ground_truth"],
    }, columns=DISAGREEMENT_COLUMNS)
    return VerdictReport(
        n=len(rows), agree=int(agree_mask.sum()), undecided=int(undecided_mask.sum()),
        wrong=int((~agree_mask & ~undecided_mask).sum()), kappa=kappa, confusion=confusion,
        by_method=by_method, disagreements=disagreements.reset_index(drop=True))


def report_text(report: VerdictReport, *, limit: int = 20) -> str:
    """The report as plain text for the terminal."""
    if report.n == 0:
        return ("No trajectory has a person's verdict yet: record some on Annotate or the "
                "Trajectory page, or import a results file with a verdict column.")
    lines = [f"automatic verdicts vs people's, over {report.n} trajectories:",
             f"  agree {report.agree} ({report.agree / report.n:.0%}), undecided "
             f"{report.undecided}, wrong {report.wrong}"]
    if report.kappa is not None and not math.isnan(report.kappa.kappa):
        k = report.kappa
        lines.append(f"  Cohen's kappa over the {k.n} decided: {k.kappa:.2f} "
                     f"(95% CI {k.ci_low:.2f} to {k.ci_high:.2f})")
    lines.append("  confusion (rows: people; columns: the judge):")
    lines.extend("    " + line for line in report.confusion.to_string().splitlines())
    lines.append("  by method:")
    lines.extend("    " + line for line in report.by_method.to_string(index=False).splitlines())
    if len(report.disagreements):
        lines.append(f"  disagreements ({len(report.disagreements)}):")
        for row in report.disagreements.head(limit).itertuples(index=False):
            lines.append(f"    {row.id} · people: {row.human} · judge: {row.judge} "
                         f"({row.method}): {row.evidence}")
        if len(report.disagreements) > limit:
            lines.append(f"    ... and {len(report.disagreements) - limit} more (--json)")
    return "\n".join(lines)
