"""The scores overlay (``scores.parquet``): every trajectory re-scored and re-judged with the
current rules, beside the stored rows and never rewriting them.

Two writers: ``write_scores`` (exact match and the judge's rule layers, for every trajectory)
and ``record_judgements`` (verdicts from beyond the rules, such as an LLM judge's, for some
trajectories). A verdict from beyond the rules is kept by later ``write_scores`` runs for as
long as the rules still leave that trajectory undecided: re-running the rules must not throw
away an answer that was paid for, and it must give way as soon as the rules can decide.

``ScoreOverlay`` is given the workspace's ``Parts``: it reads the parts' payloads and writes the
overlay beside them under their write lock."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from trajectories.judge import Executor, Judgement, Method, Profile, Verdict, judge_trajectory
from trajectories.model import Trajectory
from trajectories.parts import Parts
from trajectories.rows import JUDGE_COLUMNS, judge_columns, score
from trajectories.scoring import SCORER_VERSION

#: Methods whose verdicts come from beyond the rule layers (kept across rule re-runs).
BEYOND_RULES = (str(Method.LLM),)

_SCHEMA = pa.schema([("id", pa.string()), ("exact_match", pa.bool_()),
                     ("scorer_version", pa.string()),
                     *((c, pa.string()) for c in JUDGE_COLUMNS)])


class ScoreOverlay:
    """The scores overlay of a ``Workspace``, over its ``Parts``."""

    def __init__(self, parts: Parts) -> None:
        self.parts = parts

    def iter_payload_batches(self, batch_size: int = 2048
                             ) -> Iterator[list[tuple[str, str, bool]]]:
        """``(id, payload JSON, stored exact_match)`` for every visible row, a batch at a time."""
        for part in self.parts.part_files():
            pf = self.parts.parquet_file(part)
            for rb in pf.iter_batches(batch_size=batch_size,
                                      columns=["id", "payload", "exact_match"]):
                cols = rb.to_pydict()
                yield list(zip(cols["id"], cols["payload"], cols["exact_match"], strict=True))

    def write_scores(self, rerun: Callable[[str], list[list[Any]] | None] | None = None, *,
                     profile: Profile | str | None = None, execute: Executor | None = None
                     ) -> dict[str, int]:
        """Re-score every trajectory with the current scorer and judge into the overlay file.
        ``rerun`` re-executes a last SQL query whose recorded result was cut or unreadable
        (the sandbox; ``trajectories.judge.judge_trajectory``); ``execute`` does the same at
        the task's reference time, and under the ``ehrsql-2024`` profile runs the prediction
        and the gold SQL again. ``profile`` judges every trajectory under that scoring profile
        (default: each task's own). Returns counts: ``scored``,
        ``changed`` (exact-match outcomes that differ from the stored ones), one per verdict,
        and ``kept`` (verdicts from beyond the rules kept because the rules still cannot
        decide)."""
        beyond = self._beyond_rules()
        ids: list[str] = []
        matches: list[bool | None] = []
        judged: dict[str, list[str]] = {c: [] for c in JUDGE_COLUMNS}
        changed = kept = 0
        for batch in self.iter_payload_batches():
            for tid, payload, stored in batch:
                traj = Trajectory.model_validate_json(payload)
                result = score(traj)
                changed += int(result != stored)
                ids.append(tid)
                matches.append(result)
                columns = judge_columns(judge_trajectory(traj, rerun, profile=profile,
                                                         execute=execute))
                if columns["judge_verdict"] == Verdict.UNDECIDED and tid in beyond:
                    columns = beyond[tid]
                    kept += 1
                for column, value in columns.items():
                    judged[column].append(value)
        self._write_overlay(pa.table({"id": ids, "exact_match": matches,
                                      "scorer_version": [SCORER_VERSION] * len(ids), **judged},
                                     schema=_SCHEMA))
        verdicts = judged["judge_verdict"]
        return {"scored": len(ids), "changed": changed, "kept": kept,
                **{v.value: verdicts.count(v) for v in Verdict}}

    def record_judgements(self, judgements: Mapping[str, Judgement], version: str) -> int:
        """Put verdicts from beyond the rules (``judgements`` by trajectory id, ``version``
        naming who gave them, e.g. the LLM and its prompt) into the overlay, for trajectories
        the rules leave undecided; an ``undecided`` judgement changes nothing. Needs an overlay
        (``write_scores`` first). Returns how many rows changed."""
        if not self.parts.scores_path.exists():
            raise ValueError("no scores overlay yet: judge with the rules first")
        with self.parts.write_lock():
            table = pq.read_table(self.parts.scores_path)
            cols = {name: table.column(name).to_pylist() for name in _SCHEMA.names
                    if name in table.column_names}
            changed = 0
            for row, tid in enumerate(cols["id"]):
                judgement = judgements.get(tid)
                if (judgement is None or judgement.verdict == Verdict.UNDECIDED
                        or cols["judge_verdict"][row] != Verdict.UNDECIDED):
                    continue
                for column, value in judge_columns(judgement).items():
                    cols[column][row] = version if column == "judge_version" else value
                changed += 1
            if changed:
                self._write_overlay_locked(pa.table(cols, schema=_SCHEMA))
        if changed:
            self.parts.changed()
        return changed

    def _beyond_rules(self) -> dict[str, dict[str, str]]:
        """The overlay's rows whose verdict came from beyond the rules, by id."""
        if not self.parts.scores_path.exists():
            return {}
        table = pq.read_table(self.parts.scores_path)
        if "judge_method" not in table.column_names:
            return {}
        cols = table.select(["id", *JUDGE_COLUMNS]).to_pydict()
        return {tid: {c: cols[c][row] for c in JUDGE_COLUMNS}
                for row, tid in enumerate(cols["id"]) if cols["judge_method"][row] in BEYOND_RULES}

    def _write_overlay(self, table: pa.Table) -> None:
        with self.parts.write_lock():
            self._write_overlay_locked(table)
        self.parts.changed()

    def _write_overlay_locked(self, table: pa.Table) -> None:
        tmp = self.parts.root / ".scores.parquet.tmp"
        pq.write_table(table, tmp)
        os.replace(tmp, self.parts.scores_path)
