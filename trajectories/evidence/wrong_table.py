"""The event the question names, looked for in another event's table (no reference SQL).

The taxonomy's Semantic Misunderstanding: "the wrong entity or table (ICU stays instead of all
ward transfers)". Without a reference SQL there is no table part to compare, but the question
says which kind of event it is about, and MIMIC-style databases keep each kind in a table of
its own: microbiology cultures in ``microbiologyevents``, not among the laboratory items of
``labevents``. When the question names a kind whose table the database has, the agent never
read that table and read another event table instead, the concept was misread: the step is
its first action on that other table or on its dictionary (``d_labitems`` for ``labevents``).

Only kinds whose words name one table are listed; a drug may sit in ``prescriptions`` or in
``inputevents``, a procedure in ``procedures_icd`` or ``procedureevents``, so those are not.
"""

from __future__ import annotations

import re

from trajectories import signals as sg
from trajectories.evidence.commit import first_reaching
from trajectories.evidence.parts import Divergence
from trajectories.evidence.probes import Probe
from trajectories.model import Trajectory
from trajectories.signals import SEMANTIC

#: Words of a question -> the one table that holds that kind of event.
EVENT_TABLES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), table) for pattern, table in (
        (r"microbiolog|\bcultures?\b|\bspecimens?\b|\borganisms?\b", "microbiologyevents"),
        (r"\bprescri", "prescriptions"),
        (r"\bdiagnos", "diagnoses_icd"),
        (r"\bcare units?\b|\bward transfers?\b", "transfers"),
        (r"\blab(?:oratory)? tests?\b", "labevents"),
        (r"\bvital signs?\b|\bheart rate\b|\brespiratory rate\b|\bblood pressure\b",
         "chartevents"),
    ))
#: Words that name a kind of event held in one of several tables: the tables a question with
#: them may read for good reason (so they are never "another event table instead").
MENTIONED_TABLES: tuple[tuple[re.Pattern[str], frozenset[str]], ...] = tuple(
    (re.compile(pattern), frozenset(tables)) for pattern, tables in (
        (r"\bprocedure|\bsurger|\bsurgical|\boperation|\bresection|\bcatheter",
         ("procedures_icd", "procedureevents")),
        (r"\bdrugs?\b|\bmedication|\bdose|\bprescri|\binfus|\binject",
         ("prescriptions", "inputevents", "emar")),
        (r"\binputs?\b|\bintake", ("inputevents",)),
        (r"\boutputs?\b|\burine", ("outputevents",)),
        (r"\bicu\b|\bintensive care", ("icustays", "transfers")),
        (r"\blab", ("labevents",)),
        (r"\bchart", ("chartevents",)),
    ))
#: Tables that hold events of one kind (not the patient or the admission itself).
_EVENT_KINDS = frozenset({"microbiologyevents", "prescriptions", "diagnoses_icd", "transfers",
                          "labevents", "chartevents", "inputevents", "outputevents",
                          "procedures_icd", "procedureevents", "icustays", "emar"})


def wrong_event_table(trajectory: Trajectory, probe: Probe | None = None
                      ) -> tuple[int, Divergence] | None:
    """(first step on the other table, divergence) when the question names a kind of event
    whose table exists (the EHR database has it, or without one the agent was shown its name),
    the agent never read it, and it read another event table; None otherwise. Uncalibrated
    (the finder gives the part's category and confidence)."""
    question = str(trajectory.task.question or "").lower()
    named = {table for pattern, table in EVENT_TABLES if pattern.search(question)}
    if not named:
        return None
    views = sg.action_views(trajectory)
    read: set[str] = set()
    for view in views:
        read |= {t.lower() for t in view.tables}
        if view.tool_table:
            read.add(view.tool_table.lower())
    shown = " ".join((s.observation or "") for s in trajectory.steps).lower()

    def exists(table: str) -> bool:
        if probe is not None:
            return probe.run(f"SELECT * FROM {table} LIMIT 0") is not None
        return re.search(rf"\b{table}\b", shown) is not None

    unread = sorted(t for t in named - read if exists(t))
    mentioned = set(named).union(*(tables for pattern, tables in MENTIONED_TABLES
                                   if pattern.search(question)))
    instead = (read & _EVENT_KINDS) - mentioned
    if not unread or not instead:
        return None
    first = first_reaching(trajectory, set(instead), len(trajectory.steps))
    if first is None:
        return None
    return first, Divergence(
        "tables", f"the question is about {', '.join(unread)} (its words name that kind of "
                  f"event), which no query read; step {first} looks in "
                  f"{', '.join(sorted(instead))} instead", SEMANTIC, 0.0)


__all__ = ["EVENT_TABLES", "wrong_event_table"]
