"""The exact tier against its peers on one stream: the Bloom filter alone, a Python set of
fingerprints and SQLite, claims/s and bytes per URL, side by side in one run.

Each peer claims the same fingerprints (``(h1, h2)`` rows of splitmix64 of the URL's number:
the claim step after hashing, as the Deduplicator calls it): an all-new fill of
``CRAWLDEDUP_BENCH_STORED`` URLs (default 1,000,000) in batches of 100,000, then a stream with
90% repeats (of stored URLs, drawn at random) in batches of 10,000. Rounds alternate the peers;
medians and ranges of the rounds. The pages lost (a new URL answered seen) are counted: the
exact tier, the set and SQLite lose none, the Bloom filter alone loses its false positives::

    pytest bench/test_bench_exact.py --benchmark-only -s
    CRAWLDEDUP_BENCH_STORED=10000000 pytest bench/test_bench_exact.py --benchmark-only -s   # docs/performance.md

The 1e8 and 1e9 figures are bench/scripts/exact_scale.py's (run by hand).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Callable, Dict, List, NamedTuple

import numpy as np
import pytest

from crawldedup import BloomFilter
from crawldedup.bloom import GrowingFilter
from crawldedup.canonical import DEFAULT_POLICY
from crawldedup.exact import HAS_EXTENSION, ExactFilter, tier_directory
from crawldedup.fingerprints import Fingerprints
from crawldedup.stores.sqlite import SQLiteStore

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from exact_scale import fingerprints  # noqa: E402

STORED = int(os.environ.get("CRAWLDEDUP_BENCH_STORED", "1000000"))
FILL_BATCH = 100_000
REPEAT_BATCH = 10_000
REPEAT_BATCHES = max(20, min(200, STORED // REPEAT_BATCH))
#: Both filters are sized for the URLs they will hold (the stored and the repeat stream's new
#: ones) past the point where a filter grows (87% of capacity at 1%): none grows here.
CAPACITY = int((STORED + REPEAT_BATCHES * REPEAT_BATCH // 10) / 0.85)
ROUNDS = 3


class Peer(NamedTuple):
    """A claim step on ``(h1, h2)`` rows (True where new) and the bytes it holds."""

    claim: Callable[[np.ndarray], np.ndarray]
    nbytes: Callable[[], float]
    close: Callable[[], None]


def exact_peer(folder: Path) -> Peer:
    path = folder / "exact.bloom"
    exact = ExactFilter(CAPACITY, 0.01, path)

    def on_disk() -> float:
        exact.flush()
        files = [path, *Path(tier_directory(path)).iterdir()]
        return float(sum(file.stat().st_size for file in files))

    return Peer(exact.add_hashes, on_disk, exact.close)


def bloom_peer(folder: Path) -> Peer:
    bloom = GrowingFilter(BloomFilter(CAPACITY, 0.01, folder / "bloom.bloom"))
    return Peer(bloom.add_hashes, lambda: float(bloom.num_bits / 8), bloom.close)


def set_peer(folder: Path) -> Peer:
    held: set = set()
    tracemalloc.start()  # the set's and its ints' bytes, as Python allocates them

    def claim(rows: np.ndarray) -> np.ndarray:
        new = []
        for key in rows[:, 0].tolist():
            fresh = key not in held
            if fresh:
                held.add(key)
            new.append(fresh)
        return np.array(new, dtype=bool)

    def close() -> None:
        tracemalloc.stop()
        held.clear()

    return Peer(claim, lambda: float(tracemalloc.get_traced_memory()[0]), close)


def sqlite_peer(folder: Path) -> Peer:
    store = SQLiteStore(folder / "claims.sqlite", namespace="bench", policy_digest=DEFAULT_POLICY.digest)

    def claim(rows: np.ndarray) -> np.ndarray:
        return np.asarray(store.claim_many(Fingerprints(rows)), dtype=bool)

    def nbytes() -> float:
        per_url = store.bytes_per_url()
        return float(per_url or 0.0) * STORED

    return Peer(claim, nbytes, store.close)


PEERS: Dict[str, Callable[[Path], Peer]] = {
    "exact tier (ExactFilter)": exact_peer,
    "Bloom filter alone": bloom_peer,
    "Python set of fingerprints": set_peer,
    "SQLite (SQLiteStore)": sqlite_peer,
}


class Figures(NamedTuple):
    fill_per_s: float
    repeat_per_s: float
    bytes_per_url: float
    lost: int


def one_peer(make: Callable[[Path], Peer], folder: Path, seed: int) -> Figures:
    folder.mkdir()
    peer = make(folder)
    try:
        lost = 0
        spent = 0.0
        for start in range(0, STORED, FILL_BATCH):
            rows = fingerprints(np.arange(start, min(STORED, start + FILL_BATCH)))
            began = time.perf_counter()
            new = peer.claim(rows)
            spent += time.perf_counter() - began
            lost += int((~new).sum())
        fill = STORED / spent
        rng = np.random.default_rng(seed)
        fresh, spent = STORED, 0.0
        for _ in range(REPEAT_BATCHES):
            repeat = rng.random(REPEAT_BATCH) < 0.9
            ids = np.where(repeat, rng.integers(0, STORED, REPEAT_BATCH), 0)
            ids[~repeat] = np.arange(fresh, fresh + int((~repeat).sum()))
            fresh += int((~repeat).sum())
            rows = fingerprints(ids)
            began = time.perf_counter()
            new = peer.claim(rows)
            spent += time.perf_counter() - began
            lost += int((~new & ~repeat).sum())
        return Figures(fill, REPEAT_BATCH * REPEAT_BATCHES / spent, peer.nbytes() / STORED, lost)
    finally:
        peer.close()


@pytest.mark.skipif(not HAS_EXTENSION, reason="the figures are the compiled extension's")
def test_exact_tier_against_its_peers(benchmark, tmp_path: Path) -> None:
    found: Dict[str, List[Figures]] = {name: [] for name in PEERS}
    rounds = iter(range(ROUNDS))

    def one_round() -> None:
        number = next(rounds)
        for index, (name, make) in enumerate(PEERS.items()):
            found[name].append(one_peer(make, tmp_path / f"{number}-{index}", seed=number))

    benchmark.group = f"exact tier and peers, {STORED:,} stored"
    benchmark.pedantic(one_round, rounds=ROUNDS, iterations=1)
    print(
        f"\n{STORED:,} URLs stored, {REPEAT_BATCHES * REPEAT_BATCH:,} claims with 90% repeats; "
        f"medians (ranges) of {ROUNDS} rounds, load average {os.getloadavg()[0]:.1f}"
    )
    print("| peer | all-new fill, claims/s | 90% repeats, claims/s | bytes per URL | pages lost |")
    print("|---|---|---|---|---|")
    for name, figures in found.items():
        fill = sorted(f.fill_per_s for f in figures)
        repeat = sorted(f.repeat_per_s for f in figures)
        print(
            f"| {name} | {statistics.median(fill):,.0f} ({fill[0]:,.0f}-{fill[-1]:,.0f}) | "
            f"{statistics.median(repeat):,.0f} ({repeat[0]:,.0f}-{repeat[-1]:,.0f}) | "
            f"{statistics.median(f.bytes_per_url for f in figures):.2f} | {figures[-1].lost:,} |"
        )
        benchmark.extra_info[name] = [f._asdict() for f in figures]
    for name in ("exact tier (ExactFilter)", "Python set of fingerprints", "SQLite (SQLiteStore)"):
        assert all(f.lost == 0 for f in found[name]), name
