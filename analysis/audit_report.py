"""Render a validity-audit report: JSON-ready dict, long-format CSV, Markdown and LaTeX.

The numbers come from :func:`labeling.audit.report.build_audit_report`; this module only
formats them, with the analysis exports' one Markdown writer and LaTeX escaper. Markdown,
LaTeX and the page share one set of display rows (:func:`summary_rows`) so they can never
disagree. Undefined statistics print as an en dash (``–``; ``--`` in LaTeX) and
are ``null``/empty in JSON and CSV.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import pandas as pd

from analysis.export import latex_escape
from analysis.export import to_markdown as frame_to_markdown
from faillab_core.textsafe import csv_cell, csv_text

if TYPE_CHECKING:
    from labeling.audit.report import AuditReport, RateCount

__all__ = [
    "after_table",
    "stratum_table",
    "summary_rows",
    "summary_table",
    "to_csv",
    "to_json_dict",
    "to_latex",
    "to_markdown",
]

_DASH = "–"
_KAPPA = "Cohen's κ"
STRATUM_HEADER = ("Intent", "Scope", "Items", "Rated by both", "Agree", "Raw agreement",
                   _KAPPA, "PABAK", "Valid (final)")
AFTER_HEADER = ("Comparison", "Raw agreement", _KAPPA, "Count")


# ---- formatting helpers -------------------------------------------------------------------


def _clean(x: float | None) -> float | None:
    """JSON has no NaN; undefined statistics become null."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return None
    return float(x)


def _pct(x: float | None) -> str:
    return _DASH if x is None or math.isnan(x) else f"{100 * x:.1f}%"


def _num(x: float | None, digits: int = 2) -> str:
    return _DASH if x is None or math.isnan(x) else f"{x:.{digits}f}"


def _ratio(k: int, n: int) -> str:
    return f"{k:,} / {n:,}"


def _cell_name(x: str | None) -> str:
    return "(none)" if x is None else x


# ---- JSON -----------------------------------------------------------------------------------


def to_json_dict(report: AuditReport) -> dict[str, Any]:
    """Plain, JSON-serialisable dict (NaN -> None)."""
    ag = report.agreement
    kappa = ag.cohens_kappa if ag else None
    table = None
    if ag:
        (a, b), (c, d) = ag.table
        table = {
            "both_valid": a, "a_valid_b_invalid": b, "a_invalid_b_valid": c, "both_invalid": d,
        }
    return {
        "n_items": report.n_items,
        "n_candidates": report.n_candidates,
        "n_total_tasks": report.n_total_tasks,
        "candidate_rate": report.candidate_rate,
        "audit_rate": report.audit_rate,
        # null, not 0, when no item has a template: the count is unknown.
        "n_unique_templates": (None if report.n_items
                               and report.n_without_template == report.n_items
                               else report.n_unique_templates),
        "n_without_template": report.n_without_template,
        "annotators": list(report.annotators),
        "annotator_pair": list(report.pair) if report.pair else None,
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
        "kappa_paradox_note": report.kappa_paradox_note,
        "valid_rate_adjudicated": report.valid_rate_adjudicated,
        "n_valid_adjudicated": report.n_valid_adjudicated,
        "n_resolved": report.n_resolved,
        "n_adjudicated": report.n_adjudicated,
        "n_unresolved": report.n_unresolved,
        "n_unreviewed": report.n_unreviewed,
        "valid_rate_by_annotator": report.valid_rate_by_annotator,
        "valid_count_by_annotator": {
            name: {"valid": rc.count, "total": rc.total}
            for name, rc in report.valid_count_by_annotator.items()
        },
        "reason_counts": dict(report.reason_counts),
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
            for s in report.by_stratum
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
            for r in report.after_adjudication
        ],
    }


# ---- CSV ------------------------------------------------------------------------------------


