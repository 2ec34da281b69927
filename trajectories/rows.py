"""The row each trajectory is stored as (one Parquet row: indexed columns plus the trajectory's
JSON payload), and how a batch of rows becomes a part file. Shared by the workspace and the
import workers, which write parts in their own processes."""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from trajectories import columns as col
from trajectories.judge import JUDGE_VERSION, Judgement, case_from, judge, judge_trajectory
from trajectories.model import ACTION_KINDS, Trajectory
from trajectories.outcome import recorded_verdict, recorded_verdict_of
from trajectories.scoring import SCORER_VERSION, score_trajectory, score_values

#: Bumped when the stored row changes, so files imported before are parsed again.
SCHEMA_KEY = "3"  # 3: the judge's verdict columns, real LM Studio steps, task-file matching
ROW_GROUP_SIZE = 1024  # small groups: a lookup by id reads one group thanks to min/max stats

INDEX_SCHEMA = pa.schema(
    [
        (col.ID, pa.string()),
        (col.RUN, pa.string()),
        (col.MODEL, pa.string()),
        (col.TEMPERATURE, pa.float64()),
        (col.ROLLOUT, pa.int32()),
        (col.TASK_ID, pa.string()),
        (col.QUESTION, pa.string()),
        (col.INTENT, pa.string()),
        (col.SCOPE, pa.string()),
        (col.TEMPLATE_ID, pa.string()),
        (col.SPLIT, pa.string()),
        (col.PAIR_ID, pa.string()),
        (col.NOISE_TYPE, pa.string()),
        (col.VARIANT, pa.string()),
        (col.REFERENCE_SQL, pa.string()),
        (col.ANSWER_FORMAT, pa.string()),
        (col.GROUND_TRUTH, pa.string()),
        (col.FINAL_ANSWER, pa.string()),
        (col.N_STEPS, pa.int32()),
        (col.N_TURNS, pa.int32()),
        (col.N_ERRORS, pa.int32()),
        (col.RECORDED_SUCCESS, pa.bool_()),
        (col.RECORDED_REWARD, pa.float64()),
        # Who recorded the outcome (added with schema key 3): "reward", "inspect:<scorer>",
        # "human" (a verdict column)... NULL without an outcome or in older parts.
        (col.RECORDED_SOURCE, pa.string()),
        (col.EXACT_MATCH, pa.bool_()),
        (col.SCORER_VERSION, pa.string()),
        # The judge's verdict (added with schema key 3; NULL in parts written before):
        # correct / incorrect / undecided, how it was reached, and its evidence.
        (col.JUDGE_VERDICT, pa.string()),
        (col.JUDGE_METHOD, pa.string()),
        (col.JUDGE_EVIDENCE, pa.string()),
        (col.JUDGE_VERSION, pa.string()),
        (col.SOURCE_FILE, pa.string()),
        # Provenance (added with schema key 3): which bytes, which record of them, which
        # import. A re-import of the same bytes by a newer importer replaces exactly these
        # rows. Parts written before have none of them: they read as NULL.
        (col.SOURCE_SHA, pa.string()),
        (col.SOURCE_RECORD, pa.int32()),
        (col.IMPORT_KEY, pa.string()),
        (col.PAYLOAD, pa.string()),
    ]
)
#: The provenance columns (NULL in rows imported before they existed, or added by ``add``).
PROVENANCE_COLUMNS = col.PROVENANCE_COLUMNS
#: The judge's columns (``judge_columns``).
JUDGE_COLUMNS = col.JUDGE_COLUMNS
INDEX_COLUMNS = [f.name for f in INDEX_SCHEMA if f.name != col.PAYLOAD]
#: Rows per row group of the parts an import stages (compaction writes ``ROW_GROUP_SIZE``):
#: Parquet's writer holds about three times a row group's payload bytes while it writes it,
#: so a 40 MB file written as one group of 1,000 rows cost a worker 130 MB; four groups
#: cost a quarter of that, and a lookup by id decompresses a quarter of the payloads.
STAGED_ROW_GROUP_SIZE = 256
#: How every part is written. No dictionary for the columns whose values are all different
#: (ids, payloads): Arrow would hash every 25 KB payload before giving the dictionary up,
#: which was most of the write's time.
PART_OPTIONS: dict[str, Any] = {
    "row_group_size": ROW_GROUP_SIZE, "compression": "zstd",
    "use_dictionary": [c for c in INDEX_COLUMNS if c != "id"],
}
STAGED_PART_OPTIONS: dict[str, Any] = {**PART_OPTIONS, "row_group_size": STAGED_ROW_GROUP_SIZE}


