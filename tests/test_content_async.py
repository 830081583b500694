"""AsyncDeduplicator.check_content: the blocking method's verdicts, and whole batches under cancellation.

Every page store family (local in memory and with a journal, SQLite, the Redis strategies and
a Redis Cluster) answers one stream of batches as the blocking Deduplicator does. Cancelled
checks leave each batch applied whole or not at all: on Redis, the same batch checked again
gets the verdicts of the cancelled call (its token finds the call's receipt); elsewhere it gets
them, or those of the batch compared with itself.
"""

from __future__ import annotations

import asyncio
import random
import socket
import time
from pathlib import Path
from typing import List, Tuple

import pytest
import redis
from conftest import PageReference, PageVerdict, page_store_family, reinspected

from crawldedup import AsyncDeduplicator, Deduplicator
from crawldedup.dedup.aio import INLINE_URLS

pytestmark = pytest.mark.asyncio
K = 3


@pytest.fixture(
    params=[
        "memory",
        "state",
        "sqlite",
        pytest.param("set", marks=pytest.mark.redis),
        pytest.param("sharded-set", marks=pytest.mark.redis),
        pytest.param("redisbloom", marks=pytest.mark.redis),
        pytest.param("cluster", marks=pytest.mark.redis),
    ]
)
def family(request: pytest.FixtureRequest, tmp_path: Path) -> dict:
    """Deduplicator arguments of each page store family."""
    return page_store_family(request.param, request, tmp_path)


def options(family: dict, namespace: str, **extra: object) -> dict:
    settings = {"namespace": namespace, "capacity": 10_000, "error_rate": 0.001, **family, **extra}
    if "state" in settings:
        settings["state"] = Path(str(settings["state"]) + f".{namespace}")
    return settings


