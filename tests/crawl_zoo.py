"""The crawl zoo: a loopback site with the redirects real sites have, counting page body fetches.

Loaded by path from tests/test_crawl_zoo.py (never imported as a package module). Like
tests/scrapy_site.py, the server is also the crawlers' proxy: they reach ``http://zoo.example``
(and ``http://www.zoo.example``) with absolute-form requests through ``http_proxy``, and
``https://zoo.example`` through ``CONNECT`` (``https_proxy``), after which the server speaks TLS
with a certificate :func:`make_certificates` made. No name is ever resolved.

Pages (:data:`FAMILIES`) are served (200) at exactly one spelling each, :attr:`Page.url`, up to
tracking parameters, the order of query parameters and percent-encoded digits, which the server
ignores as web frameworks do. Every other spelling a link uses (:data:`SPELLINGS`) is either
one the client normalizes itself (the case of the scheme and host, the default port, a
fragment, relative forms such as ``../p/4`` and scheme-relative ones) or a redirect, as real sites answer
(Locations absolute or relative, some in another spelling of their page):

- ``/docs/<n>`` -> 301 -> ``/docs/<n>/``: a slash added by the server (Django's APPEND_SLASH);
- ``/blog/<n>/`` -> 308 -> ``/blog/<n>``: a slash removed;
- ``/news/<n>?utm_source=..`` -> 302 -> ``/news/<n>``, and ``/tree?ref=<branch>&utm_campaign=..`` ->
  302 -> ``/tree?ref=<branch>``: tracking parameters stripped;
- ``http://zoo.example/secure/<n>`` -> 301 -> ``https://...``: http to https;
- ``http://www.zoo.example/...`` -> 301 -> ``http://zoo.example/...``: www to the bare host;
- ``/s/<code>`` -> 301 or 302 -> a page: short links, whose codes are case-sensitive (``/s/aB0``
  and ``/s/Ab0`` lead to two different pages: the policy keeps a path's case); some land on
  their page with ``utm_*`` parameters added, as link shorteners do;
- ``/go/<k>`` -> 302 or 303 -> ``/hop/<k>`` -> 307 -> ``/jump/<k>`` -> 308 -> a page: chains of three;
- ``/moved/<k>`` -> 307 -> a page also linked directly, or back to the page that links it (a
  redirect to a page fetched already);
- ``/loop/<k>`` <-> ``/loop/<k>/again`` (302, 307) and ``/spin/<k>`` <-> ``/spin/<k>/`` (301, 308):
  loops that lead to no page.

``hidden`` pages are linked only through short links, ``deep`` ones only through chains, and
``orphan`` pages not at all (a crawl that fetches one has invented a link). ``story``,
``search`` and ``tree`` pages are selected by a parameter whose name some sites use for
tracking (``/story?sid=0..9``, ``/search?q=shoes&from=0..180``, ``/tree?ref=<branch>``): each is
a page of its own, linked like the others (tracking parameters too). Policy rules the zoo relies
on, and that tests/test_crawl_zoo.py checks: path case is kept, a trailing slash is dropped,
``utm_*``, ``gclid`` and ``fbclid`` are dropped, ``sid``, ``ref`` and ``from`` are kept (policy
3; policy 2 drops them and merges each of those families into one page), ``http`` and
``https`` stay distinct, ``www.`` is kept; no two pages, and no redirecting URL and a page it
does not lead to, have one canonical form.

:meth:`ZooSite.dedup_free_crawl` crawls the site's own link graph without the network, as a
crawler that follows every link it has not requested in that exact spelling would: the pages it
reaches are the pages every crawl must fetch, once each. :meth:`ZooSite.claiming_crawl` crawls
the same graph claiming every URL by a key (a canonical policy's form), as crawldedup's
integrations do: what a policy would fetch, and lose, without a crawler.
"""

from __future__ import annotations

import collections
import datetime
import html
import posixpath
import re
import socketserver
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Deque, Dict, FrozenSet, List, Optional, Set, Tuple, Union
from urllib.parse import parse_qsl, unquote, urldefrag, urlencode, urljoin, urlsplit

from conftest import LoopbackHandler, LoopbackSite

