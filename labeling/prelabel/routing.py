"""Which pre-labelled failures people review first, and which are left to the labeller.

The rule is the annotation queues' (``store.queues.next_items``): below-threshold items, least
confident first, then items without a usable pre-label, then a seeded spot-check share of the
confident ones."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from labeling.prelabel.base import PrelabelRecord
from labeling.prelabel.labellers import labeller_identity
from labeling.prelabel.options import PrelabelOptions
from labeling.store.queues import unit_hash
from taxonomy import Taxonomy

if TYPE_CHECKING:
    from labeling.store import Store


@dataclass(frozen=True)
class ReviewRouting:
    """Which pre-labelled items people see first, and which are left to the labeller."""

    low_confidence: list[str]  # below the threshold, least confident first
    unlabelled: list[str]  # no usable pre-label: people must label them
    spot_check: list[str]  # a seeded sample of the confident ones, to keep the labeller honest
    automatic: list[str]  # confident and not sampled

    @property
    def to_people(self) -> list[str]:
        return self.low_confidence + self.unlabelled + self.spot_check


def route_prelabels(
    confidences: Mapping[str, float | None],
    *,
    threshold: float,
    spot_check_share: float,
    seed: int = 0,
) -> ReviewRouting:
    """Split items by pre-label confidence (``None``: no usable pre-label).

    The spot-check sample uses the same stable hash as the annotation queues, so the items the
    page counts are the items annotators get, and it does not change as more items arrive
    except by adding to it."""
    if not 0.0 <= spot_check_share <= 1.0:
        raise ValueError("spot_check_share must be between 0 and 1")
    low: list[tuple[float, str]] = []
    unlabelled: list[str] = []
    confident: list[str] = []
    for tid, conf in confidences.items():
        if conf is None:
            unlabelled.append(tid)
        elif conf < threshold:
            low.append((conf, tid))
        else:
            confident.append(tid)
    confident.sort(key=lambda tid: unit_hash(seed, tid))
    n_spot = round(spot_check_share * len(confident))
    return ReviewRouting(
        low_confidence=[tid for _, tid in sorted(low)],
        unlabelled=sorted(unlabelled),
        spot_check=confident[:n_spot],
        automatic=sorted(confident[n_spot:]),
    )


def prelabel_confidences(
    store: Store,
    trajectory_ids: Iterable[str],
    options: PrelabelOptions,
    taxonomy: Taxonomy,
) -> dict[str, PrelabelRecord | None]:
    """The stored pre-label of each trajectory for this labeller and taxonomy (None: none yet),
    read in one query."""
    _name, model, prompt_version = labeller_identity(options)
    cached = store.prelabels.get_many(taxonomy.version, prompt_version, model)
    return {tid: cached.get(tid) for tid in trajectory_ids}
