"""Two threads against one: ``canonicalize_many``, ``Deduplicator.claim_many`` (``local``), and
``crawldedup filter``'s preparation of a batch of frontier lines (what ``--jobs`` shares out).

Each thread works through batches of its own (10,000 URLs, the CLI's batch); the figure is
URLs/s of two threads over one, rounds alternating, in one run::

    pytest bench/test_bench_threads.py --benchmark-only -s

A ratio near 2 needs the compiled work to run without the GIL; a ratio near 1 says it holds it
(docs/performance.md says which parts do). The wall clock is the figure, and only means
something on a machine with two idle cores: each run also prints its threads' CPU time per URL
and the cores they kept busy (CPU time over wall time), so that a crowded machine (fewer cores
busy) reads apart from threads waiting for the GIL or for each other.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Dict, List, NamedTuple, Sequence

import pytest

from crawldedup import Deduplicator, canonicalize_many
from crawldedup.canonical import DEFAULT_POLICY, HAS_EXTENSION
from crawldedup.cli.filter import LineBatch, prepare_lines

BATCH = 10_000
BATCHES_PER_THREAD = 20
FRONTIER_SCRIPT = Path(__file__).resolve().parent.parent / "examples" / "frontier.py"
ROUNDS = 5

pytestmark = pytest.mark.skipif(not HAS_EXTENSION, reason="the figure is the compiled extension's")


def _batches(thread: int) -> List[List[str]]:
    return [
        [f"HTTPS://Shop.Example:443/t{thread}/item/{batch}-{i}/?b=2&a=1&utm_source=x#top" for i in range(BATCH)]
        for batch in range(BATCHES_PER_THREAD)
    ]


class Run(NamedTuple):
    urls_per_s: float
    cpu_ns_per_url: float  # the threads' CPU time (time.thread_time), summed, per URL
    cores_busy: float  # that CPU time over the wall time


def _rate(work: Callable[[Sequence[str]], object], threads: int, batches: Dict[int, List[List[str]]]) -> Run:
    cpu: Dict[int, float] = {}

    def run(thread: int) -> None:
        started = time.thread_time()
        for batch in batches[thread]:
            work(batch)
        cpu[thread] = time.thread_time() - started

    workers = [threading.Thread(target=run, args=(thread,)) for thread in range(threads)]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    wall = time.perf_counter() - started
    urls = threads * BATCHES_PER_THREAD * BATCH
    return Run(urls / wall, sum(cpu.values()) / urls * 1e9, sum(cpu.values()) / wall)


def _compare(benchmark, name: str, work: Callable[[Sequence[str]], object], batches: Dict[int, list] = None) -> None:
    batches = batches or {thread: _batches(thread) for thread in range(2)}
    rates: Dict[int, List[Run]] = {1: [], 2: []}

    def one_round() -> None:
        for threads in (1, 2):
            rates[threads].append(_rate(work, threads, batches))

    benchmark.group = "two threads against one"
    benchmark.pedantic(one_round, rounds=ROUNDS, iterations=1)
    medians = {threads: statistics.median(run.urls_per_s for run in runs) for threads, runs in rates.items()}
    ratio = medians[2] / medians[1]
    benchmark.extra_info.update(
        ratio=ratio,
        load=os.getloadavg()[0],
        **{f"threads{threads}": [run._asdict() for run in runs] for threads, runs in rates.items()},
    )
    for threads, runs in rates.items():
        speeds = [run.urls_per_s for run in runs]
        print(
            f"\n{name}, {threads} thread(s): median {medians[threads]:,.0f} URLs/s, "
            f"range {min(speeds):,.0f} to {max(speeds):,.0f}; CPU time a URL median "
            f"{statistics.median(run.cpu_ns_per_url for run in runs):.0f} ns, cores busy median "
            f"{statistics.median(run.cores_busy for run in runs):.2f}"
        )
    print(f"{name}: two threads / one: {ratio:.2f}x (load average {os.getloadavg()[0]:.1f})")


def test_canonicalize_many_threads(benchmark) -> None:
    _compare(benchmark, "canonicalize_many", canonicalize_many)


def test_claim_many_local_threads(benchmark, tmp_path: Path) -> None:
    with Deduplicator("local", state=tmp_path / "threads.bloom", capacity=50_000_000) as dedup:
        _compare(benchmark, "claim_many (local)", dedup.claim_many)


def test_filter_batch_preparation_threads(benchmark) -> None:
    """``prepare_lines`` (decode, split the ``BASE<TAB>LINK`` lines, canonicalize, fingerprint)
    on batches of the example frontier: the work ``crawldedup filter --jobs`` shares out."""
    links = 2 * BATCHES_PER_THREAD * BATCH
    lines = subprocess.run(
        [sys.executable, str(FRONTIER_SCRIPT), "--links", str(links), "--pages", "5000", "--seed", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        check=True,
    ).stdout.split(b"\n")
    batches = {
        thread: [
            LineBatch(b"\n".join(lines[start : start + BATCH]), None, False)
            for start in range(thread * links // 2, (thread + 1) * links // 2, BATCH)
        ]
        for thread in range(2)
    }
    _compare(benchmark, "filter's prepare_lines", lambda batch: prepare_lines(batch, DEFAULT_POLICY), batches)
