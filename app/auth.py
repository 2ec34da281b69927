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
import shlex
from collections.abc import Mapping
from datetime import timedelta
from urllib.parse import quote, unquote, urlsplit

import streamlit as st

from faillab.app.state import get_settings, get_store
from faillab.app.widgets.invitation import DEAD_LINK, INVITE_PARAM, invitation_form
from faillab_core.settings import AuthMode, Settings
from labeling.store import Store, StoreError, StoreUnavailableError, User
from labeling.store.models import utcnow
from labeling.store.records import LEAD_ROLES, Role
from labeling.store.sessions import SignInRefusal, ThrottleRule
from labeling.store.users import (
    MIN_PASSWORD_LENGTH,
    PasswordPolicyError,
    set_password_check_concurrency,
)

SESSION_COOKIE = "faillab_session"
IDENTITY_COOKIE = "faillab_identity"
_TOKEN_KEY = "auth_token"
_IDENTITY_KEY = "identity_name"
_GATED_KEY = "_auth_gated"
_USER_KEY = "_auth_user"


def served_over_https(url: str | None, headers: Mapping[str, str]) -> bool:
    """Whether the browser reached the app over https.

    Any one sign is enough: the page address the browser reports (sent with most runs, not
    all), the Origin of the browser's WebSocket request (set by the browser itself, present on
    every run), or what a TLS-terminating reverse proxy says in X-Forwarded-Proto or Forwarded.
    Trusting a forged header is harmless here: it can only make the cookie stricter (a Secure
    cookie is never sent over plain http), never weaker.
    """
    if str(url or "").lower().startswith("https:"):
        return True
    lowered = {k.lower(): str(v) for k, v in headers.items()}
    if urlsplit(lowered.get("origin", "")).scheme.lower() == "https":
        return True
    # The first proxy (the one the browser talked to) is listed first.
    forwarded_proto = lowered.get("x-forwarded-proto", "").split(",")[0].strip().lower()
    if forwarded_proto == "https":
        return True
    first_hop = lowered.get("forwarded", "").split(",")[0]
    params = dict(
        part.strip().lower().split("=", 1) for part in first_hop.split(";") if "=" in part
    )
    return params.get("proto", "").strip('"') == "https"


def _https() -> bool:
    try:
        headers: Mapping[str, str] = dict(st.context.headers)
    except Exception:  # no request context (e.g. AppTest)
        headers = {}
    return served_over_https(st.context.url, headers)


def _write_cookie(name: str, value: str, max_age_s: int) -> None:
    """Set (or with max_age_s=0 delete) a cookie on the app's page. Streamlit only reads
    request cookies, so a tiny same-origin component script writes document.cookie."""
    secure = "; Secure" if _https() else ""
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


#: Set when someone types a name nobody had: Annotate then gives them work at once.
NEWCOMER_KEY = "identity_newcomer"


def _use_identity(store: Store, name: str, write_cookie: bool) -> User | None:
    try:
        newcomer = write_cookie and store.users.get(name) is None
        # An existing user keeps the role stored for them; a new name is an annotator.
        user = store.users.ensure(name, "annotator")
    except StoreUnavailableError:
        raise  # the page says it and runs again until the database answers (app/main.py)
    except StoreError as err:  # a name the store refuses
        st.sidebar.error(str(err))
        return None
    st.session_state[_IDENTITY_KEY] = user.name
    if newcomer:
        st.session_state[NEWCOMER_KEY] = True
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
        _change_password_form(store, settings, token)
        return user
    st.session_state.pop(_TOKEN_KEY, None)
    invite = str(st.query_params.get(INVITE_PARAM) or "")
    if invite:
        # A one-time invitation (``faillab team --invite``): its person sets a password here.
        name = store.invitations.name_for(invite)
        if name is not None:
            slot = st.empty()
            with slot.container():
                invited = invitation_form(store, invite, name)
            if invited is None:
                return None
            del st.query_params[INVITE_PARAM]
            slot.empty()
            return _signed_in(store, settings, invited)
        st.error(DEAD_LINK)
    return _login_form(store, settings)


def _login_form(store: Store, settings: Settings) -> User | None:
    # In the main area, where the visitor looks: nothing else is drawn there before sign-in.
    slot = st.empty()
    with slot.container():
        st.title("EHR Failure Lab")
        form_column, _ = st.columns([2, 3])  # a form as wide as a name, not the whole page
        with form_column, st.form("login", clear_on_submit=False):
            st.markdown("**Sign in**")
            login_name = st.text_input("Name", key="login_name")
            password = st.text_input("Password", type="password", key="login_password")
            submitted = st.form_submit_button("Sign in", key="login_submit", type="primary")
        problem = form_column.empty()
    if not submitted:
        return None
    name = login_name.strip()
    user = check_sign_in(name, password, _client_key())
    if isinstance(user, str):
        problem.error(user)
        return None
    slot.empty()
    return _signed_in(store, settings, user)


def _signed_in(store: Store, settings: Settings, user: User) -> User:
    """A new session for ``user`` (a password checked, or set from an invitation)."""
    token = store.sessions.create(user.name, timedelta(hours=settings.session_hours))
    st.session_state[_TOKEN_KEY] = token
    st.session_state["cookie_pending"] = token
    st.session_state.pop("signed_out", None)
    st.sidebar.button("Sign out", key="sign_out")  # handled on the next run
    _change_password_form(store, settings, token)
    _write_cookie(SESSION_COOKIE, token, int(settings.session_hours * 3600))
    return user


