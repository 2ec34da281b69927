"""The LLM judge applied to a workspace: what the rule layers leave undecided is asked of the
LLM (``opinions.verdict_llm``) and its verdicts go into the workspace's scores overlay with
method ``llm`` and the model's rationale as evidence.

Only trajectories that need it are sent: judged ``undecided`` by the rules, with a gold answer
(without one there is nothing to compare) and without a harness reward. An LLM ``undecided``
(or a failed call) leaves the trajectory undecided: it goes to a person.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from opinions.verdict_llm import (
    JUDGE_PROMPT_VERSION,
    JudgeAborted,
    JudgeItem,
    LLMJudge,
    LLMVerdict,
)
from trajectories import columns as col
from trajectories.judge import Judgement, Method, Verdict, case_of
from trajectories.model import Trajectory
from trajectories.workspace import Workspace

#: Characters of the last SQL result shown to the LLM (the judge's prompt cuts further).
RESULT_EXCERPT = 3_000


@dataclass(frozen=True)
class LLMRun:
    """What one run did: trajectories asked about, verdicts recorded, still undecided."""

    asked: int
    recorded: int
    undecided: int
    verdicts: tuple[LLMVerdict, ...]

    def as_json(self) -> dict[str, Any]:
        return {"asked": self.asked, "recorded": self.recorded, "undecided": self.undecided,
                "errors": [f"{v.trajectory_id}: {v.error}" for v in self.verdicts if v.error]}


def undecided_ids(ws: Workspace, limit: int | None = None) -> list[str]:
    """Trajectories the LLM judge may help with (see the module docstring), by id."""
    sql = (f"SELECT {col.ID} FROM {col.OUTCOMES} WHERE {col.JUDGE_VERDICT} = 'undecided' "
           f"AND {col.RECORDED_SUCCESS} IS NULL AND {col.JUDGE_METHOD} <> ? ORDER BY {col.ID}")
    ids = [str(r[0]) for r in ws.connect().execute(sql, [str(Method.NO_GROUND_TRUTH)])
           .fetchall()]
    return ids if limit is None else ids[:limit]


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def item_for(traj: Trajectory) -> JudgeItem:
    """The texts the LLM judge reads of one trajectory."""
    case = case_of(traj)
    gold = _as_text(case.ground_truth)
    if case.unanswerable:
        gold = f"{gold} (the question cannot be answered from the database: the right " \
               "answer is to say so)"
    excerpt = (case.last_output or "")[:RESULT_EXCERPT]
    return JudgeItem(str(traj.id), case.question, gold, _as_text(case.final_answer), excerpt)


def judgement_of(verdict: LLMVerdict) -> Judgement:
    """An LLM verdict as a judgement (undecided when the LLM could not tell or failed)."""
    value = Verdict(verdict.verdict) if verdict.error is None else Verdict.UNDECIDED
    evidence = f"{verdict.model}: {verdict.rationale}" if verdict.rationale else verdict.model
    return Judgement(value, Method.LLM, evidence)


def judge_undecided(ws: Workspace, judge: LLMJudge, *, limit: int | None = None) -> LLMRun:
    """Ask ``judge`` about every undecided trajectory (at most ``limit``) and record its
    verdicts in the overlay. Needs the rules' overlay (``Workspace.write_scores``) first."""
    items = []
    for tid in undecided_ids(ws, limit):
        traj = ws.get(tid)
        if traj is not None:
            items.append(item_for(traj))
    if not items:
        return LLMRun(0, 0, 0, ())
    version = f"llm:{judge.backend}:{judge.model}:prompt-{JUDGE_PROMPT_VERSION}"
    try:
        verdicts = judge.judge(items)
    except JudgeAborted as stopped:
        # What was answered before the service refused is kept (and was paid for).
        ws.record_judgements({v.trajectory_id: judgement_of(v) for v in stopped.verdicts},
                             version)
        raise
    judgements = {v.trajectory_id: judgement_of(v) for v in verdicts}
    recorded = ws.record_judgements(judgements, version)
    undecided = sum(1 for j in judgements.values() if j.verdict == Verdict.UNDECIDED)
    return LLMRun(len(items), recorded, undecided, tuple(verdicts))
