"""The Deduplicator: canonicalize, fingerprint, local filter, one store round trip per batch."""

from __future__ import annotations

import pytest

from crawldedup import DEFAULT_POLICY, CanonicalPolicy, InvalidURL, NamespaceConflict, canonicalize
from crawldedup.bloom import BloomFilter, FilterFileError
from crawldedup.config import DedupConfig
from crawldedup.dedup import Deduplicator, open_state
from crawldedup.fingerprints import hash_many

#: The layer has a pure-Python twin: scripts/test runs these in its pure-Python run too.
pytestmark = pytest.mark.twins

WWW_POLICY = CanonicalPolicy(strip_www=True)

SPELLINGS = [
    "https://shop.example/product/1?color=red&size=m",
    "HTTPS://SHOP.EXAMPLE:443/product/1?size=m&color=red&utm_source=x#reviews",
    "https://shop.example/product/1/?color=red&size=m&gclid=abc",
]


def pages(n: int, prefix: str = "p") -> list[str]:
    return [f"https://site.example/{prefix}/{i}?a=1" for i in range(n)]


def dedup(strategy: str, location: dict, **kwargs) -> Deduplicator:
    options = {"namespace": "crawl", "capacity": 100_000, "error_rate": 0.001, **location, **kwargs}
    return Deduplicator(strategy, **options)


# --- every strategy ------------------------------------------------------------------------


def test_spellings_of_one_page_have_one_winner(store_strategy, store_location):
    with dedup(store_strategy, store_location) as d:
        assert d.claim_many(SPELLINGS) == [True, False, False]
        assert d.claim_many(list(reversed(SPELLINGS))) == [False, False, False]


def test_local_strategy_spellings_have_one_winner():
    with Deduplicator("local", capacity=1_000, error_rate=0.001) as d:
        assert d.store is None
        assert d.claim_many(SPELLINGS) == [True, False, False]
        assert d.claim(SPELLINGS[1]) is False
        assert d.claim("https://shop.example/product/2") is True


def test_invalid_urls_are_reported_not_raised(store_strategy, store_location):
    """A string or bytes the policy refuses is data: reported, never raised."""
    urls = [
        "https://ok.example/a",
        "mailto:x@y.example",
        "https://ok.example/b",
        b"http://ok.example/\xff",
        "http://bad host/",
    ]
    with dedup(store_strategy, store_location) as d:
        batch = d.claim_batch(urls)
        assert batch.won == [True, False, True, False, False]
        assert batch.canonical == ["https://ok.example/a", None, "https://ok.example/b", None, None]
        assert sorted(batch.errors) == [1, 3, 4]
        assert all(isinstance(e, InvalidURL) for e in batch.errors.values())
        assert "mailto" in str(batch.errors[1]) and "UTF-8" in str(batch.errors[3])
        assert d.claim("javascript:void(0)") is False
        stats = d.stats
    assert (stats.urls, stats.invalid, stats.won, stats.lost) == (6, 4, 2, 0)


@pytest.mark.parametrize(
    "call",
    [
        lambda d: d.claim(None),
        lambda d: d.claim(42),
        lambda d: d.claim_many([1, 2]),
        lambda d: d.claim_batch(["https://ok.example/c", 42]),
        lambda d: d.hold_batch(["https://ok.example/c", None]),
        lambda d: d.seen([bytearray(b"https://ok.example/c")]),
    ],
    ids=["claim-None", "claim-int", "claim_many-ints", "claim_batch-int", "hold_batch-None", "seen-bytearray"],
)
def test_a_url_of_the_wrong_type_is_a_type_error_and_claims_nothing(call):
    """Not a URL at all is the caller's mistake: a TypeError for the whole batch, before any claim
    (answered False, the page behind it would be lost without a word)."""
    with Deduplicator("local", capacity=100, error_rate=0.01) as d:
        with pytest.raises(TypeError, match="URL must be str or bytes, got"):
            call(d)
        assert d.stats.urls == 0
        assert d.claim("https://ok.example/c") is True


def test_a_single_string_is_not_a_batch():
    with Deduplicator("local", capacity=100, error_rate=0.01) as d:
        with pytest.raises(TypeError, match="single str"):
            d.claim_many("https://shop.example/")  # type: ignore[arg-type]


def test_two_workers_one_winner_per_page(store_strategy, store_location):
    urls = pages(3_000)
    with dedup(store_strategy, store_location) as first, dedup(store_strategy, store_location) as second:
        won_first = first.claim_many(urls[:2_000])
        won_second = second.claim_many(urls)
    assert won_first == [True] * 2_000
    if store_strategy == "bloom":  # a false positive of RedisBloom is won by nobody
        assert won_second[:2_000] == [False] * 2_000 and sum(won_second) >= 990
    else:
        assert won_second == [False] * 2_000 + [True] * 1_000


