"""Writes tests/data/state-policy1.bloom and state-policy1-urls.txt: a local state file made with
canonical policy 1 (digest 716e8d2d2c1c1eae), as every crawl made it before policy 2.

Run from the repository root with the Python twin: ``CRAWLDEDUP_NO_EXTENSIONS=1 python
tests/data/make_state_policy1.py``. Rerunning it must reproduce the committed files byte for byte.
"""

from __future__ import annotations

from pathlib import Path

from crawldedup import POLICY_V1, Deduplicator

HERE = Path(__file__).parent
#: Each line: a URL claimed in the file; policy 1 refuses the last ones' spellings that policy 2 reads.
URLS = [f"https://shop.example/item/{i}?id={i}" for i in range(200)] + ["http://0x7f.1/admin", "http://a.example/x\\y"]


def main() -> None:
    (HERE / "state-policy1-urls.txt").write_text("".join(f"{url}\n" for url in URLS), encoding="utf-8")
    path = HERE / "state-policy1.bloom"
    path.unlink(missing_ok=True)
    with Deduplicator(state=path, capacity=1_000, error_rate=0.01, ttl_days=0, policy=POLICY_V1) as dedup:
        assert all(dedup.claim_many(URLS))
    print(f"{path}: {path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
