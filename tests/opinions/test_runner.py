"""The pre-label runner: caching, resuming, retries and concurrency, against the fake server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from llm.pricing import estimate_cost_usd
from opinions.prelabel.base import LabelResult, PrelabelKey, PrelabelRecord, RunStats
from opinions.prelabel.llm_labeller import GeminiLabeller
from opinions.prelabel.prompt import PROMPT_VERSION
from opinions.prelabel.protocol import SyncLabellerAdapter
from opinions.prelabel.run_errors import PrelabelRunAborted
from opinions.prelabel.runner import run_prelabels, run_prelabels_sync
from taxonomy import default_taxonomy
from tests.fake_gemini import Behaviour, FakeGemini
from trajectories.model import Run, Step, StepKind, Task, Trajectory

TAX = default_taxonomy()


class MemoryStore:
    """The smallest PrelabelStore: a dict, plus counters for what the runner did."""

    def __init__(self) -> None:
        self.records: dict[PrelabelKey, PrelabelRecord] = {}
        self.saves: list[PrelabelRecord] = []

    def get(self, key: PrelabelKey) -> PrelabelRecord | None:
        return self.records.get(key)

    def save(self, record: PrelabelRecord) -> None:
        self.records[record.key] = record
        self.saves.append(record)


class SleepRecorder:
    """Injected instead of asyncio.sleep: remembers the delays, waits for none of them."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


def make_trajectories(n: int) -> list[Trajectory]:
    return [
        Trajectory(
            task=Task(
                id=f"task-{i}",
                question=f"How many ICU stays for patient {i}?",
                ground_truth=[i],
                reference_sql="SELECT COUNT(*) FROM icustays",
            ),
            run=Run(name="r", model="agent"),
            steps=[Step(kind=StepKind.SQL, code=f"SELECT {i}", observation="[(0,)]")],
            final_answer=[0],
        ).with_id()
        for i in range(n)
    ]


def run(
    fake: FakeGemini,
    trajectories: list[Trajectory],
    store: MemoryStore,
    *,
    timeout_s: float = 10,
    **kw: Any,
) -> RunStats:
    kw.setdefault("sleep", SleepRecorder())

    async def go() -> RunStats:
        lab = GeminiLabeller(api_key="test-key", base_url=fake.base_url, timeout_s=timeout_s)
        try:
            return await run_prelabels(trajectories, lab, TAX, store, **kw)
        finally:
            await lab.aclose()

    return asyncio.run(go())


def test_success_saves_every_label_and_counts_calls_tokens_cost() -> None:
    ts = make_trajectories(5)
    store = MemoryStore()
    seen: list[tuple[int, int]] = []
    with FakeGemini() as fake:
        stats = run(fake, ts, store, progress=lambda d, n: seen.append((d, n)))
        assert fake.request_count == 5
    assert (stats.labelled, stats.failed, stats.cached, stats.calls) == (5, 0, 0, 5)
    assert stats.output_tokens == 5 * 60 and stats.input_tokens > 0
    assert stats.estimated_cost_usd == pytest.approx(
        estimate_cost_usd("gemini-2.5-pro", stats.input_tokens, stats.output_tokens)
    )
    assert stats.estimated_cost_usd > 0
    assert seen[0] == (0, 5) and seen[-1] == (5, 5)
    for t in ts:
        key = PrelabelKey(t.id or "", TAX.version, PROMPT_VERSION, "gemini-2.5-pro")
        rec = store.records[key]
        assert rec.ok and rec.result is not None and rec.result.category in TAX.keys


def test_429_then_success_honours_retry_after() -> None:
    ts = make_trajectories(3)
    sleep = SleepRecorder()
    store = MemoryStore()
    with FakeGemini(per_trajectory={ts[1].id or "": [Behaviour("429", retry_after=7)]}) as fake:
        stats = run(fake, ts, store, sleep=sleep, base_delay_s=0.01)
        assert fake.request_count == 4
    assert (stats.labelled, stats.failed, stats.calls) == (3, 0, 4)
    assert len(sleep.delays) == 1 and sleep.delays[0] >= 7
    assert [r.attempts for r in store.saves if r.key.trajectory_id == ts[1].id] == [2]


