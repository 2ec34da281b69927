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

import csv
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from faillab_core.errors import FaillabError
from labeling.agreement import KappaResult, cohens_kappa
from trajectories import columns as col
from trajectories.judge import Verdict

if TYPE_CHECKING:
    from trajectories.workspace import Workspace

#: Recorded-outcome sources that are a person's verdict.
PERSON_SOURCES = ("human", "person", "annotator", "expert", "reviewer", "manual")
VERDICT_LEVELS = tuple(v.value for v in Verdict)
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
    #: Trajectories per scoring profile (named in the judge's evidence; ``default`` when not).
    by_profile: dict[str, int] = field(default_factory=dict)
    #: Who the judge is compared with: "people" or a reference file's name.
    against: str = "people"

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
            "by_profile": dict(self.by_profile), "against": self.against,
            "disagreements": self.disagreements.to_dict(orient="records"),
        }


#: What ``verdict_frame`` reads of each trajectory.
_FRAME_COLUMNS = (col.ID, col.RUN, col.QUESTION, col.RECORDED_SUCCESS, col.RECORDED_SOURCE,
                  col.JUDGE_VERDICT, col.JUDGE_METHOD, col.JUDGE_EVIDENCE, col.FINAL_ANSWER,
                  col.GROUND_TRUTH)
#: What ``against_frame`` reads of each trajectory.
_AGAINST_COLUMNS = (col.ID, col.RUN, col.TASK_ID, col.QUESTION, col.JUDGE_VERDICT,
                    col.JUDGE_METHOD, col.JUDGE_EVIDENCE, col.FINAL_ANSWER, col.GROUND_TRUTH)


def verdict_frame(ws: Workspace, people: Mapping[str, bool | None] | None = None
                  ) -> pd.DataFrame:
    """One row per trajectory with a person's verdict: its id, run, question, the person's
    verdict (``human``: True/False), where it came from, and the judge's verdict, method and
    evidence. ``people``: the store's verdicts (``store.verdicts.effective``); a None there is
    an open disagreement among people and is left out."""
    frame = ws.query_df(
        f"SELECT {col.listed(_FRAME_COLUMNS)} FROM {col.TRAJECTORIES} "
        f"ORDER BY {col.listed(col.LIST_ORDER)}")
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
    profiles = rows["judge_evidence"].map(profile_named) if len(rows) \
        else pd.Series(dtype="object")
    return VerdictReport(
        n=len(rows), agree=int(agree_mask.sum()), undecided=int(undecided_mask.sum()),
        wrong=int((~agree_mask & ~undecided_mask).sum()), kappa=kappa, confusion=confusion,
        by_method=by_method, disagreements=disagreements.reset_index(drop=True),
        by_profile={str(k): int(v) for k, v in profiles.value_counts().sort_index().items()})


_PROFILE_TAG = re.compile(r"\[profile ([a-z0-9-]+)\]")


def profile_named(evidence: Any) -> str:
    """The scoring profile a verdict's evidence names (``trajectories.judge``), or
    ``default``."""
    match = _PROFILE_TAG.match(evidence) if isinstance(evidence, str) else None
    return match.group(1) if match else "default"


# --------------------------------------------------------------- reference verdicts from a file

_CORRECT = frozenset({"1", "1.0", "true", "yes", "correct", "right", "pass", "passed"})
_INCORRECT = frozenset({"0", "0.0", "-1", "-1.0", "false", "no", "incorrect", "wrong",
                        "fail", "failed"})
_ID_COLUMNS = ("id", "trajectory_id", "task_id", "question_id", "qid")
_VERDICT_COLUMNS = ("verdict", "correct", "score", "result", "human_verdict", "label",
                    "correct_incorrect", "is_correct")


class ReferenceFileError(FaillabError, ValueError):
    """A reference file that cannot be read as per-question verdicts."""