#: ``json.dumps(value, ensure_ascii=False, default=str)`` builds an encoder per call (half its
#: time for an import's small answer values); this one is built once.
_TEXT_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str)


def json_text(value: Any) -> str:
    return _TEXT_ENCODER.encode(value)


def reject_line(reject: dict[str, str]) -> str:
    """One rejects-file line; text that is not valid Unicode (lone surrogates) is escaped."""
    line = json_text(reject)
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        line = json.dumps(reject, ensure_ascii=True)
    return line + "\n"


def score(traj: Trajectory) -> bool | None:
    """Exact match under the task's own rules (``scoring.score_trajectory``)."""
    return score_trajectory(traj)


def judge_columns(judgement: Judgement) -> dict[str, str]:
    """A verdict as the row's judge columns."""
    return {"judge_verdict": str(judgement.verdict), "judge_method": str(judgement.method),
            "judge_evidence": judgement.evidence, "judge_version": JUDGE_VERSION}


@dataclass(frozen=True)
class Provenance:
    """Where a row came from: the file's bytes (sha256), the record's position in the file
    (0-based, every record counted, rejected ones too) and the import's ``source_key``."""

    source_sha: str
    record: int
    import_key: str


def _provenance_columns(provenance: Provenance | None) -> dict[str, Any]:
    if provenance is None:
        return {"source_sha": None, "source_record": None, "import_key": None}
    return {"source_sha": provenance.source_sha, "source_record": provenance.record,
            "import_key": provenance.import_key}


def index_row(traj: Trajectory, source_file: str | None = None,
              provenance: Provenance | None = None) -> dict[str, Any]:
    """The flat row stored for a trajectory (CONTRACTS.md lists the columns); ``payload`` is
    the trajectory's JSON as UTF-8 bytes (stored as a string column)."""
    task, run = traj.task, traj.run
    outcome = traj.outcome
    return {
        "id": traj.id,
        "run": run.name,
        "model": run.model,
        "temperature": run.temperature,
        "rollout": run.rollout,
        "task_id": task.id,
        "question": task.question,
        "intent": task.intent,
        "scope": task.scope,
        "template_id": task.template_id,
        "split": task.split,
        "pair_id": task.pair_id,
        "noise_type": task.noise_type,
        "variant": task.variant,
        "reference_sql": task.reference_sql,
        "answer_format": task.answer_format,
        "ground_truth": json_text(task.ground_truth),
        "final_answer": json_text(traj.final_answer),
        "n_steps": len(traj.steps),
        "n_turns": traj.n_turns,
        "n_errors": sum(1 for s in traj.steps if s.error),
        "recorded_success": recorded_verdict(outcome),
        "recorded_reward": outcome.reward if outcome else None,
        "recorded_source": outcome.source if outcome else None,
        "exact_match": score(traj),
        "scorer_version": SCORER_VERSION,
        **judge_columns(judge_trajectory(traj)),
        "source_file": source_file,
        **_provenance_columns(provenance),
        # UTF-8 bytes straight from the serializer: Arrow stores them without re-encoding.
        "payload": traj.__pydantic_serializer__.to_json(traj),
    }


_ACTIONS = frozenset(str(kind) for kind in ACTION_KINDS)


