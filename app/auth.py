"""Who is using the workbench, and with which role.

Three modes (setting ``auth`` / $FAILLAB_AUTH):
- ``none``: local use; people choose a name once per browser session (a form, then shown
  read-only with "Switch"). New names become annotators; roles change only via ``faillab users``.
- ``password``: users created with ``faillab users add``; a sign-in form checks the argon2 hash,
  with back-off per user and per client. A random session token (stored hashed in the store)
  is kept in a cookie so reloads, new tabs and deep links stay signed in until it expires.
- ``oidc``: single sign-on through ``st.login`` (configure ``[auth]`` in .streamlit/secrets.toml);
  new people join as annotators, an admin promotes them with ``faillab users role``.

`sign_in_gate()` runs once per script run in app/main.py before any page; pages read the
result with `current_user()` / `require_user(*roles)`.
"""

from __future__ import annotations

import json
from datetime import timedelta
from urllib.parse import quote, unquote

import streamlit as st

from faillab.app.state import get_settings, get_store
from faillab.settings import Settings
from labeling.store import Store, StoreError, User
from labeling.store.models import utcnow
from labeling.store.sessions import ThrottleRule
from labeling.store.users import SignInBusyError, set_password_check_concurrency

SESSION_COOKIE = "faillab_session"
IDENTITY_COOKIE = "faillab_identity"
_TOKEN_KEY = "auth_token"
_IDENTITY_KEY = "identity_name"
_GATED_KEY = "_auth_gated"
_USER_KEY = "_auth_user"


def _write_cookie(name: str, value: str, max_age_s: int) -> None:
    """Set (or with max_age_s=0 delete) a cookie on the app's page. Streamlit only reads
    request cookies, so a tiny same-origin component script writes document.cookie."""
    secure = "; Secure" if str(st.context.url or "").startswith("https:") else ""
    # quote(): the value is percent-encoded, so it can never end the cookie or the script.
    cookie = f"{name}={quote(value, safe='')}; Path=/; Max-Age={max_age_s}; SameSite=Strict{secure}"
    st.iframe(f"<script>window.parent.document.cookie = {json.dumps(cookie)};</script>",
              height=1)


def _request_cookie(name: str) -> str:
    try:
        value = st.context.cookies.get(name)
    except Exception:  # no request context (e.g. AppTest)
        return ""
    return unquote(value) if isinstance(value, str) else ""


def _client_key() -> str:
    try:
        address = st.context.ip_address
    except Exception:
        address = None
    return f"client:{address or 'local'}"


# -- local mode ---------------------------------------------------------------------------------
def _none_mode() -> User | None:
    # The store is opened only once someone is named: browsing must not create one.
    name = str(st.session_state.get(_IDENTITY_KEY) or "").strip()
    if not name and not st.session_state.get("identity_switched"):
        remembered = _request_cookie(IDENTITY_COOKIE)
        existing = get_store().users.get(remembered) if remembered else None
        name = existing.name if existing else ""
    if name:
        if not st.sidebar.button("Switch person", key="identity_switch"):
            return _use_identity(get_store(), name, write_cookie=False)
        st.session_state.pop(_IDENTITY_KEY, None)
        st.session_state["identity_switched"] = True
        _write_cookie(IDENTITY_COOKIE, "", 0)
    # A form: nothing is stored until "Use this name" (or Enter) submits it, and the text box
    # disappears afterwards, so later shortcut keys can never type into it. No st.rerun():
    # the cookie-writing snippet must get to run in the browser.
    slot = st.sidebar.empty()
    with slot.form("identity", clear_on_submit=True):
        typed = st.text_input("Your name", key="identity_input",
                              help="Local mode: labels are stored under this name.")
        chosen = st.form_submit_button("Use this name")
    if not (chosen and typed.strip()):
        return None
    slot.empty()
    st.session_state.pop("identity_switched", None)
    st.sidebar.button("Switch person", key="identity_switch")  # handled on the next run
    return _use_identity(get_store(), typed.strip(), write_cookie=True)


