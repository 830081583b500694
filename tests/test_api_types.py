"""Every public function and method of ``crawldedup.__all__``, called with arguments of the wrong
type, raises the exception its docstring names, before doing anything.

The callables are read from ``__all__`` (a class's constructor and its public methods), so a new
public name or method fails :func:`test_every_public_callable_has_a_row` until it has a row here.
A row names the object it calls on (a key of :func:`things`), the wrong call, and the exception
expected; its docstring (or the one its ``See :meth:`...``` points to) must name that exception
under ``:raises``. A callable that takes no argument has the row ``NO_ARGUMENTS``.
"""

from __future__ import annotations

import asyncio
import inspect
import re
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple, Type

import pytest

import crawldedup
from crawldedup import (
    DEFAULT_POLICY,
    AsyncDeduplicator,
    AsyncServiceClient,
    BloomFilter,
    CanonicalPolicy,
    DedupConfig,
    Deduplicator,
    DedupStats,
    Durability,
    ExactFilter,
    HostRule,
    PostgresStore,
    RedisBloomStore,
    RedisKeyStore,
    RedisShardedSetStore,
    RetryPolicy,
    ServiceClient,
    SQLiteStore,
    canonicalize,
    canonicalize_many,
    fingerprint,
    load_policy_file,
    open_state,
)

#: A callable without an argument to get wrong (its signature is checked).
NO_ARGUMENTS = "takes no argument"
#: A result crawldedup returns, read by callers (a named tuple): not made by them.
MADE_BY_CRAWLDEDUP = "made by crawldedup"
DIGEST = DEFAULT_POLICY.digest
#: A fingerprint, as the stores take them.
FP = b"\x01" * 16

