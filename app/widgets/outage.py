"""What every page does while the annotation database or the object store is not answering:
one message, and the page runs again with back-off until it answers.

The page script's own handler (``app/main.py``) covers a whole-page run. A fragment's own run
(a label key on Annotate, a page of Browse, the next failure on Trajectory) runs only the
fragment's function, outside that handler: without ``outage_retried`` an outage there left
Streamlit's error box in place of the fragment, with no key or button left to run it again,
so the person had to reload the page."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import streamlit as st

from labeling.store import StoreUnavailableError
from trajectories.parts import WorkspaceError

#: The back-off of the retries while the annotation database is down (its last delay, s).
STORE_RETRY_KEY = "store_retry_delay_s"
#: The longest wait between two retries. A person sees the page back at most this long after
#: what was down answers again (with 15 s, keys in the half minute after an outage were the
#: soak's slowest); a retry is one connection attempt per open page, cheap at any team size.
RETRY_CAP_S = 4.0

P = ParamSpec("P")
R = TypeVar("R")


def next_retry_delay(previous: float | None) -> float:
    """1, 2, 4, 4 ... s: doubling from one second up to :data:`RETRY_CAP_S`."""
    return min(RETRY_CAP_S, float(previous or 0.5) * 2)


def retry_later(message: str) -> None:
    """One message on every page, whatever it was reading; the page runs again with back-off
    (:func:`next_retry_delay`) until what is down answers, and then says it is back."""
    delay = next_retry_delay(st.session_state.get(STORE_RETRY_KEY))
    st.session_state[STORE_RETRY_KEY] = delay
    st.error(f"{message}; retrying in {delay:.0f} s…", icon=":material/cloud_off:")
    time.sleep(delay)
    st.rerun()  # the whole page, also from a fragment: its next run says when all is back


def outage_message(err: StoreUnavailableError | WorkspaceError) -> str:
    if isinstance(err, StoreUnavailableError):
        return f"{err}. Nothing you did since is saved"
    return f"The trajectories cannot be read: {err}"


def outage_retried(fragment: Callable[P, R]) -> Callable[P, R | None]:
    """A fragment's function (put under ``@st.fragment``) that meets an outage as the page
    does: the message, the back-off, then the whole page again."""

    @functools.wraps(fragment)
    def run(*args: P.args, **kwargs: P.kwargs) -> R | None:
        try:
            return fragment(*args, **kwargs)
        except (StoreUnavailableError, WorkspaceError) as down:
            retry_later(outage_message(down))
            return None

    return run
