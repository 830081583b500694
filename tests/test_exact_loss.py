"""Pages lost with no fault at all: 9,000 distinct pages claimed once into a capacity of 10,000.

Through every exact store, the service, the ``exact`` strategy and the CLI's default path, the
local tier in front is the exact tier by default: each page is won once, none by nobody. The
Bloom filter alone in front (``local_tier="bloom"``, the opt-in) loses some of the same pages to
its false positives, counted here too. The same count at 1e8 distinct pages is measured by hand
(``bench/scripts/exact_loss.py``; docs/performance.md).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import List

import pytest
from conftest import ServeProcess

from crawldedup import Deduplicator
from crawldedup.windows import ManualClock

PAGES = 9_000
CAPACITY = 10_000
BATCH = 1_000
START = 1_800_000_000.0


def pages(count: int = PAGES) -> List[str]:
    return [f"https://shop{i % 97}.example/item/{i}?color={i % 7}" for i in range(count)]


def won_once(dedup: Deduplicator, urls: List[str]) -> int:
    """Claim each page once, a batch at a time; how many were won."""
    return sum(sum(dedup.claim_many(urls[start : start + BATCH])) for start in range(0, len(urls), BATCH))


@pytest.fixture
def exact_store(store_strategy: str) -> str:
    if store_strategy == "bloom":
        pytest.skip("RedisBloom is not an exact store: at most one winner")
    return store_strategy


def test_every_exact_store_wins_each_page_once(exact_store, store_location, tmp_path):
    clock = ManualClock(START)
    with Deduplicator(exact_store, capacity=CAPACITY, state=tmp_path / "s.bloom", clock=clock, **store_location) as d:
        assert won_once(d, pages()) == PAGES
        assert d.claim_many(pages()[:BATCH]) == [False] * BATCH
        assert d.stats.local_hits >= BATCH  # the repeats were answered locally, exactly


def test_without_a_state_file_too(exact_store, store_location):
    with Deduplicator(exact_store, capacity=CAPACITY, clock=ManualClock(START), **store_location) as d:
        assert won_once(d, pages()) == PAGES


def test_the_bloom_filter_alone_in_front_loses_pages_to_its_false_positives(tmp_path):
    # The opt-in, and what every store had before: a page the filter takes for seen is never
    # sent to the store. The pages and their fingerprints are fixed, so is the count.
    urls = pages()
    with Deduplicator(
        "sqlite", sqlite_path=tmp_path / "c.sqlite", capacity=CAPACITY, local_tier="bloom", clock=ManualClock(START)
    ) as d:
        lost = PAGES - won_once(d, urls)
    with Deduplicator("local", capacity=CAPACITY, clock=ManualClock(START)) as d:
        lost_locally = PAGES - won_once(d, urls)
    print(f"lost with the Bloom filter alone: {lost} in front of sqlite, {lost_locally} with local")
    assert lost > 0 and lost_locally > 0


def test_the_exact_strategy_wins_each_page_once(tmp_path):
    with Deduplicator("exact", capacity=CAPACITY, state=tmp_path / "e.bloom", clock=ManualClock(START)) as d:
        assert won_once(d, pages()) == PAGES
    with Deduplicator("exact", state=tmp_path / "e.bloom", clock=ManualClock(START)) as d:
        assert won_once(d, pages()) == 0


def test_the_clis_default_prints_each_page_once(tmp_path):
    urls = pages()
    lines = "".join(f"{url}\n" for url in urls).encode()
    command = [sys.executable, "-m", "crawldedup", "filter", "--capacity", str(CAPACITY), "--jobs", "1"]
    first = subprocess.run(command, input=lines, capture_output=True, cwd=tmp_path, timeout=120)
    assert first.returncode == 0, first.stderr.decode()
    assert len(first.stdout.splitlines()) == PAGES
    assert "false-positive loss            0   pages" in first.stderr.decode()
    again = subprocess.run(command, input=lines, capture_output=True, cwd=tmp_path, timeout=120)
    assert again.stdout == b"" and (tmp_path / "crawldedup.bloom.exact").is_dir()


@pytest.mark.redis
def test_the_service_and_its_clients_win_each_page_once(redis_server, tmp_path):
    # The server's Deduplicator has the exact tier in front of its store, and so has the client
    # whose store is the service.
    with ServeProcess(
        [
            "--strategy",
            "set",
            "--redis-url",
            redis_server.url,
            "--namespace",
            "loss",
            "--capacity",
            str(CAPACITY),
            "--state",
            str(tmp_path / "server.bloom"),
        ]
    ) as server:
        with Deduplicator("service", service_url=server.url, namespace="loss", capacity=CAPACITY) as client:
            assert won_once(client, pages()) == PAGES
            assert won_once(client, pages()) == 0
        with Deduplicator("service", service_url=server.url, namespace="loss", capacity=CAPACITY) as other:
            assert won_once(other, pages()) == 0  # another client: every page asked, none won again
    assert "Traceback" not in server.stderr
    assert Path(tmp_path / "server.bloom.exact").is_dir()