def _use_identity(store: Store, name: str, write_cookie: bool) -> User | None:
    try:
        # An existing user keeps the role stored for them; a new name is an annotator.
        user = store.users.ensure(name, "annotator")
    except StoreError as err:
        st.sidebar.error(str(err))
        return None
    st.session_state[_IDENTITY_KEY] = user.name
    if write_cookie:
        _write_cookie(IDENTITY_COOKIE, user.name, int(get_settings().session_hours * 3600))
    return user


# -- password mode ------------------------------------------------------------------------------
def _password_mode() -> User | None:
    store = get_store()
    settings = get_settings()
    token = str(st.session_state.get(_TOKEN_KEY) or "")
    if not token and not st.session_state.get("signed_out"):
        token = _request_cookie(SESSION_COOKIE)
    user = store.sessions.user(token) if token else None
    if user is not None:
        st.session_state[_TOKEN_KEY] = token
        if st.sidebar.button("Sign out", key="sign_out"):
            store.sessions.end(token)
            st.session_state.pop(_TOKEN_KEY, None)
            st.session_state["signed_out"] = True
            _write_cookie(SESSION_COOKIE, "", 0)
            _login_form(store, settings)  # renders the form; the page itself does not run
            return None
        if st.session_state.pop("cookie_pending", None) == token:  # once more after sign-in
            _write_cookie(SESSION_COOKIE, token, int(settings.session_hours * 3600))
        return user
    st.session_state.pop(_TOKEN_KEY, None)
    return _login_form(store, settings)


def _login_form(store: Store, settings: Settings) -> User | None:
    slot = st.sidebar.empty()
    with slot.form("login", clear_on_submit=False):
        st.markdown("**Sign in**")
        login_name = st.text_input("Name", key="login_name")
        password = st.text_input("Password", type="password", key="login_password")
        submitted = st.form_submit_button("Sign in")
    if not submitted:
        return None
    name = login_name.strip()
    user = check_sign_in(name, password, _client_key())
    if isinstance(user, str):
        st.sidebar.error(user)
        return None
    token = store.sessions.create(user.name, timedelta(hours=settings.session_hours))
    st.session_state[_TOKEN_KEY] = token
    st.session_state["cookie_pending"] = token
    st.session_state.pop("signed_out", None)
    slot.empty()
    st.sidebar.button("Sign out", key="sign_out")  # handled on the next run
    _write_cookie(SESSION_COOKIE, token, int(settings.session_hours * 3600))
    return user


def check_sign_in(name: str, password: str, client: str) -> User | str:
    """The user, or a one-line reason. Back-off per user and per client is stored in the store
    (so it holds across replicas); unknown names cost the same argon2 work as real ones."""
    store = get_store()
    settings = get_settings()
    set_password_check_concurrency(settings.signin_concurrency)
    rule = ThrottleRule(free_attempts=settings.signin_free_attempts)
    keys = [f"user:{name.lower()}", client]
    locked = store.sessions.locked_until(keys)
    if locked is not None:
        wait = max(1, int((locked - utcnow()).total_seconds()) + 1)
        return f"Too many failed sign-ins; try again in {wait} s."
    try:
        user = store.users.verify_password(name, password)
    except SignInBusyError as err:
        return f"Sign-in is busy: {err}."
    if user is None:
        store.sessions.record_failure(keys, rule)
        return "Unknown name or wrong password."
    store.sessions.clear_failures([f"user:{name.lower()}"])
    return user


# -- single sign-on -----------------------------------------------------------------------------
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
    return get_store().users.ensure(str(email), "annotator")


def _identify() -> User | None:
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


def sign_in_gate() -> User | None:
    """Run once per script run before any page (app/main.py): renders the sign-in controls and
    remembers who is signed in for `current_user()`."""
    user = _identify()
    st.session_state[_GATED_KEY] = True
    st.session_state[_USER_KEY] = user
    return user


def sign_in_required() -> bool:
    return get_settings().auth in {"password", "oidc"}


def current_user() -> User | None:
    """The signed-in person, or None."""
    if st.session_state.get(_GATED_KEY):
        user = st.session_state.get(_USER_KEY)
        return user if isinstance(user, User) else None
    return _identify()  # a page run on its own (tests): render the controls here


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
