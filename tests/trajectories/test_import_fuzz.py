"""Hostile input to every importer: `faillab import` either imports, or exits non-zero with
one error line (no traceback) and leaves the workspace as it was.

Each format starts from a valid file (native JSONL, a JSON list, a tau-bench chat log, an LM
Studio conversation, an Inspect JSON log); Hypothesis replaces its scalars with hostile ones
(integers beyond 64 bits, NaN, infinities and 1e400, lone surrogates, control characters,
other types of scalar), puts nesting from 101 to 100,000 levels anywhere, deletes keys, or
damages the bytes (a cut, a changed byte), and imports the file
through the real CLI (in this process, so that every example takes milliseconds) into a
copy of a workspace that already holds trajectories. Examples are derandomized: every run
tries the same inputs.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from faillab.cli import main
from trajectories.importers.json_documents import MAX_DEPTH

REPO = Path(__file__).resolve().parents[2]
NATIVE_SAMPLE = REPO / "data" / "native-sample.jsonl"
LMSTUDIO_SAMPLE = REPO / "data" / "lmstudio-conversation.json"
CHAT_NAME = "mimic_iv-tool-calling-gpt-4o-mini-0.0_range_0--1_user-gpt-4o-mini-llm_0427210012_valid"

FUZZ = settings(max_examples=150, derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])


# --------------------------------------------------------------------------- seeds


def _native() -> list[dict[str, Any]]:
    return [json.loads(line) for line in NATIVE_SAMPLE.read_text().splitlines() if line]


def _chat() -> dict[str, Any]:
    """A tau-bench-style chat record (the layout of the real ai612 logs, made small)."""
    call = {"id": "call_1", "type": "function",
            "function": {"name": "sql_db_query",
                         "arguments": json.dumps({"query": "SELECT count(*) FROM patients"})}}
    return {
        "task_idx": 7, "trial": 0, "reward": 1.0,
        "info": {"task": {"instruction": "How many patients are there?",
                          "gold_sql": "SELECT count(*) FROM patients", "gold_answer": [[100]]},
                 "reward_info": {"reward": 1.0,
                                 "info": {"pred_sql": "SELECT count(*) FROM patients",
                                          "pred_answer": [[100]]}}},
        "messages": [
            {"role": "system", "content": "You are a database agent."},
            {"role": "user", "content": "How many patients are there?"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "name": "sql_db_query",
             "content": "[(100,)]"},
            {"role": "assistant", "content": "There are 100 patients."},
        ],
        "cost": 0.001,
    }


def _inspect() -> dict[str, Any]:
    """An Inspect ``.json`` log with one sample (the fields the importer reads)."""
    return {
        "version": 2, "status": "success",
        "eval": {"task": "tiny_ehr", "model": "mockllm/model", "task_version": 0,
                 "model_generate_config": {"temperature": 0.0}},
        "results": {"headline": {"scorer": "match"}},
        "samples": [{
            "id": "t-female", "epoch": 1, "input": "How many female patients are there?",
            "target": "2",
            "messages": [
                {"role": "user", "content": "How many female patients are there?"},
                {"role": "assistant", "content": "",
                 "tool_calls": [{"id": "c1", "function": "sql",
                                 "arguments": {"query": "SELECT count(*) FROM patients"}}]},
                {"role": "tool", "tool_call_id": "c1", "function": "sql", "content": "[(2,)]"},
                {"role": "assistant", "content": "2"},
            ],
            "output": {"completion": "2"},
            "scores": {"match": {"value": "C", "answer": "2"}},
            "metadata": {"intent": "Demographics"},
        }],
    }


#: (file name, the valid document, how it is written, paths worth aiming at first)
FORMATS: dict[str, tuple[str, Any, str, list[tuple[Any, ...]]]] = {
    "native-jsonl": ("run.jsonl", _native(), "jsonl",
                     [(0, "run", "rollout"), (0, "run", "temperature"), (1, "outcome", "reward"),
                      (0, "steps", 2, "duration_ms"), (0, "steps", 2, "tokens", "input"),
                      (0, "final_answer"), (1, "task", "ground_truth")]),
    "json-list": ("run.json", _native(), "json",
                  [(1, "run", "rollout"), (0, "run", "temperature"), (0, "outcome", "reward"),
                   (1, "final_answer"), (0, "task", "id")]),
    "tau-bench-chat": (f"{CHAT_NAME}.json", [_chat(), _chat() | {"trial": 1}], "json",
                       [(0, "trial"), (1, "reward"), (0, "info", "reward_info", "reward"),
                        (0, "info", "task", "gold_answer"), (1, "messages", 3, "content"),
                        (0, "messages", 2, "tool_calls", 0, "function", "arguments")]),
    "lmstudio": ("conversation.json", json.loads(LMSTUDIO_SAMPLE.read_text()), "pretty",
                 [("createdAt",), ("tokenCount",), ("messages", 0, "currentlySelected"),
                  ("messages", 1, "versions", 0, "steps", 2, "statusState", "status", "timeMs"),
                  ("messages", 1, "versions", 0, "steps", 0, "content", 0, "text")]),
    "inspect-json": ("eval-log.json", _inspect(), "pretty",
                     [("samples", 0, "epoch"), ("samples", 0, "scores", "match", "value"),
                      ("eval", "model_generate_config", "temperature"), ("samples", 0, "target"),
                      ("samples", 0, "messages", 2, "content")]),
}


# --------------------------------------------------------------------------- hostile values


class Raw:
    """JSON text put into the file as it is (``json.dumps`` cannot write it, or would
    recurse over it)."""

    def __init__(self, text: str) -> None:
        self.text = text


def _nested(depth: int) -> Raw:
    return Raw("[" * depth + "]" * depth)


#: Hostile scalars, put where the file has a scalar (a value of the wrong shape where an
#: importer expects an object or a list is not what this test is about).
HOSTILE_SCALARS = st.one_of(
    st.sampled_from([10**400, -(10**400), 2**63, 2**64, -(2**63) - 1, 2**31, -(2**31) - 1]),
    st.sampled_from([math.nan, math.inf, -math.inf, Raw("1e400"), Raw("-1e400"), 1e308]),
    st.sampled_from(["\ud800", "a\udfffb", "\x00\x1b[31m", "", "\u2028"]),
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=20),
)
#: Nesting past the limit wherever it is put, from just past it to far past it. (Shallower
#: lists put where an object was are values of the wrong shape; the limit itself is tested
#: exactly below.)
DEEP = st.sampled_from([MAX_DEPTH + 1, MAX_DEPTH + 2, 1000, 5000, 100_000]).map(_nested)
#: What a mutation does at the path it picked.
DELETE = object()


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*prefix, index))


def _at(doc: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        doc = doc[part]
    return doc


def _replace(doc: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return doc if new is DELETE else new
    head, rest = path[0], path[1:]
    if isinstance(doc, dict) and head in doc:
        copy = dict(doc)
        if new is DELETE and not rest:
            del copy[head]
        else:
            copy[head] = _replace(doc[head], rest, new)
        return copy
    if isinstance(doc, list) and isinstance(head, int) and head < len(doc):
        items = list(doc)
        items[head] = _replace(doc[head], rest, None if new is DELETE and not rest else new)
        return items
    return doc  # a path through a value an earlier mutation replaced


def _dumps(value: Any, style: str, raws: list[str]) -> str:
    def default(obj: Any) -> Any:
        raise TypeError(obj)

    def swap(obj: Any) -> Any:
        if isinstance(obj, Raw):
            raws.append(obj.text)
            return f"\u0000raw{len(raws) - 1}\u0000"
        if isinstance(obj, dict):
            return {k: swap(v) for k, v in obj.items()}
        if isinstance(obj, list):
            return [swap(v) for v in obj]
        return obj

    text = json.dumps(swap(value), indent=2 if style == "pretty" else None, default=default)
    for index, raw in enumerate(raws):
        text = text.replace(json.dumps(f"\u0000raw{index}\u0000"), raw)
    return text


def _render(seed: Any, style: str) -> str:
    raws: list[str] = []
    if style == "jsonl":  # the seed is a list of lines (unless a mutation replaced it)
        return "".join(_dumps(rec, style, raws) + "\n"
                       for rec in (seed if isinstance(seed, list) else [seed]))
    return _dumps(seed, style, raws)


@st.composite
def hostile_file(draw: st.DrawFn, fmt: str) -> tuple[str, bytes]:
    name, seed, style, aimed = FORMATS[fmt]
    doc = seed
    everywhere = list(_paths(seed))
    leaves = [path for path in everywhere if not isinstance(_at(seed, path), dict | list)]
    for _ in range(draw(st.integers(1, 3))):
        how = draw(st.sampled_from(["scalar", "scalar", "deep", "delete"]))
        if how == "scalar":
            path = draw(st.one_of(st.sampled_from(aimed), st.sampled_from(leaves)))
            doc = _replace(doc, path, draw(HOSTILE_SCALARS))
        else:
            path = draw(st.sampled_from(everywhere))
            doc = _replace(doc, path, draw(DEEP) if how == "deep" else DELETE)
    data = _render(doc, style).encode("utf-8", "surrogatepass")
    damage = draw(st.sampled_from(["none", "none", "none", "truncate", "byte"]))
    if damage == "truncate" and data:
        data = data[:draw(st.integers(0, len(data) - 1))]
    elif damage == "byte" and data:
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + bytes([draw(st.integers(0, 255))]) + data[at + 1:]
    return name, data


# --------------------------------------------------------------------------- the check


@pytest.fixture(scope="module")
def base_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace that already holds trajectories (the native sample)."""
    ws = tmp_path_factory.mktemp("fuzz-base") / "ws"
    result = _import(ws, NATIVE_SAMPLE)
    assert result.exit_code == 0, result.output
    return ws