def reference_verdict(value: Any) -> bool | None:
    """A reference verdict as right (True) or not (False): ``correct``/``incorrect``, true/false,
    or a scorer's per-question score (1 right; 0 an abstention on an answerable question and
    -1 a wrong answer are both not right). None when it says neither."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _CORRECT:
        return True
    if text in _INCORRECT:
        return False
    return None


def read_reference(path: Path) -> dict[str, bool | None]:
    """Per-question reference verdicts: a JSON object (id -> verdict or score, as an official
    scorer's per-question output), a JSON list of rows, or a CSV/TSV with an id column and a
    verdict column (``_ID_COLUMNS``, ``_VERDICT_COLUMNS``)."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as err:
        raise ReferenceFileError(f"{path}: {err}") from None
    rows: list[Mapping[str, Any]]
    if path.suffix.lower() in (".json", ".jsonl") or text.lstrip()[:1] in "{[":
        try:
            doc = json.loads(text)
        except ValueError as err:
            raise ReferenceFileError(f"{path}: not JSON ({err})") from None
        if isinstance(doc, dict):
            return {str(k): reference_verdict(v) for k, v in doc.items()}
        if not isinstance(doc, list) or not all(isinstance(r, dict) for r in doc):
            raise ReferenceFileError(f"{path}: expected an object of id -> verdict or a list of "
                                 "rows")
        rows = doc
    else:
        dialect = "excel-tab" if path.suffix.lower() == ".tsv" else "excel"
        rows = list(csv.DictReader(text.splitlines(), dialect=dialect))
    if not rows:
        return {}
    names = {re.sub(r"[^a-z0-9]+", "_", str(k).strip().lower()).strip("_"): k for k in rows[0]}
    id_col = next((names[c] for c in _ID_COLUMNS if c in names), None)
    verdict_col = next((names[c] for c in _VERDICT_COLUMNS if c in names), None)
    if id_col is None or verdict_col is None:
        raise ReferenceFileError(f"{path}: needs an id column ({', '.join(_ID_COLUMNS)}) and a "
                             f"verdict column ({', '.join(_VERDICT_COLUMNS)})")
    return {str(r[id_col]).strip(): reference_verdict(r[verdict_col]) for r in rows
            if r.get(id_col) not in (None, "")}


@dataclass(frozen=True)
class ReferenceMatch:
    rows: pd.DataFrame
    #: Reference ids that name no trajectory (or name several: a task of several runs).
    unmatched: list[str]
    ambiguous: list[str]
    #: Reference entries that say neither right nor wrong.
    unreadable: list[str]


def against_frame(ws: Workspace, reference: Mapping[str, bool | None],
                  run: str | None = None) -> ReferenceMatch:
    """``verdict_frame``'s rows with the reference's verdict as ``human``: a reference id is a
    trajectory id, else a task id with one trajectory (in ``run``, when given)."""
    sql = (f"SELECT {col.listed(_AGAINST_COLUMNS)} FROM {col.TRAJECTORIES}"
           + (f" WHERE {col.RUN} = ?" if run is not None else "")
           + f" ORDER BY {col.listed((col.RUN, col.TASK_ID, col.ID))}")
    frame = ws.query_df(sql, [run] if run is not None else None)
    by_id = {str(i): n for n, i in enumerate(frame["id"])}
    by_task: dict[str, list[int]] = {}
    for n, task in enumerate(frame["task_id"]):
        by_task.setdefault(str(task), []).append(n)
    picked: list[int] = []
    verdicts: list[bool] = []
    unmatched, ambiguous, unreadable = [], [], []
    for key, verdict in reference.items():
        if verdict is None:
            unreadable.append(key)
            continue
        if key in by_id:
            picked.append(by_id[key])
        elif len(by_task.get(key, [])) == 1:
            picked.append(by_task[key][0])
        elif key in by_task:
            ambiguous.append(key)
            continue
        else:
            unmatched.append(key)
            continue
        verdicts.append(verdict)
    out = frame.iloc[picked].copy()
    out["human"] = verdicts
    out["human_source"] = "reference"
    out["judge"] = out["judge_verdict"].fillna("undecided")
    out = out.drop(columns=["judge_verdict", "task_id"]).reset_index(drop=True)
    return ReferenceMatch(out, unmatched, ambiguous, unreadable)


def report_text(report: VerdictReport, *, limit: int = 20) -> str:
    """The report as plain text for the terminal."""
    if report.n == 0:
        if report.against != "people":
            return f"No trajectory matches an entry of {report.against}."
        return ("No trajectory has a person's verdict yet: record some on Annotate or the "
                "Trajectory page, or import a results file with a verdict column.")
    whose = "people's" if report.against == "people" else report.against
    lines = [f"automatic verdicts vs {whose}, over {report.n} trajectories:",
             f"  agree {report.agree} ({report.agree / report.n:.0%}), undecided "
             f"{report.undecided}, wrong {report.wrong}"]
    if report.kappa is not None and not math.isnan(report.kappa.kappa):
        k = report.kappa
        lines.append(f"  Cohen's kappa over the {k.n} decided: {k.kappa:.2f} "
                     f"(95% CI {k.ci_low:.2f} to {k.ci_high:.2f})")
    if report.by_profile:
        lines.append("  scoring profiles: " + ", ".join(f"{name} {count}" for name, count
                                                        in report.by_profile.items()))
    rows_are = "people" if report.against == "people" else "the reference"
    lines.append(f"  confusion (rows: {rows_are}; columns: the judge):")
    lines.extend("    " + line for line in report.confusion.to_string().splitlines())
    lines.append("  by method:")
    lines.extend("    " + line for line in report.by_method.to_string(index=False).splitlines())
    if len(report.disagreements):
        lines.append(f"  disagreements ({len(report.disagreements)}):")
        for row in report.disagreements.head(limit).itertuples(index=False):
            lines.append(f"    {row.id} · {rows_are}: {row.human} · judge: {row.judge} "
                         f"({row.method}): {row.evidence}")
        if len(report.disagreements) > limit:
            lines.append(f"    ... and {len(report.disagreements) - limit} more (--json)")
    return "\n".join(lines)
