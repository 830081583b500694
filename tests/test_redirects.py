"""Redirects: claim_final claims the final page and records requested -> final in the store's
alias map, which seen_through_redirects reads; every store, blocking and asyncio, on real servers."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest
import redis
from conftest import ServeProcess

from crawldedup import AliasesUnsupported, AsyncDeduplicator, AsyncServiceClient, Deduplicator, ServiceClient
from crawldedup.config import DedupConfig
from crawldedup.dedup.aliases import ALIASES_MAGIC, RECORD, AliasFileError
from crawldedup.fingerprints import Fingerprints, hash_many
from crawldedup.stores.aliases import Aliases
from crawldedup.stores.redis_aliases import ALIAS_GROUPS, alias_key
from crawldedup.windows import ManualClock

DAY = 86_400.0


def page(i: int) -> str:
    return f"https://shop.example/p/{i}?a=1"


def short(i: int) -> str:
    return f"https://sho.rt/{i}"


def settings(
    strategy: str, location: Optional[Dict[str, Any]] = None, namespace: str = "redirects", **extra: Any
) -> Dict[str, Any]:
    return {
        "strategy": strategy,
        "namespace": namespace,
        "capacity": 100_000,
        "error_rate": 0.001,
        **(location or {}),
        **extra,
    }


@pytest.fixture(
    params=[
        "local",
        pytest.param("set", marks=pytest.mark.redis),
        pytest.param("sharded-set", marks=pytest.mark.redis),
        pytest.param("bloom", marks=pytest.mark.redis),
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
    ]
)
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Dict[str, Any]:
    """The local strategy (with a state file), then each store in turn, on a flushed server or a fresh file."""
    strategy = request.param
    if strategy == "local":
        return {"strategy": strategy, "state": tmp_path / "state.bloom"}
    if strategy == "sqlite":
        return {"strategy": strategy, "sqlite_path": tmp_path / "claims.sqlite"}
    if strategy == "postgres":
        return {"strategy": strategy, "postgres_url": request.getfixturevalue("postgres_url")}
    return {
        "strategy": strategy,
        "redis_url": request.getfixturevalue("redisbloom_url" if strategy == "bloom" else "redis_url"),
    }


def story(d: Any) -> List[List[bool]]:
    """Three short links to two pages, a redirect to a page already seen, a fetch that was not
    redirected, and the reads that follow: the short links lead to claimed pages, the pages
    themselves and the fetch not redirected are no aliases."""
    return [
        d.claim_final(
            [page(1), "HTTPS://SHOP.EXAMPLE/p/1?a=1", page(2), "not a url"],
            requested=[short(1), short(2), short(3), short(9)],
        ),
        d.claim_final([page(1)], requested=[short(4)]),
        d.claim_final([page(5)], requested=[page(5) + "#top"]),  # one canonical form: no alias
        d.claim_many([page(2), page(3)]),
        d.seen_through_redirects([short(1), short(2), short(3), short(4), short(5), page(1), "not a url"]),
        d.seen([short(1), page(5)]),
    ]


EXPECTED = [
    [True, False, True, False],
    [False],
    [True],
    [False, True],
    [True, True, True, True, False, False, False],
    [False, True],
]


def test_each_final_page_is_won_once_whatever_led_to_it(where):
    with Deduplicator(**settings(**where)) as d:
        assert story(d) == EXPECTED
        assert d.stats.won == 4


@pytest.mark.asyncio
async def test_the_async_deduplicator_answers_as_the_blocking_one(where):
    async with AsyncDeduplicator(**settings(**where)) as d:
        assert await _async_story(d) == EXPECTED
        assert d.stats.won == 4


async def _async_story(d: AsyncDeduplicator) -> List[Any]:
    return [
        await d.claim_final(
            [page(1), "HTTPS://SHOP.EXAMPLE/p/1?a=1", page(2), "not a url"],
            requested=[short(1), short(2), short(3), short(9)],
        ),
        await d.claim_final([page(1)], requested=[short(4)]),
        await d.claim_final([page(5)], requested=[page(5) + "#top"]),
        await d.claim_many([page(2), page(3)]),
        await d.seen_through_redirects([short(1), short(2), short(3), short(4), short(5), page(1), "not a url"]),
        await d.seen([short(1), page(5)]),
    ]


@pytest.mark.parametrize("strategy", ["set", "sharded-set"])
def test_a_redis_cluster_keeps_the_aliases(strategy, redis_cluster_url):
    with Deduplicator(**settings(strategy, {"redis_url": redis_cluster_url})) as d:
        assert d.store is not None and d.store.in_cluster  # type: ignore[attr-defined]
        assert story(d) == EXPECTED


@pytest.mark.asyncio
async def test_an_async_redis_cluster_keeps_the_aliases(redis_cluster_url):
    async with AsyncDeduplicator(**settings("sharded-set", {"redis_url": redis_cluster_url})) as d:
        assert await _async_story(d) == EXPECTED


def test_one_claim_final_is_one_round_trip(store_strategy, store_location):
    with Deduplicator(**settings(store_strategy, store_location)) as d:
        before = d.store.round_trips  # type: ignore[union-attr]
        assert d.claim_final([page(i) for i in range(500)], requested=[short(i) for i in range(500)]) == [True] * 500
        assert d.store.round_trips == before + 1  # type: ignore[union-attr]
        # every final page was a local hit: the aliases alone still travel, in one round trip
        assert (
            d.claim_final([page(i) for i in range(500)], requested=[short(1000 + i) for i in range(500)])
            == [False] * 500
        )
        assert d.store.round_trips == before + 2  # type: ignore[union-attr]
        assert d.seen_through_redirects([short(1000 + i) for i in range(500)]) == [True] * 500


def test_a_lease_holds_the_final_page_until_done(redis_url):
    with (
        Deduplicator("sharded-set", redis_url=redis_url, namespace="leased", capacity=10_000) as d,
        Deduplicator("sharded-set", redis_url=redis_url, namespace="leased", capacity=10_000) as rival,
    ):
        assert d.claim_final([page(1)], requested=[short(1)], lease=60) == [True]
        assert rival.claim_final([page(1)], requested=[short(2)], lease=60) == [False]
        assert d.done([page(1)]) == [True]
        assert rival.seen_through_redirects([short(1), short(2)]) == [True, True]


def alias_count(d: Deduplicator) -> int:
    """How many aliases the Deduplicator's map holds, read from the store's own layout."""
    if d._local_aliases is not None:
        return len(d._local_aliases)
    store: Any = d.store
    if store.strategy == "sqlite":
        return int(store._connection().execute("SELECT count(*) FROM crawldedup_aliases").fetchone()[0])
    if store.strategy == "postgres":  # a deleted namespace's table is dropped
        ((exists,),) = store.execute("SELECT to_regclass(%s) IS NOT NULL", (store.aliases_table,))
        return int(store.execute(f"SELECT count(*) FROM {store.aliases_table}")[0][0]) if exists else 0
    return sum(store.client.hlen(alias_key(d.namespace, g)) for g in range(ALIAS_GROUPS))


def test_the_alias_map_holds_its_bound(where):
    with Deduplicator(**settings(**where), max_aliases=32) as d:
        for start in range(0, 400, 100):
            d.claim_final(
                [page(i) for i in range(start, start + 100)], requested=[short(i) for i in range(start, start + 100)]
            )
        held = alias_count(d)
        bound = (
            32 if where["strategy"] in ("local", "sqlite", "postgres") else math.ceil(32 / ALIAS_GROUPS) * ALIAS_GROUPS
        )
        assert 0 < held <= bound
        seen = d.seen_through_redirects([short(i) for i in range(400)])
        assert sum(seen) == held  # every alias kept answers; the ones replaced do not
        assert d.seen([page(i) for i in range(400)]) == [True] * 400  # no final page is lost with them


def test_the_local_map_drops_its_oldest_alias_first():
    with Deduplicator("local", capacity=10_000, max_aliases=10) as d:
        d.claim_final([page(i) for i in range(25)], requested=[short(i) for i in range(25)])
        assert d.seen_through_redirects([short(i) for i in range(25)]) == [False] * 15 + [True] * 10


def test_aliases_are_forgotten_with_the_window(where):
    clock = ManualClock()
    with Deduplicator(**settings(**where), ttl_days=1, generations=4, clock=clock) as d:
        assert d.claim_final([page(1)], requested=[short(1)]) == [True]
        clock.advance(DAY * 0.99)
        assert d.seen_through_redirects([short(1)]) == [True]
        clock.advance(DAY * 0.5)  # past W (1 + 1/G): the claim and the alias are forgotten
        assert d.claim_many([page(1)]) == [True]  # the page is won again, directly
        assert d.seen_through_redirects([short(1)]) == [False]  # the old alias does not answer
        assert d.claim_final([page(1)], requested=[short(1)]) == [False]
        assert d.seen_through_redirects([short(1)]) == [True]  # recorded again, in the current generation


def test_the_local_journal_outlives_the_process_and_a_torn_record(tmp_path: Path):
    state = tmp_path / "state.bloom"
    with Deduplicator("local", state=state, capacity=10_000) as d:
        d.claim_final([page(i) for i in range(10)], requested=[short(i) for i in range(10)])
    journal = Path(f"{state}.aliases")
    assert journal.stat().st_size == len(ALIASES_MAGIC) + 10 * RECORD.size
    with journal.open("ab") as file:
        file.write(b"torn" * 3)  # a process killed in the middle of a record
    with Deduplicator("local", state=state, capacity=10_000) as d:
        assert d.seen_through_redirects([short(i) for i in range(11)]) == [True] * 10 + [False]
        d.claim_final([page(20)], requested=[short(20)])
    assert journal.stat().st_size == len(ALIASES_MAGIC) + 11 * RECORD.size
    journal.write_bytes(b"something else")
    with pytest.raises(AliasFileError, match="not an alias journal"):
        Deduplicator("local", state=state, capacity=10_000)


def test_bad_input_is_refused_clearly():
    with Deduplicator("local", capacity=1_000) as d:
        with pytest.raises(ValueError, match="one URL per final URL"):
            d.claim_final([page(1)], requested=[short(1), short(2)])
        with pytest.raises(TypeError, match="single str"):
            d.claim_final(page(1), requested=[short(1)])  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="single str"):
            d.seen_through_redirects(short(1))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_aliases"):
        Deduplicator("local", capacity=1_000, max_aliases=0)


@pytest.mark.asyncio
async def test_the_service_strategy_keeps_the_aliases_of_its_store(redis_server):
    """Through a crawldedup serve on the set store: the same answers, blocking and asyncio, and
    the aliases land in the service's namespace (another client of the service reads them)."""
    with ServeProcess(["--strategy", "set", "--redis-url", redis_server.url, "--namespace", "svc"]) as server:
        with Deduplicator("service", service_url=server.url, namespace="svc") as d:
            assert story(d) == EXPECTED
        async with AsyncDeduplicator("service", service_url=server.url, namespace="svc") as a:
            assert await a.seen_through_redirects([short(1), short(4), short(5)]) == [True, True, False]
            assert await a.claim_final([page(7)], requested=[short(7)]) == [True]
        with Deduplicator("set", redis_url=redis_server.url, namespace="svc") as direct:
            assert direct.seen_through_redirects([short(7), short(2)]) == [True, True]
        # the fingerprint calls of the service itself, for crawlers in any language
        with ServiceClient(server.url) as client:
            assert client.claim_final([page(8), page(1)], requested=[short(8), short(18)]) == [True, False]
            assert client.seen_through_redirects([short(8), short(18), short(19)]) == [True, True, False]
            with pytest.raises(ValueError, match="one URL per final URL"):
                client.claim_final([page(9)], requested=[])
        async with AsyncServiceClient(server.url) as aclient:
            assert await aclient.claim_final([page(9)], requested=[short(9)], lease=30) == [True]
            assert await aclient.seen_through_redirects([short(9)]) == [True]
    assert "Traceback" not in server.stderr


