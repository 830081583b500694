"""The recrawl window of a Deduplicator: a page is not won again before W and is won again by
W (1 + 1/G), with and without a state file; the state file keeps its window; the CLI shows it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from crawldedup import Deduplicator, FilterFileError, open_state
from crawldedup.bloom import WindowedBloomFilter, open_filter
from crawldedup.config import DedupConfig
from crawldedup.windows import ManualClock, Window

#: The layer has a pure-Python twin: scripts/test runs these in its pure-Python run too.
pytestmark = pytest.mark.twins

DAY = 86_400.0
START = 1_800_000_000.0
PAGES = [f"https://shop.example/item/{i}" for i in range(200)]


@pytest.mark.parametrize("with_state", [False, True], ids=["memory", "state-file"])
def test_a_local_page_comes_back_after_the_window_and_not_before(with_state, tmp_path):
    clock = ManualClock(START)
    state = tmp_path / "s.bloom" if with_state else None
    window = Window(30 * DAY, 4)
    d = Deduplicator("local", ttl_days=30, state=state, capacity=10_000, clock=clock)
    assert all(d.claim_many(PAGES))
    clock.advance(window.seconds - 1)
    assert not any(d.claim_many(PAGES)), "won again before the window"
    if with_state:  # the file carries its generations across a restart
        d.close()
        d = Deduplicator("local", ttl_days=30, state=state, capacity=10_000, clock=clock)
        assert not any(d.claim_many(PAGES))
    clock.advance(window.seconds / window.generations + 1)
    assert all(d.claim_many(PAGES)), "not won again after the window and its overshoot"
    assert not any(d.claim_many(PAGES))
    d.close()


def test_ttl_days_zero_keeps_a_plain_filter_for_ever(tmp_path):
    clock = ManualClock(START)
    with Deduplicator("local", ttl_days=0, state=tmp_path / "s.bloom", capacity=1_000, clock=clock) as d:
        assert d.claim_many(PAGES[:10]) == [True] * 10
        assert not isinstance(d.local_filter, WindowedBloomFilter)
        clock.advance(3_650 * DAY)
        assert d.claim_many(PAGES[:10]) == [False] * 10


def test_generations_come_from_the_setting_and_the_environment():
    assert DedupConfig(ttl_days=1).window == Window(DAY, 4)
    assert DedupConfig.from_env({"VISITED_TTL_DAYS": "2", "CRAWLDEDUP_GENERATIONS": "8"}).window == Window(2 * DAY, 8)
    assert DedupConfig(ttl_days=0).window is None
    with pytest.raises(ValueError, match=r"generations \(CRAWLDEDUP_GENERATIONS\) must be an integer in \[1, 32\]"):
        DedupConfig.from_env({"CRAWLDEDUP_GENERATIONS": "0"})


def test_a_state_file_refuses_another_window(tmp_path):
    path = tmp_path / "s.bloom"
    open_state(path, 1_000, 0.01).close()  # plain: claims never expire
    with pytest.raises(FilterFileError, match="made without a recrawl window .* set ttl_days to 0"):
        open_state(path, 1_000, 0.01, window=Window(DAY, 4))
    windowed = tmp_path / "w.bloom"
    open_state(windowed, 1_000, 0.01, window=Window(DAY, 4)).close()
    with pytest.raises(FilterFileError, match=r"window of 1 days in 4 generations .* forgets claims after 2 days"):
        open_state(windowed, 1_000, 0.01, window=Window(2 * DAY, 4))
    with pytest.raises(FilterFileError, match="keeps claims for ever"):
        open_state(windowed, 1_000, 0.01)


def cli(args, cwd: Path, stdin: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "crawldedup", *args], cwd=cwd, input=stdin, capture_output=True, timeout=60
    )


def test_info_shows_the_window_and_merge_refuses_to_mix(tmp_path):
    pages = "".join(page + "\n" for page in PAGES).encode()
    made = cli(
        ["filter", "--state", "w.bloom", "--capacity", "1000", "--ttl-days", "2", "--generations", "2"], tmp_path, pages
    )
    assert made.returncode == 0, made.stderr.decode()
    assert (
        cli(["filter", "--state", "p.bloom", "--capacity", "1000", "--ttl-days", "0"], tmp_path, pages).returncode == 0
    )
    info = cli(["info", "w.bloom"], tmp_path).stdout.decode()
    assert "crawldedup filter v2" in info and "window" in info and "2 days in 2 generations of 1 days" in info
    assert "~200 items" in info
    with open_filter(tmp_path / "w.bloom") as bf:
        assert bf.approx_items == 200
    merged = cli(["merge", "w.bloom", "p.bloom", "-o", "m.bloom"], tmp_path)
    assert merged.returncode == 3
    assert "different recrawl windows (2 days in 2 generations of 1 days vs none" in merged.stderr.decode()
    assert cli(["merge", "w.bloom", "w.bloom", "-o", "m.bloom"], tmp_path).returncode == 0
    bad = cli(["filter", "--ttl-days", "-1"], tmp_path, pages)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr.decode()


def test_each_setting_has_its_crawldedup_variable_and_the_older_name_is_an_alias():
    """``CRAWLDEDUP_<FIELD>`` sets each field; the five older names set theirs when it is unset,
    and the ``CRAWLDEDUP_`` name wins over them; a bad value names the variable it came from."""
    from crawldedup.config import SETTINGS

    assert all(setting.variable.startswith("CRAWLDEDUP_") for setting in SETTINGS.values())
    older = {"DEDUP_STRATEGY": "sqlite", "REDIS_URL": "redis://old:1/0", "VISITED_TTL_DAYS": "2"}
    newer = {"CRAWLDEDUP_STRATEGY": "set", "CRAWLDEDUP_REDIS_URL": "redis://new:1/0", "CRAWLDEDUP_TTL_DAYS": "3"}
    config = DedupConfig.from_env({**older, "BLOOM_CAPACITY": "77", "BLOOM_ERROR_RATE": "0.5"})
    assert (config.strategy, config.redis_url, config.ttl_days, config.capacity, config.error_rate) == (
        "sqlite",
        "redis://old:1/0",
        2.0,
        77,
        0.5,
    )
    config = DedupConfig.from_env({**older, **newer})
    assert (config.strategy, config.redis_url, config.ttl_days) == ("set", "redis://new:1/0", 3.0)
    with pytest.raises(ValueError, match=r"capacity \(BLOOM_CAPACITY\) must be"):
        DedupConfig.from_env({"BLOOM_CAPACITY": "0"})
    with pytest.raises(ValueError, match=r"capacity \(CRAWLDEDUP_CAPACITY\) must be"):
        DedupConfig.from_env({"CRAWLDEDUP_CAPACITY": "x", "BLOOM_CAPACITY": "5"})
