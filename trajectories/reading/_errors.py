"""Is this tool output an error? One rule, for the importers' ``error`` flag, the signals and the
evidence finder.

An output is an error when, after the decoration tools put in front of a message (emoji,
markdown emphasis, a heading mark), it starts with an error word (``Error``, ``Traceback``,
``Query failed``...), names an exception (``sqlite3.OperationalError:``, ``Binder Error:``,
``NameError:``), is a JSON object whose first key is ``error``, or carries one of the database
engines' error phrases (``no such column``, ``syntax error``, ``does not exist``...). Only the
head of the text is read: errors show at the start, and result listings can be megabytes.
"""

from __future__ import annotations

import re

HEAD_CHARS = 600

#: What tools put before a message: whitespace, emoji and symbols, markdown emphasis.
_DECORATION = re.compile(r"^[\s*_#>`~|\-\u2190-\u2bff\u2600-\u27bf\U0001f000-\U0001faff\ufe0f]*")
_ERROR_START = re.compile(
    r"^(?:errors?\b|traceback\b|exception\b|fatal\b|failed\b|failure\b"
    r"|(?:query|execution|sql|tool|statement|command)\s+(?:failed|error)\b"
    r"|\{\s*\"error\")", re.I)
#: An exception or engine error named as such: ``OperationalError:``, ``Binder Error:``.
_NAMED = re.compile(r"\b\w*(?:Error|Exception)\s*[:(]|\b[A-Z][a-z]+ Error:")
_PHRASES = re.compile(
    r"no such (?:table|column|function)|syntax error|does not exist|doesn't exist"
    r"|is not defined|ambiguous column name|unrecognized token|not found in from clause"
    r"|permission denied|timed out|timeout expired", re.I)
#: Cheap test before the expressions: most outputs are rows holding none of these.
_HINTS = ("error", "exception", "traceback", "fail", "no such", "exist", "not defined",
          "ambiguous", "unrecognized", "not found", "denied", "timed out", "timeout")


def is_error_output(text: str | None) -> bool:
    """True when a tool's output reads as an error message (the module's rule)."""
    if not text:
        return False
    head = text[:HEAD_CHARS]
    low = head.lower()
    if not any(hint in low for hint in _HINTS):
        return False
    start = _DECORATION.match(head)
    body = head[start.end():] if start else head
    return bool(_ERROR_START.match(body) or _NAMED.search(head) or _PHRASES.search(head))
