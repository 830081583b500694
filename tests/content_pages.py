"""Generated news pages for the content tests and benchmarks: near-duplicates and distinct pages.

One site template (navigation, a "most read" box, ads, a comment count, a date line, tracking
scripts, a footer) around articles of a Zipf-distributed vocabulary. A *fetch* of an article
is the article's body in a template whose volatile parts are drawn anew: another fetch of the
same article is a near-duplicate, a fetch of another article on the same template is not.
Deterministic for a seed, so tests can assert on what it measures.
"""

from __future__ import annotations

import random
from typing import List, Tuple

_LETTERS = "etaoinshrdlcumwfgypbvkjxqz"


def _vocabulary(rng: random.Random, size: int) -> List[str]:
    words = set()
    while len(words) < size:
        length = rng.choice((2, 3, 3, 4, 4, 5, 5, 6, 7, 8, 9, 11))
        words.add("".join(rng.choice(_LETTERS[:12] if i % 2 else _LETTERS) for i in range(length)))
    return sorted(words)


class Site:
    """A news site: one vocabulary, one template, many articles."""

    def __init__(self, seed: int, vocabulary_size: int = 20_000) -> None:
        self.rng = random.Random(seed)
        self.vocabulary = _vocabulary(self.rng, vocabulary_size)
        self.weights = [1.0 / (rank + 1) for rank in range(vocabulary_size)]  # Zipf, s = 1
        self.sections = [self.phrase(1, 2).title() for _ in range(12)]
        self.footer = " ".join(self.sentence() for _ in range(6))

    def phrase(self, low: int, high: int) -> str:
        count = self.rng.randint(low, high)
        return " ".join(self.rng.choices(self.vocabulary, self.weights, k=count))

    def sentence(self) -> str:
        return self.phrase(6, 22).capitalize() + self.rng.choice((".", ".", ".", ",", "?", "!"))

    def article(self, min_words: int = 150, max_words: int = 1200) -> List[str]:
        """The paragraphs of a new article of ``min_words`` to ``max_words`` words."""
        target = self.rng.randint(min_words, max_words)
        paragraphs: List[str] = []
        words = 0
        while words < target:
            paragraph = " ".join(self.sentence() for _ in range(self.rng.randint(2, 6)))
            paragraphs.append(paragraph)
            words += paragraph.count(" ") + 1
        return paragraphs

    def fetch(self, title: str, paragraphs: List[str], padding_bytes: int = 0, ads_in_body: bool = False) -> str:
        """One fetch of an article: the same body, the template's volatile parts drawn anew.

        :param ads_in_body: an ad after every fourth paragraph too, not only above the article
            and in the aside (about 5% of the words change between fetches of 1,000 words).
        :param padding_bytes: at least this many bytes of inline script and style, as real
            pages carry (the text does not change; page_text must drop them).
        """
        rng = self.rng
        nav = "".join(f"<li><a href='/s/{i}'>{s}</a></li>" for i, s in enumerate(self.sections))
        trending = "".join(
            f"<li><a href='/t/{rng.randrange(10**6)}'>{self.phrase(4, 8)}</a></li>" for _ in range(rng.randint(3, 6))
        )
        most_read = "".join(f"<li>{self.phrase(5, 9)}</li>" for _ in range(5))
        # Half the ads are links, half native text ("Sponsored"), which no link rule removes.
        ads = [
            f"<div class='ad' data-slot='{rng.randrange(999)}'><a href='https://ads.example/c?{rng.randrange(10**9)}'>"
            f"{self.phrase(6, 14)}</a></div>"
            if rng.random() < 0.5
            else f"<div class='native'>Sponsored: {self.phrase(6, 14)}</div>"
            for _ in range(rng.randint(1, 3))
        ]
        latest = f"<div class='latest'>Latest comment: {self.phrase(4, 12)}</div>"
        day, hour = rng.randint(1, 28), rng.randint(0, 23)
        tracker = (
            f"<script>window.dataLayer=[{{'visit':'{rng.getrandbits(64):x}'}}];track({rng.randrange(10**6)})</script>"
        )
        state, menu = "", ""
        if padding_bytes:  # as real pages: a third inline state, two thirds markup of a mega menu
            chunk = f"var s{rng.randrange(10**6)}=" + repr(self.phrase(30, 60)) + ";\n"
            state = "<script>" + chunk * (padding_bytes // 3 // len(chunk) + 1) + "</script>"
            while len(menu) < 2 * padding_bytes // 3:
                menu += (
                    f"<li class='menu-item menu-item-{rng.randrange(9999)}'><div class='menu-card' "
                    f"data-track='nav-{rng.randrange(10**6)}'><a href='/s/{rng.randrange(10**6)}'><span "
                    f"class='menu-label'>{self.phrase(1, 3)}</span></a><img src='/i/{rng.randrange(10**6)}.webp' "
                    f"alt='' width='64' height='64' loading='lazy'></div></li>"
                )
            menu = f"<ul class='mega-menu'>{menu}</ul>"
        body = "".join(
            f"<p>{p}</p>\n" + (ads[i % len(ads)] if ads_in_body and i % 4 == 3 else "")
            for i, p in enumerate(paragraphs)
        )
        return (
            "<!DOCTYPE html><html><head><meta charset='utf-8'>"
            f"<title>{title}</title><style>.ad{{border:1px solid #{rng.randrange(4096):03x}}}</style>{tracker}{state}"
            f"</head><body><header><nav><ul>{nav}</ul>{menu}<ul class='trending'>{trending}</ul></nav></header>"
            f"<main><article><h1>{title}</h1><p class='meta'>Updated 2026-11-{day:02d} {hour:02d}:00, "
            f"{rng.randrange(5000)} comments</p>{ads[0]}{body}{latest}</article>"
            f"<aside><h2>Most read</h2><ol>{most_read}</ol>{ads[-1]}</aside></main>"
            f"<!-- served by edge {rng.randrange(99)} in {rng.random():.3f}s -->"
            f"<footer><p>{self.footer}</p></footer>{tracker}</body></html>"
        )


def corpus(
    seed: int, articles: int, fetches: int, min_words: int = 150, max_words: int = 1200, ads_in_body: bool = False
) -> List[Tuple[int, str]]:
    """``fetches`` fetches of each of ``articles`` articles, as ``(article number, html)``."""
    site = Site(seed)
    pages: List[Tuple[int, str]] = []
    for number in range(articles):
        title = site.phrase(4, 9).capitalize()
        paragraphs = site.article(min_words, max_words)
        pages.extend((number, site.fetch(title, paragraphs, ads_in_body=ads_in_body)) for _ in range(fetches))
    return pages
