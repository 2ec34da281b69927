"""The benchmark validity-audit report, computed from plain records.

Input is the audited sample (``AuditItem``) and the binary validity judgments people made on it
(``Judgment``, at the ``review`` or ``adjudication`` stage). Output is an ``AuditReport`` that
holds everything a "Table 11"-style summary needs -- candidate share, sample size, distinct
templates, adjudicated validity, each annotator's valid share, raw agreement, Cohen's kappa with
PABAK and the other prevalence-robust measures -- plus the same agreement per intent x scope
cell, agreement with the final label after adjudication, and reason-code counts. Rendering to
JSON, long-format CSV, Markdown and LaTeX lives in :mod:`analysis.audit_report`, beside the
other exports. No database, no UI.

Final label of an item: the (last) adjudication judgment if one exists, otherwise the review
label when all reviewers agree; items whose reviewers still disagree are *unresolved* and items
nobody reviewed are *unreviewed*; neither enters the adjudicated valid share.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from labeling.agreement import BinaryAgreement, binary_agreement, cohens_kappa_from_labels
from labeling.store.records import STAGES, AuditItem

__all__ = [
    "AnnotatorVsFinal",
    "AuditItem",
    "AuditReport",
    "Judgment",
    "RateCount",
    "StratumAgreement",
    "build_audit_report",
    "parse_valid",
]

Stage = Literal["review", "adjudication"]  # the values of labeling.store.records.Stage
_LABELS = ("valid", "invalid")

_TRUE = frozenset({"1", "true", "valid"})
_FALSE = frozenset({"0", "false", "invalid"})


def parse_valid(value: str) -> bool:
    """Read a validity label: ``1/0``, ``true/false`` or ``valid/invalid``, any case, trimmed."""
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(
        f"cannot read {value!r} as a validity label; use 1/0, true/false or valid/invalid"
    )


@dataclass(frozen=True)
class Judgment:
    """One person's validity call on one task. Later judgments override earlier ones."""

    task_id: str
    annotator: str
    valid: bool
    reason: str | None = None
    note: str | None = None
    stage: Stage = "review"

    def __post_init__(self) -> None:
        if self.stage not in STAGES:
            raise ValueError(f"stage must be one of {STAGES}, got {self.stage!r}")
        if not isinstance(self.valid, bool):
            raise TypeError(f"valid must be a bool, got {self.valid!r}; see parse_valid()")


@dataclass(frozen=True)
class RateCount:
    """A share with the counts behind it (rate is None when the denominator is 0)."""

    count: int
    total: int

    @property
    def rate(self) -> float | None:
        return self.count / self.total if self.total else None


@dataclass(frozen=True)
class StratumAgreement:
    """Pair agreement and final validity inside one intent x scope cell."""

    intent: str | None
    scope: str | None
    n_items: int
    n_both_rated: int
    n_agree: int
    raw_agreement: float | None
    cohens_kappa: float | None
    pabak: float | None
    n_final: int
    n_final_valid: int

    @property
    def valid_rate_final(self) -> float | None:
        return self.n_final_valid / self.n_final if self.n_final else None


@dataclass(frozen=True)
class AnnotatorVsFinal:
    """How often one annotator's review label survived adjudication."""

    annotator: str
    n: int
    n_agree: int
    raw_agreement: float | None
    cohens_kappa: float | None

    @property
    def n_overridden(self) -> int:
        return self.n - self.n_agree


@dataclass(frozen=True)
class AuditReport:
    """Everything the validity-audit summary shows. Build with :func:`build_audit_report`."""

    n_items: int
    n_candidates: int | None
    n_total_tasks: int | None
    n_unique_templates: int
    n_without_template: int
    annotators: tuple[str, ...]
    pair: tuple[str, str] | None
    agreement: BinaryAgreement | None
    n_resolved: int
    n_valid_adjudicated: int
    n_adjudicated: int
    n_unresolved: int
    n_unreviewed: int
    valid_count_by_annotator: dict[str, RateCount]
    reason_counts: dict[str, int]
    by_stratum: tuple[StratumAgreement, ...]
    after_adjudication: tuple[AnnotatorVsFinal, ...]
    final_labels: dict[str, bool | None] = field(repr=False)

    # ---- derived shares -------------------------------------------------------------------

    @property
    def candidate_rate(self) -> float | None:
        if self.n_candidates is None or not self.n_total_tasks:
            return None
        return self.n_candidates / self.n_total_tasks

    @property
    def audit_rate(self) -> float | None:
        if not self.n_candidates:
            return None
        return self.n_items / self.n_candidates

    @property
    def valid_rate_adjudicated(self) -> float | None:
        return self.n_valid_adjudicated / self.n_resolved if self.n_resolved else None

    @property
    def valid_rate_by_annotator(self) -> dict[str, float | None]:
        return {name: rc.rate for name, rc in self.valid_count_by_annotator.items()}

    @property
    def kappa_paradox_note(self) -> str | None:
        return self.agreement.kappa_paradox_note if self.agreement else None


# ---- computation ----------------------------------------------------------------------------


def _pair_table(
    task_ids: Iterable[str], reviews: dict[str, dict[str, bool]], a: str, b: str
) -> list[list[int]]:
    t = [[0, 0], [0, 0]]
    for tid in task_ids:
        r = reviews.get(tid, {})
        if a in r and b in r:
            # index 0 = valid, 1 = invalid, matching binary_agreement's "positive first".
            t[0 if r[a] else 1][0 if r[b] else 1] += 1
    return t


def _binary_or_none(table: list[list[int]]) -> BinaryAgreement | None:
    return binary_agreement(table, _LABELS) if sum(map(sum, table)) else None


