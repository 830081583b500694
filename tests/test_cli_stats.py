"""``crawldedup stats`` against real servers: what a namespace and a state file hold, read
without changing anything."""

from __future__ import annotations

import json
import math
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict

import pytest
import redis

from crawldedup import Deduplicator
from crawldedup.bloom import BloomFilter, open_filter

COMMAND = [sys.executable, "-m", "crawldedup", "stats"]


def stats(*args: object, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*COMMAND, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=120)


def stats_json(*args: object, cwd: Path) -> Dict[str, Any]:
    result = stats(*args, "--json", cwd=cwd)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def pages(count: int, site: str = "a") -> list:
    return [f"https://{site}.example/p/{i}" for i in range(count)]


def test_bytes_per_url_of_the_set_store_is_within_10_percent_of_info_memorys_growth(redis_url, tmp_path):
    client = redis.Redis.from_url(redis_url)

    def lasting() -> int:  # less the connection's buffers and the scripts: not the claims' memory
        memory = client.info("memory")
        return int(memory["used_memory"]) - int(memory["mem_clients_normal"]) - int(memory["used_memory_scripts"])

    before = lasting()
    with Deduplicator("set", redis_url=redis_url, namespace="crawl", ttl_days=30) as dedup:
        for start in range(0, 100_000, 10_000):
            dedup.claim_many(pages(100_000)[start : start + 10_000])
    client.unlink(*client.scan_iter(match=b"{crawl:*}:receipt:*", count=1_000))  # they live five minutes
    grown = (lasting() - before) / 100_000
    report = stats_json("--strategy", "set", "--redis-url", redis_url, "--namespace", "crawl", cwd=tmp_path)["store"]
    client.close()
    assert report["claims"] == 100_000
    assert abs(report["bytes_per_url"] - grown) <= 0.1 * grown, (report["bytes_per_url"], grown)
    assert report["memory_bytes"] == round(report["bytes_per_url"] * 100_000)


def test_open_and_expired_leases_are_counted(redis_url, tmp_path):
    with Deduplicator("sharded-set", redis_url=redis_url, namespace="crawl", capacity=10_000, ttl_days=0) as dedup:
        dedup.claim_many(pages(1_000))
        dedup.claim_many(pages(30, "leased"), lease=600)
        dedup.claim_many(pages(7, "short"), lease=0.05)
        time.sleep(0.2)  # the short leases pass their deadline (Redis's clock)
        report = stats_json(
            "--strategy", "sharded-set", "--redis-url", redis_url, "--namespace", "crawl", cwd=tmp_path
        )["store"]
    assert report["claims"] == 1_037
    assert (report["leases_open"], report["leases_expired"]) == (30, 7)


def test_redisbloom_fill_error_rate_and_skipped_pages(redisbloom_url, tmp_path):
    with Deduplicator(
        "bloom", redis_url=redisbloom_url, namespace="crawl", capacity=20_000, error_rate=0.01, ttl_days=0
    ) as dedup:
        won = sum(dedup.claim_many(pages(20_000)))
    report = stats_json(
        "--strategy", "redisbloom", "--redis-url", redisbloom_url, "--namespace", "crawl", cwd=tmp_path
    )["store"]
    bloom = report["redisbloom"]
    assert bloom["capacity"] == 20_000 and bloom["items"] == won == report["claims"]
    assert bloom["fill"] == won / 20_000
    # At capacity RedisBloom's first filter is built for half the rate asked (0.5% for 1%).
    assert 0.002 < bloom["error_rate_now"] < 0.01
    # Each new page met the rate of its moment, which only grew: fewer skips than at the end's rate.
    assert 0 < bloom["skipped_estimate"] < bloom["error_rate_now"] * bloom["items"]
    assert bloom["skipped_estimate"] == pytest.approx(20_000 - won, abs=5 * math.sqrt(bloom["skipped_estimate"]) + 3)


