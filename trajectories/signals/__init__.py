"""Signals read off a trajectory, shared by the pre-labellers and the evidence finder.

They sit below both (``opinions.prelabel`` and ``trajectories.evidence`` import them; they import
neither), so the two read a trajectory the same way.

Everything here is pure and tolerant: steps may lack code, carry non-JSON arguments, huge
observations or answers of any type, and no detector may raise on them. Each detector returns
zero or more ``Signal`` objects naming an internal category key (the EHR-Complex keys, plus the
Clean/Noise keys used by the RobustGym taxonomy), a confidence, the step where the evidence first
appears and a one-sentence rationale. Choosing among signals is the labeller's job.

One module per signal family:

- ``_common``: category keys, ``Signal``, ``ActionView`` and the step/text helpers;
- ``_answers``: expected and given answers normalised into tables;
- ``scope``: variable scope errors;
- ``loops``: stuck in loop;
- ``answer_format``: answer format errors;
- ``codes``: medical-code lookup errors;
- ``sql_logic``: SQL logic errors;
- ``semantic``: semantic misunderstanding and the fallback step;
- ``noise``: the Clean/Noise pairs of the RobustGym taxonomy.
"""

from __future__ import annotations

from trajectories.signals._answers import answers, as_table
from trajectories.signals._common import (
    ANSWER_FORMAT,
    CODE_LOOKUP,
    FALSE_NULL,
    NOISE_NOT_DETECTED,
    NULL_NOT_RETURNED,
    NULL_TEXTS,
    SEMANTIC,
    SQL_LOGIC,
    STUCK_IN_LOOP,
    VARIABLE_SCOPE,
    ActionView,
    Signal,
    action_views,
    has_final_answer,
)
from trajectories.signals.answer_format import detect_answer_format
from trajectories.signals.codes import detect_code_lookup
from trajectories.signals.loops import detect_loop
from trajectories.signals.noise import detect_noise_handling
from trajectories.signals.scope import detect_variable_scope
from trajectories.signals.semantic import detect_semantic, fallback_step
from trajectories.signals.sql_logic import detect_sql_logic

__all__ = [
    "ANSWER_FORMAT",
    "CODE_LOOKUP",
    "FALSE_NULL",
    "NOISE_NOT_DETECTED",
    "NULL_NOT_RETURNED",
    "NULL_TEXTS",
    "SEMANTIC",
    "SQL_LOGIC",
    "STUCK_IN_LOOP",
    "VARIABLE_SCOPE",
    "ActionView",
    "Signal",
    "action_views",
    "answers",
    "as_table",
    "detect_answer_format",
    "detect_code_lookup",
    "detect_loop",
    "detect_noise_handling",
    "detect_semantic",
    "detect_sql_logic",
    "detect_variable_scope",
    "fallback_step",
    "has_final_answer",
]
