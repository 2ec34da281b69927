"""Routing by measured trust (opinions.learn.trust): what is left to a machine, and why."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from labeling.queue import take_unassigned
from labeling.store import Store, open_store
from opinions.learn.calibration import Observation, fit_calibration
from opinions.learn.trust import Destination, machine_routing, route_by_trust
from opinions.prelabel.base import LabelResult, PrelabelKey, PrelabelRecord
from tests.support import make_trajectory, postgres_database
from trajectories.model import Task
from trajectories.workspace import Workspace


@dataclass(frozen=True)
class Opinion:
    category: str
    confidence: float | None
    labeller: str | None


def _measured(labeller: str, category: str, n: int, rate: float, seed: int = 0
              ) -> list[Observation]:
    """`n` people-checked items of which a share `rate` agreed, at raw confidence 0.8."""
    rng = random.Random(seed)
    return [Observation(labeller, category, 0.8, rng.random() < rate, f"{labeller}-{i}")
            for i in range(n)]


def test_with_no_measurements_nothing_is_left_to_a_machine() -> None:
    calibration = fit_calibration([])  # the shipped development prior alone
    opinions = {
        "h1": Opinion("sql_logic_error", 0.95, "heuristic"),
        "g1": Opinion("semantic_misunderstanding", 0.99, "gemini"),
        "n1": None,
    }
    routing = route_by_trust(opinions, calibration, target=0.9, min_checked=30,
                             spot_check_share=0.1)
    assert routing.left_to_machine == frozenset()
    assert routing.routes["g1"].destination is Destination.UNMEASURED
    assert routing.routes["g1"].probability is None  # unknown, never a guess
    assert routing.routes["n1"].destination is Destination.NO_PRELABEL
    assert routing.routes["h1"].destination in (Destination.TOO_FEW_CHECKS,
                                                Destination.NOT_TRUSTED)
    assert all(r.why for r in routing.routes.values())


def test_trust_needs_both_the_target_and_enough_checked_items() -> None:
    calibration = fit_calibration([
        *_measured("gemini", "sql_logic_error", 60, 0.97),
        *_measured("gemini", "semantic_misunderstanding", 25, 1.0, seed=1),
        *_measured("gemini", "answer_format_error", 60, 0.5, seed=2),
    ], prior={})
    opinions = {
        "trusted": Opinion("sql_logic_error", 0.8, "gemini"),
        "few": Opinion("semantic_misunderstanding", 0.8, "gemini"),
        "weak": Opinion("answer_format_error", 0.8, "gemini"),
    }
    routing = route_by_trust(opinions, calibration, target=0.9, min_checked=30,
                             spot_check_share=0.0)
    assert routing.left_to_machine == {"trusted"}
    assert routing.routes["few"].destination is Destination.TOO_FEW_CHECKS
    assert "25 of the 30" in routing.routes["few"].why
    assert routing.routes["weak"].destination is Destination.NOT_TRUSTED
    # A lower bar for checked items lets the well-measured small category through.
    looser = route_by_trust(opinions, calibration, target=0.9, min_checked=20,
                            spot_check_share=0.0)
    assert looser.left_to_machine == {"trusted", "few"}


def test_spot_checks_are_a_seeded_share_of_the_trusted_items() -> None:
    calibration = fit_calibration(_measured("gemini", "sql_logic_error", 80, 0.98), prior={})
    opinions = {f"t{i:03d}": Opinion("sql_logic_error", 0.8, "gemini") for i in range(100)}
    routing = route_by_trust(opinions, calibration, target=0.9, min_checked=30,
                             spot_check_share=0.2, seed=3)
    assert routing.count(Destination.SPOT_CHECK) == 20
    assert routing.count(Destination.MACHINE) == 80
    again = route_by_trust(opinions, calibration, target=0.9, min_checked=30,
                           spot_check_share=0.2, seed=3)
    assert again.by_destination == routing.by_destination
    other = route_by_trust(opinions, calibration, target=0.9, min_checked=30,
                           spot_check_share=0.2, seed=4)
    assert other.by_destination[Destination.SPOT_CHECK] != \
        routing.by_destination[Destination.SPOT_CHECK]


def test_what_is_left_to_a_machine_agrees_with_people_at_the_target() -> None:
    """A simulated labeller whose raw confidence overstates its accuracy by a category-
    dependent amount: once calibrated on checked items, the items routing leaves to it
    agree with people at least as often as the target says."""
    rng = random.Random(7)
    truth = {"sql_logic_error": 0.97, "semantic_misunderstanding": 0.75,
             "medical_code_lookup_error": 0.92}
    checked = [Observation("llm", c, 0.9, rng.random() < p, f"c-{c}-{i}")
               for c, p in truth.items() for i in range(120)]
    calibration = fit_calibration(checked, prior={})
    new = {f"n-{c}-{i}": (c, rng.random() < p) for c, p in truth.items() for i in range(400)}
    routing = route_by_trust({tid: Opinion(c, 0.9, "llm") for tid, (c, _) in new.items()},
                             calibration, target=0.9, min_checked=30, spot_check_share=0.0)
    left = routing.left_to_machine
    assert left  # the accurate categories are trusted ...
    assert not any(tid.startswith("n-semantic") for tid in left)  # ... the weak one is not
    agreed = sum(new[tid][1] for tid in left) / len(left)
    assert agreed >= 0.9


@pytest.fixture(params=["sqlite", "postgresql"])
def team(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Workspace, Store]]:
    ws = Workspace(tmp_path / "ws")
    ws.add([(make_trajectory(task=Task(id=f"q{i}", question=f"question {i}?",
                                       ground_truth=[[52]]), final_answer=7).with_id(), None)
            for i in range(6)])
    if request.param == "sqlite":
        store = open_store(f"sqlite:///{tmp_path / 'a.sqlite'}")
        yield ws, store
        store.close()
        return
    with postgres_database("faillab_trust") as url:
        store = open_store(url)
        yield ws, store
        store.close()


@pytest.mark.postgres
def test_queues_and_take_follow_the_routing(team: tuple[Workspace, Store]) -> None:
    """Trusted items are nobody's work, spot checks and untrusted ones are handed out like
    any other item, and with no measurement every item goes to people."""
    ws, store = team
    store.users.add("ana", "annotator")
    store.users.add("ben", "annotator")
    ids = [row["id"] for row in ws.list(failed=True)]
    store.taxonomies.save("v", "t", {"name": "t", "version": "1", "categories": [
        {"key": "sql_logic_error", "name": "SQL", "definition": "d"}]})
    for tid in ids:
        store.prelabels.save(PrelabelRecord(
            key=PrelabelKey(tid, "v", "p", "m"),
            result=LabelResult(category="sql_logic_error", confidence=0.8, first_error_step=1,
                               rationale="r", labeller="gemini", labeller_version="1")))
    none_measured = machine_routing(store, target=0.9, min_checked=30, spot_check_share=0.1)
    assert none_measured.left_to_machine == frozenset()
    assert take_unassigned(store, ws, "ana", 2,
                           left_to_machine=none_measured.left_to_machine) == 2
    machine = frozenset(ids[2:4])  # as a routing that trusts these two would say
    assert take_unassigned(store, ws, "ben", 10, left_to_machine=machine) == 2
    taken = {tid for tid, _user, _queue in store.queues.assignments()}
    assert taken == set(ids) - machine
    store.queues.assign(ids, ["ana"], overlap=1)
    queue = store.queues.next_items("ana", left_to_machine=machine)
    assert set(queue) == set(ids) - machine


@pytest.mark.postgres
def test_with_overlap_a_second_annotator_takes_what_a_first_one_took(
        team: tuple[Workspace, Store]) -> None:
    ws, store = team
    for name in ("ana", "ben", "cy"):
        store.users.add(name, "annotator")
    ids = [row["id"] for row in ws.list(failed=True)]
    assert take_unassigned(store, ws, "ana", 3) == 3
    assert take_unassigned(store, ws, "ben", 10) == 3  # overlap 1: only what nobody holds
    assert take_unassigned(store, ws, "cy", 10, overlap=2) == 6  # each item has one holder
    assert take_unassigned(store, ws, "cy", 10, overlap=2) == 0  # never twice to one person
    held = [tid for tid, _user, _queue in store.queues.assignments()]
    assert sorted(held) == sorted(ids * 2)
    with pytest.raises(ValueError):
        take_unassigned(store, ws, "ana", 1, overlap=0)
