"""An EHRSQL-2024 submission, read as the benchmark's files are: ``prediction.json`` (question
id -> the predicted SQL, or ``"null"`` to abstain) with the benchmark's own task files
(``data.json``: ids and questions; ``label.json``: id -> gold SQL or ``"null"``; ``answer.json``:
id -> the gold result as text, when present).

Every prediction and gold query is run in the sandbox at the benchmark's clock after the
scorer's post-processing (``trajectories.scoring_ehrsql``), so the stored trajectory shows what
the scorer saw: one SQL step with the prediction as submitted and its result (or its error),
no step for a null prediction, the result as the final answer. The task carries the gold SQL
and its result, says whether the question has an answer, and names the ``ehrsql-2024`` scoring
profile, which the judge then applies.

A prediction whose id is not in the task files (a question changed after the submission was
made) is left out and counted; so is a task without a prediction.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trajectories.importers.openai_chat import infer_intent_scope
from trajectories.judge import Execution, Executor, Profile
from trajectories.model import Run, Step, StepKind, Task, Trajectory
from trajectories.scoring import ANSWER_SQL
from trajectories.scoring_ehrsql import is_null_prediction, post_process
from trajectories.sql import BENCHMARK_NOW, json_cell

__all__ = [
    "Benchmark",
    "SubmissionImport",
    "is_benchmark_task_file",
    "is_submission",
    "load_benchmark",
    "read_submission",
]

#: The task files of one benchmark split, found beside ``data.json``.
LABEL_FILE, ANSWER_FILE, DATA_FILE = "label.json", "answer.json", "data.json"
# Two at once: the sandbox keeps two workers.
_PARALLEL = 2


@dataclass(frozen=True)
class Benchmark:
    """One split of the benchmark: questions, gold SQL and (optionally) stored answers."""

    questions: dict[str, str]
    gold_sql: dict[str, str]
    answers: dict[str, str]
    version: str | None = None
    split: str | None = None


@dataclass
class SubmissionImport:
    trajectories: list[Trajectory] = field(default_factory=list)
    #: Predictions with no task of that id, and tasks with no prediction.
    no_task: list[str] = field(default_factory=list)
    no_prediction: list[str] = field(default_factory=list)


def _read_json(path: Path) -> Any:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def is_submission(path: Path) -> bool:
    """A JSON object of id -> text (SQL or ``null``): the shape of ``prediction.json``."""
    if path.suffix.lower() != ".json" or not path.is_file():
        return False
    try:
        doc = _read_json(path)
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and bool(doc) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in doc.items())


def is_benchmark_task_file(path: Path) -> bool:
    """``data.json`` of the benchmark (or its folder), with ``label.json`` beside it."""
    folder = path if path.is_dir() else path.parent
    data = folder / DATA_FILE
    return (path.is_dir() or path.name == DATA_FILE) and data.is_file() \
        and (folder / LABEL_FILE).is_file()


def load_benchmark(path: Path) -> Benchmark:
    """The split whose ``data.json`` is ``path`` (or which lives in the folder ``path``)."""
    folder = path if path.is_dir() else path.parent
    data = _read_json(folder / DATA_FILE)
    rows = data.get("data") if isinstance(data, dict) else data
    if not isinstance(rows, list):
        raise ValueError(f"{folder / DATA_FILE}: expected a 'data' list of questions")
    questions = {str(r["id"]): str(r.get("question") or "") for r in rows
                 if isinstance(r, dict) and "id" in r}
    labels = _read_json(folder / LABEL_FILE)
    answers_path = folder / ANSWER_FILE
    answers = _read_json(answers_path) if answers_path.is_file() else {}
    if not isinstance(labels, dict) or not isinstance(answers, dict):
        raise ValueError(f"{folder}: label.json and answer.json map ids to text")
    version = data.get("version") if isinstance(data, dict) else None
    return Benchmark(questions, {str(k): str(v) for k, v in labels.items()},
                     {str(k): str(v) for k, v in answers.items()},
                     version=str(version) if version is not None else None, split=folder.name)


def read_submission(prediction: Path, benchmark: Benchmark, execute: Executor, *,
                    run: str | None = None, model: str | None = None,
                    progress: Callable[[int, int], None] | None = None) -> SubmissionImport:
    """The trajectories of a submission, every query run through ``execute`` (the sandbox)."""
    doc = _read_json(prediction)
    if not isinstance(doc, dict):
        raise ValueError(f"{prediction}: expected a JSON object of id -> SQL")
    predictions = {str(k): v if isinstance(v, str) else "null" for k, v in doc.items()}
    out = SubmissionImport(
        no_task=sorted(i for i in predictions if i not in benchmark.gold_sql),
        no_prediction=sorted(i for i in benchmark.gold_sql if i not in predictions))
    ids = [i for i in predictions if i in benchmark.gold_sql]
    queries = {sql for i in ids for sql in (predictions[i], benchmark.gold_sql[i])
               if not is_null_prediction(sql.strip())}
    ran = _run_all(sorted(queries), execute, progress)
    name = run or prediction.parent.name or prediction.stem
    runs = Run(name=name, model=model or name)
    for qid in ids:
        out.trajectories.append(_trajectory(qid, predictions[qid], benchmark, ran, runs))
    return out


def _run_all(queries: list[str], execute: Executor,
             progress: Callable[[int, int], None] | None) -> dict[str, Execution]:
    done: dict[str, Execution] = {}

    def one(sql: str) -> tuple[str, Execution]:
        return sql, execute(post_process(sql), BENCHMARK_NOW)

    with ThreadPoolExecutor(max_workers=_PARALLEL) as pool:
        for sql, result in pool.map(one, queries):
            done[sql] = result
            if progress is not None:
                progress(len(done), len(queries))
    return done


def _status(result: Execution) -> str:
    return "ok" if result.ran else "failed" if result.error is not None else "stopped"


def _rows(result: Execution) -> list[list[Any]]:
    return [[json_cell(v) for v in row] for row in result.rows or []]


def _trajectory(qid: str, predicted: str, benchmark: Benchmark, ran: Mapping[str, Execution],
                run: Run) -> Trajectory:
    question = benchmark.questions.get(qid, "")
    gold_sql = benchmark.gold_sql[qid]
    answerable = not is_null_prediction(gold_sql.strip())
    intent, scope = infer_intent_scope(gold_sql if answerable else None)
    task: dict[str, Any] = {
        "id": qid, "question": question, "intent": intent, "scope": scope,
        "reference_sql": gold_sql if answerable else None, "split": benchmark.split,
        "has_ground_truth": True, "answerable": answerable,
        "scoring_profile": str(Profile.EHRSQL_2024), "reference_time": BENCHMARK_NOW,
        "benchmark_version": benchmark.version,
    }
    if answerable:
        gold = ran[gold_sql]
        task["gold_execution"] = _status(gold)
        task["ground_truth"] = _rows(gold) if gold.ran else None
        if qid in benchmark.answers:
            task["benchmark_answer"] = benchmark.answers[qid]
    else:
        task["ground_truth"] = None
    steps: list[Step] = []
    extra: dict[str, Any] = {}
    final: Any = None
    if not is_null_prediction(predicted.strip()):
        mine = ran[predicted]
        status = _status(mine)
        text = (json.dumps(_rows(mine), ensure_ascii=False) if mine.ran
                else mine.error or mine.stopped or "")
        steps.append(Step(kind=StepKind.SQL, code=predicted, observation=text,
                          error=not mine.ran))
        extra["execution"] = status
        if mine.ran:
            final = _rows(mine)
            extra["final_answer_source"] = ANSWER_SQL
    return Trajectory.model_validate({"task": Task.model_validate(task), "run": run,
                                      "steps": steps, "final_answer": final, **extra})
