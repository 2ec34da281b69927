"""Routing by measured trust: which pre-labelled failures are left to a machine, and why.

An item is left to its labeller only when both hold:

1. its calibrated probability of agreeing with people (``calibration.Calibration``: the
   labeller's confidence mapped on this workspace's people-checked items, around the
   development prior) is at least the team's target (``routing_target``, 0.9 by default);
2. that labeller has at least ``routing_min_checked`` (30 by default) people-checked items in
   the item's category in this workspace: a probability measured on three items is a guess.

Everything else goes to people, with the reason. A seeded share of the trusted items goes to
people too (spot checks), handed out like any other item, so the labeller keeps being
measured. With no measurements nothing is left to a machine: the offline heuristic has a
development prior but no checked items in a new workspace, and an LLM nobody has checked has
no probability at all (unknown, never a guess).

Pure: a mapping of opinions and a ``Calibration`` in, a routing out. ``machine_routing`` reads
the store and keeps its answer while neither the pre-labels nor the calibration changed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol

from opinions.learn.calibration import Calibration, canonical_labeller

if TYPE_CHECKING:
    from labeling.store import Store

__all__ = ["Destination", "Route", "TrustRouting", "machine_routing", "route_by_trust"]


class Opinion(Protocol):
    """What routing reads of a pre-label (the store's ``LlmOpinion`` has it)."""

    @property
    def category(self) -> str: ...
    @property
    def confidence(self) -> float | None: ...
    @property
    def labeller(self) -> str | None: ...


class Destination(StrEnum):
    """Where an item goes, and the kind of reason (the Pre-label page counts by it)."""

    MACHINE = "left to the labeller"
    SPOT_CHECK = "spot check → people"
    NOT_TRUSTED = "below the target → people"
    TOO_FEW_CHECKS = "too few checked items → people"
    UNMEASURED = "labeller never measured → people"
    NO_PRELABEL = "no pre-label → people"

    @property
    def to_people(self) -> bool:
        return self is not Destination.MACHINE


@dataclass(frozen=True)
class Route:
    destination: Destination
    #: One sentence a person reads on the Pre-label page.
    why: str
    #: The calibrated probability that people agree (None: unknown).
    probability: float | None = None


@dataclass(frozen=True)
class TrustRouting:
    routes: dict[str, Route]
    target: float
    min_checked: int
    #: The item ids in each destination, in the routing's order.
    by_destination: dict[Destination, list[str]] = field(default_factory=dict)

    @property
    def left_to_machine(self) -> frozenset[str]:
        return frozenset(self.by_destination.get(Destination.MACHINE, ()))

    def count(self, destination: Destination) -> int:
        return len(self.by_destination.get(destination, ()))


def _unit_hash(seed: int, trajectory_id: str) -> float:
    from labeling.store.queues import unit_hash

    return unit_hash(seed, trajectory_id)


def route_by_trust(opinions: Mapping[str, Opinion | None], calibration: Calibration, *,
                   target: float, min_checked: int, spot_check_share: float,
                   seed: int = 0) -> TrustRouting:
    """Each item's destination and reason (see the module docstring). The spot-check sample
    uses the annotation queues' stable hash, so it only grows as items arrive."""
    if not 0.0 <= spot_check_share <= 1.0:
        raise ValueError("spot_check_share must be between 0 and 1")
    routes: dict[str, Route] = {}
    trusted: list[str] = []
    for tid, opinion in opinions.items():
        if opinion is None:
            routes[tid] = Route(Destination.NO_PRELABEL, "No pre-label: a person labels it.")
            continue
        who = canonical_labeller(opinion.labeller)
        p = calibration.calibrate(who, opinion.category, opinion.confidence)
        checked = calibration.checked(who, opinion.category)
        if p is None:
            routes[tid] = Route(Destination.UNMEASURED,
                                f"{who}: no people-checked items yet, so its chance of "
                                "agreeing with people is unknown.")
        elif p < target:
            routes[tid] = Route(Destination.NOT_TRUSTED,
                                f"{who} agrees with people here with probability {p:.2f}, "
                                f"below the target {target:.2f}.", p)
        elif checked < min_checked:
            routes[tid] = Route(Destination.TOO_FEW_CHECKS,
                                f"{who} reaches {p:.2f} but only {checked} of the "
                                f"{min_checked} people-checked items it needs in "
                                f"{opinion.category!r} exist.", p)
        else:
            trusted.append(tid)
            routes[tid] = Route(Destination.MACHINE,
                                f"{who} agrees with people here with probability {p:.2f} "
                                f"(measured on {checked} checked items).", p)
    trusted.sort(key=lambda tid: _unit_hash(seed, tid))
    for tid in trusted[: round(spot_check_share * len(trusted))]:
        machine = routes[tid]
        routes[tid] = Route(Destination.SPOT_CHECK,
                            "Trusted, and drawn as a spot check so the labeller keeps being "
                            "measured.", machine.probability)
    by_destination: dict[Destination, list[str]] = {d: [] for d in Destination}
    for tid in sorted(routes, key=lambda t: (routes[t].probability or 0.0, t)):
        by_destination[routes[tid].destination].append(tid)
    return TrustRouting(routes, target, min_checked, by_destination)


# -- the store's routing, kept ---------------------------------------------------------------

#: How long a calibration fit stands before the store's checked items are read again. A page
#: asks on every key; the calibration moves with people's labels, slowly.
CALIBRATION_MAX_AGE_S = 60.0
_KEPT: dict[tuple[object, ...], tuple[float, TrustRouting]] = {}
_LOCK = threading.Lock()


def machine_routing(store: Store, *, target: float, min_checked: int,
                    spot_check_share: float, seed: int = 0,
                    clock: Callable[[], float] = time.monotonic) -> TrustRouting:
    """The store's routing of every pre-labelled item (``route_by_trust`` over its latest
    opinions and its workspace calibration), kept until the pre-labels change or
    ``CALIBRATION_MAX_AGE_S`` has passed."""
    from opinions.learn.calibration_store import workspace_calibration

    now = clock()
    revision = store.history.revision()
    key = (str(store.engine.url), revision[1], target, min_checked, spot_check_share, seed)
    with _LOCK:
        kept = _KEPT.get(key)
    if kept is not None and now - kept[0] < CALIBRATION_MAX_AGE_S:
        return kept[1]
    routing = route_by_trust(store.prelabels.opinions(), workspace_calibration(store),
                             target=target, min_checked=min_checked,
                             spot_check_share=spot_check_share, seed=seed)
    with _LOCK:
        for old in [k for k in _KEPT if k[0] == key[0]]:
            _KEPT.pop(old)
        _KEPT[key] = (now, routing)
    return routing
