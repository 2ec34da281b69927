"""Validity-audit report: EHR-Complex Table 11 reproduced, and every export read back."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest

from analysis.audit_report import to_csv, to_json_dict, to_latex, to_markdown
from labeling.audit import (
    AuditItem,
    AuditReport,
    Judgment,
    build_audit_report,
    parse_valid,
)

INTENTS = ["Demographics", "Vitals", "Medications", "Cost", "Labs", "Diagnoses"]
SCOPES = ["patient", "population"]


def table11_records() -> tuple[list[AuditItem], list[Judgment]]:
    """500 audited tasks: 458 both valid, 17 A-valid/B-invalid, 18 A-invalid/B-valid, 7 both
    invalid. Adjudication settles the 35 disagreements: the 17 as valid and the 18 as invalid,
    so 458 + 17 = 475 tasks end up valid (95.0%). 390 distinct templates."""
    items = [
        AuditItem(
            task_id=f"task_{i:03d}",
            intent=INTENTS[i % 6],
            scope=SCOPES[(i // 6) % 2],
            template_id=f"tpl_{i % 390}",
        )
        for i in range(500)
    ]
    judgments: list[Judgment] = []
    for i, it in enumerate(items):
        if i < 458:
            a, b = True, True
        elif i < 475:
            a, b = True, False
        elif i < 493:
            a, b = False, True
        else:
            a, b = False, False
        judgments.append(Judgment(it.task_id, "annotator_1", a,
                                  reason=None if a else "temporal wording"))
        judgments.append(Judgment(it.task_id, "annotator_2", b,
                                  reason=None if b else "cohort_unit"))
        if a != b:
            judgments.append(Judgment(it.task_id, "lead", valid=i < 475, stage="adjudication",
                                      reason=None if i < 475 else "code granularity"))
    return items, judgments


@pytest.fixture(scope="module")
def report() -> AuditReport:
    items, judgments = table11_records()
    return build_audit_report(items, judgments, n_candidates=954, n_total_tasks=3915)


def test_table_11_numbers(report: AuditReport) -> None:
    assert report.n_items == 500
    assert report.n_unique_templates == 390
    assert report.candidate_rate == pytest.approx(954 / 3915)
    assert round(100 * report.candidate_rate, 1) == 24.4  # type: ignore[operator]
    assert round(100 * report.audit_rate, 1) == 52.4  # type: ignore[operator]
    ag = report.agreement
    assert ag is not None
    assert report.pair == ("annotator_1", "annotator_2")
    assert ag.n == 500 and ag.n_agree == 465
    assert ag.raw_agreement == pytest.approx(0.930)
    assert round(ag.cohens_kappa.kappa, 2) == 0.25
    assert ag.pabak == pytest.approx(0.86)
    assert report.valid_rate_adjudicated == pytest.approx(0.950)
    assert report.n_valid_adjudicated == 475 and report.n_resolved == 500
    assert report.n_adjudicated == 35 and report.n_unresolved == 0
    assert report.valid_rate_by_annotator == {
        "annotator_1": pytest.approx(0.950), "annotator_2": pytest.approx(0.952),
    }
    assert "lead" not in report.valid_rate_by_annotator
    assert report.kappa_paradox_note is not None


def test_reason_counts_count_tasks(report: AuditReport) -> None:
    # 25 tasks where annotator 1 said invalid, 24 for annotator 2, 18 adjudicated invalid.
    assert report.reason_counts == {"temporal wording": 25, "cohort_unit": 24,
                                    "code granularity": 18}


def test_after_adjudication(report: AuditReport) -> None:
    after = {r.annotator: r for r in report.after_adjudication}
    # Adjudication sided with annotator 1 every time in this construction.
    assert after["annotator_1"].raw_agreement == pytest.approx(1.0)
    assert after["annotator_1"].n_overridden == 0
    assert after["annotator_2"].n_agree == 465 and after["annotator_2"].n_overridden == 35


def test_by_stratum_rows_sum_to_total(report: AuditReport) -> None:
    rows = report.by_stratum
    assert len(rows) == 12
    assert sum(r.n_items for r in rows) == 500
    assert sum(r.n_both_rated for r in rows) == 500
    assert sum(r.n_agree for r in rows) == 465
    assert sum(r.n_final_valid for r in rows) == 475
    assert sum(r.n_final for r in rows) == 500


def test_json_round_trip(report: AuditReport) -> None:
    d = json.loads(json.dumps(to_json_dict(report)))
    for key in ("n_items", "raw_agreement", "cohens_kappa", "cohens_kappa_ci", "pabak",
                "gwet_ac1", "prevalence_index", "bias_index", "valid_rate_adjudicated",
                "valid_rate_by_annotator"):
        assert key in d
    assert d["n_items"] == 500
    assert d["raw_agreement"] == report.agreement.raw_agreement  # type: ignore[union-attr]
    assert d["cohens_kappa"] == report.agreement.cohens_kappa.kappa  # type: ignore[union-attr]
    lo, hi = d["cohens_kappa_ci"]
    assert lo < d["cohens_kappa"] < hi
    assert d["pabak"] == pytest.approx(0.86)
    assert d["prevalence_index"] == pytest.approx(0.902)
    assert d["bias_index"] == pytest.approx(0.002)
    assert d["valid_rate_adjudicated"] == 0.95
    assert d["valid_rate_by_annotator"] == {"annotator_1": 0.95, "annotator_2": 0.952}
    assert d["agreement_table"] == {"both_valid": 458, "a_valid_b_invalid": 17,
                                    "a_invalid_b_valid": 18, "both_invalid": 7}
    assert sum(r["n_items"] for r in d["by_stratum"]) == 500


def test_csv_round_trip(report: AuditReport) -> None:
    rows = list(csv.DictReader(io.StringIO(to_csv(report))))
    assert list(rows[0]) == ["metric", "value", "count"]
    by = {r["metric"]: r for r in rows}
    assert len(by) == len(rows)  # metric names are unique
    assert float(by["raw_agreement"]["value"]) == report.agreement.raw_agreement  # type: ignore[union-attr]
    assert by["raw_agreement"]["count"] == "465/500"
    assert float(by["cohens_kappa"]["value"]) == report.agreement.cohens_kappa.kappa  # type: ignore[union-attr]
    assert float(by["pabak"]["value"]) == pytest.approx(0.86)
    assert float(by["valid_adjudicated"]["value"]) == 0.95
    assert by["valid_adjudicated"]["count"] == "475/500"
    assert by["valid_annotator:annotator_2"]["count"] == "476/500"
    assert by["candidate_tasks"]["count"] == "954/3915"
    assert by["unique_templates"]["count"] == "390"
    stratum_items = [int(r["count"]) for r in rows
                     if r["metric"].startswith("stratum:") and r["metric"].endswith(":n_items")]
    assert sum(stratum_items) == 500


def _md_tables(md: str) -> list[list[list[str]]]:
    tables: list[list[list[str]]] = []
    current: list[list[str]] = []
    for line in md.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(set(c) <= {"-"} for c in cells):
                current.append(cells)
        elif current:
            tables.append(current)
            current = []
    if current:
        tables.append(current)
    return tables


def _pct(cell: str) -> float:
    return float(cell.rstrip("%").replace("\\", "")) / 100


def _ratio(cell: str) -> tuple[int, int]:
    k, n = cell.replace(",", "").replace("{}", "").split("/")
    return int(k), int(n)


def _check_summary(cells: dict[str, list[str]]) -> None:
    assert _ratio(cells["Candidate tasks"][1]) == (954, 3915)
    assert cells["Candidate tasks"][0] == "24.4%"
    assert _ratio(cells["Audited sample"][1]) == (500, 954)
    assert cells["Structurally unique templates"][1] == "390"
    assert _pct(cells["Adjudicated valid tasks"][0]) == pytest.approx(0.950)
    assert _ratio(cells["Adjudicated valid tasks"][1]) == (475, 500)
    assert _pct(cells["annotator_1 valid labels"][0]) == pytest.approx(0.950)
    assert _pct(cells["annotator_2 valid labels"][0]) == pytest.approx(0.952)
    assert _ratio(cells["annotator_2 valid labels"][1]) == (476, 500)
    assert _pct(cells["Raw annotator agreement"][0]) == pytest.approx(0.930)
    assert _ratio(cells["Raw annotator agreement"][1]) == (465, 500)
    assert float(cells["Cohen's κ"][0]) == 0.25
    assert float(cells["PABAK"][0]) == 0.86


def test_markdown_round_trip(report: AuditReport) -> None:
    tables = _md_tables(to_markdown(report))
    summary, strata = tables[0], tables[1]
    assert summary[0] == ["Metric", "Value", "Count"]
    _check_summary({row[0]: row[1:] for row in summary[1:]})
    header, body = strata[0], strata[1:]
    assert header[:3] == ["Intent", "Scope", "Items"]
    cells = [row for row in body if row[0] != "Total"]
    total = next(row for row in body if row[0] == "Total")
    assert len(cells) == 12
    assert sum(int(r[2]) for r in cells) == int(total[2]) == 500
    assert sum(int(r[4]) for r in cells) == int(total[4]) == 465
    assert sum(_ratio(r[8])[0] for r in cells) == _ratio(total[8])[0] == 475
    assert report.kappa_paradox_note is not None
    assert report.kappa_paradox_note in to_markdown(report)


def _latex_tables(tex: str) -> list[list[list[str]]]:
    tables = []
    for block in re.findall(r"\\midrule(.*?)\\bottomrule", tex, flags=re.S):
        rows = []
        for line in block.splitlines():
            line = line.strip()
            if not line or line == r"\midrule":
                continue
            assert line.endswith(r"\\")
            rows.append([c.strip() for c in line[:-2].split(" & ")])
        tables.append(rows)
    return tables


def test_latex_round_trip(report: AuditReport) -> None:
    tex = to_latex(report)
    assert tex.count(r"\toprule") == tex.count(r"\bottomrule") == 3
    assert r"\midrule" in tex
    assert "95.0\\%" in tex and "annotator\\_1" in tex and r"Cohen's $\kappa$" in tex
    summary, strata = _latex_tables(tex)[:2]
    cells = {row[0].replace("\\_", "_").replace(r"Cohen's $\kappa$", "Cohen's κ"): row[1:]
             for row in summary}
    _check_summary({k: [v.replace("\\%", "%") for v in vals] for k, vals in cells.items()})
    body = [row for row in strata if row[0] != "Total"]
    total = next(row for row in strata if row[0] == "Total")
    assert sum(int(r[2]) for r in body) == int(total[2]) == 500


def test_latex_escapes_special_characters() -> None:
    items = [AuditItem("t1", "Labs & Vitals", "50%_cut", "x"), AuditItem("t2", "Labs", None)]
    judgments = [Judgment("t1", "ann_#1", True), Judgment("t1", "b{2}", True),
                 Judgment("t2", "ann_#1", False), Judgment("t2", "b{2}", True)]
    tex = to_latex(build_audit_report(items, judgments))
    assert r"Labs \& Vitals" in tex and r"50\%\_cut" in tex
    assert r"ann\_\#1" in tex and r"b\{2\}" in tex
    assert "&  Vitals" not in tex


def test_unresolved_and_unreviewed_items() -> None:
    items = [AuditItem(f"t{i}") for i in range(4)]
    judgments = [
        Judgment("t0", "a", True), Judgment("t0", "b", True),     # agreed valid
        Judgment("t1", "a", True), Judgment("t1", "b", False),    # still in disagreement
        Judgment("t2", "a", False), Judgment("t2", "b", True),
        Judgment("t2", "c", False, stage="adjudication"),          # adjudicated invalid
    ]
    r = build_audit_report(items, judgments)
    assert r.n_unresolved == 1 and r.n_unreviewed == 1
    assert r.n_resolved == 2 and r.n_valid_adjudicated == 1
    assert r.valid_rate_adjudicated == pytest.approx(0.5)
    assert r.final_labels == {"t0": True, "t1": None, "t2": False, "t3": None}
    assert r.annotators == ("a", "b")
    d = to_json_dict(r)
    assert d["n_unresolved"] == 1 and d["candidate_rate"] is None
    md = to_markdown(r)
    assert "Unresolved disagreements" in md and "Unreviewed tasks" in md


def test_later_judgment_wins_and_chosen_pair() -> None:
    items = [AuditItem("t1"), AuditItem("t2")]
    judgments = [
        Judgment("t1", "zed", False), Judgment("t1", "zed", True),
        Judgment("t1", "amy", True), Judgment("t2", "amy", True),
        Judgment("t2", "zed", True), Judgment("t1", "bob", False),
    ]
    r = build_audit_report(items, judgments, pair=("amy", "zed"))
    assert r.agreement is not None and r.agreement.n == 2 and r.agreement.n_agree == 2
    assert r.valid_count_by_annotator["zed"].count == 2
    default = build_audit_report(items, judgments)
    assert default.pair == ("amy", "bob")
    assert default.agreement is not None and default.agreement.n == 1
    with pytest.raises(ValueError):
        build_audit_report(items, judgments, pair=("amy", "nobody"))


def test_single_annotator_has_no_agreement() -> None:
    r = build_audit_report([AuditItem("t1")], [Judgment("t1", "solo", True)])
    assert r.agreement is None and r.pair is None
    d = to_json_dict(r)
    assert d["cohens_kappa"] is None and d["valid_rate_by_annotator"] == {"solo": 1.0}
    assert to_markdown(r) and to_latex(r) and to_csv(r)


def test_all_valid_gives_null_kappa_in_json() -> None:
    items = [AuditItem(f"t{i}") for i in range(3)]
    judgments = [Judgment(f"t{i}", who, True) for i in range(3) for who in ("a", "b")]
    d = json.loads(json.dumps(report_dict := to_json_dict(build_audit_report(items, judgments))))
    assert d["cohens_kappa"] is None and d["cohens_kappa_ci"] == [None, None]
    assert report_dict["raw_agreement"] == 1.0


def test_bad_records_rejected() -> None:
    with pytest.raises(ValueError, match="unknown task"):
        build_audit_report([AuditItem("t1")], [Judgment("t9", "a", True)])
    with pytest.raises(ValueError, match="twice"):
        build_audit_report([AuditItem("t1"), AuditItem("t1")], [])
    with pytest.raises(ValueError):
        Judgment("t1", "a", True, stage="final")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Judgment("t1", "a", "yes")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1", True), ("0", False), ("true", True), (" FALSE ", False), ("Valid", True),
     ("INVALID\n", False)],
)
def test_parse_valid(text: str, expected: bool) -> None:
    assert parse_valid(text) is expected


@pytest.mark.parametrize("text", ["", "yes", "2", "valid-ish", "nan"])
def test_parse_valid_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="1/0, true/false or valid/invalid"):
        parse_valid(text)
