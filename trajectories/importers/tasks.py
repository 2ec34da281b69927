"""Task files: the questions, gold answers, gold SQL (and verdicts) a log does not carry.

A task file is a CSV (read with a real CSV parser: quoted newlines are kept), a JSON list or
JSONL of rows. Columns are found by name, case, spaces and punctuation ignored, under the names
benchmarks publish them with (``question``/``query``, ``gold_answer``/``golden truth``,
``gold_sql``/``golden truth sql query``, ``correct/incorrect``...; ``COLUMNS`` lists them).

Matching a trajectory to a row, in this order, each step refusing an ambiguous match (two
different rows) rather than guessing:

1. the row names the trajectory's file (a ``conversation`` column: ``8.conversation.json``);
2. the row's id is the file's stem (``8`` for ``8.conversation.json``);
3. the row's id is the conversation's name or the record's own task id;
4. the normalised question equals the trajectory's (its first user message);
5. one row's question is contained in the first user message, or contains it, after
   normalising (a harness that adds "Set the current time to ..." to every question).

A row says a question is unanswerable with a null gold answer (JSON ``null``, or ``null`` /
``none`` / ``unanswerable`` in a CSV cell), a gold SQL of ``null``, an ``unanswerable`` column
that is true or an ``answerable`` column that is false: that is ground truth (abstaining is
right). Only a row with no gold answer and no gold SQL at all has no ground truth.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trajectories.importers.errors import ImportProblem
from trajectories.importers.openai_chat import infer_intent_scope
from trajectories.model import OTHER_INTENT, Trajectory

#: Our column -> the names a file may give it (compared normalised: ``_key``).
COLUMNS: dict[str, tuple[str, ...]] = {
    "id": ("id", "task_id", "taskid", "qid", "question_id", "task_idx", "idx"),
    "question": ("question", "query", "prompt", "instruction", "utterance", "input"),
    "gold_sql": ("gold_sql", "golden_truth_sql_query", "golden_truth_sql", "gold_query",
                 "reference_sql", "ref_sql", "label_sql", "sql", "gold_sql_query"),
    "gold_answer": ("gold_answer", "golden_truth", "ground_truth", "gold", "expected",
                    "expected_answer", "target", "answer", "reference_answer", "label"),
    "final_answer": ("model_answer", "final_answer", "prediction", "predicted",
                     "predicted_answer", "pred_answer", "response", "model_response",
                     "output", "agent_answer"),
    "conversation": ("chat_conversation", "conversation", "conversation_file", "chat",
                     "chat_file", "log", "log_file", "trajectory_file", "file"),
    "verdict": ("correct_incorrect", "correct", "is_correct", "verdict", "human_verdict",
                "success", "judgement", "judgment", "correctness"),
    "verdict_source": ("verdict_source", "judged_by", "verdict_by"),
    "verdict_note": ("incorrect_note", "verdict_note", "note", "notes", "comment", "comments"),
    "answerable": ("answerable", "is_answerable"),
    "unanswerable": ("unanswerable", "is_unanswerable"),
    "model": ("model", "model_name"),
    "run": ("run", "run_name"),
    "intent": ("intent",),
    "scope": ("scope",),
    "template_id": ("template_id", "template"),
    "split": ("split",),
    # The benchmark's clock and conventions (docs/scoring.md): when "now" is for the task's
    # SQL, and which scoring profile judges it.
    "reference_time": ("reference_time", "current_time", "benchmark_time"),
    "scoring_profile": ("scoring_profile", "profile"),
}
#: What a cell says to mean "no answer exists" (an unanswerable question).
NULL_ANSWERS = frozenset({"null", "none", "unanswerable", "not answerable", "[]"})
_TRUE = frozenset({"1", "1.0", "true", "yes", "y", "correct", "right", "pass", "passed",
                   "success", "succeeded"})
_FALSE = frozenset({"0", "0.0", "false", "no", "n", "incorrect", "wrong", "fail", "failed",
                    "failure"})
#: The shortest question that may be matched by containment (shorter ones are too generic).
MIN_CONTAINED_CHARS = 20


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.strip().lower()).strip("_")


def normalise_question(text: str | None) -> str:
    """A question as matching compares it: Unicode compatibility form, quotes and dashes made
    plain, lower case, whitespace collapsed, trailing punctuation dropped."""
    value = unicodedata.normalize("NFKC", text or "")
    value = re.sub(r"[\u2018\u2019\u201b\u2032]", "'", value)
    value = re.sub(r"[\u201c\u201d\u201f\u2033]", '"', value)
    value = re.sub(r"[\u2010-\u2015\u2212]", "-", value)
    value = " ".join(value.lower().split())
    return value.rstrip(" .?!")


def question_key(question: str | None) -> str:
    """A task id made from a question's content: the same question always gets it, different
    questions never share it (for logs no task file matched)."""
    digest = hashlib.sha1(normalise_question(question).encode("utf-8")).hexdigest()
    return f"q-{digest[:12]}"


def truth_value(value: Any) -> bool | None:
    """A verdict cell as True / False, or None when it says neither (empty, "maybe")."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    text = str(value).strip().lower() if value is not None else ""
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    return None