#: (object called on, the wrong call, the exception the docs name) per callable.
Row = Tuple[Optional[str], Callable[[Any], Any], Type[BaseException]]
ROWS: Dict[str, Any] = {
    # --- functions
    "canonicalize()": [(None, lambda _: canonicalize(None), TypeError), (None, lambda _: canonicalize(42), TypeError)],
    "canonicalize_many()": [
        (None, lambda _: canonicalize_many("https://shop.example/"), TypeError),
        (None, lambda _: canonicalize_many([1, 2]), TypeError),
        (None, lambda _: canonicalize_many(["https://shop.example/"], base=42), TypeError),
    ],
    "fingerprint()": [(None, lambda _: fingerprint(None), TypeError), (None, lambda _: fingerprint(42), TypeError)],
    "load_policy_file()": [(None, lambda _: load_policy_file(42), TypeError)],
    "open_state()": [(None, lambda _: open_state(42), TypeError)],
    # --- data
    "Canonicalized()": MADE_BY_CRAWLDEDUP,
    "ClaimBatch()": MADE_BY_CRAWLDEDUP,
    "DedupStats()": [(None, lambda _: DedupStats(urls="1"), TypeError)],
    "CanonicalPolicy()": [
        (None, lambda _: CanonicalPolicy(schemes="https"), TypeError),
        (None, lambda _: CanonicalPolicy(max_length="8192"), TypeError),
    ],
    "CanonicalPolicy.for_host": [("policy", lambda p: p.for_host(42), TypeError)],
    "HostRule()": [(None, lambda _: HostRule(42), TypeError)],
    "HostRule.document": NO_ARGUMENTS,
    "HostRule.options": NO_ARGUMENTS,
    "DedupConfig()": [(None, lambda _: DedupConfig(capacity="10"), ValueError)],
    "DedupConfig.from_env": [(None, lambda _: DedupConfig.from_env(42), TypeError)],
    "Durability()": [(None, lambda _: Durability(42), ValueError)],
    "RetryPolicy()": [(None, lambda _: RetryPolicy(retries="3"), ValueError)],
    "RetryPolicy.delay": [("retry", lambda r: r.delay("1"), TypeError), ("retry", lambda r: r.delay(1.5), TypeError)],
    "RetryPolicy.max_total_delay": NO_ARGUMENTS,
    # --- the local filter
    "BloomFilter()": [
        (None, lambda _: BloomFilter("100", 0.01), TypeError),
        (None, lambda _: BloomFilter(100, "0.01"), TypeError),
    ],
    "BloomFilter.add": [("bloom", lambda b: b.add(42), TypeError), ("bloom", lambda b: b.add(None), TypeError)],
    "BloomFilter.add_many": [
        ("bloom", lambda b: b.add_many("https://shop.example/"), TypeError),
        ("bloom", lambda b: b.add_many(b"https://shop.example/"), TypeError),
        ("bloom", lambda b: b.add_many([1, 2]), TypeError),
    ],
    "BloomFilter.contains_many": [
        ("bloom", lambda b: b.contains_many("https://shop.example/"), TypeError),
        ("bloom", lambda b: b.contains_many([None]), TypeError),
    ],
    "BloomFilter.update": [
        ("bloom", lambda b: b.update("https://shop.example/"), TypeError),
        ("bloom", lambda b: b.update(bytearray(b"x")), TypeError),
    ],
    "BloomFilter.add_hashes": [("bloom", lambda b: b.add_hashes([1, 2, 3]), TypeError)],
    "BloomFilter.contains_hashes": [("bloom", lambda b: b.contains_hashes("x"), TypeError)],
    "BloomFilter.union": [("bloom", lambda b: b.union(42), TypeError)],
    "BloomFilter.copy": [("bloom", lambda b: b.copy(42), TypeError)],
    "BloomFilter.open": [(None, lambda _: BloomFilter.open(42), TypeError)],
    "BloomFilter.close": NO_ARGUMENTS,
    "BloomFilter.mapped_file": NO_ARGUMENTS,
    "BloomFilter.flush": NO_ARGUMENTS,
    # --- the exact tier
    "ExactFilter()": [
        (None, lambda _: ExactFilter("100", 0.01), TypeError),
        (None, lambda _: ExactFilter(100, "0.01"), ValueError),
        (None, lambda _: ExactFilter(100, 0.01, path=42), TypeError),
    ],
    "ExactFilterBase.add": [("exact", lambda e: e.add(42), TypeError), ("exact", lambda e: e.add(None), TypeError)],
    "ExactFilterBase.add_many": [
        ("exact", lambda e: e.add_many("https://shop.example/"), TypeError),
        ("exact", lambda e: e.add_many(b"https://shop.example/"), TypeError),
        ("exact", lambda e: e.add_many([1, 2]), TypeError),
    ],
    "ExactFilterBase.contains_many": [
        ("exact", lambda e: e.contains_many("https://shop.example/"), TypeError),
        ("exact", lambda e: e.contains_many([None]), TypeError),
    ],
    "ExactFilterBase.update": [
        ("exact", lambda e: e.update("https://shop.example/"), TypeError),
        ("exact", lambda e: e.update([3.5]), TypeError),
    ],
    "ExactFilterBase.add_hashes": [("exact", lambda e: e.add_hashes([1, 2, 3]), TypeError)],
    "ExactFilterBase.contains_hashes": [("exact", lambda e: e.contains_hashes("x"), TypeError)],
    "ExactFilterBase.union": [("exact", lambda e: e.union(42), TypeError)],
    "ExactFilterBase.open": [(None, lambda _: ExactFilter.open(42), TypeError)],
    "ExactFilterBase.close": NO_ARGUMENTS,
    "ExactFilterBase.flush": NO_ARGUMENTS,
    "ExactFilterBase.merge": NO_ARGUMENTS,
    "ExactFilterBase.runs": NO_ARGUMENTS,
    "ExactFilterBase.stages": NO_ARGUMENTS,
    "ExactFilterBase.generations": NO_ARGUMENTS,
    # --- the Deduplicator
    "Deduplicator()": [
        (None, lambda _: Deduplicator(42), ValueError),
        (None, lambda _: Deduplicator("local", capacity="100"), ValueError),
        (None, lambda _: Deduplicator("local", policy=42), TypeError),
    ],
    "DedupCore.from_env": [(None, lambda _: Deduplicator.from_env(42), TypeError)],
    "DedupCore.watch_stats": [("dedup", lambda d: d.watch_stats(42), TypeError)],
    "Deduplicator.claim": [("dedup", lambda d: d.claim(None), TypeError), ("dedup", lambda d: d.claim(42), TypeError)],
    "Deduplicator.claim_many": [
        ("dedup", lambda d: d.claim_many("https://shop.example/"), TypeError),
        ("dedup", lambda d: d.claim_many([1, 2]), TypeError),
        ("dedup", lambda d: d.claim_many(["https://shop.example/"], lease="60"), TypeError),
    ],
    "Deduplicator.claim_batch": [
        ("dedup", lambda d: d.claim_batch([None]), TypeError),
        ("dedup", lambda d: d.claim_batch(["x"], base=42), TypeError),
    ],
    "Deduplicator.hold_batch": [("dedup", lambda d: d.hold_batch([42]), TypeError)],
    "Deduplicator.hold_prepared": [("dedup", lambda d: d.hold_prepared(["https://shop.example/"]), TypeError)],
    "Deduplicator.claim_keys": [("dedup", lambda d: d.claim_keys([42]), TypeError)],
    "Deduplicator.seen": [("dedup", lambda d: d.seen([None]), TypeError)],
    "Deduplicator.seen_keys": [("dedup", lambda d: d.seen_keys("key"), TypeError)],
    "Deduplicator.claim_final": [
        ("dedup", lambda d: d.claim_final([42], ["https://shop.example/"]), TypeError),
        ("dedup", lambda d: d.claim_final(["https://shop.example/"], [42]), TypeError),
    ],
    "Deduplicator.seen_through_redirects": [("dedup", lambda d: d.seen_through_redirects([None]), TypeError)],
    "Deduplicator.done": [("dedup", lambda d: d.done([42]), TypeError)],
    "Deduplicator.release": [("dedup", lambda d: d.release([42]), TypeError)],
    "Deduplicator.renew": [("dedup", lambda d: d.renew([42], 60), TypeError)],
    "Deduplicator.expired": [
        ("dedup", lambda d: d.expired("10"), TypeError),
        ("dedup", lambda d: d.expired(10, lease="60"), TypeError),
    ],
    "Deduplicator.check_content": [
        ("dedup", lambda d: d.check_content([42], [0]), TypeError),
        ("dedup", lambda d: d.check_content(["https://shop.example/"], ["0"]), TypeError),
    ],
    "Deduplicator.store_bytes_per_page": NO_ARGUMENTS,
    "Deduplicator.store_bytes_per_url": NO_ARGUMENTS,
    "Deduplicator.close": NO_ARGUMENTS,
    # --- the Deduplicator for asyncio
    "AsyncDeduplicator()": [(None, lambda _: AsyncDeduplicator("local", capacity="100"), ValueError)],
    "AsyncDeduplicator.open": NO_ARGUMENTS,
    "AsyncDeduplicator.aclose": NO_ARGUMENTS,
    "AsyncDeduplicator.claim": [("adedup", lambda d: d.claim(None), TypeError)],
    "AsyncDeduplicator.claim_many": [
        ("adedup", lambda d: d.claim_many("https://shop.example/"), TypeError),
        ("adedup", lambda d: d.claim_many([1, 2]), TypeError),
    ],
    "AsyncDeduplicator.claim_batch": [("adedup", lambda d: d.claim_batch([None]), TypeError)],
    "AsyncDeduplicator.claim_keys": [("adedup", lambda d: d.claim_keys([42]), TypeError)],
    "AsyncDeduplicator.seen": [("adedup", lambda d: d.seen([None]), TypeError)],
    "AsyncDeduplicator.seen_keys": [("adedup", lambda d: d.seen_keys([42]), TypeError)],
    "AsyncDeduplicator.claim_final": [("adedup", lambda d: d.claim_final([42], ["https://shop.example/"]), TypeError)],
    "AsyncDeduplicator.seen_through_redirects": [("adedup", lambda d: d.seen_through_redirects([None]), TypeError)],
    "AsyncDeduplicator.done": [("adedup", lambda d: d.done([42]), TypeError)],
    "AsyncDeduplicator.release": [("adedup", lambda d: d.release([42]), TypeError)],
    "AsyncDeduplicator.renew": [("adedup", lambda d: d.renew([42], 60), TypeError)],
    "AsyncDeduplicator.expired": [("adedup", lambda d: d.expired("10"), TypeError)],
    "AsyncDeduplicator.check_content": [("adedup", lambda d: d.check_content([42], [0]), TypeError)],
    "AsyncDeduplicator.store_bytes_per_page": NO_ARGUMENTS,
    "AsyncDeduplicator.store_bytes_per_url": NO_ARGUMENTS,
    # --- the stores (their common methods on a SQLite file)
    "SQLiteStore()": [
        (None, lambda _: SQLiteStore(42, namespace="n", policy_digest=DIGEST), TypeError),
        (None, lambda _: SQLiteStore("s.sqlite", namespace=42, policy_digest=DIGEST), ValueError),
    ],
    "SQLiteStore.close": NO_ARGUMENTS,
    "SQLiteStore.aclose": NO_ARGUMENTS,
    "RedisKeyStore()": [(None, lambda _: RedisKeyStore(42, namespace="n", policy_digest=DIGEST), ValueError)],
    "RedisShardedSetStore()": [
        (
            None,
            lambda _: RedisShardedSetStore("redis://127.0.0.1:1/0", capacity="10", namespace="n", policy_digest=DIGEST),
            ValueError,
        )
    ],
    "RedisBloomStore()": [
        (
            None,
            lambda _: RedisBloomStore(
                "redis://127.0.0.1:1/0", capacity=10, error_rate="0.1", namespace="n", policy_digest=DIGEST
            ),
            ValueError,
        )
    ],
    "RedisBloomStore.filter_info": NO_ARGUMENTS,
    "RedisKeyStore.scan_claims": [("redis", lambda s: s.scan_claims("0"), TypeError)],
    "RedisStore.close": NO_ARGUMENTS,
    "RedisStore.aclose": NO_ARGUMENTS,
    "PostgresStore()": [(None, lambda _: PostgresStore(42, namespace="n", policy_digest=DIGEST), ValueError)],
    "PostgresStore.execute": [("postgres", lambda s: s.execute(42), TypeError)],
    "PostgresStore.close": NO_ARGUMENTS,
    "PostgresStore.aclose": NO_ARGUMENTS,
    "ClaimStore.claim_many": [
        ("sqlite", lambda s: s.claim_many(FP), TypeError),
        ("sqlite", lambda s: s.claim_many(["https://shop.example/"]), TypeError),
    ],
    "ClaimStore.contains_many": [("sqlite", lambda s: s.contains_many([42]), TypeError)],
    "ClaimStore.claim_and_read": [("sqlite", lambda s: s.claim_and_read([FP], [42]), TypeError)],
    "ClaimStore.unclaim_many": [("sqlite", lambda s: s.unclaim_many([None]), TypeError)],
    "ClaimStore.read_aliases": [("sqlite", lambda s: s.read_aliases([42]), TypeError)],
    "ClaimStore.finish_leases": [("sqlite", lambda s: s.finish_leases([42], "me"), TypeError)],
    "ClaimStore.release_leases": [("sqlite", lambda s: s.release_leases([42], "me"), TypeError)],
    "ClaimStore.renew_leases": [("sqlite", lambda s: s.renew_leases([42], "me", 60), TypeError)],
    "ClaimStore.expired_leases": [("sqlite", lambda s: s.expired_leases("10"), TypeError)],
    "ClaimStore.perform": [("sqlite", lambda s: s.perform(42), TypeError)],
    "ClaimStore.bytes_per_url": NO_ARGUMENTS,
    "ClaimStore.lease_counts": NO_ARGUMENTS,
    "ClaimStore.with_retries": [("sqlite", lambda s: s.with_retries(42), TypeError)],
    # --- the stores' operators' calls (crawldedup doctor, stats, migrate)
    "SQLiteStore.from_options": [(None, lambda _: SQLiteStore.from_options(42), TypeError)],
    "SQLiteStore.read_record": [(None, lambda _: SQLiteStore.read_record("crawl", 42), ValueError)],
    "SQLiteStore.server_facts": NO_ARGUMENTS,
    "SQLiteStore.count_claims": NO_ARGUMENTS,
    "SQLiteStore.delete_namespace": NO_ARGUMENTS,
    "RedisKeyStore.from_options": [(None, lambda _: RedisKeyStore.from_options(42), TypeError)],
    "RedisShardedSetStore.from_options": [(None, lambda _: RedisShardedSetStore.from_options(42), TypeError)],
    "RedisBloomStore.from_options": [(None, lambda _: RedisBloomStore.from_options(42), TypeError)],
    "PostgresStore.from_options": [(None, lambda _: PostgresStore.from_options(42), TypeError)],
    "RedisStore.read_record": [(None, lambda _: RedisKeyStore.read_record("crawl", 42), ValueError)],
    "PostgresStore.read_record": [(None, lambda _: PostgresStore.read_record("crawl", 42), ValueError)],
    "RedisKeyStore.count_claims": NO_ARGUMENTS,
    "RedisShardedSetStore.count_claims": NO_ARGUMENTS,
    "RedisBloomStore.count_claims": NO_ARGUMENTS,
    "PostgresStore.count_claims": NO_ARGUMENTS,
    "RedisStore.server_facts": NO_ARGUMENTS,
    "PostgresStore.server_facts": NO_ARGUMENTS,
    "RedisStore.delete_namespace": NO_ARGUMENTS,
    "PostgresStore.delete_namespace": NO_ARGUMENTS,
    "RedisStore.one_node": NO_ARGUMENTS,
    "GroupedScriptStore.lease_counts": NO_ARGUMENTS,
    "GroupedScriptStore.leased_ids": NO_ARGUMENTS,
    "RedisShardedSetStore.generation_members": [
        ("sharded", lambda s: s.generation_members("0", 10), TypeError),
        ("sharded", lambda s: s.generation_members(0, 1.5), TypeError),
    ],
    "RedisShardedSetStore.merge_generations": [("sharded", lambda s: s.merge_generations("rows"), TypeError)],
    "RedisShardedSetStore.sweep": [("sharded", lambda s: s.sweep("1000"), TypeError)],
    # --- the service's clients (refused before any request is sent)
    "ServiceClient()": [(None, lambda _: ServiceClient(42), ValueError)],
    "ServiceClient.close": NO_ARGUMENTS,
    "ServiceClient.claim": [("client", lambda c: c.claim(None), TypeError)],
    "ServiceClient.claim_many": [
        ("client", lambda c: c.claim_many("https://shop.example/"), TypeError),
        ("client", lambda c: c.claim_many([1, 2]), TypeError),
    ],
    "ServiceClient.claim_batch": [("client", lambda c: c.claim_batch([None]), TypeError)],
    "ServiceClient.claim_keys": [("client", lambda c: c.claim_keys([42]), TypeError)],
    "ServiceClient.seen": [("client", lambda c: c.seen([None]), TypeError)],
    "ServiceClient.seen_keys": [("client", lambda c: c.seen_keys("key"), TypeError)],
    "ServiceClient.claim_final": [("client", lambda c: c.claim_final([42], ["https://shop.example/"]), TypeError)],
    "ServiceClient.seen_through_redirects": [("client", lambda c: c.seen_through_redirects([None]), TypeError)],
    "ServiceClient.done": [("client", lambda c: c.done([42]), TypeError)],
    "ServiceClient.release": [("client", lambda c: c.release([42]), TypeError)],
    "ServiceClient.renew": [("client", lambda c: c.renew(["https://shop.example/"], "60"), TypeError)],
    "ServiceClient.expired": [("client", lambda c: c.expired("10"), TypeError)],
    "AsyncServiceClient()": [(None, lambda _: AsyncServiceClient(42), ValueError)],
    "AsyncServiceClient.aclose": NO_ARGUMENTS,
    "AsyncServiceClient.claim": [("aclient", lambda c: c.claim(None), TypeError)],
    "AsyncServiceClient.claim_many": [("aclient", lambda c: c.claim_many([1, 2]), TypeError)],
    "AsyncServiceClient.claim_batch": [("aclient", lambda c: c.claim_batch([None]), TypeError)],
    "AsyncServiceClient.claim_keys": [("aclient", lambda c: c.claim_keys([42]), TypeError)],
    "AsyncServiceClient.seen": [("aclient", lambda c: c.seen([None]), TypeError)],
    "AsyncServiceClient.seen_keys": [("aclient", lambda c: c.seen_keys("key"), TypeError)],
    "AsyncServiceClient.claim_final": [
        ("aclient", lambda c: c.claim_final([42], ["https://shop.example/"]), TypeError)
    ],
    "AsyncServiceClient.seen_through_redirects": [("aclient", lambda c: c.seen_through_redirects([None]), TypeError)],
    "AsyncServiceClient.done": [("aclient", lambda c: c.done([42]), TypeError)],
    "AsyncServiceClient.release": [("aclient", lambda c: c.release([42]), TypeError)],
    "AsyncServiceClient.renew": [("aclient", lambda c: c.renew(["https://shop.example/"], "60"), TypeError)],
    "AsyncServiceClient.expired": [("aclient", lambda c: c.expired("10"), TypeError)],
}


