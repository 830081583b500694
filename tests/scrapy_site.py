"""A small shop site for the Scrapy crawl tests, served on loopback, counting fetches per page.

Loaded by path from tests/test_scrapy.py (never imported as a package module). The server is
also an HTTP proxy: crawlers reach ``http://shop.example`` through it (``http_proxy``), so
links can spell the host in any case and with or without the default port ``:80``, the way
real sites do, while everything stays on one free loopback port and no name is resolved.

Pages are identified by the server's own routing (not by crawldedup), like a web framework
would: ``/p/<n>`` and ``/item?id=<n>&cat=<n % 5>``, a trailing slash and dot segments are
ignored, query parameters other than ``id`` and ``cat`` (tracking ones) are ignored.
Every page links to a few others, each link in several spellings.

With ``redirects=True`` every page also links to its targets through redirects: a short link
``/s/<source>/<target>`` of its own (301) into a chain ``/go/<codes>/<target>`` whose hops answer
302, 303, 307 and 308 in turn before the page, and ``/m/<target>``, a page whose meta refresh
leads to the target.
"""

from __future__ import annotations

import collections
import html
import posixpath
from typing import Callable, Dict, List, Optional, Tuple
from urllib.parse import parse_qs, unquote, urlsplit

from conftest import LoopbackHandler, LoopbackSite

HOST = "shop.example"
ORIGIN = f"http://{HOST}"


def page_path(page: int) -> str:
    """The plain spelling of a page (every third page is a query page)."""
    return f"/item?id={page}&cat={page % 5}" if page % 3 == 0 else f"/p/{page}"


def spellings(source: int, target: int) -> List[str]:
    """The hrefs by which page ``source`` links to page ``target``: all valid, all the same page."""
    if target % 3 == 0:
        query, swapped = f"id={target}&cat={target % 5}", f"cat={target % 5}&id={target}"
        relative = f"?{query}" if source % 3 == 0 else f"../item?{swapped}"
        variants = [
            f"/item?{query}",
            f"/item?{swapped}",  # query order
            f"/item?{query}&utm_source=newsletter&utm_medium=email",  # tracking
            f"http://SHOP.example:80/item?{swapped}#details",  # host case, default port, fragment
            relative,  # relative to the linking page
            f"/item/?{query}&jsessionid=s{target}",  # trailing slash, session id
            f"//{HOST}/item?{query}&gclid=Cj{target}",  # scheme-relative, click id
        ]
    else:
        relative = f"{target}" if source % 3 else f"p/{target}"
        variants = [
            f"/p/{target}",
            f"{ORIGIN}/p/{target}#reviews",  # fragment
            f"http://Shop.Example:80/p/{target}",  # host case, default port
            f"/p/{target}/",  # trailing slash
            f"/p/{target}?utm_source=feed&utm_campaign=spring",  # tracking
            relative,  # relative to the linking page
            f"/p/./{target}?ref_src=home",  # dot segment, referral tag
            f"//{HOST}/p/{target}?fbclid=IwAR{target}",  # scheme-relative, click id
        ]
    # Three spellings per link, rotating with the source so that every spelling appears.
    return [variants[(source + k) % len(variants)] for k in range(3)]


#: The chains a short link enters, by source page: every HTTP redirect code, 1 to 3 hops.
CHAINS = ("302", "307.308", "308.303.302")


def short_link(source: int, target: int) -> str:
    """The short link by which ``source`` links to ``target`` (one per source: many lead to one page)."""
    return f"/s/{source}/{target}"


def redirect(path: str) -> Optional[Tuple[int, str]]:
    """The status and Location of a redirect path (``/s/...``, ``/go/...``), or None for another path."""
    parts = path.strip("/").split("/")
    try:
        if parts[0] == "s" and len(parts) == 3:
            return 301, f"/go/{CHAINS[int(parts[1]) % len(CHAINS)]}/{int(parts[2])}"
        if parts[0] == "go" and len(parts) == 3:
            codes, target = parts[1].split("."), int(parts[2])
            rest = ".".join(codes[1:])
            return int(codes[0]), (f"/go/{rest}/{target}" if rest else page_path(target))
    except ValueError:
        return None
    return None


