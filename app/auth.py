"""Who is using the workbench, and with which role.

Three modes (setting ``auth`` / $FAILLAB_AUTH):
- ``none``: local use; people pick a display name (and role) in the sidebar.
- ``password``: users created with ``faillab users add``; a login form checks the argon2 hash.
- ``oidc``: single sign-on through ``st.login`` (configure ``[auth]`` in .streamlit/secrets.toml);
  new people join as annotators, an admin promotes them with ``faillab users role``.
"""

from __future__ import annotations

import streamlit as st

from app.state import get_settings, get_store
from labeling.store import StoreError, User

ROLES = ("annotator", "lead", "admin")
_SESSION_KEY = "signed_in_user"


def _none_mode() -> User | None:
    store = get_store()
    name = st.sidebar.text_input("Your name", key="identity_name",
                                 help="Local mode: labels are stored under this name.").strip()
    if not name:
        return None
    existing = store.get_user(name)
    default_role = existing.role if existing else "annotator"
    role = st.sidebar.selectbox("Role", ROLES, index=ROLES.index(default_role),
                                key=f"identity_role_{name}")
    try:
        if existing is None:
            return store.ensure_user(name, role)
        if existing.role != role:
            store.set_role(name, role)
            return store.get_user(name)
    except StoreError as err:
        st.sidebar.error(str(err))
        return None
    return existing


def _password_mode() -> User | None:
    store = get_store()
    name = st.session_state.get(_SESSION_KEY)
    if name:
        user = store.get_user(str(name))
        if user is not None:
            if st.sidebar.button("Sign out", key="sign_out"):
                st.session_state.pop(_SESSION_KEY, None)
                st.rerun()
            return user
    with st.sidebar.form("login", clear_on_submit=False):
        st.markdown("**Sign in**")
        login_name = st.text_input("Name", key="login_name")
        password = st.text_input("Password", type="password", key="login_password")
        submitted = st.form_submit_button("Sign in")
    if submitted:
        user = store.verify_password(login_name.strip(), password)
        if user is None:
            st.sidebar.error("Unknown name or wrong password.")
            return None
        st.session_state[_SESSION_KEY] = user.name
        st.rerun()
    return None


def _oidc_mode() -> User | None:
    # .get: without an [auth] configuration st.user has no is_logged_in attribute at all.
    if not st.user.get("is_logged_in", False):
        if st.sidebar.button("Sign in with single sign-on", key="oidc_login"):
            try:
                st.login()
            except Exception as err:  # misconfigured [auth] secrets: say so instead of crashing
                st.sidebar.error(f"Single sign-on is not configured: {err}")
        return None
    email = st.user.get("email") or st.user.get("name")
    if not email:
        st.sidebar.error("The identity provider returned no e-mail or name.")
        return None
    if st.sidebar.button("Sign out", key="oidc_logout"):
        st.logout()
    return get_store().ensure_user(str(email), "annotator")


def current_user() -> User | None:
    """The signed-in person, or None. Renders the sign-in controls in the sidebar."""
    mode = get_settings().auth
    if mode == "password":
        user = _password_mode()
    elif mode == "oidc":
        user = _oidc_mode()
    else:
        user = _none_mode()
    if user is not None:
        st.sidebar.caption(f"Signed in as {user.name} ({user.role})")
    return user


def require_user(*roles: str) -> User:
    """Stop the page unless someone is signed in (with one of ``roles`` when given)."""
    user = current_user()
    if user is None:
        st.info("Sign in (sidebar) to use this page.")
        st.stop()
    if roles and user.role not in roles:
        allowed = " or ".join(f"{r}s" for r in roles)
        st.error(f"This page is for {allowed}; you are signed in as {user.role}.")
        st.stop()
    return user