def _csv_rows(report: AuditReport) -> list[tuple[str, float | None, str]]:
    def frac(rc: RateCount) -> str:
        return f"{rc.count}/{rc.total}"

    rows: list[tuple[str, float | None, str]] = []
    if report.n_candidates is not None and report.n_total_tasks is not None:
        rows.append(("candidate_tasks", report.candidate_rate,
                     f"{report.n_candidates}/{report.n_total_tasks}"))
    if report.n_candidates is not None:
        rows.append(("audited_sample", report.audit_rate,
                     f"{report.n_items}/{report.n_candidates}"))
    rows.append(("n_items", None, str(report.n_items)))
    rows.append(("unique_templates", None, _templates_count(report, dash="")))
    rows.append(("items_without_template", None, str(report.n_without_template)))
    rows.append(("valid_adjudicated", report.valid_rate_adjudicated,
                 f"{report.n_valid_adjudicated}/{report.n_resolved}"))
    rows.append(("unresolved", None, str(report.n_unresolved)))
    rows.append(("unreviewed", None, str(report.n_unreviewed)))
    for name, rc in report.valid_count_by_annotator.items():
        rows.append((f"valid_annotator:{name}", rc.rate, frac(rc)))
    ag = report.agreement
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
    for reason, count in report.reason_counts.items():
        rows.append((f"reason:{reason}", None, str(count)))
    for r in report.after_adjudication:
        rows.append((f"after_adjudication:{r.annotator}:raw_agreement", _clean(r.raw_agreement),
                     f"{r.n_agree}/{r.n}"))
        rows.append((f"after_adjudication:{r.annotator}:cohens_kappa", _clean(r.cohens_kappa),
                     ""))
    for s in report.by_stratum:
        cell = f"stratum:{_cell_name(s.intent)}:{_cell_name(s.scope)}"
        rows.append((f"{cell}:n_items", None, str(s.n_items)))
        rows.append((f"{cell}:raw_agreement", _clean(s.raw_agreement),
                     f"{s.n_agree}/{s.n_both_rated}"))
        rows.append((f"{cell}:cohens_kappa", _clean(s.cohens_kappa), ""))
        rows.append((f"{cell}:pabak", _clean(s.pabak), ""))
        rows.append((f"{cell}:valid_final", s.valid_rate_final,
                     f"{s.n_final_valid}/{s.n_final}"))
    return rows


def to_csv(report: AuditReport) -> str:
    """Long format: one ``metric,value,count`` row per number.

    ``value`` is the full-precision share or coefficient (empty when undefined or when the
    metric is a plain count); ``count`` is ``k/n`` behind a share, or a bare count.
    """
    # The value is a number (a negative kappa stays a number); only text is neutralised.
    rows = [[csv_cell(metric), "" if value is None else repr(float(value)), csv_cell(count)]
            for metric, value, count in _csv_rows(report)]
    return csv_text([["metric", "value", "count"], *rows])


# ---- display rows shared by Markdown and LaTeX ---------------------------------------------


def _templates_count(report: AuditReport, dash: str = _DASH) -> str:
    """Distinct templates, or a dash when no item has a template (unknown is not 0); items
    without one are named beside a partial count."""
    if report.n_items and report.n_without_template == report.n_items:
        return dash
    text = f"{report.n_unique_templates:,}"
    if report.n_without_template and dash:
        text += f" (+{report.n_without_template:,} items without a template)"
    return text


def summary_rows(report: AuditReport) -> list[tuple[str, str, str]]:
    """(metric, value, count) display rows shared by Markdown and LaTeX; text unescaped."""
    rows: list[tuple[str, str, str]] = []
    if report.n_candidates is not None and report.n_total_tasks is not None:
        rows.append(("Candidate tasks", _pct(report.candidate_rate),
                     _ratio(report.n_candidates, report.n_total_tasks)))
    if report.n_candidates is not None:
        rows.append(("Audited sample", _pct(report.audit_rate),
                     _ratio(report.n_items, report.n_candidates)))
    else:
        rows.append(("Audited sample", _DASH, f"{report.n_items:,}"))
    rows.append(("Structurally unique templates", _DASH, _templates_count(report)))
    # With disagreements open the rate covers settled tasks only: say so in the label.
    settled = (f" (settled so far; {report.n_unresolved:,} open)" if report.n_unresolved
               else "")
    rows.append((f"Adjudicated valid tasks{settled}", _pct(report.valid_rate_adjudicated),
                 _ratio(report.n_valid_adjudicated, report.n_resolved)))
    if report.n_unresolved:
        rows.append(("Unresolved disagreements", _DASH, f"{report.n_unresolved:,}"))
    if report.n_unreviewed:
        rows.append(("Unreviewed tasks", _DASH, f"{report.n_unreviewed:,}"))
    for name, rc in report.valid_count_by_annotator.items():
        rows.append((f"{name} valid labels", _pct(rc.rate), _ratio(rc.count, rc.total)))
    ag = report.agreement
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


def stratum_rows(report: AuditReport) -> list[list[str]]:
    out = []
    for s in report.by_stratum:
        out.append([
            s.intent or _DASH, s.scope or _DASH, str(s.n_items), str(s.n_both_rated),
            str(s.n_agree), _pct(s.raw_agreement), _num(s.cohens_kappa), _num(s.pabak),
            _ratio(s.n_final_valid, s.n_final),
        ])
    both = sum(s.n_both_rated for s in report.by_stratum)
    agree = sum(s.n_agree for s in report.by_stratum)
    ag = report.agreement
    out.append([
        "Total", "", str(sum(s.n_items for s in report.by_stratum)), str(both), str(agree),
        _pct(agree / both if both else None),
        _num(ag.cohens_kappa.kappa if ag else None), _num(ag.pabak if ag else None),
        _ratio(report.n_valid_adjudicated, report.n_resolved),
    ])
    return out


