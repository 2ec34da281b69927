"""The trajectory page reads the harness's cut-result note with the import's parser."""

from __future__ import annotations

from app.widgets.steps import table_and_note
from trajectories.reading import sql_result


def test_the_trajectory_page_reads_the_note_as_the_import_does() -> None:
    note = "Note: There are 73 results not shown (out of 76 total results)."
    table, shown = table_and_note("[('insulin', 3), ('heparin', 2)]\n\n" + note)
    assert table is not None and table.rows == [["insulin", 3], ["heparin", 2]]
    assert shown == note
    # Another remark after the rows is not the harness's note: the page shows the text whole.
    assert table_and_note("[('insulin', 3)]\n\nNote: the rest was cut.") == (None, "")
    assert sql_result("[('insulin', 3)]\n\nNote: the rest was cut.") == (None, None)
