"""Print a realistic crawl frontier: discovered links, one per line, many spellings per page.

A crawler's frontier is mostly repeats. The same page arrives with tracking parameters
(``utm_*``, ``gclid``, ``spm``...), with its query in another order, with ``:443``, with its
host in capitals, with a ``#fragment``, percent-encoded one way or another, wrapped whole in
a share link (``https%3A%2F%2F...``), or as a relative link found on another page. A few
links are not web pages at all (``mailto:``, ``javascript:``...).

Relative links are written ``BASE<TAB>LINK``: the page the link was found on, a tab, then
the link as written. ``crawldedup filter`` reads that form (a tab can never be part of a
URL: browsers and the canonical policy remove it).

Usage::

    python examples/frontier.py --links 1000000 --pages 5000 --seed 1 > frontier.txt

The last line on stderr states the truth to compare against: how many links were printed,
how many distinct pages they name, and how many of them are not web pages. The output is
deterministic for a given seed and Python version.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
from typing import Callable, List, NamedTuple, Sequence, Tuple
from urllib.parse import quote

#: Parameters the default canonical policy drops (a sample; values are random per click).
TRACKING = (
    "utm_source",
    "utm_medium",
    "utm_campaign",
    "gclid",
    "fbclid",
    "spm",
    "ref_src",
    "msclkid",
    "_hsenc",
    "_ga",
    "mc_cid",
    "igshid",
)
FRAGMENTS = ("top", "reviews", "comments", "main", "section-2", "")
NOT_PAGES = (
    "javascript:void(0)",
    "mailto:sales@shop.example",
    "tel:+1-555-0100",
    "data:text/plain,hello",
    "http://1.2.3.4.5/cart",
    "http://forum.example.net:99999/",
    "#top",
    "",
)
#: Links per chunk written to stdout: one large write per chunk keeps output cheap.
CHUNK_LINKS = 50_000


class Page(NamedTuple):
    """One distinct page: its parts as a site would write them, and ready-made pieces."""

    scheme: str
    host: str  # as written on the site (may be non-ASCII)
    segments: Tuple[str, ...]  # path segments, unencoded (may hold non-ASCII or "~")
    path: str  # the segments joined, raw
    plain_path: bool  # no segment has a percent-encoded spelling
    query_plus: Tuple[str, ...]  # "key=value" pairs, a space written "+"
    query_pct: Tuple[str, ...]  # the same pairs, a space written "%20"


def _page(scheme: str, host: str, segments: Tuple[str, ...], query: Tuple[Tuple[str, str], ...] = ()) -> Page:
    """Build a page and the pieces that every spelling of it reuses (built once: 1M lines in ~3 s)."""
    return Page(
        scheme,
        host,
        segments,
        "/" + "/".join(segments),
        all(s.isascii() and "~" not in s for s in segments),
        tuple(f"{k}={v.replace(' ', '+')}" for k, v in query),
        tuple(f"{k}={v.replace(' ', '%20')}" for k, v in query),
    )


def _shop(n: int) -> Page:
    return _page("https", "shop.example", ("product", str(n)), (("color", "red"), ("size", "m")))


def _news(n: int) -> Page:
    return _page("https", "news.example.com", ("2024", f"{n % 12 + 1:02d}", f"story-{n}"), ())


def _forum(n: int) -> Page:
    return _page("http", "forum.example.net", ("thread", str(n)), (("page", str(n % 7 + 1)),))


def _docs(n: int) -> Page:
    return _page("https", "www.example.org", ("docs", f"v{n % 3 + 1}", f"topic-{n}"), ())


def _search(n: int) -> Page:
    return _page(
        "https", "search.example", ("search",), (("q", f"red shoes {n}"), ("page", str(n % 5 + 1)), ("sort", "price"))
    )


def _books(n: int) -> Page:
    return _page("https", "bücher.example", ("buch", f"{n}"), (("lang", "de"),))


def _wiki(n: int) -> Page:
    return _page("https", "wiki.example", ("wiki", f"Café_{n}"), ())


def _people(n: int) -> Page:
    return _page("https", "people.example", (f"~user{n}", "index.html"), ())


SITES: Sequence[Callable[[int], Page]] = (_shop, _news, _forum, _docs, _search, _books, _wiki, _people)
DEFAULT_PORTS = {"http": ":80", "https": ":443"}
_ESCAPE = re.compile("%[0-9A-F]{2}")


def make_pages(count: int) -> List[Page]:
    """Return ``count`` pages that are all distinct under the default canonical policy."""
    return [SITES[i % len(SITES)](i // len(SITES)) for i in range(count)]


def _segment(rng: random.Random, text: str) -> str:
    """Write one path segment raw, or percent-encoded with upper- or lowercase escapes."""
    if text.isascii() and "~" not in text:
        return text
    choice = rng.random()
    if choice < 0.4:
        return text
    encoded = quote(text, safe="").replace("~", "%7E")  # quote() leaves "~" raw since 3.7
    if choice < 0.6:
        return _ESCAPE.sub(lambda m: m.group().lower(), encoded)
    return encoded


def _host(rng: random.Random, host: str) -> str:
    choice = rng.random()
    if choice < 0.85:
        return host
    if choice < 0.92:
        return host.capitalize()
    if choice < 0.97:
        return host.upper()
    return host + "."  # a trailing dot names the same host


def _path(rng: random.Random, page: Page) -> str:
    path = page.path if page.plain_path else "/" + "/".join(_segment(rng, s) for s in page.segments)
    choice = rng.random()
    if choice < 0.08:
        return path + "/"
    if choice < 0.11:
        return "/./" + path[1:]
    if choice < 0.14:
        return "/x/../" + path[1:]
    return path


def _query(rng: random.Random, page: Page) -> str:
    pairs = list(page.query_plus if rng.random() < 0.5 else page.query_pct)
    if rng.random() < 0.3:
        for _ in range(1 + int(rng.random() * 3)):
            pairs.append(f"{rng.choice(TRACKING)}={rng.getrandbits(32):x}")
    if len(pairs) > 1 and rng.random() < 0.5:
        rng.shuffle(pairs)
    if not pairs:
        return "?" if rng.random() < 0.03 else ""
    return ("?&" if rng.random() < 0.02 else "?") + "&".join(pairs)


def _fragment(rng: random.Random) -> str:
    return "#" + rng.choice(FRAGMENTS) if rng.random() < 0.15 else ""


def spell(rng: random.Random, page: Page) -> str:
    """Return one line naming ``page``: absolute, wrapped, or ``BASE<TAB>relative``."""
    tail = _path(rng, page) + _query(rng, page) + _fragment(rng)
    form = rng.random()
    if form < 0.10:  # relative, found on a listing page of the same site
        depth = rng.randint(1, 3)
        base = f"{page.scheme}://{page.host}/" + "/".join(f"list{i}" for i in range(depth))
        kind = rng.random()
        if kind < 0.4:
            link = tail
        elif kind < 0.8:
            link = "../" * (depth - 1) + tail[1:]
        else:
            link = f"//{page.host}{tail}"
        return f"{base}\t{link}"
    scheme = page.scheme.upper() if rng.random() < 0.05 else page.scheme
    port = DEFAULT_PORTS[page.scheme] if rng.random() < 0.08 else ""
    url = f"{scheme}://{_host(rng, page.host)}{port}{tail}"
    if form < 0.15:  # a share link carrying the whole URL encoded
        return quote(url, safe="")
    return url


class Truth(NamedTuple):
    links: int
    pages: int
    invalid: int


def generate(links: int, pages: int, seed: int, write: Callable[[str], object]) -> Truth:
    """Write ``links`` lines through ``write`` and return what they contain.

    :param links: lines to write.
    :param pages: distinct pages to draw from (popularity follows Zipf's law, s = 1).
    :param seed: the random seed; the same seed gives the same lines.
    :param write: called with chunks of text ending in a newline.
    :returns: the number of lines, of distinct pages named, and of lines that are not pages.
    """
    rng = random.Random(seed)
    site = make_pages(pages)
    cum_weights = []
    total = 0.0
    for rank in range(1, pages + 1):
        total += 1.0 / rank
        cum_weights.append(total)
    order = list(range(pages))
    rng.shuffle(order)  # popular pages spread over every site
    seen = set()
    invalid = 0
    done = 0
    while done < links:
        n = min(CHUNK_LINKS, links - done)
        picks = rng.choices(order, cum_weights=cum_weights, k=n)
        lines = []
        for index in picks:
            if rng.random() < 0.01:
                lines.append(rng.choice(NOT_PAGES))
                invalid += 1
            else:
                lines.append(spell(rng, site[index]))
                seen.add(index)
        write("\n".join(lines) + "\n")
        done += n
    return Truth(links, len(seen), invalid)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--links", type=int, default=1_000_000, help="lines to print (default 1000000)")
    parser.add_argument("--pages", type=int, default=5000, help="distinct pages to draw from (default 5000)")
    parser.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    args = parser.parse_args(argv)
    if args.links < 0 or args.pages < 1:
        parser.error(f"--links must be >= 0 and --pages >= 1, got {args.links} and {args.pages}")
    out = sys.stdout
    try:
        truth = generate(args.links, args.pages, args.seed, out.write)
        out.flush()
    except BrokenPipeError:
        return 141
    print(
        f"frontier: {truth.links} links, {truth.pages} distinct pages, "
        f"{truth.invalid} not web pages (seed {args.seed})",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
