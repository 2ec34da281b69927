"""An outage met inside a fragment, or while the sign-in reads the person, is the page's:
one message, the page runs again, and it draws itself once the store answers (no reload)."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from faillab.app.auth import _use_identity
from labeling.store import StoreError, StoreUnavailableError


def _page_with_a_failing_fragment() -> None:
    import streamlit as st

    from faillab.app.widgets.outage import STORE_RETRY_KEY, outage_retried
    from labeling.store import StoreUnavailableError

    @st.fragment
    @outage_retried
    def panel() -> None:
        st.session_state["tries"] = st.session_state.get("tries", 0) + 1
        if st.session_state["tries"] == 1:  # down on the first run only
            raise StoreUnavailableError("the annotation database at db:5432/x is not answering")
        st.write(f"item shown after {st.session_state['tries']} runs")

    panel()
    st.write(f"retry delay {st.session_state.get(STORE_RETRY_KEY)}")


def test_an_outage_in_a_fragment_retries_the_page_instead_of_an_error_box() -> None:
    at = AppTest.from_function(_page_with_a_failing_fragment, default_timeout=30).run()
    assert not at.exception
    shown = [m.value for m in at.markdown]
    assert "item shown after 2 runs" in shown
    assert "retry delay 1.0" in shown  # the page's back-off, not Streamlit's error box


def test_the_back_off_doubles_up_to_a_few_seconds() -> None:
    from faillab.app.widgets.outage import RETRY_CAP_S, next_retry_delay

    delays, last = [], None
    for _ in range(6):
        last = next_retry_delay(last)
        delays.append(last)
    # Back within seconds of the store answering, not a quarter of a minute later.
    assert delays == [1.0, 2.0, RETRY_CAP_S, RETRY_CAP_S, RETRY_CAP_S, RETRY_CAP_S] == \
        [1.0, 2.0, 4.0, 4.0, 4.0, 4.0]


class _Users:
    def __init__(self, err: StoreError) -> None:
        self.err = err

    def get(self, name: str) -> None:
        raise self.err

    def ensure(self, name: str, role: str) -> None:
        raise self.err


class _Store:
    def __init__(self, err: StoreError) -> None:
        self.users = _Users(err)


def test_the_sign_in_leaves_an_unreachable_database_to_the_page() -> None:
    # It used to show the outage as a refused name and stop: nothing ran the page again.
    down = StoreUnavailableError("the annotation database at db:5432/x is not answering")
    with pytest.raises(StoreUnavailableError):
        _use_identity(_Store(down), "ann", write_cookie=True)  # type: ignore[arg-type]
