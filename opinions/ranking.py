"""The classifier's ranking of a person's queue: the failures it is least sure of first.

Kept beside the other machine opinions: the queue (``labeling.queue``) takes a ranking as a
plain mapping and never imports this. The fit is computed beside the page, never in a key's
run, and kept until the confirmed labels have changed by a share (``refit_due``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from labeling.pool import failed_frame

if TYPE_CHECKING:
    from labeling.store import Store
    from trajectories.workspace import Workspace


# Features once per (workspace, failures), computed in the background; a page asks on every key
# press, and must never wait for the features. The fit is kept per (workspace, failures) with
# the confirmed labels it learned from, and redone only when those have changed by a share
# (`refit_due`): with a team labelling, every key of anyone changes the confirmed set, and a
# refit per key was half of every label's server time.
_RANKINGS: dict[tuple[object, ...], _Fit] = {}
# The fit running in the background per ranking key (at most one each).
_FITTING: dict[tuple[object, ...], threading.Thread] = {}
#: A fit stands until the confirmed labels differ from the ones it learned from in at least this
#: share of them (new, changed or gone; one label at least): the ordering is a guide to what to
#: label next, which a few newer labels hardly move.
REFIT_SHARE = 0.1
#: ...and no sooner than this after the last fit began: with a team on a replica, a tenth of
#: the confirmed labels changed every few seconds early on, and each fit (0.2-1.5 s) took the
#: interpreter from the keys beside it (a third of the slowest keys ran beside one). The
#: ordering follows the team's labels within this time.
REFIT_INTERVAL_S = 30.0
# The failures (per workspace state) and confirmed labels (per store revision) a ranking starts
# from. Reading every failure of the workspace on each label key was most of the key's script
# run at 50,000 trajectories while the failures had not changed.
_INPUTS: dict[tuple[object, ...], Any] = {}
_KEPT = 4
_LOCK = threading.Lock()


def _remember(cache: dict[tuple[object, ...], Any], key: tuple[object, ...], value: Any) -> None:
    with _LOCK:
        while len(cache) >= _KEPT:
            cache.pop(next(iter(cache)))
        cache[key] = value


def store_revision(store: Store) -> tuple[int, int]:
    """A token that changes whenever the store's labels could have (``History.revision``)."""
    return store.history.revision()


def _failures(ws: Workspace, failed_ids: Sequence[str] | None) -> tuple[str, ...]:
    """The workspace's failures (cached on its root and signature: a scan of every
    trajectory)."""
    failed_key = ("failed", str(ws.root), ws.signature())
    failed: tuple[str, ...] | None = _INPUTS.get(failed_key)
    if failed is None:
        failed = tuple(str(t) for t in (failed_frame(ws)["id"] if failed_ids is None
                                        else failed_ids))
        _remember(_INPUTS, failed_key, failed)
    return failed


def _confirmed(store: Store, failed: tuple[str, ...], revision: tuple[int, int]) -> dict[str, str]:
    """The failures' confirmed categories (cached on the store's URL and revision)."""
    from opinions.learn.confirmed import confirmed_gold

    confirmed_key = ("confirmed", str(store.engine.url), failed, revision)
    confirmed: dict[str, str] | None = _INPUTS.get(confirmed_key)
    if confirmed is None:
        wanted = set(failed)
        confirmed = {tid: g.category for tid, g in confirmed_gold(store).items()
                     if tid in wanted}
        _remember(_INPUTS, confirmed_key, confirmed)
    return confirmed


@dataclass(frozen=True)
class _Fit:
    """A fitted ranking, the confirmed labels it learned, and the change-log row up to which
    the labels were last compared with them (`revision`) with how many had changed then."""

    revision: int
    confirmed: dict[str, str]
    ranking: dict[str, float]
    changed: int = 0
    #: When the fit began (``time.monotonic``).
    fitted_at: float = 0.0


