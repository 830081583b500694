"""A small aiohttp crawler whose workers share one AsyncDeduplicator: each page fetched once.

Every worker takes a URL from the queue, fetches it, and claims the links it finds in one
batch; only the links it won go back into the queue, so a page spelled ten ways (tracking
parameters, a fragment, the host in capitals...) is fetched once, and several crawler
processes pointed at the same Redis share the work instead of repeating it. A page is claimed
with a lease and made lasting (``done``) once fetched, so a page whose crawler died comes back
through ``expired()`` to whoever asks.

Redirects are followed here, hop by hop, not inside aiohttp: before a redirect's target is
fetched, ``claim_final`` asks whether it is the chain's to fetch (a fetch chain owns one claim):
another spelling of the page the chain holds goes on, another page is claimed, and a chain that
would land on a page another worker holds stops before fetching it again.

Usage::

    pip install aiohttp crawldedup
    CRAWLDEDUP_STRATEGY=set CRAWLDEDUP_REDIS_URL=redis://127.0.0.1:6379/0 python examples/async_crawler.py https://example.com/

Without ``CRAWLDEDUP_STRATEGY`` the local filter alone decides (one process). ``--pages`` bounds
the crawl (default 100); ``--workers`` is the number of concurrent fetches (default 8). A proxy
comes from the environment (``http_proxy``, ``https_proxy``), as aiohttp's ``trust_env`` reads it.
"""

from __future__ import annotations

import argparse
import asyncio
import html
import re
from typing import List, Optional, Set, Tuple
from urllib.parse import urljoin, urlsplit

import aiohttp

from crawldedup import AsyncDeduplicator

HREF = re.compile(r"""<a\s[^>]*href\s*=\s*["']([^"'#]+)""", re.IGNORECASE)
BASE = re.compile(r"""<base\s[^>]*href\s*=\s*["']([^"']+)""", re.IGNORECASE)
#: How long a page stays this crawler's before another one may take it over (seconds).
LEASE_SECONDS = 120.0
#: Redirects one fetch follows at most; the statuses of a redirect.
MAX_REDIRECTS = 10
REDIRECTS = {301, 302, 303, 307, 308}


async def fetch(
    session: aiohttp.ClientSession, dedup: AsyncDeduplicator, url: str, lease: Optional[float]
) -> Tuple[List[str], int, Optional[str]]:
    """Fetch ``url``, following its redirects: the chain of URLs requested, the last status, and
    the body (None when a redirect led to a page another worker holds, or too many redirects)."""
    chain = [url]
    for _ in range(MAX_REDIRECTS + 1):
        async with session.get(chain[-1], allow_redirects=False, timeout=aiohttp.ClientTimeout(total=20)) as response:
            location = response.headers.get("Location")
            if response.status not in REDIRECTS or not location:
                return chain, response.status, await response.text(errors="replace")
        target = urljoin(chain[-1], location)
        if not (await dedup.claim_final([target], requested=[chain], lease=lease))[0]:
            print(f"{url} redirects to {target}, another worker's page")
            return chain, response.status, None
        chain.append(target)
    return chain, response.status, None


def _site(url: str) -> str:
    """The host of a URL without a leading ``www.``: the site a link stays on."""
    host = urlsplit(url).hostname or ""
    return host[4:] if host.startswith("www.") else host


async def crawl(start: str, pages: int, workers: int) -> None:
    queue: asyncio.Queue[str] = asyncio.Queue()
    site = _site(start)
    fetched = 0
    async with AsyncDeduplicator.from_env() as dedup, aiohttp.ClientSession(trust_env=True) as session:
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
                    chain, status, body = await fetch(session, dedup, url, lease)
                except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                    print(f"failed {url}: {exc}")
                    if leased:
                        await dedup.release([url])  # another crawler (or a later run) retries it
                    continue
                if leased:
                    await dedup.done(chain)
                if body is None:
                    continue
                base = BASE.search(body)  # relative links are relative to the page's <base>, if any
                page = urljoin(chain[-1], html.unescape(base.group(1))) if base else chain[-1]
                links: List[str] = [urljoin(page, html.unescape(href)) for href in HREF.findall(body)]
                same_site: Set[str] = {link for link in links if _site(link) == site}
                batch = await dedup.claim_batch(sorted(same_site), lease=lease)
                for link, mine in zip(sorted(same_site), batch.won):
                    if mine:
                        queue.put_nowait(link)
                print(f"{status} {chain[-1]}: {sum(batch.won)} new of {len(same_site)} links")

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
