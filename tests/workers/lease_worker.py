"""A worker that dies holding leases (run as a script by tests/test_leases.py, never imported).

Usage: lease_worker.py JSON_DEDUP_ARGS URLS_FILE DONE_FILE LEASE_SECONDS

Claims every URL of URLS_FILE (one per line) with a lease, finishes the first half with
``done``, writes the canonical URLs it finished to DONE_FILE (then DONE_FILE.ready, holding the
time just before its claims: no lease passes before that time plus LEASE_SECONDS), and waits
holding the other half until it is killed (at most 60 s).
"""

import json
import sys
import time

from crawldedup.dedup import Deduplicator


def main() -> int:
    options, urls_file, done_file, lease = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], float(sys.argv[4])
    with open(urls_file, encoding="ascii") as lines:
        urls = lines.read().split()
    dedup = Deduplicator(**options)
    leased_at = time.time()
    batch = dedup.claim_batch(urls, lease=lease)
    if not all(batch.won):
        return 3
    finished = [c for c in batch.canonical[: len(urls) // 2] if c is not None]
    if not all(dedup.done(finished)):
        return 4
    with open(done_file, "w", encoding="ascii") as out:
        out.write("\n".join(finished))
    with open(done_file + ".ready", "w", encoding="ascii") as ready:
        ready.write(repr(leased_at))
    time.sleep(60)  # holding the other half: the test kills this process with SIGKILL
    return 5


if __name__ == "__main__":
    sys.exit(main())