def build_audit_report(
    items: Sequence[AuditItem],
    judgments: Sequence[Judgment],
    *,
    n_candidates: int | None = None,
    n_total_tasks: int | None = None,
    pair: tuple[str, str] | None = None,
) -> AuditReport:
    """Compute the validity-audit report.

    ``pair`` picks the two annotators whose agreement is reported; by default the first two
    reviewers in name order. Judgments are applied in the order given, so a later judgment by the
    same person at the same stage replaces an earlier one. Judgments on tasks that are not in
    ``items`` raise ``ValueError`` rather than being silently dropped.
    """
    by_id: dict[str, AuditItem] = {}
    for it in items:
        if it.task_id in by_id:
            raise ValueError(f"task {it.task_id!r} appears twice in the audited items")
        by_id[it.task_id] = it
    if n_candidates is not None and n_candidates < 0:
        raise ValueError("n_candidates must be non-negative")
    if n_total_tasks is not None and n_total_tasks < 0:
        raise ValueError("n_total_tasks must be non-negative")

    reviews: dict[str, dict[str, bool]] = {}
    adjudicated: dict[str, bool] = {}
    reasons_by_task: dict[str, set[str]] = {}
    for j in judgments:
        if j.task_id not in by_id:
            raise ValueError(f"judgment by {j.annotator!r} refers to unknown task {j.task_id!r}")
        if j.stage == "review":
            reviews.setdefault(j.task_id, {})[j.annotator] = j.valid
        else:
            adjudicated[j.task_id] = j.valid
        if j.reason and j.reason.strip():
            reasons_by_task.setdefault(j.task_id, set()).add(j.reason.strip())

    annotators = tuple(sorted({name for r in reviews.values() for name in r}))
    if pair is not None:
        missing = [p for p in pair if p not in annotators]
        if missing or pair[0] == pair[1]:
            raise ValueError(f"pair {pair!r} must name two different reviewers of {annotators!r}")
    elif len(annotators) >= 2:
        pair = (annotators[0], annotators[1])

    final: dict[str, bool | None] = {}
    n_unresolved = n_unreviewed = 0
    for tid in by_id:
        if tid in adjudicated:
            final[tid] = adjudicated[tid]
            continue
        labels = set(reviews.get(tid, {}).values())
        if len(labels) == 1:
            final[tid] = labels.pop()
        else:
            final[tid] = None
            if labels:
                n_unresolved += 1
            else:
                n_unreviewed += 1
    resolved = [v for v in final.values() if v is not None]

    valid_counts: dict[str, RateCount] = {}
    for name in annotators:
        calls = [r[name] for r in reviews.values() if name in r]
        valid_counts[name] = RateCount(count=sum(calls), total=len(calls))

    agreement = _binary_or_none(_pair_table(by_id, reviews, *pair)) if pair else None

    cells: dict[tuple[str | None, str | None], list[str]] = {}
    for tid, it in by_id.items():
        cells.setdefault((it.intent, it.scope), []).append(tid)
    strata: list[StratumAgreement] = []
    for (intent, scope), tids in sorted(cells.items(),
                                        key=lambda kv: (kv[0][0] or "", kv[0][1] or "")):
        cell_ag = _binary_or_none(_pair_table(tids, reviews, *pair)) if pair else None
        cell_final = [final[t] for t in tids if final[t] is not None]
        strata.append(StratumAgreement(
            intent=intent,
            scope=scope,
            n_items=len(tids),
            n_both_rated=cell_ag.n if cell_ag else 0,
            n_agree=cell_ag.n_agree if cell_ag else 0,
            raw_agreement=cell_ag.raw_agreement if cell_ag else None,
            cohens_kappa=cell_ag.cohens_kappa.kappa if cell_ag else None,
            pabak=cell_ag.pabak if cell_ag else None,
            n_final=len(cell_final),
            n_final_valid=sum(bool(v) for v in cell_final),
        ))

    after: list[AnnotatorVsFinal] = []
    for name in annotators:
        mine: list[str] = []
        fin: list[str] = []
        for tid, r in reviews.items():
            f = final[tid]
            if name in r and f is not None:
                mine.append(_LABELS[0] if r[name] else _LABELS[1])
                fin.append(_LABELS[0] if f else _LABELS[1])
        n_agree = sum(x == y for x, y in zip(mine, fin, strict=True))
        kappa = cohens_kappa_from_labels(mine, fin, _LABELS).kappa if mine else None
        after.append(AnnotatorVsFinal(
            annotator=name,
            n=len(mine),
            n_agree=n_agree,
            raw_agreement=n_agree / len(mine) if mine else None,
            cohens_kappa=kappa,
        ))

    reason_counter = Counter(r for rs in reasons_by_task.values() for r in rs)
    reason_counts = dict(sorted(reason_counter.items(), key=lambda kv: (-kv[1], kv[0])))

    templates = {it.template_id for it in by_id.values() if it.template_id is not None}
    return AuditReport(
        n_items=len(by_id),
        n_candidates=n_candidates,
        n_total_tasks=n_total_tasks,
        n_unique_templates=len(templates),
        n_without_template=sum(1 for it in by_id.values() if it.template_id is None),
        annotators=annotators,
        pair=pair,
        agreement=agreement,
        n_resolved=len(resolved),
        n_valid_adjudicated=sum(resolved),
        n_adjudicated=len(adjudicated),
        n_unresolved=n_unresolved,
        n_unreviewed=n_unreviewed,
        valid_count_by_annotator=valid_counts,
        reason_counts=reason_counts,
        by_stratum=tuple(strata),
        after_adjudication=tuple(after),
        final_labels=final,
    )