def public_callables() -> Dict[str, Any]:
    """``Name()`` for each public function and class (its constructor), ``Class.method`` for each
    public method, keyed by the class that defines it (the local filter's twins as BloomFilter)."""
    found: Dict[str, Any] = {}
    for name in crawldedup.__all__:
        thing = getattr(crawldedup, name)
        if inspect.isclass(thing):
            if issubclass(thing, BaseException):
                continue  # an exception is raised, not called
            found[f"{name}()"] = thing
            for attribute in dir(thing):
                if attribute.startswith("_"):
                    continue
                owner = next((klass for klass in thing.__mro__ if attribute in vars(klass)), None)
                if owner is None or not (owner.__module__ or "").startswith("crawldedup"):
                    continue
                raw = vars(owner)[attribute]
                if isinstance(raw, property) or not (callable(raw) or isinstance(raw, (classmethod, staticmethod))):
                    continue
                shown = name if thing is BloomFilter else owner.__qualname__
                found[f"{shown}.{attribute}"] = getattr(thing, attribute)
        elif callable(thing):
            found[f"{name}()"] = thing
    return found


def test_every_public_callable_has_a_row():
    assert sorted(public_callables()) == sorted(ROWS)


def test_a_callable_without_a_row_takes_no_argument():
    for key, thing in public_callables().items():
        if ROWS.get(key) == NO_ARGUMENTS:
            parameters = [p for p in inspect.signature(thing).parameters.values() if p.name not in ("self", "cls")]
            assert parameters == [], key
        if ROWS.get(key) == MADE_BY_CRAWLDEDUP:
            assert issubclass(thing, tuple), key


