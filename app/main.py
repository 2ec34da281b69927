"""Entry point: frames every page and routes with st.navigation."""

from __future__ import annotations

import streamlit as st
from streamlit.navigation.page import StreamlitPage

from faillab.app.auth import is_lead, sign_in_gate, sign_in_required
from faillab.app.state import existing_store, get_settings, workspace
from faillab.app.widgets.outage import STORE_RETRY_KEY, outage_message, retry_later
from faillab_core.settings import SettingsError
from labeling.store import StoreUnavailableError
from trajectories.parts import WorkspaceError

st.set_page_config(page_title="EHR Failure Lab", layout="wide")

# Pages only leads and admins may use (each also checks with require_user): with sign-in on,
# their names are left out of the menu of everybody else.
LEAD_PAGES = {"adjudicate", "agreement", "audit-adjudicate", "audit-report"}


def pages(show_lead_pages: bool) -> dict[str, list[StreamlitPage]]:
    """The menu, one line per page; each section lists its pages in the order people use them.
    Every page is registered whatever the menu shows, so a deep link still opens its page
    once the visitor is signed in (a page left out of the menu is only hidden)."""

    def page(script: str, title: str, url_path: str, default: bool = False) -> StreamlitPage:
        hidden = url_path in LEAD_PAGES and not show_lead_pages
        return st.Page(script, title=title, url_path=url_path, default=default,
                       visibility="hidden" if hidden else "visible")

    return {
        "Trajectories": [
            # Streamlit serves the default page only at the root ("/overview" was "Page not
            # found"), so the old address is a hidden page running the same script.
            page("views/overview.py", "Overview", "", default=True),
            st.Page("views/overview.py", title="Overview", url_path="overview",
                    visibility="hidden"),
            page("views/browse.py", "Browse", "browse"),
            page("views/trajectory.py", "Trajectory", "trajectory"),
        ],
        "Labels": [
            # failure labelling pages
            page("views/annotate.py", "Annotate", "annotate"),
            page("views/adjudicate.py", "Adjudicate", "adjudicate"),
            page("views/agreement.py", "Agreement", "agreement"),
            page("views/clusters.py", "Clusters", "clusters"),
        ],
        "Pre-labels": [
            # LLM / heuristic pre-labelling pages
            page("views/prelabel.py", "Pre-label", "prelabel"),
        ],
        "Validity audit": [
            # task validity audit pages
            page("views/audit_review.py", "Review tasks", "audit-review"),
            page("views/audit_adjudicate.py", "Adjudicate tasks", "audit-adjudicate"),
            page("views/audit_report.py", "Audit report", "audit-report"),
        ],
        "Statistics": [
            # statistics pages
            page("views/statistics.py", "Statistics", "statistics"),
        ],
    }


# Settings are validated once: a mistyped value (FAILLAB_AUTH=pasword, FAILLAB_BLIND=ture) stops
# every page here instead of meaning "no sign-in" or "blind mode off".
try:
    get_settings()
except SettingsError as err:
    st.error(f"This server's settings are not valid: {err}. Fix the variable and restart "
             "`faillab serve`.", icon=":material/error:")
    st.stop()


def serve() -> None:
    """The gate, the workspace check, the menu and the page."""
    # The one sign-in gate, before the menu is built: with sign-in on, an anonymous visitor sees
    # no page name, and no page script (so no SQL re-run) runs before it.
    user = sign_in_gate()
    gated = sign_in_required()
    anonymous = user is None and gated
    # Local mode shows every page: its lead pages say how to become a lead there.
    nav = st.navigation(pages(show_lead_pages=not gated or is_lead(user)),
                        position="hidden" if anonymous else "sidebar")
    if anonymous:
        st.stop()  # the gate drew the sign-in form in the main area
    ws = workspace()
    if not st.session_state.get("workspace_checked"):
        # Once per session (an object-store workspace's check is a request). The store is
        # consulted only for an empty workspace, and never created for the check.
        store = existing_store() if not ws.exists() else None
        if store is not None:
            from labeling.consistency import missing_workspace

            if problem := missing_workspace(ws, store):
                st.error(problem, icon=":material/error:")
                st.stop()
        st.session_state["workspace_checked"] = True
    with st.sidebar:
        st.caption(f"Workspace: {ws.root}")
        if get_settings().database_url:
            st.caption("Annotations: external database")
    nav.run()


try:
    serve()
except (StoreUnavailableError, WorkspaceError) as down:
    retry_later(outage_message(down))
else:
    if st.session_state.pop(STORE_RETRY_KEY, None) is not None:
        st.toast("Everything answers again.", icon=":material/cloud_done:")
