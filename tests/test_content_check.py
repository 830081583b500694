"""Deduplicator.check_content: new / unchanged / changed / duplicate per page, in every store family.

Every store is judged against a brute-force reference (a dict of pages and a scan), on real
SQLite files and a real redis-server (and a real Redis Cluster for the single-slot script).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import List, Tuple

import pytest
from conftest import PageReference, PageVerdict, page_store_family, reinspected

from crawldedup import POLICY_V1, Deduplicator, NamespaceConflict
from crawldedup.content import DEFAULT_CONTENT_POLICY, ContentPolicy
from crawldedup.pages import LocalPages, PageCheck, PageFileError
from crawldedup.pages.journal import COMPACT_RATIO

#: The layer has a pure-Python twin: scripts/test runs these in its pure-Python run too.
pytestmark = pytest.mark.twins

K = 3


@pytest.fixture(
    params=[
        "memory",
        "state",
        "sqlite",
        pytest.param("set", marks=pytest.mark.redis),
        pytest.param("sharded-set", marks=pytest.mark.redis),
    ]
)
def family(request: pytest.FixtureRequest, tmp_path: Path) -> dict:
    """Deduplicator arguments of each page store family: local in memory, local with a state
    file (the journal beside it), SQLite, and Redis (two of its strategies, one page layout)."""
    return page_store_family(request.param, request, tmp_path)


def dedup(family: dict, **kwargs) -> Deduplicator:
    options = {"namespace": "crawl", "capacity": 10_000, "error_rate": 0.001, **family, **kwargs}
    return Deduplicator(options.pop("strategy"), **options)


def reference(batches: List[Tuple[List[str], List[int]]], k: int) -> List[List[PageVerdict]]:
    """The verdicts by definition, batch by batch."""
    pages = PageReference(k)
    return [pages.check(urls, fps) for urls, fps in batches]


def workload(seed: int, rounds: int = 4, pages: int = 120) -> List[Tuple[List[str], List[int]]]:
    """Re-inspection rounds over pages of a few contents: each round a page keeps its content
    (0 to 3 bits off), changes a little or a lot, or takes another page's content."""
    rng = random.Random(seed)
    contents = [rng.getrandbits(64) for _ in range(pages // 3)]
    current = {f"https://site.example/p/{i}": rng.choice(contents) for i in range(pages)}
    batches = []
    for _ in range(rounds):
        urls = rng.sample(sorted(current), pages * 3 // 4) + rng.sample(sorted(current), 5)  # some twice
        fps = [reinspected(current, url, contents, (0, 0, 1, 2, 3, 4, 5), rng) for url in urls]
        batches.append((urls, fps))
    return batches


def test_verdicts_equal_the_reference(family):
    batches = workload(seed=7)
    expected = reference(batches, K)
    with dedup(family) as d:
        got = [[(c.verdict, c.duplicate_of, c.distance) for c in d.check_content(urls, fps)] for urls, fps in batches]
    assert got == expected
    kinds = {verdict for batch in expected for verdict, _, _ in batch}
    assert kinds == {"new", "unchanged", "changed", "duplicate"}  # the workload exercises each


@pytest.mark.parametrize("k", [1, 2, 4, 5, 7])
def test_every_k_gives_the_reference_verdicts(family, k):
    """Blocks of 32 down to 8 bits, and widths that straddle the two 32-bit halves Redis's
    script reads (k = 2, 4, 5: blocks of 22, 13 and 11 bits)."""
    batches = workload(seed=k, rounds=3)
    with dedup(family, content_distance=k) as d:
        got = [[(c.verdict, c.duplicate_of, c.distance) for c in d.check_content(urls, fps)] for urls, fps in batches]
    assert got == reference(batches, k)


def test_a_page_reads_the_pages_before_it_in_its_batch(family):
    urls = ["https://a.example/", "https://b.example/", "https://a.example/", "https://c.example/"]
    with dedup(family) as d:
        checks = d.check_content(urls, [0b1111 << 40, 0b1110 << 40, 0xFFFF, 0xFFFE])
    assert checks == [
        PageCheck("new", "https://a.example/"),
        PageCheck("duplicate", "https://b.example/", "https://a.example/", 1),
        PageCheck("changed", "https://a.example/", None, 4 + 16),
        PageCheck("duplicate", "https://c.example/", "https://a.example/", 1),
    ]


def test_spellings_are_one_page_and_invalid_urls_store_nothing(family):
    with dedup(family) as d:
        first = d.check_content(["HTTPS://Shop.Example:443/item?utm_source=x", "mailto:x@y.example"], [42, 42])
        again = d.check_content(["https://shop.example/item"], [43])
    assert first == [PageCheck("new", "https://shop.example/item"), PageCheck("invalid", None)]
    assert again == [PageCheck("unchanged", "https://shop.example/item", None, 1)]


def test_pages_outlive_the_deduplicator(family):
    if family["strategy"] == "local" and "state" not in family:
        pytest.skip("pages in memory end with their Deduplicator")
    batches = workload(seed=11, rounds=2)
    expected = reference(batches, K)
    got = []
    for urls, fps in batches:  # one Deduplicator per round, as re-inspection crawls run
        with dedup(family) as d:
            got.append([(c.verdict, c.duplicate_of, c.distance) for c in d.check_content(urls, fps)])
    assert got == expected


def test_rounds_of_a_namespace_compare_with_each_other(family, tmp_path):
    """URL claims are per round; pages are the crawl's, so round 2 sees round 1's pages."""
    if family["strategy"] == "local" and "state" not in family:
        pytest.skip("pages in memory end with their Deduplicator")
    urls = ["https://a.example/", "https://b.example/"]
    for round_, expected in (("r1", ["new", "new"]), ("r2", ["unchanged", "changed"])):
        options = dict(family, crawl_round=round_)
        if "state" in family:  # each round its own state file, the pages in one journal
            options.update(state=tmp_path / f"{round_}.state", pages_path=tmp_path / "crawl.pages")
        with dedup(options) as d:
            assert d.claim_many(urls) == [True, True]  # a fresh URL space every round
            fps = [1, 0xFFFF << 40] if round_ == "r1" else [1, 0xFFFF << 40 ^ 0xFFFF << 10]
            assert [c.verdict for c in d.check_content(urls, fps)] == expected


def test_another_k_or_content_policy_is_refused(family):
    if family["strategy"] == "local" and "state" not in family:
        pytest.skip("nothing stored to disagree with")
    with dedup(family) as d:
        d.check_content(["https://a.example/"], [1])
    error = PageFileError if family["strategy"] == "local" else NamespaceConflict
    with dedup(family, content_distance=5) as d:
        with pytest.raises(error, match="max_distance"):
            d.check_content(["https://a.example/"], [1])
    with dedup(family, content_policy=ContentPolicy(shingle_words=3)) as d:
        with pytest.raises(error, match="content.policy"):
            d.check_content(["https://a.example/"], [1])
    with dedup(family) as d:  # the pages are still there, untouched
        assert d.check_content(["https://a.example/"], [1]) == [PageCheck("unchanged", "https://a.example/", None, 0)]


def test_pages_of_policy_1_are_refused_naming_the_way_on(family, tmp_path):
    """Pages belong to the namespace without its round: a round under policy 2 meets the pages a
    round under policy 1 stored, and is refused naming both policies and --policy v1."""
    if family["strategy"] == "local" and "state" not in family:
        pytest.skip("nothing stored to disagree with")
    error = PageFileError if family["strategy"] == "local" else NamespaceConflict
    for round_, policy in (("r1", POLICY_V1), ("r2", None)):
        options = dict(family, crawl_round=round_)
        if "state" in family:
            options.update(state=tmp_path / f"{round_}.state", pages_path=tmp_path / "crawl.pages")
        with dedup(options, policy=policy) as d:
            if policy is not None:
                d.check_content(["https://a.example/"], [1])
                continue
            with pytest.raises(error) as refused:
                d.check_content(["https://a.example/"], [1])
    assert f"made with canonical policy 1 ({POLICY_V1.digest})" in str(refused.value)
    assert "--policy v1" in str(refused.value)


def test_bytes_per_page_is_measured(family):
    with dedup(family) as d:
        rng = random.Random(3)
        urls = [f"https://site.example/article/{i}" for i in range(500)]
        d.check_content(urls, [rng.getrandbits(64) for _ in urls])
        measured = d.store_bytes_per_page()
    assert measured is not None and 8 < measured < 5_000


@pytest.mark.parametrize(
    "bad, error, words",
    [
        (("https://a.example/", [1]), TypeError, "single str"),
        ((["https://a.example/"], [1, 2]), ValueError, "one SimHash per URL"),
        ((["https://a.example/"], [-1]), ValueError, "unsigned 64-bit"),
        ((["https://a.example/"], ["1"]), TypeError, "ints"),
    ],
)
def test_bad_arguments_are_refused_before_any_io(bad, error, words, tmp_path):
    with Deduplicator("local", state=tmp_path / "crawl.state", capacity=1_000) as d:
        with pytest.raises(error, match=words):
            d.check_content(*bad)
    assert not journal_of(tmp_path).exists()


def test_content_distance_is_checked():
    with pytest.raises(ValueError, match=r"content_distance must be .*\[1, 7\].*got 8"):
        Deduplicator("local", content_distance=8)


@pytest.mark.redis
def test_workers_see_each_others_pages(redis_url):
    a = Deduplicator("set", redis_url=redis_url, namespace="crawl", capacity=1_000)
    b = Deduplicator("set", redis_url=redis_url, namespace="crawl", capacity=1_000)
    with a, b:
        assert a.check_content(["https://one.example/"], [0xF0F0])[0].verdict == "new"
        assert b.check_content(["https://two.example/"], [0xF0F1]) == [
            PageCheck("duplicate", "https://two.example/", "https://one.example/", 1)
        ]
        assert a.check_content(["https://two.example/"], [0xF0F1])[0].verdict == "unchanged"


@pytest.mark.redis
def test_a_cluster_holds_a_namespaces_pages_in_one_slot(redis_cluster_url):
    batches = workload(seed=5, rounds=2, pages=60)
    with Deduplicator("sharded-set", redis_url=redis_cluster_url, namespace="crawl", capacity=1_000) as d:
        got = [[(c.verdict, c.duplicate_of, c.distance) for c in d.check_content(urls, fps)] for urls, fps in batches]
    assert got == reference(batches, K)


# --- the local journal --------------------------------------------------------------------


def journal_of(tmp_path: Path) -> Path:
    return tmp_path / "crawl.state.pages"


def test_a_torn_last_batch_is_dropped(tmp_path):
    state = tmp_path / "crawl.state"
    with Deduplicator("local", state=state, capacity=1_000) as d:
        d.check_content(["https://a.example/"], [1])
        d.check_content(["https://b.example/"], [0xFFFF << 40])
    journal = journal_of(tmp_path)
    whole = journal.read_bytes()
    journal.write_bytes(whole[:-5])  # the second batch's write cut short by a crash
    with Deduplicator("local", state=state, capacity=1_000) as d:
        assert [
            c.verdict for c in d.check_content(["https://a.example/", "https://b.example/"], [1, 0xFFFF << 40])
        ] == ["unchanged", "new"]
    assert journal.stat().st_size > len(whole) - 5  # cut back, then the new batch appended


def test_a_damaged_batch_before_the_last_is_refused(tmp_path):
    state = tmp_path / "crawl.state"
    with Deduplicator("local", state=state, capacity=1_000) as d:
        d.check_content(["https://a.example/"], [1])
        d.check_content(["https://b.example/"], [2])
    journal = journal_of(tmp_path)
    data = bytearray(journal.read_bytes())
    data[64 + 12 + 3] ^= 0xFF  # a byte of the first batch's page id
    journal.write_bytes(bytes(data))
    with Deduplicator("local", state=state, capacity=1_000) as d:
        with pytest.raises(PageFileError, match=r"crawl\.state\.pages: corrupted batch at byte 64"):
            d.check_content(["https://a.example/"], [1])


@pytest.mark.parametrize(
    "content, problem",
    [
        (b"", None),
        (b"CDDP", "truncated header"),
        (b"not a journal at all" * 4, "not a crawldedup page file"),
    ],
)
def test_a_file_that_is_no_journal_is_refused(tmp_path, content, problem):
    journal = journal_of(tmp_path)
    journal.write_bytes(content)
    with Deduplicator("local", state=tmp_path / "crawl.state", capacity=1_000) as d:
        if problem is None:  # an empty file is a journal not yet written
            assert d.check_content(["https://a.example/"], [1])[0].verdict == "new"
        else:
            with pytest.raises(PageFileError, match=problem):
                d.check_content(["https://a.example/"], [1])


def test_a_second_writer_is_refused(tmp_path):
    state = tmp_path / "crawl.state"
    with Deduplicator("local", state=state, capacity=1_000) as first:
        first.check_content(["https://a.example/"], [1])
        # The journal alone (a pure-Python state file already refuses a second writer itself).
        with pytest.raises(PageFileError, match="another process"):
            LocalPages(
                journal_of(tmp_path),
                max_distance=K,
                content_digest=DEFAULT_CONTENT_POLICY.digest,
                canonical_digest=first.policy.digest,
            )


def test_the_journal_is_compacted_on_close(tmp_path):
    state = tmp_path / "crawl.state"
    urls = [f"https://site.example/{i}" for i in range(50)]
    with Deduplicator("local", state=state, capacity=1_000) as d:
        for round_ in range(COMPACT_RATIO + 2):  # every page changes every round
            d.check_content(urls, [(round_ + 1) << (i % 60) | 0xFFFF_0000_0000 * round_ for i in range(50)])
        grown = journal_of(tmp_path).stat().st_size
    compacted = journal_of(tmp_path).stat().st_size
    assert compacted < grown / 2
    with Deduplicator("local", state=state, capacity=1_000) as d:
        last = COMPACT_RATIO + 1
        again = d.check_content(urls, [(last + 1) << (i % 60) | 0xFFFF_0000_0000 * last for i in range(50)])
    assert {c.verdict for c in again} == {"unchanged"}
