"""The crawl zoo (tests/crawl_zoo.py) crawled by every kind of crawler crawldedup serves.

Each crawl runs in processes of its own, bounded by CRAWL_TIMEOUT_SECONDS, against a zoo started
for it, and asserts the one thing a dedup library owes a crawler: every page a dedup-free crawl
of the same links reaches is fetched (0 missed), no page body is fetched twice (0 twice), and
nothing else is asked of the site (no 404, no TLS failure). Each prints its figures (requests,
redirects followed, duplicates dropped) beside the dedup-free crawl's.

The zoo's ``story``, ``search`` and ``tree`` pages are selected by ``sid``, ``from`` and ``ref``,
parameters policy 2 dropped: every crawl fetches each under the default policy (3), and
test_policy_2_would_lose_the_pages_sid_ref_and_from_select counts what policy 2 loses, in the
zoo's own model and in a real Scrapy crawl under ``CRAWLDEDUP_POLICY = "v2"``.

Crawlers: Scrapy in one process (the dupefilter, with and without crawldedup's
RedirectMiddleware), two Scrapy processes on one Redis store, two under scrapy-redis's Scheduler
sharing its queue, crawlee's ParselCrawler and BeautifulSoupCrawler with crawldedup's storage
and HTTP clients, the aiohttp example (examples/async_crawler.py) and a Node crawler
(tests/workers/zoo_crawler.mjs) claiming through ``crawldedup serve``.

Where two processes crawl, the zoo holds every response until both User-Agents have asked for
something: neither can claim a link before the other has a request of its own in flight, so
each takes part whatever the scheduler does, and the test can say so.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import uuid
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence
from urllib.parse import parse_qsl, urljoin, urlsplit

import pytest
from conftest import IN_CI, ServeProcess

from crawldedup import POLICY_V2, canonicalize

HERE = Path(__file__).parent
SCRAPY_WORKER = HERE / "workers" / "scrapy_crawl.py"
CRAWLEE_WORKER = HERE / "workers" / "crawlee_crawl.py"
NODE_WORKER = HERE / "workers" / "zoo_crawler.mjs"
AIOHTTP_EXAMPLE = HERE.parent / "examples" / "async_crawler.py"
#: A crawl of the zoo takes a few seconds; a hung one fails instead of hanging the suite.
CRAWL_TIMEOUT_SECONDS = 120


def _load_zoo() -> Any:
    spec = importlib.util.spec_from_file_location("crawl_zoo", HERE / "crawl_zoo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


zoo = _load_zoo()
START = [zoo.HTTP + "/p/0"]


def required(module: str, extra: str) -> Any:
    """Import ``module``; a skip without it, a failure under CI (the test extra installs it)."""
    if IN_CI:
        return importlib.import_module(module)
    return pytest.importorskip(module, reason=f"{module} is not installed: pip install {extra}")


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return zoo.make_certificates(tmp_path_factory.mktemp("zoo-tls"))


@pytest.fixture
def site(certificates: Any) -> Iterator[Any]:
    with zoo.ZooSite((certificates.chain, certificates.key)) as started:
        yield started


@pytest.fixture(scope="module")
def reference() -> Any:
    """The dedup-free crawl from START: the pages every crawl must fetch."""
    return zoo.ZooSite().dedup_free_crawl(START)


def proxied_env(site: Any, certificates: Any, **extra: str) -> Dict[str, str]:
    """The environment of a crawler process: the zoo as its http and https proxy, its CA trusted."""
    env = {
        k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy", "no_proxy", "all_proxy")
    }
    env.update(
        http_proxy=site.proxy,
        https_proxy=site.proxy,
        SSL_CERT_FILE=str(certificates.authority),
        NODE_EXTRA_CA_CERTS=str(certificates.authority),
    )
    env.pop("SCRAPY_SETTINGS_MODULE", None)
    env.update(extra)
    return env


def run_all(commands: Dict[str, Dict[str, Any]], directory: Path) -> Dict[str, subprocess.CompletedProcess]:
    """Run the commands (Popen keyword arguments, by name) at once, each bounded by
    CRAWL_TIMEOUT_SECONDS; stdout and stderr kept in files of ``directory``."""
    running = {}
    try:
        for name, command in commands.items():
            out = open(directory / f"{name}.out", "w+", encoding="utf-8")
            err = open(directory / f"{name}.err", "w+", encoding="utf-8")
            running[name] = (subprocess.Popen(**command, stdout=out, stderr=err, stdin=subprocess.DEVNULL), out, err)
        done = {}
        for name, (process, out, err) in running.items():
            code = process.wait(timeout=CRAWL_TIMEOUT_SECONDS)
            out.seek(0)
            err.seek(0)
            done[name] = subprocess.CompletedProcess(process.args, code, out.read(), err.read())
        return done
    finally:
        for process, out, err in running.values():
            if process.poll() is None:
                process.kill()
                process.wait()
            out.close()
            err.close()


def ended_well(name: str, done: subprocess.CompletedProcess) -> None:
    tail = "\n".join(done.stderr.splitlines()[-30:])
    assert done.returncode == 0, f"{name} exited with {done.returncode}:\n{tail}\n{done.stdout[-2000:]}"


class PagesMissed(AssertionError):
    """A crawl did not fetch pages a dedup-free crawl reaches (the worst bug this library can have)."""


class CrawlerErrors(AssertionError):
    """A crawler reported errors: requests that failed, or calls the service refused."""


def check(name: str, site: Any, reference: Any, dropped: Optional[int], record_property: Any) -> Dict[str, Any]:
    """Assert the crawl's verdict (0 twice, nothing unknown, then 0 missed); print and record its figures."""
    verdict = zoo.describe(dict(site.fetches), reference.pages)
    figures = {
        "pages": len(reference.pages),
        "body_fetches": sum(site.fetches.values()),
        "requests": site.requests,
        "redirects_followed": sum(site.redirected.values()),
        "duplicates_dropped": dropped,
        "dedup_free": {
            "requests": reference.requests,
            "body_fetches": sum(reference.fetches.values()),
            "redirects": reference.redirects,
        },
        **verdict,
    }
    print(f"{name}: {json.dumps(figures)}")
    record_property(name, json.dumps(figures))
    assert site.unknown == [], f"{name} asked for URLs the zoo never linked: {site.unknown[:10]}"
    assert site.tls_errors == [], site.tls_errors
    assert (verdict["twice"], verdict["unexpected"]) == ({}, []), figures
    if verdict["missed"]:
        raise PagesMissed(f"{name} missed {len(verdict['missed'])} pages: {figures}")
    assert figures["body_fetches"] == len(reference.pages)
    return figures