def stream(
    seed: int, pages: int = 1_200, sizes: Tuple[int, ...] = (1, 40, 300, INLINE_URLS + 50)
) -> List[Tuple[List[str], List[int]]]:
    """Batches of re-inspected pages of a few contents (kept, changed a little or a lot, or
    copied), some twice in a batch, small ones on the event loop and a large one in the worker."""
    rng = random.Random(seed)
    contents = [rng.getrandbits(64) for _ in range(pages // 4)]
    current = {f"https://site.example/p/{i}": rng.choice(contents) for i in range(pages)}
    names = sorted(current)
    batches = []
    for size in sizes:
        urls = [rng.choice(names) for _ in range(size)]
        fps = [reinspected(current, url, contents, (0, 0, 1, 2, 3, 5), rng) for url in urls]
        batches.append((urls, fps))
    return batches


def verdicts(checks: list) -> List[PageVerdict]:
    return [(c.verdict, c.duplicate_of, c.distance) for c in checks]


async def test_async_verdicts_equal_the_blocking_ones(family):
    batches = stream(seed=11)
    with Deduplicator(**options(family, "sync")) as blocking:
        expected = [blocking.check_content(urls, fps) for urls, fps in batches]
    async with AsyncDeduplicator(**options(family, "async")) as d:
        got = [await d.check_content(urls, fps) for urls, fps in batches]
        assert await d.store_bytes_per_page() > 0
    assert [verdicts(c) for c in got] == [verdicts(c) for c in expected]
    reference = PageReference(K)
    assert [verdicts(c) for c in got] == [reference.check(urls, fps) for urls, fps in batches]
    assert {c.verdict for batch in got for c in batch} == {"new", "unchanged", "changed", "duplicate"}


async def test_invalid_urls_and_bad_fingerprints_as_the_blocking_one(tmp_path):
    async with AsyncDeduplicator("local", capacity=1_000, error_rate=0.01) as d:
        checks = await d.check_content(["https://site.example/a", "not a url"], [1, 2])
        assert [c.verdict for c in checks] == ["new", "invalid"]
        with pytest.raises(ValueError, match="one SimHash per URL"):
            await d.check_content(["https://site.example/a"], [1, 2])
        with pytest.raises(TypeError, match="single str"):
            await d.check_content("https://site.example/a", [1])  # type: ignore[arg-type]


async def test_concurrent_tasks_share_one_page_store(family):
    """Tasks of one loop checking copies of one page at once: exactly one finds it new."""
    urls = [f"https://mirror{i}.example/article" for i in range(16)]
    async with AsyncDeduplicator(**options(family, "tasks")) as d:
        checks = await asyncio.gather(*(d.check_content([url], [0xDEAD_BEEF_0000_0000]) for url in urls))
    assert sorted(c[0].verdict for c in checks) == ["duplicate"] * 15 + ["new"]


async def test_cancelled_checks_leave_whole_batches(family):
    """Each batch is cancelled at a random point, then checked again: the repeat's verdicts
    are the batch's (not applied, or answered by its Redis receipt) or the batch's compared with
    itself (applied whole, its answer lost); a final check of every page
    equals the reference, so the block index is whole too."""
    rng = random.Random(5)
    batches = stream(seed=12, sizes=(30, 200, INLINE_URLS + 50) * 3)
    reference = PageReference(K)
    applied_twice = 0
    async with AsyncDeduplicator(**options(family, "cancel")) as d:
        await d.check_content(["https://warm.example/"], [0])  # the page store is open
        reference.check(["https://warm.example/"], [0])
        for urls, fps in batches:
            task = asyncio.ensure_future(d.check_content(urls, fps))
            for _ in range(rng.randrange(6)):
                await asyncio.sleep(0)
            if rng.random() < 0.5:
                await asyncio.sleep(rng.uniform(0, 0.01))
            cancelled = task.cancel()
            try:
                first = verdicts(await task)
            except asyncio.CancelledError:
                first = None
            once = reference.copy()
            expected = once.check(urls, fps)
            if first is not None or not cancelled:
                assert first == expected
                reference = once
                continue
            again = verdicts(await d.check_content(urls, fps))
            if again == expected:
                reference = once
                continue
            # Applied whole before the cancellation landed, its answer lost: a store without
            # receipts, or a Redis check cancelled after its script had answered (its verdicts on
            # their way back), compares the batch with itself. A check cancelled while its script
            # was in flight is answered by its receipt
            # (test_a_check_cancelled_before_redis_ran_it_is_answered_by_its_receipt).
            twice = reference.copy()
            twice.check(urls, fps)
            assert again == twice.check(urls, fps)
            reference = twice
            applied_twice += 1
        everything = sorted(reference.pages.items())
        final = await d.check_content([u for u, _ in everything], [fp for _, fp in everything])
    assert verdicts(final) == reference.check([u for u, _ in everything], [fp for _, fp in everything])
    assert {c.verdict for c in final} == {"unchanged"}


#: A script that keeps the server busy for about 300 ms (the server reads no command meanwhile).
#: A script that keeps the server busy for 2 s: what is sent meanwhile waits, unread.
BUSY_2_S = """
local start = redis.call('TIME')
while true do
  local now = redis.call('TIME')
  if (now[1] - start[1]) * 1000000 + (now[2] - start[2]) > 2000000 then return 1 end
end
"""


def server_busy(redis_url: str) -> bool:
    """Whether the server leaves a PING unanswered for 0.1 s (a script is running)."""
    address = redis.Redis.from_url(redis_url).connection_pool.connection_kwargs
    with socket.create_connection((address["host"], address["port"]), timeout=5) as sock:
        sock.settimeout(0.1)
        sock.sendall(b"PING\r\n")
        try:
            return not sock.recv(64)
        except socket.timeout:
            return True


@pytest.mark.redis
async def test_a_check_cancelled_before_redis_ran_it_is_answered_by_its_receipt(redis_url):
    """Sent while the server is busy, cancelled before it answers: the script runs afterwards,
    and the same batch checked again gets its verdicts (all new), not its own writes (which
    would say unchanged)."""
    urls = [f"https://site.example/busy/{i}" for i in range(200)]
    fps = [random.Random(i).getrandbits(64) for i in range(200)]
    admin = redis.Redis.from_url(redis_url)
    try:
        async with AsyncDeduplicator("set", redis_url=redis_url, namespace="busy") as d:
            await d.check_content(["https://warm.example/"], [0])
            busy = asyncio.get_running_loop().run_in_executor(None, admin.eval, BUSY_2_S, 0)
            deadline = time.monotonic() + 30
            while not server_busy(redis_url):  # the check below is sent while the script runs
                assert time.monotonic() < deadline, "the busy script did not start"
            task = asyncio.ensure_future(d.check_content(urls, fps))
            await asyncio.sleep(0.05)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await busy
            pages = list(admin.keys(b"{busy:pages}:p:*"))
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:  # the closed connection's command runs once the server is free
                if sum(admin.hlen(key) for key in pages) == 201:
                    break
                await asyncio.sleep(0.02)
                pages = admin.keys(b"{busy:pages}:p:*")
            assert sum(admin.hlen(key) for key in pages) == 201, "the cancelled script did not run"
            assert {c.verdict for c in await d.check_content(urls, fps)} == {"new"}
            assert {c.verdict for c in await d.check_content(urls, fps)} == {"unchanged"}  # a new call
    finally:
        admin.close()