def test_seen_reads_what_another_worker_claimed_and_claims_nothing(store_strategy, store_location):
    urls = pages(3)
    with dedup(store_strategy, store_location) as first, dedup(store_strategy, store_location) as second:
        first.claim_many(urls[:2])
        first.claim_keys(["request-fp"])
        # The second worker's local filter is empty: the store answers.
        assert second.seen([urls[1].replace("https://site", "HTTPS://SITE"), urls[0], urls[2], "not a url"]) == [
            True,
            True,
            False,
            False,
        ]
        assert second.seen_keys(["request-fp", "other-fp"]) == [True, False]
        assert second.stats.urls == 0 and second.stats.round_trips == 0, "a read is no claim"
        assert second.claim_many(urls) == [False, False, True]
        assert second.claim_keys(["other-fp"]) == [True]
        assert first.seen(urls) == [True] * 3 and first.seen_keys(["other-fp"]) == [True]
        with pytest.raises(TypeError, match="single str"):
            first.seen(urls[0])  # type: ignore[arg-type]


def test_one_round_trip_per_batch_and_none_for_local_hits(store_strategy, store_location):
    urls = pages(1_000)
    with dedup(store_strategy, store_location, sample_rate=0) as d:
        before = d.store.round_trips
        d.claim_many(urls)
        assert d.store.round_trips == before + 1
        d.claim_many(urls)  # every URL is now a local hit
        assert d.store.round_trips == before + 1
        stats = d.stats
    assert stats.local_hits == 1_000 and stats.answered_locally == 1_000
    assert stats.store_claims == 1_000 and stats.round_trips == 1


def test_duplicates_in_a_batch_are_sent_once(store_strategy, store_location):
    with dedup(store_strategy, store_location) as d:
        d.claim_many(SPELLINGS * 10 + pages(5))
        assert d.stats.store_claims == 6


# --- the local filter and its measured loss --------------------------------------------------


def plant_false_positive(d: Deduplicator, url: str) -> None:
    """Make the local filter answer "seen" for a URL the store has never had."""
    d.local_filter.add_hashes(hash_many([canonicalize(url)]))


def test_a_local_false_positive_loses_the_page_and_the_sample_sees_it(store_strategy, store_location):
    url = "https://news.example.com/2024/01/story-1"
    with dedup(store_strategy, store_location, sample_rate=1.0) as d:
        plant_false_positive(d, url)
        assert d.claim(url) is False
        stats = d.stats
    assert (stats.sampled_hits, stats.false_hits, stats.false_hit_rate) == (1, 1, 1.0)
    assert stats.store_claims == 0 and stats.store_reads == 1


def test_verify_hits_wins_a_local_false_positive(store_strategy, store_location):
    url = "https://news.example.com/2024/01/story-1"
    with dedup(store_strategy, store_location, verify_hits=True) as d:
        plant_false_positive(d, url)
        assert d.claim_many([url, url]) == [True, False]
        assert d.claim(url) is False
        stats = d.stats
    assert stats.false_hits == 1 and stats.answered_locally == 0 and stats.round_trips == 2


def test_verify_hits_needs_a_store():
    with pytest.raises(ValueError, match="verify_hits needs a store"):
        Deduplicator("local", verify_hits=True)


def test_sampled_check_measures_the_real_loss(tmp_path):
    # The Bloom filter alone in front (local_tier bloom), at a high error rate (it grows past its
    # capacity, but keeps that rate): many new URLs are taken for seen ones.
    urls = pages(6_000)
    with Deduplicator(
        "sqlite", sqlite_path=tmp_path / "c.sqlite", capacity=500, error_rate=0.5, sample_rate=1.0, local_tier="bloom"
    ) as d:
        won = [w for start in range(0, len(urls), 100) for w in d.claim_many(urls[start : start + 100])]
        stats = d.stats
    lost_new = won.count(False)  # every URL is new: each False is a page lost to the local filter
    assert lost_new > 500
    assert stats.false_hits == lost_new == stats.local_hits
    assert stats.false_hit_rate == 1.0