def documented(thing: Any, owner: Optional[type] = None) -> str:
    """The docstring of ``thing``, of what a ``See :meth:`...``` in it points to, and of its
    class (``owner``: the errors that each of its calls shares)."""
    text = (inspect.getdoc(thing) or "") + "\n" + ((owner.__doc__ or "") if owner is not None else "")
    for reference in re.findall(r"See :meth:`~?(?:crawldedup\.)?(?:dedup\.)?(\w+)\.(\w+)`", text):
        text += "\n" + (inspect.getdoc(getattr(getattr(crawldedup, reference[0]), reference[1])) or "")
    return text


def test_the_docs_name_each_exception_of_the_table():
    callables = public_callables()
    missing = []
    for key, rows in ROWS.items():
        if rows in (NO_ARGUMENTS, MADE_BY_CRAWLDEDUP):
            continue
        name, _, method = key.partition(".")
        text = documented(callables[key], getattr(crawldedup, name, None) if method else None)
        for _, _, expected in rows:
            if not re.search(rf":raises {expected.__name__}:", text):
                missing.append(f"{key}: {expected.__name__}")
    assert missing == []


@pytest.fixture
def things(tmp_path: Path) -> Dict[str, Callable[[], Any]]:
    """What the rows call on, made fresh for each row."""
    return {
        "policy": lambda: DEFAULT_POLICY,
        "retry": lambda: RetryPolicy(),
        "bloom": lambda: BloomFilter(100, 0.01),
        "exact": lambda: ExactFilter(100, 0.01),
        "dedup": lambda: Deduplicator("local", capacity=100),
        "adedup": lambda: AsyncDeduplicator("local", capacity=100).open(),
        "sqlite": lambda: SQLiteStore(tmp_path / "s.sqlite", namespace="types", policy_digest=DIGEST),
        "client": lambda: ServiceClient("http://127.0.0.1:1"),
        "aclient": lambda: AsyncServiceClient("http://127.0.0.1:1"),
    }


