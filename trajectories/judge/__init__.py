"""The judge: did the agent answer correctly? A verdict (correct / incorrect / undecided), the
method that reached it and its evidence, from rule layers a reviewer would state in a
sentence each (``_layers``: exact match, the last SQL result, the answer's prose, abstention).
What the rules cannot decide is undecided and goes to people. Two layers sit above these: an
optional LLM judge (``labeling.llm_verdicts``; its verdicts go into the scores overlay with
method ``llm``) and people's own verdicts (kept in the annotation store, ``labeling``)."""

from trajectories.judge._abstain import abstains
from trajectories.judge._layers import (
    JUDGE_VERSION,
    Case,
    Judgement,
    Method,
    Verdict,
    case_from,
    case_of,
    judge,
    judge_prose,
    judge_trajectory,
)

__all__ = [
    "JUDGE_VERSION",
    "Case",
    "Judgement",
    "Method",
    "Verdict",
    "abstains",
    "case_from",
    "case_of",
    "judge",
    "judge_prose",
    "judge_trajectory",
]
