"""Text as agents and their tools write it: tool arguments (JSON, or a Python literal), tool
outputs wrapped in content parts (MCP), and gpt-oss's harmony channel markers."""

from __future__ import annotations

import ast
import json
import re
from typing import Any

import orjson

#: A Python literal longer than this is not read (``ast.literal_eval`` builds a syntax tree
#: first; a hostile megabyte of brackets would cost memory for nothing).
MAX_LITERAL_CHARS = 100_000


def parse_arguments(raw: Any) -> Any:
    """A tool call's arguments as a value: an object stays as it is; a string is read as JSON,
    else as a Python literal (``{'patient_id': 10018423, 'lab_item': None}``: some runtimes
    write arguments with ``repr``) with ``ast.literal_eval``, which evaluates no code. A string
    that is neither comes back unchanged; None stays None."""
    if raw is None or isinstance(raw, dict | list | int | float | bool):
        return raw
    if not isinstance(raw, str):
        return str(raw)
    text = raw.strip()
    if not text:
        return raw
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(text)  # NaN, Infinity, integers beyond 64 bits
    except (ValueError, RecursionError):
        pass
    if text[:1] in "{[(" and len(text) <= MAX_LITERAL_CHARS:
        try:
            return _plain(ast.literal_eval(text))
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            pass
    return raw


def _plain(value: Any) -> Any:
    """A Python literal's value as JSON would hold it (tuples and sets as lists, keys as text)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, complex):
        return str(value)
    return value


def arguments_text(value: Any) -> str | None:
    """Arguments as the JSON text a step keeps (``Step.arguments``)."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def tool_output_text(content: Any) -> str | None:
    """A tool's output as text: content parts (``[{"type": "text", "text": ...}]``, what MCP
    tools return, also when a runtime stored them as a JSON string) are joined; other values
    are written as JSON."""
    if content is None:
        return None
    if isinstance(content, str):
        stripped = content.lstrip()
        if not stripped.startswith("[{") and not stripped.startswith('{"type"'):
            return content
        try:
            parsed = orjson.loads(stripped)
        except orjson.JSONDecodeError:
            return content
        text = _parts_text(parsed)
        return content if text is None else text
    text = _parts_text(content)
    if text is not None:
        return text
    return json.dumps(content, ensure_ascii=False, default=str)


def _parts_text(value: Any) -> str | None:
    """Text of content parts, or None when ``value`` is not a list of them."""
    if isinstance(value, dict) and isinstance(value.get("type"), str):
        value = [value]
    if not isinstance(value, list) or not value:
        return None
    texts: list[str] = []
    for part in value:
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            return None
        text = part.get("text")
        if isinstance(text, str):
            texts.append(text)
        elif part["type"] != "text":
            texts.append(json.dumps(part, ensure_ascii=False, default=str))
    return "\n".join(texts)


#: gpt-oss's harmony format: ``<|start|>assistant<|channel|>final<|message|>...<|end|>``.
_HARMONY_TOKEN = re.compile(r"<\|(?:start|end|return|call|message|channel|constrain)\|>")
_HARMONY = re.compile(
    r"<\|start\|>[^<]*|<\|channel\|>\s*(?P<channel>\w+)[^<]*(?:<\|constrain\|>[^<]*)?"
    r"<\|message\|>|<\|(?:end|return|call|message|channel|constrain)\|>")
#: Channels whose text is the model's reasoning, not what it said.
REASONING_CHANNELS = frozenset({"analysis"})


def harmony_segments(text: str) -> list[tuple[str | None, str]]:
    """``text`` split at harmony markers into ``(channel, text)`` pieces, markers removed
    (``channel`` is None before the first channel marker). Text without markers is one piece."""
    if "<|" not in text or not _HARMONY_TOKEN.search(text):
        return [(None, text)]
    pieces: list[tuple[str | None, str]] = []
    channel: str | None = None
    position = 0
    for marker in _HARMONY.finditer(text):
        if marker.start() > position:
            pieces.append((channel, text[position:marker.start()]))
        if marker.group("channel"):
            channel = marker.group("channel").lower()
        position = marker.end()
    if position < len(text):
        pieces.append((channel, text[position:]))
    return [(c, t) for c, t in pieces if t.strip()]
