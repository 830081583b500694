"""Real crawlee crawls of the loopback shop site: crawlee's own queue fetches pages again under
other spellings; through crawldedup's storage client each page is fetched once, by one of two
processes sharing a Redis, and a restarted crawl refetches nothing."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Union

import pytest

pytest.importorskip("crawlee", reason="crawlee is not installed: pip install crawldedup[crawlee]")

from conftest import ServeProcess  # noqa: E402

from crawldedup.canonical import HAS_EXTENSION  # noqa: E402 (after the skip)

HERE = Path(__file__).parent
WORKER = HERE / "workers" / "crawlee_crawl.py"
PAGES = 30
TIMEOUT_SECONDS = 120

# A crawl's answer cannot depend on the twin (the store decides, crawlee fetches), and each crawl
# is a process of its own: the compiled run covers them.
pytestmark = [
    pytest.mark.redis,
    pytest.mark.skipif(not HAS_EXTENSION, reason="the same crawls run with the compiled twin"),
]


def _load_site():
    spec = importlib.util.spec_from_file_location("scrapy_site", HERE / "scrapy_site.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


site_module = _load_site()


@pytest.fixture
def site() -> Iterator:
    with site_module.ShopSite(PAGES) as shop:
        yield shop


def crawl(
    site,
    storage: Path,
    *,
    crawler: str = "parsel",
    dedup: Union[dict, str, None] = None,
    start: int = 1,
    purge: bool = True,
    max_requests: Optional[int] = None,
    env: Optional[Dict[str, str]] = None,
    redirects: bool = False,
) -> subprocess.Popen:
    """Start one crawl in a process of its own (crawlee keeps global state per process);
    ``dedup="env"`` takes the Deduplicator's settings from ``env``."""
    options = {
        "crawler": crawler,
        "proxy": site.proxy,
        "start": [f"http://shop.example{site_module.page_path(start)}"],
        "storage_dir": str(storage),
        "purge": purge,
        "max_requests": max_requests,
        "dedup": dedup,
        "redirects": redirects,
    }
    return subprocess.Popen(
        [sys.executable, str(WORKER), json.dumps(options)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "CRAWLEE_LOG_LEVEL": "WARNING", **(env or {})},
    )


def results(*crawls: subprocess.Popen) -> List[dict]:
    outs = []
    for process in crawls:
        out, _ = process.communicate(timeout=TIMEOUT_SECONDS)
        assert process.returncode == 0
        outs.append(json.loads(out.strip().splitlines()[-1]))
    return outs


def shared(redis_url: str, namespace: str = "crawlee") -> dict:
    return {"strategy": "set", "redis_url": redis_url, "namespace": namespace}


def test_redirects_are_followed_hop_by_hop_and_no_page_body_is_fetched_twice(redis_url, tmp_path):
    """Every page also links to its targets through short links (chains of 1 to 4 hops) and a
    meta refresh: crawlee's client fetches the body of a page behind a redirect again; crawldedup's
    claims each hop's page before its fetch, so every page is fetched once."""
    with site_module.ShopSite(PAGES, redirects=True) as site:
        (plain,) = results(crawl(site, tmp_path / "plain", dedup=shared(redis_url, "plain")))
        plain_fetches = dict(site.fetches)
        site.fetches.clear()
        (ours,) = results(crawl(site, tmp_path / "ours", dedup=shared(redis_url, "hops"), redirects=True))
        assert not site.unknown
    print(f"crawlee's client: {sum(plain_fetches.values())} body fetches, crawldedup's: {site.total_fetches()}")
    assert set(plain_fetches) == set(range(PAGES)) and max(plain_fetches.values()) > 1
    assert dict(site.fetches) == dict.fromkeys(range(PAGES), 1)
    assert ours["redirected_known"] > 0 and ours["handled"] >= PAGES


def test_crawlees_own_queue_fetches_pages_again_and_ours_once(site, redis_url, tmp_path):
    (own,) = results(crawl(site, tmp_path / "own"))
    own_fetches = site.total_fetches()
    assert own["handled"] == own_fetches and len(site.fetches) == PAGES and not site.unknown
    site.fetches.clear()
    (ours,) = results(crawl(site, tmp_path / "ours", dedup=shared(redis_url)))
    print(f"crawlee's own queue fetched {own_fetches} times for {PAGES} pages, with crawldedup {site.total_fetches()}")
    assert own_fetches > PAGES, "the site's spellings no longer fool crawlee's unique_key"
    assert dict(site.fetches) == dict.fromkeys(range(PAGES), 1)
    assert ours == {"handled": PAGES, "won": PAGES, "lost": ours["lost"], "redirected_known": 0} and ours["lost"] > 0


@pytest.mark.parametrize("crawler", ["http", "beautifulsoup"])
def test_every_crawler_kind_fetches_each_page_once(crawler, site, redis_url, tmp_path):
    (ours,) = results(crawl(site, tmp_path, crawler=crawler, dedup=shared(redis_url)))
    assert dict(site.fetches) == dict.fromkeys(range(PAGES), 1) and ours["handled"] == PAGES


def test_two_processes_on_one_redis_fetch_each_page_once(site, redis_url, tmp_path):
    first, second = results(
        crawl(site, tmp_path / "a", dedup=shared(redis_url), start=1),
        crawl(site, tmp_path / "b", dedup=shared(redis_url), start=PAGES // 2),
    )
    assert dict(site.fetches) == dict.fromkeys(range(PAGES), 1)
    # How the pages split depends on which process starts first (a process whose start page the
    # other one claimed before it has nothing to do): only the sum is the store's.
    assert first["handled"] + second["handled"] == PAGES


def test_a_restarted_crawl_refetches_nothing(site, redis_url, tmp_path):
    """Stopped after 10 requests (and those in flight then), then restarted on its kept queue:
    the rest, each page once."""
    (stopped,) = results(crawl(site, tmp_path, dedup=shared(redis_url), max_requests=10))
    assert 10 <= stopped["handled"] < PAGES and site.total_fetches() == stopped["handled"]
    (resumed,) = results(crawl(site, tmp_path, dedup=shared(redis_url), purge=False))
    assert dict(site.fetches) == dict.fromkeys(range(PAGES), 1)
    assert resumed["handled"] == PAGES - stopped["handled"]


def test_two_processes_through_a_service_fetch_each_page_once(site, redis_url, tmp_path):
    """DEDUP_STRATEGY=service and CRAWLDEDUP_SERVICE_URL alone: two crawls claim through one
    ``crawldedup serve`` on Redis, and each page is fetched once."""
    with ServeProcess(["--strategy", "set", "--redis-url", redis_url, "--namespace", "crawlee-service"]) as server:
        env = {
            "DEDUP_STRATEGY": "service",
            "CRAWLDEDUP_SERVICE_URL": server.url,
            "CRAWLDEDUP_NAMESPACE": "crawlee-service",
        }
        first, second = results(
            crawl(site, tmp_path / "a", dedup="env", env=env, start=1),
            crawl(site, tmp_path / "b", dedup="env", env=env, start=PAGES // 2),
        )
        assert "Traceback" not in server.stderr
    assert dict(site.fetches) == dict.fromkeys(range(PAGES), 1)
    assert first["handled"] + second["handled"] == PAGES
    assert first["won"] + second["won"] == PAGES