HOST = "zoo.example"
WWW = "www." + HOST
HTTP = f"http://{HOST}"
HTTPS = f"https://{HOST}"
#: Query parameters the server ignores (and the policy drops). ``sid``, ``ref`` and ``from``
#: select the pages of the ``story``, ``tree`` and ``search`` families.
TRACKING = frozenset({"utm_source", "utm_medium", "utm_campaign", "gclid", "fbclid"})
#: The branches of ``/tree?ref=<branch>``, one page each.
BRANCHES = ("main", "develop", "release-1.2", "v2.0.1", "fix-login")
#: Pages per family, in the order the ring interleaves the linked ones.
FAMILIES: Dict[str, int] = {
    "p": 100,
    "item": 30,
    "docs": 30,
    "blog": 30,
    "news": 30,
    "secure": 30,
    "story": 10,
    "search": 10,
    "tree": len(BRANCHES),
    "hidden": 24,
    "deep": 16,
    "orphan": 4,
}
#: Families every page's links reach directly; the others only through redirects, or never.
RING_FAMILIES = ("p", "item", "docs", "blog", "news", "secure", "story", "search", "tree")
#: Families whose page a query parameter selects that policy 2 drops: policy 2 merges each into one page.
SELECTED_BY_PARAMETER = ("story", "search", "tree")
#: Redirects one chain follows at most in the dedup-free crawl (every chain but a loop has at most 4).
MAX_HOPS = 10
#: Where :meth:`ZooSite.follow` says a chain ended at a redirect to a page another request holds.
HELD = -1
#: How the links of a page spell their targets, in turn (see :meth:`ZooSite._spell`).
SPELLINGS = (
    "path",
    "fragment",
    "host_case",
    "tracking",
    "relative",
    "scheme_relative",
    "www",
    "server_redirect",
    "percent_encoded",
)
_DEFAULT_PORTS = {"http": 80, "https": 443}
_PAGE_PATH = re.compile(r"/([a-z]+)/(\d+)(/?)")


@dataclass(frozen=True)
class Page:
    """A page of the zoo: ``id`` (its index in :attr:`ZooSite.pages`) and the one URL it is served at."""

    id: int
    family: str
    n: int
    url: str


@dataclass(frozen=True)
class Link:
    """An ``href`` as written in a page, and the page it leads to (None: a loop, no page)."""

    href: str
    target: Optional[int]


#: What the server answers for a URL: a page's id, a redirect (status, Location), or None (404).
Outcome = Union[int, Tuple[int, str], None]


@dataclass
class ModelCrawl:
    """The figures of a crawl of the link graph without the network (see :meth:`ZooSite.crawl_model`)."""

    #: Body fetches per page id: the pages reached are its keys.
    fetches: Dict[int, int] = field(default_factory=collections.Counter)
    requests: int = 0
    redirects: int = 0
    #: Chains that ended in a loop (more than MAX_HOPS redirects).
    loops: int = 0
    #: Links not requested and chains ended at a redirect, their key claimed already.
    dropped: int = 0

    @property
    def pages(self) -> Set[int]:
        return set(self.fetches)


def page_url(family: str, n: int) -> str:
    if family == "item":
        return f"{HTTP}/item?id={n}&cat={n % 7}"
    if family == "docs":
        return f"{HTTP}/docs/{n}/"
    if family == "secure":
        return f"{HTTPS}/secure/{n}"
    if family == "story":
        return f"{HTTP}/story?sid={n}"
    if family == "search":
        return f"{HTTP}/search?q=shoes&from={20 * n}"
    if family == "tree":
        return f"{HTTP}/tree?ref={BRANCHES[n]}"
    return f"{HTTP}/{family}/{n}"


def short_code(pair: int, upper_first: bool) -> str:
    """Two codes per ``pair`` that differ only in case: ``aB0`` and ``Ab0``, ``bC1`` and ``Bc1``..."""
    first, second = "abcdefghjkmnpqrstuvwxyz"[pair % 23], "bcdefghjkmnpqrstuvwxyza"[pair % 23]
    return f"{first.upper()}{second}{pair}" if upper_first else f"{first}{second.upper()}{pair}"


