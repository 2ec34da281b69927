"""The benchmark validity-audit report, computed from plain records.

Input is the audited sample (``AuditItem``) and the binary validity judgments people made on it
(``Judgment``, at the ``review`` or ``adjudication`` stage). Output is an ``AuditReport`` that
holds everything a "Table 11"-style summary needs -- candidate share, sample size, distinct
templates, adjudicated validity, each annotator's valid share, raw agreement, Cohen's kappa with
PABAK and the other prevalence-robust measures -- plus the same agreement per intent x scope
cell, agreement with the final label after adjudication, and reason-code counts. The report
exports to JSON, long-format CSV, Markdown and LaTeX. No database, no UI.

Final label of an item: the (last) adjudication judgment if one exists, otherwise the review
label when all reviewers agree; items whose reviewers still disagree are *unresolved* and items
nobody reviewed are *unreviewed*; neither enters the adjudicated valid share.
"""

from __future__ import annotations

import csv
import io
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from labeling.agreement import BinaryAgreement, binary_agreement, cohens_kappa_from_labels

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

Stage = Literal["review", "adjudication"]
_STAGES: tuple[str, ...] = ("review", "adjudication")
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
class AuditItem:
    """One audited task and the cell it was sampled from."""

    task_id: str
    intent: str | None = None
    scope: str | None = None
    template_id: str | None = None


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
        if self.stage not in _STAGES:
            raise ValueError(f"stage must be one of {_STAGES}, got {self.stage!r}")
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


