"""crawldedup.scrapy.DupeFilter: its contract in this process, and real Scrapy crawls in subprocesses.

The crawls run tests/workers/scrapy_crawl.py against tests/scrapy_site.py (a shop on a loopback
port that counts fetches per page) and are bounded by CRAWL_TIMEOUT_SECONDS each.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
    import scrapy  # under CI the test extra installs Scrapy: a missing one is a failure
else:
    scrapy = pytest.importorskip("scrapy", reason="Scrapy is not installed: pip install crawldedup[scrapy]")

from scrapy.core.scheduler import Scheduler  # noqa: E402
from scrapy.utils.reactor import install_reactor  # noqa: E402
from scrapy.utils.test import get_crawler  # noqa: E402

from crawldedup import DEFAULT_POLICY, CanonicalPolicy, FilterFileError, canonicalize  # noqa: E402
from crawldedup.scrapy import CONTENT_META_KEY, STATE_FILE_NAME, STATS_SYNC_EVERY, ContentMiddleware, DupeFilter  # noqa: E402

HERE = Path(__file__).parent
CRAWL_SCRIPT = HERE / "workers" / "scrapy_crawl.py"
#: Each crawl is a few seconds on a quiet machine; a hung one fails instead of hanging CI.
CRAWL_TIMEOUT_SECONDS = 60
#: Pages of the test shop: each links to three others, three spellings per link.
PAGES = 200
DUPEFILTER = {"DUPEFILTER_CLASS": "crawldedup.scrapy.DupeFilter"}
#: Scrapy's default TWISTED_REACTOR since 2.13 (and in every project `scrapy startproject` made since 2.7).
ASYNCIO_REACTOR = "twisted.internet.asyncioreactor.AsyncioSelectorReactor"


def _load_site_module() -> Any:
    spec = importlib.util.spec_from_file_location("scrapy_site", HERE / "scrapy_site.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


site_module = _load_site_module()


class ShopSpider(scrapy.Spider):
    name = "shop"


def make_crawler(spidercls: type, settings: Dict[str, Any]) -> Any:
    """A crawler of this process, from Scrapy's own test helper.

    ``get_crawler`` of Scrapy 2.13 (the newest release for Python 3.9) refuses to work without
    an installed reactor; later releases work with or without one. Installing Scrapy's default
    reactor first, as Scrapy's own test suite does, suits every release pip picks.
    """
    if "twisted.internet.reactor" not in sys.modules:  # Scrapy's is_reactor_installed() test
        install_reactor(ASYNCIO_REACTOR)
    return get_crawler(spidercls, settings)


def make_filter(settings: Optional[Dict[str, Any]] = None) -> DupeFilter:
    crawler = make_crawler(ShopSpider, {"CRAWLDEDUP_CAPACITY": 10_000, **(settings or {})})
    return DupeFilter.from_crawler(crawler)


def seen(dupefilter: DupeFilter, *requests: scrapy.Request) -> List[bool]:
    return [dupefilter.request_seen(r) for r in requests]


# --- the filter in this process ----------------------------------------------------------


def test_importing_crawldedup_never_imports_scrapy():
    code = "import sys, crawldedup, crawldedup.cli, crawldedup.dedup; print('scrapy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "False"


def test_spellings_of_one_get_request_are_one_request():
    df = make_filter()
    spellings = [
        "http://shop.example/p/1?b=2&a=1",
        "http://SHOP.example:80/p/1/?a=1&b=2&utm_source=x#top",
        "http://shop.example/p/./1?a=1&gclid=abc&b=2",
    ]
    assert seen(df, *(scrapy.Request(u) for u in spellings)) == [False, True, True]
    assert seen(df, scrapy.Request("http://shop.example/p/2?a=1&b=2")) == [False]
    df.close("finished")


def test_method_and_body_are_part_of_the_key():
    df = make_filter()
    url, other_spelling = "http://shop.example/search?q=1", "http://Shop.Example:80/search?q=1&utm_medium=x#r"
    requests = [
        scrapy.Request(url),
        scrapy.Request(url, method="POST", body=b"page=1"),
        scrapy.Request(url, method="POST", body=b"page=2"),
        scrapy.Request(other_spelling, method="POST", body=b"page=1"),  # same POST, another spelling
        scrapy.Request(url, method="HEAD"),
        scrapy.Request(url, method="PUT", body=b"page=1"),
        scrapy.Request(url, method="POST"),
        scrapy.Request(url, method="POST", body=b""),  # an empty body is no body
    ]
    assert seen(df, *requests) == [False, False, False, True, False, False, False, True]
    df.close("finished")


@pytest.mark.parametrize(
    "url", ["data:text/plain,hello", "ftp://shop.example/price-list.csv", "about:blank", "http://bad%20host/p"]
)
def test_a_url_the_policy_refuses_is_keyed_by_scrapy_fingerprint(url):
    df = make_filter()
    other = "data:text/plain,bye"
    assert seen(df, scrapy.Request(url), scrapy.Request(url), scrapy.Request(other)) == [False, True, False]
    post = scrapy.Request(url, method="POST", body=b"x")
    assert seen(df, post, post.replace()) == [False, True]
    df.close("finished")
    assert df.stats.get_value("crawldedup/invalid") == 5
    assert df.stats.get_value("crawldedup/seen") == 5


def test_requests_not_keyed_by_their_url_are_claimed_as_keys():
    """Their documented keys (docs/scrapy.md) go through claim_keys: another program finds them there."""
    df = make_filter()
    post = scrapy.Request("http://Shop.Example:80/search?q=1#r", method="POST", body=b"page=1")
    refused = scrapy.Request("data:text/plain,hello")
    assert seen(df, post, refused) == [False, False]
    digest = hashlib.sha256(f"POST\0{canonicalize(post.url)}\0page=1".encode()).hexdigest()[:32]
    keys = [f"method-body:{digest}", f"scrapy:{df.fingerprinter.fingerprint(refused).hex()}", "scrapy:" + "0" * 40]
    assert df.deduplicator.claim_keys(keys) == [False, False, True]
    df.close("finished")


def test_verbatim_url_requests_are_keyed_by_scrapy_fingerprint():
    df = make_filter()
    spellings = ["http://shop.example/p/1?utm_source=x", "http://shop.example/p/1"]
    verbatim = [scrapy.Request(u, meta={"verbatim_url": True}) for u in spellings]
    assert seen(df, *verbatim, verbatim[0].replace()) == [False, False, True]
    assert seen(df, scrapy.Request(spellings[0])) == [False]  # a plain GET is keyed by its canonical URL
    df.close("finished")


def test_scheduler_never_asks_about_dont_filter_requests():
    # The default priority queue of recent Scrapy needs a running engine; this one does not.
    queue = {"SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.ScrapyPriorityQueue"}
    crawler = make_crawler(ShopSpider, {**DUPEFILTER, **queue, "CRAWLDEDUP_CAPACITY": 10_000})
    scheduler = Scheduler.from_crawler(crawler)
    assert isinstance(scheduler.df, DupeFilter)
    scheduler.open(ShopSpider.from_crawler(crawler))
    url = "http://shop.example/p/1"
    assert scheduler.enqueue_request(scrapy.Request(url)) is True
    assert scheduler.enqueue_request(scrapy.Request(url + "#again")) is False
    assert scheduler.enqueue_request(scrapy.Request(url, dont_filter=True)) is True
    assert scheduler.enqueue_request(scrapy.Request(url, dont_filter=True)) is True
    assert len(scheduler) == 3
    stats = crawler.stats
    assert (stats.get_value("crawldedup/new"), stats.get_value("crawldedup/filtered")) == (1, 1)
    assert stats.get_value("dupefilter/filtered") == 1
    scheduler.close("finished")


@pytest.mark.parametrize("debug", [False, True], ids=["first-only", "DUPEFILTER_DEBUG"])
def test_filtered_requests_are_logged_like_scrapy_does(debug, caplog):
    crawler = make_crawler(ShopSpider, {"CRAWLDEDUP_CAPACITY": 10_000, "DUPEFILTER_DEBUG": debug})
    df = DupeFilter.from_crawler(crawler)
    spider = ShopSpider.from_crawler(crawler)
    referer = {"Referer": "http://shop.example/"}
    duplicates = [scrapy.Request(f"http://shop.example/p/1?utm_source={i}", headers=referer) for i in range(3)]
    assert seen(df, scrapy.Request("http://shop.example/p/1"), *duplicates) == [False, True, True, True]
    with caplog.at_level(logging.DEBUG, logger="crawldedup.scrapy"):
        for request in duplicates:
            df.log(request, spider)
    messages = [r.getMessage() for r in caplog.records if r.name == "crawldedup.scrapy"]
    if debug:
        assert len(messages) == 3
        assert all("(referer: http://shop.example/)" in m for m in messages)
    else:
        assert len(messages) == 1
        assert "no more duplicates will be shown" in messages[0] and "utm_source=0" in messages[0]
    assert crawler.stats.get_value("dupefilter/filtered") == 3
    df.close("finished")


def test_stats_count_new_and_filtered_requests_and_the_local_answers():
    df = make_filter()
    urls = [f"http://shop.example/p/{i % 4}?utm_source={i}" for i in range(10)]
    assert seen(df, *(scrapy.Request(u) for u in urls)) == [False] * 4 + [True] * 6
    assert (df.stats.get_value("crawldedup/new"), df.stats.get_value("crawldedup/filtered")) == (4, 6)
    local = df.deduplicator.local_filter
    fill, error_rate = local.fill_ratio, local.estimated_error_rate
    df.close("finished")  # the Deduplicator's own counters are copied now (and every 1,024 requests)
    stats = df.stats.get_stats()
    assert (stats["crawldedup/seen"], stats["crawldedup/new"], stats["crawldedup/filtered"]) == (10, 4, 6)
    assert stats["crawldedup/answered_locally"] == 10  # the local strategy has no store
    assert stats["crawldedup/sent_to_store"] == 0
    assert stats["crawldedup/local_hits"] == 6 == stats["crawldedup/filtered"]
    assert (stats["crawldedup/filter_fill_ratio"], stats["crawldedup/filter_estimated_error_rate"]) == (
        fill,
        error_rate,
    )
    assert 0 < fill < 0.001 and error_rate < 1e-9  # 4 pages in a filter sized for many more


def test_the_deduplicator_counters_reach_scrapy_stats_during_the_crawl():
    df = make_filter()
    assert (
        seen(df, *(scrapy.Request(f"http://shop.example/p/{i}") for i in range(STATS_SYNC_EVERY)))
        == [False] * STATS_SYNC_EVERY
    )
    assert (
        df.stats.get_value("crawldedup/seen") == df.stats.get_value("crawldedup/answered_locally") == STATS_SYNC_EVERY
    )
    df.close("finished")


def test_a_store_outage_lets_requests_through_unclaimed(redis_server, redis_url, caplog):
    df = make_filter({"CRAWLDEDUP_STRATEGY": "set", "CRAWLDEDUP_REDIS_URL": redis_url})
    assert seen(df, scrapy.Request("http://shop.example/p/1")) == [False]
    redis_server.stop()
    try:
        with caplog.at_level(logging.ERROR, logger="crawldedup.scrapy"):
            assert seen(df, scrapy.Request("http://shop.example/p/2")) == [False]
    finally:
        redis_server.start()
    assert df.stats.get_value("crawldedup/store_errors") == 1
    assert any("unavailable" in r.getMessage() and "p/2" in r.getMessage() for r in caplog.records)
    # Nothing was recorded for the request that went through: it is claimed once the store is back.
    assert seen(df, scrapy.Request("http://shop.example/p/2"), scrapy.Request("http://shop.example/p/2/")) == [
        False,
        True,
    ]
    df.close("finished")


def test_state_defaults_into_jobdir_so_a_resumed_crawl_remembers(tmp_path):
    settings = {"JOBDIR": str(tmp_path / "job")}
    df = make_filter(settings)
    assert Path(df.deduplicator.local_filter.path) == tmp_path / "job" / STATE_FILE_NAME
    assert seen(df, scrapy.Request("http://shop.example/p/1")) == [False]
    df.close("shutdown")
    df = make_filter(settings)
    assert seen(df, scrapy.Request("http://shop.example/p/1/#x"), scrapy.Request("http://shop.example/p/2")) == [
        True,
        False,
    ]
    df.close("finished")


def test_without_jobdir_or_state_the_memory_is_anonymous(tmp_path):
    df = make_filter()
    assert df.deduplicator.local_filter.path is None
    df.close("finished")
    state = tmp_path / "explicit.bloom"
    df = make_filter({"JOBDIR": str(tmp_path / "job"), "CRAWLDEDUP_STATE": str(state)})
    assert Path(df.deduplicator.local_filter.path) == state
    assert not (tmp_path / "job" / STATE_FILE_NAME).exists()
    df.close("finished")


def test_namespace_defaults_to_the_spider_name():
    df = make_filter()
    assert df.deduplicator.namespace == "scrapy:shop"
    df.close("finished")
    df = make_filter({"CRAWLDEDUP_NAMESPACE": "shop-2026"})
    assert df.deduplicator.namespace == "shop-2026"
    df.close("finished")


@pytest.mark.parametrize(
    "policy",
    [
        {"strip_www": True},
        '{"strip_www": true}',  # the form of -s CRAWLDEDUP_POLICY=... on the command line
        CanonicalPolicy(strip_www=True),
    ],
    ids=["dict", "json", "instance"],
)
def test_policy_setting_changes_what_counts_as_the_same_page(policy):
    df = make_filter({"CRAWLDEDUP_POLICY": policy})
    assert df.deduplicator.policy == CanonicalPolicy(strip_www=True)
    assert seen(df, scrapy.Request("http://www.shop.example/p/1"), scrapy.Request("http://shop.example/p/1")) == [
        False,
        True,
    ]
    df.close("finished")
    default = make_filter()
    assert default.deduplicator.policy == DEFAULT_POLICY
    default.close("finished")


def test_a_state_file_of_another_policy_is_refused(tmp_path):
    settings = {"CRAWLDEDUP_STATE": str(tmp_path / "state.bloom")}
    make_filter(settings).close("finished")
    with pytest.raises(FilterFileError, match="policy"):
        make_filter({**settings, "CRAWLDEDUP_POLICY": {"strip_www": True}})


@pytest.mark.parametrize(
    "setting, value, error",
    [
        ("CRAWLDEDUP_STRATEGY", "memcached", ValueError),
        ("CRAWLDEDUP_CAPACITY", "lots", ValueError),
        ("CRAWLDEDUP_CAPACITY", 0, ValueError),
        ("CRAWLDEDUP_ERROR_RATE", "1.5", ValueError),
        ("CRAWLDEDUP_REDIS_URL", "http://cache.example:6379", ValueError),
        ("CRAWLDEDUP_TTL_DAYS", -1.0, ValueError),
        ("CRAWLDEDUP_NAMESPACE", "my crawl", ValueError),
        ("CRAWLDEDUP_VERIFY_HITS", "maybe", ValueError),
        ("CRAWLDEDUP_POLICY", {"strip_vvv": True}, ValueError),
        ("CRAWLDEDUP_POLICY", "{not json", ValueError),
        ("CRAWLDEDUP_POLICY", {"strip_www": "yes"}, TypeError),
    ],
)
def test_a_bad_setting_is_named_in_the_error(setting, value, error):
    with pytest.raises(error, match=setting):
        make_filter({setting: value})


def test_a_spider_name_that_cannot_be_a_namespace_asks_for_one():
    class Spaced(scrapy.Spider):
        name = "my shop"

    with pytest.raises(ValueError, match="CRAWLDEDUP_NAMESPACE"):
        DupeFilter.from_crawler(make_crawler(Spaced, {"CRAWLDEDUP_CAPACITY": 10_000}))


def test_settings_given_as_text_are_parsed(tmp_path):
    df = make_filter(
        {"CRAWLDEDUP_CAPACITY": "20000", "CRAWLDEDUP_ERROR_RATE": "0.001", "CRAWLDEDUP_VERIFY_HITS": "False"}
    )
    assert (df.deduplicator.config.capacity, df.deduplicator.config.error_rate) == (20_000, 0.001)
    df.close("finished")


# --- real crawls in subprocesses ----------------------------------------------------------


def crawl_command(
    site: Any,
    tmp_path: Path,
    name: str,
    settings: Dict[str, Any],
    start_pages=(0,),
    start_urls: Optional[List[str]] = None,
    dont_filter: bool = False,
) -> Dict[str, Any]:
    """The command line and environment of one crawl of ``site``, writing tmp_path/<name>.json;
    ``start_urls`` instead of the start pages, ``dont_filter`` start requests as a Spider's default ones."""
    config = {
        "start_urls": start_urls or [site_module.ORIGIN + site_module.page_path(p) for p in start_pages],
        "settings": settings,
        "result": str(tmp_path / f"{name}.json"),
        "dont_filter": dont_filter,
    }
    env = {
        k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy", "no_proxy", "all_proxy")
    }
    env["http_proxy"] = site.proxy  # the shop answers for http://shop.example
    env.pop("SCRAPY_SETTINGS_MODULE", None)
    return {"args": [sys.executable, str(CRAWL_SCRIPT), json.dumps(config)], "env": env, "cwd": str(tmp_path)}


