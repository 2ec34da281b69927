"""How a step is read: the one set of rules the importers, the pre-labelling signals and the
evidence finder share.

- ``is_sql`` / ``sql_argument``: a tool call is a SQL step when one of its arguments is SQL,
  whatever the tool or the argument is called (``_sql``).
- ``is_error_output``: whether a tool's output is an error message (``_errors``).
- ``result_table`` / ``sql_result``: the rows an output prints, in any of the layouts tools
  print them in (``_tables``), with the harness's cut-listing note (``split_cut_note``).
- ``parse_arguments``, ``tool_output_text``, ``harmony_segments``: tool arguments written as
  JSON or Python literals, outputs wrapped in content parts, gpt-oss's channel markers
  (``_text``).
"""

from trajectories.reading._errors import is_error_output
from trajectories.reading._literal import literal_rows, split_cut_note
from trajectories.reading._sql import (
    is_read_only_query,
    is_sql,
    leading_keyword,
    sql_argument,
)
from trajectories.reading._tables import ResultTable, cell, result_table, sql_result
from trajectories.reading._text import (
    REASONING_CHANNELS,
    arguments_text,
    harmony_segments,
    parse_arguments,
    tool_output_text,
)

__all__ = [
    "REASONING_CHANNELS",
    "ResultTable",
    "arguments_text",
    "cell",
    "harmony_segments",
    "is_error_output",
    "is_read_only_query",
    "is_sql",
    "leading_keyword",
    "literal_rows",
    "parse_arguments",
    "result_table",
    "split_cut_note",
    "sql_argument",
    "sql_result",
    "tool_output_text",
]
