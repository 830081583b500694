"""One real Scrapy crawl of the test shop (run as a script by tests/test_scrapy.py, never imported).

Usage: scrapy_crawl.py CONFIG_JSON

CONFIG_JSON holds ``start_urls``, ``settings`` (Scrapy settings on top of the fast defaults
below) and ``result`` (a file path). The result file gets the crawl's stats, its finish
reason and every warning raised during the crawl with the file that caused it, so that the
test can refuse warnings caused by crawldedup while Scrapy's own deprecations stay harmless
(they cannot fail this process: it is not under pytest's warnings-as-errors).
"""

import json
import sys
import warnings

RECORDED = []


def record(message, category, filename, lineno, file=None, line=None):
    RECORDED.append({"category": category.__name__, "message": str(message), "filename": filename, "lineno": lineno})


warnings.simplefilter("always")
warnings.showwarning = record

import scrapy  # noqa: E402 (after the warning hook, so that import-time warnings are recorded too)
from scrapy.crawler import CrawlerProcess  # noqa: E402

FAST = {
    "LOG_LEVEL": "INFO",
    "TELNETCONSOLE_ENABLED": False,
    "ROBOTSTXT_OBEY": False,
    "COOKIES_ENABLED": False,
    # A retry is sent with dont_filter and would count as a second fetch: errors must show.
    "RETRY_ENABLED": False,
    "CONCURRENT_REQUESTS": 32,
    "CONCURRENT_REQUESTS_PER_DOMAIN": 32,
    "DOWNLOAD_DELAY": 0,
    "DOWNLOAD_TIMEOUT": 30,
    "USER_AGENT": "crawldedup-test",
}


class ShopSpider(scrapy.Spider):
    name = "shop"
    #: Start requests bypass the dupefilter, as a Spider's default start requests do.
    dont_filter = False

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        #: The URL of every response the spider processed, in order.
        self.parsed = []

    async def start(self):
        for request in self.start_requests():
            yield request

    def start_requests(self):
        # Not dont_filter (unlike Spider's default): the start pages are claimed like any other.
        for url in self.start_urls:
            yield scrapy.Request(url, dont_filter=self.dont_filter)

    def parse(self, response):
        self.parsed.append(response.url)
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href)


def main() -> int:
    config = json.loads(sys.argv[1])
    process = CrawlerProcess({**FAST, **config["settings"]})
    crawler = process.create_crawler(ShopSpider)
    process.crawl(crawler, start_urls=config["start_urls"], dont_filter=config.get("dont_filter", False))
    process.start()
    stats = crawler.stats.get_stats()
    result = {
        "stats": stats,
        "finish_reason": stats.get("finish_reason"),
        "warnings": RECORDED,
        "parsed": crawler.spider.parsed,
    }
    with open(config["result"], "w", encoding="utf-8") as out:
        json.dump(result, out, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