# --- the zoo itself ---------------------------------------------------------------------------


def test_the_zoo_is_what_its_docstring_says(reference):
    site = zoo.ZooSite()
    forms = Counter(canonicalize(page.url) for page in site.pages)
    assert [form for form, count in forms.items() if count > 1] == [], "two pages the policy merges"
    page_of_form = {canonicalize(page.url): page.id for page in site.pages}
    statuses: Counter = Counter()
    hops: Counter = Counter()
    for page in site.pages:
        for link in site.links(page.id):
            chain, end = site.follow(urljoin(page.url, link.href))
            assert end == link.target, (page.url, link, chain)
            hops[len(chain) - 1] += 1
            statuses.update(site.route(url)[0] for url in chain[:-1])
            # A page reached without a redirect is the page the policy says; a redirecting URL
            # never has the canonical form of a page other than the one it leads to.
            for url in chain:
                assert page_of_form.get(canonicalize(url), end) == end, (page.url, link.href, url)
    assert {301, 302, 307, 308} <= set(statuses)
    assert {0, 1, 2, 3, zoo.MAX_HOPS} <= set(hops)  # direct links, one hop, www + https, chains of three, loops
    # Short links whose codes differ only in case lead to different pages.
    assert site.route(zoo.HTTP + "/s/aB0") != site.route(zoo.HTTP + "/s/Ab0")
    assert canonicalize(zoo.HTTP + "/s/aB0") != canonicalize(zoo.HTTP + "/s/Ab0")
    # A redirect to another spelling of one page: a slash added, a slash removed, tracking stripped.
    for url in (zoo.HTTP + "/docs/3", zoo.HTTP + "/blog/3/", zoo.HTTP + "/news/3?utm_source=x&gclid=1"):
        chain, end = site.follow(url)
        assert len(chain) == 2 and canonicalize(chain[0]) == canonicalize(chain[1]) == canonicalize(site.pages[end].url)
    # Every page but the orphans is reached, most through several spellings.
    assert reference.pages == {page.id for page in site.pages if page.family != "orphan"}
    assert sum(reference.fetches.values()) > 4 * len(reference.pages) and reference.loops > 0
    # Pages selected by sid, from and ref: linked with tracking parameters too, one page per
    # parameter value under the default policy, one page per family under policy 2.
    selected = [page for page in site.pages if page.family in zoo.SELECTED_BY_PARAMETER]
    parameters = {urlsplit(page.url).path: sorted(dict(parse_qsl(urlsplit(page.url).query))) for page in selected}
    assert parameters == {"/story": ["sid"], "/search": ["from", "q"], "/tree": ["ref"]}
    hrefs = [
        link.href for page in site.pages for link in site.links(page.id) if link.target in {p.id for p in selected}
    ]
    assert any("utm_" in href for href in hrefs) and any("gclid=" in href for href in hrefs)
    assert any(href.startswith("?") for href in hrefs), "a link to another value of the same parameter"
    policy2 = Counter(canonicalize(page.url, policy=POLICY_V2) for page in selected)
    assert sorted(policy2.values()) == [zoo.FAMILIES[family] for family in ("tree", "search", "story")]