def classifier_ranking(store: Store, ws: Workspace, *, min_labels: int, wait: bool = False,
                       failed_ids: Sequence[str] | None = None) -> dict[str, float] | None:
    """The classifier's confidence in its proposal for each failure (confirmed ones too, see
    `opinions.learn.proposals.proposals`), once at least `min_labels` confirmed labels (in two
    or more categories) exist; None before that, or when `min_labels` is 0 (the setting
    `rerank_min_labels` turns the ordering off). Also None while the failures' features
    (from the evidence stored beside pre-labels; the finder runs only for failures without)
    or the first fit are still being computed in the background, unless `wait`: a page keeps
    the store's order.
    `failed_ids`: the workspace's failures in browse order (``failed_frame``), when the caller
    has them already; read from the workspace otherwise. The classifier is fitted again only
    once the confirmed labels have changed by `REFIT_SHARE` since its last fit (`refit_due`)
    and `REFIT_INTERVAL_S` has passed since it began (unless `wait`), in the background;
    until that fit is done the last one's ranking stands, and while fewer changes than that
    were logged at all since the fit, the labels are not even read."""
    if min_labels <= 0:
        return None
    from labeling.pool import workspace_failures
    from opinions.learn.proposals import (
        FEATURES,
        failure_features,
        proposals,
        ready,
        stored_evidence,
    )

    revision = store_revision(store)
    failed = _failures(ws, failed_ids)
    # A new pre-label run stores new evidence: the features follow it (its count).
    data_key = (str(ws.root), failed, revision[1])
    fit_key = (str(store.engine.url), *data_key)  # the labels learned from are this store's
    fitted: _Fit | None = _RANKINGS.get(fit_key)
    if fitted is not None and not wait \
            and time.monotonic() - fitted.fitted_at < REFIT_INTERVAL_S:
        return dict(fitted.ranking)
    # Every change of a label writes one change-log row: fewer rows since the last comparison
    # than a refit still needs, fewer changed labels.
    if fitted is not None and (revision[0] - fitted.revision
                               < _refit_after(fitted.confirmed) - fitted.changed):
        return dict(fitted.ranking)
    confirmed = _confirmed(store, failed, revision)
    if not ready(confirmed, min_labels):
        return None
    if fitted is not None and not refit_due(fitted.confirmed, confirmed):
        # Rows that changed no label (assignments, verdicts) are not counted again.
        _remember(_RANKINGS, fit_key, dataclasses.replace(
            fitted, revision=revision[0], changed=_changed(fitted.confirmed, confirmed)))
        return dict(fitted.ranking)
    features = FEATURES.get(
        data_key,
        lambda: failure_features(workspace_failures(ws),
                                 stored_evidence(store.prelabels.successful())),
        wait=wait,
    )
    if features is None:
        return dict(fitted.ranking) if fitted is not None else None

    def fit() -> None:
        began = time.monotonic()
        ranking = {tid: p.confidence for tid, p in proposals(features, confirmed).items()}
        _remember(_RANKINGS, fit_key, _Fit(revision[0], dict(confirmed), ranking,
                                           fitted_at=began))

    # The fit runs beside the page (a refit in the key's own run was the slowest keys of a
    # team): the page keeps the last ranking, or the store's order, until it is done.
    with _LOCK:
        for done in [key for key, thread in _FITTING.items() if not thread.is_alive()]:
            del _FITTING[done]
        running = _FITTING.get(fit_key)
        if running is None or not running.is_alive():
            running = _FITTING[fit_key] = threading.Thread(
                target=_quietly(fit), name="faillab-ranking-fit", daemon=True)
            running.start()
    if wait:
        running.join()
        fitted = _RANKINGS.get(fit_key)
        if fitted is None or refit_due(fitted.confirmed, confirmed):
            fit()  # the running fit had begun on older labels
            fitted = _RANKINGS.get(fit_key)
    return dict(fitted.ranking) if fitted is not None else None


def _quietly(work: Callable[[], None]) -> Callable[[], None]:
    """`work` for a background thread: a ranking is optional, so a failed fit leaves the last
    one (or the store's order) and the queue stays usable."""

    def run() -> None:
        with contextlib.suppress(Exception):
            work()

    return run


def _refit_after(fitted: Mapping[str, str]) -> int:
    """How many labels must have changed since a fit on `fitted` for a refit."""
    return max(1, math.ceil(REFIT_SHARE * len(fitted)))


def refit_due(fitted: Mapping[str, str], confirmed: Mapping[str, str]) -> bool:
    """Whether `confirmed` differs from the labels a fit learned from (`fitted`) in at least
    `REFIT_SHARE` of them: items newly confirmed, confirmed differently, or no longer
    confirmed."""
    return _changed(fitted, confirmed) >= _refit_after(fitted)


def _changed(fitted: Mapping[str, str], confirmed: Mapping[str, str]) -> int:
    """Items newly confirmed, confirmed differently, or no longer confirmed."""
    changed = sum(1 for tid, category in confirmed.items() if fitted.get(tid) != category)
    return changed + sum(1 for tid in fitted if tid not in confirmed)
