"""Validity audit, step 3: the report (Table-11 style summary, strata, reasons, downloads).

Leads and admins only: agreement figures shown mid-audit would tell annotators how their
colleagues judged.
"""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from analysis.audit_report import (
    after_table,
    stratum_table,
    summary_table,
    to_csv,
    to_json_dict,
    to_latex,
    to_markdown,
)
from faillab.app.auth import require_user
from faillab.app.state import get_store
from faillab.app.widgets.audit_item import pick_audit, reason_label
from faillab.app.widgets.safe import escape_markdown, plain
from labeling.audit import (
    KAPPA_PARADOX_EXPLAINED,
    AuditError,
    audit_definition,
    audit_report,
    valid_headline,
)
from labeling.store import StoreError
from labeling.store.records import Role

st.title("Validity audit: report")
lead = require_user(Role.LEAD, Role.ADMIN)
store = get_store()

audit = pick_audit(store, key="audit_report_audit")

try:
    report = audit_report(store, audit)
    definition = audit_definition(store, audit)
except AuditError as err:
    st.error(escape_markdown(str(err)))
    st.stop()

runs = definition.get("runs") or []
sample = definition.get("sample_size") or report.n_items
seed = definition.get("seed")
st.caption(f"Pool: tasks unsolved by {len(runs):,} run(s); sample of {sample:,} with seed "
           f"{'–' if seed is None else seed}, stratified over intent × scope.")

m = st.columns(4)
m[0].metric("Audited tasks", f"{report.n_items:,}")
valid, valid_note = valid_headline(report)
m[1].metric("Valid after adjudication", valid, help=valid_note)
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

data = to_json_dict(report)
if report.n_unresolved:
    st.warning(valid_note)
st.subheader("By intent and scope")
# The same formatted rows as the exports: one number format, a dash for what is undefined.
st.dataframe(pd.DataFrame(stratum_table(report)), hide_index=True, key="audit_report_strata")

left, right = st.columns(2)
with left:
    st.subheader("Before and after adjudication")
    after = after_table(report)
    if after:
        st.dataframe(pd.DataFrame(after), hide_index=True, key="audit_report_after")
    else:
        st.caption("No reviews yet.")
    st.caption(f"{report.n_adjudicated:,} task(s) carry a lead's verdict; "
               f"{report.n_unresolved:,} disagreement(s) are still open; "
               f"{report.n_unreviewed:,} task(s) are not reviewed yet.")
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
d[1].download_button("CSV", to_csv(report), file_name=f"{audit}-report.csv", mime="text/csv",
                     key="audit_dl_csv")
d[2].download_button("Markdown", to_markdown(report), file_name=f"{audit}-report.md",
                     mime="text/markdown", key="audit_dl_md")
d[3].download_button("LaTeX", to_latex(report), file_name=f"{audit}-report.tex",
                     mime="text/x-tex", key="audit_dl_latex")


st.subheader("Archive")
archived = audit in store.audits.archived()
st.caption("Archiving keeps every judgment and verdict; the audit just stops being the default "
           "on these pages and in `faillab audit` commands.")
if st.button("Restore this audit" if archived else "Archive this audit", key="audit_archive",
             icon=":material/unarchive:" if archived else ":material/archive:"):
    try:
        store.audits.archive(audit, actor=lead.name, archived=not archived)
    except StoreError as err:
        st.error(escape_markdown(str(err)))
    else:
        st.rerun()
