"""The page an invitation link opens (``/?invite=TOKEN``, from ``faillab team --invite``): the
person it names chooses their password, and is signed in.

The store decides everything: whose invitation it is while it is live, the password policy,
and that the link works once (``store.invitations``). The page never shows the token.
"""

from __future__ import annotations

import streamlit as st

from faillab.app.widgets.safe import escape_markdown
from labeling.store import Store, User
from labeling.store.invitations import InvitationError
from labeling.store.users import MIN_PASSWORD_LENGTH, PasswordPolicyError

#: The query parameter carrying the invitation's token.
INVITE_PARAM = "invite"
DEAD_LINK = ("This invitation link is unknown, already used or expired. Ask a lead for a new "
             "one, or sign in below if you have set your password.")


def invitation_form(store: Store, token: str, name: str) -> User | None:
    """The password form for ``name``'s invitation; the user once their password is set."""
    st.title("EHR Failure Lab")
    column, _ = st.columns([2, 3])
    with column, st.form("invitation", clear_on_submit=True):
        st.markdown(f"**Welcome, {escape_markdown(name)}.** Choose your password to sign in.")
        password = st.text_input("New password", type="password", key="invite_password",
                                 help=f"At least {MIN_PASSWORD_LENGTH} characters; not a common "
                                      "password nor your name.")
        repeat = st.text_input("New password again", type="password", key="invite_repeat")
        submitted = st.form_submit_button("Set password and sign in", key="invite_submit",
                                          type="primary")
    if not submitted:
        return None
    if password != repeat:
        column.error("The two passwords differ; nothing was set.")
        return None
    try:
        return store.invitations.redeem(token, password)
    except PasswordPolicyError as err:
        column.error(f"Not set: {err}.")
    except InvitationError as err:
        column.error(str(err))
    return None
