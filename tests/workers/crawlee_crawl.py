"""One crawlee crawl of a loopback test site (run as a script by tests/test_crawlee.py and
tests/test_crawl_zoo.py, never imported).

Usage: crawlee_crawl.py JSON_OPTIONS

Options: ``crawler`` (``http``, ``parsel`` or ``beautifulsoup``), ``proxy`` (the site's
``http_proxy``), ``start`` (start URLs), ``storage_dir`` and ``purge`` (crawlee's storage),
``max_requests`` (or null), and ``dedup``: null for crawlee's own request queue, the
AsyncDeduplicator's arguments, or ``"env"`` for ``AsyncDeduplicator.from_env()`` (the settings
of the environment alone, as ``DEDUP_STRATEGY=service`` and ``CRAWLDEDUP_SERVICE_URL``).
``redirects``: the crawler's HTTP client is crawldedup's ``DedupHttpClient`` (redirects
followed hop by hop, each hop's page claimed first). ``strategy``: crawlee's enqueue strategy
(default ``same-hostname``, crawlee's own); ``retries``: crawlee's ``max_request_retries``
(default crawlee's: a retry is a second fetch). Prints one JSON line: requests handled, and the
Deduplicator's ``won``/``lost``/``redirected_known`` counters when it has one.
"""

import asyncio
import json
import re
import sys
from urllib.parse import urljoin

from crawlee import ConcurrencySettings, service_locator
from crawlee.configuration import Configuration
from crawlee.crawlers import BeautifulSoupCrawler, HttpCrawler, ParselCrawler
from crawlee.proxy_configuration import ProxyConfiguration
from crawlee.storage_clients import FileSystemStorageClient

from crawldedup import AsyncDeduplicator
from crawldedup.integrations.crawlee import DedupHttpClient, DedupStorageClient

CRAWLERS = {"http": HttpCrawler, "parsel": ParselCrawler, "beautifulsoup": BeautifulSoupCrawler}
HREF = re.compile(rb'<a href="([^"]+)"')
BASE = re.compile(rb'<base href="([^"]+)"')


async def main() -> int:
    options = json.loads(sys.argv[1])
    if options["dedup"] == "env":
        dedup = AsyncDeduplicator.from_env()
    else:
        dedup = AsyncDeduplicator(**options["dedup"]) if options["dedup"] is not None else None
    storage = FileSystemStorageClient()
    configuration = Configuration(storage_dir=options["storage_dir"], purge_on_start=options["purge"])
    service_locator.set_configuration(configuration)  # before anything makes one implicitly
    crawler = CRAWLERS[options["crawler"]](
        configuration=configuration,
        storage_client=DedupStorageClient(dedup, storage) if dedup is not None else storage,
        proxy_configuration=ProxyConfiguration(proxy_urls=[options["proxy"]]),
        **({"http_client": DedupHttpClient(dedup)} if options.get("redirects") else {}),
        max_requests_per_crawl=options["max_requests"],
        **({"max_request_retries": options["retries"]} if options.get("retries") is not None else {}),
        concurrency_settings=ConcurrencySettings(desired_concurrency=8, max_concurrency=8),
        configure_logging=False,
    )
    handled = 0

    @crawler.router.default_handler
    async def handle(context) -> None:  # type: ignore[no-untyped-def]
        nonlocal handled
        handled += 1
        if options["crawler"] == "http":  # no parser: the links by hand, against the page's base
            body = await context.http_response.read()
            base = BASE.search(body)
            page = base.group(1).decode() if base else context.request.url
            await context.add_requests(
                [urljoin(page, href.decode().replace("&amp;", "&")) for href in HREF.findall(body)]
            )
        else:
            await context.enqueue_links(strategy=options.get("strategy", "same-hostname"))

    await crawler.run(options["start"])
    result = {"handled": handled}
    if dedup is not None:
        result.update(won=dedup.stats.won, lost=dedup.stats.lost, redirected_known=dedup.stats.redirected_known)
        await dedup.aclose()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
