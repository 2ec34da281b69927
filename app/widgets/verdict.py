"""Was the agent right? The automatic verdict with its evidence, and a person's verdict by key.

Y records "the agent was right" (it leaves the failure queue; its pre-label stays as history),
N "the agent failed". A person's verdict wins over the recorded and the judged outcome in the
statistics, the queue and the audit pool. Which verdicts of others show is the store's
decision (blind mode: only one's own).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st

from faillab.app.viewer import viewer_of
from faillab.app.widgets.keymap import AGENT_FAILED, AGENT_RIGHT
from faillab.app.widgets.safe import escape_markdown, plain
from labeling.store import Store, StoreError, User

RIGHT_KEY, FAILED_KEY = AGENT_RIGHT, AGENT_FAILED
NOTE_KEY = "verdict_note"

_METHODS = {
    "harness": "the harness's recorded reward",
    "exact_match": "exact match",
    "sql_result": "the last SQL result",
    "prose": "the answer's text",
    "abstention": "abstention",
    "abstained": "abstaining on a question that has an answer",
    "no_answer": "no answer",
    "no_ground_truth": "no gold answer",
    "llm": "an LLM judge",
}
LLM_METHOD = "llm"


# Characters of evidence a compact verdict line shows (the Trajectory page shows it all).
COMPACT_EVIDENCE = 90


def automatic_verdict_text(outcome: dict[str, Any] | None, *, evidence: bool = True,
                           evidence_cap: int | None = None) -> str:
    """The automatic verdict in one line: the recorded outcome when there is one, and the
    judge's with its method (and its evidence, unless the page shows it elsewhere; at most
    ``evidence_cap`` characters of it)."""
    if not outcome:
        return "No automatic verdict."
    recorded = outcome.get("recorded_success")
    judged = _judge_text(outcome, evidence, evidence_cap)
    if recorded is not None:
        word = "success" if recorded else "failure"
        return f"Recorded by the producer: **{word}**." + (f" {judged}" if judged else "")
    return judged or "No automatic verdict."


def llm_rationale(outcome: dict[str, Any] | None) -> str | None:
    """The LLM judge's reasoning ("model: rationale") when an LLM gave the verdict: shown
    beside the verdict on every page, since a lead can only trust it after reading it."""
    if not outcome or str(outcome.get("judge_method")) != LLM_METHOD:
        return None
    said = str(outcome.get("judge_evidence") or "").strip()
    return said or None


def _judge_text(outcome: dict[str, Any], evidence: bool, cap: int | None = None) -> str:
    verdict = outcome.get("judge_verdict")
    if verdict is None:
        exact = outcome.get("exact_match")
        return ("Exact match: **unscored**." if exact is None
                else f"Exact match: **{'success' if exact else 'failure'}**.")
    method = _METHODS.get(str(outcome.get("judge_method")), str(outcome.get("judge_method")))
    text = f"Judge: **{verdict}** by {method}"
    if llm_rationale(outcome) is not None:
        # Drawn in full under the line (render_verdict), never cut or left out.
        return text + "; its reasoning:"
    if not evidence:
        return text + "."
    said = str(outcome.get("judge_evidence") or "")
    if cap is not None and len(said) > cap:
        said = said[: cap - 1].rstrip() + "…"
    return f"{text}: {escape_markdown(said)}"


def render_verdict(store: Store | None, trajectory_id: str, user: User | None,
                   outcome: dict[str, Any] | None, *, key: str, failed_button: bool = True,
                   note_key: str = NOTE_KEY, evidence: bool = True, compact: bool = False,
                   recorded: Callable[[str, str], None] | None = None) -> None:
    """The automatic verdict, the people's verdicts the viewer may see, and (signed in) the
    buttons that record one with the note in ``note_key``. ``recorded(trajectory_id,
    verdict)`` runs after a save. ``compact``: one row, the verdict line (evidence cut) beside
    the "Agent right" button, for pages where the buttons below must stay on screen."""
    undecided = outcome is not None and outcome.get("recorded_success") is None \
        and outcome.get("judge_verdict") == "undecided"
    # Compact: the evidence only when it is what a person must weigh (undecided); a decided
    # item's evidence is in the answer panel already.
    text = automatic_verdict_text(outcome, evidence=evidence and (undecided or not compact),
                                  evidence_cap=COMPACT_EVIDENCE if compact else None)
    if compact:
        line, button_cell = st.columns([3, 2], gap="small", vertical_alignment="center")
        line.caption((":material/help: " + text + " **A person decides.**") if undecided
                     else text)
        _rationale(outcome, line)
        _people_line(store, trajectory_id, user, container=line)
        if user is not None and store is not None:
            _buttons(store, trajectory_id, user, key, note_key, recorded, [button_cell])
        return
    if undecided:
        st.warning(text + " A person decides: was the agent right?",
                   icon=":material/help:")
    else:
        st.caption(text)
    _rationale(outcome, st)
    _people_line(store, trajectory_id, user)
    if user is None or store is None:
        return
    _buttons(store, trajectory_id, user, key, note_key, recorded,
             st.columns(2 if failed_button else 1, gap="small"))


def _rationale(outcome: dict[str, Any] | None, container: Any) -> None:
    """The LLM judge's reasoning as plain text (data, never markup); a long one scrolls in
    place so the buttons below keep their position."""
    said = llm_rationale(outcome)
    if said is None:
        return
    box = container.container(height=72 if len(said) > 160 else "content", border=False,
                              key="verdict_llm_rationale")
    with box:
        plain(said, caption=True)


def _people_line(store: Store | None, trajectory_id: str, user: User | None,
                 container: Any = st) -> None:
    """The people's verdicts this viewer may see (the store decides which)."""
    if store is None:
        return  # no store yet: nobody has given a verdict
    seen = store.verdicts.for_item(trajectory_id, viewer_of(user))
    if seen:
        container.caption("People's verdicts: " + "; ".join(
            f"{escape_markdown(v.annotator or '?')}: {v.verdict}"
            + (f" ({escape_markdown(v.note)})" if v.note else "") for v in seen))


def _buttons(store: Store, trajectory_id: str, user: User, key: str, note_key: str,
             recorded: Callable[[str, str], None] | None, cells: list[Any]) -> None:
    if error := st.session_state.pop(f"{key}_verdict_error", None):
        st.error(error)
    cells[0].button("Agent right", key=f"{key}_right", shortcut=RIGHT_KEY,
                    width="stretch", icon=":material/check_circle:",
                    help="Record that the final answer is correct (Y): the trajectory leaves "
                         "the failure queue and counts as a success.",
                    on_click=_record, args=(store, trajectory_id, user, "correct", key,
                                            note_key, recorded))
    if len(cells) > 1:
        cells[1].button("Agent failed", key=f"{key}_failed", shortcut=FAILED_KEY,
                        width="stretch", icon=":material/cancel:",
                        help="Record that the final answer is wrong (N).",
                        on_click=_record, args=(store, trajectory_id, user, "incorrect",
                                                key, note_key, recorded))


def _record(store: Store, trajectory_id: str, user: User, verdict: str, key: str,
            note_key: str, recorded: Callable[[str, str], None] | None) -> None:
    note = str(st.session_state.get(note_key) or "").strip() or None
    try:
        store.verdicts.record(trajectory_id, verdict, user.name, note=note)
    except StoreError as err:
        st.session_state[f"{key}_verdict_error"] = str(err)
        return
    st.session_state["verdict_last_saved"] = (trajectory_id, verdict)
    if recorded is not None:
        recorded(trajectory_id, verdict)