def targets(source: int, pages: int) -> List[int]:
    """Pages linked from ``source``: the next one (so all are reachable) and a few far ones."""
    return sorted({(source + 1) % pages, (7 * source + 3) % pages, (source + pages // 2) % pages})


class ShopSite(LoopbackSite):
    """The site on a free loopback port; ``fetches[page]`` counts GETs per page, per user agent too.

    :param pages: number of pages.
    :param wait_for_agents: hold every response until this many distinct User-Agents have
        asked for something (at most ``gate_seconds``), so that concurrent crawlers overlap.
    :param article: the text of each page's article (none without it); may be replaced
        between crawls, as a site's pages change.
    """

    def __init__(
        self,
        pages: int,
        *,
        wait_for_agents: int = 0,
        gate_seconds: float = 20.0,
        article: Optional[Callable[[int], str]] = None,
        redirects: bool = False,
    ) -> None:
        super().__init__(wait_for_agents=wait_for_agents, gate_seconds=gate_seconds)
        self.pages = pages
        self.redirects = redirects
        #: Redirect and meta refresh responses sent, by status (``refresh`` for meta refresh pages).
        self.redirected: Dict[str, int] = collections.Counter()
        self.article = article
        self.fetches: Dict[int, int] = collections.Counter()
        self.fetches_by_agent: Dict[str, int] = collections.Counter()
        self.unknown: List[str] = []

    def total_fetches(self) -> int:
        with self._lock:
            return sum(self.fetches.values())

    def route(self, target: str) -> Optional[int]:
        """The page a request target (absolute or origin form) stands for, or None for a 404."""
        parts = urlsplit(target)
        if parts.scheme and (parts.scheme != "http" or parts.hostname != HOST or parts.port not in (None, 80)):
            return None
        path = posixpath.normpath(unquote(parts.path) or "/")
        query = parse_qs(parts.query)
        try:
            if path == "/item":
                page = int(query["id"][0])
                if page % 3 or int(query["cat"][0]) != page % 5:
                    return None
            elif path.startswith("/p/"):
                page = int(path[3:])
                if page % 3 == 0:
                    return None
            else:
                return None
        except (KeyError, ValueError):
            return None
        return page if 0 <= page < self.pages else None

    def body(self, page: int) -> bytes:
        hrefs = [(target, href) for target in targets(page, self.pages) for href in spellings(page, target)]
        if self.redirects:
            hrefs += [(target, short_link(page, target)) for target in targets(page, self.pages)]
            hrefs.append(((page + 2) % self.pages, f"/m/{(page + 2) % self.pages}"))
        links = "".join(f'<li><a href="{html.escape(href)}">page {target}</a></li>' for target, href in hrefs)
        # The base keeps relative links valid when the page is fetched as /p/4/ or /p/./4.
        base = html.escape(ORIGIN + page_path(page))
        article = f"<article><p>{html.escape(self.article(page))}</p></article>" if self.article else ""
        return (
            f'<html><head><base href="{base}"><title>page {page}</title></head><body><ul>{links}</ul>'
            f"{article}</body></html>"
        ).encode()

    def _handler(self) -> type:
        site = self

        class Handler(LoopbackHandler):
            def do_GET(self) -> None:
                agent = self.headers.get("User-Agent", "")
                site._admit(agent)
                path = urlsplit(self.path).path
                hop = redirect(path) if site.redirects else None
                if hop is not None:
                    self._send(hop[0], b"", location=ORIGIN + hop[1])
                    return
                if site.redirects and path.startswith("/m/") and path[3:].isdigit():
                    refresh = html.escape(ORIGIN + page_path(int(path[3:])))
                    self._send(
                        0, f'<html><head><meta http-equiv="refresh" content="0; url={refresh}"></head></html>'.encode()
                    )
                    return
                page = site.route(self.path)
                with site._lock:
                    if page is None:
                        site.unknown.append(self.path)
                    else:
                        site.fetches[page] += 1
                        site.fetches_by_agent[agent] += 1
                body = site.body(page) if page is not None else b"not found"
                self._send(200 if page is not None else 404, body)

            def _send(self, status: int, body: bytes, location: Optional[str] = None) -> None:
                """Send a response; status 0 is a meta refresh page (200), counted as a redirect."""
                if status != 200 and status != 404:
                    with site._lock:
                        site.redirected[str(status) if status else "refresh"] += 1
                self.send_html(status or 200, body, location)

        return Handler
