"""Every single-key shortcut of the keyboard pages, and what it means: one meaning per key on
every page (J/K were "next/previous step" on Annotate and "next/previous failure" on Trajectory).

Steps are J/K everywhere; moving between items (failures on Trajectory, tasks in the audit
review) is ``]``/``[``. Pages and widgets take their keys from here, the ``?`` lists are built
from here, and ``KEYS`` is the table docs/workflows.md shows (a test keeps the two equal).
No Streamlit in this module.
"""

from __future__ import annotations

STEP_NEXT, STEP_PREVIOUS = "J", "K"
ITEM_NEXT, ITEM_PREVIOUS = "]", "["
MARK_STEP = "F"
AGENT_RIGHT, AGENT_FAILED = "Y", "N"
ACCEPT_PRELABEL, SKIP = "A", "S"
UNDO, UNDO_TOO = "U", "Z"
TAKE_PRELABEL, TAKE_NONE = "P", "O"
VALID, INVALID = "V", "I"
#: Audit adjudication: take reviewer A's, B's, ... judgment (the first is the same key as
#: Annotate's "accept": take the opinion shown first).
TAKE_REVIEWER = ("A", "B", "C", "D")
HELP = "?"

#: key -> (what it does, where). One row per key: a key never means two things.
KEYS: dict[str, tuple[str, str]] = {
    STEP_NEXT: ("next step", "Annotate, Trajectory"),
    STEP_PREVIOUS: ("previous step", "Annotate, Trajectory"),
    ITEM_NEXT: ("next item: failure, task", "Trajectory, audit review"),
    ITEM_PREVIOUS: ("previous item: failure, task", "Trajectory, audit review"),
    MARK_STEP: ("the step under the cursor is the first faulty step", "Annotate"),
    "1–9": ("the numbered choice: category, rater, reason code",
            "Annotate, Adjudicate, audit pages"),
    ACCEPT_PRELABEL: ("take the opinion shown first: the pre-label, reviewer A",
                      "Annotate, audit adjudication"),
    "B–D": ("take reviewer B's (C's, D's) judgment", "audit adjudication"),
    AGENT_RIGHT: ("the agent was right", "Annotate, Trajectory"),
    AGENT_FAILED: ("the agent failed", "Trajectory"),
    SKIP: ("skip the item", "Annotate"),
    f"{UNDO} or {UNDO_TOO}": ("undo the last label", "Annotate"),
    TAKE_PRELABEL: ("take the pre-label", "Adjudicate"),
    TAKE_NONE: ("none of them: choose the category yourself", "Adjudicate"),
    VALID: ("valid", "audit review, audit adjudication"),
    INVALID: ("invalid", "audit review, audit adjudication"),
    "Ctrl+Enter": ("in a note box: keep the text and give the keys back", "Annotate"),
    HELP: ("the list of the page's keys", "every keyboard page"),
}


def steps_keys() -> tuple[tuple[str, str], ...]:
    """The step keys for a page's ``?`` list."""
    return ((STEP_PREVIOUS, KEYS[STEP_PREVIOUS][0]), (STEP_NEXT, KEYS[STEP_NEXT][0]))


def item_keys(item: str) -> tuple[tuple[str, str], ...]:
    """The item keys for a page's ``?`` list, naming what an item is there (``failure``)."""
    return ((ITEM_PREVIOUS, f"previous {item}"), (ITEM_NEXT, f"next {item}"))


def keys_markdown() -> str:
    """``KEYS`` as the Markdown table docs/workflows.md carries (a test compares them)."""
    rows = "".join(f"| `{key}` | {what} | {where} |\n" for key, (what, where) in KEYS.items())
    return "| Key | What it does | Pages |\n|---|---|---|\n" + rows
