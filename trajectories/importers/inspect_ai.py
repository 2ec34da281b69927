"""Inspect AI evaluation logs: ``.eval`` (a zip archive) and ``.json`` (one JSON document).

A log holds an ``eval`` header (task, model, generate config), ``results`` (the headline scorer)
and ``samples``; each sample becomes one trajectory: ``id`` and ``epoch`` (the rollout),
``input`` (the question), ``target`` (the ground truth), ``messages`` (the steps: assistant
``tool_calls`` with their arguments, ``tool`` replies as observations), ``scores`` (the recorded
outcome) and ``metadata`` (kept, and read for intent, scope and reference SQL).

``.json`` logs are plain JSON and are parsed here directly. ``.eval`` archives are read with
Inspect's own reader (``inspect_ai.log``, imported only when such a file is imported): their
members are zstd-compressed in current Inspect versions (Python's ``zipfile`` cannot read them)
and their layout (journal, attachments) is Inspect's own, so its reader is the one that stays
right as the format moves.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from trajectories.importers.errors import ImportProblem, describe_validation_error
from trajectories.importers.openai_chat import (
    _tool_step,
    infer_intent_scope,
    is_substantive,
    pick_answer,
)
from trajectories.model import (
    Outcome,
    Run,
    Step,
    StepKind,
    Task,
    Trajectory,
    finite_number,
)
from trajectories.reading import is_error_output

_ZIP_MAGIC = b"PK\x03\x04"
_ATTACHMENT = "attachment://"
#: Sample fields that are not kept in ``source_record``: the messages become the steps; events
#: (the full transcript of model calls) and their attachments can be many times larger.
_DROPPED = {"messages", "events", "events_data", "attachments"}
#: Score values Inspect uses for its CORRECT / INCORRECT / PARTIAL / NOANSWER constants.
_LETTER_REWARD = {"C": 1.0, "I": 0.0, "P": 0.5, "N": 0.0}


def is_eval_archive(path: Path) -> bool:
    """True for an Inspect ``.eval`` log: a zip archive holding Inspect's header or journal."""
    try:
        with open(path, "rb") as handle:
            if handle.read(4) != _ZIP_MAGIC:
                return False
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
    except (OSError, zipfile.BadZipFile):
        return path.suffix.lower() == ".eval"  # a broken .eval still goes to the Inspect reader
    return "header.json" in names or "_journal/start.json" in names


def looks_like_inspect_log(record: Any) -> bool:
    """An Inspect ``.json`` log: an object with an ``eval`` header naming task and model."""
    if not isinstance(record, dict):
        return False
    header = record.get("eval")
    return isinstance(header, dict) and "task" in header and "model" in header \
        and ("samples" in record or "status" in record)


def _resolve(value: Any, attachments: dict[str, Any]) -> Any:
    """Replace ``attachment://<hash>`` strings with the attachment they point to."""
    if isinstance(value, str):
        if value.startswith(_ATTACHMENT):
            return attachments.get(value[len(_ATTACHMENT):], value)
        return value
    if isinstance(value, list):
        return [_resolve(v, attachments) for v in value]
    if isinstance(value, dict):
        return {k: _resolve(v, attachments) for k, v in value.items()}
    return value


def _location(sample: dict[str, Any], index: int) -> str:
    if "id" in sample:
        return f"sample {sample.get('id')} epoch {sample.get('epoch', 1)}"
    return f"sample {index}"


