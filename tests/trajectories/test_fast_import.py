"""The import's fast path for chat records (``fast_chat``, ``model.canonical_id``) gives
exactly what the pydantic path gives: the same ids, documents, payload bytes and rows, on the
real harness files, on the demo generator's trajectories written as chat records and on an
adversarial corpus; and whatever it cannot vouch for goes through the pydantic path, so a bad
record gets the same error."""

from __future__ import annotations

import json
import math
import random
import shutil
import struct
from pathlib import Path
from typing import Any

import orjson
import pytest

import trajectories.importers.builtin as chat_format
from tests.support import REAL_TRAJECTORIES, require_shared
from trajectories.demo import iter_demo_trajectories
from trajectories.importers.chat_steps import STEP_DEFAULTS
from trajectories.importers.detect import iter_file
from trajectories.importers.fast_chat import MIRRORED, field_signatures, prepare_chat
from trajectories.importers.openai_chat import (
    RunIdentity,
    identity_from_filename,
    parse_openai_chat,
)
from trajectories.model import StepKind, Trajectory, canonical_bytes, canonical_id
from trajectories.rows import document_row, index_row, json_text
from trajectories.workspace import Workspace

IDENTITY = RunIdentity(run="mimic_iv-tool-calling-gpt-x-0.0_range_0--1_valid", model="gpt-x",
                       temperature=0.0, split="valid", display_name="gpt-x t0.0 valid")


def _slow(record: Any, identity: RunIdentity) -> Trajectory | str:
    """The pydantic path's trajectory, or its error as text (type and message)."""
    try:
        return parse_openai_chat(record, identity)
    except Exception as err:  # the comparison is about which error, whatever its type
        return f"{type(err).__name__}: {err}"


def _check(record: Any, identity: RunIdentity = IDENTITY) -> bool:
    """Assert the fast path agrees with the pydantic path; True when it took the record."""
    prepared = prepare_chat(record, identity)
    slow = _slow(record, identity)
    if prepared is None:
        return False
    assert isinstance(slow, Trajectory), f"fast path took a record pydantic refuses: {slow}"
    assert prepared.id == slow.id
    assert prepared.doc == slow.model_dump(mode="json")
    assert prepared.payload == slow.__pydantic_serializer__.to_json(slow)
    assert document_row(prepared.doc, prepared.payload, "f") == index_row(slow, "f")
    return True


def test_mirror_follows_the_models() -> None:
    # The models are the one definition of the format: a field added, renamed or retyped there
    # must be followed in the fast path (MIRRORED and the code building the documents).
    assert field_signatures() == MIRRORED
    # The steps' hash check is skipped because a step holds only strings, booleans and None:
    # a default of another kind would have to be checked again.
    assert all(value is None or type(value) in (str, bool) for value in STEP_DEFAULTS.values())


def test_real_harness_files_take_the_fast_path_with_the_same_results() -> None:
    taken = total = 0
    for path in sorted(require_shared(REAL_TRAJECTORIES).glob("*.json")):
        identity = identity_from_filename(path, None, None)
        for record in json.loads(path.read_text("utf-8")):
            total += 1
            taken += _check(record, identity)
    assert total > 100
    assert taken == total  # real records are plain: none needs the slow path