def _change_password_form(store: Store, settings: Settings, token: str) -> None:
    """The signed-in user's own password change, folded away in the sidebar. A form: nothing
    is read until it is submitted, and its boxes are cleared afterwards."""
    with st.sidebar.expander("Change password"), st.form("change_password",
                                                          clear_on_submit=True):
        current = st.text_input("Current password", type="password", key="pw_current")
        new = st.text_input("New password", type="password", key="pw_new",
                            help=f"At least {MIN_PASSWORD_LENGTH} characters; not a common "
                                 "password nor your name.")
        repeat = st.text_input("New password again", type="password", key="pw_repeat")
        submitted = st.form_submit_button("Save new password", key="pw_submit")
    if not submitted:
        return
    if new != repeat:
        st.sidebar.error("The new passwords differ; nothing was changed.")
        return
    set_password_check_concurrency(settings.signin_concurrency)
    try:
        refused = store.sessions.change_password(
            token, current, new, _client_key(),
            ThrottleRule(free_attempts=settings.signin_free_attempts))
    except PasswordPolicyError as err:
        st.sidebar.error(f"Not changed: {err}.")
        return
    if refused is not None:
        reason = ("The current password is wrong." if refused.reason == "wrong"
                  else refusal_text(refused))
        st.sidebar.error(f"Not changed: {reason}")
        return
    st.sidebar.success("Password changed. Your other sessions were signed out.")


def refusal_text(refused: SignInRefusal) -> str:
    """A refused sign-in as one line for people."""
    if refused.reason == "locked" and refused.until is not None:
        wait = max(1, int((refused.until - utcnow()).total_seconds()) + 1)
        return f"Too many failed sign-ins; try again in {wait} s."
    if refused.reason == "busy_checking":
        return ("Too many sign-ins for this name or address are being checked at once; "
                "try again in a few seconds.")
    if refused.reason == "server_busy":
        return "Sign-in is busy: the server is checking other sign-ins; try again."
    return "Unknown name or wrong password."


def check_sign_in(name: str, password: str, client: str) -> User | str:
    """The user, or a one-line reason. The store counts and decides each attempt in one step
    before the password is checked (`store.sessions.sign_in`), so parallel attempts cannot
    all slip past the back-off; unknown names cost the same argon2 work as real ones."""
    store = get_store()
    settings = get_settings()
    set_password_check_concurrency(settings.signin_concurrency)
    rule = ThrottleRule(free_attempts=settings.signin_free_attempts)
    result = store.sessions.sign_in(name, password, client, rule)
    return refusal_text(result) if isinstance(result, SignInRefusal) else result


# -- single sign-on -----------------------------------------------------------------------------
def _oidc_mode() -> User | None:
    # .get: without an [auth] configuration st.user has no is_logged_in attribute at all.
    if not st.user.get("is_logged_in", False):
        st.title("EHR Failure Lab")  # in the main area, where the visitor looks
        if st.button("Sign in with single sign-on", key="oidc_login", type="primary"):
            try:
                st.login()
            except Exception as err:  # misconfigured [auth] secrets: say so instead of crashing
                st.error(f"Single sign-on is not configured: {err}")
        return None
    email = st.user.get("email") or st.user.get("name")
    if not email:
        st.sidebar.error("The identity provider returned no e-mail or name.")
        return None
    if st.sidebar.button("Sign out", key="oidc_logout"):
        st.logout()
    return get_store().users.ensure(str(email), Role.ANNOTATOR.value)


def _identify() -> User | None:
    mode = get_settings().auth
    if mode == AuthMode.PASSWORD:
        user = _password_mode()
    elif mode == AuthMode.OIDC:
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
    return get_settings().auth != AuthMode.NONE


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
        st.info(sign_in_prompt())
        st.stop()
    if roles and user.role not in roles:
        allowed = " or ".join(f"{r}s" for r in roles)
        st.error(f"This page is for {allowed}; you are signed in as {user.role}.")
        st.info(become_text(user, roles))
        st.stop()
    return user


def sign_in_prompt() -> str:
    """What an anonymous visitor is told to do, naming where the control is."""
    if sign_in_required():
        return "Sign in above to use this page."
    return "Choose your name in the sidebar (“Your name”) to use this page."


def become_text(user: User, roles: tuple[str, ...]) -> str:
    """How `user` gets a role that may use a page for `roles`."""
    role = "lead" if "lead" in roles else roles[0]
    command = f"faillab users role {shlex.quote(user.name)} {role}"
    if sign_in_required():
        return (f"Roles are changed by an admin on the command line: `{command}`; "
                "then sign out and in again.")
    settings = get_settings()
    where = "" if settings.database_url else f" --workspace {shlex.quote(str(settings.workspace))}"
    return ("Local mode: roles are changed on the command line of this machine. To become a "
            f"lead, run `{command}{where}`, then reload this page.")


def is_lead(user: User | None) -> bool:
    return user is not None and user.role in LEAD_ROLES