def test_the_exact_tier_in_front_of_a_store_loses_none_of_them(tmp_path):
    # The same, with the default local tier: each Bloom hit is confirmed in the exact tier, so
    # the filter's false positives go to the store, which wins them.
    urls = pages(6_000)
    with Deduplicator("sqlite", sqlite_path=tmp_path / "c.sqlite", capacity=500, error_rate=0.5, sample_rate=1.0) as d:
        won = [w for start in range(0, len(urls), 100) for w in d.claim_many(urls[start : start + 100])]
        assert d.claim_many(urls[:3_000]) == [False] * 3_000  # repeats: answered locally, no round trip
        stats = d.stats
    assert won.count(False) == 0
    assert stats.local_hits == 3_000 and stats.store_claims == 6_000 and stats.false_hits == 0


def test_sample_is_a_deterministic_share_of_hits(tmp_path):
    urls = pages(20_000)
    reads = []
    for run in range(2):
        with Deduplicator("sqlite", sqlite_path=tmp_path / f"{run}.sqlite", capacity=100_000, sample_rate=0.25) as d:
            d.claim_many(urls)
            d.claim_many(urls)  # all local hits now
            reads.append(d.stats.store_reads)
    assert reads[0] == reads[1]
    assert 0.22 * 20_000 < reads[0] < 0.28 * 20_000


@pytest.mark.parametrize("rate", [-0.1, 1.5, "0.1", True])
def test_bad_sample_rate(rate):
    with pytest.raises(ValueError, match="sample_rate must be a number in \\[0, 1\\]"):
        Deduplicator("local", sample_rate=rate)


# --- namespaces, rounds and policies ---------------------------------------------------------


def test_rounds_are_fresh_dedup_spaces(store_strategy, store_location):
    urls = pages(100)
    with dedup(store_strategy, store_location, crawl_round="2024-06") as june:
        assert june.namespace == "crawl:2024-06"
        assert all(june.claim_many(urls))
    with dedup(store_strategy, store_location, crawl_round="2024-07") as july:
        assert all(july.claim_many(urls))
    with dedup(store_strategy, store_location, crawl_round="2024-06") as june_again:
        assert not any(june_again.claim_many(urls))


def test_a_namespace_refuses_another_canonical_policy(store_strategy, store_location):
    dedup(store_strategy, store_location).close()
    with pytest.raises(NamespaceConflict, match=f"{DEFAULT_POLICY.digest}.*{WWW_POLICY.digest}"):
        dedup(store_strategy, store_location, policy=WWW_POLICY)


def test_a_store_of_another_policy_is_refused(tmp_path):
    from crawldedup.stores import SQLiteStore

    store = SQLiteStore(tmp_path / "c.sqlite", namespace="crawl", policy_digest=WWW_POLICY.digest)
    with pytest.raises(
        ValueError,
        match=f"custom canonical policy \\({WWW_POLICY.digest}\\), this crawl uses "
        f"canonical policy 3 \\({DEFAULT_POLICY.digest}\\)",
    ):
        Deduplicator("sqlite", store=store)
    store.close()


def test_switching_strategy_keeps_what_counts_as_the_same_url(tmp_path, redis_url):
    urls = SPELLINGS + pages(50) + ["https://www.site.example/p/1?a=1"]
    batches = []
    for strategy, location in [
        ("local", {}),
        ("sqlite", {"sqlite_path": tmp_path / "c.sqlite"}),
        ("sharded-set", {"redis_url": redis_url}),
    ]:
        with dedup(strategy, location) as d:
            batches.append(d.claim_batch(urls))
    assert batches[0] == batches[1] == batches[2]


# --- the state file --------------------------------------------------------------------------


def test_state_file_remembers_across_runs(tmp_path):
    state = tmp_path / "crawl.bloom"
    with Deduplicator("local", state=state, capacity=10_000) as d:
        assert all(d.claim_many(pages(100)))
    with Deduplicator("local", state=state, capacity=10_000) as d:
        assert not any(d.claim_many(pages(100)))
        assert d.claim("https://site.example/new") is True


def test_state_file_of_another_policy_is_refused(tmp_path):
    state = tmp_path / "crawl.bloom"
    open_state(state, 1_000, 0.01, DEFAULT_POLICY).close()
    with pytest.raises(FilterFileError, match=f"{DEFAULT_POLICY.digest}.*{WWW_POLICY.digest}") as raised:
        open_state(state, 1_000, 0.01, WWW_POLICY)
    assert str(state) in str(raised.value)


def test_state_file_of_another_round_is_refused(tmp_path):
    state = tmp_path / "crawl.bloom"
    Deduplicator("local", state=state, crawl_round="r1").close()
    with pytest.raises(FilterFileError, match="namespace 'crawldedup:r1'.*namespace 'crawldedup:r2'"):
        Deduplicator("local", state=state, crawl_round="r2")


