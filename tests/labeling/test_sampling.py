"""Largest-remainder allocation and seeded, template-spread stratified sampling."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

import pytest

from labeling.audit.sampling import SampleResult, largest_remainder_allocation, stratified_sample


def test_allocation_sums_exactly_over_many_random_cases() -> None:
    rng = random.Random(20240611)
    for _ in range(500):
        k = rng.randint(1, 15)
        sizes = {f"s{i}": rng.choice([0, 1, 2, rng.randint(0, 400)]) for i in range(k)}
        total = sum(sizes.values())
        n = rng.randint(0, total + 20)
        for min_one in (True, False):
            alloc = largest_remainder_allocation(sizes, n, min_one=min_one)
            assert set(alloc) == set(sizes)
            assert sum(alloc.values()) == min(n, total)
            assert all(0 <= alloc[s] <= sizes[s] for s in sizes)
            nonempty = [s for s in sizes if sizes[s] > 0]
            if min_one and n >= len(nonempty):
                assert all(alloc[s] >= 1 for s in nonempty)
            if not min_one and total:
                # Hamilton rounding never strays more than one unit from the exact quota.
                for s in sizes:
                    assert abs(alloc[s] - min(n, total) * sizes[s] / total) < 1


def test_paper_allocation_shape() -> None:
    sizes = {("Labs", "patient"): 300, ("Labs", "population"): 200, ("Cost", "patient"): 454}
    alloc = largest_remainder_allocation(sizes, 500)
    assert sum(alloc.values()) == 500
    assert alloc == {("Cost", "patient"): 238, ("Labs", "patient"): 157,
                     ("Labs", "population"): 105}


def test_min_one_rule() -> None:
    sizes = {"big": 1000, "tiny": 1, "small": 3}
    assert largest_remainder_allocation(sizes, 10) == {"big": 8, "small": 1, "tiny": 1}
    assert largest_remainder_allocation(sizes, 10, min_one=False) == {
        "big": 10, "small": 0, "tiny": 0,
    }
    # Fewer slots than non-empty strata: min-one cannot hold, plain proportional rounding.
    assert largest_remainder_allocation(sizes, 2) == {"big": 2, "small": 0, "tiny": 0}


def test_cap_at_stratum_size_and_overflow_redistributed() -> None:
    sizes = {"a": 2, "b": 2, "c": 100}
    alloc = largest_remainder_allocation(sizes, 103)
    assert alloc == {"a": 2, "b": 2, "c": 99}
    assert largest_remainder_allocation(sizes, 1000) == sizes
    assert largest_remainder_allocation({"a": 0, "b": 0}, 5) == {"a": 0, "b": 0}


def test_deterministic_ties() -> None:
    sizes = {"x": 5, "y": 5, "z": 5}
    first = largest_remainder_allocation(sizes, 4, min_one=False)
    assert first == {"x": 2, "y": 1, "z": 1}  # equal remainders: earlier key wins
    reordered = {"z": 5, "x": 5, "y": 5}
    assert largest_remainder_allocation(reordered, 4, min_one=False) == first


def test_allocation_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        largest_remainder_allocation({"a": 1}, -1)
    with pytest.raises(ValueError):
        largest_remainder_allocation({"a": -3}, 1)


@dataclass(frozen=True)
class Task:
    task_id: str
    intent: str
    scope: str
    template: str | None


def _population(seed: int = 1) -> list[Task]:
    rng = random.Random(seed)
    tasks = []
    for i in range(954):
        intent = rng.choice(["Demographics", "Vitals", "Medications", "Cost", "Labs", "Diagnoses"])
        scope = rng.choice(["patient", "population"])
        tpl = None if i % 97 == 0 else f"{intent}-{scope}-{rng.randint(0, 40)}"
        tasks.append(Task(f"task-{i:04d}", intent, scope, tpl))
    return tasks


def _draw(tasks: list[Task], n: int = 500, seed: int = 11) -> SampleResult[Task, tuple[str, str]]:
    return stratified_sample(
        tasks, n, seed=seed,
        stratum=lambda t: (t.intent, t.scope),
        template=lambda t: t.template,
        key=lambda t: t.task_id,
    )


def test_sample_size_and_strata_counts() -> None:
    tasks = _population()
    res = _draw(tasks)
    assert res.n_selected == 500 and res.n == 500 and res.seed == 11
    assert res.n_population == 954
    assert len({t.task_id for t in res.items}) == 500
    assert sum(s.population for s in res.strata) == 954
    assert sum(s.allocated for s in res.strata) == 500
    got = Counter((t.intent, t.scope) for t in res.items)
    for s in res.strata:
        assert got[s.stratum] == s.allocated
    assert res.allocation() == largest_remainder_allocation(
        Counter((t.intent, t.scope) for t in tasks), 500
    )
    assert res.n_unique_templates == len({t.template for t in res.items if t.template})
    assert res.n_without_template == sum(1 for t in res.items if t.template is None)


def test_same_seed_same_sample_different_seed_different() -> None:
    tasks = _population()
    assert _draw(tasks).items == _draw(tasks).items
    assert _draw(tasks).items != _draw(tasks, seed=12).items


def test_input_order_does_not_matter() -> None:
    tasks = _population()
    shuffled = list(tasks)
    random.Random(99).shuffle(shuffled)
    assert _draw(tasks).items == _draw(shuffled).items
    assert _draw(list(reversed(tasks))).items == _draw(tasks).items


def test_template_spread_within_stratum() -> None:
    tasks = _population()
    res = _draw(tasks)
    for s in res.strata:
        members = [t for t in tasks if (t.intent, t.scope) == s.stratum]
        pop_templates = {t.template or t.task_id for t in members}
        picked = [t.template or t.task_id for t in res.items if (t.intent, t.scope) == s.stratum]
        counts = Counter(picked)
        if len(picked) <= len(pop_templates):
            assert max(counts.values()) == 1
        else:
            # every template is used before any is used a second time
            assert set(counts) == pop_templates
        # the draw order never repeats a template before every template was drawn once
        seen: set[str] = set()
        for tpl in picked:
            if tpl in seen:
                assert seen == pop_templates
                break
            seen.add(tpl)


def test_round_robin_depth_is_balanced() -> None:
    # One stratum, 3 templates of sizes 5/2/1; 6 picks -> each template in turn, then the rest.
    tasks = [Task(f"a{i}", "Labs", "patient", "A") for i in range(5)]
    tasks += [Task(f"b{i}", "Labs", "patient", "B") for i in range(2)]
    tasks += [Task("c0", "Labs", "patient", "C")]
    res = _draw(tasks, n=6, seed=5)
    templates = [t.template or "" for t in res.items]
    assert sorted(templates[:3]) == ["A", "B", "C"]
    assert Counter(templates) == Counter({"A": 3, "B": 2, "C": 1})


def test_duplicate_keys_rejected() -> None:
    tasks = [Task("x", "Labs", "patient", "A"), Task("x", "Labs", "patient", "B")]
    with pytest.raises(ValueError, match="unique"):
        _draw(tasks, n=1)


def test_n_larger_than_population_takes_everything() -> None:
    tasks = _population()[:30]
    res = _draw(tasks, n=100)
    assert sorted(t.task_id for t in res.items) == sorted(t.task_id for t in tasks)