def document_row(doc: dict[str, Any], payload: bytes, source_file: str | None = None,
                 provenance: Provenance | None = None) -> dict[str, Any]:
    """``index_row`` of the trajectory whose JSON document (``model_dump(mode="json")`` with
    its id) is ``doc`` and whose serialised form is ``payload``: the same row, without building
    the model (the import's fast path)."""
    task, run, steps = doc["task"], doc["run"], doc["steps"]
    outcome = doc["outcome"]
    rules = task.get("rules")
    return {
        "id": doc["id"],
        "run": run["name"],
        "model": run["model"],
        "temperature": run["temperature"],
        "rollout": run["rollout"],
        "task_id": task["id"],
        "question": task["question"],
        "intent": task["intent"],
        "scope": task["scope"],
        "template_id": task["template_id"],
        "split": task["split"],
        "pair_id": task["pair_id"],
        "noise_type": task["noise_type"],
        "variant": task["variant"],
        "reference_sql": task["reference_sql"],
        "answer_format": task["answer_format"],
        "ground_truth": json_text(task["ground_truth"]),
        "final_answer": json_text(doc["final_answer"]),
        "n_steps": len(steps),
        "n_turns": sum(1 for s in steps if s["kind"] in _ACTIONS),
        "n_errors": sum(1 for s in steps if s["error"]),
        "recorded_success": recorded_verdict_of(outcome["success"], outcome["reward"])
        if outcome else None,
        "recorded_reward": outcome["reward"] if outcome else None,
        "recorded_source": outcome["source"] if outcome else None,
        "exact_match": score_values(doc["final_answer"], task["has_ground_truth"],
                                    task["ground_truth"], task["question"],
                                    task["answer_format"], rules,
                                    doc.get("final_answer_source"),
                                    doc.get("final_answer_rows_total")),
        "scorer_version": SCORER_VERSION,
        **judge_columns(judge(case_from(task, steps, doc["final_answer"], doc))),
        "source_file": source_file,
        **_provenance_columns(provenance),
        "payload": payload,
    }


#: Payloads are moved into Arrow this many rows at a time (see ``rows_table``).
_PAYLOAD_CHUNK = 256


def rows_table(rows: list[dict[str, Any]]) -> pa.Table:
    """Rows (sorted by id) as an Arrow table, built column by column (much faster than
    ``from_pylist`` on wide rows). The payloads are moved, not copied: each row loses its
    ``payload`` once it is in the table, a chunk at a time, so the rows' bytes and Arrow's
    copy of them are not both held whole (nor Arrow's builder doubling a 40 MB buffer). They
    arrive as bytes and are checked as UTF-8 in one pass by the cast (a third of the cost of
    checking them one Python object at a time)."""
    rows.sort(key=lambda r: r["id"])
    columns = {f.name: pa.array([r[f.name] for r in rows], type=f.type)
               for f in INDEX_SCHEMA if f.name != "payload"}
    chunks = [_payload_chunk([r.pop("payload") for r in rows[start:start + _PAYLOAD_CHUNK]])
              for start in range(0, len(rows), _PAYLOAD_CHUNK)]
    columns["payload"] = pa.chunked_array(chunks, type=pa.string())
    return pa.table(columns, schema=INDEX_SCHEMA)


def _payload_chunk(payloads: list[bytes | str]) -> pa.Array:
    if all(isinstance(p, bytes) for p in payloads):
        return pa.array(payloads, type=pa.binary()).cast(pa.string())  # checks UTF-8
    return pa.array(payloads, type=pa.string())


def part_name() -> str:
    return f"part-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:12]}.parquet"


def stage_rows(parts_dir: Path, rows: list[dict[str, Any]],
                filesystem: pafs.FileSystem | None = None) -> tuple[Path, Path, list[str]]:
    """Write rows to a hidden part; the import renames it into place when everything is read.
    In an object store the part is written under its final name (no rename there): the
    manifest, not the name, keeps it hidden."""
    table = rows_table(rows)
    name = part_name()
    if filesystem is not None:
        final = parts_dir / name
        pq.write_table(table, str(final), **STAGED_PART_OPTIONS,
                       filesystem=filesystem)
        return final, final, [r["id"] for r in rows]
    parts_dir.mkdir(parents=True, exist_ok=True)
    tmp = parts_dir / f".{name}.tmp"
    pq.write_table(table, tmp, **STAGED_PART_OPTIONS)
    return tmp, parts_dir / name, [r["id"] for r in rows]


def remove_part(part: Path, filesystem: pafs.FileSystem | None) -> None:
    """Delete a staged part, on disk or in the object store."""
    if filesystem is None:
        part.unlink(missing_ok=True)
        return
    with contextlib.suppress(FileNotFoundError):
        filesystem.delete_file(str(part))
