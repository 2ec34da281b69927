"""One audited task as a reviewer sees it: question, reference SQL and its re-run result, the
extracted answer, the schema of the tables it reads, and evidence rows.

Blinded by construction: the context comes from labeling.audit.item_context, which reads task
columns only, so no agent answer, run name or outcome can reach this widget.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pandas as pd
import streamlit as st

from faillab.app.state import (
    EhrKey,
    data_key,
    ehr_key,
    get_settings,
    get_workspace,
    workspace,
)
from faillab.app.widgets.safe import code_html, escape_markdown, plain
from faillab.app.widgets.steps import steps_css
from labeling.audit import (
    REASON_LABELS,
    Candidate,
    ItemContext,
    item_context,
    latest_audit,
    task_record,
)
from labeling.store import Store
from trajectories.render import answer_text
from trajectories.sql import QueryResult


@st.cache_data(max_entries=256, show_spinner="Re-running the reference SQL…")
def _context(root: str, signature: tuple[Any, ...], ehr: EhrKey | None, task_id: str,
             timeout_s: float, row_cap: int) -> ItemContext | None:
    # Keyed by the workspace data and the EHR file's (path, mtime, size): a rebuilt EHR
    # database or new parts give a new key. The EHR path itself comes from the workspace.
    ws = get_workspace(root)
    task = task_record(ws, task_id)
    if task is None:
        return None
    return item_context(ws, task, timeout_s=timeout_s, row_cap=row_cap)


def load_context(task_id: str) -> ItemContext | None:
    ws = workspace()
    settings = get_settings()
    root, signature = data_key(ws)
    return _context(root, signature, ehr_key(ws.ehr_path), task_id, settings.sql_timeout_s,
                    settings.sql_row_cap)


def reason_label(code: str | None) -> str:
    if not code:
        return "no reason given"
    return REASON_LABELS.get(code, code)


def _frame(result: QueryResult) -> pd.DataFrame:
    # Result columns can repeat (SELECT a.x, b.x); a DataFrame for display needs unique names.
    seen: dict[str, int] = {}
    names = []
    for col in result.columns:
        seen[col] = seen.get(col, 0) + 1
        names.append(col if seen[col] == 1 else f"{col} ({seen[col]})")
    return pd.DataFrame(result.json_rows(), columns=names)


def _table(result: QueryResult, key: str, max_height: int = 300) -> None:
    frame = _frame(result)
    st.dataframe(frame, hide_index=True, key=key,
                 height=min(38 + 35 * max(len(frame), 1), max_height))


def render_task_header(task: Candidate) -> None:
    st.markdown("**Question**")
    plain(task.question)
    meta = {"intent": task.intent, "scope": task.scope, "template": task.template_id,
            "task": task.task_id}
    st.caption(" · ".join(f"{k}: {escape_markdown(str(v))}" for k, v in meta.items() if v))


def render_item(ctx: ItemContext, key: str, *, evidence_expanded: bool = True) -> None:
    """Everything the reviewer needs to judge the task; ``key`` namespaces widget keys."""
    task = ctx.task
    steps_css()  # the look of the plain code blocks below
    render_task_header(task)
    left, right = st.columns([3, 2], gap="medium")
    with left:
        st.markdown("**Reference SQL**")
        if task.reference_sql:
            st.html(code_html(task.reference_sql, "sql", max_height_px=220))
        else:
            st.caption("This task has no reference SQL.")
        st.markdown("**Execution result (re-run now)**")
        if not ctx.has_database:
            st.info("No EHR database is configured for this workspace, so the reference SQL "
                    "cannot be re-run here (faillab sandbox use FILE).")
        elif ctx.result is not None:
            r = ctx.result
            st.caption(f"{len(r.rows)} row(s) in {r.elapsed_ms:.0f} ms"
                       + (" (truncated at the row cap)" if r.truncated else "")
                       + (f"; ran at {r.ran_at}, the benchmark's clock" if r.ran_at else ""))
            _table(r, key=f"audit_result_{key}")
        else:
            st.error("The reference SQL did not run: " + escape_markdown(str(ctx.result_error)))
    with right:
        st.markdown("**Extracted answer (ground truth)**")
        st.html(code_html(answer_text(ctx.ground_truth), "json", max_height_px=200))
        if task.answer_format:
            st.caption("Answer format required:")
            plain(task.answer_format, caption=True)
        st.markdown("**Schema of the tables the SQL reads**")
        if not ctx.tables:
            st.caption("No tables found in the reference SQL.")
        elif not ctx.schema:
            st.caption("Tables: " + escape_markdown(", ".join(ctx.tables))
                       + (" (not found in the EHR database)" if ctx.has_database else ""))
        for i, (table, columns) in enumerate(ctx.schema.items()):
            with st.expander(f"{escape_markdown(table)} ({len(columns)} columns)", expanded=False):
                st.dataframe(pd.DataFrame(columns, columns=["column", "type"]), hide_index=True,
                             key=f"audit_schema_{key}_{i}",
                             height=min(38 + 35 * len(columns), 260))
    # The reference result is shown once, above; evidence is only the extra queries.
    if ctx.evidence:
        st.markdown("**Evidence rows**")
    elif ctx.has_database and ctx.result is not None and not ctx.result.rows:
        st.caption("The reference SQL returned no rows.")
    for i, ev in enumerate(ctx.evidence):
        with st.expander(escape_markdown(ev.title), expanded=evidence_expanded):
            st.html(code_html(ev.sql, "sql"))
            if ev.result is not None:
                _table(ev.result, key=f"audit_evidence_{key}_{i}")
            else:
                st.error(escape_markdown(str(ev.error)))


def pick_audit(store: Store, key: str) -> str:
    """The audit selector shared by the audit pages; stops the page if there is none.

    Audits in use come first, newest first, and the newest is the default; archived ones
    follow, marked, so an audit created by mistake stops being anyone's default once a lead
    archives it.
    """
    archived = store.audits.archived()
    names = [name for name, _ in reversed(store.audits.all())]
    if not names:
        st.info("No audit yet. A lead creates one with `faillab audit create --runs R1,R2`.")
        st.stop()
    audits = [n for n in names if n not in archived] + [n for n in names if n in archived]
    newest = latest_audit(store)
    audit = st.selectbox("Audit", audits, index=audits.index(newest) if newest else 0, key=key,
                         format_func=lambda n: f"{n} (archived)" if n in archived else n)
    assert audit is not None
    return str(audit)


# Blurs whatever has focus in the app (the iframe shares its origin). Constant markup: the only
# thing that varies is a hex digest, so no data ever reaches the page as HTML.
_RELEASE_FOCUS = """<script>
// {token}
const host = window.parent;
const active = host.document.activeElement;
if (active && active !== host.document.body) {{ active.blur(); }}
// Also at the moment of the choice, not only once the new audit has drawn: a shortcut typed
// in between would otherwise go into the select box. Installed once per page.
if (!host.__faillabBlurAfterChoice) {{
  host.__faillabBlurAfterChoice = true;
  host.document.addEventListener('click', function (ev) {{
    const option = ev.target && ev.target.closest ? ev.target.closest('[role="option"]') : null;
    if (!option) {{ return; }}
    host.setTimeout(function () {{
      const now = host.document.activeElement;
      if (now && now.getAttribute('role') === 'combobox') {{ now.blur(); }}
    }}, 0);
  }}, true);
}}
</script>"""


def release_focus(token: str) -> None:
    """Give the keyboard back to the page when `token` changes (e.g. the chosen audit).

    A select box keeps focus after a choice, so page shortcuts (V, I...) would be typed into
    it. The script runs when the iframe's content changes, i.e. once per new token, and installs
    (once per page) a listener that blurs a select box right after a mouse choice, so the keys
    work before the chosen audit has even drawn.
    """
    digest = hashlib.sha256(token.encode("utf-8")).hexdigest()[:16]
    st.iframe(_RELEASE_FOCUS.format(token=digest), height=1, width="content")