def after_rows(report: AuditReport) -> list[list[str]]:
    out = []
    if report.agreement is not None and report.pair is not None:
        out.append([
            f"{report.pair[0]} vs {report.pair[1]} (before adjudication)",
            _pct(report.agreement.raw_agreement), _num(report.agreement.cohens_kappa.kappa),
            _ratio(report.agreement.n_agree, report.agreement.n),
        ])
    for r in report.after_adjudication:
        out.append([
            f"{r.annotator} vs final label", _pct(r.raw_agreement), _num(r.cohens_kappa),
            _ratio(r.n_agree, r.n),
        ])
    return out


# ---- Markdown -------------------------------------------------------------------------------


def _md_table(rows: list[list[str]], header: tuple[str, ...] | list[str]) -> list[str]:
    # The analysis exports' pipe-table writer; every cell is already formatted text.
    return frame_to_markdown(pd.DataFrame(rows, columns=list(header))).rstrip("\n").split("\n")


def to_markdown(report: AuditReport) -> str:
    """Table-11-like summary, agreement by intent x scope, before/after, reason codes."""
    lines = _md_table([list(r) for r in summary_rows(report)], ["Metric", "Value", "Count"])
    if report.kappa_paradox_note:
        lines += ["", f"> {report.kappa_paradox_note}"]
    lines += ["", "**Agreement by intent and scope**", ""]
    lines += _md_table(stratum_rows(report), STRATUM_HEADER)
    after = after_rows(report)
    if after:
        lines += ["", "**Agreement before and after adjudication**", ""]
        lines += _md_table(after, AFTER_HEADER)
    if report.reason_counts:
        lines += ["", "**Reason codes**", ""]
        lines += _md_table([[r, f"{c:,}"] for r, c in report.reason_counts.items()],
                           ["Reason", "Tasks"])
    return "\n".join(lines) + "\n"


# ---- LaTeX ----------------------------------------------------------------------------------


def _tex_row(cells: Iterable[str]) -> str:
    return " & ".join(cells) + r" \\"


def _tex_cell(cell: str) -> str:
    # The kappa label is the one intentional piece of markup; everything else is text.
    if cell.startswith(_KAPPA):
        return r"Cohen's $\kappa$" + latex_escape(cell[len(_KAPPA):])
    return latex_escape(cell).replace(_DASH, "--")


def to_latex(report: AuditReport) -> str:
    """booktabs tabulars (summary, by stratum, before/after); text cells LaTeX-escaped."""
    row, tex = _tex_row, _tex_cell
    parts = [r"\begin{tabular}{lrr}", r"\toprule", row(["Metric", "Value", "Count"]),
             r"\midrule"]
    parts += [row(tex(c) for c in r) for r in summary_rows(report)]
    parts += [r"\bottomrule", r"\end{tabular}", ""]
    parts += [r"\begin{tabular}{ll" + "r" * (len(STRATUM_HEADER) - 2) + "}", r"\toprule",
              row(tex(h) for h in STRATUM_HEADER), r"\midrule"]
    strata = stratum_rows(report)
    parts += [row(tex(c) for c in r) for r in strata[:-1]]
    parts += [r"\midrule", row(tex(c) for c in strata[-1]), r"\bottomrule", r"\end{tabular}"]
    after = after_rows(report)
    if after:
        parts += ["", r"\begin{tabular}{lrrr}", r"\toprule",
                  row(tex(h) for h in AFTER_HEADER), r"\midrule"]
        parts += [row(tex(c) for c in r) for r in after]
        parts += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(parts) + "\n"


# ---- the same rows for the page ---------------------------------------------------------------


def summary_table(report: AuditReport) -> list[dict[str, str]]:
    """The Table-11-style rows (metric, value, count) exactly as the Markdown/LaTeX exports
    show them, so the page and the downloaded files can never disagree."""
    return [{"metric": m, "value": v, "count": c} for m, v, c in summary_rows(report)]


def stratum_table(report: AuditReport) -> list[dict[str, str]]:
    """Agreement by intent x scope, formatted exactly as in the exports (last row: total)."""
    return [dict(zip(STRATUM_HEADER, row, strict=True)) for row in stratum_rows(report)]


def after_table(report: AuditReport) -> list[dict[str, str]]:
    """Agreement before and after adjudication, formatted exactly as in the exports."""
    return [dict(zip(AFTER_HEADER, row, strict=True)) for row in after_rows(report)]