def _import(ws: Path, path: Path, *extra: str) -> Result:
    return CliRunner().invoke(main, ["import", str(path), "--workspace", str(ws), *extra])


def _state(ws: Path) -> dict[str, str]:
    """Every file of the workspace with a hash of its bytes (the lock file aside: taking the
    lock is not a change)."""
    return {str(p.relative_to(ws)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(ws.rglob("*")) if p.is_file() and p.name != ".write.lock"}


def _check(base: Path, name: str, data: bytes, skip_invalid: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        shutil.copytree(base, ws)
        path = Path(tmp) / name
        path.write_bytes(data)
        before = _state(ws)
        result = _import(ws, path, *(["--skip-invalid"] if skip_invalid else []))
        said = result.stdout + result.stderr
        assert result.exception is None or isinstance(result.exception, SystemExit), (
            f"{type(result.exception).__name__}: {result.exception}")
        assert "Traceback" not in said
        if result.exit_code != 0:
            # Lines end at a newline (a producer's text named in the error may hold U+2028,
            # which str.splitlines() would count as a line end too).
            lines = result.stderr.strip().split("\n")
            assert len(lines) == 1, result.stderr
            assert lines[0].startswith("error: ")
            assert _state(ws) == before, "a failed import changed the workspace"


@pytest.mark.slow
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_hostile_files_import_or_fail_in_one_line(fmt: str, base_workspace: Path) -> None:
    @FUZZ
    @given(case=hostile_file(fmt), skip_invalid=st.booleans())
    def run(case: tuple[str, bytes], skip_invalid: bool) -> None:
        _check(base_workspace, *case, skip_invalid)

    run()


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_the_valid_seed_imports(fmt: str, base_workspace: Path) -> None:
    """The seeds are valid files of their format (so the fuzz starts from what imports)."""
    name, seed, style, _ = FORMATS[fmt]
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        shutil.copytree(base_workspace, ws)
        path = Path(tmp) / name
        path.write_text(_render(seed, style))
        result = _import(ws, path)
        assert result.exit_code == 0, result.output
        assert "rejected 0" in result.stdout


# --------------------------------------------------------------------------- the review's cases


def _one_error_line(ws: Path, path: Path, *extra: str) -> str:
    before = _state(ws) if ws.exists() else {}
    result = _import(ws, path, *extra)
    assert result.exit_code != 0
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"{type(result.exception).__name__}: {result.exception}")
    lines = result.stderr.strip().split("\n")
    assert len(lines) == 1, result.stderr
    assert (_state(ws) if ws.exists() else {}) == before
    return lines[0]


@pytest.mark.parametrize("fmt", ["auto", "native", "openai-chat", "lmstudio", "inspect"])
def test_a_hundred_thousand_brackets_are_one_line_in_every_format(
        tmp_path: Path, base_workspace: Path, fmt: str) -> None:
    ws = tmp_path / "ws"
    shutil.copytree(base_workspace, ws)
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000)
    line = _one_error_line(ws, path, "--format", fmt)
    assert line.startswith(f"error: {path}: record 0: nested deeper than {MAX_DEPTH} levels")
    # One object per line: each line is a record (the first one refused stops the import).
    lines = tmp_path / "deep.jsonl"
    lines.write_text('{"a": ' + "[" * 100_000 + "\n" + json.dumps(_native()[0]) + "\n")
    line = _one_error_line(ws, lines, "--format", fmt)
    assert line.startswith(f"error: {lines}: line 1: nested deeper than {MAX_DEPTH} levels")


