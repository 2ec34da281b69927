"""Stratified, seeded audit sampling.

Allocation is proportional to stratum size with largest-remainder (Hamilton) rounding, so the
per-stratum counts always add up to exactly the requested sample size. Inside a stratum, items
are drawn round-robin over templates so the audit sees as many distinct task structures as the
budget allows before any template is audited twice.

Reproducibility: the same items, ``n`` and ``seed`` give the same sample whatever order the items
arrive in, because items are sorted by their key before any random choice is made.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from itertools import pairwise
from typing import Any, Generic, TypeVar

from labeling.audit.errors import AuditError
from labeling.audit.pool import Candidate, CandidatePool

__all__ = [
    "SampleResult",
    "StratumCount",
    "largest_remainder_allocation",
    "stratified_sample",
]

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


def _stable_order(keys: Iterable[K]) -> list[K]:
    """Keys sorted naturally when comparable (e.g. tuples of str), else by their text form."""
    keys = list(keys)
    try:
        return sorted(keys)  # type: ignore[type-var]
    except TypeError:
        return sorted(keys, key=repr)


def _bounded_quotas(
    sizes: dict[K, int], lower: dict[K, int], target: int
) -> dict[K, Fraction]:
    """Exact proportional quotas ``lam * size`` clamped to ``[lower, size]``, summing to target.

    Water-filling: strata whose proportional share falls outside their bounds are pinned to the
    bound and the multiplier is recomputed over the rest until nothing moves. Fractions keep the
    result exact, so later tie-breaking on remainders cannot depend on float noise.
    """
    pinned: dict[K, Fraction] = {}
    while True:
        free = [k for k in sizes if k not in pinned]
        free_total = sum(sizes[k] for k in free)
        left = target - sum(pinned.values())
        lam = Fraction(left, free_total) if free_total else Fraction(0)
        moved = False
        for k in free:
            q = lam * sizes[k]
            if q < lower[k]:
                pinned[k] = Fraction(lower[k])
                moved = True
            elif q > sizes[k]:
                pinned[k] = Fraction(sizes[k])
                moved = True
        if not moved:
            return {k: pinned.get(k, lam * sizes[k]) for k in sizes}


def largest_remainder_allocation(
    stratum_sizes: Mapping[K, int], n: int, *, min_one: bool = True
) -> dict[K, int]:
    """Split a sample of ``n`` across strata in proportion to their sizes (Hamilton method).

    - The result sums to exactly ``min(n, total size)`` and never exceeds a stratum's size.
    - With ``min_one`` and ``n`` at least the number of non-empty strata, every non-empty stratum
      gets at least one item (the others' shares shrink proportionally to pay for it).
    - Leftover units after flooring go to the largest remainders; ties go to the larger stratum,
      then to the earlier key in sorted order, so the result is deterministic.

    Every key of ``stratum_sizes`` appears in the result (empty strata get 0).
    """
    if n < 0:
        raise ValueError(f"sample size must be non-negative, got {n}")
    for k, size in stratum_sizes.items():
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"stratum {k!r} has an invalid size {size!r}")
    order = _stable_order(stratum_sizes)
    total = sum(stratum_sizes.values())
    target = min(n, total)
    if target == total:
        return {k: stratum_sizes[k] for k in order}
    nonempty = {k: stratum_sizes[k] for k in order if stratum_sizes[k] > 0}
    use_min_one = min_one and target >= len(nonempty)
    lower = {k: (1 if use_min_one else 0) for k in nonempty}
    quotas = _bounded_quotas(nonempty, lower, target)

    alloc = {k: int(q) for k, q in quotas.items()}  # floor: quotas are non-negative
    leftover = target - sum(alloc.values())
    # Fractional parts sum to `leftover` and are each < 1, so at least `leftover` strata have a
    # positive remainder; each of them is below its size (quota <= size, size integral), so
    # rounding up never breaks the cap.
    rank = {k: i for i, k in enumerate(order)}
    by_remainder = sorted(
        nonempty, key=lambda k: (-(quotas[k] - alloc[k]), -nonempty[k], rank[k])
    )
    for k in by_remainder[:leftover]:
        alloc[k] += 1
    return {k: alloc.get(k, 0) for k in order}


@dataclass(frozen=True)
class StratumCount(Generic[K]):
    """Population and sample counts for one stratum."""

    stratum: K
    population: int
    allocated: int
    templates_in_population: int
    templates_in_sample: int


@dataclass(frozen=True)
class SampleResult(Generic[T, K]):
    """Outcome of :func:`stratified_sample`.

    ``items`` are in stratum order (sorted strata), and within a stratum in draw order.
    ``n_unique_templates`` counts distinct non-missing template ids among the chosen items;
    items without a template are counted in ``n_without_template`` instead, since nothing says
    whether they share a structure.
    """

    items: tuple[T, ...]
    strata: tuple[StratumCount[K], ...]
    seed: int
    n: int
    n_population: int
    n_unique_templates: int
    n_without_template: int

    @property
    def n_selected(self) -> int:
        return len(self.items)

    def allocation(self) -> dict[K, int]:
        return {s.stratum: s.allocated for s in self.strata}


def stratified_sample(
    items: Sequence[T],
    n: int,
    *,
    seed: int,
    stratum: Callable[[T], K],
    template: Callable[[T], str | None],
    key: Callable[[T], str],
    min_one: bool = True,
) -> SampleResult[T, K]:
    """Draw a stratified sample of ``n`` items, spread across templates inside each stratum.

    Per stratum the allocation comes from :func:`largest_remainder_allocation`. Within the
    stratum the templates are shuffled, items inside each template are shuffled, and items are
    taken round-robin (first item of each template, then second of each, ...), so no template
    is drawn twice before every template of the stratum has been drawn once. Items without a
    template count as a template of their own.

    ``key`` must be unique per item: it fixes a canonical order so that the sample depends only
    on the set of items, ``n`` and ``seed``.
    """
    keyed = sorted(((key(it), it) for it in items), key=lambda p: p[0])
    for (k1, _), (k2, _) in pairwise(keyed):
        if k1 == k2:
            raise ValueError(f"item keys must be unique; {k1!r} occurs more than once")

    groups: dict[K, list[tuple[str, T]]] = {}
    for k, it in keyed:
        groups.setdefault(stratum(it), []).append((k, it))
    strata_order = _stable_order(groups)
    alloc = largest_remainder_allocation(
        {s: len(groups[s]) for s in strata_order}, n, min_one=min_one
    )

    rng = random.Random(seed)
    chosen: list[T] = []
    counts: list[StratumCount[K]] = []
    for s in strata_order:
        members = groups[s]
        by_template: dict[str, list[T]] = {}
        for k, it in members:
            tpl = template(it)
            # A NUL prefix keeps a missing template's per-item bucket from colliding with a
            # real template id.
            bucket = f"\0{k}" if tpl is None else tpl
            by_template.setdefault(bucket, []).append(it)
        template_ids = sorted(by_template)
        rng.shuffle(template_ids)
        queues = []
        for t in template_ids:
            bucket_items = list(by_template[t])  # already in key order
            rng.shuffle(bucket_items)
            queues.append(bucket_items)
        want = alloc[s]
        picked: list[T] = []
        depth = 0
        while len(picked) < want:
            for q in queues:
                if depth < len(q):
                    picked.append(q[depth])
                    if len(picked) == want:
                        break
            depth += 1
        chosen.extend(picked)
        counts.append(StratumCount(
            stratum=s,
            population=len(members),
            allocated=want,
            templates_in_population=len(template_ids),
            templates_in_sample=len({template(it) for it in picked if template(it) is not None})
            + sum(1 for it in picked if template(it) is None),
        ))

    real_templates = {tpl for it in chosen if (tpl := template(it)) is not None}
    return SampleResult(
        items=tuple(chosen),
        strata=tuple(counts),
        seed=seed,
        n=n,
        n_population=len(keyed),
        n_unique_templates=len(real_templates),
        n_without_template=sum(1 for it in chosen if template(it) is None),
    )


# ---- the audit's plan --------------------------------------------------------------------

DEFAULT_SAMPLE_SIZE = 500


@dataclass(frozen=True)
class AuditPlan:
    pool: CandidatePool
    sample: SampleResult[Candidate, tuple[str, str]]
    n_requested: int
    seed: int

    @property
    def items(self) -> tuple[Candidate, ...]:
        return self.sample.items

    def strata(self) -> list[dict[str, Any]]:
        return [
            {"intent": s.stratum[0] or None, "scope": s.stratum[1] or None,
             "population": s.population, "allocated": s.allocated,
             "templates_in_population": s.templates_in_population,
             "templates_in_sample": s.templates_in_sample}
            for s in self.sample.strata
        ]

    def summary(self) -> dict[str, Any]:
        """What the CLI prints and what the definition records about the sample."""
        return {
            "runs": list(self.pool.runs),
            "n": self.n_requested,
            "seed": self.seed,
            "pool_size": self.pool.n_candidates,
            "total_tasks": self.pool.n_total_tasks,
            "candidate_share": self.pool.share,
            "sample_size": self.sample.n_selected,
            "n_unique_templates": self.sample.n_unique_templates,
            "strata": self.strata(),
        }


def plan_audit(pool: CandidatePool, n: int = DEFAULT_SAMPLE_SIZE, seed: int = 0) -> AuditPlan:
    """Stratified sample of ``n`` candidates (capped at the pool) over intent x scope.

    Proportional largest-remainder allocation with at least one item per non-empty stratum and
    round-robin over templates inside a stratum; same pool, n and seed give the same sample.
    """
    if n < 1:
        raise AuditError(f"the sample size must be at least 1, not {n}")
    if not pool.candidates:
        raise AuditError("no candidate tasks: every task was solved by at least one selected "
                         "run (choose fewer or weaker runs)")
    sample = stratified_sample(
        pool.candidates, n, seed=seed,
        stratum=lambda c: c.stratum, template=lambda c: c.template_id, key=lambda c: c.task_id,
    )
    return AuditPlan(pool=pool, sample=sample, n_requested=n, seed=seed)