async def _call(make: Optional[Callable[[], Any]], call: Callable[[Any], Any]) -> None:
    thing = make() if make is not None else None
    if inspect.isawaitable(thing):
        thing = await thing
    try:
        answer = call(thing)
        if inspect.isawaitable(answer):
            await answer
    finally:
        if hasattr(thing, "aclose"):
            await thing.aclose()
        elif hasattr(thing, "close"):
            thing.close()


SERVERS = {"redis", "sharded", "postgres"}
LOCAL_ROWS = [
    (key, i, row)
    for key, rows in ROWS.items()
    if rows not in (NO_ARGUMENTS, MADE_BY_CRAWLDEDUP)
    for i, row in enumerate(rows)
    if row[0] not in SERVERS
]


@pytest.mark.parametrize("key, index, row", LOCAL_ROWS, ids=[f"{key}-{i}" for key, i, _ in LOCAL_ROWS])
def test_a_wrong_type_raises_what_the_docs_name(things, tmp_path, monkeypatch, key: str, index: int, row: Row):
    monkeypatch.chdir(tmp_path)
    on, call, expected = row
    with pytest.raises(expected):
        asyncio.run(_call(things[on] if on else None, call))


def _rows_on(*kinds: str) -> List[Tuple[str, Row]]:
    return [
        (key, row)
        for key, rows in ROWS.items()
        if rows not in (NO_ARGUMENTS, MADE_BY_CRAWLDEDUP)
        for row in rows
        if row[0] in kinds
    ]


@pytest.mark.redis
def test_a_wrong_type_raises_what_the_docs_name_on_redis(redis_url: str):
    makers = {
        "redis": lambda: RedisKeyStore(redis_url, namespace="types", policy_digest=DIGEST),
        "sharded": lambda: RedisShardedSetStore(
            redis_url, capacity=1_000, namespace="types-sharded", policy_digest=DIGEST
        ),
    }
    for _key, (on, call, expected) in _rows_on("redis", "sharded"):
        with makers[on]() as store:
            with pytest.raises(expected):
                call(store)


@pytest.mark.postgres
def test_a_wrong_type_raises_what_the_docs_name_on_postgres(postgres_url: str):
    for _key, (_, call, expected) in _rows_on("postgres"):
        with PostgresStore(postgres_url, namespace="types", policy_digest=DIGEST) as store:
            with pytest.raises(expected):
                call(store)
