"""Two threads against one: ``canonicalize_many`` and ``Deduplicator.claim_many`` (``local``).

Each thread works through batches of its own (10,000 URLs, the CLI's batch); the figure is
URLs/s of two threads over one, rounds alternating, in one run::

    pytest bench/test_bench_threads.py --benchmark-only -s

A ratio near 2 needs the compiled work to run without the GIL; a ratio near 1 says it holds it
(docs/performance.md says which parts do).
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from pathlib import Path
from typing import Callable, Dict, List, Sequence

import pytest

from crawldedup import Deduplicator, canonicalize_many
from crawldedup.canonical import HAS_EXTENSION

BATCH = 10_000
BATCHES_PER_THREAD = 20
ROUNDS = 5

pytestmark = pytest.mark.skipif(not HAS_EXTENSION, reason="the figure is the compiled extension's")


def _batches(thread: int) -> List[List[str]]:
    return [[f"HTTPS://Shop.Example:443/t{thread}/item/{batch}-{i}/?b=2&a=1&utm_source=x#top" for i in range(BATCH)]
            for batch in range(BATCHES_PER_THREAD)]


def _rate(work: Callable[[Sequence[str]], object], threads: int, batches: Dict[int, List[List[str]]]) -> float:
    def run(thread: int) -> None:
        for batch in batches[thread]:
            work(batch)

    workers = [threading.Thread(target=run, args=(thread,)) for thread in range(threads)]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return threads * BATCHES_PER_THREAD * BATCH / (time.perf_counter() - started)


def _compare(benchmark, name: str, work: Callable[[Sequence[str]], object]) -> None:
    batches = {thread: _batches(thread) for thread in range(2)}
    rates: Dict[int, List[float]] = {1: [], 2: []}

    def one_round() -> None:
        for threads in (1, 2):
            rates[threads].append(_rate(work, threads, batches))

    benchmark.group = "two threads against one"
    benchmark.pedantic(one_round, rounds=ROUNDS, iterations=1)
    medians = {threads: statistics.median(values) for threads, values in rates.items()}
    ratio = medians[2] / medians[1]
    benchmark.extra_info.update(ratio=ratio, load=os.getloadavg()[0],
                                **{f"threads{threads}_urls_per_s": values for threads, values in rates.items()})
    for threads, values in rates.items():
        print(f"\n{name}, {threads} thread(s): median {medians[threads]:,.0f} URLs/s, "
              f"range {min(values):,.0f} to {max(values):,.0f}")
    print(f"{name}: two threads / one: {ratio:.2f}x (load average {os.getloadavg()[0]:.1f})")


def test_canonicalize_many_threads(benchmark) -> None:
    _compare(benchmark, "canonicalize_many", canonicalize_many)


def test_claim_many_local_threads(benchmark, tmp_path: Path) -> None:
    with Deduplicator("local", state=tmp_path / "threads.bloom", capacity=50_000_000) as dedup:
        _compare(benchmark, "claim_many (local)", dedup.claim_many)