def test_nesting_is_counted_from_the_top_of_the_file(tmp_path: Path,
                                                     base_workspace: Path) -> None:
    """Level ``MAX_DEPTH`` imports, one more is refused, naming the record and where."""
    ws = tmp_path / "ws"
    shutil.copytree(base_workspace, ws)
    native = _native()[0]
    # list (1) > record (2) > final_answer's lists (3 ...)
    inside = MAX_DEPTH - 2
    ok = tmp_path / "ok.json"
    ok.write_text(json.dumps([native | {"final_answer": json.loads(
        "[" * inside + "]" * inside)}]))
    assert _import(ws, ok).exit_code == 0
    deep = tmp_path / "deep.json"
    deep.write_text(json.dumps([native, native | {"final_answer": json.loads(
        "[" * (inside + 1) + "]" * (inside + 1))}]))
    line = _one_error_line(ws, deep)
    assert line.startswith(f"error: {deep}: record 1: nested deeper than {MAX_DEPTH} levels "
                           "of arrays and objects (line 1, column ")


@pytest.mark.parametrize(("field", "value", "message"), [
    (("run", "rollout"), "1" + "0" * 400, "field 'run.rollout': Input should be less than"),
    (("run", "rollout"), str(2**31), "field 'run.rollout': Input should be less than"),
    (("run", "temperature"), "NaN", "field 'run.temperature': Input should be a finite number"),
    (("run", "temperature"), "Infinity", "field 'run.temperature': Input should be a finite"),
    (("outcome", "reward"), "-1e400", "field 'outcome.reward': Input should be a finite"),
    (("steps", 2, "duration_ms"), "NaN", "field 'steps.2.duration_ms': Input should be a fin"),
    (("steps", 2, "tokens", "input"), "1" + "0" * 30, "field 'steps.2.tokens': Value error, "),
])
def test_numbers_out_of_range_are_refused_by_field(
        tmp_path: Path, base_workspace: Path, field: tuple[Any, ...], value: str,
        message: str) -> None:
    ws = tmp_path / "ws"
    shutil.copytree(base_workspace, ws)
    record = _replace(_native()[0], field, Raw(value))
    for name, text in (("run.jsonl", _dumps(record, "jsonl", []) + "\n"),
                       ("run.json", _dumps([record], "json", []))):
        path = tmp_path / name
        path.write_text(text)
        line = _one_error_line(ws, path)
        where = "line 1" if name.endswith("l") else "record 0"
        assert line.startswith(f"error: {path}: {where}: {message}"), line


