"""One meaning per key on every keyboard page: the keys live in ``app/widgets/keymap.py``, the
pages take their shortcuts from it (no letter bound by hand in a page), and the keys table of
docs/workflows.md is the keymap's own."""

from __future__ import annotations

import re

from faillab.app.widgets.keymap import (
    ITEM_NEXT,
    ITEM_PREVIOUS,
    KEYS,
    STEP_NEXT,
    STEP_PREVIOUS,
    item_keys,
    keys_markdown,
    steps_keys,
)
from faillab.app.widgets.step_cursor import CURSOR_KEYS
from tests.support import REPO

APP = REPO / "app"


def test_steps_are_j_and_k_and_items_brackets() -> None:
    assert (STEP_NEXT, STEP_PREVIOUS, ITEM_NEXT, ITEM_PREVIOUS) == ("J", "K", "]", "[")
    assert steps_keys() == (("K", "previous step"), ("J", "next step"))
    assert item_keys("failure") == (("[", "previous failure"), ("]", "next failure"))
    # Annotate's cursor: the step keys only (``[``/``]`` are items now).
    assert [k for k, _ in CURSOR_KEYS] == ["K", "J", "F"]


def test_no_page_binds_a_letter_of_its_own() -> None:
    """Every letter shortcut comes from the keymap: a literal one could give a key a second
    meaning on one page (J was "next failure" on Trajectory)."""
    literal = re.compile(r"""shortcut=["'][A-Za-z\[\]]["']""")
    found = [f"{path.relative_to(REPO)}: {m.group(0)}" for path in APP.rglob("*.py")
             for m in literal.finditer(path.read_text("utf-8"))]
    assert found == []


def test_the_trajectory_page_moves_between_failures_with_brackets() -> None:
    source = (APP / "views" / "trajectory.py").read_text("utf-8")
    assert "clicks={ITEM_PREVIOUS: \"prev_failure\", ITEM_NEXT: \"next_failure\"}" in source
    assert "steps=\".st-key-steps_pane .faillab-step\"" in source
    page_keys = (APP / "widgets" / "page_keys.py").read_text("utf-8")
    assert "annotate_step_prev" not in page_keys  # [ and ] no longer move Annotate's cursor


def test_the_docs_keys_table_is_the_keymap() -> None:
    text = (REPO / "docs" / "workflows.md").read_text("utf-8")
    table = text.split("<!-- keys from app/widgets/keymap.py -->\n", 1)[1]
    assert table.split("<!-- end keys -->", 1)[0] == keys_markdown()
    # Every key once; each row says what and where.
    assert len(KEYS) == len(set(KEYS)) and all(what and where for what, where in KEYS.values())


def test_the_readme_says_the_same_keys() -> None:
    readme = (REPO / "README.md").read_text("utf-8")
    assert "`J`/`K` move through the steps" in readme
    assert "`]`/`[` go to the next/previous failure" in readme
    assert "`J`/`K` move to the" not in readme
