"""Writes tests/data/exact-v1/: the frozen example of the exact tier's format v1.

Run from the repository root with the Python twin (the reference): ``python tests/data/make_exact_v1.py``
(or with a folder to write elsewhere). Rerunning it must reproduce the committed files byte for
byte; if it does not, the format changed. The set holds every third URL of 3,000, added in
batches of 100 with an 80-key buffer, so it has run files of several sizes and keys in its log.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from crawldedup.exact import PyExactFilter


def url(i: int) -> str:
    return f"https://shop.example/item/{i}?ref=exact-v1"


def main() -> None:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "exact-v1"
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    keys = [url(i) for i in range(0, 3_000, 3)]
    with PyExactFilter(1_000, 0.01, folder / "s.bloom", metadata=b"crawldedup exact-v1 fixture", buffer_keys=80) as s:
        for start in range(0, len(keys), 100):
            s.add_many(keys[start : start + 100])
        print(f"{folder}: {len(s)} keys in {len(s.runs())} runs")


if __name__ == "__main__":
    main()