def test_the_zoo_answers_through_its_proxy_over_http_and_https(site, certificates):
    import http.client
    import ssl

    host, port = "127.0.0.1", int(site.proxy.rsplit(":", 1)[1])
    plain = http.client.HTTPConnection(host, port, timeout=10)
    answers = []
    for target in ("http://zoo.example/docs/3", "http://ZOO.example:80/docs/3/#x", "http://www.zoo.example/p/1"):
        plain.request("GET", target)
        response = plain.getresponse()
        answers.append((response.status, response.getheader("Location"), len(response.read()) > 0))
    assert answers == [(301, "/docs/3/", False), (200, None, True), (301, "http://zoo.example/p/1", False)]
    context = ssl.create_default_context(cafile=str(certificates.authority))
    secure = http.client.HTTPSConnection(host, port, timeout=10, context=context)
    secure.set_tunnel(zoo.HOST, 443)
    secure.request("GET", "/secure/4?utm_source=x")
    response = secure.getresponse()
    assert (response.status, b"<h1>secure 4</h1>" in response.read()) == (200, True)
    plain.close()
    secure.close()
    docs3, secure4 = site.page("docs", 3).id, site.page("secure", 4).id
    assert dict(site.fetches) == {docs3: 1, secure4: 1} and site.tunnels == 1 and site.unknown == []


# --- what policy 2 would lose ------------------------------------------------------------------


def selected_families(site: Any, pages: Any) -> Counter:
    """How many of ``pages`` each family a parameter selects holds."""
    return Counter(site.pages[page].family for page in pages if site.pages[page].family in zoo.SELECTED_BY_PARAMETER)


def test_policy_2_would_lose_the_pages_sid_ref_and_from_select(reference):
    """The zoo's model of a crawl that claims every URL by its canonical form, as crawldedup's
    integrations do: under the default policy every page once; under policy 2 one page of each
    family a parameter selects (it drops sid, from and ref), 22 pages never fetched, and the rest
    of the site fetched as under the default (tracking parameters merge under both)."""
    site = zoo.ZooSite()
    default = site.claiming_crawl(START, canonicalize)
    assert default.fetches == dict.fromkeys(reference.pages, 1)
    policy2 = site.claiming_crawl(START, partial(canonicalize, policy=POLICY_V2))
    lost = reference.pages - policy2.pages
    print(f"policy 2 loses {len(lost)} pages: {dict(selected_families(site, lost))}")
    assert (
        selected_families(site, lost)
        == Counter({"story": 9, "search": 9, "tree": 4})
        == {family: zoo.FAMILIES[family] - 1 for family in zoo.SELECTED_BY_PARAMETER}
    )
    assert len(lost) == 22 and max(policy2.fetches.values()) == 1
    rest = reference.pages - {page.id for page in site.pages if page.family in zoo.SELECTED_BY_PARAMETER}
    assert rest <= policy2.pages


# --- Scrapy -----------------------------------------------------------------------------------

DUPEFILTER = {"DUPEFILTER_CLASS": "crawldedup.scrapy.DupeFilter"}
REDIRECT_MIDDLEWARE = {"DOWNLOADER_MIDDLEWARES": {"crawldedup.scrapy.RedirectMiddleware": 540}}


def scrapy_command(
    site: Any, certificates: Any, directory: Path, name: str, settings: Dict[str, Any], starts: Sequence[str]
) -> Dict[str, Any]:
    config = {"start_urls": list(starts), "settings": settings, "result": str(directory / f"{name}.json")}
    return {
        "args": [sys.executable, str(SCRAPY_WORKER), json.dumps(config)],
        "env": proxied_env(site, certificates),
        "cwd": str(directory),
    }


