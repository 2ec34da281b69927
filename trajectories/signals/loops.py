"""Stuck in loop: the same plan (exact, near-identical or differing only in literals) repeated
without progress."""

from __future__ import annotations

import re
from typing import Any

from trajectories.model import Trajectory
from trajectories.signals._common import (
    _MAX_CLUSTERS,
    STUCK_IN_LOOP,
    ActionView,
    Signal,
    _cite,
    clip,
    has_final_answer,
)

_RE_LITERAL = re.compile(r"'(?:[^']|'')*'|\"[^\"]*\"|\b\d+(?:\.\d+)?\b")
_RE_BUDGET = re.compile(
    r"max(?:imum)?[\s_-]*(?:number of\s+)?(?:turns|steps|iterations)|turn (?:limit|budget)"
    r"|budget (?:exhausted|exceeded)|too many (?:turns|steps)",
    re.I,
)


def _mentions_budget(text: Any) -> bool:
    if not isinstance(text, str) or not text:
        return False
    low = clip(text, 400).lower()
    if not any(k in low for k in ("turn", "step", "budget", "iteration")):
        return False
    return bool(_RE_BUDGET.search(low))


_RE_WORD = re.compile(r"\w+")


def _tokens(payload: str) -> frozenset[str]:
    # Words only: punctuation adds little to plan similarity and a simple pattern is fast.
    return frozenset(_RE_WORD.findall(payload))


def _template(payload: str) -> str:
    return _RE_LITERAL.sub("?", payload)


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    la, lb = len(a), len(b)
    small, large = (la, lb) if la <= lb else (lb, la)
    if small < 0.9 * large:  # the bound |a&b|/|a|b| <= small/large already fails
        return small / large
    return len(a & b) / len(a | b)


#: An identical action that returns rows is a loop only from this many runs on: run three
#: times it is often a user asking again; the same rows fetched five times add nothing.
_RERUNS_WITHOUT_PROGRESS = 5

_NO_ARGUMENTS = frozenset({"", "null", "{}", "[]", "none"})


def _a_plan(view: ActionView, trajectory: Trajectory) -> bool:
    """Whether an action says what it does: code, or a named tool with arguments. A call
    that could not be read (no name, no arguments: an importer that lost them) or an
    argument-less schema call repeats without being a loop of the agent's."""
    if view.sql or view.python:
        return True
    if len(view.payload) < 12:
        return False
    step = trajectory.steps[view.index]
    arguments = (step.arguments or "").strip().lower()
    return bool(step.name) and arguments not in _NO_ARGUMENTS


def detect_loop(views: list[ActionView], trajectory: Trajectory) -> list[Signal]:
    # Cluster actions by plan, against each cluster's first member: the same normalised text
    # (exact), token-set Jaccard >= 0.9 (near), or the same SQL/code once literals are masked
    # (template: guessing ids one after another). Template matches alone are weaker evidence,
    # since exploring a dictionary with different search terms looks the same.
    clusters: list[dict[str, Any]] = []
    for view in views:
        if not _a_plan(view, trajectory):
            continue
        toks = _tokens(view.payload)
        # Masking literals only makes sense for code; lookups are compared by their words.
        tmpl = _template(view.payload) if (view.sql or view.python) else view.payload
        # Compare with the most recent plans only: loops are local, and this bounds the cost
        # on very long trajectories.
        for cl in reversed(clusters[-_MAX_CLUSTERS:]):
            if cl["payload"] == view.payload:
                how = "exact"
            elif _jaccard(cl["tokens"], toks) >= 0.9:
                how = "near"
            elif cl["template"] == tmpl and (view.sql or view.python):
                how = "template"
            else:
                continue
            cl["members"].append((view, how))
            break
        else:
            clusters.append(
                {
                    "payload": view.payload,
                    "tokens": toks,
                    "template": tmpl,
                    "members": [(view, "exact")],
                }
            )
    answered = has_final_answer(trajectory.final_answer)
    last_index = views[-1].index if views else -1
    budget = any(
        _mentions_budget(s.content) or _mentions_budget(s.observation)
        for s in trajectory.steps[-3:]
    )
    best: Signal | None = None
    for cl in clusters:
        members: list[tuple[ActionView, str]] = cl["members"]
        if len(members) < 3:
            continue
        exact = sum(1 for _, how in members if how == "exact")
        close = sum(1 for _, how in members if how in ("exact", "near"))
        unproductive = sum(1 for m, _ in members if m.error or m.empty)
        mostly_unproductive = unproductive * 3 >= len(members) * 2
        stalled = not answered or budget
        if exact >= 3 and (mostly_unproductive or stalled):
            conf, desc = 0.85, f"the same action repeated {exact} times"
            if mostly_unproductive:
                desc += f", {unproductive} of {len(members)} with empty or error results"
        elif exact >= _RERUNS_WITHOUT_PROGRESS:
            # Re-running a query that worked (e.g. when a user asks again) is not unproductive
            # the first few times; the same rows fetched again and again are.
            conf, desc = 0.5, f"the same action repeated {exact} times, with results"
        elif close >= 3 and mostly_unproductive:
            conf, desc = 0.75, f"{close} near-identical actions, {unproductive} of "
            desc += f"{len(members)} with empty or error results"
        elif len(members) >= 4 and mostly_unproductive:
            conf, desc = 0.6, f"{len(members)} variants of one query differing only in literals, "
            desc += f"{unproductive} with empty or error results"
        elif close >= 3 and stalled:
            # Variants that return rows each change something: a revision, not a loop (the
            # taxonomy's loop is unproductive), unless the agent never gets to an answer.
            conf, desc = 0.45, f"{close} near-identical actions"
        else:
            continue
        ends_in_loop = members[-1][0].index == last_index
        if stalled:
            conf += 0.07
            desc += ", ending without an answer" if not answered else ", hitting the turn budget"
        elif not ends_in_loop:
            conf -= 0.1  # the agent broke out and answered: repetition may not be what failed
        if len(members) >= 6:
            conf += 0.03
        conf = round(min(conf, 0.95), 2)
        first = members[0][0]
        sig = Signal(STUCK_IN_LOOP, conf, first.index, _cite(first, desc + "."))
        if best is None or sig.confidence > best.confidence:
            best = sig
    return [best] if best else []
