"""The asyncio Deduplicator against the blocking one on threads, and the event loop's lag.

Claims per second: the same 128,000 new URLs in batches of 1,000, shared out among 1, 16 or
64 concurrent tasks of one AsyncDeduplicator, or as many threads sharing one Deduplicator,
against one local Redis (``set`` store), each case in a fresh namespace. The two kinds run as
alternating pairs, ``ROUNDS`` times; the summary gives the median claims/s of each, their
range and the ratio. The loop's lag: 16 tasks claim 10,000-URL batches while a ticker task
sleeps 1 ms at a time; its worst lag is printed beside the same ticker's on an idle loop (the
machine's own jitter). On a shared machine most of a worst lag is the kernel keeping the loop's
thread off the CPU (a busy redis-server alone lags an idle client's loop by 100 ms here, at load
10): the ticker also reads how long its thread waited in the kernel's run queue during each
tick (``/proc/thread-self/schedstat``), and the lag less that wait, what the process itself
holds the loop for (its own work, and waits for the GIL), is held under 10 ms with the
``local`` strategy. With a Redis store on the same overloaded machine the GIL waits grow: the
worker thread, descheduled by the kernel while it holds the GIL, holds the loop too (docs/async.md).
Run::

    pytest bench/test_bench_async.py -s
"""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from typing import Dict, List, Sequence, Tuple

import pytest

from crawldedup import AsyncDeduplicator, Deduplicator

URLS = [f"https://shop.example/item/{i}?utm_source=bench&color={i % 7}" for i in range(128_000)]
BATCH = 1_000
BATCHES = [URLS[i : i + BATCH] for i in range(0, len(URLS), BATCH)]
ROUNDS = 3
LAG_BATCHES = [[f"https://shop.example/t{t}/p/{i}?utm_source=x" for i in range(10_000)] for t in range(16)]
RESULTS: Dict[str, List[float]] = {}


def shares(workers: int) -> List[Sequence[List[str]]]:
    """The batches dealt out to ``workers``, round robin."""
    return [BATCHES[w::workers] for w in range(workers)]


def run_sync(settings: dict, workers: int) -> float:
    with Deduplicator("set", **settings) as dedup:
        won: List[int] = []

        def work(batches: Sequence[List[str]]) -> None:
            won.append(sum(sum(dedup.claim_many(batch)) for batch in batches))

        threads = [threading.Thread(target=work, args=(share,)) for share in shares(workers)]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
    assert sum(won) == len(URLS)
    return len(URLS) / elapsed


async def run_async(settings: dict, workers: int) -> float:
    async with AsyncDeduplicator("set", **settings) as dedup:

        async def work(batches: Sequence[List[str]]) -> int:
            return sum([sum(await dedup.claim_many(batch)) for batch in batches])

        started = time.perf_counter()
        won = await asyncio.gather(*(work(share) for share in shares(workers)))
        elapsed = time.perf_counter() - started
    assert sum(won) == len(URLS)
    return len(URLS) / elapsed


@pytest.mark.parametrize("workers", [1, 16, 64])
def test_claims_per_second(workers, redis_url):
    for round_ in range(ROUNDS):
        for kind in ("sync", "async"):
            settings = {"redis_url": redis_url, "namespace": f"bench-{kind}-{workers}-{round_}", "capacity": 1_000_000}
            rate = run_sync(settings, workers) if kind == "sync" else asyncio.run(run_async(settings, workers))
            RESULTS.setdefault(f"{kind} x{workers}", []).append(rate)


def run_queue_seconds() -> float:
    """How long the calling thread has waited in the kernel's run queue, in seconds (0 where the
    kernel does not say)."""
    try:
        with open("/proc/thread-self/schedstat") as stats:
            return int(stats.read().split()[1]) / 1e9
    except OSError:
        return 0.0


async def worst_lag(strategy: str, redis_url: str, namespace: str) -> Tuple[float, float]:
    """The ticker's worst lag while 16 tasks claim (``strategy`` "idle": on an idle loop), and
    its worst lag less the time its thread waited for a CPU."""
    worst, own, running = 0.0, 0.0, True
    waited = run_queue_seconds

    async def ticker() -> None:
        nonlocal worst, own
        while running:
            before, queued = time.perf_counter(), waited()
            await asyncio.sleep(0.001)
            lag = time.perf_counter() - before - 0.001
            worst, own = max(worst, lag), max(own, lag - (waited() - queued))

    tick = asyncio.ensure_future(ticker())
    if strategy == "idle":
        await asyncio.sleep(0.5)
    else:
        async with AsyncDeduplicator(strategy, redis_url=redis_url, namespace=namespace, capacity=1_000_000) as d:
            won = await asyncio.gather(*(d.claim_many(batch) for batch in LAG_BATCHES))
        assert [sum(w) for w in won] == [10_000] * 16
    running = False
    await tick
    return worst, own


@pytest.mark.parametrize("strategy", ["idle", "local", "set"])
def test_loop_lag(strategy, redis_url):
    lags = [asyncio.run(worst_lag(strategy, redis_url, f"lag-{strategy}-{r}")) for r in range(ROUNDS)]
    RESULTS[f"lag {strategy}"] = [wall for wall, _ in lags]
    RESULTS[f"lag {strategy} less run-queue waits"] = [own for _, own in lags]
    if strategy == "local":  # what the process holds the loop for: its own work, in its worker thread
        assert statistics.median(own for _, own in lags) < 0.010


def test_summary():
    for name, values in sorted(RESULTS.items()):
        if name.startswith("lag"):
            print(
                f"{name}: worst loop lag median {statistics.median(values) * 1000:.1f} ms "
                f"(range {min(values) * 1000:.1f}-{max(values) * 1000:.1f})"
            )
        else:
            print(f"{name}: {statistics.median(values):,.0f} claims/s (range {min(values):,.0f}-{max(values):,.0f})")
    for workers in (1, 16, 64):
        sync, async_ = RESULTS.get(f"sync x{workers}"), RESULTS.get(f"async x{workers}")
        if sync and async_:
            print(f"async/sync with {workers}: {statistics.median(async_) / statistics.median(sync):.2f}")
