"""Scoring profiles: a named choice of conventions for judging a task set, recorded with every
verdict it gives (its evidence starts ``[profile NAME]``; the default profile's does not).

* ``default``: the rule layers of ``_layers`` (chat logs with prose answers).
* ``ehrsql-2024``: the EHRSQL-2024 shared task's scorer: the prediction is the last SQL query,
  post-processed and executed as the scorer does, compared with the gold SQL's result by its
  execution match (``trajectories.scoring_ehrsql``); a null prediction abstains, any other
  answers (a failing query or an empty result too).
* ``robustgym``: EHR-RobustGym's rule: the answer is the final answer, else the last SQL
  result; an empty or all-NULL answer is an abstention (a noise task's verified answer is NULL),
  anything else is compared by exact match.
* ``ehr-complex``: EHR-Complex's exact match of the final answer alone.

A trajectory's profile is the one the judge is asked for (``faillab verdicts judge
--profile``), else its task's ``scoring_profile`` field (set by the importer of a benchmark's own
files), else ``default``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = [
    "PROFILE_RULES",
    "Execution",
    "Executor",
    "Profile",
    "profile_of_task",
]


class Profile(StrEnum):
    DEFAULT = "default"
    EHRSQL_2024 = "ehrsql-2024"
    ROBUSTGYM = "robustgym"
    EHR_COMPLEX = "ehr-complex"


#: Each profile's rules, a sentence each (docs/scoring.md says the same).
PROFILE_RULES: dict[Profile, tuple[str, ...]] = {
    Profile.DEFAULT: (
        "The rule layers in order: exact match for a structured answer, the last SQL result, "
        "the answer's prose, abstention, no answer.",
    ),
    Profile.EHRSQL_2024: (
        "The prediction is the last SQL query; no query (a null prediction) is an abstention.",
        "Prediction and gold SQL get the scorer's post-processing and run in the sandbox at "
        "the benchmark's clock.",
        "Results are compared as the scorer does: numbers rounded to 3 decimals, rows sorted, "
        "the first 100 rows.",
        "Any prediction that is not null answers: one that fails, or finds nothing, is a "
        "wrong answer.",
        "On a question without an answer only an abstention is right.",
        "A query the sandbox stopped or refused (time limit, row cap) is undecided.",
    ),
    Profile.ROBUSTGYM: (
        "The answer is the final answer, else the last SQL result.",
        "An empty or all-NULL answer is an abstention: right on a question without an "
        "answer, an abstention on one with an answer.",
        "Any other answer is compared with the gold by exact match (scorer em-3).",
    ),
    Profile.EHR_COMPLEX: (
        "The final answer is compared with the gold by exact match (scorer em-3) alone; a "
        "prose answer that is not the gold is incorrect.",
    ),
}


@dataclass(frozen=True)
class Execution:
    """One query run in the sandbox: its rows, or the database's error (the query is wrong),
    or why the sandbox stopped it (nothing is known of its result)."""

    rows: list[list[Any]] | None = None
    error: str | None = None
    stopped: str | None = None

    @property
    def ran(self) -> bool:
        return self.rows is not None


#: Runs ``sql`` read-only at the reference time ``now`` (None: the sandbox's default clock).
Executor = Callable[[str, str | None], Execution]


def profile_of_task(task: Mapping[str, Any]) -> Profile:
    """The task's own profile (``scoring_profile``), else ``default``; an unknown name is the
    default too (a task file from a newer faillab)."""
    value = task.get("scoring_profile")
    try:
        return Profile(str(value)) if value else Profile.DEFAULT
    except ValueError:
        return Profile.DEFAULT