def gold_value(value: Any) -> Any:
    """A gold-answer cell as a value: JSON text is read; ``a; b; c`` is a list of rows."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text[:1] in "[{" and text[-1:] in "]}":
        try:
            return json.loads(text)
        except ValueError:
            pass
    parts = [p.strip() for p in text.split(";")]
    if len(parts) > 1 and all(parts):
        return [[p] for p in parts]
    return text


@dataclass(frozen=True)
class TaskRow:
    """One row of a task file, as the importers apply it to a trajectory."""

    id: str
    question: str
    gold_sql: str | None = None
    gold_answer: Any = None
    has_gold: bool = False
    answerable: bool = True
    conversation: str | None = None
    verdict: bool | None = None
    verdict_source: str | None = None
    verdict_note: str | None = None
    final_answer: Any = None
    has_final_answer: bool = False
    fields: dict[str, Any] = field(default_factory=dict)  # intent, scope, model, run...
    line: str = ""  # where the row is in its file, for messages


@dataclass(frozen=True)
class Match:
    row: TaskRow | None
    how: str | None  # conversation, file_stem, name, task_id, question, contained
    problem: str | None = None  # why there is no match when rows disagreed


@dataclass(frozen=True)
class TaskFile:
    """A task file's rows and their indexes; picklable for the import workers, and named by
    its content (``digest``) in a file's import key."""

    path: str
    digest: str
    rows: tuple[TaskRow, ...]
    verdict_source: str = "human"

    def __str__(self) -> str:
        return f"tasks:{self.digest}:{self.verdict_source}"

    def match(self, *, stems: Iterable[str] = (), names: Iterable[str | None] = (),
              question: str | None = None) -> Match:
        """The row a trajectory belongs to (the module's order), or why there is none."""
        stems = [s for s in stems if s]
        wanted = {s.lower() for s in stems}
        steps: list[tuple[str, list[TaskRow]]] = [
            ("conversation", [r for r in self.rows if r.conversation and (
                r.conversation.lower() in wanted
                or _file_stems(r.conversation) & wanted)]),
            ("file_stem", [r for r in self.rows if r.id.lower() in wanted]),
            ("name", [r for r in self.rows
                      if any(n and r.id == str(n) for n in names)]),
        ]
        asked = normalise_question(question)
        if asked:
            steps.append(("question", [r for r in self.rows
                                       if normalise_question(r.question) == asked]))
            steps.append(("contained", _contained(self.rows, asked)))
        for how, found in steps:
            distinct = {r.id: r for r in found}
            if len(distinct) == 1:
                return Match(next(iter(distinct.values())), how)
            if len(distinct) > 1:
                lines = ", ".join(sorted(r.line for r in distinct.values())[:4])
                return Match(None, None, f"matches several task rows by {how} ({lines})")
        return Match(None, None)


def _file_stems(name: str) -> set[str]:
    """``8.conversation.json`` -> {"8.conversation.json", "8.conversation", "8"}."""
    base = Path(name.replace("\\", "/")).name.lower()
    out = {base}
    while "." in base:
        base = base.rsplit(".", 1)[0]
        out.add(base)
    return out


def file_stems(path: Path) -> list[str]:
    """The names a task row may give a trajectory file by: whole, and without each suffix."""
    return sorted(_file_stems(path.name), key=len, reverse=True)