def crawl_result(tmp_path: Path, name: str, returncode: int, log: str) -> Dict[str, Any]:
    """The crawl's result file, after checking it ended well and crawldedup caused no warning."""
    tail = "\n".join(log.splitlines()[-40:])
    assert returncode == 0, f"crawl {name} exited with {returncode}:\n{tail}"
    result = json.loads((tmp_path / f"{name}.json").read_text(encoding="utf-8"))
    ours = [w for w in result["warnings"] if f"{os.sep}crawldedup{os.sep}" in w["filename"]]
    assert ours == [], f"crawldedup caused warnings in crawl {name}: {ours}"
    assert "log_count/ERROR" not in result["stats"], f"crawl {name} logged errors:\n{tail}"
    return result


def run_crawl(
    site: Any, tmp_path: Path, name: str, settings: Dict[str, Any], start_pages=(0,), **start: Any
) -> Dict[str, Any]:
    command = crawl_command(site, tmp_path, name, settings, start_pages, **start)
    done = subprocess.run(**command, capture_output=True, text=True, timeout=CRAWL_TIMEOUT_SECONDS)
    return crawl_result(tmp_path, name, done.returncode, done.stderr)


def describe(fetches: Dict[int, int]) -> str:
    refetched = {page: n for page, n in sorted(fetches.items()) if n > 1}
    return f"{sum(fetches.values())} fetches of {len(fetches)} pages, refetched: {refetched or 'none'}"