def test_500_then_success() -> None:
    ts = make_trajectories(2)
    sleep = SleepRecorder()
    with FakeGemini(per_trajectory={ts[0].id or "": ["500", "503"]}) as fake:
        stats = run(fake, ts, MemoryStore(), sleep=sleep, base_delay_s=1.0)
    assert (stats.labelled, stats.failed, stats.calls) == (2, 0, 4)
    # Exponential back-off with jitter: retry n waits in [base*2^(n-1)/2, base*2^(n-1)].
    assert 0.5 <= sleep.delays[0] <= 1.0 and 1.0 <= sleep.delays[1] <= 2.0


def test_persistent_500_is_a_recorded_failure_not_a_crash() -> None:
    ts = make_trajectories(3)
    store = MemoryStore()
    with FakeGemini(per_trajectory={ts[0].id or "": ["500"] * 10}) as fake:
        stats = run(fake, ts, store, max_attempts=4)
        assert fake.request_count == 4 + 2
    assert (stats.labelled, stats.failed, stats.calls) == (2, 1, 6)
    rec = next(r for r in store.saves if r.key.trajectory_id == ts[0].id)
    assert rec.result is None and rec.error is not None and "500" in rec.error
    assert rec.attempts == 4
    assert stats.errors and stats.errors[0].startswith(f"{ts[0].id}:")


def test_timeout_then_success() -> None:
    ts = make_trajectories(1)
    with FakeGemini(script=[Behaviour("timeout", delay_s=3)]) as fake:
        stats = run(fake, ts, MemoryStore(), timeout_s=0.3)
        assert fake.request_count == 2
    assert (stats.labelled, stats.calls) == (1, 2)


def test_persistent_timeout_fails_after_max_attempts() -> None:
    ts = make_trajectories(1)
    store = MemoryStore()
    with FakeGemini(default=Behaviour("timeout", delay_s=3)) as fake:
        stats = run(fake, ts, store, timeout_s=0.2, max_attempts=2)
    assert (stats.failed, stats.calls) == (1, 2)
    assert "timeout" in (store.saves[0].error or "")


def test_malformed_json_then_success() -> None:
    ts = make_trajectories(1)
    sleep = SleepRecorder()
    with FakeGemini(script=["malformed"]) as fake:
        stats = run(fake, ts, MemoryStore(), sleep=sleep)
    assert (stats.labelled, stats.calls) == (1, 2)
    assert sleep.delays == []  # an answer came back: no back-off needed


@pytest.mark.parametrize(
    ("kind", "error_kind"),
    [
        ("malformed", "malformed"),
        ("empty", "empty"),
        ("safety", "blocked"),
        ("prompt_blocked", "blocked"),
    ],
)
def test_unusable_answers_retried_a_limited_number_of_times(kind: str, error_kind: str) -> None:
    ts = make_trajectories(2)
    store = MemoryStore()
    with FakeGemini(per_trajectory={ts[0].id or "": [kind] * 10}) as fake:
        stats = run(fake, ts, store, max_attempts=5, max_invalid_attempts=2)
        assert fake.request_count == 2 + 1
    assert (stats.labelled, stats.failed, stats.calls) == (1, 1, 3)
    rec = next(r for r in store.saves if not r.ok)
    assert rec.error is not None and rec.error.startswith(error_kind)


def test_one_shot_safety_block_then_success() -> None:
    ts = make_trajectories(1)
    with FakeGemini(script=["safety"]) as fake:
        stats = run(fake, ts, MemoryStore())
    assert (stats.labelled, stats.calls) == (1, 2)


def test_bad_request_fails_only_that_item() -> None:
    ts = make_trajectories(3)
    with FakeGemini(per_trajectory={ts[2].id or "": ["400"]}) as fake:
        stats = run(fake, ts, MemoryStore())
    assert (stats.labelled, stats.failed, stats.calls) == (2, 1, 3)


