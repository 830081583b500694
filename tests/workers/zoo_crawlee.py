"""One crawlee crawl of the crawl zoo (run as a script by tests/test_crawl_zoo.py, never imported).

Usage: zoo_crawlee.py JSON_OPTIONS

Options: ``crawler`` (``parsel`` or ``beautifulsoup``), ``proxy`` (the zoo's proxy, for http and
https), ``start`` (start URLs), ``storage_dir`` and ``dedup`` (the
AsyncDeduplicator's arguments). The crawler claims requests through crawldedup's storage client
and follows redirects with its HTTP client (each hop's page claimed before its fetch), over
crawlee's default client with redirects off and certificates not verified (the zoo's are the
test's own). Links are followed wherever they lead (``strategy="all"``): www.zoo.example is
another host to crawlee. Prints one JSON line: requests handled and the Deduplicator's counters.
"""

import asyncio
import json
import sys

from crawlee import ConcurrencySettings, service_locator
from crawlee.configuration import Configuration
from crawlee.crawlers import BeautifulSoupCrawler, ParselCrawler
from crawlee.http_clients import ImpitHttpClient
from crawlee.proxy_configuration import ProxyConfiguration
from crawlee.storage_clients import FileSystemStorageClient

from crawldedup import AsyncDeduplicator
from crawldedup.integrations.crawlee import DedupHttpClient, DedupStorageClient

CRAWLERS = {"parsel": ParselCrawler, "beautifulsoup": BeautifulSoupCrawler}


async def main() -> int:
    options = json.loads(sys.argv[1])
    dedup = AsyncDeduplicator(**options["dedup"])
    configuration = Configuration(storage_dir=options["storage_dir"], purge_on_start=True)
    service_locator.set_configuration(configuration)  # before anything makes one implicitly
    inner = ImpitHttpClient(follow_redirects=False, verify=False)
    crawler = CRAWLERS[options["crawler"]](
        configuration=configuration,
        storage_client=DedupStorageClient(dedup, FileSystemStorageClient()),
        http_client=DedupHttpClient(dedup, inner=inner),
        proxy_configuration=ProxyConfiguration(proxy_urls=[options["proxy"]]),
        concurrency_settings=ConcurrencySettings(desired_concurrency=8, max_concurrency=8),
        max_request_retries=0,  # a retry would be a second fetch: errors must show
        configure_logging=False,
    )
    handled = 0

    @crawler.router.default_handler
    async def handle(context) -> None:  # type: ignore[no-untyped-def]
        nonlocal handled
        handled += 1
        await context.enqueue_links(strategy="all")

    statistics = await crawler.run(options["start"])
    stats = dedup.stats
    result = {
        "handled": handled,
        "failed": statistics.requests_failed,
        "won": stats.won,
        "lost": stats.lost,
        "redirected_known": stats.redirected_known,
    }
    await dedup.aclose()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
