"""Who looks first: routing by measured trust, with the reason for every item (Pre-label page)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from faillab.app.state import get_settings
from labeling.store import Store
from opinions.learn.trust import Destination, Route, machine_routing

#: Items listed with their reason (the counts above cover every item).
LISTED = 500


def render_routing(store: Store, failures: list[str]) -> None:
    """The counts per destination over the items that need a person, and each item's reason.
    Only for viewers who may see the pre-labels' distribution (the caller checks)."""
    settings = get_settings()
    routing = machine_routing(store, target=settings.routing_target,
                              min_checked=settings.routing_min_checked,
                              spot_check_share=settings.spot_check_share)
    no_prelabel = Route(Destination.NO_PRELABEL, "No pre-label: a person labels it.")
    routes = {tid: routing.routes.get(tid, no_prelabel) for tid in failures}
    counts = {d: 0 for d in Destination}
    for route in routes.values():
        counts[route.destination] += 1
    st.markdown(f"**Who looks first** (an item is left to its labeller only at a calibrated "
                f"agreement of {settings.routing_target:.2f} or more, measured on at least "
                f"{settings.routing_min_checked} people-checked items of its category; "
                f"spot-check share {settings.spot_check_share:.0%})")
    shown = [d for d in Destination if counts[d]] or [Destination.MACHINE]
    for col, destination in zip(st.columns(len(shown)), shown, strict=True):
        col.metric(destination.value.capitalize(), f"{counts[destination]:,}")
    frame = pd.DataFrame(
        [{"trajectory": tid, "goes to": "labeller" if not r.destination.to_people
          else "people", "agreement": r.probability, "why": r.why}
         for tid, r in list(routes.items())[:LISTED]])
    with st.expander(f"Why each item went where ({min(len(routes), LISTED):,} of "
                     f"{len(routes):,})"):
        st.dataframe(frame, hide_index=True, key="prelabel_routing_reasons",
                     column_config={"agreement": st.column_config.NumberColumn(
                         format="%.2f", help="Calibrated probability that people agree")})
    st.caption("Set the target, the checked items needed and the spot-check share with "
               "FAILLAB_ROUTING_TARGET, FAILLAB_ROUTING_MIN_CHECKED and "
               "FAILLAB_SPOT_CHECK_SHARE; the labelling queues and Take use the same routing.")
