"""The one set of rules for reading a step (trajectories.reading): is it SQL, is its output an
error, which rows does it print. Each rule with a case it accepts and a near miss it refuses,
and the layouts real tools print."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from trajectories.reading import (
    harmony_segments,
    is_error_output,
    is_read_only_query,
    is_sql,
    parse_arguments,
    result_table,
    sql_argument,
    tool_output_text,
)


@pytest.mark.parametrize("text", [
    "SELECT COUNT(*) FROM patients",
    "select count(*) from patients where gender = 'f'",
    "WITH c AS (SELECT subject_id FROM admissions) SELECT COUNT(*) FROM c",
    "  -- the cohort\n(SELECT 1) UNION (SELECT 2)",
    "SELECT strftime('%Y', charttime) FROM labevents WHERE julianday(a) - julianday(b) > 3",
    "PRAGMA table_info(admissions)",
    "DESCRIBE admissions",
    "SELECT TOP 5 * FROM labevents",
    "CREATE TEMP TABLE cohort AS SELECT 1",
    # Broken SQL is still the agent's SQL step (its syntax error is the failure to see).
    "SELECT COUNT(* FROM patients",
    "WITH a AS (SELECT x FROM t WHERE",
    # Line breaks an agent escaped twice (a real ai612 trajectory writes them so).
    "SELECT l.itemid, COUNT(*) AS n \\nFROM labevents l \\nGROUP BY l.itemid \\nLIMIT 10;",
])
def test_sql_is_recognised_by_its_content(text: str) -> None:
    assert is_sql(text)


@pytest.mark.parametrize("text", [
    "select the patient with the most visits",
    "Select patients who had a lab test",
    "with diabetes (type 2), from 2019",
    "create a chart of the labs",
    "show me the tables",
    "admissions",
    "10018423",
    "",
])
def test_prose_and_plain_values_are_not_sql(text: str) -> None:
    assert not is_sql(text)


def test_read_only_queries_are_a_subset_of_sql() -> None:
    assert is_read_only_query("SELECT 1") and is_read_only_query("PRAGMA table_info(t)")
    assert is_sql("DROP TABLE patients") and not is_read_only_query("DROP TABLE patients")


def test_the_sql_argument_is_found_whatever_it_is_called() -> None:
    assert sql_argument({"sql_query": "SELECT 1"}) == ("sql_query", "SELECT 1")
    assert sql_argument({"limit": 5, "statement": "SELECT * FROM t"}) == (
        "statement", "SELECT * FROM t")
    assert sql_argument({"table_name": "admissions", "show_sample": True}) is None
    assert sql_argument({"patient_id": 10018423, "lab_item": None}) is None


@pytest.mark.parametrize("text", [
    "Error: no such column: p.death_date",
    "\u274c **Query Failed:** Execution failed on sql 'SELECT 1': no such column: x",
    "sqlite3.OperationalError: near \"FROM\": syntax error",
    "Binder Error: Referenced column \"x\" not found in FROM clause!",
    "Traceback (most recent call last):\n  File ...",
    "NameError: name 'cohort' is not defined",
    '{"error": "timeout"}',
])
def test_error_outputs(text: str) -> None:
    assert is_error_output(text)


@pytest.mark.parametrize("text", [
    "[('error', 3), ('warning', 2)]",
    " n_errors\n        0",
    "The query returned 3 rows.",
    "| status | count |\n|---|---|\n| failed | 2 |",
    None,
])
def test_outputs_that_mention_errors_without_being_one(text: str | None) -> None:
    assert not is_error_output(text)


def test_pandas_listings_are_read_under_their_names() -> None:
    listing = (" hadm_id           admittime           dischtime marital_status\n"
               "24159665 2100-08-19 11:00:00 2100-08-24 13:25:00        married")
    table = result_table(listing)
    assert table is not None and table.layout == "pandas"
    assert table.columns == ["hadm_id", "admittime", "dischtime", "marital_status"]
    assert table.rows == [[24159665, "2100-08-19 11:00:00", "2100-08-24 13:25:00", "married"]]
    one = result_table(" num_deaths\n          0")
    assert one is not None and one.rows == [[0]] and one.columns == ["num_deaths"]
    # A short name over a value with a space in it: the unnamed piece joins its named one.
    short = result_table("               t  n\n2100-01-01 10:00  1\n2100-01-02 11:00  2")
    assert short is not None and short.rows == [["2100-01-01 10:00", 1], ["2100-01-02 11:00", 2]]
    indexed = result_table("   subject_id  count\n0    10001217      3\n1    10002428      2")
    assert indexed is not None and indexed.rows == [[10001217, 3], [10002428, 2]]
    cut = result_table(" icd_code\n icd9|1\n icd9|2\n... (370 total rows, showing first 2)")
    assert cut is not None and cut.rows == [["icd9|1"], ["icd9|2"]] and cut.total == 370


def test_what_pandas_prints_is_read_back() -> None:
    frame = pd.DataFrame({"subject_id": [10001217, 10002428], "drug": ["insulin", None],
                          "dose": [1.5, 20.0], "when": ["2100-01-01 10:00:00", "2100-01-02"]})
    for text in (frame.to_string(index=False), frame.to_string(), frame.to_csv(index=False)):
        table = result_table(text)
        assert table is not None, text
        assert table.columns == ["subject_id", "drug", "dose", "when"], text
        assert table.rows == [[10001217, "insulin", 1.5, "2100-01-01 10:00:00"],
                              [10002428, None, 20.0, "2100-01-02"]], text


def test_text_that_does_not_line_up_is_no_listing() -> None:
    assert result_table("Here are the results\nof my search") is None
    assert result_table("[('a\nb',)") is None  # a damaged literal is not read as columns


@pytest.mark.parametrize(("text", "rows", "columns"), [
    ("[('insulin', 3), ('heparin', 2)]", [["insulin", 3], ["heparin", 2]], None),
    ('[{"drug": "insulin", "n": 3}]', [["insulin", 3]], ["drug", "n"]),
    ('{"columns": ["drug"], "data": [["insulin"], ["heparin"]]}', [["insulin"], ["heparin"]],
     ["drug"]),
    ("| drug | n |\n|---|---|\n| **insulin** | 3 |\n| heparin | 2 |",
     [["insulin", 3], ["heparin", 2]], ["drug", "n"]),
    ("┌─────────┬───┐\n│ drug    │ n │\n├─────────┼───┤\n│ insulin │ 3 │\n└─────────┴───┘",
     [["insulin", 3]], ["drug", "n"]),
    (" drug    | n\n---------+---\n insulin | 3\n(1 row)", [["insulin", 3]], ["drug", "n"]),
    ("drug,n\ninsulin,3\n\"a, b\",4", [["insulin", 3], ["a, b", 4]], ["drug", "n"]),
    ("Query results:\n    drug  n\n insulin  3", [["insulin", 3]], ["drug", "n"]),
    ("42", [[42]], None),
    ("No rows returned.", [], None),
    ("Empty DataFrame\nColumns: [drug, n]\nIndex: []", [], ["drug", "n"]),
])
def test_every_layout_tools_print_is_read(text: str, rows: list[list[object]],
                                          columns: list[str] | None) -> None:
    table = result_table(text)
    assert table is not None, text
    assert table.rows == rows
    assert table.columns == columns


def test_an_error_is_never_a_table() -> None:
    assert result_table("Error: no such table: labs\n| a |\n|---|\n| 1 |") is None


def test_arguments_as_json_or_python_literals() -> None:
    assert parse_arguments('{"sql_query": "SELECT 1"}') == {"sql_query": "SELECT 1"}
    assert parse_arguments("{'patient_id': 10018423, 'lab_item': None}") == {
        "patient_id": 10018423, "lab_item": None}
    assert parse_arguments({"a": 1}) == {"a": 1}
    # Code is never run: a call expression is not a literal and stays text.
    hostile = "{'a': __import__('os').system('echo hi')}"
    assert parse_arguments(hostile) == hostile
    assert parse_arguments("not json") == "not json"


def test_mcp_content_parts_are_unwrapped() -> None:
    wrapped = json.dumps([{"type": "text", "text": " n\n 2"}])
    assert tool_output_text(wrapped) == " n\n 2"
    assert tool_output_text([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]) \
        == "a\nb"
    assert tool_output_text("[('a',)]") == "[('a',)]"
    assert tool_output_text({"rows": 1}) == '{"rows": 1}'


def test_harmony_markers_split_reasoning_from_what_was_said() -> None:
    text = ("<|channel|>analysis<|message|>Count them.<|end|>"
            "<|start|>assistant<|channel|>final<|message|>There are 2.")
    assert harmony_segments(text) == [("analysis", "Count them."), ("final", "There are 2.")]
    assert harmony_segments("plain text") == [(None, "plain text")]
