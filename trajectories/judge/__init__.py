"""The judge: did the agent answer correctly? A verdict (correct / incorrect / undecided), the
method that reached it and its evidence, from rule layers a reviewer would state in a
sentence each (``_layers``: exact match, the last SQL result, the answer's prose, abstention).
What the rules cannot decide is undecided and goes to people. A scoring profile (``_profiles``:
``default``, ``ehrsql-2024``, ``robustgym``, ``ehr-complex``) chooses a benchmark's own
conventions instead, and is named in the evidence of every verdict it gives. Two layers sit
above these: an optional LLM judge (``opinions.llm_verdicts``; its verdicts go into the scores
overlay with method ``llm``) and people's own verdicts (kept in the annotation store,
``labeling``)."""

from trajectories.judge._abstain import abstains
from trajectories.judge._by_profile import judge_trajectory
from trajectories.judge._execute import EXECUTION_ROW_CAP, sandbox_executor
from trajectories.judge._layers import (
    JUDGE_VERSION,
    Case,
    case_from,
    case_of,
    judge,
    written_decimals,
)
from trajectories.judge._profiles import (
    PROFILE_RULES,
    Execution,
    Executor,
    Profile,
    profile_of_task,
)
from trajectories.judge._prose import judge_prose
from trajectories.judge._verdict import Judgement, Method, Verdict

__all__ = [
    "EXECUTION_ROW_CAP",
    "JUDGE_VERSION",
    "PROFILE_RULES",
    "Case",
    "Execution",
    "Executor",
    "Judgement",
    "Method",
    "Profile",
    "Verdict",
    "abstains",
    "case_from",
    "case_of",
    "judge",
    "judge_prose",
    "judge_trajectory",
    "profile_of_task",
    "sandbox_executor",
    "written_decimals",
]
