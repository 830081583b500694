"""Region order against batch order in the compiled filter's add, alternating A/B rounds.

A batch of at least 32 keys per MiB of a filter of 256 MiB or more sets its bits region by
region (``_bloom_c.set_bits``); the same keys in slices just under that size set them in batch
order. Each round adds a fresh batch both ways into one warm filter (every page touched
first), in an order that alternates, and the report gives the CPU ns a key this thread spent
(what a neighbour's load changes least), the wall ns, medians, ranges and the ratio::

    python bench/scripts/region_order.py                       # 1e9 keys' file in memory
    python bench/scripts/region_order.py --path /tmp/r.bloom   # the same, a file mapping
    python bench/scripts/region_order.py --capacity 200000000 --batch 100000

Not part of CI (the billion-capacity filter is 1.27 GB).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Callable, Dict, List, Tuple

import numpy as np
from billion import url_keys

from crawldedup import BloomFilter
from crawldedup.bloom import HAS_EXTENSION

#: The compiled twin's thresholds (``REGION_SHIFT``, ``REGION_MIN_KEYS``): blocks per region and
#: keys per region of the filter that a batch needs to be set region by region.
REGION_BLOCKS = 16_384
REGION_MIN_KEYS = 32


def timed(call: Callable[[], object]) -> Tuple[float, float]:
    """Return the thread's CPU seconds and the wall seconds of ``call()``."""
    cpu, wall = time.thread_time(), time.perf_counter()
    call()
    return time.thread_time() - cpu, time.perf_counter() - wall


def in_slices(add: Callable, items, size: int) -> Callable[[], None]:
    """A call adding ``items`` in slices of ``size`` (cut before it is timed)."""
    slices = [items[start : start + size] for start in range(0, len(items), size)]

    def run() -> None:
        for piece in slices:
            add(piece)

    return run


def main(argv: List[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", default=None, help="filter file (default: in memory)")
    parser.add_argument("--capacity", type=int, default=1_000_000_000)
    parser.add_argument("--batch", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args(argv)
    if not HAS_EXTENSION:
        parser.error("needs the compiled extension")
    rng = np.random.default_rng(2)
    bf = BloomFilter(args.capacity, 0.01, args.path, overwrite=True)
    regions = bf.num_blocks // REGION_BLOCKS + 1
    below = REGION_MIN_KEYS * regions - 1
    if args.batch <= below:
        parser.error(f"--batch must exceed {below:,} keys for this capacity")
    print(f"num_blocks: {bf.num_blocks}\nregions: {regions}\nbatch: {args.batch}\nbatch_order_slices: {below}")
    for _ in range(max(1, bf.num_blocks * 64 // 4096 // 100_000)):  # touch every page first
        bf.add_hashes(rng.integers(0, 2**64, size=(1_000_000, 2), dtype=np.uint64))
    results: Dict[str, List[Tuple[float, float]]] = {}
    for round_ in range(args.rounds):
        for order in ("region", "batch") if round_ % 2 else ("batch", "region"):
            size = args.batch if order == "region" else below
            hashes = rng.integers(0, 2**64, size=(args.batch, 2), dtype=np.uint64)
            results.setdefault(f"add_hashes {order}", []).append(timed(in_slices(bf.add_hashes, hashes, size)))
            keys = url_keys(0, args.batch, f"{round_}{order}")
            results.setdefault(f"add_many {order}", []).append(timed(in_slices(bf.add_many, keys, size)))
    bf.close()
    if args.path:
        os.unlink(args.path)
    for name, runs in results.items():
        cpu = [c / args.batch * 1e9 for c, _ in runs]
        wall = [w / args.batch * 1e9 for _, w in runs]
        print(
            f"{name}: cpu ns {statistics.median(cpu):.1f} ({min(cpu):.1f} to {max(cpu):.1f}), "
            f"wall ns {statistics.median(wall):.1f} ({min(wall):.1f} to {max(wall):.1f})"
        )
    for call in ("add_hashes", "add_many"):
        ratio = statistics.median(c for c, _ in results[f"{call} batch"]) / statistics.median(
            c for c, _ in results[f"{call} region"]
        )
        print(f"{call} batch/region cpu: {ratio:.2f}x")
    print(f"load_average: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