@pytest.mark.parametrize("kind", ["windowed", "plain"])
def test_a_state_file_is_described(kind, tmp_path):
    state = tmp_path / "crawl.bloom"
    if kind == "windowed":  # what a Deduplicator keeps
        with Deduplicator("local", state=state, capacity=50_000, error_rate=0.01) as dedup:
            dedup.claim_many(pages(50_000))
    else:
        with BloomFilter(50_000, 0.01, path=state, metadata=b"crawldedup-state/1 plain") as bloom:
            bloom.update(pages(50_000))
    report = stats_json("--state", state, cwd=tmp_path)
    assert set(report) == {"local_filter"}
    local = report["local_filter"]
    with open_filter(state, "r") as bloom:
        assert (local["capacity"], local["items"], local["fill"], local["error_rate_now"]) == (
            bloom.capacity,
            bloom.approx_items,
            bloom.fill_ratio,
            bloom.estimated_error_rate,
        )
    assert 0 < local["skipped_estimate"] < local["error_rate_now"] * local["items"]
    assert local["metadata"].startswith("crawldedup-state/1 ")
    if kind == "windowed":
        with open_filter(state, "r") as bloom:
            first = bloom.generations()[0]
        assert local["oldest_generation"] == {
            "generation": first.generation,
            "starts_at": first.starts_at,
            "forgotten_at": first.forgotten_at,
            "items": first.approx_items,
        }
    else:
        assert local["oldest_generation"] is None


def test_a_grown_state_file_counts_the_pages_every_stage_skipped(tmp_path):
    state = tmp_path / "crawl.bloom"
    with Deduplicator("local", state=state, capacity=2_000, error_rate=0.02, ttl_days=0) as dedup:
        won = sum(sum(dedup.claim_many(pages(30_000)[i : i + 1_000])) for i in range(0, 30_000, 1_000))
        assert len(dedup.local_filter.stages()) == 3
    local = stats_json("--state", state, cwd=tmp_path)["local_filter"]
    with open_filter(state, "r") as bloom:
        assert (local["capacity"], local["items"]) == (bloom.capacity, bloom.approx_items) == (42_000, won)
    assert local["skipped_estimate"] == pytest.approx(30_000 - won, abs=5 * math.sqrt(local["skipped_estimate"]) + 3)


def test_the_human_report_of_a_sqlite_namespace_and_its_state_file(tmp_path):
    database, state = tmp_path / "claims.sqlite", tmp_path / "crawl.bloom"
    with Deduplicator(
        "sqlite", sqlite_path=database, state=state, namespace="crawl", crawl_round="r2", capacity=10_000
    ) as dedup:
        dedup.claim_many(pages(2_500))
    result = stats(
        "--strategy",
        "sqlite",
        "--sqlite",
        database,
        "--namespace",
        "crawl",
        "--round",
        "r2",
        "--state",
        state,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "crawldedup stats"
    assert lines[1].split() == ["store", "sqlite", "store", repr(str(database)), "namespace", "'crawl:r2'"]
    assert lines[2].split() == ["claims", "held", "2,500"]
    assert any(line.startswith("local filter") for line in lines)
    assert any(line.split()[:3] == ["items", "2,500", "(exact)"] for line in lines)


def test_a_missing_namespace_is_reported_and_not_created(redis_url, tmp_path):
    result = stats("--strategy", "set", "--redis-url", redis_url, "--namespace", "absent", cwd=tmp_path)
    assert result.returncode == 3
    assert result.stderr == (
        f"crawldedup: error: namespace 'absent' does not exist in {redis_url}: nothing to report\n"
    )
    assert redis.Redis.from_url(redis_url).dbsize() == 0
    database = tmp_path / "claims.sqlite"
    result = stats("--strategy", "sqlite", "--sqlite", database, cwd=tmp_path)
    assert result.returncode == 3 and not database.exists()


def test_a_namespace_of_another_strategy_names_it(redis_url, tmp_path):
    with Deduplicator("set", redis_url=redis_url, namespace="crawl") as dedup:
        dedup.claim_many(pages(10))
    result = stats("--strategy", "sharded-set", "--redis-url", redis_url, "--namespace", "crawl", cwd=tmp_path)
    assert result.returncode == 3
    assert "holds the claims of the set strategy, not sharded-set: give --strategy set" in result.stderr


def test_nothing_to_describe_is_a_usage_error(tmp_path):
    result = subprocess.run(
        COMMAND,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)},
    )
    assert result.returncode == 2 and "stats describes a store (--strategy) or a state file (--state)" in result.stderr


def test_an_unreadable_sqlite_file_is_refused_with_its_reason(tmp_path):
    database = tmp_path / "claims.sqlite"
    database.write_bytes(b"not a database at all, not even close" * 100)
    result = stats("--strategy", "sqlite", "--sqlite", database, cwd=tmp_path)
    assert result.returncode == 6 and "not a SQLite database" in result.stderr
    with pytest.raises(sqlite3.DatabaseError):
        sqlite3.connect(database).execute("SELECT 1 FROM sqlite_master").fetchall()