def _as_chat(traj: Trajectory) -> dict[str, Any]:
    """A native trajectory written the way a tau-bench harness writes a result."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": traj.task.question}]
    for i, step in enumerate(traj.steps):
        if step.kind == StepKind.MESSAGE:
            messages.append({"role": step.role, "content": step.content})
            continue
        call_id = f"call_{i}"
        args = step.arguments or json.dumps({"query" if step.kind == StepKind.SQL else "code":
                                             step.code or ""})
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function",
             "function": {"name": step.name or str(step.kind), "arguments": args}}]})
        messages.append({"role": "tool", "tool_call_id": call_id, "content": step.observation})
    outcome = traj.outcome
    return {"task_idx": traj.task.id, "trial": traj.run.rollout,
            "reward": outcome.reward if outcome and outcome.reward is not None else 0.0,
            "info": {"task": {"task_id": traj.task.id, "instruction": traj.task.question,
                              "gold_sql": traj.task.reference_sql,
                              "gold_answer": traj.task.ground_truth}},
            "messages": messages}


def test_demo_trajectories_hash_alike_and_take_the_fast_path(tmp_path: Path) -> None:
    taken = total = 0
    for traj in iter_demo_trajectories(tmp_path, n_tasks=12, rollouts=1, n_patients=300):
        # The native trajectory's own content hash, by both ways of writing it.
        doc = traj.model_dump(mode="json", exclude={"id"})
        fast_id = canonical_id(doc)
        assert fast_id is None or fast_id == traj.content_id()
        # The same run as a harness's chat record, through both import paths (the record
        # goes through JSON text first, as a file would).
        record = orjson.loads(json.dumps(_as_chat(traj)))
        total += 1
        taken += _check(record)
    assert total >= 12 and taken > total // 2


# --------------------------------------------------------------------- adversarial corpus

_FLOATS = [0.0, -0.0, 1.0, 0.5, 1e-4, 1e-5, 9.99e-5, 0.00012, 1e15, 1e16, 9999999999999998.0,
           1.5e16, 1e22, 1e300, 5e-324, 1.7976931348623157e308, -1e-7, 123456.789, 0.1 + 0.2]
_INTS = [0, -1, 2**53 + 1, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1, 10**30]
_STRINGS = ["", "plain", "é ü 中文 😀", "\x00\x01\x1f\x7f", "\u2028\u2029", "quote\" back\\slash",
            "\b\f\n\r\t", "\ufeffbom", "\ud800", "a\udfffb", "\U0010ffff", "</script>"]
_OBSERVATIONS = ["[('f',)]", "[(1e999,)]", "[(-1e999,)]", "[(1j,)]", "[(b'x',)]",
                 "[({1, 2},)]", "[((1, 2),)]", "[({1: 2},)]", "[(1e-07,)]", "[(1e+16,)]",
                 "[(None,)]", "[(True, 2**3)]", "[(123456789012345678901234567890,)]",
                 "[(0.1, 'a\\x00b')]", "[]", "Error: no such table", "not a literal ((",
                 "[('\\ud800',)]"]


def _base(rng: random.Random) -> dict[str, Any]:
    obs = rng.choice(_OBSERVATIONS)
    return {
        "task_idx": rng.choice([0, 7, "12", "x"]),
        "trial": rng.choice([0, 1, 2.0, True]),
        "reward": rng.choice([1.0, 0.0, 1, 0.5]),
        "info": {"task": {"task_id": str(rng.randrange(100)),
                          "instruction": rng.choice(_STRINGS) or "q",
                          "gold_sql": "SELECT 1 FROM patients WHERE subject_id = 1",
                          "gold_answer": [[rng.choice(_FLOATS)]]},
                 "reward_info": {"reward": 1.0, "info": {"pred_sql": "SELECT 1",
                                                         "pred_answer": [[1]]}}},
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": rng.choice(_STRINGS)},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "sql_db_query",
                              "arguments": json.dumps({"query": "SELECT 1"})}}]},
            {"role": "tool", "tool_call_id": "c1", "content": obs},
            {"role": "assistant", "content": rng.choice(_STRINGS)},
        ],
    }


def _mutations(rng: random.Random) -> list[tuple[str, Any]]:
    """(dotted path, value) changes that each probe one way the two paths could differ."""
    value_pool: list[Any] = [*_FLOATS, *_INTS, *_STRINGS, math.nan, math.inf, -math.inf, None,
                             True, [], {}, {"1": 2}, {1: 2}, (1, 2), {"k": [1.5e-9]},
                             [[1e16, "x"]]]
    paths = ["reward", "trial", "task_idx", "cost", "info.task.gold_answer",
             "info.task.gold_sql", "info.task.instruction", "info.reward_info.info.pred_answer",
             "messages.2.tool_calls.0.id", "messages.2.tool_calls.0.function.name",
             "messages.2.tool_calls.0.function.arguments", "messages.3.content",
             "messages.1.content", "messages.4.role", "messages.4.name", "model", "final_answer",
             "task", "question", "extra.deep"]
    return [(rng.choice(paths), rng.choice(value_pool)) for _ in range(rng.randint(1, 3))]


def _set(record: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    here: Any = record
    for key in parents:
        if isinstance(here, list):
            here = here[int(key)]
        else:
            here = here.setdefault(key, {})
            if not isinstance(here, dict | list):
                return
    if isinstance(here, list):
        here[int(last)] = value
    elif isinstance(here, dict):
        here[last] = value


def test_adversarial_records_agree_or_fall_back() -> None:
    rng = random.Random(14)
    taken = fell_back = 0
    for _ in range(3000):
        record = _base(rng)
        for path, value in _mutations(rng):
            _set(record, path, value)
        if _check(record):
            taken += 1
        else:
            fell_back += 1
    # Both sides exercised: plain records fast, the odd ones through pydantic.
    assert taken > 100 and fell_back > 100


def _plain() -> dict[str, Any]:
    record = _base(random.Random(1))
    record["messages"][3]["content"] = "[('f',)]"
    record["messages"][1]["content"] = record["messages"][4]["content"] = "plain"
    record["info"]["task"]["gold_answer"] = [[1.5]]
    return record


def test_known_differences_take_the_slow_path() -> None:
    record = _plain()
    assert _check(record)
    for value in (1e16, 1e-5, math.nan, math.inf, 2**64, (1, 2), {1: "a"}, "\ud800"):
        changed = json.loads(json.dumps(record))
        changed["cost"] = value
        assert prepare_chat(changed, IDENTITY) is None, value
    for call_id in (1e16, 1e-5, 2**64, 7, ["c1"]):
        # The hash's value check trusts the steps but for their call ids, which the producer
        # chose: any but a string sends the record to pydantic, which agrees where it takes it.
        odd = json.loads(json.dumps(record))
        odd["messages"][2]["tool_calls"][0]["id"] = odd["messages"][3]["tool_call_id"] = call_id
        assert prepare_chat(odd, IDENTITY) is None, call_id
    named = json.loads(json.dumps(record))
    named["messages"][2]["tool_calls"][0]["function"]["name"] = 5
    assert prepare_chat(named, IDENTITY) is None
    assert _slow(named, IDENTITY) == ("ValueError: messages: a tool call's function name must "
                                      "be a string, not int")
    # A tool reply answering no call keeps its name: it must be a string too, said alike.
    stray = json.loads(json.dumps(record))
    stray["messages"].append({"role": "tool", "name": 5, "content": "late"})
    assert prepare_chat(stray, IDENTITY) is None
    assert _slow(stray, IDENTITY) == ("ValueError: messages: a tool message's name must be a "
                                      "string, not int")


def test_canonical_bytes_equal_json_dumps_on_every_code_point_and_float() -> None:
    def reference(doc: Any) -> bytes:
        return json.dumps(doc, sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False).encode("utf-8")
    chars = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    for start in range(0, len(chars), 4096):
        text = "".join(chars[start:start + 4096])
        doc = {text[:50]: text, "k": [text[::-1]]}
        assert canonical_bytes(doc) == reference(doc)
    rng = random.Random(3)
    floats = [struct.unpack("d", struct.pack("Q", rng.getrandbits(64)))[0] for _ in range(20000)]
    floats += [10 ** rng.uniform(-8, 20) for _ in range(20000)] + _FLOATS
    for value in floats:
        doc = {"v": value, "l": [-value]}
        got = canonical_bytes(doc)
        assert got is None or got == reference(doc), value
        if math.isfinite(value) and (value == 0 or 1e-4 <= abs(value) < 1e16):
            assert got is not None  # the fast hash covers every ordinary float
    keys = {"b": 1, "a": 2, "é": 3, "😀": 4, "\uffff": 5, "Z": 6, "": 7, "a\x00": 8}
    assert canonical_bytes(keys) == reference(keys)


def _rows(ws: Workspace) -> list[tuple[Any, ...]]:
    return ws.connect().execute("SELECT * FROM parts ORDER BY id").fetchall()


def test_import_stores_the_same_rows_with_and_without_the_fast_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "src"
    src.mkdir()
    files = [Path(shutil.copy(p, src / p.name))
             for p in sorted(require_shared(REAL_TRAJECTORIES).glob("*.json"))]
    records = json.loads(files[0].read_text("utf-8"))[:4]
    records[1]["cost"] = 1e-7  # a record the fast hash cannot vouch for, in a fast file
    jsonl = src / "lines.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in records), "utf-8")
    files.append(jsonl)
    fast = Workspace(tmp_path / "fast").import_files(files, workers=1)
    monkeypatch.setattr(chat_format, "prepare_chat", lambda record, identity: None)
    slow = Workspace(tmp_path / "slow").import_files(files, workers=1)
    assert fast.as_json() == slow.as_json() and fast.imported > 100
    assert _rows(Workspace(tmp_path / "fast")) == _rows(Workspace(tmp_path / "slow"))


def test_a_malformed_chat_record_gets_the_same_error(tmp_path: Path) -> None:
    good = _plain()
    bad = json.loads(json.dumps(good))
    bad["messages"][2]["tool_calls"][0]["function"]["name"] = ["not", "a", "name"]
    no_task = json.loads(json.dumps(good))
    del no_task["task_idx"], no_task["info"]["task"]["task_id"]
    path = tmp_path / "mimic_iv-tool-calling-gpt-x-0.0_range_0--1_valid.json"
    path.write_text(json.dumps([good, bad, no_task]), "utf-8")
    fast = list(iter_file(path, prepare=True))
    slow = list(iter_file(path))
    assert fast[0].prepared is not None and fast[0].prepared.id == slow[0].trajectory.id  # type: ignore[union-attr]
    def problems(items: list[Any]) -> list[tuple[str, str, str | None]]:
        return [(p.problem.message, p.problem.location, p.problem.field) for p in items[1:]]
    assert problems(fast) == problems(slow)
    assert [field for _, _, field in problems(fast)] == ["messages", "task_idx"]
    assert [p.raw for p in fast] == [p.raw for p in slow]


# ------------------------------------------------------------- cut and unreadable SQL results

_CUT = ("[('a',), ('b',)]\n\nNote: There are 1 results not shown (out of 3 total results).")


def _ending_with(observation: str, earlier: str = "[('x',)]") -> dict[str, Any]:
    """A record whose earlier SQL step printed ``earlier`` and whose last one ``observation``."""
    record = _plain()
    call = record["messages"][2]
    again = json.loads(json.dumps(call))
    again["tool_calls"][0]["id"] = "c2"
    record["messages"][3]["content"] = earlier
    record["messages"][4:4] = [again, {"role": "tool", "tool_call_id": "c2",
                                       "content": observation}]
    return record


@pytest.mark.parametrize(("truth", "expected"), [
    ([["a"], ["b"], ["c"]], None),  # the visible rows fit: the hidden one decides (unknown)
    ([["a"], ["b"]], False),  # another full row count
    ([["a"], ["z"], ["c"]], False),  # a visible row the truth lacks
])
def test_a_cut_result_is_the_answer_and_scores_by_its_visible_rows(
        truth: list[list[str]], expected: bool | None) -> None:
    record = _ending_with(_CUT)
    record["info"]["task"]["gold_answer"] = truth
    assert _check(record)  # both paths agree
    traj = parse_openai_chat(record, IDENTITY)
    extra = traj.model_extra or {}
    assert traj.final_answer == [["a"], ["b"]]  # the last query's visible rows, not step 0's
    assert extra["final_answer_source"] == "last_sql_result_partial"
    assert extra["final_answer_rows_total"] == 3
    assert extra["final_answer_step"] == 3  # system, user, first query, last query
    assert index_row(traj)["exact_match"] is expected


def test_an_unreadable_last_result_is_no_answer_and_never_a_success() -> None:
    record = _ending_with("[('a',), ('b'", earlier="[(1.5,)]")  # earlier rows match the truth
    assert _check(record)
    traj = parse_openai_chat(record, IDENTITY)
    extra = traj.model_extra or {}
    assert traj.final_answer is None and extra["final_answer_step"] == 3
    assert extra["final_answer_source"] == "last_sql_result_unreadable"
    assert "final_answer_rows_total" not in extra
    assert index_row(traj)["exact_match"] is None


def test_complete_results_keep_their_fields_and_ids() -> None:
    record = _ending_with("[(1.5,)]")
    assert _check(record)
    traj = parse_openai_chat(record, IDENTITY)
    assert "final_answer_rows_total" not in (traj.model_extra or {})
    assert index_row(traj)["exact_match"] is True


def test_the_real_cut_results_are_answers_of_their_last_query() -> None:
    cut = []
    for path in sorted(require_shared(REAL_TRAJECTORIES).glob("*.json")):
        identity = identity_from_filename(path, None, None)
        for record in json.loads(path.read_text("utf-8")):
            traj = parse_openai_chat(record, identity)
            extra = traj.model_extra or {}
            if extra.get("final_answer_source") == "last_sql_result_partial":
                last_sql = max(i for i, s in enumerate(traj.steps)
                               if s.kind == StepKind.SQL and not s.error)
                assert extra["final_answer_step"] == last_sql
                assert extra["final_answer_rows_total"] > len(traj.final_answer)
                cut.append(index_row(traj)["exact_match"])
    # The harness cut five last results in these runs; none can be an exact match.
    assert len(cut) == 5 and True not in cut


@pytest.mark.parametrize("value", [
    None, "é \u2028 \ud800", [["2100-03-12 14:25:00", 1.5, None, True]], {"b": 1, "a": [2**70]},
    math.nan, -math.inf, 1e-7, {"set": {1}}, ("tuple", 1), b"bytes", Path("x"),
])
def test_json_text_writes_what_json_dumps_writes(value: Any) -> None:
    # The stored answer columns: the one encoder must write json.dumps's very text.
    assert json_text(value) == json.dumps(value, ensure_ascii=False, default=str)