def scrapy_stats(directory: Path, name: str, done: subprocess.CompletedProcess) -> Dict[str, Any]:
    """A Scrapy crawl's stats, after checking it ended well, logged no error and crawldedup warned of nothing."""
    ended_well(name, done)
    result = json.loads((directory / f"{name}.json").read_text(encoding="utf-8"))
    ours = [w for w in result["warnings"] if f"{os.sep}crawldedup{os.sep}" in w["filename"]]
    assert ours == [], f"crawldedup caused warnings in {name}: {ours}"
    assert "log_count/ERROR" not in result["stats"], "\n".join(done.stderr.splitlines()[-30:])
    return result["stats"]


@pytest.mark.slow
@pytest.mark.parametrize("middleware", [False, True], ids=["dupefilter", "dupefilter+RedirectMiddleware"])
def test_scrapy_fetches_every_page_once(middleware, site, certificates, reference, tmp_path, record_property):
    required("scrapy", "crawldedup[scrapy]")
    settings = {**DUPEFILTER, **(REDIRECT_MIDDLEWARE if middleware else {})}
    command = scrapy_command(site, certificates, tmp_path, "scrapy", settings, START)
    stats = scrapy_stats(tmp_path, "scrapy", run_all({"scrapy": command}, tmp_path)["scrapy"])
    check(
        f"scrapy[{'middleware' if middleware else 'dupefilter'}]",
        site,
        reference,
        stats.get("dupefilter/filtered", 0),
        record_property,
    )
    assert stats["crawldedup/new"] >= len(reference.pages)
    # Every chain back to the page that linked it was dropped at its redirect, and counted.
    assert stats.get("crawldedup/redirected_known", 0) >= site.permalinks > 0, stats


@pytest.mark.slow
def test_scrapy_under_policy_2_misses_the_pages_sid_ref_and_from_select(
    site, certificates, reference, tmp_path, record_property
):
    """The same crawl with ``CRAWLDEDUP_POLICY = "v2"``: the 22 pages the model says, one per value
    of sid, from and ref but the first fetched, and no other page missed or fetched twice."""
    required("scrapy", "crawldedup[scrapy]")
    settings = {**DUPEFILTER, "CRAWLDEDUP_POLICY": "v2"}
    command = scrapy_command(site, certificates, tmp_path, "scrapy", settings, START)
    stats = scrapy_stats(tmp_path, "scrapy", run_all({"scrapy": command}, tmp_path)["scrapy"])
    with pytest.raises(PagesMissed):
        check("scrapy[policy 2]", site, reference, stats.get("dupefilter/filtered", 0), record_property)
    missed = zoo.describe(dict(site.fetches), reference.pages)["missed"]
    assert selected_families(site, missed) == Counter({"story": 9, "search": 9, "tree": 4})
    assert len(missed) == 22 and max(site.fetches.values()) == 1


@pytest.fixture
def gated_site(certificates: Any) -> Iterator[Any]:
    """The zoo holding every response until two User-Agents have asked for something."""
    with zoo.ZooSite(
        (certificates.chain, certificates.key), wait_for_agents=2, gate_seconds=CRAWL_TIMEOUT_SECONDS
    ) as started:
        yield started


AGENTS = ("zoo-worker-a", "zoo-worker-b")


def crawl_in_two_scrapy_processes(
    name: str,
    site: Any,
    certificates: Any,
    directory: Path,
    settings: Dict[str, Any],
    starts: Dict[str, List[str]],
    record_property: Any,
) -> Dict[str, Dict[str, Any]]:
    """Crawl the gated zoo with one Scrapy process per agent of AGENTS (its ``starts``) and check
    the crawl as one: every page once in total, each process a part of it. Their stats, by agent."""
    commands = {
        agent: scrapy_command(site, certificates, directory, agent, {**settings, "USER_AGENT": agent}, starts[agent])
        for agent in AGENTS
    }
    done = run_all(commands, directory)
    stats = {agent: scrapy_stats(directory, agent, done[agent]) for agent in AGENTS}
    reference = site.dedup_free_crawl(sorted({url for urls in starts.values() for url in urls}))
    dropped = sum(s.get("dupefilter/filtered", 0) for s in stats.values())
    check(name, site, reference, dropped, record_property)
    print(f"per process: {dict(site.fetches_by_agent)}")
    # The gate opened because both asked (not by its timeout), and each fetched a page body.
    assert site.gate_opened_by_agents, f"the zoo's gate timed out: only {sorted(site.agents)} asked"
    assert all(site.fetches_by_agent[agent] >= 1 for agent in AGENTS), dict(site.fetches_by_agent)
    assert sum(s.get("crawldedup/redirected_known", 0) for s in stats.values()) >= site.permalinks
    return stats