def remove_dot_segments(path: str) -> str:
    """RFC 3986 5.2.4, as servers apply it to a request's path (a trailing slash is kept)."""
    out: List[str] = []
    segments = path.split("/")
    for i, segment in enumerate(segments):
        if segment == ".":
            if i == len(segments) - 1:
                out.append("")
        elif segment == "..":
            if len(out) > 1:
                out.pop()
            if i == len(segments) - 1:
                out.append("")
        else:
            out.append(segment)
    return "/".join(out) or "/"


class ZooSite(LoopbackSite):
    """The zoo on a free loopback port; ``fetches[page id]`` counts the page bodies sent (200s).

    :param tls: (certificate chain file, key file) for ``https://zoo.example`` behind ``CONNECT``;
        without it, ``CONNECT`` is refused (and ``secure`` pages cannot be fetched).
    :param wait_for_agents: hold every response until this many distinct User-Agents have asked
        for something (at most ``gate_seconds``), so that concurrent crawlers each take part.
    """

    def __init__(
        self,
        tls: Optional[Tuple[Path, Path]] = None,
        *,
        wait_for_agents: int = 0,
        gate_seconds: float = 60.0,
    ) -> None:
        self.pages: List[Page] = []
        self._by_key: Dict[Tuple[str, int], int] = {}
        #: Pages a query selects, by (path, their query's parameters): ``/item``, ``/story``...
        self._by_query: Dict[Tuple[str, FrozenSet[Tuple[str, str]]], int] = {}
        for family, count in FAMILIES.items():
            for n in range(count):
                page = Page(len(self.pages), family, n, page_url(family, n))
                self._by_key[family, n] = page.id
                self.pages.append(page)
                parts = urlsplit(page.url)
                if parts.query:
                    self._by_query[parts.path, frozenset(parse_qsl(parts.query))] = page.id
        self._query_paths = {path for path, _ in self._by_query}
        #: The pages every page's links lead to directly, interleaved by family.
        self.ring: List[int] = [
            self._by_key[family, k]
            for k in range(max(FAMILIES[f] for f in RING_FAMILIES))
            for family in RING_FAMILIES
            if k < FAMILIES[family]
        ]
        #: Redirects by exact path (case-sensitive): short links, chains, moved pages, loops.
        self.table: Dict[str, Tuple[int, str]] = {}
        self._links: Dict[int, List[Link]] = {page.id: [] for page in self.pages}
        #: Links to a redirect back to the linking page: a chain that lands on a page fetched
        #: already whatever the crawl's order (a crawler drops each at its redirect).
        self.permalinks = 0
        self._build_links()

        super().__init__(wait_for_agents=wait_for_agents, gate_seconds=gate_seconds)
        #: Body fetches (200 page responses) per page id, and per User-Agent.
        self.fetches: Dict[int, int] = collections.Counter()
        self.fetches_by_agent: Dict[str, int] = collections.Counter()
        #: Redirect responses sent, by status.
        self.redirected: Dict[int, int] = collections.Counter()
        self.requests = 0
        self.tunnels = 0
        #: Request targets answered 404 (a crawler invented a URL), and failed TLS handshakes.
        self.unknown: List[str] = []
        self.tls_errors: List[str] = []
        self._tls: Optional[ssl.SSLContext] = None
        if tls is not None:
            self._tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self._tls.load_cert_chain(str(tls[0]), str(tls[1]))

    # --- the link graph ------------------------------------------------------------------

    def page(self, family: str, n: int) -> Page:
        return self.pages[self._by_key[family, n]]

    def links(self, page: int) -> List[Link]:
        """The links of a page, in the order its body lists them."""
        return self._links[page]

    def _build_links(self) -> None:
        ring, size = self.ring, len(self.ring)
        hidden, deep = FAMILIES["hidden"], FAMILIES["deep"]
        for i, source in enumerate(ring):
            targets = list(
                dict.fromkeys([ring[(i + 1) % size], ring[(7 * i + 3) % size], ring[(i + size // 2) % size]])
            )
            for k, target in enumerate(targets):
                for turn in range(2):  # two spellings of each link
                    self._link(source, target, 3 * k + turn + i)
            self._special(i, source, hidden, deep)
        # A page a parameter selects links to the next value, by its query alone, as pagination does.
        for family in SELECTED_BY_PARAMETER:
            for n in range(FAMILIES[family]):
                following = self._by_key[family, (n + 1) % FAMILIES[family]]
                self._link(self._by_key[family, n], following, SPELLINGS.index("relative"))
        # Pages off the ring link back into it.
        for family in ("hidden", "deep", "orphan"):
            for n in range(FAMILIES[family]):
                source = self._by_key[family, n]
                self._link(source, ring[(11 * source + 5) % size], source)
                self._link(source, ring[(13 * source + 1) % size], source + 4)

    def _link(self, source: int, target: int, turn: int) -> None:
        """Link ``source`` to ``target`` in the first spelling from ``turn`` on that applies and is
        not on the page yet."""
        written = {link.href for link in self._links[source]}
        for k in range(len(SPELLINGS)):
            href = self._spell(SPELLINGS[(turn + k) % len(SPELLINGS)], self.pages[source], self.pages[target])
            if href is not None and href not in written:
                self._links[source].append(Link(href, target))
                return
        raise AssertionError(f"no spelling from {self.pages[source]} to {self.pages[target]}")

    def _special(self, i: int, source: int, hidden: int, deep: int) -> None:
        """One link through a redirect per ring page: short links, chains, moved pages, loops."""
        page, ring, size = self.pages[source], self.ring, len(self.ring)
        kind, turn = i % 4, i // 4
        if kind == 0:  # a short link to a hidden page, in one of four spellings
            n = turn % hidden
            target = self._by_key["hidden", n]
            code = short_code(n // 2, upper_first=bool(n % 2))
            # Every third one lands on the page with tracking parameters, as link shorteners do.
            tagged = "?utm_source=shortener&utm_medium=social" if n % 3 == 1 else ""
            self.table[f"/s/{code}"] = (301 if n % 2 else 302, self.pages[target].url + tagged)
            spelled = [
                self._here(page, f"/s/{code}"),
                f"http://ZOO.example/s/{code}",
                f"{HTTP}/s/{code}?utm_source=social",
                f"http://{WWW}/s/{code}",
            ][(turn + turn // hidden) % 4]
            self._links[source].append(Link(spelled, target))
        elif kind == 1:  # a short link to a ring page (linked directly too)
            target = ring[(3 * i + 1) % size]
            # The Location in another spelling of the page: the host's case and the default port.
            location = self.pages[target].url.replace(HTTP + "/", "http://ZOO.example:80/")
            self.table[f"/s/r{i}"] = (301, location)
            self._links[source].append(Link(self._here(page, f"/s/r{i}"), target))
        elif kind == 2:  # a chain of three: to a deep page, or every third one to a ring page
            target = ring[(5 * i + 1) % size] if turn % 3 == 2 else self._by_key["deep", turn % deep]
            self.table[f"/go/{i}"] = (303 if turn % 2 else 302, f"{HTTP}/hop/{i}")
            self.table[f"/hop/{i}"] = (307, f"/jump/{i}")
            self.table[f"/jump/{i}"] = (308, self.pages[target].url)
            self._links[source].append(Link(self._here(page, f"/go/{i}"), target))
        elif i % 80 == 3:  # a loop through another URL
            self.table[f"/loop/{i}"] = (302, f"/loop/{i}/again")
            self.table[f"/loop/{i}/again"] = (307, f"/loop/{i}")
            self._links[source].append(Link(self._here(page, f"/loop/{i}"), None))
        elif i % 80 == 43:  # a loop through a slash added and removed (one canonical form)
            self.table[f"/spin/{i}"] = (301, f"/spin/{i}/")
            self.table[f"/spin/{i}/"] = (308, f"/spin/{i}")
            self._links[source].append(Link(self._here(page, f"/spin/{i}"), None))
        else:  # a moved page: a redirect to a page also linked directly, or to the linking page itself
            target = source if turn % 2 == 0 else ring[(5 * i + 2) % size]
            self.permalinks += target == source
            self.table[f"/moved/{i}"] = (307, self.pages[target].url)
            self._links[source].append(Link(self._here(page, f"/moved/{i}"), target))

    @staticmethod
    def _here(page: Page, path: str) -> str:
        """``path`` on the http site, as a link of ``page`` (absolute from an https page)."""
        return path if page.url.startswith(HTTP + "/") else HTTP + path

    def _spell(self, how: str, source: Page, target: Page) -> Optional[str]:
        """The href by which ``source`` links to ``target`` in spelling ``how``, None where it does not apply."""
        parts = urlsplit(target.url)
        path_query = parts.path + (f"?{parts.query}" if parts.query else "")
        same_origin = urlsplit(source.url).scheme == parts.scheme
        if how == "path":
            return path_query if same_origin else None
        if how == "fragment":
            return f"{target.url}#part-{target.n % 3}"
        if how == "host_case":  # the scheme's case too, and its default port
            return f"{parts.scheme.upper()}://Zoo.EXAMPLE:{_DEFAULT_PORTS[parts.scheme]}{path_query}"
        if how == "tracking":  # a redirect for news pages, ignored by the server elsewhere
            tracking = ("utm_source=zoo&utm_medium=link", f"gclid=Cj{target.n}", f"fbclid=IwAR{target.n}")
            return f"{target.url}{'&' if parts.query else '?'}{tracking[target.n % 3]}"
        if how == "relative":
            return self._relative(source.url, target.url)
        if how == "scheme_relative":
            return f"//{HOST}{path_query}" if same_origin else None
        if how == "www":
            return f"http://{WWW}{path_query}"  # to https pages: two redirects
        if how == "server_redirect":
            if target.family == "docs":
                return target.url[:-1]
            if target.family == "blog":
                return target.url + "/"
            if target.family == "news":
                return f"{target.url}?utm_campaign=spring"
            if target.family == "secure":
                return f"{HTTP}{parts.path}"
            if target.family == "tree":
                return f"{target.url}&utm_campaign=spring"
            if target.family in ("item", "search"):  # no redirect: the query in another order
                reordered = "&".join(reversed(parts.query.split("&")))
                return f"{parts.path}?{reordered}" if same_origin else None
        if how == "percent_encoded":  # the last digit escaped, as %3X
            digits = [i for i, char in enumerate(target.url) if char.isdigit()]
            if not digits:
                return None
            return f"{target.url[: digits[-1]]}%3{target.url[digits[-1]]}{target.url[digits[-1] + 1 :]}"
        return None

    @staticmethod
    def _relative(source: str, target: str) -> Optional[str]:
        """``target`` relative to ``source`` (same scheme and host), checked by resolving it."""
        s, t = urlsplit(source), urlsplit(target)
        if (s.scheme, s.netloc) != (t.scheme, t.netloc):
            return None
        if s.path == t.path:
            href = f"?{t.query}"
        else:
            href = posixpath.relpath(t.path, s.path[: s.path.rfind("/") + 1] or "/")
            href += "/" if t.path.endswith("/") else ""
            href += f"?{t.query}" if t.query else ""
        return href if urljoin(source, href) == target else None

    # --- routing -------------------------------------------------------------------------

    def route(self, url: str) -> Outcome:
        """What the server answers for an absolute URL (see the module's docstring)."""
        parts = urlsplit(url)
        scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
        try:
            port = parts.port
        except ValueError:
            return None
        if scheme not in _DEFAULT_PORTS or port not in (None, _DEFAULT_PORTS[scheme]):
            return None
        path = remove_dot_segments(unquote(parts.path) or "/")
        query = f"?{parts.query}" if parts.query else ""
        if host == WWW and scheme == "http":
            return 301, f"{HTTP}{path}{query}"
        if host != HOST:
            return None
        if scheme == "http" and path.startswith("/secure/"):
            return 301, f"{HTTPS}{path}{query}"
        params = parse_qsl(parts.query, keep_blank_values=True)
        kept = [(key, value) for key, value in params if key.lower() not in TRACKING]
        if path in self.table:
            return self.table[path] if scheme == "http" and not kept else None
        if path in self._query_paths:
            return self._query_page(scheme, path, kept, len(kept) != len(params))
        match = _PAGE_PATH.fullmatch(path)
        if match is None or kept:
            return None
        family, n, slash = match.group(1), int(match.group(2)), match.group(3)
        if (family, n) not in self._by_key or family == "item":
            return None
        page = self.pages[self._by_key[family, n]]
        if scheme != urlsplit(page.url).scheme:
            return None
        if family == "docs" and not slash:
            return 301, f"{path}/{query}"
        if family == "blog" and slash:
            return 308, f"{path[:-1]}{query}"
        if family == "news" and len(kept) != len(params):
            return 302, path
        return page.id if slash == ("/" if family == "docs" else "") else None

    def _query_page(self, scheme: str, path: str, kept: List[Tuple[str, str]], tracked: bool) -> Outcome:
        """A page its query selects (``kept``: the query but tracking parameters, in any order)."""
        page = self._by_query.get((path, frozenset(kept)))
        if scheme != "http" or page is None or len(set(kept)) != len(kept):
            return None
        if tracked and self.pages[page].family == "tree":
            return 302, f"{path}?{urlencode(kept)}"
        return page

    def follow(
        self, url: str, admit: Optional[Callable[[List[str], str], bool]] = None
    ) -> Tuple[List[str], Optional[int]]:
        """The URLs a fetch chain requests for ``url`` (following redirects, at most MAX_HOPS), and
        the page it ends on (None: a loop or a 404; HELD: a Location ``admit(chain, location)``
        refused)."""
        chain = [url]
        for _ in range(MAX_HOPS + 1):
            outcome = self.route(chain[-1])
            if not isinstance(outcome, tuple):
                return chain, outcome
            location = urljoin(chain[-1], outcome[1])
            if admit is not None and not admit(chain, location):
                return chain, HELD
            chain.append(location)
        return chain[:-1], None

    def dedup_free_crawl(self, starts: List[str]) -> ModelCrawl:
        """Crawl the link graph from ``starts`` without the network: every link followed unless its
        exact URL (fragment removed) was requested before; redirects followed up to MAX_HOPS."""
        return self.crawl_model(starts, lambda url: urldefrag(url)[0], claims_redirects=False)

    def claiming_crawl(self, starts: List[str], key: Callable[[str], str]) -> ModelCrawl:
        """Crawl the link graph from ``starts`` without the network, claiming every URL requested by
        ``key(url)`` as crawldedup's integrations do with a canonical form: a link whose key is
        claimed is not requested, and a chain ends at a redirect to a claimed key other than its own
        (a page another request holds)."""
        return self.crawl_model(starts, key, claims_redirects=True)

    def crawl_model(self, starts: List[str], key: Callable[[str], str], *, claims_redirects: bool) -> ModelCrawl:
        """A breadth-first crawl of the link graph: a link is requested (its fragment removed) unless
        its ``key`` was claimed before; each redirect's Location is claimed too when
        ``claims_redirects`` (the chain ends at one claimed by another request)."""
        crawl = ModelCrawl()
        claimed: Set[str] = set()

        def admit(chain: List[str], location: str) -> bool:
            wanted = key(location)
            if wanted in claimed and wanted not in {key(url) for url in chain}:
                return False
            claimed.add(wanted)
            return True

        queue: Deque[str] = collections.deque()
        for url in starts:
            if key(url) not in claimed:
                claimed.add(key(url))
                queue.append(urldefrag(url)[0])
        while queue:
            chain, page = self.follow(queue.popleft(), admit if claims_redirects else None)
            crawl.requests += len(chain)
            # Every response of the chain is a redirect but a page's (a loop's last, a held one's too).
            crawl.redirects += len(chain) - (page is not None and page != HELD)
            if page is None:
                crawl.loops += 1
                continue
            if page == HELD:
                crawl.dropped += 1
                continue
            crawl.fetches[page] += 1
            for link in self.links(page):
                url = urljoin(chain[-1], link.href)
                if key(url) in claimed:
                    crawl.dropped += 1
                else:
                    claimed.add(key(url))
                    queue.append(urldefrag(url)[0])
        return crawl

    def body(self, page: int) -> bytes:
        items = "".join(
            f'<li><a href="{html.escape(link.href)}">link {k}</a></li>' for k, link in enumerate(self.links(page))
        )
        this = self.pages[page]
        return (
            f'<!DOCTYPE html><html><head><title>{this.family} {this.n}</title></head><body id="top">'
            f'<h1>{this.family} {this.n}</h1><ul>{items}</ul><p><a href="#top">top</a></p></body></html>'
        ).encode()

    # --- the server ----------------------------------------------------------------------

    def _answer(self, url: str, agent: str) -> Tuple[int, bytes, Optional[str]]:
        """Route and count one request: (status, body, Location)."""
        outcome = self.route(url)
        with self._lock:
            self.requests += 1
            if outcome is None:
                self.unknown.append(url)
                return 404, b"not found", None
            if isinstance(outcome, tuple):
                self.redirected[outcome[0]] += 1
                return outcome[0], b"", outcome[1]
            self.fetches[outcome] += 1
            self.fetches_by_agent[agent] += 1
        return 200, self.body(outcome), None

    def _handler(self) -> type:
        site = self

        class Handler(LoopbackHandler):
            #: ``https://<host>`` once a CONNECT tunnel speaks TLS on this connection.
            tunnel: Optional[str] = None

            def do_CONNECT(self) -> None:
                host, _, port = self.path.rpartition(":")
                if site._tls is None or host.lower() != HOST or port != "443":
                    with site._lock:
                        site.unknown.append(f"CONNECT {self.path}")
                    self.send_html(404, b"no tunnel there")
                    return
                self.send_response(200, "Connection established")
                self.end_headers()
                try:
                    stream = site._tls.wrap_socket(self.connection, server_side=True)
                except (ssl.SSLError, OSError) as exc:
                    with site._lock:
                        site.tls_errors.append(f"{self.path}: {exc}")
                    self.close_connection = True
                    return
                with site._lock:
                    site.tunnels += 1
                self.connection = stream
                self.rfile = stream.makefile("rb", self.rbufsize)
                self.wfile = socketserver._SocketWriter(stream)  # the writer StreamRequestHandler uses
                self.tunnel = f"https://{host.lower()}"
                self.close_connection = False

            def do_GET(self) -> None:
                agent = self.headers.get("User-Agent", "")
                site._admit(agent)
                if self.tunnel is not None:
                    url = self.tunnel + self.path
                elif self.path.startswith("/"):
                    url = f"http://{self.headers.get('Host', HOST)}{self.path}"
                else:
                    url = self.path  # absolute form: a proxy request
                self.send_html(*site._answer(url, agent))

            def finish(self) -> None:
                super().finish()
                if self.tunnel is not None:
                    self.connection.close()  # the TLS socket; the server closes the plain one it knows

        return Handler


@dataclass(frozen=True)
class Certificates:
    """A certificate authority and the zoo's certificate it signed (PEM files)."""

    authority: Path
    chain: Path
    key: Path


def make_certificates(directory: Path) -> Certificates:
    """A CA and a certificate for zoo.example and www.zoo.example it signed, valid for a day.

    Clients trust the CA through ``SSL_CERT_FILE`` (OpenSSL's default verify paths) or
    ``NODE_EXTRA_CA_CERTS``; ECDSA keys keep the handshakes cheap.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "crawl zoo test CA")])
    unused = ("content_commitment", "data_encipherment", "key_agreement", "encipher_only", "decipher_only")
    usage = dict.fromkeys(unused, False)
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(digital_signature=False, key_cert_sign=True, crl_sign=True, key_encipherment=False, **usage),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, HOST)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(HOST), x509.DNSName(WWW)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(digital_signature=True, key_cert_sign=False, crl_sign=False, key_encipherment=False, **usage),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    files = Certificates(directory / "zoo-ca.pem", directory / "zoo-chain.pem", directory / "zoo-key.pem")
    files.authority.write_bytes(ca.public_bytes(pem))
    files.chain.write_bytes(leaf.public_bytes(pem) + ca.public_bytes(pem))
    files.key.write_bytes(key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return files


def describe(site_fetches: Dict[int, int], expected: Set[int]) -> Dict[str, object]:
    """The verdict of a crawl: pages missed, fetched twice or more, fetched though unreachable."""
    fetched = {page for page, count in site_fetches.items() if count}
    return {
        "missed": sorted(expected - fetched),
        "twice": {page: count for page, count in sorted(site_fetches.items()) if count > 1},
        "unexpected": sorted(fetched - expected),
    }
