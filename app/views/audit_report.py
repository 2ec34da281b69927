"""Validity audit, step 3: the report (Table-11 style summary, strata, reasons, downloads).

Leads and admins only: agreement figures shown mid-audit would tell annotators how their
colleagues judged.
"""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from faillab.app.auth import require_user
from faillab.app.state import get_store
from faillab.app.widgets.audit_item import pick_audit, reason_label
from faillab.app.widgets.safe import escape_markdown, plain
from labeling.audit import (
    KAPPA_PARADOX_EXPLAINED,
    AuditError,
    audit_definition,
    audit_report,
    summary_table,
)

st.title("Validity audit: report")
require_user("lead", "admin")
store = get_store()

audit = pick_audit(store, key="audit_report_audit")

try:
    report = audit_report(store, audit)
    definition = audit_definition(store, audit)
except AuditError as err:
    st.error(escape_markdown(str(err)))
    st.stop()

runs = definition.get("runs") or []
st.caption(f"Pool: tasks unsolved by {len(runs)} run(s); sample of "
           f"{definition.get('sample_size', report.n_items)} with seed "
           f"{definition.get('seed', '–')}, stratified over intent × scope.")

m = st.columns(4)
m[0].metric("Audited tasks", f"{report.n_items:,}")
valid = report.valid_rate_adjudicated
m[1].metric("Valid after adjudication", "–" if valid is None else f"{100 * valid:.1f}%")
ag = report.agreement
m[2].metric("Raw agreement", "–" if ag is None else f"{100 * ag.raw_agreement:.1f}%")
m[3].metric("Open disagreements", f"{report.n_unresolved:,}")

st.subheader("Summary")
st.dataframe(pd.DataFrame(summary_table(report), columns=["metric", "value", "count"]),
             hide_index=True, key="audit_report_summary")
if report.kappa_paradox_note:
    st.info(KAPPA_PARADOX_EXPLAINED)
    plain(report.kappa_paradox_note, caption=True)
else:
    st.caption(KAPPA_PARADOX_EXPLAINED)

data = report.to_json_dict()
st.subheader("By intent and scope")
strata = pd.DataFrame(data["by_stratum"])
if not strata.empty:
    st.dataframe(
        strata, hide_index=True, key="audit_report_strata",
        column_config={
            "raw_agreement": st.column_config.NumberColumn("raw agreement", format="%.3f"),
            "cohens_kappa": st.column_config.NumberColumn("Cohen's κ", format="%.2f"),
            "pabak": st.column_config.NumberColumn("PABAK", format="%.2f"),
            "valid_rate_final": st.column_config.NumberColumn("valid (final)", format="%.3f"),
        },
    )

left, right = st.columns(2)
with left:
    st.subheader("Before and after adjudication")
    rows = []
    if ag is not None and report.pair is not None:
        rows.append({"comparison": f"{report.pair[0]} vs {report.pair[1]} (before)",
                     "n": ag.n, "agree": ag.n_agree, "raw agreement": ag.raw_agreement,
                     "Cohen's κ": ag.cohens_kappa.kappa})
    for r in report.after_adjudication:
        rows.append({"comparison": f"{r.annotator} vs final label", "n": r.n,
                     "agree": r.n_agree, "raw agreement": r.raw_agreement,
                     "Cohen's κ": r.cohens_kappa})
    if rows:
        st.dataframe(pd.DataFrame(rows), hide_index=True, key="audit_report_after")
    else:
        st.caption("No reviews yet.")
    st.caption(f"{report.n_adjudicated} task(s) carry a lead's verdict; "
               f"{report.n_unresolved} disagreement(s) are still open; "
               f"{report.n_unreviewed} task(s) are not reviewed yet.")
with right:
    st.subheader("Reason codes")
    if report.reason_counts:
        st.dataframe(pd.DataFrame([{"reason": reason_label(k), "tasks": v}
                                   for k, v in report.reason_counts.items()]),
                     hide_index=True, key="audit_report_reasons")
    else:
        st.caption("No reasons recorded.")

st.subheader("Downloads")
d = st.columns(4)
d[0].download_button("JSON", json.dumps({"audit": audit, **data}, indent=1, ensure_ascii=False),
                     file_name=f"{audit}-report.json", mime="application/json",
                     key="audit_dl_json")
d[1].download_button("CSV", report.to_csv(), file_name=f"{audit}-report.csv", mime="text/csv",
                     key="audit_dl_csv")
d[2].download_button("Markdown", report.to_markdown(), file_name=f"{audit}-report.md",
                     mime="text/markdown", key="audit_dl_md")
d[3].download_button("LaTeX", report.to_latex(), file_name=f"{audit}-report.tex",
                     mime="text/x-tex", key="audit_dl_latex")