def json_log_samples(doc: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(location, header, sample) for each sample of a parsed ``.json`` log."""
    header = {k: v for k, v in doc.items() if k != "samples"}
    samples = doc.get("samples") or []
    if not isinstance(samples, list):
        samples = [samples]  # reported per sample as not a sample object
    for index, sample in enumerate(samples):
        if not isinstance(sample, dict):
            yield f"sample {index}", header, {"_invalid": sample}
            continue
        attachments = sample.get("attachments")
        if isinstance(attachments, dict) and attachments:
            sample = {**_resolve({k: v for k, v in sample.items() if k != "attachments"},
                                 attachments), "attachments": attachments}
        yield _location(sample, index), header, sample


def eval_archive_samples(path: Path) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(location, header, sample) for each sample of a ``.eval`` archive, one sample in memory
    at a time, read with Inspect's own reader. Unreadable archives raise one-line problems."""
    try:
        from inspect_ai.log import read_eval_log, read_eval_log_samples
    except ImportError:
        raise ImportProblem(str(path), "reading Inspect .eval logs needs the inspect-ai package "
                            "(pip install inspect-ai), or convert the log with "
                            "'inspect log convert --to json'") from None
    try:
        log = read_eval_log(str(path), header_only=True, format="eval")
        header = log.model_dump(mode="json", exclude={"samples"}, exclude_none=True)
        samples = read_eval_log_samples(str(path), all_samples_required=False,
                                        resolve_attachments=True, format="eval",
                                        exclude_fields={"events", "events_data"})
        for index, sample in enumerate(samples):
            data = sample.model_dump(mode="json", exclude=_DROPPED - {"messages"},
                                     exclude_none=True)
            yield _location(data, index), header, data
    except ImportProblem:
        raise
    except Exception as err:  # zip, zstd, JSON and validation errors from the reader
        detail = str(err).strip().splitlines()[0] if str(err).strip() else ""
        raise ImportProblem(str(path), f"not a readable Inspect .eval log "
                            f"({type(err).__name__}{': ' + detail[:200] if detail else ''})"
                            ) from None


def _content_parts(content: Any) -> tuple[str, list[str]]:
    """(text, reasoning texts) from a message's ``content``: a string or a list of parts."""
    if content is None:
        return "", []
    if isinstance(content, str):
        return content, []
    if not isinstance(content, list):
        return json.dumps(content, ensure_ascii=False), []
    text: list[str] = []
    reasoning: list[str] = []
    for part in content:
        if isinstance(part, str):
            text.append(part)
        elif isinstance(part, dict):
            kind = part.get("type")
            if kind == "text":
                text.append(str(part.get("text") or ""))
            elif kind == "reasoning":
                said = part.get("summary") if part.get("redacted") else part.get("reasoning")
                if said:
                    reasoning.append(str(said))
            else:  # images, audio, data: keep a marker, never the payload
                text.append(f"[{kind}]")
    return "".join(text), reasoning


def steps_from_inspect(messages: list[Any]) -> list[Step]:
    """Inspect chat messages to steps: reasoning is a ``thinking`` step, each tool call a
    ``sql``/``python``/``tool_call`` step whose observation is the tool's reply."""
    steps: list[Step] = []
    calls: dict[str, Step] = {}
    for msg in messages:
        if not isinstance(msg, dict):
            continue
        role = str(msg.get("role") or "assistant")
        text, reasoning = _content_parts(msg.get("content"))
        if role == "tool":
            step = calls.pop(str(msg.get("tool_call_id")), None)
            error = msg.get("error")
            if step is None:
                steps.append(Step(kind=StepKind.MESSAGE, role="tool",
                                  name=msg.get("function"), content=text))
                continue
            if isinstance(error, dict):
                # Inspect puts a failed tool's message in ``error``, its content stays empty.
                step.tool_error = error  # type: ignore[attr-defined]
                if not text.strip() and error.get("message"):
                    text = f"Error ({error.get('type') or 'tool'}): {error['message']}"
            step.observation = text
            step.error = bool(error) or is_error_output(text)
            continue
        for thought in reasoning:
            steps.append(Step(kind=StepKind.THINKING, role="assistant", content=thought))
        if role != "assistant":
            if text:
                steps.append(Step(kind=StepKind.MESSAGE, role=role, content=text))
            continue
        if text.strip():
            steps.append(Step(kind=StepKind.MESSAGE, role="assistant", content=text))
        for call in msg.get("tool_calls") or []:
            if not isinstance(call, dict):
                continue
            step = _tool_step(call.get("function"), call.get("arguments"), call.get("id"))
            if call.get("parse_error"):
                step.parse_error = call["parse_error"]  # type: ignore[attr-defined]
            steps.append(step)
            if call.get("id"):
                calls[str(call["id"])] = step
    return steps


def _question(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # a list of chat messages: the first user turn
        for msg in value:
            if isinstance(msg, dict) and msg.get("role") == "user":
                return _content_parts(msg.get("content"))[0]
    return json.dumps(value, ensure_ascii=False)


def _score_outcome(sample: dict[str, Any], header: dict[str, Any]) -> Outcome | None:
    """The headline scorer's value as the recorded outcome (C/I/P/N letters, numbers, booleans);
    every score is kept in ``outcome.scores``."""
    scores = sample.get("scores")
    if not isinstance(scores, dict) or not scores:
        return None
    headline = ((header.get("results") or {}).get("headline") or {}).get("scorer")
    name = headline if headline in scores else next(iter(scores))
    score = scores[name] if isinstance(scores[name], dict) else {"value": scores[name]}
    value = score.get("value")
    reward: float | None = None
    if isinstance(value, bool):
        reward = 1.0 if value else 0.0
    elif isinstance(value, int | float):
        reward = finite_number(value)
        if reward is None:  # NaN, an infinity or an integer beyond every float
            raise ValueError(f"scores.{name}.value: Input should be a finite number")
    elif isinstance(value, str) and value in _LETTER_REWARD:
        reward = _LETTER_REWARD[value]
    outcome = Outcome(success=None if reward is None else reward >= 1.0 - 1e-9,
                      reward=reward, source=f"inspect:{name}")
    outcome.recorded_answer = score.get("answer")  # type: ignore[attr-defined]
    outcome.scores = scores  # type: ignore[attr-defined]
    return outcome


def _final_answer(sample: dict[str, Any],
                  steps: list[Step]) -> tuple[Any, int | None, str, int | None]:
    """What Inspect's scorers score: the sample's final completion (``output.completion``),
    located among the steps; without one, the agent's own answer as for chat logs."""
    output = sample.get("output") if isinstance(sample.get("output"), dict) else {}
    completion = (output or {}).get("completion")
    if isinstance(completion, str) and is_substantive(completion):
        for index in range(len(steps) - 1, -1, -1):
            step = steps[index]
            if step.kind == StepKind.MESSAGE and step.role == "assistant" \
                    and (step.content or "").strip() == completion.strip():
                return completion, index, "output_completion", None
        return completion, None, "output_completion", None
    return pick_answer(steps)


def _ground_truth(target: Any) -> tuple[Any, bool]:
    if isinstance(target, list):
        if not target:
            return None, False
        return (target[0] if len(target) == 1 else target), True
    if target is None or (isinstance(target, str) and not target.strip()):
        return None, False
    return target, True


def parse_inspect_sample(sample: Any, header: dict[str, Any], *, stem: str, run: str | None,
                         model: str | None) -> Trajectory:
    """One Inspect sample to a trajectory; raises ``ValueError`` ``field: message``."""
    if not isinstance(sample, dict) or "_invalid" in sample:
        raise ValueError("(sample): expected an Inspect sample object")
    messages = sample.get("messages")
    if not isinstance(messages, list):
        raise ValueError("messages: a list of chat messages is required")
    if sample.get("id") is None:
        raise ValueError("id: the sample has no id")
    ev = header.get("eval") if isinstance(header.get("eval"), dict) else {}
    ev = ev or {}
    metadata = sample.get("metadata") if isinstance(sample.get("metadata"), dict) else {}
    metadata = metadata or {}
    steps = steps_from_inspect(messages)
    reference_sql = next((metadata[k] for k in ("reference_sql", "gold_sql", "sql")
                          if isinstance(metadata.get(k), str)), None)
    intent, scope = infer_intent_scope(reference_sql)
    ground_truth, has_ground_truth = _ground_truth(sample.get("target"))
    final_answer, answer_step, answer_source, rows_total = _final_answer(sample, steps)
    config = ev.get("model_generate_config") or {}
    epoch = sample.get("epoch", 1)
    try:
        task = Task.model_validate({
            "id": str(sample["id"]),
            "question": _question(sample.get("input")),
            "intent": metadata.get("intent") or intent,
            "scope": metadata.get("scope") or scope,
            "intent_inferred": not metadata.get("intent"),
            "template_id": metadata.get("template_id"),
            "split": metadata.get("split"),
            "reference_sql": reference_sql,
            "ground_truth": ground_truth,
            "has_ground_truth": has_ground_truth,
            "metadata": metadata,
            "inspect_task": ev.get("task"),
        })
        run_record = Run.model_validate({
            "name": run or stem,
            "model": model or str(ev.get("model") or "unknown"),
            "temperature": config.get("temperature") if isinstance(config, dict) else None,
            "rollout": int(epoch) - 1 if isinstance(epoch, int) and epoch >= 1 else 0,
            "configuration": {k: ev[k] for k in ("task", "task_version", "task_args",
                                                 "model_generate_config", "dataset")
                              if k in ev},
            "display_name": run or f"{ev.get('task') or stem} {ev.get('model') or ''}".strip(),
        })
        traj = Trajectory.model_validate({
            "task": task, "run": run_record, "steps": steps,
            "final_answer": final_answer, "final_answer_step": answer_step,
            "final_answer_source": answer_source,
            **({} if rows_total is None else {"final_answer_rows_total": rows_total}),
            "outcome": _score_outcome(sample, header),
            "source_format": "inspect",
            "source_record": {
                "sample": {k: v for k, v in sample.items() if k not in _DROPPED},
                "log": {k: header.get(k) for k in ("version", "status", "eval", "plan", "stats",
                                                   "error") if k in header},
            },
        })
    except ValidationError as err:
        field, msg = describe_validation_error(err)
        raise ValueError(f"{field}: {msg}") from None
    return traj.with_id()


__all__ = [
    "eval_archive_samples",
    "is_eval_archive",
    "json_log_samples",
    "looks_like_inspect_log",
    "parse_inspect_sample",
    "steps_from_inspect",
]
