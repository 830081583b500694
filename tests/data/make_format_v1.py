"""Writes tests/data/format-v1.bloom and format-v1-keys.txt: the frozen example of format v1.

Run from the repository root with the Python twin (the reference): ``python tests/data/make_format_v1.py``.
Rerunning it must reproduce the committed files byte for byte; if it does not, the format changed.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from crawldedup.bloom import PyBloomFilter
from crawldedup.bloom.format import HEADER_BYTES

HERE = Path(__file__).parent
KEYS = [f"https://shop.example/item/{i}?ref=format-v1" for i in range(500)] + ["https://例え.jp/パス"]


def main() -> None:
    (HERE / "format-v1-keys.txt").write_text("".join(f"{key}\n" for key in KEYS), encoding="utf-8")
    path = HERE / "format-v1.bloom"
    with PyBloomFilter(1000, 0.01, path, overwrite=True, metadata=b"crawldedup format-v1 fixture") as bf:
        bf.add_many(KEYS)
    data = path.read_bytes()
    print(f"{path}: {len(data)} bytes, blocks sha256 {hashlib.sha256(data[HEADER_BYTES:]).hexdigest()}")


if __name__ == "__main__":
    main()