@pytest.mark.parametrize(("field", "value"), [
    (("trial",), "1e400"), (("trial",), "NaN"), (("trial",), str(2**40)),
    (("reward",), "NaN"), (("info", "reward_info", "reward"), "Infinity"),
])
def test_chat_numbers_out_of_range_are_refused_by_field(
        tmp_path: Path, base_workspace: Path, field: tuple[Any, ...], value: str) -> None:
    ws = tmp_path / "ws"
    shutil.copytree(base_workspace, ws)
    path = tmp_path / f"{CHAT_NAME}.json"
    bad = _replace(_chat(), field, Raw(value))
    if field == ("info", "reward_info", "reward"):
        del bad["reward"]  # the record's own reward wins over the harness's
    path.write_text(_dumps([_chat(), bad], "json", []))
    line = _one_error_line(ws, path)
    assert line.startswith(f"error: {path}: record 1: field '"), line
    assert ("finite number" in line) or ("less than or equal" in line), line


# --------------------------------------------------------------------------- the two depth checks

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='"\\[]{},:ab \n\u00e9'),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(alphabet='"\\[]{}ab', max_size=3), inner, max_size=3),
    max_leaves=25)


@settings(max_examples=300, derandomize=True, deadline=None, database=None)
@given(value=JSON_VALUES, levels=st.integers(0, 8), indent=st.sampled_from([None, 1]),
       ascii_only=st.booleans())
def test_the_text_scan_and_the_value_walk_agree(value: Any, levels: int, indent: int | None,
                                                 ascii_only: bool) -> None:
    """The walk over parsed values decides; the scan of the text (which only says where)
    must find the same, at an opening bracket outside every string, brackets and escaped
    quotes inside strings not counted."""
    from trajectories.importers.json_documents import _too_deep_at, nests_within

    text = json.dumps(value, indent=indent, ensure_ascii=ascii_only).encode()
    found = _too_deep_at(text, levels=levels)
    assert (found is None) == nests_within(value, levels)
    if found is not None:
        assert text[found[0]:found[0] + 1] in (b"[", b"{")
        # Everything before it is a prefix of valid JSON nested exactly ``levels`` deep.
        assert _too_deep_at(text[:found[0]], levels=levels) is None