def test_unstamped_filter_file_is_refused(tmp_path):
    path = tmp_path / "plain.bloom"
    BloomFilter(1_000, 0.01, path=path).close()
    with pytest.raises(FilterFileError, match="not a crawldedup state file"):
        open_state(path, 1_000, 0.01)


def test_state_in_memory_without_a_path():
    bloom = open_state(None, 1_000, 0.01, WWW_POLICY)
    try:
        assert bloom.path is None
        assert WWW_POLICY.digest.encode() in bloom.metadata
    finally:
        bloom.close()


def test_existing_state_keeps_its_own_size(tmp_path):
    state = tmp_path / "crawl.bloom"
    open_state(state, 5_000, 0.01).close()
    with open_state(state, 1_000_000, 0.0001) as bloom:
        assert (bloom.capacity, bloom.error_rate) == (5_000, 0.01)


# --- configuration -------------------------------------------------------------------------


def test_from_env_reads_the_variables(tmp_path, redis_url):
    environ = {
        "DEDUP_STRATEGY": "set",
        "REDIS_URL": redis_url,
        "VISITED_TTL_DAYS": "0.5",
        "BLOOM_CAPACITY": "20000",
        "BLOOM_ERROR_RATE": "0.001",
        "CRAWLDEDUP_NAMESPACE": "shop",
        "CRAWLDEDUP_STATE": str(tmp_path / "s.bloom"),
    }
    with Deduplicator.from_env(environ) as d:
        assert d.config == DedupConfig("set", redis_url, 0.5, 20_000, 0.001, str(tmp_path / "s.bloom"), "shop")
        assert d.store.ttl_seconds == 43_200 and d.store.namespace == "shop"
        assert d.local_filter.capacity == 20_000
    with Deduplicator.from_env(environ, strategy="local", namespace="other", state=tmp_path / "o.bloom") as d:
        assert d.store is None and d.namespace == "other"


def test_constructor_does_not_read_the_environment(monkeypatch):
    monkeypatch.setenv("DEDUP_STRATEGY", "set")
    with Deduplicator(capacity=1_000) as d:
        assert d.config.strategy == "exact" and d.store is None


@pytest.mark.parametrize(
    "variable, value, message",
    [
        (
            "DEDUP_STRATEGY",
            "redis",
            "strategy \\(DEDUP_STRATEGY\\) must be one of exact, local, set, sharded-set, redisbloom, sqlite, "
            "postgres, service \\(bloom: redisbloom\\), got 'redis'",
        ),
        ("BLOOM_CAPACITY", "1e6", "capacity \\(BLOOM_CAPACITY\\) must be an integer in \\[1, 2\\*\\*48\\], got '1e6'"),
        ("BLOOM_CAPACITY", "0", "capacity \\(BLOOM_CAPACITY\\) must be an integer"),
        ("BLOOM_ERROR_RATE", "1", "error_rate \\(BLOOM_ERROR_RATE\\) must be a number in \\[1e-20, 1\\)"),
        ("VISITED_TTL_DAYS", "-1", "ttl_days \\(VISITED_TTL_DAYS\\) must be a number of days"),
        ("VISITED_TTL_DAYS", "soon", "ttl_days \\(VISITED_TTL_DAYS\\) must be a number of days"),
        ("CRAWLDEDUP_NAMESPACE", "a{b}", "namespace \\(CRAWLDEDUP_NAMESPACE\\) must be"),
        ("REDIS_URL", "http://user:hunter2@host/", "redis_url \\(REDIS_URL\\) must be a URL starting with redis://"),
    ],
)
def test_bad_environment_value_names_the_variable(variable, value, message):
    with pytest.raises(ValueError, match=message) as raised:
        Deduplicator.from_env({variable: value})
    assert "hunter2" not in str(raised.value)


def test_bad_constructor_value_names_the_setting():
    with pytest.raises(
        ValueError, match="error_rate \\(CRAWLDEDUP_ERROR_RATE\\) must be a number in \\[1e-20, 1\\), got 0.0"
    ):
        Deduplicator("local", error_rate=0.0)
    with pytest.raises(ValueError, match="crawl_round must be"):
        Deduplicator("local", crawl_round="a b")


@pytest.mark.parametrize(
    "setting, value",
    [("redis_url", 5), ("redis_url", b"redis://x"), ("namespace", 7), ("strategy", None), ("state_path", 3.5)],
)
def test_a_value_of_the_wrong_type_is_a_value_error_naming_the_setting(setting, value):
    with pytest.raises(ValueError, match=f"^{setting} "):
        DedupConfig(**{setting: value})


