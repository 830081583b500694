"""A small aiohttp crawler whose workers share one AsyncDeduplicator: each page fetched once.

Every worker takes a URL from the queue, fetches it, and claims the links it finds in one
batch; only the links it won go back into the queue, so a page spelled ten ways (tracking
parameters, a fragment, the host in capitals...) is fetched once, and several crawler
processes pointed at the same Redis share the work instead of repeating it. A page is claimed
with a lease and made lasting (``done``) once fetched, so a page whose crawler died comes back
through ``expired()`` to whoever asks.

Usage::

    pip install aiohttp crawldedup
    DEDUP_STRATEGY=set REDIS_URL=redis://127.0.0.1:6379/0 python examples/async_crawler.py https://example.com/

Without ``DEDUP_STRATEGY`` the local filter alone decides (one process). ``--pages`` bounds
the crawl (default 100); ``--workers`` is the number of concurrent fetches (default 8).
"""

from __future__ import annotations

import argparse
import asyncio
import html
import re
from typing import List, Set
from urllib.parse import urljoin, urlsplit

import aiohttp

from crawldedup import AsyncDeduplicator

HREF = re.compile(r"""href\s*=\s*["']([^"'#]+)""", re.IGNORECASE)
#: How long a page stays this crawler's before another one may take it over (seconds).
LEASE_SECONDS = 120.0


async def crawl(start: str, pages: int, workers: int) -> None:
    queue: asyncio.Queue[str] = asyncio.Queue()
    host = urlsplit(start).hostname
    fetched = 0
    async with AsyncDeduplicator.from_env() as dedup, aiohttp.ClientSession() as session:
        leased = dedup.store is not None and dedup.store.supports_leases
        lease = LEASE_SECONDS if leased else None
        for url, mine in zip([start], await dedup.claim_many([start], lease=lease)):
            if mine:
                queue.put_nowait(url)

        async def worker() -> None:
            nonlocal fetched
            while fetched < pages:
                try:
                    url = await asyncio.wait_for(queue.get(), timeout=2)
                except asyncio.TimeoutError:
                    return
                fetched += 1
                try:
                    async with session.get(url, timeout=aiohttp.ClientTimeout(total=20)) as response:
                        body = await response.text(errors="replace")
                except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                    print(f"failed {url}: {exc}")
                    if leased:
                        await dedup.release([url])  # another crawler (or a later run) retries it
                    continue
                if leased:
                    await dedup.done([url])
                links: List[str] = [urljoin(url, html.unescape(href)) for href in HREF.findall(body)]
                same_site: Set[str] = {link for link in links if urlsplit(link).hostname == host}
                batch = await dedup.claim_batch(sorted(same_site), lease=lease)
                for link, mine in zip(sorted(same_site), batch.won):
                    if mine:
                        queue.put_nowait(link)
                print(f"{response.status} {url}: {sum(batch.won)} new of {len(same_site)} links")

        await asyncio.gather(*(worker() for _ in range(workers)))
        stats = dedup.stats
    print(
        f"fetched {fetched} pages; {stats.won} links won, {stats.lost} already claimed, "
        f"{stats.local_answer_ratio or 0:.0%} answered by the local filter"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("start", help="the first page")
    parser.add_argument("--pages", type=int, default=100, help="most pages fetched (default 100)")
    parser.add_argument("--workers", type=int, default=8, help="concurrent fetches (default 8)")
    arguments = parser.parse_args()
    asyncio.run(crawl(arguments.start, arguments.pages, arguments.workers))


if __name__ == "__main__":
    main()