@pytest.mark.slow
def test_crawl_fetches_each_page_once_where_scrapy_default_fetches_more(tmp_path):
    with site_module.ShopSite(PAGES) as site:
        result = run_crawl(site, tmp_path, "crawldedup", DUPEFILTER)
        ours = dict(site.fetches)
        assert site.unknown == []
    with site_module.ShopSite(PAGES) as site:
        run_crawl(site, tmp_path, "scrapy-default", {})
        theirs = dict(site.fetches)
        assert site.unknown == []
    summary = (
        f"{PAGES} pages: crawldedup.scrapy.DupeFilter fetched {sum(ours.values())}, "
        f"Scrapy's RFPDupeFilter fetched {sum(theirs.values())}"
    )
    print(summary)
    assert ours == dict.fromkeys(range(PAGES), 1), f"{summary}; crawldedup: {describe(ours)}"
    assert set(theirs) == set(ours), summary
    assert sum(theirs.values()) > sum(ours.values()), summary
    stats = result["stats"]
    assert stats["crawldedup/new"] == PAGES
    assert stats["crawldedup/filtered"] == stats["dupefilter/filtered"] > 0


#: Crawls of two processes tried until both took part (each fetched a tenth of the pages).
OVERLAP_ATTEMPTS = 3


@pytest.mark.slow
def test_two_processes_sharing_redis_fetch_each_page_once_in_total(tmp_path, redis_url):
    # Every attempt must fetch each page once in total. Which process wins how many pages is
    # the scheduler's: a process set aside for a second on a busy machine finds its links all
    # claimed by the other, so a crawl where one barely took part proves nothing about two, and
    # is tried again (in a namespace of its own).
    for attempt in range(OVERLAP_ATTEMPTS):
        by_agent = _crawl_in_two_processes(tmp_path / f"attempt{attempt}", redis_url, f"shop-crawl-{attempt}")
        if all(fetched >= PAGES // 10 for fetched in by_agent.values()):
            return
    pytest.fail(f"in {OVERLAP_ATTEMPTS} attempts one process barely crawled each time; the last: {by_agent}")


def _crawl_in_two_processes(directory: Path, redis_url: str, namespace: str) -> Dict[str, int]:
    """One crawl of the site by two processes sharing ``namespace``; the pages each fetched."""
    directory.mkdir()
    workers = {"worker-a": 0, "worker-b": PAGES // 2 + 1}  # each starts on its own page
    with site_module.ShopSite(PAGES, wait_for_agents=len(workers)) as site:
        running = {}
        try:
            for agent, start in workers.items():
                settings = {
                    **DUPEFILTER,
                    "CRAWLDEDUP_STRATEGY": "set",
                    "CRAWLDEDUP_REDIS_URL": redis_url,
                    "CRAWLDEDUP_NAMESPACE": namespace,
                    "USER_AGENT": agent,
                }
                command = crawl_command(site, directory, agent, settings, start_pages=(start,))
                log = open(directory / f"{agent}.log", "w+", encoding="utf-8")
                running[agent] = (subprocess.Popen(**command, stdout=subprocess.DEVNULL, stderr=log), log)
            for agent, (process, log) in running.items():
                returncode = process.wait(timeout=CRAWL_TIMEOUT_SECONDS)
                log.seek(0)
                running[agent] = (process, log, crawl_result(directory, agent, returncode, log.read()))
        finally:
            for entry in running.values():
                if entry[0].poll() is None:
                    entry[0].kill()
                    entry[0].wait()
                entry[1].close()
        fetches, by_agent = dict(site.fetches), dict(site.fetches_by_agent)
        assert site.unknown == []
    summary = f"{PAGES} pages, two processes: {describe(fetches)}; per process: {by_agent}"
    print(summary)
    assert fetches == dict.fromkeys(range(PAGES), 1), summary
    won = [entry[2]["stats"]["crawldedup/new"] for entry in running.values()]
    assert sum(won) == PAGES and sorted(won) == sorted(by_agent.get(agent, 0) for agent in workers), summary
    assert all(entry[2]["stats"]["crawldedup/sent_to_store"] > 0 for entry in running.values())
    return {agent: by_agent.get(agent, 0) for agent in workers}


@pytest.mark.slow
def test_a_crawl_resumed_from_jobdir_does_not_refetch_the_first_part(tmp_path):
    settings = {**DUPEFILTER, "JOBDIR": str(tmp_path / "job")}
    with site_module.ShopSite(PAGES) as site:
        first = run_crawl(site, tmp_path, "first", {**settings, "CLOSESPIDER_PAGECOUNT": PAGES // 4})
        first_part = dict(site.fetches)
        site.fetches.clear()
        second = run_crawl(site, tmp_path, "second", settings)
        second_part = dict(site.fetches)
        assert site.unknown == []
    summary = f"{PAGES} pages: first run {describe(first_part)}; resumed run {describe(second_part)}"
    print(summary)
    assert first["finish_reason"] == "closespider_pagecount" and second["finish_reason"] == "finished", summary
    assert (tmp_path / "job" / STATE_FILE_NAME).exists()
    assert PAGES // 4 <= len(first_part) < PAGES and second_part, summary
    assert set(first_part) & set(second_part) == set(), summary
    both = {page: first_part.get(page, 0) + second_part.get(page, 0) for page in range(PAGES)}
    assert both == dict.fromkeys(range(PAGES), 1), summary


# --- the content middleware ---------------------------------------------------------------

CONTENT = {**DUPEFILTER, "DOWNLOADER_MIDDLEWARES": {"crawldedup.scrapy.ContentMiddleware": 100}}


def article(seed: int) -> str:
    """300 words drawn for ``seed``: two seeds give texts far apart (about 32 bits)."""
    rng = random.Random(seed)
    return " ".join("".join(rng.choice("etaoinshrdlu") for _ in range(rng.randint(3, 9))) for _ in range(300))


@pytest.mark.slow
def test_content_middleware_tags_then_drops_in_real_crawls(tmp_path):
    """Crawl 1: pages 2k and 2k + 1 hold one article, so one of each pair is a duplicate.
    Crawl 2 (a re-inspection: another JOBDIR, the same pages file), every page a start URL,
    ten pages rewritten, unchanged ones dropped: only the ten reach the spider."""
    pages, rewritten = 60, range(10)
    texts = {page: article(page // 2) for page in range(pages)}
    store = {"CRAWLDEDUP_CONTENT_PAGES": str(tmp_path / "crawl.pages"), "CRAWLDEDUP_CAPACITY": 10_000}
    with site_module.ShopSite(pages, article=texts.__getitem__) as site:
        first = run_crawl(site, tmp_path, "first", {**CONTENT, **store, "JOBDIR": str(tmp_path / "job1")})["stats"]
        assert site.unknown == [] and len(site.fetches) == pages
        texts.update({page: article(1_000 + page) for page in rewritten})
        second = run_crawl(
            site,
            tmp_path,
            "second",
            {
                **CONTENT,
                **store,
                "JOBDIR": str(tmp_path / "job2"),
                "CRAWLDEDUP_CONTENT_DROP": ["unchanged", "duplicate"],
            },
            start_pages=range(pages),
        )["stats"]
    assert (first.get("crawldedup/content/new"), first.get("crawldedup/content/duplicate")) == (pages // 2, pages // 2)
    assert "crawldedup/content/dropped" not in first
    assert second.get("crawldedup/content/changed") == len(rewritten)
    assert second.get("crawldedup/content/unchanged") == pages - len(rewritten)
    assert second.get("crawldedup/content/dropped") == pages - len(rewritten)
    # Only the rewritten pages were parsed: each yields its links, all already claimed start pages.
    links = sum(3 * len(site_module.targets(page, pages)) for page in rewritten)
    assert second.get("dupefilter/filtered") == links


@pytest.mark.parametrize(
    "setting, value, words",
    [
        ("CRAWLDEDUP_CONTENT_DROP", ["unchanged", "gone"], "CRAWLDEDUP_CONTENT_DROP must name verdicts among"),
        ("CRAWLDEDUP_CONTENT_DISTANCE", 9, r"CRAWLDEDUP_CONTENT_DISTANCE: k must be an integer in \[1, 7\], got 9"),
    ],
)
def test_a_bad_content_setting_is_named(setting, value, words):
    crawler = make_crawler(ShopSpider, {setting: value})
    with pytest.raises(ValueError, match=words):
        ContentMiddleware.from_crawler(crawler)


def test_a_response_that_is_not_html_goes_through_unchecked():
    middleware = ContentMiddleware.from_crawler(make_crawler(ShopSpider, {}))
    request = scrapy.Request("http://shop.example/p/1")
    response = scrapy.http.TextResponse(request.url, body=b"plain text", request=request)
    assert middleware.process_response(request, response) is response
    assert CONTENT_META_KEY not in request.meta
    html = scrapy.http.HtmlResponse(request.url, body=f"<p>{article(1)}</p>".encode(), request=request)
    assert middleware.process_response(request, html) is html
    assert request.meta[CONTENT_META_KEY].verdict == "new"
    middleware.spider_closed()


REDIRECTS = {**DUPEFILTER, "DOWNLOADER_MIDDLEWARES": {"crawldedup.scrapy.RedirectMiddleware": 540}}
#: Pages of the redirecting shop: each also links to its targets through a short link of its own
#: (a chain of 1 to 3 more hops: 301, 302, 303, 307, 308) and to one through a meta refresh page.
REDIRECT_PAGES = 60


@pytest.mark.slow
def test_redirect_middleware_processes_each_final_page_once(tmp_path):
    """Spider-style start requests (``dont_filter``) through four redirect chains, all to page 0;
    every page linked directly, by short links and through a meta refresh. Without the middleware
    page 0 is processed four times or more; with it every page once. A crawl resumed from JOBDIR
    drops the start links before fetching them: the alias map knows where they lead."""
    origin = site_module.ORIGIN
    starts = [origin + site_module.short_link(1000 + k, 0) for k in range(3)] + [origin + "/go/308.301/0"]
    with site_module.ShopSite(REDIRECT_PAGES, redirects=True) as site:
        plain = run_crawl(site, tmp_path, "plain", DUPEFILTER, start_urls=starts, dont_filter=True)
    assert Counter(site.route(url) for url in plain["parsed"])[0] >= 4

    settings = {**REDIRECTS, "JOBDIR": str(tmp_path / "job")}
    with site_module.ShopSite(REDIRECT_PAGES, redirects=True) as site:
        result = run_crawl(site, tmp_path, "redirects", settings, start_urls=starts, dont_filter=True)
        assert site.unknown == []
        assert {"301", "302", "303", "307", "308", "refresh"} <= set(site.redirected)
    processed = Counter(site.route(url) for url in result["parsed"])
    assert processed == Counter(range(REDIRECT_PAGES)), f"processed twice: {[p for p, n in processed.items() if n > 1]}"
    stats = result["stats"]
    assert stats["crawldedup/redirect/duplicate"] >= 3  # the start chains that ended on page 0 again
    assert stats["crawldedup/redirect/new"] >= 1

    with site_module.ShopSite(REDIRECT_PAGES, redirects=True) as site:
        resumed = run_crawl(site, tmp_path, "resumed", settings, start_urls=starts, dont_filter=True)
        assert site.redirected == {}  # no short link, no hop fetched again
    assert resumed["stats"]["crawldedup/redirect/known_alias"] == 4
    assert resumed["parsed"] == []


def test_a_redirect_chain_is_its_run_of_http_redirects():
    """The hops of a chain are its trailing HTTP redirects: a meta refresh before them is left
    alone (a link of its page); the dupefilter claims a hop to another page, and lets a hop to the
    page its chain holds through."""
    from crawldedup.integrations.scrapy import redirect_hops
    from crawldedup.scrapy import RedirectMiddleware

    request = scrapy.Request(
        "http://shop.example/p/4",
        meta={
            "redirect_urls": ["http://shop.example/s/1/4", "http://shop.example/m/4", "http://shop.example/go/307/4"],
            "redirect_reasons": [301, "meta refresh", 307],
        },
    )
    assert redirect_hops(request) == ["http://shop.example/go/307/4"]
    assert redirect_hops(scrapy.Request("http://shop.example/p/4")) == []
    crawler = make_crawler(
        ShopSpider,
        {
            "CRAWLDEDUP_CAPACITY": 10_000,
            **DUPEFILTER,
            "DOWNLOADER_MIDDLEWARES": {"crawldedup.scrapy.RedirectMiddleware": 540},
        },
    )
    df = DupeFilter.from_crawler(crawler)
    middleware = RedirectMiddleware.from_crawler(crawler)
    assert middleware.deduplicator is df.deduplicator
    assert seen(df, request, request) == [False, True]  # the hop to another page claims it, once
    response = scrapy.http.HtmlResponse(request.url, body=b"<html/>")
    assert middleware.process_response(request, response, None) is response  # the dupefilter claimed the chain
    # A hop back to the page its chain holds (a slash added by the server) is never filtered.
    slash = request.replace(
        url="http://shop.example/p/4/",
        meta={"redirect_urls": [request.url], "redirect_reasons": [301]},
    )
    assert seen(df, slash, slash) == [False, False]
    assert df.deduplicator.stats.redirected_known == 1
    with pytest.raises(scrapy.exceptions.IgnoreRequest, match="redirects to a page processed already"):
        middleware.process_request(scrapy.Request("http://shop.example/go/307/4"))
    df.close("finished")