def test_ttl_zero_means_forever():
    assert DedupConfig(ttl_days=0).ttl_seconds is None
    assert DedupConfig(ttl_days=1).ttl_seconds == 86_400


# --- statistics ----------------------------------------------------------------------------


def test_statistics_add_up(store_strategy, store_location):
    urls = pages(500) + pages(500) + ["not a url", "ftp://x.example/"] + SPELLINGS
    with dedup(store_strategy, store_location, sample_rate=0) as d:
        d.claim_many(urls)
        d.claim_many(urls[:300])
        stats = d.stats
        per_url = d.store_bytes_per_url()
    assert stats.urls == len(urls) + 300
    assert stats.invalid == 2
    assert stats.won + stats.lost == stats.urls - stats.invalid
    assert stats.won == 501
    assert stats.local_hits == 300 and stats.store_claims == 501 and stats.round_trips == 1
    assert stats.local_answer_ratio == pytest.approx(300 / (stats.urls - 2))
    assert per_url is not None and per_url > 0


def test_local_bytes_per_url_is_the_filter_size():
    with Deduplicator("local", capacity=10_000, error_rate=0.01) as d:
        assert d.store_bytes_per_url() is None
        d.claim_many(pages(1_000))
        expected = d.local_filter.num_bits / 8 / d.local_filter.approx_items
        assert d.store_bytes_per_url() == pytest.approx(expected)


# --- one base per URL -------------------------------------------------------------------------


def test_each_url_resolved_against_its_own_base(store_strategy, store_location):
    links = ["../a?x=1", "b", "https://other.example/c", "/a?x=1", "d", "e"]
    bases = ["https://s.example/p/q", "https://s.example/p/", None, "https://s.example/", "mailto:no", "mailto:no"]
    with dedup(store_strategy, store_location) as d:
        batch = d.claim_batch(links, bases=bases)
        assert batch.canonical == [
            "https://s.example/a?x=1",
            "https://s.example/p/b",
            "https://other.example/c",
            "https://s.example/a?x=1",
            None,
            None,
        ]
        assert batch.won == [True, True, True, False, False, False]  # /a?x=1 twice: one page
        assert sorted(batch.errors) == [4, 5] and "base" in str(batch.errors[4])
        assert d.claim_batch(["b"], bases=["https://s.example/p/"]).won == [False]


def test_bases_must_match_the_urls():
    with Deduplicator("local", capacity=100, error_rate=0.01) as d:
        with pytest.raises(ValueError, match="bases must hold one base per URL \\(2\\), got 1"):
            d.claim_batch(["a", "b"], bases=["https://s.example/"])
        with pytest.raises(ValueError, match="give base or bases, not both"):
            d.claim_batch(["a"], base="https://s.example/", bases=["https://s.example/"])


# --- precomputed keys -----------------------------------------------------------------------


def test_keys_are_claimed_as_they_are_in_their_own_space(store_strategy, store_location):
    with dedup(store_strategy, store_location) as first, dedup(store_strategy, store_location) as second:
        assert first.claim_keys(["scrapy/0f3a", b"scrapy/0f3a", "scrapy/0F3A"]) == [True, False, True]
        assert second.claim_keys([b"scrapy/0f3a", "post/77"]) == [False, True]
        # A key spelled like a canonical URL is not that page.
        assert first.claim_keys(["https://shop.example/"]) == [True]
        assert first.claim("https://shop.example/") is True


@pytest.mark.parametrize(
    "bad, error, message",
    [
        ("one-key", TypeError, "not a single str"),
        ([42], TypeError, "keys must be str or bytes, got int"),
        ([""], ValueError, "keys must not be empty"),
    ],
)
def test_bad_keys_are_refused(bad, error, message):
    with Deduplicator("local", capacity=100, error_rate=0.01) as d:
        with pytest.raises(error, match=message):
            d.claim_keys(bad)


def test_bloom_is_the_seeds_name_of_redisbloom(redisbloom_url):
    """DEDUP_STRATEGY=bloom (the seed's value) opens the RedisBloom store, named redisbloom everywhere."""
    config = DedupConfig.from_env({"DEDUP_STRATEGY": "bloom", "REDIS_URL": redisbloom_url})
    assert config.strategy == "redisbloom"
    with Deduplicator(config=config, namespace="alias", capacity=1_000) as d:
        assert d.store is not None and d.store.strategy == "redisbloom"
        assert d.claim_many(["https://alias.example/a", "https://alias.example/a"]) == [True, False]
        assert "redisbloom store" in d.store.description
