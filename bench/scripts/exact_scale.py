"""The exact tier at scale: an all-new fill of N fingerprints, then claims on a 90%-repeat stream.

Not part of CI (1e8 writes ~700 MB and runs for minutes; 1e9, ~6.5 GB and about half an
hour). Fingerprints are made by splitmix64 of the URL's number (the stored ones are 0 .. N-1,
so a repeat is a number below N), outside the timed calls: the figures are the set's own,
``ExactFilter.add_hashes`` on ``(h1, h2)`` rows, as a Deduplicator calls it after hashing::

    python bench/scripts/exact_scale.py --path /tmp/x.bloom --items 100000000
    python bench/scripts/exact_scale.py --path /tmp/x.bloom --items 1000000000 --repeat-batches 200

Prints ``key: value`` lines: the fill's wall and CPU ns a key (merges included), bytes on disk
a key (the Bloom filter, its stages, the tier's runs, log and manifest), RSS (anonymous and
file pages), then claims/s of the repeat stream (wall and CPU, medians and ranges of its
batches) and the pages lost (a repeat answered new, or a new one answered seen: both 0).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import sys
import time
from typing import Dict, List

import numpy as np

from crawldedup.exact import HAS_EXTENSION, ExactFilter, tier_directory


def splitmix(ids: np.ndarray) -> np.ndarray:
    x = ids.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def fingerprints(ids: np.ndarray) -> np.ndarray:
    """Distinct ``(h1, h2)`` rows for URL numbers."""
    ids = ids.astype(np.uint64)
    return np.stack([splitmix(ids), splitmix(ids ^ np.uint64(0x5DEECE66D))], axis=1)


def memory() -> Dict[str, int]:
    """RSS split into anonymous and file pages, and the peak (Linux /proc/self/status)."""
    found = {"peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
    try:
        with open("/proc/self/status") as status:
            for line in status:
                name, _, value = line.partition(":")
                if name in ("RssAnon", "RssFile"):
                    found[name] = int(value.split()[0]) * 1024
    except OSError:
        pass
    return found


def disk_bytes(path: str) -> int:
    folder, name = os.path.split(os.path.abspath(path))
    total = 0
    for entry in os.scandir(folder):
        if entry.name == name or entry.name.startswith(name + ".stage"):
            total += entry.stat().st_size
    for entry in os.scandir(tier_directory(path)):
        total += entry.stat().st_size
    return total


def fill(exact: ExactFilter, items: int, batch: int) -> None:
    wall = cpu = 0.0
    started = time.perf_counter()
    for start in range(0, items, batch):
        rows = fingerprints(np.arange(start, min(items, start + batch)))
        w, c = time.perf_counter(), time.process_time()
        new = exact.add_hashes(rows)
        wall += time.perf_counter() - w
        cpu += time.process_time() - c
        if not new.all():
            print(f"lost_in_fill: {int((~new).sum())} at batch {start // batch}", flush=True)
        if (start // batch) % 50 == 0:
            done = start + len(rows)
            sys.stderr.write(f"\rfill {done:,}/{items:,} {done / (time.perf_counter() - started) / 1e6:.2f} M/s ")
    w, c = time.perf_counter(), time.process_time()
    exact.flush()
    wall += time.perf_counter() - w
    cpu += time.process_time() - c
    sys.stderr.write("\n")
    print(f"fill_wall_ns_per_key: {wall / items * 1e9:.1f}")
    print(f"fill_cpu_ns_per_key: {cpu / items * 1e9:.1f}")


def repeats(exact: ExactFilter, items: int, batch: int, batches: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    fresh = items
    wall: List[float] = []
    cpu: List[float] = []
    lost = twice = 0
    for _ in range(batches):
        repeat = rng.random(batch) < 0.9
        ids = np.empty(batch, dtype=np.int64)
        ids[repeat] = rng.integers(0, items, int(repeat.sum()))
        new_count = int((~repeat).sum())
        ids[~repeat] = np.arange(fresh, fresh + new_count)
        fresh += new_count
        rows = fingerprints(ids)
        w, c = time.perf_counter(), time.process_time()
        new = exact.add_hashes(rows)
        wall.append(time.perf_counter() - w)
        cpu.append(time.process_time() - c)
        lost += int((~new & ~repeat).sum())
        twice += int((new & repeat).sum())
    rates = sorted(batch / w for w in wall)
    cpu_rates = sorted(batch / c for c in cpu if c > 0)
    print(f"repeat_claims_per_s_wall: median {statistics.median(rates):,.0f} range {rates[0]:,.0f}-{rates[-1]:,.0f}")
    print(f"repeat_claims_per_s_cpu: median {statistics.median(cpu_rates):,.0f}")
    print(f"repeat_pages_lost: {lost}")
    print(f"repeat_pages_won_twice: {twice}")


def main(argv: List[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", required=True, help="the exact filter to create (replaced if it exists)")
    parser.add_argument("--items", type=int, default=100_000_000)
    parser.add_argument("--capacity", type=int, help="the Bloom filter's capacity (default: --items)")
    parser.add_argument("--error-rate", type=float, default=0.01)
    parser.add_argument("--batch", type=int, default=1_000_000, help="keys per add_hashes call in the fill")
    parser.add_argument("--repeat-batch", type=int, default=10_000, help="keys per call in the repeat stream")
    parser.add_argument("--repeat-batches", type=int, default=300)
    parser.add_argument("--buffer-keys", type=int)
    args = parser.parse_args(argv)
    for leftover in (args.path, tier_directory(args.path)):
        if os.path.isdir(leftover):
            shutil.rmtree(leftover)
        elif os.path.exists(leftover):
            os.unlink(leftover)
    options = {"buffer_keys": args.buffer_keys} if args.buffer_keys else {}
    print(f"compiled: {HAS_EXTENSION}")
    print(f"items: {args.items}")
    exact = ExactFilter(args.capacity or args.items, args.error_rate, args.path, **options)
    fill(exact, args.items, args.batch)
    on_disk = disk_bytes(args.path)
    print(f"disk_bytes: {on_disk}")
    print(f"disk_bytes_per_key: {on_disk / args.items:.3f}")
    print(f"bloom_bytes_per_key: {exact.bloom.num_bits / 8 / args.items:.3f}")
    print(f"runs: {len(exact.runs())} ({', '.join(f'{run.keys:,}' for run in exact.runs())})")
    for name, value in memory().items():
        print(f"rss_{name}_bytes: {value}")
    repeats(exact, args.items, args.repeat_batch, args.repeat_batches, seed=1)
    for name, value in memory().items():
        print(f"rss_after_repeats_{name}_bytes: {value}")
    exact.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