def test_bad_credentials_abort_the_run() -> None:
    ts = make_trajectories(30)
    store = MemoryStore()
    with FakeGemini(default="401") as fake:
        with pytest.raises(PrelabelRunAborted, match="API key") as err:
            run(fake, ts, store, concurrency=2)
        assert fake.request_count <= 2  # stopped at once, not 30 doomed calls
    assert err.value.stats.calls == fake.request_count
    assert all(not r.ok for r in store.saves)


def test_concurrency_reaches_the_configured_bound() -> None:
    ts = make_trajectories(40)
    with FakeGemini(latency_s=0.2) as fake:
        stats = run(fake, ts, MemoryStore(), concurrency=8)
        assert fake.max_in_flight == 8
    assert stats.labelled == 40


def test_resumed_run_only_pays_for_the_missing_half() -> None:
    ts = make_trajectories(20)
    store = MemoryStore()
    with FakeGemini() as fake:
        first = run(fake, ts[:10], store)  # a run "killed" after the first half
        assert first.calls == 10
        fake.reset_records()
        second = run(fake, ts, store)
        asked = {r.trajectory_id for r in fake.requests}
    assert (second.cached, second.labelled, second.calls) == (10, 10, 10)
    assert asked == {t.id for t in ts[10:]}


def test_second_full_run_makes_zero_calls() -> None:
    ts = make_trajectories(12)
    store = MemoryStore()
    with FakeGemini() as fake:
        run(fake, ts, store)
        n = fake.request_count
        again = run(fake, ts, store)
        assert fake.request_count == n
    assert (again.calls, again.cached, again.labelled) == (0, 12, 0)


def test_previously_failed_items_are_retried_later() -> None:
    ts = make_trajectories(4)
    store = MemoryStore()
    with FakeGemini(per_trajectory={ts[0].id or "": ["500"] * 2}) as fake:
        first = run(fake, ts, store, max_attempts=2)
        assert first.failed == 1
        fake.reset_records()
        second = run(fake, ts, store)
        assert [r.trajectory_id for r in fake.requests] == [ts[0].id]
    assert (second.cached, second.labelled, second.calls) == (3, 1, 1)


def test_limit_caps_what_is_sent() -> None:
    ts = make_trajectories(10)
    with FakeGemini() as fake:
        stats = run(fake, ts, MemoryStore(), limit=3)
    assert (stats.labelled, stats.calls) == (3, 3)


class StubHeuristic:
    """A sync labeller like the heuristic one: runs inline, no calls."""

    name = "heuristic"
    version = "test"
    model = "heuristic"
    prompt_version = "rules-1"

    def label(self, trajectory: Trajectory, taxonomy_version: str) -> LabelResult:
        if trajectory.task.id == "task-1":
            raise RuntimeError("odd trajectory")
        return LabelResult(TAX.keys[0], 0.3, None, "rule", "heuristic", "test")


def test_sync_labeller_runs_through_the_same_runner() -> None:
    ts = make_trajectories(4)
    store = MemoryStore()
    stats = run_prelabels_sync(ts, SyncLabellerAdapter(StubHeuristic()), TAX, store)
    assert (stats.labelled, stats.failed, stats.calls, stats.estimated_cost_usd) == (3, 1, 0, 0.0)
    again = run_prelabels_sync(ts, SyncLabellerAdapter(StubHeuristic()), TAX, store)
    assert (again.cached, again.labelled, again.failed) == (3, 0, 1)


def test_real_heuristic_labeller_runs_through_the_runner() -> None:
    from opinions.prelabel.heuristic import HeuristicLabeller

    store = MemoryStore()
    stats = run_prelabels_sync(
        make_trajectories(5), SyncLabellerAdapter(HeuristicLabeller()), TAX, store
    )
    assert (stats.calls, stats.labelled, stats.failed) == (0, 5, 0)
    assert all(r.result is not None and r.result.category in TAX.keys for r in store.saves)
