"""Entry point: frames every page and routes with st.navigation."""

from __future__ import annotations

import streamlit as st

from faillab.app.auth import sign_in_gate, sign_in_required
from faillab.app.state import get_settings, workspace

st.set_page_config(page_title="EHR Failure Lab", layout="wide")

# One line per page; each section lists its pages in the order people use them.
PAGES = {
    "Trajectories": [
        # Streamlit serves the default page only at the root ("/overview" was "Page not
        # found"), so the old address is a hidden page running the same script.
        st.Page("views/overview.py", title="Overview", url_path="", default=True),
        st.Page("views/overview.py", title="Overview", url_path="overview",
                visibility="hidden"),
        st.Page("views/browse.py", title="Browse", url_path="browse"),
        st.Page("views/trajectory.py", title="Trajectory", url_path="trajectory"),
    ],
    "Labels": [
        # failure labelling pages
        st.Page("views/annotate.py", title="Annotate", url_path="annotate"),
        st.Page("views/adjudicate.py", title="Adjudicate", url_path="adjudicate"),
        st.Page("views/agreement.py", title="Agreement", url_path="agreement"),
        st.Page("views/clusters.py", title="Clusters", url_path="clusters"),
    ],
    "Pre-labels": [
        # LLM / heuristic pre-labelling pages
        st.Page("views/prelabel.py", title="Pre-label", url_path="prelabel"),
    ],
    "Validity audit": [
        # task validity audit pages
        st.Page("views/audit_review.py", title="Review tasks", url_path="audit-review"),
        st.Page("views/audit_adjudicate.py", title="Adjudicate tasks", url_path="audit-adjudicate"),
        st.Page("views/audit_report.py", title="Audit report", url_path="audit-report"),
    ],
    "Statistics": [
        # statistics pages
        st.Page("views/statistics.py", title="Statistics", url_path="statistics"),
    ],
}

nav = st.navigation({section: pages for section, pages in PAGES.items() if pages})
# The one sign-in gate: with sign-in on, no page script (and so no SQL re-run) runs before it.
user = sign_in_gate()
if user is None and sign_in_required():
    st.title("EHR Failure Lab")
    st.info("Sign in (sidebar) to use this page.")
    st.stop()
with st.sidebar:
    ws = workspace()
    st.caption(f"Workspace: {ws.root}")
    if get_settings().database_url:
        st.caption("Annotations: external database")
nav.run()
