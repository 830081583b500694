"""A few thousand URLs for the engines' tests: a crawl frontier's spellings (examples/frontier.py),
relative links with the page they were found on, and the inputs a canonicalizer must refuse or
take care over (empty, other schemes, non-ASCII, wrapped share links, IPv6, too long, nulls)."""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import List, Optional, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import frontier  # noqa: E402

TRICKY = [
    "",
    "   ",
    "mailto:someone@example.com",
    "javascript:void(0)",
    "#top",
    "tel:+15551234",
    "HTTP://Example.COM:80/a/./b/../c?b=2&a=1&utm_source=x#frag",
    "https://www.google.com/url?q=https%3A%2F%2Fexample.org%2Fpage%3Fa%3D1",
    "https%3A%2F%2Fexample.net%2Fwrapped%2Fpath",
    "http://Bücher.example/straße?q=café",
    "http://例え.テスト/パス",
    "http://[2001:DB8::1]:8080/x",
    "http://192.0.2.10/%7Euser/",
    "https://example.com/" + "a" * 9000,
    "https://exa mple.com/",
    "http://example.com/\u00e9\u0301",
    "ftp://example.com/file",
    "//protocol-relative.example/x",
    "https://user:pass@example.com/",
    "https://example.com/a;b?x=1;y=2",
    "https://example.com/path\\with\\backslashes",
    "https://example.com/\ttab",
    "https://xn--n3h.com/",
    "https://example.com/?",
    "https://example.com/#",
    "http://example.com:65536/",
    "http://ex%41mple.com/",
]


def engine_urls(count: int = 3000, seed: int = 37) -> List[Tuple[Optional[str], Optional[str]]]:
    """``(url, base)`` rows: ``count`` frontier links (relative ones with their page), the
    tricky inputs with and without a base, and null URLs."""
    lines: List[str] = []
    frontier.generate(count, max(1, count // 20), seed=seed, write=lines.append)
    rows: List[Tuple[Optional[str], Optional[str]]] = []
    for line in "".join(lines).split("\n"):
        if line:
            base, _, link = line.rpartition("\t")
            rows.append((link, base or None))
    rng = random.Random(seed)
    for url in TRICKY:
        rows.append((url, None))
        rows.append((url, "https://base.example/dir/page.html?x=1"))
    rows += [(None, None), (None, "https://base.example/"), ("relative/link", "not a base"), ("x", "mailto:a@b")]
    rng.shuffle(rows)
    return rows