def _clean(x: float | None) -> float | None:
    """JSON has no NaN; undefined statistics become null."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return None
    return float(x)


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

    # ---- exports --------------------------------------------------------------------------

    def to_json_dict(self) -> dict[str, Any]:
        """Plain, JSON-serialisable dict (NaN -> None)."""
        ag = self.agreement
        kappa = ag.cohens_kappa if ag else None
        table = None
        if ag:
            (a, b), (c, d) = ag.table
            table = {
                "both_valid": a, "a_valid_b_invalid": b, "a_invalid_b_valid": c, "both_invalid": d,
            }
        return {
            "n_items": self.n_items,
            "n_candidates": self.n_candidates,
            "n_total_tasks": self.n_total_tasks,
            "candidate_rate": self.candidate_rate,
            "audit_rate": self.audit_rate,
            "n_unique_templates": self.n_unique_templates,
            "n_without_template": self.n_without_template,
            "annotators": list(self.annotators),
            "annotator_pair": list(self.pair) if self.pair else None,
            "n_rated_by_pair": ag.n if ag else 0,
            "n_agree": ag.n_agree if ag else 0,
            "agreement_table": table,
            "raw_agreement": _clean(ag.raw_agreement) if ag else None,
            "expected_agreement": _clean(ag.expected_agreement) if ag else None,
            "cohens_kappa": _clean(kappa.kappa) if kappa else None,
            "cohens_kappa_ci": [_clean(kappa.ci_low), _clean(kappa.ci_high)] if kappa else None,
            "cohens_kappa_ase": _clean(kappa.ase) if kappa else None,
            "pabak": _clean(ag.pabak) if ag else None,
            "gwet_ac1": _clean(ag.gwet_ac1) if ag else None,
            "prevalence_index": _clean(ag.prevalence_index) if ag else None,
            "bias_index": _clean(ag.bias_index) if ag else None,
            "positive_agreement": _clean(ag.positive_agreement) if ag else None,
            "negative_agreement": _clean(ag.negative_agreement) if ag else None,
            "kappa_paradox_note": self.kappa_paradox_note,
            "valid_rate_adjudicated": self.valid_rate_adjudicated,
            "n_valid_adjudicated": self.n_valid_adjudicated,
            "n_resolved": self.n_resolved,
            "n_adjudicated": self.n_adjudicated,
            "n_unresolved": self.n_unresolved,
            "n_unreviewed": self.n_unreviewed,
            "valid_rate_by_annotator": self.valid_rate_by_annotator,
            "valid_count_by_annotator": {
                name: {"valid": rc.count, "total": rc.total}
                for name, rc in self.valid_count_by_annotator.items()
            },
            "reason_counts": dict(self.reason_counts),
            "by_stratum": [
                {
                    "intent": s.intent,
                    "scope": s.scope,
                    "n_items": s.n_items,
                    "n_both_rated": s.n_both_rated,
                    "n_agree": s.n_agree,
                    "raw_agreement": _clean(s.raw_agreement),
                    "cohens_kappa": _clean(s.cohens_kappa),
                    "pabak": _clean(s.pabak),
                    "n_final": s.n_final,
                    "n_final_valid": s.n_final_valid,
                    "valid_rate_final": s.valid_rate_final,
                }
                for s in self.by_stratum
            ],
            "after_adjudication": [
                {
                    "annotator": r.annotator,
                    "n": r.n,
                    "n_agree": r.n_agree,
                    "n_overridden": r.n_overridden,
                    "raw_agreement": _clean(r.raw_agreement),
                    "cohens_kappa": _clean(r.cohens_kappa),
                }
                for r in self.after_adjudication
            ],
        }

    def _csv_rows(self) -> list[tuple[str, float | None, str]]:
        def frac(rc: RateCount) -> str:
            return f"{rc.count}/{rc.total}"

        rows: list[tuple[str, float | None, str]] = []
        if self.n_candidates is not None and self.n_total_tasks is not None:
            rows.append(("candidate_tasks", self.candidate_rate,
                         f"{self.n_candidates}/{self.n_total_tasks}"))
        if self.n_candidates is not None:
            rows.append(("audited_sample", self.audit_rate, f"{self.n_items}/{self.n_candidates}"))
        rows.append(("n_items", None, str(self.n_items)))
        rows.append(("unique_templates", None, str(self.n_unique_templates)))
        rows.append(("valid_adjudicated", self.valid_rate_adjudicated,
                     f"{self.n_valid_adjudicated}/{self.n_resolved}"))
        rows.append(("unresolved", None, str(self.n_unresolved)))
        rows.append(("unreviewed", None, str(self.n_unreviewed)))
        for name, rc in self.valid_count_by_annotator.items():
            rows.append((f"valid_annotator:{name}", rc.rate, frac(rc)))
        ag = self.agreement
        if ag is not None:
            rows.append(("raw_agreement", ag.raw_agreement, f"{ag.n_agree}/{ag.n}"))
            k = ag.cohens_kappa
            for metric, value in (
                ("cohens_kappa", k.kappa), ("cohens_kappa_ci_low", k.ci_low),
                ("cohens_kappa_ci_high", k.ci_high), ("cohens_kappa_ase", k.ase),
                ("pabak", ag.pabak), ("gwet_ac1", ag.gwet_ac1),
                ("prevalence_index", ag.prevalence_index), ("bias_index", ag.bias_index),
                ("positive_agreement", ag.positive_agreement),
                ("negative_agreement", ag.negative_agreement),
                ("expected_agreement", ag.expected_agreement),
            ):
                rows.append((metric, _clean(value), ""))
        for reason, count in self.reason_counts.items():
            rows.append((f"reason:{reason}", None, str(count)))
        for r in self.after_adjudication:
            rows.append((f"after_adjudication:{r.annotator}:raw_agreement", _clean(r.raw_agreement),
                         f"{r.n_agree}/{r.n}"))
            rows.append((f"after_adjudication:{r.annotator}:cohens_kappa", _clean(r.cohens_kappa),
                         ""))
        for s in self.by_stratum:
            cell = f"stratum:{_cell_name(s.intent)}:{_cell_name(s.scope)}"
            rows.append((f"{cell}:n_items", None, str(s.n_items)))
            rows.append((f"{cell}:raw_agreement", _clean(s.raw_agreement),
                         f"{s.n_agree}/{s.n_both_rated}"))
            rows.append((f"{cell}:cohens_kappa", _clean(s.cohens_kappa), ""))
            rows.append((f"{cell}:pabak", _clean(s.pabak), ""))
            rows.append((f"{cell}:valid_final", s.valid_rate_final,
                         f"{s.n_final_valid}/{s.n_final}"))
        return rows

    def to_csv(self) -> str:
        """Long format: one ``metric,value,count`` row per number.

        ``value`` is the full-precision share or coefficient (empty when undefined or when the
        metric is a plain count); ``count`` is ``k/n`` behind a share, or a bare count.
        """
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(["metric", "value", "count"])
        for metric, value, count in self._csv_rows():
            writer.writerow([metric, "" if value is None else repr(float(value)), count])
        return buf.getvalue()

    def _summary_rows(self) -> list[tuple[str, str, str]]:
        """(metric, value, count) display rows shared by Markdown and LaTeX; text unescaped."""
        rows: list[tuple[str, str, str]] = []
        if self.n_candidates is not None and self.n_total_tasks is not None:
            rows.append(("Candidate tasks", _pct(self.candidate_rate),
                         _ratio(self.n_candidates, self.n_total_tasks)))
        if self.n_candidates is not None:
            rows.append(("Audited sample", _pct(self.audit_rate),
                         _ratio(self.n_items, self.n_candidates)))
        else:
            rows.append(("Audited sample", _DASH, f"{self.n_items:,}"))
        rows.append(("Structurally unique templates", _DASH, f"{self.n_unique_templates:,}"))
        rows.append(("Adjudicated valid tasks", _pct(self.valid_rate_adjudicated),
                     _ratio(self.n_valid_adjudicated, self.n_resolved)))
        if self.n_unresolved:
            rows.append(("Unresolved disagreements", _DASH, f"{self.n_unresolved:,}"))
        if self.n_unreviewed:
            rows.append(("Unreviewed tasks", _DASH, f"{self.n_unreviewed:,}"))
        for name, rc in self.valid_count_by_annotator.items():
            rows.append((f"{name} valid labels", _pct(rc.rate), _ratio(rc.count, rc.total)))
        ag = self.agreement
        if ag is not None:
            k = ag.cohens_kappa
            rows.append(("Raw annotator agreement", _pct(ag.raw_agreement),
                         _ratio(ag.n_agree, ag.n)))
            rows.append((_KAPPA, _num(k.kappa), _DASH))
            rows.append((_KAPPA + " 95% CI", f"[{_num(k.ci_low)}, {_num(k.ci_high)}]", _DASH))
            rows.append(("PABAK", _num(ag.pabak), _DASH))
            rows.append(("Gwet's AC1", _num(ag.gwet_ac1), _DASH))
            rows.append(("Prevalence index", _num(ag.prevalence_index, 3), _DASH))
            rows.append(("Bias index", _num(ag.bias_index, 3), _DASH))
        return rows

    def _stratum_rows(self) -> list[list[str]]:
        out = []
        for s in self.by_stratum:
            out.append([
                s.intent or _DASH, s.scope or _DASH, str(s.n_items), str(s.n_both_rated),
                str(s.n_agree), _pct(s.raw_agreement), _num(s.cohens_kappa), _num(s.pabak),
                _ratio(s.n_final_valid, s.n_final),
            ])
        both = sum(s.n_both_rated for s in self.by_stratum)
        agree = sum(s.n_agree for s in self.by_stratum)
        ag = self.agreement
        out.append([
            "Total", "", str(sum(s.n_items for s in self.by_stratum)), str(both), str(agree),
            _pct(agree / both if both else None),
            _num(ag.cohens_kappa.kappa if ag else None), _num(ag.pabak if ag else None),
            _ratio(self.n_valid_adjudicated, self.n_resolved),
        ])
        return out

    def _after_rows(self) -> list[list[str]]:
        out = []
        if self.agreement is not None and self.pair is not None:
            out.append([
                f"{self.pair[0]} vs {self.pair[1]} (before adjudication)",
                _pct(self.agreement.raw_agreement), _num(self.agreement.cohens_kappa.kappa),
                _ratio(self.agreement.n_agree, self.agreement.n),
            ])
        for r in self.after_adjudication:
            out.append([
                f"{r.annotator} vs final label", _pct(r.raw_agreement), _num(r.cohens_kappa),
                _ratio(r.n_agree, r.n),
            ])
        return out

    def to_markdown(self) -> str:
        """Table-11-like summary, agreement by intent x scope, before/after, reason codes."""
        md = _md_escape
        lines = ["| Metric | Value | Count |", "| --- | --- | --- |"]
        lines += [f"| {md(m)} | {md(v)} | {md(c)} |" for m, v, c in self._summary_rows()]
        if self.kappa_paradox_note:
            lines += ["", f"> {self.kappa_paradox_note}"]
        lines += ["", "**Agreement by intent and scope**", "",
                  "| " + " | ".join(_STRATUM_HEADER) + " |",
                  "| " + " | ".join("---" for _ in _STRATUM_HEADER) + " |"]
        lines += ["| " + " | ".join(md(c) for c in row) + " |" for row in self._stratum_rows()]
        after = self._after_rows()
        if after:
            lines += ["", "**Agreement before and after adjudication**", "",
                      "| " + " | ".join(_AFTER_HEADER) + " |",
                      "| " + " | ".join("---" for _ in _AFTER_HEADER) + " |"]
            lines += ["| " + " | ".join(md(c) for c in row) + " |" for row in after]
        if self.reason_counts:
            lines += ["", "**Reason codes**", "", "| Reason | Tasks |", "| --- | --- |"]
            lines += [f"| {md(r)} | {c} |" for r, c in self.reason_counts.items()]
        return "\n".join(lines) + "\n"

    def to_latex(self) -> str:
        """booktabs tabulars (summary, by stratum, before/after); text cells LaTeX-escaped."""
        def row(cells: Iterable[str]) -> str:
            return " & ".join(cells) + r" \\"

        def tex(cell: str) -> str:
            # The kappa label is the one intentional piece of markup; everything else is text.
            if cell.startswith(_KAPPA):
                return r"Cohen's $\kappa$" + _tex_escape(cell[len(_KAPPA):])
            return _tex_escape(cell).replace(_DASH, "--")

        parts = [r"\begin{tabular}{lrr}", r"\toprule", row(["Metric", "Value", "Count"]),
                 r"\midrule"]
        parts += [row(tex(c) for c in r) for r in self._summary_rows()]
        parts += [r"\bottomrule", r"\end{tabular}", ""]
        parts += [r"\begin{tabular}{ll" + "r" * (len(_STRATUM_HEADER) - 2) + "}", r"\toprule",
                  row(tex(h) for h in _STRATUM_HEADER), r"\midrule"]
        strata = self._stratum_rows()
        parts += [row(tex(c) for c in r) for r in strata[:-1]]
        parts += [r"\midrule", row(tex(c) for c in strata[-1]), r"\bottomrule", r"\end{tabular}"]
        after = self._after_rows()
        if after:
            parts += ["", r"\begin{tabular}{lrrr}", r"\toprule",
                      row(tex(h) for h in _AFTER_HEADER), r"\midrule"]
            parts += [row(tex(c) for c in r) for r in after]
            parts += [r"\bottomrule", r"\end{tabular}"]
        return "\n".join(parts) + "\n"


# ---- formatting helpers -------------------------------------------------------------------

_DASH = "–"
_KAPPA = "Cohen's κ"
_STRATUM_HEADER = ("Intent", "Scope", "Items", "Rated by both", "Agree", "Raw agreement",
                   _KAPPA, "PABAK", "Valid (final)")
_AFTER_HEADER = ("Comparison", "Raw agreement", _KAPPA, "Count")

_TEX_SPECIAL = {
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
    "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
}


def _tex_escape(text: str) -> str:
    # One pass over characters so the backslashes we insert are never escaped again.
    return "".join(_TEX_SPECIAL.get(ch, ch) for ch in text)


def _md_escape(text: str) -> str:
    return text.replace("|", r"\|")


def _pct(x: float | None) -> str:
    return _DASH if x is None or math.isnan(x) else f"{100 * x:.1f}%"


def _num(x: float | None, digits: int = 2) -> str:
    return _DASH if x is None or math.isnan(x) else f"{x:.{digits}f}"


def _ratio(k: int, n: int) -> str:
    return f"{k:,} / {n:,}"


def _cell_name(x: str | None) -> str:
    return "(none)" if x is None else x


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