def test_a_store_without_an_alias_map_says_so():
    from crawldedup.stores.aliases import unsupported

    error = unsupported("custom")
    assert isinstance(error, AliasesUnsupported) and isinstance(error, NotImplementedError)
    assert "custom store keeps no alias map" in str(error)


def test_the_store_reads_aliases_by_fingerprint(store_strategy, store_location):
    with Deduplicator(**settings(store_strategy, store_location)) as d:
        requested, finals = hash_many([short(1), short(2)]), hash_many([page(1), page(2)])
        d.store.claim_and_read((), (), aliases=Aliases(Fingerprints(requested), Fingerprints(finals), 10))  # type: ignore[union-attr]
        got = d.store.read_aliases(Fingerprints(hash_many([short(2), short(3), short(1)])))  # type: ignore[union-attr]
        assert got == [Fingerprints(finals).as_bytes()[1], None, Fingerprints(finals).as_bytes()[0]]


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["set", "sharded-set"])
def test_claim_final_waits_for_the_replicas_it_is_asked_to(strategy, sentinel_set):
    """With durability="replicated", the claims and the aliases of one claim_final are one
    pipeline followed by WAIT: both replicas hold them when it answers."""
    config = DedupConfig(
        strategy=strategy,
        redis_url=sentinel_set.url,
        namespace="final",
        capacity=10_000,
        durability="replicated",
        durable_replicas=2,
        durable_timeout=2.0,
    )
    with Deduplicator(config=config) as d:
        assert d.claim_final([page(i) for i in range(200)], requested=[short(i) for i in range(200)]) == [True] * 200
    for replica in sentinel_set.replicas:
        client = redis.Redis(port=replica.port)
        try:
            assert sum(client.hlen(alias_key("final", g)) for g in range(ALIAS_GROUPS)) == 200
        finally:
            client.close()


def test_deleting_a_namespace_deletes_its_aliases(store_strategy, store_location):

    with (
        Deduplicator(**settings(store_strategy, store_location, namespace="gone")) as d,
        Deduplicator(**settings(store_strategy, store_location, namespace="kept")) as kept,
    ):
        d.claim_final([page(i) for i in range(50)], requested=[short(i) for i in range(50)])
        kept.claim_final([page(1)], requested=[short(1)])
        assert alias_count(d) == 50 or store_strategy == "sqlite"  # SQLite counts every namespace's
        d.store.delete_namespace()  # type: ignore[union-attr]
        assert alias_count(d) == (1 if store_strategy == "sqlite" else 0)
        assert kept.seen_through_redirects([short(1)]) == [True]