def _contained(rows: tuple[TaskRow, ...], asked: str) -> list[TaskRow]:
    """Rows whose question is inside ``asked`` or holds it; of rows nested in one another, the
    longest question (the others are its parts), and several unrelated ones stay several."""
    found = []
    for row in rows:
        mine = normalise_question(row.question)
        if len(min(mine, asked, key=len)) < MIN_CONTAINED_CHARS:
            continue
        if mine in asked or asked in mine:
            found.append((mine, row))
    if len(found) > 1:
        longest = max(found, key=lambda item: len(item[0]))[0]
        if all(mine in longest for mine, _ in found):
            found = [item for item in found if item[0] == longest]
    return [row for _, row in found]


# ------------------------------------------------------------------------------- reading


def read_rows(path: Path) -> list[dict[str, Any]]:
    """A CSV, JSON list or JSONL file as dicts (CSV cells as text); one-line problems."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise ImportProblem(str(path), f"cannot read task file: {err.strerror or err}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise ImportProblem(str(path), f"not UTF-8 text (byte {err.start})") from None
    head = text.lstrip()[:1]
    if path.suffix.lower() in (".csv", ".tsv") or head not in ("[", "{"):
        dialect = "excel-tab" if path.suffix.lower() == ".tsv" else "excel"
        try:
            rows = list(csv.DictReader(io.StringIO(text, newline=""), dialect=dialect))
        except csv.Error as err:
            raise ImportProblem(str(path), f"not a readable CSV file ({err})") from None
        return [dict(r) for r in rows]
    try:
        doc = json.loads(text)
        items = doc if isinstance(doc, list) else [doc]
    except json.JSONDecodeError:
        items = []
        for lineno, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            try:
                items.append(json.loads(line))
            except json.JSONDecodeError as err:
                raise ImportProblem(str(path), f"not valid JSON ({err.msg})",
                                    f"line {lineno}") from None
    except RecursionError:
        raise ImportProblem(str(path), "JSON nested too deeply") from None
    if not all(isinstance(item, dict) for item in items):
        raise ImportProblem(str(path), "a JSON task file is a list of objects (one per task)")
    return items


def columns_of(names: Iterable[str]) -> dict[str, str]:
    """Our column -> the file's column name, for the names a file has (the first synonym of
    each that is present wins; a file column is used once)."""
    by_key = {_key(n): n for n in names if n is not None}
    found: dict[str, str] = {}
    used: set[str] = set()
    for ours, synonyms in COLUMNS.items():
        for synonym in synonyms:
            name = by_key.get(synonym)
            if name is not None and name not in used:
                found[ours] = name
                used.add(name)
                break
    return found


def _cell(row: dict[str, Any], columns: dict[str, str], ours: str) -> Any:
    name = columns.get(ours)
    return row.get(name) if name is not None else None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def task_row(row: dict[str, Any], columns: dict[str, str], line: str, *,
             present: bool) -> TaskRow:
    """One file row as a ``TaskRow``; ``present``: the gold column's key exists in the row
    (JSON ``"gold_answer": null`` is a null answer, a missing key is no answer)."""
    question = _text(_cell(row, columns, "question"))
    if not question:
        raise ValueError("every task needs a question")
    raw_gold = _cell(row, columns, "gold_answer")
    gold_sql = _text(_cell(row, columns, "gold_sql"))
    gold_text = raw_gold.strip() if isinstance(raw_gold, str) else None
    sql_null = gold_sql is not None and gold_sql.lower() in NULL_ANSWERS
    unanswerable = truth_value(_cell(row, columns, "unanswerable")) is True \
        or truth_value(_cell(row, columns, "answerable")) is False
    null_gold = (present and raw_gold is None and not isinstance(raw_gold, str)) \
        or (gold_text is not None and gold_text.lower() in NULL_ANSWERS)
    answerable = not (unanswerable or sql_null or null_gold)
    has_gold = (not answerable) or bool(gold_text) or (
        raw_gold is not None and not isinstance(raw_gold, str)) or bool(gold_sql)
    gold = gold_value(raw_gold) if answerable else None
    if answerable and gold_text == "":
        gold = None
    ident = _text(_cell(row, columns, "id")) or question_key(question)
    fields = {k: _text(_cell(row, columns, k)) for k in ("intent", "scope", "template_id",
                                                        "split", "model", "run",
                                                        "reference_time", "scoring_profile")}
    answer_column = columns.get("final_answer")
    return TaskRow(
        id=ident, question=question,
        gold_sql=None if sql_null else gold_sql,
        gold_answer=gold, has_gold=has_gold, answerable=answerable,
        conversation=_text(_cell(row, columns, "conversation")),
        verdict=truth_value(_cell(row, columns, "verdict")),
        verdict_source=_text(_cell(row, columns, "verdict_source")),
        verdict_note=_text(_cell(row, columns, "verdict_note")),
        final_answer=row.get(answer_column) if answer_column else None,
        has_final_answer=answer_column is not None and answer_column in row,
        fields={k: v for k, v in fields.items() if v}, line=line)


def load_tasks(path: Path, *, verdict_source: str = "human") -> TaskFile:
    """Read a task file; any problem is one ``ImportProblem`` naming the file and the row."""
    items = read_rows(path)
    if not items:
        raise ImportProblem(str(path), "task file has no rows (a CSV needs a header row)")
    names: dict[str, None] = {}
    for item in items:
        names.update(dict.fromkeys(str(k) for k in item))
    columns = columns_of(names)
    if "question" not in columns:
        raise ImportProblem(str(path), "task file has no question column (one of: "
                            f"{', '.join(COLUMNS['question'])}); its columns: "
                            f"{', '.join(list(names)[:12])}")
    rows: list[TaskRow] = []
    for index, item in enumerate(items):
        line = f"row {index + 1}"
        gold_name = columns.get("gold_answer")
        try:
            rows.append(task_row(item, columns, line,
                                 present=gold_name is not None and gold_name in item))
        except ValueError as err:
            raise ImportProblem(str(path), str(err), line) from None
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    return TaskFile(str(path), digest, tuple(rows), verdict_source)


# ------------------------------------------------------------------------------ applying


def apply_task(traj: Trajectory, tasks: TaskFile, path: Path, *,
               names: Iterable[str | None] = ()) -> Trajectory:
    """``traj`` with the task row it matches (``TaskFile.match``): the row's id, question, gold
    answer and gold SQL replace the record's, its verdict becomes the recorded outcome (with
    its source, the record's own outcome kept under ``outcome.previous``). Without a match the
    trajectory comes back with ``task_match = None`` (and why, when rows disagreed)."""
    extra = dict(traj.model_extra or {})
    asked = next((s.content for s in traj.steps if s.role == "user" and s.content), None)
    match = tasks.match(stems=file_stems(path), names=[*names, traj.task.id],
                        question=asked or traj.task.question)
    extra["task_file"] = Path(tasks.path).name
    extra["task_match"] = match.how
    if match.row is None:
        if match.problem:
            extra["task_match_problem"] = match.problem
        return Trajectory.model_validate({**traj.model_dump(mode="json"), **extra})
    row = match.row
    task = traj.task.model_dump(mode="json")
    if normalise_question(asked) and normalise_question(asked) != normalise_question(row.question):
        task["asked"] = asked  # what the agent was given, harness additions and all
    task.update({"id": row.id, "question": row.question, "has_ground_truth": row.has_gold,
                 "ground_truth": row.gold_answer})
    if row.gold_sql:
        task["reference_sql"] = row.gold_sql
    if not row.answerable:
        task["answerable"] = False
    if task.get("intent_inferred") or task.get("intent") in (None, OTHER_INTENT):
        intent, scope = infer_intent_scope(task.get("reference_sql"))
        task.update({"intent": intent, "scope": task.get("scope") or scope,
                     "intent_inferred": True})
    for name in ("intent", "scope", "template_id", "split", "reference_time", "scoring_profile"):
        if row.fields.get(name):
            task[name] = row.fields[name]
            if name == "intent":
                task["intent_inferred"] = False
    doc = traj.model_dump(mode="json")
    doc.update(extra)
    doc["task"] = task
    if row.verdict is not None:
        doc["outcome"] = verdict_outcome(row, tasks.verdict_source, doc.get("outcome"))
    return Trajectory.model_validate(doc).with_id()


def verdict_outcome(row: TaskRow, default_source: str, previous: Any) -> dict[str, Any]:
    """A row's verdict as a recorded outcome (``Outcome`` fields and extras)."""
    outcome: dict[str, Any] = {"success": row.verdict, "reward": 1.0 if row.verdict else 0.0,
                               "source": row.verdict_source or default_source}
    if row.verdict_note:
        outcome["note"] = row.verdict_note
    if previous:
        outcome["previous"] = previous
    return outcome