def shared_store(redis_url: str) -> Dict[str, Any]:
    """crawldedup's dupefilter on a `set` store, in a namespace of its own."""
    return {
        **DUPEFILTER,
        "CRAWLDEDUP_STRATEGY": "set",
        "CRAWLDEDUP_REDIS_URL": redis_url,
        "CRAWLDEDUP_NAMESPACE": f"zoo-{uuid.uuid4().hex[:8]}",
    }


@pytest.mark.slow
def test_two_scrapy_processes_on_one_store_fetch_every_page_once(
    gated_site, certificates, redis_url, tmp_path, record_property
):
    required("scrapy", "crawldedup[scrapy]")
    site = gated_site
    # Each starts on a page of its own, and can claim nothing else before the other asked.
    starts = dict(zip(AGENTS, [START, [site.pages[site.ring[len(site.ring) // 2]].url]]))
    name = "scrapy[two processes, one store]"
    crawl_in_two_scrapy_processes(name, site, certificates, tmp_path, shared_store(redis_url), starts, record_property)


@pytest.mark.slow
def test_two_scrapy_processes_sharing_scrapy_redis_queue_fetch_every_page_once(
    gated_site, certificates, redis_url, tmp_path, record_property
):
    required("scrapy", "crawldedup[scrapy]")
    required("scrapy_redis", "scrapy-redis")
    site, settings = gated_site, shared_store(redis_url)
    settings.update(
        SCHEDULER="scrapy_redis.scheduler.Scheduler",
        SCHEDULER_PERSIST=True,
        SCHEDULER_QUEUE_KEY=f"{settings['CRAWLDEDUP_NAMESPACE']}:requests",
        REDIS_URL=redis_url,
        # Six start pages in the shared queue, two requests in flight per process at most: the
        # first process holds two until the second asked, and the second finds four to take.
        CONCURRENT_REQUESTS=2,
    )
    starts = [site.pages[site.ring[k * len(site.ring) // 6]].url for k in range(6)]
    name = "scrapy-redis[two processes, one queue]"
    stats = crawl_in_two_scrapy_processes(
        name, site, certificates, tmp_path, settings, dict.fromkeys(AGENTS, starts), record_property
    )
    assert all(s.get("scheduler/dequeued/redis", 0) >= 1 for s in stats.values()), stats


# --- crawlee, aiohttp, Node --------------------------------------------------------------------


#: crawlee's request queue keys a request by ``normalize_url``, which lowercases the whole URL: of
#: two links the policy keeps apart (``/s/aB0`` and ``/s/Ab0``, path case kept), both won, the
#: inner queue would take the second for the first; crawldedup's queue client queues them under
#: their canonical URLs (test_crawlee_queues_every_request_it_won).


@pytest.mark.slow
@pytest.mark.parametrize("crawler", ["parsel", "beautifulsoup"])
def test_crawlee_fetches_every_page_once(crawler, site, certificates, reference, redis_url, tmp_path, record_property):
    required("crawlee", "crawldedup[crawlee]")
    # Through crawldedup's storage client and its HTTP client (crawlee's default client with
    # redirects off: the zoo's CA trusted through SSL_CERT_FILE), every link followed
    # (www.zoo.example is another host to crawlee), no retry (it would be a second fetch).
    options = {
        "crawler": crawler,
        "proxy": site.proxy,
        "start": START,
        "storage_dir": str(tmp_path / "storage"),
        "purge": True,
        "max_requests": None,
        "dedup": {"strategy": "set", "redis_url": redis_url, "namespace": f"zoo-{uuid.uuid4().hex[:8]}"},
        "redirects": True,
        "strategy": "all",
        "retries": 0,
    }
    command = {
        "args": [sys.executable, str(CRAWLEE_WORKER), json.dumps(options)],
        "env": proxied_env(site, certificates, CRAWLEE_LOG_LEVEL="WARNING"),
        "cwd": str(tmp_path),
    }
    done = run_all({"crawlee": command}, tmp_path)["crawlee"]
    ended_well("crawlee", done)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    check(f"crawlee[{crawler}]", site, reference, result["lost"] + result["redirected_known"], record_property)
    assert result["handled"] == len(reference.pages), result
    assert result["redirected_known"] >= site.permalinks, result


@pytest.mark.slow
def test_the_aiohttp_example_fetches_every_page_once(
    site, certificates, reference, redis_url, tmp_path, record_property
):
    required("aiohttp", "aiohttp")
    env = proxied_env(
        site,
        certificates,
        DEDUP_STRATEGY="set",
        REDIS_URL=redis_url,
        CRAWLDEDUP_NAMESPACE=f"zoo-{uuid.uuid4().hex[:8]}",
    )
    command = {
        "args": [sys.executable, str(AIOHTTP_EXAMPLE), START[0], "--pages", "100000", "--workers", "8"],
        "env": env,
        "cwd": str(tmp_path),
    }
    done = run_all({"aiohttp": command}, tmp_path)["aiohttp"]
    ended_well("aiohttp example", done)
    failed = [line for line in done.stdout.splitlines() if line.startswith("failed ")]
    assert failed == [], failed[:5]
    summary = done.stdout.strip().splitlines()[-1]  # fetched N pages; W links won, L already claimed, ...
    lost = int(summary.split(" links won, ")[1].split(" already claimed")[0])
    check("aiohttp example", site, reference, lost, record_property)


@pytest.fixture(scope="module")
def node() -> str:
    found = shutil.which("node")
    if found is None:
        if IN_CI:
            pytest.fail("node is not installed (scripts/test installs nodejs with apt)")
        pytest.skip("node is not installed")
    return found


@pytest.mark.slow
def test_a_node_crawler_through_the_service_fetches_every_page_once(
    node, site, certificates, reference, tmp_path, record_property
):
    with ServeProcess(["--namespace", "zoo-node"]) as server:
        config = {
            "start": START,
            "service": server.url,
            "proxy": site.proxy,
            "workers": 8,
            "agent": "zoo-node",
            "maxRedirects": 20,
        }
        command = {"args": [node, str(NODE_WORKER), json.dumps(config)], "env": proxied_env(site, certificates)}
        done = run_all({"node": command}, tmp_path)["node"]
        assert "Traceback" not in server.stderr
    assert done.stdout.strip(), f"the node crawler printed nothing:\n{done.stderr[-2000:]}"
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if result["errors"]:
        raise CrawlerErrors(f"{len(result['errors'])} errors, the first: {result['errors'][:3]}")
    ended_well("node crawler", done)
    check(
        "node crawler via crawldedup serve",
        site,
        reference,
        result["dropped"] + result["redirected_known"],
        record_property,
    )
    assert result["pages"] == len(reference.pages) and result["redirected_known"] >= site.permalinks, result


# --- what the zoo found, one call each ---------------------------------------------------------


def test_claim_final_of_the_chains_own_page_with_metrics():
    required("prometheus_client", "crawldedup[metrics]")
    from crawldedup import Deduplicator
    from crawldedup.metrics import DedupMetrics

    with Deduplicator(capacity=10_000) as dedup:
        DedupMetrics().attach(dedup)
        assert dedup.claim_many([zoo.HTTP + "/docs/1"]) == [True]
        # The server added a slash: the chain's own page, never filtered, and no error.
        assert dedup.claim_final([zoo.HTTP + "/docs/1/"], requested=[zoo.HTTP + "/docs/1"]) == [True]


@pytest.mark.asyncio
async def test_crawlee_queues_every_request_it_won(tmp_path):
    required("crawlee", "crawldedup[crawlee]")
    from crawlee import Request
    from crawlee.configuration import Configuration
    from crawlee.storage_clients import FileSystemStorageClient

    from crawldedup import AsyncDeduplicator
    from crawldedup.integrations.crawlee import DedupStorageClient

    urls = [zoo.HTTP + "/s/aB0", zoo.HTTP + "/s/Ab0"]  # two short links: two pages
    async with AsyncDeduplicator(capacity=10_000) as dedup:
        client = DedupStorageClient(dedup, FileSystemStorageClient())
        queue = await client.create_rq_client(configuration=Configuration(storage_dir=str(tmp_path)))
        await queue.add_batch_of_requests([Request.from_url(url) for url in urls])
        taken = []
        while (request := await queue.fetch_next_request()) is not None:
            taken.append(request.url)
            await queue.mark_request_as_handled(request)
        assert dedup.stats.won == 2
        assert sorted(taken) == sorted(urls), "a request crawldedup won was never handed out"
