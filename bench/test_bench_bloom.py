"""Bloom filter speed, side by side with the peers a user would otherwise pick (issue 2, item 7).

Run (group by function, so the twins and the peers of one operation sit in one table)::

    pytest bench/test_bench_bloom.py --benchmark-only --benchmark-group-by=func \
        --benchmark-columns=min,median,ops

Every timed step gets freshly built strings (setup, untimed): Python caches a str's hash in
the object, which would flatter the peers that use ``hash()``. Each round handles
``BATCH`` keys, so ns per key = median / BATCH. Each peer runs through its fastest API: batch
insert where it has one (``update``, ``add_str_batch``), batch query where it has one
(``contains_str_batch``), else a list comprehension over ``in``.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
from typing import Callable

import pytest

from crawldedup import bloom
from crawldedup.bloom import writer_lock

pybloomfilter = pytest.importorskip("pybloomfilter")
rbloom = pytest.importorskip("rbloom")
fastbloom_rs = pytest.importorskip("fastbloom_rs")
pybloom_live = pytest.importorskip("pybloom_live")

BATCH = 100_000
ERROR_RATE = 0.01
_fresh = itertools.count()


def fresh_urls(count: int = BATCH) -> list[str]:
    """URLs never built before in this process (~50 bytes, like canonical URLs)."""
    tag = next(_fresh)
    return [f"https://shop{i % 997}.example/item/{tag}-{i}?ref=x" for i in range(count)]


class Ours:
    def __init__(self, cls: type, capacity: int, path: str) -> None:
        self.filter = cls(capacity, ERROR_RATE, path)
        self.add_batch = self.filter.add_many
        self.contains_batch = self.filter.contains_many
        self.add_one = self.filter.add
        self.contains_one = self.filter.__contains__


class RBloom:
    def __init__(self, capacity: int, path: str) -> None:
        self.filter = rbloom.Bloom(capacity, ERROR_RATE)
        self.add_batch = self.filter.update
        self.contains_batch = lambda keys: [key in self.filter for key in keys]
        self.add_one = self.filter.add
        self.contains_one = self.filter.__contains__


class FastBloom:
    def __init__(self, capacity: int, path: str) -> None:
        self.filter = fastbloom_rs.BloomFilter(capacity, ERROR_RATE)
        self.add_batch = self.filter.add_str_batch
        self.contains_batch = self.filter.contains_str_batch
        self.add_one = self.filter.add_str
        self.contains_one = self.filter.contains_str


class PyBloomFilterMmap:
    def __init__(self, capacity: int, path: str) -> None:
        self.filter = pybloomfilter.BloomFilter(capacity, ERROR_RATE, path)
        self.add_batch = self.filter.update
        self.contains_batch = lambda keys: [key in self.filter for key in keys]
        self.add_one = self.filter.add
        self.contains_one = self.filter.__contains__


class PyBloomLive:
    def __init__(self, capacity: int, path: str) -> None:
        self.filter = pybloom_live.BloomFilter(capacity, ERROR_RATE)
        self.add_batch = lambda keys: [self.filter.add(key) for key in keys]
        self.contains_batch = lambda keys: [key in self.filter for key in keys]
        self.add_one = self.filter.add
        self.contains_one = self.filter.__contains__


COMPILED = [
    pytest.param(lambda c, p: Ours(bloom.BloomFilter, c, p), id="crawldedup"),
    pytest.param(RBloom, id="rbloom"),
    pytest.param(FastBloom, id="fastbloom-rs"),
    pytest.param(PyBloomFilterMmap, id="pybloomfiltermmap3"),
]
PURE_PYTHON = [
    pytest.param(lambda c, p: Ours(bloom.PyBloomFilter, c, p), id="crawldedup-py"),
    pytest.param(PyBloomLive, id="pybloom-live"),
]


#: Timed rounds per benchmark, after one warm-up: 8 x 100,000 keys keep the add tests within a
#: 1,000,000-capacity filter. Medians of this few rounds move by up to 2x between runs on the
#: shared reference VM, so docs/performance.md quotes several runs.
ROUNDS = 7


def run_fresh(benchmark, operation: Callable[[list[str]], object], count: int = BATCH) -> None:
    benchmark.pedantic(operation, setup=lambda: ((fresh_urls(count),), {}), rounds=ROUNDS, warmup_rounds=1)


@pytest.fixture(scope="module")
def filters(tmp_path_factory):
    """One filter per (peer, capacity), kept across the tests of the module."""
    made: dict = {}

    def get(factory, capacity: int):
        key = (factory, capacity)
        if key not in made:
            made[key] = factory(capacity, str(tmp_path_factory.mktemp("bench") / "f.bloom"))
        return made[key]

    return get


@pytest.mark.parametrize("peer", COMPILED)
@pytest.mark.parametrize("capacity", [1_000_000, 50_000_000], ids=["1M", "50M"])
def test_add_batch(benchmark, filters, peer, capacity):
    run_fresh(benchmark, filters(peer, capacity).add_batch)


@pytest.mark.parametrize("peer", COMPILED)
@pytest.mark.parametrize("capacity", [1_000_000, 50_000_000], ids=["1M", "50M"])
def test_contains_batch(benchmark, filters, peer, capacity):
    run_fresh(benchmark, filters(peer, capacity).contains_batch)


@pytest.mark.parametrize("peer", COMPILED)
def test_add_single_in_python_loop(benchmark, filters, peer):
    add = filters(peer, 1_000_000).add_one
    run_fresh(benchmark, lambda keys: [add(key) for key in keys])


@pytest.mark.parametrize("peer", COMPILED)
def test_contains_single_in_python_loop(benchmark, filters, peer):
    contains = filters(peer, 1_000_000).contains_one
    run_fresh(benchmark, lambda keys: [contains(key) for key in keys])


@pytest.mark.parametrize("peer", PURE_PYTHON)
def test_pure_python_add_batch(benchmark, filters, peer):
    run_fresh(benchmark, filters(peer, 1_000_000).add_batch, 10_000)


@pytest.mark.parametrize("peer", PURE_PYTHON)
def test_pure_python_contains_batch(benchmark, filters, peer):
    run_fresh(benchmark, filters(peer, 1_000_000).contains_batch, 10_000)


@pytest.mark.skipif(
    not (writer_lock.SUPPORTED and bloom.HAS_EXTENSION),
    reason="writers see each other on Linux, and share a file with the extension",
)
@pytest.mark.parametrize("writers", ["alone", "shared", "memory"])
@pytest.mark.parametrize("capacity", [1_000_000, 50_000_000], ids=["1M", "50M"])
def test_add_batch_in_a_shared_file(benchmark, tmp_path, writers, capacity):
    """What sharing a file costs: with another process holding it open for writing, batch adds
    set bits with atomic ORs instead of plain ones (same keys, same filter size). And what the
    file costs: a filter in memory, private to the process, gets huge pages where the kernel
    gives them to anonymous memory (from 2 MiB, so at 50M)."""
    path = str(tmp_path / "shared.bloom")
    bf = bloom.BloomFilter(capacity, ERROR_RATE, None if writers == "memory" else path)
    holder = None
    if writers == "shared":
        code = (
            "import sys; from crawldedup import bloom; f = bloom.BloomFilter.open(sys.argv[1], 'r+'); "
            "print('ready', flush=True); sys.stdin.readline()"
        )
        holder = subprocess.Popen(
            [sys.executable, "-c", code, path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert holder.stdout is not None and holder.stdout.readline() == "ready\n"
    try:
        run_fresh(benchmark, bf.add_many)
    finally:
        if holder is not None:
            holder.communicate("done\n", timeout=60)
        bf.close()


@pytest.mark.parametrize("operation", ["add_hashes", "contains_hashes"])
def test_prehashed_batch(benchmark, bloom_cls, tmp_path, operation):
    """The probe loop alone, on a half-full filter: fresh keys hashed beforehand (untimed)."""
    bf = bloom_cls(1_000_000, ERROR_RATE, str(tmp_path / "hashed.bloom"))
    bf.add_hashes(bloom.hash_many(fresh_urls(500_000)))
    benchmark.pedantic(
        getattr(bf, operation), setup=lambda: ((bloom.hash_many(fresh_urls()),), {}), rounds=ROUNDS, warmup_rounds=1
    )


# -- the three paths crawldedup offers, on the same keys ----------------------------------------


class RedisBloom:
    """RedisBloom through BF.MADD / BF.MEXISTS, 1,000 keys per command, pipelined."""

    def __init__(self, url: str, capacity: int) -> None:
        import redis

        self.client = redis.Redis.from_url(url)
        self.client.execute_command("BF.RESERVE", "bench:bloom", ERROR_RATE, capacity)

    def _send(self, command: str, keys: list[str]) -> list:
        pipe = self.client.pipeline(transaction=False)
        for start in range(0, len(keys), 1000):
            pipe.execute_command(command, "bench:bloom", *keys[start : start + 1000])
        return pipe.execute()

    def add_batch(self, keys: list[str]) -> list:
        return self._send("BF.MADD", keys)

    def contains_batch(self, keys: list[str]) -> list:
        return self._send("BF.MEXISTS", keys)


@pytest.mark.redis
@pytest.mark.parametrize("path", ["cython", "python", "redisbloom"])
@pytest.mark.parametrize("operation", ["add_batch", "contains_batch"])
def test_three_paths(benchmark, redisbloom_url, tmp_path, path, operation):
    if path == "redisbloom":
        store = RedisBloom(redisbloom_url, 1_000_000)
    else:
        cls = bloom.PyBloomFilter if path == "python" else bloom.BloomFilter
        if path == "cython" and not bloom.HAS_EXTENSION:
            pytest.skip("the compiled extension is not built")
        store = Ours(cls, 1_000_000, str(tmp_path / "three.bloom"))
    store.add_batch(fresh_urls(500_000))  # half full, like the filters of the tables above
    run_fresh(benchmark, getattr(store, operation))
