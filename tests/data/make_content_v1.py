"""Writes tests/data/content-v1.json, index-v1.simidx and index-v1-fingerprints.txt: the frozen
examples of content fingerprint format v1 and of index file format v1.

Run from the repository root with the Python twin (the reference):
``CRAWLDEDUP_NO_EXTENSIONS=1 PYTHONPATH=src python tests/data/make_content_v1.py``. Rerunning it
must reproduce the committed files byte for byte; if it does not, a format changed.
"""

from __future__ import annotations

import json
from pathlib import Path

from crawldedup.content import DEFAULT_CONTENT_POLICY, ContentPolicy, NearDuplicateIndex, page_text, simhash

HERE = Path(__file__).parent
TEXTS = [
    "",
    "   ,.;:!? -- __ ",
    "word",
    "The quick brown fox jumps over the lazy dog.",
    "The quick brown fox jumped over the lazy dog!",
    "THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG.",
    "Straße, STRASSE und strasse: Maß für Maß; Ärger über Öl.",
    "İstanbul'da ılık bir gün; Iğdır ve İzmir.",
    "हिन्दी भाषा में लिखा गया एक वाक्य है।",
    "日本語の文章です。東京、大阪、京都。",
    "snake_case and kebab-case and CamelCase 3.14 1,000 ½ ² x² 2026-11-05 ١٢٣ ३४५",
    "emoji 😀 between 🎉 words\u00a0and\u2003spaces\ttabs\nlines",
    "Lone \ud800 surrogate and \U0001d400 math bold",
    " ".join(f"token{i % 37}" for i in range(600)),
]
PAGES = [
    "<!DOCTYPE html><html><head><title>T</title><style>p{}</style><script>var a = 'x';</script></head>"
    "<body><nav><a href='/'>Home</a></nav><p>First   paragraph<!-- hidden --> here.</p>"
    "<template><p>never</p></template><noscript>enable js</noscript><p>Sec<b>ond</b></p>"
    "<footer>Footer text</footer></body></html>",
    "plain text without markup & an &amp; entity",
    "<body><p>" + " ".join(f"word{i} <a href='/{i}'>link{i}</a>" for i in range(60)) + "</p></body>",
    "<body><ul>" + "".join(f"<li><a href='/{i}'>listing {i}</a></li>" for i in range(60)) + "</ul></body>",
    "Dates 2026-11-05 at 14:00, 1,234 comments, ١٢٣ and ३४ but x2 and ²",
]


def main() -> None:
    policies = [DEFAULT_CONTENT_POLICY, ContentPolicy(shingle_words=1), ContentPolicy(shingle_words=3)]
    document = {
        "policies": [{"shingle_words": p.shingle_words, "digest": p.digest} for p in policies],
        "texts": [{"text": text, "simhash": [f"{simhash(text, p):016x}" for p in policies]} for text in TEXTS],
        "pages": [{"html": html, "text": page_text(html)} for html in PAGES],
    }
    path = HERE / "content-v1.json"
    path.write_text(json.dumps(document, ensure_ascii=True, indent=1) + "\n", encoding="ascii")
    print(f"{path}: {len(document['texts'])} texts, {len(PAGES)} pages")
    fingerprints = [simhash(text) for text in TEXTS]
    (HERE / "index-v1-fingerprints.txt").write_text("".join(f"{f:016x}\n" for f in fingerprints), encoding="ascii")
    index_path = HERE / "index-v1.simidx"
    index_path.unlink(missing_ok=True)
    with NearDuplicateIndex(3, index_path) as index:
        index.add_many(fingerprints)
    print(f"{index_path}: {index_path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
